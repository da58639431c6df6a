#!/usr/bin/env bash
# Session 41 (2026-12-03) on one GPU (only nvidia-h200 was lent). From the repository root,
# after PACK_MPI=1 bash bench/gpu/pack.sh, with session 40's sph-gpu-bench (the build of
# 5797526) carried as gpu-carry/old-sph-gpu-bench.xz:
#
#   bench/gpu/session41_checks.sh ab       # the update inside the rates kernels (float mode)
#                                          # and the gather's loads before its stores, against
#                                          # session 40's build: Verlet 1 M and 10 M alternating
#                                          # twice, the symplectic default at 10 M; the new
#                                          # build's kernels in a 10 M Verlet step (Nsight
#                                          # Compute) and its registers and spills
#   bench/gpu/session41_checks.sh checks   # the SPH suites, the user path, SPHERIC Test 2 to
#                                          # 2.0 s (Verlet), the SPH tests over GPU ranks
#   bench/gpu/session41_checks.sh records  # the Verlet test over GPU ranks alone; the rates
#                                          # kernels without their register bound, A/B twice;
#                                          # the records: 1 M and 10 M with frames, 100 M, the
#                                          # symplectic default at 10 M
#   bench/gpu/session41_checks.sh spheric  # SPHERIC Test 2 to 2.0 s with the symplectic default
#
# Logs $OUT/session41_<part>.log, *.out; records $OUT/sph41.jsonl; one archive of it all.
set -uo pipefail
part=${1:-ab}
export OUT=${OUT:-bench/results/raw/session41}
source "$(dirname "$0")/lib.sh" "session41_${part}"
budget=${BUDGET:-560}
J="$OUT/sph41.jsonl"
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|ms/step|impact|H4|H2|P2|peak|front"
RESULT_LINES=30
NCU=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
OLD=/tmp/old-sph-gpu-bench
bench() {  # bench NAME BINARY [ARGS...]: the Verlet dam break at 1 M and 10 M
  local name=$1 bin=$2; shift 2
  echo "== $name: $bin"
  timeout 150 "$bin" --particles 1e6,1e7 --steps 200 --warmup 20 --frames 0 --integrator verlet \
    --out "$J" "$@" 2>&1 | grep -E "ms/step|rror|arning"
}
case $part in
ab)
  xz -dc gpu-carry/old-sph-gpu-bench.xz > "$OLD" && chmod +x "$OLD"
  for round in 1 2; do
    bench "old_$round" "$OLD"
    bench "new_$round" sph-gpu-bench
  done
  for b in "$OLD" sph-gpu-bench; do
    echo "== symplectic 10 M: $b"
    timeout 120 "$b" --particles 1e7 --steps 200 --warmup 20 --frames 0 --out "$J" 2>&1 | grep -E "ms/step|rror"
  done
  # The new module's registers and spills (the update inside the register-bound rates kernel).
  export XDG_CACHE_HOME=/tmp/sass41 && rm -rf /tmp/sass41
  timeout 60 sph-gpu-bench --particles 1e6 --steps 5 --warmup 1 --frames 0 --integrator verlet \
    > "$OUT/sass_run.out" 2>&1
  python3 bench/gpu/cubin_extract.py /tmp/sass41/particle-shm/kernels /tmp/cubins41
  for f in /tmp/cubins41/*.cubin; do
    if "$CUOBJ" -sass "$f" | grep -q "Function : sph_rates_fluid"; then
      "$CUOBJ" -res-usage "$f" > "$OUT/sph_module.res" 2>&1
      "$CUOBJ" -sass "$f" | gzip > "$OUT/sph_module.sass.gz"
    fi
  done
  grep -A1 -E "sph_rates_fluid|sph_rates_bound|sph_gather" "$OUT/sph_module.res"
  unset XDG_CACHE_HOME
  # Where a 10 M Verlet step goes now (every kernel's duration over 4 steps after 40).
  $NCU --clock-control none --cache-control none --launch-skip 400 --launch-count 60 --csv --page raw \
    --metrics gpu__time_duration.sum sph-gpu-bench --particles 1e7 --steps 8 --warmup 40 --frames 0 \
    --integrator verlet > "$OUT/ncu_times.csv" 2> "$OUT/ncu_times.err"
  python3 bench/gpu/ncu_summary.py "$OUT/ncu_times.csv"
  ;;
checks)
  # The suites (f64 parity with the CPU, slabs, twins; float with both integrators), the user
  # path, SPHERIC Test 2 at 7.5 mm to 2.0 s (Verlet), the SPH tests over GPU ranks.
  item 110 sph_suites
  item 60 sph_user_path
  (cd solver && item 220 result spheric_verlet env PARTICLE_SHM_TEST_BACKENDS=cuda \
    PARTICLE_SHM_SPHERIC_INTEGRATOR=verlet PARTICLE_SHM_SPHERIC_END=2.0 timeout 300 \
    "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  (cd solver && item 100 result mpi_ranks_sph env PARTICLE_SHM_TEST_BACKENDS=cuda \
    timeout $((budget - SECONDS)) "$BIN/mpi_ranks" over_ranks --nocapture --test-threads 1)
  ;;
records)
  # The Verlet test over GPU ranks alone (it ran out of the shared budget in `checks`); the
  # rates kernels without their register bound (the update inside them adds live values), A/B
  # twice; the records.
  (cd solver && item 100 result mpi_ranks_verlet env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 \
    "$BIN/mpi_ranks" verlet --nocapture --test-threads 1)
  for round in 1 2; do
    bench "bounded_$round" sph-gpu-bench
    PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_RATES_UNBOUNDED bench "unbounded_$round" sph-gpu-bench
  done
  item 60 result bench_frames timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --integrator verlet --out "$J"
  item 100 result bench_100m timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 \
    --integrator verlet --out "$J"
  item 40 result bench_symplectic timeout 150 sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 \
    --frames 0 --out "$J"
  ;;
spheric)
  # SPHERIC Test 2 with the shipped case's symplectic default to 2.0 s: the predictor and the
  # corrector now update inside the rates kernels.
  (cd solver && item 480 result spheric_symplectic env PARTICLE_SHM_TEST_BACKENDS=cuda \
    PARTICLE_SHM_SPHERIC_END=2.0 timeout 500 "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session41 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session41_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session41_$part.tgz" "$OUT/"
