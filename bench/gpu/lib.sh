# Sourced by the bench/gpu/*_checks.sh scripts on the GPU machine: unpacks the binaries that
# bench/gpu/pack.sh carried, puts them first on PATH, and logs everything to $OUT/$1.log.
OUT=${OUT:-bench/results/raw}
mkdir -p "$OUT"
# Absolute, so that parts which change into solver/ (the test binaries) still write there.
OUT=$(realpath "$OUT")
BIN=/tmp/pshm-bin
rm -rf "$BIN" && mkdir -p "$BIN" && tar -xJf gpu-carry/bins.tar.xz -C "$BIN"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=$BIN:$PATH
exec > >(tee -a "$OUT/$1.log") 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
# item ESTIMATED_SECONDS COMMAND...: runs COMMAND when it should end within the script's $budget
# seconds (560 when unset), and says how long it took.
item() {
  local est=$1; shift
  if (( SECONDS + est > ${budget:-560} )); then echo "SKIPPED (budget, at ${SECONDS} s) $*"; return; fi
  local t0=$SECONDS
  "$@"
  echo "ITEM done in $((SECONDS - t0)) s (at ${SECONDS} s): $*"
}
# result NAME COMMAND...: runs COMMAND with its output in $OUT/NAME.out, prints the lines that
# match $RESULT_PATTERN (the last $RESULT_LINES of them) and "RESULT NAME rc=...".
RESULT_PATTERN=${RESULT_PATTERN:-"test result|panicked|FAILED|ERROR SUMMARY"}
RESULT_LINES=${RESULT_LINES:-12}
result() {
  local name=$1; shift
  "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  grep -E "$RESULT_PATTERN" "$OUT/$name.out" | tail -n "$RESULT_LINES"
  echo "RESULT $name rc=$rc"
}
# run ARGS...: dem-gpu-bench ARGS with its JSON record appended to $J (set by the script),
# printing the last lines of its report (the memory breakdown left out).
run() { echo "+ dem-gpu-bench $*"; timeout 300 dem-gpu-bench "$@" --out "$J" 2>&1 | grep -v "^ *[a-z_.0-9]*: [0-9.]* B/particle" | tail -n 4; }
# small CASE END_TIME [SOLVER ARGS...]: a lab-scale case of bench/cases/ as users run it, its log
# in $OUT and its record ("phase": "small") appended to $OUT/small.jsonl.
small() {
  local name=$1 t=$2; shift 2
  local cmd="solver --case bench/cases/$name.toml --backend cuda --end-time $t --name-shm $name${*:+ $*}"
  echo "+ $cmd"
  solver --case "bench/cases/$name.toml" --backend cuda --end-time "$t" --name-shm "$name" "$@" > "$OUT/small_$name$*.out" 2>&1
  tail -n 2 "$OUT/small_$name$*.out"
  python3 bench/gpu/small_record.py "$OUT/small_$name$*.out" "$cmd" "$name" >> "$OUT/small.jsonl"
}
# sph_suites: the SPH GPU test suites (f64 parity with the CPU, slabs against one GPU, the
# physics twins), run from solver/.
sph_suites() {
  pushd solver >/dev/null || return
  result sph_cuda timeout 200 "$BIN/sph_cuda" --test-threads 1
  result sph_group timeout 200 "$BIN/sph_group" --test-threads 1
  result sph_physics_parity timeout 200 "$BIN/sph_physics_parity"
  popd >/dev/null || return
}
# sph_user_path: an SPH run as a user starts it: dambreak.toml on the GPU with VTK output and
# checkpoints, `analysis` reading the SPHERIC gauges and P2 (1.5 h off the obstacle at dp =
# 4 cm) from the kept segment, and a restart from the first checkpoint.
sph_user_path() {
  local d ck
  d=$(mktemp -d)
  result user_run timeout 300 solver --backend cuda --case solver/cases/dambreak.toml --end-time 0.3 \
    --name-shm sph1 --keep-shm --output "$d" --output-every 0.1 --checkpoint-every 0.15 --progress-every 5
  ls "$d" | head -20
  analysis --attach sph1 --once --json --gauge 2.638,0.5 --probe 0.9285,0.471,0.061 | cut -c1-600
  echo "RESULT analysis rc=${PIPESTATUS[0]}"
  shmctl clean >/dev/null 2>&1; rm -f /dev/shm/sph1
  ck=$(ls "$d"/checkpoint*.bin 2>/dev/null | head -1)
  result restart timeout 300 solver --backend cuda --restart "$ck" --end-time 0.35 --progress-every 5
  rm -rf "$d"
}
# sph_records: the records of bench/results/sph_gpu.json (1 M and 10 M, then 100 M) appended to
# $OUT/sph_gpu.jsonl.
sph_records() {
  result bench_1m_10m timeout 280 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 --frames 5 \
    --out "$OUT/sph_gpu.jsonl"
  result bench_100m timeout 280 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 \
    --out "$OUT/sph_gpu.jsonl"
}
# dem_records: issue 13's records of the build (dem_gpu.json): the machine's first main job
# (kernel caches removed) and a second, the drum and the silo, 10 M dense (linear and Hertz with
# friction, frictionless), 100 M dense with friction; records to $J (set by the script).
dem_records() {
  rm -rf "$HOME/.cache/particle-shm" "$HOME/.nv/ComputeCache"
  echo "== main job, the machine's first run"; OUT="$OUT/main_job" bash bench/gpu/main_job.sh | tail -n 1
  echo "== main job, again"; OUT="$OUT/main_job" bash bench/gpu/main_job.sh | tail -n 1
  for s in drum_10k:1.0 silo_70k:0.5; do small "${s%%:*}" "${s##*:}"; done
  for m in linear-friction hertz; do
    run bench --particles 1e7 --model $m --phase dense --relax 2000 --steps 200
  done
  run bench --particles 1e7 --model linear --phase dense --relax 2000 --steps 300
  for m in linear-friction hertz; do
    run bench --particles 1e8 --model $m --phase dense --relax 500 --steps 50 --warmup 5 || echo "100M $m did not run"
  done
}
# dem_suite: the DEM device suite, from solver/: the parity suites, then the validation tests
# on the GPU.
dem_suite() {
  pushd solver >/dev/null || return
  result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads 1
  result physics_parity timeout 100 "$BIN/physics_parity"
  for t in impact_linear impact_hertz energy incline packing moving_geometry process_features; do
    result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 "$BIN/$t" --test-threads 1
  done
  popd >/dev/null || return
}
# main_compact: the README's main command with the compact layout, as a user runs it (built-in
# case, 1 M, 1 s), its log in $OUT/main_compact.out.
main_compact() {
  echo "+ solver --name-shm main_compact --backend cuda --gpu-memory compact"
  /usr/bin/time -f "wall %e s" timeout 200 solver --name-shm main_compact --backend cuda --gpu-memory compact \
    > "$OUT/main_compact.out" 2>&1
  echo "exit $?"
  grep -E "CUDA device|B/particle|finished|error|wall|spill" "$OUT/main_compact.out" | tail -n 10
}
# dense ARGS...: the 10 M dense frictional bed of issue 13's memory runs (no Verlet list), with
# ARGS, its record appended to $J.
dense() { item 60 run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200 --list off "$@"; }
# sph_split BUILD N STEPS EST LIMIT JSONL: two slabs of GPU 0 (--devices 0,0) against one GPU,
# the SPH dam break with Verlet, balance off, with BUILD's bench (new: this build; else
# gpu-carry/sph-gpu-bench-BUILD), its record appended to $OUT/JSONL.
sph_split() {
  local b=$1 n=$2 steps=$3 est=$4 limit=$5 jsonl=$6 exe=sph-gpu-bench
  [ "$b" != new ] && exe=gpu-carry/sph-gpu-bench-$b
  echo "+ $b"
  item "$est" timeout "$limit" $exe --particles "$n" --steps "$steps" --warmup 5 --frames 0 \
    --integrator verlet --devices 0,0 --balance off --out "$OUT/$jsonl" 2>&1 \
    | grep -E "ms/step|speedup|rror|panicked" | cut -c1-420
}
# sph_diag N EST LOG PATTERN [BUILD]: per-kernel times (22 steps) of gpu-carry/sph-gpu-bench-BUILD
# (diag when not given), a build with bench/results/raw/session53/diag_timers.patch applied,
# into $OUT/LOG, printing the lines that match PATTERN.
sph_diag() {
  echo "+ ${5:-diag}"
  PSHM_SPH_DIAG=1 item "$2" timeout 250 "gpu-carry/sph-gpu-bench-${5:-diag}" --particles "$1" --steps 20 --warmup 2 \
    --frames 0 --integrator verlet --devices 0,0 --balance off > "$OUT/$3" 2>&1
  grep -E "$4" "$OUT/$3"
}
