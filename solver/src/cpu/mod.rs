//! CPU reference backend (rayon).
//!
//! Step pipeline (Neubauer 2018, ch. 3): `prepare` (cell hash, sort, cell start, mesh placement;
//! every `reorder_every` steps the particle storage is permuted into cell order) -> `collide`
//! (gather: each particle sums its own contacts in a fixed neighbour order, no atomics) ->
//! `integrate`. Results are bit-identical for any number of threads and across checkpoint
//! restarts, because no floating-point sum depends on thread scheduling or storage order.
//!
//! Contact history is per particle: [`HISTORY_CAP`] slots of (partner key, tangential spring),
//! double-buffered; both partners of a particle pair keep their own copy, updated by the same
//! (mirrored) arithmetic.

mod contacts;
mod stages;

use crate::backend::{
    Backend, BackendStats, Energies, HistEntry, SimState, Snapshot, StageTimers, StepContext,
    StepError, HISTORY_CAP,
};
use crate::geometry::{BodyTransform, MeshWorld};
use crate::grid::{CellList, Grid};
use crate::vec3::V3;
use std::sync::Arc;

/// Host bytes per particle the CPU backend holds while it runs: the particle arrays (id,
/// species, contact count: u32; position, velocity, angular velocity, force, torque: f64 x 3;
/// [`HISTORY_CAP`] history slots), the second history buffer, the slot of each id, the cell
/// list (3 x u32) and the largest temporary of the periodic reorder (one history array).
/// `sim::Simulation` checks it against the available memory before placing particles.
pub const HOST_BYTES_PER_PARTICLE: u64 = {
    let u32_ = std::mem::size_of::<u32>();
    let hist = HISTORY_CAP * std::mem::size_of::<HistEntry>();
    let particles = 3 * u32_ + 5 * std::mem::size_of::<V3>() + hist;
    (particles + hist + u32_ + 3 * u32_ + hist) as u64
};

/// Particle data in storage order (permuted by the periodic reorder).
#[derive(Debug, Clone, Default)]
pub(crate) struct Particles {
    pub id: Vec<u32>,
    pub species: Vec<u32>,
    pub pos: Vec<V3>,
    pub vel: Vec<V3>,
    pub omega: Vec<V3>,
    pub force: Vec<V3>,
    pub torque: Vec<V3>,
    pub contacts: Vec<u32>,
    pub hist: Vec<[HistEntry; HISTORY_CAP]>,
}

impl Particles {
    fn permute(&mut self, order: &[u32]) {
        fn p<T: Copy>(v: &mut Vec<T>, order: &[u32]) {
            *v = order.iter().map(|&k| v[k as usize]).collect();
        }
        p(&mut self.id, order);
        p(&mut self.species, order);
        p(&mut self.pos, order);
        p(&mut self.vel, order);
        p(&mut self.omega, order);
        p(&mut self.force, order);
        p(&mut self.torque, order);
        p(&mut self.contacts, order);
        p(&mut self.hist, order);
    }
}

/// The CPU backend.
pub struct CpuBackend {
    ctx: Arc<StepContext>,
    p: Particles,
    /// The next step's contact history, written by `collide` and swapped with `p.hist` (kept
    /// between steps so that no step allocates it).
    hist_next: Vec<[HistEntry; HISTORY_CAP]>,
    /// Storage slot of each particle id.
    slot_of_id: Vec<u32>,
    grid: Grid,
    cells: CellList,
    meshes: MeshWorld,
    time: f64,
    step: u64,
    forces_valid: bool,
    timers: StageTimers,
    stats: BackendStats,
}

impl CpuBackend {
    /// Builds the backend from constants and a state (id order). The grid covers the domain and
    /// the meshes at t = 0 with cells of the largest particle diameter.
    pub fn new(ctx: Arc<StepContext>, state: SimState) -> Self {
        let n = state.pos.len();
        let (mut lo, mut hi) = (ctx.domain_min, ctx.domain_max);
        for v in ctx.meshes.iter().flat_map(|m| m.triangles.iter().flatten()) {
            for a in 0..3 {
                lo[a] = lo[a].min(v[a]);
                hi[a] = hi[a].max(v[a]);
            }
        }
        let dmax = 2.0 * ctx.species_radius.iter().copied().fold(0.0, f64::max);
        let grid = Grid::new(lo, hi, dmax.max(1e-12));
        let hist = state
            .history
            .chunks_exact(HISTORY_CAP)
            .map(|c| std::array::from_fn(|k| c[k]))
            .collect();
        let p = Particles {
            id: (0..n as u32).collect(),
            species: state.species,
            pos: state.pos,
            vel: state.vel,
            omega: state.omega,
            force: state.force,
            torque: state.torque,
            contacts: state.contacts,
            hist,
        };
        let mut meshes = MeshWorld::new(&ctx.meshes);
        let reach = ctx.species_radius.iter().copied().fold(0.0, f64::max);
        meshes.update(&ctx.meshes, &grid, state.time, reach);
        CpuBackend {
            ctx,
            p,
            hist_next: Vec::new(),
            slot_of_id: (0..n as u32).collect(),
            grid,
            cells: CellList::default(),
            meshes,
            time: state.time,
            step: state.step,
            forces_valid: state.forces_valid,
            timers: StageTimers::default(),
            stats: BackendStats {
                history_overflows: state.history_overflows,
                contacts: 0,
            },
        }
    }

    fn to_id_order<T: Copy>(&self, v: &[T]) -> Vec<T> {
        self.slot_of_id.iter().map(|&s| v[s as usize]).collect()
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn step(&mut self, n_steps: u64) -> Result<(), StepError> {
        for _ in 0..n_steps {
            self.one_step()?;
        }
        Ok(())
    }

    fn time(&self) -> f64 {
        self.time
    }

    fn step_index(&self) -> u64 {
        self.step
    }

    fn snapshot(&self) -> Result<Snapshot, StepError> {
        Ok(Snapshot {
            pos: self.to_id_order(&self.p.pos),
            vel: self.to_id_order(&self.p.vel),
            omega: self.to_id_order(&self.p.omega),
            force: self.to_id_order(&self.p.force),
            contacts: self.to_id_order(&self.p.contacts),
        })
    }

    fn export_state(&self) -> Result<SimState, StepError> {
        let hist: Vec<[HistEntry; HISTORY_CAP]> = self.to_id_order(&self.p.hist);
        Ok(SimState {
            time: self.time,
            step: self.step,
            species: self.to_id_order(&self.p.species),
            pos: self.to_id_order(&self.p.pos),
            vel: self.to_id_order(&self.p.vel),
            omega: self.to_id_order(&self.p.omega),
            force: self.to_id_order(&self.p.force),
            torque: self.to_id_order(&self.p.torque),
            forces_valid: self.forces_valid,
            contacts: self.to_id_order(&self.p.contacts),
            history: hist.into_iter().flatten().collect(),
            history_overflows: self.stats.history_overflows,
        })
    }

    fn mesh_transforms(&self) -> Vec<BodyTransform> {
        self.meshes.transforms.clone()
    }

    fn timers(&self) -> StageTimers {
        self.timers
    }

    fn reset_timers(&mut self) {
        self.timers = StageTimers::default();
    }

    fn stats(&self) -> Result<BackendStats, StepError> {
        Ok(self.stats)
    }

    fn energies(&self) -> Result<Energies, StepError> {
        Ok(self.compute_energies())
    }
}
