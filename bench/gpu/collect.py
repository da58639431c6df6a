#!/usr/bin/env python3
"""Gathers the JSON lines written by bench/gpu/run.sh into bench/results/dem_gpu.json:
benchmark records (those with a `phase`) in one list; checks (parity, determinism, restitution,
copy bandwidth) under their own key. A later record of the same (model, particles, phase)
replaces an earlier one (the publish rerun after the copy-stream fix)."""
import json, sys
recs, checks, order = {}, [], []
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        if "phase" in r:
            key = (r["model"], r["particles"], r["phase"], r["publish_share"] is not None)
            if key not in recs:
                order.append(key)
            recs[key] = r
        else:
            checks.append(r)
out = [recs[k] for k in order]
json.dump(out, open("bench/results/dem_gpu.json", "w"), indent=1)
json.dump(checks, open("bench/results/dem_gpu_checks.json", "w"), indent=1)
print(f"{len(out)} benchmark records, {len(checks)} checks")
