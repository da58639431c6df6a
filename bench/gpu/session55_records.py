#!/usr/bin/env python3
"""Session 55: an SPH slab's rates kernel classifying its particles for the next exchange
(PARTICLE_SHM_SPH_CLASSIFY=rates) against sph_classify before each exchange, two slabs of the dam
break on one GPU (--devices 0,0) against one GPU, the two classifications alternated on one warm
machine, into bench/results/multi_gpu.json (section `sph`, key `same_device_session55`).

    bench/gpu/session55_records.py [RAW]      # RAW: bench/results/raw/session55 (default)

RAW holds one folder per device call: classify/ (`session55_checks.sh classify`: the build of
commit 537a931, records classify_{standalone,rates}.jsonl, diagnostic logs
diag_{standalone,rates}_1e8.out) and, where it ran, v2/ (`session55_checks.sh v2`: the layer
from the position the update returns and one atomic per warp, records v2_{standalone,rates}.jsonl,
diag2_rates_1e8.out)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sph_split_records import Raw, store_sph  # noqa: E402

raw = sys.argv[1] if len(sys.argv) > 1 else "bench/results/raw/session55"


def summary(runs, n):
    """Per classification at about n particles: ms/step of the two slabs, split ratios,
    exchange shares, and rates over standalone."""
    out = {}
    for b in ("standalone", "rates"):
        rs = [r for r in runs if r["build"] == b and abs(r["particles"] - n) < 0.05 * n]
        out[b] = {
            "two_slabs_ms_per_step": [round(r["two_slabs_ms_per_step"], 3) for r in rs],
            "one_gpu_ms_per_step": [round(r["one_gpu_ms_per_step"], 3) for r in rs],
            "split_ratio": [round(r["split_ratio"], 4) for r in rs],
            "exchange_share": [round(r["exchange_share"], 4) for r in rs],
        }
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    out["two_slabs_rates_over_standalone"] = round(
        mean(out["rates"]["two_slabs_ms_per_step"])
        / mean(out["standalone"]["two_slabs_ms_per_step"]), 4)
    return out


def per_slab(kernels, names):
    """{slab: ms over the diagnostic run of the kernels named}."""
    return {e: round(sum(v.get(k, 0.0) for k in names), 3)
            for e, v in kernels.items() if e != "one GPU"}


ROUNDS = {
    "classify": ("classify", "diag_standalone_1e8.out", "diag_rates_1e8.out",
                 "layer read back from the state just written, kept and beyond counts one "
                 "atomic per block (__syncthreads_count); commit 537a931"),
    "v2": ("v2", None, "diag2_rates_1e8.out",
           "layer from the position the update returns (no read back), counts one atomic per "
           "warp (no barrier)"),
}
TAIL = ["sph_classify", "sph_rates_fluid", "sph_rates_fluid_sends", "memset"]
rounds = {}
for name, (prefix, diag_s, diag_r, what) in ROUNDS.items():
    if not os.path.isdir(f"{raw}/{name}"):
        continue
    r = Raw(f"{raw}/{name}")
    runs = (r.pairs(r.jl(f"{prefix}_standalone.jsonl"), "standalone")
            + r.pairs(r.jl(f"{prefix}_rates.jsonl"), "rates"))
    card = r.jl(f"{prefix}_rates.jsonl")[0]["device"]
    entry = {
        "card": card,
        "build": what,
        "verlet_10m": summary(runs, 9.9e6),
        "verlet_100m": summary(runs, 1.04e8),
        "runs": runs,
    }
    for label, log in (("standalone", diag_s), ("rates", diag_r)):
        if log and os.path.exists(f"{raw}/{name}/{log}"):
            k = r.diag(log)
            entry[f"kernel_ms_100m_22_steps_{label}"] = k
            entry[f"classify_and_fluid_rates_ms_100m_22_steps_{label}"] = per_slab(k, TAIL)
    rounds[name] = entry

store_sph("same_device_session55", {
    "note": "two slabs of the dam break on ONE GPU (--devices 0,0) against one GPU, f32, Verlet, "
            "balancing off; split_ratio = one GPU's ms/step / the two slabs'. 'standalone': "
            "sph_classify before each exchange (the default); 'rates': each owned particle "
            "classified for the next exchange by the rates kernel right after its update "
            "(sph_rates_fluid_sends, PARTICLE_SHM_SPH_CLASSIFY=rates), alternated on one warm "
            "machine with one build. Bits: sph_group 8/8 (its f32 test runs both, each bit for "
            "bit against one GPU, and asserts the rates kernels classified), mpi_ranks "
            "sph_gpu_ranks 1/1 with each, sph_cuda 6/6, sph_physics_parity 3/3.",
    "rounds": rounds,
    "command": "PACK_MPI=1 bash bench/gpu/pack.sh; bash bench/gpu/session55_checks.sh classify "
               "(and v2), then bench/gpu/session55_records.py",
})
for name, r in rounds.items():
    print(name, r["card"], json.dumps({k: r[k] for k in r if k.startswith(("verlet", "classify_and"))}))
