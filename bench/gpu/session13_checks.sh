#!/usr/bin/env bash
# Session 13 (2026-11-24) on one GPU, from the repository root, after bench/gpu/pack.sh: the
# Verlet skin of one GPU's DEM search (solver/src/dem/cuda/skin.rs, issue 13).
#   bench/gpu/session13_checks.sh first   # the skin's exactness test, cuda_parity, the main job
#                                         # with and without the skin, 1 M dense and loose
#   bench/gpu/session13_checks.sh tests   # every DEM GPU test with the skin as default, memcheck
#   bench/gpu/session13_checks.sh bench   # the main job, 1 M and 10 M records, small cases
#   bench/gpu/session13_checks.sh big     # 100 M records, memcheck with the Verlet list
# Records (dem-gpu-bench JSON lines and main_job.jsonl) and logs under $OUT.
set -uo pipefail
part=${1:-first}
export OUT=${OUT:-bench/results/raw/session13}
source "$(dirname "$0")/lib.sh" "session13_${part}"
J="$OUT/dem_gpu.jsonl"
if [[ $part == first ]]; then
  cd solver
  result cuda_parity_skin timeout 200 "$BIN/cuda_parity" skin_steps --nocapture --test-threads 1
  grep -E "searches in|interval" "$OUT/cuda_parity_skin.out" | tail -n 8
  result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  cd ..
  OUT=$OUT bash bench/gpu/main_job.sh
  grep -E "neighbour search every" "$OUT/main_job.out" | tail -n 1
  OUT=$OUT bash bench/gpu/main_job.sh --skin 0
  run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500
  run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500 --skin 0
  run bench --particles 1e6 --model linear-friction --phase loose --steps 500
  run bench --particles 1e6 --model linear-friction --phase loose --steps 500 --skin 0
fi
if [[ $part == tests ]]; then
  cd solver
  result physics_parity timeout 120 "$BIN/physics_parity"
  result cuda_pack_null_outputs timeout 120 "$BIN/cuda_pack_null_outputs" --test-threads 1
  result cuda_multi timeout 300 "$BIN/cuda_multi" --test-threads 1
  for t in impact_linear impact_hertz energy incline packing moving_geometry process_features; do
    result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 "$BIN/$t" --test-threads 1
  done
  cd ..
  result sanitizer_memcheck timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 \
    dem-gpu-bench bench --particles 20000 --model linear-friction --phase loose --steps 300 --warmup 0
  result sanitizer_racecheck timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 \
    dem-gpu-bench bench --particles 4000 --model linear-friction --phase loose --steps 100 --warmup 0
  result sanitizer_memcheck_drum timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 \
    dem-gpu-bench case --case bench/cases/drum_10k.toml --warmup 0 --steps 300
fi
if [[ $part == bench ]]; then
  # The main job twice: the first run on a fresh machine compiles the kernels (NVRTC, cached
  # for the next runs), as a user's first run does.
  OUT=$OUT bash bench/gpu/main_job.sh
  OUT=$OUT bash bench/gpu/main_job.sh
  grep -E "CUDA device|neighbour search every" "$OUT/main_job.out"
  run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500
  run bench --particles 1e6 --model hertz --phase dense --relax 1000 --steps 500
  run bench --particles 1e6 --model linear-friction --phase loose --steps 500
  run bench --particles 1e6 --model linear --phase loose --steps 500
  run bench --particles 1e6 --model linear --phase dense --relax 1000 --steps 500
  for s in drum_10k:1.0 silo_70k:0.5; do small "${s%%:*}" "${s##*:}"; done
  for m in linear-friction hertz; do
    run bench --particles 1e7 --model $m --phase dense --relax 2000 --steps 200
    run bench --particles 1e7 --model $m --phase loose --steps 300
  done
  run bench --particles 1e7 --model linear --phase dense --relax 2000 --steps 300
  run bench --particles 1e7 --model linear --phase loose --steps 500
fi
if [[ $part == big ]]; then
  for m in linear-friction hertz; do
    run bench --particles 1e8 --model $m --phase dense --relax 500 --steps 50 --warmup 5 || echo "100M $m did not run"
  done
  run bench --particles 1e8 --model linear --phase dense --relax 500 --steps 50 --warmup 5
  result sanitizer_memcheck_list timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 \
    dem-gpu-bench bench --particles 20000 --model linear-friction --phase dense --relax 200 --steps 100 --warmup 0
fi
echo "done: $part"
