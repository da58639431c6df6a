# Sourced by the bench/gpu/*_checks.sh scripts on the GPU machine: unpacks the binaries that
# bench/gpu/pack.sh carried, puts them first on PATH, and logs everything to $OUT/$1.log.
OUT=${OUT:-bench/results/raw}
mkdir -p "$OUT"
BIN=/tmp/pshm-bin
rm -rf "$BIN" && mkdir -p "$BIN" && tar -xJf gpu-carry/bins.tar.xz -C "$BIN"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=$BIN:$PATH
exec > >(tee -a "$OUT/$1.log") 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
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
