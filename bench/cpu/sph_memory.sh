#!/usr/bin/env bash
# Host memory of SPH runs on the CPU reference, per particle: the solver's peak resident size
# (GNU time's "Maximum resident set size": placement, the run's arrays, the segment's frame
# slots) over one step, for the dam break at two spacings, on 1, 2 and 3 CPU sub-domains, and
# the sloshing tank with mDBC. What `SPH_CPU_HOST_BYTES_PER_PARTICLE` and
# `SPH_SUBDOMAIN_BYTES_PER_PARTICLE` (solver/src/sph/cpu.rs), the start-up memory check's
# figures, stand on. Writes bench/results/sph_cpu_memory.json, one record per run with its exact
# command. Usage (from the repository root, after `cargo build --release -p solver`):
#   bench/cpu/sph_memory.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/cpu/records.sh
OUT=bench/results/sph_cpu_memory.json
[[ -x /usr/bin/time ]] || { echo "needs GNU time at /usr/bin/time" >&2; exit 1; }
records=()
run() {
  local label=$1; shift
  local cmd="target/release/solver --backend cpu --end-time 1e-5 --name-shm pshm-mem-$$ $*"
  local log
  log=$(/usr/bin/time -v $cmd 2>&1)
  local kb n
  kb=$(grep -o "Maximum resident set size (kbytes): [0-9]*" <<<"$log" | grep -o "[0-9]*$")
  n=$(grep -o "INFO [0-9]* particles, " <<<"$log" | grep -o "[0-9]*")
  local per=$(( kb * 1024 / n ))
  echo "$label: $n particles, peak $kb kB, $per B per particle" >&2
  records+=("{\"case\": \"$label\", \"particles\": $n, \"peak_rss_kb\": $kb, \"bytes_per_particle\": $per, \"command\": \"/usr/bin/time -v $cmd\"}")
}
run "dam break dp 8 mm, 1 worker" --case solver/cases/dambreak.toml --spacing 0.008
run "dam break dp 8 mm, 2 sub-domains" --case solver/cases/dambreak.toml --spacing 0.008 --subdomains 2
run "dam break dp 8 mm, 3 sub-domains" --case solver/cases/dambreak.toml --spacing 0.008 --subdomains 3
run "dam break dp 5 mm, 1 worker" --case solver/cases/dambreak.toml --spacing 0.005
run "sloshing tank (mDBC) dp 4 mm, 1 worker" --case solver/cases/sloshing_tank.toml --spacing 0.004
write_records "$OUT" sph_cpu_memory "SPH CPU reference (f64): peak resident size of the solver process over one step, the segment included"
