//! Uniform grid for neighbour search (Neubauer 2018, sec. 2.5.3; Green, "Particle Simulation
//! using CUDA", 2010): cell hash of each particle, sort by (cell, particle id), cell start/end.
//!
//! Sorting by (cell, id) rather than by (cell, storage slot) makes the neighbour order, and so
//! every floating-point sum, independent of how particle data happens to be laid out in memory:
//! reordering for locality, restarting from a checkpoint or changing the thread count cannot
//! change a single bit of the result.

use crate::vec3::V3;
use rayon::prelude::*;

/// Cell count above which the cell size is enlarged (bounds the cell start/end arrays to 128 MiB).
pub const MAX_CELLS: u64 = 1 << 24;

/// Sentinel for an empty cell in `cell_start`.
pub const EMPTY: u32 = u32::MAX;

/// A uniform grid over an axis-aligned box. Positions outside the box are clamped into the border
/// cells; clamping is monotone, so two touching particles always land in the same or adjacent
/// cells and the search stays exact (only slower for escaped particles).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Grid {
    pub origin: V3,
    /// Cell edge length [m], >= the largest particle diameter.
    pub cell: f64,
    pub dims: [u32; 3],
}

impl Grid {
    /// Grid covering [min, max] plus one cell on every side, with cells of at least `min_cell`.
    pub fn new(min: V3, max: V3, min_cell: f64) -> Grid {
        let mut cell = min_cell;
        loop {
            let dims: [u32; 3] = std::array::from_fn(|a| {
                (((max[a] - min[a]) / cell).ceil().max(1.0) as u32).saturating_add(2)
            });
            let total = dims.iter().map(|&d| d as u64).product::<u64>();
            if total <= MAX_CELLS {
                let origin = std::array::from_fn(|a| min[a] - cell);
                return Grid { origin, cell, dims };
            }
            cell *= 1.25;
        }
    }

    pub fn num_cells(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }

    /// Integer cell coordinates of `p`, clamped to the grid. NaN maps to cell 0.
    #[inline]
    pub fn cell_coords(&self, p: V3) -> [u32; 3] {
        std::array::from_fn(|a| {
            let c = ((p[a] - self.origin[a]) / self.cell).floor();
            c.clamp(0.0, (self.dims[a] - 1) as f64) as u32
        })
    }

    #[inline]
    pub fn cell_index(&self, c: [u32; 3]) -> u32 {
        c[0] + self.dims[0] * (c[1] + self.dims[1] * c[2])
    }

    /// Cell hash of a position.
    #[inline]
    pub fn hash(&self, p: V3) -> u32 {
        self.cell_index(self.cell_coords(p))
    }

    /// The up to 27 cells around (and including) cell coordinates `c`, in a fixed order
    /// (z, then y, then x ascending).
    #[inline]
    pub fn neighbour_cells(&self, c: [u32; 3], out: &mut [u32; 27]) -> usize {
        let mut n = 0;
        for z in c[2].saturating_sub(1)..=(c[2] + 1).min(self.dims[2] - 1) {
            for y in c[1].saturating_sub(1)..=(c[1] + 1).min(self.dims[1] - 1) {
                for x in c[0].saturating_sub(1)..=(c[0] + 1).min(self.dims[0] - 1) {
                    out[n] = self.cell_index([x, y, z]);
                    n += 1;
                }
            }
        }
        n
    }
}

/// Particles sorted by cell: the `prepare` stage's output.
#[derive(Debug, Clone, Default)]
pub struct CellList {
    /// Storage slots in (cell, id) order.
    pub sorted: Vec<u32>,
    /// Cell of each entry of `sorted`.
    pub sorted_cell: Vec<u32>,
    /// Cell of each storage slot.
    pub cell_of: Vec<u32>,
    /// First entry of `sorted` in each cell, [`EMPTY`] if none.
    pub cell_start: Vec<u32>,
    /// One past the last entry of `sorted` in each cell.
    pub cell_end: Vec<u32>,
    keys: Vec<(u64, u32)>,
}

impl CellList {
    /// Hash, sort and cell start/end for particles at `pos` with ids `ids` (storage order).
    pub fn build(&mut self, grid: &Grid, pos: &[V3], ids: &[u32]) {
        let n = pos.len();
        if self.cell_start.len() != grid.num_cells() {
            self.cell_start = vec![EMPTY; grid.num_cells()];
            self.cell_end = vec![0; grid.num_cells()];
            self.sorted_cell.clear();
        }
        // Clear only the cells occupied last time: O(N), not O(cells).
        for &c in &self.sorted_cell {
            self.cell_start[c as usize] = EMPTY;
        }
        pos.par_iter()
            .map(|p| grid.hash(*p))
            .collect_into_vec(&mut self.cell_of);
        self.keys.clear();
        self.keys.extend(
            self.cell_of
                .iter()
                .zip(ids)
                .enumerate()
                .map(|(slot, (&c, &id))| (((c as u64) << 32) | id as u64, slot as u32)),
        );
        // Keys are unique (ids are), so an unstable sort is deterministic.
        self.keys.par_sort_unstable_by_key(|k| k.0);
        self.sorted.clear();
        self.sorted.extend(self.keys.iter().map(|k| k.1));
        self.sorted_cell.clear();
        self.sorted_cell
            .extend(self.keys.iter().map(|k| (k.0 >> 32) as u32));
        for k in 0..n {
            let c = self.sorted_cell[k] as usize;
            if k == 0 || self.sorted_cell[k - 1] as usize != c {
                self.cell_start[c] = k as u32;
            }
            if k + 1 == n || self.sorted_cell[k + 1] as usize != c {
                self.cell_end[c] = (k + 1) as u32;
            }
        }
    }

    /// Range of `sorted` holding the particles of `cell`.
    #[inline]
    pub fn cell_range(&self, cell: u32) -> std::ops::Range<usize> {
        let s = self.cell_start[cell as usize];
        if s == EMPTY {
            0..0
        } else {
            s as usize..self.cell_end[cell as usize] as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_and_ranges() {
        let g = Grid::new([0.0; 3], [1.0; 3], 0.25);
        let pos = vec![
            [0.9, 0.9, 0.9],
            [0.1, 0.1, 0.1],
            [0.12, 0.1, 0.1],
            [5.0, -3.0, 0.5],
        ];
        let ids = vec![3, 2, 1, 0];
        let mut cl = CellList::default();
        cl.build(&g, &pos, &ids);
        let c = g.hash([0.1, 0.1, 0.1]);
        let r = cl.cell_range(c);
        assert_eq!(r.len(), 2);
        // (cell, id) order: id 1 (slot 2) before id 2 (slot 1)
        assert_eq!(&cl.sorted[r], &[2, 1]);
        // rebuild after moving: old cells are cleared
        cl.build(&g, &[[0.5; 3]; 4], &ids);
        assert_eq!(cl.cell_range(c).len(), 0);
        assert_eq!(cl.cell_range(g.hash([0.5; 3])).len(), 4);
    }

    #[test]
    fn clamping_keeps_neighbours_adjacent() {
        let g = Grid::new([0.0; 3], [1.0; 3], 0.3);
        let a = g.cell_coords([-10.0, 0.5, 0.5]);
        let b = g.cell_coords([-10.2, 0.5, 0.5]);
        assert_eq!(a, b);
    }
}
