#!/usr/bin/env bash
# Session 20 (2026-11-25) on one GPU, from the repository root, after bench/gpu/pack.sh.
#   bench/gpu/session20_checks.sh overlap  # issue 14: the ghost refresh beside the interior
#                                          # collide (two slabs on GPU 0): cuda_multi (bits
#                                          # against one GPU, overlap on and off), then 10 M dense
#                                          # with friction and linear on two slabs of GPU 0,
#                                          # overlap on and off (--overlap), one record each
#   bench/gpu/session20_checks.sh obench   # the benchmark half of `overlap` alone
# Logs under $OUT.
set -uo pipefail
part=${1:-overlap}
export OUT=${OUT:-bench/results/raw/session20}
source "$(dirname "$0")/lib.sh" "session20_${part}"
if [[ $part == overlap ]]; then
  (cd solver && result cuda_multi timeout 420 "$BIN/cuda_multi" --test-threads 1 --nocapture)
  grep -E "identical|hidden|panicked|differs" "$OUT/cuda_multi.out" | cut -c1-400 | head -n 40
fi
if [[ $part == overlap || $part == obench ]]; then
  J="$OUT/multi_overlap.jsonl"
  for m in linear-friction linear; do
    for o in on off; do
      echo "+ dem-gpu-bench multi --particles 1e7 --model $m --phase dense --relax 300 --steps 200 --warmup 10 --devices 0,0 --overlap $o"
      timeout 200 dem-gpu-bench multi --particles 1e7 --model $m --phase dense --relax 300 --steps 200 \
        --warmup 10 --devices 0,0 --overlap $o --out "$J" 2>&1 | grep -E "one GPU:|balance|group:" | cut -c1-400
    done
  done
fi
