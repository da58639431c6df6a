#!/usr/bin/env bash
# Session 33 (2026-12-02) on one GPU (only nvidia-h200 was lent): issue 13's contact history with
# each particle pair's spring kept once (`--history pairs`), and every contact's force taken
# from the spring it stores, which every layout and the CPU now share (the first `parity` run,
# raw/session33/first/, had Luding's damping-carrying reset, dropped after it). From the
# repository root, after bash bench/gpu/pack.sh (the `final` run's output is in
# raw/session33/final/):
#
#   bench/gpu/session33_checks.sh parity  # the physics twins; cuda_parity as it is (f64 bits of
#                                         # the CPU with the new sliding force), and again with every
#                                         # test's history kept pairs-once; cuda_multi
#   bench/gpu/session33_checks.sh bench   # 10 M dense beds (linear and Hertz with friction):
#                                         # two buffers, in place and pairs-once (rows of 10),
#                                         # without the Verlet list and with it; B/particle and
#                                         # particle-steps/s (the loose rows did not fit the
#                                         # budget)
#   bench/gpu/session33_checks.sh final   # the session's last call: cuda_parity pairs-once,
#                                         # cuda_multi, pairs-once slot- and row-major, then the
#                                         # validation tests (auto, then pairs) as time allows
#
# Logs $OUT/session33_<part>.log, *.out; records $OUT/dem_gpu.jsonl.
set -uo pipefail
part=${1:-parity}
export OUT=${OUT:-bench/results/raw/session33}
source "$(dirname "$0")/lib.sh" "session33_${part}"
budget=${BUDGET:-560}
J="$OUT/dem_gpu.jsonl"
RESULT_PATTERN="identical|bits|random cases|test result|panicked|FAILED|steps/s"
RESULT_LINES=30
case $part in
parity)
  cd solver
  item 60 result physics_parity timeout 100 "$BIN/physics_parity"
  item 150 result cuda_parity timeout 250 "$BIN/cuda_parity" --test-threads 1
  item 150 result cuda_parity_pairs env PARTICLE_SHM_TEST_HISTORY=pairs timeout 250 \
    "$BIN/cuda_parity" --test-threads 1 --nocapture
  item 150 result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads 1
  ;;
bench)
  for m in linear-friction hertz; do
    item 60 run bench --particles 1e7 --model $m --phase dense --relax 2000 --steps 200 --list off --history in-place
    item 60 run bench --particles 1e7 --model $m --phase dense --relax 2000 --steps 200 --list off --history pairs --hist-cap 10
  done
  item 60 run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200 --history pairs --hist-cap 10
  item 60 run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200
  item 60 run bench --particles 1e7 --model linear-friction --phase loose --steps 300 --list off --history pairs --hist-cap 10
  item 60 run bench --particles 1e7 --model linear-friction --phase loose --steps 300 --list off --history in-place
  ;;
final)
  # The last device call of the session: the collide's cursor (pairs once) against the CPU's
  # bits, groups, the layouts' speed, then the validation tests as the budget allows.
  (cd solver && item 30 result cuda_parity_pairs env PARTICLE_SHM_TEST_HISTORY=pairs timeout 250 \
    "$BIN/cuda_parity" --test-threads 1 --nocapture)
  (cd solver && item 100 result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads 1)
  item 60 run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200 --list off --history pairs --hist-cap 10
  item 60 run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200 --list off --history pairs --hist-cap 10 --hist-layout row
  item 60 run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200 --history pairs --hist-cap 10 --hist-layout row
  cd solver
  for h in auto pairs; do
    for t in incline impact_hertz moving_geometry energy impact_linear packing; do
      item 40 result "validate_${t}_$h" env PARTICLE_SHM_TEST_BACKENDS=cuda PARTICLE_SHM_TEST_HISTORY=$h \
        timeout 150 "$BIN/$t" --test-threads 1
    done
  done
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session33 $part done in $SECONDS s"
