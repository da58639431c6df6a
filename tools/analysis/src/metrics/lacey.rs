//! Lacey mixing index of two species on a grid of sample cells.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rayon::prelude::*;

use crate::grid::{bounding_box_of_species, CellLayout, NO_CELL};
use crate::par::{map_chunks, CHUNK};
use crate::region::Aabb;

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
    /// Only particles inside this box count, and the cells start at its minimum corner
    /// (default: the bounding box of the two species' particles).
    pub region: Option<Aabb>,
}

/// Sets the cell of every position outside `region` to `NO_CELL`.
fn drop_outside(region: Option<&Aabb>, positions: &[[f32; 3]], cells: &mut [u32]) {
    let Some(r) = region else {
        return;
    };
    for (p, c) in positions.iter().zip(cells) {
        if (0..3).any(|k| !(p[k] as f64 >= r.min[k] && p[k] as f64 <= r.max[k])) {
            *c = NO_CELL;
        }
    }
}

/// Lacey mixing index M = (s0^2 - s^2) / (s0^2 - sr^2) of species `a` against `b` [-]:
/// 0 fully segregated, 1 randomly mixed.
///
/// Particles of other species are ignored, and with `grid.region` those outside it. The
/// region, else the bounding box of the particles of `a` and `b`, is cut into cubic cells of
/// edge `grid.cell`, starting at its minimum corner; in each cell k with
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
    lacey_index_with(positions, species, a, b, grid, &mut LaceyScratch::default())
}

/// Adds each particle of species `a` or `b` to the counter of its cell (see
/// [`LaceyScratch::counts`]); runs of one cell and species are added at once.
#[inline(never)]
fn add_counts_private(cells: &[u32], species: &[u32], a: u32, b: u32, counts: &mut [u64]) {
    for (&c, &s) in cells.iter().zip(species) {
        let add = (s == a) as u64 * (1 | 1 << 32) + (s == b) as u64;
        if c != NO_CELL {
            counts[c as usize] += add;
        }
    }
}

/// [`add_counts_private`] into counters shared between threads.
#[inline(never)]
fn add_counts(cells: &[u32], species: &[u32], a: u32, b: u32, counts: &[AtomicU64]) {
    let (mut current, mut run) = (NO_CELL, 0u64);
    for (&c, &s) in cells.iter().zip(species) {
        let add = if s == a {
            1 | 1 << 32
        } else if s == b {
            1
        } else {
            continue;
        };
        if c == current {
            run += add;
        } else {
            if current != NO_CELL {
                counts[current as usize].fetch_add(run, Relaxed);
            }
            (current, run) = (c, add);
        }
    }
    if current != NO_CELL {
        counts[current as usize].fetch_add(run, Relaxed);
    }
}

/// Per-cell counters of [`lacey_index_with`], kept from frame to frame.
#[derive(Default)]
pub struct LaceyScratch {
    /// Per cell: particles of both species in the low 32 bits, of species `a` in the high 32
    /// (one addition per particle).
    counts: Vec<AtomicU64>,
    /// One private copy of `counts` per thread when they are small enough (see
    /// [`lacey_index_with`]).
    private: Vec<Vec<u64>>,
}

/// [`lacey_index`] reusing `scratch`'s counters.
pub fn lacey_index_with(
    positions: &[[f32; 3]],
    species: &[u32],
    a: u32,
    b: u32,
    grid: LaceyGrid,
    scratch: &mut LaceyScratch,
) -> Option<f64> {
    let n = positions.len().min(species.len());
    let (positions, species) = (&positions[..n], &species[..n]);
    let (lo, hi) = match &grid.region {
        Some(r) => (r.min, r.max),
        None => bounding_box_of_species(positions, species, a, b)?,
    };
    let layout = CellLayout::new(lo, hi, grid.cell, MAX_SAMPLE_CELLS);
    let cell_count = layout.cell_count();
    let counts = &mut scratch.counts;
    counts.resize_with(cell_count, AtomicU64::default);
    counts.truncate(cell_count);
    let parts = rayon::current_num_threads();
    if parts > 1 && parts * cell_count <= n {
        // Each thread counts its share of the particles into its own copy, and the copies
        // are summed (at most 8 B per particle): plain additions instead of atomic ones,
        // which cost 2x in a shuffled frame, where threads hit the same cells at random.
        let share = n.div_ceil(parts);
        let used = n.div_ceil(share);
        let private = &mut scratch.private;
        private.resize_with(used, Vec::new);
        positions
            .par_chunks(share)
            .zip(species.par_chunks(share))
            .zip(private.par_iter_mut())
            .for_each(|((positions, species), own)| {
                own.clear();
                own.resize(cell_count, 0);
                let mut cells = vec![0u32; CHUNK];
                for (p, s) in positions.chunks(CHUNK).zip(species.chunks(CHUNK)) {
                    let cells = &mut cells[..p.len()];
                    layout.cells_of(p, cells);
                    drop_outside(grid.region.as_ref(), p, cells);
                    add_counts_private(cells, s, a, b, own);
                }
            });
        // Only the copies filled this frame (fewer than `parts` for a small frame).
        let private = &scratch.private[..used];
        counts
            .par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(k, out)| {
                for (j, c) in out.iter_mut().enumerate() {
                    *c.get_mut() = private.iter().map(|own| own[k * CHUNK + j]).sum();
                }
            });
    } else {
        counts
            .par_iter_mut()
            .with_min_len(CHUNK)
            .for_each(|c| *c.get_mut() = 0);
        let counts = &counts[..];
        positions
            .par_chunks(CHUNK)
            .zip(species.par_chunks(CHUNK))
            .for_each_init(Vec::new, |cells, (positions, species)| {
                cells.resize(positions.len(), 0);
                layout.cells_of(positions, cells);
                drop_outside(grid.region.as_ref(), positions, cells);
                add_counts(cells, species, a, b, counts);
            });
    }
    let counts = &scratch.counts[..];
    let split = |c: &AtomicU64| {
        let v = c.load(Relaxed);
        (v >> 32, v & 0xffff_ffff)
    };
    let (total_a, total) = map_chunks(counts.len(), |r| {
        counts[r]
            .iter()
            .map(split)
            .fold((0, 0), |(x, y), (na, nk)| (x + na, y + nk))
    })
    .into_iter()
    .fold((0u64, 0u64), |(x, y), (u, v)| (x + u, y + v));
    if total == 0 || total_a == 0 || total_a == total {
        return None;
    }
    let p = total_a as f64 / total as f64;
    let min_particles = grid.min_particles.max(1) as u64;
    let (cells, sum_n, sum_sq) = map_chunks(counts.len(), |r| {
        let (mut cells, mut sum_n, mut sum_sq) = (0u64, 0.0f64, 0.0f64);
        for (na, nk) in counts[r].iter().map(split) {
            if nk >= min_particles {
                let xk = na as f64 / nk as f64;
                cells += 1;
                sum_n += nk as f64;
                sum_sq += (xk - p) * (xk - p);
            }
        }
        (cells, sum_n, sum_sq)
    })
    .into_iter()
    .fold((0, 0.0, 0.0), |u, v| (u.0 + v.0, u.1 + v.1, u.2 + v.2));
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
        region: None,
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

    /// A region counts only the particles inside it, with cells from its corner: the index
    /// equals the index of those particles alone, and a region holding one species has none.
    #[test]
    fn a_region_counts_only_the_particles_inside() {
        // Mixed (alternating in x) below z = 15, segregated (species 0 only) above.
        let pos = lattice(30);
        let sp: Vec<u32> = pos
            .iter()
            .map(|p| if p[2] < 15.0 { p[0] as u32 % 2 } else { 0 })
            .collect();
        let lower = Aabb::new([0.0; 3], [29.0, 29.0, 14.0]).unwrap();
        let with = |region| LaceyGrid { region, ..GRID };
        let m = lacey_index(&pos, &sp, 0, 1, with(Some(lower))).unwrap();
        let (inside, inside_sp): (Vec<_>, Vec<_>) = pos
            .iter()
            .zip(&sp)
            .filter(|(p, _)| p[2] <= 14.0)
            .map(|(p, s)| (*p, *s))
            .unzip();
        let alone = lacey_index(&inside, &inside_sp, 0, 1, with(Some(lower))).unwrap();
        assert_eq!(m, alone);
        assert!(m > 0.9, "alternating species are well mixed: {m}");
        // The whole box mixes in the segregated top: a lower index.
        let whole = lacey_index(&pos, &sp, 0, 1, GRID).unwrap();
        assert!(whole < m - 0.1, "{whole} vs {m}");
        let upper = Aabb::new([0.0, 0.0, 15.0], [29.0, 29.0, 29.0]).unwrap();
        assert_eq!(lacey_index(&pos, &sp, 0, 1, with(Some(upper))), None);
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
    fn private_and_shared_counters_agree() {
        // One thread counts into the shared atomic counters, several into private copies.
        let pos = lattice(40);
        let sp: Vec<u32> = (0..pos.len() as u32).map(|i| (i * 7919 % 13) % 3).collect();
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| lacey_index(&pos, &sp, 0, 1, GRID))
        };
        let shared = run(1).unwrap();
        assert!(shared > 0.5, "{shared}");
        assert_eq!(run(4), Some(shared));
    }

    #[test]
    fn private_counters_of_a_frame_smaller_than_the_thread_count() {
        // 9 particles on 4 threads: 3 shares of 3; the fourth copy must not be read. Run twice
        // so that a stale copy from the first frame would show.
        let pos: Vec<[f32; 3]> = (0..9).map(|i| [i as f32, 0.0, 0.0]).collect();
        let sp: Vec<u32> = (0..9).map(|i| (i % 2) as u32).collect();
        let grid = LaceyGrid {
            cell: 4.5,
            min_particles: 1,
            region: None,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let mut scratch = LaceyScratch::default();
        let first = pool.install(|| lacey_index_with(&pos, &sp, 0, 1, grid, &mut scratch));
        let again = pool.install(|| lacey_index_with(&pos, &sp, 0, 1, grid, &mut scratch));
        assert!(first.is_some());
        assert_eq!(first, again);
        // One thread: the shared atomic counters.
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert_eq!(first, one.install(|| lacey_index(&pos, &sp, 0, 1, grid)));
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
