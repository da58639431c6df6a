//! Publication from the GPU: the state is packed into particle-id order (float32, the frame
//! layout) on the compute stream into device staging buffers, then copied to host memory on the
//! copy stream, overlapping the next steps. A frame may be made visible (committed) only once
//! its copy completed: [`CudaSim::publish_done`] says when.
//!
//! With symplectic Euler the kinematics of a frame (positions, velocities, angular velocities)
//! are not packed at once: the next step's collide loads exactly those values of every live
//! particle and writes them into the staging too (`dem_frame_put`), and the copy is queued
//! behind that step. On a GPU group every slab's collide writes its own particles into GPU 0's
//! staging (multi.rs). Contact counts (the solver's default frame carries them) are packed at
//! once on their own, since that collide overwrites them. A frame is done only once its step
//! ran; where the run waits for it with no step between (the first and last frame, a pause, a
//! requested frame), or something else would change the state first, `dem_pack` packs it from
//! the same state.
//!
//! The host destination must be page-locked for the copy to be asynchronous: pinned memory, or
//! a shared-memory segment registered once with [`CudaSim::register_host`] (then the copy goes
//! straight into the frame slot, no extra host copy).

use cudarc::driver::{CudaEvent, LaunchConfig, PushKernelArg};
use kernels::Kernel;

use super::params::{DemFrame, INTEGRATE_EULER};
use super::{CudaError, CudaSim};

/// Where a frame goes: host arrays of `particle_count` elements each (null: not wanted).
#[derive(Debug, Clone, Copy)]
pub struct FrameTarget {
    pub positions: *mut [f32; 3],
    pub velocities: *mut [f32; 3],
    pub angular_velocities: *mut [f32; 3],
    /// Contact force of the last step [N] (zeros unless `CudaOptions::store_forces`).
    pub forces: *mut [f32; 3],
    /// Contacts of the last step (zeros unless `CudaOptions::store_forces`).
    pub contact_counts: *mut u32,
}

impl FrameTarget {
    /// The five destinations as bytes, in staging order.
    pub(crate) fn pointers(&self) -> [*mut u8; 5] {
        [
            self.positions.cast(),
            self.velocities.cast(),
            self.angular_velocities.cast(),
            self.forces.cast(),
            self.contact_counts.cast(),
        ]
    }

    /// Positions only.
    pub fn positions(positions: *mut [f32; 3]) -> Self {
        FrameTarget {
            positions,
            velocities: std::ptr::null_mut(),
            angular_velocities: std::ptr::null_mut(),
            forces: std::ptr::null_mut(),
            contact_counts: std::ptr::null_mut(),
        }
    }
}

/// Staging arrays of a publication: name and bytes per particle, in `FrameTarget` order.
/// Allocated on the first publication; counted in `buffers::device_bytes_needed`.
const STAGING: [(&str, usize); 5] = [
    ("publish.pos", 12),
    ("publish.vel", 12),
    ("publish.omega", 12),
    ("publish.force", 12),
    ("publish.contacts", 4),
];

/// Device bytes per particle of the staging arrays.
pub(crate) const STAGING_BYTES_PER_PARTICLE: u64 = {
    let mut sum = 0;
    let mut i = 0;
    while i < STAGING.len() {
        sum += STAGING[i].1;
        i += 1;
    }
    sum as u64
};

/// A publication in flight: its step index and simulated time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PublishTicket {
    pub step: u64,
    pub time: f64,
}

/// A published frame not yet packed: the staging addresses of the wanted arrays
/// (`FrameTarget` order, 0: not wanted), the frame index of each id (0: the id), and where the
/// copy goes (host addresses, 0: not wanted; `n` elements each).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeferredFrame {
    dptr: [u64; 5],
    rank: u64,
    want: [usize; 5],
    n: usize,
}

impl DeferredFrame {
    /// A frame of `n` particles into the staging arrays `staging` (their wanted ones, with
    /// the destinations `want`) and frame indices `rank` (0: the id).
    pub(crate) fn new(
        staging: &[super::buffers::Buf],
        want: &[*mut u8; 5],
        rank: u64,
        n: usize,
    ) -> DeferredFrame {
        DeferredFrame {
            dptr: staging_pointers(staging, want),
            rank,
            want: want.map(|p| p as usize),
            n,
        }
    }

    /// The staging addresses, in `FrameTarget` order (0: not wanted).
    pub(crate) fn staging(&self) -> &[u64; 5] {
        &self.dptr
    }

    /// The staging addresses of the contact counts alone, if they are wanted: what `dem_pack`
    /// packs at once of a frame whose kinematics a collide writes (the collide computes the
    /// next step's counts, the frame holds the last step's).
    pub(crate) fn contacts_only(&self) -> Option<[u64; 5]> {
        (self.dptr[4] != 0).then(|| [0, 0, 0, 0, self.dptr[4]])
    }

    /// This frame once its contact counts were packed (`contacts_only`): a collide or a flush
    /// then writes only the kinematics, while the copy still carries the counts (the
    /// destinations are unchanged).
    pub(crate) fn without_contacts(mut self) -> DeferredFrame {
        self.dptr[4] = 0;
        self
    }

    /// The frame indices of the ids (0: the id itself).
    pub(crate) fn rank(&self) -> u64 {
        self.rank
    }

    /// The host destinations, in `FrameTarget` order (null: not wanted), and their length.
    pub(crate) fn destinations(&self) -> ([*mut u8; 5], usize) {
        (self.want.map(|a| a as *mut u8), self.n)
    }

    /// The kinematics a collide writes (`dem_frame_put`).
    pub(crate) fn frame(&self) -> DemFrame {
        DemFrame {
            pos: self.dptr[0],
            vel: self.dptr[1],
            omega: self.dptr[2],
            rank: self.rank,
        }
    }
}

#[derive(Default)]
pub(crate) struct PublishState {
    staging: Vec<super::buffers::Buf>,
    /// Recorded on the copy stream after the last copy.
    done: Option<CudaEvent>,
    /// The frame of `pending`, not yet packed (its copy not queued).
    deferred: Option<DeferredFrame>,
    pending: Option<PublishTicket>,
    /// A slab of a GPU group: the group's frame that this step's collide writes this slab's
    /// particles into (multi.rs), set for the step's launches only.
    pub(crate) slab_frame: Option<DemFrame>,
    /// Host time spent queuing publications [s] (the device-side pack is in the stage times).
    pub host_s: f64,
}

/// Host memory registered with the driver (page-locked) until dropped.
pub struct HostRegistration {
    ptr: *mut u8,
    _ctx: std::sync::Arc<cudarc::driver::CudaContext>,
}

// SAFETY: the registration is a plain host address plus the context that registered it;
// unregistering from another thread is allowed by the driver (the context is bound in Drop).
unsafe impl Send for HostRegistration {}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        let _ = self._ctx.bind_to_thread();
        // SAFETY: `ptr` was registered by cuMemHostRegister in register_host and not yet
        // unregistered; the context is kept alive by `_ctx`.
        unsafe {
            let _ = cudarc::driver::sys::cuMemHostUnregister(self.ptr as *mut std::ffi::c_void);
        }
    }
}

/// Page-locks `len` bytes at `ptr` for `ctx`'s device until the registration is dropped, so
/// that device-to-host copies into it are asynchronous (cuMemHostRegister).
///
/// # Safety
/// The range must stay mapped until the returned registration is dropped.
pub unsafe fn register_host(
    ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
    ptr: *mut u8,
    len: usize,
) -> Result<HostRegistration, CudaError> {
    ctx.bind_to_thread()
        .map_err(|e| CudaError::driver("binding the context", e))?;
    // SAFETY: the caller guarantees the range is mapped; flags 0 = plain registration.
    let r =
        unsafe { cudarc::driver::sys::cuMemHostRegister_v2(ptr as *mut std::ffi::c_void, len, 0) };
    r.result()
        .map_err(|e| CudaError::driver("registering host memory", e))?;
    Ok(HostRegistration {
        ptr,
        _ctx: ctx.clone(),
    })
}

/// Device addresses of the staging arrays whose destination is wanted (0 for the others).
pub(crate) fn staging_pointers(staging: &[super::buffers::Buf], want: &[*mut u8; 5]) -> [u64; 5] {
    std::array::from_fn(|i| if want[i].is_null() { 0 } else { staging[i].ptr })
}

/// Whether the kinematics of a frame of `want` may be packed by the next step's collide:
/// symplectic Euler (velocity Verlet's kick and drift move the particles before its collide),
/// positions wanted, and no forces (that collide overwrites them; contact counts, which it
/// overwrites too, are packed at once on their own: `DeferredFrame::contacts_only`). One GPU
/// and a GPU group (every slab's collide writes its own particles) both ask.
pub(crate) fn may_defer(defer_frames: bool, verlet: bool, want: &[*mut u8; 5]) -> bool {
    defer_frames && !verlet && !want[0].is_null() && want[3].is_null()
}

/// Allocates the staging arrays for `n` particles on `stream`.
pub(crate) fn alloc_staging(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    n: usize,
) -> Result<Vec<super::buffers::Buf>, CudaError> {
    let mut out = Vec::new();
    for (name, bytes) in STAGING {
        let slice = stream
            .alloc_zeros::<u8>(bytes * n.max(1))
            .map_err(|e| CudaError::driver(&format!("allocating {name}"), e))?;
        let ptr = {
            let (ptr, _s) = cudarc::driver::DevicePtr::device_ptr(&slice, stream);
            ptr
        };
        out.push(super::buffers::Buf { slice, ptr });
    }
    Ok(out)
}

/// Queues the copies of the wanted staging arrays (`n` elements each) to the host on
/// `copy_stream` and returns the event that marks their end.
///
/// # Safety
/// Each non-null `want[i]` points to `n` writable elements of the array's type that stay valid
/// and untouched until the event completed; the staging arrays hold `n` elements and are not
/// written again before it completed.
pub(crate) unsafe fn queue_frame_copy(
    staging: &[super::buffers::Buf],
    want: &[*mut u8; 5],
    n: usize,
    copy_stream: &cudarc::driver::CudaStream,
) -> Result<CudaEvent, CudaError> {
    super::driver::bind(copy_stream)?;
    for (i, &(_, bytes)) in STAGING.iter().enumerate() {
        if want[i].is_null() || n == 0 {
            continue;
        }
        // SAFETY: the caller's contract.
        let dst = unsafe { std::slice::from_raw_parts_mut(want[i], bytes * n) };
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(dst, staging[i].ptr, copy_stream.cu_stream())
        }
        .map_err(|e| CudaError::driver("queuing the frame copy", e))?;
    }
    copy_stream
        .record_event(None)
        .map_err(|e| CudaError::driver("recording an event", e))
}

impl CudaSim {
    /// Queues `dem_pack` of the live slots into the staging addresses `dptr` (0: skipped; they
    /// may be another GPU's, with peer access) and makes `copy_stream` wait for it.
    pub(crate) fn queue_pack(
        &self,
        dptr: &[u64; 5],
        copy_stream: &cudarc::driver::CudaStream,
        rank: Option<u64>,
    ) -> Result<(), CudaError> {
        let n = self.params.n;
        let rank = match rank {
            Some(r) => r,
            None => self.queue_ranks()?,
        };
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::Pack));
        let (p, mut cur) = (self.params, self.state.cur);
        if self.forces_stale {
            // One copy of the state after the energies' search: no forces until the next step
            // (written as zeros).
            cur.force = 0;
        }
        b.arg(&p)
            .arg(&cur)
            .arg(&dptr[0])
            .arg(&dptr[1])
            .arg(&dptr[2])
            .arg(&dptr[3])
            .arg(&dptr[4])
            .arg(&rank);
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(256).max(1), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: dem_pack(DemParams, ParticleArrays, float* x4, unsigned*, const unsigned*
        // rank): with removed particles `rank` (the scan of the alive flags, queued just above on
        // this stream) maps every live id below the staging size; each non-null
        // staging array holds an element for every id of the run (one GPU: ids 0..n; several:
        // GPU 0's arrays of the whole run, peer access enabled); dead slots are skipped and ids
        // are unique, so no element is written twice.
        unsafe { b.launch(cfg) }.map_err(|e| CudaError::driver("launching dem_pack", e))?;
        super::driver::wait_for(copy_stream, &self.stream)
    }

    /// Page-locks `len` bytes at `ptr` (e.g. a whole shared-memory segment, once) so that
    /// copies into it run asynchronously at full PCIe speed.
    ///
    /// # Safety
    /// `ptr..ptr + len` must be a live mapping that outlives the returned registration.
    pub unsafe fn register_host(
        &self,
        ptr: *mut u8,
        len: usize,
    ) -> Result<HostRegistration, CudaError> {
        // SAFETY: the caller's contract.
        unsafe { register_host(&self.ctx, ptr, len) }
    }

    fn ensure_staging(&mut self) -> Result<(), CudaError> {
        if !self.opts.frame_staging {
            // A slab's memory plan holds no staging: its group or rank publishes for it.
            return Err(CudaError::Unsupported(
                "publication from one slab of a GPU group or rank (its group publishes)".into(),
            ));
        }
        if self.publish.staging.is_empty() {
            // Room for every particle the run may hold (inflow adds particles later).
            let n = self.slots() as usize;
            self.publish.staging = alloc_staging(&self.stream, n)?;
            for (name, bytes) in STAGING {
                self.state
                    .memory
                    .arrays
                    .push((name.to_string(), (bytes * n) as u64));
            }
        }
        Ok(())
    }

    /// Starts publishing the current state into `target`: pack on the compute stream (by the
    /// next step's collide where it may: the module's doc), copy on the copy stream. Returns at
    /// once; poll [`CudaSim::publish_done`] between steps and commit the frame when it returns
    /// the ticket (a deferred frame is not done before a step ran; [`CudaSim::publish_wait`]
    /// packs it itself). A previous publication still in flight is waited for first (its
    /// staging buffers are reused).
    ///
    /// # Safety
    /// Each non-null pointer of `target` must point to `particle_count` writable `[f32; 3]`
    /// that stay valid and untouched by the host until `publish_done` returned this ticket (or
    /// [`CudaSim::publish_wait`] returned). Page-locked memory makes the copy asynchronous;
    /// pageable memory works but the copy then blocks.
    pub unsafe fn publish_async(
        &mut self,
        target: FrameTarget,
    ) -> Result<PublishTicket, CudaError> {
        let t0 = std::time::Instant::now();
        self.publish_wait()?;
        self.ensure_staging()?;
        let n = self.live_count() as usize;
        let want = target.pointers();
        // The frame indices of the live ids now (a deferred frame's step changes the alive
        // flags after its collide, not this scan's output).
        let rank = self.queue_ranks()?;
        let d = DeferredFrame::new(&self.publish.staging, &want, rank, n);
        self.publish.deferred = Some(d);
        if self.window.is_some() || !may_defer(self.opts.defer_frames, self.verlet(), &want) {
            self.flush_deferred_frame()?;
        } else if let Some(contacts) = d.contacts_only() {
            self.queue_pack(&contacts, &self.copy_stream, Some(rank))?;
            // Packed: a flush (pause, last frame) packs the kinematics alone.
            self.publish.deferred = Some(d.without_contacts());
        }
        let ticket = PublishTicket {
            step: self.step_index,
            time: self.time,
        };
        self.publish.pending = Some(ticket);
        self.publish.host_s += t0.elapsed().as_secs_f64();
        Ok(ticket)
    }

    /// The publication in flight, once its copy completed (then the frame may be committed);
    /// `None` while it is still copying or when nothing is in flight.
    pub fn publish_done(&mut self) -> Result<Option<PublishTicket>, CudaError> {
        if self.publish.deferred.is_some() {
            // Packed by the next step (or by publish_wait).
            return Ok(None);
        }
        let Some(ev) = &self.publish.done else {
            return Ok(None);
        };
        if ev
            .try_is_complete()
            .map_err(|e| CudaError::driver("querying the frame copy", e))?
        {
            self.publish.done = None;
            return Ok(self.publish.pending.take());
        }
        Ok(None)
    }

    /// Waits for the publication in flight, if any, and returns its ticket.
    pub fn publish_wait(&mut self) -> Result<Option<PublishTicket>, CudaError> {
        self.flush_deferred_frame()?;
        if let Some(ev) = self.publish.done.take() {
            ev.synchronize()
                .map_err(|e| CudaError::driver("waiting for the frame copy", e))?;
        }
        Ok(self.publish.pending.take())
    }

    /// The frame to pack in the collide of a step with integration `integrate`, if one is
    /// deferred and that step may pack it; a deferred frame it may not pack is packed now.
    pub(crate) fn take_deferred_frame(
        &mut self,
        integrate: u32,
    ) -> Result<Option<DeferredFrame>, CudaError> {
        // (A slab never defers a frame of its own: its group does, `slab_frame`.)
        if integrate == INTEGRATE_EULER {
            return Ok(self.publish.deferred.take());
        }
        self.flush_deferred_frame()?;
        Ok(None)
    }

    /// Packs a frame not yet packed now with `dem_pack` (nothing changed the state since it
    /// was published) and queues its copy.
    pub(crate) fn flush_deferred_frame(&mut self) -> Result<(), CudaError> {
        let Some(d) = self.publish.deferred.take() else {
            return Ok(());
        };
        self.queue_pack(&d.dptr, &self.copy_stream, Some(d.rank))?;
        self.queue_deferred_copy(d)
    }

    /// Queues the copy of a packed frame on the copy stream, which the caller has made wait
    /// for the pack (`queue_pack` does; after a collide, `driver::wait_for`). The compute
    /// stream does not wait for the copy (that would stall the steps for the whole PCIe
    /// transfer).
    pub(crate) fn queue_deferred_copy(&mut self, d: DeferredFrame) -> Result<(), CudaError> {
        let (want, n) = d.destinations();
        // SAFETY: `publish_async`'s caller keeps the destinations valid and untouched until the
        // frame is done, which it is not before this copy completed; the staging arrays hold
        // `n` elements each and are written again only by the next publication, queued after
        // the host saw this copy complete (publish_wait).
        let done = unsafe { queue_frame_copy(&self.publish.staging, &want, n, &self.copy_stream) }?;
        self.publish.done = Some(done);
        Ok(())
    }

    /// Whether a frame published from now on may be packed by the next step's collide
    /// ([`CudaOptions::defer_frames`](super::CudaOptions::defer_frames); the bench compares
    /// both in one run).
    pub fn set_defer_frames(&mut self, on: bool) {
        self.opts.defer_frames = on;
    }

    /// Whether the frame in flight waits for the next step's collide to pack it.
    pub fn publication_deferred(&self) -> bool {
        self.publish.deferred.is_some()
    }

    /// Host time spent queuing publications so far [s].
    pub fn publish_host_seconds(&self) -> f64 {
        self.publish.host_s
    }
}
