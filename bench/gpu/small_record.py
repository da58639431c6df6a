#!/usr/bin/env python3
"""One JSON record ("phase": "small") of a lab-scale case run by the solver, from its log:

    bench/gpu/small_record.py LOG COMMAND CASE >> small.jsonl

Used by the device scripts (issue13_checks.sh, session13_checks.sh)."""
import json, re, sys

log, cmd, case = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(log).read()
fin = re.search(r"finished after (\d+) steps in ([\d.]+) s \(([\d.]+) steps/s", text)
n = re.search(r"INFO (\d+) particles", text)
print(json.dumps({"case": case, "model": "linear-friction", "phase": "small",
                  "particles": int(n.group(1)) if n else None,
                  "steps": int(fin.group(1)) if fin else None,
                  "stepping_s": float(fin.group(2)) if fin else None,
                  "steps_per_s": float(fin.group(3)) if fin else None,
                  "command": cmd}))
