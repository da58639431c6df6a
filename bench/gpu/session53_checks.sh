#!/usr/bin/env bash
# Session 53 (2026-12-05) on one GPU (no multi-GPU kind lent): the cost of splitting the SPH dam
# break into two slabs with the current one-GPU engine (issue 18). The last such measurement was
# session 12's (76 ms/step at 10 M, symplectic); the engine's step is 4-8x shorter since, so the
# group's fixed costs per step (two reads of record counts, the exchange's launches, the
# boundary kernels over every slot) weigh more. From the repository root, after
# bash bench/gpu/pack.sh:
#
#   bench/gpu/session53_checks.sh split   # two slabs on GPU 0 (--devices 0,0) against one GPU,
#                                         # 10 M and 100 M, Verlet; 10 M symplectic with
#                                         # balancing off and by time; an nsys timeline of the
#                                         # group at 10 M when nsys is there (it is not)
#   bench/gpu/session53_checks.sh diag    # per-kernel times of one GPU and of each slab: needs
#                                         # gpu-carry/sph-gpu-bench-diag, the bench built with
#                                         # bench/results/raw/session53/diag_timers.patch applied
#                                         # (git apply; then git apply -R: it is not merged)
#   bench/gpu/session53_checks.sh fix     # after the classify fix: the split against the build
#                                         # before (gpu-carry/sph-gpu-bench-base, stripped from
#                                         # the earlier pack) alternated, diag again, the SPH
#                                         # suites, the SPH GPU-rank test (PACK_MPI=1 pack)
#   bench/gpu/session53_checks.sh scan    # after the scan rewrite: cuda_scan, the 100 M split
#                                         # against the base, diag, the SPH suites, cuda_parity
#   bench/gpu/session53_checks.sh hash    # sph_hash_count's bucket of slots not kept one atomic
#                                         # per warp: diag at 100 M, the split against the build
#                                         # before it (gpu-carry/sph-gpu-bench-prev), the group
#                                         # and one-GPU suites, the SPH GPU-rank test
#
# Records: bench/gpu/session53_records.py.
#
# Logs $OUT/session53_<part>.log, records $OUT/sph_split.jsonl.
set -uo pipefail
part=${1:-split}
export OUT=${OUT:-bench/results/raw/session53}
source "$(dirname "$0")/lib.sh" "session53_${part}"
budget=${BUDGET:-560}
J=$OUT/sph_split.jsonl
# The split and diagnostic runs: sph_split and sph_diag of lib.sh.
show() { grep -E "ms/step|speedup|rror|panicked" | cut -c1-420; }
split() { sph_split "$@"; }
diag() { sph_diag "$@"; }
case $part in
split)
  item 150 timeout 300 sph-gpu-bench --particles 1e7,1e8 --steps 40 --warmup 5 --frames 0 \
    --integrator verlet --devices 0,0 --balance off --out "$J" 2>&1 | show
  item 60 timeout 200 sph-gpu-bench --particles 1e7 --steps 40 --warmup 5 --frames 0 \
    --devices 0,0 --balance off,time --out "$J" 2>&1 | show
  NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  echo "nsys: ${NSYS:-none}"
  if [ -n "$NSYS" ]; then
    item 90 timeout 200 "$NSYS" profile -o "$OUT/group10m" --force-overwrite true --stats=false \
      sph-gpu-bench --particles 1e7 --steps 10 --warmup 3 --frames 0 --integrator verlet \
      --devices 0,0 --balance off > "$OUT/nsys.out" 2>&1
    "$NSYS" stats --report cuda_gpu_kern_sum,cuda_api_sum --format csv -o "$OUT/group10m" \
      "$OUT/group10m.nsys-rep" > /dev/null 2>&1
    ls -la "$OUT"/group10m* 2>/dev/null
    rm -f "$OUT"/group10m.sqlite "$OUT"/group10m.nsys-rep
  fi
  ;;
diag)
  # A diagnostic build (raw/session53/diag_timers.patch, not merged): with PSHM_SPH_DIAG set
  # every launch, memset, read and the group's peer copies are timed on the host between stream
  # synchronisations (so slabs on one GPU do not overlap), summed per kernel name and printed
  # per engine.
  ls /usr/local/cuda*/bin 2>/dev/null | grep -E "ncu|nsys|sanitizer" | head
  for n in 1e7 1e8; do diag $n 60 "diag_$n.out" "DIAG|ms/step|rror"; done
  ;;
fix)
  # After the fixes (sph_classify's kept count and sph_pack_part's entries one atomic per block
  # or warp, sph_atomic_min skipping +inf): the split against the build before them
  # (gpu-carry/sph-gpu-bench-base), alternated; the diagnostic timings again (the diag build
  # carries the fixes); then the SPH GPU suites and the SPH GPU-rank test (PACK_MPI=1 pack).
  for b in base new base new; do split $b 1e7 100 25 100 "split_$b.jsonl"; done
  for b in base new; do split $b 1e8 40 60 150 "split_$b.jsonl"; done
  for n in 1e7 1e8; do diag $n 40 "diagfix_$n.out" "DIAG sph|classify|rates_bound|ms/step|rror"; done
  item 150 sph_suites
  (cd solver && item 60 result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 "$BIN/mpi_ranks" \
    sph_gpu_ranks --test-threads 1)
  ;;
scan)
  # The scan kernels rewritten (16-byte accesses, warp-shuffle tile scan): their own test, the
  # split and one GPU against the build before the session (gpu-carry/sph-gpu-bench-base) at
  # 100 M, the diagnostic timings at 100 M (the diag build carries this code), then the DEM and
  # SPH suites, whose sorts all use the scan.
  (cd solver && item 30 result cuda_scan timeout 120 "$BIN/cuda_scan" --nocapture)
  for b in new base; do split $b 1e8 40 60 150 "scan_$b.jsonl"; done
  diag 1e8 45 diagscan_1e8.out "DIAG sph|scan|classify|ms/step|rror"
  item 130 sph_suites
  (cd solver && item 150 result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1)
  ;;
hash)
  diag 1e8 45 diaghash_1e8.out "DIAG sph|hash_count|ms/step|rror"
  for b in new prev; do split $b 1e8 40 60 150 "hash_$b.jsonl"; done
  (cd solver && item 60 result sph_group timeout 200 "$BIN/sph_group" --test-threads 1)
  (cd solver && item 70 result sph_cuda timeout 200 "$BIN/sph_cuda" --test-threads 1)
  (cd solver && item 30 result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 "$BIN/mpi_ranks" \
    sph_gpu_ranks --test-threads 1)
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
tar -czf "$OUT/session53_${part}.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
echo "session53 $part done at ${SECONDS} s"
