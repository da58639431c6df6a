#!/usr/bin/env bash
# Session 37 (2026-12-03) on one GPU (only nvidia-h200 was lent). From the repository root,
# after bash bench/gpu/pack.sh:
#
#   bench/gpu/session37_checks.sh bands    # (the code of commit ea4bf8c, reverted after this
#                                          # run: no gain) the SPH fluid rates taken in bands of rows
#                                          # (SphCudaOptions::band_rows, sph_bands in sph.cu):
#                                          # the SPH GPU suites (sph_cuda's f64 parity now runs
#                                          # with bands of 3 rows, and f32_bands_change_no_bit
#                                          # compares 1, 2, 3 and the default with the sorted
#                                          # order), then the dam break at 10 M and 100 M with
#                                          # bands of 0 (the sorted order, as before), 8, 16, 32
#                                          # and 64 rows, 0 again last (drift)
#   bench/gpu/session37_checks.sh records  # the records of sph_gpu.json with the default
#                                          # bands (sph_records) and the user path
#   bench/gpu/session37_checks.sh compact  # session 36's pending part: the DEM parity tests
#                                          # and validation suites in the compact layout (it
#                                          # found the restart of velocity Verlet off: size_spill
#                                          # placed the meshes at the step's start)
#   bench/gpu/session37_checks.sh fix      # after the fix (size_spill leaves the meshes where
#                                          # the step placed them): cuda_parity in the compact
#                                          # layout, as it is, and on one copy
#   bench/gpu/session37_checks.sh peer     # the dam break at the particle counts of the peer
#                                          # runs (DualSPHysics 5.4 and TNL-SPH on an H100,
#                                          # sph_gpu.md): with DualSPHysics' h = 2 dp
#                                          # (--coefh 1.1547) and Molteni diffusion, and as
#                                          # shipped (h = 1.73 dp, Fourtakas)
#   bench/gpu/session37_checks.sh peerlong # the peer comparison over the whole flow: 45,000
#                                          # steps (3.4 s simulated) at 1.31 M particles with
#                                          # h = 2 dp and Molteni diffusion (run in session 37
#                                          # as this one command, outside the script's log)
#   bench/gpu/session37_checks.sh largest  # the SPH dam break at 300 M particles (issue 17:
#                                          # <= 250 B/particle so that >= 300 M run on an
#                                          # 80 GB H100; never run before): its bytes and steps
#   bench/gpu/session37_checks.sh verlet   # --gpu-memory compact with velocity Verlet
#                                          # (StateCopies::Fewest: two copies of the state,
#                                          # pairs kept by the ids): the energy suite and
#                                          # cuda_parity's compact subset with
#                                          # PARTICLE_SHM_TEST_HISTORY=compact, then the drum
#                                          # with velocity Verlet as a user runs it, with a
#                                          # checkpoint and a restart (not run in session 37:
#                                          # the device budget was spent)
#
# Logs $OUT/session37_<part>.log, *.out; records $OUT/sph_gpu.jsonl, $OUT/sph_bands.jsonl.
set -uo pipefail
part=${1:-bands}
export OUT=${OUT:-bench/results/raw/session37}
source "$(dirname "$0")/lib.sh" "session37_${part}"
budget=${BUDGET:-560}
RESULT_PATTERN="identical|bits|slabs|test result|panicked|FAILED|steps/s|finished|ms/step"
RESULT_LINES=40
case $part in
bands)
  item 200 sph_suites
  item 120 result bench_bands_10m timeout 200 sph-gpu-bench --particles 1e7 --steps 200 --warmup 20 \
    --frames 0 --band-rows 0,8,16,32,64,0 --out "$OUT/sph_bands.jsonl"
  item 200 result bench_bands_100m timeout 280 sph-gpu-bench --particles 1e8 --steps 20 --warmup 3 \
    --frames 0 --band-rows 0,8,16,32,64,0 --out "$OUT/sph_bands.jsonl"
  ;;
peer)
  item 90 result bench_peer_h2 timeout 200 sph-gpu-bench --particles 1.372e6,4.99e6 --steps 200 --warmup 20 \
    --frames 0 --coefh 1.1547 --diffusion molteni --out "$OUT/sph_peer.jsonl"
  item 90 result bench_peer_shipped timeout 200 sph-gpu-bench --particles 1.372e6,4.99e6 --steps 200 \
    --warmup 20 --frames 0 --out "$OUT/sph_peer.jsonl"
  ;;
peerlong)
  item 240 result bench_peer_long timeout 420 sph-gpu-bench --particles 1.372e6 --steps 45000 --warmup 20 \
    --frames 0 --coefh 1.1547 --diffusion molteni --out "$OUT/sph_peer_long.jsonl"
  ;;
largest)
  item 300 result bench_300m timeout 420 sph-gpu-bench --particles 3e8 --steps 5 --warmup 2 --frames 0 \
    --out "$OUT/sph_largest.jsonl"
  grep -E "^total|B/particle \(" "$OUT/bench_300m.out" | tail -n 3
  ;;
verlet)
  (cd solver && item 30 result energy_compact env PARTICLE_SHM_TEST_BACKENDS=cuda \
    PARTICLE_SHM_TEST_HISTORY=compact timeout 150 "$BIN/energy" --test-threads 1 --nocapture)
  (cd solver && item 60 result cuda_parity_compact env PARTICLE_SHM_TEST_HISTORY=compact timeout 200 \
    "$BIN/cuda_parity" --test-threads 1 --nocapture cuda_matches_cpu two_species cuda_runs_are_deterministic \
    skin_steps frame_arrays device_energies)
  sed 's/^integrator = "symplectic_euler"/integrator = "velocity_verlet"/' solver/cases/drum.toml \
    > solver/cases/drum_verlet_s37.toml
  d=$(mktemp -d)
  item 60 result user_verlet_compact timeout 150 solver --case solver/cases/drum_verlet_s37.toml --backend cuda \
    --gpu-memory compact --end-time 0.5 --name-shm dv37 --output "$d" --checkpoint-every 0.25 --progress-every 5
  grep -E "copies|B/particle|compact|pairs|finished|rror" "$OUT/user_verlet_compact.out" | head -n 12
  ck=$(ls "$d"/checkpoint*.bin 2>/dev/null | head -1)
  echo "checkpoint: $ck"
  item 60 result user_verlet_restart timeout 150 solver --backend cuda --gpu-memory compact --restart "$ck" \
    --end-time 0.6 --name-shm dv37b --progress-every 5
  grep -E "copies|B/particle|finished|rror" "$OUT/user_verlet_restart.out" | head -n 8
  rm -rf "$d" solver/cases/drum_verlet_s37.toml /dev/shm/dv37 /dev/shm/dv37b
  ;;
records)
  item 300 sph_records
  item 150 sph_user_path
  ;;
compact)
  BUDGET=$budget bash "$(dirname "$0")/session36_checks.sh" compact
  ;;
fix)
  cd solver
  item 60 result cuda_parity_compact env PARTICLE_SHM_TEST_HISTORY=compact timeout 200 "$BIN/cuda_parity" \
    --test-threads 1 --nocapture cuda_matches_cpu two_species cuda_runs_are_deterministic skin_steps frame_arrays \
    device_energies
  item 120 result cuda_parity timeout 250 "$BIN/cuda_parity" --test-threads 1
  item 120 result cuda_parity_one env PARTICLE_SHM_TEST_COPIES=1 timeout 250 "$BIN/cuda_parity" --test-threads 1
  item 90 result cuda_parity_pairs env PARTICLE_SHM_TEST_HISTORY=pairs timeout 250 "$BIN/cuda_parity" \
    --test-threads 1
  cd ..
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
echo "session37 $part done in $SECONDS s"
