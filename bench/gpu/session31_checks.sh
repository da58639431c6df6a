#!/usr/bin/env bash
# Session 31 (2026-12-02) on one GPU (only nvidia-h200 was lent): mDBC, the modified dynamic
# boundary conditions of English et al. (2022), on the GPU. From the repository root, after
# PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session31_checks.sh mdbc     # the SPH GPU suites (f64 parity with the CPU, mDBC and
#                                          # mDBC with moving solids included; the physics twins,
#                                          # the ghost node's formulas included), free sloshing
#                                          # with DBC and mDBC (sph_sloshing gpu), and the cost of
#                                          # mDBC on the 10 M dam break (sph-gpu-bench)
#   bench/gpu/session31_checks.sh spheric  # SPHERIC Test 2 with mDBC walls at dp = 7.5 mm to 1.0 s
#                                          # and at 6 mm to 0.5 s (the impact)
#   bench/gpu/session31_checks.sh spheric05 # the same at 7.5 mm to 0.5 s only (the first run
#                                          # to 1.0 s ran out of time), with steps and wall time
#                                          # printed, and the step's cost at 2.7 M with both walls
#
# Logs $OUT/session31_<part>.log, *.out.
set -uo pipefail
part=${1:-mdbc}
export OUT=${OUT:-bench/results/raw/session31}
source "$(dirname "$0")/lib.sh" "session31_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="SLOSH|identical|bits|random cases|P2|H4|H2|particles|test result|panicked|FAILED|SPH dam break"
RESULT_LINES=40
case $part in
mdbc)
  item 60 sph_suites
  (cd solver && item 260 result sph_sloshing env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 420 \
    "$BIN/sph_sloshing" gpu --nocapture)
  item 90 result bench_dbc timeout 150 sph-gpu-bench --particles 1e7 --steps 100 --warmup 20 \
    --frames 0 --boundary dbc --out "$OUT/sph_gpu.jsonl"
  item 90 result bench_mdbc timeout 150 sph-gpu-bench --particles 1e7 --steps 100 --warmup 20 \
    --frames 0 --boundary mdbc --out "$OUT/sph_gpu.jsonl"
  ;;
spheric)
  (cd solver && item 230 result spheric_mdbc_7p5mm env PARTICLE_SHM_TEST_BACKENDS=cuda \
    PARTICLE_SHM_SPHERIC_BOUNDARY=mdbc PARTICLE_SHM_SPHERIC_END=1.0 timeout 300 \
    "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  (cd solver && item 290 result spheric_mdbc_6mm env PARTICLE_SHM_TEST_BACKENDS=cuda \
    PARTICLE_SHM_SPHERIC_BOUNDARY=mdbc PARTICLE_SHM_SPHERIC_DP=0.006 PARTICLE_SHM_SPHERIC_END=0.5 \
    timeout 320 "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  ;;
spheric05)
  (cd solver && item 300 result spheric_mdbc_7p5mm_05 env PARTICLE_SHM_TEST_BACKENDS=cuda \
    PARTICLE_SHM_SPHERIC_BOUNDARY=mdbc PARTICLE_SHM_SPHERIC_END=0.5 timeout 330 \
    "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  item 40 result bench_3m_dbc timeout 60 sph-gpu-bench --particles 2.7e6 --steps 200 --warmup 20 \
    --frames 0 --boundary dbc --out "$OUT/sph_gpu.jsonl"
  item 40 result bench_3m_mdbc timeout 60 sph-gpu-bench --particles 2.7e6 --steps 200 --warmup 20 \
    --frames 0 --boundary mdbc --out "$OUT/sph_gpu.jsonl"
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session31 $part done in $SECONDS s"
