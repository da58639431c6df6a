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
#   bench/gpu/session54_checks.sh ncu     # Nsight Compute on the two slabs at 10 M: what bounds
#                                         # sph_classify (about 3x its bytes' time), sph_list_fill
#                                         # and sph_rates_bound on a slab against one GPU's
#   bench/gpu/session54_checks.sh latency # sph_classify and sph_rates_bound reading the position
#                                         # beside the ownership flag: sph_group and the GPU-rank
#                                         # test, per-kernel times of this build and of the
#                                         # build before (gpu-carry/sph-gpu-bench-diaghead) at
#                                         # 10 M and 100 M, the split at 10 M against
#                                         # gpu-carry/sph-gpu-bench-head (no gain: the change
#                                         # was reverted; raw/session54/latency/ has its patch)
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
ncu)
  # Sections enough to say what bounds each kernel (throughput, memory, occupancy, stalls);
  # launches picked by name from the run of two slabs (the one-GPU run before it has no
  # sph_classify or sph_list_fill; its sph_rates_bound launches are the first ~16).
  NCU=$(ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  echo "ncu: ${NCU:-none}"
  S=(--clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats
     --section Occupancy --section WarpStateStats --section SchedulerStats)
  B=(sph-gpu-bench --particles 1e7 --steps 5 --warmup 10 --frames 0 --integrator verlet --devices 0,0 --balance off)
  item 120 timeout 200 "$NCU" "${S[@]}" --kernel-name regex:"sph_classify|sph_list_fill" --launch-skip 12 \
    --launch-count 4 -o "$OUT/classify10m" "${B[@]}" > "$OUT/ncu_classify.out" 2>&1
  item 120 timeout 200 "$NCU" "${S[@]}" --kernel-name regex:sph_rates_bound --launch-skip 12 \
    --launch-count 12 -o "$OUT/bound10m" "${B[@]}" > "$OUT/ncu_bound.out" 2>&1
  for r in classify10m bound10m; do
    "$NCU" -i "$OUT/$r.ncu-rep" --page details > "$OUT/${r}_details.txt" 2>&1
    grep -E "^  sph_|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Stream" \
      "$OUT/${r}_details.txt" | head -150
  done
  rm -f "$OUT"/*.ncu-rep
  ;;
latency)
  (cd solver && item 50 result sph_group timeout 120 "$BIN/sph_group" --test-threads 1)
  P="DIAG sph|classify|rates_bound|ms/step|rror"
  for b in diaghead diag; do sph_diag 1e7 20 "${b}_1e7.out" "$P" $b; done
  for b in diaghead diag; do sph_diag 1e8 45 "${b}_1e8.out" "$P" $b; done
  for b in head new; do sph_split $b 1e7 100 25 100 "latency_$b.jsonl"; done
  (cd solver && item 20 result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 120 "$BIN/mpi_ranks" \
    sph_gpu_ranks --test-threads 1)
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
tar -czf "$OUT/session54_${part}.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
echo "session54 $part done at ${SECONDS} s"
