//! One SPH simulation over several MPI ranks on the CPU (`mpirun -np N solver --backend cpu
//! --case dambreak.toml`): rank r steps slab r of the cut the GPU ranks make ([`SlabCut`]) with
//! the CPU reference's pair sums and integrator ([`SphSim`]), so the ranks give the bits of one
//! process.
//!
//! Every rank keeps arrays for all particles (the start broadcast gives it the whole state) but
//! reads only those it holds: the particles it integrated at the last evaluation (its own) and
//! the ones its neighbours sent for this evaluation. Before each of a step's two evaluations a
//! rank sends each neighbour its own particles (fluid and boundary) that lie, at this
//! evaluation's positions, in the neighbour's layers or halo (one layer of the kernel support
//! on each side), with their state at the start of the step for the corrector. It then holds
//! every fluid particle within the support of each particle in its layers, sums their pairs in
//! (cell, x, id) order on the run's one grid as one process does, and integrates the particles in
//! its layers. The time-step limits are reduced (a minimum is exact), and the bounds follow the
//! work from all-gathered counts and busy times, as on GPUs; a moved bound needs no transfer of
//! its own, since the next exchange sends the neighbour what it now owns or borders.
//!
//! Moving solids ([`MovingSolids`]) are placed by every rank from their motion, all of them, at
//! the half step and at the end of the step, as one process places them; their density is
//! integrated by the rank whose layers hold them at the evaluation and travels in the records
//! as a fluid particle's does, so their owner changes as they cross a bound.
//!
//! A state is gathered on rank 0; a frame's parts are posted to rank 0 without waiting and
//! placed by id as they arrive ([`super::parts`]).

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::cpu::{
    correct, next_time_step, predict, sph_layer_of, verlet_is_euler, verlet_particle, Rates,
    SphSim, SphState,
};
use super::motion::MovingSolids;
use super::parts::{assemble_state, take_parts, FramePart, OwnedParticles, PendingFrame};
use super::physics::{self, FluidState};
use super::setup::{Integrator, SphConstants, KIND_FLUID};
use super::slabs::{decide_over_ranks, owner_of, reach_of, SlabCut, SlabOptions, TooFewLayers};
use crate::core::vec3::V3;
use crate::decomp::balance::Balance;
use crate::exec::comm::{decode, encode, Comm};

/// Why a CPU rank of an SPH run stopped.
#[derive(Debug, thiserror::Error)]
pub enum SphRankError {
    #[error("{0}: use fewer MPI ranks (or --split-axis along a longer axis)")]
    TooFewLayers(#[from] TooFewLayers),
    #[error(
        "{count} particles crossed a whole neighbour rank's slab in one step (after step {step}); \
         the time step is probably too large"
    )]
    SlabSkipped { count: u64, step: u64 },
    #[error(
        "{count} particles have a non-finite state after step {step} (t = {time} s): the time \
         step or the case is unstable"
    )]
    NonFinite { count: u64, step: u64, time: f64 },
    #[error("internal error: {0}; please report this with the case")]
    Internal(String),
}

/// How an SPH run is spread over CPU ranks.
#[derive(Debug, Clone)]
pub struct SphCpuRankOptions {
    pub comm: Arc<dyn Comm>,
    /// The cut and its balancing.
    pub slabs: SlabOptions,
    /// What the log calls a rank: "rank" over MPI, "sub-domain" for threads of one process.
    pub label: &'static str,
}

/// Particles a rank sends a neighbour before an evaluation: ids, position, velocity and density
/// at the evaluation, and (before the corrector's evaluation only) at the start of the step, or
/// with the Verlet integrator the velocity and density one step back (position unused).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Records {
    id: Vec<u32>,
    now: Vec<[f64; 7]>,
    start: Vec<[f64; 7]>,
}

/// What [`SphCpuRank::first_evaluation`] leaves a step: the particles this rank owns (ids,
/// ascending), the state moved out of the simulation, their rates, the time spent exchanging and
/// when the compute began.
struct FirstEvaluation {
    owned: Vec<u32>,
    pos: Vec<V3>,
    vel: Vec<V3>,
    rho: Vec<f64>,
    rates: Rates,
    exchange: f64,
    started: Instant,
}

fn pack(x: V3, v: V3, rho: f64) -> [f64; 7] {
    [x[0], x[1], x[2], v[0], v[1], v[2], rho]
}

fn unpack(r: &[f64; 7]) -> (V3, V3, f64) {
    ([r[0], r[1], r[2]], [r[3], r[4], r[5]], r[6])
}

/// See the module documentation.
pub struct SphCpuRank {
    /// Arrays of every particle, valid where this rank holds one; its grid is the cut's.
    sim: SphSim,
    comm: Arc<dyn Comm>,
    rank: usize,
    ranks: usize,
    axis: usize,
    reach: u32,
    bounds: Vec<u32>,
    /// The particles (ids, ascending) this rank integrated at the last evaluation.
    owned: Vec<u32>,
    /// Every boundary particle that stays put (ascending) and its layer.
    bound_ids: Vec<u32>,
    bound_layers: Vec<u32>,
    /// The moving solids (every rank places all of them) and whether each particle is one of
    /// theirs (empty without moving solids).
    moving: MovingSolids,
    is_moving: Vec<bool>,
    /// The half-step state of the step being taken (valid where this rank holds a particle);
    /// with Verlet, `half_vel` and `half_rho` hold the state one step back.
    half_pos: Vec<V3>,
    half_vel: Vec<V3>,
    half_rho: Vec<f64>,
    /// The cut's balancing (mode, interval, threshold).
    balancing: SlabOptions,
    /// Compute time since the last balancing decision, and over the run [s].
    busy: f64,
    compute_s: f64,
    exchange_s: f64,
    rebalances: u64,
    records_sent: u64,
    pending: Option<PendingFrame>,
    label: &'static str,
    /// Verlet: the half-state arrays hold the state one step back (false before the first step
    /// of a run without it, which is then an Euler step).
    verlet_ready: bool,
}

impl SphCpuRank {
    /// This rank's slab of `state` (every rank passes the same state), about to take the step
    /// `dt`, with the case's `moving` solids (placed in `state` at its time).
    pub fn from_state(
        c: SphConstants,
        state: SphState,
        dt: f64,
        moving: MovingSolids,
        opts: SphCpuRankOptions,
    ) -> Result<SphCpuRank, SphRankError> {
        let (rank, ranks) = (opts.comm.rank(), opts.comm.size());
        moving
            .check(state.pos.len())
            .map_err(SphRankError::Internal)?;
        let cut = SlabCut::new(&c, &state, &moving, ranks, &opts.slabs)?;
        let mut state = state;
        // Verlet: the state one step back lives in the half-state arrays (every rank holds the
        // whole state at the start).
        let back = state
            .prev
            .take()
            .filter(|_| matches!(c.integrator, Integrator::Verlet { .. }));
        let verlet_ready = back.is_some();
        let (half_pos, half_vel, half_rho) = match back {
            Some(b) => (state.pos.clone(), b.vel, b.rho),
            None => (state.pos.clone(), state.vel.clone(), state.rho.clone()),
        };
        let mut is_moving = Vec::new();
        if !moving.is_empty() {
            is_moving = vec![false; state.pos.len()];
            for &k in &moving.ids {
                is_moving[k as usize] = true;
            }
        }
        // The same grid as the cut's (both are `sph_grid` of the state with the solids at
        // rest), so layers agree.
        let sim = SphSim::from_state_moving(c, state, dt, moving.clone());
        let mut r = SphCpuRank {
            sim,
            comm: opts.comm,
            rank,
            ranks,
            axis: cut.axis,
            reach: cut.reach,
            bounds: cut.bounds,
            owned: Vec::new(),
            bound_ids: Vec::new(),
            bound_layers: Vec::new(),
            moving,
            is_moving,
            half_pos,
            half_vel,
            half_rho,
            balancing: opts.slabs,
            busy: 0.0,
            compute_s: 0.0,
            exchange_s: 0.0,
            rebalances: 0,
            records_sent: 0,
            pending: None,
            label: opts.label,
            verlet_ready,
        };
        let mine = r.bounds[rank]..r.bounds[rank + 1];
        r.owned = (0..r.sim.s.pos.len() as u32)
            .filter(|&k| mine.contains(&r.layer(r.sim.s.pos[k as usize])))
            .collect();
        r.bound_ids = cut.bound_ids.into_iter().filter(|&k| !r.moves(k)).collect();
        r.bound_layers = r
            .bound_ids
            .iter()
            .map(|&k| r.layer(r.sim.s.pos[k as usize]))
            .collect();
        r.hold_boundary(None);
        Ok(r)
    }

    /// Whether particle `k` belongs to a moving solid.
    fn moves(&self, k: u32) -> bool {
        self.is_moving.get(k as usize).copied().unwrap_or(false)
    }

    /// Lists only the boundary particles of this rank's layers and halo: those that stay put
    /// (the list changes with the bounds) and, with moving solids, those at `pos` (this
    /// evaluation's positions; every rank places them all, and holds the density of each in its
    /// reach: its own, or its neighbour's record).
    fn hold_boundary(&mut self, pos: Option<&[V3]>) {
        let ids = self.held_boundary(pos);
        self.sim.hold_boundary(ids);
    }

    /// The ids [`SphCpuRank::hold_boundary`] lists.
    fn held_boundary(&self, pos: Option<&[V3]>) -> Vec<u32> {
        let here = reach_of(&self.bounds, self.rank);
        let mut ids: Vec<u32> = self
            .bound_ids
            .iter()
            .zip(&self.bound_layers)
            .filter(|(_, l)| here.contains(l))
            .map(|(&k, _)| k)
            .collect();
        if let Some(pos) = pos {
            ids.extend(
                self.moving
                    .ids
                    .iter()
                    .filter(|&&k| here.contains(&self.layer(pos[k as usize]))),
            );
            ids.sort_unstable();
        }
        ids
    }

    fn layer(&self, p: V3) -> u32 {
        sph_layer_of(&self.sim.grid, p, self.axis, self.reach)
    }

    pub fn constants(&self) -> &SphConstants {
        &self.sim.c
    }
    pub fn bounds(&self) -> &[u32] {
        &self.bounds
    }
    pub fn axis(&self) -> usize {
        self.axis
    }
    pub fn dt(&self) -> f64 {
        self.sim.dt
    }
    pub fn time(&self) -> f64 {
        self.sim.s.time
    }
    pub fn step_index(&self) -> u64 {
        self.sim.s.step
    }
    pub fn kinds(&self) -> &[u32] {
        &self.sim.s.kind
    }
    pub fn ranks(&self) -> usize {
        self.ranks
    }
    /// How often the bounds moved.
    pub fn rebalances(&self) -> u64 {
        self.rebalances
    }

    /// Sends each neighbour the own particles it needs for the next evaluation (at the
    /// half-step positions with `half`), takes what the neighbours send, and returns the fluid
    /// particles this rank now holds and those it now owns (ascending).
    fn exchange(&mut self, half: bool) -> Result<(Vec<u32>, Vec<u32>), SphRankError> {
        let me = self.rank;
        let layers: Vec<u32> = {
            let pos = if half {
                &self.half_pos
            } else {
                &self.sim.s.pos
            };
            self.owned
                .iter()
                .map(|&k| self.layer(pos[k as usize]))
                .collect()
        };
        let beyond = layers
            .iter()
            .filter(|&&l| owner_of(&self.bounds, l).abs_diff(me) > 1)
            .count();
        let beyond = self.comm.sum_u64(beyond as u64);
        if beyond > 0 {
            return Err(SphRankError::SlabSkipped {
                count: beyond,
                step: self.sim.s.step,
            });
        }
        let s = &self.sim.s;
        // With Verlet, the state one step back travels with the state (in `start`).
        let second = half || self.verlet_ready;
        let state = |k: usize| {
            if half {
                pack(self.half_pos[k], self.half_vel[k], self.half_rho[k])
            } else {
                pack(s.pos[k], s.vel[k], s.rho[k])
            }
        };
        let mut sends = vec![Vec::new(); self.ranks];
        for v in [me.wrapping_sub(1), me + 1] {
            if v >= self.ranks {
                continue;
            }
            let there = reach_of(&self.bounds, v);
            let mut rec = Records::default();
            for (&k, l) in self.owned.iter().zip(&layers) {
                if there.contains(l) {
                    let k = k as usize;
                    rec.id.push(k as u32);
                    rec.now.push(state(k));
                    if half {
                        rec.start.push(pack(s.pos[k], s.vel[k], s.rho[k]));
                    } else if second {
                        rec.start
                            .push(pack(s.pos[k], self.half_vel[k], self.half_rho[k]));
                    }
                }
            }
            self.records_sent += rec.id.len() as u64;
            sends[v] = encode(&rec);
        }
        let got = self.comm.exchange(sends);
        let here = reach_of(&self.bounds, me);
        let mine = self.bounds[me]..self.bounds[me + 1];
        let kind = &self.sim.s.kind;
        let (mut fluid, mut owned) = (Vec::new(), Vec::new());
        for (&k, l) in self.owned.iter().zip(&layers) {
            if kind[k as usize] == KIND_FLUID && here.contains(l) {
                fluid.push(k);
            }
            if mine.contains(l) {
                owned.push(k);
            }
        }
        for v in [me.wrapping_sub(1), me + 1] {
            if v >= self.ranks {
                continue;
            }
            let rec: Records = decode(&got[v], "an SPH rank's records");
            let n = self.sim.s.pos.len();
            if rec.now.len() != rec.id.len()
                || rec.start.len() != if second { rec.id.len() } else { 0 }
                || rec.id.iter().any(|&k| k as usize >= n)
            {
                return Err(SphRankError::Internal(format!(
                    "at step {} rank {me} got records from rank {v} that are not this run's",
                    self.sim.s.step
                )));
            }
            for (e, &k) in rec.id.iter().enumerate() {
                let i = k as usize;
                let (x, u, rho) = unpack(&rec.now[e]);
                if half {
                    (self.half_pos[i], self.half_vel[i], self.half_rho[i]) = (x, u, rho);
                    let (x0, u0, rho0) = unpack(&rec.start[e]);
                    let s = &mut self.sim.s;
                    (s.pos[i], s.vel[i], s.rho[i]) = (x0, u0, rho0);
                } else {
                    let s = &mut self.sim.s;
                    (s.pos[i], s.vel[i], s.rho[i]) = (x, u, rho);
                    if second {
                        let (_, u1, rho1) = unpack(&rec.start[e]);
                        (self.half_vel[i], self.half_rho[i]) = (u1, rho1);
                    }
                }
                if self.sim.s.kind[i] == KIND_FLUID {
                    fluid.push(k);
                }
                if mine.contains(&self.layer(x)) {
                    owned.push(k);
                }
            }
        }
        owned.sort_unstable();
        Ok((fluid, owned))
    }

    /// mDBC over ranks, before the predictor's evaluation (the state at the start of the step,
    /// every fluid particle of this rank's layers and halo held): the rank whose layers hold a
    /// wall particle's ghost node computes its density (every fluid particle within the node's
    /// support lies in those layers or the halo, so the sum is the one process's) and sends it
    /// to every rank whose layers or halo hold the particle, which may lie several slabs away
    /// (a node lies up to twice the walls' thickness from its particle). Returns whether it ran,
    /// leaving `fluid` sorted. Collective.
    fn correct_boundary(
        &mut self,
        pos: &[V3],
        vel: &[V3],
        rho: &mut [f64],
        fluid: &[u32],
    ) -> Result<bool, SphRankError> {
        if !self.sim.has_ghosts() {
            return Ok(false);
        }
        let t = self.sim.s.time;
        let mine = self.bounds[self.rank]..self.bounds[self.rank + 1];
        let mut walls: Vec<u32> = self.bound_ids.clone();
        walls.extend(&self.moving.ids);
        let (grid, axis, reach) = (&self.sim.grid, self.axis, self.reach);
        let targets = self.sim.ghosts_where(&walls, t, |g| {
            mine.contains(&sph_layer_of(grid, g, axis, reach))
        });
        let new = self.sim.ghost_densities(pos, vel, rho, t, fluid, &targets);
        let mut sends = vec![Vec::new(); self.ranks];
        for &(b, r) in &new {
            let l = self.layer(pos[b as usize]);
            for (v, to) in sends.iter_mut().enumerate() {
                if reach_of(&self.bounds, v).contains(&l) {
                    to.push((b, r));
                }
            }
        }
        let got = self.comm.exchange(sends.iter().map(encode).collect());
        for (v, bytes) in got.iter().enumerate() {
            let vals: Vec<(u32, f64)> = decode(bytes, "an SPH rank's wall densities");
            for (b, r) in vals {
                let Some(slot) = rho.get_mut(b as usize) else {
                    return Err(SphRankError::Internal(format!(
                        "at step {} rank {} got a wall density from rank {v} for particle {b}, \
                         which this run does not have",
                        self.sim.s.step, self.rank
                    )));
                };
                *slot = r;
            }
        }
        Ok(true)
    }

    /// One step of [`SphCpuRank::dt`] with the case's integrator; sets the next step from the
    /// CFL condition. Collective.
    pub fn step(&mut self) -> Result<(), SphRankError> {
        match self.sim.c.integrator {
            Integrator::Symplectic => self.step_symplectic(),
            Integrator::Verlet { euler_every } => self.step_verlet(euler_every),
        }
    }

    /// The start of every step: the exchange at the state's positions (with Verlet the state one
    /// step back travels with it), the moving walls held at those positions, the walls'
    /// densities (mDBC), and the rates of the owned particles at the state, which is moved out of
    /// `sim` (the rates borrow it; the caller puts it back). Collective.
    fn first_evaluation(&mut self) -> Result<FirstEvaluation, SphRankError> {
        let t = Instant::now();
        let (fluid, owned) = self.exchange(false)?;
        let mut exchange = t.elapsed().as_secs_f64();
        let started = Instant::now();
        if !self.moving.is_empty() {
            let ids = self.held_boundary(Some(&self.sim.s.pos));
            self.sim.hold_boundary(ids);
        }
        let pos = std::mem::take(&mut self.sim.s.pos);
        let vel = std::mem::take(&mut self.sim.s.vel);
        let mut rho = std::mem::take(&mut self.sim.s.rho);
        let t_walls = Instant::now();
        let corrected = self.correct_boundary(&pos, &vel, &mut rho, &fluid)?;
        exchange += t_walls.elapsed().as_secs_f64();
        let rates = self
            .sim
            .rates_of(&pos, &vel, &rho, &fluid, Some(&owned), corrected);
        Ok(FirstEvaluation {
            owned,
            pos,
            vel,
            rho,
            rates,
            exchange,
            started,
        })
    }

    /// One Verlet step (`SphSim::step_verlet` on this rank's slab): the exchange carries the
    /// state one step back with the state, one evaluation, the update of the owned particles.
    fn step_verlet(&mut self, euler_every: u32) -> Result<(), SphRankError> {
        let dt = self.sim.dt;
        let c = self.sim.c.clone();
        let FirstEvaluation {
            owned,
            mut pos,
            mut vel,
            mut rho,
            rates: r,
            exchange,
            started: t,
        } = self.first_evaluation()?;
        let euler = verlet_is_euler(self.sim.s.step, euler_every, self.verlet_ready);
        let span = if euler { dt } else { 2.0 * dt };
        let kind = &self.sim.s.kind;
        let (hv, hr) = (&self.half_vel, &self.half_rho);
        let new: Vec<FluidState> = owned
            .par_iter()
            .zip(&r.r)
            .map(|(&k, r)| {
                let k = k as usize;
                let s = FluidState::at(&pos, &vel, &rho, k);
                let (vb, rb) = if euler { (s.v, s.rho) } else { (hv[k], hr[k]) };
                verlet_particle(&c, kind[k] == KIND_FLUID, &s, vb, rb, r, dt, span)
            })
            .collect();
        let mut nonfinite = 0u64;
        for (&k, n) in owned.iter().zip(&new) {
            let k = k as usize;
            // A boundary particle's velocity is not kept one step back (as `SphSim`).
            self.half_vel[k] = if kind[k] == KIND_FLUID {
                vel[k]
            } else {
                [0.0; 3]
            };
            self.half_rho[k] = rho[k];
            (pos[k], vel[k], rho[k]) = (n.x, n.v, n.rho);
            nonfinite += u64::from(!n.rho.is_finite() || !n.x.iter().all(|x| x.is_finite()));
        }
        let t0 = self.sim.s.time;
        self.moving.place(t0 + dt, &mut pos, &mut vel);
        (self.sim.s.pos, self.sim.s.vel, self.sim.s.rho) = (pos, vel, rho);
        self.owned = owned;
        self.verlet_ready = true;
        let compute = t.elapsed().as_secs_f64();
        self.finish_step(dt, r.dt_f, r.dt_cv, nonfinite, compute, exchange)
    }

    /// The end of a step: the next time step and the non-finite count reduced over the ranks,
    /// the clocks, the balancing. Collective.
    fn finish_step(
        &mut self,
        dt: f64,
        dt_f: f64,
        dt_cv: f64,
        nonfinite: u64,
        compute: f64,
        exchange: f64,
    ) -> Result<(), SphRankError> {
        let c = &self.sim.c;
        let (dt_f, dt_cv) = (self.comm.min_f64(dt_f), self.comm.min_f64(dt_cv));
        let nonfinite = self.comm.sum_u64(nonfinite);
        self.busy += compute;
        self.compute_s += compute;
        self.exchange_s += exchange;
        let s = &mut self.sim.s;
        s.time += dt;
        s.step += 1;
        if nonfinite > 0 {
            return Err(SphRankError::NonFinite {
                count: nonfinite,
                step: s.step,
                time: s.time,
            });
        }
        self.sim.dt = next_time_step(c, dt_f, dt_cv);
        if self.balancing.decision_after(self.sim.s.step) {
            self.rebalance();
        }
        Ok(())
    }

    /// One symplectic step.
    fn step_symplectic(&mut self) -> Result<(), SphRankError> {
        let dt = self.sim.dt;
        let c = self.sim.c.clone();
        let FirstEvaluation {
            owned,
            pos,
            vel,
            rho,
            rates: r0,
            mut exchange,
            started: t,
        } = self.first_evaluation()?;
        let kind = &self.sim.s.kind;
        let half: Vec<FluidState> = owned
            .par_iter()
            .zip(&r0.r)
            .map(|(&k, r)| {
                let k = k as usize;
                let s = FluidState::at(&pos, &vel, &rho, k);
                predict(&c, kind[k] == KIND_FLUID, &s, r, dt)
            })
            .collect();
        for (&k, h) in owned.iter().zip(&half) {
            let k = k as usize;
            (self.half_pos[k], self.half_vel[k], self.half_rho[k]) = (h.x, h.v, h.rho);
        }
        (self.sim.s.pos, self.sim.s.vel, self.sim.s.rho) = (pos, vel, rho);
        // Moving solids at the half step, all of them (`SphSim::step` places them there too).
        let t0 = self.sim.s.time;
        self.moving
            .place(t0 + 0.5 * dt, &mut self.half_pos, &mut self.half_vel);
        self.owned = owned;
        let mut compute = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let (fluid, owned) = self.exchange(true)?;
        exchange += t.elapsed().as_secs_f64();
        let t = Instant::now();
        if !self.moving.is_empty() {
            let ids = self.held_boundary(Some(&self.half_pos));
            self.sim.hold_boundary(ids);
        }
        let r1 = self.sim.rates_of(
            &self.half_pos,
            &self.half_vel,
            &self.half_rho,
            &fluid,
            Some(&owned),
            false,
        );
        let s = &self.sim.s;
        let new: Vec<FluidState> = owned
            .par_iter()
            .zip(&r1.r)
            .map(|(&k, r)| {
                let k = k as usize;
                let start = FluidState {
                    x: s.pos[k],
                    v: s.vel[k],
                    rho: s.rho[k],
                };
                correct(&c, s.kind[k] == KIND_FLUID, &start, self.half_rho[k], r, dt)
            })
            .collect();
        let s = &mut self.sim.s;
        let mut nonfinite = 0u64;
        for (&k, n) in owned.iter().zip(&new) {
            let k = k as usize;
            (s.pos[k], s.vel[k], s.rho[k]) = (n.x, n.v, n.rho);
            nonfinite += u64::from(!n.rho.is_finite() || !n.x.iter().all(|x| x.is_finite()));
        }
        self.moving.place(t0 + dt, &mut s.pos, &mut s.vel);
        self.owned = owned;
        compute += t.elapsed().as_secs_f64();
        self.finish_step(dt, r1.dt_f, r1.dt_cv, nonfinite, compute, exchange)
    }

    /// One step, shortened so as not to pass `t_end`. Collective.
    pub fn step_within(&mut self, t_end: f64) -> Result<(), SphRankError> {
        let (t, dt) = (self.time(), self.dt());
        if t + dt > t_end && t_end > t {
            self.sim.dt = t_end - t;
        }
        self.step()
    }

    /// Moves the bounds as the GPU ranks do ([`decide_over_ranks`]: the all-gathered counts of
    /// own fluid per layer and busy times, so that every rank decides alike).
    fn rebalance(&mut self) {
        if self.balancing.balance == Balance::Off {
            return;
        }
        let layers = self.bounds[self.ranks] as usize;
        // Own fluid per layer, as the GPUs count it (`sph_layer_count`).
        let mine = || -> Result<Vec<u32>, std::convert::Infallible> {
            let mut mine = vec![0u32; layers];
            let s = &self.sim.s;
            for &k in self
                .owned
                .iter()
                .filter(|&&k| s.kind[k as usize] == KIND_FLUID)
            {
                mine[(self.layer(s.pos[k as usize]) as usize).min(layers - 1)] += 1;
            }
            Ok(mine)
        };
        let decision = decide_over_ranks(
            self.comm.as_ref(),
            self.balancing.balance,
            self.balancing.threshold,
            &self.bounds,
            mine,
            self.busy,
            None,
        );
        self.busy = 0.0;
        let Ok(Some(new)) = decision else {
            return;
        };
        tracing::debug!(
            step = self.sim.s.step,
            by = self.balancing.balance.name(),
            from = ?self.bounds,
            to = ?new,
            "SPH rank bounds moved"
        );
        self.bounds = new;
        self.hold_boundary(None);
        self.rebalances += 1;
    }

    fn own_particles(&self) -> OwnedParticles {
        let s = &self.sim.s;
        let mut p = OwnedParticles::default();
        for &k in &self.owned {
            let i = k as usize;
            p.id.push(k);
            p.pos.push(s.pos[i]);
            p.vel.push(s.vel[i]);
            p.rho.push(s.rho[i]);
            if self.verlet_ready {
                p.prev_vel.push(self.half_vel[i]);
                p.prev_rho.push(self.half_rho[i]);
            }
        }
        p
    }

    /// Collective: every rank's particles, gathered on rank 0 (the other ranks get a state
    /// without particles).
    pub fn state(&self) -> Result<SphState, SphRankError> {
        let parts = self.comm.gather(encode(&self.own_particles()));
        let s = &self.sim.s;
        if !self.comm.is_root() {
            return Ok(SphState::zeroed(s.time, s.step, Vec::new()));
        }
        assemble_state(parts, s.time, s.step, &s.kind).map_err(SphRankError::Internal)
    }

    /// This rank's part of a frame: f32 values of its own particles, as the CPU frame holds them.
    fn frame_part(&self) -> FramePart {
        let (s, c) = (&self.sim.s, &self.sim.c);
        let mut part = FramePart::default();
        for &k in &self.owned {
            let i = k as usize;
            part.id.push(k);
            part.pos.extend(s.pos[i].map(|x| x as f32));
            part.vel.extend(s.vel[i].map(|x| x as f32));
            part.rho.push(s.rho[i] as f32);
            part.press
                .push(physics::tait_pressure(s.rho[i], c.rho0, c.b) as f32);
        }
        part
    }

    /// Starts a frame: the ranks other than 0 post their part to rank 0 and return; rank 0
    /// places its own into `targets` (positions, velocities, densities, pressures; null: not
    /// wanted) and the others' as they arrive ([`SphCpuRank::publish_done`]). A frame still
    /// pending is completed first.
    ///
    /// # Safety
    /// On rank 0 each non-null target holds one element per particle ([f32; 3] or f32) and stays
    /// valid and untouched by others until the frame is complete.
    pub unsafe fn publish(&mut self, targets: [*mut u8; 4]) {
        self.publish_wait();
        let part = self.frame_part();
        if !self.comm.is_root() {
            self.comm.post_to_root(part.to_bytes());
            return;
        }
        // SAFETY: the caller's contract; the ids are this run's.
        unsafe { part.place(targets) };
        self.pending = Some(PendingFrame::new(targets, self.ranks, self.kinds().len()));
    }

    /// Whether the frame is complete (places the parts that arrived).
    pub fn publish_done(&mut self) -> bool {
        // SAFETY: publish's contract keeps the targets valid until the frame completes.
        unsafe { take_parts(self.comm.as_ref(), &mut self.pending, false) }
    }

    /// Waits for every part of the pending frame.
    pub fn publish_wait(&mut self) {
        // SAFETY: as in publish_done.
        unsafe { take_parts(self.comm.as_ref(), &mut self.pending, true) };
    }

    /// Drops the pending frame unfinished (its targets are no longer written): for a run whose
    /// other ranks failed, whose parts will not come.
    pub fn forget_frame(&mut self) {
        self.pending = None;
    }
}

impl Drop for SphCpuRank {
    fn drop(&mut self) {
        self.publish_wait();
        // Where each rank's time went: an exchange also waits for the slower neighbour, so a
        // long one says the cut is uneven (--balance moves it).
        tracing::info!(
            "SPH {} {} of {}: computed {:.2} s, exchanged and waited {:.2} s; bounds {:?} ({} \
             moves), {} records sent",
            self.label,
            self.rank,
            self.ranks,
            self.compute_s,
            self.exchange_s,
            self.bounds,
            self.rebalances,
            self.records_sent
        );
    }
}
