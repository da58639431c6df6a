#!/usr/bin/env python3
"""Candidates of the SPH cell walk per particle, in units of (2h)^3 (the support's sphere is
4.19), by Monte Carlo over a particle's position in its cell: the cells of 2h / m within m
cells of its own, all of them (session 15) or only those whose box lies closer than 2h
(session 16, Grid::neighbour_rows_near / sph_sum_list). `python3 bench/gpu/sph_candidates.py`
prints the table of bench/results/sph_gpu.md."""
import math
import random


def candidates(m, trimmed, samples=20000, seed=1):
    rng = random.Random(seed)
    c = 1.0 / m  # cell edge, support 2h = 1
    total = 0.0
    for _ in range(samples):
        x, y, z = (rng.random() * c for _ in range(3))
        for dy in range(-m, m + 1):
            for dz in range(-m, m + 1):
                if not trimmed:
                    total += (2 * m + 1) * c ** 3
                    continue
                gap = lambda p, lo, hi: max(lo - p, 0.0, p - hi)
                g2 = gap(y, dy * c, (dy + 1) * c) ** 2 + gap(z, dz * c, (dz + 1) * c) ** 2
                if g2 >= 1.0:
                    continue
                e = math.sqrt(1.0 - g2)
                cells = math.floor((x + e) / c) - math.floor((x - e) / c) + 1
                total += cells * c ** 3
    return total / samples


if __name__ == "__main__":
    print("m | all cells | trimmed")
    for m in (1, 2, 3, 4):
        print(f"{m} | {candidates(m, False, 10):.1f} | {candidates(m, True, 4000):.1f}")
