"""Time to hand out the newest frame's position array (a view, no copy) and, for comparison,
an owned copy: ``python3 tools/python/bench_handout.py SEGMENT`` (the script's directory holds the
package; or ``pip install tools/python`` first).

A 10 M-particle segment for it: ``shm-fixture writer NAME --particles 10000000 --frames 2 --keep``
(then ``shmctl clean`` or remove /dev/shm/NAME).
"""

import sys
import time

import particle_shm as p


def main(name, repeats=200):
    seg = p.attach(name)
    f = seg.latest()
    print(f"{name}: {f.particle_count} particles, positions {f.positions.shape} {f.positions.dtype}")
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f = seg.latest()
        pos = f.positions
        times.append(time.perf_counter() - t)
        assert pos.shape == (f.particle_count, 3) and f.valid()
    times.sort()
    print(f"latest().positions (view): median {times[len(times) // 2] * 1e6:.1f} us, "
          f"max {times[-1] * 1e6:.1f} us over {repeats}")
    t = time.perf_counter()
    seg.latest(copy=True)
    print(f"latest(copy=True): {(time.perf_counter() - t) * 1e3:.1f} ms (all fields)")


if __name__ == "__main__":
    main(sys.argv[1])
