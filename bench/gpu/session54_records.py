#!/usr/bin/env python3
"""Session 54: an SPH slab's fluid rates run one thread per owned particle (a list of its owned
slots in slot order) instead of one per slot, measured as two slabs of the dam break on one GPU
against one GPU, each build against the build before it (commit 5468660) on the same warm
machine, into bench/results/multi_gpu.json (section `sph`, key `same_device_session54`).

    bench/gpu/session54_records.py [RAW]      # RAW: bench/results/raw/session54 (default)

RAW holds one folder per device call of `bench/gpu/session54_checks.sh lists`, each with
lists_{base,new}.jsonl (the bench's records: 10 M alternated twice, then 100 M) and diag_1e8.out
(the diagnostic build's per-kernel times at 100 M, 22 steps):
warp_order/ (H100; the list appended one atomic per warp: rejected), lists/ (H100; the list in
slot order, a list for the boundary too and a fill of one thread per slot: the boundary's list
rejected), final/ (H200; the fluid's list only, filled four slots a thread); then ncu/ (Nsight
Compute's details of sph_classify, sph_list_fill and sph_rates_bound at 10 M) and latency/
(`session54_checks.sh latency`: those two kernels reading the position beside the ownership
flag, diagnostic timings against the build before and the split at 10 M: no gain, rejected)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sph_split_records import Raw  # noqa: E402

raw = sys.argv[1] if len(sys.argv) > 1 else "bench/results/raw/session54"
path = "bench/results/multi_gpu.json"
with open(path) as f:
    d = json.load(f)

ROUNDS = {
    "warp_order": ("NVIDIA H100 80GB HBM3", "lists appended one atomic per warp (rejected)"),
    "lists": ("NVIDIA H100 80GB HBM3", "lists in slot order, fluid and boundary (boundary rejected)"),
    "final": ("NVIDIA H200", "fluid list in slot order (kept)"),
}


def summary(runs, n):
    """Per build at about n particles: split ratios and ms/step (one GPU, two slabs)."""
    out = {}
    for b in ("base", "new"):
        rs = [r for r in runs if r["build"] == b and abs(r["particles"] - n) < 0.05 * n]
        out[b] = {
            "split_ratio": [round(r["split_ratio"], 4) for r in rs],
            "one_gpu_ms_per_step": [round(r["one_gpu_ms_per_step"], 3) for r in rs],
            "two_slabs_ms_per_step": [round(r["two_slabs_ms_per_step"], 3) for r in rs],
        }
    two = [sum(out[b]["two_slabs_ms_per_step"]) / len(out[b]["two_slabs_ms_per_step"])
           for b in ("base", "new")]
    one = [sum(out[b]["one_gpu_ms_per_step"]) / len(out[b]["one_gpu_ms_per_step"])
           for b in ("base", "new")]
    out["two_slabs_new_over_base"] = round(two[1] / two[0], 4)
    out["one_gpu_new_over_base"] = round(one[1] / one[0], 4)
    return out


rounds = {}
for name, (card, what) in ROUNDS.items():
    r = Raw(f"{raw}/{name}")
    runs = r.pairs(r.jl("lists_base.jsonl"), "base") + r.pairs(r.jl("lists_new.jsonl"), "new")
    kernels = r.diag("diag_1e8.out")
    rates = {e: k["sph_rates_fluid"] for e, k in kernels.items()}
    slabs = [v for e, v in rates.items() if e != "one GPU"]
    rounds[name] = {
        "card": card,
        "build": what,
        "verlet_10m": summary(runs, 9.9e6),
        "verlet_100m": summary(runs, 1.04e8),
        "fluid_rates_slabs_over_one_gpu_100m": round(sum(slabs) / rates["one GPU"], 4),
        "kernel_ms_100m_22_steps_new": kernels,
        "runs": runs,
    }

lat = Raw(f"{raw}/latency")
latency = {
    "card": "NVIDIA H100 80GB HBM3",
    "build": "sph_classify and sph_rates_bound reading the position beside the ownership flag "
             "(rejected: raw/session54/latency/load_beside_the_flag_rejected.patch)",
    "kernel_ms_22_steps": {
        f"{n} {b}": lat.diag(f"{b}_{n}.out")
        for n in ("1e7", "1e8") for b in ("diaghead", "diag")
    },
    "runs": lat.pairs(lat.jl("latency_head.jsonl"), "head")
    + lat.pairs(lat.jl("latency_new.jsonl"), "new"),
}

d["sph"]["same_device_session54"] = {
    "note": "two slabs of the dam break on ONE GPU (--devices 0,0) against one GPU, f32, Verlet; "
            "split_ratio = one GPU's ms/step / the two slabs'. 'base' is commit 5468660 (session "
            "53's end), 'new' the build of each round, alternated on one warm machine. Session "
            "53 had found the two slabs' fluid rates 1.7 % above one GPU's at 104 M: split along "
            "x, every row of cells ends in halo cells of about five particles that idled lanes "
            "in the owned particles' warps. A slab's rates now run over a list of its owned "
            "slots. Appended one atomic per warp (warp_order) the list lost slot order and the "
            "slabs' fluid rates took 21 % longer; in slot order (per-block counts from the "
            "localize, a scan, a fill) they take 1.1 % more than one GPU's (final). A list of "
            "the owned boundary slots made sph_rates_bound slower (lists: 38.9 against 33.8 ms "
            "over 22 steps on the first slab) and was dropped. The one-GPU path got about 1 % "
            "faster in every round too; not profiled: its only change is in the rates kernel, "
            "which no longer carries the ownership store (a null-checked byte store per thread).",
    "rounds": rounds,
    "ncu_10m": "Nsight Compute on the two slabs at 10 M, H100 (raw/session54/ncu/): sph_classify "
               "85-91 us for 3.6 M slots, 1.2-1.3 TB/s (37-39 % of DRAM), 64-69 cycles per "
               "issued instruction, 77 % of them waiting on loads; sph_list_fill 13 us; "
               "sph_rates_bound 437 us on one GPU (25 cycles per instruction) against 317 and "
               "241 us on the slabs (41 and 18).",
    "latency_rejected": latency,
    "command": "PACK_MPI=1 bash bench/gpu/pack.sh; bash bench/gpu/session54_checks.sh lists (one "
               "call per round), then bench/gpu/session54_records.py",
}
with open(path, "w") as f:
    json.dump(d, f, indent=1)
    f.write("\n")
for name, r in rounds.items():
    print(name, r["card"], json.dumps({k: r[k] for k in (
        "verlet_10m", "verlet_100m", "fluid_rates_slabs_over_one_gpu_100m")}))
