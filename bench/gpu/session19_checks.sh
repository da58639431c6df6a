#!/usr/bin/env bash
# Session 19 (2026-11-25) on one GPU, from the repository root, after bench/gpu/pack.sh.
#   bench/gpu/session19_checks.sh skin   # issue 14: the Verlet skin on a GPU group (two slabs on
#                                        # GPU 0: the exchange and the refresh are the same
#                                        # between two streams): cuda_multi (bits against one GPU
#                                        # with and without the skin, forced searches), cuda_parity,
#                                        # then one GPU against two slabs on it, 10 M dense linear
#                                        # and with friction (the ratio is the slabs' cost)
#   bench/gpu/session19_checks.sh tests  # cuda_multi alone (after the lock-step tests)
#   bench/gpu/session19_checks.sh ranks  # GPU ranks with the skin (PACK_MPI=1 pack): cuda_multi,
#                                        # the GPU-rank tests (two ranks share GPU 0: host road),
#                                        # then the built-in case at ${N:-2e7} on two slabs of GPU 0
#                                        # in one process and on two ranks, the solver's steps/s
#   bench/gpu/session19_checks.sh last   # the final build: the machine's first main job, 10 M
#                                        # dense with friction, the DEM device suite, and the
#                                        # validation tests on a group of two slabs (cuda2: now
#                                        # with the skin)
#   bench/gpu/session19_checks.sh publish  # a group's frame timed per GPU (pack, copy), two slabs
#                                        # of GPU 0 at 10 M and 50 M, and cuda_multi (frames)
# Logs under $OUT.
set -uo pipefail
part=${1:-skin}
export OUT=${OUT:-bench/results/raw/session19}
source "$(dirname "$0")/lib.sh" "session19_${part}"
if [[ $part == skin ]]; then
  (cd solver && result cuda_multi timeout 420 "$BIN/cuda_multi" --test-threads 1 --nocapture)
  grep -E "identical|searches|slabs|panicked" "$OUT/cuda_multi.out" | cut -c1-300 | head -n 40
  (cd solver && result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1)
  J="$OUT/multi_one_gpu.jsonl"
  for m in linear linear-friction; do
    echo "+ dem-gpu-bench multi --particles 1e7 --model $m --devices 0,0"
    timeout 200 dem-gpu-bench multi --particles 1e7 --model $m --phase dense --relax 300 --steps 100 \
      --warmup 10 --devices 0,0 --out "$J" 2>&1 | grep -E "one GPU:|balance|group:" | cut -c1-400
  done
fi
if [[ $part == tests ]]; then
  (cd solver && result cuda_multi timeout 420 "$BIN/cuda_multi" --test-threads 1 --nocapture)
  grep -E "identical|searches|panicked|differs" "$OUT/cuda_multi.out" | cut -c1-300 | head -n 40
fi
if [[ $part == ranks ]]; then
  (cd solver && result cuda_multi timeout 300 "$BIN/cuda_multi" --test-threads 1)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 400 "$BIN/mpi_ranks" gpu_ranks --test-threads 1)
  n=${N:-20000000}
  args=(--backend cuda --devices 0,0 --particles "$n" --end-time 0.002 --progress-every 10)
  echo "+ solver ${args[*]}"
  timeout 200 solver "${args[@]}" > "$OUT/inproc_$n.out" 2>&1; echo "RESULT inproc rc=$?"
  grep -E "finished|skin|Verlet" "$OUT/inproc_$n.out" | cut -c1-300 | tail -n 4
  echo "+ mpirun -np 2 solver ${args[*]}"
  timeout 200 mpirun -np 2 --bind-to none solver "${args[@]}" > "$OUT/ranks_$n.out" 2>&1; echo "RESULT ranks rc=$?"
  grep -E "finished|skin|Verlet" "$OUT/ranks_$n.out" | cut -c1-300 | tail -n 5
fi
if [[ $part == last ]]; then
  rm -rf "$HOME/.cache/particle-shm" "$HOME/.nv/ComputeCache"
  echo "== main job, the machine's first run"; OUT="$OUT/main_job" bash bench/gpu/main_job.sh | tail -n 1
  J="$OUT/dem_gpu.jsonl"
  run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200
  dem_suite
  pushd solver >/dev/null || exit
  for t in impact_linear energy incline packing moving_geometry; do
    result "group_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda2 timeout 200 "$BIN/$t" --test-threads 1
  done
  popd >/dev/null || exit
fi
if [[ $part == publish ]]; then
  J="$OUT/publish_group.jsonl"
  for n in 1e7 5e7; do
    echo "+ dem-gpu-bench publish --particles $n --model linear-friction --devices 0,0 --seconds 4 --warmup 20"
    timeout 200 dem-gpu-bench publish --particles $n --model linear-friction --devices 0,0 --seconds 4 \
      --warmup 20 --out "$J" 2>&1 | grep -E "publish on|per frame|error|Error"
  done
  (cd solver && result cuda_multi timeout 300 "$BIN/cuda_multi" --test-threads 1)
fi
