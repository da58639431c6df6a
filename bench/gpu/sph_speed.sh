#!/usr/bin/env bash
# Issue 17, SPH speed on one GPU, from the repository root: bench/gpu/sph_speed.sh [part]
#   part "tests": the SPH GPU tests (f64 parity with the CPU reference; f32 collapse against the
#     CPU; a group of slabs on one GPU, bit for bit against one GPU; the physics twins);
#   part "bench": sph-gpu-bench at 1 M and 10 M particles, as shipped and with the variants in
#     VARIANTS (NVRTC options separated by ";": -DSPH_LOCAL=0 forms the pair geometry from the
#     f64 positions), and at 10 M with the density diffusions of DIFFUSIONS instead of Fourtakas',
#     JSON lines in $OUT/sph_speed.jsonl;
#   part "ncu": Nsight Compute on the rates kernels at 1 M (clocks and caches as in a run);
#   part "all" (default): the three.
set -uo pipefail
part=${1:-all}
source "$(dirname "$0")/lib.sh" "sph_speed_$part"
NCU=/opt/nvidia/nsight-compute/2025.3.1/ncu
result() { local name=$1; shift; "$@"; echo "RESULT $name rc=$?"; }
if [[ $part == tests || $part == all ]]; then
  for t in sph_cuda sph_group sph_physics_parity; do
    result $t "$BIN/$t" --test-threads 1 2>&1 | grep -E "^test |test result|panicked|RESULT"
  done
fi
if [[ $part == bench || $part == all ]]; then
  IFS=';' read -ra variants <<< "${VARIANTS:--DSPH_LOCAL=0}"
  for v in "" "${variants[@]}"; do
    PARTICLE_SHM_NVRTC_OPTIONS="$v" sph-gpu-bench --particles ${SIZES:-1e6,1e7} --steps 100 --warmup 20 \
      --frames 0 --out "$OUT/sph_speed.jsonl" | grep -E "^SPH dam" | sed "s/^/[${v:-shipped}] /"
  done
  for d in ${DIFFUSIONS:-molteni none}; do
    sph-gpu-bench --particles 1e7 --steps 100 --warmup 20 --frames 0 --diffusion "$d" \
      --out "$OUT/sph_speed.jsonl" | grep -E "^SPH dam" | sed "s/^/[diffusion $d] /"
  done
fi
if [[ $part == ncu || $part == all ]]; then
  $NCU --clock-control none --cache-control none --kernel-name regex:sph_rates \
    --launch-skip 40 --launch-count 2 --section SpeedOfLight --section LaunchStats --section Occupancy \
    --section WarpStateStats --section InstructionStats --section SourceCounters \
    --metrics smsp__thread_inst_executed_per_inst_executed.ratio,gpu__time_duration.sum \
    sph-gpu-bench --particles 1e6 --steps 10 --warmup 20 --frames 0 > "$OUT/sph_speed_ncu.txt" 2>&1
  grep -E "sph_rates|Duration|Registers Per|Achieved Occupancy|Avg. Active Threads|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|Executed Instructions  " \
    "$OUT/sph_speed_ncu.txt" | head -30
fi
