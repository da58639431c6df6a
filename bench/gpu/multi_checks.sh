#!/usr/bin/env bash
# Issue 14 (several GPUs) on a GPU machine, from the repository root:
#
#   bench/gpu/multi_checks.sh [devices]      # devices: 0,0 (default; two slabs on one GPU) or 0,1
#
# Runs, from gpu-carry/bins.tar.xz (bench/gpu/pack.sh):
#   - cuda_multi: f64 and f32 runs on 2 and 3 slabs bit-identical to one GPU (and f64 to the
#     CPU), frames included; balancing moves bounds without changing bits
#   - cuda_parity: one GPU still bit-identical to the CPU
#   - validation tests on the GPU group (PARTICLE_SHM_TEST_BACKENDS=cuda2)
#   - the solver as a user runs it on the built-in case, one GPU and the group
set -uo pipefail
DEV=${1:-0,0}
source "$(dirname "$0")/lib.sh" multi_checks
export PARTICLE_SHM_TEST_DEVICES=$DEV
result() {
  local name=$1; shift
  local t0=$(date +%s)
  timeout 300 "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  tail -n 25 "$OUT/$name.out"
  echo "RESULT $name rc=$rc $(( $(date +%s) - t0 )) s"
}
echo "=== tests (devices $DEV) ==="
(cd solver && result cuda_multi "$BIN/cuda_multi" --test-threads=1 --nocapture)
(cd solver && result cuda_parity "$BIN/cuda_parity" --test-threads=1)
for t in impact_linear energy moving_geometry incline packing; do
  (cd solver && result "validate2_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda2 "$BIN/$t" --test-threads=1)
done
echo "=== solver as a user runs it ==="
for d in 0 "$DEV"; do
  result "solver_devices_${d/,/_}" solver --backend cuda --devices "$d" --particles 1000000 \
    --end-time 0.1 --progress-every 2
done
echo "=== the group as a user runs it: segment, analysis, commands, checkpoint, restart on one GPU ==="
rm -rf /tmp/mg && mkdir -p /tmp/mg
solver --backend cuda --devices "$DEV" --particles 2000000 --end-time 0.3 --name-shm mg1 \
  --output /tmp/mg --progress-every 1 > "$OUT/user_group.out" 2>&1 &
SP=$!
sleep 10
shmctl info mg1
analysis --attach mg1 --once --json | cut -c1-600
shmctl send mg1 pause; sleep 1; shmctl info mg1 | grep -i -E "state|step"
shmctl send mg1 resume
shmctl send mg1 checkpoint
sleep 2
shmctl send mg1 stop
wait $SP; echo "RESULT user_group rc=$?"
tail -n 6 "$OUT/user_group.out"
ls -la /tmp/mg; CK=$(ls -t /tmp/mg/*checkpoint* 2>/dev/null | head -1)
echo "checkpoint: $CK"
if [ -n "$CK" ]; then
  result restart_on_one solver --backend cuda --devices 0 --restart "$CK" --end-time 0.3 --progress-every 1
  result restart_on_group solver --backend cuda --devices "$DEV" --restart "$CK" --end-time 0.3 --progress-every 1
fi
[ -n "${SKIP_BENCH:-}" ] && exit 0
echo "=== one GPU against the group (dem-gpu-bench multi) ==="
J="$OUT/multi_gpu.jsonl"
mb() { echo "+ dem-gpu-bench multi $*"; timeout 300 dem-gpu-bench multi "$@" --devices "$DEV" --out "$J"; }
mb --particles 1e6 --model linear-friction --phase loose --steps 1000
mb --particles 1e7 --model linear --phase dense --relax 1000 --steps 200
mb --particles 1e7 --model linear-friction --phase dense --relax 1000 --steps 200
mb --particles 1e7 --model linear-friction --phase loose --steps 300 --balance count
