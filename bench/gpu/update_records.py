#!/usr/bin/env python3
"""Merges new JSON lines from the GPU scripts into bench/results/dem_gpu.json (issue 13 on):

    bench/gpu/update_records.py RAW.jsonl...

A record replaces the one with the same (model, particles, phase, publication) key. Records of
kernel variants other than the default (a command with --hist-layout row, --min-blocks, or
--candidates other than the default 16, --graphs off, --history, --skin, --list, --list-walk,
or a PARTICLE_SHM_* variable set before the command) go to bench/results/dem_gpu_variants.json instead, so
that dem_gpu.json holds what a user of the default build gets."""
import json, os, re, sys

# solver::dem::cuda::DEFAULT_CANDIDATES, read from the source so the two cannot drift apart.
_MOD_RS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../solver/src/dem/cuda/mod.rs")
with open(_MOD_RS) as _f:
    DEFAULT_CANDIDATES = re.search(r"pub const DEFAULT_CANDIDATES: u32 = (\d+);", _f.read()).group(1)


def is_variant(cmd):
    m = re.search(r"--candidates (\d+)", cmd)
    return ("--hist-layout row" in cmd or "--min-blocks" in cmd or "--graphs off" in cmd
            or "--history " in cmd or "--skin " in cmd or "--list " in cmd
            or "--list-walk " in cmd or cmd.startswith("PARTICLE_SHM_")
            or (m is not None and m.group(1) != DEFAULT_CANDIDATES))


def key(r):
    return (r.get("model"), r.get("particles"), r.get("phase"), r.get("case"),
            r.get("publish_share") is not None)


main = json.load(open("bench/results/dem_gpu.json"))
try:
    variants = json.load(open("bench/results/dem_gpu_variants.json"))
except FileNotFoundError:
    variants = []
index = {key(r): i for i, r in enumerate(main)}
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        if "phase" not in r:
            continue
        if is_variant(r["command"]):
            variants.append(r)
        elif key(r) in index:
            main[index[key(r)]] = r
        else:
            index[key(r)] = len(main)
            main.append(r)
json.dump(main, open("bench/results/dem_gpu.json", "w"), indent=1)
json.dump(variants, open("bench/results/dem_gpu_variants.json", "w"), indent=1)
print(f"{len(main)} records, {len(variants)} variant records")
