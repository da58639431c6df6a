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
  d=$(mktemp -d)
  result user_run timeout 300 solver --backend cuda --case solver/cases/dambreak.toml --end-time 0.3 \
    --name-shm sph1 --keep-shm --output "$d" --output-every 0.1 --checkpoint-every 0.15 --progress-every 5
  ls "$d" | head -20
  analysis --attach sph1 --once --json --gauge 2.638,0.5 --probe 0.8445,0.471,0.061 | cut -c1-600
  echo "RESULT analysis rc=$?"
  shmctl clean >/dev/null 2>&1; rm -f /dev/shm/sph1
  ck=$(ls "$d"/checkpoint*.bin 2>/dev/null | head -1)
  result restart timeout 300 solver --backend cuda --restart "$ck" --end-time 0.35 --progress-every 5
  rm -rf "$d"
  ;;
bench)
  result bench_1m_10m timeout 280 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 --frames 5 \
    --out "$OUT/sph_gpu.jsonl"
  result bench_100m timeout 280 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 \
    --out "$OUT/sph_gpu.jsonl"
  ;;
spheric)
  PARTICLE_SHM_TEST_BACKENDS=cuda result spheric "$BIN/sph_spheric" --nocapture
  ;;
esac
