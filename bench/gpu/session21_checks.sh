#!/usr/bin/env bash
# Session 21 (2026-11-25) on one GPU, from the repository root, after PACK_MPI=1 bench/gpu/pack.sh.
#   bench/gpu/session21_checks.sh sphranks  # issue 18 through MPI: SPH on GPU ranks. The SPH
#                                           # device suites (the group's first cut now shared
#                                           # with the ranks), the GPU-rank tests (DEM and SPH:
#                                           # two and three ranks on GPU 0, host road, bits
#                                           # against one GPU and a group), then the dam break
#                                           # at dp = ${DP:-0.01} m on two slabs of GPU 0 in one
#                                           # process and on two ranks (time-slicing GPU 0)
#   bench/gpu/session21_checks.sh protocol  # the rank protocol on SPH GPU ranks (and DEM GPU ranks,
#                                           # CPU ranks): a killed rank, pause/checkpoint/stop;
#                                           # compute-sanitizer memcheck on two SPH ranks; the
#                                           # GPU-rank tests again
#   bench/gpu/session21_checks.sh final     # after frame parts became raw bytes: the GPU-rank tests
#                                           # (DEM and SPH), the rank protocol on every kind of
#                                           # rank, the dam break timing of sphranks
#   bench/gpu/session21_checks.sh mend      # after the review mend: the SPH device suites and the
#                                           # GPU-rank tests
# Logs under $OUT (leave it unset on the device: its $OUT is the folder that comes back).
set -uo pipefail
part=${1:-sphranks}
export OUT=${OUT:-bench/results/raw/session21}
source "$(dirname "$0")/lib.sh" "session21_${part}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# sph_timing: the dam break at dp = $DP on two slabs of GPU 0, in one process and on two ranks.
sph_timing() {
  local d dp=${DP:-0.01}
  d=$(mktemp -d)
  sed "s/^spacing = 0.04/spacing = $dp/" solver/cases/dambreak.toml > "$d/dambreak_$dp.toml"
  grep -q "spacing = $dp" "$d/dambreak_$dp.toml" || echo "the dam break's spacing line changed"
  local args=(--backend cuda --case "$d/dambreak_$dp.toml" --end-time ${T:-0.02} --progress-every 100)
  echo "+ solver ${args[*]} --devices 0,0"
  timeout 250 solver "${args[@]}" --devices 0,0 > "$OUT/sph_inproc_$dp.out" 2>&1; echo "RESULT sph_inproc rc=$?"
  grep -E "SPH case|slabs|finished|steps/s" "$OUT/sph_inproc_$dp.out" | cut -c1-300 | tail -n 4
  echo "+ mpirun -np 2 solver ${args[*]} --devices 0"
  timeout 250 mpirun -np 2 --bind-to none solver "${args[@]}" --devices 0 > "$OUT/sph_ranks_$dp.out" 2>&1
  echo "RESULT sph_ranks rc=$?"
  grep -E "SPH case|slabs|finished|steps/s" "$OUT/sph_ranks_$dp.out" | cut -c1-300 | tail -n 4
  rm -rf "$d"
}
case $part in
sphranks)
  sph_suites
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 500 "$BIN/mpi_ranks" gpu_ranks --test-threads 1)
  sph_timing
  ;;
protocol)
  (cd solver && result mpi_ranks_protocol env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 400 "$BIN/mpi_ranks" \
    a_killed_rank pause_checkpoint --test-threads 1 --nocapture)
  grep -E "stopped .* after rank 1 died" "$OUT/mpi_ranks_protocol.out"
  if command -v compute-sanitizer >/dev/null; then
    result memcheck_sph_ranks timeout 300 mpirun -np 2 --bind-to none compute-sanitizer --tool memcheck \
      --leak-check no --error-exitcode 9 solver --backend cuda --case solver/cases/dambreak.toml \
      --end-time 0.01 --progress-every 10 --name-shm memcheck-sph --refresh-wall-ms 0
  fi
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 500 "$BIN/mpi_ranks" gpu_ranks --test-threads 1)
  ;;
final)
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 500 "$BIN/mpi_ranks" gpu_ranks --test-threads 1)
  (cd solver && result mpi_ranks_protocol env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 400 "$BIN/mpi_ranks" \
    a_killed_rank pause_checkpoint --test-threads 1 --nocapture)
  grep -E "stopped .* after rank 1 died" "$OUT/mpi_ranks_protocol.out"
  sph_timing
  ;;
mend)
  sph_suites
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 500 "$BIN/mpi_ranks" gpu_ranks --test-threads 1)
  ;;
esac
