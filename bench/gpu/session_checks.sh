#!/usr/bin/env bash
# Session of 2026-11-23, on the GPU machine from the repository root:
#
#   bench/gpu/session_checks.sh
#
# What changed without a device during the session, checked on one:
#   - sph_physics_parity: the SPH formulas CPU vs their CUDA twins in f64 (first NVRTC compile)
#   - physics_parity and cuda_parity: the DEM twins and the GPU f64 run after the box walls
#     became a face mask with one material column per face
#   - process_features, incline, impact_linear, moving_geometry with PARTICLE_SHM_TEST_BACKENDS=cuda
#     (face walls with their own material, the frictionless pair table, the gate schedule)
#   - two dem_gpu records to compare with bench/results/dem_gpu.json (kernel change cost)
set -uo pipefail
OUT=${OUT:-bench/results/raw/session_2026_11_23}
source "$(dirname "$0")/lib.sh" session_checks
result() {
  local name=$1; shift
  "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  tail -n 15 "$OUT/$name.out"
  echo "RESULT $name rc=$rc"
}
echo "=== tests ==="
cd solver
result sph_physics_parity "$BIN/sph_physics_parity" --nocapture
result physics_parity "$BIN/physics_parity" --nocapture
result cuda_parity "$BIN/cuda_parity" --test-threads=1 --nocapture
for t in process_features incline impact_linear moving_geometry; do
  result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda "$BIN/$t" --test-threads=1 --nocapture
done
cd ..
echo "=== benchmarks ==="
J="$OUT/dem_gpu.jsonl"
run() { echo "+ dem-gpu-bench $*"; dem-gpu-bench "$@" --out "$J"; }
run bench --particles 1e7 --model linear --phase dense --relax 2000 --steps 300
run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200
echo "done"
