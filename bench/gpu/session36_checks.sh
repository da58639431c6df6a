#!/usr/bin/env bash
# Session 36 (2026-12-03) on one GPU (only nvidia-h200 was lent): issue 13's pairs-once rows
# with owner keys (CudaOptions::owner_keys, `dem-gpu-bench --owner positions|ids`): each pair's
# spring kept by the particle higher up, not by the ids, and handed over at searches
# (dem_owner_keys, dem_adopt). From the repository root, after bash bench/gpu/pack.sh:
#
#   bench/gpu/session36_checks.sh keys     # the twins (physics_parity), cuda_parity's owner-key
#                                          # test and the spill and variant tests; the 10 M
#                                          # dense bed in its three id orders with rows of 6 and
#                                          # spill rows of 6 by the keys, the shuffled one by the
#                                          # ids for comparison; the main job with compact
#   bench/gpu/session36_checks.sh full     # every cuda_parity test, on one copy and as it is
#   bench/gpu/session36_checks.sh again    # the owner-key and spill tests (revised after full:
#                                          # the shaken pack searches every step; f32 spill
#                                          # rows compared with rows of the same owners), on
#                                          # one copy and as they are
#   bench/gpu/session36_checks.sh largest  # 400 M frictional particles with shuffled ids
#   bench/gpu/session36_checks.sh verify   # the final build: compute-sanitizer memcheck on a
#                                          # small compact run (dem_owner_keys, dem_adopt); the
#                                          # main job as a user runs it; issue 13's 10 M dense
#                                          # records in the default layout (linear and Hertz
#                                          # with friction, frictionless)
#   bench/gpu/session36_checks.sh compact  # the parity tests that take the tests' default
#                                          # options and the validation suites, with
#                                          # PARTICLE_SHM_TEST_HISTORY=compact (owner keys)
#   bench/gpu/session36_checks.sh auto     # 450 M with shuffled ids and every layout left to
#                                          # `auto`: too large for one copy in place (about
#                                          # 148 GiB), it falls back to the compact layout
#
# Logs $OUT/session36_<part>.log, *.out; records $OUT/dem_gpu.jsonl.
set -uo pipefail
part=${1:-keys}
export OUT=${OUT:-bench/results/raw/session36}
source "$(dirname "$0")/lib.sh" "session36_${part}"
budget=${BUDGET:-560}
J="$OUT/dem_gpu.jsonl"
RESULT_PATTERN="identical|bits|spill|handed|B/particle|test result|panicked|FAILED|steps/s|differ|ERROR SUMMARY"
RESULT_LINES=30
case $part in
keys)
  (cd solver && item 40 result physics_parity timeout 100 "$BIN/physics_parity" --nocapture)
  (cd solver && item 150 result cuda_parity_keys timeout 250 "$BIN/cuda_parity" --test-threads 1 --nocapture \
    owner_keys spill_rows collide_variants)
  dense --ids random --history pairs --hist-cap 6 --hist-spill 6 --copies 1
  dense --ids raster --history pairs --hist-cap 6 --hist-spill 6 --copies 1
  dense --ids cells --history pairs --hist-cap 6 --hist-spill 6 --copies 1
  dense --ids random --history pairs --hist-cap 8 --hist-spill 5 --copies 1 --owner ids
  main_compact
  ;;
full)
  (cd solver && item 200 result cuda_parity_one env PARTICLE_SHM_TEST_COPIES=1 timeout 260 \
    "$BIN/cuda_parity" --test-threads 1 --nocapture)
  (cd solver && item 200 result cuda_parity timeout 260 "$BIN/cuda_parity" --test-threads 1)
  ;;
largest)
  # 400 M frictional particles with shuffled ids, rows of 6 and spill rows of 6 by the keys.
  item 330 run bench --particles 4e8 --ids random --model linear-friction --phase dense --relax 20 --steps 20 \
    --list off --history pairs --hist-cap 6 --hist-spill 6 --copies 1
  ;;
again)
  (cd solver && item 100 result cuda_parity_keys_one env PARTICLE_SHM_TEST_COPIES=1 timeout 200 \
    "$BIN/cuda_parity" --test-threads 1 --nocapture owner_keys spill_rows)
  (cd solver && item 100 result cuda_parity_keys timeout 200 "$BIN/cuda_parity" --test-threads 1 --nocapture \
    owner_keys spill_rows)
  ;;
verify)
  item 90 result sanitizer_memcheck_compact compute-sanitizer --tool memcheck --error-exitcode 3 \
    dem-gpu-bench bench --particles 1e4 --ids random --model linear-friction --phase dense --relax 100 --steps 20 \
    --list off --history pairs --hist-cap 6 --hist-spill 6 --copies 1 --skin 0
  item 60 bash bench/gpu/main_job.sh
  item 60 run bench --particles 1e7 --model linear-friction --phase dense
  item 60 run bench --particles 1e7 --model hertz --phase dense
  item 60 run bench --particles 1e7 --model linear --phase dense
  ;;
compact)
  cd solver
  item 120 result cuda_parity_compact env PARTICLE_SHM_TEST_HISTORY=compact timeout 200 "$BIN/cuda_parity" \
    --test-threads 1 --nocapture cuda_matches_cpu two_species cuda_runs_are_deterministic skin_steps frame_arrays \
    device_energies
  for t in incline impact_hertz moving_geometry impact_linear packing process_features; do
    item 60 result "validate_${t}_compact" env PARTICLE_SHM_TEST_BACKENDS=cuda PARTICLE_SHM_TEST_HISTORY=compact \
      timeout 150 "$BIN/$t" --test-threads 1
  done
  cd ..
  ;;
auto)
  item 330 run bench --particles 4.5e8 --ids random --model linear-friction --phase dense --relax 20 --steps 20
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session36 $part done in $SECONDS s"
