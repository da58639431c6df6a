#!/usr/bin/env bash
# Session 14 (2026-11-24) on one GPU, from the repository root, after bench/gpu/pack.sh
# (issue 13: the main job's first seconds, forces stored once per batch, the drum's step).
#   bench/gpu/session14_checks.sh first  # the main job on the machine's first run, again with
#                                        # the kernels cached, after dropping the page cache
#                                        # with and without them; cuda_parity; variants
#   bench/gpu/session14_checks.sh second # the Verlet list walked by warp vote: main job, tests,
#                                        # dense records against the fixed walks, small skins
#   bench/gpu/session14_checks.sh third  # main job: list walk by warp vote against buffered;
#                                        # small cases with the automatic skin; device suite
#   bench/gpu/session14_checks.sh fourth # NVRTC read ahead (first main job); the warp vote's
#                                        # threshold against buffered
#   bench/gpu/session14_checks.sh fifth  # the module in two parts compiled side by side
#   bench/gpu/session14_checks.sh bench  # the records of dem_gpu.json on the final build
#   bench/gpu/session14_checks.sh big    # the 100 M dense records with friction
#   bench/gpu/session14_checks.sh sixth  # schedule, small cases and main job (it measured the
#                                        # skin read a step later, since dropped)
# Records (dem-gpu-bench JSON lines and main_job.jsonl) and logs under $OUT.
set -uo pipefail
part=${1:-first}
export OUT=${OUT:-bench/results/raw/session14}
source "$(dirname "$0")/lib.sh" "session14_${part}"
J="$OUT/dem_gpu.jsonl"
# Empties the page cache (a machine's first run reads the binary, the driver and NVRTC from
# disk) where the kernel allows it.
drop() {
  sync
  if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then echo "(page cache dropped)"; else echo "(page cache NOT dropped)"; fi
}
main() { OUT=$OUT bash bench/gpu/main_job.sh "$@"; }
if [[ $part == first ]]; then
  rm -rf "$HOME/.cache/particle-shm" "$HOME/.nv/ComputeCache"
  echo "== main job, the machine's first run (no kernel cache)"; main
  echo "== again (kernels from the cache)"; main
  echo "== page cache dropped, kernels cached (a run after a reboot)"; drop; main
  echo "== page cache dropped, no kernel cache (a machine's first run, again)"; drop; rm -rf "$HOME/.cache/particle-shm"; main
  echo "== no kernel cache, page cache warm"; PARTICLE_SHM_KERNEL_CACHE=off main
  cd solver
  result cuda_parity_cache timeout 120 "$BIN/cuda_parity" kernels_come_from --nocapture --test-threads 1
  grep -E "first:" "$OUT/cuda_parity_cache.out"
  result cuda_parity timeout 400 "$BIN/cuda_parity" --test-threads 1
  cd ..
  echo "== variant: the Verlet list evaluated unbuffered"
  PARTICLE_SHM_NVRTC_OPTIONS=-DDEM_LIST_DIRECT=1 main
  main
  for v in "" "-DDEM_LIST_DIRECT=1"; do
    export PARTICLE_SHM_NVRTC_OPTIONS=$v
    run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500
    run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200
    run bench --particles 1e6 --model linear-friction --phase loose --steps 500
  done
  unset PARTICLE_SHM_NVRTC_OPTIONS
  echo "== drum: stepping alone, device time per step"
  for s in 0.1 0.3; do
    run case --case bench/cases/drum_10k.toml --warmup 2000 --steps 10000 --skin $s
  done
  run case --case bench/cases/silo_70k.toml --warmup 2000 --steps 10000
  for s in drum_10k:1.0 silo_70k:0.5; do small "${s%%:*}" "${s##*:}"; done
fi
if [[ $part == second ]]; then
  # The list walked by warp vote (the new default): the main job on the machine's first run
  # (new kernels: nothing cached), again, and the dense records against both fixed walks.
  rm -rf "$HOME/.cache/particle-shm"
  echo "== main job, first run of this build"; main
  echo "== again"; main
  cd solver
  result cuda_parity timeout 500 "$BIN/cuda_parity" --test-threads 1
  grep -E "list walks give|first:" "$OUT/cuda_parity.out"
  cd ..
  for w in warp buffered direct; do
    run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200 --list-walk $w
  done
  for b in 4 8; do
    run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200 --min-blocks $b
  done
  run bench --particles 1e7 --model hertz --phase dense --relax 2000 --steps 200
  run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500
  run bench --particles 1e6 --model linear-friction --phase loose --steps 500
  echo "== small cases at other skins, as users run them"
  for k in 0.1 0.2 0.3 0.5; do
    for s in drum_10k:1.0 silo_70k:0.5; do small "${s%%:*}" "${s##*:}" --skin $k; done
  done
fi
if [[ $part == third ]]; then
  # The main job with the list walked by warp vote against always buffered, alternating on one
  # machine; the small cases with the automatic skin; the device suite with the new defaults.
  for w in warp buffered warp buffered; do
    echo "== main job, list walk $w"; PARTICLE_SHM_LIST_WALK=$w main
  done
  for s in drum_10k:1.0 silo_70k:0.5; do small "${s%%:*}" "${s##*:}"; done
  cd solver
  result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads 1
  for t in impact_linear impact_hertz energy incline packing moving_geometry process_features; do
    result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 "$BIN/$t" --test-threads 1
  done
  cd ..
  result sanitizer_memcheck_drum timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 \
    dem-gpu-bench case --case bench/cases/drum_10k.toml --warmup 0 --steps 300
fi
if [[ $part == fourth ]]; then
  # NVRTC's libraries read ahead: the machine's first main job; then the warp vote's threshold
  # (75 % of the list in contact, 100 %) against buffered, main job and dense 10 M.
  rm -rf "$HOME/.cache/particle-shm"
  echo "== main job, the machine's first run"; main
  for v in "75" "100" "buffered" "75" "100" "buffered"; do
    if [[ $v == buffered ]]; then
      echo "== main job, buffered"; PARTICLE_SHM_LIST_WALK=buffered main
    else
      echo "== main job, vote $v %"; PARTICLE_SHM_NVRTC_OPTIONS="-DDEM_LIST_VOTE_PCT=${v}u" main
    fi
  done
  for v in 75 100; do
    PARTICLE_SHM_NVRTC_OPTIONS="-DDEM_LIST_VOTE_PCT=${v}u" run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200
    PARTICLE_SHM_NVRTC_OPTIONS="-DDEM_LIST_VOTE_PCT=${v}u" run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500
  done
  for s in drum_10k:1.0 silo_70k:0.5; do small "${s%%:*}" "${s##*:}"; done
fi
if [[ $part == fifth ]]; then
  # The DEM module compiled as two parts side by side: the machine's first main job, then
  # NVRTC's times (whole module, each part, both on two threads), with and without
  # --split-compile; the device tests that use the energies' part.
  rm -rf "$HOME/.cache/particle-shm" "$HOME/.nv/ComputeCache"
  echo "== main job, the machine's first run"; main
  echo "== main job, again"; main
  for i in 1 2; do run compile --model linear-friction; done
  PARTICLE_SHM_NVRTC_OPTIONS="--split-compile=0" run compile --model linear-friction
  cd solver
  result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  result validate_energy env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 "$BIN/energy" --test-threads 1
  cd ..
fi
if [[ $part == sixth ]]; then
  # The skin's largest move read one step later, without draining the queue: the same
  # schedule (search counts as before) and the speed of the small cases and the main job.
  echo "== main job, the machine's first run"; main
  echo "== main job, again"; main
  grep -h "neighbour search every" "$OUT"/main_job*.out | tail -n 2
  for i in 1 2; do for s in drum_10k:1.0 silo_70k:0.5; do small "${s%%:*}" "${s##*:}"; done; done
  grep -h "neighbour search every" "$OUT"/small_*.out
  cd solver
  result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  for t in energy moving_geometry packing; do
    result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 "$BIN/$t" --test-threads 1
  done
  cd ..
  run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200
fi
if [[ $part == big ]]; then
  # The 100 M dense records with friction on the final build.
  for m in linear-friction hertz; do
    run bench --particles 1e8 --model $m --phase dense --relax 500 --steps 50 --warmup 5 || echo "100M $m did not run"
  done
fi
if [[ $part == bench ]]; then
  # The final build: the machine's first main job and a second, the records, the device suite.
  rm -rf "$HOME/.cache/particle-shm" "$HOME/.nv/ComputeCache"
  echo "== main job, the machine's first run"; main
  echo "== main job, again"; main
  run bench --particles 1e6 --model linear-friction --phase dense --relax 1000 --steps 500
  run bench --particles 1e6 --model hertz --phase dense --relax 1000 --steps 500
  run bench --particles 1e6 --model linear-friction --phase loose --steps 500
  for s in drum_10k:1.0 silo_70k:0.5; do small "${s%%:*}" "${s##*:}"; done
  for m in linear-friction hertz; do
    run bench --particles 1e7 --model $m --phase dense --relax 2000 --steps 200
  done
  run bench --particles 1e7 --model linear --phase dense --relax 2000 --steps 300
  cd solver
  result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1
  result cuda_multi timeout 200 "$BIN/cuda_multi" --test-threads 1
  result sph_cuda timeout 200 "$BIN/sph_cuda" --test-threads 1
  result physics_parity timeout 100 "$BIN/physics_parity"
  for t in impact_linear impact_hertz energy incline packing moving_geometry process_features; do
    result "validate_$t" env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 200 "$BIN/$t" --test-threads 1
  done
  cd ..
fi
# At most 8 files come back from the device: the logs travel as one archive.
(cd "$OUT" && ls *.out >/dev/null 2>&1 && tar -czf "outs_$part.tar.gz" -- *.out && rm -f -- *.out)
echo "done: $part"
