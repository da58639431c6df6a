#!/usr/bin/env bash
# Session 15 (2026-11-24) on one GPU, from the repository root, after bench/gpu/pack.sh
# (issue 17: SPHERIC Test 2's P2 read as the analysis tool reads a probe; SPH cells of h).
#   bench/gpu/session15_checks.sh spheric   # sph_spheric at the default 7.5 mm (2.7 M
#                                           # particles) and at 6 mm (4.8 M), both to 0.5 s
#   bench/gpu/session15_checks.sh alpha     # the same at 7.5 mm with alpha 0.01 and 0.05
#   bench/gpu/session15_checks.sh cells     # cells of 2h / m for m = $CELLS (default 1 2): bench
#                                           # and f64 parity; the row walk against the cell walk
#   bench/gpu/session15_checks.sh sph       # the SPH suites, user path and records (cells of h)
#   bench/gpu/session15_checks.sh validate  # sph_spheric as committed (7.5 mm, to 1.0 s)
#   bench/gpu/session15_checks.sh chunk     # (dropped experiment, see its part)
#   bench/gpu/session15_checks.sh ncu       # kernel times of the 10 M step; the rates kernels
#   bench/gpu/session15_checks.sh pub       # the publication share at 1 M, again
#   bench/gpu/session15_checks.sh wall      # SPHERIC to 0.5 s with wall viscosity factors 0, 0.5
#   bench/gpu/session15_checks.sh final     # the final tree: SPH GPU suites, the 10 M record
# Logs under $OUT.
set -uo pipefail
part=${1:-spheric}
export OUT=${OUT:-bench/results/raw/session15}
source "$(dirname "$0")/lib.sh" "session15_${part}"
RESULT_PATTERN="test result|panicked|FAILED|P2:|H4 at|H2 at|particles|steps to"
RESULT_LINES=20
export PARTICLE_SHM_TEST_BACKENDS=cuda
if [[ $part == spheric ]]; then
  cd solver
  PARTICLE_SHM_SPHERIC_END=0.5 result spheric_7p5mm_to_0p5 timeout 250 "$BIN/sph_spheric" spheric_test2_dam_break --nocapture
  PARTICLE_SHM_SPHERIC_DP=0.006 PARTICLE_SHM_SPHERIC_END=0.5 result spheric_6mm_to_0p5 timeout 330 "$BIN/sph_spheric" spheric_test2_dam_break --nocapture
  cd ..
fi
if [[ $part == validate ]]; then
  cd solver
  result spheric "$BIN/sph_spheric" spheric_test2_dam_break --nocapture
  cd ..
fi
if [[ $part == alpha ]]; then
  # The artificial viscosity's effect on the arrival (DualSPHysics advises alpha = 0.01 for
  # nearly irrotational flows; its dam-break example, like dambreak.toml, uses 0.1).
  cd solver
  for a in 0.01 0.05; do
    PARTICLE_SHM_SPHERIC_ALPHA=$a PARTICLE_SHM_SPHERIC_END=0.5 result spheric_7p5mm_alpha$a timeout 250 "$BIN/sph_spheric" spheric_test2_dam_break --nocapture
  done
  cd ..
fi
if [[ $part == cells ]]; then
  # Cells of 2h / m (PARTICLE_SHM_SPH_CELLS = m; a particle walks the (2m + 1)^3 cells around
  # its own): 10 M and 1 M dam break, then the f64 parity with the CPU (sph_cuda) at m = 2, and
  # the slab suite. The raw output in raw/session15/cells_* also compared the float walk by
  # rows with a loop per cell (-DSPH_ROW_WALK=0|1), before the row walk became the only one
  # (the option is gone: ROWS only repeats the run now).
  for m in ${CELLS:-1 2}; do
    for rw in ${ROWS:-1}; do
      echo "== PARTICLE_SHM_SPH_CELLS=$m PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_ROW_WALK=$rw"
      PARTICLE_SHM_SPH_CELLS=$m PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_ROW_WALK=$rw timeout 150 sph-gpu-bench \
        --particles 1e6,1e7 --steps 100 --warmup 10 --frames 0 --out "$OUT/sph_cells.jsonl" > "$OUT/sph_cells_${m}_$rw.out" 2>&1
      grep -E "ms/step" "$OUT/sph_cells_${m}_$rw.out"
    done
  done
  [[ -n ${BENCH_ONLY:-} ]] && exit 0
  cd solver
  PARTICLE_SHM_SPH_CELLS=2 result sph_cuda_cells2 timeout 200 "$BIN/sph_cuda" --test-threads 1
  result sph_group timeout 200 "$BIN/sph_group" --test-threads 1
  cd ..
fi
if [[ $part == sph ]]; then
  # Cells of h (m = 2, the new default): the SPH GPU suites (also at m = 1), the user path,
  # the records (since run, sph_user_path reports the analysis' own exit status and
  # sph-gpu-bench measures publication against the steps before and after the frames).
  sph_suites
  (cd solver && PARTICLE_SHM_SPH_CELLS=1 result sph_cuda_cells1 timeout 200 "$BIN/sph_cuda" --test-threads 1)
  sph_user_path
  RESULT_PATTERN="ms/step" sph_records
fi
if [[ $part == chunk ]]; then
  # EXPERIMENT, dropped: the float walk tests SPH_CHUNK candidates, then runs the pair code for
  # those inside the support (the same pairs in the same order). The option existed only in
  # commit 0d0f27c (reverted after it: 10 M 31.65 ms/step one at a time, 38.2 / 41.3 / 53.4
  # with chunks of 2 / 4 / 8; raw/session15/chunk_dropped/); on later builds every run here is
  # the same code.
  for k in ${CHUNKS:-1 4 8 2}; do
    echo "== PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_CHUNK=$k"
    PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_CHUNK=$k timeout 150 sph-gpu-bench --particles 1e6,1e7 --steps 100 \
      --warmup 10 --frames 0 --out "$OUT/sph_chunk_$k.jsonl" > "$OUT/sph_chunk_$k.out" 2>&1
    grep -E "ms/step" "$OUT/sph_chunk_$k.out"
    python3 -c "import json,sys; [print(r['particles'], repr(r['sim_time_s'])) for r in map(json.loads, open(sys.argv[1]))]" "$OUT/sph_chunk_$k.jsonl"
  done
fi
if [[ $part == ncu ]]; then
  # Where an SPH step's time goes now (cells of h), 10 M dam break: every kernel's duration
  # over 4 steps after 30 (ncu_summary.py), then the rates kernels' profile.
  NCU=/opt/nvidia/nsight-compute/2025.3.1/ncu
  $NCU --clock-control none --cache-control none --launch-skip 600 --launch-count 120 --csv --page raw \
    --metrics gpu__time_duration.sum sph-gpu-bench --particles 1e7 --steps 8 --warmup 30 --frames 0 \
    > "$OUT/ncu_times.csv" 2> "$OUT/ncu_times.err"
  python3 bench/gpu/ncu_summary.py "$OUT/ncu_times.csv"
  $NCU --clock-control none --cache-control none --kernel-name regex:sph_rates \
    --launch-skip 40 --launch-count 2 --section SpeedOfLight --section LaunchStats --section Occupancy \
    --section WarpStateStats --section InstructionStats \
    --metrics smsp__thread_inst_executed_per_inst_executed.ratio,gpu__time_duration.sum \
    sph-gpu-bench --particles 1e6 --steps 10 --warmup 20 --frames 0 > "$OUT/ncu_rates.txt" 2>&1
  grep -E "sph_rates|Duration|Registers Per|Achieved Occupancy|Avg. Active Threads|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|Executed Instructions  |thread_inst" \
    "$OUT/ncu_rates.txt" | head -40
fi
if [[ $part == pub ]]; then
  # The publication share at 1 M (2.2 % in part sph, 0.02 % in session 8): three runs with
  # cells of h, one with cells of 2h (raw/session15/pub: the frames against the steps before
  # them; pub_bracketed: since sph-gpu-bench compares them with the mean of the steps before
  # and after).
  for m in 2 2 2 1; do
    echo "== PARTICLE_SHM_SPH_CELLS=$m"
    PARTICLE_SHM_SPH_CELLS=$m timeout 100 sph-gpu-bench --particles 1e6 --steps 200 --warmup 20 --frames 5 \
      --out "$OUT/sph_pub.jsonl" 2>&1 | grep -E "ms/step"
  done
fi
if [[ $part == wall ]]; then
  # The artificial viscosity between fluid and walls (viscosity_boundary_factor, alpha 0.1):
  # SPHERIC Test 2 to 0.5 s with factors 0 and 0.5; the f64 parity with a factor of 0.5.
  cd solver
  result sph_cuda timeout 200 "$BIN/sph_cuda" --test-threads 1
  for f in 0.0 0.5; do
    PARTICLE_SHM_SPHERIC_BOUNDARY_FACTOR=$f PARTICLE_SHM_SPHERIC_END=0.5 result spheric_7p5mm_wall$f timeout 250 "$BIN/sph_spheric" spheric_test2_dam_break --nocapture
  done
  cd ..
fi
# By hand after part wall (raw/session15/wall/spheric_7p5mm_wall0_to_1s.out), from the
# repository root on the GPU machine:
#   source bench/gpu/lib.sh wall_full; cd solver; PARTICLE_SHM_TEST_BACKENDS=cuda \
#     PARTICLE_SHM_SPHERIC_BOUNDARY_FACTOR=0 $BIN/sph_spheric spheric_test2_dam_break --nocapture
if [[ $part == final ]]; then
  # The final tree: the SPH GPU suites and the 10 M record once more.
  sph_suites
  sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 --frames 5 --out "$OUT/sph_gpu_final.jsonl" | grep ms/step
fi
