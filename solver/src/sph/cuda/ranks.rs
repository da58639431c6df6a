//! One SPH simulation over several processes with one GPU each (issue 18 through issue 15's
//! MPI: `mpirun -np N solver --backend cuda --case dambreak.toml`): rank r drives slab r of the
//! cut a [`super::SphGroup`] makes in one process, with the same kernels, the same
//! classification and unpacking of fluid records, and the same balancing decisions. Only the
//! road differs: two processes cannot read each other's device memory, so before each
//! evaluation the ranks tell their neighbours how many records come, the records move on the
//! DEM ranks' road (`dem::cuda::road`: NCCL device to device where every rank has a GPU of its
//! own, else page-locked host memory and MPI), and the boundary densities of the layer next to
//! each neighbour follow in a small all-to-all; the time-step limits are reduced over the
//! ranks. Every slab still sorts by (cell, x, id) on the run's one grid, so the ranks give the
//! bits of one GPU and of a group.
//!
//! In float mode the records move while the boundary's rates run, as in a group
//! ([`SphRank::exchange_early`], `PARTICLE_SHM_SPH_OVERLAP`): the host waits for the fluid's
//! kernel only, and the densities, which those rates write, follow after the evaluation.
//!
//! Moving solids: every rank places all of them and sorts the boundary alike, so slots agree on
//! every rank as in a group; the halo's boundary densities travel with their slots (the sort
//! moves them), and after each integration every rank sends its neighbours the densities of
//! the moving particles it integrated that they may need next ([`SphRank::share_moving`]).
//!
//! Every decision is made from data all ranks share (the per-layer counts and busy times are
//! all-gathered; the limits, the particles past a whole slab and the non-finite particles are
//! reduced), so every rank takes the same branch and calls the same collectives. A state is
//! gathered on rank 0 (the others get an empty one); a frame's parts are posted to rank 0
//! without waiting for it, and rank 0 places them by id as they arrive.

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::CudaStream;

use super::group::{handover, slab_info, step_times, SlabPlan, StepEvents};
use super::slab::record_bytes;
use super::{
    as_bytes, as_bytes_mut, blocks, CudaError, FrameArray, FrameCopy, SphCuda, SphCudaOptions,
    SphGpu,
};
use crate::decomp::balance::Balance;
use crate::dem::cuda::road::{Part, Road};
use crate::dem::cuda::{neighbour, MemoryReport};
use crate::exec::comm::{encode, Comm};
use crate::sph::cpu::{next_time_step, SphState};
use crate::sph::motion::MovingSolids;
use crate::sph::parts::{assemble_state, take_parts, FramePart, PendingFrame};
use crate::sph::setup::{Integrator, SphConstants};
use crate::sph::slabs::{decide_over_ranks, reach_of, SlabOptions};

/// How an SPH run is spread over the ranks' GPUs.
#[derive(Debug, Clone)]
pub struct SphRankOptions {
    pub comm: Arc<dyn Comm>,
    /// This rank's device ordinal.
    pub device: usize,
    /// The parity mode (see [`SphCudaOptions::double`]).
    pub double: bool,
    /// The cut and its balancing.
    pub slabs: SlabOptions,
    /// See [`super::SphGroupOptions::spare_slots`].
    pub spare_slots: u32,
    /// See [`super::SphGroupOptions::classify_in_rates`].
    pub classify_in_rates: bool,
    /// The exchange of records started before the boundary's rates (float mode; see
    /// [`SphRank::exchange_early`]); off on every rank if off on any.
    pub overlap: bool,
}

/// A frame assembled on rank 0's host by [`SphGpu::pack_frame`] (for tests and tools that read
/// frames through [`SphGpu::frame_vec3`]).
#[derive(Default)]
struct HostFrame {
    pos: Vec<[f32; 3]>,
    vel: Vec<[f32; 3]>,
    rho: Vec<f32>,
    press: Vec<f32>,
}

/// Device buffers of a frame's part (grown with the slab).
#[derive(Default)]
struct PartBuffers {
    cap: u32,
    count: u64,
    id: u64,
    pos: u64,
    vel: u64,
    rho: u64,
    press: u64,
}

/// The boundary densities of a range of layers: slots, 32-bit words per density, the address of
/// their slot list (in `by_layer`) and their bytes.
struct LayerDensities {
    n: u32,
    words: u32,
    idx: u64,
    bytes: usize,
}

/// See the module documentation.
pub struct SphRank {
    pub c: SphConstants,
    /// How the records travel (before `sim`: an NCCL communicator goes while the context
    /// lives).
    road: Road,
    sim: SphCuda,
    comm: Arc<dyn Comm>,
    rank: usize,
    ranks: usize,
    device: usize,
    axis: usize,
    bounds: Vec<u32>,
    kind: Vec<u32>,
    time: f64,
    step: u64,
    dt: f64,
    /// The cut's balancing (mode, interval, threshold).
    balancing: SlabOptions,
    /// The boundary slots sorted by layer (on the device) and where each layer starts (listed
    /// again at each move of the bounds when solids move).
    by_layer: u64,
    layer_start: Vec<u32>,
    /// Device scratch of boundary densities on their way to or from another rank.
    xfer: u64,
    xfer_bytes: usize,
    part: PartBuffers,
    /// Device compute time since the last balancing decision, and over the run [s].
    busy: f64,
    /// Device time of the steps since the last decision (compute and exchange) [s], and those
    /// steps: what the balancing's guard judges a move by.
    interval_s: f64,
    interval_steps: u64,
    guard: crate::decomp::balance::MoveGuard,
    compute_s: f64,
    exchange_s: f64,
    timed_steps: u64,
    events: StepEvents,
    rebalances: u64,
    records_sent: u64,
    pending: Option<PendingFrame>,
    host_frame: RefCell<HostFrame>,
    copy_done: FrameCopy,
    /// Whether solids move.
    moving: bool,
    /// [`SphRankOptions::classify_in_rates`].
    classify_in_rates: bool,
    /// [`SphRankOptions::overlap`], agreed over the ranks.
    overlap: bool,
    /// An exchange started early (at the half state's positions: true), until the
    /// evaluation's end finishes it.
    early: Option<bool>,
    /// Exchanges that had started early, and all exchanges (an early start after the last step
    /// counts once an exchange takes it).
    overlapped: u64,
    exchanges: u64,
    /// Moving solids: the layer of each boundary slot (device scratch of `list_layers`).
    layer_scratch: u64,
    /// Moving solids: (slot, density) pairs picked for or received from another rank (device
    /// scratch of `pick_pairs` and `put_pairs`: a counter, `nb` slots, `nb` reals).
    pairs: [u64; 3],
}

impl SphRank {
    /// Continues from `state` (every rank's copy of the same start) with the step `dt` it was
    /// about to take, and the case's `moving` solids; this rank builds its slab on
    /// `opts.device`.
    pub fn from_state(
        c: SphConstants,
        state: SphState,
        dt: f64,
        moving: MovingSolids,
        opts: SphRankOptions,
    ) -> Result<SphRank, CudaError> {
        let (rank, ranks) = (opts.comm.rank(), opts.comm.size());
        if opts.classify_in_rates && rank == 0 {
            tracing::info!(
                "SPH ranks: the rates kernels classify the fluid for each exchange \
                 (PARTICLE_SHM_SPH_CLASSIFY=rates)"
            );
        }
        moving
            .check(state.pos.len())
            .map_err(CudaError::Unsupported)?;
        // Every rank must take the same road (the early exchange adds collectives): off if
        // any rank has it off (the parity mode has no early exchange: its update runs after
        // the boundary's rates).
        let overlap_off = u64::from(!opts.overlap || opts.double);
        let overlap = opts.comm.sum_u64(overlap_off) == 0;
        let plan = SlabPlan::new(&c, &state, &moving, ranks, &opts.slabs)?;
        // mDBC: the ghost nodes at rest (every rank the same).
        let ghosts = crate::sph::mdbc::ghosts_at_rest(&c, &moving, &state.pos, &state.kind);
        let device = SphCudaOptions {
            device: opts.device,
            double: opts.double,
        };
        let mut sim = plan.build(
            &c,
            &state,
            &moving,
            dt,
            device,
            rank,
            opts.spare_slots,
            0,
            ghosts.as_deref(),
        )?;
        let (by_layer, layer_start) = list_boundary_by_layer(&mut sim)?;
        let road = Road::new(opts.comm.as_ref(), opts.device, &sim.stream, state.step)?;
        let e = || {
            sim.ctx
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| CudaError::driver("creating an event", e))
        };
        let events = [e()?, e()?, e()?, e()?];
        let mut rank = SphRank {
            c,
            road,
            sim,
            comm: opts.comm,
            rank,
            ranks,
            device: opts.device,
            axis: plan.axis,
            bounds: plan.bounds,
            kind: state.kind,
            time: state.time,
            step: state.step,
            dt,
            balancing: opts.slabs,
            classify_in_rates: opts.classify_in_rates,
            overlap,
            early: None,
            overlapped: 0,
            exchanges: 0,
            by_layer,
            layer_start,
            xfer: 0,
            xfer_bytes: 0,
            part: PartBuffers::default(),
            busy: 0.0,
            interval_s: 0.0,
            interval_steps: 0,
            guard: Default::default(),
            compute_s: 0.0,
            exchange_s: 0.0,
            timed_steps: 0,
            events,
            rebalances: 0,
            records_sent: 0,
            pending: None,
            host_frame: RefCell::new(HostFrame::default()),
            copy_done: FrameCopy::default(),
            moving: !moving.is_empty(),
            layer_scratch: 0,
            pairs: [0; 3],
        };
        rank.fit_part_buffers()?;
        Ok(rank)
    }

    /// The slab bounds (cell layers along the split axis, one more than ranks).
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
    /// Fluid records this rank sent so far (halo copies and migrants).
    pub fn records_sent(&self) -> u64 {
        self.records_sent
    }
    /// This rank's device compute and exchange time over the run [s], and the steps timed.
    pub fn phase_times(&self) -> (f64, f64, u64) {
        (self.compute_s, self.exchange_s, self.timed_steps)
    }
    /// This rank's arrays.
    pub fn memory(&self) -> &MemoryReport {
        self.sim.memory()
    }

    /// A device scratch of at least `bytes` bytes.
    fn scratch(&mut self, bytes: usize) -> Result<u64, CudaError> {
        if bytes > self.xfer_bytes {
            let old = self.xfer;
            self.sim.free(old);
            let grown = bytes + bytes / 4;
            self.xfer = self.sim.alloc("rank.boundary_transfer", grown)?;
            self.xfer_bytes = grown;
        }
        Ok(self.xfer)
    }

    /// The boundary slots of the layers [lo, hi): (first entry of `by_layer`, count).
    fn layer_slots(&self, lo: u32, hi: u32) -> (u32, u32) {
        let top = self.layer_start.len() as u32 - 1;
        let (lo, hi) = (lo.min(top), hi.min(top));
        if lo >= hi {
            return (0, 0);
        }
        let (a, b) = (self.layer_start[lo as usize], self.layer_start[hi as usize]);
        (a, b - a)
    }

    /// The boundary densities of the layers [lo, hi) as `sph_pick_words` and `sph_put_words`
    /// move them.
    fn densities_of(&self, lo: u32, hi: u32) -> LayerDensities {
        let (first, n) = self.layer_slots(lo, hi);
        let real = self.sim.real;
        LayerDensities {
            n,
            words: (real / 4) as u32,
            idx: self.by_layer + 4 * first as u64,
            bytes: n as usize * real,
        }
    }

    /// The boundary densities (state or half state) of the layers [lo, hi), in slot order
    /// (waits for the stream).
    fn pick_densities(&mut self, lo: u32, hi: u32, half: bool) -> Result<Vec<u8>, CudaError> {
        let t = self.densities_of(lo, hi);
        let (n, words, idx) = (t.n, t.words, t.idx);
        let mut out = vec![0u8; t.bytes];
        if n == 0 {
            return Ok(out);
        }
        let xfer = self.scratch(t.bytes)?;
        let src = self.sim.boundary_rho_ptr(half);
        self.sim.launch(
            "sph_pick_words",
            blocks(n * words),
            &[&n, &words, &idx, &src, &xfer],
        )?;
        self.sim.get(xfer, &mut out)?;
        Ok(out)
    }

    /// Writes densities of the layers [lo, hi) that rank `from` sent (queued).
    fn put_densities(
        &mut self,
        lo: u32,
        hi: u32,
        half: bool,
        bytes: &[u8],
        from: usize,
    ) -> Result<(), CudaError> {
        let t = self.densities_of(lo, hi);
        let (n, words, idx) = (t.n, t.words, t.idx);
        if bytes.len() != t.bytes {
            return Err(mismatch(
                self.rank,
                from,
                self.step,
                format!(
                    "{} bytes of boundary densities for layers {lo}..{hi}, which hold {n} \
                     boundary particles",
                    bytes.len()
                ),
            ));
        }
        if n == 0 {
            return Ok(());
        }
        let xfer = self.scratch(bytes.len())?;
        self.sim.put(xfer, bytes)?;
        let dst = self.sim.boundary_rho_ptr(half);
        self.sim.launch(
            "sph_put_words",
            blocks(n * words),
            &[&n, &words, &idx, &xfer, &dst],
        )
    }

    /// The layer next to the bound with the neighbour on `side` that this rank sends (its
    /// own first or last layer) and the one it receives (the neighbour's).
    fn halo_layers(&self, side: usize) -> (u32, u32) {
        let (lo, hi) = (self.bounds[self.rank], self.bounds[self.rank + 1]);
        if side == 0 {
            (lo, lo - 1)
        } else {
            (hi - 1, hi)
        }
    }

    /// Arms the rates about to run: to classify this rank's particles for the next exchange
    /// inside the fluid's kernel (classify_in_rates, as a group does,
    /// `SphGroup::arm_sends`), and to start that exchange early (overlap), unless the bounds
    /// may move before it (`end_of_step`, and a balancing decision due after this step: the
    /// same on every rank).
    fn arm(&mut self, end_of_step: bool) {
        let info = slab_info(&self.bounds, self.rank);
        if self.classify_in_rates {
            self.sim.arm_sends(info);
        }
        let decision_due = self.balancing.decision_after(self.step + 1);
        if self.overlap && !(end_of_step && decision_due) {
            self.sim.arm_early(info);
        }
    }

    /// The exchange before an evaluation at the state's (`half` false) or the half state's
    /// positions: classify, tell the neighbours how many records come, move the records
    /// ([`Road`]: NCCL or host memory) and unpack them, then the boundary densities of the
    /// layer next to each neighbour ([`SphRank::exchange_halo`]). Finishes an exchange started
    /// early instead.
    fn exchange(&mut self, half: bool) -> Result<(), CudaError> {
        self.exchanges += 1;
        if let Some(early) = self.early.take() {
            if early != half {
                return Err(CudaError::Unsupported(format!(
                    "internal error: at step {} an SPH exchange started early at the other \
                     half step; please report this with the case",
                    self.step
                )));
            }
            // The records are unpacked (or on their way: the compute stream waits for them).
            self.overlapped += 1;
            return self.exchange_halo(half);
        }
        let info = slab_info(&self.bounds, self.rank);
        // Classified already by the rates kernel that wrote these positions (float mode,
        // bounds unchanged since), else here.
        if self.sim.take_classified(half).is_none() {
            self.sim.queue_classify(half, info)?;
        }
        let mut counts = self.sim.read_counts()?;
        while !self.sim.fit_sends(counts[0].max(counts[1]))? {
            self.sim.queue_classify(half, info)?;
            counts = self.sim.read_counts()?;
        }
        let beyond = self.comm.sum_u64(counts[3] as u64);
        if beyond > 0 {
            return Err(CudaError::SlabSkipped {
                count: beyond.min(u32::MAX as u64) as u32,
                step: self.step,
            });
        }
        let got = self.counts_from_neighbours(counts)?;
        self.room_for(got)?;
        let stream = self.sim.stream.clone();
        self.move_records(counts, got, &stream)?;
        self.sim.queue_unpack(got, counts[2], false)?;
        self.exchange_halo(half)
    }

    /// The exchange before the next evaluation, at the half state's (`half`) or the state's
    /// positions, started as soon as the fluid's kernel has written them and they are
    /// classified ([`SphRank::arm`]; nothing unless armed): the host waits for the
    /// classification's counts on the exchange's stream, not for the boundary's rates queued
    /// after it on the compute stream, and the records move ([`Road`]) and are unpacked on that
    /// stream (the unpack writes slots after the current ones, which no kernel of the
    /// evaluation reads). Through NCCL the host queues the move and goes on; through host
    /// memory it waits for the move, while the GPU runs those rates. The compute stream waits
    /// for the unpack before what it runs next. The boundary densities of the halo, which the
    /// boundary's rates write, follow after the evaluation ([`SphRank::exchange`]).
    ///
    /// Collective: every rank goes early or none does, so a classification that did not fit
    /// its send buffers, a particle beyond reach, or records that need room the slab must grow
    /// for (which waits for the compute stream) are left to [`SphRank::exchange`] on every
    /// rank, which reads the counts again.
    fn exchange_early(&mut self, half: bool) -> Result<(), CudaError> {
        if !self.overlap {
            return Ok(());
        }
        let send_cap = self.sim.send_capacity();
        let counts = self
            .sim
            .read_counts_early(half)?
            .filter(|c| c[3] == 0 && c[0].max(c[1]) <= send_cap);
        // A rank that does not go early tells its neighbours of no records (all stay).
        let got = self.counts_from_neighbours(counts.unwrap_or_default())?;
        let go = counts.filter(|c| self.sim.fits_without_growing(c[0].max(c[1]), got));
        if self.comm.sum_u64(u64::from(go.is_none())) > 0 {
            return Ok(());
        }
        let counts = go.expect("checked by every rank");
        // Classified for this exchange, by the rates kernel or right after it.
        self.sim.take_classified(half);
        let beside = self.sim.early_sync().0.clone();
        // This stream waited for the classification (read_counts_early); the receive buffers
        // are free (the last unpack and sort came before it).
        self.move_records(counts, got, &beside)?;
        self.sim.queue_unpack(got, counts[2], true)?;
        let err = |e| CudaError::driver("ordering the exchange", e);
        let done = beside.record_event(None).map_err(err)?;
        // The next sort reads the unpacked records, and the next classification writes the
        // send buffers the move read.
        self.sim.stream.wait(&done).map_err(err)?;
        self.early = Some(half);
        Ok(())
    }

    /// Tells each neighbour how many records this rank sends it (`counts`: to the left and
    /// right) and returns how many come from the left and the right. Collective.
    fn counts_from_neighbours(&self, counts: [u32; 4]) -> Result<[u32; 2], CudaError> {
        let mut lens = vec![0usize; self.ranks];
        for (side, &n) in counts[..2].iter().enumerate() {
            if let Some(v) = neighbour(self.rank, side, self.ranks) {
                lens[v] = n as usize;
            }
        }
        let said = self.comm.exchange_lens(&lens);
        let mut got = [0u32; 2];
        for (v, &n) in said.iter().enumerate() {
            let side = (0..2).find(|&side| neighbour(self.rank, side, self.ranks) == Some(v));
            match (side, u32::try_from(n)) {
                (Some(side), Ok(n)) => got[side] = n,
                (None, _) if n == 0 => {}
                _ => {
                    return Err(mismatch(
                        self.rank,
                        v,
                        self.step,
                        format!("a count of {n} records"),
                    ))
                }
            }
        }
        Ok(got)
    }

    /// Moves this rank's classified records (`counts`) to its neighbours and theirs (`got`)
    /// into its receive buffers, ordered on `stream`, which has passed the classification.
    fn move_records(
        &mut self,
        counts: [u32; 4],
        got: [u32; 2],
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let rec = record_bytes(self.sim.real);
        let mut parts = Vec::with_capacity(2);
        for side in 0..2 {
            if let Some(peer) = neighbour(self.rank, side, self.ranks) {
                parts.push(Part {
                    peer,
                    src: self.sim.send_ptr(side),
                    out: counts[side] as usize * rec,
                    dst: self.sim.recv_ptr(side),
                    into: got[side] as usize * rec,
                });
            }
        }
        self.records_sent += (counts[0] + counts[1]) as u64;
        self.road.move_parts(self.comm.as_ref(), stream, &parts)
    }

    /// To each neighbour, the boundary densities (state, or with `half` half state) of this
    /// rank's layer next to it, and from it those of its layer next to this rank: one
    /// all-to-all through host memory (a layer's few thousand values). With `half`, then the
    /// moving particles' half-step densities ([`SphRank::share_moving`]).
    fn exchange_halo(&mut self, half: bool) -> Result<(), CudaError> {
        let mut sends = vec![Vec::new(); self.ranks];
        for side in 0..2 {
            if let Some(v) = neighbour(self.rank, side, self.ranks) {
                sends[v] = self.pick_halo(side, half)?;
            }
        }
        let got = self.comm.exchange(sends);
        for side in 0..2 {
            if let Some(v) = neighbour(self.rank, side, self.ranks) {
                self.put_halo(side, &got[v], half, v)?;
            }
        }
        if half {
            // The half-step densities the predictor just integrated.
            self.share_moving(true)?;
        }
        Ok(())
    }

    /// Room for `got` records from each side (grows the slab; waits for the compute stream if
    /// so). Collective: a rank that cannot make room stops every rank at this step.
    fn room_for(&mut self, got: [u32; 2]) -> Result<(), CudaError> {
        let room = self.sim.make_room(got, self.device);
        let room = room.and_then(|()| self.fit_part_buffers());
        if self.comm.sum_u64(room.is_err() as u64) > 0 {
            room?;
            return Err(CudaError::OtherRank { step: self.step });
        }
        Ok(())
    }

    /// The boundary densities (state, or with `half` half state) of this rank's layer next to
    /// the neighbour on `side`, for that neighbour (waits for the compute stream): with
    /// moving solids as (slot, density) pairs, since the boundary's slots moved at the last
    /// sort.
    fn pick_halo(&mut self, side: usize, half: bool) -> Result<Vec<u8>, CudaError> {
        let (layer, _) = self.halo_layers(side);
        if self.moving {
            self.pick_pairs(layer, layer + 1, false, half)
        } else {
            self.pick_densities(layer, layer + 1, half)
        }
    }

    /// Writes what [`SphRank::pick_halo`] picked on rank `from`, the neighbour on `side`
    /// (queued).
    fn put_halo(
        &mut self,
        side: usize,
        bytes: &[u8],
        half: bool,
        from: usize,
    ) -> Result<(), CudaError> {
        if self.moving {
            self.put_pairs(bytes, half, from)
        } else {
            let (_, layer) = self.halo_layers(side);
            self.put_densities(layer, layer + 1, half, bytes, from)
        }
    }

    /// Moving solids: lists the boundary slots of each layer again (the last sort moved them;
    /// every rank lists them at the same positions in the same slots) for a move of the bounds.
    /// Nothing otherwise.
    fn list_layers(&mut self) -> Result<(), CudaError> {
        if !self.moving || self.sim.nb == 0 {
            return Ok(());
        }
        if self.layer_scratch == 0 {
            self.layer_scratch = self
                .sim
                .alloc("rank.boundary_layer", 4 * self.sim.nb as usize)?;
        }
        let by_layer;
        (by_layer, self.layer_start) = boundary_layers(&self.sim, self.layer_scratch)?;
        self.sim.put(self.by_layer, as_bytes(&by_layer))
    }

    /// Moving solids: (slot, density) pairs of the boundary slots whose layer is in [lo, hi) at
    /// the current positions (only the moving ones this rank owns with `moving_own`), of the
    /// state or with `half` of the half state, as bytes: the count (u64), the slots (u32), the
    /// densities (waits for the stream).
    fn pick_pairs(
        &mut self,
        lo: u32,
        hi: u32,
        moving_own: bool,
        half: bool,
    ) -> Result<Vec<u8>, CudaError> {
        let nb = self.sim.nb;
        let real = self.sim.real;
        self.fit_pairs()?;
        let [count, slots, vals] = self.pairs;
        self.sim.zero(count, 4)?;
        let s = &self.sim;
        let (body, bown, src) = (s.bbody_ptr(), s.bown_ptr(), s.boundary_rho_ptr(half));
        let flag = u32::from(moving_own);
        s.launch(
            "sph_pick_bound",
            blocks(nb),
            &[
                &s.p, &nb, &s.bpos, &body, &bown, &lo, &hi, &flag, &src, &count, &slots, &vals,
            ],
        )?;
        let mut n = [0u32];
        s.get(count, as_bytes_mut(&mut n))?;
        let n = n[0] as usize;
        let mut out = vec![0u8; 8 + n * (4 + real)];
        out[..8].copy_from_slice(&(n as u64).to_le_bytes());
        s.get(slots, &mut out[8..8 + 4 * n])?;
        s.get(vals, &mut out[8 + 4 * n..])?;
        Ok(out)
    }

    /// The device arrays of (slot, density) pairs: a count and room for every boundary slot.
    fn fit_pairs(&mut self) -> Result<(), CudaError> {
        if self.pairs[0] == 0 {
            let (nb, real) = (self.sim.nb as usize, self.sim.real);
            self.pairs = [
                self.sim.alloc("rank.pairs.count", 4)?,
                self.sim.alloc("rank.pairs.slot", 4 * nb.max(1))?,
                self.sim.alloc("rank.pairs.density", real * nb.max(1))?,
            ];
        }
        Ok(())
    }

    /// mDBC over GPU ranks, between the predictor's sort and its rates: the walls' densities
    /// this rank computed for the nodes in its layers (`sph_ghost_density`; its layers and halo
    /// hold their fluid) go, as (slot, density) pairs, to every rank, which writes them into its
    /// densities at the same slots (every rank sorts the boundary alike). A node may lie up to
    /// twice the walls' thickness from its particle, in a rank that neither owns nor borders the
    /// particle, so every rank takes from every other (one value per slot: a node lies in one
    /// rank's layers). The sums are one GPU's, so are the bits. Collective.
    fn share_ghost_densities(&mut self) -> Result<(), CudaError> {
        let src = self.sim.ghost_rho_ptr();
        if src == 0 {
            return Ok(());
        }
        let (nb, real) = (self.sim.nb as usize, self.sim.real);
        let mut all = vec![0u8; nb * real];
        self.sim.get(src, &mut all)?;
        let (mut slots, mut vals) = (Vec::new(), Vec::new());
        for (k, v) in all.chunks_exact(real).enumerate() {
            let nan = if real == 8 {
                f64::from_le_bytes(v.try_into().expect("8 bytes")).is_nan()
            } else {
                f32::from_le_bytes(v.try_into().expect("4 bytes")).is_nan()
            };
            if !nan {
                slots.extend_from_slice(&(k as u32).to_le_bytes());
                vals.extend_from_slice(v);
            }
        }
        let mut out = Vec::with_capacity(8 + slots.len() + vals.len());
        out.extend_from_slice(&((slots.len() / 4) as u64).to_le_bytes());
        out.extend_from_slice(&slots);
        out.extend_from_slice(&vals);
        self.fit_pairs()?;
        let got = self.comm.all_gather(out);
        for (from, bytes) in got.iter().enumerate() {
            self.put_pairs(bytes, false, from)?;
        }
        Ok(())
    }

    /// Writes the pairs of [`SphRank::pick_pairs`] that rank `from` sent into the densities
    /// (state, or with `half` half state; queued).
    fn put_pairs(&mut self, bytes: &[u8], half: bool, from: usize) -> Result<(), CudaError> {
        let nb = self.sim.nb as usize;
        let real = self.sim.real;
        let n = bytes
            .get(..8)
            .map(|h| u64::from_le_bytes(h.try_into().expect("8 bytes")) as usize)
            .filter(|&n| n <= nb && bytes.len() == 8 + n * (4 + real));
        let bad = |what: String| mismatch(self.rank, from, self.step, what);
        let Some(n) = n else {
            return Err(bad(format!("{} bytes of boundary densities", bytes.len())));
        };
        if n == 0 {
            return Ok(());
        }
        let slots = &bytes[8..8 + 4 * n];
        if slots
            .chunks_exact(4)
            .any(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")) as usize >= nb)
        {
            return Err(bad(
                "a boundary density for a slot beyond the boundary".into()
            ));
        }
        let [_, dslots, dvals] = self.pairs;
        self.sim.put(dslots, slots)?;
        self.sim.put(dvals, &bytes[8 + 4 * n..])?;
        let dst = self.sim.boundary_rho_ptr(half);
        let n = n as u32;
        self.sim
            .launch("sph_put_bound", blocks(n), &[&n, &dslots, &dvals, &dst])
    }

    /// Moving solids: sends each neighbour the density (of the state, or with `half` of the half
    /// state) of each moving particle this rank integrated at its last evaluation that may lie
    /// in the neighbour's layers or halo at the next evaluation (its reach and a layer more: a
    /// particle moves less than a layer in half a step), and writes what the neighbours sent.
    /// So the rank that owns a moving particle next, or has it in its halo, holds its current
    /// density: the next owner is this rank or a neighbour, and a particle in a neighbour's
    /// halo layer is in its reach. Every rank sorts the boundary alike, so a slot is the same
    /// particle everywhere. Collective; nothing without moving solids.
    fn share_moving(&mut self, half: bool) -> Result<(), CudaError> {
        if !self.moving {
            return Ok(());
        }
        let me = self.rank;
        let layers = *self.bounds.last().expect("bounds");
        let mut sends = vec![Vec::new(); self.ranks];
        for side in 0..2 {
            let Some(v) = neighbour(me, side, self.ranks) else {
                continue;
            };
            let reach = reach_of(&self.bounds, v);
            let (lo, hi) = (reach.start.saturating_sub(1), (reach.end + 1).min(layers));
            sends[v] = self.pick_pairs(lo, hi, true, half)?;
        }
        let got = self.comm.exchange(sends);
        for side in 0..2 {
            let Some(v) = neighbour(me, side, self.ranks) else {
                continue;
            };
            self.put_pairs(&got[v], half, v)?;
        }
        Ok(())
    }

    fn mark(&self, which: usize) -> Result<(), CudaError> {
        self.events[which]
            .record(&self.sim.stream)
            .map_err(|e| CudaError::driver("recording an event", e))
    }

    /// Moves the slab bounds as a group does ([`decide_over_ranks`]: the all-gathered counts
    /// and times, so every rank decides alike); each rank then flags the boundary particles it
    /// now owns and takes the densities of the layers it now owns or borders from their
    /// previous owners.
    fn rebalance(&mut self) -> Result<(), CudaError> {
        if self.balancing.balance == Balance::Off {
            return Ok(());
        }
        let sim = &self.sim;
        let decision = decide_over_ranks(
            self.comm.as_ref(),
            self.balancing.balance,
            self.balancing.threshold,
            &self.bounds,
            || sim.layer_counts(),
            self.busy,
            crate::decomp::balance::guarded(self.balancing.balance).then_some(
                crate::sph::slabs::RankGuard {
                    guard: &mut self.guard,
                    step_s: self.interval_s,
                    steps: self.interval_steps,
                },
            ),
        )?;
        self.busy = 0.0;
        self.interval_s = 0.0;
        self.interval_steps = 0;
        let Some(new) = decision else {
            return Ok(());
        };
        // An exchange started early moved records for the old bounds: `arm` starts none before
        // a decision (every rank alike).
        if self.early.is_some() {
            return Err(CudaError::Unsupported(
                "internal: an SPH exchange started early before a move of the rank bounds".into(),
            ));
        }
        self.guard.applied();
        tracing::debug!(
            step = self.step,
            by = self.balancing.balance.name(),
            from = ?self.bounds,
            to = ?new,
            "SPH rank bounds moved"
        );
        let old = std::mem::replace(&mut self.bounds, new);
        let me = self.rank;
        // The last rates kernel classified for the old bounds.
        self.sim.forget_classified();
        self.list_layers()?;
        self.sim
            .set_own_layers(self.bounds[me], self.bounds[me + 1])?;
        // With Verlet the densities one step back too, which the new owner integrates from.
        for back in [false, true]
            .into_iter()
            .take(1 + usize::from(self.verlet()))
        {
            let mut sends = vec![Vec::new(); self.ranks];
            for (w, send) in sends.iter_mut().enumerate().filter(|(w, _)| *w != me) {
                let (lo, hi) = handover(&old, &self.bounds, me, w);
                *send = self.pick_densities(lo, hi, back)?;
            }
            let got = self.comm.exchange(sends);
            for (v, bytes) in got.iter().enumerate().filter(|(v, _)| *v != me) {
                let (lo, hi) = handover(&old, &self.bounds, v, me);
                self.put_densities(lo, hi, back, bytes, v)?;
            }
        }
        self.rebalances += 1;
        Ok(())
    }

    /// Whether the run integrates with Verlet (the boundary's `bhalf` then holds the densities
    /// one step back, which must follow moved bounds and moving particles).
    fn verlet(&self) -> bool {
        matches!(self.c.integrator, Integrator::Verlet { .. })
    }

    /// Grows the device buffers of a frame's part to the slab's slots.
    fn fit_part_buffers(&mut self) -> Result<(), CudaError> {
        let need = self.sim.cap + self.sim.nb;
        if need <= self.part.cap {
            return Ok(());
        }
        let old = std::mem::take(&mut self.part);
        for p in [old.count, old.id, old.pos, old.vel, old.rho, old.press] {
            self.sim.free(p);
        }
        let n = need as usize;
        self.part = PartBuffers {
            cap: need,
            count: self.sim.alloc("rank.frame_count", 4)?,
            id: self.sim.alloc("rank.frame_id", 4 * n)?,
            pos: self.sim.alloc("rank.frame_pos", 12 * n)?,
            vel: self.sim.alloc("rank.frame_vel", 12 * n)?,
            rho: self.sim.alloc("rank.frame_rho", 4 * n)?,
            press: self.sim.alloc("rank.frame_pressure", 4 * n)?,
        };
        Ok(())
    }

    /// This rank's part of a frame: `sph_pack`'s values of its particles (waits for them).
    fn frame_part(&self) -> Result<FramePart, CudaError> {
        let need = self.sim.nf + self.sim.nb;
        let b = &self.part;
        self.sim.zero(b.count, 4)?;
        debug_assert!(need <= b.cap, "part buffers fit the slab's slots");
        let s = &self.sim;
        let (own, bown, bvel) = (s.own_ptr(), s.bown_ptr(), s.bvel_ptr());
        s.launch(
            "sph_pack_part",
            blocks(need),
            &[
                &s.p,
                &s.s,
                &s.nb,
                &s.bpos,
                &s.brho,
                &bvel,
                &s.bid,
                &own,
                &bown,
                &b.count,
                &b.id,
                &super::SphFrame::of([b.pos, b.vel, b.rho, b.press]),
            ],
        )?;
        let mut n = [0u32];
        s.get(b.count, as_bytes_mut(&mut n))?;
        let n = n[0] as usize;
        let mut part = FramePart {
            id: vec![0; n],
            pos: vec![0.0; 3 * n],
            vel: vec![0.0; 3 * n],
            rho: vec![0.0; n],
            press: vec![0.0; n],
        };
        s.get(b.id, as_bytes_mut(&mut part.id))?;
        s.get(b.pos, as_bytes_mut(&mut part.pos))?;
        s.get(b.vel, as_bytes_mut(&mut part.vel))?;
        s.get(b.rho, as_bytes_mut(&mut part.rho))?;
        s.get(b.press, as_bytes_mut(&mut part.press))?;
        if part.id.iter().any(|&id| id as usize >= self.kind.len()) {
            return Err(CudaError::Unsupported(format!(
                "internal error: rank {} packed an id beyond the run's {} particles",
                self.rank,
                self.kind.len()
            )));
        }
        Ok(part)
    }

    /// Places what the ranks in the pending frame posted (all of them, waiting, with `wait`);
    /// true once the frame is complete.
    fn take_parts(&mut self, wait: bool) -> bool {
        // SAFETY: publish_async's contract keeps the targets valid until the frame completes.
        unsafe { take_parts(self.comm.as_ref(), &mut self.pending, wait) }
    }
}

/// Lists the boundary slots of `sim` by layer (they never move): the slots sorted by their layer
/// on the device, and the first entry of each layer (one more than layers).
fn list_boundary_by_layer(sim: &mut SphCuda) -> Result<(u64, Vec<u32>), CudaError> {
    let nb = sim.nb;
    let (by_layer, start) = if nb > 0 {
        let dev = sim.alloc("rank.boundary_layer", 4 * nb as usize)?;
        let lists = boundary_layers(sim, dev);
        sim.free(dev);
        lists?
    } else {
        (Vec::new(), vec![0; sim.layers() as usize + 1])
    };
    let dev = sim.alloc("rank.boundary_by_layer", 4 * nb as usize)?;
    if nb > 0 {
        sim.put(dev, as_bytes(&by_layer))?;
    }
    Ok((dev, start))
}

/// The boundary slots of `sim` sorted by layer, and where each layer starts, from the current
/// positions (`scratch`: `nb` u32 on the device; waits for the stream).
fn boundary_layers(sim: &SphCuda, scratch: u64) -> Result<(Vec<u32>, Vec<u32>), CudaError> {
    let nb = sim.nb;
    let layers = sim.layers() as usize;
    let mut layer = vec![0u32; nb as usize];
    if nb > 0 {
        sim.launch(
            "sph_bound_layer",
            blocks(nb),
            &[&sim.p, &nb, &sim.bpos, &scratch],
        )?;
        sim.get(scratch, as_bytes_mut(&mut layer))?;
    }
    let mut start = vec![0u32; layers + 1];
    for &l in &layer {
        start[(l as usize).min(layers - 1) + 1] += 1;
    }
    for l in 0..layers {
        start[l + 1] += start[l];
    }
    let mut next = start.clone();
    let mut by_layer = vec![0u32; nb as usize];
    for (k, &l) in layer.iter().enumerate() {
        let l = (l as usize).min(layers - 1);
        by_layer[next[l] as usize] = k as u32;
        next[l] += 1;
    }
    Ok((by_layer, start))
}

/// Two ranks disagree on what one sent the other: an internal error.
fn mismatch(rank: usize, from: usize, step: u64, what: String) -> CudaError {
    CudaError::Unsupported(format!(
        "internal error: at step {step} MPI rank {rank} got {what} from rank {from}; please \
         report this with the case"
    ))
}

impl SphGpu for SphRank {
    fn step(&mut self) -> Result<(), CudaError> {
        let dt = self.dt;
        self.sim.p.dt = dt;
        // The slab's clock: where it places the moving solids, and the step index that says
        // which Verlet steps are Euler steps.
        (self.sim.time, self.sim.dt, self.sim.step) = (self.time, dt, self.step);
        match self.c.integrator {
            Integrator::Symplectic => {
                self.exchange(false)?;
                self.mark(0)?;
                self.sim.predictor_sort()?;
                self.share_ghost_densities()?;
                self.arm(false);
                self.sim.predictor_rates()?;
                self.mark(1)?;
                self.exchange_early(true)?;
                self.exchange(true)?;
                self.mark(2)?;
                self.arm(true);
                self.sim.corrector()?;
            }
            Integrator::Verlet { euler_every } => {
                // One evaluation; the exchange (records carrying the state one step back in
                // their half-state fields) timed as the exchange, events 1 to 2 (as a group).
                self.mark(0)?;
                self.mark(1)?;
                self.exchange(false)?;
                self.mark(2)?;
                self.sim.verlet_sort()?;
                self.share_ghost_densities()?;
                self.arm(true);
                self.sim.verlet_update(euler_every)?;
            }
        }
        self.mark(3)?;
        // The next step's first exchange (after the events: its waits are not compute).
        self.exchange_early(false)?;
        let (f, cv, nonfinite) = self.sim.read_diag()?;
        let (dt_f, dt_cv) = (self.comm.min_f64(f), self.comm.min_f64(cv));
        let nonfinite = self.comm.sum_u64(nonfinite as u64);
        // The densities the corrector just integrated (before a move of the bounds), and with
        // Verlet those one step back, which the next owner of a moving particle integrates from.
        self.share_moving(false)?;
        if self.verlet() {
            self.share_moving(true)?;
        }
        // The stream has passed its events (read_diag waited for it).
        let (compute, exchange) = step_times(&self.events)?;
        self.exchange_s += exchange;
        self.busy += compute;
        self.interval_s += compute + exchange;
        self.interval_steps += 1;
        self.compute_s += compute;
        self.timed_steps += 1;
        self.time += dt;
        self.step += 1;
        if nonfinite > 0 {
            return Err(CudaError::NonFinite {
                count: nonfinite.min(u32::MAX as u64) as u32,
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
    /// Collective: every rank's particles, gathered on rank 0 (the other ranks get a state
    /// without particles).
    fn state(&self) -> Result<SphState, CudaError> {
        let mine = self.sim.owned_particles()?;
        let parts = self.comm.gather(encode(&mine));
        if !self.comm.is_root() {
            return Ok(SphState::zeroed(self.time, self.step, Vec::new()));
        }
        assemble_state(parts, self.time, self.step, &self.kind).map_err(|e| {
            CudaError::Unsupported(format!(
                "internal error: {e}; please report this with the case"
            ))
        })
    }
    /// Frames are placed on rank 0's host (no device copy to page-lock for).
    unsafe fn register_host(&mut self, _ptr: *mut u8, _len: usize) -> Result<(), CudaError> {
        Ok(())
    }
    fn release_host(&mut self) {
        let _ = self.publish_wait();
    }
    /// Every rank packs its particles; the others post their part to rank 0, which places its
    /// own at once and the others' as they arrive ([`SphGpu::publish_done`]).
    unsafe fn publish_async(&mut self, targets: [*mut u8; 4]) -> Result<(), CudaError> {
        self.publish_wait()?;
        let part = self.frame_part()?;
        if !self.comm.is_root() {
            self.comm.post_to_root(part.to_bytes());
            return Ok(());
        }
        // SAFETY: the caller's contract; frame_part checked the ids.
        unsafe { part.place(targets) };
        self.pending = Some(PendingFrame::new(targets, self.ranks, self.kind.len()));
        Ok(())
    }
    fn publish_done(&mut self) -> Result<bool, CudaError> {
        Ok(self.take_parts(false))
    }
    fn publish_wait(&mut self) -> Result<(), CudaError> {
        self.take_parts(true);
        Ok(())
    }
    /// Collective: the whole frame, assembled on rank 0's host from every rank's packed part.
    fn pack_frame(&self) -> Result<(), CudaError> {
        let parts = self.comm.gather(self.frame_part()?.to_bytes());
        let n = self.kind.len();
        let mut f = HostFrame::default();
        if self.comm.is_root() {
            f = HostFrame {
                pos: vec![[0.0; 3]; n],
                vel: vec![[0.0; 3]; n],
                rho: vec![0.0; n],
                press: vec![0.0; n],
            };
            let targets = [
                f.pos.as_mut_ptr() as *mut u8,
                f.vel.as_mut_ptr() as *mut u8,
                f.rho.as_mut_ptr() as *mut u8,
                f.press.as_mut_ptr() as *mut u8,
            ];
            for bytes in parts {
                let part = FramePart::from_bytes(&bytes)
                    .filter(|p| p.id.iter().all(|&id| (id as usize) < n))
                    .ok_or_else(|| {
                        mismatch(0, 0, self.step, "a frame part not of this run".into())
                    })?;
                // SAFETY: the four vectors hold n particles each and every id is below n.
                unsafe { part.place(targets) };
            }
        }
        *self.host_frame.borrow_mut() = f;
        Ok(())
    }
    fn frame_vec3(&self, a: FrameArray, out: &mut [[f32; 3]]) -> Result<(), CudaError> {
        let f = self.host_frame.borrow();
        let src = match a {
            FrameArray::Position => &f.pos,
            FrameArray::Velocity => &f.vel,
            _ => return Err(CudaError::Unsupported(format!("{a:?} is not a vector"))),
        };
        copy_frame(src, out)
    }
    fn frame_scalar(&self, a: FrameArray, out: &mut [f32]) -> Result<(), CudaError> {
        let f = self.host_frame.borrow();
        let src = match a {
            FrameArray::Density => &f.rho,
            FrameArray::Pressure => &f.press,
            _ => return Err(CudaError::Unsupported(format!("{a:?} is not a scalar"))),
        };
        copy_frame(src, out)
    }
    fn device_name(&self) -> String {
        format!(
            "{} MPI ranks, one GPU each (rank {}: {} {}; records {})",
            self.ranks,
            self.rank,
            self.device,
            self.sim.device_name(),
            self.road.describe()
        )
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

/// Copies an assembled frame array (empty off rank 0 or before [`SphGpu::pack_frame`]).
fn copy_frame<T: Copy>(src: &[T], out: &mut [T]) -> Result<(), CudaError> {
    if src.len() != out.len() {
        return Err(CudaError::Unsupported(format!(
            "a frame of {} particles read into {} (only rank 0 assembles frames, after pack_frame)",
            src.len(),
            out.len()
        )));
    }
    out.copy_from_slice(src);
    Ok(())
}

impl Drop for SphRank {
    fn drop(&mut self) {
        if self.pending.is_some() {
            self.take_parts(true);
        }
        // An early exchange's move and unpack may still use the buffers, and NCCL's
        // communicator goes before the streams' context.
        let _ = self.sim.early_sync().0.synchronize();
        let _ = self.sim.stream.synchronize();
        if self.rank == 0 && self.exchanges > 0 {
            tracing::debug!(
                "SPH rank 0: {} of {} exchanges ran their records beside the boundary's rates",
                self.overlapped,
                self.exchanges
            );
        }
    }
}
