#!/usr/bin/env python3
"""Compares the machine code of the kernels of two CUBIN dumps (solver/tests/nvrtc_compile.rs with
PARTICLE_SHM_NVRTC_DUMP=DIR, once per build), without a GPU or cuobjdump:
    bench/gpu/cubin_text.py DIR_A DIR_B [KERNEL ...]
For each CUBIN present in both, each kernel's .text.<name> section (all kernels, or those named)
is reported as the same bytes or different, with both sizes. Exits 1 when any differs."""
import os, struct, sys


def sections(path):
    """{name: bytes} of an ELF64 little-endian file's sections."""
    b = open(path, "rb").read()
    if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
        raise SystemExit(f"{path}: not an ELF64 little-endian file")
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]
    names = b[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for h in heads:
        name = names[h[0]:names.index(b"\0", h[0])].decode()
        out[name] = b[h[4]:h[4] + h[5]] if h[1] != 8 else b""  # SHT_NOBITS holds nothing
    return out


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    a, b, wanted = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    differ = 0
    for f in sorted(os.listdir(a)):
        if not f.endswith(".cubin") or not os.path.exists(os.path.join(b, f)):
            continue
        sa, sb = sections(os.path.join(a, f)), sections(os.path.join(b, f))
        for name in sorted(set(sa) | set(sb)):
            if not name.startswith(".text."):
                continue
            k = name[len(".text."):]
            if wanted and k not in wanted:
                continue
            ta, tb = sa.get(name), sb.get(name)
            if ta == tb:
                state = "same"
            else:
                state = "DIFFERENT" if ta is not None and tb is not None else "only in one"
                differ += 1
            print(f"{f} {k}: {state} ({len(ta or b'')} / {len(tb or b'')} bytes)")
    sys.exit(1 if differ else 0)


main()
