#!/usr/bin/env bash
# One history buffer updated in place (issue 13, session 11) on one GPU, from the repository
# root, after bench/gpu/pack.sh here:
#   bench/gpu/session11_checks.sh tests   # parity (f64 bits against the CPU, springs included),
#                                         # groups on one GPU, CUDA validation, memcheck
#   bench/gpu/session11_checks.sh bench   # 10 M / 1 M records, main job, lab-scale cases, the
#                                         # largest frictional run
# The frictional history is kept in two buffers when the case fits with them, else in one
# updated in place (the collide stages each particle's old row in shared memory and writes the
# new one over it; rows never move, a permutation over the slots): both are checked.
set -uo pipefail
what=${1:-tests}
export OUT=${OUT:-bench/results/raw/session11}
source "$(dirname "$0")/lib.sh" "session11_$what"
J="$OUT/dem_gpu.jsonl"
run() { echo "+ dem-gpu-bench $*"; dem-gpu-bench "$@" --out "$J" 2>&1 | grep -v "^ *[a-z_.0-9]*: [0-9.]* B/particle" | tail -n 4; }

if [[ $what == tests ]]; then
  cd solver
  result cuda_parity "$BIN/cuda_parity" --test-threads=1 --nocapture
  result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads=1
  # The same with the one-buffer history that large cases get.
  result cuda_parity_in_place env PARTICLE_SHM_TEST_HISTORY=in-place "$BIN/cuda_parity" --test-threads=1
  result cuda_multi_in_place env PARTICLE_SHM_TEST_HISTORY=in-place timeout 200 "$BIN/cuda_multi" --test-threads=1
  for t in energy moving_geometry impact_linear incline packing process_features; do
    result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda "$BIN/$t" --test-threads=1
  done
  for t in energy moving_geometry incline; do
    result "validate_${t}_in_place" env PARTICLE_SHM_TEST_BACKENDS=cuda PARTICLE_SHM_TEST_HISTORY=in-place "$BIN/$t" --test-threads=1
  done
  cd ..
  result memcheck_dense compute-sanitizer --tool memcheck --error-exitcode 3 \
    dem-gpu-bench bench --particles 20000 --model linear-friction --phase dense --relax 0 --warmup 2 --steps 10 --history in-place
  result memcheck_drum compute-sanitizer --tool memcheck --error-exitcode 3 \
    dem-gpu-bench case --case bench/cases/drum_10k.toml --warmup 0 --steps 300
fi

if [[ $what == bench ]]; then
  for m in linear-friction hertz; do
    run bench --particles 1e7 --model $m --phase dense --relax 2000 --steps 200
  done
  run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200 --history in-place
  run bench --particles 1e7 --model linear-friction --phase loose --steps 300 --history in-place
  OUT=$OUT bash bench/gpu/main_job.sh
  for c in drum_10k:1.0 silo_70k:0.5; do
    name=${c%%:*}; t=${c##*:}
    echo "+ solver --case bench/cases/$name.toml --backend cuda --end-time $t --name-shm $name"
    "$BIN/solver" --case bench/cases/$name.toml --backend cuda --end-time $t --name-shm $name > "$OUT/small_$name.out" 2>&1
    tail -n 1 "$OUT/small_$name.out"
  done
  # The largest frictional run: two history buffers do not fit, auto keeps one (about 395 B
  # per particle; 78.7 GiB free: about 190 M).
  run bench --particles 1.85e8 --model linear-friction --phase loose --steps 20 --warmup 2 || echo "185M with friction did not run"
fi
echo "done: $what"
