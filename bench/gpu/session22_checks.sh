#!/usr/bin/env bash
# Session 22 (2026-11-25) on one GPU, from the repository root, after PACK_MPI=1 bench/gpu/pack.sh.
#   bench/gpu/session22_checks.sh verify    # after SPH on CPU ranks moved the slab cut and the
#                                           # ranks' frame and state parts out of the GPU code and
#                                           # changed where the CPU reference computes pressures:
#                                           # the SPH device suites (f64 parity with the CPU), the
#                                           # GPU-rank tests, the rank protocol on every kind of
#                                           # rank (now also SPH on CPU ranks); then SPH on CPU
#                                           # ranks against one process on the machine's cores
#                                           # (dam break at dp = ${DP:-0.02} m to ${T:-0.02} s)
#   bench/gpu/session22_checks.sh cputime   # after the CPU ranks listed only their slab's boundary and
#                                           # counted fluid for --balance count: SPH on CPU ranks
#                                           # against one process (T=0.05 by default here)
#   bench/gpu/session22_checks.sh final     # the final tree: verify's suites and tests, no timing
# Logs under $OUT (leave it unset on the device: its $OUT is the folder that comes back).
set -uo pipefail
part=${1:-verify}
export OUT=${OUT:-bench/results/raw/session22}
source "$(dirname "$0")/lib.sh" "session22_${part}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# cpu_ranks_timing: the dam break at dp = $DP on the CPU: one process on every core, then 2 and
# 4 ranks sharing the cores.
cpu_ranks_timing() {
  local d dp=${DP:-0.02} cores np
  cores=$(nproc)
  d=$(mktemp -d)
  sed "s/^spacing = 0.04/spacing = $dp/" solver/cases/dambreak.toml > "$d/dambreak_$dp.toml"
  grep -q "spacing = $dp" "$d/dambreak_$dp.toml" || echo "the dam break's spacing line changed"
  local args=(--backend cpu --case "$d/dambreak_$dp.toml" --end-time ${T:-0.02} --progress-every 100 --output "$d/out")
  echo "+ solver ${args[*]} --threads $cores"
  timeout 200 solver "${args[@]}" --threads "$cores" > "$OUT/sph_cpu_one_$dp.out" 2>&1
  echo "RESULT sph_cpu_one rc=$?"
  grep -E "SPH case|finished" "$OUT/sph_cpu_one_$dp.out" | cut -c1-300 | tail -n 2
  cp "$d/out/checkpoint.bin" "$d/one.bin"
  for np in 2 4; do
    echo "+ mpirun -np $np solver ${args[*]} --threads $((cores / np)) --balance time"
    timeout 200 mpirun -np $np --bind-to none solver "${args[@]}" --threads $((cores / np)) --balance time \
      > "$OUT/sph_cpu_np${np}_$dp.out" 2>&1
    echo "RESULT sph_cpu_np$np rc=$?"
    grep -E "slabs|finished|SPH rank" "$OUT/sph_cpu_np${np}_$dp.out" | cut -c1-300 | tail -n 6
    cmp -s "$d/one.bin" "$d/out/checkpoint.bin" && echo "np$np: final checkpoint equals one process's" \
      || echo "np$np: FINAL CHECKPOINT DIFFERS"
  done
  rm -rf "$d"
}
# tests: the SPH device suites, the GPU-rank and SPH-CPU-rank tests, the rank protocol.
tests() {
  sph_suites
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 500 "$BIN/mpi_ranks" \
    gpu_ranks sph_cpu_ranks --test-threads 1)
  (cd solver && result mpi_ranks_protocol env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 500 "$BIN/mpi_ranks" \
    a_killed_rank pause_checkpoint --test-threads 1 --nocapture)
  grep -E "stopped .* after rank 1 died" "$OUT/mpi_ranks_protocol.out"
}
case $part in
verify)
  tests
  cpu_ranks_timing
  ;;
cputime)
  T=${T:-0.05} cpu_ranks_timing
  ;;
final)
  tests
  ;;
esac
