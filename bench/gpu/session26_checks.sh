#!/usr/bin/env bash
# Session 26 (2026-12-01) on one GPU (only nvidia-h200 was lent), from the repository root, after
# bench/gpu/pack.sh:
#
#   bench/gpu/session26_checks.sh sph      # the SPH pair code with its shared factors formed once
#                                          # (vr, 1 / (r^2 + eta^2), mu_ij): the SPH suites (f64
#                                          # bits equal to the CPU, slabs equal to one GPU, the
#                                          # twins), then the sph_gpu.json records, and the old
#                                          # and new pair code alternated at 1 M and 10 M when
#                                          # gpu-carry/probe/sph-gpu-bench (the build before) is
#                                          # there
#   bench/gpu/session26_checks.sh spheric  # SPHERIC Test 2 at 7.5 mm on the GPU (sph_spheric,
#                                          # to 2.0 s by default since this session: about 360 s
#                                          # on an H200)
#   bench/gpu/session26_checks.sh final    # the final tree: the DEM group tests (slabs of GPU 0;
#                                          # the start notice of small shares is in their path),
#                                          # the DEM parity suite, and the README's main job
#
# Records: $OUT/sph_gpu.jsonl, $OUT/ab_{old,new}.jsonl; logs $OUT/session26_<part>.log, *.out.
set -uo pipefail
part=${1:-sph}
export OUT=${OUT:-bench/results/raw/session26}
source "$(dirname "$0")/lib.sh" "session26_${part}"
budget=${BUDGET:-560}
ab() {
  local r v b
  for r in 1 2; do
    for v in old new; do
      b=sph-gpu-bench
      [[ $v == old ]] && b=gpu-carry/probe/sph-gpu-bench
      echo "== $v, round $r"
      timeout 120 "$b" --particles 1e6,1e7 --steps 100 --warmup 20 --frames 0 --out "$OUT/ab_$v.jsonl" \
        2>&1 | grep "^SPH dam break"
    done
  done
}
case $part in
sph)
  item 200 sph_suites
  [[ -x gpu-carry/probe/sph-gpu-bench ]] && item 80 ab
  item 200 sph_records
  ;;
spheric)
  (cd solver && RESULT_PATTERN="P2|H2|H4|test result|panicked|FAILED|particles" RESULT_LINES=30 \
    result spheric env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 560 "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  ;;
final)
  (cd solver && item 200 result cuda_multi timeout 300 "$BIN/cuda_multi" --test-threads 1)
  (cd solver && item 200 result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1)
  item 60 bash -c 'OUT="$OUT/main_job" bash bench/gpu/main_job.sh | tail -n 1'
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session26 $part done in $SECONDS s"
