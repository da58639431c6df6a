#!/usr/bin/env python3
"""Model of multi-GPU SPH step time on slabs (issue 18), from the per-kernel times that session
53 measured on one H100 for one GPU and for two slabs of the 104 M dam break.

Writes bench/results/sph_scaling_model.json (predictions, not measurements) and prints the
tables that docs/scaling.md shows:  python3 bench/sph_scaling_model.py

The inputs are read from bench/results/multi_gpu.json (`sph.same_device_session53`: the
diagnostic timings of every kernel, launched one at a time between stream synchronisations,
summed over 22 Verlet steps; f32). What the model adds is how each part grows with the number
of GPUs G:
- the fluid's work (rates, sort, reorder, localize) divides by G; the rates take r_f times
  their share on a slab (measured 1.017 over two slabs);
- every slab still does, for the whole run: the counting sort's scan over the run's whole grid,
  the fluid-block marks over it, the boundary's localize (every GPU holds every boundary
  particle), the pass of `sph_rates_bound` over the boundary slots it does not own, and
  `sph_take` over every boundary slot;
- each slab sorts, reorders and localizes its halo (a layer from each neighbour) without
  computing it, and classifies its slots;
- the records of one halo layer cross each link once per evaluation (no overlap yet), both
  neighbours at once, plus the launches and the synchronous read of the counts.
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 22  # steps the diagnostic timings sum over

with open(os.path.join(HERE, "results", "multi_gpu.json")) as f:
    S53 = json.load(f)["sph"]["same_device_session53"]
K = S53["kernel_ms_100m_22_steps"]["classify fix and scan"]
ONE = {k: v / STEPS * 1e-3 for k, v in K["one GPU"].items()}  # s per step
SLABS = [{k: v / STEPS * 1e-3 for k, v in e.items()} for n, e in K.items() if n != "one GPU"]

# The run (from the diagnostic log's engine lines, raw/session53/scan/diagscan_1e8.out).
N_FLUID = 87_354_828
N_BOUND = 16_769_336
N = N_FLUID + N_BOUND
SLAB_NF = [44_451_088, 44_169_752]  # fluid slots of the two slabs, their halo included
HALO_PER_SIDE = (sum(SLAB_NF) - N_FLUID) / 2  # one neighbour each
LAYERS = 379  # cell layers (two cells of h) along x
LOADED_LAYERS = 2 * (379 - 306)  # the water's layers at the start: the work cut put 306 | 73
MIN_SLAB_LAYERS = 3  # sph::slabs: a slab is never thinner
RECORD_BYTES = 88  # a fluid record in f32: both states (sph/cuda/slab.rs)
# Bytes localize moves per particle: fluid reads position, density, velocity and writes its
# two float4 (72 B); boundary reads position and density, writes one float4 (44 B).
LOC_FLUID, LOC_BOUND = 72, 44
LINKS = {
    "nvlink": {"bandwidth": 300e9, "latency": 10e-6},  # as bench/scaling_model.py
    "ib_ndr_gdr": {"bandwidth": 40e9, "latency": 15e-6},
    "ib_ndr_staged": {"bandwidth": 20e9, "latency": 30e-6},
}
GPUS_PER_NODE = 8
SYNC_OVERHEAD = 25e-6  # the synchronous read of the counts and its launches, per evaluation


def parts():
    """The one-GPU step split by how it scales, and the slab's own costs [s per step]."""
    loc = ONE["sph_localize"]
    loc_bound = loc * N_BOUND * LOC_BOUND / (N_BOUND * LOC_BOUND + N_FLUID * LOC_FLUID)
    whole = (ONE["exclusive_scan"] + ONE["sph_fluid_blocks"] + ONE["sph_fluid_near"] + loc_bound
             + ONE.get("sph_reset_diag", 0.0) + ONE.get("get", 0.0))
    t1 = sum(ONE.values())
    rates = ONE["sph_rates_fluid"]
    sort_etc = (ONE["sph_hash_count"] + ONE["sph_scatter"] + ONE["sph_cell_rank"]
                + ONE["sph_gather"] + (loc - loc_bound))
    other = t1 - whole - rates  # divides by G (wet walls' rates, sort, reorder, localize)
    r_f = sum(s["sph_rates_fluid"] for s in SLABS) / rates
    unowned = (sum(s["sph_rates_bound"] for s in SLABS) - ONE["sph_rates_bound"]) / len(SLABS)
    take = sum(s["sph_take"] for s in SLABS) / len(SLABS)
    fixed_x = sum(s.get("sph_unpack", 0) + s.get("memset", 0) for s in SLABS) / len(SLABS)
    classify_per_slot = sum(s["sph_classify"] for s in SLABS) / sum(SLAB_NF)
    halo_per_particle = sort_etc / N_FLUID  # sorted, reordered, localized, never computed
    return {
        "t1": t1, "whole": whole, "rates": rates, "other": other, "r_f": r_f,
        "unowned": unowned, "take": take, "fixed_x": fixed_x,
        "classify_per_slot": classify_per_slot, "halo_per_particle": halo_per_particle,
    }


P = parts()


def link_of(g, gpus_per_node=GPUS_PER_NODE, inter="ib_ndr_gdr"):
    return "nvlink" if g <= gpus_per_node else inter


def step(g, imbalance=1.0, inter="ib_ndr_gdr", grow=1.0):
    """Seconds per step of the slowest of g slabs (Verlet: one evaluation, one exchange).
    `grow`: the case scaled along the split axis by this factor (weak scaling: g), which
    multiplies every whole-run cost of a slab."""
    p = P
    if g == 1:
        return {"step_s": p["t1"] * grow, "whole_s": p["whole"] * grow, "halo_s": 0.0,
                "link_s": 0.0, "compute_s": (p["t1"] - p["whole"]) * grow}
    compute = (p["r_f"] * p["rates"] + p["other"]) * grow / g * imbalance
    sides = 2 if g > 2 else 1  # the slowest slab is an inner one from 3 slabs on
    halo = sides * HALO_PER_SIDE
    slots = N_FLUID * grow / g + halo
    whole = (p["whole"] + p["unowned"] + p["take"]) * grow
    lk = LINKS[link_of(g, inter=inter)]
    link = lk["latency"] + HALO_PER_SIDE * RECORD_BYTES / lk["bandwidth"]
    x = p["classify_per_slot"] * slots + p["fixed_x"] + SYNC_OVERHEAD + link
    t = compute + whole + p["halo_per_particle"] * halo + x
    return {"step_s": t, "whole_s": whole, "halo_s": p["halo_per_particle"] * halo,
            "link_s": link, "compute_s": compute, "exchange_s": x}


def main():
    rows = []
    for inter in ("ib_ndr_gdr", "ib_ndr_staged"):
        for g in (1, 2, 4, 8, 16, 32, 48):
            if inter == "ib_ndr_staged" and g <= GPUS_PER_NODE:
                continue
            for imb in ((1.0,) if g == 1 else (1.0, 1.05)):
                s = step(g, imb, inter)
                w = step(g, imb, inter, grow=g)
                rows.append({
                    "gpus": g, "link": link_of(g, inter=inter), "imbalance": imb,
                    "loaded_layers_per_gpu": LOADED_LAYERS / g,
                    "fits_min_slab": LOADED_LAYERS / g >= MIN_SLAB_LAYERS,
                    "strong_efficiency": P["t1"] / (g * s["step_s"]),
                    "strong_step_ms": 1e3 * s["step_s"],
                    "whole_run_ms_per_slab": 1e3 * s["whole_s"],
                    "exchange_ms": 1e3 * s.get("exchange_s", 0.0),
                    "weak_efficiency": step(1, grow=1)["step_s"] / w["step_s"],
                    "weak_whole_run_ms_per_slab": 1e3 * w["whole_s"],
                })
    check = step(2)
    out = {
        "what": "SPH slabs of the 104 M dam break (Verlet, f32): predicted step of the slowest slab "
                "on G GPUs from the one-H100 per-kernel timings of session 53; strong scaling at "
                "104 M, weak scaling with the tank lengthened along the split axis G-fold "
                "(104 M per GPU). Predictions, not measurements.",
        "inputs": {k: v for k, v in P.items()},
        "halo_per_side": HALO_PER_SIDE,
        "check_two_slabs_one_h100": {
            "model_slowest_slab_ms": 1e3 * check["step_s"],
            "measured_slowest_slab_ms": 1e3 * max(sum(s.values()) for s in SLABS),
            "note": "not an independent check: the slab's rates factor, its pass over unowned "
                    "boundary slots, sph_take and the classify cost per slot were taken from these "
                    "same two slabs; what it checks is that the parts add up. The measured slab "
                    "copied its halo on one device (no link); the model adds an NVLink copy of one "
                    "halo layer",
        },
        "rows": rows,
        "command": "python3 bench/sph_scaling_model.py",
    }
    with open(os.path.join(HERE, "results", "sph_scaling_model.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    p = P
    print(f"one GPU {1e3*p['t1']:.2f} ms/step; whole-run per slab {1e3*(p['whole']+p['unowned']+p['take']):.2f} ms "
          f"(scan, block marks, boundary localize {1e3*p['whole']:.2f}; unowned boundary pass {1e3*p['unowned']:.2f}; "
          f"take {1e3*p['take']:.2f}); rates on a slab x{p['r_f']:.3f}; halo {HALO_PER_SIDE:.0f} per side")
    c = out["check_two_slabs_one_h100"]
    print(f"check: two slabs, model {c['model_slowest_slab_ms']:.2f} ms, measured {c['measured_slowest_slab_ms']:.2f} ms")
    print("| GPUs | link | imbalance | water layers/GPU | strong eff. | step ms | whole-run ms/slab | exchange ms | weak eff. | weak whole-run ms/slab |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        flag = "" if r["fits_min_slab"] else " (below 3)"
        print(f"| {r['gpus']} | {r['link']} | {r['imbalance']:.2f} | {r['loaded_layers_per_gpu']:.1f}{flag} "
              f"| {r['strong_efficiency']:.3f} | {r['strong_step_ms']:.2f} | {r['whole_run_ms_per_slab']:.2f} "
              f"| {r['exchange_ms']:.2f} | {r['weak_efficiency']:.3f} | {r['weak_whole_run_ms_per_slab']:.1f} |")


if __name__ == "__main__":
    main()
