#!/usr/bin/env bash
# Session 20 (2026-11-25) on one GPU, from the repository root, after bench/gpu/pack.sh.
#   bench/gpu/session20_checks.sh overlap  # issue 14: the ghost refresh beside the interior
#                                          # collide (two slabs on GPU 0): cuda_multi (bits
#                                          # against one GPU, overlap on and off), then obench
#   bench/gpu/session20_checks.sh obench   # 10 M dense with friction and linear on two slabs of
#                                          # GPU 0, --overlap on and off, one record each
#   bench/gpu/session20_checks.sh ranks    # GPU ranks refreshing beside the collide (PACK_MPI=1
#                                          # pack): cuda_multi, the GPU-rank tests (two ranks on
#                                          # GPU 0: host road), then the built-in case at ${N:-2e7}
#                                          # on two slabs of GPU 0 in one process and on two ranks
#   bench/gpu/session20_checks.sh verify   # cuda_multi, the GPU-rank tests, obench
#   bench/gpu/session20_checks.sh last     # the final build: compute-sanitizer memcheck on two
#                                          # slabs refreshing beside the collide, the machine's
#                                          # first main job, 10 M dense with friction, and the
#                                          # DEM device suite (the collide kernel changed)
#   bench/gpu/session20_checks.sh passes   # the collide's pass logic on one GPU: 10 M dense with
#                                          # friction and the main job, as built (DEM_PASSES 0)
#                                          # and with it compiled in (-DDEM_PASSES=1, as slabs
#                                          # have it), alternating; then cuda_multi and the
#                                          # GPU-rank tests (slabs compile it in)
#   bench/gpu/session20_checks.sh end      # the last build: memcheck with the overlap, the DEM
#                                          # device suite, then 10 M dense with friction on two
#                                          # slabs of GPU 0: overlap on, off, and on with the
#                                          # refresh on the compute stream (the split alone)
#   bench/gpu/session20_checks.sh regs     # the collide variants' registers and local memory
#                                          # (debug log at module load), friction and linear
#   bench/gpu/session20_checks.sh nsys     # Nsight Systems' kernel summary of 10 M dense with
#                                          # friction on two slabs of GPU 0, overlap on and off
#   bench/gpu/session20_checks.sh ncu      # Nsight Compute's duration of every collide launch
#                                          # (10 M dense with friction, two slabs of GPU 0, overlap
#                                          # on and off; kernels serialised), mean per kernel and
#                                          # grid size
#   bench/gpu/session20_checks.sh axis     # 10 M dense with friction on two slabs of GPU 0 cut
#                                          # along z and y, overlap on and off (x: obench)
#   bench/gpu/session20_checks.sh close    # the last build: cuda_multi, the GPU-rank tests,
#                                          # obench with the default cut (y on this cube), and
#                                          # the 20 M built-in case on two slabs of GPU 0
#   bench/gpu/session20_checks.sh final    # after the passes became kernels of their own: the
#                                          # A/B of `passes` (dem_collide should not change),
#                                          # cuda_multi, the GPU-rank tests, obench
# Logs under $OUT.
set -uo pipefail
part=${1:-overlap}
export OUT=${OUT:-bench/results/raw/session20}
source "$(dirname "$0")/lib.sh" "session20_${part}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
multi_tests() {
  (cd solver && result cuda_multi timeout 420 "$BIN/cuda_multi" --test-threads 1 --nocapture)
  grep -E "identical|hidden|panicked|differs" "$OUT/cuda_multi.out" | cut -c1-400 | head -n 40
}
rank_tests() {
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 400 "$BIN/mpi_ranks" gpu_ranks --test-threads 1)
}
# inproc: the built-in case at ${N:-2e7} on two slabs of GPU 0 in one process (sets n, args).
inproc() {
  n=${N:-20000000}
  args=(--backend cuda --devices 0,0 --particles "$n" --end-time 0.002 --progress-every 10)
  echo "+ solver ${args[*]}"
  timeout 200 solver "${args[@]}" > "$OUT/inproc_$n.out" 2>&1; echo "RESULT inproc rc=$?"
  grep -E "slabs along|finished|per step" "$OUT/inproc_$n.out" | cut -c1-400 | tail -n 3
}
# memcheck_overlap: compute-sanitizer memcheck on two slabs of GPU 0 refreshing beside the collide.
memcheck_overlap() {
  if command -v compute-sanitizer >/dev/null; then
    result memcheck_overlap timeout 300 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
      dem-gpu-bench multi --particles 2e4 --model linear-friction --phase dense --relax 100 --steps 200 \
      --warmup 5 --devices 0,0 --overlap on
  else
    echo "compute-sanitizer: not on this machine"
  fi
}
obench() {
  J="$OUT/multi_overlap.jsonl"
  for m in linear-friction linear; do
    for o in on off; do
      echo "+ dem-gpu-bench multi --particles 1e7 --model $m --phase dense --relax 300 --steps 200 --warmup 10 --devices 0,0 --overlap $o"
      timeout 200 dem-gpu-bench multi --particles 1e7 --model $m --phase dense --relax 300 --steps 200 \
        --warmup 10 --devices 0,0 --overlap $o --out "$J" 2>&1 | grep -E "one GPU:|balance|group:" | cut -c1-400
    done
  done
}
case $part in
overlap) multi_tests; obench ;;
obench) obench ;;
verify) multi_tests; rank_tests; obench ;;
last)
  memcheck_overlap
  rm -rf "$HOME/.cache/particle-shm" "$HOME/.nv/ComputeCache"
  echo "== main job, the machine's first run"; OUT="$OUT/main_job" bash bench/gpu/main_job.sh | tail -n 1
  J="$OUT/dem_gpu.jsonl"
  run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200
  dem_suite
  ;;
passes)
  J="$OUT/passes.jsonl"
  for i in 1 2; do
    run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200
    PARTICLE_SHM_NVRTC_OPTIONS="-UDEM_PASSES -DDEM_PASSES=1" run bench --particles 1e7 \
      --model linear-friction --phase dense --relax 2000 --steps 200
  done
  echo "== main job"; OUT="$OUT/main_job" bash bench/gpu/main_job.sh | tail -n 1
  multi_tests
  rank_tests
  ;;
axis)
  J="$OUT/axis.jsonl"
  for o in on off; do
    for ax in z y; do
      echo "+ dem-gpu-bench multi --particles 1e7 --model linear-friction --phase dense --relax 300 --steps 200 --warmup 10 --devices 0,0 --axis $ax --overlap $o"
      timeout 200 dem-gpu-bench multi --particles 1e7 --model linear-friction --phase dense --relax 300 \
        --steps 200 --warmup 10 --devices 0,0 --axis $ax --overlap $o --out "$J" 2>&1 | grep -E "balance" | cut -c1-330
    done
  done
  ;;
close)
  multi_tests
  rank_tests
  obench
  inproc
  ;;
ncu)
  for o in on off; do
    echo "+ ncu --metrics gpu__time_duration.sum --kernel-name regex:dem_collide dem-gpu-bench multi --particles 1e7 --model linear-friction --phase dense --relax 300 --steps 20 --warmup 2 --devices 0,0 --overlap $o"
    timeout 280 ncu --metrics gpu__time_duration.sum --csv --kernel-name regex:dem_collide \
      dem-gpu-bench multi --particles 1e7 --model linear-friction --phase dense --relax 300 --steps 20 \
      --warmup 2 --devices 0,0 --overlap $o > "$OUT/ncu_$o.csv" 2>&1
    python3 - "$OUT/ncu_$o.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; k, g, v = head.index("Kernel Name"), head.index("Grid Size"), head.index("Metric Value")
acc = collections.defaultdict(list)
for r in rows[1:]:
    acc[(r[k], r[g])].append(float(r[v].replace(",", "")))
for (name, grid), xs in sorted(acc.items()):
    print(f"{name} grid {grid}: {len(xs)} launches, mean {sum(xs)/len(xs)/1e3:.1f} us (ns units in)")
PY
  done
  ;;
nsys)
  NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  if [[ -z $NSYS ]]; then echo "nsys: not on this machine"; ls /usr/local/cuda/bin | head -40; exit 0; fi
  for o in on off; do
    echo "+ nsys profile dem-gpu-bench multi --particles 1e7 --model linear-friction --phase dense --relax 300 --steps 100 --warmup 10 --devices 0,0 --overlap $o"
    "$NSYS" profile --stats=false -o "/tmp/prof_$o" --force-overwrite true timeout 200 dem-gpu-bench multi \
      --particles 1e7 --model linear-friction --phase dense --relax 300 --steps 100 --warmup 10 \
      --devices 0,0 --overlap $o 2>&1 | grep -E "balance" | cut -c1-300
    "$NSYS" stats --report cuda_gpu_kern_sum --format csv "/tmp/prof_$o.nsys-rep" 2>/dev/null \
      | grep -E "collide|refresh|Time" | cut -c1-200 | tee "$OUT/kern_$o.csv"
  done
  ;;
regs)
  for m in linear-friction linear; do
    RUST_LOG=solver=debug timeout 120 dem-gpu-bench multi --particles 1e5 --model $m --phase loose --steps 20 \
      --warmup 2 --devices 0,0 --overlap on 2>&1 | grep -E "registers" | sort -u
  done
  ;;
end)
  memcheck_overlap
  dem_suite
  J="$OUT/multi_overlap.jsonl"
  for o in on off serial; do
    v=$o; [[ $o == serial ]] && { v=on; export PARTICLE_SHM_REFRESH_STREAM=compute; }
    echo "+ ${PARTICLE_SHM_REFRESH_STREAM:+PARTICLE_SHM_REFRESH_STREAM=compute }dem-gpu-bench multi --particles 1e7 --model linear-friction --phase dense --relax 300 --steps 200 --warmup 10 --devices 0,0 --overlap $v"
    timeout 200 dem-gpu-bench multi --particles 1e7 --model linear-friction --phase dense --relax 300 \
      --steps 200 --warmup 10 --devices 0,0 --overlap $v --out "$J" 2>&1 | grep -E "balance" | cut -c1-400
  done
  unset PARTICLE_SHM_REFRESH_STREAM
  ;;
final)
  J="$OUT/passes.jsonl"
  run bench --particles 1e7 --model linear-friction --phase dense --relax 2000 --steps 200
  PARTICLE_SHM_NVRTC_OPTIONS="-UDEM_PASSES -DDEM_PASSES=1" run bench --particles 1e7 \
    --model linear-friction --phase dense --relax 2000 --steps 200
  multi_tests
  rank_tests
  obench
  ;;
ranks)
  multi_tests
  rank_tests
  inproc
  echo "+ mpirun -np 2 solver ${args[*]}"
  timeout 200 mpirun -np 2 --bind-to none solver "${args[@]}" > "$OUT/ranks_$n.out" 2>&1; echo "RESULT ranks rc=$?"
  grep -E "finished|per step" "$OUT/ranks_$n.out" | cut -c1-400 | tail -n 3
  ;;
esac
