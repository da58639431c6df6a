#!/usr/bin/env bash
# Issue 12, items 6 and 8, on the GPU machine, from the repository root:
#
#   bench/gpu/physics_checks.sh
#
# After the physics twins (kick/spin_kick/drift, contact-point velocities, effective inertia,
# wall velocity, the one history partner encoding) replaced the kernels' inline formulas, and
# the frame field mask made forces optional:
#   - physics_parity: every formula CPU vs GPU in f64 on 200,000 random inputs, equal bits
#   - cuda_parity: the GPU f64 run bit-identical to the CPU (history included: one encoding)
#   - cuda_pack_null_outputs: the frame pack skips fields the segment does not reserve
#   - the dem_gpu benchmark records most exposed to the kernel change (JSON lines in
#     $OUT/dem_gpu.jsonl), to compare with bench/results/dem_gpu.json (3 % budget)
#   - the solver on the built-in case at 1 M particles with default fields and with --fields
#     including force (the frame's fields as read back by shmctl info)
set -uo pipefail
source "$(dirname "$0")/lib.sh" physics_checks
result() {
  local name=$1; shift
  "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  tail -n 12 "$OUT/$name.out"
  echo "RESULT $name rc=$rc"
}
echo "=== tests ==="
(cd solver && result physics_parity "$BIN/physics_parity" --nocapture)
(cd solver && result cuda_parity "$BIN/cuda_parity" --test-threads=1 --nocapture)
(cd solver && result cuda_pack_null_outputs "$BIN/cuda_pack_null_outputs" --test-threads=1)
for t in impact_linear moving_geometry; do
  (cd solver && result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda "$BIN/$t" --test-threads=1)
done
echo "=== benchmarks ==="
J="$OUT/dem_gpu.jsonl"
run() { echo "+ dem-gpu-bench $*"; dem-gpu-bench "$@" --out "$J"; }
run bench --particles 1e6 --model linear --phase loose --steps 500
run bench --particles 1e7 --model linear --phase loose --steps 500
run bench --particles 1e7 --model linear --phase dense --relax 2000 --steps 300
for m in linear-friction hertz; do
  run bench --particles 1e7 --model $m --phase loose --steps 300
  run bench --particles 1e7 --model $m --phase dense --relax 2000 --steps 200
done
echo "=== solver, built-in case, 1 M particles ==="
result solver_default solver --name-shm g1 --particles 1000000 --end-time 0.01 --progress-every 1 --keep-shm
result info_default shmctl info g1
result solver_force solver --name-shm g2 --particles 1000000 --end-time 0.01 --progress-every 1 --fields pos,vel,force --keep-shm
result info_force shmctl info g2
shmctl clean >/dev/null 2>&1
echo "done"
