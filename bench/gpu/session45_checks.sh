#!/usr/bin/env bash
# Session 45 (2026-12-04) on one GPU (only nvidia-h200 was lent). From the repository root,
# after bash bench/gpu/pack.sh:
#
#   bench/gpu/session45_checks.sh checks   # frames written by the next step's collides on a
#                                          # GPU group too, contact counts packed at once: the
#                                          # frames tests (one GPU with contact counts, the
#                                          # group's new one, SPH's, left unrun in session 44),
#                                          # then the DEM device suites that publish or collide
#                                          # and the README's main job as a user runs it (its
#                                          # default frame carries contact counts)
#   bench/gpu/session45_checks.sh reads    # the step's small reads without DMA: a group's
#                                          # publication share before and after, then the
#                                          # suites that make those reads
#   bench/gpu/session45_checks.sh publish  # the publication share on a relaxed dense 100 M
#                                          # pack with friction, frames as the solver's default
#                                          # (contact counts too), the pack at once and in the
#                                          # next collide alternating (now, next, now, next):
#                                          # one GPU, then two slabs sharing it (--devices 0,0,
#                                          # the group's path that issue 14's 2-GPU key takes)
#
# Logs $OUT/session45_<part>.log, *.out; records $OUT/dem45.jsonl; one archive of it all.
set -uo pipefail
part=${1:-checks}
export OUT=${OUT:-bench/results/raw/session45}
source "$(dirname "$0")/lib.sh" "session45_${part}"
budget=${BUDGET:-560}
J="$OUT/dem45.jsonl"
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|frames|particles:|the same run"
RESULT_LINES=30
case $part in
checks)
  pushd solver >/dev/null || exit
  item 60 result frames_one_gpu timeout 150 "$BIN/cuda_parity" frames_packed --nocapture
  item 90 result frames_group timeout 200 "$BIN/cuda_multi" a_groups_frames --nocapture
  item 30 result frames_sph timeout 100 env PARTICLE_SHM_TEST_BACKENDS=cuda "$BIN/sph_cuda" frames_published \
    --nocapture
  item 120 result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1 --skip frames_packed
  item 80 result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads 1 --skip a_groups_frames
  item 5 result cuda_pack_null_outputs timeout 60 "$BIN/cuda_pack_null_outputs"
  item 90 result process_features env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 "$BIN/process_features" \
    --test-threads 1
  popd >/dev/null || exit
  echo "== main job"; item 60 env OUT="$OUT/main_job" bash bench/gpu/main_job.sh
  ;;
publish)
  # PUBLISH_SPECS: "devices:particles:relax:batch:seconds" entries.
  for spec in ${PUBLISH_SPECS:-"0:1e8:200:1:4" "0,0:1e8:200:1:4"}; do
    IFS=: read -r dev n relax batch secs <<< "$spec"
    args="--particles $n --model linear-friction --phase dense --relax $relax --seconds $secs --warmup 10 --batch $batch --frame-pack both --contacts on"
    [[ $dev == 0 ]] || args="$args --devices $dev"
    echo "+ dem-gpu-bench publish $args"
    item 150 timeout 330 dem-gpu-bench publish $args --out "$J" 2>&1 | grep -E "publish|frames|newest|share|rror|GPU"
  done
  ;;
reads)
  # The step's small reads through page-locked memory a kernel writes (diagnostics, skin,
  # outflow count, spill rows, layer counts), not DMA copies that queue behind a frame's copy:
  # the group's publication share at 10 M on two slabs sharing the GPU, a step at a time, with
  # the build before that change (gpu-carry/dem-gpu-bench-before) and after; then the suites
  # that read them.
  args="--particles 1e7 --model linear-friction --phase dense --relax 200 --seconds 3 --warmup 10 --batch 1 --frame-pack both --contacts on --devices 0,0"
  for b in gpu-carry/dem-gpu-bench-before dem-gpu-bench; do
    echo "+ $b publish $args"
    item 100 timeout 150 "$b" publish $args --out "$J" 2>&1 | grep -E "publish|frames|newest|share|rror|GPU"
  done
  pushd solver >/dev/null || exit
  item 100 result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads 1
  item 90 result cuda_parity timeout 200 "$BIN/cuda_parity" --test-threads 1
  item 45 result process_features env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 100 "$BIN/process_features" \
    --test-threads 1
  popd >/dev/null || exit
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session45 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session45_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session45_$part.tgz" "$OUT/"
