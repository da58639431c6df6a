//! The decomposition plan: the global grid cut into slabs of whole cell layers along one axis.
//!
//! The split axis is the grid's slowest-varying cell index ([`Grid::slab_axis`]), so a slab is a
//! contiguous range of cells, and a worker's window (its slab plus one ghost layer on each side)
//! is one contiguous range too. One ghost layer suffices because cells are at least one particle
//! diameter wide: a contact never reaches beyond the neighbouring layer.

use crate::core::grid::Grid;
use crate::core::vec3::V3;
use serde::{Deserialize, Serialize};

/// The axis a domain is cut along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    X,
    Y,
    Z,
}

impl Axis {
    pub fn index(self) -> usize {
        match self {
            Axis::X => 0,
            Axis::Y => 1,
            Axis::Z => 2,
        }
    }

    pub fn name(self) -> &'static str {
        ["x", "y", "z"][self.index()]
    }

    /// The axis of the longest extent of the box `min..max` (x on ties).
    pub fn longest(min: V3, max: V3) -> Axis {
        let ext: [f64; 3] = std::array::from_fn(|a| max[a] - min[a]);
        if ext[0] >= ext[1] && ext[0] >= ext[2] {
            Axis::X
        } else if ext[1] >= ext[2] {
            Axis::Y
        } else {
            Axis::Z
        }
    }
}

/// How a user asks for a decomposition: the case's `[decomposition]` table or
/// `--subdomains N --split-axis A`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decomposition {
    /// Number of sub-domains (slabs); 1 runs undecomposed.
    #[serde(default = "one")]
    pub subdomains: u32,
    /// Axis the slabs are cut along; default: the longest axis of the domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_axis: Option<Axis>,
    /// Dynamic load balancing: the slab bounds follow the work.
    #[serde(default)]
    pub balance: super::Balance,
}

fn one() -> u32 {
    1
}

impl Default for Decomposition {
    fn default() -> Self {
        Decomposition {
            subdomains: 1,
            split_axis: None,
            balance: super::Balance::default(),
        }
    }
}

/// Command-line overrides of a case's [`Decomposition`] (`--subdomains`, `--split-axis`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DecompositionOverride {
    pub subdomains: Option<u32>,
    pub split_axis: Option<Axis>,
    pub balance: Option<super::Balance>,
}

impl DecompositionOverride {
    /// `base` with the given options replaced.
    pub fn apply(&self, base: Decomposition) -> Decomposition {
        Decomposition {
            subdomains: self.subdomains.unwrap_or(base.subdomains),
            split_axis: self.split_axis.or(base.split_axis),
            balance: self.balance.unwrap_or(base.balance),
        }
    }
}

/// Most sub-domains a run may ask for (each has its own cell list, meshes and exchange buffers).
pub const MAX_SUBDOMAINS: u32 = 1024;

/// Why a decomposition cannot be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("the number of sub-domains must be between 1 and {MAX_SUBDOMAINS}, got {0}")]
    Count(u32),
    #[error(
        "cannot cut the domain into {subdomains} sub-domains along {axis}: the grid has only \
         {layers} cell layers of {cell:.3e} m along {axis} (a sub-domain needs at least one); \
         use fewer sub-domains or another --split-axis"
    )]
    TooThin {
        subdomains: u32,
        axis: &'static str,
        layers: u32,
        cell: f64,
    },
}

impl Decomposition {
    pub fn check(&self) -> Result<(), PlanError> {
        if self.subdomains == 0 || self.subdomains > MAX_SUBDOMAINS {
            return Err(PlanError::Count(self.subdomains));
        }
        Ok(())
    }
}

/// Slab bounds in cell layers along the grid's slab axis: worker `w` owns the layers
/// `bounds[w]..bounds[w + 1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub axis: usize,
    pub bounds: Vec<u32>,
}

impl Plan {
    /// Cuts `grid` (whose slab axis is the split axis) into `n` slabs holding about equally many
    /// of the particles at `pos` (at least one cell layer each).
    pub fn balanced(grid: &Grid, n: u32, pos: &[V3]) -> Result<Plan, PlanError> {
        // Slab w is full once it and the slabs before it hold w + 1 n-ths of the particles.
        Self::cut(grid, n, pos, |acc, total, w| acc * n as u64 >= total * w)
    }

    /// [`Plan::balanced`] with slab `w` holding about `weights[w] / sum(weights)` of the
    /// particles instead of an equal share: a GPU group whose GPUs hold different room (GPU 0
    /// also stages every particle's frame) cuts by each GPU's free memory when the equal cut
    /// does not fit. Weights must be positive and finite, one per slab.
    pub fn weighted(grid: &Grid, weights: &[f64], pos: &[V3]) -> Result<Plan, PlanError> {
        let n = weights.len() as u32;
        let sum: f64 = weights.iter().sum();
        if !(sum.is_finite() && sum > 0.0) || weights.iter().any(|&x| !(x.is_finite() && x > 0.0)) {
            return Err(PlanError::Count(n));
        }
        // The share of the particles that slabs 0..w hold together.
        let mut before = vec![0.0];
        for &x in weights {
            before.push(before.last().copied().unwrap_or(0.0) + x / sum);
        }
        Self::cut(grid, n, pos, |acc, total, w| {
            acc as f64 >= total as f64 * before[w as usize]
        })
    }

    /// Cuts after the first layer at which `full(particles so far, all particles, w)` says
    /// slab w - 1 holds its share, each slab keeping one layer at least.
    fn cut(
        grid: &Grid,
        n: u32,
        pos: &[V3],
        full: impl Fn(u64, u64, u64) -> bool,
    ) -> Result<Plan, PlanError> {
        let axis = grid.slab_axis;
        let layers = grid.dims[axis];
        if n == 0 || n > MAX_SUBDOMAINS {
            return Err(PlanError::Count(n));
        }
        if layers < n {
            return Err(PlanError::TooThin {
                subdomains: n,
                axis: ["x", "y", "z"][axis],
                layers,
                cell: grid.cell,
            });
        }
        let mut count = vec![0u64; layers as usize];
        for &p in pos {
            count[grid.cell_coords(p)[axis] as usize] += 1;
        }
        if count.iter().all(|&c| c == 0) {
            // Nothing placed yet (a run that inflow sources fill): even slabs.
            count.iter_mut().for_each(|c| *c = 1);
        }
        let total: u64 = count.iter().sum();
        let mut bounds = vec![0u32];
        let mut acc = 0u64;
        for (layer, &c) in count.iter().enumerate() {
            let w = bounds.len() as u64; // the next cut to place
            if w >= n as u64 {
                break;
            }
            acc += c;
            let left = n as u64 - w; // cuts still to place, including this one
            let layer = layer as u32 + 1; // cut after this layer
                                          // Cut once this slab holds its share, leaving at least one layer per later slab.
            let remaining_layers = layers - layer;
            if (full(acc, total, w) && remaining_layers >= left as u32)
                || remaining_layers < left as u32 + 1
            {
                bounds.push(layer);
            }
        }
        bounds.push(layers);
        debug_assert_eq!(bounds.len(), n as usize + 1);
        debug_assert!(bounds.windows(2).all(|b| b[0] < b[1]));
        Ok(Plan { axis, bounds })
    }

    /// The plan of one worker owning the whole grid.
    pub fn single(grid: &Grid) -> Plan {
        Plan {
            axis: grid.slab_axis,
            bounds: vec![0, grid.dims[grid.slab_axis]],
        }
    }

    pub fn workers(&self) -> usize {
        self.bounds.len() - 1
    }

    /// The worker owning cell layer `layer`.
    #[inline]
    pub fn owner_of_layer(&self, layer: u32) -> usize {
        self.bounds[1..].partition_point(|&b| b <= layer)
    }

    /// The worker owning a particle at `p`.
    #[inline]
    pub fn owner(&self, grid: &Grid, p: V3) -> usize {
        self.owner_of_layer(grid.cell_coords(p)[self.axis])
    }

    /// The layers worker `w` owns.
    pub fn slab(&self, w: usize) -> std::ops::Range<u32> {
        self.bounds[w]..self.bounds[w + 1]
    }

    /// The layers worker `w` sees: its slab and one ghost layer on each side (within the grid).
    pub fn window(&self, w: usize) -> std::ops::Range<u32> {
        let s = self.slab(w);
        s.start.saturating_sub(1)..(s.end + 1).min(*self.bounds.last().unwrap_or(&0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(axis: usize) -> Grid {
        Grid::new([0.0; 3], [1.0; 3], 0.1, axis)
    }

    #[test]
    fn slabs_cover_the_grid_and_balance_particles() {
        let g = grid(0);
        // All particles in x < 0.3: the slabs there are thin.
        let pos: Vec<V3> = (0..300).map(|i| [i as f64 * 0.001, 0.5, 0.5]).collect();
        let p = Plan::balanced(&g, 3, &pos).unwrap();
        assert_eq!(p.bounds.first(), Some(&0));
        assert_eq!(p.bounds.last(), Some(&g.dims[0]));
        assert!(p.bounds.windows(2).all(|b| b[0] < b[1]));
        for (w, r) in (0..3).map(|w| (w, p.slab(w))) {
            for l in r {
                assert_eq!(p.owner_of_layer(l), w);
            }
        }
        assert_eq!(p.window(0).start, 0);
        assert_eq!(p.window(2).end, g.dims[0]);
    }

    /// Particles spread evenly over x in [0, 1): 1,000 per cell layer of the test grid.
    fn even_x() -> Vec<V3> {
        (0..10_000)
            .map(|i| [(i as f64 + 0.5) * 1e-4, 0.5, 0.5])
            .collect()
    }

    /// Owned particles of each slab of `p` along x.
    fn shares(p: &Plan, g: &Grid, pos: &[V3]) -> Vec<usize> {
        let mut n = vec![0; p.workers()];
        for &x in pos {
            n[p.owner(g, x)] += 1;
        }
        n
    }

    #[test]
    fn weighted_slabs_hold_their_weights_share() {
        let (g, pos) = (grid(0), even_x());
        // GPU 0 with half the room of the others: 1/7, 2/7, 2/7, 2/7 of the particles, each
        // within the 1,000 of one layer (a cut falls after the layer that reaches the share).
        let w = [1.0, 2.0, 2.0, 2.0];
        let p = Plan::weighted(&g, &w, &pos).unwrap();
        let got = shares(&p, &g, &pos);
        assert_eq!(got.iter().sum::<usize>(), pos.len());
        for (k, &n) in got.iter().enumerate() {
            let want = pos.len() as f64 * w[k] / 7.0;
            assert!(
                (n as f64 - want).abs() <= 1000.0,
                "{got:?} against weights {w:?}"
            );
        }
        assert!(got[0] < got[1], "{got:?}");
        // Equal weights cut as balanced does.
        for n in 2..5 {
            assert_eq!(
                Plan::weighted(&g, &vec![3.5; n], &pos).unwrap().bounds,
                Plan::balanced(&g, n as u32, &pos).unwrap().bounds
            );
        }
        // Every slab keeps a layer, however small its weight.
        let p = Plan::weighted(&g, &[1e-9, 1.0, 1e-9], &pos).unwrap();
        assert!(p.bounds.windows(2).all(|b| b[0] < b[1]), "{:?}", p.bounds);
        for bad in [&[1.0, 0.0][..], &[1.0, f64::NAN], &[-1.0, 2.0], &[]] {
            assert!(Plan::weighted(&g, bad, &pos).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn no_particles_yet_gives_even_slabs() {
        let g = grid(0);
        let p = Plan::balanced(&g, 2, &[]).unwrap();
        let (a, b) = (p.slab(0).len(), p.slab(1).len());
        assert!(a.abs_diff(b) <= 1, "{:?}", p.bounds);
    }

    #[test]
    fn as_many_slabs_as_layers_and_no_more() {
        let g = grid(2);
        let n = g.dims[2];
        let p = Plan::balanced(&g, n, &[[0.5; 3]]).unwrap();
        assert_eq!(p.bounds, (0..=n).collect::<Vec<_>>());
        assert!(matches!(
            Plan::balanced(&g, n + 1, &[]),
            Err(PlanError::TooThin { .. })
        ));
        assert!(matches!(
            Plan::balanced(&g, 0, &[]),
            Err(PlanError::Count(0))
        ));
    }
}
