#!/usr/bin/env bash
# Session 55 (2026-12-05) was lent no device; this is for the next device session (one GPU is
# enough). The SPH slabs' rates kernel classifying each owned particle for the next exchange
# right after its update (sph_rates_fluid_sends, commit ca62509; PARTICLE_SHM_SPH_CLASSIFY=rates,
# off by default), which has been compiled with NVRTC but never run. From the repository root,
# after PACK_MPI=1 bash bench/gpu/pack.sh and a diagnostic build of this commit:
#
#   git apply bench/results/raw/session55/diag_timers.patch
#   cargo build --release -p solver --bin sph-gpu-bench
#   strip -o gpu-carry/sph-gpu-bench-diag target/release/sph-gpu-bench
#   git apply -R bench/results/raw/session55/diag_timers.patch
#
#   bench/gpu/session55_checks.sh classify  # the SPH GPU suites (sph_group's f32 test runs both
#                                           # classifications, each bit for bit against one
#                                           # GPU, and asserts the rates kernels classified),
#                                           # the SPH GPU-rank test with each (also the first
#                                           # device run of d954c31 and 98b35ef); two slabs on GPU 0
#                                           # against one GPU, sph_classify and the rates
#                                           # kernel alternated at 10 M and 100 M (Verlet);
#                                           # per-kernel times of both at 100 M
#
# Records: $OUT/classify_{standalone,rates}.jsonl (the bench's records carry "classify"), the
# diagnostic logs diag_{standalone,rates}_1e8.out. Logs $OUT/session55_<part>.log.
set -uo pipefail
part=${1:-classify}
export OUT=${OUT:-bench/results/raw/session55}
source "$(dirname "$0")/lib.sh" "session55_${part}"
budget=${BUDGET:-570}
# split_as HOW N STEPS EST LIMIT: sph_split of this build with PARTICLE_SHM_SPH_CLASSIFY=HOW.
split_as() { PARTICLE_SHM_SPH_CLASSIFY=$1 sph_split new "$2" "$3" "$4" "$5" "classify_$1.jsonl"; }
case $part in
classify)
  item 170 sph_suites
  # SPH on GPU ranks (two and three ranks sharing GPU 0, against one GPU and a group), with
  # each classification (the variable reaches the ranks through mpirun, and the group).
  for how in standalone rates; do
    (cd solver && item 40 result "mpi_ranks_gpu_$how" env PARTICLE_SHM_TEST_BACKENDS=cuda \
      PARTICLE_SHM_SPH_CLASSIFY=$how timeout 300 "$BIN/mpi_ranks" sph_gpu_ranks --test-threads 1)
  done
  if ! grep -q "test result: ok" "$OUT/sph_group.out" 2>/dev/null; then
    echo "sph_group did not pass: the rates kernels' classification is not timed"
  else
    for how in standalone rates standalone rates; do split_as $how 1e7 100 25 100; done
    for how in rates standalone; do split_as $how 1e8 40 60 150; done
    for how in standalone rates; do
      PARTICLE_SHM_SPH_CLASSIFY=$how sph_diag 1e8 45 "diag_${how}_1e8.out" \
        "DIAG sph|classify|rates_fluid|memset|ms/step|rror"
    done
  fi
  ;;
v2)
  # The second round: the classification's layer from the position the update returns (not
  # read back) and its counts one atomic per warp (no barrier): the tree with
  # bench/results/raw/session55/v2_layer_in_registers_warp_counts.patch applied, built as
  # gpu-carry/sph-gpu-bench-v2, gpu-carry/sph-gpu-bench-diag2 (with the diagnostic timers too)
  # and gpu-carry/sph_group-v2 (the stripped test binary): its f32 group test (both
  # classifications, bits against one GPU), then the split with each and the kernel times.
  (cd solver && item 40 result sph_group_v2 timeout 120 ../gpu-carry/sph_group-v2 f32_group --test-threads 1)
  if grep -q "test result: ok. 1 passed" "$OUT/sph_group_v2.out" 2>/dev/null; then
    for how in standalone rates standalone rates; do
      PARTICLE_SHM_SPH_CLASSIFY=$how sph_split v2 1e7 100 25 100 "v2_$how.jsonl"
    done
    for how in rates standalone; do PARTICLE_SHM_SPH_CLASSIFY=$how sph_split v2 1e8 40 60 150 "v2_$how.jsonl"; done
    PARTICLE_SHM_SPH_CLASSIFY=rates sph_diag 1e8 45 diag2_rates_1e8.out \
      "DIAG sph|classify|rates_fluid|memset|ms/step|rror" diag2
  fi
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
tar -czf "$OUT/session55_${part}.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
echo "session55 $part done at ${SECONDS} s"
