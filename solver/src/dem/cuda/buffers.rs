//! Device buffers: allocation (after checking they fit), upload, download, and the memory report.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, PinnedHostSlice};
use kernels::ModuleConfig;

use super::params::{DemDiag, DemParams, GridArrays, ParticleArrays, SpeciesProps};
use super::{CudaError, CudaOptions};
use crate::core::grid::Grid;
use crate::core::vec3::V3;
use crate::dem::physics;
use crate::dem::state::{
    is_particle_partner, owner_key, owns_pair, owns_pair_keyed, HistEntry, SimState, StepContext,
    HISTORY_CAP, PARTNER_NONE,
};

/// GPU memory in use, by array.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryReport {
    /// (array, bytes) in allocation order.
    pub arrays: Vec<(String, u64)>,
    pub particles: u64,
    pub cells: u64,
}

impl MemoryReport {
    pub fn total(&self) -> u64 {
        self.arrays.iter().map(|a| a.1).sum()
    }
    pub fn bytes_per_particle(&self) -> f64 {
        self.total() as f64 / self.particles.max(1) as f64
    }
    /// One line per array with its share per particle.
    pub fn breakdown(&self) -> String {
        let n = self.particles.max(1) as f64;
        let mut s = String::new();
        for (name, b) in &self.arrays {
            s.push_str(&format!(
                "{name}: {:.1} B/particle ({:.1} MiB)\n",
                *b as f64 / n,
                *b as f64 / 1048576.0
            ));
        }
        s.push_str(&format!(
            "total: {:.1} B/particle ({:.2} GiB)\n",
            self.bytes_per_particle(),
            self.total() as f64 / 1073741824.0
        ));
        s
    }
}

/// One device array: its allocation and its address.
pub(crate) struct Buf {
    pub slice: CudaSlice<u8>,
    pub ptr: u64,
}

/// Everything the backend keeps on the device.
pub(crate) struct DeviceState {
    /// Arrays by name; the structs below hold their addresses.
    pub bufs: Vec<(String, Buf)>,
    /// The state (slot k of the sorted order).
    pub cur: ParticleArrays,
    /// Scratch copy the gather writes and the collide kernel reads.
    pub tmp: ParticleArrays,
    pub grid: GridArrays,
    pub cells: u32,
    /// Block-sum buffers of the multi-level scan, level by level (sums, scanned sums).
    pub scan_levels: Vec<(u64, u64, u32)>,
    pub diag: u64,
    pub memory: MemoryReport,
    pub real_size: usize,
    /// The history rows hold each particle pair's spring once (`HistoryMode::Pairs`): uploads
    /// keep the owner's side of every pair, downloads rebuild both sides.
    pub hist_pairs: bool,
    /// One copy of the state: the force buffer (address, bytes) that a search reorders the
    /// state through (`tmp` is then unallocated, all zeros).
    pub scratch: (u64, usize),
    /// Spill rows behind pairs-once rows (`CudaOptions::hist_spill`), if any.
    pub spill: Option<Spill>,
}

/// Spill rows of a pairs-once history (`DEM_HIST_SPILL`, contact.cu): a row that needs more than
/// `hist_cap` entries keeps its first `hist_cap - 1` inline and the rest in a spill row of
/// `width` entries, whose index its entry `hist_cap - 1` holds. Two buffers of `rows` spill rows
/// alternate: each step's `dem_springs` takes the rows afresh in the other buffer (no free list:
/// what a row gave up is gone at the next step), counting them in `ctl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spill {
    /// The two buffers of `rows * width` device `HistEntry`s.
    pub bufs: [u64; 2],
    /// Eight u32 ([`SPILL_CTL_WORDS`]): rows asked for in buffer 0 and in buffer 1 by the last
    /// step that wrote each, the most rows any step asked for (what the buffers are grown
    /// from), the rows the next step will spill (`dem_spill_count`, before a run's first step),
    /// and the springs `dem_adopt` handed over since the start (owner keys; wraps), then unused.
    pub ctl: u64,
    pub rows: u32,
    pub width: u32,
    /// The buffer the rows' links point into now (0 or 1).
    pub cur: usize,
}

/// Spill rows the buffers start with for `slots` particle slots: `start` if set
/// (`CudaOptions::spill_start`), else one per [`SPILL_START_SHARE`] slots and 4,096 at least
/// (about 0.8 MB: a small case may spill every particle at once); they grow from what the run
/// takes ([`spill_rows_after`]).
pub(crate) fn spill_start_rows(slots: usize, start: u32) -> usize {
    if start > 0 {
        start as usize
    } else {
        (slots / SPILL_START_SHARE).max(4096)
    }
}

/// Slots per spill row at the start ([`spill_start_rows`]): 3 % of the particles may spill
/// before the first step's count (`CudaSim::size_spill`) or a check grows them.
pub(crate) const SPILL_START_SHARE: usize = 32;

/// The spill rows to grow to when a step took `taken` of `rows` (None: enough): more than
/// three quarters taken grows them to twice what was taken, so that the contacts that form
/// until the next check (`step::SPILL_CHECK_EVERY` steps) find rows.
pub(crate) fn spill_rows_after(rows: u32, taken: u32) -> Option<u32> {
    let want = (u64::from(taken) * 2).min(u64::from(u32::MAX)) as u32;
    (u64::from(taken) * 4 > u64::from(rows) * 3 && want > rows).then_some(want)
}

/// Entries a history row holds: `hist_cap`, or with spill rows of `width` entries `hist_cap - 1`
/// inline and a spill row (`row_capacity` in contact.cu).
pub(crate) fn row_capacity(hist_cap: u32, width: u32) -> u32 {
    if width > 0 {
        hist_cap - 1 + width
    } else {
        hist_cap
    }
}

/// The spill fields of the kernels' parameters for `spill` (all zero without).
pub(crate) fn apply_spill(p: &mut DemParams, spill: Option<&Spill>) {
    match spill {
        Some(s) => {
            p.spill_cur = s.bufs[s.cur];
            p.spill_next = s.bufs[1 - s.cur];
            p.spill_sel = 1 - s.cur as u32;
            p.spill_ctl = s.ctl;
            p.spill_rows = s.rows;
            p.spill_width = s.width;
        }
        None => {
            (p.spill_cur, p.spill_next, p.spill_ctl) = (0, 0, 0);
            (p.spill_rows, p.spill_width, p.spill_sel) = (0, 0, 0);
        }
    }
}

/// Allocates two spill buffers of `rows` rows of `width` entries and their counters (zero).
fn alloc_spill(
    stream: &Arc<CudaStream>,
    st: &mut DeviceState,
    rows: usize,
    width: usize,
) -> Result<Spill, CudaError> {
    let bytes = rows * width * hist_entry_bytes(st.real_size);
    Ok(Spill {
        bufs: [
            alloc(stream, st, "hist_spill.0", bytes)?,
            alloc(stream, st, "hist_spill.1", bytes)?,
        ],
        ctl: alloc(stream, st, "hist_spill.ctl", 4 * SPILL_CTL_WORDS)?,
        rows: rows as u32,
        width: width as u32,
        cur: 0,
    })
}

/// Frees the allocation that starts at `ptr` (and its line in the memory report).
fn free(st: &mut DeviceState, ptr: u64) {
    if let Some(i) = st.bufs.iter().position(|b| b.1.ptr == ptr) {
        let (name, _) = st.bufs.remove(i);
        if let Some(j) = st.memory.arrays.iter().position(|a| a.0 == name) {
            st.memory.arrays.remove(j);
        }
    }
}

/// Replaces the spill buffers by buffers of `rows` rows (more than now), the current one's rows
/// copied over (their indices, which the rows' links hold, unchanged). The stream must be idle
/// (nothing queued reads the old buffers).
pub(crate) fn grow_spill(
    stream: &Arc<CudaStream>,
    st: &mut DeviceState,
    rows: u32,
) -> Result<(), CudaError> {
    let old = st.spill.expect("spill rows to grow");
    let eb = hist_entry_bytes(st.real_size);
    let old_bytes = old.rows as usize * old.width as usize * eb;
    let mut new = alloc_spill(stream, st, rows as usize, old.width as usize)?;
    new.cur = old.cur;
    crate::dem::cuda::driver::bind(stream)?;
    // SAFETY: both ranges lie inside live allocations of this state (the new buffer is larger),
    // copied on its stream; the counters keep their values (rows taken are still below them).
    unsafe {
        cudarc::driver::result::memcpy_dtod_async(
            new.bufs[new.cur],
            old.bufs[old.cur],
            old_bytes,
            stream.cu_stream(),
        )
    }
    .map_err(|e| CudaError::driver("copying the spill rows", e))?;
    // SAFETY: as above, the counters (SPILL_CTL_WORDS words each).
    unsafe {
        cudarc::driver::result::memcpy_dtod_async(
            new.ctl,
            old.ctl,
            4 * SPILL_CTL_WORDS,
            stream.cu_stream(),
        )
    }
    .map_err(|e| CudaError::driver("copying the spill counters", e))?;
    stream
        .synchronize()
        .map_err(|e| CudaError::driver("growing the spill rows", e))?;
    for ptr in old.bufs.into_iter().chain([old.ctl]) {
        free(st, ptr);
    }
    st.spill = Some(new);
    Ok(())
}

/// Words of the spill counters ([`Spill::ctl`]).
pub(crate) const SPILL_CTL_WORDS: usize = 8;

/// The spill counters (rows asked for in buffers 0 and 1, the most any step asked for, the rows
/// `dem_spill_count` found will spill, the springs handed over); synchronises.
fn read_spill_ctl(stream: &Arc<CudaStream>, st: &DeviceState) -> Result<[u32; 5], CudaError> {
    let s = st.spill.expect("spill rows");
    stream
        .synchronize()
        .map_err(|e| CudaError::driver("synchronising", e))?;
    let v: Vec<u32> = download(stream, st, s.ctl, 5)?;
    Ok([v[0], v[1], v[2], v[3], v[4]])
}

/// Splits one particle's entries (`row`, at most `cap - 1 + width` with spill rows) into its
/// inline entries, left in `row`, and with more than `cap` of them its spill row: entries from
/// `cap - 1` on appended to `spill` (`width` entries in `real` precision, zeros after the last),
/// and entry `cap - 1` of `row` the link, the spill row's index `*links` (then counted).
fn place_row(
    row: &mut Vec<HistEntry>,
    cap: usize,
    width: usize,
    spill: &mut Vec<u8>,
    links: &mut u32,
    real: usize,
) {
    if width == 0 || row.len() <= cap {
        return;
    }
    let eb = hist_entry_bytes(real);
    let at = spill.len();
    spill.resize(at + width * eb, 0);
    for (x, h) in row[cap - 1..].iter().enumerate() {
        write_hist_entry(
            &mut spill[at + x * eb..at + (x + 1) * eb],
            h.partner,
            &h.xi,
            real,
        );
    }
    row.truncate(cap - 1);
    row.push(HistEntry {
        partner: *links,
        xi: [0.0; 3],
    });
    *links += 1;
}

/// Bytes of one device `HistEntry` (params.cuh): three `real` springs and a u32 partner, 16 B
/// with float, 32 B with double (padded).
pub(crate) fn hist_entry_bytes(real: usize) -> usize {
    if real == 8 {
        32
    } else {
        16
    }
}

/// Packs entries (partner, spring) into device `HistEntry` bytes in `real` precision.
#[cfg(test)]
fn pack_hist(partner: &[u32], xi: &[f64], real: usize) -> Vec<u8> {
    let eb = hist_entry_bytes(real);
    let mut out = vec![0u8; partner.len() * eb];
    for (e, &q) in partner.iter().enumerate() {
        let x = [xi[3 * e], xi[3 * e + 1], xi[3 * e + 2]];
        write_hist_entry(&mut out[e * eb..(e + 1) * eb], q, &x, real);
    }
    out
}

/// Reads one device `HistEntry` (the inverse of [`write_hist_entry`]).
fn read_hist_entry(e: &[u8], real: usize) -> HistEntry {
    let word = |b: &[u8]| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
    let x = |c: usize| {
        if real == 8 {
            let mut w = [0u8; 8];
            w.copy_from_slice(&e[8 * c..8 * c + 8]);
            f64::from_ne_bytes(w)
        } else {
            f32::from_bits(word(&e[4 * c..])) as f64
        }
    };
    HistEntry {
        partner: word(&e[3 * real..]),
        xi: [x(0), x(1), x(2)],
    }
}

/// Sizes of the per-particle arrays of one configuration.
struct Layout {
    real: usize,
    rotation: bool,
    friction: bool,
    multi_species: bool,
    cap: usize,
    /// One history buffer updated in place (shared by both copies) instead of one per copy.
    in_place: bool,
    /// One copy of the state ([`kernels::ModuleConfig::single_copy`]) and a force buffer.
    single_copy: bool,
    /// Owner keys ([`kernels::ModuleConfig::owner_keys`]): a key per slot instead of its row
    /// (every slot's row is its slot).
    owner_keys: bool,
}

impl Layout {
    /// Bytes of one copy of the particle state (two exist: the state and the gather's scratch
    /// copy).
    fn state_arrays(&self, n: usize) -> Vec<(&'static str, usize)> {
        let mut v = vec![("pos", 24 * n), ("vel", 3 * self.real * n), ("id", 4 * n)];
        if self.rotation {
            v.push(("omega", 3 * self.real * n));
        }
        if self.multi_species {
            v.push(("species", 4 * n));
        }
        if self.friction {
            v.push((if self.owner_keys { "key" } else { "row" }, 4 * n));
            if !self.in_place {
                v.extend(self.history(n));
            }
        }
        v
    }

    /// Bytes of the one contact history that both copies share when it is updated in place
    /// (contact.cu); none otherwise (each copy has its own: [`Self::state_arrays`]).
    fn history_arrays(&self, n: usize) -> Vec<(&'static str, usize)> {
        if !(self.friction && self.in_place) {
            return Vec::new();
        }
        self.history(n)
    }

    /// Copies of the state: two (the gather's scratch copy), or one with a force buffer.
    fn copies(&self) -> usize {
        if self.single_copy {
            1
        } else {
            2
        }
    }

    /// Bytes per slot of one copy's force buffer: forces and torques (`real`), which a search
    /// also uses to reorder the state one array at a time, so at least a position's 24 B.
    fn force_buffer(&self) -> usize {
        if self.single_copy {
            (6 * self.real).max(24)
        } else {
            0
        }
    }

    fn history(&self, n: usize) -> Vec<(&'static str, usize)> {
        vec![
            ("hist_count", 4 * n),
            ("hist", hist_entry_bytes(self.real) * self.cap * n),
        ]
    }
}

/// The GPU grid: the run's global grid ([`StepContext::grid`]), linearised with z slowest (one
/// GPU is one undecomposed worker).
pub fn gpu_grid(sc: &StepContext) -> Grid {
    sc.grid(2)
}

/// [`gpu_grid`] with cells widened by a Verlet skin of `skin` [m] (`skin.rs`; 0: the same grid).
pub(crate) fn gpu_grid_skin(sc: &StepContext, skin: f64) -> Grid {
    if skin > 0.0 {
        sc.grid_with_cell(2, 2.0 * sc.max_radius() + skin)
    } else {
        gpu_grid(sc)
    }
}

fn alloc(
    stream: &Arc<CudaStream>,
    state: &mut DeviceState,
    name: &str,
    bytes: usize,
) -> Result<u64, CudaError> {
    if bytes == 0 {
        return Ok(0);
    }
    let slice = stream
        .alloc_zeros::<u8>(bytes)
        .map_err(|e| CudaError::driver(&format!("allocating {name} ({bytes} bytes)"), e))?;
    let ptr = {
        let (ptr, _sync) = slice.device_ptr(stream);
        ptr
    };
    state.bufs.push((name.to_string(), Buf { slice, ptr }));
    state.memory.arrays.push((name.to_string(), bytes as u64));
    Ok(ptr)
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: only used with f64, f32, u32 and #[repr(C)] structs of those (no padding, every
    // bit pattern valid as bytes); the length covers exactly the slice's memory.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn upload_bytes(
    stream: &Arc<CudaStream>,
    state: &mut DeviceState,
    ptr: u64,
    data: &[u8],
) -> Result<(), CudaError> {
    upload_bytes_at(stream, state, ptr, 0, data)
}

/// Uploads `data` into the buffer that starts at `ptr`, at byte `offset`.
fn upload_bytes_at(
    stream: &Arc<CudaStream>,
    state: &mut DeviceState,
    ptr: u64,
    offset: usize,
    data: &[u8],
) -> Result<(), CudaError> {
    // `ptr` may lie inside an allocation (one copy's torques follow its forces).
    let (buf, at) = state
        .bufs
        .iter_mut()
        .find(|b| ptr >= b.1.ptr && ptr < b.1.ptr + b.1.slice.len() as u64)
        .map(|b| (&mut b.1.slice, (ptr - b.1.ptr) as usize))
        .expect("pointer of an allocated buffer");
    let offset = offset + at;
    stream
        .memcpy_htod(data, &mut buf.slice_mut(offset..offset + data.len()))
        .map_err(|e| CudaError::driver("uploading", e))
}

/// Writes one device `HistEntry` (spring in `real` precision, partner, padding in f64).
fn write_hist_entry(out: &mut [u8], partner: u32, xi: &[f64; 3], real: usize) {
    let r = real.min(8);
    for (k, x) in xi.iter().enumerate() {
        if r == 8 {
            out[8 * k..8 * k + 8].copy_from_slice(&x.to_ne_bytes());
        } else {
            out[4 * k..4 * k + 4].copy_from_slice(&(*x as f32).to_ne_bytes());
        }
    }
    let at = 3 * r;
    out[at..at + 4].copy_from_slice(&partner.to_ne_bytes());
}

fn real_bytes(v: &[f64], real: usize) -> Vec<u8> {
    if real == 8 {
        as_bytes(v).to_vec()
    } else {
        let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        as_bytes(&f).to_vec()
    }
}

/// The kernels index a contact history's entries with 32 bits (`hist_at` in contact.cu, the
/// exchange's records): `capacity` slots of `hist_cap` entries must stay below 2^32 entries, or
/// the index would wrap onto other rows. Reached on a 141 GB H200 in place (390 B a particle)
/// above 268 M particles with 16 entries.
pub(crate) fn history_fits_its_index(capacity: usize, hist_cap: u32) -> Result<(), CudaError> {
    let entries = capacity as u64 * u64::from(hist_cap);
    if entries > u64::from(u32::MAX) {
        return Err(CudaError::Unsupported(format!(
            "{capacity} particle slots of {hist_cap} contact history entries make {entries} \
             entries, more than the kernels' 32-bit history index holds ({}); run fewer \
             particles per GPU, or fewer entries per particle (solver --gpu-memory compact:N, dem-gpu-bench --hist-cap)",
            u32::MAX
        )));
    }
    Ok(())
}

/// Device bytes a case needs: two copies of the particle state (state and gather scratch), with
/// a contact history each or one shared (in place), the stored forces and contact counts, the neighbour grid (3 x u32 per particle, 2 x u32 per
/// cell), the scan levels, the publication staging buffers (`publish::STAGING_BYTES_PER_PARTICLE`,
/// where `CudaOptions::frame_staging`),
/// the mesh filter's hit masks (16 B per particle with meshes) and the mesh triangles (9 x f64
/// and a u32 mesh index each; the bins are covered by the margin of [`check_device_memory`]),
/// plus 1 MiB of tables. Saturating: an absurd case needs `u64::MAX` bytes, which fits nowhere.
pub(crate) fn device_bytes_needed(
    sc: &StepContext,
    n: usize,
    cfg: ModuleConfig,
    opts: &CudaOptions,
) -> u64 {
    let lay = Layout {
        real: if cfg.double { 8 } else { 4 },
        rotation: cfg.rotation || cfg.friction,
        friction: cfg.friction,
        multi_species: sc.species_radius.len() > 1,
        cap: opts.hist_cap as usize,
        in_place: cfg.hist_in_place,
        single_copy: cfg.single_copy,
        owner_keys: cfg.owner_keys,
    };
    let n64 = n as u64;
    // Spill rows (pairs once): two buffers of the rows they start with, and their counters.
    let spill = if cfg.friction && cfg.hist_pairs && cfg.hist_spill {
        (2 * spill_start_rows(n, opts.spill_start) as u64)
            .saturating_mul(u64::from(opts.hist_spill) * hist_entry_bytes(lay.real) as u64)
            .saturating_add(16)
    } else {
        0
    };
    let real = lay.real as u64;
    // Per particle, so that no product of n can overflow before the final saturating one.
    let per_state: u64 = lay.state_arrays(1).iter().map(|a| a.1 as u64).sum();
    let per_history: u64 = lay.history_arrays(1).iter().map(|a| a.1 as u64).sum();
    let verlet = sc.integrator == crate::case::Integrator::VelocityVerlet;
    let mut outputs = 0;
    if opts.store_forces {
        outputs += 4;
    }
    if lay.single_copy {
        // The force buffer holds the stored forces too.
        outputs += lay.force_buffer() as u64;
    } else {
        if opts.store_forces || verlet {
            outputs += 3 * real;
        }
        if verlet && lay.rotation {
            outputs += 3 * real;
        }
    }
    // Mesh cases: dem_mesh_filter's two hit masks per slot (`GpuMeshes::ensure_hit_mask`).
    let mesh_masks = if sc.meshes.is_empty() { 0 } else { 16 };
    // A skin's cell and path per slot, and its Verlet list (entries and count).
    let skin = super::skin::skin_width(sc, opts.skin, cfg.double);
    let skin_arrays = match (skin > 0.0, opts.neighbour_list) {
        (false, _) => 0,
        (true, false) => 8,
        (true, true) => 12 + 4 * super::skin::LIST_CAP as u64,
    };
    let staging = if opts.frame_staging {
        super::publish::STAGING_BYTES_PER_PARTICLE
    } else {
        0
    };
    // The search's cells, ranks and permutation (one copy: in the force buffer and the skin's
    // paths, or the permutation alone without a skin).
    let search = match (lay.single_copy, skin > 0.0) {
        (false, _) => 12,
        (true, true) => 0,
        (true, false) => 4,
    };
    let per_particle = per_state
        .saturating_mul(lay.copies() as u64)
        .saturating_add(per_history)
        .saturating_add(outputs + search + skin_arrays + mesh_masks + staging);
    let cells = gpu_grid_skin(sc, skin).num_cells() as u64 + 1;
    let scan: u64 = {
        let (mut m, mut t) = (cells, 0u64);
        while m > 1 {
            m = m.div_ceil(kernels::SCAN_TILE as u64);
            t += 8 * m;
        }
        t
    };
    let triangles: u64 = sc.meshes.iter().map(|m| m.triangles.len() as u64).sum();
    n64.saturating_mul(per_particle)
        .saturating_add(8 * cells + scan + triangles * (72 + 4) + (1 << 20))
        .saturating_add(spill)
}

/// Refuses a case that does not fit in the device's free memory (cuMemGetInfo) with a margin of
/// 256 MiB (module, bins, driver), before anything is compiled or allocated.
pub(crate) fn check_device_memory(
    ctx: &Arc<CudaContext>,
    sc: &StepContext,
    n: usize,
    cfg: ModuleConfig,
    opts: &CudaOptions,
) -> Result<(), CudaError> {
    let need = device_bytes_needed(sc, n, cfg, opts);
    let (free, _total) = ctx
        .mem_get_info()
        .map_err(|e| CudaError::driver("querying free memory", e))?;
    let margin: u64 = 256 << 20;
    let free = free as u64;
    if need.saturating_add(margin) <= free {
        return Ok(());
    }
    let bpp = need as f64 / n.max(1) as f64;
    Err(CudaError::DoesNotFit {
        device: opts.device,
        particles: n,
        need_gib: need as f64 / 1073741824.0,
        free_gib: free as f64 / 1073741824.0,
        bytes_per_particle: bpp,
        max_particles: (free.saturating_sub(margin) as f64 / bpp) as u64,
    })
}

/// Allocates everything and uploads `state` (slot = index in the state; one GPU: ids 0..n).
/// The caller has checked with [`check_device_memory`] that it fits. Arrays have `capacity`
/// slots (at least the state's particles): room for the ghosts and migrants of one GPU of
/// several (`window.rs`); the history stride is the capacity.
pub(crate) fn upload(
    stream: &Arc<CudaStream>,
    sc: &StepContext,
    state: &SimState,
    cfg: ModuleConfig,
    opts: &CudaOptions,
    capacity: usize,
) -> Result<(DeviceState, DemParams), CudaError> {
    let live = state.pos.len();
    assert!(capacity >= live, "capacity below the particle count");
    if cfg.friction {
        history_fits_its_index(capacity, opts.hist_cap)?;
    }
    // Every per-particle array has `capacity` slots; `n` below is that.
    let n = capacity;
    let table = &sc.table;
    let lay = Layout {
        real: if cfg.double { 8 } else { 4 },
        rotation: cfg.rotation || cfg.friction,
        friction: cfg.friction,
        multi_species: sc.species_radius.len() > 1,
        cap: opts.hist_cap as usize,
        in_place: cfg.hist_in_place,
        single_copy: cfg.single_copy,
        owner_keys: cfg.owner_keys,
    };
    let skin = super::skin::skin_width(sc, opts.skin, cfg.double);
    let grid = gpu_grid_skin(sc, skin);
    let cells = grid.num_cells();
    // Scan levels: tiles of 1024 elements, block sums scanned recursively.
    let level_sizes = super::step::scan_level_sizes(cells + 1);
    let verlet = sc.integrator == crate::case::Integrator::VelocityVerlet;

    let mut st = DeviceState {
        bufs: Vec::new(),
        cur: ParticleArrays::default(),
        tmp: ParticleArrays::default(),
        grid: GridArrays::default(),
        cells: cells as u32,
        scan_levels: Vec::new(),
        diag: 0,
        memory: MemoryReport {
            arrays: Vec::new(),
            // Per slot: a run with inflow reserves slots for the particles it will add.
            particles: capacity as u64,
            cells: cells as u64,
        },
        real_size: lay.real,
        hist_pairs: cfg.friction && cfg.hist_pairs,
        scratch: (0, 0),
        spill: None,
    };
    let (mut hist_count, mut hist) = (0, 0);
    for (name, bytes) in lay.history_arrays(n) {
        let ptr = alloc(stream, &mut st, name, bytes)?;
        match name {
            "hist_count" => hist_count = ptr,
            _ => hist = ptr,
        }
    }
    if lay.friction && cfg.hist_pairs && cfg.hist_spill && opts.hist_spill > 0 {
        st.spill = Some(alloc_spill(
            stream,
            &mut st,
            spill_start_rows(n, opts.spill_start),
            opts.hist_spill as usize,
        )?);
    }
    for copy in ["", "scratch."].into_iter().take(lay.copies()) {
        let mut a = ParticleArrays {
            hist_count,
            hist,
            ..Default::default()
        };
        for (name, bytes) in lay.state_arrays(n) {
            let ptr = alloc(stream, &mut st, &format!("{copy}{name}"), bytes)?;
            match name {
                "pos" => a.pos = ptr,
                "vel" => a.vel = ptr,
                "id" => a.id = ptr,
                "omega" => a.omega = ptr,
                "species" => a.species = ptr,
                "hist_count" => a.hist_count = ptr,
                "hist" => a.hist = ptr,
                "key" => a.key = ptr,
                _ => a.row = ptr,
            }
        }
        if copy.is_empty() {
            // Velocity Verlet keeps the last forces and torques (the opening half kick uses
            // them); they stay in the collide's slot order (kick + drift run before the gather).
            if lay.single_copy {
                // Forces, then torques; a search's reorder goes through the whole of it.
                let bytes = lay.force_buffer() * n;
                a.force = alloc(stream, &mut st, "forces", bytes)?;
                if lay.rotation {
                    a.torque = a.force + (3 * lay.real * n) as u64;
                }
                st.scratch = (a.force, bytes);
            } else {
                if opts.store_forces || verlet {
                    a.force = alloc(stream, &mut st, "force", 3 * lay.real * n)?;
                }
                if verlet && lay.rotation {
                    a.torque = alloc(stream, &mut st, "torque", 3 * lay.real * n)?;
                }
            }
            if opts.store_forces {
                a.contacts = alloc(stream, &mut st, "contacts", 4 * n)?;
            }
            st.cur = a;
        } else {
            st.tmp = a;
        }
    }
    if lay.single_copy {
        // The search's cells and ranks live in the force buffer (free from the integrate to
        // the next collide), which the reorder then uses: its permutation lives in the skin's
        // paths (zeroed after the reorder), or without a skin on its own.
        st.grid.cell = st.scratch.0;
        st.grid.rank = st.scratch.0 + 4 * n as u64;
    } else {
        st.grid.cell = alloc(stream, &mut st, "grid.cell", 4 * n)?;
        st.grid.rank = alloc(stream, &mut st, "grid.rank", 4 * n)?;
        st.grid.perm = alloc(stream, &mut st, "grid.perm", 4 * n)?;
    }
    st.grid.count = alloc(stream, &mut st, "grid.count", 4 * (cells + 1))?;
    st.grid.start = alloc(stream, &mut st, "grid.start", 4 * (cells + 1))?;
    if lay.single_copy && skin <= 0.0 {
        st.grid.perm = alloc(stream, &mut st, "grid.perm", 4 * n)?;
    }
    if skin > 0.0 {
        st.grid.scell = alloc(stream, &mut st, "skin.cell", 4 * n)?;
        st.grid.path = alloc(stream, &mut st, "skin.path", 4 * n)?;
        if lay.single_copy {
            st.grid.perm = st.grid.path;
        }
        st.grid.dmax = alloc(stream, &mut st, "skin.max", 4)?;
        if opts.neighbour_list {
            let cap = super::skin::LIST_CAP as usize;
            st.grid.nlist = alloc(stream, &mut st, "skin.list", 4 * cap * n)?;
            st.grid.ncount = alloc(stream, &mut st, "skin.list_count", 4 * n)?;
        }
    }
    for (l, &t) in level_sizes.iter().enumerate() {
        let sums = alloc(stream, &mut st, &format!("scan.sums{l}"), 4 * t)?;
        let scanned = alloc(stream, &mut st, &format!("scan.scanned{l}"), 4 * t)?;
        st.scan_levels.push((sums, scanned, t as u32));
    }
    st.diag = alloc(stream, &mut st, "diag", std::mem::size_of::<DemDiag>())?;

    // Tables.
    let species: Vec<SpeciesProps> = (0..sc.species_radius.len())
        .map(|s| SpeciesProps {
            radius: sc.species_radius[s],
            mass: sc.species_mass[s],
            inertia: sc.species_inertia[s],
            pad: 0.0,
        })
        .collect();
    let pairs = |v: &[physics::MaterialPair]| -> Vec<f64> {
        v.iter()
            .flat_map(|p| [p.kn, p.kt, p.e_star, p.g_star, p.beta, p.mu_s, p.mu_r])
            .collect()
    };
    let (pp, pw) = (pairs(&table.pp), pairs(&table.pw));
    let sp_ptr = alloc(
        stream,
        &mut st,
        "tables.species",
        std::mem::size_of_val(species.as_slice()),
    )?;
    upload_bytes(stream, &mut st, sp_ptr, as_bytes(&species))?;
    let pp_ptr = alloc(stream, &mut st, "tables.pp", 8 * pp.len())?;
    upload_bytes(stream, &mut st, pp_ptr, as_bytes(&pp))?;
    let pw_ptr = alloc(stream, &mut st, "tables.pw", 8 * pw.len())?;
    upload_bytes(stream, &mut st, pw_ptr, as_bytes(&pw))?;

    let hist_strides = opts.hist_layout.strides(n, opts.hist_cap as usize);
    let mut params = DemParams {
        origin: grid.origin,
        cell: grid.cell,
        dt: sc.dt,
        gravity: sc.gravity,
        box_min: sc.domain_min,
        box_max: sc.domain_max,
        dims: grid.dims,
        n: live as u32,
        walls: sc.walls,
        n_species: sc.species_radius.len() as u32,
        n_walls: table.n_walls as u32,
        hist_cap: opts.hist_cap,
        hist_sc: hist_strides.0 as u32,
        hist_sr: hist_strides.1 as u32,
        diag: 0,
        integrate: if verlet {
            super::params::INTEGRATE_HALF_KICK
        } else {
            super::params::INTEGRATE_EULER
        },
        split_axis: grid.slab_axis as u32,
        slab_lo: 0,
        slab_hi: grid.dims[grid.slab_axis],
        n_rows: 0,
        species: sp_ptr,
        pp: pp_ptr,
        pw: pw_ptr,
        reach: 2.0 * sc.max_radius(),
        list_cap: if st.grid.nlist != 0 {
            super::skin::LIST_CAP
        } else {
            0
        },
        list_stride: n as u32,
        pass_list: 0,
        pass_count: 0,
        pass_skip: [u32::MAX; 2],
        pass_pad: 0,
        spill_cur: 0,
        spill_next: 0,
        spill_ctl: 0,
        spill_rows: 0,
        spill_width: 0,
        spill_sel: 0,
        spill_pad: 0,
        adopt: 0,
    };
    set_state(stream, &mut st, &params, state)?;
    apply_spill(&mut params, st.spill.as_ref());
    Ok((st, params))
}

/// Uploads `state` (id order) into the state arrays, slot = id.
pub(crate) fn set_state(
    stream: &Arc<CudaStream>,
    st: &mut DeviceState,
    p: &DemParams,
    state: &SimState,
) -> Result<(), CudaError> {
    let n = p.n as usize;
    assert_eq!(
        state.pos.len(),
        n,
        "the state must have one entry per particle"
    );
    let real = st.real_size;
    let a = st.cur;
    // Ids are 0..n here (CudaSim::new checks it): slot = id at upload, and `dem_pack` writes
    // frames at index id. Each slot's history row is the slot, for every slot of the capacity
    // (a slot that later receives a particle brings its row), in both copies.
    upload_bytes(stream, st, a.id, as_bytes(&state.id))?;
    if a.row != 0 {
        let rows: Vec<u32> = (0..st.memory.particles as u32).collect();
        let tmp_row = st.tmp.row;
        upload_bytes(stream, st, a.row, as_bytes(&rows))?;
        if tmp_row != 0 {
            upload_bytes(stream, st, tmp_row, as_bytes(&rows))?;
        }
    }
    if a.species != 0 {
        upload_bytes(stream, st, a.species, as_bytes(&state.species))?;
    }
    // Owner keys: of the positions now (the rows below follow them; the first search keeps them).
    let keys: Vec<u32> = if a.key != 0 {
        let mut keys: Vec<u32> = state.pos.iter().map(|&x| owner_key(x)).collect();
        keys.resize(st.memory.particles as usize, 0);
        upload_bytes(stream, st, a.key, as_bytes(&keys))?;
        keys
    } else {
        Vec::new()
    };
    let flat = |v: &[V3]| -> Vec<f64> { v.iter().flatten().copied().collect() };
    upload_bytes(stream, st, a.pos, as_bytes(&flat(&state.pos)))?;
    upload_bytes(stream, st, a.vel, &real_bytes(&flat(&state.vel), real))?;
    if a.omega != 0 {
        upload_bytes(stream, st, a.omega, &real_bytes(&flat(&state.omega), real))?;
    }
    if a.force != 0 {
        upload_bytes(stream, st, a.force, &real_bytes(&flat(&state.force), real))?;
    }
    if a.torque != 0 {
        upload_bytes(
            stream,
            st,
            a.torque,
            &real_bytes(&flat(&state.torque), real),
        )?;
    }
    if a.hist_count != 0 && state.history.iter().all(|h| h.partner == PARTNER_NONE) {
        // A fresh start: only the entry counts matter (the slots are read below the count).
        // Skips building and uploading 16 entries per particle (seconds at 10 M particles).
        upload_bytes(stream, st, a.hist_count, as_bytes(&vec![0u32; n]))?;
        set_spill(stream, st, &[], 0)?;
    } else if a.hist_count != 0 {
        // The partners are the device's own encoding (state::wall_partner, ...): copied as
        // they are. Entries beyond the device's capacity are dropped (their springs restart
        // at zero) and logged.
        let cap = p.hist_cap as usize;
        let width = st.spill.map_or(0, |s| s.width as usize);
        let row_cap = row_capacity(p.hist_cap, width as u32) as usize;
        let (sc, sr) = (p.hist_sc as usize, p.hist_sr as usize);
        let live = state.pos.len();
        let eb = hist_entry_bytes(real);
        // Pairs-once rows keep a pair's spring with its owner only (the other side's entry is
        // the same spring negated: physics.rs, a_pair_seen_from_its_other_side_is_the_exact_mirror).
        let pairs = st.hist_pairs;
        let keys = &keys;
        let entries_of = |i: usize| kept_entries(state, i, pairs, keys);
        let mut count = vec![0u32; n];
        let mut dropped = 0u64;
        for (i, c) in count.iter_mut().enumerate().take(live) {
            let k = entries_of(i).count();
            *c = k.min(row_cap) as u32;
            dropped += k.saturating_sub(row_cap) as u64;
        }
        if dropped > 0 {
            tracing::warn!(
                "{dropped} contact history entries beyond the device's {row_cap} per particle are \
                 dropped; those contacts restart with a zero tangential spring"
            );
        }
        upload_bytes(stream, st, a.hist_count, as_bytes(&count))?;
        // Each row's inline entries (and its spill row, `place_row`), built once per particle.
        let mut spill = Vec::new();
        let mut links = 0u32;
        let mut row = Vec::with_capacity(row_cap);
        let mut inline_of = |i: usize, row: &mut Vec<HistEntry>| {
            row.clear();
            row.extend(entries_of(i).take(row_cap).copied());
            place_row(row, cap, width, &mut spill, &mut links, real);
        };
        // Only entries below a slot's count are ever read, so only those are written: entry c
        // of slot i goes to c * sc + i * sr. In the slot-major layout (sr = 1) entry c of a run
        // of slots is contiguous, so the entries are built for a chunk of slots at a time, plane
        // by plane, and uploaded up to the largest count: at 100 M particles on a GPU of a group
        // (rows = capacity) building the whole array on the host took minutes and tens of GB.
        // Bytes past a slot's count are left as they are (never read).
        let planes = (count.iter().copied().max().unwrap_or(0) as usize).min(cap);
        if sr == 1 && live > 0 && planes > 0 {
            const CHUNK: usize = 1 << 22;
            let mut buf = vec![0u8; planes * CHUNK.min(live) * eb];
            for i0 in (0..live).step_by(CHUNK) {
                let m = CHUNK.min(live - i0);
                for i in i0..i0 + m {
                    inline_of(i, &mut row);
                    for (c, h) in row.iter().enumerate() {
                        let e = c * m + (i - i0);
                        write_hist_entry(&mut buf[e * eb..(e + 1) * eb], h.partner, &h.xi, real);
                    }
                }
                for c in 0..planes {
                    let plane = &buf[c * m * eb..(c + 1) * m * eb];
                    upload_bytes_at(stream, st, a.hist, (c * sc + i0) * eb, plane)?;
                }
            }
        } else if live > 0 && planes > 0 {
            let entries = (cap - 1) * sc + (live - 1) * sr + 1;
            let mut all = vec![0u8; entries * eb];
            for i in 0..live {
                inline_of(i, &mut row);
                for (c, h) in row.iter().enumerate() {
                    let e = c * sc + i * sr;
                    write_hist_entry(&mut all[e * eb..(e + 1) * eb], h.partner, &h.xi, real);
                }
            }
            upload_bytes_at(stream, st, a.hist, 0, &all)?;
        }
        set_spill(stream, st, &spill, links)?;
    }
    stream
        .synchronize()
        .map_err(|e| CudaError::driver("uploading the state", e))
}

/// The entries of particle `i` of `state` that its device row keeps: all of them, or in
/// pairs-once rows (`pairs`) its walls' and meshes' and the pairs it owns, by the owner keys
/// `keys` (one per particle of `state`; a pair whose partner has left the run is kept by
/// neither) or, with none, by the ids.
fn kept_entries<'a>(
    state: &'a SimState,
    i: usize,
    pairs: bool,
    keys: &'a [u32],
) -> impl Iterator<Item = &'a HistEntry> + 'a {
    let id = state.id[i];
    state.history_of(i).filter(move |h| {
        if !pairs || !is_particle_partner(h.partner) {
            true
        } else if keys.is_empty() {
            owns_pair(id, h.partner)
        } else {
            state
                .id
                .binary_search(&h.partner)
                .is_ok_and(|q| owns_pair_keyed(keys[i], id, keys[q], h.partner))
        }
    })
}

/// Uploads `links` spill rows (`bytes`) into the current spill buffer, grown first where they do
/// not fit, and sets its counters to them (the other buffer's to 0); nothing without spill rows.
fn set_spill(
    stream: &Arc<CudaStream>,
    st: &mut DeviceState,
    bytes: &[u8],
    links: u32,
) -> Result<(), CudaError> {
    let Some(s) = st.spill else {
        return Ok(());
    };
    if links > s.rows {
        grow_spill(stream, st, links.saturating_mul(2))?;
    }
    let s = st.spill.expect("spill rows");
    if !bytes.is_empty() {
        upload_bytes(stream, st, s.bufs[s.cur], bytes)?;
    }
    let mut ctl = [0u32; SPILL_CTL_WORDS];
    ctl[2] = links;
    ctl[s.cur] = links;
    upload_bytes(stream, st, s.ctl, as_bytes(&ctl))
}

/// The allocation of `st` that holds device address `ptr` (one of the state's own buffers, at
/// its start or inside it: one copy's torques follow its forces) and the offset of `ptr` in it.
pub(crate) fn device_buffer(st: &DeviceState, ptr: u64) -> (&CudaSlice<u8>, usize) {
    st.bufs
        .iter()
        .find(|b| ptr >= b.1.ptr && ptr < b.1.ptr + b.1.slice.len() as u64)
        .map(|b| (&b.1.slice, (ptr - b.1.ptr) as usize))
        .expect("pointer of an allocated buffer")
}

fn download<T: Copy + Default>(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    ptr: u64,
    len: usize,
) -> Result<Vec<T>, CudaError> {
    let (buf, at) = device_buffer(st, ptr);
    let mut bytes = vec![0u8; len * std::mem::size_of::<T>()];
    stream
        .memcpy_dtoh(&buf.slice(at..at + bytes.len()), &mut bytes)
        .map_err(|e| CudaError::driver("downloading", e))?;
    let mut out = vec![T::default(); len];
    // SAFETY: `out` has exactly bytes.len() bytes; T is f64, f32 or u32 (any bit pattern valid).
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr() as *mut u8, bytes.len())
    };
    Ok(out)
}

fn download_real(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    ptr: u64,
    len: usize,
) -> Result<Vec<f64>, CudaError> {
    if st.real_size == 8 {
        download::<f64>(stream, st, ptr, len)
    } else {
        Ok(download::<f32>(stream, st, ptr, len)?
            .into_iter()
            .map(f64::from)
            .collect())
    }
}

/// `len` elements of T at device address `ptr` (an allocated buffer of `st`), copied into
/// `staging` (allocated or grown first) and viewed there. T is f64, f32 or u32.
fn fetch_pinned<'a, T: Copy>(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    ptr: u64,
    len: usize,
    staging: &'a mut Option<PinnedHostSlice<u8>>,
) -> Result<&'a [T], CudaError> {
    let bytes = len * std::mem::size_of::<T>();
    if staging.as_ref().is_none_or(|s| s.len() < bytes) {
        *staging = None;
        // SAFETY: the memory is written by the copy below before anything reads it; flags 0
        // (not write-combined, which the host would read slowly).
        *staging = Some(
            unsafe {
                stream
                    .context()
                    .alloc_pinned_with_flags::<u8>(bytes.max(1), 0)
            }
            .map_err(|e| CudaError::driver("allocating page-locked frame staging", e))?,
        );
    }
    let (buf, at) = device_buffer(st, ptr);
    // cudarc copies the destination's whole length: the staging's first `bytes`, as a plain
    // slice. Into page-locked memory the copy is asynchronous: the stream is synchronised
    // before the bytes are read.
    let host = &mut staging
        .as_mut()
        .expect("allocated above")
        .as_mut_slice()
        .map_err(|e| CudaError::driver("waiting for the frame staging", e))?[..bytes];
    stream
        .memcpy_dtoh(&buf.slice(at..at + bytes), host)
        .map_err(|e| CudaError::driver("downloading a frame part", e))?;
    stream
        .synchronize()
        .map_err(|e| CudaError::driver("waiting for a frame part's copy", e))?;
    // SAFETY: the allocation is page-aligned (so aligned for T), its first `bytes` bytes were
    // just copied (the stream is synchronised), and every bit pattern
    // is a value of f64, f32 or u32; the view borrows `staging`, which nothing writes while it
    // lives.
    Ok(unsafe { std::slice::from_raw_parts(host.as_ptr().cast::<T>(), len) })
}

/// The device's contact history as downloaded: entry c of the particle in slot k at
/// `c * strides.0 + rows[k] * strides.1`.
struct DeviceHistory<'a> {
    /// Particle id of each slot (n).
    ids: &'a [u32],
    /// History row of each slot (n).
    rows: &'a [u32],
    /// Entries of each row (at least every row in `rows`).
    count: &'a [u32],
    /// Device `HistEntry` bytes of every entry (hist_cap * n), decoded as they are written out
    /// (at 100 M particles decoding into arrays first took about 45 GB more).
    bytes: &'a [u8],
    /// Precision of the springs (4 or 8 bytes).
    real: usize,
    /// (entry stride, row stride): [`super::HistLayout::strides`].
    strides: (usize, usize),
    /// Pairs-once rows with spill rows ([`Spill`]): the current buffer's rows.
    spill: Option<SpillRows<'a>>,
}

/// The spill rows a [`DeviceHistory`]'s rows link to.
struct SpillRows<'a> {
    /// Device `HistEntry` bytes, `width` entries per spill row.
    bytes: &'a [u8],
    width: usize,
    /// Entries of a row inline (`hist_cap`): a row of more keeps entry `cap - 1` and on in its
    /// spill row, whose index entry `cap - 1`'s partner holds.
    cap: usize,
}

/// Writes the device history into the portable one (id order, the device's `hist_cap` slots
/// per particle, used ones first): partners and springs as they are, nothing converted or
/// dropped.
fn history_to_portable(
    h: &DeviceHistory<'_>,
    cap: usize,
    out: &mut [HistEntry],
    index: &dyn Fn(u32) -> usize,
) {
    let eb = hist_entry_bytes(h.real);
    for (k, &id) in h.ids.iter().enumerate() {
        if id == DEAD {
            continue;
        }
        let r = h.rows[k] as usize;
        for c in 0..h.count[r] as usize {
            let e = c * h.strides.0 + r * h.strides.1;
            out[index(id) * cap + c] = read_hist_entry(&h.bytes[e * eb..(e + 1) * eb], h.real);
        }
    }
}

/// Writes pairs-once rows into the portable history, both sides of every pair, in the order the
/// other layouts and the CPU keep: a particle's particle contacts in its walk's order, which is
/// the partners' slot order (slots are sorted by the cell the walk visits them in, then id),
/// then its walls' and meshes' entries in row order. The portable capacity is
/// [`HISTORY_CAP`], or a particle's largest count where that is more.
fn pairs_to_portable(h: &DeviceHistory<'_>, s: &mut SimState, index: &dyn Fn(u32) -> usize) {
    let eb = hist_entry_bytes(h.real);
    let live = |k: usize| h.ids[k] != DEAD;
    let max_id = h.ids.iter().filter(|&&id| id != DEAD).max().copied();
    let mut slot_of = vec![u32::MAX; max_id.map_or(0, |m| m as usize + 1)];
    for (k, &id) in h.ids.iter().enumerate() {
        if id != DEAD {
            slot_of[id as usize] = k as u32;
        }
    }
    // The live slot of a particle partner (none for a partner that left the run).
    let partner_slot = |partner: u32| {
        slot_of
            .get(partner as usize)
            .copied()
            .filter(|&q| q != u32::MAX)
    };
    // The count word's low bits (the slide flags above them are the collide's, contact.cu).
    let count_mask = (1u32 << kernels::PAIRS_ROW_COUNT_BITS) - 1;
    let count = |k: usize| (h.count[h.rows[k] as usize] & count_mask) as usize;
    let inline = |k: usize, c: usize| {
        let e = c * h.strides.0 + h.rows[k] as usize * h.strides.1;
        read_hist_entry(&h.bytes[e * eb..(e + 1) * eb], h.real)
    };
    let entry = |k: usize, c: usize| match &h.spill {
        Some(sp) if count(k) > sp.cap && c + 1 >= sp.cap => {
            let link = inline(k, sp.cap - 1).partner as usize;
            let e = link * sp.width + c + 1 - sp.cap;
            read_hist_entry(&sp.bytes[e * eb..(e + 1) * eb], h.real)
        }
        _ => inline(k, c),
    };
    // Entries per slot: its row's, and one for each pair another row keeps with it.
    let n = h.ids.len();
    let mut per = vec![0usize; n];
    for k in (0..n).filter(|&k| live(k)) {
        per[k] += count(k);
        for c in 0..count(k) {
            let e = entry(k, c);
            if is_particle_partner(e.partner) {
                if let Some(q) = partner_slot(e.partner) {
                    per[q as usize] += 1;
                }
            }
        }
    }
    let cap = per.iter().copied().max().unwrap_or(0).max(HISTORY_CAP);
    if s.history_cap != cap || s.history.len() != cap * s.pos.len() {
        s.history = vec![HistEntry::NONE; cap * s.pos.len()];
        s.history_cap = cap;
    }
    // (partner slot, entry) of each slot's particle contacts, gathered from both sides.
    let mut start = vec![0usize; n + 1];
    for k in 0..n {
        start[k + 1] = start[k] + per[k];
    }
    let mut fill = start.clone();
    let mut pairs: Vec<(u32, HistEntry)> = vec![(0, HistEntry::NONE); start[n]];
    for k in (0..n).filter(|&k| live(k)) {
        for c in 0..count(k) {
            let e = entry(k, c);
            if !is_particle_partner(e.partner) {
                continue;
            }
            let Some(q) = partner_slot(e.partner) else {
                continue;
            };
            pairs[fill[k]] = (q, e);
            fill[k] += 1;
            let mirror = HistEntry {
                partner: h.ids[k],
                xi: [-e.xi[0], -e.xi[1], -e.xi[2]],
            };
            pairs[fill[q as usize]] = (k as u32, mirror);
            fill[q as usize] += 1;
        }
    }
    for k in (0..n).filter(|&k| live(k)) {
        let mine = &mut pairs[start[k]..fill[k]];
        mine.sort_unstable_by_key(|&(q, _)| q);
        let out = &mut s.history[index(h.ids[k]) * cap..][..cap];
        let mut c = 0;
        for &(_, e) in mine.iter() {
            out[c] = e;
            c += 1;
        }
        for e in (0..count(k)).map(|c| entry(k, c)) {
            if !is_particle_partner(e.partner) {
                out[c] = e;
                c += 1;
            }
        }
        out[c..].fill(HistEntry::NONE);
    }
}

/// The state in id order: kinematics, contact history (`hist_cap` entries per particle), last
/// forces when stored.
pub(crate) fn download_state(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    p: &DemParams,
    time: f64,
    step: u64,
) -> Result<SimState, CudaError> {
    let mut s = SimState::zeroed(time, step, p.n as usize);
    download_into(stream, st, p, &mut s, &|id| id as usize)?;
    s.forces_valid = st.cur.force != 0 && step > 0;
    Ok(s)
}

/// Writes the live slots `0..p.n` of the state (dead ones skipped) into `s` at `index(id)`:
/// kinematics, last forces and contact history (`s` gets the device's `hist_cap`).
pub(crate) fn download_into(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    p: &DemParams,
    s: &mut SimState,
    index: &dyn Fn(u32) -> usize,
) -> Result<(), CudaError> {
    let n = p.n as usize;
    stream
        .synchronize()
        .map_err(|e| CudaError::driver("synchronising", e))?;
    let a = st.cur;
    let ids: Vec<u32> = download(stream, st, a.id, n)?;
    let pos: Vec<f64> = download(stream, st, a.pos, 3 * n)?;
    let vel = download_real(stream, st, a.vel, 3 * n)?;
    let omega = if a.omega != 0 {
        download_real(stream, st, a.omega, 3 * n)?
    } else {
        vec![0.0; 3 * n]
    };
    let species: Vec<u32> = if a.species != 0 {
        download(stream, st, a.species, n)?
    } else {
        vec![0; n]
    };
    let force = if a.force != 0 {
        download_real(stream, st, a.force, 3 * n)?
    } else {
        vec![0.0; 3 * n]
    };
    let torque = if a.torque != 0 {
        download_real(stream, st, a.torque, 3 * n)?
    } else {
        vec![0.0; 3 * n]
    };
    let contacts: Vec<u32> = if a.contacts != 0 {
        download(stream, st, a.contacts, n)?
    } else {
        vec![0; n]
    };
    let v3 = |v: &[f64], k: usize| [v[3 * k], v[3 * k + 1], v[3 * k + 2]];
    for (k, &id) in ids.iter().enumerate() {
        if id == DEAD {
            continue;
        }
        let i = index(id);
        s.id[i] = id;
        s.species[i] = species[k];
        s.pos[i] = v3(&pos, k);
        s.vel[i] = v3(&vel, k);
        s.omega[i] = v3(&omega, k);
        s.force[i] = v3(&force, k);
        s.torque[i] = v3(&torque, k);
        s.contacts[i] = contacts[k];
    }
    if a.hist_count != 0 {
        let cap = p.hist_cap as usize;
        let (sc, sr) = (p.hist_sc as usize, p.hist_sr as usize);
        // Owner keys: every slot's row is its slot.
        let rows: Vec<u32> = if a.row != 0 {
            download(stream, st, a.row, n)?
        } else {
            (0..n as u32).collect()
        };
        // A live slot's row may be any of the capacity's (rows move with the slots).
        let nrows = rows.iter().map(|&r| r as usize + 1).max().unwrap_or(0);
        let count: Vec<u32> = download(stream, st, a.hist_count, nrows)?;
        // Entries up to the last one of the highest row in use.
        let entries = if nrows == 0 {
            0
        } else {
            (cap - 1) * sc + (nrows - 1) * sr + 1
        };
        let bytes: Vec<u8> =
            download(stream, st, a.hist, hist_entry_bytes(st.real_size) * entries)?;
        // The spill rows the rows' links point to: the current buffer's, up to the rows taken.
        let spill_bytes: Vec<u8> = match st.spill {
            Some(sp) => {
                let taken = read_spill_ctl(stream, st)?[sp.cur].min(sp.rows) as usize;
                let len = taken * sp.width as usize * hist_entry_bytes(st.real_size);
                download(stream, st, sp.bufs[sp.cur], len)?
            }
            None => Vec::new(),
        };
        let h = DeviceHistory {
            ids: &ids,
            rows: &rows,
            count: &count,
            bytes: &bytes,
            real: st.real_size,
            strides: (sc, sr),
            spill: st.spill.map(|sp| SpillRows {
                bytes: &spill_bytes,
                width: sp.width as usize,
                cap,
            }),
        };
        if st.hist_pairs {
            pairs_to_portable(&h, s, index);
        } else {
            if s.history_cap != cap || s.history.len() != cap * s.pos.len() {
                s.history = vec![HistEntry::NONE; cap * s.pos.len()];
                s.history_cap = cap;
            }
            history_to_portable(&h, cap, &mut s.history, index);
        }
    }
    Ok(())
}

/// The ids of slots `0..p.n` (dead ones included).
pub(crate) fn download_ids(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    p: &DemParams,
) -> Result<Vec<u32>, CudaError> {
    stream
        .synchronize()
        .map_err(|e| CudaError::driver("synchronising", e))?;
    download(stream, st, st.cur.id, p.n as usize)
}

/// The live slots' positions written into `out` at `index(id)` (dead slots skipped): 24 bytes
/// a particle besides the ids, without the state's history, whose host form at 100 M takes tens
/// of gigabytes (what a frame is checked against).
pub(crate) fn download_positions_into(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    p: &DemParams,
    out: &mut [[f64; 3]],
    index: &dyn Fn(u32) -> usize,
) -> Result<(), CudaError> {
    let ids = download_ids(stream, st, p)?;
    download_positions_by_ids(stream, st, p, &ids, out, index)
}

/// [`download_positions_into`] with the slots' ids already downloaded (`ids[k]`: slot k's id,
/// [`DEAD`] for a removed particle).
pub(crate) fn download_positions_by_ids(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    p: &DemParams,
    ids: &[u32],
    out: &mut [[f64; 3]],
    index: &dyn Fn(u32) -> usize,
) -> Result<(), CudaError> {
    let pos: Vec<f64> = download(stream, st, st.cur.pos, 3 * p.n as usize)?;
    for (k, &id) in ids.iter().enumerate() {
        if id != DEAD {
            out[index(id)] = [pos[3 * k], pos[3 * k + 1], pos[3 * k + 2]];
        }
    }
    Ok(())
}

/// Contacts of the last step summed over the live slots (pairs twice, walls once), from the
/// per-particle counts the collide stores; `None` when it stores none. 8 bytes a particle
/// come back instead of the whole state.
pub(crate) fn download_contact_sum(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    p: &DemParams,
) -> Result<Option<u64>, CudaError> {
    if st.cur.contacts == 0 {
        return Ok(None);
    }
    let ids = download_ids(stream, st, p)?;
    let counts: Vec<u32> = download(stream, st, st.cur.contacts, p.n as usize)?;
    Ok(Some(
        ids.iter()
            .zip(&counts)
            .filter(|(&id, _)| id != DEAD)
            .map(|(_, &c)| c as u64)
            .sum(),
    ))
}

/// The positions of slots `0..p.n`.
pub(crate) fn download_positions(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    p: &DemParams,
) -> Result<Vec<V3>, CudaError> {
    let flat: Vec<f64> = download(stream, st, st.cur.pos, 3 * p.n as usize)?;
    Ok(flat.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
}

/// What a frame shows of the live slots, in f32 as frames hold it: ids, then positions,
/// velocities, spins and last contact forces, then contact counts (no species, torques or
/// history: a GPU rank's part of a frame, about 56 bytes a particle).
pub(crate) type FrameKinematics = (Vec<u32>, [Vec<[f32; 3]>; 4], Vec<u32>);

/// [`FrameKinematics`] of slots `0..p.n`, dead ones skipped (synchronises). The arrays come
/// through `staging`, page-locked host memory kept between frames (grown to the largest array):
/// into pageable vectors the copies ran at about 0.6 GB/s (10 M particles, 1.3 s a part, on an
/// H100 shared by two ranks; session 18). The host's share (skipping dead slots, f64 to f32)
/// runs on all cores: at 50 M particles a rank's part is 2.8 GB.
pub(crate) fn download_frame_kinematics(
    stream: &Arc<CudaStream>,
    st: &DeviceState,
    p: &DemParams,
    staging: &mut Option<PinnedHostSlice<u8>>,
) -> Result<FrameKinematics, CudaError> {
    use rayon::prelude::*;
    let n = p.n as usize;
    stream
        .synchronize()
        .map_err(|e| CudaError::driver("synchronising", e))?;
    let ids: Vec<u32> = fetch_pinned::<u32>(stream, st, st.cur.id, n, staging)?.to_vec();
    let live: Vec<usize> = (0..n).into_par_iter().filter(|&k| ids[k] != DEAD).collect();
    // The live slots' vectors of a flat array of 3 x T, in f32.
    fn pick<T: Copy + Into<f64> + Sync>(flat: &[T], live: &[usize]) -> Vec<[f32; 3]> {
        live.par_iter()
            .map(|&k| {
                let at = |a: usize| flat[3 * k + a].into() as f32;
                [at(0), at(1), at(2)]
            })
            .collect()
    }
    let mut vec3 = |ptr: u64, real: bool| -> Result<Vec<[f32; 3]>, CudaError> {
        if ptr == 0 {
            return Ok(vec![[0.0; 3]; live.len()]);
        }
        // f32 state stays f32 (no f64 copy of it on the host).
        Ok(if real && st.real_size == 4 {
            pick(fetch_pinned::<f32>(stream, st, ptr, 3 * n, staging)?, &live)
        } else {
            pick(fetch_pinned::<f64>(stream, st, ptr, 3 * n, staging)?, &live)
        })
    };
    let a = st.cur;
    let t0 = std::time::Instant::now();
    let pos = vec3(a.pos, false)?;
    let t_pos = t0.elapsed();
    let kin = [
        pos,
        vec3(a.vel, true)?,
        vec3(a.omega, true)?,
        vec3(a.force, true)?,
    ];
    let t_kin = t0.elapsed();
    let contacts = if a.contacts != 0 {
        let c = fetch_pinned::<u32>(stream, st, a.contacts, n, staging)?;
        live.par_iter().map(|&k| c[k]).collect()
    } else {
        vec![0; live.len()]
    };
    tracing::debug!(
        slots = n,
        live = live.len(),
        positions_ms = t_pos.as_secs_f64() * 1e3,
        three_vectors_ms = (t_kin - t_pos).as_secs_f64() * 1e3,
        contacts_ms = (t0.elapsed() - t_kin).as_secs_f64() * 1e3,
        "frame kinematics downloaded"
    );
    Ok((live.par_iter().map(|&k| ids[k]).collect(), kin, contacts))
}

/// Bytes per particle of a [`FrameKinematics`] as [`frame_part_bytes`] writes it: an id, four
/// vectors of 3 x f32 and a contact count (the part has a u64 count first).
const FRAME_PART_BYTES: usize = 4 + 4 * 12 + 4;

/// Bytes of a frame part of `n` particles; `None` past `usize`.
fn frame_part_len(n: usize) -> Option<usize> {
    n.checked_mul(FRAME_PART_BYTES)?.checked_add(8)
}

/// A GPU rank's frame part as it travels to rank 0: the particle count (u64), the ids, the
/// positions, velocities, spins and forces (3 x f32 each) and the contact counts, native-endian
/// (all ranks run one binary). The arrays are copied whole, where bincode wrote them number by
/// number (about a third of a 12.7 s frame at 100 M particles on two ranks, session 18).
pub(crate) fn frame_part_bytes(part: &FrameKinematics) -> Vec<u8> {
    let (ids, kin, contacts) = part;
    let n = ids.len();
    assert!(
        kin.iter().all(|v| v.len() == n) && contacts.len() == n,
        "a frame part's arrays have one length"
    );
    let mut out = Vec::with_capacity(frame_part_len(n).expect("a part in memory has a length"));
    out.extend_from_slice(&(n as u64).to_ne_bytes());
    out.extend_from_slice(as_bytes(ids));
    for v in kin {
        out.extend_from_slice(as_bytes(v));
    }
    out.extend_from_slice(as_bytes(contacts));
    out
}

/// What [`frame_part_bytes`] made; an error names a length that does not match its count.
pub(crate) fn frame_part_from_bytes(bytes: &[u8]) -> Result<FrameKinematics, String> {
    let head: [u8; 8] = bytes
        .get(..8)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| format!("{} bytes, shorter than a frame part's count", bytes.len()))?;
    let n = usize::try_from(u64::from_ne_bytes(head)).map_err(|e| e.to_string())?;
    if frame_part_len(n) != Some(bytes.len()) {
        return Err(format!(
            "{} bytes for {n} particles (a frame part of {n} has 8 + {FRAME_PART_BYTES} x {n})",
            bytes.len()
        ));
    }
    let mut at = 8;
    let mut take = |len: usize| {
        let b = &bytes[at..at + len];
        at += len;
        b
    };
    let ids: Vec<u32> = from_bytes(take(4 * n), n);
    let kin = [(); 4].map(|_| from_bytes::<[f32; 3]>(take(12 * n), n));
    let contacts: Vec<u32> = from_bytes(take(4 * n), n);
    Ok((ids, kin, contacts))
}

/// Numbers of the byte format above (written with [`as_bytes`]): every bit pattern is a value.
trait Plain: Copy + Default {}
impl Plain for u32 {}
impl Plain for [f32; 3] {}

fn from_bytes<T: Plain>(bytes: &[u8], n: usize) -> Vec<T> {
    let mut v = vec![T::default(); n];
    let size = std::mem::size_of_val(v.as_slice());
    assert_eq!(bytes.len(), size, "frame part array length");
    // SAFETY: `v` owns `size` bytes of u32 or [f32; 3], for which every bit pattern is a value;
    // the source does not overlap the new vector.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), size) };
    v
}

/// `params.cuh`'s `DEM_DEAD`: the id of a slot without a particle.
pub(crate) const DEAD: u32 = u32::MAX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_beyond_the_32_bit_index_is_refused() {
        assert!(history_fits_its_index(268_000_000, 16).is_ok());
        let e = history_fits_its_index(300_000_000, 16)
            .unwrap_err()
            .to_string();
        assert!(e.contains("4800000000 entries"), "{e}");
        assert!(history_fits_its_index(300_000_000, 10).is_ok());
    }

    /// Pairs-once rows (slot-major, a slot per entry of `ids`, no spill rows) downloaded into a
    /// state of the three particles with ids 10, 11 and 12 (`pairs_to_portable`).
    fn download_pairs(
        ids: &[u32],
        rows: &[u32],
        count: &[u32],
        bytes: &[u8],
        real: usize,
    ) -> SimState {
        let h = DeviceHistory {
            ids,
            rows,
            count,
            bytes,
            real,
            strides: (ids.len(), 1),
            spill: None,
        };
        let mut s = SimState::zeroed(0.0, 0, 3);
        pairs_to_portable(&h, &mut s, &|id| id as usize - 10);
        s
    }

    /// Pairs-once rows come out as both sides of every pair: each particle's particle entries
    /// in its partners' slot order (the walk's), the other side's springs negated, then its
    /// walls' in row order; the count word's slide flags are not counted as entries.
    #[test]
    fn pairs_once_rows_download_as_both_sides() {
        use crate::dem::state::wall_partner;
        // Slots 0, 1, 2 hold ids 10, 11, 12 in rows 2, 0, 1; slot 3 is dead. 10 keeps (10, 11),
        // 11 keeps (11, 12), 12 keeps (10, 12) (state::owns_pair).
        assert!(owns_pair(10, 11) && owns_pair(11, 12) && owns_pair(12, 10));
        let (real, cap, n) = (4usize, 4usize, 4usize);
        let eb = hist_entry_bytes(real);
        let mut bytes = vec![0u8; cap * n * eb];
        let put = |bytes: &mut Vec<u8>, row: usize, c: usize, partner: u32, xi: [f64; 3]| {
            let e = c * n + row;
            write_hist_entry(&mut bytes[e * eb..(e + 1) * eb], partner, &xi, real);
        };
        let (a, b, c, w) = (
            [1.0, 2.0, 3.0],
            [4.0, 5.0, 6.0],
            [7.0, 8.0, 9.0],
            [0.5, 0.0, 0.0],
        );
        put(&mut bytes, 2, 0, 11, a);
        put(&mut bytes, 2, 1, wall_partner(0), w);
        put(&mut bytes, 0, 0, 12, b);
        put(&mut bytes, 1, 0, 10, c);
        let flag = 1u32 << kernels::PAIRS_ROW_COUNT_BITS;
        let count = [1 | flag, 1, 2 | (flag << 1), 0];
        let s = download_pairs(&[10, 11, 12, DEAD], &[2, 0, 1, 3], &count, &bytes, real);
        assert_eq!(s.history_cap, HISTORY_CAP);
        let e = |partner, xi| HistEntry { partner, xi };
        let neg = |v: [f64; 3]| [-v[0], -v[1], -v[2]];
        let got = |i: usize| s.history_of(i).copied().collect::<Vec<_>>();
        assert_eq!(got(0), [e(11, a), e(12, neg(c)), e(wall_partner(0), w)]);
        assert_eq!(got(1), [e(10, neg(a)), e(12, b)]);
        assert_eq!(got(2), [e(10, c), e(11, neg(b))]);
    }

    /// With owner keys an upload keeps each pair in the row of the particle higher up (walls
    /// in their particle's), and those rows download as the two-sided history they were made
    /// from.
    #[test]
    fn owner_key_rows_keep_each_pair_once_and_download_whole() {
        use crate::dem::state::wall_partner;
        // Ids 10, 11, 12 at heights 0.3, 0.1, 0.2: every pair touches; 10 keeps its pairs with
        // 11 and 12, 12 its pair with 11; 11 keeps only its floor.
        let pos = vec![[0.0, 0.0, 0.3], [0.0, 0.0, 0.1], [0.0, 0.0, 0.2]];
        let mut s = SimState::new(
            0.0,
            0,
            vec![0; 3],
            pos,
            vec![[0.0; 3]; 3],
            vec![[0.0; 3]; 3],
        );
        s.id = vec![10, 11, 12];
        let (a, b, c, w) = (
            [1.0, 2.0, 3.0],
            [4.0, 5.0, 6.0],
            [7.0, 8.0, 9.0],
            [0.5, 0.0, 0.0],
        );
        let e = |partner, xi| HistEntry { partner, xi };
        let neg = |v: [f64; 3]| [-v[0], -v[1], -v[2]];
        let full = [
            vec![e(11, a), e(12, c)],
            vec![e(10, neg(a)), e(12, neg(b)), e(wall_partner(4), w)],
            vec![e(10, neg(c)), e(11, b)],
        ];
        s.history = vec![HistEntry::NONE; 3 * s.history_cap];
        for (i, row) in full.iter().enumerate() {
            s.history[i * s.history_cap..][..row.len()].copy_from_slice(row);
        }
        let keys: Vec<u32> = s.pos.iter().map(|&x| owner_key(x)).collect();
        let kept: Vec<Vec<HistEntry>> = (0..3)
            .map(|i| kept_entries(&s, i, true, &keys).copied().collect())
            .collect();
        assert_eq!(kept[0], [e(11, a), e(12, c)]);
        assert_eq!(kept[1], [e(wall_partner(4), w)]);
        assert_eq!(kept[2], [e(11, b)]);
        // By the ids instead (state::owns_pair): each pair once too, in other rows.
        let by_ids: usize = (0..3).map(|i| kept_entries(&s, i, true, &[]).count()).sum();
        assert_eq!(by_ids, 4);
        assert_eq!(kept_entries(&s, 1, false, &keys).count(), 3);
        // The rows as the device holds them (slot = index, slot-major), downloaded.
        let (real, cap, n) = (8usize, 3usize, 3usize);
        let eb = hist_entry_bytes(real);
        let mut bytes = vec![0u8; cap * n * eb];
        for (k, row) in kept.iter().enumerate() {
            for (c, h) in row.iter().enumerate() {
                let at = c * n + k;
                write_hist_entry(&mut bytes[at * eb..(at + 1) * eb], h.partner, &h.xi, real);
            }
        }
        let count: Vec<u32> = kept.iter().map(|r| r.len() as u32).collect();
        let out = download_pairs(&[10, 11, 12], &[0, 1, 2], &count, &bytes, real);
        for (i, row) in full.iter().enumerate() {
            assert_eq!(
                out.history_of(i).copied().collect::<Vec<_>>(),
                *row,
                "particle {i}"
            );
        }
    }

    /// A row of more entries than its inline `cap` keeps `cap - 1` of them inline and the rest
    /// in a spill row linked from entry `cap - 1` (`place_row`, as `dem_springs` writes it), and
    /// downloads as the entries it was made of, in their order; shorter rows stay inline.
    #[test]
    fn spill_rows_download_as_their_rows() {
        use crate::dem::state::wall_partner;
        let (real, cap, width, n) = (4usize, 3usize, 4usize, 4usize);
        let eb = hist_entry_bytes(real);
        let e = |partner, xi| HistEntry { partner, xi };
        let (a, b, c) = ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]);
        let w = |f: u32| [0.25 * (f + 1) as f64, 0.0, -0.5];
        // Ids 10, 11, 12 in slots 0, 1, 2 (rows 2, 0, 1); slot 3 dead. 10 keeps (10, 11) and
        // four walls: five entries in rows of three.
        let mut own: Vec<Vec<HistEntry>> = vec![
            [e(11, a)]
                .into_iter()
                .chain((0..4).map(|f| e(wall_partner(f), w(f))))
                .collect(),
            vec![e(12, b)],
            vec![e(10, c)],
        ];
        let (mut spill, mut links) = (Vec::new(), 0u32);
        let counts: Vec<usize> = own.iter().map(Vec::len).collect();
        for row in own.iter_mut() {
            place_row(row, cap, width, &mut spill, &mut links, real);
        }
        assert_eq!(links, 1);
        assert_eq!(spill.len(), width * eb);
        assert_eq!(own[0].len(), cap);
        assert_eq!(own[0][cap - 1].partner, 0, "entry cap - 1 holds the link");
        assert_eq!(own[1], [e(12, b)]);
        let rows = [2u32, 0, 1, 3];
        let mut bytes = vec![0u8; cap * n * eb];
        for (k, row) in own.iter().enumerate() {
            for (c, h) in row.iter().enumerate() {
                let at = c * n + rows[k] as usize;
                write_hist_entry(&mut bytes[at * eb..(at + 1) * eb], h.partner, &h.xi, real);
            }
        }
        let mut count = [0u32; 4];
        for (k, &m) in counts.iter().enumerate() {
            count[rows[k] as usize] = m as u32;
        }
        let ids = [10, 11, 12, DEAD];
        let h = DeviceHistory {
            ids: &ids,
            rows: &rows,
            count: &count,
            bytes: &bytes,
            real,
            strides: (n, 1),
            spill: Some(SpillRows {
                bytes: &spill,
                width,
                cap,
            }),
        };
        let mut s = SimState::zeroed(0.0, 0, 3);
        pairs_to_portable(&h, &mut s, &|id| id as usize - 10);
        let neg = |v: [f64; 3]| [-v[0], -v[1], -v[2]];
        let got = |i: usize| s.history_of(i).copied().collect::<Vec<_>>();
        let walls: Vec<HistEntry> = (0..4).map(|f| e(wall_partner(f), w(f))).collect();
        assert_eq!(got(0), [vec![e(11, a), e(12, neg(c))], walls].concat());
        assert_eq!(got(1), [e(10, neg(a)), e(12, b)]);
        assert_eq!(got(2), [e(10, c), e(11, neg(b))]);
        // A row of exactly `cap` entries, and any row without spill rows, stays as it is.
        let mut full = vec![e(1, a), e(2, b), e(3, c)];
        place_row(&mut full, cap, width, &mut spill, &mut links, real);
        assert_eq!(full, [e(1, a), e(2, b), e(3, c)]);
        let mut long = own[0].clone();
        place_row(&mut long, cap, 0, &mut spill, &mut links, real);
        assert_eq!((long.len(), links), (cap, 1));
    }

    /// The spill rows grow before they run out: past three quarters taken, to twice that.
    #[test]
    fn spill_rows_grow_from_what_a_step_took() {
        assert_eq!(spill_rows_after(4096, 0), None);
        assert_eq!(spill_rows_after(4096, 3072), None);
        assert_eq!(spill_rows_after(4096, 3073), Some(6146));
        assert_eq!(spill_rows_after(100, 100), Some(200));
        assert_eq!(spill_rows_after(u32::MAX, u32::MAX), None);
        assert_eq!(spill_start_rows(10_000_000, 0), 312_500);
        assert_eq!(spill_start_rows(1000, 0), 4096);
        assert_eq!(spill_start_rows(10_000_000, 7), 7);
    }

    /// A frame part crosses as bytes and back unchanged; a wrong length is named, not trusted.
    #[test]
    fn frame_parts_cross_as_bytes() {
        let n = 5;
        let ids: Vec<u32> = (0..n).map(|k| 7 * k + 1).collect();
        let vec = |s: f32| -> Vec<[f32; 3]> {
            (0..n)
                .map(|k| [s * k as f32, -0.5 * s, f32::MIN_POSITIVE * k as f32])
                .collect()
        };
        let part: FrameKinematics = (ids, [vec(1.0), vec(2.5), vec(-3.0), vec(1e30)], vec![3; 5]);
        let bytes = frame_part_bytes(&part);
        assert_eq!(Some(bytes.len()), frame_part_len(n as usize));
        assert_eq!(frame_part_from_bytes(&bytes).expect("decodes"), part);
        let empty: FrameKinematics = (vec![], [vec![], vec![], vec![], vec![]], vec![]);
        assert_eq!(
            frame_part_from_bytes(&frame_part_bytes(&empty)).expect("empty"),
            empty
        );
        let err = frame_part_from_bytes(&bytes[..bytes.len() - 1]).expect_err("short");
        assert!(err.contains("for 5 particles"), "{err}");
        assert!(frame_part_from_bytes(&[1, 2]).is_err());
        let mut huge = bytes.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(frame_part_from_bytes(&huge).is_err());
    }

    /// The portable history (`cap` slots per id) of a device history in f64.
    fn export(
        ids: &[u32],
        rows: &[u32],
        count: &[u32],
        (partner, xi): (&[u32], &[f64]),
        strides: (usize, usize),
        cap: usize,
    ) -> Vec<HistEntry> {
        let mut out = vec![HistEntry::NONE; ids.len() * cap];
        let h = DeviceHistory {
            ids,
            rows,
            count,
            bytes: &pack_hist(partner, xi, 8),
            real: 8,
            strides,
            spill: None,
        };
        history_to_portable(&h, cap, &mut out, &|id| id as usize);
        out
    }

    /// Device history entries survive packing and unpacking in both precisions (f32 rounds the
    /// springs once, f64 keeps them), partners included.
    #[test]
    fn history_entries_pack_and_unpack() {
        let partner = [7u32, PARTNER_NONE, 0x8000_0003];
        let xi = [0.1, -2.5e-7, 3.0, 0.0, 0.0, 0.0, 1e-12, 5.0, -0.75];
        for real in [4usize, 8] {
            let bytes = pack_hist(&partner, &xi, real);
            assert_eq!(bytes.len(), 3 * hist_entry_bytes(real));
            let eb = hist_entry_bytes(real);
            for (e, &q) in partner.iter().enumerate() {
                let h = read_hist_entry(&bytes[e * eb..(e + 1) * eb], real);
                assert_eq!(h.partner, q);
                for (a, b) in h.xi.iter().zip(&xi[3 * e..3 * e + 3]) {
                    let want = if real == 8 { *b } else { *b as f32 as f64 };
                    assert_eq!(a.to_bits(), want.to_bits());
                }
            }
        }
    }

    /// Row-major device history (entry c of slot k at k * cap + c) exports like slot-major.
    #[test]
    fn row_major_history_exports_like_slot_major() {
        let (n, cap) = (3usize, 4usize);
        let ids = [2u32, 0, 1];
        let count = [1u32, 4, 2];
        for layout in [
            super::super::HistLayout::SlotMajor,
            super::super::HistLayout::RowMajor,
        ] {
            let (sc, sr) = layout.strides(n, cap);
            let mut partner = vec![PARTNER_NONE; cap * n];
            let mut xi = vec![0f64; 3 * cap * n];
            for k in 0..n {
                for c in 0..count[k] as usize {
                    partner[c * sc + k * sr] = (10 * k + c) as u32;
                    xi[3 * (c * sc + k * sr) + 1] = c as f64 + 0.5;
                }
            }
            let out = export(&ids, &[0, 1, 2], &count, (&partner, &xi), (sc, sr), cap);
            // Particle 0 is slot 1 (4 entries), particle 2 is slot 0 (1 entry).
            assert_eq!(out[3].partner, 13, "{layout:?}");
            assert_eq!(out[3].xi[1], 3.5, "{layout:?}");
            assert_eq!(out[2 * cap].partner, 0, "{layout:?}");
            assert_eq!(out[2 * cap + 1].partner, PARTNER_NONE, "{layout:?}");
            assert_eq!(out[cap + 1].partner, 21, "{layout:?}");
        }
    }

    /// Rows are not slots once particles have moved: slot k's particle reads its entries from
    /// row `rows[k]`, and the entry counts are by row.
    #[test]
    fn export_reads_each_slot_at_its_row() {
        let (rows_n, cap) = (4usize, 2usize);
        // Slots 0, 1, 2 hold ids 1, none (dead), 0 at rows 3, 0, 1; row 2 is free (its count
        // is stale and must not be read).
        let ids = [1u32, DEAD, 0];
        let rows = [3u32, 0, 1];
        let count = [2u32, 0, 1, 1];
        let mut partner = vec![PARTNER_NONE; cap * rows_n];
        let mut xi = vec![0f64; 3 * cap * rows_n];
        for r in 0..rows_n {
            for c in 0..count[r] as usize {
                partner[c * rows_n + r] = (10 * r + c) as u32;
                xi[3 * (c * rows_n + r)] = r as f64;
            }
        }
        let out = export(&ids, &rows, &count, (&partner, &xi), (rows_n, 1), cap);
        // Id 1 (slot 0) has row 3's one entry; id 0 (slot 2) row 1's none.
        assert_eq!(out[cap].partner, 30);
        assert_eq!(out[cap].xi[0], 3.0);
        assert_eq!(out[cap + 1].partner, PARTNER_NONE);
        assert_eq!(out[0].partner, PARTNER_NONE);
    }

    /// Two particles (slots swapped against ids) with 18 and 2 device entries of 20: the
    /// portable state keeps all of them, in order, under the particles' ids.
    #[test]
    fn export_keeps_every_entry_in_id_order() {
        let (n, cap) = (2usize, 20usize);
        let ids = [1u32, 0];
        let count = [18u32, 2];
        let mut partner = vec![0u32; cap * n];
        let mut xi = vec![0f64; 3 * cap * n];
        for c in 0..cap {
            for k in 0..n {
                partner[c * n + k] = (100 * k + c) as u32;
                xi[3 * (c * n + k)] = c as f64;
            }
        }
        let out = export(&ids, &[0, 1], &count, (&partner, &xi), (n, 1), cap);
        // Slot 0 is particle 1: 18 entries, in order.
        let p1 = &out[cap..];
        assert!(p1[..18].iter().all(|e| e.partner != PARTNER_NONE));
        assert_eq!(p1[17].partner, 17);
        assert_eq!(p1[17].xi[0], 17.0);
        assert_eq!(p1[18].partner, PARTNER_NONE);
        // Slot 1 is particle 0: 2 entries.
        assert_eq!(out[0].partner, 100);
        assert_eq!(out[1].partner, 101);
        assert_eq!(out[2].partner, PARTNER_NONE);
    }
}
