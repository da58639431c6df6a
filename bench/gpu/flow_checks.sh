#!/usr/bin/env bash
# Issue 20 on a GPU machine, from the repository root: bench/gpu/flow_checks.sh [part]
#   part "silo" (default): the shipped silo (inflow fill, a gate opening at 0.8 s, an outflow
#     region) run as a user runs it on one GPU, with analysis reading the kept segment afterwards;
#   part "resume": the silo killed on the GPU after the gate opened, resumed with --load-shm on
#     the GPU (the removed counters go on, the inflow is not restarted), analysis on the result.
set -uo pipefail
part=${1:-silo}
source "$(dirname "$0")/lib.sh" "flow_checks_$part"
case $part in
silo)
  timeout 400 solver --backend cuda --case solver/cases/silo.toml --end-time 1.2 --name-shm silo1 \
    --keep-shm --progress-every 5
  echo "RESULT silo_gpu rc=$?"
  analysis --attach silo1 --once --json --metrics particle_count,removed_count,removed_mass | cut -c1-400
  shmctl clean >/dev/null 2>&1; rm -f /dev/shm/silo1
  ;;
resume)
  rm -f /dev/shm/silo2
  solver --backend cuda --case solver/cases/silo.toml --end-time 2.0 --name-shm silo2 --progress-every 0.1 \
    2> "$OUT/flow_resume_first.err" &
  pid=$!
  # Until the gate has opened and particles are being removed.
  for _ in $(seq 1 600); do
    sleep 0.1
    t=$(shmctl info silo2 --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("sim_time") or 0)' 2>/dev/null)
    python3 -c "import sys; sys.exit(0 if float('${t:-0}') > 1.0 else 1)" && break
  done
  kill -9 $pid; wait $pid 2>/dev/null
  echo "killed at: $(shmctl info silo2 --json | cut -c1-300)"
  grep -E "removed" "$OUT/flow_resume_first.err" | tail -2
  timeout 300 solver --load-shm silo2 --backend cuda --end-time 1.3 --keep-shm --progress-every 0.1 2>&1 \
    | grep -E "resuming|removed|finished|error" | tail -6
  echo "RESULT resume_gpu rc=${PIPESTATUS[0]}"
  analysis --attach silo2 --once --json --metrics particle_count,removed_count,removed_mass | cut -c1-400
  shmctl clean >/dev/null 2>&1; rm -f /dev/shm/silo2
  ;;
esac
