#!/usr/bin/env python3
"""Print the kinetic energy of a running particle-shm simulation, live.

    pip install tools/python        # once: the particle_shm package (numpy its only dependency)
    python3 examples/live_energy.py SEGMENT

E_trans = sum 1/2 m v^2 and E_rot = sum 1/2 (2/5 m r^2) w^2 [J], with m = density * 4/3 pi r^3
from each particle's species and radius (``f.species``, ``f.radii``: looked up by id, so runs
whose particle set changes are followed too). Arrays are zero-copy views into the segment; a
frame overwritten while it was used (``valid()`` false) is skipped. For a run on another machine,
see remote_energy.py.
"""

import sys

import numpy as np

import particle_shm as p


def main(name):
    seg = p.attach(name)
    st = seg.static
    density = np.array([s.density for s in st.species])
    print(f"{name}: {len(st.ids)} particles, {len(st.species)} species; Ctrl-C to stop")
    print(f"{'step':>10} {'t [s]':>10} {'E_trans [J]':>14} {'E_rot [J]':>14}")
    seq = 0
    while True:
        f = seg.wait_newer(seq, 1.0)
        if f is None:
            st_now = seg.status()
            if st_now.over:
                print(f"solver {st_now.state}{'' if st_now.alive else ' (process gone)'}")
                return
            continue
        seq = f.seq
        if f.velocities is None:
            continue
        r = f.radii.astype(np.float64)
        mass = density[f.species] * 4.0 / 3.0 * np.pi * r**3
        inertia = 0.4 * mass * r**2
        v2 = np.einsum("ij,ij->i", f.velocities, f.velocities, dtype=np.float64)
        e_t = 0.5 * float(mass @ v2)
        e_r = float("nan")
        if f.angular_velocities is not None:
            w2 = np.einsum("ij,ij->i", f.angular_velocities, f.angular_velocities, dtype=np.float64)
            e_r = 0.5 * float(inertia @ w2)
        if f.valid():
            print(f"{f.step:>10} {f.sim_time:>10.4f} {e_t:>14.6e} {e_r:>14.6e}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: live_energy.py SEGMENT")
    try:
        main(sys.argv[1])
    except KeyboardInterrupt:
        pass
    except p.ParticleShmError as e:
        sys.exit(f"live_energy: {e}")
