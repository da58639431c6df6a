#!/usr/bin/env python3
"""Session 56: the SPH slabs' exchange beside the boundary's rates (PARTICLE_SHM_SPH_OVERLAP on,
the default) against the exchange after the evaluation's every kernel (off), two slabs of the
dam break on one GPU (--devices 0,0) against one GPU, the two alternated on one warm machine,
into bench/results/multi_gpu.json (section `sph`, key `same_device_session56`).

    bench/gpu/session56_records.py [RAW]      # RAW: bench/results/raw/session56/overlap

RAW holds `session56_checks.sh overlap`'s output: overlap_1e7.jsonl and overlap_1e8.jsonl (the
bench's records carry "overlap", "overlapped_exchanges" and "classify"), the suites' logs."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sph_split_records import Raw, store_sph  # noqa: E402

raw = sys.argv[1] if len(sys.argv) > 1 else "bench/results/raw/session56/overlap"
r = Raw(raw)
runs = []
for name in ("overlap_1e7.jsonl", "overlap_1e8.jsonl"):
    if not os.path.exists(f"{raw}/{name}"):
        continue
    recs = r.jl(name)
    groups = [x for x in recs if "gpus" in x]
    for pair, g in zip(r.pairs(recs, "this"), groups):
        pair["overlap"] = "on" if g["overlap"] else "off"
        pair["overlapped_exchanges"] = g["overlapped_exchanges"]
        pair["classify"] = g["classify"]
        pair["device"] = g["device"]
        runs.append(pair)

mean = lambda v: sum(v) / len(v)  # noqa: E731
summary = {}
for x in runs:
    key = f"{x['integrator']}_{round(x['particles'] / 1e6)}m_classify_{x['classify']}"
    s = summary.setdefault(key, {"off": [], "on": []})
    s[x["overlap"]].append(round(x["two_slabs_ms_per_step"], 3))
for s in summary.values():
    if s["off"] and s["on"]:
        s["on_over_off"] = round(mean(s["on"]) / mean(s["off"]), 4)

store_sph("same_device_session56", {
    "note": "two slabs of the dam break on ONE GPU (--devices 0,0) against one GPU, f32, "
            "balancing off; split_ratio = one GPU's ms/step / the two slabs'. 'off': each "
            "exchange after the evaluation's every kernel (PARTICLE_SHM_SPH_OVERLAP=off); 'on' "
            "(the default): started as soon as every slab's fluid kernel wrote the positions, "
            "its count read, copies and unpack on a stream of their own beside the boundary's "
            "rates; alternated on one warm machine with one build. Slabs of one GPU share it: "
            "what is hidden here is the host's wait for the whole evaluation and the unpack, "
            "not an NVLink transfer. exchange_share counts only the exchange between two events "
            "of the step (not comparable between off and on): compare ms/step.",
    "card": runs[0]["device"] if runs else None,
    "ms_per_step_two_slabs": summary,
    "runs": runs,
    "command": "PACK_MPI=1 bash bench/gpu/pack.sh; bash bench/gpu/session56_checks.sh overlap, "
               "then bench/gpu/session56_records.py",
})
print(json.dumps(summary, indent=1))
