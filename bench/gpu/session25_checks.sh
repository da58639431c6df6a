#!/usr/bin/env bash
# Session 25 (2026-12-01) on one GPU (only nvidia-h200 was lent), from the repository root,
# after PACK_MPI=1 bench/gpu/pack.sh:
#
#   bench/gpu/session25_checks.sh lb     # the balancing's guard (decomp::balance::MoveGuard) on
#                                        # the moving load of session 24 (the falling box cut
#                                        # along z, 2 M particles with friction) on 4 and on 2
#                                        # slabs sharing GPU 0: balancing off, count (unguarded)
#                                        # and time (guarded): moves kept and undone, steps/s
#   bench/gpu/session25_checks.sh one    # lb, then the DEM device suite on the current tree
#                                        # (parity and validation on the GPU, groups as slabs of
#                                        # GPU 0) and the SPH suites, within $BUDGET s (560)
#   bench/gpu/session25_checks.sh two    # GPU ranks through host memory (tests), two ranks
#                                        # against two slabs on GPU 0, the README's main job
#                                        # (issue 13's 30 s)
#   bench/gpu/session25_checks.sh three  # after the host road's page-locked buffers: the GPU-rank
#                                        # tests and two ranks against two slabs on GPU 0 again
#
# Records: $OUT/multi_gpu_x1.jsonl (dem-gpu-bench multi), $OUT/main_job/main_job.jsonl; logs
# $OUT/session25_<part>.log and $OUT/*.out.
set -uo pipefail
part=${1:-one}
export OUT=${OUT:-bench/results/raw/session25}
source "$(dirname "$0")/lib.sh" "session25_${part}"
J="$OUT/multi_gpu_x1.jsonl"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
budget=${BUDGET:-560}
mb() {
  echo "+ dem-gpu-bench multi $*"
  timeout 300 dem-gpu-bench multi "$@" --out "$J" 2>&1 | grep -v "^RECORD"
  echo "RESULT multi rc=${PIPESTATUS[0]}"
}
lb() {
  local d
  for d in 0,0,0,0 0,0; do
    item 90 mb --particles 2e6 --model linear-friction --phase loose --axis z --steps 20000 \
      --warmup 10 --balance off,count,time --devices "$d"
  done
}
gpu_rank_tests() {
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda PARTICLE_SHM_RANK_WIRE=host \
    timeout 300 "$BIN/mpi_ranks" gpu_ranks --test-threads 1)
}
# The built-in case at 2e7 particles for 0.002 s simulated on GPU 0: two slabs in one process
# against two MPI ranks sharing the GPU (records through host memory), a proxy for
# mpi_vs_inprocess_2gpu while no two-GPU machine is lent (0.057 in session 18, before the rank
# frames' byte format and the shared skin schedule).
ranks_shared() {
  local n=${1:-20000000} a b args
  args=(--backend cuda --devices 0,0 --particles "$n" --end-time 0.002 --progress-every 10)
  echo "+ solver ${args[*]}"
  timeout 200 solver "${args[@]}" > "$OUT/inproc_shared.out" 2>&1; echo "RESULT inproc rc=$?"
  echo "+ mpirun -np 2 solver ${args[*]}"
  timeout 200 mpirun -np 2 --bind-to none solver "${args[@]}" > "$OUT/ranks_shared.out" 2>&1
  echo "RESULT ranks rc=$?"
  a=$(grep -o "finished after .* steps/s" "$OUT/inproc_shared.out" | grep -o "([0-9.]* steps/s" | tr -d '(' | cut -d' ' -f1)
  b=$(grep -o "finished after .* steps/s" "$OUT/ranks_shared.out" | grep -o "([0-9.]* steps/s" | tr -d '(' | cut -d' ' -f1)
  tail -n 3 "$OUT/ranks_shared.out"
  [[ -n $a && -n $b ]] && python3 -c "import json; a,b=float('$a'),float('$b'); print(json.dumps({'check':'mpi_vs_inprocess_shared_gpu','particles':$n,'inprocess_steps_per_s':a,'ranks_steps_per_s':b,'ratio':b/a,'command':'mpirun -np 2 --bind-to none solver ${args[*]} (against: solver ${args[*]})'}))" | tee -a "$J"
}
suite1() {
  item 240 dem_suite
  item 150 sph_suites
}
suite2() {
  item 120 gpu_rank_tests
  item 120 ranks_shared
  item 60 bash -c 'OUT="$OUT/main_job" bash bench/gpu/main_job.sh | tail -n 1'
}
case $part in
lb) lb ;;
one) lb; suite1 ;;
two) suite2 ;;
three) item 120 gpu_rank_tests; item 120 ranks_shared ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session25 $part done in $SECONDS s"
