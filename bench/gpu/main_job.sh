#!/usr/bin/env bash
# The README's main job on the GPU machine, as a user runs it (issue 13): the built-in case
# (1 M spheres, linear spring-dashpot with sliding and rolling friction, 1 s simulated), from
# gpu-carry/bins.tar.xz (bench/gpu/pack.sh). Appends a record with "phase": "main_job", its
# wall_s (process start to exit, publication included), steps/s and GPU bytes per particle to
# $OUT/main_job.jsonl; the solver's log is $OUT/main_job.out.
#
#   bench/gpu/main_job.sh [EXTRA SOLVER ARGS]   (e.g. --skin 0: compare settings; the record's
#   command names them, and the log is $OUT/main_job<args>.out)
set -uo pipefail
OUT=${OUT:-bench/results/raw}
mkdir -p "$OUT"
# MAIN_JOB_BIN: a directory holding another build's solver (A/B comparisons).
BIN=${MAIN_JOB_BIN:-/tmp/pshm-bin}
if [ ! -x "$BIN/solver" ]; then
  rm -rf "$BIN" && mkdir -p "$BIN" && tar -xJf gpu-carry/bins.tar.xz -C "$BIN"
fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
CMD="solver --name-shm run1${*:+ $*}"
# Kernel experiments (bench/gpu/session14_checks.sh) set these in the environment.
for v in PARTICLE_SHM_NVRTC_OPTIONS PARTICLE_SHM_LIST_WALK; do
  if [ -n "${!v:-}" ]; then CMD="$v='${!v}' $CMD"; fi
done
suffix=$(echo "$* ${PARTICLE_SHM_NVRTC_OPTIONS:-} ${PARTICLE_SHM_LIST_WALK:-}" | tr -cs 'A-Za-z0-9.' '_')
LOG="$OUT/main_job${suffix%_}.out"
t0=$(date +%s.%N)
"$BIN/solver" --name-shm run1 --progress-every 5 "$@" > "$LOG" 2>&1
rc=$?
t1=$(date +%s.%N)
tail -n 5 "$LOG"
python3 - "$LOG" "$t0" "$t1" "$rc" "$CMD" >> "$OUT/main_job.jsonl" <<'PY'
import json, re, subprocess, sys
log, t0, t1, rc, cmd = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
text = open(log).read()
fin = re.search(r"finished after (\d+) steps in ([\d.]+) s \(([\d.]+) steps/s", text)
mem = re.search(r"CUDA device (.+?): (\d+) particles, ([\d.]+) GiB of GPU memory \((\d+) B/particle", text)
# Where the seconds outside the stepping go: process start to the first log line, to the start
# of the stepping ("... backend cuda" line), and from "finished" to the process's exit.
import datetime
def stamp(pattern):
    m = re.search(r"^(\S+Z)\s+\S+\s+.*" + pattern, text, re.M)
    if not m:
        return None
    return datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
first = stamp("")
begin = stamp(r"backend cuda")
done = stamp(r"finished after")
phases = {
    "to_first_log_s": round(first - t0, 3) if first else None,
    "to_stepping_s": round(begin - t0, 3) if begin else None,
    "after_finish_s": round(t1 - done, 3) if done else None,
}
kern = re.search(r"(kernels (?:compiled|from the cache) in [\d.]+ s)", text)
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
print(json.dumps({
    "device": gpu,
    "model": "linear-friction",
    "phase": "main_job",
    "particles": int(mem.group(2)) if mem else None,
    "steps": int(fin.group(1)) if fin else None,
    "wall_s": round(t1 - t0, 2),
    "stepping_s": float(fin.group(2)) if fin else None,
    "steps_per_s": round(int(fin.group(1)) / (t1 - t0), 1) if fin else None,
    "bytes_per_particle": int(mem.group(4)) if mem else None,
    **phases,
    "kernels": kern.group(1) if kern else None,
    "exit_code": rc,
    "command": cmd,
}))
PY
tail -n 1 "$OUT/main_job.jsonl"
"$BIN/shmctl" clean >/dev/null 2>&1
