#!/usr/bin/env bash
# Session 18 (2026-11-24) on one GPU, from the repository root, after bench/gpu/pack.sh.
#   bench/gpu/session18_checks.sh dem    # issue 13 on the final tree of session 17: the machine's
#                                        # first main job (caches removed) and a second, the drum
#                                        # and the silo, 10 M dense (linear and Hertz with
#                                        # friction, frictionless), 100 M dense with friction
#                                        # (now with the stream hints); then the hints' threshold
#                                        # (kernels::STREAM_HINTS_FROM = 4 M): dense linear with
#                                        # friction at 2, 4 and 6 M with and without them
#   bench/gpu/session18_checks.sh sph    # issue 17: the fluid's pair sums through a warp queue
#                                        # (SPH_QUEUE, the default) against the walk that runs the
#                                        # pair code per candidate (-DSPH_QUEUE=0), alternating,
#                                        # 1 M and 10 M; the SPH suites
#   bench/gpu/session18_checks.sh ranks1 # GPU ranks on one GPU: the GPU-rank tests, and a frame's
#                                        # cost before and after the byte format (see the part)
#   bench/gpu/session18_checks.sh ranks2 # GPU ranks on one GPU: where a frame's time goes (debug)
#   bench/gpu/session18_checks.sh last   # the final build: the main job, cuda_parity, SPH suites
#   bench/gpu/session18_checks.sh suite  # the final build's device suite: DEM parity and
#                                        # validation on the GPU, the SPH suites and user path
# Logs under $OUT.
set -uo pipefail
part=${1:-dem}
export OUT=${OUT:-bench/results/raw/session18}
source "$(dirname "$0")/lib.sh" "session18_${part}"
# dense N HINTS: N dense particles, linear with friction, the stream hints on (1) or off (0).
dense() {
  echo "== dense $1, DEM_STREAM_HINTS=$2"
  PARTICLE_SHM_NVRTC_OPTIONS="-DDEM_STREAM_HINTS=$2" timeout 300 dem-gpu-bench bench --particles "$1" \
    --model linear-friction --phase dense --relax 2000 --steps 200 --out "$J" 2>&1 | grep -E "steps/s" | tail -n 2
}
if [[ $part == dem ]]; then
  J="$OUT/dem_gpu.jsonl"
  dem_records
  J="$OUT/threshold.jsonl"
  for n in 2e6 4e6 6e6; do for v in 0 1; do dense $n $v; done; done
fi
if [[ $part == sph ]]; then
  J="$OUT/sph_queue.jsonl"
  for round in 1 2; do
    for v in 0 1; do
      echo "== SPH_QUEUE=$v (round $round)"
      PARTICLE_SHM_NVRTC_OPTIONS="-DSPH_QUEUE=$v" timeout 280 sph-gpu-bench --particles 1e6,1e7 --steps 100 \
        --warmup 10 --frames 0 --out "$J" 2>&1 | grep -E "particle-steps|steps/s|error|Error" | tail -n 4
    done
  done
  sph_suites
fi
if [[ $part == suite ]]; then
  dem_suite
  sph_suites
  sph_user_path
fi
if [[ $part == ranks1 ]]; then
  # GPU ranks sharing one GPU (after PACK_MPI=1 bench/gpu/pack.sh; the x2 machine was taken back):
  # the GPU-rank tests (frames bit for bit through host memory, the road the frame parts take),
  # then the frame cost of two ranks on GPU 0, the build before the byte format
  # (gpu-carry/solver_oldframes) and this one, alternating, at ${N:-2e7} particles.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  (cd solver && result mpi_ranks_gpu env PARTICLE_SHM_TEST_BACKENDS=cuda timeout 300 "$BIN/mpi_ranks" gpu_ranks --test-threads 1)
  n=${N:-20000000}
  for round in 1 2; do
    for v in old new; do
      exe=$BIN/solver; [[ $v == old ]] && exe=$PWD/gpu-carry/solver_oldframes
      echo "== $v (round $round): mpirun -np 2 solver --backend cuda --devices 0,0 --particles $n --end-time 0.002 --progress-every 2"
      timeout 250 mpirun -np 2 --bind-to none "$exe" --backend cuda --devices 0,0 --particles "$n" --end-time 0.002 \
        --progress-every 2 > "$OUT/ranks_${v}_$round.out" 2>&1
      echo "RESULT ranks_${v}_$round rc=$?"
      grep -E "a frame takes|finished" "$OUT/ranks_${v}_$round.out" | cut -c1-260
    done
  done
fi
if [[ $part == ranks2 ]]; then
  # Where a GPU rank's frame goes (the debug lines of ranks.rs), two ranks on GPU 0, ${N:-2e7}
  # particles, the default frames and then frames only at the start and the end.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  n=${N:-20000000}
  for frames in default ends; do
    extra=(); [[ $frames == ends ]] && extra=(--refresh-wall-ms 0 --refresh 1)
    echo "== frames $frames: mpirun -np 2 solver --backend cuda --devices 0,0 --particles $n --end-time 0.002 ${extra[*]}"
    RUST_LOG=info,solver::dem::cuda::ranks=debug,solver::dem::cuda::buffers=debug timeout 250 mpirun -np 2 --bind-to none "$BIN/solver" --backend cuda --devices 0,0 \
      --particles "$n" --end-time 0.002 --progress-every 2 "${extra[@]}" > "$OUT/ranks2_$frames.out" 2>&1
    echo "RESULT ranks2_$frames rc=$?"
    grep -E "frame part|frame kinematics|a frame takes|finished|end time" "$OUT/ranks2_$frames.out" | cut -c1-330
  done
fi
if [[ $part == last ]]; then
  # The final build on one GPU after the review's refactor of the buffer lookup (download, the
  # skin's maximum): the main job as users run it, the DEM parity suite, the SPH suites.
  echo "== main job"; OUT="$OUT/main_job" bash bench/gpu/main_job.sh | tail -n 1
  (cd solver && result cuda_parity timeout 300 "$BIN/cuda_parity" --test-threads 1)
  sph_suites
fi
# At most 8 files come back from the device: the logs travel as one archive.
(cd "$OUT" && tar -czf "/tmp/outs_$part.tar.gz" --exclude "*.tar.gz" --exclude "*.log" . && mv "/tmp/outs_$part.tar.gz" . ; find . -type f ! -name "*.tar.gz" ! -name "*.log" ! -name "*.jsonl" -delete)
