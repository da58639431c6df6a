#!/usr/bin/env bash
# Session 38 (2026-12-03) on one GPU (only nvidia-h200 was lent). From the repository root,
# after bash bench/gpu/pack.sh:
#
#   bench/gpu/session38_checks.sh verlet   # the SPH Verlet integrator ([sph] integrator =
#                                          # "verlet", new): sph_cuda (f64 parity with the CPU,
#                                          # Verlet with DBC, mDBC, moving solids, checkpoints
#                                          # across backends), sph_group (unchanged paths), the
#                                          # dam break at 1 M and 10 M with Verlet and with the
#                                          # symplectic scheme, then SPHERIC Test 2 at 7.5 mm to
#                                          # 2.0 s with Verlet, then the dam break with Verlet as a
#                                          # user runs it (checkpoint and restart)
#   bench/gpu/session38_checks.sh peer     # Verlet at DualSPHysics' settings (h = 2 dp, Molteni)
#                                          # at the peer runs' sizes, the whole flow (45,000 steps
#                                          # at 1.31 M: time per simulated second), and 100 M
#   bench/gpu/session38_checks.sh verlet2  # (after PACK_MPI=1 bash bench/gpu/pack.sh) Verlet on
#                                          # several workers: sph_cuda again (the boundary's
#                                          # velocity one step back no longer kept, which the
#                                          # first run's moving-solid parity found), sph_group
#                                          # (Verlet on 2 and 3 slabs against the CPU, the state
#                                          # continued on the CPU), mpi_ranks' Verlet test (CPU
#                                          # ranks, then one GPU, two slabs, 2 and 3 GPU ranks),
#                                          # then the dem part
#   bench/gpu/session38_checks.sh ranks    # (after the slabs' step index fix) Verlet through the
#                                          # solver on one GPU, two slabs of GPU 0 and 2 GPU ranks
#                                          # sharing it, each with a short timeout and its log's
#                                          # tail (verlet2's mpi_ranks test hung without output),
#                                          # then sph_group and the mpi_ranks test again
#   bench/gpu/session38_checks.sh twins    # the physics twins with Verlet added to the parity
#                                          # harness (sph_physics_parity: 200,000 random inputs),
#                                          # and the Verlet tests of sph_group and sph_cuda again
#                                          # after the CPU ranks' refactor
#   bench/gpu/session38_checks.sh dem      # session 37's pending part: --gpu-memory compact with
#                                          # velocity Verlet (session37_checks.sh verlet)
#
# Logs $OUT/session38_<part>.log, *.out; records $OUT/sph_verlet.jsonl.
set -uo pipefail
part=${1:-verlet}
export OUT=${OUT:-bench/results/raw/session38}
source "$(dirname "$0")/lib.sh" "session38_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="identical|bits|test result|panicked|FAILED|steps/s|finished|ms/step|impact|H4|H2|P2|peak"
RESULT_LINES=30
case $part in
verlet)
  (cd solver && item 150 result sph_cuda timeout 240 "$BIN/sph_cuda" --test-threads 1 --nocapture)
  (cd solver && item 60 result sph_group timeout 200 "$BIN/sph_group" --test-threads 1)
  item 60 result bench_verlet timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 0 --integrator verlet --out "$OUT/sph_verlet.jsonl"
  item 40 result bench_symplectic timeout 200 sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 \
    --frames 0 --out "$OUT/sph_verlet.jsonl"
  (cd solver && item 230 result spheric_verlet env PARTICLE_SHM_TEST_BACKENDS=cuda \
    PARTICLE_SHM_SPHERIC_INTEGRATOR=verlet PARTICLE_SHM_SPHERIC_END=2.0 timeout 330 \
    "$BIN/sph_spheric" spheric_test2_dam_break --nocapture)
  # (Run when dambreak.toml had no integrator line: the line was added to the [sph] section. It
  # has one since; this sets it.)
  sed 's/^integrator = "symplectic"/integrator = "verlet"/' solver/cases/dambreak.toml \
    > solver/cases/dambreak_verlet_s38.toml
  d=$(mktemp -d)
  item 60 result user_verlet timeout 150 solver --backend cuda --case solver/cases/dambreak_verlet_s38.toml \
    --end-time 0.3 --name-shm sv38 --output "$d" --checkpoint-every 0.15 --progress-every 5
  ck=$(ls "$d"/checkpoint*.bin 2>/dev/null | head -1)
  echo "checkpoint: $ck"
  item 60 result user_verlet_restart timeout 150 solver --backend cuda --restart "$ck" --end-time 0.35 \
    --name-shm sv38b --progress-every 5
  item 30 result user_verlet_two_slabs timeout 60 solver --backend cuda --devices 0,0 \
    --case solver/cases/dambreak_verlet_s38.toml --end-time 0.01 --name-shm sv38c
  rm -rf "$d" solver/cases/dambreak_verlet_s38.toml /dev/shm/sv38 /dev/shm/sv38b /dev/shm/sv38c
  ;;
peer)
  item 90 result bench_peer_verlet timeout 200 sph-gpu-bench --particles 1.372e6,4.99e6 --steps 200 --warmup 20 \
    --frames 0 --coefh 1.1547 --diffusion molteni --integrator verlet --out "$OUT/sph_verlet.jsonl"
  item 150 result bench_peer_long_verlet timeout 300 sph-gpu-bench --particles 1.372e6 --steps 45000 --warmup 20 \
    --frames 0 --coefh 1.1547 --diffusion molteni --integrator verlet --out "$OUT/sph_verlet.jsonl"
  item 150 result bench_100m_verlet timeout 280 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 --frames 2 \
    --integrator verlet --out "$OUT/sph_verlet.jsonl"
  item 60 result bench_1m_10m_frames timeout 200 sph-gpu-bench --particles 1e6,1e7 --steps 200 --warmup 20 \
    --frames 5 --integrator verlet --out "$OUT/sph_verlet.jsonl"
  ;;
verlet2)
  (cd solver && item 60 result sph_cuda2 timeout 200 "$BIN/sph_cuda" --test-threads 1 --nocapture)
  (cd solver && item 90 result sph_group2 timeout 240 "$BIN/sph_group" --test-threads 1 --nocapture)
  (cd solver && item 150 result mpi_ranks_verlet env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 \
    "$BIN/mpi_ranks" verlet --nocapture --test-threads 1)
  BUDGET=$((budget - SECONDS)) OUT="$OUT" bash "$(dirname "$0")/session37_checks.sh" verlet
  ;;
ranks)
  d=$(mktemp -d)
  sed -e 's/^spacing = 0.04/spacing = 0.08/' -e 's/^integrator = "symplectic"/integrator = "verlet"/' \
    solver/cases/dambreak.toml > "$d/dam_verlet.toml"
  sed 's/^\[sph\]$/[sph]\nintegrator = "verlet"\nverlet_steps = 13/' solver/cases/sloshing_tank.toml \
    > "$d/slosh_verlet.toml"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_mpi_yield_when_idle=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none
  for c in dam_verlet slosh_verlet; do
    for how in one group np2; do
      case $how in
      one) pre=(); dev=0 ;;
      group) pre=(); dev=0,0 ;;
      np2) pre=(mpirun -np 2); dev=0 ;;
      esac
      timeout 60 "${pre[@]}" "$BIN/solver" --backend cuda --devices "$dev" --case "$d/$c.toml" \
        --end-time 0.05 --name-shm "r38$how" --progress-every 2 --threads 2 > "$OUT/ranks_${c}_$how.out" 2>&1
      echo "RESULT ranks_${c}_$how rc=$?"
      grep -vE "^\s*$" "$OUT/ranks_${c}_$how.out" | tail -n 4 | cut -c1-400
      rm -f /dev/shm/r38$how
    done
  done
  rm -rf "$d"
  (cd solver && item 60 result sph_group3 timeout 200 "$BIN/sph_group" --test-threads 1 --nocapture verlet)
  (cd solver && item 120 result mpi_ranks_verlet2 env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 \
    "$BIN/mpi_ranks" verlet --nocapture --test-threads 1)
  ;;
twins)
  (cd solver && item 30 result sph_physics_parity timeout 120 "$BIN/sph_physics_parity" --nocapture)
  (cd solver && item 30 result sph_group4 timeout 120 "$BIN/sph_group" --test-threads 1 verlet)
  (cd solver && item 60 result sph_cuda3 timeout 150 "$BIN/sph_cuda" --test-threads 1)
  ;;
dem)
  BUDGET=$budget OUT="$OUT" bash "$(dirname "$0")/session37_checks.sh" verlet
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session38 $part done in $SECONDS s"
