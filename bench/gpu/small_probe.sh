#!/usr/bin/env bash
# Issue 13, lab-scale cases: where a small case's step goes (host launch cost, the per-step mesh
# upload, kernel time). Stepping alone (`dem-gpu-bench case`, graphs on and off) of the drum as
# shipped, the drum held still, and the drum's beads in a box without a mesh, and the silo; the
# solver as a user runs it; then each kernel's time at the GPU's own clocks (ncu).
#   bench/gpu/small_probe.sh
set -uo pipefail
source bench/gpu/lib.sh small_probe
NCU=/opt/nvidia/nsight-compute/2025.3.1/ncu
tmp=$(mktemp -d)
cp bench/cases/drum_10k.toml bench/cases/drum.stl "$tmp/"
sed 's/^motion = .*$//' "$tmp/drum_10k.toml" > "$tmp/drum_still.toml"
python3 - "$tmp" <<'PY'
import sys
d = sys.argv[1]
t = open(f"{d}/drum_10k.toml").read().replace("walls = false", "walls = true")
open(f"{d}/box_10k.toml", "w").write(t[: t.index("[[meshes]]")])
PY
J="$OUT/small_probe.jsonl"
for c in "$tmp/drum_10k.toml" "$tmp/drum_still.toml" "$tmp/box_10k.toml" bench/cases/silo_70k.toml; do
  for g in off on; do
    dem-gpu-bench case --case "$c" --warmup 2000 --steps 10000 --graphs $g --out "$J" | grep -v RECORD
  done
done
for c in drum_10k:1.0 silo_70k:0.5; do
  name=${c%%:*}; t=${c##*:}
  echo "== solver $name"
  solver --case bench/cases/$name.toml --backend cuda --end-time $t --name-shm p_$name --progress-every 0.25 2>&1 | grep -E "finished|steps/s" | tail -3
done
echo "== ncu drum kernel times (steps ~5,000 on; clocks and caches as in a run)"
$NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-skip 20000 --launch-count 20 \
  dem-gpu-bench case --case "$tmp/drum_10k.toml" --warmup 0 --steps 4000 --graphs off 2>&1 \
  | grep -E "^  [a-z_]+|gpu__time_duration" | paste - - | awk '{print $1, $(NF-1), $(NF)}' | head -24
echo "== ncu box kernel times"
$NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum --launch-skip 20000 --launch-count 10 \
  dem-gpu-bench case --case "$tmp/box_10k.toml" --warmup 0 --steps 4000 --graphs off 2>&1 \
  | grep -E "^  [a-z_]+|gpu__time_duration" | paste - - | awk '{print $1, $(NF-1), $(NF)}' | head -12
