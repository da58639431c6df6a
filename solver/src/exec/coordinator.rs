//! The coordinator: owns the clock (time, step, dt), the decomposition plan, the workers and the
//! transport between them, and drives the stages of every step on all workers.
//!
//! With [`Crew::Staged`] workers (the CPU) a step is
//! `prepare -> forces -> integrate -> exchange -> reduce` (velocity Verlet:
//! `integrate (kick, drift) -> exchange -> prepare -> forces -> integrate (kick) -> reduce`), each
//! stage run on all workers in parallel and timed under its name. A single worker skips the
//! exchange. A [`Crew::Fused`] worker (one GPU) runs the same stages itself, queued per batch.
//!
//! A run over several processes (MPI ranks, [`Comm`]) has one coordinator per rank, each
//! driving its rank's block of the staged workers: the clock, plan and id index are the same on
//! every rank (every decision that changes them is taken from all-reduced or all-gathered
//! data), messages go through the [`Ranks`] transport, and the accessors that assemble
//! per-particle data (state, snapshot, energies, frames) gather it on rank 0. Every rank must
//! call the same collective methods in the same order; they say so in their documentation.

use super::comm::{decode, encode, rank_workers, Comm, Solo};
use super::stages::{Stage, StageTimers};
use super::transport::{InProcess, Ranks, Transport};
use super::worker::{
    BackendStats, Energies, FusedWorker, IdIndex, Phase, RawKinematics, Snapshot, StagedWorker,
    StepError,
};
use crate::case::Integrator;
use crate::core::geometry::BodyTransform;
use crate::core::grid::Grid;
use crate::decomp::balance::{self, Balance, BALANCE_INTERVAL};
use crate::decomp::{Axis, Decomposition, Plan, PlanError};
use crate::dem::cpu::{distribute, CpuWorker};
use crate::dem::exchange::ParticleBatch;
use crate::dem::state::{
    HistEntry, ParticleFlow, SimState, StepContext, HISTORY_CAP, PARTNER_NONE,
};
use rayon::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::ops::Range;
use std::sync::Arc;

/// Simulated time, step count and the current time step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clock {
    /// Simulated time [s].
    pub time: f64,
    /// Steps done since t = 0.
    pub step: u64,
    /// The time step of the next step [s]: the minimum of the workers' stable steps.
    pub dt: f64,
}

type Staged = Box<dyn StagedWorker<Msg = ParticleBatch>>;

/// The workers of a run.
pub enum Crew {
    /// Workers whose stages the coordinator drives (CPU sub-domains).
    Staged(Vec<Staged>),
    /// One worker that runs whole steps (one GPU).
    Fused(Box<dyn FusedWorker>),
}

/// See the module documentation.
pub struct Coordinator {
    clock: Clock,
    plan: Arc<Plan>,
    grid: Arc<Grid>,
    crew: Crew,
    transport: Box<dyn Transport<ParticleBatch>>,
    integrator: Integrator,
    /// Whether the stored forces belong to the current positions (velocity Verlet).
    forces_valid: bool,
    /// Shared with a frame still being assembled (rank 0 of several): it packs by the index of
    /// its step even when inflow or outflow replaced this one since.
    index: Arc<IdIndex>,
    /// Rank 0's frame whose other ranks' particles are still on their way.
    pending_frame: Option<PendingFrame>,
    /// History overflows counted before the workers started (from the state).
    base_overflows: u64,
    timers: StageTimers,
    migrations: Migrations,
    /// The run constants (staged workers: outflow regions, species masses).
    ctx: Option<Arc<StepContext>>,
    /// Particles removed and added since t = 0.
    flow: ParticleFlow,
    /// The case's inflow sources (staged workers), planned in `flow`.
    inflows: Option<super::inflow::Inflows>,
    /// The processes of the run ([`Solo`] for one).
    comm: Arc<dyn Comm>,
    /// Global indices of the workers this rank drives (all of them in one process).
    local: Range<usize>,
    /// Dynamic load balancing of the slab bounds.
    balance: Balance,
    /// Compute time of each local worker since the last balancing decision [s].
    busy: Vec<f64>,
    /// Balancing decisions that moved bounds since the run (re)started.
    rebalances: u64,
}

/// Particles that changed owner since the run (re)started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Migrations {
    pub particles: u64,
    /// Of those, particles that carried contact history.
    pub with_history: u64,
}

/// The split axis of a decomposition: the one asked for, else the longest axis of the domain.
pub fn split_axis(ctx: &StepContext, d: &Decomposition) -> Axis {
    d.split_axis
        .unwrap_or_else(|| Axis::longest(ctx.domain_min, ctx.domain_max))
}

impl Coordinator {
    /// CPU workers for `decomposition` over `state` (id order). One sub-domain is the
    /// undecomposed run (z slowest in the cell index, no halo).
    pub fn cpu(
        ctx: Arc<StepContext>,
        state: SimState,
        decomposition: &Decomposition,
    ) -> Result<Coordinator, PlanError> {
        Self::cpu_on(ctx, state, decomposition, Arc::new(Solo))
    }

    /// [`Coordinator::cpu`] over the ranks of `comm` (collective): every rank passes the same
    /// full `state` and keeps its block of the workers ([`rank_workers`]). The decomposition
    /// needs at least one sub-domain per rank.
    pub fn cpu_on(
        ctx: Arc<StepContext>,
        state: SimState,
        decomposition: &Decomposition,
        comm: Arc<dyn Comm>,
    ) -> Result<Coordinator, PlanError> {
        decomposition.check()?;
        let n = decomposition.subdomains;
        let axis = if n == 1 {
            2
        } else {
            split_axis(&ctx, decomposition).index()
        };
        let grid = Arc::new(ctx.grid(axis));
        let plan = Arc::new(if n == 1 {
            Plan::single(&grid)
        } else {
            Plan::balanced(&grid, n, &state.pos)?
        });
        let (time, step) = (state.time, state.step);
        let (forces_valid, base_overflows) = (state.forces_valid, state.history_overflows);
        let index = Arc::new(IdIndex::new(&state.id));
        let flow = state.flow.clone();
        let ranks = comm.size();
        assert!(
            n as usize >= ranks,
            "{n} sub-domains for {ranks} ranks: each rank needs one"
        );
        let blocks: Vec<Range<usize>> = (0..ranks)
            .map(|r| rank_workers(n as usize, ranks, r))
            .collect();
        let local = blocks[comm.rank()].clone();
        let transport: Box<dyn Transport<ParticleBatch>> = if ranks > 1 {
            Box::new(Ranks::new(comm.clone(), blocks))
        } else {
            Box::new(InProcess)
        };
        let workers: Vec<Staged> = distribute(state, &grid, &plan)
            .into_iter()
            .enumerate()
            .filter(|(rank, _)| local.contains(rank))
            .map(|(rank, own)| {
                Box::new(CpuWorker::new(
                    ctx.clone(),
                    grid.clone(),
                    plan.clone(),
                    rank,
                    own,
                    time,
                )) as Staged
            })
            .collect();
        let mut c = Coordinator {
            clock: Clock {
                time,
                step,
                dt: ctx.dt,
            },
            plan,
            grid,
            crew: Crew::Staged(workers),
            transport,
            integrator: ctx.integrator,
            forces_valid,
            index,
            pending_frame: None,
            base_overflows,
            timers: StageTimers::default(),
            migrations: Migrations::default(),
            ctx: Some(ctx.clone()),
            flow,
            inflows: None,
            comm,
            busy: vec![0.0; local.len()],
            local,
            balance: decomposition.balance,
            rebalances: 0,
        };
        c.clock.dt = c.reduce_dt();
        c.exchange_halo();
        Ok(c)
    }

    /// One fused worker (a GPU) holding the particles `ids`.
    pub fn fused(worker: Box<dyn FusedWorker>, ids: &[u32], step: u64, grid: Grid) -> Self {
        let clock = Clock {
            time: worker.time(),
            step,
            dt: worker.stable_dt(),
        };
        Coordinator {
            clock,
            plan: Arc::new(Plan::single(&grid)),
            grid: Arc::new(grid),
            crew: Crew::Fused(worker),
            transport: Box::new(InProcess),
            integrator: Integrator::default(),
            forces_valid: false,
            index: Arc::new(IdIndex::new(ids)),
            pending_frame: None,
            base_overflows: 0,
            timers: StageTimers::default(),
            migrations: Migrations::default(),
            ctx: None,
            flow: ParticleFlow {
                next_id: ids.last().map_or(0, |&id| id + 1),
                ..Default::default()
            },
            inflows: None,
            comm: Arc::new(Solo),
            local: 0..1,
            balance: Balance::Off,
            busy: vec![0.0],
            rebalances: 0,
        }
    }

    /// Gives a fused worker's run its constants (outflow accounting: species masses) and the
    /// particles removed and added before it started.
    pub fn set_context(&mut self, ctx: Arc<StepContext>, flow: ParticleFlow) {
        self.ctx = Some(ctx);
        self.flow = flow;
    }

    /// Gives the run its inflow sources (planned into the state's flow already).
    pub fn set_inflows(&mut self, inflows: super::inflow::Inflows) {
        self.inflows = Some(inflows);
    }

    /// Particles removed and added since t = 0.
    pub fn flow(&self) -> &ParticleFlow {
        &self.flow
    }

    /// Particles that changed owner since the run (re)started.
    pub fn migrations(&self) -> Migrations {
        self.migrations
    }

    pub fn clock(&self) -> Clock {
        self.clock
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    pub fn crew(&self) -> &Crew {
        &self.crew
    }

    /// Particles in id order.
    pub fn index(&self) -> &IdIndex {
        &self.index
    }

    /// The processes of the run.
    pub fn comm(&self) -> &Arc<dyn Comm> {
        &self.comm
    }

    /// Every rank's `local` items, concatenated in rank order on every rank (collective).
    fn all_gather_vec<T: Serialize + DeserializeOwned>(&self, local: Vec<T>, what: &str) -> Vec<T> {
        if self.comm.size() == 1 {
            return local;
        }
        self.comm
            .all_gather(encode(&local))
            .iter()
            .flat_map(|b| decode::<Vec<T>>(b, what))
            .collect()
    }

    /// Every rank's `local` items in rank order on rank 0; `None` on the other ranks
    /// (collective).
    fn gather_vec<T: Serialize + DeserializeOwned>(
        &self,
        local: Vec<T>,
        what: &str,
    ) -> Option<Vec<T>> {
        if self.comm.size() == 1 {
            return Some(local);
        }
        let root = self.comm.is_root();
        let all = self
            .comm
            .gather(if root { Vec::new() } else { encode(&local) });
        root.then(|| {
            let mut out = local;
            for b in &all[1..] {
                out.extend(decode::<Vec<T>>(b, what));
            }
            out
        })
    }

    /// Stage `reduce` for the time step: the minimum over the workers (collective).
    fn reduce_dt(&self) -> f64 {
        match &self.crew {
            Crew::Staged(w) => self.comm.min_f64(
                w.iter()
                    .map(|w| w.stable_dt())
                    .fold(f64::INFINITY, f64::min),
            ),
            Crew::Fused(w) => w.stable_dt(),
        }
    }

    /// Advances `n` steps.
    pub fn advance(&mut self, n: u64) -> Result<(), StepError> {
        if let Crew::Fused(_) = &self.crew {
            // In runs of steps up to the next one that ends with an inflow batch: the worker
            // queues a run as a batch; the coordinator places the batch between steps, as it
            // does for staged workers.
            let mut left = n;
            while left > 0 {
                let (chunk, due) = self.steps_to_inflow(left);
                match due {
                    None => self.advance_fused(chunk, false)?,
                    Some(t_prev) => {
                        // Velocity Verlet places them after the drift, before the forces.
                        self.advance_fused(chunk, true)?;
                        let t = t_prev + self.clock.dt;
                        self.inflow_fused(t_prev, t)?;
                        let Crew::Fused(w) = &mut self.crew else {
                            unreachable!("a fused worker")
                        };
                        w.finish_step()?;
                        self.clock.time = w.time();
                    }
                }
                left -= chunk;
            }
            return Ok(());
        }
        for _ in 0..n {
            self.step_staged()?;
        }
        Ok(())
    }

    /// Steps (at most `left`) up to and including the next that ends with an inflow batch due,
    /// and that step's start time (None: no batch within `left` steps). The clock is advanced
    /// as the workers advance theirs (t += dt), so the times are the same bits.
    fn steps_to_inflow(&self, left: u64) -> (u64, Option<f64>) {
        let Some(inflows) = &self.inflows else {
            return (left, None);
        };
        let dt = match &self.crew {
            Crew::Fused(w) => w.stable_dt(),
            Crew::Staged(_) => self.clock.dt,
        };
        let mut t = self.clock.time;
        for k in 1..=left {
            let t2 = t + dt;
            if inflows.any_batch(&self.flow, t, t2) {
                return (k, Some(t));
            }
            t = t2;
        }
        (left, None)
    }

    /// `n` steps of the fused worker (to the placement point of the last one with
    /// `to_placement`), then the accounting of the particles it removed.
    fn advance_fused(&mut self, n: u64, to_placement: bool) -> Result<(), StepError> {
        let Crew::Fused(w) = &mut self.crew else {
            unreachable!("a fused worker")
        };
        let r = if to_placement {
            w.advance_to_placement(n)
        } else {
            w.advance(n)
        };
        self.clock.time = w.time();
        if r.is_ok() {
            self.clock.step += n;
        }
        self.clock.dt = w.stable_dt();
        r?;
        let gone = w.take_removed()?;
        if !gone.is_empty() {
            self.account_removed(gone.into_iter().map(|g| (g.0, g.1)).collect());
        }
        Ok(())
    }

    /// The inflow batches due in (t_prev, t], placed among the fused worker's live particles.
    fn inflow_fused(&mut self, t_prev: f64, t: f64) -> Result<(), StepError> {
        let Some(mut inflows) = self.inflows.take() else {
            return Ok(());
        };
        let t0 = std::time::Instant::now();
        let Crew::Fused(w) = &mut self.crew else {
            unreachable!("a fused worker")
        };
        let placed = match w.positions() {
            Ok(existing) => {
                let new = inflows.place(&mut self.flow, t_prev, t, &existing);
                w.adopt(&new).map(|()| new)
            }
            Err(e) => Err(e),
        };
        self.inflows = Some(inflows);
        let new = placed?;
        if !new.is_empty() {
            let mut ids = self.index.ids();
            ids.extend(new.iter().map(|p| p.id));
            ids.sort_unstable();
            self.index = Arc::new(IdIndex::new(&ids));
        }
        self.timers.add(Stage::Exchange, t0.elapsed());
        Ok(())
    }

    fn workers(&mut self) -> &mut Vec<Staged> {
        match &mut self.crew {
            Crew::Staged(w) => w,
            Crew::Fused(_) => unreachable!("staged stages on a fused worker"),
        }
    }

    /// Runs `f` on every local worker in parallel, adding each one's time to its busy time
    /// (the input of time balancing), and the stage's wall time to `stage`.
    fn on_workers(&mut self, stage: Stage, f: impl Fn(&mut Staged) + Sync) {
        let Crew::Staged(w) = &mut self.crew else {
            unreachable!("staged stages on a fused worker")
        };
        let t0 = std::time::Instant::now();
        w.par_iter_mut()
            .zip(self.busy.par_iter_mut())
            .for_each(|(w, busy)| {
                let t = std::time::Instant::now();
                f(w);
                *busy += t.elapsed().as_secs_f64();
            });
        self.timers.add(stage, t0.elapsed());
    }

    fn prepare(&mut self, t: f64) {
        let step = self.clock.step;
        self.on_workers(Stage::Prepare, |w| w.prepare(step, t));
    }

    fn forces(&mut self, dt: f64) {
        self.on_workers(Stage::Forces, |w| w.forces(dt));
        self.forces_valid = true;
    }

    fn integrate(&mut self, phase: Phase, dt: f64) {
        self.on_workers(Stage::Integrate, |w| w.integrate(phase, dt));
    }

    /// Balancing decisions that moved slab bounds since the run (re)started.
    pub fn rebalances(&self) -> u64 {
        match &self.crew {
            Crew::Fused(w) => w.rebalances(),
            Crew::Staged(_) => self.rebalances,
        }
    }

    /// Every [`BALANCE_INTERVAL`] steps: moves the slab bounds toward equal work (collective:
    /// every rank decides from the same all-gathered counts and times), then exchanges so that
    /// the particles of moved layers reach their new owners. Results do not change.
    fn rebalance(&mut self) {
        if self.balance == Balance::Off
            || self.plan.workers() < 2
            || !self.clock.step.is_multiple_of(BALANCE_INTERVAL)
        {
            return;
        }
        let t0 = std::time::Instant::now();
        let Crew::Staged(w) = &self.crew else {
            return;
        };
        let counts: Vec<(u32, u64)> = w.iter().flat_map(|w| w.layer_counts()).collect();
        let busy: Vec<(usize, f64)> = self
            .busy
            .iter()
            .enumerate()
            .map(|(i, &b)| (self.local.start + i, b))
            .collect();
        self.busy.iter_mut().for_each(|b| *b = 0.0);
        let counts = self.all_gather_vec(counts, "layer counts");
        let busy = self.all_gather_vec(busy, "worker times");
        let mut per_layer = vec![0u64; self.grid.dims[self.plan.axis] as usize];
        for (l, c) in counts {
            per_layer[l as usize] += c;
        }
        let mut per_worker = vec![0.0; self.plan.workers()];
        for (w, b) in busy {
            per_worker[w] = b;
        }
        let bounds = &self.plan.bounds;
        let Some(new) = balance::decide(self.balance, bounds, &per_layer, &per_worker, 1) else {
            self.timers.add(Stage::Reduce, t0.elapsed());
            return;
        };
        tracing::debug!(
            step = self.clock.step,
            by = self.balance.name(),
            from = ?bounds,
            to = ?new,
            busy = ?per_worker,
            "slab bounds moved"
        );
        let plan = Arc::new(Plan {
            axis: self.plan.axis,
            bounds: new,
        });
        self.plan = plan.clone();
        for w in self.workers().iter_mut() {
            w.set_plan(plan.clone());
        }
        self.rebalances += 1;
        self.timers.add(Stage::Reduce, t0.elapsed());
        self.exchange();
    }

    fn step_staged(&mut self) -> Result<(), StepError> {
        let t0 = std::time::Instant::now();
        let dt = self.reduce_dt();
        self.clock.dt = dt;
        self.timers.add(Stage::Reduce, t0.elapsed());
        let t = self.clock.time;
        match self.integrator {
            Integrator::SymplecticEuler => {
                self.prepare(t);
                self.forces(dt);
                self.integrate(Phase::Euler, dt);
                self.outflow();
                self.inflow(t, t + dt);
                self.exchange();
            }
            Integrator::VelocityVerlet => {
                if !self.forces_valid {
                    self.prepare(t);
                    self.forces(dt);
                }
                self.integrate(Phase::KickDrift, dt);
                self.outflow();
                self.inflow(t, t + dt);
                self.exchange();
                self.prepare(t + dt);
                self.forces(dt);
                self.integrate(Phase::Kick, dt);
            }
        }
        self.clock.time += dt;
        self.clock.step += 1;
        self.timers.steps += 1;
        self.rebalance();
        let t0 = std::time::Instant::now();
        let bad = self
            .workers()
            .par_iter()
            .filter_map(|w| w.first_nonfinite())
            .min();
        let bad = self.comm.min_u64(bad.map_or(u64::MAX, u64::from));
        self.timers.add(Stage::Reduce, t0.elapsed());
        match u32::try_from(bad).ok() {
            Some(id) => Err(StepError::NonFinite {
                id,
                step: self.clock.step,
                time: self.clock.time,
            }),
            None => Ok(()),
        }
    }

    /// Outflow regions (timed as `exchange`: particles leaving the run): removes the particles
    /// whose centre lies in one, counts them and their mass in id order (the same bits for any
    /// decomposition), and drops their ids from the index.
    fn outflow(&mut self) {
        let Some(ctx) = self.ctx.clone() else {
            return;
        };
        if ctx.outflows.is_empty() {
            return;
        }
        let t0 = std::time::Instant::now();
        let (lo, hi) = (ctx.domain_min, ctx.domain_max);
        let doomed = |p: crate::core::vec3::V3| ctx.outflows.iter().any(|o| o.contains(p, lo, hi));
        let gone: Vec<(u32, u32)> = self
            .workers()
            .par_iter_mut()
            .flat_map(|w| w.remove(&doomed))
            .collect();
        let mut gone = self.all_gather_vec(gone, "removed particles");
        gone.sort_unstable();
        self.account_removed(gone);
        self.timers.add(Stage::Exchange, t0.elapsed());
    }

    /// Counts removed particles (id, species) and their mass in the given order (id order per
    /// step: the same bits for any decomposition and device) and drops their ids from the index.
    fn account_removed(&mut self, gone: Vec<(u32, u32)>) {
        let Some(ctx) = self.ctx.clone() else {
            return;
        };
        if !gone.is_empty() {
            for &(_, s) in &gone {
                self.flow.removed_count += 1;
                self.flow.removed_mass += ctx.species_mass[s as usize];
            }
            let mut dead: Vec<u32> = gone.iter().map(|g| g.0).collect();
            dead.sort_unstable();
            let mut dead = dead.into_iter().peekable();
            let ids: Vec<u32> = self
                .index
                .ids()
                .into_iter()
                .filter(|&id| {
                    while dead.peek().is_some_and(|&d| d < id) {
                        dead.next();
                    }
                    dead.peek() != Some(&id)
                })
                .collect();
            self.index = Arc::new(IdIndex::new(&ids));
        }
    }

    /// Inflow batches due in (t_prev, t] (timed as `exchange`: particles entering the run):
    /// placed among the current positions, handed to the workers that own their positions, and
    /// added to the index.
    fn inflow(&mut self, t_prev: f64, t: f64) {
        let Some(mut inflows) = self.inflows.take() else {
            return;
        };
        if inflows.any_batch(&self.flow, t_prev, t) {
            let t0 = std::time::Instant::now();
            let existing: Vec<crate::core::vec3::V3> = self
                .workers()
                .par_iter()
                .flat_map(|w| w.kinematics().pos)
                .collect();
            let existing = self.all_gather_vec(existing, "positions");
            let new = inflows.place(&mut self.flow, t_prev, t, &existing);
            if !new.is_empty() {
                let (plan, grid) = (self.plan.clone(), self.grid.clone());
                let mut batches: Vec<ParticleBatch> = (0..plan.workers())
                    .map(|_| {
                        ParticleBatch::new(<crate::dem::Dem as super::method::Method>::MIGRATE)
                    })
                    .collect();
                for p in &new {
                    let b = &mut batches[plan.owner(&grid, p.pos)];
                    b.id.push(p.id);
                    b.species.push(p.species);
                    b.pos.push(p.pos);
                    b.vel.push(p.vel);
                    b.omega.push([0.0; 3]);
                    b.force.push([0.0; 3]);
                    b.torque.push([0.0; 3]);
                    b.contacts.push(0);
                    b.hist.push([HistEntry::NONE; HISTORY_CAP]);
                }
                let local = self.local.clone();
                self.workers()
                    .par_iter_mut()
                    .zip(
                        batches
                            .into_iter()
                            .skip(local.start)
                            .take(local.len())
                            .collect::<Vec<_>>(),
                    )
                    .for_each(|(w, b)| {
                        if !b.is_empty() {
                            w.adopt(b)
                        }
                    });
                let mut ids = self.index.ids();
                ids.extend(new.iter().map(|p| p.id));
                ids.sort_unstable();
                self.index = Arc::new(IdIndex::new(&ids));
            }
            self.timers.add(Stage::Exchange, t0.elapsed());
        }
        self.inflows = Some(inflows);
    }

    /// Stage `exchange`: migration, then the ghost refresh (nothing for a single worker).
    fn exchange(&mut self) {
        if self.plan.workers() < 2 {
            return;
        }
        let t0 = std::time::Instant::now();
        let Crew::Staged(w) = &mut self.crew else {
            return;
        };
        let out: Vec<_> = w.par_iter_mut().map(|w| w.emigrate()).collect();
        let inbox = self.transport.deliver(out);
        for b in inbox.iter().flatten() {
            self.migrations.particles += b.len() as u64;
            self.migrations.with_history += b
                .hist
                .iter()
                .filter(|h| h.iter().any(|e| e.partner != PARTNER_NONE))
                .count() as u64;
        }
        w.par_iter_mut()
            .zip(inbox)
            .for_each(|(w, inbox)| w.immigrate(inbox));
        self.timers.add(Stage::Exchange, t0.elapsed());
        self.exchange_halo();
    }

    /// The ghost refresh alone.
    fn exchange_halo(&mut self) {
        if self.plan.workers() < 2 {
            return;
        }
        let t0 = std::time::Instant::now();
        let Crew::Staged(w) = &mut self.crew else {
            return;
        };
        let out: Vec<_> = w.par_iter().map(|w| w.halo()).collect();
        let inbox = self.transport.deliver(out);
        w.par_iter_mut()
            .zip(inbox)
            .for_each(|(w, inbox)| w.set_ghosts(inbox));
        self.timers.add(Stage::Exchange, t0.elapsed());
    }

    /// The full state in id order, assembled from every worker (collective: on ranks other
    /// than 0 it is a state without particles).
    pub fn export_state(&self) -> Result<SimState, StepError> {
        let w = match &self.crew {
            Crew::Fused(w) => {
                let mut s = w.export_state()?;
                s.flow = self.flow.clone();
                return Ok(s);
            }
            Crew::Staged(w) => w,
        };
        let history_overflows = self.stats()?.history_overflows;
        let local: Vec<ParticleBatch> = w.iter().map(|w| w.export()).collect();
        let Some(batches) = self.gather_vec(local, "particle states") else {
            return Ok(SimState::new(
                self.clock.time,
                self.clock.step,
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
            ));
        };
        let n = self.index.len();
        let mut s = SimState {
            time: self.clock.time,
            step: self.clock.step,
            id: self.index.ids(),
            species: vec![0; n],
            pos: vec![[0.0; 3]; n],
            vel: vec![[0.0; 3]; n],
            omega: vec![[0.0; 3]; n],
            force: vec![[0.0; 3]; n],
            torque: vec![[0.0; 3]; n],
            forces_valid: self.forces_valid,
            contacts: vec![0; n],
            history: vec![HistEntry::NONE; n * HISTORY_CAP],
            history_cap: HISTORY_CAP,
            history_overflows,
            flow: self.flow.clone(),
        };
        let mut seen = 0;
        for b in batches {
            seen += b.len();
            for i in 0..b.len() {
                let k = self.index.of(b.id[i]);
                s.species[k] = b.species[i];
                s.pos[k] = b.pos[i];
                s.vel[k] = b.vel[i];
                s.omega[k] = b.omega[i];
                s.force[k] = b.force[i];
                s.torque[k] = b.torque[i];
                s.contacts[k] = b.contacts[i];
                s.history[k * HISTORY_CAP..(k + 1) * HISTORY_CAP].copy_from_slice(&b.hist[i]);
            }
        }
        assert_eq!(seen, n, "workers hold {seen} particles, the run {n}");
        Ok(s)
    }

    /// Kinematics in id order (f64; collective: empty on ranks other than 0).
    pub fn snapshot(&self) -> Result<Snapshot, StepError> {
        let w = match &self.crew {
            Crew::Fused(w) => return w.snapshot(),
            Crew::Staged(w) => w,
        };
        let local: Vec<ParticleBatch> = w.iter().map(|w| w.kinematics()).collect();
        let Some(batches) = self.gather_vec(local, "kinematics") else {
            return Ok(Snapshot::default());
        };
        let n = self.index.len();
        let mut s = Snapshot {
            pos: vec![[0.0; 3]; n],
            vel: vec![[0.0; 3]; n],
            omega: vec![[0.0; 3]; n],
            force: vec![[0.0; 3]; n],
            contacts: vec![0; n],
        };
        for b in batches {
            for i in 0..b.len() {
                let k = self.index.of(b.id[i]);
                s.pos[k] = b.pos[i];
                s.vel[k] = b.vel[i];
                s.omega[k] = b.omega[i];
                s.force[k] = b.force[i];
                s.contacts[k] = b.contacts[i];
            }
        }
        Ok(s)
    }

    /// Energies summed in id order (the same bits for any decomposition; collective: zero on
    /// ranks other than 0).
    pub fn energies(&mut self) -> Result<Energies, StepError> {
        let w = match &mut self.crew {
            Crew::Fused(w) => return w.energies(),
            Crew::Staged(w) => w,
        };
        let t = self.clock.time;
        let local: Vec<(u32, [f64; 4])> = w
            .iter()
            .flat_map(|w| w.energies(t))
            .map(|(id, e)| {
                let Energies {
                    kinetic_translation: a,
                    kinetic_rotation: b,
                    potential: c,
                    elastic: d,
                } = e;
                (id, [a, b, c, d])
            })
            .collect();
        let Some(all) = self.gather_vec(local, "energies") else {
            return Ok(Energies::default());
        };
        let mut per = vec![Energies::default(); self.index.len()];
        for (id, [a, b, c, d]) in all {
            per[self.index.of(id)] = Energies {
                kinetic_translation: a,
                kinetic_rotation: b,
                potential: c,
                elastic: d,
            };
        }
        let mut total = Energies::default();
        for e in per {
            total.kinetic_translation += e.kinetic_translation;
            total.kinetic_rotation += e.kinetic_rotation;
            total.potential += e.potential;
            total.elastic += e.elastic;
        }
        Ok(total)
    }

    /// Counters summed over every worker (collective).
    pub fn stats(&self) -> Result<BackendStats, StepError> {
        match &self.crew {
            Crew::Fused(w) => w.stats(),
            Crew::Staged(w) => {
                let local = w.iter().fold(BackendStats::default(), |acc, w| {
                    let s = w.stats();
                    BackendStats {
                        history_overflows: acc.history_overflows + s.history_overflows,
                        contacts: acc.contacts + s.contacts,
                    }
                });
                Ok(BackendStats {
                    history_overflows: self.base_overflows
                        + self.comm.sum_u64(local.history_overflows),
                    contacts: self.comm.sum_u64(local.contacts),
                })
            }
        }
    }

    /// Stage timers since the last reset (wall time of each stage over all workers).
    pub fn timers(&self) -> StageTimers {
        match &self.crew {
            Crew::Fused(w) => {
                let mut t = w.timers();
                t.add_stages(&self.timers);
                t
            }
            Crew::Staged(_) => self.timers,
        }
    }

    /// Each staged worker's own stage times (the input of load balancing).
    pub fn worker_timers(&self) -> Vec<StageTimers> {
        match &self.crew {
            Crew::Fused(w) => vec![w.timers()],
            Crew::Staged(w) => w.iter().map(|w| w.timers()).collect(),
        }
    }

    pub fn reset_timers(&mut self) {
        self.timers = StageTimers::default();
        match &mut self.crew {
            Crew::Fused(w) => w.reset_timers(),
            Crew::Staged(w) => w.iter_mut().for_each(|w| w.reset_timers()),
        }
    }

    /// Adds time spent outside [`Coordinator::advance`] to `stage` (the publish stage runs in
    /// the application's loop).
    pub fn add_time(&mut self, stage: Stage, d: std::time::Duration) {
        self.timers.add(stage, d);
    }

    pub fn mesh_transforms(&self) -> Vec<BodyTransform> {
        match &self.crew {
            Crew::Fused(w) => w.mesh_transforms(),
            Crew::Staged(w) => w.first().map(|w| w.mesh_transforms()).unwrap_or_default(),
        }
    }

    /// Owned particles per worker (of this rank's workers in a run over several processes).
    pub fn worker_loads(&self) -> Vec<usize> {
        match &self.crew {
            Crew::Fused(w) => {
                let l = w.loads();
                if l.is_empty() {
                    vec![self.index.len()]
                } else {
                    l
                }
            }
            Crew::Staged(w) => w.iter().map(|w| w.owned()).collect(),
        }
    }

    pub fn fused_mut(&mut self) -> Option<&mut dyn FusedWorker> {
        match &mut self.crew {
            Crew::Fused(w) => Some(w.as_mut()),
            Crew::Staged(_) => None,
        }
    }

    /// Writes the current kinematics into `out` (id order). Returns `true` when a device copy
    /// is still in flight. Collective: the other ranks' particles are gathered on rank 0, which
    /// writes them; the other ranks pass null pointers.
    ///
    /// # Safety
    /// As [`FusedWorker::begin_kinematics_copy`].
    pub unsafe fn begin_kinematics_copy(&mut self, out: RawKinematics) -> Result<bool, StepError> {
        assert_eq!(
            out.count,
            self.index.len(),
            "frame of the wrong particle count"
        );
        match &mut self.crew {
            // SAFETY: forwarded contract.
            Crew::Fused(w) => unsafe { w.begin_kinematics_copy(out) },
            Crew::Staged(w) => {
                let index = &self.index;
                let root = self.comm.is_root();
                if root {
                    for w in w.iter() {
                        // SAFETY: forwarded contract; workers own disjoint ids, so their writes
                        // go to disjoint elements.
                        unsafe { w.pack(index, &out) };
                    }
                }
                if self.comm.size() > 1 {
                    if !root {
                        // This rank's particles leave for rank 0 without waiting for it.
                        let local: Vec<ParticleBatch> = w.iter().map(|w| w.kinematics()).collect();
                        self.comm.post_to_root(encode(&local));
                        return Ok(false);
                    }
                    // Rank 0 packs the other ranks' particles as they arrive
                    // (kinematics_copy_done), with the index of this step. A frame still
                    // pending is completed first: its parts must not land in this one.
                    self.take_frame_parts(true);
                    self.pending_frame = Some(PendingFrame {
                        out,
                        index: self.index.clone(),
                        waiting: (1..self.comm.size()).collect(),
                    });
                    return Ok(!self.take_frame_parts(false));
                }
                Ok(false)
            }
        }
    }

    /// Whether the frame [`Coordinator::begin_kinematics_copy`] started is complete (rank 0 of
    /// several: packs the other ranks' parts that arrived, never waits).
    pub fn kinematics_copy_done(&mut self) -> Result<bool, StepError> {
        match &mut self.crew {
            Crew::Fused(w) => w.kinematics_copy_done(),
            Crew::Staged(_) => Ok(self.take_frame_parts(false)),
        }
    }

    /// Completes the frame [`Coordinator::begin_kinematics_copy`] started.
    pub fn wait_kinematics_copy(&mut self) -> Result<(), StepError> {
        match &mut self.crew {
            Crew::Fused(w) => w.wait_kinematics_copy(),
            Crew::Staged(_) => {
                self.take_frame_parts(true);
                Ok(())
            }
        }
    }

    /// Packs the parts of the pending frame that have arrived (all of them, waiting, with
    /// `wait`); true when the frame is complete (or none is pending).
    fn take_frame_parts(&mut self, wait: bool) -> bool {
        let Some(p) = self.pending_frame.as_mut() else {
            return true;
        };
        let (out, index) = (&p.out, &p.index);
        let done = super::comm::take_posts(self.comm.as_ref(), &mut p.waiting, wait, |bytes| {
            for b in decode::<Vec<ParticleBatch>>(&bytes, "kinematics") {
                let k = crate::exec::worker::KinematicsSlices {
                    ids: &b.id,
                    pos: &b.pos,
                    vel: &b.vel,
                    omega: &b.omega,
                    force: &b.force,
                    contacts: &b.contacts,
                };
                // SAFETY: begin_kinematics_copy's contract keeps `out` valid and untouched
                // until the frame is complete; the ranks' particles are disjoint.
                unsafe { crate::exec::worker::pack_kinematics(k, index, out) };
            }
        });
        if done {
            self.pending_frame = None;
        }
        done
    }
}

/// Rank 0's frame while the other ranks' particles are on their way (MPI): where they go
/// and by which index.
struct PendingFrame {
    out: RawKinematics,
    index: Arc<IdIndex>,
    /// Ranks whose part has not arrived.
    waiting: Vec<usize>,
}
