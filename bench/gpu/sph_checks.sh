#!/usr/bin/env bash
# Issue 17 on a GPU machine, from the repository root: bench/gpu/sph_checks.sh [part]
#   part "tests" (default first): the SPH GPU tests (f64 parity with the CPU reference, checkpoints
#     across backends, f32 collapse), the SPH and DEM physics twins, the DEM parity suite (the
#     shared scan moved to cells.cu), and the user path: dambreak.toml on the GPU with VTK output,
#     a checkpoint, a restart on the GPU, and analysis reading the segment;
#   part "bench": sph-gpu-bench at 1 M and 10 M particles (200 timed steps) and 100 M (20);
#   part "spheric": the SPHERIC Test 2 validation at 2.7 M particles (sph_spheric.rs).
set -uo pipefail
part=${1:-tests}
source "$(dirname "$0")/lib.sh" "sph_checks_$part"
result() { local name=$1; shift; "$@"; echo "RESULT $name rc=$?"; }
case $part in
tests)
  result sph_cuda "$BIN/sph_cuda" --nocapture --test-threads 1
  result sph_physics_parity "$BIN/sph_physics_parity" --nocapture
  result physics_parity "$BIN/physics_parity"
  result cuda_parity "$BIN/cuda_parity"
  sph_user_path
  ;;
bench)
  sph_records
  ;;
spheric)
  PARTICLE_SHM_TEST_BACKENDS=cuda result spheric "$BIN/sph_spheric" --nocapture
  ;;
esac
