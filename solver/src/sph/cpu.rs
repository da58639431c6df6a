//! The CPU reference of the SPH method: gather formulation (each particle sums its own
//! neighbours in (cell, x, id) order, no float atomics, the same bits for any thread count),
//! symplectic position Verlet (or Verlet, `[sph] integrator`) with the variable CFL step, dynamic
//! boundary particles.
//!
//! One evaluation of the rates (`rates`) serves every particle: fluid particles get an
//! acceleration and a density rate, boundary particles a density rate only (they do not move, or
//! move as their solid's prescribed motion places them, [`super::motion`]; the pressure their
//! density gives keeps the fluid out). A boundary density below rho0 is raised to
//! rho0 after each step, as DualSPHysics does, so that walls never pull fluid in.

use super::motion::MovingSolids;
use super::physics::{self, DiffusionParams, FluidRates, FluidState, SphPair};
use super::setup::{Diffusion, Integrator, SphConstants, SphParticles, KIND_FLUID};
use crate::core::geometry::BodyTransform;
use crate::core::grid::{CellList, Grid};
use crate::core::vec3::{self, V3};
use rayon::prelude::*;

/// The state of an SPH run (id order: particle k has id k).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SphState {
    pub time: f64,
    pub step: u64,
    pub kind: Vec<u32>,
    pub pos: Vec<V3>,
    pub vel: Vec<V3>,
    pub rho: Vec<f64>,
    /// The Verlet integrator's state one step back (id order); `None` with the symplectic one,
    /// and before a Verlet run's first step (which is then an Euler step).
    pub prev: Option<PrevState>,
}

/// Velocities and densities one step back, by id (the Verlet integrator's); a boundary
/// particle's velocity is not kept (zero).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PrevState {
    pub vel: Vec<V3>,
    pub rho: Vec<f64>,
}

impl SphState {
    /// Particles of kinds `kind` at the origin, at rest, density 0: a state to fill by id.
    pub fn zeroed(time: f64, step: u64, kind: Vec<u32>) -> SphState {
        let n = kind.len();
        SphState {
            time,
            step,
            kind,
            pos: vec![[0.0; 3]; n],
            vel: vec![[0.0; 3]; n],
            rho: vec![0.0; n],
            prev: None,
        }
    }

    /// The state of `p` at t = 0: at rest but for the moving solids, which move from the start.
    pub fn initial(p: &SphParticles) -> SphState {
        let n = p.pos.len();
        let mut s = SphState {
            time: 0.0,
            step: 0,
            kind: p.kind.clone(),
            pos: p.pos.clone(),
            vel: vec![[0.0; 3]; n],
            rho: p.rho.clone(),
            prev: None,
        };
        p.moving.place(0.0, &mut s.pos, &mut s.vel);
        s
    }
}

/// The neighbour grid of an SPH run (every backend's): cells of 2h / [`cells_per_support`] over
/// the boundary particles, which enclose the fluid, at rest (a run with moving solids passes
/// their rest positions, [`MovingSolids::at_rest`]), so that a run restarted from a checkpoint
/// gets the same grid and sums in the same order (over all particles without any boundary). A
/// moving solid stays inside the tank (checked), hence inside the grid; the walls of a moving
/// tank may swing out of it, into its edge cells (a particle outside the grid keeps its true
/// offset from its edge cell).
pub fn sph_grid(c: &SphConstants, pos: &[V3], kind: &[u32]) -> Grid {
    let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
    let any_boundary = kind.iter().any(|&k| k != KIND_FLUID);
    for (q, &k) in pos.iter().zip(kind) {
        if any_boundary && k == KIND_FLUID {
            continue;
        }
        for a in 0..3 {
            lo[a] = lo[a].min(q[a]);
            hi[a] = hi[a].max(q[a]);
        }
    }
    Grid::new(lo, hi, 2.0 * c.h / cells_per_support() as f64, 2)
}

/// Cells per kernel support along an axis, m: cells of 2h / m, and a particle's neighbours lie in
/// the (2 m + 1)^3 cells around its own, of which it walks those whose box is closer than the
/// support ([`Grid::neighbour_rows_near`]). m = 3 by default: on the GPU (10 M dam break, H100)
/// 45.2 ms per step with m = 1, 30.5 with m = 2, 26.2 with m = 3, because fewer candidates
/// outside the support mean fewer passes of a warp through the pair code; it costs
/// +20 B/particle for the cell arrays, and small CPU cases about an eighth more time than m = 2
/// (a row's bookkeeping per particle: the quasi-2D water column 24.0 s against 27.3 s on 2
/// cores; the 58 k dam break the same). `PARTICLE_SHM_SPH_CELLS` (1 to 4) sets it for
/// comparisons; CPU and GPU read the same value, so the f64 parity holds for each, but the sums'
/// order, hence the f32 and f64 bits of a run, depend on it.
pub fn cells_per_support() -> u32 {
    static M: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *M.get_or_init(|| match std::env::var("PARTICLE_SHM_SPH_CELLS") {
        Err(_) => 3,
        Ok(v) => match v.trim().parse::<u32>() {
            Ok(m @ 1..=4) => m,
            _ => {
                tracing::warn!("PARTICLE_SHM_SPH_CELLS={v:?} is not 1, 2, 3 or 4: using 3");
                3
            }
        },
    })
}

/// The support with a margin for the rounding of the cell walk (`SPH_WALK_MARGIN` in sph.cu): a
/// cell whose box lies farther than `2 h SPH_WALK_MARGIN` from a particle is not walked.
pub const SPH_WALK_MARGIN: f64 = 1.001;

/// Host memory of an SPH run on the CPU reference per particle [B]: the solver's peak resident
/// size (placement, the state, the sorted copies a pair walk reads, the cell lists, the
/// segment's frame slots) was 548-570 B with dynamic boundaries (the dam break at 7.9 M and
/// 2.3 M particles) and 650 B with mDBC (the sloshing tank at 375 k); with some headroom
/// (`bench/cpu/sph_memory.sh`, `bench/results/sph_cpu_memory.json`).
pub const SPH_CPU_HOST_BYTES_PER_PARTICLE: u64 = 680;

/// What each CPU sub-domain after the first adds per particle [B]: every slab keeps arrays for
/// all particles (the dam break at 2.3 M: 570, 794 and 980 B in all on 1, 2 and 3).
pub const SPH_SUBDOMAIN_BYTES_PER_PARTICLE: u64 = 220;

/// A bound on r^2 above which r = sqrt(r^2) >= 2h for sure: (2h)^2 (1 + 1e-12), whose root
/// lies 5e-13 of 2h above it, over 2,000 ulps (a correctly rounded root is monotone), so that
/// a pair walk takes no root for most of the candidates it rejects and keeps the same pairs
/// (sph.cu's `reject2` is the same test with a wider margin).
pub fn support_squared_bound(h: f64) -> f64 {
    (2.0 * h) * (2.0 * h) * (1.0 + 1e-12)
}

/// Cells a particle's neighbours may lie away from its own along an axis on `grid`: the support
/// 2h over the cell size, rounded up (the grid may have enlarged its cells).
pub fn sph_reach(c: &SphConstants, grid: &Grid) -> u32 {
    ((2.0 * c.h / grid.cell) * (1.0 - 1e-12)).ceil().max(1.0) as u32
}

/// Several GPUs cut the domain into slabs of whole layers along `axis`; a layer is `reach`
/// cells thick (at least the support 2h), so that a slab's halo is one layer on each side.
/// Layers on `grid`.
pub fn sph_layers(grid: &Grid, axis: usize, reach: u32) -> u32 {
    grid.dims[axis].div_ceil(reach)
}

/// The layer of position `p` (the twin of `sph_layer` in sph.cu).
pub fn sph_layer_of(grid: &Grid, p: V3, axis: usize, reach: u32) -> u32 {
    grid.cell_coords(p)[axis] / reach
}

/// The first step of a run: the acoustic CFL bound C h / c0, at most the case's dt.
pub fn first_time_step(c: &SphConstants) -> f64 {
    c.dt_max.min(c.cfl * c.h / c.c0)
}

/// The next step from the limits of the last evaluation (min over particles of the force and
/// the viscous-acoustic limits), at most the case's dt.
pub fn next_time_step(c: &SphConstants, dt_f: f64, dt_cv: f64) -> f64 {
    physics::variable_time_step(c.cfl, dt_f, dt_cv).min(c.dt_max)
}

/// The predictor of one particle: a fluid particle's half step, a boundary particle's half-step
/// density (it does not move).
pub(crate) fn predict(
    c: &SphConstants,
    fluid: bool,
    s: &FluidState,
    r: &FluidRates,
    dt: f64,
) -> FluidState {
    if fluid {
        physics::symplectic_predict(s, r, c.gravity, dt)
    } else {
        FluidState {
            rho: s.rho + 0.5 * dt * r.drho,
            ..*s
        }
    }
}

/// The corrector of one particle from its state `s` at the start of the step, its half-step
/// density and the rates at the half step; a boundary density below rho0 is raised to rho0.
pub(crate) fn correct(
    c: &SphConstants,
    fluid: bool,
    s: &FluidState,
    half_rho: f64,
    r: &FluidRates,
    dt: f64,
) -> FluidState {
    if fluid {
        physics::symplectic_correct(s, half_rho, r, c.gravity, dt)
    } else {
        let rho = physics::symplectic_density(s.rho, half_rho, r.drho, dt);
        FluidState {
            rho: rho.max(c.rho0),
            ..*s
        }
    }
}

/// Whether the Verlet step that starts at step index `step` is an Euler step: every
/// `euler_every`-th (DualSPHysics' `VerletSteps`: steps 40, 80, ... counted from 1), and the first
/// of a run without the state one step back (`has_prev` false: a new run, or one resumed from a
/// frame).
pub fn verlet_is_euler(step: u64, euler_every: u32, has_prev: bool) -> bool {
    !has_prev || (step + 1).is_multiple_of(euler_every.max(1) as u64)
}

/// One Verlet step of one particle from its state `s`, the base of its velocity and density
/// (`v_base`, `rho_base`: one step back, or its own on an Euler step) and its rates: a fluid
/// particle moves ([`physics::verlet_update`]), a boundary particle's density changes only
/// (never below rho0, as with the symplectic scheme). `dt_span`: 2 dt, or dt on an Euler step.
#[allow(clippy::too_many_arguments)]
pub(crate) fn verlet_particle(
    c: &SphConstants,
    fluid: bool,
    s: &FluidState,
    v_base: V3,
    rho_base: f64,
    r: &FluidRates,
    dt: f64,
    dt_span: f64,
) -> FluidState {
    if fluid {
        physics::verlet_update(s, v_base, rho_base, r, c.gravity, dt, dt_span)
    } else {
        FluidState {
            rho: physics::verlet_density(rho_base, r.drho, dt_span).max(c.rho0),
            ..*s
        }
    }
}

// (Here, not in physics.rs, whose public functions are the formulas with CUDA twins.)
impl FluidState {
    /// Particle `k` of the arrays `pos`, `vel` and `rho` (index order).
    #[inline]
    pub(crate) fn at(pos: &[V3], vel: &[V3], rho: &[f64], k: usize) -> FluidState {
        FluidState {
            x: pos[k],
            v: vel[k],
            rho: rho[k],
        }
    }
}

/// A CPU SPH simulation.
pub struct SphSim {
    pub c: SphConstants,
    pub s: SphState,
    pub(crate) grid: Grid,
    /// Fluid particles by cell (rebuilt at every evaluation; entries are indices into `fluid`).
    fluid_cells: CellList,
    /// Boundary particles by cell (built once, or at every evaluation when solids move; entries
    /// index `bound`).
    bound_cells: CellList,
    /// The values pairs read, in the cells' order (refilled at every evaluation).
    fluid_sorted: SortedParticles,
    bound_sorted: SortedParticles,
    /// Ids of the fluid and of the boundary particles, ascending.
    fluid: Vec<u32>,
    bound: Vec<u32>,
    /// The step the next step takes [s].
    pub(crate) dt: f64,
    diffusion: DiffusionParams,
    /// Solids with a prescribed motion (none: every boundary particle stays put).
    moving: MovingSolids,
    /// mDBC: each particle's ghost node at rest (id order; NaN: none); empty with DBC.
    ghost: Vec<V3>,
    /// Per cell: whether fluid lies within the walk's reach, marked after each fill of
    /// `fluid_sorted` from it ([`SphSim::mark_near_fluid`]): a boundary particle or ghost node
    /// in an unmarked cell has no neighbour and skips its walk.
    near_fluid: Vec<bool>,
    mark_scratch: Vec<bool>,
}

/// The arrays of every particle (index order) that a pair reads.
struct Particles<'a> {
    pos: &'a [V3],
    vel: &'a [V3],
    rho: &'a [f64],
}

/// One list's particles (fluid or boundary) in (cell, x, id) order with copies of what a pair reads,
/// so that a row of cells is one run of memory: `start[c]..start[c + 1]` are cell c's entries
/// (`start` has a cell more), `index` their particle indices.
#[derive(Debug, Default)]
struct SortedParticles {
    start: Vec<u32>,
    index: Vec<u32>,
    pos: Vec<V3>,
    vel: Vec<V3>,
    rho: Vec<f64>,
    pr: Vec<f64>,
    cs: Vec<f64>,
}

impl SortedParticles {
    /// The particles of `cells` (built over the whole grid of `num_cells` cells, entries
    /// indexing `ids`), from `all`, with their pressures and sound speeds (computed here, once
    /// per particle, only for the particles listed).
    fn fill(
        &mut self,
        c: &SphConstants,
        cells: &CellList,
        ids: &[u32],
        num_cells: usize,
        all: &Particles,
    ) {
        self.start.clear();
        self.start.resize(num_cells + 1, 0);
        for &c in &cells.sorted_cell {
            self.start[c as usize + 1] += 1;
        }
        for c in 0..num_cells {
            self.start[c + 1] += self.start[c];
        }
        // Gathered in parallel (an indexed parallel iterator keeps the order): serial, these
        // copies were what the ranks of an MPI run could not share out.
        self.index.clear();
        self.index
            .par_extend(cells.sorted.par_iter().map(|&slot| ids[slot as usize]));
        let index = &self.index;
        let gather = |out: &mut Vec<V3>, from: &[V3]| {
            out.clear();
            out.par_extend(index.par_iter().map(|&j| from[j as usize]));
        };
        gather(&mut self.pos, all.pos);
        gather(&mut self.vel, all.vel);
        self.rho.clear();
        self.rho
            .par_extend(index.par_iter().map(|&j| all.rho[j as usize]));
        self.pr.clear();
        self.pr.par_extend(
            self.rho
                .par_iter()
                .map(|&r| physics::tait_pressure(r, c.rho0, c.b)),
        );
        self.cs.clear();
        self.cs.par_extend(
            self.rho
                .par_iter()
                .map(|&r| physics::sound_speed(r, c.rho0, c.c0)),
        );
    }
}

/// The most particles one thread sums in a row before the others may take the rest of a
/// parallel pair loop. Without a cap rayon cut the loop into a few pieces per thread, and the
/// fluid (the first ids, nearly all the pairs; most walls have no fluid in reach) fell into one
/// piece that a thread summed alone while the others idled: the dam break's pair loop kept 1.49
/// of 2 cores busy, and ran faster with 4 threads on 2 cores than with 2. Each particle's sum is
/// its own, so the cut changes no bit.
const PAIR_CHUNK: usize = 256;

/// Rates of the evaluated particles and the time-step limits they imply.
pub(crate) struct Rates {
    /// By particle index, or by entry of the targets evaluated ([`SphSim::rates_of`]).
    pub r: Vec<FluidRates>,
    /// min over fluid of sqrt(h / |a + g|), and min over all of h / (c + max mu).
    pub dt_f: f64,
    pub dt_cv: f64,
}

impl SphSim {
    pub fn new(c: SphConstants, p: SphParticles) -> SphSim {
        let state = SphState::initial(&p);
        let dt = first_time_step(&c);
        SphSim::from_state_moving(c, state, dt, p.moving)
    }

    /// Places the particles at t = 0 (`p.pos`, at rest) and builds the fixed parts of the run.
    fn build(c: SphConstants, p: SphParticles) -> SphSim {
        let n = p.pos.len();
        let grid = sph_grid(&c, &p.pos, &p.kind);
        let diffusion = DiffusionParams {
            delta: c.delta,
            h: c.h,
            c0: c.c0,
            rho0: c.rho0,
            b: c.b,
            gravity: c.gravity,
        };
        let dt = first_time_step(&c);
        let n32 = n as u32;
        let fluid: Vec<u32> = (0..n32)
            .filter(|&k| p.kind[k as usize] == KIND_FLUID)
            .collect();
        let bound: Vec<u32> = (0..n32)
            .filter(|&k| p.kind[k as usize] != KIND_FLUID)
            .collect();
        let mut bound_cells = CellList::by_x();
        let bpos: Vec<V3> = bound.iter().map(|&k| p.pos[k as usize]).collect();
        bound_cells.build(&grid, &bpos, &bound);
        let ghost = c
            .mdbc
            .as_ref()
            .map(|g| super::mdbc::ghost_nodes(g, &p.pos, &p.kind))
            .unwrap_or_default();
        SphSim {
            s: SphState {
                time: 0.0,
                step: 0,
                kind: p.kind,
                pos: p.pos,
                vel: vec![[0.0; 3]; n],
                rho: p.rho,
                prev: None,
            },
            grid,
            fluid_cells: CellList::by_x(),
            bound_cells,
            fluid_sorted: SortedParticles::default(),
            bound_sorted: SortedParticles::default(),
            fluid,
            bound,
            dt,
            diffusion,
            c,
            moving: MovingSolids::default(),
            ghost,
            near_fluid: Vec::new(),
            mark_scratch: Vec::new(),
        }
    }

    /// mDBC: sets the density of every boundary particle with fluid around its ghost node
    /// (the state at time `t`: positions `pos`, densities `rho`, id order) from that fluid
    /// ([`physics::ghost_density`], summed in the cells' order and by id, as every pair sum),
    /// never below rho0, as the walls' densities are kept with DBC. The others keep theirs.
    /// Returns whether it ran (mDBC), leaving the fluid sorted at `pos`.
    fn correct_boundary(&mut self, pos: &[V3], vel: &[V3], rho: &mut [f64], t: f64) -> bool {
        if !self.has_ghosts() {
            return false;
        }
        let fluid = std::mem::take(&mut self.fluid);
        let bound = std::mem::take(&mut self.bound);
        let new = self.ghost_densities(pos, vel, rho, t, &fluid, &bound);
        (self.fluid, self.bound) = (fluid, bound);
        for (b, r) in new {
            rho[b as usize] = r;
        }
        true
    }

    /// Whether the run has mDBC's ghost nodes.
    pub(crate) fn has_ghosts(&self) -> bool {
        !self.ghost.is_empty()
    }

    /// mDBC: those of the boundary particles `ids` whose ghost node at time `t` satisfies `here`.
    pub(crate) fn ghosts_where(
        &self,
        ids: &[u32],
        t: f64,
        here: impl Fn(V3) -> bool + Sync,
    ) -> Vec<u32> {
        let poses = self.moving.transforms(t);
        ids.par_iter()
            .copied()
            .filter(|&b| self.ghost_at(b as usize, &poses).is_some_and(&here))
            .collect()
    }

    /// Boundary particle `b`'s ghost node at the solids' `poses`, if it has one.
    fn ghost_at(&self, b: usize, poses: &[BodyTransform]) -> Option<V3> {
        let g0 = self.ghost[b];
        if g0[0].is_nan() {
            return None;
        }
        Some(match self.moving.ids.binary_search(&(b as u32)) {
            Ok(k) => poses[self.moving.body[k] as usize].apply(g0),
            Err(_) => g0,
        })
    }

    /// mDBC's new densities (id, density) of the boundary particles `targets` that have fluid
    /// around their ghost node, from the fluid particles `fluid` (ids; their state in `pos`,
    /// `vel`, `rho` at time `t`), which it leaves sorted: [`SphSim::correct_boundary`], and an
    /// MPI rank's share ([`super::ranks`]), which gives the whole run's bits as long as every
    /// fluid particle within the support of a target's node is present.
    pub(crate) fn ghost_densities(
        &mut self,
        pos: &[V3],
        vel: &[V3],
        rho: &[f64],
        t: f64,
        fluid: &[u32],
        targets: &[u32],
    ) -> Vec<(u32, f64)> {
        let fpos: Vec<V3> = fluid.iter().map(|&k| pos[k as usize]).collect();
        self.fluid_cells.build(&self.grid, &fpos, fluid);
        let all = Particles { pos, vel, rho };
        self.fluid_sorted.fill(
            &self.c,
            &self.fluid_cells,
            fluid,
            self.grid.num_cells(),
            &all,
        );
        let reach = sph_reach(&self.c, &self.grid);
        // As in `rates_of`: a node with no fluid within the walk's reach skips its row search
        // (it would have found no fluid: no sums, no density).
        self.mark_near_fluid(reach);
        let (c, grid, list) = (&self.c, &self.grid, &self.fluid_sorted);
        let near_fluid = &self.near_fluid;
        let near = 2.0 * c.h * SPH_WALK_MARGIN;
        let beyond = support_squared_bound(c.h);
        let poses = self.moving.transforms(t);
        targets
            .par_iter()
            .with_max_len(PAIR_CHUNK)
            .map_init(Vec::new, |rows, &b| {
                let g = self.ghost_at(b as usize, &poses)?;
                let mut sums = physics::GhostSums::default();
                if near_fluid[grid.hash(g) as usize] {
                    grid.neighbour_rows_near(g, reach, near, rows);
                } else {
                    rows.clear();
                }
                for &(first, last) in rows.iter() {
                    let range = list.start[first as usize]..list.start[last as usize + 1];
                    for k in range.map(|k| k as usize) {
                        let dr = vec3::sub(g, list.pos[k]);
                        let r2 = vec3::norm2(dr);
                        if r2 > beyond {
                            continue;
                        }
                        let r = r2.sqrt();
                        if r >= 2.0 * c.h {
                            continue;
                        }
                        let w = physics::kernel_value(c.kernel, r, c.h);
                        let f = physics::kernel_grad_factor(c.kernel, r, c.h);
                        physics::ghost_pair(&mut sums, w, f, dr, c.mass, list.rho[k]);
                    }
                }
                let r = physics::ghost_density(&sums, vec3::sub(pos[b as usize], g));
                (!r.is_nan()).then(|| (b, r.max(c.rho0)))
            })
            .flatten()
            .collect()
    }

    /// Marks in `near_fluid` the cells with a cell of the sorted fluid within `reach` cells: a
    /// walk from an unmarked cell finds no fluid (its rows never leave that window).
    fn mark_near_fluid(&mut self, reach: u32) {
        let start = &self.fluid_sorted.start;
        self.grid.mark_within_reach(
            |k| start[k + 1] > start[k],
            reach,
            &mut self.near_fluid,
            &mut self.mark_scratch,
        );
    }

    pub fn dt(&self) -> f64 {
        self.dt
    }

    /// Keeps only the boundary particles `ids` in the neighbour lists (an MPI rank's slab and
    /// halo, [`super::ranks`]): the others are never within the support of a particle it
    /// evaluates, and listing them cost every rank the whole boundary at every evaluation.
    pub(crate) fn hold_boundary(&mut self, ids: Vec<u32>) {
        // With moving solids the cells are built at each evaluation (`rates_of`).
        if self.moving.is_empty() {
            let bpos: Vec<V3> = ids.iter().map(|&k| self.s.pos[k as usize]).collect();
            self.bound_cells.build(&self.grid, &bpos, &ids);
        }
        self.bound = ids;
    }

    /// Continues from `state` with the step `dt` it was about to take (a checkpoint): the same
    /// bits as the run that wrote it. A case with moving solids needs
    /// [`SphSim::from_state_moving`].
    pub fn from_state(c: SphConstants, state: SphState, dt: f64) -> SphSim {
        SphSim::from_state_moving(c, state, dt, MovingSolids::default())
    }

    /// As [`SphSim::from_state`] with the solids `moving` (the case's, [`SphParticles::moving`]):
    /// the grid is built with them at rest, as at t = 0, so that the sums keep their order.
    pub fn from_state_moving(
        c: SphConstants,
        state: SphState,
        dt: f64,
        moving: MovingSolids,
    ) -> SphSim {
        let p = SphParticles {
            kind: state.kind.clone(),
            pos: moving.at_rest(&state.pos),
            rho: state.rho.clone(),
            moving: MovingSolids::default(),
        };
        // (With moving solids the boundary's cells are rebuilt at every evaluation.)
        let symplectic = c.integrator == Integrator::Symplectic;
        let mut sim = SphSim::build(c, p);
        sim.s = state;
        if symplectic {
            // Only Verlet keeps a state one step back (a checkpoint's case names its integrator).
            sim.s.prev = None;
        }
        sim.dt = dt;
        sim.moving = moving;
        sim
    }

    /// The moving solids of the run.
    pub fn moving(&self) -> &MovingSolids {
        &self.moving
    }

    /// Pressure of particle k [Pa].
    pub fn pressure(&self, k: usize) -> f64 {
        physics::tait_pressure(self.s.rho[k], self.c.rho0, self.c.b)
    }

    /// Rates of all particles at positions `pos`, velocities `vel`, densities `rho`. A fluid
    /// particle sums its fluid neighbours, then its boundary neighbours, each cell by cell in
    /// the grid's fixed order and by x, then id, within a cell; a boundary particle sums its fluid
    /// neighbours only. `fluid_sorted`: right after [`SphSim::correct_boundary`] at the same
    /// state, which sorted the fluid already and changed only the boundary's densities, the
    /// fluid's cells and sorted copies are taken as they are (a second build cost mDBC runs a
    /// third of their time on 2 cores).
    fn rates(&mut self, pos: &[V3], vel: &[V3], rho: &[f64], fluid_sorted: bool) -> Rates {
        let fluid = std::mem::take(&mut self.fluid);
        let r = self.rates_of(pos, vel, rho, &fluid, None, fluid_sorted);
        self.fluid = fluid;
        r
    }

    /// As [`SphSim::rates`] with only the fluid particles `fluid` (ids) present and only the
    /// particles `targets` evaluated (all without): a slab of an MPI rank ([`super::ranks`]),
    /// whose arrays are valid only where it holds particles. A target sums the same neighbours
    /// in the same order as in the whole run as long as every fluid particle within its
    /// support is present. `fluid_sorted`: the fluid's cells and sorted copies are those of this
    /// state already.
    pub(crate) fn rates_of(
        &mut self,
        pos: &[V3],
        vel: &[V3],
        rho: &[f64],
        fluid: &[u32],
        targets: Option<&[u32]>,
        fluid_sorted: bool,
    ) -> Rates {
        if !fluid_sorted {
            let fpos: Vec<V3> = fluid.iter().map(|&k| pos[k as usize]).collect();
            self.fluid_cells.build(&self.grid, &fpos, fluid);
        }
        if !self.moving.is_empty() {
            // Moving solids: the boundary by cell at this evaluation's positions.
            let bpos: Vec<V3> = self.bound.iter().map(|&k| pos[k as usize]).collect();
            self.bound_cells.build(&self.grid, &bpos, &self.bound);
        }
        let (c, grid) = (&self.c, &self.grid);
        let reach = sph_reach(c, grid);
        let all = Particles { pos, vel, rho };
        let cells = grid.num_cells();
        if !fluid_sorted {
            self.fluid_sorted
                .fill(c, &self.fluid_cells, fluid, cells, &all);
        }
        self.bound_sorted
            .fill(c, &self.bound_cells, &self.bound, cells, &all);
        // A boundary particle sees fluid only, and most of a tank's walls have none in reach:
        // their walks found empty rows, yet cost as much as the fluid's pairs in the quasi-2D
        // water column. (A fluid sorted already was marked with its sort, `ghost_densities`.)
        if !fluid_sorted {
            self.mark_near_fluid(reach);
        }
        let (c, grid, kind) = (&self.c, &self.grid, &self.s.kind);
        let near_fluid = &self.near_fluid;
        let lists = [&self.fluid_sorted, &self.bound_sorted];
        let dparams = &self.diffusion;
        // Cells beyond the support hold no pair the test r < 2h keeps: skipped, the order of
        // the rest unchanged (sph.cu walks the same rows).
        let near = 2.0 * c.h * SPH_WALK_MARGIN;
        let beyond = support_squared_bound(c.h);
        let count = targets.map_or(pos.len(), |t| t.len());
        let out: Vec<(FluidRates, f64, f64)> = (0..count)
            .into_par_iter()
            .with_max_len(PAIR_CHUNK)
            .map_init(Vec::new, |rows, t| {
                let i = targets.map_or(t, |ts| ts[t] as usize);
                let mut acc = [0.0; 3];
                let mut drho = 0.0;
                let mut mu_max: f64 = 0.0;
                let rho_i = rho[i];
                let p_i = physics::tait_pressure(rho_i, c.rho0, c.b);
                let c_i = physics::sound_speed(rho_i, c.rho0, c.c0);
                let fluid_i = kind[i] == KIND_FLUID;
                if fluid_i || near_fluid[grid.hash(pos[i]) as usize] {
                    grid.neighbour_rows_near(pos[i], reach, near, rows);
                } else {
                    rows.clear();
                }
                // Boundary particles see fluid only.
                let used = if fluid_i { &lists[..] } else { &lists[..1] };
                for (l, list) in used.iter().enumerate() {
                    let fluid_j = l == 0;
                    for &(first, last) in rows.iter() {
                        let range = list.start[first as usize]..list.start[last as usize + 1];
                        for k in range.map(|k| k as usize) {
                            let r_ij = vec3::sub(pos[i], list.pos[k]);
                            let r2 = vec3::norm2(r_ij);
                            // No root for a candidate surely outside (`beyond`); the exact test
                            // on r decides the rest, as in sph.cu.
                            if r2 > beyond {
                                continue;
                            }
                            let r = r2.sqrt();
                            if r >= 2.0 * c.h || list.index[k] as usize == i {
                                continue;
                            }
                            let f = physics::kernel_grad_factor(c.kernel, r, c.h);
                            let pair = SphPair {
                                r_ij,
                                v_ij: vec3::sub(vel[i], list.vel[k]),
                                rho_i,
                                rho_j: list.rho[k],
                                p_i,
                                p_j: list.pr[k],
                                c_i,
                                c_j: list.cs[k],
                                m_j: c.mass,
                            };
                            // The factors that several terms share, once per pair (as the
                            // GPU's sph_pair_sum computes them).
                            let vr = vec3::dot(pair.v_ij, r_ij);
                            let inv = physics::softened_inverse_square(c.h, r2);
                            let mu = physics::viscous_mu(c.h, vr, inv);
                            drho += physics::continuity_pair(f, vr, pair.m_j);
                            // Diffusion between fluid particles only (DualSPHysics).
                            if fluid_i && fluid_j {
                                drho += match c.diffusion {
                                    Diffusion::None => 0.0,
                                    Diffusion::Molteni => physics::diffusion_molteni_colagrossi(
                                        dparams, f, &pair, r2, inv,
                                    ),
                                    Diffusion::Fourtakas => {
                                        physics::diffusion_fourtakas(dparams, f, &pair, r2, inv)
                                    }
                                };
                            }
                            if fluid_i {
                                let alpha = if fluid_j { c.alpha } else { c.alpha_boundary };
                                let pi = physics::artificial_viscosity(alpha, mu, &pair);
                                acc = vec3::add(acc, physics::momentum_pair(f, &pair, pi));
                                mu_max = mu_max.max(physics::viscous_rate(mu));
                            }
                        }
                    }
                }
                let dt_f = if fluid_i {
                    physics::force_time_step(c.h, vec3::add(acc, c.gravity))
                } else {
                    f64::INFINITY
                };
                let dt_cv = physics::viscous_time_step(c.h, c_i, mu_max);
                (FluidRates { acc, drho }, dt_f, dt_cv)
            })
            .collect();
        let dt_f = out.iter().map(|o| o.1).fold(f64::INFINITY, f64::min);
        let dt_cv = out.iter().map(|o| o.2).fold(f64::INFINITY, f64::min);
        Rates {
            r: out.into_iter().map(|o| o.0).collect(),
            dt_f,
            dt_cv,
        }
    }

    /// One step of `self.dt` with the case's integrator; sets the next step from the CFL
    /// condition.
    pub fn step(&mut self) {
        match self.c.integrator {
            Integrator::Symplectic => self.step_symplectic(),
            Integrator::Verlet { euler_every } => self.step_verlet(euler_every),
        }
    }

    /// One Verlet step: rates at the state (the walls' densities first, mDBC), then the update
    /// from the state one step back ([`verlet_particle`]), which the state becomes. The next step
    /// comes from this step's rates, as the symplectic scheme's from its corrector's.
    fn step_verlet(&mut self, euler_every: u32) {
        let dt = self.dt;
        let c = self.c.clone();
        let mut pos = std::mem::take(&mut self.s.pos);
        let mut vel = std::mem::take(&mut self.s.vel);
        let mut rho = std::mem::take(&mut self.s.rho);
        let prev = self.s.prev.take();
        let corrected = self.correct_boundary(&pos, &vel, &mut rho, self.s.time);
        let r = self.rates(&pos, &vel, &rho, corrected);
        let euler = verlet_is_euler(self.s.step, euler_every, prev.is_some());
        let span = if euler { dt } else { 2.0 * dt };
        let kind = &self.s.kind;
        let new: Vec<FluidState> = (0..pos.len())
            .into_par_iter()
            .map(|k| {
                let s = FluidState::at(&pos, &vel, &rho, k);
                let (vb, rb) = match &prev {
                    Some(p) if !euler => (p.vel[k], p.rho[k]),
                    _ => (s.v, s.rho),
                };
                verlet_particle(&c, kind[k] == KIND_FLUID, &s, vb, rb, &r.r[k], dt, span)
            })
            .collect();
        // The state at n becomes the one step back (its arrays reused).
        let mut back = prev.unwrap_or_else(|| PrevState {
            vel: Vec::new(),
            rho: Vec::new(),
        });
        std::mem::swap(&mut back.vel, &mut vel);
        std::mem::swap(&mut back.rho, &mut rho);
        // A boundary particle's velocity is prescribed, never integrated: none is kept one step
        // back (zero, as the GPU keeps only the fluid's).
        for &k in &self.moving.ids {
            back.vel[k as usize] = [0.0; 3];
        }
        vel.clear();
        rho.clear();
        for (k, s) in new.into_iter().enumerate() {
            pos[k] = s.x;
            vel.push(s.v);
            rho.push(s.rho);
        }
        self.moving.place(self.s.time + dt, &mut pos, &mut vel);
        (self.s.pos, self.s.vel, self.s.rho) = (pos, vel, rho);
        self.s.prev = Some(back);
        self.s.time += dt;
        self.s.step += 1;
        self.dt = next_time_step(&self.c, r.dt_f, r.dt_cv);
    }

    /// One symplectic step: predictor, rates at the half step, corrector.
    fn step_symplectic(&mut self) {
        let dt = self.dt;
        let c = self.c.clone();
        // The state at the start of the step is moved out (not copied) while the rates borrow
        // the simulation, and written back at the end.
        let mut pos = std::mem::take(&mut self.s.pos);
        let mut vel = std::mem::take(&mut self.s.vel);
        let mut rho = std::mem::take(&mut self.s.rho);
        let corrected = self.correct_boundary(&pos, &vel, &mut rho, self.s.time);
        let at = |k: usize| FluidState::at(&pos, &vel, &rho, k);
        let r0 = self.rates(&pos, &vel, &rho, corrected);
        // Predictor.
        let kind = &self.s.kind;
        let half: Vec<FluidState> = (0..pos.len())
            .into_par_iter()
            .map(|k| predict(&c, kind[k] == KIND_FLUID, &at(k), &r0.r[k], dt))
            .collect();
        let mut hp: Vec<V3> = half.iter().map(|s| s.x).collect();
        let mut hv: Vec<V3> = half.iter().map(|s| s.v).collect();
        // Moving solids at the half step (their density integrates as any boundary's).
        self.moving.place(self.s.time + 0.5 * dt, &mut hp, &mut hv);
        let hr: Vec<f64> = half.iter().map(|s| s.rho).collect();
        let r1 = self.rates(&hp, &hv, &hr, false);
        // Corrector.
        let kind = &self.s.kind;
        let new: Vec<FluidState> = (0..pos.len())
            .into_par_iter()
            .map(|k| correct(&c, kind[k] == KIND_FLUID, &at(k), hr[k], &r1.r[k], dt))
            .collect();
        for (k, s) in new.into_iter().enumerate() {
            (pos[k], vel[k], rho[k]) = (s.x, s.v, s.rho);
        }
        self.moving.place(self.s.time + dt, &mut pos, &mut vel);
        (self.s.pos, self.s.vel, self.s.rho) = (pos, vel, rho);
        self.s.time += dt;
        self.s.step += 1;
        self.dt = next_time_step(&self.c, r1.dt_f, r1.dt_cv);
    }

    /// One step, shortened so as not to pass `t_end`.
    pub fn step_within(&mut self, t_end: f64) {
        if self.s.time + self.dt > t_end && t_end > self.s.time {
            self.dt = t_end - self.s.time;
        }
        self.step();
    }

    /// Steps until `t` (the last step shortened to land on it).
    pub fn run_to(&mut self, t: f64) {
        while self.s.time < t - 1e-12 {
            self.step_within(t);
        }
    }

    /// Pressure at `probe` as a sensor reads it ([`super::probe::read`]: interpolated from the
    /// fluid particles with the kernel, Shepard-normalised inside the fluid) [Pa]; `None`
    /// without fluid in reach.
    pub fn probe_pressure(&self, probe: V3) -> Option<f64> {
        let c = &self.c;
        let fluid = (0..self.s.pos.len())
            .filter(|&k| self.s.kind[k] == KIND_FLUID)
            .map(|k| (self.s.pos[k], c.mass / self.s.rho[k], self.pressure(k)));
        let r = super::probe::read(fluid, c.kernel, c.h, probe);
        (r.fraction > 0.0).then_some(r.pressure)
    }

    /// Fluid particles.
    pub fn fluid_count(&self) -> usize {
        self.s.kind.iter().filter(|&&k| k == KIND_FLUID).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sph::setup::SphCase;

    /// The premise of the walks' skip (`mark_near_fluid`): a boundary particle in an unmarked
    /// cell finds no fluid in any row of its walk, so skipping the walk changes no sum. Checked
    /// on the shipped dam break after a few steps, with particles on both sides of the mark (a
    /// mark one cell narrower than the reach fails it).
    #[test]
    fn a_boundary_particle_in_an_unmarked_cell_walks_no_fluid() {
        let text = include_str!("../../cases/dambreak.toml");
        let case = SphCase::from_toml_str(text).unwrap_or_else(|e| panic!("{e}"));
        let c = case.constants().unwrap_or_else(|e| panic!("{e}"));
        let p = case.particles(&c).unwrap_or_else(|e| panic!("{e}"));
        let mut sim = SphSim::new(c, p);
        for _ in 0..3 {
            sim.step();
        }
        let (pos, vel, rho) = (sim.s.pos.clone(), sim.s.vel.clone(), sim.s.rho.clone());
        // Sorts the fluid at this state and marks the cells near it.
        sim.rates(&pos, &vel, &rho, false);
        let reach = sph_reach(&sim.c, &sim.grid);
        let near = 2.0 * sim.c.h * SPH_WALK_MARGIN;
        let start = &sim.fluid_sorted.start;
        let mut rows = Vec::new();
        let (mut skipped, mut walked) = (0, 0);
        for &b in &sim.bound {
            let p = pos[b as usize];
            sim.grid.neighbour_rows_near(p, reach, near, &mut rows);
            let fluid: u32 = rows
                .iter()
                .map(|&(first, last)| start[last as usize + 1] - start[first as usize])
                .sum();
            if sim.near_fluid[sim.grid.hash(p) as usize] {
                walked += 1;
            } else {
                assert_eq!(
                    fluid, 0,
                    "boundary particle {b} at {p:?} skips {fluid} fluid"
                );
                skipped += 1;
            }
        }
        assert!(
            skipped > 0 && walked > 0,
            "{skipped} skipped, {walked} walked"
        );
    }
}
