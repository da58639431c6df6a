#!/usr/bin/env bash
# Issue 12 (solver core for many workers) on the GPU machine, from the repository root:
#
#   bench/gpu/core_checks.sh
#
# After the core was re-founded (coordinator, workers, stage pipeline, global grid), one GPU must
# stay as fast and f64 GPU mode bit-identical to the CPU. Runs, from gpu-carry/bins.tar.xz
# (bench/gpu/pack.sh):
#   - cuda_parity (GPU f64 vs CPU bit for bit, restarts, frame packing) and validation tests on CUDA
#   - the dem_gpu benchmark records of bench/results/dem_gpu.json (1 M and 10 M, three models,
#     publication share), as JSON lines in $OUT/dem_gpu.jsonl
#   - the solver on the built-in case at 1 M particles: the progress line shows the GPU's stage
#     times (sampled with CUDA events, one step per batch)
set -uo pipefail
source "$(dirname "$0")/lib.sh" core_checks
result() {
  local name=$1; shift
  "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  tail -n 12 "$OUT/$name.out"
  echo "RESULT $name rc=$rc"
}
echo "=== tests ==="
(cd solver && result cuda_parity "$BIN/cuda_parity" --test-threads=1 --nocapture)
for t in impact_linear energy moving_geometry; do
  (cd solver && result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda "$BIN/$t" --test-threads=1)
done
echo "=== benchmarks ==="
J="$OUT/dem_gpu.jsonl"
run() { echo "+ dem-gpu-bench $*"; dem-gpu-bench "$@" --out "$J"; }
for n in 1e6 1e7; do
  run bench --particles $n --model linear --phase loose --steps 500
  run bench --particles $n --model linear --phase dense --relax 2000 --steps 300
done
run publish --particles 1e7 --model linear --seconds 4
for m in linear-friction hertz; do
  run bench --particles 1e7 --model $m --phase loose --steps 300
  run bench --particles 1e7 --model $m --phase dense --relax 2000 --steps 200
done
echo "=== solver, built-in case, 1 M particles ==="
result solver_default solver --name-shm g1 --particles 1000000 --end-time 0.03 --progress-every 1
shmctl clean >/dev/null 2>&1
echo "done"
