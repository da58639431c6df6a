#!/usr/bin/env bash
# Session 17 (2026-11-24) on one GPU, from the repository root, after bench/gpu/pack.sh
# (issue 13: what bounds the dense frictional collide).
#   bench/gpu/session17_checks.sh ncu   # Nsight Compute's full set for one dem_collide launch of
#                                       # the 10 M dense bed, linear with friction, after the
#                                       # relaxation (details page, and the SASS source page as
#                                       # CSV for the stall reasons per instruction)
#   bench/gpu/session17_checks.sh ab    # the collide's loads moved ahead (the next list entry,
#                                       # the next expected history entry) against the build
#                                       # before (gpu-carry/bins_old.tar.xz), alternating: 10 M
#                                       # dense linear with friction and Hertz, twice each; the
#                                       # main job; the DEM parity suite
#   bench/gpu/session17_checks.sh ab2   # the next partner also fetched into the cache ahead
#                                       # against the build of part ab (gpu-carry/bins_a.tar.xz),
#                                       # alternating, 10 M dense linear with friction and Hertz;
#                                       # then the new build with the collide's launch bound at 5
#                                       # and 7 blocks (6 the default); the DEM parity suite
#   bench/gpu/session17_checks.sh big   # the 100 M dense records with friction (as session 14)
#   bench/gpu/session17_checks.sh ab3   # the expected history entry loaded at one unconditional
#                                       # site, and one-species cases compiled without species
#                                       # loads, against the build of part ab (bins_a.tar.xz),
#                                       # alternating as in ab2; the main job; cuda_parity and
#                                       # cuda_multi (they failed: species_of was defined
#                                       # after the mesh filter that calls it, so every mesh
#                                       # module, and every test module, failed to compile)
#   bench/gpu/session17_checks.sh ahead # the entry ahead reloaded after every contact (the
#                                       # default) or only when the cursor moved
#                                       # (-DDEM_AHEAD_ALWAYS=0), alternating: the main job twice
#                                       # each, 10 M dense linear with friction once each
#   bench/gpu/session17_checks.sh ab5   # one species: a partner's properties from the table's
#                                       # first row instead of the particle's own registers,
#                                       # against that build (gpu-carry/bins_b.tar.xz),
#                                       # alternating: the main job twice each, 10 M dense
#                                       # linear with friction and Hertz once each
#   bench/gpu/session17_checks.sh final # the final build's records: the machine's first main job
#                                       # (caches removed) and a second, the drum and the silo,
#                                       # 10 M dense (linear and Hertz with friction,
#                                       # frictionless), 100 M dense with friction
#   bench/gpu/session17_checks.sh suite # the final build's device suite: the parity suites and
#                                       # the validation tests on the GPU
#   bench/gpu/session17_checks.sh prec  # EXPERIMENT: NVRTC's --prec-sqrt=false --prec-div=false
#                                       # (approximate f32 square roots and divisions) against the
#                                       # default, alternating: 10 M dense linear and Hertz with
#                                       # friction; 100 M Hertz and the main job with them
#   bench/gpu/session17_checks.sh stream  # the history and the Verlet list loaded and stored
#                                       # evict-first (DEM_STREAM_HINTS, the default) against
#                                       # plain accesses (-DDEM_STREAM_HINTS=0), alternating: 10 M
#                                       # dense linear and Hertz, 100 M dense Hertz; the main job;
#                                       # cuda_parity
#   bench/gpu/session17_checks.sh ab4   # the fixed ab3 build: the main job against the build
#                                       # of part ab, alternating, twice each; cuda_parity and
#                                       # cuda_multi
# Logs under $OUT.
set -uo pipefail
part=${1:-ncu}
export OUT=${OUT:-bench/results/raw/session17}
source "$(dirname "$0")/lib.sh" "session17_${part}"
NCU=/opt/nvidia/nsight-compute/2025.3.1/ncu
# unpack TAR DIR: another build's binaries (gpu-carry/TAR) into DIR.
unpack() { rm -rf "$2" && mkdir -p "$2" && tar -xJf "gpu-carry/$1" -C "$2"; }
# dense10m LABEL DIR MODEL JSONL [ARGS...]: the 10 M dense bed with DIR's dem-gpu-bench (DIR
# empty: this build's), its record appended to JSONL.
dense10m() {
  local label=$1 dir=$2 model=$3 j=$4; shift 4
  echo "== $label $model${*:+ $*}"
  timeout 300 "${dir:+$dir/}dem-gpu-bench" bench --particles 1e7 --model "$model" --phase dense --relax 2000 \
    --steps 200 "$@" --out "$j" 2>&1 | grep -E "steps/s" | tail -n 2
}
# parity [multi]: the DEM parity suite (and, with an argument, the GPU-group suite), from solver/.
parity() {
  pushd solver >/dev/null || return
  RESULT_PATTERN="test result|panicked|FAILED|in contact" result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  if [[ -n ${1:-} ]]; then
    RESULT_PATTERN="test result|panicked|FAILED" result cuda_multi timeout 300 "$BIN/cuda_multi" --test-threads 1
  fi
  popd >/dev/null || return
}
# ab_dense LABEL DIR JSONL: the 10 M dense beds, linear and Hertz with friction, two rounds
# alternating DIR's build (LABEL) with this one ("new").
ab_dense() {
  local round v model
  for round in 1 2; do
    for v in "$1" new; do
      for model in linear-friction hertz; do
        if [[ $v == new ]]; then dense10m "new (round $round)" "" $model "$3"
        else dense10m "$1 (round $round)" "$2" $model "$3"; fi
      done
    done
  done
}
if [[ $part == ncu ]]; then
  model=${MODEL:-linear-friction}
  n=${N:-1e7}
  # Kernel line info for the source page (NVRTC option; the cache key holds it).
  export PARTICLE_SHM_NVRTC_OPTIONS="-lineinfo"
  timeout 500 $NCU --set full --import-source yes --kernel-name regex:dem_collide --launch-skip 2100 --launch-count 1 \
    -o "$OUT/collide_$model" -f \
    dem-gpu-bench bench --particles "$n" --model "$model" --phase dense --relax 2000 --steps 200 \
    > "$OUT/ncu_run_$model.out" 2>&1
  tail -n 5 "$OUT/ncu_run_$model.out"
  $NCU --import "$OUT/collide_$model.ncu-rep" --page details > "$OUT/collide_${model}_details.txt" 2>&1
  $NCU --import "$OUT/collide_$model.ncu-rep" --page source --csv --print-source sass \
    > "$OUT/collide_${model}_sass.csv" 2>&1
  xz -9 "$OUT/collide_${model}_sass.csv"
  rm -f "$OUT/collide_$model.ncu-rep"
  grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|DRAM Throughput|Executed Ipc" \
    "$OUT/collide_${model}_details.txt" | head -30
fi
if [[ $part == ab ]]; then
  unpack bins_old.tar.xz /tmp/pshm-old
  ab_dense old /tmp/pshm-old "$OUT/ab.jsonl"
  OUT="$OUT/main_job" bash bench/gpu/main_job.sh
  parity
fi
if [[ $part == ab2 ]]; then
  unpack bins_a.tar.xz /tmp/pshm-a
  J="$OUT/ab2.jsonl"
  ab_dense a /tmp/pshm-a "$J"
  for blocks in 5 7; do dense10m new "" linear-friction "$J" --min-blocks $blocks; done
  parity
fi
if [[ $part == big ]]; then
  J="$OUT/big.jsonl"
  for m in linear-friction hertz; do
    run bench --particles 1e8 --model $m --phase dense --relax 500 --steps 50 --warmup 5 || echo "100M $m did not run"
  done
fi
if [[ $part == ab3 ]]; then
  unpack bins_a.tar.xz /tmp/pshm-a
  ab_dense a /tmp/pshm-a "$OUT/ab3.jsonl"
  OUT="$OUT/main_job" bash bench/gpu/main_job.sh
  parity multi
fi
if [[ $part == ab4 ]]; then
  A=/tmp/pshm-a
  unpack bins_a.tar.xz "$A"
  for round in 1 2; do
    echo "== main job, build of part ab (round $round)"
    OUT="$OUT/main_job_a" MAIN_JOB_BIN=$A bash bench/gpu/main_job.sh | tail -n 1
    echo "== main job, new build (round $round)"
    OUT="$OUT/main_job_new" bash bench/gpu/main_job.sh | tail -n 1
  done
  parity multi
fi
if [[ $part == ahead ]]; then
  J="$OUT/ahead.jsonl"
  for round in 1 2; do
    for v in 1 0; do
      echo "== DEM_AHEAD_ALWAYS=$v (round $round)"
      PARTICLE_SHM_NVRTC_OPTIONS="-DDEM_AHEAD_ALWAYS=$v" OUT="$OUT/main_job_ahead$v" bash bench/gpu/main_job.sh | tail -n 1
      if [[ $round == 1 ]]; then
        PARTICLE_SHM_NVRTC_OPTIONS="-DDEM_AHEAD_ALWAYS=$v" dense10m "DEM_AHEAD_ALWAYS=$v" "" linear-friction "$J"
      fi
    done
  done
fi
if [[ $part == ab5 ]]; then
  B=/tmp/pshm-b
  unpack bins_b.tar.xz "$B"
  J="$OUT/ab5.jsonl"
  for round in 1 2; do
    for v in b new; do
      echo "== $v (round $round)"
      if [[ $v == b ]]; then
        OUT="$OUT/main_job_b" MAIN_JOB_BIN=$B bash bench/gpu/main_job.sh | tail -n 1
      else
        OUT="$OUT/main_job_new5" bash bench/gpu/main_job.sh | tail -n 1
      fi
      if [[ $round == 1 ]]; then
        d=""; [[ $v == b ]] && d=$B
        for model in linear-friction hertz; do dense10m "$v" "$d" $model "$J"; done
      fi
    done
  done
fi
if [[ $part == final ]]; then
  J="$OUT/dem_gpu.jsonl"
  dem_records
fi
if [[ $part == suite ]]; then
  dem_suite
fi
if [[ $part == final || $part == suite ]]; then
  # At most 8 files come back from the device: the logs travel as one archive.
  (cd "$OUT" && tar -czf "/tmp/outs_$part.tar.gz" --exclude "*.tar.gz" --exclude "*.log" . && mv "/tmp/outs_$part.tar.gz" . ; find . -type f ! -name "*.tar.gz" ! -name "*.log" ! -name "*.jsonl" -delete)
fi
if [[ $part == prec ]]; then
  J="$OUT/prec.jsonl"
  P="--prec-sqrt=false --prec-div=false"
  for v in default approx; do
    for model in linear-friction hertz; do
      if [[ $v == approx ]]; then export PARTICLE_SHM_NVRTC_OPTIONS="$P"; else unset PARTICLE_SHM_NVRTC_OPTIONS; fi
      dense10m "$v" "" $model "$J"
    done
  done
  export PARTICLE_SHM_NVRTC_OPTIONS="$P"
  echo "== approx main job"; OUT="$OUT/main_job_prec" bash bench/gpu/main_job.sh | tail -n 1
  echo "== approx 100 M hertz"
  timeout 300 dem-gpu-bench bench --particles 1e8 --model hertz --phase dense --relax 500 --steps 50 --warmup 5 \
    --out "$J" 2>&1 | grep -E "steps/s" | tail -n 2
fi
if [[ $part == stream ]]; then
  J="$OUT/stream.jsonl"
  for v in 0 1; do
    for model in linear-friction hertz; do
      PARTICLE_SHM_NVRTC_OPTIONS="-DDEM_STREAM_HINTS=$v" dense10m "DEM_STREAM_HINTS=$v" "" $model "$J"
    done
  done
  for v in 0 1; do
    echo "== DEM_STREAM_HINTS=$v 100 M hertz"
    PARTICLE_SHM_NVRTC_OPTIONS="-DDEM_STREAM_HINTS=$v" timeout 300 dem-gpu-bench bench --particles 1e8 --model hertz \
      --phase dense --relax 500 --steps 50 --warmup 5 --out "$J" 2>&1 | grep -E "steps/s" | tail -n 2
  done
  echo "== main job"; OUT="$OUT/main_job_stream" bash bench/gpu/main_job.sh | tail -n 1
  parity
fi
