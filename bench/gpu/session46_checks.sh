#!/usr/bin/env bash
# Session 46 (2026-12-04) on one GPU (only nvidia-h200 was lent). From the repository root,
# after PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session46_checks.sh checks   # session 45's spill counters read through page-locked
#                                          # memory (CudaSim::spill_ctl: spill_rows,
#                                          # springs_handed_over in cuda_parity) and a flushed
#                                          # frame no longer packing its contact counts twice
#                                          # (the frames tests of cuda_parity and cuda_multi wait
#                                          # for some frames at once), the DEM device suites that
#                                          # publish or spill, process_features on the GPU, and
#                                          # the README's main job as a user runs it
#   bench/gpu/session46_checks.sh publish  # the publication share on a relaxed dense pack with
#                                          # friction, frames as the solver's default (contact
#                                          # counts too), now and in the next collide
#                                          # alternating, with session 45's page-locked small
#                                          # reads (its 100 M one-GPU and 50 M two-slab shares
#                                          # were read with DMA reads); PUBLISH_SPECS picks the
#                                          # runs, "devices:particles:relax:batch:seconds"
#   bench/gpu/session46_checks.sh positions  # the bench's frame check reading positions alone
#                                          # (CudaSim::positions, CudaGroup::positions) instead of
#                                          # the whole state, whose history took tens of GB on the
#                                          # host at 100 M: the frames tests (which now compare
#                                          # positions() with the state), then the 100 M one-GPU
#                                          # publish with its set-up time printed, all four runs
#
# Logs $OUT/session46_<part>.log, *.out; records $OUT/dem46.jsonl; one archive of it all.
set -uo pipefail
part=${1:-checks}
export OUT=${OUT:-bench/results/raw/session46}
source "$(dirname "$0")/lib.sh" "session46_${part}"
budget=${BUDGET:-560}
J="$OUT/dem46.jsonl"
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|frames|particles:|the same run"
RESULT_LINES=30
case $part in
checks)
  pushd solver >/dev/null || exit
  item 120 result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  item 90 result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads 1
  item 5 result cuda_pack_null_outputs timeout 60 "$BIN/cuda_pack_null_outputs"
  item 90 result process_features env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 "$BIN/process_features" \
    --test-threads 1
  popd >/dev/null || exit
  echo "== main job"; item 60 env OUT="$OUT/main_job" bash bench/gpu/main_job.sh
  ;;
publish)
  for spec in ${PUBLISH_SPECS:-"0:1e8:200:1:4"}; do
    IFS=: read -r dev n relax batch secs <<< "$spec"
    args="--particles $n --model linear-friction --phase dense --relax $relax --seconds $secs --warmup 10 --batch $batch --frame-pack both --contacts on"
    [[ $dev == 0 ]] || args="$args --devices $dev"
    echo "+ dem-gpu-bench publish $args"
    item 150 timeout 400 dem-gpu-bench publish $args --out "$J" 2>&1 | grep -E "publish|frames|newest|share|rror|GPU"
  done
  ;;
positions)
  pushd solver >/dev/null || exit
  item 40 result frames_one_gpu timeout 150 "$BIN/cuda_parity" frames_packed --nocapture
  item 90 result frames_group timeout 200 "$BIN/cuda_multi" a_groups_frames --nocapture
  popd >/dev/null || exit
  args="--particles 1e8 --model linear-friction --phase dense --relax 200 --seconds 4 --warmup 10 --batch 1 --frame-pack both --contacts on"
  echo "+ dem-gpu-bench publish $args"
  item 200 timeout $((budget - SECONDS - 5)) dem-gpu-bench publish $args --out "$J" 2>&1 \
    | grep -E "set up|publish|frames|newest|share|rror|GPU"
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session46 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session46_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session46_$part.tgz" "$OUT/"
