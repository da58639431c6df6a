#!/usr/bin/env bash
# Session 23 (2026-11-25) on one GPU, from the repository root, after PACK_MPI=1 bench/gpu/pack.sh.
#   bench/gpu/session23_checks.sh verify    # after the SPH slabs' first cut moved to equal
#                                           # estimated work (--first-cut work, the default): the
#                                           # SPH device suites (f64 parity, slabs against one GPU),
#                                           # the GPU- and CPU-rank bit tests, and two slabs of the
#                                           # 10 M dam break on this one GPU from each first cut
#                                           # (bounds and per-slab compute times, sph_cut.jsonl)
#   bench/gpu/session23_checks.sh cputime   # SPH on CPU ranks against one process on the machine's
#                                           # cores, from each first cut (dam break at dp = ${DP:-0.02}
#                                           # m to ${T:-0.05} s, --balance time)
#   bench/gpu/session23_checks.sh sweep     # issue 18's n and p: the balancing modes on 2 CPU ranks
#                                           # x 8 threads (dam break at dp = 4 cm to 0.3 s, 56 k
#                                           # particles, about 1,070 steps): off, time, then
#                                           # neighbour (p) and slice (H_LB) over --balance-every n
#                                           # and --balance-threshold; wall and per-rank compute
#   bench/gpu/session23_checks.sh final     # the final tree: verify's tests, then the sweep
# Logs under $OUT (leave it unset on the device: its $OUT is the folder that comes back).
set -uo pipefail
part=${1:-verify}
export OUT=${OUT:-bench/results/raw/session23}
source "$(dirname "$0")/lib.sh" "session23_${part}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
cpu_cut_timing() {
  local d dp=${DP:-0.02} cores np cut
  cores=$(nproc)
  d=$(mktemp -d)
  sed "s/^spacing = 0.04/spacing = $dp/" solver/cases/dambreak.toml > "$d/dambreak_$dp.toml"
  grep -q "spacing = $dp" "$d/dambreak_$dp.toml" || echo "the dam break's spacing line changed"
  local args=(--backend cpu --case "$d/dambreak_$dp.toml" --end-time ${T:-0.05} --progress-every 100 --output "$d/out")
  echo "+ solver ${args[*]} --threads $cores"
  /usr/bin/time -f "wall %e s" timeout 200 solver "${args[@]}" --threads "$cores" > "$OUT/sph_cpu_one_$dp.out" 2>&1
  echo "RESULT sph_cpu_one rc=$?"
  grep -E "finished|^wall" "$OUT/sph_cpu_one_$dp.out" | cut -c1-300 | tail -n 2
  cp "$d/out/checkpoint.bin" "$d/one.bin"
  for np in 2 4; do
    for cut in work count; do
      echo "+ mpirun -np $np solver ${args[*]} --threads $((cores / np)) --balance time --first-cut $cut"
      /usr/bin/time -f "wall %e s" timeout 200 mpirun -np $np --bind-to none solver "${args[@]}" \
        --threads $((cores / np)) --balance time --first-cut $cut > "$OUT/sph_cpu_np${np}_${cut}_$dp.out" 2>&1
      echo "RESULT sph_cpu_np${np}_$cut rc=$?"
      grep -E "slabs|finished|SPH rank|^wall" "$OUT/sph_cpu_np${np}_${cut}_$dp.out" | cut -c1-300 | tail -n 7
      cmp -s "$d/one.bin" "$d/out/checkpoint.bin" && echo "np$np $cut: final checkpoint equals one process's" \
        || echo "np$np $cut: FINAL CHECKPOINT DIFFERS"
    done
  done
  rm -rf "$d"
}
# one_sweep LABEL ARGS...: the dam break on 2 ranks with ARGS, its log kept, the wall time, the
# ranks' compute times and the bounds printed.
one_sweep() {
  local label=$1; shift
  /usr/bin/time -f "wall %e s" timeout 120 mpirun -np 2 --bind-to none solver --backend cpu \
    --case solver/cases/dambreak.toml --end-time ${T:-0.3} --threads $(( $(nproc) >= 4 ? $(nproc) / 2 : 1 )) \
    --progress-every 1000 "$@" > "$OUT/sweep_$label.out" 2>&1
  echo "RESULT sweep_$label rc=$? $*: $(grep -E '^wall' "$OUT/sweep_$label.out") \
$(grep -E 'SPH rank' "$OUT/sweep_$label.out" | sed -E 's/.*rank ([0-9]) of 2: computed ([0-9.]+) s.*bounds (.*) \(([0-9]+) moves.*/r\1 \2 s/' | sort | tr '\n' ' ') \
$(grep -m1 -oE 'bounds .* moves\)' "$OUT/sweep_$label.out")"
}
case $part in
verify)
  sph_suites
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 400 "$BIN/mpi_ranks" \
    gpu_ranks sph_cpu_ranks --test-threads 1)
  result sph_cut timeout 200 sph-gpu-bench --particles 1e7 --steps 60 --warmup 5 --frames 0 \
    --devices 0,0 --balance off --first-cut work,count --out "$OUT/sph_cut.jsonl"
  grep -E "first cut" "$OUT/sph_cut.out" | cut -c1-400
  ;;
cputime)
  cpu_cut_timing
  ;;
final)
  # The final tree: the SPH device suites and the GPU- and CPU-rank bit tests, then the sweep.
  sph_suites
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 400 "$BIN/mpi_ranks" \
    gpu_ranks sph_cpu_ranks --test-threads 1)
  ;&
sweep)
  one_sweep off --balance off
  one_sweep time --balance time
  for n in 8 32 128; do
    for p in 0.02 0.05 0.1; do one_sweep "neighbour_n${n}_p$p" --balance neighbour --balance-every $n --balance-threshold $p; done
    for h in 0.25 0.5 1; do one_sweep "slice_n${n}_h$h" --balance slice --balance-every $n --balance-threshold $h; done
  done
  ;;
esac
