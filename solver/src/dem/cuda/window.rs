//! One GPU of several (issue 14): the slab it owns, the ghosts it keeps, and the exchange of
//! migrants and ghosts with its neighbours, device to device (`kernels/src/cuda/exchange.cu`).
//!
//! The state's slots hold the owned particles and the ghosts (read-only copies of the
//! neighbours' boundary layers). Before every neighbour search, each GPU classifies its owned
//! particles (stays, migrates to a neighbour, is in a boundary layer), the group reads the
//! counts (one small synchronous copy per GPU and step), the GPUs copy the records into their
//! neighbours' receive buffers (`cuMemcpyPeerAsync`: over NVLink between two GPUs, never through
//! host memory), and each appends what it received behind its live slots. The collide marks
//! the ghosts' slots dead, the migrants' die in the next sort's hash (`dem_hash_count`), which moves
//! dead slots behind the live ones, so the arrays never fill with them.
//!
//! Every owned particle sees the same neighbours, in the same (cell, id) order, as on one GPU:
//! the f64 mode is bit-identical to one GPU and to the CPU.
//!
//! With a Verlet skin (skin.rs) the exchange runs at the searches only. In between, slots,
//! ghosts and ownership stay as the search left them, and every step each GPU sends its
//! boundary layers' current kinematics to its neighbours, which write them into their ghost
//! slots (the refresh: lists of slots built at each search, `dem_refresh_*` in exchange.cu).

use cudarc::driver::{LaunchConfig, PushKernelArg};
use kernels::Kernel;

use super::buffers::{hist_entry_bytes, Buf};
use super::{CudaError, CudaSim};

/// `ExchangeParams` of exchange.cu.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ExchangeParams {
    pub mig: [u64; 2],
    pub halo: [u64; 2],
    pub counts: u64,
    pub cap_mig: u32,
    pub cap_halo: u32,
    pub n: u32,
    pub has_lo: u32,
    pub has_hi: u32,
    pub lo_lo: u32,
    pub hi_hi: u32,
    pub rec_mig: u32,
}
const _: () = assert!(std::mem::size_of::<ExchangeParams>() == 72);

/// `BandParams` of exchange.cu: the layers `dem_classify_band` looks at.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BandParams {
    pub layers: [u32; 6],
    pub n_layers: u32,
    pub per_layer: u32,
    pub o1: u32,
    pub o2: u32,
    pub sorted: u32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<BandParams>() == 48);
// SAFETY: #[repr(C)] integers only, the layout of exchange.cu's BandParams (size asserted).
unsafe impl cudarc::driver::DeviceRepr for BandParams {}

/// The band of a slab `[lo, hi)` along `axis` of a grid of `dims` cells: the distinct layers
/// lo - 1 ..= lo + 1 and hi - 2 ..= hi inside the grid, ascending. Every particle that leaves
/// the slab or becomes a ghost this step was in one of them at the last sort (it moves less
/// than a cell a step; a bound moves one layer a decision). `sorted`: leading slots in the last
/// sort's order.
pub(crate) fn band(dims: [u32; 3], axis: usize, lo: u32, hi: u32, sorted: u32) -> BandParams {
    let (o1, o2) = other_axes(axis);
    let mut layers: Vec<u32> = (lo as i64 - 1..=lo as i64 + 1)
        .chain(hi as i64 - 2..=hi as i64)
        .filter(|&l| l >= 0 && l < dims[axis] as i64)
        .map(|l| l as u32)
        .collect();
    layers.sort_unstable();
    layers.dedup();
    let mut b = BandParams {
        n_layers: layers.len() as u32,
        per_layer: dims[o1] * dims[o2],
        o1: o1 as u32,
        o2: o2 as u32,
        sorted,
        ..Default::default()
    };
    b.layers[..layers.len()].copy_from_slice(&layers);
    b
}
// SAFETY: #[repr(C)] integers only, the layout of exchange.cu's ExchangeParams (size asserted).
unsafe impl cudarc::driver::DeviceRepr for ExchangeParams {}

/// `RefreshLayers` of exchange.cu: the cell layers of a GPU's four ghost-refresh lists (send to
/// the lower and the upper neighbour, ghosts from the lower and the upper; `u32::MAX`: no
/// neighbour there).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RefreshLayers {
    pub layer: [u32; 4],
    pub per_layer: u32,
    pub o1: u32,
    pub o2: u32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<RefreshLayers>() == 32);
// SAFETY: #[repr(C)] integers only, the layout of exchange.cu's RefreshLayers (size asserted).
unsafe impl cudarc::driver::DeviceRepr for RefreshLayers {}

/// The layers of the refresh lists of slab `[lo, hi)` along `axis` (`has_lo`, `has_hi`: a
/// neighbour on that side): its first and last layer (sent), and the layers just outside (its
/// ghosts).
pub(crate) fn refresh_layers(
    dims: [u32; 3],
    axis: usize,
    lo: u32,
    hi: u32,
    has_lo: bool,
    has_hi: bool,
) -> RefreshLayers {
    let (o1, o2) = other_axes(axis);
    let none = u32::MAX;
    RefreshLayers {
        layer: [
            if has_lo { lo } else { none },
            if has_hi { hi - 1 } else { none },
            if has_lo { lo - 1 } else { none },
            if has_hi { hi } else { none },
        ],
        per_layer: dims[o1] * dims[o2],
        o1: o1 as u32,
        o2: o2 as u32,
        pad: 0,
    }
}

fn other_axes(axis: usize) -> (usize, usize) {
    match axis {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    }
}

/// Bytes of a migrant and of a ghost record (exchange.cu's layout) for `real` bytes per float
/// and `hist` history entries per particle (0 without friction).
pub(crate) fn record_bytes(real: usize, hist: usize) -> (usize, usize) {
    let words = |reals: usize| 24 + reals * real;
    let hist_off = (words(12) + 16).div_ceil(16) * 16;
    let mig = hist_off + hist * hist_entry_bytes(real);
    let ghost = (words(6) + 8).div_ceil(8) * 8;
    (mig, ghost)
}

/// What one GPU's classification found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExchangeCounts {
    /// Migrants to the lower and the upper neighbour.
    pub mig: [u32; 2],
    /// Ghost records for the lower and the upper neighbour.
    pub halo: [u32; 2],
    /// Particles that moved past a whole neighbour slab in one step.
    pub skipped: u32,
    /// Migrants that stay as ghosts (they landed in the neighbour's boundary layer).
    pub kept: u32,
}

/// Receive side of a GPU: what its neighbours sent (lower neighbour first).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Received {
    pub mig: [u32; 2],
    pub halo: [u32; 2],
}

/// The slab of one GPU and its exchange buffers.
pub(crate) struct Window {
    /// Live slots after the last sort: owned particles, then (sorted among them) ghosts.
    pub live: u32,
    /// Owned particles.
    pub owned: u32,
    /// Slots of every per-particle array.
    pub capacity: u32,
    /// Lower neighbour's first layer, own slab, upper neighbour's end (`None`: no neighbour).
    pub lo_lo: Option<u32>,
    pub hi_hi: Option<u32>,
    pub cap_mig: u32,
    pub cap_halo: u32,
    pub recv_cap_mig: u32,
    pub recv_cap_halo: u32,
    pub rec_mig: usize,
    pub rec_halo: usize,
    /// Send and receive buffers: [lower, upper] of each.
    pub send_mig: Vec<Buf>,
    pub send_halo: Vec<Buf>,
    pub recv_mig: Vec<Buf>,
    pub recv_halo: Vec<Buf>,
    pub counts: Buf,
    /// The counts as the host reads them.
    pub counts_out: MappedWords,
    pub layer_counts: Buf,
    /// The layer counts as the host reads them (balancing, every `BALANCE_INTERVAL` steps).
    pub layer_counts_out: MappedWords,
    /// Bytes of the exchange buffers (memory report).
    pub bytes: u64,
    /// Leading slots in the order of the last sort (grid start lists them by cell); 0 before
    /// the first sort, when `dem_classify` looks at every slot.
    pub sorted: u32,
    /// With a Verlet skin: the lists of the ghost refresh between searches.
    pub refresh: Option<Refresh>,
    /// Entries the refresh lists may need after this step's exchange (migrants in, ghosts in and
    /// out, kept ghosts): what `queue_refresh_lists` sizes the lists for.
    pub refresh_bound: u32,
}

/// The ghost refresh between a skin's searches (exchange.cu): which slots each boundary layer's
/// records come from and go to, in the order both sides share.
pub(crate) struct Refresh {
    /// Cells of the four lists' layers, their counts scanned (`4 per_layer + 1` each), and the
    /// scan's block sums.
    pub cnt: Buf,
    pub off: Buf,
    pub levels: Vec<(u64, u64, u32)>,
    pub _level_bufs: Vec<Buf>,
    /// Slots of the four lists, one after the other, and each one's id at the search.
    pub list: Buf,
    pub ids: Buf,
    pub cap: u32,
    /// Lengths of the four lists and their sum, then the records that named another particle
    /// than their slot (device; read at the end of every step).
    pub status: Buf,
    /// The lengths as last read.
    pub totals: [u32; 4],
    pub layers: RefreshLayers,
    /// The largest move and the status words as the host reads them.
    pub status_out: MappedWords,
    /// The stream a group's refresh runs on beside the interior collide (multi.rs).
    pub stream: std::sync::Arc<cudarc::driver::CudaStream>,
}

/// What the end of a step read from one GPU with a skin.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SkinStatus {
    /// Largest move since the last search [m].
    pub moved: f32,
    /// Lengths of the refresh lists (send lower, send upper, ghosts of the lower, of the upper).
    pub totals: [u32; 4],
    /// Entries of all four lists, and the records whose id was not their slot's.
    pub entries: u32,
    pub mismatched: u32,
}

fn blocks(n: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(threads).max(1), 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A zeroed device buffer of `bytes` (at least 16) on `stream`.
pub(crate) fn alloc(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    bytes: usize,
    what: &str,
) -> Result<Buf, CudaError> {
    let slice = stream
        .alloc_zeros::<u8>(bytes.max(16))
        .map_err(|e| CudaError::driver(&format!("allocating {what} ({bytes} bytes)"), e))?;
    let ptr = {
        let (ptr, _sync) = cudarc::driver::DevicePtr::device_ptr(&slice, stream);
        ptr
    };
    Ok(Buf { slice, ptr })
}

/// A few words of page-locked host memory that kernels write directly (mapped into the
/// device): a step's small results (exchange counts, the skin's status) reach the host without
/// a DMA copy. A copy would queue behind a frame's copy to the host on the copy engine: with
/// frames at 6.5 a second, two slabs at 50 M particles lost 19.5 % of their steps to
/// publication, most of it in such waits (session 19, `bench/results/multi_gpu.md`).
pub(crate) struct MappedWords {
    host: cudarc::driver::PinnedHostSlice<u32>,
    ptr: *const u32,
    dev: u64,
}

// SAFETY: the words are written by this sim's kernels and read by the thread that drives the
// sim, after synchronising its stream.
unsafe impl Send for MappedWords {}

impl MappedWords {
    pub(crate) fn new(
        ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
        n: usize,
    ) -> Result<Self, CudaError> {
        use cudarc::driver::sys;
        let what = "allocating mapped host memory";
        // SAFETY: page-locked host memory; every word is written by dem_words_out before it
        // is read (`read` follows a launch and a synchronisation).
        let mut host = unsafe {
            ctx.alloc_pinned_with_flags::<u32>(
                n,
                sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE,
            )
        }
        .map_err(|e| CudaError::driver(what, e))?;
        let ptr = host.as_mut_ptr().map_err(|e| CudaError::driver(what, e))?;
        let mut dev: sys::CUdeviceptr = 0;
        ctx.bind_to_thread()
            .map_err(|e| CudaError::driver(what, e))?;
        // SAFETY: `ptr` is this context's live allocation made with DEVICEMAP.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, ptr.cast(), 0) }
            .result()
            .map_err(|e| CudaError::driver(what, e))?;
        Ok(MappedWords { host, ptr, dev })
    }

    /// Queues copying `n` words at device address `src` into words `at..at + n`.
    pub(crate) fn queue(
        &self,
        sim: &CudaSim,
        src: u64,
        n: u32,
        at: usize,
    ) -> Result<(), CudaError> {
        debug_assert!(at + n as usize <= self.host.len());
        let out = self.dev + 4 * at as u64;
        let mut b = sim
            .stream
            .launch_builder(sim.module.function(Kernel::WordsOut));
        b.arg(&src).arg(&n).arg(&out);
        // SAFETY: dem_words_out(const unsigned*, unsigned, unsigned*): reads `n` words at `src`
        // (a live buffer of the caller holding them), writes words at..at + n of this mapped
        // allocation (checked above).
        unsafe { b.launch(blocks(n, 32)) }
            .map_err(|e| CudaError::driver("launching dem_words_out", e))?;
        Ok(())
    }

    /// The words, once the stream that wrote them was synchronised.
    pub(crate) fn read(&self) -> Vec<u32> {
        (0..self.host.len())
            // SAFETY: in bounds of the live allocation; volatile, since the device wrote it.
            .map(|i| unsafe { std::ptr::read_volatile(self.ptr.add(i)) })
            .collect()
    }
}

/// Device bytes of a window's exchange buffers and refresh lists.
fn window_bytes(w: &Window) -> u64 {
    let exchange = 2
        * ((w.cap_mig + w.recv_cap_mig) as u64 * w.rec_mig as u64
            + (w.cap_halo + w.recv_cap_halo) as u64 * w.rec_halo as u64);
    let refresh = w.refresh.as_ref().map_or(0, |r| {
        let levels: u64 = r.levels.iter().map(|l| 8 * l.2 as u64).sum();
        (r.cnt.slice.len() + r.off.slice.len()) as u64 + 8 * r.cap as u64 + levels + 32
    });
    exchange + refresh
}

/// Checks that every GPU (`status`, in slab order; `devices` name them) holds as many ghosts
/// of each neighbour's boundary layer as that neighbour lists, and that no refresh record named
/// another particle than its slot (exchange.cu: the two lists must name the same particles).
pub(crate) fn check_ghost_lists(
    status: &[SkinStatus],
    devices: &[usize],
    step: u64,
) -> Result<(), CudaError> {
    let g = status.len();
    for h in 0..g {
        for side in 0..2 {
            let Some(src) = super::multi::neighbour(h, side, g) else {
                continue;
            };
            let held = status[h].totals[2 + side];
            let sent = status[src].totals[1 - side];
            if held != sent || status[h].mismatched > 0 {
                return Err(CudaError::GhostLists {
                    step,
                    gpu: devices[h],
                    side: ["lower", "upper"][side],
                    held,
                    sent,
                    mismatched: status[h].mismatched,
                });
            }
        }
    }
    Ok(())
}

impl SkinStatus {
    /// As words (the largest move's bits first), for an all-gather between ranks.
    pub(crate) fn words(&self) -> [u32; 7] {
        let t = self.totals;
        [
            self.moved.to_bits(),
            t[0],
            t[1],
            t[2],
            t[3],
            self.entries,
            self.mismatched,
        ]
    }

    pub(crate) fn from_words(w: [u32; 7]) -> SkinStatus {
        SkinStatus {
            moved: f32::from_bits(w[0]),
            totals: [w[1], w[2], w[3], w[4]],
            entries: w[5],
            mismatched: w[6],
        }
    }
}

impl CudaSim {
    /// Makes this sim one GPU of several: it owns layers `bounds[index]..bounds[index + 1]`
    /// along `axis`; its arrays have `capacity` slots (set at upload). Exchange buffers start
    /// with room for `records` records per direction and grow when a step needs more.
    pub(crate) fn attach_window(
        &mut self,
        axis: usize,
        bounds: &[u32],
        index: usize,
        capacity: usize,
        records: u32,
    ) -> Result<(), CudaError> {
        if self.history_pairs() {
            // A pair's spring lies with one particle: a halo would have to carry the other
            // side's rows too. Not built.
            return Err(CudaError::Unsupported(
                "the pairs-once contact history (`pairs`) runs on one GPU only; a GPU of a \
                 group or an MPI rank keeps its history `double` or `in-place`"
                    .into(),
            ));
        }
        if self.cfg.single_copy {
            // The exchange packs and unpacks through the scratch copy, which one copy lacks.
            return Err(CudaError::Unsupported(
                "one copy of the particle state (`--copies 1`) runs on one GPU only; a GPU of \
                 a group or an MPI rank keeps two"
                    .into(),
            ));
        }
        let real = self.state.real_size;
        let hist = if self.state.cur.hist_count != 0 {
            self.params.hist_cap as usize
        } else {
            0
        };
        let (rec_mig, rec_halo) = record_bytes(real, hist);
        let dims = self.params.dims;
        let layer_counts = alloc(&self.stream, 4 * dims[axis] as usize, "layer counts")?;
        let counts = alloc(&self.stream, 4 * 8, "exchange counts")?;
        let w = Window {
            live: self.params.n,
            owned: self.params.n,
            capacity: capacity as u32,
            lo_lo: None,
            hi_hi: None,
            cap_mig: 0,
            cap_halo: 0,
            recv_cap_mig: 0,
            recv_cap_halo: 0,
            rec_mig,
            rec_halo,
            send_mig: Vec::new(),
            send_halo: Vec::new(),
            recv_mig: Vec::new(),
            recv_halo: Vec::new(),
            counts,
            counts_out: MappedWords::new(&self.ctx, 8)?,
            layer_counts,
            layer_counts_out: MappedWords::new(&self.ctx, dims[axis] as usize)?,
            bytes: 0,
            sorted: 0,
            refresh: None,
            refresh_bound: 0,
        };
        self.params.split_axis = axis as u32;
        self.window = Some(w);
        self.set_slab(bounds, index);
        if self.skin.is_some() {
            self.alloc_refresh()?;
        }
        let r = records.max(256);
        self.grow_exchange(r, r, false)?;
        self.grow_exchange(r, r, true)?;
        Ok(())
    }

    /// This GPU's slab from the plan's bounds (after load balancing moved them).
    pub(crate) fn set_slab(&mut self, bounds: &[u32], index: usize) {
        self.params.slab_lo = bounds[index];
        self.params.slab_hi = bounds[index + 1];
        if let Some(w) = self.window.as_mut() {
            w.lo_lo = (index > 0).then(|| bounds[index - 1]);
            w.hi_hi = (index + 2 < bounds.len()).then(|| bounds[index + 2]);
        }
    }

    /// Reallocates the send (`recv` false) or receive buffers to hold at least `mig` migrant
    /// and `halo` ghost records per direction (with a quarter of headroom). Between steps only,
    /// rarely: the first steps, a bed that forms, a bound that moves.
    fn grow_exchange(&mut self, mig: u32, halo: u32, recv: bool) -> Result<(), CudaError> {
        let stream = self.stream.clone();
        let w = self.window.as_mut().expect("a window");
        let (cap_mig, cap_halo, bufs_mig, bufs_halo) = if recv {
            (
                &mut w.recv_cap_mig,
                &mut w.recv_cap_halo,
                &mut w.recv_mig,
                &mut w.recv_halo,
            )
        } else {
            (
                &mut w.cap_mig,
                &mut w.cap_halo,
                &mut w.send_mig,
                &mut w.send_halo,
            )
        };
        let grow = |need: u32, have: u32| {
            if need <= have {
                have
            } else {
                need + need / 4 + 64
            }
        };
        for (need, cap, bufs, rec, what) in [
            (mig, cap_mig, bufs_mig, w.rec_mig, "migrant records"),
            (halo, cap_halo, bufs_halo, w.rec_halo, "ghost records"),
        ] {
            let new = grow(need, *cap);
            if new == *cap {
                continue;
            }
            // Work queued on the stream may still read the old buffers.
            stream
                .synchronize()
                .map_err(|e| CudaError::driver("synchronising before growing buffers", e))?;
            let b = new as usize * rec;
            *bufs = vec![alloc(&stream, b, what)?, alloc(&stream, b, what)?];
            *cap = new;
        }
        w.bytes = window_bytes(w);
        Ok(())
    }

    /// Queues the classification of the owned particles into the send buffers, and the copy
    /// of its counts to the host (read by [`CudaSim::read_counts`]). Reads the state only.
    pub(crate) fn queue_classify(&mut self) -> Result<(), CudaError> {
        let w = self.window.as_ref().expect("a window");
        let x = ExchangeParams {
            mig: [w.send_mig[0].ptr, w.send_mig[1].ptr],
            halo: [w.send_halo[0].ptr, w.send_halo[1].ptr],
            counts: w.counts.ptr,
            cap_mig: w.cap_mig,
            cap_halo: w.cap_halo,
            n: self.params.n,
            has_lo: w.lo_lo.is_some() as u32,
            has_hi: w.hi_hi.is_some() as u32,
            lo_lo: w.lo_lo.unwrap_or(0),
            hi_hi: w.hi_hi.unwrap_or(0),
            rec_mig: w.rec_mig as u32,
        };
        crate::dem::cuda::driver::bind(&self.stream)?;
        // SAFETY: memset of the 32-byte counts buffer this window owns, on the sim's stream.
        unsafe {
            cudarc::driver::result::memset_d8_async(w.counts.ptr, 0, 32, self.stream.cu_stream())
        }
        .map_err(|e| CudaError::driver("clearing the exchange counts", e))?;
        let (p, cur) = (self.params, self.state.cur);
        if w.sorted > 0 {
            // Only the layers next to the bounds, and what was appended since the last sort.
            let axis = p.split_axis as usize;
            let bp = band(p.dims, axis, p.slab_lo, p.slab_hi, w.sorted);
            let items = bp.n_layers * bp.per_layer + (p.n - w.sorted);
            let start = self.state.grid.start;
            let mut b = self
                .stream
                .launch_builder(self.module.function(Kernel::ClassifyBand));
            b.arg(&p).arg(&cur).arg(&x).arg(&start).arg(&bp).arg(&items);
            let cfg = LaunchConfig {
                grid_dim: (items.div_ceil(kernels::BAND_ITEMS).max(1), 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: dem_classify_band(DemParams, ParticleArrays, ExchangeParams, const
            // unsigned* start, BandParams, unsigned): start (cells + 1 entries) lists the cells
            // of the last sort, whose slots 0..sorted <= n are in that order; reads those slots
            // of the band's cells and the slots sorted..n; writes as dem_classify does.
            unsafe { b.launch(cfg) }
                .map_err(|e| CudaError::driver("launching dem_classify_band", e))?;
            return Ok(());
        }
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::Classify));
        b.arg(&p).arg(&cur).arg(&x);
        // Each block classifies CLASSIFY_CHUNK slots (one atomic per kind and block).
        let cfg = LaunchConfig {
            grid_dim: (p.n.div_ceil(kernels::CLASSIFY_CHUNK).max(1), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: dem_classify(DemParams, ParticleArrays, ExchangeParams): reads slots 0..n of the
        // state; writes at most cap records of rec bytes into each send buffer (allocated with
        // that size) and the 6 counters.
        unsafe { b.launch(cfg) }.map_err(|e| CudaError::driver("launching dem_classify", e))?;
        Ok(())
    }

    /// Waits for the classification and returns its counts.
    pub(crate) fn read_counts(&mut self) -> Result<ExchangeCounts, CudaError> {
        let w = self.window.as_ref().expect("a window");
        w.counts_out.queue(self, w.counts.ptr, 8, 0)?;
        self.stream
            .synchronize()
            .map_err(|e| CudaError::driver("reading the exchange counts", e))?;
        let c = w.counts_out.read();
        Ok(ExchangeCounts {
            mig: [c[0], c[1]],
            halo: [c[2], c[3]],
            skipped: c[4],
            kept: c[5],
        })
    }

    /// Grows the send buffers if `c` did not fit; then the caller classifies again.
    pub(crate) fn fits(&mut self, c: &ExchangeCounts) -> Result<bool, CudaError> {
        let w = self.window.as_ref().expect("a window");
        let mig = c.mig[0].max(c.mig[1]);
        let halo = c.halo[0].max(c.halo[1]);
        if mig <= w.cap_mig && halo <= w.cap_halo {
            return Ok(true);
        }
        self.grow_exchange(mig, halo, false)?;
        Ok(false)
    }

    /// Makes room for `r` in the receive buffers (before the neighbours copy into them).
    pub(crate) fn make_room(&mut self, r: &Received) -> Result<(), CudaError> {
        let mig = r.mig[0].max(r.mig[1]);
        let halo = r.halo[0].max(r.halo[1]);
        self.grow_exchange(mig, halo, true)
    }

    /// Device address of send buffer `side` (0 lower, 1 upper) of migrants or ghosts.
    pub(crate) fn send_ptr(&self, ghosts: bool, side: usize) -> u64 {
        let w = self.window.as_ref().expect("a window");
        if ghosts {
            w.send_halo[side].ptr
        } else {
            w.send_mig[side].ptr
        }
    }

    /// Device address of receive buffer `side` (0: from the lower neighbour, 1: the upper).
    pub(crate) fn recv_ptr(&self, ghosts: bool, side: usize) -> u64 {
        let w = self.window.as_ref().expect("a window");
        if ghosts {
            w.recv_halo[side].ptr
        } else {
            w.recv_mig[side].ptr
        }
    }

    /// Record sizes (migrant, ghost) in bytes.
    pub(crate) fn record_sizes(&self) -> (usize, usize) {
        let w = self.window.as_ref().expect("a window");
        (w.rec_mig, w.rec_halo)
    }

    /// Queues unpacking what the neighbours sent (already in the receive buffers, copied on
    /// this stream) behind the live slots, after which the state holds `n` slots to sort.
    /// `sent` are this GPU's own counts (its emigrants leave), `removed` the particles its
    /// outflow stage removed since the last exchange.
    pub(crate) fn queue_unpack(
        &mut self,
        got: &Received,
        sent: &ExchangeCounts,
        removed: u32,
    ) -> Result<(), CudaError> {
        let w = self.window.as_ref().expect("a window");
        let incoming = got.mig[0] + got.mig[1] + got.halo[0] + got.halo[1];
        let n_new = self.params.n as u64 + incoming as u64;
        if n_new > w.capacity as u64 {
            return Err(CudaError::WindowFull {
                device: self.opts.device,
                need: n_new,
                capacity: w.capacity as u64,
            });
        }
        let mut base = self.params.n;
        let (rec_mig, rec_halo) = (w.rec_mig as u32, w.rec_halo as u32);
        let parts = [
            (w.recv_mig[0].ptr, got.mig[0], 1u32, rec_mig),
            (w.recv_mig[1].ptr, got.mig[1], 1, rec_mig),
            (w.recv_halo[0].ptr, got.halo[0], 0, rec_halo),
            (w.recv_halo[1].ptr, got.halo[1], 0, rec_halo),
        ];
        let (p, cur) = (self.params, self.state.cur);
        for (ptr, count, full, rec) in parts {
            if count == 0 {
                continue;
            }
            let mut b = self
                .stream
                .launch_builder(self.module.function(Kernel::Unpack));
            b.arg(&p)
                .arg(&cur)
                .arg(&ptr)
                .arg(&count)
                .arg(&base)
                .arg(&full)
                .arg(&rec)
                .arg(&0u64);
            // SAFETY: dem_unpack(DemParams, ParticleArrays, const char*, unsigned x4, unsigned* alive =
            // null): reads
            // `count` records of `rec` bytes (the receive buffer holds them: make_room), writes
            // slots base..base + count < capacity (checked above) and their history rows.
            unsafe { b.launch(blocks(count, 128)) }
                .map_err(|e| CudaError::driver("launching dem_unpack", e))?;
            base += count;
        }
        let w = self.window.as_mut().expect("a window");
        // `removed`: owned particles the outflow stage marked dead since the last exchange.
        w.owned = w.owned - removed - sent.mig[0] - sent.mig[1] + got.mig[0] + got.mig[1];
        w.live = w.owned + got.halo[0] + got.halo[1] + sent.kept;
        // The refresh lists hold this GPU's boundary layers after the sort: its ghost records
        // (particles that stay) and the arrivals that land there, and its ghosts.
        w.refresh_bound = sent.halo[0]
            + sent.halo[1]
            + got.mig[0]
            + got.mig[1]
            + got.halo[0]
            + got.halo[1]
            + sent.kept;
        self.params.n = base;
        Ok(())
    }

    /// Allocates the ghost refresh of a skin (attach_window): the layer counts of the four
    /// lists, their scan, the lists (grown at searches) and the status words.
    fn alloc_refresh(&mut self) -> Result<(), CudaError> {
        let stream = self.stream.clone();
        let (o1, o2) = other_axes(self.params.split_axis as usize);
        let per_layer = (self.params.dims[o1] * self.params.dims[o2]) as usize;
        let n_scan = 4 * per_layer + 1;
        let cnt = alloc(&stream, 4 * n_scan, "ghost refresh counts")?;
        let off = alloc(&stream, 4 * n_scan, "ghost refresh offsets")?;
        let mut levels = Vec::new();
        let mut level_bufs = Vec::new();
        for t in super::step::scan_level_sizes(n_scan) {
            let sums = alloc(&stream, 4 * t, "ghost refresh scan")?;
            let scanned = alloc(&stream, 4 * t, "ghost refresh scan")?;
            levels.push((sums.ptr, scanned.ptr, t as u32));
            level_bufs.push(sums);
            level_bufs.push(scanned);
        }
        let cap = 4096u32;
        let r = Refresh {
            cnt,
            off,
            levels,
            _level_bufs: level_bufs,
            list: alloc(&stream, 4 * cap as usize, "ghost refresh list")?,
            ids: alloc(&stream, 4 * cap as usize, "ghost refresh ids")?,
            cap,
            status: alloc(&stream, 32, "ghost refresh status")?,
            totals: [0; 4],
            layers: RefreshLayers::default(),
            status_out: MappedWords::new(&self.ctx, 9)?,
            // A stream of its own only where the refresh runs beside the collide (the slab's
            // module has the two passes); PARTICLE_SHM_REFRESH_STREAM=compute (experiments):
            // the compute stream, so that the refresh and both passes run one after the other
            // (what the split costs alone).
            stream: if !self.cfg.passes
                || std::env::var("PARTICLE_SHM_REFRESH_STREAM").is_ok_and(|v| v == "compute")
            {
                self.stream.clone()
            } else {
                // The ghost refresh's small kernels beside the interior collide, whose blocks
                // would otherwise all be scheduled before theirs (measured on two slabs of one
                // H100: the refresh then ended after the interior collide).
                super::driver::high_priority_stream(&self.ctx, "the ghost refresh's stream")?
            },
        };
        let w = self.window.as_mut().expect("a window");
        w.refresh = Some(r);
        w.bytes = window_bytes(w);
        Ok(())
    }

    /// Queues the ghost refresh lists of the search this step ran (after its sort and gather;
    /// exchange.cu): the slots of the boundary layers, in slot order, on this GPU's side.
    pub(crate) fn queue_refresh_lists(&mut self) -> Result<(), CudaError> {
        let p = self.params;
        let stream = self.stream.clone();
        let slot_ids = self.state.tmp.id;
        let start = self.state.grid.start;
        let w = self.window.as_mut().expect("a window");
        let layers = refresh_layers(
            p.dims,
            p.split_axis as usize,
            p.slab_lo,
            p.slab_hi,
            w.lo_lo.is_some(),
            w.hi_hi.is_some(),
        );
        let bound = w.refresh_bound;
        let r = w.refresh.as_mut().expect("refresh lists (a skin)");
        if bound > r.cap {
            // Refresh kernels queued before may still read the old lists.
            stream
                .synchronize()
                .map_err(|e| CudaError::driver("synchronising before growing buffers", e))?;
            let cap = bound + bound / 4 + 1024;
            r.list = alloc(&stream, 4 * cap as usize, "ghost refresh list")?;
            r.ids = alloc(&stream, 4 * cap as usize, "ghost refresh ids")?;
            r.cap = cap;
        }
        r.layers = layers;
        let (cnt, off, list, ids, cap, status) = (
            r.cnt.ptr,
            r.off.ptr,
            r.list.ptr,
            r.ids.ptr,
            r.cap,
            r.status.ptr,
        );
        let levels = r.levels.clone();
        w.bytes = window_bytes(w);
        crate::dem::cuda::driver::bind(&stream)?;
        // SAFETY: memset of the 32-byte status buffer this window owns, on the sim's stream.
        unsafe { cudarc::driver::result::memset_d8_async(status, 0, 32, stream.cu_stream()) }
            .map_err(|e| CudaError::driver("clearing the ghost refresh status", e))?;
        let cells = 4 * layers.per_layer;
        let mut b = stream.launch_builder(self.module.function(Kernel::RefreshCount));
        b.arg(&p).arg(&start).arg(&layers).arg(&cnt);
        // SAFETY: dem_refresh_count(DemParams, const unsigned* start, RefreshLayers, unsigned*):
        // reads start (cells + 1 entries) at the cells of layers inside the grid; writes
        // cnt[0..=4 per_layer] (allocated with 4 per_layer + 1 entries: alloc_refresh).
        unsafe { b.launch(blocks(cells + 1, 256)) }
            .map_err(|e| CudaError::driver("launching dem_refresh_count", e))?;
        self.scan_with(&levels, cnt, off, cells + 1, 0)?;
        let mut b = stream.launch_builder(self.module.function(Kernel::RefreshFill));
        b.arg(&p)
            .arg(&start)
            .arg(&layers)
            .arg(&off)
            .arg(&slot_ids)
            .arg(&list)
            .arg(&ids)
            .arg(&cap)
            .arg(&status);
        // SAFETY: dem_refresh_fill(DemParams, const unsigned* start, RefreshLayers, const
        // unsigned* off, const unsigned* slot_ids, unsigned* list, unsigned* ids, unsigned cap,
        // unsigned* totals): reads start and off as above and slot_ids at slots of the grid
        // (< n); writes at most `cap` entries of list and ids (allocated with cap) and 5 status
        // words.
        unsafe { b.launch(blocks(cells.max(1), 256)) }
            .map_err(|e| CudaError::driver("launching dem_refresh_fill", e))?;
        Ok(())
    }

    /// Waits for this GPU's step and reads what the skin needs from it: the largest move since
    /// the last search, the refresh lists' lengths and mismatched records.
    pub(crate) fn read_skin_status(&mut self) -> Result<SkinStatus, CudaError> {
        let dmax = self.state.grid.dmax;
        let w = self.window.as_ref().expect("a window");
        let r = w.refresh.as_ref().expect("refresh lists (a skin)");
        r.status_out.queue(self, dmax, 1, 0)?;
        r.status_out.queue(self, r.status.ptr, 8, 1)?;
        self.stream
            .synchronize()
            .map_err(|e| CudaError::driver("reading the skin's status", e))?;
        let words = r.status_out.read();
        let w = self.window.as_mut().expect("a window");
        let r = w.refresh.as_mut().expect("refresh lists (a skin)");
        r.totals = [words[1], words[2], words[3], words[4]];
        Ok(SkinStatus {
            moved: f32::from_bits(words[0]),
            totals: r.totals,
            entries: words[5],
            mismatched: words[6],
        })
    }

    /// After a search: grows the exchange buffers for the refresh lists' records, and (rarely:
    /// the bound was short) rebuilds lists that did not fit. Returns the status to use.
    pub(crate) fn ensure_refresh_room(&mut self, st: SkinStatus) -> Result<SkinStatus, CudaError> {
        let send = st.totals[0].max(st.totals[1]);
        let recv = st.totals[2].max(st.totals[3]);
        self.grow_exchange(0, send, false)?;
        self.grow_exchange(0, recv, true)?;
        let w = self.window.as_mut().expect("a window");
        let cap = w.refresh.as_ref().map_or(0, |r| r.cap);
        if st.entries <= cap {
            return Ok(st);
        }
        w.refresh_bound = st.entries;
        self.queue_refresh_lists()?;
        self.read_skin_status()
    }

    /// Queues the ghost records of this GPU's boundary layers into its send buffers (a step
    /// between searches), on `stream`: the sim's own, or the refresh's beside the collide.
    pub(crate) fn queue_refresh_pack(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> Result<(), CudaError> {
        let w = self.window.as_ref().expect("a window");
        let r = w.refresh.as_ref().expect("refresh lists (a skin)");
        let (p, cur) = (self.params, self.state.cur);
        for side in 0..2 {
            let count = r.totals[side];
            if count == 0 {
                continue;
            }
            let first = side as u32 * r.layers.per_layer;
            let recs = w.send_halo[side].ptr;
            let mut b = stream.launch_builder(self.module.function(Kernel::RefreshPack));
            b.arg(&p)
                .arg(&cur)
                .arg(&r.list.ptr)
                .arg(&r.off.ptr)
                .arg(&first)
                .arg(&count)
                .arg(&recs);
            // SAFETY: dem_refresh_pack(DemParams, ParticleArrays, const unsigned* list, const
            // unsigned* off, unsigned, unsigned count, char*): list `side` holds `count` live
            // slots (read back after the search that built it); writes `count` ghost records
            // into the send buffer, which holds cap_halo >= count (ensure_refresh_room).
            unsafe { b.launch(blocks(count, 128)) }
                .map_err(|e| CudaError::driver("launching dem_refresh_pack", e))?;
        }
        Ok(())
    }

    /// Queues writing the ghost records the neighbours sent (already in the receive buffers,
    /// copied on `stream` or ordered before it) into this GPU's ghost slots.
    pub(crate) fn queue_refresh_unpack(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> Result<(), CudaError> {
        let w = self.window.as_ref().expect("a window");
        let r = w.refresh.as_ref().expect("refresh lists (a skin)");
        let (p, cur) = (self.params, self.state.cur);
        let mismatch = r.status.ptr + 20;
        for side in 0..2 {
            let count = r.totals[2 + side];
            if count == 0 {
                continue;
            }
            let first = (2 + side as u32) * r.layers.per_layer;
            let recs = w.recv_halo[side].ptr;
            let mut b = stream.launch_builder(self.module.function(Kernel::RefreshUnpack));
            b.arg(&p)
                .arg(&cur)
                .arg(&recs)
                .arg(&r.list.ptr)
                .arg(&r.off.ptr)
                .arg(&first)
                .arg(&count)
                .arg(&r.ids.ptr)
                .arg(&mismatch);
            // SAFETY: dem_refresh_unpack(DemParams, ParticleArrays, const char*, const unsigned*
            // list, const unsigned* off, unsigned, unsigned count, const unsigned* ids,
            // unsigned*): reads `count` records (the receive buffer holds recv_cap_halo >=
            // count: ensure_refresh_room) and list entries; writes the listed slots (< n) and
            // one status word.
            unsafe { b.launch(blocks(count, 128)) }
                .map_err(|e| CudaError::driver("launching dem_refresh_unpack", e))?;
        }
        Ok(())
    }

    /// The stream the ghost refresh runs on beside the collide (a window with a skin).
    pub(crate) fn refresh_stream(&self) -> std::sync::Arc<cudarc::driver::CudaStream> {
        self.window
            .as_ref()
            .and_then(|w| w.refresh.as_ref())
            .expect("refresh lists (a skin)")
            .stream
            .clone()
    }

    /// Lengths of the refresh lists as last read (send lower, send upper, ghosts of the lower,
    /// of the upper).
    pub(crate) fn refresh_totals(&self) -> [u32; 4] {
        self.window
            .as_ref()
            .and_then(|w| w.refresh.as_ref())
            .map_or([0; 4], |r| r.totals)
    }

    /// Owned particles per cell layer along the split axis (synchronises; written into
    /// page-locked memory by a kernel, not copied behind a frame on the copy engine).
    pub(crate) fn layer_counts(&mut self) -> Result<Vec<u32>, CudaError> {
        let axis = self.params.split_axis as usize;
        let layers = self.params.dims[axis] as usize;
        let w = self.window.as_ref().expect("a window");
        let ptr = w.layer_counts.ptr;
        crate::dem::cuda::driver::bind(&self.stream)?;
        // SAFETY: memset of the layer-count buffer (layers u32) this window owns.
        unsafe {
            cudarc::driver::result::memset_d8_async(ptr, 0, 4 * layers, self.stream.cu_stream())
        }
        .map_err(|e| CudaError::driver("clearing the layer counts", e))?;
        let (p, cur) = (self.params, self.state.cur);
        let n = p.n;
        let mut b = self
            .stream
            .launch_builder(self.module.function(Kernel::LayerCounts));
        b.arg(&p).arg(&cur).arg(&n).arg(&ptr);
        // SAFETY: dem_layer_counts(DemParams, ParticleArrays, unsigned, unsigned*): reads slots
        // 0..n, adds into `layers` counters (every layer index is clamped below dims[axis]).
        unsafe { b.launch(blocks(n, 256)) }
            .map_err(|e| CudaError::driver("launching dem_layer_counts", e))?;
        w.layer_counts_out.queue(self, ptr, layers as u32, 0)?;
        self.stream
            .synchronize()
            .map_err(|e| CudaError::driver("reading the layer counts", e))?;
        Ok(w.layer_counts_out.read())
    }

    /// Writes the owned particles into `s` at `index(id)` (synchronises).
    pub(crate) fn download_owned(
        &self,
        s: &mut crate::dem::state::SimState,
        index: &dyn Fn(u32) -> usize,
    ) -> Result<(), CudaError> {
        super::buffers::download_into(&self.stream, &self.state, &self.params, s, index)
    }

    /// Writes this GPU's owned particles' positions into `out` at `index(id)`.
    pub(crate) fn download_owned_positions(
        &self,
        out: &mut [[f64; 3]],
        index: &dyn Fn(u32) -> usize,
    ) -> Result<(), CudaError> {
        super::buffers::download_positions_into(&self.stream, &self.state, &self.params, out, index)
    }

    /// The window, if this sim is one GPU of several.
    pub(crate) fn window(&self) -> Option<&Window> {
        self.window.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The band holds the layers around both bounds, once each, inside the grid.
    #[test]
    fn band_layers_around_the_bounds() {
        let b = band([10, 4, 5], 0, 3, 8, 100);
        assert_eq!(&b.layers[..b.n_layers as usize], &[2, 3, 4, 6, 7, 8]);
        assert_eq!((b.per_layer, b.o1, b.o2, b.sorted), (20, 1, 2, 100));
        // A first slab of three layers along z: no layer below 0, the two sides overlap.
        let b = band([4, 4, 10], 2, 0, 3, 7);
        assert_eq!(&b.layers[..b.n_layers as usize], &[0, 1, 2, 3]);
        assert_eq!((b.per_layer, b.o1, b.o2), (16, 0, 1));
        // The last slab: no layer past the grid.
        let b = band([6, 4, 4], 0, 3, 6, 1);
        assert_eq!(&b.layers[..b.n_layers as usize], &[2, 3, 4, 5]);
    }
}
