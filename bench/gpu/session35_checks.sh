#!/usr/bin/env bash
# Session 35 (2026-12-02) on one GPU (only nvidia-h200 was lent): issue 13's spill rows behind
# pairs-once rows (`--hist-spill E`, `solver --gpu-memory compact` = rows of 6 and spill rows of
# 6). From the repository root, after bash bench/gpu/pack.sh:
#
#   bench/gpu/session35_checks.sh first    # cuda_parity's spill test (f64 bits of the CPU, rows
#                                          # grown mid-run, a clear error when too few) and the
#                                          # tests around it; 10 M dense beds with spill rows;
#                                          # the README's main job with --gpu-memory compact
#   bench/gpu/session35_checks.sh orders   # the dense bed with its ids in raster order and
#                                          # shuffled (bench --ids), the rows each needs; the
#                                          # main job with compact rows of 8 and spill rows of 5
#   bench/gpu/session35_checks.sh final    # after the first step's spill count: the spill test,
#                                          # the shuffled bed with spill rows, the main job with
#                                          # compact rows, the whole of cuda_parity
#   bench/gpu/session35_checks.sh check    # the last build: the spill test (with a restart),
#                                          # the main job with --gpu-memory compact
#   bench/gpu/session35_checks.sh moves    # the history moved with the slots at each search:
#                                          # cuda_parity on one copy, the shuffled and raster
#                                          # beds, the compact main job
#   bench/gpu/session35_checks.sh largest  # 400 M frictional particles in raster order with
#                                          # rows of 6
#
# Logs $OUT/session35_<part>.log, *.out; records $OUT/dem_gpu.jsonl.
set -uo pipefail
part=${1:-first}
export OUT=${OUT:-bench/results/raw/session35}
source "$(dirname "$0")/lib.sh" "session35_${part}"
budget=${BUDGET:-560}
J="$OUT/dem_gpu.jsonl"
RESULT_PATTERN="identical|bits|spill|B/particle|test result|panicked|FAILED|steps/s"
RESULT_LINES=30
case $part in
first)
  (cd solver && item 120 result cuda_parity_spill timeout 250 "$BIN/cuda_parity" --test-threads 1 --nocapture \
    spill_rows collide_variants one_state_copy)
  # The compact preset's rows on the 10 M bed, then narrower spill rows and shorter rows.
  dense --history pairs --hist-cap 6 --hist-spill 6 --copies 1
  dense --history pairs --hist-cap 6 --hist-spill 4 --copies 1
  dense --history pairs --hist-cap 5 --hist-spill 6 --copies 1
  # The main command with the compact layout, as a user runs it (built-in case, 1 M, 1 s).
  main_compact
  ;;
orders)
  # The first part showed the cell-by-cell bed's sites keep 5 or 7 pairs (the rows of 6 spilled
  # for half the particles at once). The bed in raster order (6 everywhere) and shuffled (ids
  # unrelated to positions, as poured), with the rows each needs.
  (cd solver && item 60 result cuda_parity_spill timeout 200 "$BIN/cuda_parity" --test-threads 1 --nocapture spill_rows)
  dense --ids raster --history pairs --hist-cap 6 --copies 1
  dense --ids random --history pairs --hist-cap 8 --hist-spill 5 --copies 1
  dense --ids random --history pairs --hist-cap 7 --hist-spill 6 --copies 1
  dense --ids random --history pairs --hist-cap 12 --copies 1
  dense --ids raster --history in-place --copies 1
  main_compact
  ;;
final)
  # After the first step's spill count (dem_spill_count sizes the spill rows before any
  # contact could find none): the spill test, the shuffled bed with spill rows, the main job
  # with compact rows, then the whole of cuda_parity.
  (cd solver && item 60 result cuda_parity_spill timeout 200 "$BIN/cuda_parity" --test-threads 1 --nocapture spill_rows)
  dense --ids random --history pairs --hist-cap 8 --hist-spill 5 --copies 1
  dense --ids random --history pairs --hist-cap 7 --hist-spill 6 --copies 1
  main_compact
  (cd solver && item 150 result cuda_parity timeout 220 "$BIN/cuda_parity" --test-threads 1)
  ;;
check)
  # The last build: compact = rows of 6 and spill rows of 6 from one per 32 slots; the spill
  # test with a restart; the main job as a user runs it with --gpu-memory compact.
  (cd solver && item 60 result cuda_parity_spill timeout 200 "$BIN/cuda_parity" --test-threads 1 --nocapture spill_rows)
  main_compact
  ;;
moves)
  # The history moved with the slots at each search (one copy, slot-major): every test of
  # cuda_parity on one copy, the shuffled and the raster bed, the main job with compact.
  (cd solver && item 80 result cuda_parity_one env PARTICLE_SHM_TEST_COPIES=1 timeout 200 \
    "$BIN/cuda_parity" --test-threads 1 --nocapture)
  dense --ids random --history pairs --hist-cap 8 --hist-spill 5 --copies 1
  dense --ids raster --history pairs --hist-cap 6 --copies 1
  main_compact
  ;;
largest)
  # 400 M frictional particles in raster order with rows of 6 and one copy (76.8 GB at
  # 192 B: an 80 GB H100 would hold it); then the whole of cuda_parity.
  item 330 run bench --particles 4e8 --ids raster --model linear-friction --phase dense --relax 20 --steps 20 \
    --list off --history pairs --hist-cap 6 --copies 1
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session35 $part done in $SECONDS s"
