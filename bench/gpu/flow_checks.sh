#!/usr/bin/env bash
# Issue 20 on a GPU machine, from the repository root: bench/gpu/flow_checks.sh
# The shipped silo (inflow fill, a gate opening at 0.8 s, an outflow region) run as a user runs
# it on one GPU, with analysis reading the kept segment afterwards.
set -uo pipefail
source "$(dirname "$0")/lib.sh" flow_checks
timeout 400 solver --backend cuda --case solver/cases/silo.toml --end-time 1.2 --name-shm silo1 \
  --keep-shm --progress-every 5
echo "RESULT silo_gpu rc=$?"
analysis --attach silo1 --once --json --metrics particle_count,removed_count,removed_mass | cut -c1-400
shmctl clean >/dev/null 2>&1; rm -f /dev/shm/silo1
