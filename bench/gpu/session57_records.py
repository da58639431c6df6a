#!/usr/bin/env python3
"""Session 57: the SPH dam break on two MPI ranks sharing one GPU (their records on the host
road: NCCL refuses ranks that share a GPU), the records moved beside the boundary's rates
(PARTICLE_SHM_SPH_OVERLAP on, the default) against after the evaluation (off), alternated on one
warm machine, and two slabs of the GPU in one process for reference, into
bench/results/multi_gpu.json (section `sph`, key `ranks_same_device_session57`).

    bench/gpu/session57_records.py [RAW]      # RAW: bench/results/raw/session57

RAW holds `session57_checks.sh ranks`'s output: sph_ranks_overlap.jsonl (one record per solver
run, with its exact command) and the tests' log."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sph_split_records import store_sph  # noqa: E402

raw = sys.argv[1] if len(sys.argv) > 1 else "bench/results/raw/session57"
with open(f"{raw}/sph_ranks_overlap.jsonl") as f:
    runs = [json.loads(line) for line in f if line.strip()]
card = None
log = f"{raw}/session57_ranks.log"
if os.path.exists(log):
    with open(log) as f:
        card = f.readline().strip()

mean = lambda v: sum(v) / len(v)  # noqa: E731
summary = {}
for x in runs:
    where = "two_ranks" if x["ranks"] > 1 else "two_slabs_one_process"
    key = f"{x['particles'] / 1e6:.1f}m_{where}"
    s = summary.setdefault(key, {"off": [], "on": []})
    s[x["overlap"]].append(round(x["ms_per_step"], 3))
for s in summary.values():
    if s["off"] and s["on"]:
        s["on_over_off"] = round(mean(s["on"]) / mean(s["off"]), 4)

store_sph("ranks_same_device_session57", {
    "note": "the dam break (solver/cases/dambreak.toml at the spacing given, symplectic, f32) "
            "as a user runs it with the solver, on two MPI ranks sharing ONE GPU (--devices 0): "
            "'off' moves the records after the evaluation (PARTICLE_SHM_SPH_OVERLAP=off); 'on' "
            "(the default) as soon as each rank's fluid kernel is done, beside its boundary's "
            "rates. Ranks that share a GPU take the host road (page-locked buffers and MPI; NCCL "
            "refuses them) and time-slice the GPU: this measures the host's wait, not ranks "
            "with a GPU each. ms_per_step from the solver's closing line (wall time of the run "
            "loop over its steps, frames at the default refresh included).",
    "card": card,
    "ms_per_step": summary,
    "runs": runs,
    "command": "PACK_MPI=1 bash bench/gpu/pack.sh; bash bench/gpu/session57_checks.sh ranks, "
               "then bench/gpu/session57_records.py",
})
print(json.dumps(summary, indent=1))
