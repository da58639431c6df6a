#!/usr/bin/env bash
# Session 52 (2026-12-05) on one H100 (issue 17's 100 M publication share, 2.21-2.24 % there in
# session 51 against the target's 2 %). From the repository root, after bash bench/gpu/pack.sh
# and, before the change, the previous build's bench stripped to gpu-carry/sph-gpu-bench-prev:
#
#   bench/gpu/session52_checks.sh all
#     1. sph_cuda's frame test (every frame of a run against its step's state; the host side
#        poisoned before each frame, so the fixed walls staged once must still arrive);
#     2. the 100 M publication share, this build (the fixed boundary's positions and
#        velocities staged once) against the previous one, alternated, twice each;
#     3. the SPH GPU suites; the start log's segment size and device memory (session 51's
#        lines, never run on a device); the SPH user path.
#   bench/gpu/session52_checks.sh ab   # step 2 again, three times each (the same warm machine)
#   bench/gpu/session52_checks.sh more # cuda_parity (CudaSim::positions after outflow now
#                                      # downloads the ids once: its frame test reads it), then
#                                      # the 1 M and 10 M records of this build, both integrators
#   bench/gpu/session52_checks.sh stcs # the 100 M publication share with the frame's stores
#                                      # evict-first (-DSPH_FRAME_STCS=1, commit d8a2ef2; no
#                                      # gain, reverted: raw/session52/frame_stcs.patch and
#                                      # stcs_ab.txt) against without,
#                                      # in the order ABBA; then the start log of a 28 M
#                                      # dam break as a user starts it (placing, uploading, the
#                                      # segment's preparation, with their times)
#   bench/gpu/session52_checks.sh startlog  # that start log alone
#
# Logs $OUT/session52_<part>.log; one archive of it all.
set -uo pipefail
part=${1:-all}
export OUT=${OUT:-bench/results/raw/session52}
source "$(dirname "$0")/lib.sh" "session52_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="test result|panicked|FAILED|steps/s|finished|ms/step|rror|frames, each"
RESULT_LINES=30
# pub100 LABEL...: the 100 M publication record once per label, in order (`prev`: the build
# before, gpu-carry/sph-gpu-bench-prev; `stcs`: this build with -DSPH_FRAME_STCS=1; else this
# build), each appended to $OUT/publish100_<label>.jsonl.
pub100() {
  local b exe opt
  for b in "$@"; do
    exe=$BIN/sph-gpu-bench; opt=""
    [ "$b" = prev ] && exe=$BIN/sph-gpu-bench-prev
    [ "$b" = stcs ] && opt="-DSPH_FRAME_STCS=1"
    echo "+ $b: PARTICLE_SHM_NVRTC_OPTIONS=$opt sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 --integrator verlet"
    PARTICLE_SHM_NVRTC_OPTIONS=$opt item 40 timeout 200 "$exe" --particles 1e8 --steps 20 --warmup 3 --frames 2 \
      --integrator verlet --out "$OUT/publish100_$b.jsonl" 2>&1 | grep -E "ms/step|rror" | cut -c1-400
  done
}
case $part in
all)
  pushd solver >/dev/null || exit
  item 40 result frames timeout 120 "$BIN/sph_cuda" --test-threads 1 --nocapture frames_published_beside
  popd >/dev/null || exit
  cp gpu-carry/sph-gpu-bench-prev "$BIN/"
  pub100 new prev new prev
  item 150 sph_suites
  for devs in 0 0,0; do
    timeout 120 solver --case solver/cases/dambreak.toml --backend cuda --devices $devs --end-time 0.01 \
      --name-shm lg52 --progress-every 5 2>&1 | grep -E "segment|SPH on|finished|rror" | cut -c1-240
    echo "RESULT logs_$devs rc=${PIPESTATUS[0]}"
  done
  rm -f /dev/shm/lg52*
  item 30 sph_user_path
  ;;
ab)
  cp gpu-carry/sph-gpu-bench-prev "$BIN/"
  pub100 prev new prev new prev new
  ;;
more)
  pushd solver >/dev/null || exit
  item 150 result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  popd >/dev/null || exit
  J=$OUT/sph_gpu.jsonl
  item 30 result verlet_1m_10m timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 --frames 5 \
    --integrator verlet --out "$J"
  item 30 result symplectic_1m_10m timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --out "$J"
  ;;
stcs)
  pub100 new stcs stcs new
  ;&
startlog)
  echo "+ solver --case solver/cases/dambreak.toml --backend cuda --spacing 0.0031 --end-time 0.00002 --fields pos,pressure --name-shm s28 --progress-every 5"
  item 60 timeout 200 solver --case solver/cases/dambreak.toml --backend cuda --spacing 0.0031 --end-time 0.00002 \
    --fields pos,pressure --name-shm s28 --progress-every 5 2>&1 | cut -c1-240 | tail -n 14
  rm -f /dev/shm/s28*
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session52 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session52_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session52_$part.tgz" "$OUT/"
