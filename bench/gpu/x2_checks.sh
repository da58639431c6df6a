#!/usr/bin/env bash
# Issues 14 and 18 on the two-GPU machine (nvidia-h200-x2), from the repository root, after
# bench/gpu/pack.sh here:
#
#   bench/gpu/x2_checks.sh tests   # correctness on GPUs 0 and 1: DEM group (bits against one
#                                  # GPU and the CPU, validation, the user path with a segment,
#                                  # commands, checkpoint, restart on 1 and 2), SPH group, memcheck
#   bench/gpu/x2_checks.sh dem     # issue 14's strong and weak scaling at 100 M (dense phase)
#   bench/gpu/x2_checks.sh more    # balancing on a moving load, publication at 100 M
#   bench/gpu/x2_checks.sh sph     # SPH dam break at 20 M and 100 M, balancing off, slice, neighbour
#   bench/gpu/x2_checks.sh rest    # what a short device budget allows, most wanted first, each
#                                  # item skipped when it would not end within $BUDGET s (540)
#   bench/gpu/x2_checks.sh rest2   # friction 100 M with more set-up time, then SPH, publication
#   bench/gpu/x2_checks.sh next    # what session 11 left: balancing on a load that moves, SPH
#                                  # balancing modes, weak scaling, publication, the user path
#   bench/gpu/x2_checks.sh ranks   # GPU ranks (PACK_MPI=1 pack): tests, mpi_vs_inprocess_2gpu
#                                  # (SKIP_MPI_VS=1: the tests only)
#   bench/gpu/x2_checks.sh next2   # mpi_vs_inprocess_2gpu, then part next's items (session 18)
#   bench/gpu/x2_checks.sh next3   # GPU-rank tests, mpi_vs_inprocess_2gpu with its stages, strong
#                                  # scaling at 100 M, the SPH group, the user path at 100 M
#                                  # (session 18)
#   A lease of the machine (30 minutes, a start of about 2 counted): next5, next4, next6, in that
#   order, one device call each (every command an item of the $BUDGET s, 540 by default):
#   bench/gpu/x2_checks.sh next5   # issue 18: the SPH group at 20 M and 100 M (the speedup keys,
#                                  # each balancing), the exchange beside the boundary's rates
#                                  # (session 56: its bits, then its speed off), SPH over two
#                                  # ranks; if time is left, balancing off from equal counts and
#                                  # the rates kernels' classification (session 55)
#   bench/gpu/x2_checks.sh next4   # issues 14 and 15: cuda_multi, the GPU-rank tests, strong and
#                                  # weak scaling at 100 M (linear), mpi_vs_inprocess_2gpu
#   bench/gpu/x2_checks.sh next6   # issue 14: strong scaling with friction at 100 M, balancing a
#                                  # load that moves, publication at 100 M, the ghost refresh
#                                  # beside the collide on and off, the user path at 100 M
#
# Each part fits one device call (< 10 min); records go to $OUT/multi_gpu_x2.jsonl and
# $OUT/sph_group_x2.jsonl, logs to $OUT/x2_<part>.log. bench/gpu/multi_records.py turns them into
# bench/results/multi_gpu.json.
set -uo pipefail
part=${1:-tests}
export OUT=${OUT:-bench/results/raw/x2}
source "$(dirname "$0")/lib.sh" "x2_$part"
export PARTICLE_SHM_TEST_DEVICES=0,1
J="$OUT/multi_gpu_x2.jsonl"
result() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  tail -n 12 "$OUT/$name.out"
  echo "RESULT $name rc=$rc $(( $(date +%s) - t0 )) s"
}
# item (lib.sh) runs a command when it should end within $budget s (parts rest, rest2, next).
mb() { echo "+ dem-gpu-bench multi $*"; timeout 240 dem-gpu-bench multi "$@" --devices 0,1 --out "$J"; echo "RESULT multi rc=$?"; }
# The built-in case at 100 M as a user runs it on both GPUs, with a viewer snapshot and analysis
# attached to its segment while it runs, then a clean stop.
user_100m() {
  echo "+ solver --backend cuda --devices 0,1 --particles 100000000 --name-shm big"
  solver --backend cuda --devices 0,1 --particles 100000000 --end-time 1 --name-shm big \
    --progress-every 5 > "$OUT/user_100m.out" 2>&1 &
  local sp=$! t=0
  until shmctl info big 2>/dev/null | grep -q "frame_seq: [1-9]"; do
    sleep 2; t=$((t + 2)); (( t > 150 )) && break
  done
  sleep 10
  shmctl info big
  timeout 60 viewer --attach big --snapshot "$OUT/user_100m.png"; echo "RESULT viewer_snapshot rc=$?"
  timeout 60 analysis --attach big --once --json | cut -c1-600; echo "RESULT analysis rc=$?"
  shmctl send big stop
  wait $sp; echo "RESULT user_100m rc=$?"
  tail -n 8 "$OUT/user_100m.out"
}
# vs_ranks CHECK TAG FIELDS ARGS...: the solver with ARGS in one process on GPUs 0 and 1, then
# over two MPI ranks with one GPU each, as users run both (logs inproc_TAG.out, ranks_TAG.out);
# appends {check: CHECK, FIELDS (python dict entries), both steps/s, their ratio, the command}
# to $J.
vs_ranks() {
  local check=$1 tag=$2 fields=$3 a b; shift 3
  local args=("$@")
  echo "+ solver ${args[*]}"
  timeout 280 solver "${args[@]}" > "$OUT/inproc_$tag.out" 2>&1; echo "RESULT inproc rc=$?"
  echo "+ mpirun -np 2 solver ${args[*]}"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 280 mpirun -np 2 --bind-to none \
    solver "${args[@]}" > "$OUT/ranks_$tag.out" 2>&1; echo "RESULT ranks rc=$?"
  a=$(grep -o "finished after .* steps/s" "$OUT/inproc_$tag.out" | grep -o "([0-9.]* steps/s" | tr -d '(' | cut -d' ' -f1)
  b=$(grep -o "finished after .* steps/s" "$OUT/ranks_$tag.out" | grep -o "([0-9.]* steps/s" | tr -d '(' | cut -d' ' -f1)
  tail -n 3 "$OUT/ranks_$tag.out"
  [[ -n $a && -n $b ]] && python3 -c "import json; a,b=float('$a'),float('$b'); print(json.dumps({'check':'$check',$fields,'inprocess_steps_per_s':a,'ranks_steps_per_s':b,'ratio':b/a,'command':'mpirun -np 2 solver ${args[*]} (against: solver ${args[*]})'}))" | tee -a "$J"
}
# Issue 15's mpi_vs_inprocess_2gpu: the built-in case at N particles (default 1e8) for 200 steps
# on GPUs 0 and 1, in one process and on two ranks (records through NCCL or host memory).
mpi_vs_inprocess() {
  local n=${1:-100000000}
  vs_ranks mpi_vs_inprocess "$n" "'particles':$n" --backend cuda --devices 0,1 --particles "$n" \
    --end-time 0.002 --progress-every "${PROGRESS:-10}"
}
# The SPH dam break at dp = ${SPH_DP:-0.005} m (about 8 M particles) on both GPUs: in one process
# and on two ranks (records through NCCL since session 57, before through host memory and MPI),
# one record (session 21).
sph_mpi_vs_inprocess() {
  local dp=${SPH_DP:-0.005} d
  d=$(mktemp -d)
  sed "s/^spacing = 0.04/spacing = $dp/" solver/cases/dambreak.toml > "$d/dambreak_$dp.toml"
  vs_ranks sph_mpi_vs_inprocess "sph_$dp" \
    "'spacing':$dp,'case':'solver/cases/dambreak.toml with spacing = $dp'" \
    --backend cuda --devices 0,1 --case "$d/dambreak_$dp.toml" --end-time 0.01 --progress-every 100
  rm -rf "$d"
}
# The GPU-rank tests with one GPU per rank (DEM and the SPH dam break, whose records take both
# roads since session 57), on both roads of the records: NCCL (the default with one GPU per
# rank) and host memory.
gpu_rank_tests() {
  local wire
  for wire in nccl host; do
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PARTICLE_SHM_TEST_BACKENDS=cuda \
      PARTICLE_SHM_RANK_WIRE=$wire timeout 300 "$BIN/mpi_ranks" gpu_ranks --test-threads 1 \
      > "$OUT/mpi_ranks_gpu_$wire.out" 2>&1
    echo "RESULT mpi_ranks_gpu_$wire rc=$?"; grep -E "test result|panicked" "$OUT/mpi_ranks_gpu_$wire.out"
  done
}
# The SPH dam break on both GPUs at 20 M and 100 M, each balancing mode (an item of the budget).
sph_group_item() {
  item 250 timeout 300 sph-gpu-bench --particles 2e7,1e8 --steps 60 --warmup 5 --frames 0 \
    --devices 0,1 --balance off,slice,neighbour --out "$OUT/sph_group_x2.jsonl"
}
# The exchange beside the boundary's rates (session 56, PARTICLE_SHM_SPH_OVERLAP, on by
# default, so sph_group_item runs it): the f32 group test on both GPUs (overlap on and off, each
# classification, bit for bit against one GPU), then, only if it passed, the dam break at 20 M
# and 100 M on both GPUs with the overlap off, balancing off (against sph_group_item's records).
sph_overlap_item() {
  (cd solver && result sph_group_f32 150 "$BIN/sph_group" f32_group --test-threads 1)
  sph_variant_run sph_overlap_off PARTICLE_SHM_SPH_OVERLAP=off
}
# The slabs' rates kernels classifying the fluid for the next exchange (session 55,
# PARTICLE_SHM_SPH_CLASSIFY=rates): the dam break at 20 M and 100 M on both GPUs with it,
# balancing off (its bits: sph_overlap_item's test), after sph_overlap_item passed.
sph_classify_item() { sph_variant_run sph_classify_rates PARTICLE_SHM_SPH_CLASSIFY=rates; }
# sph_variant_run NAME VAR=VALUE: the dam break at 20 M and 100 M on both GPUs, balancing off,
# with VAR=VALUE, if sph_overlap_item's f32 group test passed.
sph_variant_run() {
  if ! grep -q "test result: ok. 1 passed" "$OUT/sph_group_f32.out" 2>/dev/null; then
    echo "sph_group f32 did not pass: $1 is not timed"
    return
  fi
  env "$2" timeout 200 sph-gpu-bench --particles 2e7,1e8 --steps 60 --warmup 5 \
    --frames 0 --devices 0,1 --balance off --out "$OUT/sph_group_x2.jsonl"
  echo "RESULT $1 rc=$?"
}
# The DEM group's tests on GPUs 0 and 1 (bits against one GPU and the CPU), as an item.
cuda_multi_item() {
  (cd solver && result cuda_multi 300 "$BIN/cuda_multi" --test-threads 1 --nocapture)
  grep -E "identical|searches" "$OUT/cuda_multi.out" | cut -c1-250 | tail -n 8
}
# Part next's items, most wanted first, within $budget s.
next_items() {
  # A load that moves: the falling box cut along z for 0.5 s simulated, while the bed forms in
  # the lower slab (lb_speedup_2gpu; 2000 loose steps moved no bound in session 11).
  item 200 mb --particles 2e6 --model linear-friction --phase loose --axis z --steps 50000 \
    --warmup 10 --balance off,count,time
  sph_group_item
  item 150 mb --particles 1e8 --model linear --phase dense --relax 200 --steps 60 --warmup 5 --weak on
  # A relaxed dense pack, bracketed (session 25: the falling case's steps get dearer as it falls).
  item 170 timeout 300 dem-gpu-bench publish --particles 1e8 --model linear-friction --devices 0,1 \
    --phase dense --relax 200 --seconds 5 --warmup 10 --out "$J"
  item 200 user_100m
}
case $part in
tests)
  nvidia-smi topo -m
  echo "NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset}"
  # DEM: cuda_multi, cuda_parity, validation on the group, the user path (multi_checks.sh).
  SKIP_BENCH=1 OUT=$OUT bash bench/gpu/multi_checks.sh 0,1 2>&1 | grep -E "RESULT|test result|panicked|error|slabs|checkpoint:"
  # SPH: sph_group (bits against one GPU), sph_cuda, the user path with --devices 0,1.
  OUT=$OUT bash bench/gpu/sph_group_checks.sh tests 0,1 2>&1 | grep -E "RESULT|test result|panicked|error"
  result memcheck 200 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
    solver --backend cuda --devices 0,1 --particles 20000 --end-time 0.002 --progress-every 1
  ;;
dem)
  mb --particles 1e8 --model linear --phase dense --relax 300 --steps 100 --warmup 10
  mb --particles 1e8 --model linear-friction --phase dense --relax 300 --steps 60 --warmup 5
  mb --particles 1e8 --model linear --phase dense --relax 200 --steps 60 --warmup 5 --weak on
  ;;
more)
  # A load that moves: the falling box cut along z (the particles fall into the lower slab).
  mb --particles 1e7 --model linear-friction --phase loose --axis z --steps 3000 --warmup 10 \
    --balance off,count,time
  echo "+ dem-gpu-bench publish (group)"
  timeout 200 dem-gpu-bench publish --particles 1e8 --model linear-friction --devices 0,1 \
    --seconds 8 --warmup 20 --out "$J"
  echo "RESULT publish rc=$?"
  ;;
sph)
  timeout 560 sph-gpu-bench --particles 2e7,1e8 --steps 100 --warmup 10 --frames 0 \
    --devices 0,1 --balance off,slice,neighbour --out "$OUT/sph_group_x2.jsonl"
  echo "RESULT sph_bench rc=$?"
  ;;
rest)
  budget=${BUDGET:-540}
  item 170 mb --particles 1e8 --model linear-friction --phase dense --relax 200 --steps 40 --warmup 5
  item 90 mb --particles 1e8 --model linear --phase dense --relax 300 --steps 100 --warmup 10
  item 60 mb --particles 1e7 --model linear-friction --phase loose --axis z --steps 2000 --warmup 10 \
    --balance off,count,time
  item 200 timeout 230 sph-gpu-bench --particles 2e7,1e8 --steps 60 --warmup 5 --frames 0 \
    --devices 0,1 --balance off,slice --out "$OUT/sph_group_x2.jsonl"
  item 80 timeout 120 dem-gpu-bench publish --particles 1e8 --model linear-friction --devices 0,1 \
    --seconds 5 --warmup 20 --out "$J"
  item 150 mb --particles 1e8 --model linear --phase dense --relax 200 --steps 60 --warmup 5 --weak on
  item 200 user_100m
  ;;
rest2)
  # The second call of session 11: the frictional 100 M strong case with room for the group's
  # set-up (the first try ran into mb's 240 s limit while the group was built), then SPH and
  # publication, within $BUDGET s.
  budget=${BUDGET:-540}
  echo "+ dem-gpu-bench multi --particles 1e8 --model linear-friction --phase dense --relax 200 --steps 40 --warmup 5"
  t0=$SECONDS
  timeout 400 dem-gpu-bench multi --particles 1e8 --model linear-friction --phase dense \
    --relax 200 --steps 40 --warmup 5 --devices 0,1 --out "$J"
  echo "RESULT multi rc=$? $((SECONDS - t0)) s"
  item 200 timeout 230 sph-gpu-bench --particles 2e7,1e8 --steps 60 --warmup 5 --frames 0 \
    --devices 0,1 --balance off,slice --out "$OUT/sph_group_x2.jsonl"
  item 80 timeout 120 dem-gpu-bench publish --particles 1e8 --model linear-friction --devices 0,1 \
    --seconds 5 --warmup 20 --out "$J"
  ;;
next)
  # What session 11 left for the x2 machine, most wanted first, within $BUDGET s (the SPH
  # moves on the device and the warp-aggregated layer counts landed in session 12).
  budget=${BUDGET:-540}
  next_items
  ;;
ranks)
  # Issue 15 on two GPUs (after PACK_MPI=1 bench/gpu/pack.sh): the GPU-rank tests with one GPU
  # per rank, then mpi_vs_inprocess_2gpu.
  gpu_rank_tests
  [[ ${SKIP_MPI_VS:-0} == 1 ]] || mpi_vs_inprocess "${N:-100000000}"
  ;;
next2)
  # Session 18: mpi_vs_inprocess_2gpu (after PACK_MPI=1 bench/gpu/pack.sh), then part next's
  # items, within $BUDGET s.
  budget=${BUDGET:-540}
  mpi_vs_inprocess "${N:-100000000}"
  next_items
  ;;
next5)
  # The first call of a lease (issue 18): the SPH group's speedups and imbalance at 20 M and
  # 100 M, each balancing, from equal estimated work; the exchange beside the boundary's rates
  # on and off; SPH over ranks; then, if time is left, balancing off from equal counts and the
  # rates kernels' classification.
  budget=${BUDGET:-540}
  sph_group_item
  item 150 sph_overlap_item
  item 60 sph_mpi_vs_inprocess
  item 120 timeout 200 sph-gpu-bench --particles 2e7,1e8 --steps 60 --warmup 5 --frames 0 \
    --devices 0,1 --balance off --first-cut count --out "$OUT/sph_group_x2.jsonl"
  item 110 sph_classify_item
  ;;
next4)
  # The second call (issues 14 and 15): the DEM group's bits, the GPU ranks' tests, strong and
  # weak scaling at 100 M (linear), mpi_vs_inprocess_2gpu; every command an item of the budget.
  budget=${BUDGET:-540}
  item 70 cuda_multi_item
  item 120 gpu_rank_tests
  item 120 mb --particles 1e8 --model linear --phase dense --relax 300 --steps 100 --warmup 10
  item 150 mb --particles 1e8 --model linear --phase dense --relax 200 --steps 60 --warmup 5 --weak on
  item 120 mpi_vs_inprocess "${N:-100000000}"
  ;;
next6)
  # The third call (issue 14): strong scaling with friction at 100 M, balancing a moving load,
  # publication at 100 M, the ghost refresh beside the collide (on and off), the user path.
  budget=${BUDGET:-540}
  item 170 mb --particles 1e8 --model linear-friction --phase dense --relax 200 --steps 40 --warmup 5
  item 200 mb --particles 2e6 --model linear-friction --phase loose --axis z --steps 50000 \
    --warmup 10 --balance off,count,time
  # A relaxed dense pack, bracketed (session 25: the falling case's steps get dearer as it falls),
  # a step at a time so that frames can come at 10 a second (session 44: 10 steps at a time
  # capped one GPU at 100 M near 1.6 frames/s), frames as the solver's default (contact counts
  # too), packed at once and by the collides alternating (session 45). About 100 s on one H200
  # since session 46 (the newest frame checked against positions alone, not the whole state).
  item 120 timeout 330 dem-gpu-bench publish --particles 1e8 --model linear-friction --devices 0,1 \
    --phase dense --relax 200 --seconds 4 --warmup 10 --batch 1 --frame-pack both --contacts on \
    --out "$J"
  for o in on off; do
    item 60 mb --particles 1e7 --model linear-friction --phase dense --relax 300 --steps 200 --warmup 10 --overlap $o
  done
  item 200 user_100m
  ;;
next3)
  # Session 18, after the GPU ranks' frames were made faster (raw bytes, MPI kept moving while a
  # rank posts, page-locked downloads): the GPU-rank tests (frames bit for bit),
  # mpi_vs_inprocess_2gpu with the stages per step (--progress-every 2), strong scaling at
  # 100 M, then the SPH group at 20 M and 100 M and the user path at 100 M, within $BUDGET s.
  budget=${BUDGET:-540}
  gpu_rank_tests
  PROGRESS=2 mpi_vs_inprocess "${N:-100000000}"
  grep -E "per step|a frame takes" "$OUT/ranks_${N:-100000000}.out" | cut -c1-330 | tail -n 6
  # Strong scaling against one GPU as it runs now (with its Verlet skin, which a group lacks).
  item 120 mb --particles 1e8 --model linear --phase dense --relax 300 --steps 100 --warmup 10
  sph_group_item
  item 200 user_100m
  ;;
esac
# PACK=1: at most 8 files come back from the device, so everything but the logs of the parts and
# the records travels as one archive.
if [[ ${PACK:-0} == 1 ]]; then
  (cd "$OUT" && tar -czf "/tmp/x2_$part.tar.gz" --exclude "*.tar.gz" . && mv "/tmp/x2_$part.tar.gz" . \
    && find . -type f ! -name "*.tar.gz" ! -name "x2_*.log" ! -name "*.jsonl" -delete)
fi
