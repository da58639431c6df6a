#!/usr/bin/env bash
# Session 42 (2026-12-03) on one GPU (only nvidia-h200 was lent). From the repository root,
# after PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session42_checks.sh variants  # the float walk's instructions per candidate: the
#                                           # row's y/z offsets kept (SPH_ROW_KEEP), the row's
#                                           # two x-blocks as two segments (SPH_ROW_SPLIT), 48
#                                           # registers (SPH_RATES_MIN_BLOCKS=10) and their
#                                           # combinations, each one's registers, spills and
#                                           # rates SASS, 1 M and 10 M Verlet twice (the second
#                                           # round in reverse order); the dam break's final
#                                           # checkpoint under each variant against the base's
#                                           # bytes (the same sums, so the same bits)
#                                           # (ran on the session's first build; after it the
#                                           # kept offsets became sph_row_offset, the others
#                                           # were dropped: the macros are gone)
#   bench/gpu/session42_checks.sh ptr       # the walk through an advancing pointer
#                                           # (-DSPH_PTR_WALK=1) against the index, twice, its
#                                           # SASS and its checkpoint's bytes
#   OPTS="..." bench/gpu/session42_checks.sh checks   # the SPH suites and the user path with
#                                           # PARTICLE_SHM_NVRTC_OPTIONS=$OPTS; the Nsight
#                                           # Compute breakdown of a 10 M Verlet step
#   OPTS="..." bench/gpu/session42_checks.sh records  # the records with $OPTS
#   OPTS="..." bench/gpu/session42_checks.sh spheric  # SPHERIC Test 2 to 2.0 s (symplectic)
#   (overlap and priority ran on builds with raw/session42/overlap/pack_beside_the_steps.patch,
#   reverted after them: no gain, then a loss)
#   bench/gpu/session42_checks.sh overlap   # the frame packed on the copy stream beside the next
#                                           # step: sph_cuda (with the test of every frame
#                                           # against its step's state), sph_group, the user
#                                           # path; the publication share at 1 M, 10 M and
#                                           # 100 M (twice)
#   bench/gpu/session42_checks.sh priority  # the same with the steps' stream at the highest
#                                           # priority: the frames test, 100 M, 1 M and 10 M
#                                           # with frames (the session's last device minutes)
#   bench/gpu/session42_checks.sh publish   # the publication share with the bench's last frame
#                                           # dropped (its copy was waited for with nothing to
#                                           # overlap): 1 M and 10 M, 100 M twice; sph_pack's
#                                           # duration at 10 M and 100 M (Nsight Compute)
#
# Logs $OUT/session42_<part>.log, *.out; records $OUT/sph42.jsonl; one archive of it all.
set -uo pipefail
part=${1:-variants}
export OUT=${OUT:-bench/results/raw/session42}
source "$(dirname "$0")/lib.sh" "session42_${part}"
budget=${BUDGET:-560}
J="$OUT/sph42.jsonl"
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|ms/step|impact|H4|H2|P2|peak|front"
RESULT_LINES=30
NCU=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
declare -A V=(
  [base]=""
  [mb10]="-DSPH_RATES_MIN_BLOCKS=10"
  [keep]="-DSPH_ROW_KEEP=1"
  [split]="-DSPH_ROW_SPLIT=1"
  [keepsplit]="-DSPH_ROW_KEEP=1 -DSPH_ROW_SPLIT=1"
  [keepsplit10]="-DSPH_ROW_KEEP=1 -DSPH_ROW_SPLIT=1 -DSPH_RATES_MIN_BLOCKS=10"
)
ORDER=(base mb10 keep split keepsplit keepsplit10)
bench() {  # bench NAME OPTIONS: the Verlet dam break at 1 M and 10 M
  echo "== $1: ${2:-(none)}"
  PARTICLE_SHM_NVRTC_OPTIONS="$2" timeout 150 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 0 --integrator verlet --out "$J" 2>&1 | grep -E "ms/step|rror|arning"
}
sass() {  # sass NAME OPTIONS: the module's registers, spills and SASS under OPTIONS
  export XDG_CACHE_HOME=/tmp/sass42_$1 && rm -rf "$XDG_CACHE_HOME"
  PARTICLE_SHM_NVRTC_OPTIONS="$2" timeout 60 sph-gpu-bench --particles 1e6 --steps 5 --warmup 1 \
    --frames 0 --integrator verlet > "$OUT/sass_run_$1.out" 2>&1
  python3 bench/gpu/cubin_extract.py "$XDG_CACHE_HOME/particle-shm/kernels" "/tmp/cubins42_$1" > /dev/null
  for f in /tmp/cubins42_"$1"/*.cubin; do
    if "$CUOBJ" -sass "$f" | grep -q "Function : sph_rates_fluid"; then
      "$CUOBJ" -res-usage "$f" > "$OUT/res_$1.txt" 2>&1
      "$CUOBJ" -sass "$f" | gzip > "$OUT/sph_module_$1.sass.gz"
    fi
  done
  echo "-- $1 registers:"; grep -A1 -E "sph_rates_fluid|sph_rates_bound" "$OUT/res_$1.txt" | grep REG
  unset XDG_CACHE_HOME
}
bits() {  # bits NAME OPTIONS: the shipped dam break to 0.3 s, its final checkpoint against base's
  local d=/tmp/bits42_$1 && rm -rf "$d" && mkdir -p "$d"
  PARTICLE_SHM_NVRTC_OPTIONS="$2" timeout 120 solver --backend cuda --case solver/cases/dambreak.toml \
    --end-time 0.3 --name-shm "bits42$1" --output "$d" --checkpoint-every 0.3 > "$OUT/bits_$1.out" 2>&1
  if cmp -s "$d/checkpoint.bin" /tmp/bits42_base/checkpoint.bin; then
    echo "BITS $1: identical to base"
  else
    echo "BITS $1: DIFFERENT from base"
  fi
}
case $part in
ptr)
  sass base ""
  sass ptr "-DSPH_PTR_WALK=1"
  for round in 1 2; do
    bench "base_$round" ""
    bench "ptr_$round" "-DSPH_PTR_WALK=1"
  done
  bits base ""
  bits ptr "-DSPH_PTR_WALK=1"
  ;;
variants)
  # Each variant's module (registers, spills, the rates kernels' SASS), then 1 M and 10 M in one
  # order and the reverse, then the shipped dam break to 0.3 s (1,067 steps, float mode): the
  # same sums give the same checkpoint bytes.
  for v in "${ORDER[@]}"; do sass "$v" "${V[$v]}"; done
  for v in "${ORDER[@]}"; do bench "${v}_1" "${V[$v]}"; done
  for ((k = ${#ORDER[@]} - 1; k >= 0; k--)); do v=${ORDER[$k]}; bench "${v}_2" "${V[$v]}"; done
  for v in "${ORDER[@]}"; do bits "$v" "${V[$v]}"; done
  ;;
checks)
  export PARTICLE_SHM_NVRTC_OPTIONS="${OPTS:-}"
  echo "options: ${PARTICLE_SHM_NVRTC_OPTIONS:-(none)}"
  item 110 sph_suites
  item 60 sph_user_path
  $NCU --clock-control none --cache-control none --launch-skip 400 --launch-count 60 --csv --page raw \
    --metrics gpu__time_duration.sum sph-gpu-bench --particles 1e7 --steps 8 --warmup 40 --frames 0 \
    --integrator verlet > "$OUT/ncu_times.csv" 2> "$OUT/ncu_times.err"
  python3 bench/gpu/ncu_summary.py "$OUT/ncu_times.csv"
  ;;
records)
  export PARTICLE_SHM_NVRTC_OPTIONS="${OPTS:-}"
  echo "options: ${PARTICLE_SHM_NVRTC_OPTIONS:-(none)}"
  item 60 result bench_frames timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --integrator verlet --out "$J"
  item 40 result bench_symplectic timeout 150 sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 \
    --frames 0 --out "$J"
  item 100 result bench_100m timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 \
    --integrator verlet --out "$J"
  ;;
overlap)
  item 110 sph_suites
  item 30 sph_user_path
  item 60 result overlap_frames timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --integrator verlet --out "$J"
  for round in 1 2; do
    item 60 result "overlap_100m_$round" timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 \
      --frames 2 --integrator verlet --out "$J"
  done
  item 40 result overlap_symplectic timeout 150 sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 \
    --frames 5 --out "$J"
  ;;
priority)
  (cd solver && item 60 result frames_test timeout 120 "$BIN/sph_cuda" frames_p --nocapture)
  item 60 result priority_100m timeout 100 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 \
    --frames 2 --integrator verlet --out "$J"
  item 40 result priority_frames timeout 60 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --integrator verlet --out "$J"
  ;;
publish)
  item 60 result publish_frames timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --integrator verlet --out "$J"
  for round in 1 2; do
    item 60 result "publish_100m_$round" timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 \
      --frames 2 --integrator verlet --out "$J"
  done
  for n in 1e7 1e8; do
    $NCU --clock-control none --cache-control none --kernel-name sph_pack --launch-count 3 --csv --page raw \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum sph-gpu-bench \
      --particles $n --steps 2 --warmup 1 --frames 1 --integrator verlet > "$OUT/ncu_pack_$n.csv" 2> "$OUT/ncu_pack_$n.err"
    python3 bench/gpu/ncu_summary.py "$OUT/ncu_pack_$n.csv"
    grep -o '"sph_pack".*' "$OUT/ncu_pack_$n.csv" | head -3 | cut -c1-400
  done
  ;;
spheric)
  export PARTICLE_SHM_NVRTC_OPTIONS="${OPTS:-}"
  echo "options: ${PARTICLE_SHM_NVRTC_OPTIONS:-(none)}"
  (cd solver && item 480 result spheric_symplectic env PARTICLE_SHM_TEST_BACKENDS=cuda \
    PARTICLE_SHM_SPHERIC_END=2.0 timeout 500 "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session42 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session42_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session42_$part.tgz" "$OUT/"
