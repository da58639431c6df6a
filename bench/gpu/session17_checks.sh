#!/usr/bin/env bash
# Session 17 (2026-11-24) on one GPU, from the repository root, after bench/gpu/pack.sh
# (issue 13: what bounds the dense frictional collide).
#   bench/gpu/session17_checks.sh ncu   # Nsight Compute's full set for one dem_collide launch of
#                                       # the 10 M dense bed, linear with friction, after the
#                                       # relaxation (details page, and the SASS source page as
#                                       # CSV for the stall reasons per instruction)
#   bench/gpu/session17_checks.sh ab    # the collide's loads moved ahead (the next list entry,
#                                       # the next expected history entry) against the build
#                                       # before (gpu-carry/bins_old.tar.xz), alternating: 10 M
#                                       # dense linear with friction and Hertz, twice each; the
#                                       # main job; the DEM parity suite
# Logs under $OUT.
set -uo pipefail
part=${1:-ncu}
export OUT=${OUT:-bench/results/raw/session17}
source "$(dirname "$0")/lib.sh" "session17_${part}"
NCU=/opt/nvidia/nsight-compute/2025.3.1/ncu
if [[ $part == ncu ]]; then
  model=${MODEL:-linear-friction}
  n=${N:-1e7}
  # Kernel line info for the source page (NVRTC option; the cache key holds it).
  export PARTICLE_SHM_NVRTC_OPTIONS="-lineinfo"
  timeout 500 $NCU --set full --import-source yes --kernel-name regex:dem_collide --launch-skip 2100 --launch-count 1 \
    -o "$OUT/collide_$model" -f \
    dem-gpu-bench bench --particles "$n" --model "$model" --phase dense --relax 2000 --steps 200 \
    > "$OUT/ncu_run_$model.out" 2>&1
  tail -n 5 "$OUT/ncu_run_$model.out"
  $NCU --import "$OUT/collide_$model.ncu-rep" --page details > "$OUT/collide_${model}_details.txt" 2>&1
  $NCU --import "$OUT/collide_$model.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/collide_${model}_sass.csv" 2>&1
  xz -9 "$OUT/collide_${model}_sass.csv"
  rm -f "$OUT/collide_$model.ncu-rep"
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|DRAM Throughput|Executed Ipc" \
    "$OUT/collide_${model}_details.txt" | head -30
fi
if [[ $part == ab ]]; then
  OLD=/tmp/pshm-old
  rm -rf "$OLD" && mkdir -p "$OLD" && tar -xJf gpu-carry/bins_old.tar.xz -C "$OLD"
  J="$OUT/ab.jsonl"
  for round in 1 2; do
    for v in old new; do
      for model in linear-friction hertz; do
        b=dem-gpu-bench; [[ $v == old ]] && b=$OLD/dem-gpu-bench
        echo "== $v $model (round $round)"
        timeout 300 $b bench --particles 1e7 --model $model --phase dense --relax 2000 --steps 200 \
          --out "$J" 2>&1 | grep -E "steps/s" | tail -n 2
      done
    done
  done
  OUT="$OUT/main_job" bash bench/gpu/main_job.sh
  cd solver
  RESULT_PATTERN="test result|panicked|FAILED" result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  cd ..
fi
