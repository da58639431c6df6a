"""Readers shared by the session records of SPH slabs on one GPU (bench/gpu/session53_records.py,
session54_records.py): the bench's JSON lines and the diagnostic build's per-kernel timings."""
import json
import re


class Raw:
    """A folder of raw device output."""

    def __init__(self, raw):
        self.raw = raw

    def jl(self, name):
        """The JSON records of one `--out` file."""
        with open(f"{self.raw}/{name}") as f:
            return [json.loads(line) for line in f if line.strip()]

    @staticmethod
    def pairs(records, build):
        """(one GPU, group) record pairs in file order, tagged with the build."""
        out, one = [], None
        for r in records:
            if "gpus" not in r:
                one = r
            else:
                out.append({
                    "build": build,
                    "integrator": "verlet" if "Verlet" in r["model"] else "symplectic",
                    "balance": r["balance"],
                    "particles": r["particles"],
                    "one_gpu_ms_per_step": one["ms_per_step"],
                    "two_slabs_ms_per_step": 1e3 * r["wall_s"] / r["steps"],
                    "split_ratio": r["speedup_over_one_gpu"],
                    "exchange_share": r["exchange_share"],
                    "bytes_per_particle_two_slabs": r["bytes_per_particle"],
                    "bytes_per_particle_one_gpu": one["bytes_per_particle"],
                    "command": r["command"],
                })
        return out

    def diag(self, name):
        """{engine: {kernel: ms over the run}} from a diagnostic log (lines `DIAG   name   calls
        ms`, one block per engine)."""
        out, cur = {}, None
        with open(f"{self.raw}/{name}") as f:
            for line in f:
                m = re.match(r"DIAG sph .*\(own_lo (None|Some\((\d+)\)), nf (\d+), nb (\d+)\)", line)
                if m:
                    cur = "one GPU" if m.group(1) == "None" else f"slab from layer {m.group(2)}"
                    out[cur] = {}
                    continue
                m = re.match(r"DIAG\s+(\S+)\s+(\d+) calls\s+([\d.]+) ms", line)
                if m and cur:
                    out[cur][m.group(1)] = float(m.group(3))
        return out


def store_sph(key, entry, path="bench/results/multi_gpu.json"):
    """Sets section `sph`, key `key` of multi_gpu.json to `entry` (a session's records)."""
    with open(path) as f:
        d = json.load(f)
    d["sph"][key] = entry
    with open(path, "w") as f:
        json.dump(d, f, indent=1)
        f.write("\n")
