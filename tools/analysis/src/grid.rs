//! A uniform grid over particle centres, built by a parallel counting sort: the neighbour
//! search of the coordination number and the sample cells of the Lacey index.
//!
//! Cells are cubes of edge `cell` [m] over the bounding box of the finite positions; particles
//! with a non-finite coordinate are left out. The number of cells is capped (the edge grows
//! when needed), so memory stays proportional to the particle count whatever the spread.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

use rayon::prelude::*;

/// Minimum work per rayon task (elements): below this, splitting costs more than it saves.
pub const MIN_CHUNK: usize = 1 << 14;

/// Marks a particle that is in no cell (non-finite position).
const NO_CELL: u32 = u32::MAX;

/// Bounding box of the finite positions, or `None` when there is none.
pub fn bounding_box(positions: &[[f32; 3]]) -> Option<([f64; 3], [f64; 3])> {
    bounding_box_where(positions, &|_| true)
}

/// Bounding box of the finite positions of the particles `keep` accepts (by index).
pub fn bounding_box_where(
    positions: &[[f32; 3]],
    keep: &(dyn Fn(usize) -> bool + Sync),
) -> Option<([f64; 3], [f64; 3])> {
    let (lo, hi) = positions
        .par_iter()
        .enumerate()
        .with_min_len(MIN_CHUNK)
        .filter(|&(i, p)| keep(i) && p.iter().all(|c| c.is_finite()))
        .map(|(_, p)| p)
        .fold(
            || ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]),
            |(mut lo, mut hi), p| {
                for k in 0..3 {
                    lo[k] = lo[k].min(p[k]);
                    hi[k] = hi[k].max(p[k]);
                }
                (lo, hi)
            },
        )
        .reduce(
            || ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]),
            |(a, b), (c, d)| {
                (
                    [0, 1, 2].map(|k| a[k].min(c[k])),
                    [0, 1, 2].map(|k| b[k].max(d[k])),
                )
            },
        );
    (lo[0] <= hi[0]).then(|| (lo.map(f64::from), hi.map(f64::from)))
}

/// Cell geometry: origin, edge and dimensions.
#[derive(Clone, Copy, Debug)]
pub struct CellLayout {
    pub origin: [f64; 3],
    /// Edge [m] (may be larger than asked, see [`CellLayout::new`]).
    pub cell: f64,
    pub dims: [usize; 3],
}

impl CellLayout {
    /// Cells of edge `cell` (at least) covering `[lo, hi]`, at most `max_cells` of them.
    pub fn new(lo: [f64; 3], hi: [f64; 3], cell: f64, max_cells: usize) -> Self {
        let extent = [0, 1, 2].map(|k| (hi[k] - lo[k]).max(0.0));
        let max_extent = extent.iter().fold(0.0f64, |a, &b| a.max(b));
        // A zero or absurd edge degenerates to one cell per axis.
        let mut cell = if cell.is_finite() && cell > 0.0 {
            cell
        } else {
            max_extent.max(1.0)
        };
        let max_cells = max_cells.max(1);
        let dims_for = |c: f64| extent.map(|e| ((e / c).floor() as usize).saturating_add(1));
        let mut dims = dims_for(cell);
        while dims.iter().fold(1usize, |a, &d| a.saturating_mul(d)) > max_cells {
            let over = dims.iter().map(|&d| d as f64).product::<f64>() / max_cells as f64;
            cell *= over.cbrt().max(1.01);
            dims = dims_for(cell);
        }
        Self {
            origin: lo,
            cell,
            dims,
        }
    }

    pub fn cell_count(&self) -> usize {
        self.dims.iter().product()
    }

    /// Integer cell coordinates of `p`, clamped into the grid (`None` if not finite).
    #[inline]
    pub fn coords(&self, p: &[f32; 3]) -> Option<[usize; 3]> {
        if !(p[0].is_finite() && p[1].is_finite() && p[2].is_finite()) {
            return None;
        }
        let inv = 1.0 / self.cell;
        // `as usize` truncates toward zero and saturates (negative -> 0): floor for the
        // non-negative values that matter, without a libm call.
        let axis =
            |k: usize| (((p[k] as f64 - self.origin[k]) * inv) as usize).min(self.dims[k] - 1);
        Some([axis(0), axis(1), axis(2)])
    }

    #[inline]
    pub fn index(&self, c: [usize; 3]) -> usize {
        c[0] + self.dims[0] * (c[1] + self.dims[1] * c[2])
    }
}

/// `v` seen as atomics (same size, alignment and bit validity: see `AtomicU32`'s docs).
pub(crate) fn as_atomic(v: &mut [u32]) -> &[AtomicU32] {
    // SAFETY: AtomicU32 has the same in-memory representation as u32; the exclusive borrow
    // guarantees no non-atomic access while the atomic view lives.
    unsafe { &*(v as *mut [u32] as *const [AtomicU32]) }
}

/// Exclusive prefix sum with the total appended (`out[k] = sum of v[..k]`), in parallel chunks,
/// into `out` (its allocation reused).
fn exclusive_scan(v: &[u32], out: &mut Vec<u32>) {
    const CHUNK: usize = 1 << 16;
    let sums: Vec<u32> = v.par_chunks(CHUNK).map(|c| c.iter().sum()).collect();
    let mut offsets = Vec::with_capacity(sums.len());
    let mut acc = 0u32;
    for s in &sums {
        offsets.push(acc);
        acc += s;
    }
    out.clear();
    out.resize(v.len() + 1, 0);
    out[..v.len()]
        .par_chunks_mut(CHUNK)
        .zip(v.par_chunks(CHUNK))
        .zip(&offsets)
        .for_each(|((o, c), &base)| {
            let mut a = base;
            for (dst, &x) in o.iter_mut().zip(c) {
                *dst = a;
                a += x;
            }
        });
    out[v.len()] = acc;
}

/// Particles sorted by cell: `items[start[c]..start[c + 1]]` are the particles in cell `c`.
pub struct Grid {
    pub layout: CellLayout,
    pub start: Vec<u32>,
    pub items: Vec<u32>,
    /// Working arrays kept for the next build.
    spare: GridBuffers,
}

/// Buffers of a [`Grid`], kept from frame to frame: a fresh allocation of these arrays (about
/// 15 B per particle) costs more in page faults than filling them.
#[derive(Default)]
pub struct GridBuffers {
    cells: Vec<u32>,
    counts: Vec<u32>,
    start: Vec<u32>,
    items: Vec<u32>,
}

/// `v` resized to `len` zeros, keeping its allocation.
fn zeroed(mut v: Vec<u32>, len: usize) -> Vec<u32> {
    v.clear();
    v.resize(len, 0);
    v
}

impl Grid {
    /// Sorts the particles into cells of edge `cell` (counting sort: cell of each particle,
    /// atomic histogram, prefix sum, atomic scatter; in parallel). Returns `None` when no
    /// position is finite.
    pub fn build(positions: &[[f32; 3]], cell: f64, max_cells: usize) -> Option<Self> {
        Self::build_reusing(positions, cell, max_cells, GridBuffers::default())
    }

    /// [`Grid::build`] into the buffers of an earlier grid ([`Grid::into_buffers`]).
    pub fn build_reusing(
        positions: &[[f32; 3]],
        cell: f64,
        max_cells: usize,
        buf: GridBuffers,
    ) -> Option<Self> {
        let (lo, hi) = bounding_box(positions)?;
        let layout = CellLayout::new(lo, hi, cell, max_cells);
        let mut cells = buf.cells;
        cells.clear();
        positions
            .par_iter()
            .with_min_len(MIN_CHUNK)
            .map(|p| layout.coords(p).map_or(NO_CELL, |c| layout.index(c) as u32))
            .collect_into_vec(&mut cells);
        // Zeroed arrays used as atomics for the histogram and the scatter.
        let mut counts = zeroed(buf.counts, layout.cell_count());
        {
            let counts_a = as_atomic(&mut counts);
            cells.par_iter().with_min_len(MIN_CHUNK).for_each(|&c| {
                if c != NO_CELL {
                    counts_a[c as usize].fetch_add(1, Relaxed);
                }
            });
        }
        let mut start = buf.start;
        exclusive_scan(&counts, &mut start);
        let acc = *start.last().unwrap_or(&0);
        // Reuse the histogram as per-cell write cursors.
        counts
            .par_iter_mut()
            .zip(&start[..start.len() - 1])
            .with_min_len(MIN_CHUNK)
            .for_each(|(c, &s)| *c = s);
        let mut items = zeroed(buf.items, acc as usize);
        {
            let (cursor, slots) = (as_atomic(&mut counts), as_atomic(&mut items));
            cells
                .par_iter()
                .enumerate()
                .with_min_len(MIN_CHUNK)
                .for_each(|(i, &c)| {
                    if c != NO_CELL {
                        let at = cursor[c as usize].fetch_add(1, Relaxed);
                        slots[at as usize].store(i as u32, Relaxed);
                    }
                });
        }
        Some(Self {
            layout,
            start,
            items,
            spare: GridBuffers {
                cells,
                counts,
                ..GridBuffers::default()
            },
        })
    }

    /// The grid's arrays, for the next [`Grid::build_reusing`].
    pub fn into_buffers(self) -> GridBuffers {
        GridBuffers {
            start: self.start,
            items: self.items,
            ..self.spare
        }
    }

    /// Particles placed in the grid (those with finite positions).
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Item range of cells `first..=last` (consecutive indices, e.g. one row of x).
    #[inline]
    pub fn range(&self, first: usize, last: usize) -> std::ops::Range<usize> {
        self.start[first] as usize..self.start[last + 1] as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_finite_particle_lands_in_its_cell_once() {
        let mut pos: Vec<[f32; 3]> = (0..1000)
            .map(|i| [(i % 10) as f32, ((i / 10) % 10) as f32, (i / 100) as f32])
            .collect();
        pos.push([f32::NAN, 0.0, 0.0]);
        let g = Grid::build(&pos, 2.0, 1 << 20).unwrap();
        assert_eq!(g.len(), 1000);
        let mut seen = vec![false; pos.len()];
        for c in 0..g.layout.cell_count() {
            for &i in &g.items[g.range(c, c)] {
                assert!(!seen[i as usize]);
                seen[i as usize] = true;
                let cc = g.layout.coords(&pos[i as usize]).unwrap();
                assert_eq!(g.layout.index(cc), c);
            }
        }
        assert!(!seen[1000]);
    }

    #[test]
    fn cell_count_is_capped() {
        let l = CellLayout::new([0.0; 3], [1000.0; 3], 0.001, 1000);
        assert!(l.cell_count() <= 1000, "{l:?}");
        assert!(l.cell >= 100.0);
    }
}
