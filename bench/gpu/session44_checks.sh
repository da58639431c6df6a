#!/usr/bin/env bash
# Session 44 (2026-12-04) on one GPU (only nvidia-h200 was lent). From the repository root,
# after PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session44_checks.sh checks   # a DEM frame packed by the next step's collide:
#                                          # the frames test first, then the DEM device suites
#                                          # that publish or collide (parity, groups, the null
#                                          # outputs, outflow and inflow on the GPU) and the
#                                          # README's main job as a user runs it
#   bench/gpu/session44_checks.sh publish  # the frames test, then the publication share on a
#                                          # relaxed dense pack with friction, the pack at once
#                                          # and in the next collide alternating in one process
#                                          # (now, next, now, next, each between two runs
#                                          # without frames): 10 M three steps at a time, 100 M
#                                          # a step at a time (10 frames/s)
#
# Logs $OUT/session44_<part>.log, *.out; records $OUT/dem44.jsonl; one archive of it all.
set -uo pipefail
part=${1:-checks}
export OUT=${OUT:-bench/results/raw/session44}
source "$(dirname "$0")/lib.sh" "session44_${part}"
budget=${BUDGET:-560}
J="$OUT/dem44.jsonl"
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|frames|particles:"
RESULT_LINES=30
case $part in
checks)
  pushd solver >/dev/null || exit
  item 60 result frames_test timeout 150 "$BIN/cuda_parity" frames_packed --nocapture
  item 120 result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1 --skip frames_packed
  item 80 result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads 1
  item 5 result cuda_pack_null_outputs timeout 60 "$BIN/cuda_pack_null_outputs"
  item 90 result process_features env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 "$BIN/process_features" \
    --test-threads 1
  popd >/dev/null || exit
  echo "== main job"; item 60 env OUT="$OUT/main_job" bash bench/gpu/main_job.sh
  ;;
publish)
  # PUBLISH_SPECS: "particles relax batch seconds" entries (the first call: 1e8 200 1 5 and
  # 1e7 200 3 5, whose 10 M pack was still settling after 200 steps: 308, 270, 247 steps/s
  # without frames in turn; the second: the frames test, then 1e7 2000 3 5 and 1e8 200 1 4).
  item 30 result frames_test timeout 150 env -C solver "$BIN/cuda_parity" frames_packed --nocapture
  for spec in ${PUBLISH_SPECS:-"1e7:2000:3:5" "1e8:200:1:4"}; do
    IFS=: read -r n relax batch secs <<< "$spec"
    args="--particles $n --model linear-friction --phase dense --relax $relax --seconds $secs --warmup 10 --batch $batch --frame-pack both"
    echo "+ dem-gpu-bench publish $args"
    item 120 timeout 330 dem-gpu-bench publish $args --out "$J" 2>&1 | grep -E "publish|frames:|newest|share|rror"
  done
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session44 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session44_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session44_$part.tgz" "$OUT/"
