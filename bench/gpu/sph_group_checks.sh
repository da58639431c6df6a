#!/usr/bin/env bash
# Issue 18 on a GPU machine, from the repository root: bench/gpu/sph_group_checks.sh [part]
#   part "tests": SPH on several slabs against one GPU (sph_group.rs: bits, frames, checkpoints;
#     slabs on one device when there is one GPU), the one-GPU SPH tests (sph_cuda.rs), and the
#     user path: dambreak.toml with --devices on two slabs, VTK output, a checkpoint, a restart on
#     one GPU, analysis reading the segment.
#   part "bench DEVICES": sph-gpu-bench at $SIZES (default 10 M and 20 M) particles on one GPU and on DEVICES
#     (e.g. 0,1), balancing off and on.
set -uo pipefail
part=${1:-tests}
devices=${2:-0,0}
source "$(dirname "$0")/lib.sh" "sph_group_checks_$part"
result() { local name=$1; shift; "$@"; echo "RESULT $name rc=$?"; }
case $part in
tests)
  result sph_group "$BIN/sph_group" --nocapture --test-threads 1
  result sph_cuda "$BIN/sph_cuda" --nocapture --test-threads 1
  d=$(mktemp -d)
  result user_run timeout 300 solver --backend cuda --devices "$devices" --case solver/cases/dambreak.toml \
    --end-time 0.3 --name-shm sph1 --keep-shm --output "$d" --output-every 0.1 --checkpoint-every 0.15 \
    --progress-every 5
  ls "$d" | head -20
  analysis --attach sph1 --once --json --gauge 2.638,0.5 | cut -c1-400
  echo "RESULT analysis rc=$?"
  shmctl clean >/dev/null 2>&1; rm -f /dev/shm/sph1
  ck=$(ls "$d"/checkpoint*.bin 2>/dev/null | head -1)
  result restart_one_gpu timeout 300 solver --backend cuda --restart "$ck" --end-time 0.35 --progress-every 5
  rm -rf "$d"
  ;;
bench)
  result bench timeout 580 sph-gpu-bench --particles ${SIZES:-1e7,2e7} --steps 100 --warmup 10 --frames 0 \
    --devices "$devices" --out "$OUT/sph_group.jsonl"
  ;;
esac
