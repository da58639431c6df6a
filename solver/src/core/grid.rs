//! Uniform grid for neighbour search (Neubauer 2018, sec. 2.5.3; Green, "Particle Simulation
//! using CUDA", 2010): cell hash of each particle, sort by (cell, particle id), cell start/end.
//!
//! There is one global grid per run, set once from the whole domain and shared by every worker
//! and backend (one cell cap, [`MAX_CELLS`]). Its linear cell index runs slowest along the
//! [`Grid::slab_axis`], the axis a decomposition cuts, so that a worker's slab plus ghost layers
//! is one contiguous range of cells: a [`CellList`] covers such a window only.
//!
//! Sorting by (cell, id) rather than by (cell, storage slot) makes the neighbour order, and so
//! every floating-point sum, independent of how particle data happens to be laid out in memory:
//! reordering for locality, restarting from a checkpoint or changing the thread count cannot
//! change a single bit of the result. The SPH lists ([`CellList::by_x`]) sort each cell by
//! (x, id) instead, which is as independent of the layout and puts a row of cells along x in x
//! order.

use crate::core::vec3::V3;
use rayon::prelude::*;

/// Cell count above which the cell size is enlarged, on every backend (the neighbour order, and
/// so every bit of a result, depends on the cell size). 2^28 keeps about one particle per cell
/// at 100 M particles; the CPU's cell start/end arrays are zero-initialised lazily by the OS, so a
/// sparse domain only pays for the pages its particles touch.
pub const MAX_CELLS: u64 = 1 << 28;

/// The two axes other than `slab_axis`, ascending (fastest first).
fn fast_axes(slab_axis: usize) -> (usize, usize) {
    match slab_axis {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    }
}

/// The distance along one axis from a point at offset `l` from the lower corner of its own cell
/// to the cells `d` cells away, of edge `cell`: 0 for its own cell (the twin of `cell_gap` in
/// sph.cu). A point outside the grid, counted in an edge cell, keeps its true offset, so the gap
/// is still a lower bound on the distance to any point of the other cell.
#[inline]
pub fn cell_gap(l: f64, d: i64, cell: f64) -> f64 {
    let g = if d > 0 {
        d as f64 * cell - l
    } else if d < 0 {
        l - (d + 1) as f64 * cell
    } else {
        0.0
    };
    g.max(0.0)
}

/// The largest reach [`Grid::neighbour_rows_near`] takes (cells per side of a particle's own).
pub const MAX_REACH: u32 = 8;

/// A uniform grid over an axis-aligned box. Positions outside the box are clamped into the border
/// cells; clamping is monotone, so two touching particles always land in the same or adjacent
/// cells and the search stays exact (only slower for escaped particles).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Grid {
    pub origin: V3,
    /// Cell edge length [m], >= the largest particle diameter.
    pub cell: f64,
    pub dims: [u32; 3],
    /// The slowest-varying axis of the linear cell index (0 = x, 1 = y, 2 = z): the axis a
    /// decomposition cuts along. It changes where cells are stored, never the order in which a
    /// particle visits its neighbours ([`Grid::neighbour_cells`] goes by coordinates).
    pub slab_axis: usize,
    /// Linear index step per unit of each cell coordinate (from `dims` and `slab_axis`).
    stride: [u32; 3],
}

impl Grid {
    /// Grid covering [min, max] plus one cell on every side, with cells of at least `min_cell`
    /// (enlarged by 1.25 until at most [`MAX_CELLS`] cells), linearised slowest along
    /// `slab_axis`.
    pub fn new(min: V3, max: V3, min_cell: f64, slab_axis: usize) -> Grid {
        assert!(slab_axis < 3, "slab axis {slab_axis} is not 0, 1 or 2");
        let mut cell = min_cell;
        loop {
            let dims: [u32; 3] = std::array::from_fn(|a| {
                (((max[a] - min[a]) / cell).ceil().max(1.0) as u32).saturating_add(2)
            });
            let total = dims.iter().map(|&d| d as u64).product::<u64>();
            if total <= MAX_CELLS {
                let origin = std::array::from_fn(|a| min[a] - cell);
                let (a, b) = fast_axes(slab_axis);
                let mut stride = [0; 3];
                stride[a] = 1;
                stride[b] = dims[a];
                stride[slab_axis] = dims[a] * dims[b];
                return Grid {
                    origin,
                    cell,
                    dims,
                    slab_axis,
                    stride,
                };
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
        // The saturating cast truncates, which is the floor where it matters (a negative
        // quotient lands on 0 either way), sends NaN to 0, and is no call into libm (`floor` is
        // not an instruction of baseline x86-64).
        std::array::from_fn(|a| {
            (((p[a] - self.origin[a]) / self.cell) as u32).min(self.dims[a] - 1)
        })
    }

    #[inline]
    pub fn cell_index(&self, c: [u32; 3]) -> u32 {
        c[0] * self.stride[0] + c[1] * self.stride[1] + c[2] * self.stride[2]
    }

    /// Cells in one layer across the slab axis.
    pub fn layer_cells(&self) -> u32 {
        self.stride[self.slab_axis]
    }

    /// The contiguous cell range of the slab-axis layers `layers`.
    pub fn layer_range(&self, layers: std::ops::Range<u32>) -> std::ops::Range<u32> {
        layers.start * self.layer_cells()..layers.end * self.layer_cells()
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

    /// The cells within `reach` cells of cell coordinates `c` along every axis (the
    /// (2 reach + 1)^3 cells around it, fewer at the border), in the order of
    /// [`Grid::neighbour_cells`] (z, then y, then x ascending), into `out` (cleared first). The
    /// reference of the tests of [`Grid::neighbour_rows_near`], which the SPH walks use.
    #[cfg(test)]
    pub fn neighbour_cells_within(&self, c: [u32; 3], reach: u32, out: &mut Vec<u32>) {
        out.clear();
        let span = |a: usize| c[a].saturating_sub(reach)..=(c[a] + reach).min(self.dims[a] - 1);
        for z in span(2) {
            for y in span(1) {
                for x in span(0) {
                    out.push(self.cell_index([x, y, z]));
                }
            }
        }
    }

    /// The cells within `reach` cells of `p`'s cell along every axis whose box lies closer than
    /// `radius` to `p`, in the order of [`Grid::neighbour_cells`] (z, then y, then x
    /// ascending), as rows along x: `(first, last)` cell indices,
    /// the cells `first..=last` consecutive in the linear index (x must be the fastest axis: a
    /// slab axis of y or z). The twin of the row walk of `sph_sum_list` in sph.cu. A particle
    /// outside the grid, counted in an edge cell, keeps its true offset from that cell, so a gap
    /// is still a lower bound on the distance to any particle of the cell.
    pub fn neighbour_rows_near(&self, p: V3, reach: u32, radius: f64, out: &mut Vec<(u32, u32)>) {
        debug_assert_eq!(self.stride[0], 1, "rows along x need x fastest");
        assert!(reach <= MAX_REACH, "reach {reach} above {MAX_REACH}");
        let c = self.cell_coords(p);
        // Per axis: the squared gaps from p to the cells beside its own, nearest first, below
        // (`lower`) and above (`upper`); infinite past `reach` or the grid's edge (p's offset
        // from the lower corner of its own cell is `l`; a particle outside the grid keeps its
        // true offset from its edge cell).
        let mut lower = [[f64::INFINITY; MAX_REACH as usize]; 3];
        let mut upper = [[f64::INFINITY; MAX_REACH as usize]; 3];
        let below: [u32; 3] = std::array::from_fn(|a| c[a].min(reach));
        let above: [u32; 3] = std::array::from_fn(|a| (self.dims[a] - 1 - c[a]).min(reach));
        for a in 0..3 {
            let l = p[a] - (self.origin[a] + c[a] as f64 * self.cell);
            for (d, g) in lower[a].iter_mut().enumerate().take(below[a] as usize) {
                *g = cell_gap(l, -(d as i64 + 1), self.cell).powi(2);
            }
            for (d, g) in upper[a].iter_mut().enumerate().take(above[a] as usize) {
                *g = cell_gap(l, d as i64 + 1, self.cell).powi(2);
            }
        }
        let gaps = RowGaps {
            c,
            below,
            above,
            r2: radius * radius,
            lower,
            upper,
        };
        // The SPH grids' reach is at most 4 (`cells_per_support`): counts over 4 cells a side.
        if reach <= 4 {
            self.push_rows::<4>(&gaps, out);
        } else {
            self.push_rows::<{ MAX_REACH as usize }>(&gaps, out);
        }
    }

    /// The rows of [`Grid::neighbour_rows_near`] from the gaps around a particle, counting `N`
    /// cells on each side of its own along x. A gap grows away from the own cell (`cell_gap` is
    /// monotone in |d|), so a row's cells closer than the radius are its own and a run on each
    /// side: counted over the fixed `N` cells, which unroll without a branch per cell (a walk
    /// outwards that stopped at the first far cell took a third of the CPU SPH step in its
    /// mispredicted exits; counts over the window's varying length about as much, fixed counts
    /// 3 % less; most of that third was boundary particles far from fluid, which now skip the
    /// search, `SphSim::mark_near_fluid`).
    fn push_rows<const N: usize>(&self, gaps: &RowGaps, out: &mut Vec<(u32, u32)>) {
        out.clear();
        let RowGaps {
            c,
            below,
            above,
            r2,
            lower,
            upper,
        } = gaps;
        let count = |side: &[f64; MAX_REACH as usize], g: f64| -> u32 {
            side[..N].iter().map(|&gx| u32::from(gx + g < *r2)).sum()
        };
        // Rows in z, then y, ascending: the cells below nearest-last, the own, those above.
        let window = |a: usize| {
            let (n, m) = (below[a] as usize, above[a] as usize);
            (c[a] - below[a]..).zip(
                lower[a][..n]
                    .iter()
                    .rev()
                    .chain(std::iter::once(&0.0))
                    .chain(&upper[a][..m]),
            )
        };
        for (z, &gz2) in window(2) {
            if gz2 >= *r2 {
                continue;
            }
            for (y, &gy2) in window(1) {
                let g = gy2 + gz2;
                if g >= *r2 {
                    continue;
                }
                let own = self.cell_index([c[0], y, z]);
                out.push((own - count(&lower[0], g), own + count(&upper[0], g)));
            }
        }
    }

    /// Marks in `near` (resized to the grid's cells) the cells with an `occupied` cell within
    /// `reach` cells along every axis: those whose window of [`Grid::neighbour_rows_near`]
    /// holds an occupied cell, so that a particle in an unmarked cell has no neighbour there.
    /// One pass per axis over each line of cells; `tmp` is scratch space.
    pub fn mark_within_reach(
        &self,
        occupied: impl Fn(usize) -> bool,
        reach: u32,
        near: &mut Vec<bool>,
        tmp: &mut Vec<bool>,
    ) {
        let total = self.num_cells();
        near.clear();
        near.extend((0..total).map(occupied));
        tmp.clear();
        tmp.resize(total, false);
        let r = reach as usize;
        for a in 0..3 {
            let (n, s) = (self.dims[a] as usize, self.stride[a] as usize);
            // A cell is marked when the nearest marked cell before or after it along the line
            // lies within `r`.
            let lines = (0..total / (s * n)).flat_map(|hi| (0..s).map(move |lo| hi * s * n + lo));
            for base in lines {
                let mut last = None;
                for i in 0..n {
                    if near[base + i * s] {
                        last = Some(i);
                    }
                    tmp[base + i * s] = last.is_some_and(|l| i - l <= r);
                }
                let mut next = None;
                for i in (0..n).rev() {
                    if near[base + i * s] {
                        next = Some(i);
                    }
                    if next.is_some_and(|m| m - i <= r) {
                        tmp[base + i * s] = true;
                    }
                }
            }
            std::mem::swap(near, tmp);
        }
    }
}

/// The squared gaps from a particle in cell `c` to the cells beside it along each axis, nearest
/// first, below and above (infinite where no cell is walked), how many cells are walked on each
/// side, and the squared radius: [`Grid::neighbour_rows_near`]'s.
struct RowGaps {
    c: [u32; 3],
    below: [u32; 3],
    above: [u32; 3],
    r2: f64,
    lower: [[f64; MAX_REACH as usize]; 3],
    upper: [[f64; MAX_REACH as usize]; 3],
}

/// Particles sorted by cell over a window of the grid (a contiguous cell range): the `prepare`
/// stage's output.
#[derive(Debug, Clone, Default)]
pub struct CellList {
    /// Storage slots in (cell, id) order ((cell, x, id) with [`CellList::by_x`]).
    pub sorted: Vec<u32>,
    /// Cell (global index) of each entry of `sorted`.
    pub sorted_cell: Vec<u32>,
    /// Cell of each storage slot.
    pub cell_of: Vec<u32>,
    /// First global cell of the window.
    first: u32,
    /// Per window cell: 1 + the first entry of `sorted` in it, 0 if none (0 so that the array
    /// starts as untouched zero pages).
    cell_start: Vec<u32>,
    /// Per window cell: one past the last entry of `sorted` in it.
    cell_end: Vec<u32>,
    keys: Vec<(u64, u32)>,
    /// Within a cell by x, then id ([`CellList::by_x`]): the SPH lists, whose walks cut each row
    /// of cells to the support's chord along x.
    by_x: bool,
    keys_x: Vec<(u128, u32)>,
}

/// The key of `x` whose unsigned order is the order of the f64 values (-0.0 before +0.0; NaN
/// after +inf or before -inf by its sign): the twin of `sph_x_key` in sph.cu.
#[inline]
pub fn x_order_key(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

impl CellList {
    /// An empty list that orders each cell's particles by x, then by id (the default orders
    /// them by id): a row of cells along x is then in x order, so an SPH walk can pass over the
    /// particles outside the support's chord and stop at the first past it.
    pub fn by_x() -> CellList {
        CellList {
            by_x: true,
            ..CellList::default()
        }
    }

    /// Hash, sort and cell start/end for particles at `pos` with ids `ids` (storage order) over
    /// the whole grid.
    pub fn build(&mut self, grid: &Grid, pos: &[V3], ids: &[u32]) {
        self.build_window(grid, 0..grid.num_cells() as u32, pos, ids)
    }

    /// As [`CellList::build`] over the global cells `window`, which must hold every particle's
    /// cell.
    pub fn build_window(
        &mut self,
        grid: &Grid,
        window: std::ops::Range<u32>,
        pos: &[V3],
        ids: &[u32],
    ) {
        let n = pos.len();
        let len = window.len();
        if self.cell_start.len() != len || self.first != window.start {
            self.cell_start = vec![0; len];
            self.cell_end = vec![0; len];
            self.sorted_cell.clear();
            self.first = window.start;
        }
        // Clear only the cells occupied last time: O(N), not O(cells).
        for &c in &self.sorted_cell {
            self.cell_start[(c - self.first) as usize] = 0;
        }
        pos.par_iter()
            .map(|p| grid.hash(*p))
            .collect_into_vec(&mut self.cell_of);
        self.sorted.clear();
        self.sorted_cell.clear();
        // Keys are unique (ids are), so an unstable sort is deterministic.
        if self.by_x {
            self.keys_x.clear();
            self.keys_x
                .extend(self.cell_of.iter().zip(ids).zip(pos).enumerate().map(
                    |(slot, ((&c, &id), p))| {
                        let key =
                            ((c as u128) << 96) | ((x_order_key(p[0]) as u128) << 32) | id as u128;
                        (key, slot as u32)
                    },
                ));
            self.keys_x.par_sort_unstable_by_key(|k| k.0);
            self.sorted.extend(self.keys_x.iter().map(|k| k.1));
            self.sorted_cell
                .extend(self.keys_x.iter().map(|k| (k.0 >> 96) as u32));
        } else {
            self.keys.clear();
            self.keys.extend(
                self.cell_of
                    .iter()
                    .zip(ids)
                    .enumerate()
                    .map(|(slot, (&c, &id))| (((c as u64) << 32) | id as u64, slot as u32)),
            );
            self.keys.par_sort_unstable_by_key(|k| k.0);
            self.sorted.extend(self.keys.iter().map(|k| k.1));
            self.sorted_cell
                .extend(self.keys.iter().map(|k| (k.0 >> 32) as u32));
        }
        for k in 0..n {
            let c = self.sorted_cell[k];
            assert!(
                window.contains(&c),
                "particle in cell {c} outside the window {window:?}"
            );
            let w = (c - self.first) as usize;
            if k == 0 || self.sorted_cell[k - 1] != c {
                self.cell_start[w] = k as u32 + 1;
            }
            if k + 1 == n || self.sorted_cell[k + 1] != c {
                self.cell_end[w] = (k + 1) as u32;
            }
        }
    }

    /// Range of `sorted` holding the particles of global `cell` (empty outside the window).
    #[inline]
    pub fn cell_range(&self, cell: u32) -> std::ops::Range<usize> {
        let w = cell.wrapping_sub(self.first) as usize;
        match self.cell_start.get(w) {
            Some(&s) if s != 0 => s as usize - 1..self.cell_end[w] as usize,
            _ => 0..0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_within_a_reach_extend_the_27_neighbours_in_their_order() {
        let g = Grid::new([0.0; 3], [1.0; 3], 0.1, 2);
        let mut within = Vec::new();
        let mut around = [0u32; 27];
        for c in [[0, 0, 0], [5, 6, 7], [11, 11, 11], [0, 11, 3]] {
            let n = g.neighbour_cells(c, &mut around);
            g.neighbour_cells_within(c, 1, &mut within);
            assert_eq!(within, around[..n].to_vec());
        }
        g.neighbour_cells_within([5, 6, 7], 2, &mut within);
        assert_eq!(within.len(), 125);
        assert!(within.windows(2).all(|w| w[0] < w[1]), "z, y, x ascending");
        g.neighbour_cells_within([0, 1, 11], 2, &mut within);
        assert_eq!(within.len(), 3 * 4 * 3, "clamped at the border");
    }

    /// The rows of [`Grid::neighbour_rows_near`] found by walking outwards from the own cell
    /// until a cell is too far (its first form).
    fn rows_near_by_walking(g: &Grid, p: V3, reach: u32, radius: f64) -> Vec<(u32, u32)> {
        let c = g.cell_coords(p);
        let r2 = radius * radius;
        let gaps = |a: usize| -> (u32, Vec<f64>) {
            let l = p[a] - (g.origin[a] + c[a] as f64 * g.cell);
            let lo = c[a].saturating_sub(reach);
            let hi = (c[a] + reach).min(g.dims[a] - 1);
            let v = (lo..=hi)
                .map(|k| cell_gap(l, k as i64 - c[a] as i64, g.cell).powi(2))
                .collect();
            (lo, v)
        };
        let [(lx, gx), (ly, gy), (lz, gz)] = [gaps(0), gaps(1), gaps(2)];
        let own = (c[0] - lx) as usize;
        let mut out = Vec::new();
        for (kz, &gz2) in gz.iter().enumerate() {
            for (ky, &gy2) in gy.iter().enumerate() {
                let s = gy2 + gz2;
                if gz2 >= r2 || s >= r2 {
                    continue;
                }
                let (mut first, mut last) = (own, own);
                while first > 0 && gx[first - 1] + s < r2 {
                    first -= 1;
                }
                while last + 1 < gx.len() && gx[last + 1] + s < r2 {
                    last += 1;
                }
                let row = g.cell_index([0, ly + ky as u32, lz + kz as u32]);
                out.push((row + lx + first as u32, row + lx + last as u32));
            }
        }
        out
    }

    #[test]
    fn rows_near_are_those_of_the_walk_outwards() {
        // Cells of 2h / 3 and a support of 2h (reach 3, the SPH default), cells of h (reach 2),
        // and a reach of 5 (counted over 8 cells a side), points inside and outside the grid,
        // near cell faces too.
        let mut rng = crate::core::rng::SplitMix64::new(11);
        let mut rows = Vec::new();
        for (cell, reach) in [(0.1, 3), (0.15, 2), (0.06, 5)] {
            let g = Grid::new([0.0; 3], [1.0, 0.8, 0.6], cell, 2);
            let radius = cell * reach as f64;
            for k in 0..20_000 {
                let mut p: V3 = std::array::from_fn(|_| rng.next_f64() * 1.4 - 0.2);
                if k % 4 == 0 {
                    // On a cell face along x.
                    p[0] = (p[0] / cell).round() * cell;
                }
                g.neighbour_rows_near(p, reach, radius, &mut rows);
                assert_eq!(rows, rows_near_by_walking(&g, p, reach, radius), "{p:?}");
            }
        }
    }

    #[test]
    fn cells_marked_within_reach_are_those_whose_window_holds_an_occupied_cell() {
        let mut rng = crate::core::rng::SplitMix64::new(5);
        let (mut near, mut tmp, mut window) = (Vec::new(), Vec::new(), Vec::new());
        for (slab_axis, reach, fill) in [(2, 3, 0.002), (0, 2, 0.01), (1, 1, 0.05), (2, 3, 0.0)] {
            let g = Grid::new([0.0; 3], [1.0, 0.7, 0.5], 0.06, slab_axis);
            let occ: Vec<bool> = (0..g.num_cells()).map(|_| rng.next_f64() < fill).collect();
            g.mark_within_reach(|c| occ[c], reach, &mut near, &mut tmp);
            assert_eq!(near.len(), g.num_cells());
            let mut marked = 0;
            for x in 0..g.dims[0] {
                for y in 0..g.dims[1] {
                    for z in 0..g.dims[2] {
                        g.neighbour_cells_within([x, y, z], reach, &mut window);
                        let any = window.iter().any(|&w| occ[w as usize]);
                        let c = g.cell_index([x, y, z]) as usize;
                        assert_eq!(near[c], any, "cell {:?}", [x, y, z]);
                        marked += usize::from(any);
                    }
                }
            }
            // Neither nothing nor everything, but for the empty grid.
            assert!(fill == 0.0 || (marked > 0 && marked < g.num_cells()));
        }
    }

    #[test]
    fn rows_near_a_point_keep_every_close_point_and_the_order() {
        // Cells of 0.1 and a support of 0.2 (reach 2), as an SPH grid with cells of h.
        let g = Grid::new([0.0; 3], [1.0; 3], 0.1, 2);
        let (radius, reach) = (0.2, 2);
        let mut rng = crate::core::rng::SplitMix64::new(7);
        let (mut within, mut rows) = (Vec::new(), Vec::new());
        let (mut walked, mut all) = (0usize, 0usize);
        for _ in 0..2000 {
            // Points inside and outside the grid (an edge cell counts those).
            let p: V3 = std::array::from_fn(|_| rng.next_f64() * 1.4 - 0.2);
            g.neighbour_cells_within(g.cell_coords(p), reach, &mut within);
            g.neighbour_rows_near(p, reach, radius, &mut rows);
            let near: Vec<u32> = rows.iter().flat_map(|&(a, b)| a..=b).collect();
            let mut it = within.iter();
            assert!(
                near.iter().all(|c| it.any(|w| w == c)),
                "a subsequence of the window, in its order"
            );
            (walked, all) = (walked + near.len(), all + within.len());
            for _ in 0..50 {
                let q: V3 = std::array::from_fn(|a| p[a] + (rng.next_f64() * 2.0 - 1.0) * radius);
                if crate::core::vec3::norm(crate::core::vec3::sub(p, q)) < radius {
                    let cq = g.hash(q);
                    assert!(near.contains(&cq), "{q:?} near {p:?} in a skipped cell");
                }
            }
        }
        assert!(
            walked * 10 < all * 8,
            "{walked} of {all} cells walked: nothing skipped"
        );
    }

    #[test]
    fn sort_and_ranges() {
        let g = Grid::new([0.0; 3], [1.0; 3], 0.25, 2);
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
        let g = Grid::new([0.0; 3], [1.0; 3], 0.3, 2);
        let a = g.cell_coords([-10.0, 0.5, 0.5]);
        let b = g.cell_coords([-10.2, 0.5, 0.5]);
        assert_eq!(a, b);
    }

    #[test]
    fn slab_axis_is_slowest_and_layers_are_contiguous() {
        for axis in 0..3 {
            let g = Grid::new([0.0; 3], [1.0, 2.0, 3.0], 0.25, axis);
            let mut seen = vec![false; g.num_cells()];
            for layer in 0..g.dims[axis] {
                let r = g.layer_range(layer..layer + 1);
                for z in 0..g.dims[2] {
                    for y in 0..g.dims[1] {
                        for x in 0..g.dims[0] {
                            let c = [x, y, z];
                            let i = g.cell_index(c);
                            assert_eq!(r.contains(&i), c[axis] == layer);
                            seen[i as usize] = true;
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&s| s), "axis {axis}: index is a bijection");
        }
    }

    #[test]
    fn window_lists_only_its_cells() {
        let g = Grid::new([0.0; 3], [1.0; 3], 0.25, 0);
        let layer = g.cell_coords([0.6, 0.0, 0.0])[0];
        let window = g.layer_range(layer..layer + 1);
        let pos = vec![[0.6, 0.1, 0.1], [0.6, 0.9, 0.5]];
        let mut cl = CellList::default();
        cl.build_window(&g, window, &pos, &[7, 3]);
        assert_eq!(cl.cell_range(g.hash(pos[0])), 0..1);
        assert_eq!(cl.cell_range(g.hash(pos[1])), 1..2);
        assert_eq!(cl.cell_range(g.hash([0.1; 3])), 0..0);
    }

    #[test]
    fn x_order_keys_sort_as_the_values() {
        let mut v = vec![
            -1e300,
            -2.5,
            -1.0,
            -1e-300,
            -0.0,
            0.0,
            1e-300,
            0.3,
            0.30000000000000004,
            7.0,
            1e300,
        ];
        let keys: Vec<u64> = v.iter().map(|&x| x_order_key(x)).collect();
        assert!(keys.windows(2).all(|k| k[0] < k[1]), "{keys:?}");
        v.reverse();
        v.sort_by_key(|&x| x_order_key(x));
        assert_eq!(v[0], -1e300);
        assert_eq!(v[10], 1e300);
    }

    #[test]
    fn by_x_orders_each_cell_by_x_then_id_and_a_row_by_x() {
        // Cells of 0.5 along x (4 cells per row): each cell's particles by x, ties by id, so
        // a row of cells is in x order.
        let g = Grid::new([0.0; 3], [2.0, 0.5, 0.5], 0.5, 2);
        let pos = vec![
            [0.40, 0.1, 0.1],
            [0.10, 0.2, 0.2],
            [1.20, 0.1, 0.3],
            [0.10, 0.4, 0.1],
            [0.70, 0.3, 0.3],
            [1.05, 0.2, 0.2],
        ];
        let ids = [5, 9, 1, 2, 8, 4];
        let mut cl = CellList::by_x();
        cl.build(&g, &pos, &ids);
        // x 0.10 (ids 2 and 9: by id), 0.40; 0.70; 1.05, 1.20.
        assert_eq!(cl.sorted, vec![3, 1, 0, 4, 5, 2]);
        let xs: Vec<f64> = cl.sorted.iter().map(|&s| pos[s as usize][0]).collect();
        assert!(xs.windows(2).all(|w| w[0] <= w[1]));
        // The default keeps (cell, id).
        let mut by_id = CellList::default();
        by_id.build(&g, &pos, &ids);
        assert_eq!(by_id.sorted, vec![3, 0, 1, 4, 2, 5]);
    }
}
