#!/usr/bin/env bash
# Session 12 (2026-11-24) on a GPU machine, from the repository root, after bench/gpu/pack.sh:
#   bench/gpu/session12_checks.sh verify [DEVICES]
# What changed: SPH slab moves on the device (every GPU holds every boundary particle in one
# order; ownership flags and halo densities by layer, read from the owner over peer access;
# no host placement), and per-layer counts with one atomic per distinct layer in a warp
# (dem_layer_counts, sph_layer_count). DEVICES: 0,0 (two slabs on one GPU) or 0,1 (two GPUs).
set -uo pipefail
part=${1:-verify}
devices=${2:-0,0}
export OUT=${OUT:-bench/results/raw/session12}
source "$(dirname "$0")/lib.sh" "session12_${part}_${devices/,/_}"
export PARTICLE_SHM_TEST_DEVICES=$devices
if [[ $part == verify ]]; then
  cd solver
  result sph_group timeout 300 "$BIN/sph_group" --nocapture --test-threads 1
  result sph_cuda timeout 200 "$BIN/sph_cuda" --test-threads 1
  result cuda_multi timeout 250 "$BIN/cuda_multi" --test-threads 1
  cd ..
  # The balancing's cost: SPH moves (each one 3 s / 9 s of host work at 20 M / 100 M on two
  # H200s in session 11) and DEM counts (7 ms each at 10 M).
  echo "+ sph-gpu-bench --particles 4e6 --devices $devices --balance off,slice,neighbour"
  timeout 200 sph-gpu-bench --particles 4e6 --steps 60 --warmup 5 --frames 0 --devices "$devices" \
    --balance off,slice,neighbour --out "$OUT/sph_group.jsonl" 2>&1 | tail -n 6
  echo "RESULT sph_bench rc=$?"
  echo "+ dem-gpu-bench multi --particles 2e6 --phase loose --axis z --balance off,count"
  timeout 150 dem-gpu-bench multi --particles 2e6 --model linear-friction --phase loose --axis z \
    --steps 3000 --warmup 10 --balance off,count --devices "$devices" --out "$OUT/multi.jsonl" 2>&1 | tail -n 6
  echo "RESULT dem_multi rc=$?"
  result memcheck_sph timeout 200 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
    sph-gpu-bench --particles 2e5 --steps 40 --warmup 2 --frames 0 --devices "$devices" --balance slice
fi
echo "done: $part"
