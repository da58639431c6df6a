#!/usr/bin/env bash
# Session 16 (2026-11-24) on one GPU, from the repository root, after bench/gpu/pack.sh
# (issue 17: the SPH cell walk skips the cells beyond the support).
#   bench/gpu/session16_checks.sh trim    # 1 M and 10 M dam break with cells of 2h / m for
#                                         # m = $CELLS (default 2 3 1), the f64 parity (sph_cuda)
#                                         # at m = 2 and 3, the slab suite
#   bench/gpu/session16_checks.sh m3      # cells of 2h/3 the default: m = 3 and 4 benched, the SPH
#                                         # suites, the records (1 M, 10 M, 100 M)
#   bench/gpu/session16_checks.sh validate  # sph_spheric as committed (7.5 mm, to 1.0 s), the user
#                                           # path
#   bench/gpu/session16_checks.sh buffer  # EXPERIMENT, dropped: the pair buffer, SPH_BUFFER = $BUFS
#                                         # (default 8 0 4 16) at 1 M and 10 M, the SPH suites
#                                         # (the option existed only in commit dba26c1, reverted
#                                         # after it: on later builds every run is the same code)
#   bench/gpu/session16_checks.sh final   # the final tree: the SPH GPU suites and the SPH
#                                         # validation tests on the GPU
#   bench/gpu/session16_checks.sh mesh    # the moving mesh's next bins made ahead on a thread
#                                         # (first run: page-locked uploads, dropped): the
#                                         # drum and the silo as users run them, alternating
#                                         # with the build before it (gpu-carry/solver_old,
#                                         # carried beside bins.tar.xz), three times each; the
#                                         # DEM parity and moving-geometry tests; memcheck
# Logs under $OUT.
set -uo pipefail
part=${1:-trim}
export OUT=${OUT:-bench/results/raw/session16}
source "$(dirname "$0")/lib.sh" "session16_${part}"
RESULT_PATTERN="test result|panicked|FAILED|P2:|H4 at|H2 at|particles|steps to|ERROR SUMMARY"
RESULT_LINES=20
export PARTICLE_SHM_TEST_BACKENDS=cuda
if [[ $part == trim ]]; then
  for m in ${CELLS:-2 3 1}; do
    echo "== PARTICLE_SHM_SPH_CELLS=$m"
    PARTICLE_SHM_SPH_CELLS=$m timeout 150 sph-gpu-bench --particles 1e6,1e7 --steps 100 --warmup 10 \
      --frames 0 --out "$OUT/sph_trim.jsonl" > "$OUT/sph_trim_$m.out" 2>&1
    grep -E "ms/step" "$OUT/sph_trim_$m.out"
  done
  [[ -n ${BENCH_ONLY:-} ]] && exit 0
  cd solver
  result sph_cuda_cells2 timeout 200 "$BIN/sph_cuda" --test-threads 1
  PARTICLE_SHM_SPH_CELLS=3 result sph_cuda_cells3 timeout 200 "$BIN/sph_cuda" --test-threads 1
  result sph_group timeout 200 "$BIN/sph_group" --test-threads 1
  cd ..
fi
if [[ $part == m3 ]]; then
  for m in 3 4; do
    echo "== PARTICLE_SHM_SPH_CELLS=$m"
    PARTICLE_SHM_SPH_CELLS=$m timeout 150 sph-gpu-bench --particles 1e6,1e7 --steps 100 --warmup 10 \
      --frames 0 --out "$OUT/sph_trim.jsonl" > "$OUT/sph_trim_$m.out" 2>&1
    grep -E "ms/step" "$OUT/sph_trim_$m.out"
  done
  sph_suites
  RESULT_PATTERN="ms/step" sph_records
fi
if [[ $part == validate ]]; then
  (cd solver && result spheric "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  sph_user_path
fi
if [[ $part == buffer ]]; then
  for b in ${BUFS:-8 0 4 16}; do
    echo "== PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_BUFFER=$b"
    PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_BUFFER=$b timeout 150 sph-gpu-bench --particles 1e6,1e7 --steps 100 \
      --warmup 10 --frames 0 --out "$OUT/sph_buffer.jsonl" > "$OUT/sph_buffer_$b.out" 2>&1
    grep -E "ms/step|error|Error" "$OUT/sph_buffer_$b.out" | head -5
  done
  [[ -n ${BENCH_ONLY:-} ]] && exit 0
  sph_suites
fi
if [[ $part == final ]]; then
  sph_suites
  (cd solver && result sph_validation timeout 400 "$BIN/sph_validation" --test-threads 1)
fi
if [[ $part == mesh ]]; then
  old=$PWD/gpu-carry/solver_old
  for i in 1 2 3; do
    for s in drum_10k:1.0 silo_70k:0.5; do
      name=${s%%:*} t=${s##*:}
      echo "+ (build before) solver --case bench/cases/$name.toml --backend cuda --end-time $t"
      "$old" --case "bench/cases/$name.toml" --backend cuda --end-time "$t" --name-shm "old_$name" 2>&1 | grep finished
      small "$name" "$t"
    done
  done
  cd solver
  result cuda_parity timeout 400 "$BIN/cuda_parity" --test-threads 1
  result moving_geometry timeout 300 "$BIN/moving_geometry" --test-threads 1
  cd ..
  result memcheck_drum timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 \
    dem-gpu-bench case --case bench/cases/drum_10k.toml --warmup 0 --steps 300
fi
