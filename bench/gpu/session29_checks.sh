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
#   bench/gpu/session29_checks.sh ranks   # after moving solids on GPU ranks: mpi_ranks' moving
#                                         # test (CPU ranks; one GPU, two slabs, 2 and 3 GPU ranks
#                                         # sharing GPU 0, restarts), the GPU ranks' tests of fixed
#                                         # cases (regression), sph_group, and the sloshing tank to
#                                         # 1 s on 2 GPU ranks as a user starts it
#   bench/gpu/session29_checks.sh ranks2  # after reusing the rank's layer buffers: mpi_ranks'
#                                         # moving test again, and the sloshing tank to 0.3 s on
#                                         # 2 GPU ranks with its tank rocking and with it fixed
#   bench/gpu/session29_checks.sh ranks3  # after the ranks send moving densities as (slot,
#                                         # value) pairs picked on the device, to neighbours only:
#                                         # mpi_ranks' moving test, the sloshing tank on 2 ranks
#
# Logs $OUT/session29_<part>.log, *.out.
set -uo pipefail
part=${1:-slabs}
export OUT=${OUT:-bench/results/raw/session29}
source "$(dirname "$0")/lib.sh" "session29_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="SPH case|SPH on|steps/s|finished|ERROR|error|test result|panicked|FAILED|identical|CPU's bits|computed"
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
ranks)
  (cd solver && result mpi_ranks_moving env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 "$BIN/mpi_ranks" \
    moving --nocapture --test-threads 1)
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 "$BIN/mpi_ranks" \
    gpu_ranks --test-threads 1)
  (cd solver && result sph_group timeout 200 "$BIN/sph_group" --test-threads 1)
  item 60 result sloshing_ranks env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 120 mpirun -np 2 "$BIN/solver" \
    --backend cuda --case solver/cases/sloshing_tank.toml --end-time 1.0 --progress-every 5
  ;;
ranks2)
  (cd solver && result mpi_ranks_moving2 env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 "$BIN/mpi_ranks" \
    moving --nocapture --test-threads 1)
  d=$(mktemp -d)
  grep -v '^motion = ' solver/cases/sloshing_tank.toml > "$d/fixed.toml"
  mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 100 mpirun -np 2 "$BIN/solver" --backend cuda)
  item 60 result sloshing_ranks_moving "${mpi[@]}" --case solver/cases/sloshing_tank.toml --end-time 0.3 --progress-every 5
  item 60 result sloshing_ranks_fixed "${mpi[@]}" --case "$d/fixed.toml" --end-time 0.3 --progress-every 5
  item 30 wave sloshing_one_03 solver/cases/sloshing_tank.toml 0.3
  rm -rf "$d"
  ;;
ranks3)
  (cd solver && result mpi_ranks_moving3 env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 "$BIN/mpi_ranks" \
    moving --nocapture --test-threads 1)
  mpi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 100 mpirun -np 2 "$BIN/solver" --backend cuda)
  item 60 result sloshing_ranks_moving3 "${mpi[@]}" --case solver/cases/sloshing_tank.toml --end-time 0.3 --progress-every 5
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session29 $part done in $SECONDS s"
