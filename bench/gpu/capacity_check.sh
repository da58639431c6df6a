#!/usr/bin/env bash
# Issue 14 on one GPU, from the repository root (after bench/gpu/pack.sh here):
#   bench/gpu/capacity_check.sh
# A group whose second slab cannot hold every particle (two slabs of one H100 at 70 M frictional
# particles: the first takes room for all, the second gets what is left), with balancing by
# count: the report shows each GPU's room, the run goes on; plus cuda_multi (bounds that move).
set -uo pipefail
export OUT=${OUT:-bench/results/raw/capacity_check}
source "$(dirname "$0")/lib.sh" capacity_check
(cd solver && timeout 200 "$BIN/cuda_multi" --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"; echo "RESULT cuda_multi")
timeout 300 dem-gpu-bench multi --particles 7e7 --model linear-friction --phase loose --steps 64 \
  --warmup 2 --devices 0,0 --balance count --out "$OUT/capacity.jsonl"
echo "RESULT multi rc=$?"
