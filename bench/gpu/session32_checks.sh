#!/usr/bin/env bash
# Session 32 (2026-12-02) on one GPU (only nvidia-h200 was lent): mDBC through STL solids and on
# the GPUs of one process (an SPH group; slabs on GPU 0 here). From the repository root, after
# PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session32_checks.sh mdbc   # the SPH GPU suites (sph_cuda: f64 bits with the CPU,
#                                        # an STL paddle with mDBC included; sph_group: slabs
#                                        # against one GPU and the CPU, mDBC on 2 and 3 slabs
#                                        # included; the physics twins), and the sloshing tank
#                                        # (mDBC) as a user starts it on two slabs of GPU 0
#   bench/gpu/session32_checks.sh ranks  # mDBC on GPU ranks: mpi_ranks' mDBC test with the GPU
#                                        # tests on (one GPU, a group of two slabs, 2 and 3
#                                        # ranks sharing GPU 0, restarts), the DBC GPU ranks test,
#                                        # and the SPH GPU suites again
#   bench/gpu/session32_checks.sh buffer # the pair code's candidate buffer of commit 9f566f3
#                                        # (reverted after this run; SPH_BUFFER is unknown to
#                                        # later code): the SPH GPU suites, then the dam break at
#                                        # 1 M and 10 M with the buffer of 8 entries (its
#                                        # default), 0 (the walk as before), 4 and 16,
#                                        # alternated (sph-gpu-bench, float, DBC)
#   bench/gpu/session32_checks.sh regs   # the dam break at 1 M and 10 M with NVRTC's register
#                                        # cap at 40 and 32 per thread against none (the fluid
#                                        # rates use 48: occupancy 62.5 %), alternated
#
# Logs $OUT/session32_<part>.log, *.out.
set -uo pipefail
part=${1:-mdbc}
export OUT=${OUT:-bench/results/raw/session32}
source "$(dirname "$0")/lib.sh" "session32_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="identical|bits|random cases|slabs|test result|panicked|FAILED|steps/s|finished|ms/step|ms per step"
RESULT_LINES=40
case $part in
mdbc)
  item 300 sph_suites
  item 120 result user_group timeout 150 solver --backend cuda --devices 0,0 \
    --case solver/cases/sloshing_tank.toml --end-time 0.3 --name-shm slosh32 --progress-every 5
  rm -f /dev/shm/slosh32
  ;;
ranks)
  (cd solver && item 300 result mpi_mdbc env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 330 \
    "$BIN/mpi_ranks" mdbc_over_ranks --nocapture)
  (cd solver && item 150 result mpi_sph_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 \
    "$BIN/mpi_ranks" sph_gpu_ranks --nocapture)
  item 100 sph_suites
  ;;
buffer)
  item 150 sph_suites
  for round in 1 2; do
    for b in 8 0 4 16; do
      item 45 result "bench_b${b}_r${round}" env PARTICLE_SHM_NVRTC_OPTIONS="-DSPH_BUFFER=$b" \
        timeout 120 sph-gpu-bench --particles 1e6,1e7 --steps 100 --warmup 20 --frames 0 \
        --out "$OUT/sph_buffer_b${b}.jsonl"
    done
  done
  ;;
regs)
  for round in 1 2; do
    for r in none 40 32; do
      opt=""; [[ $r != none ]] && opt="--maxrregcount=$r"
      item 45 result "bench_regs_${r}_r${round}" env PARTICLE_SHM_NVRTC_OPTIONS="$opt" \
        timeout 120 sph-gpu-bench --particles 1e6,1e7 --steps 100 --warmup 20 --frames 0 \
        --out "$OUT/sph_regs_${r}.jsonl"
    done
  done
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session32 $part done in $SECONDS s"
