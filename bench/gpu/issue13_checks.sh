#!/usr/bin/env bash
# Issue 13 on the GPU machine, from the repository root, after bench/gpu/pack.sh here:
#
#   bench/gpu/issue13_checks.sh tests   # parity and CUDA validation of the new collide
#   bench/gpu/issue13_checks.sh sweep   # kernel variants on the 1 M dense frictional pack
#   bench/gpu/issue13_checks.sh sweep2  # variants of the resumable scan (first version)
#   bench/gpu/issue13_checks.sh sweep3  # the scan as a tight loop again, loose and dense
#   bench/gpu/issue13_checks.sh bench   # 10 M records, the main job, the lab-scale cases
#   bench/gpu/issue13_checks.sh final   # 1 M and 100 M records, the largest frictional run
#
# The collide kernel now packs each history entry (spring + partner) into one 16-byte load and
# store, and buffers each thread's particle contacts before evaluating them (dem-gpu-bench
# --candidates N, 0 = evaluate as found; --hist-layout slot|row).
# Writes JSON lines to $OUT/dem_gpu.jsonl, $OUT/main_job.jsonl and $OUT/small.jsonl and logs.
set -uo pipefail
OUT=${OUT:-bench/results/raw/issue13}
mkdir -p "$OUT"
BIN=/tmp/pshm-bin
if [ ! -x "$BIN/solver" ]; then
  rm -rf "$BIN" && mkdir -p "$BIN" && tar -xJf gpu-carry/bins.tar.xz -C "$BIN"
fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=$BIN:$PATH
what=${1:-tests}
exec > >(tee -a "$OUT/$what.log") 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
result() {
  local name=$1; shift
  "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  tail -n 8 "$OUT/$name.out"
  echo "RESULT $name rc=$rc"
}
J="$OUT/dem_gpu.jsonl"
run() { echo "+ dem-gpu-bench $*"; dem-gpu-bench "$@" --out "$J" 2>&1 | grep -v "^ *[a-z_.0-9]*: [0-9.]* B/particle" | tail -n 4; }

if [[ $what == tests ]]; then
  cd solver
  result physics_parity "$BIN/physics_parity" --nocapture
  result cuda_parity "$BIN/cuda_parity" --test-threads=1 --nocapture
  result cuda_pack_null_outputs "$BIN/cuda_pack_null_outputs" --test-threads=1
  for t in impact_linear impact_hertz energy incline packing moving_geometry process_features; do
    result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda "$BIN/$t" --test-threads=1
  done
  cd ..
  if command -v compute-sanitizer >/dev/null; then
    result sanitizer_memcheck compute-sanitizer --tool memcheck --error-exitcode 3 dem-gpu-bench smoke --particles 2000
    result sanitizer_racecheck compute-sanitizer --tool racecheck --error-exitcode 3 dem-gpu-bench smoke --particles 2000
  fi
fi

if [[ $what == sweep ]]; then
  for layout in slot row; do
    for c in 0 8 12 16 24; do
      run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500 --hist-layout $layout --candidates $c
    done
  done
  for b in 4 8; do
    run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500 --min-blocks $b
  done
  run bench --particles 1e6 --model linear --phase dense --relax 1000 --steps 500 --candidates 0
  run bench --particles 1e6 --model linear --phase dense --relax 1000 --steps 500
fi

# The buffered scan resumable (one copy of the contact code), after the first sweep.
if [[ $what == sweep2 ]]; then
  (cd solver && result cuda_parity_variants "$BIN/cuda_parity" collide_variants --test-threads=1 --nocapture)
  for c in 0 4 8 16 32; do
    run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500 --candidates $c
  done
  run bench --particles 1e6 --model hertz --phase dense --relax 1000 --steps 500 --candidates 0
  run bench --particles 1e6 --model hertz --phase dense --relax 1000 --steps 500
fi

# The scan as a tight loop per row range again (sweep2's loop slowed the loose phase).
if [[ $what == sweep3 ]]; then
  (cd solver && result cuda_parity_variants "$BIN/cuda_parity" collide_variants --test-threads=1 --nocapture)
  run bench --particles 1e7 --model linear --phase loose --steps 500 --candidates 0
  run bench --particles 1e7 --model linear --phase loose --steps 500
  run bench --particles 1e7 --model linear-friction --phase loose --steps 300 --candidates 0
  run bench --particles 1e7 --model linear-friction --phase loose --steps 300
  for c in 0 8 16 32; do
    run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500 --candidates $c
  done
  run bench --particles 1e6 --model linear --phase dense --relax 1000 --steps 500 --candidates 0
  run bench --particles 1e6 --model linear --phase dense --relax 1000 --steps 500
fi

if [[ $what == bench ]]; then
  run bench --particles 1e7 --model linear --phase dense --relax 2000 --steps 300
  run bench --particles 1e7 --model linear --phase loose --steps 500
  for m in linear-friction hertz; do
    run bench --particles 1e7 --model $m --phase dense --relax 2000 --steps 200
    run bench --particles 1e7 --model $m --phase loose --steps 300
  done
  OUT=$OUT bash bench/gpu/main_job.sh
  S="$OUT/small.jsonl"
  for c in drum_10k:1.0 silo_70k:0.5; do
    name=${c%%:*}; t=${c##*:}
    cmd="solver --case bench/cases/$name.toml --backend cuda --end-time $t --name-shm $name"
    echo "+ $cmd"
    "$BIN/solver" --case bench/cases/$name.toml --backend cuda --end-time $t --name-shm $name > "$OUT/small_$name.out" 2>&1
    tail -n 2 "$OUT/small_$name.out"
    python3 bench/gpu/small_record.py "$OUT/small_$name.out" "$cmd" "$name" >> "$S"
    tail -n 1 "$S"
  done
fi
# The remaining records on the current kernel: 100 M dense with friction (both models), the
# 1 M records, the largest frictional run that fits one H100.
if [[ $what == final ]]; then
  run bench --particles 1e6 --model hertz --phase dense --relax 1000 --steps 500
  run bench --particles 1e6 --model linear --phase loose --steps 500
  run bench --particles 1e6 --model linear-friction --phase loose --steps 500
  run full --particles 1e6 --model linear --seconds 240
  for m in linear-friction hertz; do
    run bench --particles 1e8 --model $m --phase dense --relax 500 --steps 50 --warmup 5 || echo "100M $m did not run"
  done
  run bench --particles 1.2e8 --model linear-friction --phase loose --steps 20 --warmup 2 || echo "120M with friction did not run"
fi
echo "done: $what"
