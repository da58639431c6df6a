//! Several GPUs running one simulation (issue 14): one [`CudaSim`] per GPU, each owning a slab
//! of cell layers along the split axis (`window.rs`), driven step by step from one host
//! thread (every call but the exchange counts is asynchronous), as one [`FusedWorker`] that
//! the coordinator and the run loop treat like one GPU.
//!
//! A step with a neighbour search: classify (every GPU) -> read the counts (one small copy per
//! GPU) -> copy records to the neighbours device to device -> unpack -> neighbour search and
//! collide (every GPU). With a Verlet skin the GPUs search every few steps, on one schedule
//! (`skin::SharedSkin`); a step between searches refreshes the ghosts in place (pack -> copy ->
//! unpack, no synchronisation) and collides, and every step ends by reading each GPU's largest
//! move (window.rs). Every GPU writes its particles of a frame straight into GPU 0's staging
//! arrays (peer writes, id order): in the next step's collide with symplectic Euler
//! (publish.rs), else with `dem_pack` at once; GPU 0 copies the frame to the host once. The
//! slab bounds follow the work (`--balance`, [`balance`]).

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::CudaEvent;

use super::buffers::Buf;
use super::params::{INTEGRATE_EULER, INTEGRATE_HALF_KICK, INTEGRATE_NONE};
use super::skin::SharedSkin;
use super::window::{ExchangeCounts, Received};
use super::{CudaError, CudaOptions, CudaSim, FrameTarget, HistoryMode, HostRegistration};
use crate::core::geometry::BodyTransform;
use crate::core::vec3::V3;
use crate::decomp::balance::{self, Balance, BALANCE_INTERVAL};
use crate::decomp::{Axis, Plan};
use crate::dem::state::{SimState, StepContext};
use crate::exec::stages::{Stage, StageTimers};
use crate::exec::worker::{
    BackendStats, Energies, FusedWorker, RawKinematics, Snapshot, StepError,
};

/// How a run is spread over GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupOptions {
    /// Device ordinals, one slab each, in slab order (the same ordinal twice runs two slabs on
    /// one GPU: for tests).
    pub devices: Vec<usize>,
    /// Split axis; default: the longest axis of the domain.
    pub axis: Option<Axis>,
    pub balance: Balance,
}

/// Timing events of one step, per GPU: the step's start, the end of its exchange (or, refreshing beside the collide, of
/// the interior collide), its end (compute stream), and beside the collide the ends of the
/// refresh and of the boundary collide after it (refresh stream).
struct StepEvents {
    ev: Vec<[CudaEvent; 5]>,
    recorded: bool,
    /// The step refreshed its ghosts beside the interior collide (events 3 and 4 recorded).
    beside: bool,
}

/// See the module documentation.
pub struct CudaGroup {
    sims: Vec<CudaSim>,
    devices: Vec<usize>,
    axis: usize,
    bounds: Vec<u32>,
    ctx: Arc<StepContext>,
    /// Particles the run may hold (its particles and the inflow reserve): frame staging size.
    total: usize,
    /// Velocity Verlet's step stopped after its drift and outflow, where inflow particles are
    /// placed ([`FusedWorker::finish_step`] completes it).
    mid_step: bool,
    step: u64,
    time: f64,
    verlet: bool,
    forces_valid: bool,
    balance: Balance,
    /// Device time per GPU of the steps since the last balancing decision (each step from its
    /// start to its end on that GPU, waits for the neighbours included) [s], and those steps.
    busy: Vec<f64>,
    busy_steps: u64,
    /// Judges the measured-time modes' moves by their effect (`balance::MoveGuard`).
    guard: balance::MoveGuard,
    rebalances: u64,
    migrations: u64,
    /// Device time per GPU: exchange and compute [s], and steps timed. Compute is the step's
    /// time less the exchange the collide waited for.
    exchange_s: Vec<f64>,
    compute_s: Vec<f64>,
    /// Exchange time that ran while the GPU computed (the ghost refresh beside the interior
    /// collide) [s].
    hidden_s: Vec<f64>,
    /// Refresh the ghosts beside the interior collide (`CudaOptions::overlap`, resolved).
    overlap: bool,
    timed_steps: u64,
    /// Two sets, alternating: a step's events are read during the next step.
    events: [StepEvents; 2],
    /// Frame staging arrays on GPU 0 (id order, all particles), pack events and the copy.
    staging: Vec<Buf>,
    publish_done: Option<CudaEvent>,
    /// A published frame that the next step's collides write, each GPU its own particles
    /// (symplectic Euler; `publish::may_defer`), its copy queued behind them.
    deferred: Option<super::publish::DeferredFrame>,
    /// `CudaOptions::defer_frames`.
    defer_frames: bool,
    host: Option<HostRegistration>,
    /// Timing of the frames: per GPU, events around its pack (on its compute stream, which the
    /// pack holds up; frames packed at once only), and around the copy to the host (GPU 0's
    /// copy stream); device time summed over the frames timed [ms].
    frame_events: Option<FrameEvents>,
    pack_ms: Vec<f64>,
    copy_ms: f64,
    frames_timed: u64,
    frames_packed: u64,
    /// The Verlet skin's schedule, shared by every GPU (None: a search every step, skin.rs).
    skin: Option<SharedSkin>,
    /// With a skin: slab bounds the balancing chose, applied at the next search.
    pending_bounds: Option<Vec<u32>>,
}

pub(crate) fn err(step: u64, e: CudaError) -> StepError {
    StepError::Device {
        backend: "cuda",
        step,
        message: e.to_string(),
    }
}

impl CudaGroup {
    /// Splits `state` (ids 0..n) over `group.devices`: slabs cut so that each holds about as
    /// many particles, one [`CudaSim`] per slab with room for the whole run when it fits (so the
    /// balancing can move any load) and else for its share with headroom.
    pub fn new(
        ctx: Arc<StepContext>,
        state: &SimState,
        opts: &CudaOptions,
        group: &GroupOptions,
    ) -> Result<CudaGroup, CudaError> {
        super::driver::driver_available()?;
        let n0 = state.pos.len();
        // Slots and ids for the particles inflow sources will add.
        let total = n0 + opts.inflow_room;
        if ctx.outflows.is_empty() {
            super::check_dense_ids(state)?;
        }
        // Ids stay below this (a restart after removals has gaps; inflow plans ids ahead).
        let id_limit = state
            .id
            .iter()
            .copied()
            .max()
            .map_or(0, |m| m + 1)
            .max(opts.id_limit);
        let tracked = !ctx.outflows.is_empty() || opts.inflow_room > 0;
        let g = group.devices.len();
        if g < 2 {
            return Err(CudaError::Unsupported(
                "a GPU group of fewer than 2 GPUs".into(),
            ));
        }
        let skin = group_skin(&ctx, opts, total, tracked);
        let mut split = Split::with_skin(&ctx, state, group.axis, g, skin, None)?;
        // The refresh beside the collide by default where every slab has a GPU of its own and
        // the cut is not along x (an x layer is one cell of every row of the GPU's grid, and the
        // boundary pass over such scattered slots cost more than it hid: 262 against 279 steps/s
        // on two slabs of one H100, against 285 / 285 along z and 289 / 286 along y).
        // Distinct GPUs (tests put several slabs on one): for the overlap and the start notice.
        let gpus = {
            let mut d = group.devices.clone();
            d.sort_unstable();
            d.dedup();
            d.len()
        };
        let overlap = opts.overlap.unwrap_or(gpus == g && split.axis != 0);
        let opts = &CudaOptions {
            overlap: Some(overlap),
            ..opts.clone()
        };
        let slabs = Slabs {
            ctx: &ctx,
            state,
            opts,
            devices: &group.devices,
            total,
            tracked,
            id_limit,
        };
        let mut sims = match slabs.build(&split) {
            // The equal cut does not fit: where the GPUs' room differs (GPU 0 also stages
            // every particle's frame), cut by each GPU's free memory instead, once.
            Err(e @ CudaError::GroupDoesNotFit { .. }) => {
                let Some(w) = room_weights(&group.devices, total) else {
                    return Err(e);
                };
                let by_room = Split::with_skin(&ctx, state, group.axis, g, skin, Some(&w))?;
                if by_room.plan.bounds == split.plan.bounds {
                    return Err(e);
                }
                tracing::info!(
                    "{e}; cutting by each GPU's free memory instead (GPU 0 holds the frame \
                     staging): cell layers {:?}",
                    by_room.plan.bounds
                );
                split = by_room;
                slabs.build(&split)?
            }
            r => r?,
        };
        if let Some(note) = few_particles_notice(total, gpus) {
            tracing::warn!("{note}");
        }
        let (axis, plan) = (split.axis, &split.plan);
        let ctxs: Vec<&Arc<cudarc::driver::CudaContext>> = sims.iter().map(|s| &s.ctx).collect();
        enable_peer_access(&ctxs, &group.devices)?;
        if let Some(alive) = sims[0].alive_ptr() {
            for s in &mut sims[1..] {
                s.set_alive_target(alive);
            }
        }
        let events = [new_events(&sims)?, new_events(&sims)?];
        let verlet = sims[0].verlet();
        let width = sims[0].skin_width();
        tracing::info!(
            "{} GPUs, slabs along {} at cell layers {:?}: {:?} particles; {}",
            g,
            ["x", "y", "z"][axis],
            plan.bounds,
            sims.iter().map(|s| s.params.n).collect::<Vec<_>>(),
            if width > 0.0 {
                format!("Verlet skin {width:.3e} m (searches every few steps, ghosts refreshed between)")
            } else {
                "a neighbour search every step".to_string()
            }
        );
        Ok(CudaGroup {
            devices: group.devices.clone(),
            axis,
            bounds: split.plan.bounds,
            ctx,
            total,
            mid_step: false,
            step: state.step,
            time: state.time,
            verlet,
            forces_valid: state.forces_valid,
            balance: group.balance,
            busy: vec![0.0; g],
            busy_steps: 0,
            guard: balance::MoveGuard::default(),
            rebalances: 0,
            migrations: 0,
            exchange_s: vec![0.0; g],
            compute_s: vec![0.0; g],
            hidden_s: vec![0.0; g],
            overlap,
            timed_steps: 0,
            events,
            staging: Vec::new(),
            publish_done: None,
            deferred: None,
            defer_frames: opts.defer_frames,
            host: None,
            frame_events: None,
            pack_ms: vec![0.0; g],
            copy_ms: 0.0,
            frames_timed: 0,
            frames_packed: 0,
            skin: (width > 0.0).then(|| SharedSkin::new(width)),
            pending_bounds: None,
            sims,
        })
    }

    /// How the skin's searches went (None without a skin).
    pub fn skin_summary(&self) -> Option<String> {
        self.skin.as_ref().map(SharedSkin::summary)
    }

    /// (searches, steps, searches forced by moves past half the skin) with a skin.
    pub fn skin_counts(&self) -> Option<(u64, u64, u64)> {
        self.skin.as_ref().map(SharedSkin::counts)
    }

    /// Searches every `k` steps from the next search on, but where the moves pass half the
    /// skin (tests; no effect without a skin).
    #[doc(hidden)]
    pub fn fix_skin_interval(&mut self, k: u32) {
        if let Some(s) = self.skin.as_mut() {
            s.skin.fixed = Some(k.max(1));
        }
    }

    /// Whether the next step searches whatever the schedule (the moves passed half the
    /// skin): tests make one GPU search there too
    /// ([`CudaSim::force_search_next`]) to compare the two step by step.
    #[doc(hidden)]
    pub fn search_forced_next(&self) -> bool {
        self.skin.as_ref().is_some_and(SharedSkin::forced_next)
    }

    /// Whether this step searches (every GPU alike).
    fn search_due(&mut self) -> bool {
        self.skin.as_mut().is_none_or(SharedSkin::search_due)
    }

    /// A step between searches: every GPU packs its boundary layers' current state, the
    /// neighbours copy it device to device and write it into their ghost slots (the lists of
    /// the last search, window.rs). No synchronisation: the sizes are the lists'.
    fn refresh(&mut self, k: usize) -> Result<(), CudaError> {
        self.mark(k, 0)?;
        // The last step ended with every GPU synchronised (end_step): its events are complete.
        self.harvest(1 - k)?;
        self.events[k].beside = false;
        let streams: Vec<_> = self.sims.iter().map(|s| s.stream.clone()).collect();
        self.queue_refresh(&streams)?;
        self.mark(k, 1)
    }

    /// A step between searches whose ghost refresh runs beside the collide: on each GPU's
    /// refresh stream the pack, the copies, the unpack and then the collide of the boundary
    /// layers' slots, while its compute stream collides every slot that reads no ghost. Event
    /// 1 marks the interior collide's end, 3 the unpack's and 4 the boundary collide's (what of
    /// the refresh outlasted the interior is what the step waited for).
    fn refresh_beside_collide(&mut self, k: usize) -> Result<(), CudaError> {
        self.mark(k, 0)?;
        // The last step ended with every GPU synchronised (end_step): its events are complete.
        self.harvest(1 - k)?;
        self.events[k].beside = true;
        let streams: Vec<_> = self.sims.iter().map(|s| s.refresh_stream()).collect();
        for (ev, rs) in self.events[k].ev.iter().zip(&streams) {
            // The refresh reads the state the last step left (its compute stream's work).
            rs.wait(&ev[0])
                .map_err(|e| CudaError::driver("ordering the ghost refresh", e))?;
        }
        let mut interior = Vec::with_capacity(self.sims.len());
        for s in &mut self.sims {
            interior.push(s.launch_interior(INTEGRATE_EULER)?);
        }
        self.mark(k, 1)?;
        self.queue_refresh(&streams)?;
        let rec = |ev: &CudaEvent, rs: &Arc<cudarc::driver::CudaStream>| {
            ev.record(rs)
                .map_err(|e| CudaError::driver("recording an event", e))
        };
        for (((s, i), ev), rs) in self
            .sims
            .iter_mut()
            .zip(interior)
            .zip(&self.events[k].ev)
            .zip(&streams)
        {
            rec(&ev[3], rs)?;
            s.launch_boundary(rs, i)?;
            rec(&ev[4], rs)?;
            s.stream
                .wait(&ev[4])
                .map_err(|e| CudaError::driver("ordering the step's end", e))?;
        }
        Ok(())
    }

    /// Queues the ghost refresh on `streams` (one per GPU, ordered after the state they read):
    /// every GPU packs its boundary layers' current state, the neighbours copy it device to
    /// device and write it into their ghost slots.
    fn queue_refresh(&self, streams: &[Arc<cudarc::driver::CudaStream>]) -> Result<(), CudaError> {
        let mut packed = Vec::with_capacity(self.sims.len());
        for (s, rs) in self.sims.iter().zip(streams) {
            s.queue_refresh_pack(rs)?;
            packed.push(
                rs.record_event(None)
                    .map_err(|e| CudaError::driver("recording an event", e))?,
            );
        }
        let g = self.sims.len();
        let (_, rec_halo) = self.sims[0].record_sizes();
        let mut copies = Vec::new();
        for (h, rs) in streams.iter().enumerate() {
            let totals = self.sims[h].refresh_totals();
            for side in 0..2 {
                let Some(src) = neighbour(h, side, g) else {
                    continue;
                };
                // The receiver's copy waits for its neighbour's pack.
                rs.wait(&packed[src])
                    .map_err(|e| CudaError::driver("ordering the ghost refresh", e))?;
                copies.push(PeerCopy {
                    to: h,
                    from: src,
                    dst: self.sims[h].recv_ptr(true, side),
                    src: self.sims[src].send_ptr(true, 1 - side),
                    bytes: totals[2 + side] as usize * rec_halo,
                });
            }
        }
        let gpus: Vec<_> = self.sims.iter().map(|s| &s.ctx).zip(streams).collect();
        // SAFETY: every buffer is a live allocation holding the copy's bytes (the lists'
        // lengths fit both sides' buffers: ensure_refresh_room); each sender's pack is ordered
        // before the copy by the event its receiver's stream waits on.
        unsafe { queue_peer_copies(&gpus, &copies) }?;
        for (s, rs) in self.sims.iter().zip(streams) {
            s.queue_refresh_unpack(rs)?;
        }
        Ok(())
    }

    /// The end of a step with a skin: waits for every GPU and reads its largest move (and after
    /// a search its refresh lists, checked against its neighbours').
    fn read_skin(&mut self, searched: bool) -> Result<(), CudaError> {
        if self.skin.is_none() {
            return Ok(());
        }
        let mut status = Vec::with_capacity(self.sims.len());
        for s in &mut self.sims {
            let mut st = s.read_skin_status()?;
            if searched {
                st = s.ensure_refresh_room(st)?;
            }
            status.push(st);
        }
        super::window::check_ghost_lists(&status, &self.devices, self.step)?;
        let moved = status.iter().map(|s| s.moved as f64).fold(0.0, f64::max);
        if let Some(s) = self.skin.as_mut() {
            s.stepped(moved);
        }
        Ok(())
    }

    /// Slab bounds in cell layers along the split axis.
    pub fn bounds(&self) -> &[u32] {
        &self.bounds
    }

    /// Particles owned by each GPU.
    pub fn owned(&self) -> Vec<u32> {
        self.sims
            .iter()
            .map(|s| s.window().map_or(0, |w| w.owned))
            .collect()
    }

    /// Balancing decisions that moved a bound.
    pub fn rebalances(&self) -> u64 {
        self.rebalances
    }

    /// Particles that changed GPU.
    pub fn migrations(&self) -> u64 {
        self.migrations
    }

    /// Whether the ghost refresh runs beside the interior collide (`CudaOptions::overlap`).
    pub fn overlaps(&self) -> bool {
        self.overlap
    }

    /// The share of the exchange's device time that ran while the GPU computed, over every GPU
    /// and step timed (0 before any step was).
    pub fn hidden_share(&self) -> f64 {
        let e: f64 = self.exchange_s.iter().sum();
        if e > 0.0 {
            self.hidden_s.iter().sum::<f64>() / e
        } else {
            0.0
        }
    }

    /// Mean device time per step, per GPU [s]: the exchange, the rest of the step, and the part
    /// of the exchange that ran beside the computation (the step took rest + exchange - hidden).
    pub fn phase_times(&self) -> Vec<(f64, f64, f64)> {
        let n = self.timed_steps.max(1) as f64;
        (0..self.sims.len())
            .map(|g| {
                (
                    self.exchange_s[g] / n,
                    self.compute_s[g] / n,
                    self.hidden_s[g] / n,
                )
            })
            .collect()
    }

    /// Reads the events of the step recorded in set `k` (complete: the stream has passed them).
    fn harvest(&mut self, k: usize) -> Result<(), CudaError> {
        if !self.events[k].recorded {
            return Ok(());
        }
        let beside = self.events[k].beside;
        for (g, ev) in self.events[k].ev.iter().enumerate() {
            let t = if beside {
                beside_times(ev)?
            } else {
                // The exchange before the collide: all of it waited for.
                let exchange = elapsed_s(ev, 0, 1)?;
                BesideTimes {
                    step: elapsed_s(ev, 0, 2)?,
                    exchange,
                    hidden: 0.0,
                    compute: elapsed_s(ev, 1, 2)?,
                }
            };
            self.exchange_s[g] += t.exchange;
            self.hidden_s[g] += t.hidden;
            self.compute_s[g] += t.compute;
            self.busy[g] += t.step;
        }
        self.busy_steps += 1;
        self.timed_steps += 1;
        self.events[k].recorded = false;
        Ok(())
    }

    fn mark(&self, k: usize, which: usize) -> Result<(), CudaError> {
        for (s, ev) in self.sims.iter().zip(&self.events[k].ev) {
            ev[which]
                .record(&s.stream)
                .map_err(|e| CudaError::driver("recording an event", e))?;
        }
        Ok(())
    }

    /// Classify, copy and unpack on every GPU (Verlet: after the opening kick and drift).
    fn exchange(&mut self, kick: bool, k: usize) -> Result<(), CudaError> {
        self.mark(k, 0)?;
        self.events[k].beside = false;
        let step = self.step + 1;
        for s in &mut self.sims {
            if kick {
                s.launch_kick_drift_unmarked()?;
                // Velocity Verlet removes after the drift, before the forces (the CPU's order).
                s.queue_outflow(step)?;
            }
            s.queue_classify()?;
        }
        let mut counts: Vec<ExchangeCounts> = Vec::with_capacity(self.sims.len());
        for s in &mut self.sims {
            let mut c = s.read_counts()?;
            while !s.fits(&c)? {
                s.queue_classify()?;
                c = s.read_counts()?;
            }
            counts.push(c);
        }
        // The step before this one has passed every stream: its events can be read.
        self.harvest(1 - k)?;
        let mut removed = Vec::with_capacity(self.sims.len());
        for s in &mut self.sims {
            removed.push(s.removed_since()?);
        }
        let skipped: u32 = counts.iter().map(|c| c.skipped).sum();
        if skipped > 0 {
            return Err(CudaError::SlabSkipped {
                count: skipped,
                step: self.step,
            });
        }
        let g = self.sims.len();
        let got: Vec<Received> = (0..g)
            .map(|h| Received {
                mig: [
                    if h > 0 { counts[h - 1].mig[1] } else { 0 },
                    if h + 1 < g { counts[h + 1].mig[0] } else { 0 },
                ],
                halo: [
                    if h > 0 { counts[h - 1].halo[1] } else { 0 },
                    if h + 1 < g { counts[h + 1].halo[0] } else { 0 },
                ],
            })
            .collect();
        self.migrations += counts
            .iter()
            .map(|c| (c.mig[0] + c.mig[1]) as u64)
            .sum::<u64>();
        // The migrants' slots die in the next hash (dem_hash_count), after the copies.
        for (s, r) in self.sims.iter_mut().zip(&got) {
            s.make_room(r)?;
        }
        let (rec_mig, rec_halo) = self.sims[0].record_sizes();
        let mut copies = Vec::new();
        for (h, got_h) in got.iter().enumerate() {
            for side in 0..2 {
                let Some(src) = neighbour(h, side, g) else {
                    continue;
                };
                for (ghosts, n, rec) in [
                    (false, got_h.mig[side], rec_mig),
                    (true, got_h.halo[side], rec_halo),
                ] {
                    copies.push(PeerCopy {
                        to: h,
                        from: src,
                        dst: self.sims[h].recv_ptr(ghosts, side),
                        src: self.sims[src].send_ptr(ghosts, 1 - side),
                        bytes: n as usize * rec,
                    });
                }
            }
        }
        let gpus: Vec<_> = self.sims.iter().map(|s| (&s.ctx, &s.stream)).collect();
        // SAFETY: every buffer is a live allocation holding the copy's bytes (the sender's
        // counts fit its send buffer; make_room grew the receiver's); every sender's classify
        // completed (read_counts synchronised).
        unsafe { queue_peer_copies(&gpus, &copies) }?;
        for (h, s) in self.sims.iter_mut().enumerate() {
            s.queue_unpack(&got[h], &counts[h], removed[h])?;
        }
        self.mark(k, 1)?;
        Ok(())
    }

    /// The neighbour search (`search`) and the collide on every GPU; after a search with a
    /// skin, the refresh lists of the steps up to the next one.
    fn sort_collide(&mut self, integrate: u32, search: bool) -> Result<(), CudaError> {
        for s in &mut self.sims {
            s.launch_step_group(integrate, search)?;
            if search && self.skin.is_some() {
                s.queue_refresh_lists()?;
            }
        }
        Ok(())
    }

    fn prepare_meshes(&mut self, t: f64) -> Result<(), CudaError> {
        for s in &mut self.sims {
            s.prepare_meshes(t)?;
        }
        Ok(())
    }

    /// One step on every GPU (see the module documentation).
    fn one_step(&mut self) -> Result<(), CudaError> {
        let k = (self.step % 2) as usize;
        let dt = self.sims[0].dt();
        if !self.verlet {
            // A frame published since the last step: every GPU's collide writes its own
            // particles (the state the step starts from; the exchange moves none of them).
            let frame = self.deferred.take();
            for s in &mut self.sims {
                s.publish.slab_frame = frame.as_ref().map(|d| d.frame());
            }
            let r = self.euler_launches(k);
            for s in &mut self.sims {
                s.publish.slab_frame = None;
            }
            r?;
            if let Some(d) = frame {
                let s0 = &self.sims[0];
                for s in &self.sims {
                    super::driver::wait_for(&s0.copy_stream, &s.stream)?;
                }
                self.queue_copy(d, false)?;
            }
        } else {
            self.verlet_forces(k)?;
            self.prepare_meshes(self.time + dt)?;
            self.exchange(true, k)?;
            self.sort_collide(INTEGRATE_HALF_KICK, true)?;
            self.mark(k, 2)?;
        }
        self.end_step(k, dt)
    }

    /// The launches of a symplectic Euler step on every GPU, up to its last event (set `k`).
    fn euler_launches(&mut self, k: usize) -> Result<(), CudaError> {
        self.prepare_meshes(self.time)?;
        let search = self.search_due();
        if search {
            if let Some(b) = self.pending_bounds.take() {
                self.apply_bounds(b);
            }
            self.exchange(false, k)?;
            self.sort_collide(INTEGRATE_EULER, true)?;
        } else if self.overlap {
            self.refresh_beside_collide(k)?;
        } else {
            self.refresh(k)?;
            self.sort_collide(INTEGRATE_EULER, false)?;
        }
        // Stage `outflow` closes the step, as on the CPU.
        let step = self.step + 1;
        for s in &mut self.sims {
            s.queue_outflow(step)?;
        }
        self.mark(k, 2)?;
        self.read_skin(search)?;
        Ok(())
    }

    /// Velocity Verlet's first forces (a run that starts or restarts without them).
    fn verlet_forces(&mut self, k: usize) -> Result<(), CudaError> {
        if !self.forces_valid {
            self.prepare_meshes(self.time)?;
            self.exchange(false, k)?;
            self.sort_collide(INTEGRATE_NONE, true)?;
            self.forces_valid = true;
        }
        Ok(())
    }

    /// Closes a step whose launches are queued (and whose last event, set `k`, is recorded).
    fn end_step(&mut self, k: usize, dt: f64) -> Result<(), CudaError> {
        self.events[k].recorded = true;
        self.step += 1;
        // Accumulated as one GPU and the CPU do (meshes are placed at this time: same bits).
        self.time += dt;
        for s in &mut self.sims {
            s.set_clock(self.step, self.time);
        }
        if self.step.is_multiple_of(BALANCE_INTERVAL) {
            self.rebalance()?;
        }
        Ok(())
    }

    /// Velocity Verlet up to inflow placement: the opening half kick, drift and outflow of
    /// the next step on every GPU (the exchange comes after the placement, so that the new
    /// particles go out as ghosts and migrants like any other).
    fn open_step(&mut self) -> Result<(), CudaError> {
        let k = (self.step % 2) as usize;
        self.verlet_forces(k)?;
        self.prepare_meshes(self.time + self.sims[0].dt())?;
        let step = self.step + 1;
        for s in &mut self.sims {
            s.launch_kick_drift_unmarked()?;
            s.queue_outflow(step)?;
        }
        self.mid_step = true;
        Ok(())
    }

    /// Completes the step [`CudaGroup::open_step`] opened.
    fn close_step(&mut self) -> Result<(), CudaError> {
        let k = (self.step % 2) as usize;
        let dt = self.sims[0].dt();
        self.exchange(false, k)?;
        self.sort_collide(INTEGRATE_HALF_KICK, true)?;
        self.mark(k, 2)?;
        self.mid_step = false;
        self.end_step(k, dt)
    }

    /// Hands each particle an inflow source placed to the GPU owning its cell layer, behind
    /// its live slots; the next exchange sends it on as ghost or migrant.
    fn adopt_new(&mut self, new: &[crate::exec::inflow::NewParticle]) -> Result<(), CudaError> {
        // The new particles are not in a frame published before them: one waiting for a
        // collide is packed now.
        self.flush_deferred()?;
        let grid = self.ctx.grid(self.axis);
        let mut per: Vec<Vec<crate::exec::inflow::NewParticle>> = vec![Vec::new(); self.sims.len()];
        for p in new {
            let l = grid.cell_coords(p.pos)[self.axis];
            let w = self
                .bounds
                .partition_point(|&b| b <= l)
                .clamp(1, self.sims.len())
                - 1;
            per[w].push(*p);
        }
        for (s, batch) in self.sims.iter_mut().zip(per) {
            if batch.is_empty() {
                continue;
            }
            s.adopt(&batch)?;
            if let Some(w) = s.window.as_mut() {
                w.owned += batch.len() as u32;
                w.live += batch.len() as u32;
            }
        }
        // GPU 0 ranks the frame for every GPU.
        self.sims[0].mark_ranked();
        Ok(())
    }

    /// Moves the slab bounds toward equal work ([`balance::decide`]); the next exchange
    /// hands the particles of moved layers to their new GPU. In the measured-time modes a move
    /// is kept only if the steps after it are not slower ([`balance::MoveGuard`]). No decision
    /// while bounds wait for a search.
    fn rebalance(&mut self) -> Result<(), CudaError> {
        if self.balance == Balance::Off || self.pending_bounds.is_some() {
            return Ok(());
        }
        let mut per_layer: Vec<u64> = Vec::new();
        for s in &mut self.sims {
            let c = s.layer_counts()?;
            if per_layer.is_empty() {
                per_layer = vec![0; c.len()];
            }
            for (a, b) in per_layer.iter_mut().zip(c) {
                *a += b as u64;
            }
        }
        let room: Vec<u64> = self
            .sims
            .iter()
            .map(|s| s.window().map_or(0, |w| w.capacity as u64))
            .collect();
        // With a skin both sides list a boundary layer's particles alike only while no slab is
        // one layer thin (exchange.cu's refresh).
        let min_width = if self.skin.is_some() { 2 } else { 1 };
        let (balance, step) = (self.balance, self.step);
        let (bounds, busy) = (&self.bounds, &self.busy);
        let propose = || move_bounds(balance, bounds, &per_layer, busy, &room, step, min_width);
        let decision = if balance::guarded(balance) {
            let cost = balance::per_step_cost(busy, self.busy_steps);
            let fits = |b: &[u32]| balance::fits(b, &per_layer, &room);
            self.guard.decide(bounds, cost, fits, propose).into_bounds()
        } else {
            propose()
        };
        self.busy.iter_mut().for_each(|b| *b = 0.0);
        self.busy_steps = 0;
        if let Some(new) = decision {
            self.rebalances += 1;
            if self.skin.is_some() {
                // Applied at the next search (the ghosts and refresh lists are the last
                // search's until then): the searches keep one GPU's schedule whatever the
                // balancing decides, so a run's bits never depend on measured times.
                self.pending_bounds = Some(new);
            } else {
                self.apply_bounds(new);
            }
        }
        Ok(())
    }

    /// Moves kept and undone by the balancing's guard ([`balance::MoveGuard`]).
    pub fn guard_counts(&self) -> (u64, u64) {
        (self.guard.kept(), self.guard.undone())
    }

    /// Moves the slab bounds (the next exchange migrates the layers that changed GPU).
    fn apply_bounds(&mut self, new: Vec<u32>) {
        self.guard.applied();
        self.bounds = new;
        let bounds = self.bounds.clone();
        for (w, s) in self.sims.iter_mut().enumerate() {
            s.set_slab(&bounds, w);
        }
    }

    fn check_diag(&mut self) -> Result<(), CudaError> {
        for s in &mut self.sims {
            s.check_diag()?;
        }
        Ok(())
    }

    /// The whole state in id order (synchronises every GPU).
    pub fn state(&self) -> Result<SimState, CudaError> {
        let ids = self.sorted_live_ids()?;
        let n = ids.len();
        let index = |id: u32| ids.binary_search(&id).expect("a live id");
        let mut s = SimState::zeroed(self.time, self.step, n);
        for sim in &self.sims {
            sim.download_owned(&mut s, &index)?;
        }
        s.history_overflows = self.sims.iter().map(|s| s.history_overflows()).sum();
        s.forces_valid = if self.verlet {
            self.forces_valid
        } else {
            self.step > 0
        };
        Ok(s)
    }

    /// The live particles' positions in id order (a frame's), without the rest of the state
    /// (synchronises every GPU).
    pub fn positions(&self) -> Result<Vec<[f64; 3]>, CudaError> {
        let ids = self.sorted_live_ids()?;
        let index = |id: u32| ids.binary_search(&id).expect("a live id");
        let mut out = vec![[0.0; 3]; ids.len()];
        for sim in &self.sims {
            sim.download_owned_positions(&mut out, &index)?;
        }
        Ok(out)
    }

    /// Every GPU's live ids in order (removed particles leave gaps): a frame's and a state's
    /// order.
    fn sorted_live_ids(&self) -> Result<Vec<u32>, CudaError> {
        let mut ids = Vec::with_capacity(self.total);
        for sim in &self.sims {
            ids.extend(sim.live_ids()?);
        }
        ids.sort_unstable();
        Ok(ids)
    }

    fn failure(&self, e: CudaError) -> StepError {
        super::step_error(e, || self.state(), self.step, self.time)
    }

    fn ensure_staging(&mut self) -> Result<(), CudaError> {
        if self.staging.is_empty() {
            self.staging = super::publish::alloc_staging(&self.sims[0].stream, self.total)?;
        }
        Ok(())
    }

    fn publish_wait(&mut self) -> Result<(), CudaError> {
        self.flush_deferred()?;
        if let Some(ev) = self.publish_done.take() {
            ev.synchronize()
                .map_err(|e| CudaError::driver("waiting for the frame copy", e))?;
            self.time_frame()?;
        }
        Ok(())
    }

    /// Reads the timing events of the frame just copied (complete).
    fn time_frame(&mut self) -> Result<(), CudaError> {
        let Some(fe) = self.frame_events.as_mut().filter(|f| f.recorded) else {
            return Ok(());
        };
        fe.recorded = false;
        // The end events were recorded just behind the ones the frame copy waited for (no
        // work between): complete now, or within microseconds.
        let ms = |a: &CudaEvent, b: &CudaEvent| -> Result<f64, CudaError> {
            b.synchronize()
                .map_err(|e| CudaError::driver("reading an event", e))?;
            Ok(a.elapsed_ms(b)
                .map_err(|e| CudaError::driver("reading an event", e))? as f64)
        };
        let mut pack = Vec::with_capacity(fe.pack.len());
        if fe.packed {
            for (g, ev) in fe.pack.iter().enumerate() {
                let t = ms(&ev[0], &ev[1])?;
                self.pack_ms[g] += t;
                pack.push(t);
            }
            self.frames_packed += 1;
        }
        let copy = ms(&fe.copy[0], &fe.copy[1])?;
        self.copy_ms += copy;
        self.frames_timed += 1;
        tracing::debug!(
            step = self.step,
            ?pack,
            copy,
            "frame: pack per GPU (none: in the collides), copy to the host [ms]"
        );
        Ok(())
    }

    /// Mean device time per frame so far: each GPU's pack (on its compute stream; over the
    /// frames packed at once, empty if none was) and the copy to the host [ms]; None before a
    /// frame was timed.
    pub fn frame_times(&self) -> Option<(Vec<f64>, f64)> {
        (self.frames_timed > 0).then(|| {
            let p = self.frames_packed as f64;
            let pack = if self.frames_packed > 0 {
                self.pack_ms.iter().map(|t| t / p).collect()
            } else {
                Vec::new()
            };
            (pack, self.copy_ms / self.frames_timed as f64)
        })
    }

    /// Whether a frame published from now on may be written by the next step's collides
    /// (`CudaOptions::defer_frames`; the bench compares both in one run).
    pub fn set_defer_frames(&mut self, on: bool) {
        self.defer_frames = on;
    }

    /// Whether the frame in flight waits for the next step's collides to write it.
    pub fn publication_deferred(&self) -> bool {
        self.deferred.is_some()
    }

    /// Packs a frame that waits for a collide now, with `dem_pack` on every GPU (nothing
    /// changed the state since it was published), and queues its copy.
    fn flush_deferred(&mut self) -> Result<(), CudaError> {
        match self.deferred.take() {
            Some(d) => self.pack_frame(d),
            None => Ok(()),
        }
    }

    /// The frames' timing events, made at the first frame.
    fn ensure_frame_events(&mut self) -> Result<(), CudaError> {
        if self.frame_events.is_none() {
            self.frame_events = Some(FrameEvents::new(&self.sims)?);
        }
        Ok(())
    }

    /// Packs frame `d` now: every GPU packs its particles straight into GPU 0's staging (id
    /// order, peer writes), then the copy to the host.
    fn pack_frame(&mut self, d: super::publish::DeferredFrame) -> Result<(), CudaError> {
        self.ensure_frame_events()?;
        let fe = self.frame_events.as_ref().expect("just made");
        let s0 = &self.sims[0];
        for (s, ev) in self.sims.iter().zip(&fe.pack) {
            record(&ev[0], &s.stream)?;
            s.queue_pack(d.staging(), &s0.copy_stream, Some(d.rank()))?;
            record(&ev[1], &s.stream)?;
        }
        self.queue_copy(d, true)
    }

    /// Queues the copy of frame `d` to the host on GPU 0's copy stream, which the caller made
    /// wait for every GPU's pack or collide (`packed`: by `dem_pack`, with its events).
    fn queue_copy(
        &mut self,
        d: super::publish::DeferredFrame,
        packed: bool,
    ) -> Result<(), CudaError> {
        self.ensure_frame_events()?;
        let fe = self.frame_events.as_mut().expect("just made");
        let s0 = &self.sims[0];
        let (want, n) = d.destinations();
        record(&fe.copy[0], &s0.copy_stream)?;
        // SAFETY: `publish_async`'s caller keeps the destinations valid and untouched until the
        // copy completed; GPU 0's staging arrays hold `total` >= n elements and are written
        // again only by the next publication, queued after this copy completed (publish_wait).
        let done =
            unsafe { super::publish::queue_frame_copy(&self.staging, &want, n, &s0.copy_stream) }?;
        record(&fe.copy[1], &s0.copy_stream)?;
        fe.recorded = true;
        fe.packed = packed;
        self.publish_done = Some(done);
        Ok(())
    }

    /// Publishes the current state into `target` (`count` live particles): written by the next
    /// step's collides where it may be (`publish::may_defer`), else packed now by every GPU
    /// into GPU 0's staging (id order); then copied to the host.
    ///
    /// # Safety
    /// As [`CudaSim::publish_async`].
    unsafe fn publish_async(&mut self, target: FrameTarget, count: usize) -> Result<(), CudaError> {
        self.publish_wait()?;
        self.ensure_staging()?;
        let want = target.pointers();
        let s0 = &self.sims[0];
        // Frame indices of the live ids (outflow): GPU 0 scans its alive flags once every GPU's
        // outflow stage has passed, and every GPU packs by them.
        let rank = if s0.alive_ptr().is_some() {
            for s in &self.sims[1..] {
                super::driver::wait_for(&s0.stream, &s.stream)?;
            }
            let r = s0.queue_ranks()?;
            for s in &self.sims[1..] {
                super::driver::wait_for(&s.stream, &s0.stream)?;
            }
            r
        } else {
            0
        };
        let d = super::publish::DeferredFrame::new(&self.staging, &want, rank, count);
        if super::publish::may_defer(self.defer_frames, self.verlet, &want) {
            let d = match d.contacts_only() {
                Some(contacts) => {
                    for s in &self.sims {
                        s.queue_pack(&contacts, &s0.copy_stream, Some(rank))?;
                    }
                    // Packed: a flush packs the kinematics alone.
                    d.without_contacts()
                }
                None => d,
            };
            self.deferred = Some(d);
            Ok(())
        } else {
            self.pack_frame(d)
        }
    }
}

/// Records `ev` on `stream`.
fn record(ev: &CudaEvent, stream: &cudarc::driver::CudaStream) -> Result<(), CudaError> {
    ev.record(stream)
        .map_err(|e| CudaError::driver("recording an event", e))
}

/// The balancing decision of a GPU group or of GPU ranks ([`balance::decide`], whole layers,
/// from every GPU's per-layer counts and busy time), refused when it would put more load on a
/// GPU than its `room` slots hold with its ghosts and a layer's arrivals (a run sized to the
/// GPUs' memory keeps running). A move is logged at debug level.
pub(crate) fn move_bounds(
    how: Balance,
    bounds: &[u32],
    per_layer: &[u64],
    busy: &[f64],
    room: &[u64],
    step: u64,
    min_width: u32,
) -> Option<Vec<u32>> {
    let new = balance::decide(how, bounds, per_layer, busy, min_width)
        .filter(|new| balance::fits(new, per_layer, room))?;
    tracing::debug!(step, by = how.name(), from = ?bounds, to = ?new, "GPU slab bounds moved");
    Some(new)
}

/// The first cut of a run over `g` GPUs (in one process or over MPI ranks): the split axis,
/// slab bounds with about equal particle counts, and each particle's slab.
pub(crate) struct Split {
    pub axis: usize,
    pub plan: Plan,
    owner: Vec<usize>,
    /// Particles of the fullest cell layer, and the halo reserve of a GPU's slots.
    pub max_layer: usize,
    reserve: usize,
    spin: bool,
    /// The GPUs' Verlet skin as a fraction of the largest diameter (0: a search every step);
    /// the layers are cells of the skin's grid.
    pub skin: f64,
    /// Slab 0's GPU stages every particle's frame (a group's; GPU ranks download their parts
    /// instead and stage nothing): its slots leave room for that.
    pub stages_frames: bool,
}

impl Split {
    /// The cut into `g` slabs of equal particle counts, or with `weights` (one per slab) of
    /// shares after them ([`Plan::weighted`]).
    pub(crate) fn new(
        ctx: &StepContext,
        state: &SimState,
        axis: Option<Axis>,
        g: usize,
        skin: f64,
        weights: Option<&[f64]>,
    ) -> Result<Split, CudaError> {
        let axis = axis
            .unwrap_or_else(|| gpu_split_axis(ctx.domain_min, ctx.domain_max))
            .index();
        // The GPUs' grid (buffers::gpu_grid_skin): the same cells, any axis.
        let width = super::skin::skin_width(ctx, skin, false);
        let grid = if width > 0.0 {
            ctx.grid_with_cell(axis, 2.0 * ctx.max_radius() + width)
        } else {
            ctx.grid(axis)
        };
        let plan = match weights {
            Some(w) => Plan::weighted(&grid, w, &state.pos),
            None => Plan::balanced(&grid, g as u32, &state.pos),
        }
        .map_err(|e| CudaError::Unsupported(format!("this split: {e}")))?;
        let mut per_layer = vec![0u64; grid.dims[axis] as usize];
        let mut owner = Vec::with_capacity(state.pos.len());
        for &p in &state.pos {
            let l = grid.cell_coords(p)[axis];
            per_layer[l as usize] += 1;
            owner.push(plan.owner_of_layer(l));
        }
        let max_layer = per_layer.iter().copied().max().unwrap_or(0) as usize;
        Ok(Split {
            axis,
            plan,
            owner,
            max_layer,
            reserve: 4 * max_layer + 4096,
            spin: state.omega.iter().any(|w| *w != [0.0; 3]),
            skin: if width > 0.0 { skin } else { 0.0 },
            stages_frames: true,
        })
    }

    /// [`Split::new`] with the skin `skin` where every slab has two cell layers or more, which
    /// the ghost refresh needs (exchange.cu), else without.
    pub(crate) fn with_skin(
        ctx: &StepContext,
        state: &SimState,
        axis: Option<Axis>,
        g: usize,
        skin: f64,
        weights: Option<&[f64]>,
    ) -> Result<Split, CudaError> {
        let split = Split::new(ctx, state, axis, g, skin, weights)?;
        if split.skin == 0.0 || split.plan.bounds.windows(2).all(|b| b[1] >= b[0] + 2) {
            return Ok(split);
        }
        tracing::info!(
            "no Verlet skin: a slab of one cell layer at {:?} (the search runs every step)",
            split.plan.bounds
        );
        Split::new(ctx, state, axis, g, 0.0, weights)
    }

    /// GPU `w`'s sim on `device` with its particles of `state` and its window attached (the
    /// slab a group or a rank steps), its slot capacity and its particles as a state of their
    /// own.
    pub(crate) fn slab_sim(
        &self,
        ctx: &Arc<StepContext>,
        state: &SimState,
        opts: &CudaOptions,
        w: usize,
        device: usize,
        total: usize,
    ) -> Result<(CudaSim, usize, SimState), CudaError> {
        let g = self.plan.bounds.len() - 1;
        let n0 = state.pos.len();
        let (reserve, max_layer, spin, skin) = (self.reserve, self.max_layer, self.spin, self.skin);
        let idx: Vec<usize> = (0..n0).filter(|&i| self.owner[i] == w).collect();
        let sub = subset(state, &idx);
        let o = CudaOptions {
            device,
            store_forces: true,
            // The collide's two passes: between a skin's searches, refreshing beside them (the
            // group and the ranks resolve `overlap` before they build their slabs).
            slab: skin > 0.0 && opts.overlap == Some(true),
            // Frames: a group's GPU 0 stages every particle's (`extra` below, where
            // `Split::stages_frames`); GPU ranks download their parts instead.
            frame_staging: false,
            ..opts.clone()
        };
        // Speed first, then room. Each configuration, fastest first (the Verlet list and two
        // history buffers; then without the list; then (auto) one history buffer updated in
        // place, the order one GPU falls back in), is tried with room for every particle (the
        // load may gather on one GPU, a bed forming, faster than one layer per balancing move
        // follows it), else with as many slots as the GPU holds besides its exchange buffers
        // and (a group's GPU 0) the frame staging, at least its share with headroom; balancing never
        // moves more load onto a GPU than its slots hold (`rebalance`). Room for every particle
        // bought with a slower configuration cost a third of the speed at 100 M particles per
        // H200 (session 24: weak efficiency 0.66), so a faster configuration with room for its
        // share wins.
        let sized = |history: HistoryMode, list: bool| -> Result<(CudaSim, usize), CudaError> {
            let o = CudaOptions {
                history,
                neighbour_list: list,
                memory_fallbacks: false,
                ..o.clone()
            };
            let capacity = total + reserve;
            match CudaSim::with_capacity(ctx, &sub, &o, capacity, spin, skin) {
                Ok(s) => Ok((s, capacity)),
                Err(CudaError::DoesNotFit {
                    max_particles,
                    bytes_per_particle,
                    ..
                }) => {
                    let extra = exchange_bytes(&o, max_layer)
                        + if w == 0 && self.stages_frames {
                            total as u64 * super::publish::STAGING_BYTES_PER_PARTICLE
                        } else {
                            0
                        };
                    let fit = slots_that_fit(max_particles, extra, bytes_per_particle);
                    let need = share_with_headroom(idx.len(), reserve);
                    if fit < need {
                        return Err(CudaError::GroupDoesNotFit {
                            gpus: g,
                            particles: n0,
                            device,
                            share: idx.len(),
                            need,
                            fit,
                            bytes_per_particle,
                            max_particles: group_max_particles(fit, g, reserve),
                        });
                    }
                    let capacity = fit.min(total + reserve);
                    Ok((
                        CudaSim::with_capacity(ctx, &sub, &o, capacity, spin, skin)?,
                        capacity,
                    ))
                }
                Err(e) => Err(e),
            }
        };
        let mut built = None;
        for (history, list) in slab_configurations(opts.history, opts.neighbour_list && skin > 0.0)
        {
            match sized(history, list) {
                Err(e @ CudaError::GroupDoesNotFit { .. }) => built = Some(Err(e)),
                r => {
                    built = Some(r);
                    break;
                }
            }
        }
        // slab_configurations lists one at least.
        let (mut sim, capacity) = built.unwrap_or(Err(CudaError::Unsupported(
            "no slab configuration to try".into(),
        )))?;
        sim.attach_window(
            self.axis,
            &self.plan.bounds,
            w,
            capacity,
            (2 * self.max_layer) as u32,
        )?;
        Ok((sim, capacity, sub))
    }
}

/// What every slab of a group is built from (`CudaGroup::new`).
struct Slabs<'a> {
    ctx: &'a Arc<StepContext>,
    state: &'a SimState,
    opts: &'a CudaOptions,
    devices: &'a [usize],
    total: usize,
    tracked: bool,
    id_limit: u32,
}

impl Slabs<'_> {
    /// Every slab of `split`, its window attached.
    fn build(&self, split: &Split) -> Result<Vec<CudaSim>, CudaError> {
        // Each GPU builds its slabs (subset, module, allocations, upload) on a thread of its
        // own: one after the other, 400 M particles took 119 s to start on four H200s. Slabs
        // that share a GPU are built in turn on its thread, each sized by the memory the ones
        // before it left.
        let slab = |w: usize, device: usize| -> Result<CudaSim, CudaError> {
            let (mut sim, capacity, sub) =
                split.slab_sim(self.ctx, self.state, self.opts, w, device, self.total)?;
            if self.tracked {
                // GPU 0's alive flags cover every id of the run (frame ranks); the others set
                // and clear theirs there (peer writes, set below).
                let ids = if w == 0 { &self.state.id } else { &sub.id };
                sim.set_outflows(&self.ctx.outflows, ids, self.id_limit, capacity)?;
            }
            Ok(sim)
        };
        let g = self.devices.len();
        let mut distinct = self.devices.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let mut built: Vec<(usize, Result<CudaSim, CudaError>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = distinct
                .iter()
                .map(|&device| {
                    let slab = &slab;
                    let mine: Vec<usize> = (0..g).filter(|&w| self.devices[w] == device).collect();
                    scope.spawn(move || {
                        mine.into_iter()
                            .map(|w| (w, slab(w, device)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| {
                    h.join().unwrap_or_else(|_| {
                        vec![(
                            0,
                            Err(CudaError::Unsupported(
                                "building a GPU's slabs panicked".into(),
                            )),
                        )]
                    })
                })
                .collect()
        });
        built.sort_by_key(|(w, _)| *w);
        // The first slab's error in device order, as the serial build reported it.
        built.into_iter().map(|(_, r)| r).collect()
    }
}

/// Particles per GPU below which a run on several GPUs may be slower than on one: 2 M particles
/// on four H200s (500 k each) ran 3,508 steps/s against one GPU's 4,111 (session 24,
/// `bench/results/session24_checks.md`), a step of 0.32 ms bound by launches and the exchange
/// rather than by the particles.
pub const FEW_PARTICLES_PER_GPU: usize = 1_000_000;

/// The start notice of a run of `total` particles over `gpus` GPUs (distinct devices) when each
/// gets fewer than [`FEW_PARTICLES_PER_GPU`]; `None` otherwise.
pub fn few_particles_notice(total: usize, gpus: usize) -> Option<String> {
    if gpus < 2 || total >= FEW_PARTICLES_PER_GPU * gpus {
        return None;
    }
    Some(format!(
        "{total} particles on {gpus} GPUs is about {} per GPU: below about {} per GPU a step is \
         bound by kernel launches and the exchange between GPUs, not by the particles (2 M \
         particles on four H200s ran slower than on one), so fewer GPUs may run faster",
        total / gpus,
        FEW_PARTICLES_PER_GPU
    ))
}

/// Each slab's share of its GPU's free memory, less (slab 0) the frame staging of every
/// particle: the weights of a cut by room. None where a GPU cannot be asked or has no room.
fn room_weights(devices: &[usize], total: usize) -> Option<Vec<f64>> {
    let staging = total as f64 * super::publish::STAGING_BYTES_PER_PARTICLE as f64;
    let w: Vec<f64> = devices
        .iter()
        .enumerate()
        .map(|(k, &d)| {
            let sharing = devices.iter().filter(|&&e| e == d).count() as f64;
            let free = super::driver::free_bytes(d).ok()? as f64 / sharing;
            Some(if k == 0 { free - staging } else { free })
        })
        .collect::<Option<_>>()?;
    w.iter().all(|&x| x > 0.0).then_some(w)
}

/// Timing events of one frame of a group: around each GPU's pack, around the copy.
struct FrameEvents {
    pack: Vec<[CudaEvent; 2]>,
    copy: [CudaEvent; 2],
    recorded: bool,
    /// The frame was packed by `dem_pack` (its pack events recorded), not by the collides.
    packed: bool,
}

impl FrameEvents {
    fn new(sims: &[CudaSim]) -> Result<FrameEvents, CudaError> {
        let ev = |s: &CudaSim| {
            s.ctx
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| CudaError::driver("creating an event", e))
        };
        let mut pack = Vec::with_capacity(sims.len());
        for s in sims {
            pack.push([ev(s)?, ev(s)?]);
        }
        Ok(FrameEvents {
            pack,
            copy: [ev(&sims[0])?, ev(&sims[0])?],
            recorded: false,
            packed: false,
        })
    }
}

fn new_events(sims: &[CudaSim]) -> Result<StepEvents, CudaError> {
    let mut ev = Vec::new();
    for s in sims {
        let e = || {
            s.ctx
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| CudaError::driver("creating an event", e))
        };
        ev.push([e()?, e()?, e()?, e()?, e()?]);
    }
    Ok(StepEvents {
        ev,
        recorded: false,
        beside: false,
    })
}

/// The Verlet skin of a group's GPUs as a fraction of the largest diameter (0: a search every
/// step): as one GPU's (`CudaOptions::skin`, [`auto_skin`](super::auto_skin) of the run's
/// particles), but none where slots change between steps (inflow, outflow: `tracked`), in the
/// f64 parity mode or with velocity Verlet (skin.rs).
pub(crate) fn group_skin(
    ctx: &StepContext,
    opts: &CudaOptions,
    total: usize,
    tracked: bool,
) -> f64 {
    if tracked {
        return 0.0;
    }
    let fraction = if opts.skin < 0.0 {
        super::skin::auto_skin(total)
    } else {
        opts.skin
    };
    if super::skin::skin_width(ctx, fraction, opts.double) > 0.0 {
        fraction
    } else {
        0.0
    }
}

/// The neighbour of GPU `h` of `g` on `side` (0 lower, 1 upper), if any.
pub(crate) fn neighbour(h: usize, side: usize, g: usize) -> Option<usize> {
    match side {
        0 => h.checked_sub(1),
        _ => (h + 1 < g).then_some(h + 1),
    }
}

/// One device-to-device copy of an exchange: `bytes` from `src` on GPU `from` into `dst` on GPU
/// `to`.
pub(crate) struct PeerCopy {
    pub to: usize,
    pub from: usize,
    pub dst: u64,
    pub src: u64,
    pub bytes: usize,
}

/// Queues `copies` on their receivers' streams (`gpus`: context and stream of each GPU), then
/// makes each sender's stream wait for the copies out of its buffers, which it must not write
/// again before they are done. Empty copies are skipped.
///
/// # Safety
/// Every `src` and `dst` must be a live allocation of its GPU holding `bytes` bytes, and every
/// `src` must be complete before this call (its writer's stream synchronised).
pub(crate) unsafe fn queue_peer_copies(
    gpus: &[(
        &Arc<cudarc::driver::CudaContext>,
        &Arc<cudarc::driver::CudaStream>,
    )],
    copies: &[PeerCopy],
) -> Result<(), CudaError> {
    let mut copied: Vec<Option<CudaEvent>> = (0..gpus.len()).map(|_| None).collect();
    for (h, (ctx, stream)) in gpus.iter().enumerate() {
        let mut any = false;
        for c in copies.iter().filter(|c| c.to == h && c.bytes > 0) {
            // SAFETY: the caller's contract.
            unsafe {
                cudarc::driver::result::memcpy_peer_async(
                    ctx.cu_ctx(),
                    c.dst,
                    gpus[c.from].0.cu_ctx(),
                    c.src,
                    c.bytes,
                    stream.cu_stream(),
                )
            }
            .map_err(|e| CudaError::driver("copying records between GPUs", e))?;
            any = true;
        }
        if any {
            copied[h] = Some(
                stream
                    .record_event(None)
                    .map_err(|e| CudaError::driver("recording an event", e))?,
            );
        }
    }
    for c in copies.iter().filter(|c| c.bytes > 0) {
        if let Some(ev) = &copied[c.to] {
            gpus[c.from]
                .1
                .wait(ev)
                .map_err(|e| CudaError::driver("ordering the exchange", e))?;
        }
    }
    Ok(())
}

/// Lets every GPU of the group read and write every other's memory (records between
/// neighbours; frames into GPU 0). Two slabs on one device need nothing.
pub(crate) fn enable_peer_access(
    ctxs: &[&Arc<cudarc::driver::CudaContext>],
    devices: &[usize],
) -> Result<(), CudaError> {
    for (a, sa) in ctxs.iter().enumerate() {
        for (b, sb) in ctxs.iter().enumerate() {
            if devices[a] == devices[b] {
                continue;
            }
            let mut can = 0i32;
            // SAFETY: plain queries and context calls with live contexts of this group.
            let r = unsafe {
                cudarc::driver::sys::cuDeviceCanAccessPeer(&mut can, sa.cu_device(), sb.cu_device())
            };
            r.result().map_err(|e| CudaError::NoPeerAccess {
                a: devices[a],
                b: devices[b],
                message: e.to_string(),
            })?;
            if can == 0 {
                return Err(CudaError::NoPeerAccess {
                    a: devices[a],
                    b: devices[b],
                    message: "the driver reports no peer access between them".into(),
                });
            }
            sa.bind_to_thread()
                .map_err(|e| CudaError::driver("binding a context", e))?;
            // SAFETY: enables access from the current context (a's) to b's context.
            let r = unsafe { cudarc::driver::sys::cuCtxEnablePeerAccess(sb.cu_ctx(), 0) };
            if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS
                && r != cudarc::driver::sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
            {
                return Err(CudaError::NoPeerAccess {
                    a: devices[a],
                    b: devices[b],
                    message: format!("{r:?}"),
                });
            }
            // cudarc allocates from the device's stream-ordered memory pool (cuMemAllocAsync),
            // whose memory peer access does not cover: a's kernels write b's frame staging, so
            // b's pool must let a's device read and write it (found on two H200s: the pack
            // kernel's peer writes faulted while peer copies worked).
            let mut pool: cudarc::driver::sys::CUmemoryPool = std::ptr::null_mut();
            // SAFETY: a plain query with b's live device; `pool` is written by the call.
            let r = unsafe { cudarc::driver::sys::cuDeviceGetMemPool(&mut pool, sb.cu_device()) };
            r.result().map_err(|e| CudaError::NoPeerAccess {
                a: devices[a],
                b: devices[b],
                message: format!("reading the memory pool: {e}"),
            })?;
            let desc = cudarc::driver::sys::CUmemAccessDesc {
                location: cudarc::driver::sys::CUmemLocation {
                    type_: cudarc::driver::sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: sa.cu_device(),
                },
                flags: cudarc::driver::sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            // SAFETY: `pool` is b's live pool and `desc` one valid descriptor.
            let r = unsafe { cudarc::driver::sys::cuMemPoolSetAccess(pool, &desc, 1) };
            r.result().map_err(|e| CudaError::NoPeerAccess {
                a: devices[a],
                b: devices[b],
                message: format!("opening the memory pool: {e}"),
            })?;
        }
    }
    Ok(())
}

/// Device bytes of a GPU's exchange buffers at the start (`attach_window`: room for two
/// layers' records a direction, send and receive, both sides) with a quarter for their growth.
fn exchange_bytes(o: &CudaOptions, max_layer: usize) -> u64 {
    let real = if o.double { 8 } else { 4 };
    let (rec_mig, rec_halo) = super::window::record_bytes(real, o.hist_cap as usize);
    let records = (2 * max_layer).max(256) as u64;
    (2 * 2 * records * (rec_mig + rec_halo) as u64) * 5 / 4
}

/// Seconds from event `a` to event `b` of one step's set.
pub(crate) fn elapsed_s(ev: &[CudaEvent], a: usize, b: usize) -> Result<f64, CudaError> {
    Ok(ev[a]
        .elapsed_ms(&ev[b])
        .map_err(|e| CudaError::driver("reading an event", e))? as f64
        * 1e-3)
}

/// What one GPU's step spent [s] (a group's or a rank's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BesideTimes {
    /// The whole step.
    pub step: f64,
    /// The exchange (beside the collide: the refresh, from the step's start to its unpack).
    pub exchange: f64,
    /// The part of the exchange that ran while the GPU computed.
    pub hidden: f64,
    /// The step less the exchange it waited for.
    pub compute: f64,
}

/// [`BesideTimes`] of a step that refreshed beside the collide, from its five events (see
/// `StepEvents`): the step waited for whatever of the refresh, and of the boundary collide after
/// it, outlasted the interior collide (event 1 to event 4).
pub(crate) fn beside_times(ev: &[CudaEvent]) -> Result<BesideTimes, CudaError> {
    Ok(split_beside(
        elapsed_s(ev, 0, 2)?,
        elapsed_s(ev, 0, 3)?,
        elapsed_s(ev, 1, 4)?,
    ))
}

/// [`beside_times`] from the step's time, the refresh's and how long after the interior
/// collide the boundary collide ended (negative: before it; at most the refresh counts).
fn split_beside(step: f64, exchange: f64, late: f64) -> BesideTimes {
    let exposed = late.max(0.0).min(exchange);
    BesideTimes {
        step,
        exchange,
        hidden: exchange - exposed,
        compute: step - exposed,
    }
}

/// The axis a GPU group or GPU ranks cut along by default: the longest of the domain, and on
/// ties y, then x, then z. In the GPU's slot order (x fastest, z slowest) a y layer is a whole
/// row of cells in each z plane, an x layer one cell of every row: a cut along y keeps each
/// boundary layer in long slot ranges (the exchange's and the boundary collide's reads), and,
/// like x, splits a bed settling under gravity evenly. Measured on two slabs of one H100 at
/// 10 M dense with friction: 286-289 steps/s along y, 279 along x (`raw/session20/axis/`).
pub(crate) fn gpu_split_axis(min: V3, max: V3) -> Axis {
    let ext: [f64; 3] = std::array::from_fn(|a| max[a] - min[a]);
    let longest = ext.iter().cloned().fold(0.0, f64::max);
    [Axis::Y, Axis::X, Axis::Z]
        .into_iter()
        .find(|a| ext[a.index()] >= longest)
        .unwrap_or(Axis::X)
}

/// Particle slots a GPU holds: `max_particles` (its free memory at `bytes_per_particle`, as
/// [`CudaError::DoesNotFit`] computed it) less `extra` bytes, with 2 % to spare.
pub(crate) fn slots_that_fit(max_particles: u64, extra: u64, bytes_per_particle: f64) -> usize {
    let extra_slots = (extra as f64 / bytes_per_particle.max(1.0)).ceil() as u64;
    (max_particles.saturating_sub(extra_slots) as f64 * 0.98) as usize
}

/// The configurations a slab tries, fastest first: (history mode, Verlet list). With `Auto`
/// history: two buffers with the list, two without it, then one buffer updated in place (the
/// order in which one GPU gives them up); an explicit mode keeps its history.
pub(crate) fn slab_configurations(history: HistoryMode, list: bool) -> Vec<(HistoryMode, bool)> {
    let modes = match history {
        HistoryMode::Auto => vec![HistoryMode::Double, HistoryMode::InPlace],
        h => vec![h],
    };
    let mut out = Vec::new();
    for (k, h) in modes.into_iter().enumerate() {
        if list && k == 0 {
            out.push((h, true));
        }
        out.push((h, false));
    }
    out
}

/// Slots a GPU needs for a share of `share` particles: the share, a sixteenth more for the
/// load that moves before the balancing follows it, and `reserve` for ghosts and arrivals.
pub(crate) fn share_with_headroom(share: usize, reserve: usize) -> usize {
    share + share / 16 + reserve
}

/// About the most particles `g` GPUs of `fit` slots each hold (each needs
/// [`share_with_headroom`] of its share).
pub(crate) fn group_max_particles(fit: usize, g: usize, reserve: usize) -> u64 {
    (fit.saturating_sub(reserve) as f64 / (1.0 + 1.0 / 16.0)) as u64 * g as u64
}

/// The particles `idx` of `state` (with their history) as a state of their own.
fn subset(state: &SimState, idx: &[usize]) -> SimState {
    let pick = |v: &[[f64; 3]]| idx.iter().map(|&i| v[i]).collect::<Vec<_>>();
    let mut s = SimState::new(
        state.time,
        state.step,
        idx.iter().map(|&i| state.species[i]).collect(),
        pick(&state.pos),
        pick(&state.vel),
        pick(&state.omega),
    );
    s.id = idx.iter().map(|&i| state.id[i]).collect();
    s.force = pick(&state.force);
    s.torque = pick(&state.torque);
    s.contacts = idx.iter().map(|&i| state.contacts[i]).collect();
    s.forces_valid = state.forces_valid;
    let cap = state.history_cap;
    if !state.history.is_empty() && state.history.len() == cap * state.pos.len() {
        s.history_cap = cap;
        s.history = idx
            .iter()
            .flat_map(|&i| state.history[i * cap..(i + 1) * cap].iter().copied())
            .collect();
    }
    s.history_overflows = 0;
    s
}

impl FusedWorker for CudaGroup {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn stable_dt(&self) -> f64 {
        self.ctx.dt
    }

    fn advance(&mut self, n_steps: u64) -> Result<(), StepError> {
        for _ in 0..n_steps {
            if let Err(e) = self.one_step() {
                return Err(self.failure(e));
            }
        }
        self.check_diag().map_err(|e| self.failure(e))
    }

    fn advance_to_placement(&mut self, n: u64) -> Result<(), StepError> {
        if !self.verlet || n == 0 {
            return self.advance(n);
        }
        self.advance(n - 1)?;
        self.open_step().map_err(|e| self.failure(e))
    }

    fn finish_step(&mut self) -> Result<(), StepError> {
        if !self.mid_step {
            return Ok(());
        }
        self.close_step()
            .and_then(|()| self.check_diag())
            .map_err(|e| self.failure(e))
    }

    fn adopt(&mut self, new: &[crate::exec::inflow::NewParticle]) -> Result<(), StepError> {
        self.adopt_new(new).map_err(|e| self.failure(e))
    }

    fn positions(&self) -> Result<Vec<crate::core::vec3::V3>, StepError> {
        let mut all = Vec::new();
        for s in &self.sims {
            all.extend(s.live_positions().map_err(|e| self.failure(e))?);
        }
        Ok(all)
    }

    fn time(&self) -> f64 {
        self.time
    }

    fn snapshot(&self) -> Result<Snapshot, StepError> {
        Ok(self.export_state()?.into())
    }

    fn export_state(&self) -> Result<SimState, StepError> {
        self.state().map_err(|e| err(self.step, e))
    }

    fn mesh_transforms(&self) -> Vec<BodyTransform> {
        self.sims[0].mesh_transforms()
    }

    fn timers(&self) -> StageTimers {
        let g = self.sims.len().max(1) as f64;
        let mut t = StageTimers {
            steps: self.timed_steps,
            ..Default::default()
        };
        t.add(
            Stage::Exchange,
            Duration::from_secs_f64(self.exchange_s.iter().sum::<f64>() / g),
        );
        t.add(
            Stage::Forces,
            Duration::from_secs_f64(self.compute_s.iter().sum::<f64>() / g),
        );
        t.exchange_hidden = Duration::from_secs_f64(self.hidden_s.iter().sum::<f64>() / g);
        t
    }

    fn reset_timers(&mut self) {
        self.exchange_s.iter_mut().for_each(|x| *x = 0.0);
        self.compute_s.iter_mut().for_each(|x| *x = 0.0);
        self.hidden_s.iter_mut().for_each(|x| *x = 0.0);
        self.timed_steps = 0;
    }

    fn stats(&self) -> Result<BackendStats, StepError> {
        let s = self.export_state()?;
        Ok(BackendStats {
            history_overflows: s.history_overflows,
            contacts: s.contacts.iter().map(|&c| c as u64).sum(),
        })
    }

    fn energies(&mut self) -> Result<Energies, StepError> {
        super::backend_impl::energies_on_host(&self.ctx, self.export_state()?)
    }

    fn take_removed(&mut self) -> Result<Vec<(u32, u32, u64)>, StepError> {
        let mut all = Vec::new();
        for i in 0..self.sims.len() {
            let r = self.sims[i].take_removed();
            all.extend(r.map_err(|e| err(self.step, e))?);
        }
        all.sort_unstable_by_key(|r| (r.2, r.0));
        Ok(all)
    }

    fn loads(&self) -> Vec<usize> {
        self.owned().into_iter().map(|n| n as usize).collect()
    }

    fn rebalances(&self) -> u64 {
        self.rebalances
    }

    fn device_report(&self) -> Option<String> {
        let per: Vec<String> = self
            .sims
            .iter()
            .zip(&self.devices)
            .map(|(s, d)| {
                let m = s.memory();
                let w = s.window().map_or(0, |w| w.bytes);
                format!(
                    "GPU {d}: {} particles (room for {}), {:.2} GiB",
                    s.window().map_or(0, |w| w.owned),
                    s.window().map_or(0, |w| w.capacity),
                    (m.total() + w) as f64 / (1u64 << 30) as f64
                )
            })
            .collect();
        let total: u64 = self
            .sims
            .iter()
            .map(|s| s.memory().total() + s.window().map_or(0, |w| w.bytes))
            .sum();
        Some(format!(
            "CUDA devices {:?} ({}): {} particles split along {} at cell layers {:?}; {}; {:.0} B/particle over all GPUs",
            self.devices,
            self.sims[0].device_name(),
            self.total,
            ["x", "y", "z"][self.axis],
            self.bounds,
            per.join(", "),
            total as f64 / self.total.max(1) as f64
        ))
    }

    unsafe fn register_host_memory(&mut self, ptr: *mut u8, len: usize) -> Result<(), StepError> {
        self.host = None;
        // SAFETY: the caller keeps the range mapped until release_host_memory or drop.
        let reg = unsafe { self.sims[0].register_host(ptr, len) };
        self.host = Some(reg.map_err(|e| err(self.step, e))?);
        Ok(())
    }

    fn release_host_memory(&mut self) {
        let _ = self.publish_wait();
        self.host = None;
    }

    unsafe fn begin_kinematics_copy(&mut self, out: RawKinematics) -> Result<bool, StepError> {
        let target = FrameTarget {
            positions: out.positions,
            velocities: out.velocities,
            angular_velocities: out.angular_velocities,
            forces: out.forces,
            contact_counts: out.contact_counts,
        };
        // SAFETY: the caller keeps the arrays valid and untouched until the copy completed.
        unsafe { self.publish_async(target, out.count) }.map_err(|e| err(self.step, e))?;
        Ok(true)
    }

    fn kinematics_copy_done(&mut self) -> Result<bool, StepError> {
        if self.deferred.is_some() {
            // Written by the next step's collides (or by wait_kinematics_copy).
            return Ok(false);
        }
        let Some(ev) = &self.publish_done else {
            return Ok(false);
        };
        let done = ev
            .try_is_complete()
            .map_err(|e| err(self.step, CudaError::driver("querying the frame copy", e)))?;
        if done {
            self.publish_done = None;
            self.time_frame().map_err(|e| err(self.step, e))?;
        }
        Ok(done)
    }

    fn wait_kinematics_copy(&mut self) -> Result<(), StepError> {
        self.publish_wait().map_err(|e| err(self.step, e))
    }
}

impl Drop for CudaGroup {
    fn drop(&mut self) {
        let stepped = self.skin.as_ref().is_some_and(|s| s.skin.steps > 0);
        if let Some(summary) = self.skin_summary().filter(|_| stepped) {
            tracing::info!("{summary}");
        }
        let _ = self.publish_wait();
        for s in &self.sims {
            let _ = s.stream.synchronize();
            let _ = s.copy_stream.synchronize();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_small_share_per_gpu_gets_a_notice() {
        assert_eq!(few_particles_notice(2_000_000, 1), None);
        assert_eq!(few_particles_notice(2_000_000, 2), None);
        let n = few_particles_notice(2_000_000, 4).expect("500 k per GPU");
        assert!(n.contains("about 500000 per GPU"), "{n}");
        assert!(n.contains("fewer GPUs may run faster"), "{n}");
        assert_eq!(few_particles_notice(400_000_000, 8), None);
    }

    use super::*;

    /// A refresh that ended before the interior collide is hidden whole; one that outlasted it
    /// shows for the time the step waited, and never for more than the refresh took.
    #[test]
    fn a_refresh_beside_the_collide_shows_what_the_step_waited_for() {
        let t = split_beside(3.0, 0.2, -1.0);
        assert_eq!((t.hidden, t.compute), (0.2, 3.0));
        let t = split_beside(3.0, 0.2, 0.05);
        assert!((t.hidden - 0.15).abs() < 1e-12 && (t.compute - 2.95).abs() < 1e-12);
        let t = split_beside(3.0, 0.2, 0.5);
        assert_eq!((t.hidden, t.compute), (0.0, 2.8));
        assert_eq!(t.exchange, 0.2);
    }

    /// The default cut of a GPU group: the longest axis, y on ties (x, then z).
    #[test]
    fn gpu_groups_cut_the_longest_axis_and_y_on_ties() {
        assert_eq!(gpu_split_axis([0.0; 3], [2.0, 2.0, 2.0]), Axis::Y);
        assert_eq!(gpu_split_axis([0.0; 3], [3.0, 1.0, 1.0]), Axis::X);
        assert_eq!(gpu_split_axis([0.0; 3], [1.0, 1.0, 3.0]), Axis::Z);
        assert_eq!(gpu_split_axis([0.0; 3], [2.0, 1.0, 2.0]), Axis::X);
        assert_eq!(gpu_split_axis([-1.0; 3], [1.0, 1.0, 0.5]), Axis::Y);
    }

    /// Slabs walk the memory configurations fastest first, as one GPU gives them up.
    #[test]
    fn slabs_try_the_fastest_configuration_first() {
        use HistoryMode::*;
        assert_eq!(
            slab_configurations(Auto, true),
            [(Double, true), (Double, false), (InPlace, false)]
        );
        assert_eq!(
            slab_configurations(Auto, false),
            [(Double, false), (InPlace, false)]
        );
        assert_eq!(
            slab_configurations(InPlace, true),
            [(InPlace, true), (InPlace, false)]
        );
        assert_eq!(slab_configurations(Double, false), [(Double, false)]);
    }

    /// Sizing a GPU of a group that cannot hold every particle: its slots after the extras,
    /// what a share needs, and the group's limit that the error reports.
    #[test]
    fn slots_shares_and_the_group_limit() {
        // 1e6 slots of free memory at 500 B/particle, 50 MB of extras: 1e5 slots less, 2 % off.
        assert_eq!(slots_that_fit(1_000_000, 50_000_000, 500.0), 882_000);
        assert_eq!(share_with_headroom(1_600_000, 4096), 1_704_096);
        // Two GPUs of 882,000 slots, reserve 4096: (882,000 - 4096) / (17/16) each.
        assert_eq!(group_max_particles(882_000, 2, 4096), 2 * 826_262);
        // A share at the limit fits; one more does not.
        let fit = slots_that_fit(1_000_000, 50_000_000, 500.0);
        assert!(share_with_headroom(826_262, 4096) <= fit);
        assert!(share_with_headroom(826_262 + 17, 4096) > fit);
    }

    /// The refusal of a case too big for the GPUs names the GPU, what it needs and holds, and
    /// about how many particles fit.
    #[test]
    fn a_case_too_big_for_the_gpus_says_how_many_fit() {
        let e = CudaError::GroupDoesNotFit {
            gpus: 2,
            particles: 500_000_000,
            device: 0,
            share: 250_000_000,
            need: 265_629_096,
            fit: 180_000_000,
            bytes_per_particle: 655.0,
            max_particles: 338_815_096,
        };
        let m = e.to_string();
        for part in [
            "does not fit on 2 GPUs",
            "500000000 particles",
            "GPU 0 a share of 250000000",
            "needs 265629096 particle slots",
            "holds 180000000",
            "and the frame staging",
            "655 B/particle",
            "at most about 338815096 particles fit",
        ] {
            assert!(m.contains(part), "{part:?} missing in: {m}");
        }
        let e1 = CudaError::GroupDoesNotFit {
            gpus: 2,
            particles: 10,
            device: 1,
            share: 5,
            need: 6,
            fit: 1,
            bytes_per_particle: 1.0,
            max_particles: 2,
        };
        assert!(!e1.to_string().contains("staging"), "{e1}");
    }
}
