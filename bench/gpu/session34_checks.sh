#!/usr/bin/env bash
# Session 34 (2026-12-02) on one GPU (only nvidia-h200 was lent): issue 13's one copy of the
# particle state (`--copies 1`: the collide stores forces, dem_integrate moves the particles, a
# search reorders the state through the force buffer). From the repository root, after
# bash bench/gpu/pack.sh:
#
#   bench/gpu/session34_checks.sh first   # cuda_parity's new and affected tests (f64 bits of the
#                                         # CPU with one copy; one copy = two copies in f32), the
#                                         # whole of cuda_parity with every test on one copy, then
#                                         # 10 M dense beds: in place and pairs-once, two copies
#                                         # and one, B/particle and particle-steps/s
#   bench/gpu/session34_checks.sh largest # rows of 6 on the 10 M bed; 350 M with rows of 7
#   bench/gpu/session34_checks.sh compact # the README's main job with --gpu-memory compact, then auto
#   bench/gpu/session34_checks.sh final   # after the search's arrays moved into the force
#                                         # buffer: cuda_parity (new tests, all on one copy, as
#                                         # it is), cuda_multi, the validation tests on one copy,
#                                         # 10 M dense beds on one copy with rows of 10, 8 and 7
#
# Logs $OUT/session34_<part>.log, *.out; records $OUT/dem_gpu.jsonl.
set -uo pipefail
part=${1:-first}
export OUT=${OUT:-bench/results/raw/session34}
source "$(dirname "$0")/lib.sh" "session34_${part}"
budget=${BUDGET:-560}
J="$OUT/dem_gpu.jsonl"
RESULT_PATTERN="identical|bits|B/particle|test result|panicked|FAILED|steps/s"
RESULT_LINES=30
case $part in
first)
  (cd solver && item 90 result cuda_parity_new timeout 200 "$BIN/cuda_parity" --test-threads 1 --nocapture \
    collide_variants one_state_copy device_energies frame_arrays)
  (cd solver && item 150 result cuda_parity_one env PARTICLE_SHM_TEST_COPIES=1 timeout 250 \
    "$BIN/cuda_parity" --test-threads 1)
  dense --history in-place --copies 2
  dense --history in-place --copies 1
  dense --history pairs --hist-cap 10 --copies 2
  dense --history pairs --hist-cap 10 --copies 1
  ;;
final)
  # The search's cells, ranks and permutation moved into the force buffer and the skin's paths.
  cd solver
  item 60 result cuda_parity_new timeout 200 "$BIN/cuda_parity" --test-threads 1 --nocapture \
    collide_variants one_state_copy
  item 40 result cuda_parity_one env PARTICLE_SHM_TEST_COPIES=1 timeout 250 "$BIN/cuda_parity" --test-threads 1
  item 60 result cuda_parity timeout 250 "$BIN/cuda_parity" --test-threads 1
  item 100 result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads 1
  for t in incline impact_hertz moving_geometry impact_linear packing; do
    item 20 result "validate_${t}_one" env PARTICLE_SHM_TEST_BACKENDS=cuda PARTICLE_SHM_TEST_COPIES=1 \
      timeout 150 "$BIN/$t" --test-threads 1
  done
  cd ..
  dense --history in-place --copies 1
  # Pairs-once rows shorter than 10: does the dense bed (6 owned pairs a bulk site) fit them?
  for cap in 10 8 7; do dense --history pairs --hist-cap $cap --copies 1; done
  ;;
largest)
  # Rows of 6 (the owned pairs of a bulk site; walls and faces need more?), then the largest bed
  # asked for by the issue (350 M) with rows of 7 and one copy.
  dense --history pairs --hist-cap 6 --copies 1
  item 300 run bench --particles 3.5e8 --model linear-friction --phase dense --relax 20 --steps 20 --list off \
    --history pairs --hist-cap 7 --copies 1
  ;;
compact)
  # The main command with the compact layout, as a user runs it (built-in case, 1 M, 1 s), then
  # as it is (auto), for the comparison on this machine.
  for mem in compact auto; do
    echo "+ solver --name-shm main_$mem --backend cuda --gpu-memory $mem"
    /usr/bin/time -f "wall %e s" timeout 250 solver --name-shm "main_$mem" --backend cuda --gpu-memory $mem \
      > "$OUT/main_$mem.out" 2>&1
    echo "exit $?"
    grep -E "B/particle|steps/s|finished|error|wall" "$OUT/main_$mem.out" | tail -n 8
  done
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session34 $part done in $SECONDS s"
