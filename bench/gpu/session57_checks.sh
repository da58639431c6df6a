#!/usr/bin/env bash
# Session 57 (2026-12-06): the SPH GPU ranks' records sent while the boundary's rates run
# (SphRankOptions::overlap, on by default in float mode; PARTICLE_SHM_SPH_OVERLAP=off to move
# them after the evaluation), now on the DEM ranks' road (dem::cuda::road: NCCL, or page-locked
# host memory and MPI). One GPU is enough: the ranks share GPU 0.
# From the repository root, after PACK_MPI=1 bash bench/gpu/pack.sh:
#
#   bench/gpu/session57_checks.sh ranks   # the GPU-rank tests: DEM (the road of records now
#                                         # shared with SPH) and SPH (dam break, mDBC, moving
#                                         # solids, Verlet: one GPU, a group, 2 and 3 ranks with
#                                         # the overlap, 2 ranks without, bit for bit, and the
#                                         # restarts), all on the host road (ranks sharing a GPU:
#                                         # NCCL refuses that); then the dam break on 2
#                                         # ranks sharing GPU 0, overlap off and on alternated,
#                                         # at dp = 5 mm and 3.5 mm, as a user runs it (solver)
#
# Records: $OUT/sph_ranks_overlap.jsonl. Log $OUT/session57_<part>.log.
set -uo pipefail
part=${1:-ranks}
export OUT=${OUT:-bench/results/raw/session57}
source "$(dirname "$0")/lib.sh" "session57_${part}"
budget=${BUDGET:-570}
J=$OUT/sph_ranks_overlap.jsonl
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# As the mpi_ranks tests run it: containers often forbid the cross-process copy Open MPI tries
# first (messages then go through its shared-memory buffers).
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# ranks_run OVERLAP DP END NP: the dam break at spacing DP to END s on NP ranks sharing GPU 0
# (NP 1: two slabs of GPU 0 in one process), its rate appended to $J.
ranks_run() {
  local ov=$1 dp=$2 end=$3 np=$4 d tag cmd
  d=$(mktemp -d)
  sed "s/^spacing = 0.04/spacing = $dp/" solver/cases/dambreak.toml > "$d/dambreak_$dp.toml"
  tag="${np}_${dp}_${ov}"
  local args=(--backend cuda --case "$d/dambreak_$dp.toml" --end-time "$end" --progress-every 100)
  if (( np == 1 )); then
    cmd="solver ${args[*]} --devices 0,0"
    PARTICLE_SHM_SPH_OVERLAP=$ov timeout 200 solver "${args[@]}" --devices 0,0 > "$OUT/run_$tag.out" 2>&1
  else
    cmd="mpirun -np $np --bind-to none solver ${args[*]} --devices 0"
    PARTICLE_SHM_SPH_OVERLAP=$ov RUST_LOG=info,solver::sph::cuda=debug timeout 200 \
      mpirun -np "$np" --bind-to none -x PARTICLE_SHM_SPH_OVERLAP -x RUST_LOG \
      solver "${args[@]}" --devices 0 > "$OUT/run_$tag.out" 2>&1
  fi
  echo "RESULT run_$tag rc=$?"
  grep -E "finished after|beside the boundary|rror" "$OUT/run_$tag.out" | tail -n 3 | cut -c1-300
  python3 - "$OUT/run_$tag.out" "$ov" "$dp" "$np" "PARTICLE_SHM_SPH_OVERLAP=$ov $cmd" >> "$J" <<'PY'
import json, re, sys
path, ov, dp, np_, cmd = sys.argv[1:]
text = open(path).read()
m = re.search(r"finished after (\d+) steps in ([0-9.]+) s \(([0-9.]+) steps/s", text)
n = re.search(r"INFO (\d+) particles, ", text)
o = re.search(r"(\d+) of (\d+) exchanges ran their records beside", text)
if m:
    steps, wall, rate = int(m[1]), float(m[2]), float(m[3])
    print(json.dumps({"check": "sph_ranks_overlap", "case": "solver/cases/dambreak.toml",
        "spacing": float(dp), "particles": int(n[1]) if n else None, "ranks": int(np_),
        "where": "one GPU (GPU 0 shared)", "overlap": ov, "steps": steps, "wall_s": wall,
        "steps_per_s": rate, "ms_per_step": 1000.0 * wall / steps,
        "overlapped_exchanges": int(o[1]) if o else None,
        "exchanges": int(o[2]) if o else None, "command": cmd}))
PY
  rm -rf "$d"
}
case $part in
ranks)
  (cd solver && RESULT_LINES=20 item 200 result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda \
    timeout 320 "$BIN/mpi_ranks" gpu_ranks mdbc_over_ranks moving_solids_over_ranks \
    verlet_over_ranks --test-threads 1)
  if ! grep -q "test result: ok. 6 passed" "$OUT/mpi_ranks_gpu.out" 2>/dev/null; then
    echo "the GPU-rank tests did not pass: the overlap is not timed"
  else
    for ov in off on off on; do item 25 ranks_run $ov 0.005 0.02 2; done
    item 25 ranks_run on 0.005 0.02 1
    for ov in off on; do item 70 ranks_run $ov 0.0035 0.01 2; done
  fi
  ;;
*) echo "unknown part $part"; exit 2 ;;
esac
tar -czf "$OUT/session57_${part}.tgz" -C "$OUT" --exclude='*.tgz' . 2>/dev/null
echo "session57 $part done at ${SECONDS} s"
