#!/usr/bin/env bash
# Session 47 (2026-12-04) on one GPU (only nvidia-h200 was lent). From the repository root,
# after PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session47_checks.sh checks   # the CPU reference after session 47's walk changes
#                                          # (boundary particles and mDBC ghost nodes with no
#                                          # fluid in reach skip the row search; fixed-size row
#                                          # counts; no root for far candidates; cell_coords
#                                          # without floor): the GPU suites that compare the
#                                          # GPU's f64 bits with it (sph_cuda, sph_group,
#                                          # cuda_parity for DEM, whose CPU grid shares
#                                          # cell_coords), and the README's main job
#
# Logs $OUT/session47_<part>.log; one archive of it all.
set -uo pipefail
part=${1:-checks}
export OUT=${OUT:-bench/results/raw/session47}
source "$(dirname "$0")/lib.sh" "session47_${part}"
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|the same run"
RESULT_LINES=30
case $part in
checks)
  pushd solver >/dev/null || exit
  item 150 result sph_cuda timeout 250 "$BIN/sph_cuda" --test-threads 1
  item 150 result sph_group timeout 250 "$BIN/sph_group" --test-threads 1
  item 120 result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  popd >/dev/null || exit
  echo "== main job"; item 60 env OUT="$OUT/main_job" bash bench/gpu/main_job.sh
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session47 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session47_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session47_$part.tgz" "$OUT/"
