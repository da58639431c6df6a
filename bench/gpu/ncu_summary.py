#!/usr/bin/env python3
"""Kernel time summary of an Nsight Compute CSV (--csv --page raw --metrics gpu__time_duration.sum):
    bench/gpu/ncu_summary.py FILE.csv [SPLIT_KERNEL]
With SPLIT_KERNEL (e.g. dem_classify) the launches before its first one and from it on are
summarised apart (one GPU, then the group, in dem-gpu-bench multi).
    bench/gpu/ncu_summary.py FILE.csv --launches
lists each launch instead, with its time and, where the CSV has them, its DRAM bytes read and
written (--metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum)."""
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
hi = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
head = rows[hi]; ki = head.index("Kernel Name"); ti = head.index("gpu__time_duration.sum")
if "--launches" in sys.argv[2:]:
    cols = [m for m in ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum") if m in head]
    units = rows[hi + 1] if rows[hi + 1][ki] == "" else None
    for r in rows[hi + 1:]:
        if r[ki]:
            print("LAUNCH", r[ki], *(f"{m}={r[head.index(m)]}" for m in cols))
    if units:
        print("UNITS", *(units[head.index(m)] for m in cols))
    sys.exit(0)
data = []
for r in rows[hi + 1:]:
    try:
        data.append((r[ki], float(r[ti].replace(",", ""))))
    except ValueError:
        pass
split = sys.argv[2] if len(sys.argv) > 2 else None
first = next((i for i, (k, _) in enumerate(data) if split and k.startswith(split)), len(data))
parts = [("before " + split, data[:first]), ("from " + split, data[first:])] if split else [("all", data)]
for name, part in parts:
    t = collections.defaultdict(float); c = collections.Counter()
    for k, d in part:
        t[k] += d; c[k] += 1
    print(f"== {name}: {sum(t.values())/1e6:.2f} ms in {len(part)} launches")
    for k in sorted(t, key=t.get, reverse=True):
        print(f"  {k:32s} {c[k]:4d} x {t[k]/c[k]/1e3:9.1f} us = {t[k]/1e6:8.2f} ms")
