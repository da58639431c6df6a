#!/usr/bin/env python3
"""Kinetic energy of a run served by a forwarder, frame by frame, from any machine.

    pip install tools/python
    python3 examples/remote_energy.py gpu-server:7788 --token-file token.txt --plot energy.png

(or PARTICLE_SHM_TOKEN=... in the environment; a forwarder on loopback needs no token). In a
notebook::

    import particle_shm as p
    from remote_energy import follow            # with examples/ on sys.path, or %run this file
    seg = p.connect("gpu-server:7788", token="...", fields=("velocities", "angular_velocities"))
    rows = [(f.sim_time, e_t, e_r) for f, e_t, e_r in follow(seg, frames=100)]

E_trans = sum 1/2 m v^2 and E_rot = sum 1/2 (2/5 m r^2) w^2 [J], with m = density * 4/3 pi r^3
from each particle's species and radius (``f.species`` and ``f.radii`` are looked up by id, so
runs whose particle set changes are followed too). Only velocities and angular velocities
travel: 24 bytes a particle and frame. numpy only; the plot needs matplotlib and is skipped,
with a note, without it.
"""

import argparse
import sys

import numpy as np

import particle_shm as p


def energies(f):
    """(E_trans, E_rot) [J] of frame ``f`` (E_rot is NaN without angular velocities)."""
    density = np.array([s.density for s in f.static.species])
    r = f.radii.astype(np.float64)
    mass = density[f.species] * 4.0 / 3.0 * np.pi * r**3
    v2 = np.einsum("ij,ij->i", f.velocities, f.velocities, dtype=np.float64)
    e_t = 0.5 * float(mass @ v2)
    e_r = float("nan")
    if f.angular_velocities is not None:
        w2 = np.einsum("ij,ij->i", f.angular_velocities, f.angular_velocities, dtype=np.float64)
        e_r = 0.5 * float((0.4 * mass * r**2) @ w2)
    return e_t, e_r


def follow(seg, frames=None, timeout=1.0):
    """Yields ``(frame, E_trans, E_rot)`` for the newest frame and every newer one this client
    receives, until ``frames`` were yielded or the run is over. ``seg`` is a ``connect()``ed
    forwarder (or an ``attach()``ed segment) carrying velocities."""
    seq, n = 0, 0
    while frames is None or n < frames:
        f = seg.wait_newer(seq, timeout)
        if f is None:
            if seg.status().over:
                return
            continue
        seq = f.seq
        if f.velocities is None:
            raise p.InvalidArgument("the frames carry no velocities: connect with fields=('velocities', ...)")
        e_t, e_r = energies(f)
        yield f, e_t, e_r
        n += 1


def plot(rows, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(matplotlib is not installed: no plot written to {path})", file=sys.stderr)
        return
    t, e_t, e_r = np.array(rows).T
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(t, e_t, label="translational")
    ax.plot(t, e_r, label="rotational")
    ax.set_xlabel("simulated time [s]")
    ax.set_ylabel("kinetic energy [J]")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    print(f"plot written to {path}", file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("address", help="the forwarder, HOST:PORT")
    ap.add_argument("--token", help="the forwarder's token (default: $PARTICLE_SHM_TOKEN)")
    ap.add_argument("--token-file", help="a file holding the token")
    ap.add_argument("--frames", type=int, help="stop after this many frames")
    ap.add_argument("--rate", type=float, default=10.0, help="most frames a second (default 10; 0: all)")
    ap.add_argument("--plot", metavar="PNG", help="plot E(t) into this file at the end (needs matplotlib)")
    args = ap.parse_args(argv)
    token = args.token
    if args.token_file:
        with open(args.token_file) as fh:
            token = fh.read().strip()
    seg = p.connect(
        args.address, token=token, fields=("velocities", "angular_velocities"), max_rate_hz=args.rate
    )
    print(f"{seg.name} via {args.address}: {len(seg.static.species)} species; Ctrl-C to stop")
    print(f"{'step':>10} {'t [s]':>10} {'particles':>10} {'E_trans [J]':>14} {'E_rot [J]':>14}")
    rows = []
    try:
        for f, e_t, e_r in follow(seg, args.frames):
            rows.append((f.sim_time, e_t, e_r))
            print(f"{f.step:>10} {f.sim_time:>10.4f} {f.particle_count:>10} {e_t:>14.8e} {e_r:>14.8e}", flush=True)
        st = seg.status()
        if st.over:
            print(f"solver {st.state}{'' if st.alive else ' (process gone)'}")
    except KeyboardInterrupt:
        pass
    finally:
        seg.close()
        if args.plot and rows:
            plot(rows, args.plot)


if __name__ == "__main__":
    try:
        main()
    except p.ParticleShmError as e:
        sys.exit(f"remote_energy: {e}")
