#!/usr/bin/env bash
# SPH on CPU sub-domains in one process against one undecomposed process: the shipped dam break
# (dp = 4 cm, 56,206 particles) to END seconds on 1, 2, 3 and 4 sub-domains, as a user runs it.
# Writes bench/results/sph_cpu_subdomains.json, one record per count with its exact command.
# Usage: bench/cpu/sph_subdomains.sh [END]   (run from the repository root after
# `cargo build --release -p solver`)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/cpu/records.sh
END=${1:-0.05}
OUT=bench/results/sph_cpu_subdomains.json
records=()
for n in 1 2 3 4; do
    cmd="target/release/solver --case solver/cases/dambreak.toml --backend cpu --end-time $END --subdomains $n"
    line=$($cmd 2>&1 | grep -o 'finished after .*')
    echo "$n sub-domains: $line" >&2
    # "finished after 175 steps in 17.90 s (10 steps/s, 5.496e5 particle-steps/s), t = ..."
    steps=$(sed -E 's/finished after ([0-9]+) steps.*/\1/' <<<"$line")
    wall=$(sed -E 's/.* in ([0-9.]+) s \(.*/\1/' <<<"$line")
    rate=$(sed -E 's/.*, ([0-9.e+]+) particle-steps\/s.*/\1/' <<<"$line")
    records+=("{\"subdomains\": $n, \"steps\": $steps, \"wall_s\": $wall, \"particle_steps_per_s\": $rate, \"command\": \"$cmd\"}")
done
write_records "$OUT" sph_cpu_subdomains "SPH dam break (solver/cases/dambreak.toml: Wendland, dynamic boundaries, Fourtakas delta-SPH, symplectic), f64 CPU reference"
