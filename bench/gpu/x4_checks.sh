#!/usr/bin/env bash
# Issue 16 (and what the two-GPU issues still need) on the four-GPU machine (nvidia-h200-x4),
# from the repository root, after PACK_MPI=1 bench/gpu/pack.sh here:
#
#   bench/gpu/x4_checks.sh scale   # the GPUs' links; the falling box bit for bit on 2, 3 and 4
#                                  # GPUs; dense frictional DEM (linear spring-dashpot with
#                                  # sliding and rolling friction) over the GPU sets {0}, {0,1},
#                                  # {0,1,2,3}: strong at 100 M, weak at 100 M per GPU, strong at
#                                  # 400 M ({0,1} against {0,1,2,3}), then the largest run tried
#                                  # on four (1e9 particles), within $BUDGET s (560)
#   bench/gpu/x4_checks.sh scale2  # after the slabs' sizing and parallel build (session 24): the
#                                  # bits on 0,1,2,3 and on 0,0; weak scaling; strong at 400 M
#                                  # on {0,1} (weak's four-GPU run is the other end); the largest
#   bench/gpu/x4_checks.sh capacity # the largest frictional run on four (1e9 tried first), after
#                                  # the capacity changes of session 24's end (not yet run)
#   bench/gpu/x4_checks.sh rest    # what part scale skipped, then balancing on a moving load on
#                                  # 4 GPUs, the DEM group tests on 4 GPUs, and the two-GPU keys
#                                  # (SPH group, GPU ranks against one process, publication)
#                                  # within $BUDGET s
#
# Records: $OUT/multi_gpu_x4.jsonl (dem-gpu-bench scale and multi), $OUT/sph_group_x4.jsonl;
# logs $OUT/x4_<part>.log; with PACK=1 every other file comes back as one archive.
# bench/gpu/multi_records.py turns the records into bench/results/multi_gpu.json.
set -uo pipefail
part=${1:-scale}
export OUT=${OUT:-bench/results/raw/x4}
source "$(dirname "$0")/lib.sh" "x4_$part"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
J="$OUT/multi_gpu_x4.jsonl"
budget=${BUDGET:-560}
# sc ARGS...: dem-gpu-bench scale with the dense frictional case, records to $J.
# Each ends by $budget + 30 s at the latest, so that the call's logs and records come back.
sc() {
  local limit=${LIMIT:-400}
  (( limit > budget + 30 - SECONDS )) && limit=$((budget + 30 - SECONDS))
  echo "+ dem-gpu-bench scale --model linear-friction --phase dense $* (limit $limit s)"
  timeout "$limit" dem-gpu-bench scale --model linear-friction --phase dense "$@" --out "$J" \
    2>&1 | grep -v "^RECORD"
  echo "RESULT scale rc=${PIPESTATUS[0]}"
}
mb4() {
  echo "+ dem-gpu-bench multi $*"
  timeout 300 dem-gpu-bench multi "$@" --out "$J" 2>&1 | grep -v "^RECORD"
  echo "RESULT multi rc=${PIPESTATUS[0]}"
}
# falling_box_bits [DEVICES]: the falling box with friction bit for bit on 2, 3 and 4 slabs of
# DEVICES (default 0,1,2,3; cuda_multi's first test).
falling_box_bits() {
  local d=${1:-0,1,2,3} o
  o="$OUT/cuda_multi_falling_box_${d//,/}.out"
  (cd solver && PARTICLE_SHM_TEST_DEVICES=$d timeout 200 "$BIN/cuda_multi" falling_box \
    --test-threads 1 --nocapture > "$o" 2>&1
   echo "RESULT cuda_multi_falling_box devices $d rc=$?")
  grep -E "identical|test result|panicked" "$o" | cut -c1-200
}
# largest N: N particles on the four GPUs (dense, frictional, a few steps); where they do not
# fit, again with 97 % of the most the refusal says fit.
largest() {
  LIMIT=$((budget + 30 - SECONDS)) sc --particles "$1" --relax 0 --warmup 2 --steps 6 --sets 0,1,2,3
  local max
  max=$(tail -n 1 "$J" | python3 -c 'import json,re,sys
r = json.loads(sys.stdin.read())
m = re.search(r"at most about (\d+) particles fit on these GPUs", r.get("error", ""))
print(int(int(m.group(1)) * 0.97) if m and not r["ran"] else "")' 2>/dev/null)
  if [[ -n $max ]]; then
    echo "retrying with $max particles"
    LIMIT=$((budget + 30 - SECONDS)) sc --particles "$max" --relax 0 --warmup 2 --steps 6 --sets 0,1,2,3
  fi
}
case $part in
scale)
  nvidia-smi topo -m
  echo "NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset}"
  ldconfig -p | grep -q libmpi.so.40 || echo "no libmpi.so.40 here"
  item 40 falling_box_bits
  item 150 sc --particles 1e8 --relax 200 --warmup 5 --steps 40 --sets 0:0,1:0,1,2,3
  item 200 sc --particles 1e8 --relax 200 --warmup 5 --steps 30 --weak on --sets 0:0,1:0,1,2,3
  item 150 sc --particles 4e8 --relax 100 --warmup 3 --steps 20 --sets 0,1:0,1,2,3
  LIMIT=300 item 240 sc --particles 1e9 --relax 0 --warmup 2 --steps 6 --sets 0,1,2,3
  ;;
scale2)
  # Session 24's second call, after slabs take the fast configuration with room for their
  # share before room for every particle, and build on a thread per GPU: the bits on four
  # GPUs and on two slabs of one (built in turn), weak scaling again, strong at 400 M on two
  # (its four-GPU run is weak's last: the same particles, relaxation and GPUs), the largest run.
  falling_box_bits 0,1,2,3
  falling_box_bits 0,0
  item 170 sc --particles 1e8 --relax 100 --warmup 5 --steps 30 --weak on --sets 0:0,1:0,1,2,3
  item 120 sc --particles 4e8 --relax 100 --warmup 3 --steps 20 --sets 0,1
  item 150 largest 1e9
  ;;
capacity)
  # After session 24's capacity work (slabs plan no frame staging of their own; a group whose
  # equal cut does not fit cuts by each GPU's free memory): the falling box bit for bit on
  # four GPUs (slabs sized without staging), then the largest run on four.
  falling_box_bits 0,1,2,3
  item 300 largest 1e9
  ;;
rest)
  # The falling box cut along z for 0.5 s simulated on 4 GPUs, the bed forming in the lowest
  # slab: balancing off, by count, by time.
  item 200 mb4 --particles 2e6 --model linear-friction --phase loose --axis z --steps 50000 \
    --warmup 10 --balance off,count,time --devices 0,1,2,3
  (cd solver && PARTICLE_SHM_TEST_DEVICES=0,1,2,3 item 120 result cuda_multi timeout 300 \
    "$BIN/cuda_multi" --test-threads 1)
  item 250 timeout 300 sph-gpu-bench --particles 2e7,1e8 --steps 60 --warmup 5 --frames 0 \
    --devices 0,1 --balance off,slice,neighbour --out "$OUT/sph_group_x4.jsonl"
  # A relaxed dense pack, bracketed (session 25: the falling case's steps get dearer as it falls).
  item 170 timeout 300 dem-gpu-bench publish --particles 1e8 --model linear-friction --devices 0,1 \
    --phase dense --relax 200 --seconds 5 --warmup 10 --out "$J"
  ;;
esac
if [[ ${PACK:-0} == 1 ]]; then
  (cd "$OUT" && tar -czf "/tmp/x4_$part.tar.gz" --exclude "*.tar.gz" . && mv "/tmp/x4_$part.tar.gz" . \
    && find . -type f ! -name "*.tar.gz" ! -name "x4_*.log" ! -name "*.jsonl" -delete)
fi
