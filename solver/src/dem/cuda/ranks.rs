//! One simulation over several processes with one GPU each (issue 15: `mpirun -np N solver
//! --backend cuda`): rank r drives GPU slab r of the same cut as [`super::CudaGroup`] makes in one
//! process, with the same kernels, the same window (classify, records, unpack) and the same
//! balancing decisions; only the road of the records differs: two processes cannot open each
//! other's device memory as one process's GPUs do, so the records go through host memory and MPI
//! (one all-to-all per step carrying each rank's records to its neighbours) or through NCCL.
//!
//! Where NCCL's library loads and no two ranks of a host share a GPU (NCCL refuses that), the
//! records go device to device through NCCL instead (`ncclSend`/`ncclRecv` on the rank's
//! stream, the communicator bootstrapped by broadcasting rank 0's unique id over MPI);
//! `PARTICLE_SHM_RANK_WIRE=host` keeps them on the host road.
//!
//! Every decision is made from data all ranks share (the exchange counts, the per-layer counts,
//! the busy times are all-gathered; diagnostics are reduced), so every rank takes the same
//! branch and calls the same collectives. States and snapshots are gathered on rank 0 (the others
//! get empty ones); frames are posted to rank 0 without waiting for it, as CPU ranks do.
//!
//! Not yet: inflow and outflow regions (their alive flags live on GPU 0 of a group: refused
//! with a message).

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::CudaEvent;

use super::buffers::{frame_part_bytes, frame_part_from_bytes, FrameKinematics};
use super::multi::{beside_times, elapsed_s, err, group_skin, move_bounds, neighbour, Split};
use super::params::{INTEGRATE_EULER, INTEGRATE_HALF_KICK, INTEGRATE_NONE};
use super::road::{Part, Road};
use super::skin::SharedSkin;
use super::window::{ExchangeCounts, Received, SkinStatus};
use super::{CudaError, CudaOptions, CudaSim};
use crate::core::geometry::BodyTransform;
use crate::decomp::balance::{Balance, BALANCE_INTERVAL};
use crate::decomp::Axis;
use crate::dem::state::{HistEntry, SimState, StepContext};
use crate::exec::comm::{decode, encode, take_posts, Comm};
use crate::exec::stages::{Stage, StageTimers};
use crate::exec::worker::{
    pack_kinematics, BackendStats, Energies, FusedWorker, IdIndex, KinematicsSlices, RawKinematics,
    Snapshot, StepError,
};

/// How a run is spread over the ranks' GPUs.
#[derive(Debug, Clone)]
pub struct RankOptions {
    pub comm: Arc<dyn Comm>,
    /// This rank's device ordinal.
    pub device: usize,
    /// Split axis; default: the longest axis of the domain.
    pub axis: Option<Axis>,
    pub balance: Balance,
}

/// Rank 0's frame while the other ranks' particles are on their way.
struct PendingFrame {
    out: RawKinematics,
    waiting: Vec<usize>,
}

// SAFETY: `out` points into memory the caller of begin_kinematics_copy keeps valid and
// untouched until the frame is complete; only the worker that owns this frame writes through
// it, from whichever one thread owns the worker at the time.
unsafe impl Send for PendingFrame {}

/// See the module documentation.
pub struct CudaRank {
    /// NCCL between the ranks' GPUs when they can use it, else records through host memory.
    /// (Before `sim`: the communicator goes while the context lives.)
    road: Road,
    sim: CudaSim,
    comm: Arc<dyn Comm>,
    device: usize,
    axis: usize,
    bounds: Vec<u32>,
    ctx: Arc<StepContext>,
    /// Particles of the run (all ranks).
    total: usize,
    step: u64,
    time: f64,
    verlet: bool,
    forces_valid: bool,
    balance: Balance,
    /// This rank's work since the last balancing decision: its GPU's compute (events) and the
    /// host time its records took [s] (waiting for other ranks not counted).
    busy: f64,
    /// Steps timed into `busy`.
    busy_steps: u64,
    /// Judges the measured-time modes' moves by their effect (`balance::MoveGuard`); every
    /// rank decides alike from the same all-gathered times.
    guard: crate::decomp::balance::MoveGuard,
    rebalances: u64,
    migrations: u64,
    /// Device time of the neighbour search and collide [s] (events).
    compute_s: f64,
    /// Host time spent waiting for the other ranks' counts (the slowest rank's step shows
    /// here), and moving the records through host memory and MPI [s].
    wait_s: f64,
    transfer_s: f64,
    timed_steps: u64,
    /// Two sets, alternating: a step's events are read during the next step.
    events: [RankEvents; 2],
    /// Exchange time that ran while the GPU computed (the ghost refresh beside the interior
    /// collide) [s].
    hidden_s: f64,
    /// Refresh the ghosts beside the interior collide (`CudaOptions::overlap`, resolved in
    /// `new`).
    overlap: bool,
    frame: Option<PendingFrame>,
    /// Page-locked host memory the frame parts are downloaded through (allocated at the first
    /// frame, kept for the next).
    frame_staging: Option<cudarc::driver::PinnedHostSlice<u8>>,
    /// The Verlet skin's schedule, the same on every rank (None: a search every step;
    /// skin.rs's `SharedSkin`, as a GPU group's in one process).
    skin: Option<SharedSkin>,
    /// With a skin: slab bounds the balancing chose, applied at the next search.
    pending_bounds: Option<Vec<u32>>,
}

/// A step's events: its start, the end of its exchange (or, refreshing beside the collide, of
/// the interior collide), its end (compute stream), and beside the collide the ends of the
/// refresh and of the boundary collide after it (refresh stream); whether they were recorded,
/// and whether the step refreshed beside.
struct RankEvents {
    ev: [CudaEvent; 5],
    recorded: bool,
    beside: bool,
}

/// The exchange counts as words for the all-gather.
fn count_words(c: &ExchangeCounts) -> [u32; 5] {
    [c.mig[0], c.mig[1], c.halo[0], c.halo[1], c.skipped]
}

impl CudaRank {
    /// This rank's part of `state` (the whole run, the same on every rank; ids 0..n) on its
    /// GPU. Collective.
    pub fn new(
        ctx: Arc<StepContext>,
        state: &SimState,
        opts: &CudaOptions,
        ranks: &RankOptions,
    ) -> Result<CudaRank, CudaError> {
        super::driver::driver_available()?;
        if !ctx.outflows.is_empty() || opts.inflow_room > 0 {
            return Err(CudaError::Unsupported(
                "inflow and outflow regions on GPU ranks (run them on the GPUs of one host: \
                 --devices 0,1 without mpirun, or on CPU ranks)"
                    .into(),
            ));
        }
        super::check_dense_ids(state)?;
        let (g, w) = (ranks.comm.size(), ranks.comm.rank());
        let total = state.pos.len();
        // The skin of a GPU group in one process, decided alike on every rank.
        let skin = group_skin(&ctx, opts, total, false);
        let mut split = Split::with_skin(&ctx, state, ranks.axis, g, skin, None)?;
        // Ranks download their frame parts; no rank stages every particle's.
        split.stages_frames = false;
        // Ranks refresh beside the collide unless told not to: they always have a transfer
        // to hide.
        let overlap = opts.overlap.unwrap_or(true);
        let opts = &CudaOptions {
            overlap: Some(overlap),
            ..opts.clone()
        };
        let built = split
            .slab_sim(&ctx, state, opts, w, ranks.device, total)
            .map(|(sim, _, _)| sim);
        // Every rank learns whether every rank could start (else they would wait for it).
        let ok = ranks.comm.min_u64(built.is_ok() as u64);
        let sim = built?;
        if ok == 0 {
            return Err(CudaError::OtherRank { step: state.step });
        }
        if w == 0 {
            if let Some(note) = super::multi::few_particles_notice(total, g) {
                tracing::warn!("{note}");
            }
        }
        let new_ev = || -> Result<RankEvents, CudaError> {
            let e = || {
                sim.ctx
                    .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(|e| CudaError::driver("creating an event", e))
            };
            Ok(RankEvents {
                ev: [e()?, e()?, e()?, e()?, e()?],
                recorded: false,
                beside: false,
            })
        };
        let events = [new_ev()?, new_ev()?];
        let road = Road::new(ranks.comm.as_ref(), ranks.device, &sim.stream, state.step)?;
        let width = sim.skin_width();
        tracing::info!(
            "MPI rank {w} of {g} on GPU {}: slabs along {} at cell layers {:?}, {} particles here; {}",
            ranks.device,
            ["x", "y", "z"][split.axis],
            split.plan.bounds,
            sim.params.n,
            if width > 0.0 {
                format!("Verlet skin {width:.3e} m")
            } else {
                "a neighbour search every step".to_string()
            }
        );
        Ok(CudaRank {
            road,
            verlet: sim.verlet(),
            sim,
            comm: ranks.comm.clone(),
            device: ranks.device,
            axis: split.axis,
            bounds: split.plan.bounds,
            ctx,
            total,
            step: state.step,
            time: state.time,
            forces_valid: state.forces_valid,
            balance: ranks.balance,
            busy: 0.0,
            busy_steps: 0,
            guard: Default::default(),
            rebalances: 0,
            migrations: 0,
            compute_s: 0.0,
            wait_s: 0.0,
            transfer_s: 0.0,
            timed_steps: 0,
            events,
            hidden_s: 0.0,
            overlap,
            frame: None,
            frame_staging: None,
            skin: (width > 0.0).then(|| SharedSkin::new(width)),
            pending_bounds: None,
        })
    }

    fn rank(&self) -> usize {
        self.comm.rank()
    }

    fn ranks(&self) -> usize {
        self.comm.size()
    }

    /// Slab bounds in cell layers along the split axis.
    pub fn bounds(&self) -> &[u32] {
        &self.bounds
    }

    fn mark(&self, k: usize, which: usize) -> Result<(), CudaError> {
        self.events[k].ev[which]
            .record(&self.sim.stream)
            .map_err(|e| CudaError::driver("recording an event", e))
    }

    /// Reads the events of the step recorded in set `k` (complete: the stream passed them).
    fn harvest(&mut self, k: usize) -> Result<(), CudaError> {
        if !self.events[k].recorded {
            return Ok(());
        }
        let ev = &self.events[k].ev;
        if self.events[k].beside {
            // The refresh includes the records' transfer (NCCL, or host memory and MPI).
            let t = beside_times(ev)?;
            self.compute_s += t.compute;
            self.transfer_s += t.exchange;
            self.hidden_s += t.hidden;
            self.busy += t.step;
        } else {
            let c = elapsed_s(ev, 1, 2)?;
            self.compute_s += c;
            self.busy += c;
        }
        self.busy_steps += 1;
        self.timed_steps += 1;
        self.events[k].recorded = false;
        Ok(())
    }

    /// Classify, move the records to the neighbour ranks, unpack (Verlet: after the opening
    /// kick and drift). Collective.
    fn exchange(&mut self, kick: bool, k: usize) -> Result<(), CudaError> {
        self.mark(k, 0)?;
        self.events[k].beside = false;
        if kick {
            self.sim.launch_kick_drift_unmarked()?;
        }
        self.sim.queue_classify()?;
        let mut c = self.sim.read_counts()?;
        while !self.sim.fits(&c)? {
            self.sim.queue_classify()?;
            c = self.sim.read_counts()?;
        }
        self.harvest(1 - k)?;
        let t0 = std::time::Instant::now();
        let all: Vec<[u32; 5]> = self
            .comm
            .all_gather(encode(&count_words(&c)))
            .iter()
            .map(|b| decode(b, "exchange counts"))
            .collect();
        self.wait_s += t0.elapsed().as_secs_f64();
        let t0 = std::time::Instant::now();
        let skipped: u32 = all.iter().map(|c| c[4]).sum();
        if skipped > 0 {
            return Err(CudaError::SlabSkipped {
                count: skipped,
                step: self.step,
            });
        }
        let (g, h) = (self.ranks(), self.rank());
        let got = Received {
            mig: [
                if h > 0 { all[h - 1][1] } else { 0 },
                if h + 1 < g { all[h + 1][0] } else { 0 },
            ],
            halo: [
                if h > 0 { all[h - 1][3] } else { 0 },
                if h + 1 < g { all[h + 1][2] } else { 0 },
            ],
        };
        self.migrations += all.iter().map(|c| (c[0] + c[1]) as u64).sum::<u64>();
        self.sim.make_room(&got)?;
        let (rec_mig, rec_halo) = self.sim.record_sizes();
        let mut parts = Vec::new();
        for side in 0..2 {
            let Some(peer) = neighbour(h, side, g) else {
                continue;
            };
            for (ghosts, out, into, rec) in [
                (false, c.mig[side], got.mig[side], rec_mig),
                (true, c.halo[side], got.halo[side], rec_halo),
            ] {
                parts.push(Part {
                    peer,
                    src: self.sim.send_ptr(ghosts, side),
                    out: out as usize * rec,
                    dst: self.sim.recv_ptr(ghosts, side),
                    into: into as usize * rec,
                });
            }
        }
        self.road
            .move_parts(self.comm.as_ref(), &self.sim.stream, &parts)?;
        let transfer = t0.elapsed().as_secs_f64();
        self.transfer_s += transfer;
        self.busy += transfer;
        self.sim.queue_unpack(&got, &c, 0)?;
        self.mark(k, 1)
    }

    /// A step between the skin's searches: the boundary layers' current state to the
    /// neighbour ranks' ghost slots (window.rs), by NCCL or through host memory.
    fn refresh(&mut self, k: usize) -> Result<(), CudaError> {
        self.mark(k, 0)?;
        self.events[k].beside = false;
        self.sim.queue_refresh_pack(&self.sim.stream)?;
        // The last step ended synchronised (read_skin): its events are complete.
        self.harvest(1 - k)?;
        let t0 = std::time::Instant::now();
        let parts = self.refresh_parts();
        self.road
            .move_parts(self.comm.as_ref(), &self.sim.stream, &parts)?;
        let transfer = t0.elapsed().as_secs_f64();
        self.transfer_s += transfer;
        self.busy += transfer;
        self.sim.queue_refresh_unpack(&self.sim.stream)?;
        self.mark(k, 1)
    }

    /// A step between the skin's searches whose refresh runs beside the collide (as a GPU
    /// group's, multi.rs): the pack, the records' way to the neighbours (NCCL, or host memory
    /// and MPI while the GPU computes), the unpack and the boundary layers' collide on the
    /// refresh stream, while the compute stream collides every slot that reads no ghost.
    fn refresh_beside_collide(&mut self, k: usize) -> Result<(), CudaError> {
        self.mark(k, 0)?;
        self.events[k].beside = true;
        let rs = self.sim.refresh_stream();
        rs.wait(&self.events[k].ev[0])
            .map_err(|e| CudaError::driver("ordering the ghost refresh", e))?;
        self.sim.queue_refresh_pack(&rs)?;
        let interior = self.sim.launch_interior(INTEGRATE_EULER)?;
        self.mark(k, 1)?;
        // The last step ended synchronised (read_skin): its events are complete.
        self.harvest(1 - k)?;
        let parts = self.refresh_parts();
        self.road.move_parts(self.comm.as_ref(), &rs, &parts)?;
        self.sim.queue_refresh_unpack(&rs)?;
        let rec = |ev: &CudaEvent| {
            ev.record(&rs)
                .map_err(|e| CudaError::driver("recording an event", e))
        };
        rec(&self.events[k].ev[3])?;
        self.sim.launch_boundary(&rs, interior)?;
        rec(&self.events[k].ev[4])?;
        self.sim
            .stream
            .wait(&self.events[k].ev[4])
            .map_err(|e| CudaError::driver("ordering the step's end", e))
    }

    /// The ghost refresh's records to and from each neighbour rank.
    fn refresh_parts(&self) -> Vec<Part> {
        let totals = self.sim.refresh_totals();
        let (_, rec) = self.sim.record_sizes();
        let (g, h) = (self.ranks(), self.rank());
        (0..2)
            .filter_map(|side| {
                neighbour(h, side, g).map(|peer| Part {
                    peer,
                    src: self.sim.send_ptr(true, side),
                    out: totals[side] as usize * rec,
                    dst: self.sim.recv_ptr(true, side),
                    into: totals[2 + side] as usize * rec,
                })
            })
            .collect()
    }

    /// The end of a step with a skin: this rank's largest move and refresh lists, all-gathered
    /// (every rank takes the same decision), the lists checked against the neighbours'.
    /// Collective.
    fn read_skin(&mut self, searched: bool) -> Result<(), CudaError> {
        if self.skin.is_none() {
            return Ok(());
        }
        let mut st = self.sim.read_skin_status()?;
        if searched {
            st = self.sim.ensure_refresh_room(st)?;
        }
        let t0 = std::time::Instant::now();
        let all: Vec<SkinStatus> = self
            .comm
            .all_gather(encode(&st.words()))
            .iter()
            .map(|b| SkinStatus::from_words(decode(b, "skin status")))
            .collect();
        self.wait_s += t0.elapsed().as_secs_f64();
        let ranks: Vec<usize> = (0..all.len()).collect();
        super::window::check_ghost_lists(&all, &ranks, self.step)?;
        let moved = all.iter().map(|s| s.moved as f64).fold(0.0, f64::max);
        if let Some(s) = self.skin.as_mut() {
            s.stepped(moved);
        }
        Ok(())
    }

    fn one_step(&mut self) -> Result<(), CudaError> {
        let k = (self.step % 2) as usize;
        let dt = self.sim.dt();
        let mut search = true;
        if !self.verlet {
            self.sim.prepare_meshes(self.time)?;
            search = self.skin.as_mut().is_none_or(SharedSkin::search_due);
            if search {
                if let Some(b) = self.pending_bounds.take() {
                    self.apply_bounds(b);
                }
                self.exchange(false, k)?;
                self.sim.launch_step_group(INTEGRATE_EULER, true)?;
                if self.skin.is_some() {
                    self.sim.queue_refresh_lists()?;
                }
            } else if self.overlap {
                self.refresh_beside_collide(k)?;
            } else {
                self.refresh(k)?;
                self.sim.launch_step_group(INTEGRATE_EULER, false)?;
            }
        } else {
            if !self.forces_valid {
                self.sim.prepare_meshes(self.time)?;
                self.exchange(false, k)?;
                self.sim.launch_step_unmarked(INTEGRATE_NONE)?;
                self.forces_valid = true;
            }
            self.sim.prepare_meshes(self.time + dt)?;
            self.exchange(true, k)?;
            self.sim.launch_step_unmarked(INTEGRATE_HALF_KICK)?;
        }
        self.mark(k, 2)?;
        if !self.verlet {
            self.read_skin(search)?;
        }
        self.events[k].recorded = true;
        self.step += 1;
        // Accumulated as one GPU and the CPU do (meshes are placed at this time: same bits).
        self.time += dt;
        self.sim.set_clock(self.step, self.time);
        if self.step.is_multiple_of(BALANCE_INTERVAL) {
            self.rebalance()?;
        }
        Ok(())
    }

    /// [`balance::decide`] on every rank from the same all-gathered inputs, the measured-time
    /// modes' moves judged by their effect as in a group (multi.rs). Collective (every rank
    /// holds the same pending bounds, so every rank skips alike while bounds wait for a search).
    fn rebalance(&mut self) -> Result<(), CudaError> {
        if self.balance == Balance::Off || self.pending_bounds.is_some() {
            return Ok(());
        }
        let local = self.sim.layer_counts()?;
        let mut per_layer = vec![0u64; local.len()];
        for b in self.comm.all_gather(encode(&local)) {
            for (a, c) in per_layer
                .iter_mut()
                .zip(decode::<Vec<u32>>(&b, "layer counts"))
            {
                *a += c as u64;
            }
        }
        let capacity = self.sim.window().map_or(0, |w| w.capacity as u64);
        let gathered: Vec<(f64, u64, u64)> = self
            .comm
            .all_gather(encode(&(self.busy, capacity, self.busy_steps)))
            .iter()
            .map(|b| decode::<(f64, u64, u64)>(b, "busy times"))
            .collect();
        let busy: Vec<f64> = gathered.iter().map(|g| g.0).collect();
        let room: Vec<u64> = gathered.iter().map(|g| g.1).collect();
        let steps = gathered.iter().map(|g| g.2).max().unwrap_or(0);
        self.busy = 0.0;
        self.busy_steps = 0;
        // With a skin, slabs keep two layers (the refresh, window.rs).
        let min_width = if self.skin.is_some() { 2 } else { 1 };
        let (how, step, bounds) = (self.balance, self.step, &self.bounds);
        let propose = || move_bounds(how, bounds, &per_layer, &busy, &room, step, min_width);
        let decision = if crate::decomp::balance::guarded(how) {
            use crate::decomp::balance::{fits, per_step_cost};
            let cost = per_step_cost(&busy, steps);
            self.guard
                .decide(bounds, cost, |b| fits(b, &per_layer, &room), propose)
                .into_bounds()
        } else {
            propose()
        };
        if let Some(new) = decision {
            self.rebalances += 1;
            if self.skin.is_some() {
                // Applied at the next search, as a group in one process does (multi.rs).
                self.pending_bounds = Some(new);
            } else {
                self.apply_bounds(new);
            }
        }
        Ok(())
    }

    /// Moves the slab bounds (the next exchange migrates the layers that changed rank).
    fn apply_bounds(&mut self, new: Vec<u32>) {
        self.guard.applied();
        self.bounds = new;
        let bounds = self.bounds.clone();
        self.sim.set_slab(&bounds, self.rank());
    }

    /// The diagnostics of the steps since the last check, on every rank: fails everywhere
    /// when any rank found a problem (the others with [`CudaError::OtherRank`]). Collective.
    fn check_diag(&mut self) -> Result<(), CudaError> {
        let r = self.sim.check_diag();
        let ok = self.comm.min_u64(r.is_ok() as u64);
        r?;
        if ok == 0 {
            return Err(CudaError::OtherRank { step: self.step });
        }
        Ok(())
    }

    /// This rank's particles as a state of their own (ids ascending, with their history).
    fn local_state(&self) -> Result<SimState, CudaError> {
        let mut s = self.sim.live_state()?;
        s.history_overflows = self.sim.history_overflows();
        Ok(s)
    }

    /// The whole state in id order on rank 0, an empty one elsewhere. Collective.
    fn state(&self) -> Result<SimState, CudaError> {
        let local = self.local_state();
        // Every rank takes part in the gather, even one whose download failed.
        let mine = local.as_ref().map(encode).unwrap_or_default();
        let parts = self
            .comm
            .gather(if self.rank() == 0 { Vec::new() } else { mine });
        let local = local?;
        if self.rank() != 0 {
            return Ok(SimState::zeroed(self.time, self.step, 0));
        }
        let mut all = vec![local];
        for (r, b) in parts.iter().enumerate().skip(1) {
            if b.is_empty() {
                return Err(CudaError::OtherRank { step: self.step });
            }
            all.push(decode::<SimState>(b, &format!("rank {r}'s particles")));
        }
        let mut s = merge_states(all, self.total);
        s.forces_valid = if self.verlet {
            self.forces_valid
        } else {
            self.step > 0
        };
        Ok(s)
    }

    /// Packs the frame parts of the other ranks that arrived (waiting for all with `wait`);
    /// true when the frame is complete or none is pending.
    fn take_frame_parts(&mut self, wait: bool) -> bool {
        let Some(p) = self.frame.as_mut() else {
            return true;
        };
        let index = IdIndex::Dense(self.total);
        let out = &p.out;
        let t0 = std::time::Instant::now();
        let done = take_posts(self.comm.as_ref(), &mut p.waiting, wait, |bytes| {
            let received = t0.elapsed();
            let part = frame_part_from_bytes(&bytes).unwrap_or_else(|e| {
                panic!("a rank's frame part cannot be read ({e}): do all ranks run the same solver binary?")
            });
            // SAFETY: begin_kinematics_copy's contract keeps `out` valid and untouched until
            // the frame is complete; ranks own disjoint ids below `total`.
            unsafe { pack_part(&part, &index, out) };
            tracing::debug!(
                wait,
                bytes = bytes.len(),
                receive_ms = received.as_secs_f64() * 1e3,
                decode_pack_ms = (t0.elapsed() - received).as_secs_f64() * 1e3,
                "another rank's frame part packed"
            );
        });
        if done {
            self.frame = None;
        }
        done
    }
}

/// Writes a rank's frame part (f32 already) into `out`.
///
/// # Safety
/// As [`pack_kinematics`].
unsafe fn pack_part(part: &FrameKinematics, index: &IdIndex, out: &RawKinematics) {
    let (ids, kin, contacts) = part;
    let k = KinematicsSlices {
        ids,
        pos: &kin[0],
        vel: &kin[1],
        omega: &kin[2],
        force: &kin[3],
        contacts,
    };
    // SAFETY: the caller's contract.
    unsafe { pack_kinematics(k, index, out) };
}

/// One state of `n` particles (ids 0..n) from the ranks' disjoint parts.
fn merge_states(parts: Vec<SimState>, n: usize) -> SimState {
    let first = &parts[0];
    let mut s = SimState::zeroed(first.time, first.step, n);
    let cap = parts
        .iter()
        .find(|p| !p.history.is_empty())
        .map_or(0, |p| p.history_cap);
    if cap > 0 {
        s.history_cap = cap;
        s.history = vec![HistEntry::NONE; cap * n];
    }
    s.history_overflows = parts.iter().map(|p| p.history_overflows).sum();
    for p in &parts {
        for (k, &id) in p.id.iter().enumerate() {
            let i = id as usize;
            s.id[i] = id;
            s.species[i] = p.species[k];
            s.pos[i] = p.pos[k];
            s.vel[i] = p.vel[k];
            s.omega[i] = p.omega[k];
            s.force[i] = p.force[k];
            s.torque[i] = p.torque[k];
            s.contacts[i] = p.contacts[k];
            if cap > 0 && !p.history.is_empty() {
                s.history[i * cap..(i + 1) * cap]
                    .copy_from_slice(&p.history[k * cap..(k + 1) * cap]);
            }
        }
    }
    s
}

impl FusedWorker for CudaRank {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn stable_dt(&self) -> f64 {
        self.ctx.dt
    }

    fn advance(&mut self, n_steps: u64) -> Result<(), StepError> {
        for _ in 0..n_steps {
            self.one_step().map_err(|e| err(self.step, e))?;
        }
        self.check_diag().map_err(|e| err(self.step, e))
    }

    fn time(&self) -> f64 {
        self.time
    }

    /// Collective: the kinematics on rank 0, empty elsewhere.
    fn snapshot(&self) -> Result<Snapshot, StepError> {
        Ok(self.export_state()?.into())
    }

    /// Collective: the whole state on rank 0, an empty one elsewhere.
    fn export_state(&self) -> Result<SimState, StepError> {
        self.state().map_err(|e| err(self.step, e))
    }

    fn mesh_transforms(&self) -> Vec<BodyTransform> {
        self.sim.mesh_transforms()
    }

    fn timers(&self) -> StageTimers {
        let mut t = StageTimers {
            steps: self.timed_steps,
            ..Default::default()
        };
        // exchange: the records' way through host memory and MPI; reduce: waiting for the
        // other ranks at the counts' all-gather (their slower steps or frames show here).
        t.add(Stage::Exchange, Duration::from_secs_f64(self.transfer_s));
        t.add(Stage::Reduce, Duration::from_secs_f64(self.wait_s));
        t.add(Stage::Forces, Duration::from_secs_f64(self.compute_s));
        t.exchange_hidden = Duration::from_secs_f64(self.hidden_s);
        t
    }

    fn reset_timers(&mut self) {
        self.compute_s = 0.0;
        self.hidden_s = 0.0;
        self.wait_s = 0.0;
        self.transfer_s = 0.0;
        self.timed_steps = 0;
    }

    /// Collective: the run's counters on rank 0, zero elsewhere.
    fn stats(&self) -> Result<BackendStats, StepError> {
        let s = self.export_state()?;
        Ok(BackendStats {
            history_overflows: s.history_overflows,
            contacts: s.contacts.iter().map(|&c| c as u64).sum(),
        })
    }

    /// Collective: the run's energies on rank 0, zero elsewhere.
    fn energies(&mut self) -> Result<Energies, StepError> {
        super::backend_impl::energies_on_host(&self.ctx, self.export_state()?)
    }

    fn loads(&self) -> Vec<usize> {
        vec![self.sim.window().map_or(0, |w| w.owned as usize)]
    }

    fn rebalances(&self) -> u64 {
        self.rebalances
    }

    fn device_report(&self) -> Option<String> {
        let m = self.sim.memory();
        let w = self.sim.window();
        let bytes = m.total() + w.map_or(0, |w| w.bytes);
        Some(format!(
            "CUDA over {} MPI ranks, one GPU each ({}): {} particles split along {} at cell layers {:?}; \
             rank {} on GPU {}: {} particles (room for {}), {:.2} GiB; records between ranks {}",
            self.ranks(),
            self.sim.device_name(),
            self.total,
            ["x", "y", "z"][self.axis],
            self.bounds,
            self.rank(),
            self.device,
            w.map_or(0, |w| w.owned),
            w.map_or(0, |w| w.capacity),
            bytes as f64 / (1u64 << 30) as f64,
            self.road.describe()
        ))
    }

    /// Rank 0 writes its particles into `out` at once and the other ranks' as they arrive
    /// ([`FusedWorker::kinematics_copy_done`]); the others post theirs and step on.
    unsafe fn begin_kinematics_copy(&mut self, out: RawKinematics) -> Result<bool, StepError> {
        // Where a frame's time goes, at debug level (RUST_LOG=info,solver::dem::cuda::ranks=debug).
        let t0 = std::time::Instant::now();
        let local = super::buffers::download_frame_kinematics(
            &self.sim.stream,
            &self.sim.state,
            &self.sim.params,
            &mut self.frame_staging,
        )
        .map_err(|e| err(self.step, e))?;
        let downloaded = t0.elapsed();
        if self.rank() != 0 {
            let bytes = frame_part_bytes(&local);
            let encoded = t0.elapsed();
            self.comm.post_to_root(bytes);
            tracing::debug!(
                rank = self.rank(),
                step = self.step,
                download_ms = downloaded.as_secs_f64() * 1e3,
                encode_ms = (encoded - downloaded).as_secs_f64() * 1e3,
                post_ms = (t0.elapsed() - encoded).as_secs_f64() * 1e3,
                "frame part posted"
            );
            return Ok(false);
        }
        // A frame still pending is completed first: its parts must not land in this one.
        self.take_frame_parts(true);
        let waited = t0.elapsed();
        let index = IdIndex::Dense(self.total);
        // SAFETY: the caller's contract (out.count writable elements per non-null pointer);
        // this rank's ids are below `total` and disjoint from the other ranks'.
        unsafe { pack_part(&local, &index, &out) };
        tracing::debug!(
            step = self.step,
            download_ms = downloaded.as_secs_f64() * 1e3,
            previous_frame_ms = (waited - downloaded).as_secs_f64() * 1e3,
            pack_ms = (t0.elapsed() - waited).as_secs_f64() * 1e3,
            "rank 0's frame part packed"
        );
        self.frame = Some(PendingFrame {
            out,
            waiting: (1..self.ranks()).collect(),
        });
        Ok(!self.take_frame_parts(false))
    }

    fn kinematics_copy_done(&mut self) -> Result<bool, StepError> {
        Ok(self.take_frame_parts(false))
    }

    fn wait_kinematics_copy(&mut self) -> Result<(), StepError> {
        self.take_frame_parts(true);
        Ok(())
    }
}

impl Drop for CudaRank {
    fn drop(&mut self) {
        if let Some(s) = self
            .skin
            .as_ref()
            .filter(|s| s.skin.steps > 0 && self.rank() == 0)
        {
            tracing::info!("{}", s.summary());
        }
        let _ = self.sim.stream.synchronize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts of two ranks merge into one id-ordered state, histories included.
    #[test]
    fn rank_parts_merge_by_id() {
        let part = |ids: &[u32]| {
            let n = ids.len();
            let mut s = SimState::new(
                1.0,
                5,
                vec![1; n],
                ids.iter().map(|&i| [i as f64, 0.0, 0.0]).collect(),
                vec![[0.0; 3]; n],
                vec![[0.0; 3]; n],
            );
            s.id = ids.to_vec();
            s.contacts = ids.to_vec();
            s.history_cap = 2;
            s.history = ids
                .iter()
                .flat_map(|&i| {
                    let mut e = HistEntry::NONE;
                    e.partner = i;
                    [e, HistEntry::NONE]
                })
                .collect();
            s.history_overflows = 1;
            s
        };
        let s = merge_states(vec![part(&[1, 3]), part(&[0, 2])], 4);
        assert_eq!(s.id, vec![0, 1, 2, 3]);
        assert_eq!(s.contacts, vec![0, 1, 2, 3]);
        assert_eq!(s.pos[3], [3.0, 0.0, 0.0]);
        assert_eq!(s.history.len(), 8);
        assert_eq!(s.history[2 * 2].partner, 2);
        assert_eq!(s.history_overflows, 2);
    }
}
