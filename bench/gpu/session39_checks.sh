#!/usr/bin/env bash
# Session 39 (2026-12-03) on one GPU (only nvidia-h200 was lent). From the repository root,
# after PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session39_checks.sh chord    # the SPH rows cut to the support's chord (each cell's
#                                          # particles in x order, new): the dam break at 1 M and
#                                          # 10 M, Verlet, with the
#                                          # cut and without it (-DSPH_CHORD=0, the same build),
#                                          # alternating twice; cells of h and h/2 with the cut;
#                                          # and the symplectic default at 10 M
#   bench/gpu/session39_checks.sh ncu      # a Verlet step's kernels at 10 M; the fluid rates with
#                                          # and without the cut (instructions, active threads)
#   bench/gpu/session39_checks.sh variants # the walk's latency variants (NVRTC options), then
#                                          # the Verlet test over GPU ranks alone
#   bench/gpu/session39_checks.sh final    # the shipped walk against it without the register
#                                          # bound, the suites, records with frames (1 M, 10 M,
#                                          # 100 M), the Verlet test over GPU ranks
#   bench/gpu/session39_checks.sh checks   # the SPH suites (f64 parity with the CPU in the new
#                                          # order, slabs, twins), then the SPH tests over GPU
#                                          # ranks (mDBC, moving solids, Verlet)
#   bench/gpu/session39_checks.sh more     # SPHERIC Test 2 at 7.5 mm to 2.0 s (Verlet), the
#                                          # user path (dambreak.toml, analysis, restart), 100 M
#                                          # and 1 M / 10 M with frames (publication)
#
# Logs $OUT/session39_<part>.log, *.out; records $OUT/sph_chord.jsonl.
set -uo pipefail
part=${1:-chord}
export OUT=${OUT:-bench/results/raw/session39}
source "$(dirname "$0")/lib.sh" "session39_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|ms/step|impact|H4|H2|P2|peak"
RESULT_LINES=30
J="$OUT/sph_chord.jsonl"
case $part in
chord)
  for round in 1 2; do
    item 40 result "bench_chord_$round" timeout 150 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
      --frames 0 --integrator verlet --out "$J"
    item 40 result "bench_nochord_$round" env PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_CHORD=0 timeout 150 \
      sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 --frames 0 --integrator verlet --out "$J"
  done
  # Cells of h and of h/2 with the cut (the cut leaves fewer candidates for coarser cells).
  for m in 2 4; do
    item 40 result "bench_chord_m$m" env PARTICLE_SHM_SPH_CELLS=$m timeout 150 sph-gpu-bench --particles 1e6,1e7 \
      --steps 200 --warmup 20 --frames 0 --integrator verlet --out "$J"
  done
  item 40 result bench_symplectic timeout 150 sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 \
    --frames 0 --out "$J"
  item 40 result bench_symplectic_nochord env PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_CHORD=0 timeout 150 \
    sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 --frames 0 --out "$J"
  ;;
checks)
  item 200 sph_suites
  (cd solver && item 120 result mpi_ranks_sph env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 240 \
    "$BIN/mpi_ranks" over_ranks --nocapture --test-threads 1)
  ;;
more)
  [[ ${SPHERIC:-1} == 1 ]] && (cd solver && item 220 result spheric_verlet env PARTICLE_SHM_TEST_BACKENDS=cuda \
    PARTICLE_SHM_SPHERIC_INTEGRATOR=verlet PARTICLE_SHM_SPHERIC_END=2.0 timeout 300 \
    "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  item 60 sph_user_path
  item 60 result bench_frames timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --integrator verlet --out "$J"
  item 100 result bench_100m timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 \
    --integrator verlet --out "$J"
  ;;
variants)
  # The walk's latency (ncu: 11.5 cycles per issued instruction at 57 % occupancy with the cut):
  # the candidate's velocity and pressure loaded with its position, the next position
  # prefetched, and a register cap, alternating twice (the same build, NVRTC options). The
  # prefetch switch (SPH_PREFETCH) was removed after this run (slower); commit 145cb7a has it.
  for round in 1 2; do
    for v in "" "-DSPH_KIN_EARLY=1" "-DSPH_PREFETCH=1" "-DSPH_KIN_EARLY=1 -DSPH_PREFETCH=1" \
      "--maxrregcount=40" "-DSPH_KIN_EARLY=1 --maxrregcount=40"; do
      echo "== round $round: PARTICLE_SHM_NVRTC_OPTIONS='$v'"
      PARTICLE_SHM_NVRTC_OPTIONS="$v" timeout 100 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
        --frames 0 --integrator verlet --out "$J" 2>&1 | grep -E "ms/step|rror"
    done
  done
  # The fluid rates' machine code as shipped (for counting the pair code's instructions): a
  # fresh cache, one run, then every cached module's SASS of sph_rates_fluid.
  export XDG_CACHE_HOME=/tmp/sass39 && rm -rf /tmp/sass39
  timeout 60 sph-gpu-bench --particles 1e6 --steps 5 --warmup 1 --frames 0 --integrator verlet > /dev/null 2>&1
  CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
  for f in /tmp/sass39/particle-shm/kernels/*; do
    "$CUOBJ" -sass -fun sph_rates_fluid "$f" 2>/dev/null
  done | gzip > "$OUT/sass_rates_fluid.txt.gz"
  echo "SASS lines: $(zcat "$OUT/sass_rates_fluid.txt.gz" | wc -l)"
  unset XDG_CACHE_HOME
  (cd solver && item 200 result mpi_ranks_verlet env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 \
    "$BIN/mpi_ranks" verlet --nocapture --test-threads 1)
  ;;
final)
  # The shipped walk (the cut, the candidate's kinematics loaded early, the rates kernels bound
  # to 40 registers) against the same build without the register bound, alternating twice; the
  # suites; the Verlet test over GPU ranks; the records with frames at 1 M, 10 M and 100 M.
  for round in 1 2; do
    for v in "" "-DSPH_RATES_UNBOUNDED"; do
      echo "== round $round: PARTICLE_SHM_NVRTC_OPTIONS='$v'"
      PARTICLE_SHM_NVRTC_OPTIONS="$v" timeout 100 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
        --frames 0 --integrator verlet --out "$J" 2>&1 | grep -E "ms/step|rror"
    done
  done
  item 40 result bench_symplectic timeout 150 sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 \
    --frames 0 --out "$J"
  item 110 sph_suites
  item 15 result bench_frames timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --integrator verlet --out "$J"
  item 40 result bench_100m timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 \
    --integrator verlet --out "$J"
  (cd solver && item 150 result mpi_ranks_verlet env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 150 \
    "$BIN/mpi_ranks" verlet --nocapture --test-threads 1)
  ;;
ncu)
  # Where a Verlet step's time goes at 10 M (every kernel's duration over 4 steps after 40),
  # then the fluid rates kernel with and without the cut: instructions and active threads.
  NCU=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
  $NCU --clock-control none --cache-control none --launch-skip 400 --launch-count 60 --csv --page raw \
    --metrics gpu__time_duration.sum sph-gpu-bench --particles 1e7 --steps 8 --warmup 40 --frames 0 \
    --integrator verlet > "$OUT/ncu_times.csv" 2> "$OUT/ncu_times.err"
  python3 bench/gpu/ncu_summary.py "$OUT/ncu_times.csv"
  for v in 1 0; do
    PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_CHORD=$v $NCU --clock-control none --cache-control none \
      --kernel-name regex:sph_rates_fluid --launch-skip 24 --launch-count 1 --section SpeedOfLight \
      --section LaunchStats --section Occupancy --section WarpStateStats --section InstructionStats \
      --metrics smsp__thread_inst_executed_per_inst_executed.ratio,gpu__time_duration.sum,smsp__inst_executed.sum,smsp__thread_inst_executed.sum \
      sph-gpu-bench --particles 1e7 --steps 10 --warmup 20 --frames 0 --integrator verlet > "$OUT/ncu_rates_chord$v.txt" 2>&1
    echo "== SPH_CHORD=$v"
    grep -E "Duration|Registers Per|Achieved Occupancy|Avg. Active Threads|Warp Cycles Per Issued|Compute \(SM\) Throughput|Executed Instructions  |thread_inst|inst_executed|Issue Slots Busy" \
      "$OUT/ncu_rates_chord$v.txt" | head -24
  done
  # The update kernels (the step's streaming part).
  $NCU --clock-control none --kernel-name regex:"sph_verlet|sph_bound_verlet|sph_gather" --launch-skip 20 \
    --launch-count 4 --section SpeedOfLight --section LaunchStats \
    sph-gpu-bench --particles 1e7 --steps 10 --warmup 20 --frames 0 --integrator verlet > "$OUT/ncu_update.txt" 2>&1
  grep -E "^  sph_|Duration|DRAM Throughput|Memory Throughput|Registers Per|Grid Size" "$OUT/ncu_update.txt" | head -40
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session39 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session39_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session39_$part.tgz" "$OUT/"
