#!/usr/bin/env python3
"""Fills bench/results/multi_gpu.json (issues 14 and 18) from the two-GPU machine's records:

    bench/gpu/multi_records.py [RAW_DIR [X4_DIR]]   # defaults bench/results/raw/x2, .../x4

reads RAW_DIR/multi_gpu_x2.jsonl (dem-gpu-bench multi / publish --devices 0,1) and
RAW_DIR/sph_group_x2.jsonl (sph-gpu-bench --devices 0,1), keeps the newest record of each
configuration, and sets each target key from its record (null, with the reason, where no run
measured it). Records of slabs sharing one GPU stay under same_device_records.

Issue 16: X4_DIR/multi_gpu_x4.jsonl (dem-gpu-bench scale and multi on nvidia-h200-x4) fills
doc["four_gpu"]: strong and weak efficiencies over the GPU sets {0}, {0,1}, {0,1,2,3}, the
largest frictional run on four, balancing on a moving load."""
import json, os, sys

raw = sys.argv[1] if len(sys.argv) > 1 else "bench/results/raw/x2"
raw4 = sys.argv[2] if len(sys.argv) > 2 else "bench/results/raw/x4"
path = "bench/results/multi_gpu.json"
doc = json.load(open(path))


def lines(name, where=None):
    p = os.path.join(where or raw, name)
    if not os.path.exists(p):
        return []
    return [json.loads(l) for l in open(p) if l.strip()]


def newest(recs, key):
    out = {}
    for r in recs:
        out[key(r)] = r
    return list(out.values())


dem = newest(lines("multi_gpu_x2.jsonl"),
             lambda r: (r["check"], r.get("model"), r.get("phase"), r.get("scaling"),
                        r.get("particles"), r.get("balance"), r.get("bounds") is None))
dem = [r for r in dem if r.get("distinct_gpus", 2) == 2]
# Records before session 23 carry no first_cut: their slabs started at equal counts.
# Records before session 55 carry no classify (sph_classify before each exchange), before
# session 56 no overlap (each exchange after the evaluation's every kernel).
sph = newest(lines("sph_group_x2.jsonl"),
             lambda r: (r.get("gpus"), r.get("balance"), r.get("particles"), r.get("steps"),
                        r.get("first_cut", "count"), r.get("classify", "standalone"),
                        r.get("overlap")))


def pick(recs, **want):
    got = [r for r in recs if all(r.get(k) == v for k, v in want.items())]
    return got[-1] if got else None


big = [r for r in dem if r.get("particles", 0) >= 9e7]
t = doc["targets"]
why = {}
for key, model in (("strong_100m_linear_eff_2gpu", "linear"),
                   ("strong_100m_friction_eff_2gpu", "linear-friction")):
    r = pick(big, check="multi_gpu", model=model, phase="dense", scaling="strong", balance="off")
    t[key] = r and r["efficiency"]
    if not r:
        why[key] = "no 100 M run of this model completed on the two H200s"
r = pick(big, check="multi_gpu", scaling="weak")
t["weak_eff_2gpu"] = r and r["efficiency"]
if not r:
    why["weak_eff_2gpu"] = "the weak-scaling run (100 M per GPU) did not run within the session's device time"
loose = [r for r in dem if r["check"] == "multi_gpu" and r.get("phase") == "loose"]
off = pick(loose, balance="off")
lb = None
if off:
    on = [r for r in loose if r["balance"] != "off" and r["particles"] == off["particles"]
          and r["model"] == off["model"]]
    if on:
        best = max(on, key=lambda r: r["group_steps_per_s"])
        lb = {"speedup": best["group_steps_per_s"] / off["group_steps_per_s"],
              "balance": best["balance"], "imbalance_off": off["imbalance_max_over_mean"],
              "imbalance_on": best["imbalance_max_over_mean"], "command_off": off["command"]}
t["lb_speedup_2gpu"] = lb and lb["speedup"]
t["lb_detail"] = lb
if not lb:
    why["lb_speedup_2gpu"] = "the moving-load run (falling box cut along z) did not run within the session's device time"
t.setdefault("max_particles_2gpu_friction", None)
if t["max_particles_2gpu_friction"] is None:
    why["max_particles_2gpu_friction"] = "not measured: a run at the capacity limit (about 340 M frictional particles on two H200s by the sizing rule, against about 200 M on one) needs more device time than the x2 machine was lent for"
# Only runs whose steps cost the same without frames before and after the frames count (a
# dense pack, bracketed: session 25); the falling case's steps get dearer as it falls.
r = pick([q for q in big if "steps_per_s_without_before" in q and q.get("phase") == "dense"],
         check="publish_group")
t["publish_share_100m_2gpu"] = r and r["publish_share"]
old = pick(big, check="publish_group")
if not r:
    why["publish_share_100m_2gpu"] = (
        "no bracketed run on a dense pack yet (x2_checks.sh next6, x4_checks.sh rest). Session "
        "18's 0.387 (%s) was the falling case measured without frames first and with them after: "
        "on one H200 in session 25 the same unbracketed 100 M run read 0.367, the steps without "
        "frames falling from 100.7 to 51.7 steps/s in 15 s of falling; on a dense pack, bracketed, "
        "one H200 at 100 M read 0.012 (1.6 frames/s) and two slabs of it at 50 M 0.018 "
        "(5.8 frames/s; one_gpu_proxies, raw/session25/publish6)" % (old and old["command"]))
# Issue 15: the strong-scaling case over two MPI ranks (one GPU each) against one process.
r = pick(big, check="mpi_vs_inprocess")
t["mpi_vs_inprocess_2gpu"] = r and r["ratio"]
if not r:
    why["mpi_vs_inprocess_2gpu"] = (
        "GPU ranks run (session 12: 2 and 3 ranks bit-identical to one GPU), but no two-GPU machine "
        "was lent after they were built; on one H100 the two ranks time-share the GPU, which says "
        "nothing of this key (bench/results/multi_gpu.md, 'GPU ranks')")
# Session 21: the dam break on two SPH GPU ranks against the SPH group in one process
# (x2_checks.sh next5: sph_mpi_vs_inprocess).
r = pick(lines("multi_gpu_x2.jsonl"), check="sph_mpi_vs_inprocess")
t["sph_mpi_vs_inprocess_2gpu"] = r and r["ratio"]
if not r:
    why["sph_mpi_vs_inprocess_2gpu"] = (
        "SPH GPU ranks were built in session 21 (2 and 3 ranks bit-identical to one GPU, "
        "mpi_ranks::sph_gpu_ranks_give_the_bits_of_one_gpu), when the x2 machine was not lent; two "
        "ranks time-sharing one H100 ran the 1.3 M dam break at 93 steps/s against 236 in one "
        "process (bench/results/session21_checks.md), which says nothing of this key")
# Session 20: the ghost refresh beside the interior collide against before it, 10 M dense with
# friction on the two GPUs (x2_checks.sh next6: --overlap on / off), the newest of each.
ov = {r["overlap"]: r for r in lines("multi_gpu_x2.jsonl")
      if r.get("check") == "multi_gpu" and r.get("overlap") in ("on", "off")
      and r.get("distinct_gpus", 2) == 2 and r.get("particles", 0) < 9e7}
if "on" in ov and "off" in ov:
    t["overlap_10m_friction_2gpu"] = {
        "steps_per_s_on": ov["on"]["group_steps_per_s"],
        "steps_per_s_off": ov["off"]["group_steps_per_s"],
        "exchange_hidden_share_on": ov["on"].get("exchange_hidden_share"),
        "command_on": ov["on"]["command"], "command_off": ov["off"]["command"]}
else:
    t.setdefault("overlap_10m_friction_2gpu", None)
    why["overlap_10m_friction_2gpu"] = (
        "not measured on two GPUs: the overlap was built in session 20, when the x2 machine was not "
        "lent; on two slabs of one H100 (no transfer to hide) 290.3 steps/s on and off, cut along y "
        "(bench/results/session20_checks.md)")
t["why_null"] = why
# What a number needs to be read right (session 18).
t["notes"] = {
    "strong_linear": "strong_100m_linear_eff_2gpu is session 11's (code b9eb4fe), against one GPU that "
              "searched for neighbours every step; since session 13 one GPU searches every few steps "
              "(a Verlet skin) and a group still every step, so against one GPU as it runs now the group "
              "is slower than these efficiencies say: session 18's weak run (100 M per GPU, linear, dense) "
              "had 28.0 ms of work per step and GPU against 16.9 ms for one GPU alone (weak_eff_2gpu)",
    "mpi_vs_inprocess_2gpu": "200 steps of the built-in case at 100 M: the in-process group 3.8 s, the two "
                             "ranks 70.5 s, of which frames through host memory (12.7 s each at the start "
                             "and the end, and the other rank's part received between) are most. Since "
                             "then (session 18) frame parts travel as raw bytes, a posting rank keeps MPI "
                             "moving and parts download through page-locked memory: on two ranks sharing "
                             "one H100 at 20 M a frame 2.0-2.6 s -> 0.35-0.39 s, 200 steps 15.7 -> 4.9 s "
                             "(bench/results/session18_checks.md section 4); not yet measured on two GPUs. "
                             "Session 25 (one H200 lent): two ranks sharing it, records through host "
                             "memory, against two slabs of it in one process, 20 M, 200 steps: 50 "
                             "against 402 steps/s (0.124; one_gpu_proxies); with the host road's "
                             "page-locked buffers 61 against 411 (0.148): most of the gap is two "
                             "processes time-slicing one GPU, not what two GPUs and NCCL would show",
}
# Session 25: what one GPU could stand in for (slabs and ranks sharing GPU 0).
x1 = [json.loads(l) for d in ("session25/one", "session25/two", "session25/three")
      for l in open(os.path.join("bench/results/raw", d, "multi_gpu_x1.jsonl"))]
x1 += [json.loads(l) for d in ("session25/publish4", "session25/publish5", "session25/publish6")
       for l in open(os.path.join("bench/results/raw", d, "publish_x1.jsonl"))]
doc["one_gpu_proxies"] = {
    "machine": "nvidia-h200: one NVIDIA H200 (session 25; no two-GPU kind was lent)",
    "what": "the balancing's guard on slabs sharing GPU 0 (the falling box cut along z, 2 M, "
            "20000 steps: off, count unguarded, time guarded), two MPI ranks sharing GPU 0 "
            "against two slabs in one process, and publication (one GPU, and two slabs of it): "
            "unbracketed on the falling case first (publish4), then bracketed (publish5), then "
            "bracketed on a relaxed dense pack (publish6); GPUs that share one device share its "
            "time, so these say nothing of speedups",
    "records": x1,
}
doc["two_gpu_records"] = {
    "machine": "nvidia-h200-x2: two NVIDIA H200 joined by NVLink (NV18), driver 580.159.04",
    "records": dem,
}
s = doc["sph"]
st = s["targets"]
big_any = [r for r in sph if r.get("particles", 0) >= 9e7 and r.get("gpus") == 2]
# The keys describe the solver's defaults at the time of each record (since session 56 the
# exchange beside the boundary's rates; sph_classify before it); the runs that changed either
# (PARTICLE_SHM_SPH_OVERLAP=off, PARTICLE_SHM_SPH_CLASSIFY=rates) are kept beside them.
def defaults(r):
    return r.get("overlap", True) and r.get("classify", "standalone") == "standalone"
big_all = [r for r in big_any if defaults(r)]
for name, want in (("overlap_off", lambda r: r.get("overlap") is False),
                   ("classify_rates", lambda r: r.get("classify") == "rates")):
    alt = [r for r in big_any if want(r) and r.get("balance") == "off"
           and r.get("first_cut", "count") == "work"]
    if alt:
        st[f"sph_speedup_2gpu_lb_off_{name}"] = alt[-1]["speedup_over_one_gpu"]
# The keys describe the solver's default first cut (equal estimated work since session 23) when
# such records exist; the other cut's balancing-off run is kept beside them for comparison.
work = [r for r in big_all if r.get("first_cut", "count") == "work"]
big_sph = work or big_all
other = [r for r in big_all if r.get("first_cut", "count") == "count" and r.get("balance") == "off"]
if work and other:
    st["sph_speedup_2gpu_lb_off_count_cut"] = other[-1]["speedup_over_one_gpu"]
st["sph_first_cut"] = big_sph[0].get("first_cut", "count") if big_sph else None
for key, bal in (("off", "off"), ("on", None)):
    if bal:
        r = pick(big_sph, balance=bal)
    else:
        on = [r for r in big_sph if r.get("balance") != "off"]
        r = max(on, key=lambda r: r["speedup_over_one_gpu"]) if on else None
    st[f"sph_speedup_2gpu_lb_{key}"] = r and r["speedup_over_one_gpu"]
    st[f"sph_imbalance_2gpu_lb_{key}"] = r and r["imbalance_max_over_mean"]
st["why_null"] = None if big_sph else "the 100 M SPH runs did not run on the two H200s within the session's device time"
s["two_gpu_records"] = sph

# Issue 16: the four-GPU machine.
x4 = lines("multi_gpu_x4.jsonl", raw4)
scale = [r for r in x4 if r.get("check") == "scale"]


def scale_pick(scaling, gpus, lo, hi):
    got = [r for r in scale if r["scaling"] == scaling and r["gpus"] == gpus and r["ran"]
           and lo <= r["particles"] / (gpus if scaling == "weak" else 1) <= hi]
    return got[-1] if got else None


f = doc.setdefault("four_gpu", {})
ft = f.setdefault("targets", {})
fwhy = {}
for key, scaling, gpus, lo, hi in (
        ("strong_100m_friction_eff_2gpu_x4", "strong", 2, 9e7, 1.1e8),
        ("strong_100m_friction_eff_4gpu", "strong", 4, 9e7, 1.1e8),
        ("weak_friction_eff_2gpu_x4", "weak", 2, 9e7, 1.1e8),
        ("weak_friction_eff_4gpu", "weak", 4, 9e7, 1.1e8),
        ("strong_400m_friction_eff_4gpu", "strong", 4, 3.6e8, 4.4e8)):
    r = scale_pick(scaling, gpus, lo, hi)
    ft[key] = r and r["efficiency"]
    if r:
        ft[key + "_baseline_gpus"] = r["baseline_gpus"]
    else:
        fwhy[key] = "no such run completed on nvidia-h200-x4"
# 400 M strong: where no strong run reached four GPUs, its four-GPU end is weak scaling's last
# run (400 M on four: the same particles, relaxation and GPUs) against the strong run on two.
if ft["strong_400m_friction_eff_4gpu"] is None:
    two = scale_pick("strong", 2, 3.6e8, 4.4e8)
    four = [r for r in scale if r["scaling"] == "weak" and r["gpus"] == 4 and r["ran"]
            and two and r["particles"] == two["particles"] and r["relax"] == two["relax"]]
    if two and four:
        ft["strong_400m_friction_eff_4gpu"] = four[-1]["steps_per_s"] * 2 / (two["steps_per_s"] * 4)
        ft["strong_400m_friction_eff_4gpu_baseline_gpus"] = 2
        ft["strong_400m_note"] = (
            "400 M frictional particles do not fit one H200; efficiency against two: the four-GPU "
            "run is the weak-scaling run at 100 M per GPU (same particles and relaxation), the "
            "two-GPU run the strong one at 400 M. Above 1 because 200 M particles per H200 fit "
            "only with one history buffer updated in place and no Verlet list (610 B/particle "
            "over both GPUs), while 100 M per H200 run with both (1337 B/particle with room "
            "for migration): the memory configuration, not the exchange, sets this ratio")
        fwhy.pop("strong_400m_friction_eff_4gpu", None)
ran4 = [r for r in scale if r["gpus"] == 4 and r["ran"] and r["distinct_gpus"] == 4]
ft["max_particles_4gpu_friction"] = max((r["particles"] for r in ran4), default=None)
tried = [r for r in scale if r["gpus"] == 4 and not r["ran"]]
if tried:
    ft["max_particles_4gpu_friction_refused"] = [
        {"requested": r["requested_particles"], "error": r["error"]} for r in tried]
mv = [r for r in x4 if r.get("check") == "multi_gpu" and r.get("phase") == "loose"
      and r.get("distinct_gpus") == 4]
off4 = [r for r in mv if r["balance"] == "off"]
on4 = [r for r in mv if r["balance"] != "off"]
if off4 and on4:
    best = max(on4, key=lambda r: r["group_steps_per_s"])
    ft["lb_speedup_4gpu"] = best["group_steps_per_s"] / off4[-1]["group_steps_per_s"]
    ft["lb_detail_4gpu"] = {"balance": best["balance"],
                            "imbalance_off": off4[-1]["imbalance_max_over_mean"],
                            "imbalance_on": best["imbalance_max_over_mean"],
                            "command": best["command"]}
else:
    ft["lb_speedup_4gpu"] = None
    fwhy["lb_speedup_4gpu"] = "the moving-load run on four GPUs did not run"
# Issue 14's two-GPU keys from the four-GPU machine's GPUs 0 and 1 (every pair NV18, as on the
# x2 machine), where newer than the x2 machine's records (session 24).
for key, src in (("strong_100m_friction_eff_2gpu", "strong_100m_friction_eff_2gpu_x4"),
                 ("weak_eff_2gpu", "weak_friction_eff_2gpu_x4")):
    if ft.get(src) is not None:
        t[key] = ft[src]
        t.setdefault("sources", {})[key] = (
            f"four_gpu.targets.{src}: dem-gpu-bench scale on GPUs 0 and 1 of nvidia-h200-x4 "
            "(session 24), dense frictional (linear-friction), against one GPU with its Verlet skin")
        why.pop(key, None)
two400 = scale_pick("strong", 2, 3.6e8, 4.4e8)
if two400:
    t["max_particles_2gpu_friction"] = two400["particles"]
    t.setdefault("sources", {})["max_particles_2gpu_friction"] = (
        "the largest frictional run made on two H200s (GPUs 0 and 1 of nvidia-h200-x4, session "
        "24): it ran; the limit was not searched. " + two400["report"])
    why.pop("max_particles_2gpu_friction", None)
t["why_null"] = why
ft["targets"] = "strong >= 0.85 on 4 GPUs and >= 0.80 on 8; weak >= 0.90 on 8; 1e9 frictional particles on 4 H200s"
ft["why_null"] = fwhy
f["machine"] = "nvidia-h200-x4: four NVIDIA H200 on one host"
f["records"] = x4
json.dump(doc, open(path, "w"), indent=1)
print(json.dumps(ft, indent=1))
print(json.dumps(t, indent=1))
print(json.dumps(st, indent=1))
