#!/usr/bin/env bash
# Issue 14 on one GPU, from the repository root (after bench/gpu/pack.sh here):
#   bench/gpu/exchange_profile.sh
# 1. The tests of the paths that upload and download contact history and of the exchange
#    (cuda_multi on two slabs of GPU 0, cuda_parity: checkpoints, restarts, groups started from
#    a run's state; two validation tests on the group).
# 2. Nsight Compute kernel times of one GPU and of two slabs on it (--devices 0,0) at 50 M
#    particles, dense linear: what the group adds per step (classify, the dead slots' hash) and
#    what the sort costs per slab. Summary in $OUT/exchange_profile.txt (bench/gpu/ncu_summary.py).
set -uo pipefail
export OUT=${OUT:-bench/results/raw/exchange_profile}
source "$(dirname "$0")/lib.sh" exchange_profile
NCU=/opt/nvidia/nsight-compute/2025.3.1/ncu
(cd solver && timeout 200 "$BIN/cuda_multi" --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED" ; echo "RESULT cuda_multi")
(cd solver && timeout 120 "$BIN/cuda_parity" --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED"; echo "RESULT cuda_parity")
for t in impact_linear energy; do
  (cd solver && PARTICLE_SHM_TEST_BACKENDS=cuda2 timeout 120 "$BIN/$t" --test-threads=1 2>&1 | grep -E "test result|panicked"; echo "RESULT validate2_$t")
done
timeout 400 $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum \
  --csv --print-units base --page raw \
  dem-gpu-bench multi --particles 5e7 --model linear --phase dense --relax 0 --warmup 2 --steps 6 \
  --devices 0,0 > "$OUT/ncu_multi.csv" 2> "$OUT/ncu_multi.err"
echo "RESULT ncu rc=$?"
python3 bench/gpu/ncu_summary.py "$OUT/ncu_multi.csv" dem_classify | tee "$OUT/exchange_profile.txt"
