//! Lacey mixing index of two species on a grid of sample cells.

use std::sync::atomic::Ordering::Relaxed;

use rayon::prelude::*;

use crate::grid::{as_atomic, bounding_box_where, CellLayout, MIN_CHUNK};

/// Most sample cells (the cell edge grows beyond this).
const MAX_SAMPLE_CELLS: usize = 1 << 22;

/// Sample cells for [`lacey_index`].
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct LaceyGrid {
    /// Edge of a cubic sample cell [m] (default: 3 mean particle diameters, about 30 particles
    /// per cell in a dense packing).
    pub cell: f64,
    /// Cells holding fewer particles of the two species are left out (partly filled cells at
    /// the free surface and walls).
    pub min_particles: u32,
}

/// Lacey mixing index M = (s0^2 - s^2) / (s0^2 - sr^2) of species `a` against `b` [-]:
/// 0 fully segregated, 1 randomly mixed.
///
/// Particles of other species are ignored. The bounding box of the particles of `a` and `b` is
/// cut into cubic cells of edge `grid.cell`, starting at its minimum corner; in each cell k with
/// n_k >= `grid.min_particles` particles, x_k is the number fraction of `a`. With p the number
/// fraction of `a` over all particles of `a` and `b`: s0^2 = p (1 - p) (fully segregated),
/// s^2 = (1/K) sum_k (x_k - p)^2 over the K counted cells, sr^2 = p (1 - p) / n_mean with
/// n_mean = (1/K) sum_k n_k (random mixture). `None` when one species is absent, no cell
/// qualifies or n_mean <= 1.
pub fn lacey_index(
    positions: &[[f32; 3]],
    species: &[u32],
    a: u32,
    b: u32,
    grid: LaceyGrid,
) -> Option<f64> {
    let n = positions.len().min(species.len());
    let (positions, species) = (&positions[..n], &species[..n]);
    let ours = |i: usize| species[i] == a || species[i] == b;
    let (lo, hi) = bounding_box_where(positions, &ours)?;
    let layout = CellLayout::new(lo, hi, grid.cell, MAX_SAMPLE_CELLS);
    // Zeroed histograms filled through atomic views: no copy of the positions, no serial
    // initialisation.
    let mut count_a = vec![0u32; layout.cell_count()];
    let mut count_all = vec![0u32; layout.cell_count()];
    {
        let (ca, call) = (as_atomic(&mut count_a), as_atomic(&mut count_all));
        positions
            .par_iter()
            .zip(species)
            .with_min_len(MIN_CHUNK)
            .for_each(|(p, &s)| {
                if s != a && s != b {
                    return;
                }
                if let Some(c) = layout.coords(p) {
                    let c = layout.index(c);
                    call[c].fetch_add(1, Relaxed);
                    if s == a {
                        ca[c].fetch_add(1, Relaxed);
                    }
                }
            });
    }
    let (total_a, total) = count_a
        .par_iter()
        .zip(&count_all)
        .map(|(&x, &y)| (x as u64, y as u64))
        .reduce(|| (0, 0), |p, q| (p.0 + q.0, p.1 + q.1));
    if total == 0 || total_a == 0 || total_a == total {
        return None;
    }
    let p = total_a as f64 / total as f64;
    let (cells, sum_n, sum_sq) = count_a
        .par_iter()
        .zip(&count_all)
        .filter_map(|(&na, &nk)| {
            (nk >= grid.min_particles.max(1)).then(|| {
                let xk = na as f64 / nk as f64;
                (1u64, nk as f64, (xk - p) * (xk - p))
            })
        })
        .reduce(|| (0, 0.0, 0.0), |u, v| (u.0 + v.0, u.1 + v.1, u.2 + v.2));
    if cells == 0 {
        return None;
    }
    let n_mean = sum_n / cells as f64;
    if n_mean <= 1.0 {
        return None;
    }
    let s0 = p * (1.0 - p);
    let sr = s0 / n_mean;
    let s = sum_sq / cells as f64;
    Some((s0 - s) / (s0 - sr))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simple cubic lattice of spacing 1 (L^3 sites).
    fn lattice(l: usize) -> Vec<[f32; 3]> {
        let mut v = Vec::new();
        for z in 0..l {
            for y in 0..l {
                for x in 0..l {
                    v.push([x as f32, y as f32, z as f32]);
                }
            }
        }
        v
    }

    const GRID: LaceyGrid = LaceyGrid {
        cell: 3.0,
        min_particles: 10,
    };

    #[test]
    fn segregated_species_give_zero() {
        // Species 0 below z = 15, species 1 above; cells of 3 align with the interface: every
        // counted cell is pure, s^2 = s0^2, M = 0.
        let pos = lattice(30);
        let sp: Vec<u32> = pos.iter().map(|p| (p[2] >= 15.0) as u32).collect();
        let m = lacey_index(&pos, &sp, 0, 1, GRID).unwrap();
        assert!(m.abs() < 1e-12, "{m}");
    }

    #[test]
    fn random_mixture_gives_about_one() {
        // 40^3 sites, species drawn independently with p = 1/2: E[s^2] = sr^2, M ~ 1 within the
        // sampling noise of ~2,400 cells of 27 particles (a few percent).
        let pos = lattice(40);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let sp: Vec<u32> = pos
            .iter()
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 63) as u32
            })
            .collect();
        let m = lacey_index(&pos, &sp, 0, 1, GRID).unwrap();
        assert!((m - 1.0).abs() < 0.1, "{m}");
    }

    #[test]
    fn other_species_are_ignored_and_one_species_gives_none() {
        let pos = lattice(12);
        let sp: Vec<u32> = pos.iter().map(|p| if p[0] < 6.0 { 0 } else { 2 }).collect();
        assert_eq!(lacey_index(&pos, &sp, 0, 1, GRID), None);
        let sp: Vec<u32> = pos
            .iter()
            .map(|p| {
                if p[2] < 6.0 {
                    0
                } else {
                    1 + (p[0] as u32 % 2) * 2
                }
            })
            .collect();
        // Species 0 below, species 1 and 2 interleaved above: 0 against 1 is segregated.
        let m = lacey_index(&pos, &sp, 0, 1, GRID).unwrap();
        assert!(m < 0.05, "{m}");
    }
}
