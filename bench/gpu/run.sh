#!/usr/bin/env bash
# CUDA backend checks and benchmarks (issue 4), run on the GPU machine from the repository root:
#
#   bench/gpu/run.sh [correctness|bench|models|heavy|all]
#
# Expects gpu-carry/bins.tar.xz from bench/gpu/pack.sh (or the binary in gpu-carry/ or
# target/release/).
# Writes JSON lines to $OUT/dem_gpu.jsonl (one record per measurement) and the log to
# $OUT/dem_gpu.log; bench/gpu/collect.py turns the lines into bench/results/dem_gpu.json.
set -euo pipefail
OUT=${OUT:-bench/results/raw}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=gpu-carry/dem-gpu-bench
if [ -f gpu-carry/bins.tar.xz ]; then   # packed by bench/gpu/pack.sh
  mkdir -p /tmp/pshm-bin && tar -xJf gpu-carry/bins.tar.xz -C /tmp/pshm-bin ./dem-gpu-bench
  B=/tmp/pshm-bin/dem-gpu-bench
fi
[ -x "$B" ] || B=target/release/dem-gpu-bench
J="$OUT/dem_gpu.jsonl"
what=${1:-all}
run() { echo "+ $*"; "$B" "$@" --out "$J"; }
exec > >(tee -a "$OUT/dem_gpu.log") 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv

if [[ $what == correctness || $what == all ]]; then
  run bandwidth
  run restitution
  run parity --particles 8000 --steps 1000
  run determinism --particles 100000 --steps 1000
  # compute-sanitizer on a small case (memcheck, racecheck); JIT modules are covered.
  if command -v compute-sanitizer >/dev/null; then
    compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 "$B" smoke --particles 2000 && echo "SANITIZER memcheck: clean"
    compute-sanitizer --tool racecheck --error-exitcode 3 "$B" smoke --particles 2000 && echo "SANITIZER racecheck: clean"
  fi
fi

if [[ $what == bench || $what == all ]]; then
  # The XPS run: 1 M particles, 1 s simulated (100,000 steps).
  run full --particles 1e6 --model linear --seconds 240
  for n in 1e6 1e7; do
    run bench --particles $n --model linear --phase loose --steps 500
    run bench --particles $n --model linear --phase dense --relax 2000 --steps 300
  done
  run publish --particles 1e7 --model linear --seconds 4
fi

if [[ $what == models || $what == all ]]; then
  for m in linear-friction hertz; do
    run bench --particles 1e7 --model $m --phase loose --steps 300
    run bench --particles 1e7 --model $m --phase dense --relax 2000 --steps 200
  done
fi

if [[ $what == heavy || $what == all ]]; then
  run bench --particles 1e8 --model linear --phase loose --steps 100 --warmup 10
  run bench --particles 1e8 --model linear --phase dense --relax 1000 --steps 100 --warmup 10
  run bench --particles 1e8 --model linear-friction --phase dense --relax 500 --steps 50 --warmup 5 || echo "100M with friction did not run (see above)"
fi
echo "done: $what"
