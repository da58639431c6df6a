#!/usr/bin/env bash
# Device energies (issue 13) on one GPU, from the repository root, after bench/gpu/pack.sh here:
#   bench/gpu/session10_checks.sh
# 1. Tests: the physics twins (contact_elastic_energy), CUDA vs CPU parity including the device
#    energies against the CPU's bookkeeping (and a run that asked for them against one that did
#    not), the group tests (the collide kernel is now a template shared with dem_energies), and
#    the validation tests that read energies, on the GPU; memcheck on a bench that computes them.
# 2. The 10 M dense records again (the collide must not have slowed), each with the time of the
#    device energies and of the download + CPU path they replace.
set -uo pipefail
export OUT=${OUT:-bench/results/raw/session10}
export RESULT_PATTERN="test result|panicked|FAILED|ERROR SUMMARY|energies|double (true|false)" RESULT_LINES=24
source "$(dirname "$0")/lib.sh" session10_checks
cd solver
result physics_parity "$BIN/physics_parity" --nocapture
result cuda_parity "$BIN/cuda_parity" --test-threads=1 --nocapture
for t in energy moving_geometry impact_linear impact_hertz incline packing process_features; do
  result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda "$BIN/$t" --test-threads=1
done
result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads=1
cd ..
result memcheck compute-sanitizer --tool memcheck --error-exitcode 3 \
  dem-gpu-bench bench --particles 20000 --model linear-friction --phase dense --relax 0 --warmup 2 --steps 10
J="$OUT/dem_gpu.jsonl"
for m in linear-friction hertz linear; do
  steps=200; [[ $m == linear ]] && steps=300
  echo "+ dem-gpu-bench bench --particles 1e7 --model $m --phase dense --relax 2000 --steps $steps"
  dem-gpu-bench bench --particles 1e7 --model $m --phase dense --relax 2000 --steps $steps --out "$J" 2>&1 \
    | grep -v "B/particle (" | tail -n 4
done
