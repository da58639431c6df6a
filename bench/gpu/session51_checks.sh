#!/usr/bin/env bash
# Session 51 (2026-12-05) on one H100, the first lent since session 16. From the repository
# root, after bash bench/gpu/pack.sh (and the build before the trim stripped to
# gpu-carry/sph-gpu-bench-skip):
#
#   bench/gpu/session51_checks.sh checks    # the SPH suites that compare the GPU's f64 bits
#                                           # with the CPU (sph_cuda, sph_group, the physics
#                                           # twins) on this build, whose mDBC ghost walk is cut
#                                           # to the support (session 49's trim); the dam break
#                                           # with mDBC against the build with the ghost skip
#                                           # alone, alternated; the SPH user path
#   bench/gpu/session51_checks.sh records   # issue 17's records on the H100: the dam break at
#                                           # 1 M, 10 M and 100 M with frames (Verlet, then the
#                                           # symplectic default), and the 300 M run the issue's
#                                           # 250 B/particle is for: the bench, then the solver
#                                           # itself with a segment, as a user starts it
#   bench/gpu/session51_checks.sh publish100  # the 100 M record's publication share, twice more
#   bench/gpu/session51_checks.sh logs      # the start log's segment size and SPH device memory
#
# Logs $OUT/session51_<part>.log; one archive of it all.
set -uo pipefail
part=${1:-checks}
export OUT=${OUT:-bench/results/raw/session51}
source "$(dirname "$0")/lib.sh" "session51_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|B/particle \(|ms/step|rror"
RESULT_LINES=30
case $part in
checks)
  pushd solver >/dev/null || exit
  item 150 result sph_cuda timeout 250 "$BIN/sph_cuda" --test-threads 1
  item 120 result sph_group timeout 250 "$BIN/sph_group" --test-threads 1
  item 30 result sph_physics_parity timeout 100 "$BIN/sph_physics_parity"
  popd >/dev/null || exit
  cp gpu-carry/sph-gpu-bench-skip "$BIN/"
  for integ in verlet symplectic; do
    for b in skip trim trim skip; do
      exe=$BIN/sph-gpu-bench; [ $b = skip ] && exe=$BIN/sph-gpu-bench-skip
      echo "+ $b: sph-gpu-bench --particles 1e6,1e7 --steps 100 --warmup 10 --frames 0 --boundary mdbc --integrator $integ"
      item 25 timeout 120 "$exe" --particles 1e6,1e7 --steps 100 --warmup 10 --frames 0 --boundary mdbc \
        --integrator $integ --out "$OUT/trim_${integ}_$b.jsonl" 2>&1 | grep -E "ms/step|SKIPPED" | cut -c1-220
    done
  done
  item 30 sph_user_path
  ;;
records)
  # The headline records first, the 300 M run next, the rest as the budget allows.
  J=$OUT/sph_gpu.jsonl
  item 30 result verlet_1m_10m timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 --frames 5 \
    --integrator verlet --out "$J"
  item 30 result symplectic_1m_10m timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --out "$J"
  item 100 result bench_300m timeout 300 sph-gpu-bench --particles 3e8 --steps 5 --warmup 2 --frames 0 \
    --integrator verlet --out "$OUT/sph_largest.jsonl"
  grep -E "^total|CUDA device" "$OUT/bench_300m.out" | tail -n 3
  item 45 result verlet_100m timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 \
    --integrator verlet --out "$J"
  item 50 result symplectic_100m timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 \
    --out "$J"
  df -h /dev/shm; free -g | head -2
  # The solver itself at the same size, as a user starts it: the shipped dam break at the 300 M
  # run's spacing, frames of positions, pressure and kind in a segment (20 B a particle a slot).
  item 150 result solver_300m /usr/bin/time -v timeout 300 solver --case solver/cases/dambreak.toml \
    --backend cuda --spacing 0.00134 --end-time 0.0001 --fields pos,pressure --name-shm s300 \
    --progress-every 5
  grep -E "particles|B/particle|segment|GiB|steps/s|Maximum resident|Elapsed|rror" "$OUT/solver_300m.out" | cut -c1-240 | tail -n 25
  rm -f /dev/shm/s300*
  ;;
logs)
  # The start log's new lines on a GPU: the segment's size, and the device memory of one GPU
  # and of a group of two slabs; then the SPH user path on this build.
  for devs in 0 0,0; do
    timeout 120 solver --case solver/cases/dambreak.toml --backend cuda --devices $devs --end-time 0.01 \
      --name-shm lg51 --progress-every 5 2>&1 | grep -E "segment|SPH on|finished|rror" | cut -c1-240
    echo "RESULT logs_$devs rc=${PIPESTATUS[0]}"
  done
  item 30 sph_user_path
  ;;
publish100)
  # The 100 M publication share again (the records' one run read 2.24 %; four on the H200
  # 1.72-1.76 %): two more runs of the same command.
  for i in 1 2; do
    item 45 result "verlet_100m_$i" timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 \
      --frames 2 --integrator verlet --out "$OUT/sph_gpu_publish100.jsonl"
  done
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session51 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session51_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session51_$part.tgz" "$OUT/"
