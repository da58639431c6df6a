#!/usr/bin/env bash
# The GPU checks of the real binaries (issue 4), run on the GPU machine from the repository root:
#
#   bench/gpu/solver_checks.sh [tests|solver|publish|all]
#
# Expects gpu-carry/bins.tar.xz made by bench/gpu/pack.sh (stripped release binaries and the
# solver's test binaries). Writes the log and PNGs to $OUT (default bench/results/raw).
#   tests   : cuda_parity (GPU f64 mode bit-for-bit against the CPU, f32 bounds), every
#             validation test with PARTICLE_SHM_TEST_BACKENDS=cuda, compute-sanitizer on meshes
#   solver  : `solver` on the GPU as users run it: built-in case, mixer and drum cases, live
#             pause/resume/update/stop through shmctl, viewer snapshot, analysis
#   publish : publication share at 10 M particles and 10 frames per wall-second through the
#             real solver (steps/s with and without), analysis and viewer timings at 10 M
set -uo pipefail
what=${1:-all}
source "$(dirname "$0")/lib.sh" solver_checks
nproc
section() { echo; echo "=== $* ==="; }
# result NAME CMD...: runs CMD, prints its last lines and "RESULT NAME rc=N".
result() {
  local name=$1; shift
  "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  tail -n 25 "$OUT/$name.out"
  echo "RESULT $name rc=$rc"
}
info() { shmctl info "$1" --json; echo; }

if [[ $what == tests || $what == all ]]; then
  section "GPU tests"
  cd solver
  result cuda_parity "$BIN/cuda_parity" --test-threads=1 --nocapture
  for t in impact_linear impact_hertz energy incline packing moving_geometry; do
    result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda "$BIN/$t" --test-threads=1 --nocapture
  done
  if command -v compute-sanitizer >/dev/null; then
    result sanitizer_memcheck timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$BIN/cuda_parity" rotating_drum --test-threads=1
    result sanitizer_racecheck timeout 300 compute-sanitizer --tool racecheck --error-exitcode 3 \
      "$BIN/cuda_parity" mesh_incline --test-threads=1
  else
    echo "compute-sanitizer not found"
  fi
  cd ..
fi

if [[ $what == solver || $what == all ]]; then
  section "solver: built-in case, 1 M particles, backend auto"
  result solver_default solver --name-shm g1 --particles 1000000 --end-time 0.05 --keep-shm
  info g1
  result viewer_g1 viewer --attach g1 --snapshot "$OUT/gpu_default.png" --size 640x480
  result analysis_g1 analysis --attach g1 --once --json --timing
  shmctl clean

  for c in mixer drum; do
    section "solver: $c case on the GPU"
    result "solver_$c" solver --name-shm "g$c" --case "solver/cases/$c.toml" --backend cuda \
      --end-time 0.5 --keep-shm
    info "g$c"
    result "viewer_$c" viewer --attach "g$c" --snapshot "$OUT/gpu_$c.png" --size 640x480 --camera front
    shmctl clean
  done

  section "solver: live control on the GPU"
  solver --name-shm live --particles 1000000 --end-time 100 2> "$OUT/live.err" &
  pid=$!
  for i in $(seq 1 100); do shmctl info live --json 2>/dev/null | grep -q '"step":[1-9]' && break; sleep 0.2; done
  info live
  shmctl send live pause; sleep 1; a=$(shmctl info live --json); sleep 1; b=$(shmctl info live --json)
  echo "paused: $a"; echo "paused 1 s later: $b"
  shmctl send live update; info live
  shmctl send live resume; sleep 1; info live
  shmctl send live checkpoint
  shmctl send live stop
  wait $pid; echo "RESULT live_solver rc=$?"
  tail -n 8 "$OUT/live.err"
fi

if [[ $what == publish || $what == all ]]; then
  section "publication share through the solver: 10 M particles"
  # Same 4,000 steps of the loose phase: without frames (only the first and last), then with a
  # frame every 100 ms of wall time (positions, velocities, angular velocities: 360 MB each).
  result publish_off solver --name-shm p0 --particles 10000000 --end-time 0.04 --refresh 1000 \
    --refresh-wall-ms 0
  result publish_on solver --name-shm p1 --particles 10000000 --end-time 0.04 --refresh 1000 \
    --refresh-wall-ms 100 --keep-shm
  info p1
  section "analysis and viewer on 10 M particles ($(nproc) cores)"
  result analysis_10m analysis --attach p1 --once --json --timing
  result viewer_10m viewer --attach p1 --snapshot "$OUT/gpu_10m.png" --size 1280x800
  shmctl clean
fi
echo "done: $what"
