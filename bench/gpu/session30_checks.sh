#!/usr/bin/env bash
# Session 30 (2026-12-02) on one GPU (only nvidia-h200 was lent), from the repository root, after
# PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session30_checks.sh slosh   # free sloshing against linear theory on the GPU
#                                         # (sph_sloshing: the tank 0.3 L wide at dp = L/80 and
#                                         # L/160, a 4-dp slice at L/40 beside them), the DEM
#                                         # shaken plate on the GPU (moving_geometry), and the
#                                         # GPU SPH rank tests through the shared helper
#                                         # (mpi_ranks sph_gpu and moving, mended after their
#                                         # last device run)
#   bench/gpu/session30_checks.sh slosh2  # the same test with L/40 added to its spacings (the
#                                         # CI test's tank on the GPU), three spacings in all
#
# Logs $OUT/session30_<part>.log, *.out.
set -uo pipefail
part=${1:-slosh}
export OUT=${OUT:-bench/results/raw/session30}
source "$(dirname "$0")/lib.sh" "session30_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="SLOSH|lifts|overlap|test result|panicked|FAILED|identical|bits"
RESULT_LINES=20
case $part in
slosh)
  (cd solver && item 240 result sph_sloshing env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 400 \
    "$BIN/sph_sloshing" gpu --nocapture)
  (cd solver && item 60 result moving_geometry env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 \
    "$BIN/moving_geometry" shaken --nocapture)
  (cd solver && item 200 result mpi_ranks_sph_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 \
    "$BIN/mpi_ranks" sph_gpu --nocapture --test-threads 1)
  (cd solver && item 200 result mpi_ranks_moving env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 \
    "$BIN/mpi_ranks" moving --nocapture --test-threads 1)
  ;;
slosh2)
  (cd solver && item 240 result sph_sloshing2 env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 400 \
    "$BIN/sph_sloshing" gpu --nocapture)
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session30 $part done in $SECONDS s"
