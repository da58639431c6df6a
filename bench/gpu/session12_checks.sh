#!/usr/bin/env bash
# Session 12 (2026-11-24) on a GPU machine, from the repository root, after bench/gpu/pack.sh:
#   bench/gpu/session12_checks.sh verify [DEVICES]
#   bench/gpu/session12_checks.sh final [DEVICES]   # the device suites once more on the last build
#   bench/gpu/session12_checks.sh ranks [DEVICES]   # after PACK_MPI=1 bench/gpu/pack.sh: GPU ranks
#     (mpirun, one GPU per rank; records through host memory): bits against one GPU, restarts,
#     and steps/s of 2 ranks against the in-process group on the same GPUs
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
if [[ $part == final ]]; then
  cd solver
  result cuda_multi timeout 250 "$BIN/cuda_multi" --test-threads 1
  result cuda_parity timeout 200 "$BIN/cuda_parity" --test-threads 1
  result sph_group timeout 200 "$BIN/sph_group" --test-threads 1
  result sph_cuda timeout 200 "$BIN/sph_cuda" --test-threads 1
  for t in process_features moving_geometry energy; do
    result "validate_${t}_cuda2" env PARTICLE_SHM_TEST_BACKENDS=cuda2 timeout 200 "$BIN/$t" --test-threads 1
  done
  cd ..
fi
if [[ $part == ranks ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  cd solver
  result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 500 "$BIN/mpi_ranks" gpu_ranks --nocapture --test-threads 1
  cd ..
  # mpi_vs_inprocess: the same run (the built-in case, 1000 steps of N particles) on 2 ranks
  # and in one process on the same devices; steps/s from the solver's own last line. The ranks
  # also without frames (publication only at the start and the end), to separate the two.
  for n in ${SIZES:-2000000}; do
    echo "+ solver --backend cuda --devices $devices --particles $n --end-time 0.01 (one process)"
    timeout 200 solver --backend cuda --devices "$devices" --particles "$n" --end-time 0.01 --progress-every 5 \
      > "$OUT/inproc_$n.out" 2>&1; echo "RESULT inproc_$n rc=$?"; grep -E "finished|per step" "$OUT/inproc_$n.out" | tail -n 2
    for frames in on off; do
      extra=(); [[ $frames == off ]] && extra=(--refresh-wall-ms 0 --refresh 1)
      echo "+ mpirun -np 2 solver --backend cuda --devices $devices --particles $n --end-time 0.01 ${extra[*]}"
      timeout 240 mpirun -np 2 --bind-to none solver --backend cuda --devices "$devices" --particles "$n" \
        --end-time 0.01 --progress-every 5 "${extra[@]}" > "$OUT/ranks_${n}_frames_$frames.out" 2>&1
      echo "RESULT ranks_${n}_frames_$frames rc=$?"
      grep -E "finished|per step" "$OUT/ranks_${n}_frames_$frames.out" | tail -n 2
    done
  done
fi
echo "done: $part"
