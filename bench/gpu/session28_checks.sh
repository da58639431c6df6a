#!/usr/bin/env bash
# Session 28 (2026-12-01) on one GPU (only nvidia-h200 was lent), from the repository root, after
# bench/gpu/pack.sh:
#
#   bench/gpu/session28_checks.sh moving   # SPH solids with a prescribed motion on the GPU: the
#                                          # SPH suites (f64 parity of moving solids with the CPU,
#                                          # their checkpoint, f32 against the CPU), the shipped
#                                          # wavemaker.toml and stirred_tank.toml as a user runs
#                                          # them (analysis on the segment, --load-shm), the cost
#                                          # of moving the piston at 0.23 M and 1.6 M particles
#                                          # (the same case with the piston fixed beside it), and
#                                          # the refusal over two slabs
#   bench/gpu/session28_checks.sh tank     # after the harmonic motions and [domain] motion: the
#                                          # SPH suites again (f64 parity with the tank rocking),
#                                          # sloshing_tank.toml to 8 s as a user runs it, with
#                                          # analysis probing the left wall
#
# Logs $OUT/session28_<part>.log, *.out.
set -uo pipefail
part=${1:-moving}
export OUT=${OUT:-bench/results/raw/session28}
source "$(dirname "$0")/lib.sh" "session28_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="SPH case|steps/s|finished|ERROR|error|test result|panicked|FAILED|identical|mean fluid"
# wave NAME CASE END [ARGS...]: a run as a user starts it, its summary lines.
wave() {
  local name=$1 case=$2 end=$3; shift 3
  result "$name" timeout 240 solver --backend cuda --case "$case" --end-time "$end" --progress-every 5 "$@"
}
case $part in
moving)
  item 200 sph_suites
  d=$(mktemp -d)
  item 60 wave wavemaker solver/cases/wavemaker.toml 3.0 --name-shm wave --keep-shm
  timeout 60 analysis --attach wave --once --json --gauge 1.0,0.1 --gauge 1.8,0.1 | cut -c1-700
  echo "RESULT analysis rc=${PIPESTATUS[0]}"
  item 30 result wavemaker_resume timeout 120 solver --backend cuda --load-shm wave --end-time 3.2 --progress-every 5
  shmctl clean >/dev/null 2>&1; rm -f /dev/shm/wave
  # The same flume with the piston fixed (its motion removed): the cost of moving it.
  sed '/^motion = {/,/^] }/d' solver/cases/wavemaker.toml > "$d/fixed.toml"
  item 40 wave wavemaker_fixed "$d/fixed.toml" 1.0
  item 40 wave wavemaker_1s solver/cases/wavemaker.toml 1.0
  sed 's/^spacing = 0.01/spacing = 0.005/' solver/cases/wavemaker.toml > "$d/wave5.toml"
  sed 's/^spacing = 0.01/spacing = 0.005/' "$d/fixed.toml" > "$d/fixed5.toml"
  item 90 wave wavemaker5_1s "$d/wave5.toml" 0.3
  item 90 wave wavemaker5_fixed "$d/fixed5.toml" 0.3
  item 40 wave stirred solver/cases/stirred_tank.toml 2.0
  item 20 wave refused_slabs solver/cases/stirred_tank.toml 0.1 --devices 0,0
  rm -rf "$d"
  ;;
tank)
  item 200 sph_suites
  item 200 wave sloshing solver/cases/sloshing_tank.toml 8.0 --name-shm slosh --keep-shm
  timeout 60 analysis --attach slosh --once --json --probe 0.013,0.031,0.093 | cut -c1-900
  echo "RESULT analysis rc=${PIPESTATUS[0]}"
  shmctl clean >/dev/null 2>&1; rm -f /dev/shm/slosh
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session28 $part done in $SECONDS s"
