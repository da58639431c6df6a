#!/usr/bin/env bash
# Session 43 (2026-12-04) on one GPU (only nvidia-h200 was lent). From the repository root,
# after PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session43_checks.sh checks   # the fluid's frame packed by the next step's first
#                                          # gather: the frames test first, the SPH suites, the
#                                          # GPU ranks (MPI, sph_pack_part) and a group of two
#                                          # slabs against one GPU's frames, the user path
#   bench/gpu/session43_checks.sh publish  # the publication share: 1 M and 10 M, 100 M twice;
#                                          # sph_gather and sph_pack at 100 M (Nsight Compute)
#   bench/gpu/session43_checks.sh split    # what each half gives: the shipped bench against
#                                          # gpu-carry/sph-gpu-bench-nodefer (this build with
#                                          # PSHM_NO_DEFER=1 packing the whole frame in sph_pack,
#                                          # a build not committed) at 100 M, A B B A, and at 1 M
#                                          # and 10 M; the gather that packs, at 100 M
#   bench/gpu/session43_checks.sh dem      # dem_pack with its loads before its stores: the
#                                          # DEM suites that publish (null outputs, parity, the
#                                          # group), dem_pack's time at 100 M against
#                                          # gpu-carry/dem-gpu-bench-old (the build before it),
#                                          # and the publication share of both on a relaxed
#                                          # dense 100 M pack with friction (ran on a build
#                                          # with raw/session43/dem/dem_pack_loads_first.patch,
#                                          # reverted after it: no gain; the old binary's share
#                                          # fell past the budget and ran alone after it:
#                                          # timeout 250 gpu-carry/dem-gpu-bench-old publish
#                                          # ... --out $OUT/dem43_old.jsonl)
#
# Logs $OUT/session43_<part>.log, *.out; records $OUT/sph43.jsonl; one archive of it all.
set -uo pipefail
part=${1:-checks}
export OUT=${OUT:-bench/results/raw/session43}
source "$(dirname "$0")/lib.sh" "session43_${part}"
budget=${BUDGET:-560}
J="$OUT/sph43.jsonl"
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|ms/step|frames"
RESULT_LINES=30
NCU=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
launches() {  # launches CSV: each launch of an Nsight Compute CSV, its time and DRAM bytes
  python3 bench/gpu/ncu_summary.py "$1" --launches
}
case $part in
checks)
  (cd solver && item 60 result frames_test timeout 120 "$BIN/sph_cuda" frames_p --nocapture)
  item 150 sph_suites
  (cd solver && item 200 result mpi_sph_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 240 \
    "$BIN/mpi_ranks" sph_gpu_ranks --nocapture)
  item 60 sph_user_path
  ;;
publish)
  item 60 result publish_frames timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --integrator verlet --out "$J"
  for round in 1 2; do
    item 60 result "publish_100m_$round" timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 \
      --frames 2 --integrator verlet --out "$J"
  done
  item 40 result publish_symplectic timeout 150 sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 \
    --frames 5 --out "$J"
  # The frame's kernels at 100 M: the gather that packs the fluid (one launch of each step
  # packs, the other State/Half gathers do not) and sph_pack (the boundary, and the one frame
  # the bench waits for alone).
  $NCU --clock-control none --cache-control none --kernel-name regex:"sph_gather|sph_pack" --launch-count 12 \
    --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum sph-gpu-bench \
    --particles 1e8 --steps 2 --warmup 1 --frames 1 --integrator verlet > "$OUT/ncu_frame_1e8.csv" \
    2> "$OUT/ncu_frame_1e8.err"
  python3 bench/gpu/ncu_summary.py "$OUT/ncu_frame_1e8.csv"
  launches "$OUT/ncu_frame_1e8.csv"
  ;;
split)
  ND="env PSHM_NO_DEFER=1 $PWD/gpu-carry/sph-gpu-bench-nodefer"
  item 20 result nodefer_frames timeout 200 $ND --particles 1e6,1e7 --steps 200 --warmup 20 --frames 5 \
    --integrator verlet --out "$J"
  for v in shipped nodefer nodefer shipped; do
    b=sph-gpu-bench; [[ $v == nodefer ]] && b=$ND
    item 40 result "split_100m_$v" timeout 250 $b --particles 1e8 --steps 20 --warmup 3 --frames 2 \
      --integrator verlet --out "$J"
  done
  # The kernels of the bench's frames loop (after 2 + 4 + 4 gathers and the lone frame's 2
  # packs): a step, the boundary's pack, the step whose State gather packs the fluid.
  $NCU --clock-control none --cache-control none --kernel-name regex:"sph_gather|sph_pack" --launch-skip 12 \
    --launch-count 9 --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    sph-gpu-bench --particles 1e8 --steps 2 --warmup 1 --frames 1 --integrator verlet > "$OUT/ncu_loop_1e8.csv" \
    2> "$OUT/ncu_loop_1e8.err"
  launches "$OUT/ncu_loop_1e8.csv"
  ;;
dem)
  pushd solver >/dev/null || exit
  for t in cuda_pack_null_outputs cuda_parity cuda_multi; do
    item 90 result "dem_$t" timeout 200 "$BIN/$t" --test-threads 1
  done
  popd >/dev/null || exit
  OLD=$PWD/gpu-carry/dem-gpu-bench-old
  for v in new old; do
    b=dem-gpu-bench; [[ $v == old ]] && b=$OLD
    $NCU --clock-control none --cache-control none --kernel-name dem_pack --launch-count 3 --csv --page raw \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum $b publish --particles 1e8 \
      --model linear-friction --seconds 1 --warmup 2 > "$OUT/ncu_dem_pack_$v.csv" 2> "$OUT/ncu_dem_pack_$v.err"
    echo "-- dem_pack $v"; launches "$OUT/ncu_dem_pack_$v.csv"
  done
  for v in new old; do
    b=dem-gpu-bench; [[ $v == old ]] && b=$OLD
    echo "+ $v: dem-gpu-bench publish --particles 1e8 --model linear-friction --phase dense --relax 200 --seconds 5 --warmup 10"
    item 120 timeout 250 $b publish --particles 1e8 --model linear-friction --phase dense --relax 200 \
      --seconds 5 --warmup 10 --out "$OUT/dem43_$v.jsonl" 2>&1 | grep -E "publish|per frame|share|rror"
  done
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session43 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session43_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session43_$part.tgz" "$OUT/"
