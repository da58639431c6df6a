#!/usr/bin/env bash
# Session 54 (2026-12-05) on one GPU (no multi-GPU kind lent): the SPH slabs' rates kernels run
# one thread per owned particle (lists of owned slots, sph_list_own and sph_own_bound) instead of
# one per slot, so the halo's particles no longer idle lanes beside owned ones (issue 18). From
# the repository root, after PACK_MPI=1 bash bench/gpu/pack.sh, with gpu-carry/sph-gpu-bench-base
# (the bench of commit 5468660, the session's start) and gpu-carry/sph-gpu-bench-diag (this
# build with bench/results/raw/session53/diag_timers.patch applied, not merged):
#
#   bench/gpu/session54_checks.sh lists   # the SPH GPU suites (f64 and f32 bits of slabs against
#                                         # one GPU and the CPU), the SPH GPU-rank test; two
#                                         # slabs on GPU 0 against one GPU, this build and the
#                                         # base alternated at 10 M and 100 M (Verlet); the
#                                         # per-kernel times at 100 M
#
# Records: bench/gpu/session54_records.py. Logs $OUT/session54_<part>.log.
set -uo pipefail
part=${1:-lists}
export OUT=${OUT:-bench/results/raw/session54}
source "$(dirname "$0")/lib.sh" "session54_${part}"
budget=${BUDGET:-570}
case $part in
lists)
  item 150 sph_suites
  (cd solver && item 40 result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 "$BIN/mpi_ranks" \
    sph_gpu_ranks --test-threads 1)
  for b in base new base new; do sph_split $b 1e7 100 25 100 "lists_$b.jsonl"; done
  for b in new base; do sph_split $b 1e8 40 60 150 "lists_$b.jsonl"; done
  sph_diag 1e8 45 diag_1e8.out "DIAG sph|rates|localize|own|ms/step|rror"
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
tar -czf "$OUT/session54_${part}.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
echo "session54 $part done at ${SECONDS} s"
