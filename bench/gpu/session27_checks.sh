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
#   bench/gpu/session27_checks.sh fine     # the shipped case (walls without artificial viscosity)
#                                          # at dp = 6 mm (4.8 M particles) to 0.5 s: does the
#                                          # P2 impact hold at a finer spacing? (it does not:
#                                          # 0.434 s, bench/results/sph_gpu.md)
#   bench/gpu/session27_checks.sh stl      # the STL solids of SPH cases on the GPU: dambreak_pier.toml
#                                          # (pier.stl) at dp = 5 mm to 1 s on one GPU, analysis
#                                          # on its segment, 0.2 s on two slabs of GPU 0; the SPH
#                                          # suites
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
fine) spheric spheric_6mm PARTICLE_SHM_SPHERIC_DP=0.006 PARTICLE_SHM_SPHERIC_END=0.5 ;;
stl)
  d=$(mktemp -d)
  sed 's/^spacing = 0.02/spacing = 0.005/' solver/cases/dambreak_pier.toml > "$d/pier5.toml"
  cp solver/cases/pier.stl "$d/"
  item 200 result pier_gpu timeout 200 solver --backend cuda --case "$d/pier5.toml" --end-time 1.0 \
    --name-shm pier --keep-shm --progress-every 5
  grep -E "SPH case|particles|steps/s|finished|ERROR" "$OUT/pier_gpu.out" | tail -n 6
  timeout 60 analysis --attach pier --once --json | cut -c1-700; echo "RESULT analysis rc=${PIPESTATUS[0]}"
  shmctl clean >/dev/null 2>&1; rm -f /dev/shm/pier
  item 120 result pier_slabs timeout 150 solver --backend cuda --devices 0,0 --case "$d/pier5.toml" \
    --end-time 0.2 --progress-every 5
  grep -E "slabs|steps/s|finished|ERROR" "$OUT/pier_slabs.out" | tail -n 4
  item 200 sph_suites
  rm -rf "$d"
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session27 $part done in $SECONDS s"
