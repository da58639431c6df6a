#!/usr/bin/env python3
"""Extracts the CUBINs of the kernel disk cache (solver/src/dem/cuda/kernel_cache.rs: "PSHMKC01",
u64 key length, key, u64 CUBIN length, CUBIN, u64 FNV-1a) so that cuobjdump can read them:
    bench/gpu/cubin_extract.py CACHE_DIR OUT_DIR
Each OUT_DIR/<name>.cubin gets a <name>.key beside it (the options and the source)."""
import os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for name in sorted(os.listdir(src)):
    if not name.endswith(".cubin"):
        continue
    b = open(os.path.join(src, name), "rb").read()
    if not b.startswith(b"PSHMKC01"):
        continue
    (klen,) = struct.unpack_from("<Q", b, 8)
    key = b[16:16 + klen]
    (n,) = struct.unpack_from("<Q", b, 16 + klen)
    cubin = b[24 + klen:24 + klen + n]
    stem = os.path.join(dst, name[:-len(".cubin")])
    open(stem + ".cubin", "wb").write(cubin)
    # The options only (the source follows the first empty line).
    open(stem + ".key", "wb").write(key.split(b"\n\n", 1)[0] + b"\n")
    print(stem, len(cubin), "bytes")
