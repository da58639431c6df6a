//! What one slab of a several-GPU SPH run adds to the one-GPU engine ([`super::SphCuda`]):
//! ownership flags, the fluid records it sends to and receives from its neighbours before each
//! evaluation of the rates, and the densities of the boundary particles in its halo. Every slab
//! holds every boundary particle, in one (cell, x, id) order shared by all GPUs, so that a slot names
//! the same particle everywhere: ownership is a flag set on the device from the layer (again at
//! each sort of the boundary when solids move), and the halo's densities are read from the
//! owner's array at the same slots (peer access). The fluid's rates run over a list of the
//! owned slots ([`SlotList`]). The group ([`super::group`]) drives the exchange; the kernels are
//! sph_classify, sph_unpack, sph_own_bound, sph_take, sph_layer_count, sph_own_fluid and
//! sph_list_fill in sph.cu.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaStream, DeviceRepr};

use super::{as_bytes_mut, blocks, CudaError, SphCuda};

/// `SphSlab` of sph.cu: where a slab's particles go (see the kernel's comments).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SphSlab {
    pub left_hi: i32,
    pub right_lo: i32,
    pub reach_lo: i32,
    pub reach_hi: i32,
    pub cap: u32,
    pub pad: u32,
}

const _: () = assert!(std::mem::size_of::<SphSlab>() == 24);
// SAFETY: a plain #[repr(C)] struct of i32 and u32 with the layout of its sph.cu twin.
unsafe impl DeviceRepr for SphSlab {}

/// `SphSends` of sph.cu: the classification a slab's fluid rates kernel ends with
/// (sph_rates_fluid_sends), for the exchange before the next evaluation.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(super) struct SphSends {
    /// The slab's neighbours and reach, with the send buffers' capacity in `cap`.
    pub sl: SphSlab,
    /// Per fluid slot, kept by the next sort (the kernel writes the owned slots'; the host
    /// zeroes the array first).
    pub keep: u64,
    /// Records to the left and right neighbours.
    pub left: u64,
    pub right: u64,
    /// Sent left, sent right, kept, beyond reach (zeroed by the host first).
    pub counts: u64,
}

const _: () = assert!(std::mem::size_of::<SphSends>() == 56);
// SAFETY: a plain #[repr(C)] struct of SphSlab and u64 device addresses with the layout of its
// sph.cu twin.
unsafe impl DeviceRepr for SphSends {}

/// Bytes of one fluid record (SPH_REC_BYTES in sph.cu) for `real` of `real` bytes.
pub(super) fn record_bytes(real: usize) -> usize {
    56 + 8 * real
}

/// How a slab is set up.
pub(super) struct SlabSetup {
    /// Fluid slots (owned, halo and arrivals of one exchange).
    pub cap: u32,
    /// Particles of the frame staging arrays (the whole run on the first GPU, else none).
    pub frame_n: usize,
}

impl SlabSetup {
    /// First send buffers: a sixteenth of the slots each, grown when an exchange needs more.
    fn send_cap(&self) -> u32 {
        (self.cap / 16).max(1024)
    }

    /// Device bytes beyond the one-GPU engine's with `nb` boundary particles: flags, lists of
    /// owned slots and the first record buffers.
    pub fn extra_bytes(&self, real: usize, nb: u64) -> u64 {
        SLAB_BYTES_PER_SLOT * self.cap as u64
            + SlotList::bytes(self.cap)
            + nb
            + 4 * self.send_cap() as u64 * record_bytes(real) as u64
    }
}

/// Device bytes a slab adds per fluid slot beside its list of owned slots: the flags `own` and
/// `keep`.
const SLAB_BYTES_PER_SLOT: u64 = 2;

/// The fluid slots of a slab whose ownership flag is set, listed in slot order, so that the
/// fluid's rates kernel runs one thread per owned particle (the halo's particles would otherwise
/// idle lanes in the owned ones' warps; see sph_flag_own in sph.cu). Filled on the device:
/// per-block counts (sph_flag_own, inside sph_localize or sph_own_fluid), their exclusive scan,
/// then sph_list_fill.
pub(super) struct SlotList {
    /// The listed slots.
    pub list: u64,
    /// Owned slots per launch block, and their exclusive scan (one more entry: the total).
    pub counts: u64,
    offs: u64,
    /// The scan's buffers, sized for `slots`.
    levels: Vec<(u64, u64, u32)>,
    /// Slots the arrays hold.
    slots: u32,
}

impl SlotList {
    /// Device bytes of a list of `slots` slots.
    pub fn bytes(slots: u32) -> u64 {
        let entries = Self::blocks(slots) as u64 + 1;
        let levels: usize = crate::dem::cuda::scan_level_sizes(entries as usize)
            .iter()
            .sum();
        4 * slots as u64 + 8 * entries + 8 * levels as u64
    }

    /// Launch blocks over `n` slots.
    fn blocks(n: u32) -> u32 {
        blocks(n).grid_dim.0
    }

    fn alloc(sim: &mut SphCuda, name: &str, slots: u32) -> Result<SlotList, CudaError> {
        let entries = Self::blocks(slots) as usize + 1;
        let levels = sim.alloc_scan_levels(&format!("{name}.scan"), entries)?;
        Ok(SlotList {
            list: sim.alloc(name, 4 * slots as usize)?,
            counts: sim.alloc(&format!("{name}.counts"), 4 * entries)?,
            offs: sim.alloc(&format!("{name}.offsets"), 4 * entries)?,
            levels,
            slots,
        })
    }

    fn free(self, sim: &mut SphCuda) {
        for p in [self.list, self.counts, self.offs] {
            sim.free(p);
        }
        for (sums, scanned, _) in self.levels {
            sim.free(sums);
            sim.free(scanned);
        }
    }

    /// The number of listed slots, on the device (4 bytes), once [`SlotList::fill`] ran over
    /// `n` slots.
    pub fn count_ptr(&self, n: u32) -> u64 {
        self.offs + 4 * Self::blocks(n) as u64
    }

    /// Queues the list of the `n` slots whose `flags` are set, from the per-block counts that
    /// sph_flag_own wrote in a launch of `blocks(n)`.
    fn fill(&self, sim: &SphCuda, n: u32, flags: u64) -> Result<(), CudaError> {
        debug_assert!(n <= self.slots);
        sim.scan(&self.levels, self.counts, self.offs, Self::blocks(n) + 1)?;
        // sph_list_fill: four slots a thread.
        sim.launch(
            "sph_list_fill",
            blocks(n.div_ceil(4)),
            &[&n, &flags, &self.offs, &self.list],
        )
    }
}

/// A slab's exchange state.
pub(super) struct Slab {
    /// Per fluid slot: owned at the last evaluation (flagged before its rates); kept by the
    /// next sort.
    pub own: u64,
    pub keep: u64,
    /// The owned fluid slots of the evaluation, which its rates kernel runs over.
    pub act: SlotList,
    /// Per boundary slot: owned (sph_own_bound, set again when the bounds move).
    pub bown: u64,
    /// Fluid records to the left and right neighbours, and from them.
    send: [u64; 2],
    send_cap: u32,
    recv: [u64; 2],
    recv_cap: [u32; 2],
    /// sph_classify's counts: sent left, sent right, kept, beyond reach.
    counts: u64,
    /// Owned fluid per layer of the split axis.
    layers: u64,
    /// Where the particles go, armed by the group for the next rates kernel: that kernel then
    /// classifies each owned particle for the following exchange (float mode).
    sends: Option<SphSlab>,
    /// The last rates classified for the next exchange, at the half state's positions (first
    /// field true) or the state's, inside the fluid's kernel (second field true) or with
    /// sph_classify; taken by that exchange.
    classified: Option<(bool, bool)>,
    /// Armed by the group for the next rates: the exchange after them starts as soon as the
    /// fluid's kernel has written the positions it moves on ([`SphCuda::mark_early`]), its
    /// copies and unpack queued on `beside` while the boundary's rates run.
    early: Option<SphSlab>,
    /// The last rates marked the classification for an early exchange at the half state's
    /// positions (true) or the state's: `sent` was recorded after it.
    marked: Option<bool>,
    /// Recorded on the compute stream once the fluid's classification for the next exchange is
    /// in the send buffers and counts.
    sent: CudaEvent,
    /// The stream of an early exchange's count read, copies and unpack (highest priority: its
    /// few small launches beside the boundary's rates).
    beside: Arc<CudaStream>,
}

impl Slab {
    /// Gives `sim` (whose first `sim.nf` fluid slots it owns) a slab's arrays.
    pub fn attach(sim: &mut SphCuda, setup: &SlabSetup) -> Result<(), CudaError> {
        let cap = sim.cap as usize;
        let send_cap = setup.send_cap();
        let rec = record_bytes(sim.real) * send_cap as usize;
        let layers = sim.layers() as usize;
        let slab = Slab {
            own: sim.alloc("slab.own", cap)?,
            keep: sim.alloc("slab.keep", cap)?,
            act: SlotList::alloc(sim, "slab.owned", cap as u32)?,
            bown: sim.alloc("slab.boundary_own", sim.nb as usize)?,
            send: [
                sim.alloc("slab.send_left", rec)?,
                sim.alloc("slab.send_right", rec)?,
            ],
            send_cap,
            recv: [
                sim.alloc("slab.recv_left", rec)?,
                sim.alloc("slab.recv_right", rec)?,
            ],
            recv_cap: [send_cap; 2],
            counts: sim.alloc("slab.counts", 16)?,
            layers: sim.alloc("slab.layers", 4 * layers)?,
            sends: None,
            classified: None,
            early: None,
            marked: None,
            sent: sim
                .ctx
                .new_event(Some(
                    cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING,
                ))
                .map_err(|e| CudaError::driver("creating an event", e))?,
            beside: crate::dem::cuda::driver::high_priority_stream(
                &sim.ctx,
                "the SPH exchange's stream",
            )?,
        };
        sim.put(slab.own, &vec![1u8; sim.nf as usize])?;
        let (lo, hi) = (sim.p.own_lo, sim.p.own_hi);
        sim.slab = Some(slab);
        sim.set_own_layers(lo, hi)?;
        Ok(())
    }
}

impl SphCuda {
    fn slab(&self) -> &Slab {
        self.slab.as_ref().expect("a slab of an SPH group")
    }

    fn slab_mut(&mut self) -> &mut Slab {
        self.slab.as_mut().expect("a slab of an SPH group")
    }

    /// Sets the layers this slab owns and flags its boundary particles (queued).
    pub(super) fn set_own_layers(&mut self, lo: u32, hi: u32) -> Result<(), CudaError> {
        self.p.own_lo = lo;
        self.p.own_hi = hi;
        self.flag_own_boundary()
    }

    /// Flags the boundary particles in this slab's layers at their current positions (queued;
    /// nothing outside a group). Moving solids: after each sort of the boundary.
    pub(super) fn flag_own_boundary(&self) -> Result<(), CudaError> {
        let Some(slab) = &self.slab else {
            return Ok(());
        };
        let (p, nb, bown) = (self.p, self.nb, slab.bown);
        if nb > 0 {
            self.launch("sph_own_bound", blocks(nb), &[&p, &nb, &self.bpos, &bown])?;
        }
        Ok(())
    }

    /// The owned fluid slots at the fluid positions `pos` of an evaluation: their flags and
    /// list (queued; float mode flags them inside sph_localize, see [`SphCuda::rates`], and
    /// passes `flagged`). Nothing outside a group.
    pub(super) fn list_own_fluid(&self, pos: u64, flagged: bool) -> Result<(), CudaError> {
        let Some(slab) = &self.slab else {
            return Ok(());
        };
        let p = self.p;
        if !flagged {
            self.launch(
                "sph_own_fluid",
                blocks(self.nf),
                &[&p, &pos, &slab.own, &slab.act.counts],
            )?;
        }
        slab.act.fill(self, self.nf, slab.own)
    }

    /// A slab's list of owned fluid slots and their number on the device, which its fluid
    /// rates kernel runs over; zeros on one GPU (every slot).
    pub(super) fn owned_list(&self) -> [u64; 2] {
        self.slab
            .as_ref()
            .map_or([0; 2], |s| [s.act.list, s.act.count_ptr(self.nf)])
    }

    /// Moving solids: queues copying the density (of the state, or with `half` of the half
    /// state) of each moving boundary particle that the slab whose flags are `src_own` owned
    /// at its last evaluation from that slab's array `src` (same slots: every slab sorts the
    /// boundary alike), so that every slab holds every moving particle's current density
    /// whichever slab integrated it and whichever owns it next.
    ///
    /// # Safety
    /// `src` (`nb` reals) and `src_own` (`nb` flags) are live arrays readable from this
    /// context (peer access), of a slab whose integration completed and which does not write
    /// them until this stream has passed the copy.
    pub(super) unsafe fn queue_take_moving(
        &self,
        src: u64,
        src_own: u64,
        half: bool,
    ) -> Result<(), CudaError> {
        let (p, nb, body) = (self.p, self.nb, self.bbody_ptr());
        if nb == 0 || body == 0 {
            return Ok(());
        }
        let dst = self.boundary_rho_ptr(half);
        self.launch(
            "sph_take_moving",
            blocks(nb),
            &[&p, &nb, &body, &src_own, &src, &dst],
        )
    }

    /// mDBC: this slab's `sph_ghost_density` output (0 without mDBC).
    pub(super) fn ghost_rho_ptr(&self) -> u64 {
        self.bghost_rho
    }

    /// mDBC: queues taking the walls' densities that a slab (`src`, its
    /// [`SphCuda::ghost_rho_ptr`]; this one's too) computed from the fluid around their nodes,
    /// into this slab's state densities at the same slots.
    ///
    /// # Safety
    /// `src` is a live array of `nb` reals readable from this context (peer access), written by
    /// a `sph_ghost_density` that completed, and not written again until this stream has passed
    /// the copy.
    pub(super) unsafe fn queue_take_ghost(&self, src: u64) -> Result<(), CudaError> {
        let nb = self.nb;
        if nb == 0 || src == 0 {
            return Ok(());
        }
        self.launch("sph_take_ghost", blocks(nb), &[&nb, &src, &self.brho])
    }

    /// The boundary densities of the state (`half` false) or of the half state.
    pub(super) fn boundary_rho_ptr(&self, half: bool) -> u64 {
        if half {
            self.bhalf
        } else {
            self.brho
        }
    }

    /// Queues copying the boundary densities of the layers [lo, hi) from `src` (the same
    /// array, state or half state, of the GPU that owns them: same slots) into this slab's.
    ///
    /// # Safety
    /// `src` is a live array of `nb` reals readable from this context (peer access), not
    /// written until this stream has passed the copy, and its layers [lo, hi) are current.
    pub(super) unsafe fn queue_take(
        &self,
        lo: u32,
        hi: u32,
        src: u64,
        half: bool,
    ) -> Result<(), CudaError> {
        let (p, nb) = (self.p, self.nb);
        if nb == 0 || lo >= hi {
            return Ok(());
        }
        let dst = self.boundary_rho_ptr(half);
        self.launch(
            "sph_take",
            blocks(nb),
            &[&p, &nb, &self.bpos, &lo, &hi, &src, &dst],
        )
    }

    /// Queues the classification of the fluid before an evaluation at the state's (or the half
    /// state's) positions: what stays, what goes to each neighbour.
    pub(super) fn queue_classify(
        &mut self,
        half: bool,
        mut info: SphSlab,
    ) -> Result<(), CudaError> {
        let counts = self.slab().counts;
        self.zero(counts, 16)?;
        let sl = self.slab();
        info.cap = sl.send_cap;
        let eval = if half { self.half.pos } else { self.s.pos };
        let p = self.p;
        self.launch(
            "sph_classify",
            blocks(self.nf),
            &[
                &p,
                &info,
                &self.s,
                &self.half,
                &eval,
                &sl.own,
                &sl.keep,
                &sl.send[0],
                &sl.send[1],
                &counts,
            ],
        )
    }

    /// Arms the classification inside the next rates kernel with where the particles go
    /// (the bounds of that evaluation): see [`SphCuda::take_sends`].
    pub(super) fn arm_sends(&mut self, info: SphSlab) {
        self.slab_mut().sends = Some(info);
    }

    /// For the rates kernel about to run: the armed classification (zeroing its counts and the
    /// keep flags, queued), or None (none armed, or the parity mode, whose update is a kernel
    /// of its own). `half`: the kernel's update writes the half state, whose positions the next
    /// exchange classifies. Nothing outside a group.
    pub(super) fn take_sends(&mut self, half: bool) -> Result<Option<SphSends>, CudaError> {
        let fused = self.fused_update();
        let nf = self.nf as usize;
        let Some(sl) = self.slab.as_mut() else {
            return Ok(None);
        };
        sl.classified = None;
        let Some(mut info) = sl.sends.take().filter(|_| fused) else {
            return Ok(None);
        };
        info.cap = sl.send_cap;
        let sends = SphSends {
            sl: info,
            keep: sl.keep,
            left: sl.send[0],
            right: sl.send[1],
            counts: sl.counts,
        };
        sl.classified = Some((half, true));
        self.zero(sends.counts, 16)?;
        self.zero(sends.keep, nf)?;
        Ok(Some(sends))
    }

    /// Whether the last rates classified the fluid for this exchange (at the half state's
    /// positions with `half`): Some(true) inside the fluid's kernel, Some(false) with
    /// sph_classify after it (for an early exchange); if None, the exchange runs sph_classify.
    pub(super) fn take_classified(&mut self, half: bool) -> Option<bool> {
        let sl = self.slab_mut();
        match sl.classified.take() {
            Some((h, in_kernel)) if h == half => Some(in_kernel),
            _ => None,
        }
    }

    /// Forgets a classification made for bounds that then moved.
    pub(super) fn forget_classified(&mut self) {
        let sl = self.slab_mut();
        (sl.classified, sl.early, sl.marked) = (None, None, None);
    }

    /// Arms the next rates for an early exchange with where the particles go (the bounds of
    /// the evaluation after them; see [`SphCuda::mark_early`]).
    pub(super) fn arm_early(&mut self, info: SphSlab) {
        self.slab_mut().early = Some(info);
    }

    /// Called by the rates right after the fluid's kernel (queued): with an early exchange
    /// armed (float mode, whose fluid kernel writes the next positions; the parity mode's
    /// update comes after the boundary's rates), classifies the fluid for it unless that kernel
    /// did, and records `sent`. `half`: the kernel wrote the half state.
    pub(super) fn mark_early(&mut self, half: bool) -> Result<(), CudaError> {
        let fused = self.fused_update();
        let Some(sl) = self.slab.as_mut() else {
            return Ok(());
        };
        sl.marked = None;
        let Some(info) = sl.early.take().filter(|_| fused) else {
            return Ok(());
        };
        if sl.classified.map(|c| c.0) != Some(half) {
            self.queue_classify(half, info)?;
            self.slab_mut().classified = Some((half, false));
        }
        let stream = self.stream.clone();
        let sl = self.slab_mut();
        sl.sent
            .record(&stream)
            .map_err(|e| CudaError::driver("recording an event", e))?;
        sl.marked = Some(half);
        Ok(())
    }

    /// An early exchange's counts (see [`SphCuda::read_counts`]), read on the exchange's
    /// stream once the classification marked for it is done: the host waits for the fluid's
    /// kernel, not for the boundary's rates queued after it. None if the last rates marked no
    /// classification at `half`.
    pub(super) fn read_counts_early(&mut self, half: bool) -> Result<Option<[u32; 4]>, CudaError> {
        if self.slab_mut().marked.take() != Some(half) {
            return Ok(None);
        }
        let err = |e| CudaError::driver("reading the SPH exchange's counts", e);
        let sl = self.slab();
        sl.beside.wait(&sl.sent).map_err(err)?;
        let mut c = [0u32; 4];
        let dev = self.buf(sl.counts).slice(0..16);
        sl.beside
            .memcpy_dtoh(&dev, as_bytes_mut(&mut c))
            .map_err(err)?;
        sl.beside.synchronize().map_err(err)?;
        Ok(Some(c))
    }

    /// Whether an exchange of `sent` records out (the most to one side) and `got` in needs
    /// nothing grown: the send buffers held the classification, and the fluid arrays and
    /// receive buffers take the records without a reallocation (which must wait for the
    /// compute stream).
    pub(super) fn fits_without_growing(&self, sent: u32, got: [u32; 2]) -> bool {
        let sl = self.slab();
        let need = self.nf as u64 + got[0] as u64 + got[1] as u64;
        sent <= sl.send_cap
            && need <= self.cap as u64
            && got[0] <= sl.recv_cap[0]
            && got[1] <= sl.recv_cap[1]
    }

    /// Records each send buffer holds.
    pub(super) fn send_capacity(&self) -> u32 {
        self.slab().send_cap
    }

    /// The stream of an early exchange, and the event after the classification it sends.
    pub(super) fn early_sync(&self) -> (&Arc<CudaStream>, &CudaEvent) {
        let sl = self.slab();
        (&sl.beside, &sl.sent)
    }

    /// The counts of the last classification (waits for it): sent left, sent right, kept,
    /// beyond reach.
    pub(super) fn read_counts(&self) -> Result<[u32; 4], CudaError> {
        let mut c = [0u32; 4];
        self.get(self.slab().counts, as_bytes_mut(&mut c))?;
        Ok(c)
    }

    /// Whether `sent` records fit the send buffers; if not, grows them (the classification
    /// must then run again).
    pub(super) fn fit_sends(&mut self, sent: u32) -> Result<bool, CudaError> {
        if sent <= self.slab().send_cap {
            return Ok(true);
        }
        let cap = sent + sent / 4;
        let bytes = record_bytes(self.real) * cap as usize;
        for side in 0..2 {
            let old = self.slab().send[side];
            self.free(old);
            let name = ["slab.send_left", "slab.send_right"][side];
            let p = self.alloc(name, bytes)?;
            self.slab_mut().send[side] = p;
        }
        self.slab_mut().send_cap = cap;
        Ok(false)
    }

    /// Room for `got` records from the left and right neighbours after the current slots.
    pub(super) fn make_room(&mut self, got: [u32; 2], device: usize) -> Result<(), CudaError> {
        let need = self.nf as u64 + got[0] as u64 + got[1] as u64;
        if need > self.cap as u64 {
            let cap = (need + need / 4 + 4096).min(u32::MAX as u64 - 1);
            if need > cap {
                return Err(CudaError::WindowFull {
                    device,
                    need,
                    capacity: cap,
                });
            }
            self.grow_fluid(cap as u32, device)?;
        }
        for side in 0..2 {
            if got[side] > self.slab().recv_cap[side] {
                let old = self.slab().recv[side];
                self.free(old);
                let cap = got[side] + got[side] / 4;
                let name = ["slab.recv_left", "slab.recv_right"][side];
                let p = self.alloc(name, record_bytes(self.real) * cap as usize)?;
                let sl = self.slab_mut();
                sl.recv[side] = p;
                sl.recv_cap[side] = cap;
            }
        }
        Ok(())
    }

    /// Reallocates the fluid arrays with `cap` slots (the load moved here), keeping the state,
    /// the half state and the flags of the current slots; the rest is scratch of a step.
    fn grow_fluid(&mut self, cap: u32, device: usize) -> Result<(), CudaError> {
        let (r, old_cap) = (self.real, self.cap);
        let (per_slot, _, _) = super::bytes_per_particle(r as u64);
        // The new list of owned slots is allocated while the old one still lives.
        let extra =
            (cap - old_cap) as u64 * (per_slot + SLAB_BYTES_PER_SLOT) + SlotList::bytes(cap);
        let (free, _) = self
            .ctx
            .mem_get_info()
            .map_err(|e| CudaError::driver("querying free memory", e))?;
        let margin: u64 = 256 << 20;
        if extra.saturating_add(margin) > free as u64 {
            let held = self.nf as u64 + self.nb as u64;
            // With the slot's entry in the list of owned slots.
            let bpp = (per_slot + SLAB_BYTES_PER_SLOT + 4) as f64;
            return Err(CudaError::DoesNotFit {
                device,
                particles: cap as usize,
                need_gib: (self.memory.total() + extra) as f64 / 1073741824.0,
                free_gib: free as f64 / 1073741824.0,
                bytes_per_particle: bpp,
                max_particles: held + ((free as u64).saturating_sub(margin) as f64 / bpp) as u64,
            });
        }
        tracing::debug!(
            device,
            from = old_cap,
            to = cap,
            "SPH slab grows its fluid slots"
        );
        let n = self.nf as usize;
        let cap = cap as usize;
        // The stored rates exist in the parity mode only (0 bytes: no array).
        let rate = super::rates_bytes(r as u64) as usize / 4;
        // (array, name, bytes per slot, kept)
        let sl = self.slab();
        let arrays = [
            (self.s.pos, "state.pos", 24, true),
            (self.s.vel, "state.vel", 3 * r, true),
            (self.s.rho, "state.rho", r, true),
            (self.s.id, "state.id", 4, true),
            (self.half.pos, "half.pos", 24, true),
            (self.half.vel, "half.vel", 3 * r, true),
            (self.half.rho, "half.rho", r, true),
            (self.alt.pos, "reorder.pos", 24, false),
            (self.alt.vel, "reorder.vel", 3 * r, false),
            (self.alt.rho, "reorder.rho", r, false),
            (self.alt.id, "reorder.id", 4, false),
            (self.acc, "rates.acc", 3 * rate, false),
            (self.drho, "rates.drho", rate, false),
            (
                self.loc,
                "rates.local",
                super::local_bytes(r as u64) as usize,
                false,
            ),
            (
                self.kin,
                "rates.kinematics",
                super::local_bytes(r as u64) as usize,
                false,
            ),
            (self.g.cell, "grid.cell", 4, false),
            (self.g.rank, "grid.rank", 4, false),
            (self.g.perm, "grid.perm", 4, false),
            (sl.own, "slab.own", 1, true),
            (sl.keep, "slab.keep", 1, true),
        ];
        let mut new = Vec::with_capacity(arrays.len());
        for &(old, name, bps, kept) in &arrays {
            let to = self.alloc(name, bps * cap)?;
            if kept && n > 0 {
                crate::dem::cuda::driver::bind(&self.stream)?;
                // SAFETY: both arrays live on this context and hold at least n * bps bytes
                // (the old one had `old_cap` >= n slots); queued on the stream that uses both.
                unsafe {
                    cudarc::driver::result::memcpy_dtod_async(
                        to,
                        old,
                        n * bps,
                        self.stream.cu_stream(),
                    )
                }
                .map_err(|e| CudaError::driver("growing the fluid arrays", e))?;
            }
            new.push(to);
        }
        // By position in `arrays` (an empty array's address is 0, so addresses cannot name them).
        [self.s.pos, self.s.vel, self.s.rho, self.s.id] = [new[0], new[1], new[2], new[3]];
        [self.half.pos, self.half.vel, self.half.rho] = [new[4], new[5], new[6]];
        [self.alt.pos, self.alt.vel, self.alt.rho, self.alt.id] = [new[7], new[8], new[9], new[10]];
        [self.acc, self.drho, self.loc, self.kin] = [new[11], new[12], new[13], new[14]];
        [self.g.cell, self.g.rank, self.g.perm] = [new[15], new[16], new[17]];
        let sl = self.slab_mut();
        [sl.own, sl.keep] = [new[18], new[19]];
        // free() waits for the stream: the copies are done before the old arrays go.
        for (old, ..) in arrays {
            self.free(old);
        }
        // The list of owned slots is written at every evaluation: a new one, nothing kept.
        let act = SlotList::alloc(self, "slab.owned", cap as u32)?;
        let old = std::mem::replace(&mut self.slab_mut().act, act);
        old.free(self);
        self.cap = cap as u32;
        Ok(())
    }

    pub(super) fn send_ptr(&self, side: usize) -> u64 {
        self.slab().send[side]
    }
    pub(super) fn recv_ptr(&self, side: usize) -> u64 {
        self.slab().recv[side]
    }

    /// The ownership flags of the fluid and boundary slots (downloads them).
    pub(super) fn own_flags(&self) -> Result<(Vec<u8>, Vec<u8>), CudaError> {
        let sl = self.slab();
        let mut own = vec![0u8; self.nf as usize];
        self.get(sl.own, &mut own)?;
        let mut bown = vec![0u8; self.nb as usize];
        self.get(sl.bown, &mut bown)?;
        Ok((own, bown))
    }

    /// Particles this slab owns (fluid and boundary; downloads the flags).
    pub(super) fn owned_count(&self) -> Result<usize, CudaError> {
        let (own, bown) = self.own_flags()?;
        Ok(own.iter().chain(&bown).filter(|&&o| o != 0).count())
    }

    /// Queues the unpacking of the received records after the current slots (on the compute
    /// stream, or with `beside` on the early exchange's); the next sort keeps `kept` local
    /// slots and every received one.
    pub(super) fn queue_unpack(
        &mut self,
        got: [u32; 2],
        kept: u32,
        beside: bool,
    ) -> Result<(), CudaError> {
        let sl = self.slab();
        let stream = if beside { &sl.beside } else { &self.stream };
        let mut base = self.nf;
        for (side, &n) in got.iter().enumerate() {
            if n > 0 {
                let p = super::KernelParams { n, ..self.p };
                self.launch_on(
                    stream,
                    "sph_unpack",
                    blocks(n),
                    &[&p, &sl.recv[side], &base, &self.s, &self.half, &sl.keep],
                )?;
            }
            base += n;
        }
        self.slots = base;
        self.next_nf = kept + got[0] + got[1];
        Ok(())
    }

    /// Owned fluid particles per layer of the split axis (waits for the stream).
    pub(super) fn layer_counts(&self) -> Result<Vec<u32>, CudaError> {
        let sl = self.slab();
        let n = self.layers() as usize;
        self.zero(sl.layers, 4 * n)?;
        let p = self.p;
        self.launch(
            "sph_layer_count",
            blocks(self.nf),
            &[&p, &self.s.pos, &sl.own, &sl.layers],
        )?;
        let mut out = vec![0u32; n];
        self.get(sl.layers, as_bytes_mut(&mut out))?;
        Ok(out)
    }
}
