#!/usr/bin/env bash
# Session 29 (2026-12-02) on one GPU (only nvidia-h200 was lent), from the repository root, after
# PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session29_checks.sh slabs   # SPH moving solids over several slabs of one process:
#                                         # the SPH suites (f64 bits of two and three slabs with a
#                                         # rocking tank and a turning blade against the CPU),
#                                         # mpi_ranks' moving test (CPU ranks, then one GPU against
#                                         # two slabs of GPU 0 through the solver, and the refusal
#                                         # on GPU ranks), and the shipped wavemaker and sloshing
#                                         # tank on one GPU and on two slabs of it (the cost of
#                                         # sharing the moving densities)
#
# Logs $OUT/session29_<part>.log, *.out.
set -uo pipefail
part=${1:-slabs}
export OUT=${OUT:-bench/results/raw/session29}
source "$(dirname "$0")/lib.sh" "session29_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="SPH case|SPH on|steps/s|finished|ERROR|error|test result|panicked|FAILED|identical|CPU's bits"
wave() {
  local name=$1 case=$2 end=$3; shift 3
  result "$name" timeout 240 solver --backend cuda --case "$case" --end-time "$end" --progress-every 5 "$@"
}
case $part in
slabs)
  item 200 sph_suites
  (cd solver && result mpi_ranks_moving env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 "$BIN/mpi_ranks" \
    moving --nocapture --test-threads 1)
  item 40 wave wavemaker_one solver/cases/wavemaker.toml 1.0
  item 60 wave wavemaker_slabs solver/cases/wavemaker.toml 1.0 --devices 0,0
  item 40 wave sloshing_one solver/cases/sloshing_tank.toml 1.0
  item 60 wave sloshing_slabs solver/cases/sloshing_tank.toml 1.0 --devices 0,0
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session29 $part done in $SECONDS s"
