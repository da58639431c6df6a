//! One SPH simulation on several GPUs (issue 18): one [`SphCuda`] per GPU, each owning a slab of
//! cell layers along the split axis, driven from one host thread.
//!
//! Before each of the two evaluations of a step, every slab keeps the fluid particles it owned
//! at the last evaluation that lie, at this evaluation's positions, in its layers or in the one
//! layer of halo on each side (a layer is as thick as the kernel support, `cpu::sph_layers`),
//! and sends its neighbours those they need (state and half state, as records copied device to
//! device). Every GPU holds every boundary particle in one order; each reads the densities of its
//! halo layers from their owners' arrays at the same slots (peer access). Moving solids: every
//! GPU places all of them and sorts the boundary alike (the same positions), so slots still
//! agree; each integrates the density of those in its layers, and after each integration every
//! GPU takes the others' (`SphGroup::share_moving`), so a particle's next owner holds it
//! wherever it goes. Every slab then sorts its particles by (cell, x, id) on the run's one grid, so that each owned particle sums exactly the neighbours, in
//! exactly the order, of the one-GPU run: the f64 mode gives its bits on any number of GPUs
//! and any cut. The time-step limits are minima over each slab's own particles, reduced on the
//! host (a minimum is exact). Frames are packed by every slab into GPU 0's staging (peer
//! writes, id order). The slab bounds follow the work (`decomp::balance`); a move is a few
//! launches per GPU (ownership flags, the densities of the layers that changed hands), no host work.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaEvent};

use super::slab::{record_bytes, SlabSetup, SphSlab};
use super::{CudaError, FrameArray, FrameCopy, SphCuda, SphCudaOptions, SphGpu};
use crate::core::vec3::V3;
use crate::decomp::balance::{self, Balance};
use crate::dem::cuda::{neighbour, queue_peer_copies, HostRegistration, MemoryReport, PeerCopy};
use crate::sph::cpu::{next_time_step, sph_layer_of, SphState};
use crate::sph::motion::MovingSolids;
use crate::sph::setup::{Integrator, SphConstants, KIND_FLUID};
pub(super) use crate::sph::slabs::{handover, MIN_SLAB_LAYERS};
use crate::sph::slabs::{SlabCut, SlabOptions};

/// How an SPH run is spread over GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct SphGroupOptions {
    /// Device ordinals, one slab each, in slab order (the same ordinal twice runs two slabs on
    /// one GPU: for tests).
    pub devices: Vec<usize>,
    /// The parity mode (see [`SphCudaOptions::double`]).
    pub double: bool,
    /// The cut and its balancing.
    pub slabs: SlabOptions,
    /// Fluid slots each GPU reserves beyond its own fluid and a quarter more (halo and
    /// arrivals); a GPU grows its arrays when the load moves to it faster than the balancing
    /// moves the bounds. [`SPARE_SLOTS`] by default.
    pub spare_slots: u32,
    /// The rates kernels classify the fluid for the next exchange (float mode; see
    /// [`SphGroup::arm_sends`]) instead of sph_classify before it. Off by default: two slabs
    /// of one H100 gained 0.3 % at 104 M with it, and nothing once the exchange ran beside the
    /// boundary's rates (sessions 55 and 56); the solver and sph-gpu-bench take it from
    /// `PARTICLE_SHM_SPH_CLASSIFY` ([`classify_in_rates_from_env`]).
    pub classify_in_rates: bool,
    /// Each exchange starts as soon as every slab's fluid kernel has written the positions it
    /// moves on: its copies and unpack run beside the boundary's rates ([`SphGroup::arm`]).
    /// The solver and sph-gpu-bench take it from `PARTICLE_SHM_SPH_OVERLAP`
    /// ([`overlap_from_env`]).
    pub overlap: bool,
}

/// The default [`SphGroupOptions::spare_slots`].
pub const SPARE_SLOTS: u32 = 4096;

/// Timing events of one step per GPU: predictor start and end, corrector start and end.
pub(super) type StepEvents = [CudaEvent; 4];

/// See the module documentation.
pub struct SphGroup {
    pub c: SphConstants,
    slabs: Vec<SphCuda>,
    devices: Vec<usize>,
    axis: usize,
    bounds: Vec<u32>,
    kind: Vec<u32>,
    time: f64,
    step: u64,
    dt: f64,
    /// The cut's balancing (mode, interval, threshold).
    balancing: SlabOptions,
    /// Device compute time per GPU since the last balancing decision, and over the run [s].
    busy: Vec<f64>,
    /// Device time per GPU of the steps since the last decision (compute and exchange) [s],
    /// and those steps: what the balancing's guard judges a move by.
    interval_s: Vec<f64>,
    interval_steps: u64,
    guard: balance::MoveGuard,
    compute_s: Vec<f64>,
    exchange_s: Vec<f64>,
    timed_steps: u64,
    events: Vec<StepEvents>,
    rebalances: u64,
    migrations: u64,
    copy_done: FrameCopy,
    registration: Option<HostRegistration>,
    /// Whether solids move (their densities are shared after each integration).
    moving: bool,
    /// [`SphGroupOptions::classify_in_rates`].
    classify_in_rates: bool,
    /// Classifications (a GPU's, before an exchange) that a rates kernel made.
    classified_in_rates: u64,
    /// [`SphGroupOptions::overlap`].
    overlap: bool,
    /// The exchange at the half state's (true) or the state's positions already copied and
    /// unpacked its records ([`SphGroup::exchange_early`]).
    early: Option<bool>,
    /// Exchanges started early.
    overlapped: u64,
}

/// [`SphGroupOptions::classify_in_rates`] from `PARTICLE_SHM_SPH_CLASSIFY`: `rates` (the rates
/// kernels classify for the next exchange) or `standalone` (sph_classify before each exchange;
/// also when unset or empty); anything else is an error that names the variable.
pub fn classify_in_rates_from_env() -> Result<bool, CudaError> {
    classify_in_rates_from(std::env::var("PARTICLE_SHM_SPH_CLASSIFY").ok().as_deref())
}

/// [`SphGroupOptions::overlap`] from `PARTICLE_SHM_SPH_OVERLAP`: `on` (also when unset or
/// empty) or `off` (each exchange after the evaluation's every kernel, as before session 56);
/// anything else is an error that names the variable.
pub fn overlap_from_env() -> Result<bool, CudaError> {
    overlap_from(std::env::var("PARTICLE_SHM_SPH_OVERLAP").ok().as_deref())
}

fn overlap_from(v: Option<&str>) -> Result<bool, CudaError> {
    switch_from("PARTICLE_SHM_SPH_OVERLAP", v, ("on", "off"), true)
}

fn classify_in_rates_from(v: Option<&str>) -> Result<bool, CudaError> {
    switch_from(
        "PARTICLE_SHM_SPH_CLASSIFY",
        v,
        ("rates", "standalone"),
        false,
    )
}

/// A switch read from the variable `var` with the value `v`: true for `names.0`, false for
/// `names.1`, `default` when unset or empty; anything else is an error that names the variable.
fn switch_from(
    var: &str,
    v: Option<&str>,
    names: (&str, &str),
    default: bool,
) -> Result<bool, CudaError> {
    match v.map(str::trim) {
        None | Some("") => Ok(default),
        Some(x) if x == names.0 => Ok(true),
        Some(x) if x == names.1 => Ok(false),
        Some(other) => Err(CudaError::Unsupported(format!(
            "{var}={other:?}: expected `{}` or `{}`",
            names.0, names.1
        ))),
    }
}

impl SphGroup {
    /// Continues from `state` with the step `dt` it was about to take, on the GPUs of `opts`.
    pub fn from_state(
        c: SphConstants,
        state: SphState,
        dt: f64,
        opts: SphGroupOptions,
    ) -> Result<SphGroup, CudaError> {
        SphGroup::from_state_moving(c, state, dt, MovingSolids::default(), opts)
    }

    /// As [`SphGroup::from_state`] with the case's moving solids (`SphCuda::from_state_moving`):
    /// every GPU places all of them.
    pub fn from_state_moving(
        c: SphConstants,
        state: SphState,
        dt: f64,
        moving: MovingSolids,
        opts: SphGroupOptions,
    ) -> Result<SphGroup, CudaError> {
        let g = opts.devices.len();
        if g == 0 {
            return Err(CudaError::Unsupported("an SPH group without GPUs".into()));
        }
        moving
            .check(state.pos.len())
            .map_err(CudaError::Unsupported)?;
        let plan = SlabPlan::new(&c, &state, &moving, g, &opts.slabs)?;
        // mDBC: the ghost nodes at rest, once for every GPU.
        let ghosts = crate::sph::mdbc::ghosts_at_rest(&c, &moving, &state.pos, &state.kind);
        let mut slabs = Vec::with_capacity(g);
        for w in 0..g {
            let frame_n = if w == 0 { state.pos.len() } else { 0 };
            let device = SphCudaOptions {
                device: opts.devices[w],
                double: opts.double,
            };
            slabs.push(plan.build(
                &c,
                &state,
                &moving,
                dt,
                device,
                w,
                opts.spare_slots,
                frame_n,
                ghosts.as_deref(),
            )?);
        }
        if opts.classify_in_rates {
            tracing::info!(
                "SPH slabs: the rates kernels classify the fluid for each exchange \
                 (PARTICLE_SHM_SPH_CLASSIFY=rates)"
            );
        }
        let has_moving = !moving.is_empty();
        let ctxs: Vec<&Arc<CudaContext>> = slabs.iter().map(|s| &s.ctx).collect();
        crate::dem::cuda::enable_peer_access(&ctxs, &opts.devices)?;
        let events = slabs
            .iter()
            .map(|s| {
                let e = || {
                    s.ctx
                        .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                        .map_err(|e| CudaError::driver("creating an event", e))
                };
                Ok([e()?, e()?, e()?, e()?])
            })
            .collect::<Result<Vec<_>, CudaError>>()?;
        Ok(SphGroup {
            c,
            slabs,
            devices: opts.devices,
            axis: plan.axis,
            bounds: plan.bounds,
            kind: state.kind,
            time: state.time,
            step: state.step,
            dt,
            balancing: opts.slabs,
            busy: vec![0.0; g],
            interval_s: vec![0.0; g],
            interval_steps: 0,
            guard: balance::MoveGuard::default(),
            compute_s: vec![0.0; g],
            exchange_s: vec![0.0; g],
            timed_steps: 0,
            events,
            rebalances: 0,
            migrations: 0,
            copy_done: FrameCopy::default(),
            registration: None,
            moving: has_moving,
            classify_in_rates: opts.classify_in_rates,
            classified_in_rates: 0,
            overlap: opts.overlap,
            early: None,
            overlapped: 0,
        })
    }

    /// The exchange before an evaluation at the state's (`half` false) or the half state's
    /// positions: classify, read the counts, copy records and boundary densities to the
    /// neighbours device to device, unpack.
    fn exchange(&mut self, half: bool) -> Result<(), CudaError> {
        if self.early.take() == Some(half) {
            // The records are unpacked (or on their way: each compute stream waits for them).
            self.take_halo_densities(half, true)?;
            if half {
                self.share_moving(true)?;
            }
            return Ok(());
        }
        let g = self.slabs.len();
        for w in 0..g {
            // Classified already by the rates that wrote these positions (float mode, bounds
            // unchanged since), else here.
            match self.slabs[w].take_classified(half) {
                Some(in_kernel) => self.classified_in_rates += u64::from(in_kernel),
                None => {
                    let info = slab_info(&self.bounds, w);
                    self.slabs[w].queue_classify(half, info)?;
                }
            }
        }
        let mut counts = Vec::with_capacity(g);
        for w in 0..g {
            let info = slab_info(&self.bounds, w);
            let s = &mut self.slabs[w];
            let mut c = s.read_counts()?;
            while !s.fit_sends(c[0].max(c[1]))? {
                s.queue_classify(half, info)?;
                c = s.read_counts()?;
            }
            counts.push(c);
        }
        let beyond: u32 = counts.iter().map(|c| c[3]).sum();
        if beyond > 0 {
            return Err(CudaError::SlabSkipped {
                count: beyond,
                step: self.step,
            });
        }
        let got = received(&counts);
        for (h, s) in self.slabs.iter_mut().enumerate() {
            s.make_room(got[h], self.devices[h])?;
        }
        self.migrations += counts.iter().map(|c| (c[0] + c[1]) as u64).sum::<u64>();
        let rec = record_bytes(self.slabs[0].real);
        let mut copies = Vec::new();
        for (h, got_h) in got.iter().enumerate() {
            for (side, &n) in got_h.iter().enumerate() {
                let Some(src) = neighbour(h, side, g) else {
                    continue;
                };
                let (dst, from) = (&self.slabs[h], &self.slabs[src]);
                copies.push(PeerCopy {
                    to: h,
                    from: src,
                    dst: dst.recv_ptr(side),
                    src: from.send_ptr(1 - side),
                    bytes: n as usize * rec,
                });
            }
        }
        let gpus: Vec<_> = self.slabs.iter().map(|s| (&s.ctx, &s.stream)).collect();
        // SAFETY: every buffer is a live allocation holding the copy's bytes (the sender's
        // counts fit its send buffer, make_room grew the receiver's); every sender's classify
        // completed (read_counts waited for its stream).
        unsafe { queue_peer_copies(&gpus, &copies) }?;
        for (h, s) in self.slabs.iter_mut().enumerate() {
            s.queue_unpack(got[h], counts[h][2], false)?;
        }
        self.take_halo_densities(half, false)?;
        if half {
            // The half-step densities the predictors just integrated.
            self.share_moving(true)?;
        }
        Ok(())
    }

    /// The boundary densities (of the state, or with `half` of the half state) of each halo
    /// layer, from the GPU that owns it. `early`: after an early exchange, which waited for no
    /// GPU's boundary rates: each take then waits for its owner's stream, and each owner's later
    /// work (its next write of these densities) for the takes from it.
    fn take_halo_densities(&self, half: bool, early: bool) -> Result<(), CudaError> {
        let g = self.slabs.len();
        let err = |e| CudaError::driver("ordering the halo's densities", e);
        let rated = if early {
            let ev = self.slabs.iter().map(|s| s.stream.record_event(None));
            ev.collect::<Result<Vec<_>, _>>().map_err(err)?
        } else {
            Vec::new()
        };
        for h in 0..g {
            for side in 0..2 {
                let Some(v) = neighbour(h, side, g) else {
                    continue;
                };
                if early {
                    self.slabs[h].stream.wait(&rated[v]).map_err(err)?;
                }
                // The layer next to the bound shared with v (a slab has at least three layers).
                let layer = if side == 0 {
                    self.bounds[h] - 1
                } else {
                    self.bounds[h + 1]
                };
                let src = self.slabs[v].boundary_rho_ptr(half);
                // SAFETY: every GPU holds every boundary particle in the same slots; the owner's
                // densities of this layer were written by its last half step, which completed
                // (read_counts waited for its stream) or which this stream now waits for
                // (early); the owner writes them again only in its next half step, queued after
                // a read_counts or read_diag that waited for every stream, or (early) after its
                // wait below for this stream's takes.
                unsafe { self.slabs[h].queue_take(layer, layer + 1, src, half) }?;
            }
        }
        if early {
            for h in 0..g {
                let taken = self.slabs[h].stream.record_event(None).map_err(err)?;
                for v in (0..2).filter_map(|side| neighbour(h, side, g)) {
                    self.slabs[v].stream.wait(&taken).map_err(err)?;
                }
            }
        }
        Ok(())
    }

    /// The exchange before the next evaluation, at the half state's (`half`) or the state's
    /// positions, started as soon as every slab's fluid kernel has written them and they are
    /// classified ([`SphGroup::arm`]; nothing unless armed): the host waits for the
    /// classifications' counts, not for the boundary's rates queued after them, and the records'
    /// copies and unpack run on each GPU's exchange stream beside those rates (they write slots
    /// after the current ones, which no kernel of the evaluation reads). Each compute stream
    /// waits for its unpack, and each sender's for the copies from its buffers, before what it
    /// queues next. Anything that would grow a buffer, or fail the step, is left to
    /// [`SphGroup::exchange`], which reads the counts again.
    fn exchange_early(&mut self, half: bool) -> Result<(), CudaError> {
        let g = self.slabs.len();
        let mut counts = Vec::with_capacity(g);
        for s in &mut self.slabs {
            if let Some(c) = s.read_counts_early(half)? {
                counts.push(c);
            }
        }
        if counts.len() < g {
            return Ok(());
        }
        let got = received(&counts);
        let fits = self
            .slabs
            .iter()
            .zip(counts.iter().zip(&got))
            .all(|(s, (c, got))| c[3] == 0 && s.fits_without_growing(c[0].max(c[1]), *got));
        if !fits {
            return Ok(());
        }
        for s in &mut self.slabs {
            let in_kernel = s.take_classified(half) == Some(true);
            self.classified_in_rates += u64::from(in_kernel);
        }
        self.migrations += counts.iter().map(|c| (c[0] + c[1]) as u64).sum::<u64>();
        let rec = record_bytes(self.slabs[0].real);
        let err = |e| CudaError::driver("ordering the exchange", e);
        for h in 0..g {
            let (beside, _) = self.slabs[h].early_sync();
            let sources: Vec<usize> = (0..2).filter_map(|side| neighbour(h, side, g)).collect();
            // After its own classification (its last unpack and sort are done, so its receive
            // buffers are free) and its neighbours' (their send buffers are written).
            for &v in sources.iter().chain([&h]) {
                beside.wait(self.slabs[v].early_sync().1).map_err(err)?;
            }
            for (side, &n) in got[h].iter().enumerate() {
                let Some(src) = neighbour(h, side, g) else {
                    continue;
                };
                if n == 0 {
                    continue;
                }
                crate::dem::cuda::driver::bind(beside)?;
                // SAFETY: the sender's counts fit its send buffer and the receiver's buffer
                // takes them (fits_without_growing); both are live allocations of the group's
                // contexts (peer access enabled); this stream waited for the sender's
                // classification, and the sender writes the buffer again only after its wait
                // below for this stream.
                unsafe {
                    cudarc::driver::result::memcpy_peer_async(
                        self.slabs[h].ctx.cu_ctx(),
                        self.slabs[h].recv_ptr(side),
                        self.slabs[src].ctx.cu_ctx(),
                        self.slabs[src].send_ptr(1 - side),
                        n as usize * rec,
                        beside.cu_stream(),
                    )
                }
                .map_err(|e| CudaError::driver("copying records between GPUs", e))?;
            }
            let kept = counts[h][2];
            self.slabs[h].queue_unpack(got[h], kept, true)?;
            let (beside, _) = self.slabs[h].early_sync();
            let done = beside.record_event(None).map_err(err)?;
            for &v in sources.iter().chain([&h]) {
                self.slabs[v].stream.wait(&done).map_err(err)?;
            }
        }
        self.early = Some(half);
        self.overlapped += 1;
        Ok(())
    }

    /// Arms each slab's next rates: to classify inside the fluid's kernel (classify_in_rates)
    /// and to start the exchange after them early (overlap), unless the bounds may move before
    /// that exchange (`end_of_step`, and a balancing decision due after this step).
    fn arm(&mut self, end_of_step: bool) {
        self.arm_sends();
        let decision_due = self.balancing.decision_after(self.step + 1);
        if !self.overlap || (end_of_step && decision_due) {
            return;
        }
        for w in 0..self.slabs.len() {
            let info = slab_info(&self.bounds, w);
            self.slabs[w].arm_early(info);
        }
    }

    /// Arms each slab's next rates kernel to classify its particles for the exchange that
    /// follows it, with the current bounds (a move of the bounds after it makes that exchange
    /// classify again: [`SphGroup::rebalance`]). Measured with two slabs on one H200 at 104 M,
    /// the standalone sph_classify took 0.72-0.79 ms of each slab's 63 ms step (session 54),
    /// a pass over every slot for what the update, which has just written each owned
    /// particle's position, can decide in passing.
    fn arm_sends(&mut self) {
        if !self.classify_in_rates {
            return;
        }
        for w in 0..self.slabs.len() {
            let info = slab_info(&self.bounds, w);
            self.slabs[w].arm_sends(info);
        }
    }

    /// Moving solids: every GPU takes the density (of the state, or with `half` of the half
    /// state) of each moving boundary particle from the GPU that integrated it, then every
    /// stream is waited for. A moving particle changes owner as it crosses a bound, and its
    /// next owner may be any GPU whose layers it reaches: each then holds its current density
    /// (and the halo's), and the sums keep the one-GPU bits. Nothing without moving solids.
    fn share_moving(&self, half: bool) -> Result<(), CudaError> {
        if !self.moving {
            return Ok(());
        }
        let g = self.slabs.len();
        for h in 0..g {
            for v in (0..g).filter(|&v| v != h) {
                let (src, own) = (
                    self.slabs[v].boundary_rho_ptr(half),
                    self.slabs[v].bown_ptr(),
                );
                // SAFETY: every GPU sorted the boundary alike (the same positions, placed by
                // each from the same motion), so a slot is the same particle everywhere; v's
                // integration completed (read_counts or read_diag waited for its stream), and
                // v writes these arrays and flags again only in work queued after the
                // synchronisation below.
                unsafe { self.slabs[h].queue_take_moving(src, own, half) }?;
            }
        }
        for s in &self.slabs {
            s.stream
                .synchronize()
                .map_err(|e| CudaError::driver("sharing the moving solids' densities", e))?;
        }
        Ok(())
    }

    /// mDBC: every GPU takes the walls' densities that each slab computed for the nodes in its
    /// layers (whose fluid support it holds: its layers and halo), once all have computed them.
    /// A node may lie up to twice the walls' thickness from its particle, in a slab that neither
    /// owns nor borders the particle, so each GPU takes from every other (a node lies in one
    /// slab's layers: one value per slot). The sums are the one GPU's, so are the bits.
    fn share_ghost_densities(&self) -> Result<(), CudaError> {
        if self.slabs[0].ghost_rho_ptr() == 0 {
            return Ok(());
        }
        for s in &self.slabs {
            s.stream
                .synchronize()
                .map_err(|e| CudaError::driver("computing the walls' densities (mDBC)", e))?;
        }
        for h in &self.slabs {
            for v in &self.slabs {
                // SAFETY: every GPU holds every boundary particle in the same slots (sorted
                // alike); v's sph_ghost_density completed (the synchronisation above), and v
                // writes that array again only at the next step's predictor, queued after this
                // step's read_diag waited for every stream.
                unsafe { h.queue_take_ghost(v.ghost_rho_ptr()) }?;
            }
        }
        Ok(())
    }

    fn mark(&self, which: usize) -> Result<(), CudaError> {
        for (s, ev) in self.slabs.iter().zip(&self.events) {
            ev[which]
                .record(&s.stream)
                .map_err(|e| CudaError::driver("recording an event", e))?;
        }
        Ok(())
    }

    /// Moves the slab bounds ([`balance::decide_with`]); the next exchange hands the fluid of moved
    /// layers to its new GPU; here every GPU flags the boundary particles it now owns and takes
    /// the densities of the layers it now owns or borders from their previous owners.
    fn rebalance(&mut self) -> Result<(), CudaError> {
        if self.balancing.balance == Balance::Off {
            return Ok(());
        }
        let layers = self.bounds[self.slabs.len()] as usize;
        let mut per_layer = vec![0u64; layers];
        if matches!(self.balancing.balance, Balance::Count | Balance::Time) {
            for s in &self.slabs {
                for (a, b) in per_layer.iter_mut().zip(s.layer_counts()?) {
                    *a += b as u64;
                }
            }
        }
        let (how, threshold, bounds, busy) = (
            self.balancing.balance,
            self.balancing.threshold,
            &self.bounds,
            &self.busy,
        );
        let propose =
            || balance::decide_with(how, threshold, bounds, &per_layer, busy, MIN_SLAB_LAYERS);
        // The measured-time modes' moves are judged by their effect (balance::MoveGuard), as
        // a DEM group's are; SPH slabs always have room (their slots grow), so any undo fits.
        let decision = if balance::guarded(how) {
            let cost = balance::per_step_cost(&self.interval_s, self.interval_steps);
            self.guard
                .decide(bounds, cost, |_| true, propose)
                .into_bounds()
        } else {
            propose()
        };
        self.busy.iter_mut().for_each(|b| *b = 0.0);
        self.interval_s.iter_mut().for_each(|b| *b = 0.0);
        self.interval_steps = 0;
        let Some(new) = decision else {
            return Ok(());
        };
        self.guard.applied();
        tracing::debug!(
            step = self.step,
            by = self.balancing.balance.name(),
            from = ?self.bounds,
            to = ?new,
            "SPH slab bounds moved"
        );
        // An exchange started early moved records for the old bounds: `arm` starts none before
        // a decision.
        if self.early.is_some() {
            return Err(CudaError::Unsupported(
                "internal: an SPH exchange started early before a move of the slab bounds".into(),
            ));
        }
        let old = std::mem::replace(&mut self.bounds, new);
        let g = self.slabs.len();
        for w in 0..g {
            let (lo, hi) = (self.bounds[w], self.bounds[w + 1]);
            // The last rates kernel classified for the old bounds.
            self.slabs[w].forget_classified();
            self.slabs[w].set_own_layers(lo, hi)?;
            for v in (0..g).filter(|&v| v != w) {
                let (from, to) = handover(&old, &self.bounds, v, w);
                // With Verlet the densities one step back too (`bhalf`), which the new owner
                // integrates from.
                for back in [false, true]
                    .into_iter()
                    .take(1 + usize::from(self.verlet()))
                {
                    let src = self.slabs[v].boundary_rho_ptr(back);
                    // SAFETY: same slots on every GPU; every stream is idle (read_diag waited
                    // for them); a GPU writes here only densities of layers it did not own, and
                    // reads only layers their previous owner did own, so no write meets a read;
                    // every stream passes these copies before the next step's read_counts
                    // returns.
                    unsafe { self.slabs[w].queue_take(from, to, src, back) }?;
                }
            }
        }
        self.rebalances += 1;
        Ok(())
    }

    /// Whether the run integrates with Verlet (the boundary's `bhalf` then holds the densities
    /// one step back, which must follow the particles from slab to slab).
    fn verlet(&self) -> bool {
        matches!(self.c.integrator, Integrator::Verlet { .. })
    }

    /// The slab bounds (cell layers along the split axis, one more than GPUs).
    pub fn bounds(&self) -> &[u32] {
        &self.bounds
    }
    /// The split axis (0 x, 1 y, 2 z).
    pub fn axis(&self) -> usize {
        self.axis
    }
    pub fn rebalances(&self) -> u64 {
        self.rebalances
    }
    /// Fluid slots allocated on each GPU (they grow as the load moves).
    pub fn fluid_slots(&self) -> Vec<u32> {
        self.slabs.iter().map(|s| s.cap).collect()
    }
    /// Classifications before an exchange (one per GPU and exchange) that a rates kernel
    /// made ([`SphGroupOptions::classify_in_rates`]); the others ran sph_classify.
    /// Exchanges whose copies and unpack ran beside the boundary's rates
    /// ([`SphGroupOptions::overlap`]).
    pub fn overlapped_exchanges(&self) -> u64 {
        self.overlapped
    }
    pub fn classified_in_rates(&self) -> u64 {
        self.classified_in_rates
    }
    /// Fluid records sent between GPUs so far (halo copies and migrants).
    pub fn records_sent(&self) -> u64 {
        self.migrations
    }
    /// Per GPU: device compute and exchange time over the run [s], and the steps timed.
    pub fn phase_times(&self) -> (Vec<f64>, Vec<f64>, u64) {
        (
            self.compute_s.clone(),
            self.exchange_s.clone(),
            self.timed_steps,
        )
    }
    /// Resets [`SphGroup::phase_times`].
    pub fn reset_phase_times(&mut self) {
        self.compute_s.iter_mut().for_each(|t| *t = 0.0);
        self.exchange_s.iter_mut().for_each(|t| *t = 0.0);
        self.timed_steps = 0;
    }
    /// Owned particles per GPU (fluid and boundary), from a download of the state.
    pub fn owned_counts(&self) -> Result<Vec<usize>, CudaError> {
        self.slabs.iter().map(|s| s.owned_count()).collect()
    }
    /// GPU 0's context (to page-lock more host memory for frames).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.slabs[0].ctx
    }
    /// Every GPU's arrays, the particles counted once.
    pub fn memory(&self) -> MemoryReport {
        let mut m = MemoryReport {
            particles: self.kind.len() as u64,
            cells: self.slabs[0].memory().cells,
            ..MemoryReport::default()
        };
        for (s, d) in self.slabs.iter().zip(&self.devices) {
            for (name, bytes) in &s.memory().arrays {
                m.arrays.push((format!("gpu{d}.{name}"), *bytes));
            }
        }
        m
    }
}

impl SphGpu for SphGroup {
    fn step(&mut self) -> Result<(), CudaError> {
        let dt = self.dt;
        for s in &mut self.slabs {
            s.p.dt = dt;
            // The slab's clock: where it places the moving solids, and the step index that
            // says which Verlet steps are Euler steps.
            (s.time, s.dt, s.step) = (self.time, dt, self.step);
        }
        match self.c.integrator {
            Integrator::Symplectic => {
                self.exchange(false)?;
                self.mark(0)?;
                for s in &mut self.slabs {
                    s.predictor_sort()?;
                }
                self.share_ghost_densities()?;
                self.arm(false);
                for s in &mut self.slabs {
                    s.predictor_rates()?;
                }
                self.mark(1)?;
                self.exchange_early(true)?;
                self.exchange(true)?;
                self.mark(2)?;
                self.arm(true);
                for s in &mut self.slabs {
                    s.corrector()?;
                }
            }
            Integrator::Verlet { euler_every } => {
                // One evaluation: the exchange (its records carry the state one step back in
                // their half-state fields) timed as the exchange, events 1 to 2.
                self.mark(0)?;
                self.mark(1)?;
                self.exchange(false)?;
                self.mark(2)?;
                for s in &mut self.slabs {
                    s.verlet_sort()?;
                }
                self.share_ghost_densities()?;
                self.arm(true);
                for s in &mut self.slabs {
                    s.verlet_update(euler_every)?;
                }
            }
        }
        self.mark(3)?;
        // The next step's first exchange (after the events: its waits are not compute).
        self.exchange_early(false)?;
        let (mut dt_f, mut dt_cv, mut nonfinite) = (f64::INFINITY, f64::INFINITY, 0);
        for s in &self.slabs {
            let (f, cv, nf) = s.read_diag()?;
            dt_f = dt_f.min(f);
            dt_cv = dt_cv.min(cv);
            nonfinite += nf;
        }
        // The densities the correctors just integrated (before a move of the bounds flags the
        // boundary again), and with Verlet those one step back, which the next owner of a
        // moving particle integrates from.
        self.share_moving(false)?;
        if self.verlet() {
            self.share_moving(true)?;
        }
        // Every stream has passed its events (read_diag waited for it).
        for (w, ev) in self.events.iter().enumerate() {
            let (compute, exchange) = step_times(ev)?;
            self.busy[w] += compute;
            self.interval_s[w] += compute + exchange;
            self.compute_s[w] += compute;
            self.exchange_s[w] += exchange;
        }
        self.interval_steps += 1;
        self.timed_steps += 1;
        self.time += dt;
        self.step += 1;
        if nonfinite > 0 {
            return Err(CudaError::NonFinite {
                count: nonfinite,
                step: self.step,
            });
        }
        self.dt = next_time_step(&self.c, dt_f, dt_cv);
        if self.balancing.decision_after(self.step) {
            self.rebalance()?;
        }
        Ok(())
    }
    fn dt(&self) -> f64 {
        self.dt
    }
    fn time(&self) -> f64 {
        self.time
    }
    fn step_index(&self) -> u64 {
        self.step
    }
    fn particle_count(&self) -> usize {
        self.kind.len()
    }
    fn kinds(&self) -> &[u32] {
        &self.kind
    }
    fn state(&self) -> Result<SphState, CudaError> {
        let mut st = SphState::zeroed(self.time, self.step, self.kind.clone());
        for s in &self.slabs {
            s.write_into(&mut st)?;
        }
        Ok(st)
    }
    unsafe fn register_host(&mut self, ptr: *mut u8, len: usize) -> Result<(), CudaError> {
        self.release_host();
        // SAFETY: the caller's contract.
        self.registration =
            Some(unsafe { crate::dem::cuda::register_host(&self.slabs[0].ctx, ptr, len) }?);
        Ok(())
    }
    fn release_host(&mut self) {
        let _ = self.publish_wait();
        self.registration = None;
    }
    unsafe fn publish_async(&mut self, targets: [*mut u8; 4]) -> Result<(), CudaError> {
        self.publish_wait()?;
        self.pack_frame()?;
        // SAFETY: the caller's contract; GPU 0's staging holds every particle.
        unsafe { self.slabs[0].copy_frame_async(targets, self.kind.len()) }?;
        self.copy_done = self.slabs[0].take_copy_event();
        Ok(())
    }
    fn pack_frame(&self) -> Result<(), CudaError> {
        let staging = self.slabs[0].staging;
        for s in &self.slabs {
            s.pack_into(staging)?;
        }
        for s in &self.slabs[1..] {
            let ev = s
                .stream
                .record_event(None)
                .map_err(|e| CudaError::driver("recording an event", e))?;
            self.slabs[0]
                .stream
                .wait(&ev)
                .map_err(|e| CudaError::driver("ordering the frame", e))?;
        }
        Ok(())
    }
    fn frame_vec3(&self, a: FrameArray, out: &mut [[f32; 3]]) -> Result<(), CudaError> {
        self.slabs[0].frame_vec3(a, out)
    }
    fn frame_scalar(&self, a: FrameArray, out: &mut [f32]) -> Result<(), CudaError> {
        self.slabs[0].frame_scalar(a, out)
    }
    fn device_name(&self) -> String {
        let names: Vec<String> = self
            .slabs
            .iter()
            .zip(&self.devices)
            .map(|(s, d)| format!("{d}: {}", s.device_name()))
            .collect();
        format!("{} GPUs ({})", self.slabs.len(), names.join(", "))
    }
    fn constants(&self) -> &SphConstants {
        &self.c
    }
    fn set_dt(&mut self, dt: f64) {
        self.dt = dt;
    }
    fn frame_copy(&mut self) -> &mut FrameCopy {
        &mut self.copy_done
    }
}

impl Drop for SphGroup {
    fn drop(&mut self) {
        let _ = self.publish_wait();
        self.registration = None;
        // A slab's buffers may still be read by a neighbour's copy or written by its pack:
        // every stream finishes before any slab frees anything.
        for s in &self.slabs {
            let _ = s.stream.synchronize();
            let _ = s.copy_stream.synchronize();
            let _ = s.early_sync().0.synchronize();
        }
    }
}

/// The first cut of a run into slabs (`sph::slabs`), which a GPU of a group or an MPI rank
/// builds its slab from.
pub(super) type SlabPlan = SlabCut;

impl SlabCut {
    /// Slab `w` of the plan on `opts.device`: its fluid, every boundary particle (the `moving`
    /// solids' too, which it places), room for its fluid and a quarter more plus `spare_slots`
    /// (halo and arrivals; a slab grows when the load moves to it faster than the balancing
    /// moves the bounds) and frame staging for `frame_n` particles.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        &self,
        c: &SphConstants,
        state: &SphState,
        moving: &MovingSolids,
        dt: f64,
        opts: SphCudaOptions,
        w: usize,
        spare_slots: u32,
        frame_n: usize,
        ghosts: Option<&[V3]>,
    ) -> Result<SphCuda, CudaError> {
        let (lo, hi) = (self.bounds[w], self.bounds[w + 1]);
        let fluid: Vec<u32> = (0..state.pos.len() as u32)
            .filter(|&k| {
                state.kind[k as usize] == KIND_FLUID
                    && (lo..hi).contains(&sph_layer_of(
                        &self.grid,
                        state.pos[k as usize],
                        self.axis,
                        self.reach,
                    ))
            })
            .collect();
        let setup = SlabSetup {
            cap: (fluid.len() + fluid.len() / 4 + spare_slots as usize).min(u32::MAX as usize - 1)
                as u32,
            frame_n,
        };
        let mut sim = SphCuda::build(
            c.clone(),
            self.grid.clone(),
            state,
            dt,
            opts,
            &fluid,
            &self.bound_ids,
            Some(setup),
            (self.axis as u32, lo, hi),
            !moving.is_empty(),
        )?;
        if !moving.is_empty() {
            sim.attach_moving(state, moving.clone())?;
        }
        if let Some(ghosts) = ghosts {
            sim.attach_ghosts(ghosts)?;
        }
        if let (Integrator::Verlet { .. }, Some(back)) = (c.integrator, &state.prev) {
            sim.upload_prev(back, &fluid)?;
        }
        Ok(sim)
    }
}

/// A step's device compute time (the two evaluations and integrations) and the exchange
/// between them [s], from its events (predictor start and end, corrector start and end), which
/// the stream has passed.
pub(super) fn step_times(ev: &StepEvents) -> Result<(f64, f64), CudaError> {
    let s = |a: usize, b: usize| -> Result<f64, CudaError> {
        Ok(ev[a]
            .elapsed_ms(&ev[b])
            .map_err(|e| CudaError::driver("reading an event", e))? as f64
            * 1e-3)
    };
    Ok((s(0, 1)? + s(2, 3)?, s(1, 2)?))
}

/// Where the particles of slab `w` of `bounds` go (sph.cu's SphSlab).
/// The records each slab receives from its left and right neighbours, from every slab's
/// classification counts (sent left, sent right, kept, beyond reach).
fn received(counts: &[[u32; 4]]) -> Vec<[u32; 2]> {
    let g = counts.len();
    (0..g)
        .map(|h| {
            [
                if h > 0 { counts[h - 1][1] } else { 0 },
                if h + 1 < g { counts[h + 1][0] } else { 0 },
            ]
        })
        .collect()
}

pub(super) fn slab_info(bounds: &[u32], w: usize) -> SphSlab {
    let g = bounds.len() - 1;
    let layers = bounds[g] as i32;
    SphSlab {
        left_hi: if w > 0 { bounds[w] as i32 } else { -1 },
        right_lo: if w + 1 < g {
            bounds[w + 1] as i32 - 1
        } else {
            layers
        },
        reach_lo: if w > 1 { bounds[w - 1] as i32 + 1 } else { 0 },
        reach_hi: if w + 2 < g {
            bounds[w + 2] as i32 - 1
        } else {
            layers
        },
        cap: 0,
        pad: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classification_is_chosen_by_name() {
        assert!(!classify_in_rates_from(None).unwrap());
        assert!(!classify_in_rates_from(Some("")).unwrap());
        assert!(!classify_in_rates_from(Some("standalone")).unwrap());
        assert!(classify_in_rates_from(Some(" rates ")).unwrap());
        let e = classify_in_rates_from(Some("fused"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("PARTICLE_SHM_SPH_CLASSIFY") && e.contains("fused"),
            "{e}"
        );
    }

    #[test]
    fn the_overlap_is_chosen_by_name() {
        assert!(overlap_from(None).unwrap());
        assert!(overlap_from(Some("")).unwrap());
        assert!(overlap_from(Some(" on")).unwrap());
        assert!(!overlap_from(Some("off")).unwrap());
        let e = overlap_from(Some("yes")).unwrap_err().to_string();
        assert!(
            e.contains("PARTICLE_SHM_SPH_OVERLAP") && e.contains("yes"),
            "{e}"
        );
    }

    #[test]
    fn received_counts_come_from_the_neighbours() {
        let c = [[0, 5, 100, 0], [7, 9, 200, 0], [11, 0, 300, 0]];
        assert_eq!(received(&c), vec![[0, 7], [5, 11], [9, 0]]);
    }

    #[test]
    fn slab_info_names_the_neighbours_and_the_reach() {
        let b = [0, 4, 8, 12];
        let s = slab_info(&b, 1);
        assert_eq!(
            (s.left_hi, s.right_lo, s.reach_lo, s.reach_hi),
            (4, 7, 0, 12)
        );
        let s = slab_info(&b, 0);
        assert_eq!(
            (s.left_hi, s.right_lo, s.reach_lo, s.reach_hi),
            (-1, 3, 0, 7)
        );
    }
}
