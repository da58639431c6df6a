//! The CPU DEM worker (rayon): one sub-domain's particles, or all of them.
//!
//! Stages (Neubauer 2018, ch. 3): `prepare` (cell hash, sort, cell start over the worker's window
//! of the global grid, mesh placement; every `reorder_every` steps the owned particles are
//! permuted into cell order) -> `forces` (gather: each owned particle sums its own contacts in a
//! fixed neighbour order, no atomics) -> `integrate`. Results are bit-identical for any number of
//! threads, any number of sub-domains and across checkpoint restarts, because no floating-point
//! sum depends on thread scheduling, storage order or ownership: neighbours are visited by cell
//! coordinates and, within a cell, by id, and a ghost is an exact copy of its owner's particle.
//!
//! Contact history is per particle: [`HISTORY_CAP`] slots of (partner key, tangential spring),
//! double-buffered; both partners of a particle pair keep their own copy, updated by the same
//! (mirrored) arithmetic, so a particle takes its history along when it migrates.

mod contacts;
mod stages;

use crate::core::geometry::{BodyTransform, MeshWorld};
use crate::core::grid::{CellList, Grid};
use crate::core::vec3::V3;
use crate::decomp::exchange::halo_routes;
use crate::decomp::Plan;
use crate::dem::exchange::{ParticleBatch, Particles};
use crate::dem::state::{HistEntry, SimState, StepContext, HISTORY_CAP};
use crate::dem::Dem;
use crate::exec::method::{Field, FieldSet, Method};
use crate::exec::stages::{Stage, StageTimers};
use crate::exec::worker::{BackendStats, Energies, IdIndex, Phase, RawKinematics, StagedWorker};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::Arc;

/// Host bytes per particle the CPU backend holds while it runs: the particle arrays (id,
/// species, contact count: u32; position, velocity, angular velocity, force, torque: f64 x 3;
/// [`HISTORY_CAP`] history slots), the second history buffer, the cell list (3 x u32 and the
/// 12-byte sort keys) and the largest temporary of the periodic reorder (one history array).
/// `exec::sim::Simulation` checks it against the available memory before placing particles.
pub const HOST_BYTES_PER_PARTICLE: u64 = {
    let u32_ = std::mem::size_of::<u32>();
    let hist = HISTORY_CAP * std::mem::size_of::<HistEntry>();
    let particles = 3 * u32_ + 5 * std::mem::size_of::<V3>() + hist;
    (particles + hist + u32_ + 3 * u32_ + hist) as u64
};

/// A CPU worker.
pub struct CpuWorker {
    ctx: Arc<StepContext>,
    grid: Arc<Grid>,
    plan: Arc<Plan>,
    /// This worker's index in the plan.
    rank: usize,
    /// Global cells of the window (slab and ghost layers).
    window: Range<u32>,
    p: Particles,
    /// The next step's contact history, written by `forces` and swapped with `p.hist` (kept
    /// between steps so that no step allocates it).
    hist_next: Vec<[HistEntry; HISTORY_CAP]>,
    cells: CellList,
    meshes: MeshWorld,
    timers: StageTimers,
    stats: BackendStats,
}

/// Splits `state` (id order) into one full-state batch per worker of `plan`.
pub fn distribute(state: SimState, grid: &Grid, plan: &Plan) -> Vec<ParticleBatch> {
    let mut out: Vec<ParticleBatch> = (0..plan.workers())
        .map(|_| ParticleBatch::new(Dem::MIGRATE))
        .collect();
    let SimState {
        id,
        species,
        pos,
        vel,
        omega,
        force,
        torque,
        contacts,
        history,
        history_cap,
        ..
    } = state;
    let mut dropped = 0usize;
    for k in 0..id.len() {
        // An empty history: no particle has a contact yet.
        let chunk: &[HistEntry] = if history.is_empty() {
            &[]
        } else {
            &history[k * history_cap..(k + 1) * history_cap]
        };
        let b = &mut out[plan.owner(grid, pos[k])];
        b.id.push(id[k]);
        b.species.push(species[k]);
        b.pos.push(pos[k]);
        b.vel.push(vel[k]);
        b.omega.push(omega[k]);
        b.force.push(force[k]);
        b.torque.push(torque[k]);
        b.contacts.push(contacts[k]);
        // Used slots come first; a state from a GPU with more than HISTORY_CAP slots keeps its
        // first HISTORY_CAP contacts' springs (the rest restart at zero, as any overflow).
        let mut h = [HistEntry::NONE; HISTORY_CAP];
        for (slot, e) in h.iter_mut().zip(chunk) {
            *slot = *e;
        }
        dropped += chunk
            .iter()
            .skip(HISTORY_CAP)
            .filter(|e| e.partner != crate::dem::state::PARTNER_NONE)
            .count();
        b.hist.push(h);
    }
    if dropped > 0 {
        tracing::warn!(
            "{dropped} contact history entries beyond the CPU's {HISTORY_CAP} per particle are \
             dropped; those contacts restart with a zero tangential spring"
        );
    }
    out
}

impl CpuWorker {
    /// Worker `rank` of `plan` over `grid` with its owned particles `own` (full state; every
    /// particle in the worker's slab). Meshes are placed at `time`.
    pub fn new(
        ctx: Arc<StepContext>,
        grid: Arc<Grid>,
        plan: Arc<Plan>,
        rank: usize,
        own: ParticleBatch,
        time: f64,
    ) -> Self {
        let window = grid.layer_range(plan.window(rank));
        let mut p = Particles::default();
        p.push_owned(own);
        let mut meshes = MeshWorld::new(&ctx.meshes);
        meshes.update(&ctx.meshes, &grid, time, ctx.max_radius());
        CpuWorker {
            ctx,
            grid,
            plan,
            rank,
            window,
            p,
            hist_next: Vec::new(),
            cells: CellList::default(),
            meshes,
            timers: StageTimers::default(),
            stats: BackendStats::default(),
        }
    }
}

impl StagedWorker for CpuWorker {
    type Msg = ParticleBatch;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn stable_dt(&self) -> f64 {
        self.ctx.dt
    }

    fn owned(&self) -> usize {
        self.p.own()
    }

    fn prepare(&mut self, step: u64, t: f64) {
        let t0 = std::time::Instant::now();
        self.prepare_stage(step, t);
        self.timers.add(Stage::Prepare, t0.elapsed());
    }

    fn forces(&mut self, dt: f64) {
        let t0 = std::time::Instant::now();
        self.forces_stage(dt);
        self.timers.add(Stage::Forces, t0.elapsed());
    }

    fn integrate(&mut self, phase: Phase, dt: f64) {
        let t0 = std::time::Instant::now();
        match phase {
            Phase::Euler => self.integrate_euler(dt),
            Phase::KickDrift => {
                self.half_kick(dt);
                self.drift(dt);
            }
            Phase::Kick => self.half_kick(dt),
        }
        self.timers.add(Stage::Integrate, t0.elapsed());
    }

    fn emigrate(&mut self) -> Vec<(usize, ParticleBatch)> {
        self.p.clear_ghosts();
        let (grid, plan) = (&*self.grid, &*self.plan);
        let owner: Vec<usize> = self
            .p
            .pos
            .par_iter()
            .map(|&x| plan.owner(grid, x))
            .collect();
        let mut out: Vec<(usize, ParticleBatch)> = Vec::new();
        let mut keep = vec![true; owner.len()];
        for (i, &w) in owner.iter().enumerate() {
            if w == self.rank {
                continue;
            }
            keep[i] = false;
            let k = match out.iter().position(|(to, _)| *to == w) {
                Some(k) => k,
                None => {
                    out.push((w, ParticleBatch::new(Dem::MIGRATE)));
                    out.len() - 1
                }
            };
            self.p.copy_to(i, &mut out[k].1);
        }
        if !out.is_empty() {
            self.p.retain_owned(&keep);
        }
        out
    }

    fn adopt(&mut self, batch: ParticleBatch) {
        self.p.clear_ghosts();
        self.p.push_owned(batch);
    }

    fn remove(&mut self, doomed: &(dyn Fn(V3) -> bool + Sync)) -> Vec<(u32, u32)> {
        let own = self.p.own();
        let hit: Vec<bool> = self.p.pos[..own].par_iter().map(|&x| doomed(x)).collect();
        if !hit.contains(&true) {
            return Vec::new();
        }
        self.p.clear_ghosts();
        let gone = (0..own)
            .filter(|&i| hit[i])
            .map(|i| (self.p.id[i], self.p.species[i]))
            .collect();
        let keep: Vec<bool> = hit.iter().map(|h| !h).collect();
        self.p.retain_owned(&keep);
        gone
    }

    fn immigrate(&mut self, inbox: Vec<ParticleBatch>) {
        for b in inbox {
            self.p.push_owned(b);
        }
    }

    fn set_plan(&mut self, plan: Arc<Plan>) {
        self.window = self.grid.layer_range(plan.window(self.rank));
        self.plan = plan;
    }

    fn layer_counts(&self) -> Vec<(u32, u64)> {
        let axis = self.plan.axis;
        let win = self.plan.window(self.rank);
        let mut count = vec![0u64; win.len()];
        for &x in &self.p.pos[..self.p.own()] {
            let l = self.grid.cell_coords(x)[axis];
            // Owned particles lie in the slab between exchanges; a worker asked just after an
            // inflow may hold one beyond it until the next exchange: counted at the window's edge.
            let k = l.clamp(win.start, win.end - 1) - win.start;
            count[k as usize] += 1;
        }
        count
            .into_iter()
            .enumerate()
            .filter(|&(_, c)| c > 0)
            .map(|(k, c)| (win.start + k as u32, c))
            .collect()
    }

    fn halo(&self) -> Vec<(usize, ParticleBatch)> {
        let routes = halo_routes(&self.plan, self.rank);
        if routes.is_empty() {
            return Vec::new();
        }
        let axis = self.plan.axis;
        let n = self.p.own();
        let layer: Vec<u32> = self.p.pos[..n]
            .par_iter()
            .map(|&x| self.grid.cell_coords(x)[axis])
            .collect();
        routes
            .iter()
            .map(|r| {
                let mut b = ParticleBatch::new(Dem::HALO);
                for (i, &l) in layer.iter().enumerate() {
                    if l == r.layer {
                        self.p.copy_to(i, &mut b);
                    }
                }
                (r.to, b)
            })
            .collect()
    }

    fn set_ghosts(&mut self, inbox: Vec<ParticleBatch>) {
        self.p.clear_ghosts();
        for b in &inbox {
            self.p.push_ghosts(b);
        }
    }

    fn first_nonfinite(&self) -> Option<u32> {
        self.first_nonfinite_id()
    }

    fn export(&self) -> ParticleBatch {
        let mut b = ParticleBatch::new(Dem::MIGRATE);
        let n = self.p.own();
        b.id = self.p.id[..n].to_vec();
        b.species = self.p.species[..n].to_vec();
        b.pos = self.p.pos[..n].to_vec();
        b.vel = self.p.vel[..n].to_vec();
        b.omega = self.p.omega[..n].to_vec();
        b.force = self.p.force.clone();
        b.torque = self.p.torque.clone();
        b.contacts = self.p.contacts.clone();
        b.hist = self.p.hist.clone();
        b
    }

    fn kinematics(&self) -> ParticleBatch {
        const FIELDS: FieldSet = FieldSet::of(&[
            Field::Id,
            Field::Position,
            Field::Velocity,
            Field::AngularVelocity,
            Field::Force,
            Field::Contacts,
        ]);
        let mut b = ParticleBatch::new(FIELDS);
        for i in 0..self.p.own() {
            self.p.copy_to(i, &mut b);
        }
        b
    }

    unsafe fn pack(&self, index: &IdIndex, out: &RawKinematics) {
        let (p, n) = (&self.p, self.p.own());
        let k = crate::exec::worker::KinematicsSlices {
            ids: &p.id[..n],
            pos: &p.pos[..n],
            vel: &p.vel[..n],
            omega: &p.omega[..n],
            force: &p.force,
            contacts: &p.contacts,
        };
        // SAFETY: forwarded contract.
        unsafe { crate::exec::worker::pack_kinematics(k, index, out) }
    }

    fn energies(&self, t: f64) -> Vec<(u32, Energies)> {
        let e = self.compute_energies(t);
        self.p.id.iter().copied().zip(e).collect()
    }

    fn stats(&self) -> BackendStats {
        self.stats
    }

    fn timers(&self) -> StageTimers {
        self.timers
    }

    fn reset_timers(&mut self) {
        self.timers = StageTimers::default();
    }

    fn mesh_transforms(&self) -> Vec<BodyTransform> {
        self.meshes.transforms.clone()
    }
}
