#!/usr/bin/env bash
# Issue 13, lab-scale cases (graphs of the step, the parallel mesh filter, batches sized by
# speed): every DEM GPU test, the multi-GPU tests on one GPU, compute-sanitizer on the drum, and
# the probe of bench/gpu/small_probe.sh. Logs under $OUT/tests and $OUT.
#   bench/gpu/small_checks.sh
set -uo pipefail
OUT=${OUT:-bench/results/raw/small}
mkdir -p "$OUT/tests"
OUT=$OUT/tests bash bench/gpu/issue13_checks.sh tests | grep -E "RESULT|test result|FAILED|panicked"
BIN=/tmp/pshm-bin
export PATH=$BIN:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
(cd solver && "$BIN/cuda_multi" --test-threads=1 > "$OUT/tests/cuda_multi.out" 2>&1; echo "RESULT cuda_multi rc=$?")
(cd solver && PARTICLE_SHM_TEST_BACKENDS=cuda2 "$BIN/process_features" --test-threads=1 > "$OUT/tests/process_features_cuda2.out" 2>&1; echo "RESULT process_features_cuda2 rc=$?")
compute-sanitizer --tool memcheck --error-exitcode 3 dem-gpu-bench case --case bench/cases/drum_10k.toml --warmup 0 --steps 300 > "$OUT/tests/sanitizer_drum.out" 2>&1
echo "RESULT sanitizer_memcheck_drum rc=$?"; tail -n 2 "$OUT/tests/sanitizer_drum.out"
OUT=$OUT bash bench/gpu/small_probe.sh
