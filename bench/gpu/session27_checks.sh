#!/usr/bin/env bash
# Session 27 (2026-12-01) on one GPU (only nvidia-h200 was lent), from the repository root, after
# bench/gpu/pack.sh:
#
#   bench/gpu/session27_checks.sh wall0    # SPHERIC Test 2 at 7.5 mm to 2.0 s without the
#                                          # artificial viscosity between fluid and walls
#                                          # (viscosity_boundary_factor 0): does the wall's
#                                          # viscosity also hold the water up at H4 at 2.0 s?
#                                          # (about 360 s on an H200)
#   bench/gpu/session27_checks.sh sph      # after the shipped dambreak.toml took factor 0: the
#                                          # sph_gpu.json records (1 M, 10 M, 100 M dam break)
#                                          # and the user path (dambreak.toml on the GPU, VTK,
#                                          # checkpoints, analysis on the segment, a restart)
#
# Records: $OUT/sph_gpu.jsonl. Logs $OUT/session27_<part>.log, *.out.
set -uo pipefail
part=${1:-wall0}
export OUT=${OUT:-bench/results/raw/session27}
source "$(dirname "$0")/lib.sh" "session27_${part}"
budget=${BUDGET:-560}
spheric() {
  local name=$1; shift
  (cd solver && RESULT_PATTERN="P2:|H2|H4|test result|panicked|FAILED|particles|steps to" RESULT_LINES=40 \
    result "$name" env PARTICLE_SHM_TEST_BACKENDS=cuda "$@" timeout 560 "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
}
case $part in
wall0) spheric spheric_wall0 PARTICLE_SHM_SPHERIC_BOUNDARY_FACTOR=0 ;;
sph)
  item 200 sph_records
  item 120 sph_user_path
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session27 $part done in $SECONDS s"
