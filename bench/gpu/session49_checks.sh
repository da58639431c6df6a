#!/usr/bin/env bash
# Session 49 (2026-12-05) on one GPU (only nvidia-h200 was lent). From the repository root,
# after PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session49_checks.sh checks   # after session 48's CPU changes (the SPH pair loops
#                                          # in pieces of at most 256 particles; SPH cases read
#                                          # [decomposition], whose split_axis and balance now
#                                          # reach GPU groups too): the suites that compare the
#                                          # GPU's f64 bits with the CPU (sph_cuda, sph_group,
#                                          # cuda_parity), SPH through the solver on two slabs
#                                          # of this GPU (the case's split axis, refusals), and
#                                          # the README's main job
#   bench/gpu/session49_checks.sh near     # walls without fluid in reach skip their walk
#                                          # (sph_fluid_blocks, sph_fluid_near): the GPU's f64
#                                          # bits against the CPU (sph_cuda, sph_group), the same
#                                          # suite with a wrong mark on purpose (must fail), and
#                                          # the dam break's speed against the build before
#                                          # (gpu-carry/sph-gpu-bench-before), alternated
#   bench/gpu/session49_checks.sh mdbc     # mDBC's ghost nodes without fluid in reach skip their
#                                          # walk too: sph_cuda, sph_group (f64 bits with mDBC),
#                                          # and the dam break with mDBC against the build before
#                                          # (the dry-wall skip alone), alternated
#
# Logs $OUT/session49_<part>.log; one archive of it all.
set -uo pipefail
part=${1:-checks}
export OUT=${OUT:-bench/results/raw/session49}
source "$(dirname "$0")/lib.sh" "session49_${part}"
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|the same run"
RESULT_LINES=30
# sph_app NAME EXPECT_RC PATTERN SOLVER_ARGS...: the solver on an SPH case; prints its last lines
# and whether its exit status and log are as expected.
sph_app() {
  local name=$1 want=$2 pattern=$3; shift 3
  echo "+ solver $*"
  timeout 120 solver "$@" > "$OUT/app_$name.out" 2>&1
  local rc=$?
  tail -n 4 "$OUT/app_$name.out" | cut -c1-300
  local ok=no
  if [ "$rc" = "$want" ] && grep -Eq "$pattern" "$OUT/app_$name.out"; then ok=yes; fi
  # Nothing may be left behind by a refused start.
  if [ "$want" != 0 ] && ls /dev/shm | grep -q "$name"; then ok="no (segment left)"; fi
  echo "RESULT app_$name rc=$rc expected=$want as-expected=$ok"
}
# parity_suites: the suites that compare the GPU's f64 bits with the CPU reference.
parity_suites() {
  pushd solver >/dev/null || exit
  item 100 result sph_cuda timeout 250 "$BIN/sph_cuda" --test-threads 1
  item 80 result sph_group timeout 250 "$BIN/sph_group" --test-threads 1
  popd >/dev/null || exit
}
# mdbc_ab OLD_LABEL OLD_BIN PREFIX: the dam break with mDBC, gpu-carry/OLD_BIN against this build,
# alternated (old new new old) for each integrator; records in $OUT/PREFIX_<integrator>_<label>.jsonl.
mdbc_ab() {
  local old=$1 old_bin=$2 prefix=$3 integ b exe
  cp "gpu-carry/$old_bin" "$BIN/"
  for integ in verlet symplectic; do
    for b in "$old" new new "$old"; do
      exe=$BIN/sph-gpu-bench; [ "$b" = "$old" ] && exe=$BIN/$old_bin
      echo "+ $b: sph-gpu-bench --particles 1e6,1e7 --steps 100 --warmup 10 --frames 0 --boundary mdbc --integrator $integ"
      item 40 timeout 120 "$exe" --particles 1e6,1e7 --steps 100 --warmup 10 --frames 0 --boundary mdbc \
        --integrator $integ --out "$OUT/${prefix}_${integ}_$b.jsonl" 2>&1 | grep -E "ms/step|ITEM|SKIPPED" | cut -c1-200
    done
  done
}
case $part in
checks)
  pushd solver >/dev/null || exit
  item 150 result sph_cuda timeout 250 "$BIN/sph_cuda" --test-threads 1
  item 150 result sph_group timeout 250 "$BIN/sph_group" --test-threads 1
  item 120 result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  popd >/dev/null || exit
  # The dam break's [decomposition] with split_axis = "y": two slabs of this GPU cut along y.
  sed 's/^\[decomposition\].*//' solver/cases/dambreak.toml > /tmp/db_y.toml
  printf '\n[decomposition]\nsubdomains = 2\nsplit_axis = "y"\nbalance = "count"\n' >> /tmp/db_y.toml
  item 60 sph_app dby 0 "along y" --case /tmp/db_y.toml --backend cuda --devices 0,0 \
    --end-time 0.01 --name-shm dby --progress-every 1
  # The command line overrides the case: along x.
  item 60 sph_app dbx 0 "along x" --case /tmp/db_y.toml --backend cuda --devices 0,0 \
    --split-axis x --end-time 0.01 --name-shm dbx --progress-every 1
  # A count other than the listed GPUs' is refused, naming both.
  item 30 sph_app db3 1 "sub-domain|GPU" --case /tmp/db_y.toml --backend cuda --devices 0,0 \
    --subdomains 3 --end-time 0.01 --name-shm db3
  item 30 sph_app db1 1 "sub-domain|GPU" --case solver/cases/dambreak.toml --backend cuda \
    --devices 0 --subdomains 2 --end-time 0.01 --name-shm db1
  echo "== main job"; item 60 env OUT="$OUT/main_job" bash bench/gpu/main_job.sh
  ;;
near)
  budget=${BUDGET:-560}
  parity_suites
  pushd solver >/dev/null || exit
  # The mutation: each block marked by its own fluid alone. Walls whose fluid lies in the next
  # block then lose their density rate, and the f64 parity must fail.
  PARTICLE_SHM_NVRTC_OPTIONS=-DSPH_FLUID_NEAR_OWN_BLOCK item 60 result mutation_sph_cuda \
    timeout 200 "$BIN/sph_cuda" --test-threads 1 f64_gpu_steps_have_the_cpu_bits
  popd >/dev/null || exit
  cp gpu-carry/sph-gpu-bench-before "$BIN/"
  for b in before new before new new before; do
    exe=$BIN/sph-gpu-bench; [ $b = before ] && exe=$BIN/sph-gpu-bench-before
    echo "+ $b: sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 --frames 0 --integrator verlet"
    item 40 timeout 120 "$exe" --particles 1e6,1e7 --steps 200 --warmup 20 --frames 0 \
      --integrator verlet --out "$OUT/near_$b.jsonl" 2>&1 | grep -E "ms/step|ITEM|SKIPPED" | cut -c1-200
  done
  for b in before new new before; do
    exe=$BIN/sph-gpu-bench; [ $b = before ] && exe=$BIN/sph-gpu-bench-before
    echo "+ $b: sph-gpu-bench --particles 1e7 --steps 100 --warmup 10 --frames 0 (symplectic)"
    item 40 timeout 120 "$exe" --particles 1e7 --steps 100 --warmup 10 --frames 0 \
      --out "$OUT/near_symplectic_$b.jsonl" 2>&1 | grep -E "ms/step|ITEM|SKIPPED" | cut -c1-200
  done
  ;;
mdbc)
  budget=${BUDGET:-560}
  parity_suites
  mdbc_ab before sph-gpu-bench-before mdbc
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session49 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session49_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session49_$part.tgz" "$OUT/"
