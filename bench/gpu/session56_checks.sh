#!/usr/bin/env bash
# Session 56 (2026-12-05): the SPH slabs' exchange started as soon as every slab's fluid kernel
# has written the positions it moves on, its copies and unpack on a stream of their own beside
# the boundary's rates (SphGroupOptions::overlap, on by default; PARTICLE_SHM_SPH_OVERLAP=off
# for the exchange after the evaluation's every kernel, as before). One GPU is enough: two slabs
# on GPU 0 check the bits and time both. From the repository root, after
# PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session56_checks.sh overlap   # the SPH GPU suites (sph_group's f32 test runs the
#                                           # overlap on and off with each classification, bit for
#                                           # bit against one GPU, and asserts which ran), the SPH
#                                           # GPU-rank test; two slabs on GPU 0 against one GPU,
#                                           # overlap off and on alternated at 10 M (Verlet, both
#                                           # classifications; symplectic) and 100 M (Verlet)
#
# Records: $OUT/overlap_*.jsonl (the bench's records carry "overlap", "overlapped_exchanges",
# "classify"). Log $OUT/session56_<part>.log.
set -uo pipefail
part=${1:-overlap}
export OUT=${OUT:-bench/results/raw/session56}
source "$(dirname "$0")/lib.sh" "session56_${part}"
budget=${BUDGET:-570}
# split OVERLAP CLASSIFY INTEGRATOR N STEPS EST LIMIT: two slabs of GPU 0 against one GPU, the
# dam break with balance off, this build, its record appended to $OUT/overlap_<N>.jsonl.
split() {
  local ov=$1 cl=$2 integ=$3 n=$4 steps=$5 est=$6 limit=$7
  echo "+ overlap $ov, classify $cl, $integ, $n"
  PARTICLE_SHM_SPH_OVERLAP=$ov PARTICLE_SHM_SPH_CLASSIFY=$cl item "$est" timeout "$limit" \
    sph-gpu-bench --particles "$n" --steps "$steps" --warmup 5 --frames 0 --integrator "$integ" \
    --devices 0,0 --balance off --out "$OUT/overlap_$n.jsonl" 2>&1 \
    | grep -E "ms/step|speedup|rror|panicked" | cut -c1-460
}
case $part in
overlap)
  item 200 sph_suites
  (cd solver && item 40 result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda \
    timeout 300 "$BIN/mpi_ranks" sph_gpu_ranks --test-threads 1)
  if ! grep -q "test result: ok" "$OUT/sph_group.out" 2>/dev/null; then
    echo "sph_group did not pass: the overlap is not timed"
  else
    # Most wanted first (each run an item of the budget).
    for ov in off on; do split $ov standalone verlet 1e7 100 25 100; done
    for ov in on off; do split $ov standalone verlet 1e8 40 60 150; done
    for ov in off on; do split $ov standalone symplectic 1e7 60 25 100; done
    for ov in off on; do split $ov rates verlet 1e7 100 25 100; done
    for ov in off on; do split $ov standalone verlet 1e7 100 25 100; done
  fi
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
tar -czf "$OUT/session56_${part}.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
echo "session56 $part done at ${SECONDS} s"
