#!/usr/bin/env bash
# Session 40 (2026-12-03) on one GPU (only nvidia-h200 was lent). From the repository root,
# after bash bench/gpu/pack.sh:
#
#   bench/gpu/session40_checks.sh sass     # the fluid rates kernel's machine code (SASS, with
#                                          # line info) and Nsight Compute's full set on one
#                                          # evaluation at 10 M with per-instruction counts;
#                                          # bounds on the diffusion's share (the pair code with
#                                          # Molteni-Colagrossi and with no diffusion, NVRTC
#                                          # options on the same build)
#   bench/gpu/session40_checks.sh lean     # the lean walk (x-blocks, one branch per candidate)
#                                          # and the folded hydrostatic polynomial: its SASS and
#                                          # instruction counts; against session 39's walk
#                                          # (-DSPH_LEAN=0) and without the register bound,
#                                          # alternating twice; the records (frames, 100 M,
#                                          # symplectic)
#   bench/gpu/session40_checks.sh checks   # the SPH suites, the SPH tests over GPU ranks, the
#                                          # user path, SPHERIC Test 2 to 2.0 s (Verlet)
#   bench/gpu/session40_checks.sh more     # the Verlet test over GPU ranks alone; the kernels'
#                                          # times in a 10 M Verlet step
#   bench/gpu/session40_checks.sh final    # the committed build: Verlet records twice, sph_cuda,
#                                          # sph_group
#
# Logs $OUT/session40_<part>.log, *.out; records $OUT/sph40.jsonl; one archive of it all.
set -uo pipefail
part=${1:-sass}
export OUT=${OUT:-bench/results/raw/session40}
source "$(dirname "$0")/lib.sh" "session40_${part}"
budget=${BUDGET:-560}
J="$OUT/sph40.jsonl"
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|ms/step|impact|H4|H2|P2|peak"
RESULT_LINES=30
NCU=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
bench() {  # bench NAME NVRTC_OPTIONS [ARGS...]: the Verlet dam break at 1 M and 10 M
  local name=$1 opts=$2; shift 2
  echo "== $name: PARTICLE_SHM_NVRTC_OPTIONS='$opts'"
  PARTICLE_SHM_NVRTC_OPTIONS="$opts" timeout 120 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 0 --integrator verlet --out "$J" "$@" 2>&1 | grep -E "ms/step|rror|arning"
}
case $part in
sass)
  export XDG_CACHE_HOME=/tmp/sass40 && rm -rf /tmp/sass40
  PARTICLE_SHM_NVRTC_OPTIONS=-lineinfo timeout 60 sph-gpu-bench --particles 1e6 --steps 5 --warmup 1 --frames 0 \
    --integrator verlet > "$OUT/sass_run.out" 2>&1
  python3 bench/gpu/cubin_extract.py /tmp/sass40/particle-shm/kernels /tmp/cubins40
  for f in /tmp/cubins40/*.cubin; do
    if "$CUOBJ" -sass "$f" | grep -q "Function : sph_rates_fluid"; then
      cp "$f" "$OUT/sph_module.cubin"; cp "${f%.cubin}.key" "$OUT/sph_module.key"
      "$CUOBJ" -sass "$f" > "$OUT/sph_module.sass"
      "$CUOBJ" -res-usage "$f" > "$OUT/sph_module.res" 2>&1
    fi
  done
  echo "SASS lines: $(wc -l < "$OUT/sph_module.sass")"
  unset XDG_CACHE_HOME
  PARTICLE_SHM_NVRTC_OPTIONS=-lineinfo $NCU --clock-control none --set full --import-source yes \
    --kernel-name regex:sph_rates_fluid --launch-skip 24 --launch-count 1 -o "$OUT/rates10m" \
    sph-gpu-bench --particles 1e7 --steps 10 --warmup 20 --frames 0 --integrator verlet > "$OUT/ncu_full.out" 2>&1
  echo "ncu rc=$? $(ls -la "$OUT"/rates10m* 2>&1)"
  $NCU -i "$OUT/rates10m.ncu-rep" --page details > "$OUT/rates10m_details.txt" 2>&1
  $NCU -i "$OUT/rates10m.ncu-rep" --page source --csv --print-source sass > "$OUT/rates10m_sass.csv" 2>&1
  $NCU -i "$OUT/rates10m.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/rates10m_cuda_sass.csv" 2>&1
  wc -l "$OUT"/rates10m_*
  grep -E "Duration|Registers Per|Achieved Occupancy|Avg. Active Threads|Warp Cycles Per Issued|Compute \(SM\) Throughput|Executed Instructions  " \
    "$OUT/rates10m_details.txt" | head -12
  # Bounds on the diffusion's share: Molteni-Colagrossi (no hydrostatic term) and none.
  for round in 1 2; do
    bench "shipped_$round" ""
    bench "molteni_$round" "-DSPH_DIFFUSION=1"
    bench "nodiffusion_$round" "-DSPH_DIFFUSION=0"
  done
  ;;
lean)
  export XDG_CACHE_HOME=/tmp/sass40 && rm -rf /tmp/sass40
  PARTICLE_SHM_NVRTC_OPTIONS=-lineinfo timeout 60 sph-gpu-bench --particles 1e6 --steps 5 --warmup 1 --frames 0 \
    --integrator verlet > "$OUT/sass_run.out" 2>&1
  python3 bench/gpu/cubin_extract.py /tmp/sass40/particle-shm/kernels /tmp/cubins40 > /dev/null
  for f in /tmp/cubins40/*.cubin; do
    if "$CUOBJ" -sass "$f" | grep -q "Function : sph_rates_fluid"; then
      cp "${f%.cubin}.key" "$OUT/sph_module_lean.key"
      "$CUOBJ" -sass "$f" | gzip > "$OUT/sph_module_lean.sass.gz"
    fi
  done
  unset XDG_CACHE_HOME
  for v in "" "-DSPH_LEAN=0"; do
    PARTICLE_SHM_NVRTC_OPTIONS="-lineinfo $v" $NCU --clock-control none --set detailed --import-source yes \
      --kernel-name regex:sph_rates_fluid --launch-skip 24 --launch-count 1 -o "$OUT/rates10m_lean${v:+0}" \
      sph-gpu-bench --particles 1e7 --steps 10 --warmup 20 --frames 0 --integrator verlet > /dev/null 2>&1
    $NCU -i "$OUT/rates10m_lean${v:+0}.ncu-rep" --page source --csv --print-source sass > "$OUT/rates10m_lean${v:+0}_sass.csv" 2>&1
    $NCU -i "$OUT/rates10m_lean${v:+0}.ncu-rep" --page details > "$OUT/rates10m_lean${v:+0}_details.txt" 2>&1
    echo "== ncu SPH_LEAN options '$v'"
    grep -E "Duration|Registers Per|Achieved Occupancy|Avg. Active Threads|Warp Cycles Per Issued|Compute \(SM\) Throughput|Executed Instructions  " \
      "$OUT/rates10m_lean${v:+0}_details.txt" | head -8
  done
  rm -f "$OUT"/*.ncu-rep
  for round in 1 2; do
    bench "lean_$round" ""
    bench "walk39_$round" "-DSPH_LEAN=0"
    bench "lean_unbounded_$round" "-DSPH_RATES_UNBOUNDED"
  done
  # The records of the build: with frames at 1 M and 10 M (publication), 100 M, and the
  # symplectic default at 10 M.
  item 60 result bench_frames timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --integrator verlet --out "$J"
  item 100 result bench_100m timeout 250 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 \
    --integrator verlet --out "$J"
  item 40 result bench_symplectic timeout 150 sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 \
    --frames 0 --out "$J"
  ;;
checks)
  # The suites (f64 parity with the CPU, slabs, twins), the SPH tests over GPU ranks, the user
  # path, and SPHERIC Test 2 at 7.5 mm to 2.0 s (Verlet).
  item 110 sph_suites
  item 60 sph_user_path
  [[ ${SPHERIC:-1} == 1 ]] && (cd solver && item 220 result spheric_verlet env PARTICLE_SHM_TEST_BACKENDS=cuda \
    PARTICLE_SHM_SPHERIC_INTEGRATOR=verlet PARTICLE_SHM_SPHERIC_END=2.0 timeout 300 \
    "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  (cd solver && item 150 result mpi_ranks_sph env PARTICLE_SHM_TEST_BACKENDS=cuda timeout $((budget - SECONDS)) \
    "$BIN/mpi_ranks" over_ranks --nocapture --test-threads 1)
  ;;
more)
  # The Verlet test over GPU ranks alone (it ran out of the shared budget in `checks`), and
  # where a Verlet step's time goes at 10 M now (every kernel's duration over 4 steps after 40).
  (cd solver && item 150 result mpi_ranks_verlet env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 \
    "$BIN/mpi_ranks" verlet --nocapture --test-threads 1)
  $NCU --clock-control none --cache-control none --launch-skip 400 --launch-count 60 --csv --page raw \
    --metrics gpu__time_duration.sum sph-gpu-bench --particles 1e7 --steps 8 --warmup 40 --frames 0 \
    --integrator verlet > "$OUT/ncu_times.csv" 2> "$OUT/ncu_times.err"
  python3 bench/gpu/ncu_summary.py "$OUT/ncu_times.csv"
  ;;
final)
  # The committed build (the comparison walk removed, the x-block check added: the same machine
  # code) on a fresh machine: the Verlet records twice, the f64 parity and slab suites.
  for round in 1 2; do bench "final_$round" ""; done
  pushd solver >/dev/null && result sph_cuda timeout 200 "$BIN/sph_cuda" --test-threads 1 \
    && result sph_group timeout 200 "$BIN/sph_group" --test-threads 1; popd >/dev/null
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session40 $part done in $SECONDS s"
# One archive of the part's files (the device tool brings back only a few files per call).
tar -czf "/tmp/session40_$part.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/session40_$part.tgz" "$OUT/"
