//! The cut of an SPH run into slabs of cell layers, shared by every way of running it on several
//! workers: GPUs of a group in one process, MPI ranks with a GPU each, and MPI ranks on the CPU.
//! A layer is as thick as the kernel support ([`sph_layers`]), so a slab's halo is one layer on
//! each side; the bounds start at equal particle counts and then follow the work
//! (`decomp::balance`). Plain host code: no device.

use rayon::prelude::*;

use crate::core::grid::Grid;
use crate::core::vec3::V3;
use crate::decomp::balance::{self, Balance};
use crate::decomp::Axis;
use crate::exec::comm::{decode, encode, Comm};
use crate::sph::cpu::{sph_grid, sph_layer_of, sph_layers, sph_reach, SphState};
use crate::sph::motion::MovingSolids;
use crate::sph::setup::{SphConstants, KIND_FLUID};

/// Fewest cell layers per slab: a particle moves less than a layer per half step and a bound
/// moves one layer per decision, so with three layers nothing ever needs a slab two away.
pub const MIN_SLAB_LAYERS: u32 = 3;

/// The domain is too thin along the split axis for that many slabs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "{slabs} slabs need at least {min} layers each along {axis} (a layer: the kernel support), \
     and the domain has {layers}"
)]
pub struct TooFewLayers {
    pub slabs: usize,
    pub layers: u32,
    pub min: u32,
    pub axis: &'static str,
}

/// How the first slab bounds are chosen (`--first-cut`); the balancing moves them afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FirstCut {
    /// Equal estimated work: the pairs each particle's rates walk (`work_per_layer`).
    #[default]
    Work,
    /// Equal particle counts, fluid and boundary alike.
    Count,
}

/// How an SPH run is cut into slabs and kept balanced: what every way of running it on several
/// workers (a GPU group, MPI ranks on GPUs or the CPU, CPU sub-domains) takes from the case's
/// `[decomposition]` and the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlabOptions {
    /// Split axis; default: the axis with the most cell layers.
    pub axis: Option<Axis>,
    /// How the first bounds are chosen.
    pub first_cut: FirstCut,
    pub balance: Balance,
    /// Steps between balancing decisions (0 counts as 1).
    pub interval: u64,
    /// The balancing's threshold ([`balance::decide_with`]); `None`: the mode's default.
    pub threshold: Option<f64>,
}

impl SlabOptions {
    /// Whether a balancing decision comes once the run has taken `steps` steps (every
    /// `interval`; never with balancing off). Slabs, GPU groups and ranks decide at the same
    /// steps, and an exchange started early must not cross one.
    pub fn decision_after(&self, steps: u64) -> bool {
        self.balance != Balance::Off && steps.is_multiple_of(self.interval.max(1))
    }
}

impl Default for SlabOptions {
    /// The longest axis, equal estimated work, balancing by time every
    /// [`balance::BALANCE_INTERVAL`] steps at the mode's threshold: the solver's defaults.
    fn default() -> Self {
        SlabOptions {
            axis: None,
            first_cut: FirstCut::default(),
            balance: Balance::default(),
            interval: balance::BALANCE_INTERVAL,
            threshold: None,
        }
    }
}

/// The first cut of a run into slabs: the run's grid, the split axis, the bounds (equal estimated
/// work, [`work_per_layer`]; at least [`MIN_SLAB_LAYERS`] layers each) and the boundary particles, which every
/// slab holds (moving solids' too: every slab places them).
pub struct SlabCut {
    pub grid: Grid,
    pub axis: usize,
    /// Cells per layer.
    pub reach: u32,
    /// Slab w owns layers `bounds[w]..bounds[w + 1]`.
    pub bounds: Vec<u32>,
    pub bound_ids: Vec<u32>,
}

impl SlabCut {
    /// Cuts `state` into `g` slabs along `opts.axis` (default: the axis with the most cell
    /// layers) as `opts.first_cut` says. The grid is built with the `moving` solids at rest, as
    /// one process builds it ([`crate::sph::cpu::SphSim::from_state_moving`]).
    pub fn new(
        c: &SphConstants,
        state: &SphState,
        moving: &MovingSolids,
        g: usize,
        opts: &SlabOptions,
    ) -> Result<SlabCut, TooFewLayers> {
        let grid = if moving.is_empty() {
            sph_grid(c, &state.pos, &state.kind)
        } else {
            sph_grid(c, &moving.at_rest(&state.pos), &state.kind)
        };
        let axis = match opts.axis {
            Some(a) => a.index(),
            None => (0..3).max_by_key(|&a| (grid.dims[a], 3 - a)).unwrap_or(0),
        };
        let reach = sph_reach(c, &grid);
        let layers = sph_layers(&grid, axis, reach);
        if layers < MIN_SLAB_LAYERS * g as u32 {
            return Err(TooFewLayers {
                slabs: g,
                layers,
                min: MIN_SLAB_LAYERS,
                axis: ["x", "y", "z"][axis],
            });
        }
        let work = match opts.first_cut {
            FirstCut::Work => {
                let w = work_per_layer(&grid, axis, reach, &state.pos, &state.kind);
                if w.is_none() {
                    tracing::info!(
                        "SPH first cut by particle counts: the domain has too many cells of the \
                         support to estimate the work per layer"
                    );
                }
                w
            }
            FirstCut::Count => None,
        };
        let per_layer = work.unwrap_or_else(|| {
            let mut per_layer = vec![0u64; layers as usize];
            for &p in &state.pos {
                per_layer[sph_layer_of(&grid, p, axis, reach) as usize] += 1;
            }
            per_layer
        });
        let bounds = initial_bounds(&per_layer, g);
        let bound_ids = (0..state.pos.len() as u32)
            .filter(|&k| state.kind[k as usize] != KIND_FLUID)
            .collect();
        Ok(SlabCut {
            grid,
            axis,
            reach,
            bounds,
            bound_ids,
        })
    }

    /// Layers along the split axis.
    pub fn layers(&self) -> u32 {
        self.bounds[self.bounds.len() - 1]
    }
}

/// The boundary layers slab `to` takes from slab `from` when the bounds move from `old` to `new`:
/// those `to` now owns or borders that `from` owned (their densities there are current).
pub fn handover(old: &[u32], new: &[u32], from: usize, to: usize) -> (u32, u32) {
    let lo = new[to].saturating_sub(1).max(old[from]);
    let hi = (new[to + 1] + 1).min(old[from + 1]);
    (lo, hi)
}

/// The layers slab `w` of `bounds` owns or borders: its own and one of halo on each side (within
/// the domain).
pub fn reach_of(bounds: &[u32], w: usize) -> std::ops::Range<u32> {
    let layers = bounds[bounds.len() - 1];
    bounds[w].saturating_sub(1)..(bounds[w + 1] + 1).min(layers)
}

/// The slab of `bounds` that owns `layer`.
pub fn owner_of(bounds: &[u32], layer: u32) -> usize {
    // bounds[0] = 0 <= layer: the last bound not above the layer starts its slab.
    let g = bounds.len() - 1;
    bounds[1..g].partition_point(|&b| b <= layer)
}

/// The balancing decision of MPI ranks ([`balance::decide_with`]): every rank's own fluid per layer
/// (`mine`, called only where `how` needs counts) and busy time since the last decision are
/// all-gathered, so that every rank takes the same decision. With `guard` (GPU ranks) the
/// measured-time modes' moves are judged by their effect ([`balance::MoveGuard`]), from every
/// rank's step time; every rank passes one or none alike. Collective.
pub fn decide_over_ranks<E>(
    comm: &dyn Comm,
    how: Balance,
    threshold: Option<f64>,
    bounds: &[u32],
    mine: impl FnOnce() -> Result<Vec<u32>, E>,
    busy: f64,
    guard: Option<RankGuard<'_>>,
) -> Result<Option<Vec<u32>>, E> {
    let layers = bounds[bounds.len() - 1] as usize;
    let mut per_layer = vec![0u64; layers];
    if matches!(how, Balance::Count | Balance::Time) {
        for part in comm.all_gather(encode(&mine()?)) {
            let counts: Vec<u32> = decode(&part, "per-layer counts");
            for (a, b) in per_layer.iter_mut().zip(counts) {
                *a += b as u64;
            }
        }
    }
    let Some(g) = guard else {
        let busy: Vec<f64> = comm
            .all_gather(encode(&busy))
            .iter()
            .map(|b| decode(b, "busy time"))
            .collect();
        return Ok(balance::decide_with(
            how,
            threshold,
            bounds,
            &per_layer,
            &busy,
            MIN_SLAB_LAYERS,
        ));
    };
    let all: Vec<(f64, f64, u64)> = comm
        .all_gather(encode(&(busy, g.step_s, g.steps)))
        .iter()
        .map(|b| decode(b, "busy times"))
        .collect();
    let busy: Vec<f64> = all.iter().map(|a| a.0).collect();
    let step_s: Vec<f64> = all.iter().map(|a| a.1).collect();
    let steps = all.iter().map(|a| a.2).max().unwrap_or(0);
    let propose =
        || balance::decide_with(how, threshold, bounds, &per_layer, &busy, MIN_SLAB_LAYERS);
    let cost = balance::per_step_cost(&step_s, steps);
    Ok(g.guard
        .decide(bounds, cost, |_| true, propose)
        .into_bounds())
}

/// What [`decide_over_ranks`] needs to judge moves by their effect (GPU ranks): the guard, and
/// this rank's device time (compute and exchange) over the steps since the last decision.
pub struct RankGuard<'a> {
    pub guard: &'a mut balance::MoveGuard,
    pub step_s: f64,
    pub steps: u64,
}

/// Most cells of the support's size for which [`work_per_layer`] builds its table (two u32
/// each: 512 MiB); a 100 M-particle dam break has about 11 M.
const MAX_WORK_CELLS: u64 = 1 << 26;

/// The work of each layer along `axis`, estimated before a step has run: on cells one layer
/// (`reach` grid cells, at least the support 2h) wide in every direction, a fluid particle
/// counts the fluid and boundary particles of the 27 cells around its own, a boundary
/// particle the fluid there (the pairs the rates walk: a fluid particle's sums run over both
/// lists, a boundary particle's over the fluid only), plus one for the particle itself.
/// Counting particles instead, the walls of the dry part of a tank, which outnumber a coarse
/// case's water and cost almost nothing, drew most slabs there (session 22). `None` when the
/// table would exceed [`MAX_WORK_CELLS`].
pub fn work_per_layer(
    grid: &Grid,
    axis: usize,
    reach: u32,
    pos: &[V3],
    kind: &[u32],
) -> Option<Vec<u64>> {
    use std::sync::atomic::{AtomicU32, Ordering};
    let dims: [usize; 3] = std::array::from_fn(|a| grid.dims[a].div_ceil(reach) as usize);
    let cells = dims.iter().map(|&d| d as u64).product::<u64>();
    if cells > MAX_WORK_CELLS {
        return None;
    }
    let cells = cells as usize;
    let index = |c: [usize; 3]| c[0] + dims[0] * (c[1] + dims[1] * c[2]);
    let coarse = |p: V3| -> [usize; 3] {
        let c = grid.cell_coords(p);
        std::array::from_fn(|a| (c[a] / reach) as usize)
    };
    let (fluid, all): (Vec<AtomicU32>, Vec<AtomicU32>) = (
        (0..cells).map(|_| AtomicU32::new(0)).collect(),
        (0..cells).map(|_| AtomicU32::new(0)).collect(),
    );
    pos.par_iter().zip(kind.par_iter()).for_each(|(&p, &k)| {
        let c = index(coarse(p));
        all[c].fetch_add(1, Ordering::Relaxed);
        if k == KIND_FLUID {
            fluid[c].fetch_add(1, Ordering::Relaxed);
        }
    });
    let fluid: Vec<u32> = fluid.into_iter().map(AtomicU32::into_inner).collect();
    let all: Vec<u32> = all.into_iter().map(AtomicU32::into_inner).collect();
    // Sums over the 27 cells around each: one pass of three along each axis.
    let near = |mut v: Vec<u32>| -> Vec<u32> {
        let mut stride = 1;
        for &d in &dims {
            let mut out = v.clone();
            for (i, o) in out.iter_mut().enumerate() {
                let x = (i / stride) % d;
                if x > 0 {
                    *o += v[i - stride];
                }
                if x + 1 < d {
                    *o += v[i + stride];
                }
            }
            v = out;
            stride *= d;
        }
        v
    };
    let (fluid_near, all_near) = (near(fluid.clone()), near(all.clone()));
    let mut per_layer = vec![0u64; dims[axis]];
    for i in 0..cells {
        let c = [
            i % dims[0],
            (i / dims[0]) % dims[1],
            i / (dims[0] * dims[1]),
        ];
        let f = fluid[i] as u64;
        let b = (all[i] - fluid[i]) as u64;
        per_layer[c[axis]] += f * all_near[i] as u64 + b * fluid_near[i] as u64 + f + b;
    }
    Some(per_layer)
}

/// Bounds cutting `per_layer` into `g` slabs of about equal counts, each at least
/// [`MIN_SLAB_LAYERS`] wide (the caller checked that there are enough layers).
pub fn initial_bounds(per_layer: &[u64], g: usize) -> Vec<u32> {
    let layers = per_layer.len() as u32;
    let total: u64 = per_layer.iter().sum();
    let mut bounds = vec![0u32; g + 1];
    bounds[g] = layers;
    let mut cum = 0u64;
    let mut k = 1;
    for (l, &c) in per_layer.iter().enumerate() {
        if k >= g {
            break;
        }
        cum += c;
        while k < g && cum * g as u64 >= total * k as u64 {
            bounds[k] = l as u32 + 1;
            k += 1;
        }
    }
    for k in 1..g {
        bounds[k] = bounds[k].max(bounds[k - 1] + MIN_SLAB_LAYERS);
    }
    for k in (1..g).rev() {
        bounds[k] = bounds[k].min(bounds[k + 1] - MIN_SLAB_LAYERS);
    }
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sph::setup::KIND_BOUNDARY;

    #[test]
    fn a_moved_bound_hands_over_the_layers_whose_densities_changed_owner() {
        // Slab 0 takes layer 6 from slab 1 and now borders layer 7: it takes both from slab 1;
        // slab 1 borders layer 6, whose densities it kept current itself.
        let (old, new) = ([0, 6, 12], [0, 7, 12]);
        assert_eq!(handover(&old, &new, 1, 0), (6, 8));
        let (lo, hi) = handover(&old, &new, 0, 1);
        assert!(lo >= hi, "nothing from slab 0: {lo}..{hi}");
        // The other way: slab 1 takes layer 5 and borders layer 4.
        let new = [0, 5, 12];
        assert_eq!(handover(&old, &new, 0, 1), (4, 6));
        // A slab two away has nothing to give.
        let (old, new) = ([0, 4, 8, 12], [0, 5, 8, 12]);
        let (lo, hi) = handover(&old, &new, 2, 0);
        assert!(lo >= hi);
    }

    #[test]
    fn owners_and_reaches_follow_the_bounds() {
        let b = [0, 4, 8, 12];
        let owners: Vec<usize> = (0..12).map(|l| owner_of(&b, l)).collect();
        assert_eq!(owners, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        assert_eq!(reach_of(&b, 0), 0..5);
        assert_eq!(reach_of(&b, 1), 3..9);
        assert_eq!(reach_of(&b, 2), 7..12);
        assert_eq!(owner_of(&[0, 9], 8), 0);
    }

    #[test]
    fn work_counts_the_pairs_each_particle_walks() {
        // Cells of 1 m (the grid adds one on each side: x = 0.1 is in cell 1), layers of 2
        // cells. Layer 0: two fluid particles and a boundary particle; layer 1: one fluid
        // particle; layer 3: a lone boundary particle, far from any fluid.
        let grid = Grid::new([0.0; 3], [5.9, 0.9, 0.9], 1.0, 2);
        let pos = [
            [0.1, 0.5, 0.5],
            [0.2, 0.5, 0.5],
            [1.5, 0.5, 0.5],
            [0.5, 0.2, 0.2],
            [5.5, 0.5, 0.5],
        ];
        let kind = [
            KIND_FLUID,
            KIND_FLUID,
            KIND_FLUID,
            KIND_BOUNDARY,
            KIND_BOUNDARY,
        ];
        let work = work_per_layer(&grid, 0, 2, &pos, &kind).unwrap();
        // Layer 0: each fluid particle 4 near, the boundary one 3 fluid near, plus one each.
        // Layer 1: 4 near plus one. Layer 3: nothing near plus one.
        assert_eq!(work, vec![2 * 4 + 3 + 3, 4 + 1, 0, 1]);
    }

    #[test]
    fn first_cut_by_work_puts_the_dry_walls_on_one_slab() {
        // A tank 30 m long in layers of 1 m: a floor of 10 boundary particles per layer, water
        // (20 particles per layer) in the last 10 layers. Equal counts leave slab 0 two wet
        // layers and slab 1 eight; equal work gives slab 0 five.
        let grid = Grid::new([0.0; 3], [29.9, 0.9, 0.9], 1.0, 2);
        let (mut pos, mut kind) = (Vec::new(), Vec::new());
        for l in 0..30 {
            for k in 0..10 {
                pos.push([l as f64 + 0.05 * k as f64, 0.1, 0.1]);
                kind.push(KIND_BOUNDARY);
            }
            for k in 0..if l >= 20 { 20 } else { 0 } {
                pos.push([l as f64 + 0.04 * k as f64, 0.5, 0.5]);
                kind.push(KIND_FLUID);
            }
        }
        let mut counts = vec![0u64; sph_layers(&grid, 0, 1) as usize];
        for &p in &pos {
            counts[sph_layer_of(&grid, p, 0, 1) as usize] += 1;
        }
        // Layer l + 1 holds x in [l, l + 1): water from layer 21.
        assert_eq!(initial_bounds(&counts, 2), vec![0, 23, 32]);
        let work = work_per_layer(&grid, 0, 1, &pos, &kind).unwrap();
        assert_eq!(initial_bounds(&work, 2), vec![0, 26, 32]);
    }

    #[test]
    fn first_cut_balances_counts_and_keeps_three_layers() {
        assert_eq!(initial_bounds(&[1; 12], 2), vec![0, 6, 12]);
        assert_eq!(initial_bounds(&[1; 12], 3), vec![0, 4, 8, 12]);
        // Everything in the last layer: every slab still gets three layers, the loaded one no
        // more.
        let mut c = vec![0; 12];
        c[11] = 100;
        assert_eq!(initial_bounds(&c, 3), vec![0, 6, 9, 12]);
        let mut c = vec![0; 12];
        c[0] = 100;
        assert_eq!(initial_bounds(&c, 2), vec![0, 3, 12]);
    }
}
