//! A uniform grid over particle centres, built by a parallel radix sort ([`Grid`]): the
//! neighbour search of the coordination number; its cell layout also gives the sample cells
//! of the Lacey index and the triangle bins of the body torque.
//!
//! Cells are cubes of edge `cell` [m] over the bounding box of the finite positions; particles
//! with a non-finite coordinate are left out. The number of cells is capped (the edge grows
//! when needed), so memory stays proportional to the particle count whatever the spread.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use rayon::prelude::*;

use crate::par::{map_chunks, CHUNK};

/// Marks a particle that is in no cell (non-finite position).
pub(crate) const NO_CELL: u32 = u32::MAX;

#[inline]
fn is_finite(p: &[f32; 3]) -> bool {
    p[0].is_finite() & p[1].is_finite() & p[2].is_finite()
}

/// Bounding box of the finite coordinates (a particle with a non-finite coordinate still
/// widens the box by its finite ones), or `None` when no position is finite.
pub fn bounding_box(positions: &[[f32; 3]]) -> Option<([f64; 3], [f64; 3])> {
    merge_boxes(map_chunks(positions.len(), |r| {
        box_of_lanes(lane_bounds(positions[r].as_flattened()))
    }))
}

/// [`bounding_box`] of the particles whose `species` is `a` or `b`.
pub fn bounding_box_of_species(
    positions: &[[f32; 3]],
    species: &[u32],
    a: u32,
    b: u32,
) -> Option<([f64; 3], [f64; 3])> {
    let n = positions.len().min(species.len());
    merge_boxes(map_chunks(n, |r| {
        let flat = positions[r.clone()].as_flattened();
        box_of_lanes(lane_bounds_of_species(flat, &species[r], a, b))
    }))
}

/// Floats per step of [`lane_bounds`]: four particles.
const LANES: usize = 12;

/// Smallest and largest finite value of each lane `l` of `flat` (the floats at `l`, `l + 12`,
/// ...). Separate functions with plain array state, so that the loop vectorises (5x faster
/// than inside the caller's closure).
#[inline(never)]
fn lane_bounds(flat: &[f32]) -> ([f32; LANES], [f32; LANES]) {
    lane_bounds_where(flat, |_| true)
}

/// [`lane_bounds`] of the particles whose species is `a` or `b`.
#[inline(never)]
fn lane_bounds_of_species(
    flat: &[f32],
    species: &[u32],
    a: u32,
    b: u32,
) -> ([f32; LANES], [f32; LANES]) {
    let species = &species[..flat.len() / 3];
    lane_bounds_where(flat, |q| species[q] == a || species[q] == b)
}

/// [`lane_bounds`] of the particles (3 floats each) that `keep` accepts (by index in `flat`).
#[inline(always)]
fn lane_bounds_where(flat: &[f32], keep: impl Fn(usize) -> bool) -> ([f32; LANES], [f32; LANES]) {
    let (mut lo, mut hi) = ([f32::INFINITY; LANES], [f32::NEG_INFINITY; LANES]);
    let groups = flat.chunks_exact(LANES);
    let done = groups.len() * 4;
    for (k, g) in groups.enumerate() {
        let kept: [bool; 4] = std::array::from_fn(|q| keep(4 * k + q));
        for l in 0..LANES {
            // Branch-free: a rejected value contributes +inf / -inf.
            let v = g[l];
            let ok = kept[l / 3] & (v.abs() < f32::INFINITY);
            let low = if ok { v } else { f32::INFINITY };
            let high = if ok { v } else { f32::NEG_INFINITY };
            lo[l] = if low < lo[l] { low } else { lo[l] };
            hi[l] = if high > hi[l] { high } else { hi[l] };
        }
    }
    for (j, &v) in flat[3 * done..].iter().enumerate() {
        if keep(done + j / 3) && v.is_finite() {
            lo[j] = lo[j].min(v);
            hi[j] = hi[j].max(v);
        }
    }
    (lo, hi)
}

/// The per-axis bounds of [`lane_bounds`]' lanes (lane `l` holds axis `l % 3`).
fn box_of_lanes((lo, hi): ([f32; LANES], [f32; LANES])) -> ([f32; 3], [f32; 3]) {
    let axis = |lanes: &[f32; LANES], k: usize, f: fn(f32, f32) -> f32| {
        (k..LANES).step_by(3).map(|l| lanes[l]).fold(lanes[k], f)
    };
    (
        [0, 1, 2].map(|k| axis(&lo, k, f32::min)),
        [0, 1, 2].map(|k| axis(&hi, k, f32::max)),
    )
}

/// The box around all `boxes` (`None` when they are all empty).
fn merge_boxes(boxes: Vec<([f32; 3], [f32; 3])>) -> Option<([f64; 3], [f64; 3])> {
    let (lo, hi) = boxes.into_iter().fold(
        ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]),
        |(a, b), (c, d)| {
            (
                [0, 1, 2].map(|k| a[k].min(c[k])),
                [0, 1, 2].map(|k| b[k].max(d[k])),
            )
        },
    );
    (0..3)
        .all(|k| lo[k] <= hi[k])
        .then(|| (lo.map(f64::from), hi.map(f64::from)))
}

/// floor(t) for t clamped into [0, top] (NaN -> 0); `top` must be an integer in [0, i32::MAX].
#[inline(always)]
fn clamped_floor(t: f64, top: f64) -> u32 {
    let t = if t > 0.0 { t } else { 0.0 };
    let t = if t < top { t } else { top };
    // SAFETY: t is finite and in [0, top] with top <= i32::MAX, so the truncation fits an i32.
    // (The checked `as` conversion costs twice the whole cell computation.)
    unsafe { t.to_int_unchecked::<i32>() as u32 }
}

/// Cell geometry: origin, edge and dimensions.
#[derive(Clone, Copy, Debug)]
/// Fields are private: the cell computation relies on the bounds [`CellLayout::new`] sets.
pub struct CellLayout {
    origin: [f64; 3],
    cell: f64,
    /// 1 / `cell` (a multiplication per coordinate instead of a division).
    inv_cell: f64,
    dims: [usize; 3],
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
        // Every axis then has at most i32::MAX cells (see `clamped_floor`).
        let max_cells = max_cells.clamp(1, i32::MAX as usize);
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
            inv_cell: 1.0 / cell,
            dims,
        }
    }

    /// Edge [m] (may be larger than asked, see [`CellLayout::new`]).
    pub fn cell(&self) -> f64 {
        self.cell
    }

    /// Cells along x, y and z.
    pub fn dims(&self) -> [usize; 3] {
        self.dims
    }

    pub fn cell_count(&self) -> usize {
        self.dims.iter().product()
    }

    /// Integer cell coordinates of `p`, clamped into the grid (`None` if not finite).
    #[inline]
    pub fn coords(&self, p: &[f32; 3]) -> Option<[usize; 3]> {
        is_finite(p).then(|| [0, 1, 2].map(|k| self.axis(p[k], k) as usize))
    }

    /// Cell coordinate of `v` along axis `k`: floor((v - origin) / cell) clamped into the grid
    /// (clamping keeps every pair closer than one edge in the same or adjacent cells).
    #[inline(always)]
    fn axis(&self, v: f32, k: usize) -> u32 {
        clamped_floor(
            (v as f64 - self.origin[k]) * self.inv_cell,
            (self.dims[k] - 1) as f64,
        )
    }

    /// Cell index of each position (`NO_CELL` when not finite) into `out`.
    pub(crate) fn cells_of(&self, positions: &[[f32; 3]], out: &mut [u32]) {
        self.cells_of_strided::<3>(positions.as_flattened(), out);
    }

    /// Cell index of each record [x, y, z, radius] (`NO_CELL` when not finite) into `out`.
    pub(crate) fn cells_of_records(&self, records: &[[f32; 4]], out: &mut [u32]) {
        self.cells_of_strided::<4>(records.as_flattened(), out);
    }

    /// Cell index of each point (x, y, z first in every `S` floats of `flat`) into `out`. Four
    /// points per step, one lane per float, so that the loop vectorises (2.5x faster than point
    /// by point); the same arithmetic as [`CellLayout::coords`].
    #[inline(never)]
    fn cells_of_strided<const S: usize>(&self, flat: &[f32], out: &mut [u32]) {
        let lanes = 4 * S;
        let (sy, sz) = (self.dims[0] as u32, (self.dims[0] * self.dims[1]) as u32);
        // Lanes past z (a record's radius) get a one-cell axis: coordinate 0 whatever the value.
        let origin: Vec<f64> = (0..lanes)
            .map(|l| self.origin.get(l % S).map_or(0.0, |&o| o))
            .collect();
        let top: Vec<f64> = (0..lanes)
            .map(|l| self.dims.get(l % S).map_or(0.0, |&d| (d - 1) as f64))
            .collect();
        let inv = self.inv_cell;
        let groups = flat.chunks_exact(lanes);
        let done = groups.len() * 4;
        for (g, out) in groups.zip(out.chunks_exact_mut(4)) {
            let (mut t, mut finite) = ([0u32; 16], [false; 16]);
            for l in 0..lanes {
                finite[l] = g[l].abs() < f32::INFINITY;
                t[l] = clamped_floor((g[l] as f64 - origin[l]) * inv, top[l]);
            }
            for q in 0..4 {
                let cell = t[S * q] + sy * t[S * q + 1] + sz * t[S * q + 2];
                let ok = finite[S * q] & finite[S * q + 1] & finite[S * q + 2];
                out[q] = if ok { cell } else { NO_CELL };
            }
        }
        for (c, p) in out[done..].iter_mut().zip(flat[S * done..].chunks_exact(S)) {
            let cell = self.axis(p[0], 0) + sy * self.axis(p[1], 1) + sz * self.axis(p[2], 2);
            let ok = p[..3].iter().all(|v| v.is_finite());
            *c = if ok { cell } else { NO_CELL };
        }
    }

    #[inline]
    pub fn index(&self, c: [usize; 3]) -> usize {
        c[0] + self.dims[0] * (c[1] + self.dims[1] * c[2])
    }
}

/// `v` with length `len`; existing values are kept (the callers overwrite every element).
fn with_len(v: &mut Vec<u32>, len: usize) {
    if v.len() != len {
        v.clear();
        v.resize(len, 0);
    }
}

/// Particles sorted by cell: slots `start[c]..start[c + 1]` hold the particles of cell `c` (in
/// frame order) as `records[k] = [x, y, z, radius]` (at most `u32::MAX` particles).
pub struct Grid {
    pub layout: CellLayout,
    pub start: Vec<u32>,
    pub records: Vec<[f32; 4]>,
    /// Working arrays kept for the next build.
    spare: GridBuffers,
}

/// Buckets of the partition pass, at most: a chunk's bucket counters and a bucket's cell
/// counters both stay in the first-level caches.
const MAX_BUCKETS: usize = 2048;

/// One particle on its way through the partition: x | y, z | radius (bits); its cell is
/// computed again where needed (cheaper than moving it through memory). Atomics only to let
/// chunks write disjoint slots of one shared array; there is no contention.
type Entry = [AtomicU64; 2];

/// Buffers of a [`Grid`], kept from frame to frame: a fresh allocation of these arrays (about
/// 40 B per particle) costs more in page faults than filling them.
#[derive(Default)]
pub struct GridBuffers {
    /// Cell of each particle.
    cells: Vec<u32>,
    /// Per bucket, per chunk of particles: count, then where the chunk writes in the bucket.
    offsets: Vec<AtomicU32>,
    /// The particles grouped by bucket.
    partitioned: Vec<Entry>,
    start: Vec<u32>,
    records: Vec<[f32; 4]>,
    /// Time of each phase of the last build (see [`GridBuffers::phase_times`]).
    phases: [std::time::Duration; 5],
}

impl GridBuffers {
    /// Time of each phase of the build these buffers come from: bounding box, pass 1, offsets,
    /// pass 2, pass 3 (for benchmarks).
    pub fn phase_times(&self) -> [std::time::Duration; 5] {
        self.phases
    }
}

/// Times the phases of a build.
struct PhaseClock {
    last: std::time::Instant,
    phases: [std::time::Duration; 5],
}

impl PhaseClock {
    fn start() -> Self {
        Self {
            last: std::time::Instant::now(),
            phases: Default::default(),
        }
    }
    fn lap(&mut self, phase: usize) {
        let now = std::time::Instant::now();
        self.phases[phase] = now - self.last;
        self.last = now;
    }
}

/// `v` cut into consecutive parts of the given lengths.
fn split_parts<T>(mut v: &mut [T], lengths: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    lengths
        .map(|len| {
            let (part, rest) = std::mem::take(&mut v).split_at_mut(len);
            v = rest;
            part
        })
        .collect()
}

/// Adds the particles of each bucket in `cells` to `count`. Runs of one bucket are added at
/// once: in a spatially ordered frame consecutive particles share a bucket, and incrementing
/// the same counter each time would wait on the previous increment.
#[inline(never)]
fn count_buckets(cells: &[u32], shift: u32, count: &mut [u32]) {
    let (mut bucket, mut run) = (usize::MAX, 0u32);
    for &c in cells.iter().filter(|&&c| c != NO_CELL) {
        let b = (c >> shift) as usize;
        if b == bucket {
            run += 1;
        } else {
            if run > 0 {
                count[bucket] += run;
            }
            (bucket, run) = (b, 1);
        }
    }
    if run > 0 {
        count[bucket] += run;
    }
}

/// Copies the particles (cells, positions, radii) to their buckets in `out`, at the cursors
/// `at` (advanced). The cursor of the current bucket stays in a register, as in
/// [`count_buckets`].
#[inline(never)]
fn partition(
    cells: &[u32],
    positions: &[[f32; 3]],
    radii: &[f32],
    shift: u32,
    at: &mut [u32],
    out: &[Entry],
) {
    let (mut bucket, mut slot) = (usize::MAX, 0u32);
    let pack = |a: f32, b: f32| (a.to_bits() as u64) << 32 | b.to_bits() as u64;
    for ((&c, p), &r) in cells.iter().zip(positions).zip(radii) {
        if c == NO_CELL {
            continue;
        }
        let b = (c >> shift) as usize;
        if b != bucket {
            if bucket != usize::MAX {
                at[bucket] = slot;
            }
            (bucket, slot) = (b, at[b]);
        }
        let e = &out[slot as usize];
        slot += 1;
        e[0].store(pack(p[0], p[1]), Relaxed);
        e[1].store(pack(p[2], r), Relaxed);
    }
    if bucket != usize::MAX {
        at[bucket] = slot;
    }
}

/// Working arrays of [`sort_bucket`], one set per thread.
#[derive(Default)]
struct BucketScratch {
    local: Vec<[f32; 4]>,
    cells: Vec<u32>,
    count: Vec<u32>,
}

/// Counting sort of one bucket's `entries` (cells `first_cell..`, slots from `first`) into its
/// part of `start` and `records`.
#[inline(never)]
fn sort_bucket(
    layout: &CellLayout,
    entries: &[Entry],
    (first_cell, first): (u32, u32),
    start: &mut [u32],
    records: &mut [[f32; 4]],
    scratch: &mut BucketScratch,
) {
    let BucketScratch {
        local,
        cells,
        count,
    } = scratch;
    local.clear();
    local.extend(entries.iter().map(|e| {
        let (xy, zr) = (e[0].load(Relaxed), e[1].load(Relaxed));
        [xy >> 32, xy, zr >> 32, zr].map(|bits| f32::from_bits(bits as u32))
    }));
    cells.resize(local.len(), 0);
    layout.cells_of_records(local, cells);
    count.clear();
    count.resize(start.len(), 0);
    // Runs of one cell are counted at once (see `count_buckets`).
    let (mut current, mut run) = (u32::MAX, 0u32);
    for &c in cells.iter() {
        let c = c - first_cell;
        if c == current {
            run += 1;
        } else {
            if run > 0 {
                count[current as usize] += run;
            }
            (current, run) = (c, 1);
        }
    }
    if run > 0 {
        count[current as usize] += run;
    }
    let mut at = 0u32;
    for (s, k) in start.iter_mut().zip(count.iter_mut()) {
        *s = first + at;
        at += std::mem::replace(k, at);
    }
    for (r, &c) in local.iter().zip(cells.iter()) {
        let slot = &mut count[(c - first_cell) as usize];
        records[*slot as usize] = *r;
        *slot += 1;
    }
}

impl Grid {
    /// Sorts the particles (centre, radius) into cells of edge `cell`. Returns `None` when no
    /// position is finite.
    ///
    /// A parallel radix sort in two levels, without contended atomics or random reads: cells
    /// are grouped into at most [`MAX_BUCKETS`] buckets of consecutive cells; each chunk of
    /// particles counts its particles per bucket, a prefix sum gives every chunk its place in
    /// every bucket, the chunks copy their particles there (in order), and each bucket then
    /// sorts its few cells in cache and writes its part of `start` and `records`.
    /// Memory is read in order whatever the frame order (a global per-cell histogram costs a
    /// cache miss per particle, 5x slower, once the frame order is unrelated to space).
    pub fn build(
        positions: &[[f32; 3]],
        radii: &[f32],
        cell: f64,
        max_cells: usize,
    ) -> Option<Self> {
        Self::build_reusing(positions, radii, cell, max_cells, GridBuffers::default())
    }

    /// [`Grid::build`] into the buffers of an earlier grid ([`Grid::into_buffers`]).
    pub fn build_reusing(
        positions: &[[f32; 3]],
        radii: &[f32],
        cell: f64,
        max_cells: usize,
        buf: GridBuffers,
    ) -> Option<Self> {
        let n = positions.len().min(radii.len());
        let (positions, radii) = (&positions[..n], &radii[..n]);
        let mut clock = PhaseClock::start();
        let (lo, hi) = bounding_box(positions)?;
        clock.lap(0);
        let layout = CellLayout::new(lo, hi, cell, max_cells);
        let GridBuffers {
            mut cells,
            mut offsets,
            mut partitioned,
            mut start,
            mut records,
            phases: _,
        } = buf;
        let cell_count = layout.cell_count();
        let shift = (cell_count.div_ceil(MAX_BUCKETS) as u64)
            .next_power_of_two()
            .trailing_zeros();
        let buckets = cell_count.div_ceil(1 << shift);
        let chunks = n.div_ceil(CHUNK);

        // Pass 1: cell of each particle, and per chunk its particles in each bucket
        // (`offsets[bucket * chunks + chunk]`).
        with_len(&mut cells, n);
        offsets.resize_with(buckets * chunks, AtomicU32::default);
        offsets.truncate(buckets * chunks);
        cells
            .par_chunks_mut(CHUNK)
            .zip(positions.par_chunks(CHUNK))
            .enumerate()
            .for_each(|(chunk, (cells, positions))| {
                layout.cells_of(positions, cells);
                let mut count = vec![0u32; buckets];
                count_buckets(cells, shift, &mut count);
                for (b, &k) in count.iter().enumerate() {
                    offsets[b * chunks + chunk].store(k, Relaxed);
                }
            });
        clock.lap(1);
        // Bucket totals, their prefix sum, then each chunk's place in each bucket.
        let mut bucket_start = Vec::with_capacity(buckets + 1);
        bucket_start.push(0u32);
        let totals: Vec<u32> = offsets
            .par_chunks(chunks)
            .map(|row| row.iter().map(|k| k.load(Relaxed)).sum())
            .collect();
        for t in totals {
            bucket_start.push(bucket_start[bucket_start.len() - 1] + t);
        }
        let placed = bucket_start[buckets] as usize;
        offsets
            .par_chunks_mut(chunks)
            .zip(&bucket_start[..buckets])
            .for_each(|(row, &first)| {
                let mut at = first;
                for k in row {
                    let count = std::mem::replace(k.get_mut(), at);
                    at += count;
                }
            });

        clock.lap(2);
        // Pass 2: each chunk copies its particles into their buckets, in order.
        if partitioned.len() < placed {
            partitioned.resize_with(placed, Entry::default);
        }
        cells
            .par_chunks(CHUNK)
            .zip(positions.par_chunks(CHUNK).zip(radii.par_chunks(CHUNK)))
            .enumerate()
            .for_each(|(chunk, (cells, (positions, radii)))| {
                let mut at: Vec<u32> = (0..buckets)
                    .map(|b| offsets[b * chunks + chunk].load(Relaxed))
                    .collect();
                partition(cells, positions, radii, shift, &mut at, &partitioned);
            });

        clock.lap(3);
        // Pass 3: each bucket counts its cells and writes its part of `start` and `records`.
        with_len(&mut start, cell_count + 1);
        if records.len() != placed {
            records.clear();
            records.resize(placed, [0.0; 4]);
        }
        let lengths = bucket_start.windows(2).map(|w| (w[1] - w[0]) as usize);
        let record_parts = split_parts(&mut records, lengths);
        start[..cell_count]
            .par_chunks_mut(1 << shift)
            .zip(record_parts)
            .enumerate()
            .for_each_init(BucketScratch::default, |scratch, (b, (start, records))| {
                let (first, end) = (bucket_start[b], bucket_start[b + 1]);
                let entries = &partitioned[first as usize..end as usize];
                let at = ((b << shift) as u32, first);
                sort_bucket(&layout, entries, at, start, records, scratch);
            });
        start[cell_count] = placed as u32;
        clock.lap(4);
        Some(Self {
            layout,
            start,
            records,
            spare: GridBuffers {
                cells,
                offsets,
                partitioned,
                phases: clock.phases,
                ..GridBuffers::default()
            },
        })
    }

    /// The grid's arrays, for the next [`Grid::build_reusing`].
    pub fn into_buffers(self) -> GridBuffers {
        GridBuffers {
            start: self.start,
            records: self.records,
            ..self.spare
        }
    }

    /// Particles placed in the grid (those with finite positions).
    pub fn len(&self) -> usize {
        self.records.len()
    }
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Slot range of cells `first..=last` (consecutive indices, e.g. one row of x).
    #[inline]
    pub fn range(&self, first: usize, last: usize) -> std::ops::Range<usize> {
        self.start[first] as usize..self.start[last + 1] as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Particle indices per cell, read back from the records' radius (set to the index), after
    /// checking that each record is its particle's and lies in its cell.
    fn content(g: &Grid, pos: &[[f32; 3]]) -> Vec<Vec<u32>> {
        (0..g.layout.cell_count())
            .map(|c| {
                let v: Vec<u32> = g.records[g.range(c, c)]
                    .iter()
                    .map(|r| r[3] as u32)
                    .collect();
                assert!(v.windows(2).all(|w| w[0] < w[1]), "frame order in a cell");
                for (&i, rec) in v.iter().zip(&g.records[g.range(c, c)]) {
                    let p = pos[i as usize];
                    assert_eq!(*rec, [p[0], p[1], p[2], i as f32]);
                    assert_eq!(g.layout.coords(&p).map(|cc| g.layout.index(cc)), Some(c));
                }
                v
            })
            .collect()
    }

    /// Radius = particle index (exact in f32 below 2^24), so records name their particle.
    fn index_radii(n: usize) -> Vec<f32> {
        (0..n).map(|i| i as f32).collect()
    }

    #[test]
    fn every_finite_particle_lands_in_its_cell_once() {
        let mut pos: Vec<[f32; 3]> = (0..1000)
            .map(|i| [(i % 10) as f32, ((i / 10) % 10) as f32, (i / 100) as f32])
            .collect();
        pos.push([f32::NAN, 0.0, 0.0]);
        let g = Grid::build(&pos, &index_radii(pos.len()), 2.0, 1 << 20).unwrap();
        assert_eq!(g.len(), 1000);
        let mut all: Vec<u32> = content(&g, &pos).into_iter().flatten().collect();
        all.sort();
        assert_eq!(
            all,
            (0..1000).collect::<Vec<u32>>(),
            "each finite particle once"
        );
    }

    #[test]
    fn reused_buffers_give_the_same_grid_as_fresh_ones() {
        // Several chunks, then fewer particles and another layout, then the first again.
        let big: Vec<[f32; 3]> = (0..3 * CHUNK + 17)
            .map(|i| {
                [
                    (i % 97) as f32,
                    ((i / 97) % 89) as f32,
                    (i % 13) as f32 * 0.5,
                ]
            })
            .collect();
        let small = &big[..1000];
        let mut buf = GridBuffers::default();
        for (pos, cell) in [
            (&big[..], 3.0),
            (small, 1.5),
            (&big[..], 3.0),
            (&big[..], 7.0),
        ] {
            let radii = index_radii(pos.len());
            let fresh = Grid::build(pos, &radii, cell, 1 << 20).unwrap();
            let reused = Grid::build_reusing(pos, &radii, cell, 1 << 20, buf).unwrap();
            assert_eq!(reused.len(), pos.len());
            assert_eq!(content(&fresh, pos), content(&reused, pos));
            buf = reused.into_buffers();
        }
    }

    #[test]
    fn cell_count_is_capped() {
        let l = CellLayout::new([0.0; 3], [1000.0; 3], 0.001, 1000);
        assert!(l.cell_count() <= 1000, "{l:?}");
        assert!(l.cell() >= 100.0);
    }
}
