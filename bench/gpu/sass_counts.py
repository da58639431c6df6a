#!/usr/bin/env python3
"""Per-instruction counts of an Nsight Compute source page (ncu -i REP --page source --csv
--print-source sass), as bench/gpu/session40_checks.sh writes it:
    bench/gpu/sass_counts.py FILE.csv[.gz] [--listing] [--min N]
Prints the executed warp instructions in all, the opcode mix, and with --listing every
instruction executed at least N times (default 1) with its count and stall samples."""
import collections, csv, gzip, io, signal, sys

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`

path = sys.argv[1]
text = (gzip.open(path, "rt") if path.endswith(".gz") else open(path)).read()
rows = list(csv.reader(io.StringIO(text)))
head = next(i for i, r in enumerate(rows) if "Instructions Executed" in r)
hdr, data = rows[head], rows[head + 1:]
src, ex = hdr.index("Source"), hdr.index("Instructions Executed")
stall = hdr.index("Warp Stall Sampling (All Samples)")
count = lambda r: int(r[ex].replace(",", "") or 0)
total = sum(count(r) for r in data)
print(f"warp instructions executed: {total:,} ({len(data)} instructions in the code)")
mix = collections.Counter()
for r in data:
    words = r[src].split()
    op = words[1] if words[0].startswith("@") else words[0]
    mix[op.split(".")[0]] += count(r)
for op, n in mix.most_common(25):
    print(f"  {op:10s} {100 * n / total:6.2f} % {n:,}")
if "--listing" in sys.argv:
    least = int(sys.argv[sys.argv.index("--min") + 1]) if "--min" in sys.argv else 1
    for k, r in enumerate(data):
        if count(r) >= least:
            print(f"{k:5d} {count(r):>14,} {r[stall]:>7} {r[src].strip()}")
