#!/usr/bin/env bash
# Issue 20 on a GPU machine, from the repository root: bench/gpu/flow_checks.sh
# The shipped silo (inflow fill, a gate opening at 0.8 s, an outflow region) run as a user runs
# it on one GPU, with analysis reading the kept segment afterwards.
set -uo pipefail
OUT=${OUT:-bench/results/raw}
mkdir -p "$OUT"
BIN=/tmp/pshm-bin
rm -rf "$BIN" && mkdir -p "$BIN" && tar -xJf gpu-carry/bins.tar.xz -C "$BIN"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=$BIN:$PATH
exec > >(tee -a "$OUT/flow_checks.log") 2>&1
timeout 400 solver --backend cuda --case solver/cases/silo.toml --end-time 1.2 --name-shm silo1 \
  --keep-shm --progress-every 5
echo "RESULT silo_gpu rc=$?"
analysis --attach silo1 --once --json --metrics particle_count,removed_count,removed_mass | cut -c1-400
shmctl clean >/dev/null 2>&1; rm -f /dev/shm/silo1
