#!/usr/bin/env bash
# Issue 13, lab-scale drum: where the solver as a user runs it loses against stepping alone
# (12,904 vs 16,268 steps/s in the last runs). Stepping alone; the user command at 1 s and 3 s
# simulated; the same without frames beyond the first and last (--refresh 100
# --refresh-wall-ms 0); and, where Nsight Systems is installed, a timeline summary of the user
# command (CUDA API calls, GPU kernels, memory copies).
#   bench/gpu/small_app_probe.sh
set -uo pipefail
export OUT=${OUT:-bench/results/raw/small_app}
source "$(dirname "$0")/lib.sh" small_app_probe
D=bench/cases/drum_10k.toml
# What the run loop adds: batches of N steps each followed by the
# diagnostics check (a synchronisation), as the loop steps.

for opts in "" "--batch 46" "--batch 150" "--batch 256"; do
  dem-gpu-bench case --case $D --warmup 2000 --steps 20000 $opts | grep -v RECORD
done
for args in "--end-time 1.0" "--end-time 3.0" "--end-time 3.0 --refresh 100 --refresh-wall-ms 0"; do
  echo "== solver --case $D --backend cuda $args"
  solver --case $D --backend cuda $args --name-shm probe --progress-every 0.5 2>&1 | grep -E "finished|steps/s" | tail -3
done
echo "== solver --case bench/cases/silo_70k.toml --backend cuda --end-time 0.5"
solver --case bench/cases/silo_70k.toml --backend cuda --end-time 0.5 --name-shm probe3 2>&1 | grep -E "finished" | tail -1
shmctl clean > /dev/null 2>&1
if [[ "${MAIN_JOB:-1}" == 1 ]]; then OUT=$OUT bash bench/gpu/main_job.sh; fi
