//! CUDA backend: the DEM step of the CPU reference run from `kernels/` on an NVIDIA GPU.
//!
//! One [`CudaSim`] owns a device context, two streams (compute, copy), the particle state in
//! (cell, id)-sorted order, the neighbour-search arrays and the publication staging buffers.
//! A step is: hash + count per cell, scan, scatter, per-cell id order, gather into the scratch
//! copy, then the fused collide + integrate kernel writing back (stages `prepare`, `reorder`,
//! `collide`; see `step.rs`). Publication packs into id order on the device and copies to the
//! host on the copy stream while the next steps run (`publish.rs`).
//!
//! Nothing here touches cudarc before [`driver::driver_available`] said the driver loads:
//! cudarc panics when `libcuda.so.1` is missing; we return [`CudaError::NoDriver`] instead.

mod backend_impl;
mod buffers;
pub mod driver;
mod energies;
mod graph;
pub mod kernel_cache;
mod mesh;
mod multi;
mod outflow;
pub mod params;
mod publish;
mod ranks;
pub(crate) mod road;
mod skin;
mod step;
mod window;

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, DriverError};
use kernels::ModuleConfig;

use crate::case::{Case, CaseError};
use crate::dem::physics::ContactModel;
use crate::dem::state::{SimState, StepContext};

pub use backend_impl::CudaBackend;
pub use buffers::{gpu_grid, MemoryReport};
pub(crate) use multi::{enable_peer_access, neighbour, queue_peer_copies, PeerCopy};
pub use multi::{CudaGroup, GroupOptions};
pub use publish::{register_host, FrameTarget, HostRegistration, PublishTicket};
pub use ranks::{CudaRank, RankOptions};
pub use skin::{auto_skin, skin_path_step, skin_search_cells, DEFAULT_SKIN, SKIN_AUTO};
pub use step::StageTimes;
pub(crate) use step::{exclusive_scan, scan_level_sizes};
pub use window::ExchangeCounts;

use buffers::DeviceState;
use driver::DemModule;
use mesh::GpuMeshes;
use params::DemParams;

/// Why the CUDA backend cannot start or continue. Messages are one line, for the CLI.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    #[error("no NVIDIA driver found (libcuda.so.1 cannot be loaded); use --backend cpu")]
    NoDriver,
    #[error("CUDA device {device} not available: {message}")]
    NoDevice { device: usize, message: String },
    #[error("CUDA driver error while {what}: {source}")]
    Driver {
        what: String,
        #[source]
        source: DriverError,
    },
    #[error("compiling the CUDA kernels with NVRTC failed: {0}")]
    Compile(String),
    #[error(
        "the case does not fit on GPU {device}: {particles} particles need {need_gib:.2} GiB \
         ({bytes_per_particle:.0} B/particle), {free_gib:.2} GiB are free; at most about {max_particles} particles fit"
    )]
    DoesNotFit {
        device: usize,
        particles: usize,
        need_gib: f64,
        free_gib: f64,
        bytes_per_particle: f64,
        max_particles: u64,
    },
    #[error(
        "the case does not fit on {gpus} GPUs: {particles} particles give GPU {device} a share of \
         {share}, which needs {need} particle slots with room for migration and ghosts, but it \
         holds {fit} besides its exchange buffers{staging} ({bytes_per_particle:.0} B/particle); \
         at most about {max_particles} particles fit on these GPUs: use more GPUs or fewer particles",
        staging = if *device == 0 { " and the frame staging" } else { "" }
    )]
    GroupDoesNotFit {
        gpus: usize,
        particles: usize,
        device: usize,
        share: usize,
        need: usize,
        fit: usize,
        bytes_per_particle: f64,
        max_particles: u64,
    },
    #[error("the CUDA backend does not support {0} yet; use --backend cpu")]
    Unsupported(String),
    #[error("{0} particles is more than the CUDA backend's limit of {1}")]
    TooManyParticles(usize, u64),
    #[error("a CUDA backend lock was poisoned by a panic in another thread")]
    Poisoned,
    #[error("{count} particles have a non-finite state after step {step}")]
    NonFinite { count: u32, step: u64 },
    /// Raised by [`CudaSim::check_diag`] (every batch of steps) when a contact found its
    /// particle's history full: its tangential spring would have been lost, changing the
    /// friction silently. Only modules with friction keep (and count) history; without friction
    /// there is no spring to lose.
    #[error(
        "{count} contacts found their particle's contact history full ({cap} entries) in the steps up to {step}: \
         their tangential springs could not be kept, which changes the friction; a particle touches more \
         than {cap} partners (walls and mesh triangles included; a pairs-once row holds the pairs its \
         particle owns, about half its contacts, and its walls), e.g. a large sphere among many small \
         ones; more entries per particle (solver --gpu-memory compact:N, dem-gpu-bench --hist-cap) or the CPU backend (--backend cpu, \
         which keeps the first {cpu_cap} and counts the rest) run it",
        cpu_cap = crate::dem::state::HISTORY_CAP
    )]
    HistoryOverflow { count: u32, cap: u32, step: u64 },
    /// Raised by the periodic checks when a step asked for more spill rows
    /// (`CudaOptions::hist_spill`) than there were: the contacts of the particles left without
    /// one lost their tangential springs (the buffers grow from what the steps take, but not
    /// within one step).
    #[error(
        "a step asked for {needed} spill rows of contact history but there were {rows} (in the steps \
         up to {step}): the contacts of the particles left without one lost their tangential springs, \
         which changes the friction; more particles outgrew their rows at once than the spill rows had \
         grown to; longer rows spill less (solver --gpu-memory compact:N with a larger N, \
         dem-gpu-bench --hist-cap)"
    )]
    SpillFull { needed: u32, rows: u32, step: u64 },
    #[error(
        "GPU {device} needs {need} particle slots (its particles, ghosts and arrivals) but has room \
         for {capacity}: the load moved faster than the balancing; run on fewer GPUs or with \
         --balance count"
    )]
    WindowFull {
        device: usize,
        need: u64,
        capacity: u64,
    },
    #[error("{count} particles crossed a whole neighbour GPU's slab in one step (after step {step}); the time step is probably too large")]
    SlabSkipped { count: u32, step: u64 },
    #[error(
        "internal error: after step {step} GPU {gpu} holds {held} ghosts of its {side} neighbour's \
         boundary layer, which lists {sent} (or {mismatched} ghost records named another particle \
         than their slot); please report this with the case"
    )]
    GhostLists {
        step: u64,
        gpu: usize,
        side: &'static str,
        held: u32,
        sent: u32,
        mismatched: u32,
    },
    #[error(
        "{gpus} GPUs need at least {min} layers each along {axis} (a layer: one cell for DEM, the \
         kernel support for SPH), and the domain has {layers}: use fewer GPUs (or split along a longer axis)"
    )]
    TooFewLayers {
        gpus: usize,
        layers: u32,
        min: u32,
        axis: &'static str,
    },
    #[error("GPUs {a} and {b} cannot access each other's memory (peer access): {message}")]
    NoPeerAccess { a: usize, b: usize, message: String },
    #[error("another MPI rank failed (after step {step}); its output says why")]
    OtherRank { step: u64 },
}

impl From<crate::sph::slabs::TooFewLayers> for CudaError {
    fn from(e: crate::sph::slabs::TooFewLayers) -> CudaError {
        CudaError::TooFewLayers {
            gpus: e.slabs,
            layers: e.layers,
            min: e.min,
            axis: e.axis,
        }
    }
}

impl CudaError {
    pub(crate) fn driver(what: &str, source: DriverError) -> Self {
        CudaError::Driver {
            what: what.to_string(),
            source,
        }
    }
}

/// Host bytes per particle the CUDA backend needs while it starts: the initial state
/// (`case::STATE_BYTES_PER_PARTICLE`, dropped once uploaded) and the upload's temporaries (ids:
/// u32; positions and velocities flattened, and velocities converted to `real`: 3 x f64 x 3).
/// `sim::Simulation` checks it against the available memory before placing particles. Not
/// counted: a snapshot or checkpoint downloads the whole state again (about
/// `STATE_BYTES_PER_PARTICLE` + 28 B per history entry); such output of a case at the limit of
/// the host's memory can still run out of it.
pub const HOST_BYTES_PER_PARTICLE: u64 = crate::case::STATE_BYTES_PER_PARTICLE + 4 + 3 * 24;

/// Particle contacts a collide thread buffers before evaluating them (contact.cu, issue 13):
/// 16 holds the 12 neighbours of a dense monodisperse pack in one pass.
pub const DEFAULT_CANDIDATES: u32 = 16;

/// Most words one [`CudaSim::read_words`] reads.
const SMALL_READ_WORDS: usize = 8;

/// Options of the CUDA backend.
#[derive(Debug, Clone, PartialEq)]
pub struct CudaOptions {
    /// Device ordinal (`--devices`).
    pub device: usize,
    /// `real` = double on the device (parity runs against the CPU; about 2x slower).
    pub double: bool,
    /// Contact history entries per particle (12 neighbours of a monodisperse packing, 3 walls
    /// and a margin). Overflow is reported as an error ([`CudaError::HistoryOverflow`] at the
    /// next diagnostics check), never silently dropped. An exported state or checkpoint holds
    /// `hist_cap` entries per particle (the CPU backend, which keeps
    /// [`crate::dem::state::HISTORY_CAP`], keeps the first of them).
    pub hist_cap: u32,
    /// Record CUDA events around every kernel ([`CudaSim::stage_times`] per kernel); costs a
    /// synchronisation per step.
    pub profile: bool,
    /// Check the integer diagnostics (non-finite state, history overflow) every this many steps
    /// (0: never) within a call of [`CudaSim::steps`]; `CudaBackend` also checks at the end of
    /// every batch. Each check synchronises.
    pub check_every: u64,
    /// Keep the last step's contact force and contact count per particle (+16 B/particle), for
    /// snapshots, VTK output and the force field of frames: written on the last step of each
    /// call of [`CudaSim::steps`], which is when they are read.
    pub store_forces: bool,
    /// Where history entry c of a particle's row lives ([`HistLayout`]).
    pub hist_layout: HistLayout,
    /// Particle contacts buffered per collide thread before evaluation
    /// ([`kernels::ModuleConfig::candidates`]; 0 = evaluate as found).
    pub candidates: u32,
    /// `__launch_bounds__` minimum blocks of the collide (0 = the measured default).
    pub min_blocks: u32,
    /// Particles inflow sources will add (slots reserved at start; inflow runs only).
    pub inflow_room: usize,
    /// Ids of the run are below this (0: below the state's largest + 1).
    pub id_limit: u32,
    /// Replay each step's launches as a captured CUDA graph (one GPU; false launches every
    /// kernel, for comparison: `dem-gpu-bench --graphs off`).
    pub graphs: bool,
    /// How the frictional contact history is kept ([`HistoryMode`]).
    pub history: HistoryMode,
    /// Verlet skin of the neighbour search as a fraction of the largest particle diameter
    /// (`skin.rs`): the search runs every few steps instead of every step. [`SKIN_AUTO`] (the
    /// default): [`auto_skin`] of the case's particles (slots reserved included). 0: every step, the
    /// setting under which one GPU's f32 bits equal a group's; ignored (0) in f64, with velocity
    /// Verlet, and where the caller sets 0 (groups, ranks, inflow, outflow).
    pub skin: f64,
    /// With a skin: keep a Verlet list per particle (`skin::LIST_CAP` slots, 100 B/particle)
    /// that the collide walks between searches instead of the cells, when the case fits with it.
    pub neighbour_list: bool,
    /// How the collide walks the Verlet list ([`kernels::LIST_BY_WARP`], the default, or
    /// always buffered / unbuffered, for comparisons: `dem-gpu-bench --list-walk`). The same
    /// contacts in the same order, hence the same bits, whichever.
    pub list_walk: u32,
    /// Whether a GPU of a group refreshes its ghosts between a skin's searches beside the
    /// collide of the slots that do not read them (multi.rs), or before the whole collide.
    /// None (the default): beside it where every slab has a GPU of its own, before it where
    /// slabs share one (no transfer to hide; measured 2-5 % slower beside it on two slabs of one
    /// H100). `dem-gpu-bench multi --overlap on|off|auto` compares them. The same bits either way.
    pub overlap: Option<bool>,
    /// Set by a GPU group and GPU ranks for their slabs with a skin: the collide is compiled
    /// with its two passes (`kernels::ModuleConfig::passes`).
    pub slab: bool,
    /// A case that does not fit the device with the Verlet list (and, with [`HistoryMode::Auto`],
    /// two history buffers) drops them (true, the default). A GPU group's slabs turn this off:
    /// they size their slots themselves and take the fast configuration with room for their
    /// share before a slower one with room for every particle (`multi.rs`, `slab_sim`).
    pub memory_fallbacks: bool,
    /// This GPU may publish frames on its own, so its memory plan holds their staging
    /// (`publish::STAGING_BYTES_PER_PARTICLE` per slot; true, the default). Off for the slabs
    /// of a group, whose frames GPU 0 stages for every particle (planned as the group's), and
    /// of GPU ranks, which download their part: 52 B a slot that they never allocate.
    pub frame_staging: bool,
    /// How many copies of the particle state the device keeps ([`StateCopies`]).
    pub state_copies: StateCopies,
    /// With [`HistoryMode::Pairs`]: entries of a spill row (0: none). A row that needs more
    /// than `hist_cap` entries (a site at a wall, a particle among smaller ones) keeps its first
    /// `hist_cap - 1` inline and the rest, up to this many, in a spill row taken afresh each
    /// step from two small buffers that grow with what the run takes (`buffers::Spill`), so
    /// `hist_cap` can follow the common particle instead of the busiest.
    pub hist_spill: u32,
    /// Spill rows the buffers start with (0: one per 32 particle slots, 4,096 at least, and
    /// as many as the first step will take: `CudaSim::size_spill`); tests set a number, which
    /// is kept as it is, to see them grow or run out.
    pub spill_start: u32,
    /// Where pairs-once rows with spill rows live with one copy of the state on one GPU:
    /// decide each pair's owner from the particles' positions (owner keys, `DEM_OWNER_KEYS` in
    /// contact.cu; true, the default), so rows hold about half of any particle's contacts
    /// whatever its id, or from the ids (false: rows as long as the ids' order needs).
    pub owner_keys: bool,
    /// One GPU with symplectic Euler: a published frame's positions, velocities and angular
    /// velocities are written by the next step's collide, which loads them anyway, instead of
    /// by `dem_pack` at once (true, the default; `publish.rs`). False packs every frame at
    /// once, for comparison (`dem-gpu-bench publish --frame-pack now`). The same frames.
    pub defer_frames: bool,
}

/// Entries of a pairs-once row in the compact layout (`solver --gpu-memory compact`, and the
/// last of `auto`'s fallbacks): a particle keeps the pairs with its contacts below it
/// ([`CudaOptions::owner_keys`]), about half its contacts, 6 of 12 in a close packing, and its
/// walls; a row that needs more takes a spill row.
pub const COMPACT_ROWS: u32 = 6;

/// Entries of a spill row behind compact rows of [`COMPACT_ROWS`].
pub const COMPACT_SPILL: u32 = 6;

/// `opts` in the compact layout (`solver --gpu-memory compact:rows`, the tests' compact mode):
/// each pair's spring once in rows of `rows` entries with spill rows of `spill`, and the fewest
/// copies of the state the case allows ([`StateCopies::Fewest`]).
pub fn compact_options(opts: CudaOptions, rows: u32, spill: u32) -> CudaOptions {
    CudaOptions {
        history: HistoryMode::Pairs,
        hist_cap: rows,
        hist_spill: spill,
        state_copies: StateCopies::Fewest,
        ..opts
    }
}

/// Copies of the particle state on one GPU (contact.cu, `DEM_SINGLE_COPY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateCopies {
    /// Two when the case fits with them (and one history buffer in place, with friction), else
    /// one where it can (one GPU, symplectic Euler).
    #[default]
    Auto,
    /// The state and the scratch copy the search gathers into and the fused collide integrates
    /// into: the fastest.
    Two,
    /// One copy: the collide stores forces and torques, `dem_integrate` moves the particles in
    /// place, a search reorders one array at a time through the force buffer. 44 B less per
    /// frictional particle (56 B of state and 12 of search arrays for 24 of forces), a contact
    /// history in place; one GPU with symplectic Euler only.
    One,
    /// One where the case allows it, else two, said in the log (`solver --gpu-memory compact`:
    /// velocity Verlet keeps two, as its last forces must survive the search).
    Fewest,
}

impl StateCopies {
    /// `auto`, `2`, `1` (command-line spelling).
    pub fn parse(s: &str) -> Option<StateCopies> {
        match s {
            "auto" => Some(StateCopies::Auto),
            "2" => Some(StateCopies::Two),
            "1" => Some(StateCopies::One),
            "fewest" => Some(StateCopies::Fewest),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            StateCopies::Auto => "auto",
            StateCopies::Two => "2",
            StateCopies::One => "1",
            StateCopies::Fewest => "fewest",
        }
    }
}

/// How the contact history of a frictional case is kept on the device (contact.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistoryMode {
    /// Two buffers when the case fits with them, else one updated in place.
    #[default]
    Auto,
    /// Two buffers (the new history written beside the old): fastest, 2 x `hist_cap` entries
    /// per particle.
    Double,
    /// One buffer updated in place: `hist_cap` entries per particle (256 B less with f32
    /// springs), the collide about a quarter slower.
    InPlace,
    /// One buffer updated in place, each particle pair's spring kept once (by
    /// `state::owns_pair`'s particle): rows of `hist_cap` entries hold about half the contacts,
    /// so a smaller `hist_cap` serves, at the cost of a second walk over the contacts
    /// (`dem_springs`). One GPU only; chosen explicitly (`dem-gpu-bench --history pairs
    /// --hist-cap N`), never by `Auto`, since a row that overflows is an error, not a resize.
    Pairs,
}

impl HistoryMode {
    /// `auto`, `double`, `in-place`, `pairs` (command-line spelling).
    pub fn parse(s: &str) -> Option<HistoryMode> {
        match s {
            "auto" => Some(HistoryMode::Auto),
            "double" => Some(HistoryMode::Double),
            "in-place" => Some(HistoryMode::InPlace),
            "pairs" => Some(HistoryMode::Pairs),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            HistoryMode::Auto => "auto",
            HistoryMode::Double => "double",
            HistoryMode::InPlace => "in-place",
            HistoryMode::Pairs => "pairs",
        }
    }
}

/// Layout of the contact history on the device: entry c of history row r at `c * n + r`
/// (slot-major: a warp's threads reading their c-th entries read consecutive entries) or at
/// `r * hist_cap + c` (row-major: a particle's entries are consecutive). Both are kept so that
/// benchmarks can compare them (`dem-gpu-bench --hist-layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistLayout {
    #[default]
    SlotMajor,
    RowMajor,
}

impl HistLayout {
    /// (stride of the entry index, stride of the row) for `n` rows of `cap` entries.
    pub fn strides(self, n: usize, cap: usize) -> (usize, usize) {
        match self {
            HistLayout::SlotMajor => (n, 1),
            HistLayout::RowMajor => (1, cap),
        }
    }
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            device: 0,
            double: false,
            hist_cap: crate::dem::state::HISTORY_CAP as u32,
            profile: false,
            check_every: 1000,
            store_forces: false,
            hist_layout: HistLayout::SlotMajor,
            candidates: DEFAULT_CANDIDATES,
            min_blocks: 0,
            inflow_room: 0,
            id_limit: 0,
            graphs: true,
            history: HistoryMode::Auto,
            skin: skin::SKIN_AUTO,
            neighbour_list: true,
            list_walk: kernels::LIST_BY_WARP,
            overlap: None,
            slab: false,
            memory_fallbacks: true,
            frame_staging: true,
            state_copies: StateCopies::Auto,
            hist_spill: 0,
            spill_start: 0,
            owner_keys: true,
            defer_frames: true,
        }
    }
}

/// The DEM simulation on one GPU.
pub struct CudaSim {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    copy_stream: Arc<CudaStream>,
    module: Arc<DemModule>,
    cfg: ModuleConfig,
    opts: CudaOptions,
    params: DemParams,
    state: DeviceState,
    step_index: u64,
    time: f64,
    end_time: f64,
    times: StageTimes,
    /// The timed step of the last batch, waiting for the device (see `step.rs`).
    sample: Option<step::Sample>,
    /// When the last sample was taken: one at most every [`step::SAMPLE_EVERY`] (its step is
    /// launched directly, not replayed as a graph).
    last_sample: Option<std::time::Instant>,
    /// Steps since the last sample that no sample stands for yet (the next one will).
    unsampled: u64,
    /// Events of harvested samples, reused (no event is created per batch once warm).
    spare_events: Vec<cudarc::driver::CudaEvent>,
    publish: publish::PublishState,
    /// Page-locked words that a kernel writes (`CudaSim::read_words`): the step's small reads
    /// (diagnostics, the skin's largest move, the outflow count, the spill rows taken).
    words_out: window::MappedWords,
    device_name: String,
    history_overflows: u64,
    last_contacts: u64,
    /// Triangle meshes (None without).
    meshes: Option<GpuMeshes>,
    /// Velocity Verlet: whether the stored forces belong to the current positions.
    forces_valid: bool,
    /// One GPU of several: its slab, ghosts and exchange buffers (`window.rs`).
    window: Option<window::Window>,
    /// Outflow regions (`outflow.rs`), if the case has any.
    outflow: Option<outflow::Outflows>,
    /// Velocity Verlet's step stopped after its drift ([`CudaSim::steps_to_placement`]).
    mid_step: bool,
    /// Captured graphs of the step's launches (`graph.rs`).
    graphs: graph::GraphCache,
    /// Set by [`CudaSim::steps`] on all but the last step of a call: the collide does not
    /// store the per-particle forces, torques and contact counts, which only the state after
    /// the call shows (frames, downloads); velocity Verlet, which integrates with them, always
    /// stores.
    skip_stores: bool,
    /// Dynamic shared memory of `dem_collide` and `dem_energies` [bytes]: each thread's copy of
    /// its old history row (`hist_cap` entries; 0 without friction).
    collide_shared: u32,
    /// The Verlet skin's schedule (`skin.rs`; None: a search every step).
    skin: Option<skin::Skin>,
    /// A GPU group's decision for the next step (search or not), which replaces this sim's own
    /// schedule: every GPU of a group searches at the same steps (multi.rs).
    search_override: Option<bool>,
    /// One copy of the state: a search outside a step (the energies') reordered the state
    /// through the force buffer, so the last step's forces are gone until the next collide.
    forces_stale: bool,
    /// Spill rows: whether they were sized for the state's contacts since it was uploaded
    /// (`CudaSim::size_spill`).
    spill_sized: bool,
}

/// Dynamic shared memory the collide needs per block: with the history in place, each of its
/// `COLLIDE_THREADS` threads stages its old history row (`hist_cap` entries) there before it
/// writes the new one over it (contact.cu). Refused with a reason when that and the kernels'
/// static shared memory (the candidate buffer, the energy sums) exceed what the device grants
/// one block.
fn collide_shared_bytes(
    ctx: &Arc<CudaContext>,
    cfg: ModuleConfig,
    opts: &CudaOptions,
) -> Result<u32, CudaError> {
    if !(cfg.friction && cfg.hist_in_place) {
        return Ok(0);
    }
    if cfg.hist_pairs && opts.hist_cap > kernels::PAIRS_MAX_ROW {
        return Err(CudaError::Unsupported(format!(
            "a pairs-once contact history of {} entries per row: at most {} (a row's count \
             word holds a slide flag per entry); each row holds about half a particle's contacts",
            opts.hist_cap,
            kernels::PAIRS_MAX_ROW
        )));
    }
    let threads = kernels::COLLIDE_THREADS as u64;
    let entry = buffers::hist_entry_bytes(if cfg.double { 8 } else { 4 }) as u64;
    let stage = opts.hist_cap as u64 * entry * threads;
    // dem_energies' per-thread sums (4 doubles) and the candidate slots (u32) are static.
    let fixed = threads * (4 * 8 + 4 * cfg.candidates as u64);
    let limit = ctx
        .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .map_err(|e| CudaError::driver("querying the shared memory per block", e))? as u64;
    if stage + fixed > limit {
        return Err(CudaError::Unsupported(format!(
            "a contact history of {} entries per particle: the collide stages a row per thread, \
             {} bytes per block of {threads} threads with its other buffers, and the device \
             grants {limit} (at most {} entries{})",
            opts.hist_cap,
            stage + fixed,
            limit.saturating_sub(fixed) / (entry * threads),
            if cfg.double { " in f64" } else { "" }
        )));
    }
    Ok(stage as u32)
}

/// Whether one copy of the particle state can run the case (`StateCopies::One`): one GPU (a
/// group's and a rank's exchange unpack into the scratch copy), symplectic Euler (velocity
/// Verlet's opening half kick reads the last forces after a search that reuses their buffer),
/// and with friction a history in place (two history buffers are swapped between the copies).
fn single_copy_possible(
    sc: &StepContext,
    opts: &CudaOptions,
    friction: bool,
) -> Result<(), CudaError> {
    let why = if opts.slab {
        Some("a GPU of a group or an MPI rank keeps two")
    } else if sc.integrator == crate::case::Integrator::VelocityVerlet {
        Some("velocity Verlet keeps its last forces across the search, which reuses their buffer")
    } else if friction && opts.history == HistoryMode::Double {
        Some("two contact history buffers need two copies; use the history `in-place` or `pairs`")
    } else {
        None
    };
    match why {
        Some(w) => Err(CudaError::Unsupported(format!(
            "one copy of the particle state (`solver --gpu-memory compact`, `dem-gpu-bench --copies \
             1`): {w}"
        ))),
        None => Ok(()),
    }
}

/// Whether spill rows ([`CudaOptions::hist_spill`]) can extend the rows of this history: pairs
/// once, one GPU (a group's and a rank's exchange move rows whole), rows of at least two
/// entries (one inline beside the link), and a slide flag per entry in a row's count word.
fn spill_possible(opts: &CudaOptions) -> Result<(), CudaError> {
    if opts.hist_spill == 0 {
        return Ok(());
    }
    let why = if opts.history != HistoryMode::Pairs {
        Some("they extend pairs-once rows (the history `pairs`)".to_string())
    } else if opts.slab {
        Some("a GPU of a group or an MPI rank moves history rows whole".to_string())
    } else if opts.hist_cap < 2 {
        Some(format!(
            "rows of {} entry: a row needs one beside its spill row's link",
            opts.hist_cap
        ))
    } else if (opts.hist_cap - 1).saturating_add(opts.hist_spill) > kernels::PAIRS_MAX_ROW {
        Some(format!(
            "rows of {} entries and spill rows of {} hold more than {} (a row's count word holds \
             a slide flag per entry)",
            opts.hist_cap,
            opts.hist_spill,
            kernels::PAIRS_MAX_ROW
        ))
    } else {
        None
    };
    match why {
        Some(w) => Err(CudaError::Unsupported(format!(
            "spill rows of contact history (`dem-gpu-bench --hist-spill`, `solver --gpu-memory \
             compact`): {w}"
        ))),
        None => Ok(()),
    }
}

/// The kernels a case needs on one GPU with `opts` (`spin`: particles that start spinning
/// without friction) for `particles` slots; the memory check may still turn the history in
/// place.
pub(crate) fn module_config(
    sc: &StepContext,
    opts: &CudaOptions,
    spin: bool,
    particles: usize,
) -> ModuleConfig {
    let friction = case_friction(sc);
    let resolved = fewest_copies(sc, opts, friction, false);
    let opts = resolved.as_ref().unwrap_or(opts);
    let mut cfg = ModuleConfig {
        model: match sc.model {
            ContactModel::Linear => 0,
            ContactModel::HertzMindlin => 1,
        },
        friction,
        rotation: friction || spin,
        double: opts.double,
        meshes: !sc.meshes.is_empty(),
        candidates: opts.candidates,
        min_blocks: opts.min_blocks,
        // One copy of the state has no second history buffer to write into.
        hist_in_place: matches!(opts.history, HistoryMode::InPlace | HistoryMode::Pairs)
            || opts.state_copies == StateCopies::One,
        hist_pairs: opts.history == HistoryMode::Pairs,
        list_walk: opts.list_walk,
        one_species: sc.species_radius.len() == 1,
        stream_hints: particles >= kernels::STREAM_HINTS_FROM,
        passes: opts.slab,
        single_copy: opts.state_copies == StateCopies::One,
        hist_spill: opts.history == HistoryMode::Pairs && opts.hist_spill > 0,
        owner_keys: false,
    };
    cfg.owner_keys = owner_keys_possible(&cfg, opts);
    cfg
}

/// Whether the case has friction (sliding or rolling) between any two species or with a wall.
fn case_friction(sc: &StepContext) -> bool {
    sc.table
        .pp
        .iter()
        .chain(&sc.table.pw)
        .any(|p| p.mu_s > 0.0 || p.mu_r > 0.0)
}

/// `opts` with [`StateCopies::Fewest`] made one copy where [`single_copy_possible`], else two
/// (logged when `log`); `None` for any other choice.
fn fewest_copies(
    sc: &StepContext,
    opts: &CudaOptions,
    friction: bool,
    log: bool,
) -> Option<CudaOptions> {
    if opts.state_copies != StateCopies::Fewest {
        return None;
    }
    let state_copies = match single_copy_possible(sc, opts, friction) {
        Ok(()) => StateCopies::One,
        Err(why) => {
            if log {
                tracing::info!("two copies of the particle state, not one: {why}");
            }
            StateCopies::Two
        }
    };
    Some(CudaOptions {
        state_copies,
        ..opts.clone()
    })
}

/// Whether [`ModuleConfig::owner_keys`] can work: asked for, pairs-once rows with spill rows,
/// one copy of the state, slot-major rows (a search then moves the rows with the slots,
/// `CudaSim::history_moves`), one GPU.
fn owner_keys_possible(cfg: &ModuleConfig, opts: &CudaOptions) -> bool {
    opts.owner_keys
        && cfg.friction
        && cfg.hist_pairs
        && cfg.hist_spill
        && cfg.single_copy
        && opts.hist_layout == HistLayout::SlotMajor
        && !opts.slab
}

/// Compiles the DEM module a case will need on `devices` ahead, on threads of their own, while
/// the host places the particles (`driver::prefetch_module`); `meshes`: the case has meshes
/// (`sc` may be built without them); `particles`: the count its sources will place.
pub fn prefetch_kernels(
    sc: &StepContext,
    meshes: bool,
    opts: &CudaOptions,
    devices: &[usize],
    particles: usize,
) {
    let mut cfg = module_config(sc, opts, false, particles);
    cfg.meshes = meshes;
    driver::prefetch_module(devices, cfg);
}

impl CudaSim {
    /// Starts the CUDA backend from the constants and a state in id order (the same inputs as
    /// `cpu::CpuBackend::new`). Fails with a one-line reason when there is no driver, no such
    /// device, the case uses a feature the GPU backend lacks, or the case does not fit in the
    /// device's free memory.
    pub fn new(
        sc: &StepContext,
        state: &SimState,
        opts: &CudaOptions,
    ) -> Result<CudaSim, CudaError> {
        check_dense_ids(state)?;
        let spin = state.omega.iter().any(|w| *w != [0.0; 3]);
        Self::build(sc, state, opts, state.pos.len(), spin)
    }

    /// [`CudaSim::new`] for one GPU of several, or with slots reserved (inflow) or removed
    /// (outflow): `state` holds its particles (any ids below 2^32 - 1, which frames index by),
    /// in arrays of `capacity` slots. `spin`: some particle of the whole run spins (every GPU of
    /// a run compiles the same kernels). `skin`: the Verlet skin as a fraction of the largest
    /// diameter, 0 for a search every step (where slots change between steps: inflow,
    /// outflow, GPU ranks). A GPU group with a skin follows its group's search schedule.
    pub(crate) fn with_capacity(
        sc: &StepContext,
        state: &SimState,
        opts: &CudaOptions,
        capacity: usize,
        spin: bool,
        skin: f64,
    ) -> Result<CudaSim, CudaError> {
        let opts = CudaOptions {
            skin,
            ..opts.clone()
        };
        Self::build(sc, state, &opts, capacity, spin)
    }

    fn build(
        sc: &StepContext,
        state: &SimState,
        opts: &CudaOptions,
        capacity: usize,
        spin: bool,
    ) -> Result<CudaSim, CudaError> {
        driver::driver_available()?;
        let n = state.pos.len();
        let resolved;
        let opts = if opts.skin < 0.0 {
            resolved = CudaOptions {
                skin: skin::auto_skin(capacity.max(n)),
                ..opts.clone()
            };
            &resolved
        } else {
            opts
        };
        let fewest = fewest_copies(sc, opts, case_friction(sc), true);
        let opts = fewest.as_ref().unwrap_or(opts);
        if n as u64 > crate::dem::state::MAX_PARTICLE_ID as u64 + 1 {
            return Err(CudaError::TooManyParticles(
                n,
                crate::dem::state::MAX_PARTICLE_ID as u64 + 1,
            ));
        }
        if !sc.meshes.is_empty() && opts.hist_cap > 64 {
            return Err(CudaError::Unsupported(format!(
                "a contact history of {} entries with meshes (at most 64)",
                opts.hist_cap
            )));
        }
        // SAFETY: every buffer of this backend is used on `stream` only, except the publication
        // staging buffers, which the copy stream reads after waiting on an event recorded on
        // `stream` (publish.rs), and a GPU group's exchange buffers, ordered by events
        // (multi.rs); buffers are freed only after both streams synchronised (Drop).
        let driver::OpenDevice {
            ctx,
            name: device_name,
            stream,
            copy_stream,
        } = unsafe { driver::open_device(opts.device) }?;
        let mut cfg = module_config(sc, opts, spin, capacity.max(n));
        let friction = cfg.friction;
        if friction && opts.hist_cap == 0 {
            // The collide reads a history row's first entry ahead of its first contact.
            return Err(CudaError::Unsupported(
                "a contact history of 0 entries with friction (at least 1)".into(),
            ));
        }
        if friction {
            spill_possible(opts)?;
        }
        // Before compiling (seconds) and allocating anything: does the case fit? With the
        // skin's Verlet list if it can (else the collide walks the cells between searches);
        // with two history buffers if it can, else (auto) with one.
        // The Verlet skin's width [m] (0: a search every step): the grid, the meshes' bins and
        // the schedule below all follow it.
        let skin_w = skin::skin_width(sc, opts.skin, opts.double);
        let mut fits = buffers::check_device_memory(&ctx, sc, capacity, cfg, opts);
        let no_list;
        let opts = if fits.is_err() && opts.neighbour_list && skin_w > 0.0 && opts.memory_fallbacks
        {
            no_list = CudaOptions {
                neighbour_list: false,
                ..opts.clone()
            };
            fits = buffers::check_device_memory(&ctx, sc, capacity, cfg, &no_list);
            tracing::info!(
                "no Verlet list: the case does not fit GPU {} with one (the collide walks the \
                 cells between searches)",
                opts.device
            );
            &no_list
        } else {
            opts
        };
        if friction && opts.history == HistoryMode::Auto && fits.is_err() && opts.memory_fallbacks {
            cfg.hist_in_place = true;
            fits = buffers::check_device_memory(&ctx, sc, capacity, cfg, opts);
            if fits.is_ok() {
                tracing::info!(
                    "the contact history is kept in one buffer updated in place: the case does \
                     not fit GPU {} with two (about a quarter slower)",
                    opts.device
                );
            }
        }
        let single_ok = single_copy_possible(sc, opts, friction);
        if fits.is_err()
            && opts.state_copies == StateCopies::Auto
            && opts.memory_fallbacks
            && single_ok.is_ok()
        {
            cfg.single_copy = true;
            cfg.hist_in_place |= friction;
            fits = buffers::check_device_memory(&ctx, sc, capacity, cfg, opts);
            if fits.is_ok() {
                tracing::info!(
                    "one copy of the particle state: the case does not fit GPU {} with two (the \
                     collide stores forces, a second kernel integrates)",
                    opts.device
                );
            }
        }
        // Last, each pair's spring once in rows with spill rows (`solver --gpu-memory compact`):
        // about 0.6x the speed of one history in place, about 200 B/particle.
        let compact;
        let opts = if fits.is_err()
            && friction
            && opts.history == HistoryMode::Auto
            && opts.state_copies == StateCopies::Auto
            && opts.memory_fallbacks
            && single_ok.is_ok()
            && !opts.slab
        {
            compact = CudaOptions {
                history: HistoryMode::Pairs,
                hist_cap: COMPACT_ROWS,
                hist_spill: COMPACT_SPILL,
                ..opts.clone()
            };
            cfg.single_copy = true;
            cfg.hist_in_place = true;
            cfg.hist_pairs = true;
            cfg.hist_spill = true;
            fits = buffers::check_device_memory(&ctx, sc, capacity, cfg, &compact);
            if fits.is_ok() {
                tracing::info!(
                    "each pair's contact history once, in rows of {COMPACT_ROWS} with spill rows \
                     of {COMPACT_SPILL}, and one copy of the state: the case does not fit GPU {} \
                     otherwise (about 0.6x the speed; `solver --gpu-memory compact`)",
                    opts.device
                );
            }
            &compact
        } else {
            opts
        };
        if cfg.single_copy {
            single_ok?;
        }
        fits?;
        // One copy may have been taken above.
        cfg.owner_keys = owner_keys_possible(&cfg, opts);
        let collide_shared = collide_shared_bytes(&ctx, cfg, opts)?;
        let module = driver::load_module(&ctx, cfg)?;
        if collide_shared > 0 {
            // With pairs-once rows only dem_springs stages them (`collide_stage`).
            let mut ks = if cfg.hist_pairs && cfg.hist_spill {
                vec![kernels::Kernel::Springs, kernels::Kernel::SpillCount]
            } else if cfg.hist_pairs {
                vec![kernels::Kernel::Springs]
            } else {
                vec![kernels::Kernel::Collide, kernels::Kernel::Energies]
            };
            if cfg.passes {
                ks.extend([
                    kernels::Kernel::CollideInterior,
                    kernels::Kernel::CollideBoundary,
                ]);
            }
            for k in ks {
                module
                    .function(k)
                    .set_attribute(
                        cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        collide_shared as i32,
                    )
                    .map_err(|e| CudaError::driver("sizing the collide's shared memory", e))?;
            }
        }
        let (mut state_bufs, params) = buffers::upload(&stream, sc, state, cfg, opts, capacity)?;
        let meshes = if sc.meshes.is_empty() {
            None
        } else {
            let reach = sc.species_radius.iter().copied().fold(0.0, f64::max);
            let grid = buffers::gpu_grid_skin(sc, skin_w);
            let m = GpuMeshes::new(&stream, &sc.meshes, &grid, reach, state.time)?;
            state_bufs.memory.arrays.push(("meshes".into(), m.bytes));
            Some(m)
        };
        let words_out = window::MappedWords::new(&ctx, SMALL_READ_WORDS)?;
        Ok(CudaSim {
            words_out,
            ctx,
            stream,
            copy_stream,
            module,
            cfg,
            opts: opts.clone(),
            params,
            state: state_bufs,
            step_index: state.step,
            time: state.time,
            end_time: f64::INFINITY,
            times: StageTimes::default(),
            sample: None,
            last_sample: None,
            unsampled: 0,
            spare_events: Vec::new(),
            publish: publish::PublishState::default(),
            device_name,
            history_overflows: state.history_overflows,
            last_contacts: 0,
            meshes,
            forces_valid: state.forces_valid,
            window: None,
            outflow: None,
            mid_step: false,
            graphs: graph::GraphCache::default(),
            skip_stores: false,
            collide_shared,
            skin: (skin_w > 0.0).then(|| skin::Skin::new(skin_w)),
            search_override: None,
            forces_stale: false,
            spill_sized: opts.spill_start > 0,
        })
    }

    /// Starts `case` at t = 0 (particles placed by the case's sources, ids in source order).
    /// Returns the constants and initial state too, e.g. to start a CPU reference alongside.
    pub fn from_case(
        case: &Case,
        opts: &CudaOptions,
    ) -> Result<(CudaSim, StepContext, SimState), CudaSetupError> {
        case.validate_fields()?;
        let particles = case.generate_particles()?;
        let state = SimState::new(
            0.0,
            0,
            particles.iter().map(|p| p.species).collect(),
            particles.iter().map(|p| p.position).collect(),
            particles.iter().map(|p| p.velocity).collect(),
            vec![[0.0; 3]; particles.len()],
        );
        let sc = step_context(case)?;
        let mut sim = CudaSim::new(&sc, &state, opts)?;
        sim.end_time = case.end_time;
        Ok((sim, sc, state))
    }

    /// Whether the contact history is one buffer updated in place ([`HistoryMode`]).
    pub fn history_in_place(&self) -> bool {
        self.cfg.friction && self.cfg.hist_in_place
    }

    /// Whether each particle pair's spring is kept once ([`HistoryMode::Pairs`]).
    pub fn history_pairs(&self) -> bool {
        self.cfg.friction && self.cfg.hist_pairs
    }

    /// Dynamic shared memory of `dem_collide` and `dem_energies`: the staged history row, except
    /// with pairs-once rows, which only `dem_springs` stages.
    pub(crate) fn collide_stage(&self) -> u32 {
        if self.history_pairs() {
            0
        } else {
            self.collide_shared
        }
    }

    /// Whether the case uses velocity Verlet (else symplectic Euler).
    pub fn verlet(&self) -> bool {
        self.params.integrate != params::INTEGRATE_EULER
    }

    /// Device name as the driver reports it (e.g. "NVIDIA H100 80GB HBM3").
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// The kernel specialisation in use (model, friction/rotation, precision).
    pub fn module_config(&self) -> ModuleConfig {
        self.cfg
    }

    /// Entries of a history row and of a spill row (0: no spill rows).
    pub fn history_rows(&self) -> (u32, u32) {
        (
            self.params.hist_cap,
            self.state.spill.map_or(0, |s| s.width),
        )
    }

    /// Spill rows ([`CudaOptions::hist_spill`]): (entries per spill row, spill rows per buffer,
    /// the most any step took); None without. Synchronises.
    pub fn spill_rows(&self) -> Result<Option<(u32, u32, u32)>, CudaError> {
        match self.state.spill {
            Some(sp) => {
                let taken = self.spill_ctl()?[2];
                Ok(Some((sp.width, sp.rows, taken)))
            }
            None => Ok(None),
        }
    }

    /// Owner keys ([`CudaOptions::owner_keys`]): the springs handed from one particle's row to
    /// the other's at searches since the start (modulo 2^32), or None without owner keys.
    /// Synchronises.
    pub fn springs_handed_over(&self) -> Result<Option<u32>, CudaError> {
        if !self.cfg.owner_keys {
            return Ok(None);
        }
        Ok(Some(self.spill_ctl()?[4]))
    }

    /// NVRTC compile time of this sim's module [s] (0 when it came from the disk cache).
    pub fn compile_seconds(&self) -> f64 {
        self.module.timing.compile_s
    }

    /// How this sim's module was compiled or loaded.
    pub fn module_timing(&self) -> driver::ModuleTiming {
        self.module.timing
    }

    /// GPU memory in use, by array, and per particle.
    pub fn memory(&self) -> &MemoryReport {
        &self.state.memory
    }

    pub fn particle_count(&self) -> usize {
        self.params.n as usize
    }
    pub fn step_index(&self) -> u64 {
        self.step_index
    }
    pub fn time(&self) -> f64 {
        self.time
    }
    pub fn dt(&self) -> f64 {
        self.params.dt
    }
    pub fn end_time(&self) -> f64 {
        self.end_time
    }

    /// Sets the simulated time and step counter (after a restart from a checkpoint).
    pub fn set_clock(&mut self, step_index: u64, time: f64) {
        self.step_index = step_index;
        self.time = time;
    }

    /// Waits for all queued device work.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream
            .synchronize()
            .map_err(|e| CudaError::driver("synchronising the compute stream", e))
    }

    /// Replaces the state (id order, same particle count and species), history included.
    pub fn set_state(&mut self, state: &SimState) -> Result<(), CudaError> {
        // A frame published before holds the state it replaces (publish.rs).
        self.flush_deferred_frame()?;
        self.synchronize()?;
        buffers::set_state(&self.stream, &mut self.state, &self.params, state)?;
        // Spill rows may have grown to hold the state's; the first step sizes them again.
        buffers::apply_spill(&mut self.params, self.state.spill.as_ref());
        self.spill_sized = self.opts.spill_start > 0;
        // Slot = id now: the last search's cells are gone.
        self.skin_stale();
        self.forces_valid = state.forces_valid;
        self.step_index = state.step;
        self.time = state.time;
        Ok(())
    }

    /// Downloads the full state in id order (synchronises), the contact history with the
    /// device's [`CudaOptions::hist_cap`] entries per particle.
    pub fn state(&self) -> Result<SimState, CudaError> {
        let mut s = if self.outflow.as_ref().is_some_and(|o| o.ranked) {
            // Ids with gaps (removed particles): the live ones, in order.
            self.live_state()?
        } else {
            buffers::download_state(
                &self.stream,
                &self.state,
                &self.params,
                self.time,
                self.step_index,
            )?
        };
        s.history_overflows = self.history_overflows;
        if self.verlet() {
            s.forces_valid = self.forces_valid;
        }
        self.drop_stale_forces(&mut s);
        Ok(s)
    }

    /// The live particles' positions, ids ascending (a frame's order), without the rest of
    /// the state (synchronises).
    pub fn positions(&self) -> Result<Vec<[f64; 3]>, CudaError> {
        let ids = buffers::download_ids(&self.stream, &self.state, &self.params)?;
        // Ids with gaps (removed particles): the live ones in order, as `state` lists them.
        let live = self.outflow.as_ref().filter(|o| o.ranked).map(|_| {
            let mut live: Vec<u32> = ids
                .iter()
                .copied()
                .filter(|&id| id != buffers::DEAD)
                .collect();
            live.sort_unstable();
            live
        });
        let index = |id: u32| match &live {
            Some(live) => live.binary_search(&id).expect("a live id"),
            None => id as usize,
        };
        let mut out = vec![[0.0; 3]; live.as_ref().map_or(self.params.n as usize, Vec::len)];
        buffers::download_positions_by_ids(
            &self.stream,
            &self.state,
            &self.params,
            &ids,
            &mut out,
            &index,
        )?;
        Ok(out)
    }

    /// The live slots' particles as a state of their own, ids ascending, with their history
    /// (synchronises; no overflow count).
    pub(crate) fn live_state(&self) -> Result<SimState, CudaError> {
        let mut ids = buffers::download_ids(&self.stream, &self.state, &self.params)?;
        ids.retain(|&id| id != buffers::DEAD);
        ids.sort_unstable();
        let n = ids.len();
        let mut s = SimState::zeroed(self.time, self.step_index, n);
        let index = |id: u32| ids.binary_search(&id).expect("a live id");
        buffers::download_into(&self.stream, &self.state, &self.params, &mut s, &index)?;
        s.forces_valid = self.state.cur.force != 0 && self.step_index > 0;
        self.drop_stale_forces(&mut s);
        Ok(s)
    }

    /// One copy of the state after the energies' search ([`CudaSim::energies`]): the force
    /// buffer held the reorder, so a downloaded state has no forces until the next step.
    fn drop_stale_forces(&self, s: &mut SimState) {
        if self.forces_stale {
            s.forces_valid = false;
            s.force.iter_mut().for_each(|f| *f = [0.0; 3]);
            s.torque.iter_mut().for_each(|t| *t = [0.0; 3]);
        }
    }

    /// Transform of each mesh as the last step's contacts saw it (the CPU's
    /// `Backend::mesh_transforms`); empty without meshes.
    pub fn mesh_transforms(&self) -> Vec<crate::core::geometry::BodyTransform> {
        self.meshes
            .as_ref()
            .map(|m| m.transforms().to_vec())
            .unwrap_or_default()
    }

    /// Mean number of contacts per particle at the last diagnostic step (walls included),
    /// measured by running one step with contact counting on.
    pub fn count_contacts(&mut self) -> Result<f64, CudaError> {
        let c = self.step_with_diag()?;
        Ok(c.contacts as f64 / self.params.n.max(1) as f64)
    }
}

/// Refuses a state whose ids are not 0..n: `dem_pack` writes frames at index id (every run
/// today; inflow and deletion will lift this with a rank array on the device).
pub(crate) fn check_dense_ids(state: &SimState) -> Result<(), CudaError> {
    match state
        .id
        .iter()
        .enumerate()
        .find(|(k, &id)| id as usize != *k)
    {
        Some((k, &id)) => Err(CudaError::Unsupported(format!(
            "particle ids with gaps (index {k} holds id {id}); the GPU backend needs ids 0..{}",
            state.pos.len()
        ))),
        None => Ok(()),
    }
}

/// The step error of a device failure: a non-finite state names the first particle (id order)
/// whose position or velocity is not finite in `state` (downloaded for it; 0 if that failed).
pub(crate) fn step_error(
    e: CudaError,
    state: impl FnOnce() -> Result<SimState, CudaError>,
    step: u64,
    time: f64,
) -> crate::exec::worker::StepError {
    use crate::exec::worker::StepError;
    match e {
        CudaError::NonFinite { .. } => {
            let id = state()
                .ok()
                .and_then(|s| {
                    (0..s.pos.len()).find(|&i| {
                        !(crate::core::vec3::is_finite(s.pos[i])
                            && crate::core::vec3::is_finite(s.vel[i]))
                    })
                })
                .unwrap_or(0) as u32;
            StepError::NonFinite { id, step, time }
        }
        other => StepError::Device {
            backend: "cuda",
            step,
            message: other.to_string(),
        },
    }
}

/// Why [`CudaSim::from_case`] failed.
#[derive(Debug, thiserror::Error)]
pub enum CudaSetupError {
    #[error(transparent)]
    Case(#[from] CaseError),
    #[error(transparent)]
    Cuda(#[from] CudaError),
}

/// The counting sorts' exclusive scan ([`step::exclusive_scan`]) of `input` on GPU `device`,
/// with its level buffers sized as a run sizes them: for the scan kernels' own test
/// (`solver/tests/cuda_scan.rs`), which compares it with the host's prefix sums.
#[doc(hidden)]
pub fn scan_on_device(device: usize, input: &[u32]) -> Result<Vec<u32>, CudaError> {
    driver::driver_available()?;
    let n = u32::try_from(input.len())
        .map_err(|_| CudaError::Unsupported(format!("a scan of {} elements", input.len())))?;
    let case = Case::default_falling_box(1000);
    let sc = StepContext::from_case(&case, Vec::new());
    let cfg = module_config(&sc, &CudaOptions::default(), false, 1000);
    // SAFETY: everything below runs on the one stream, and the buffers are freed (dropped)
    // after the download that synchronises it.
    let dev = unsafe { driver::open_device(device) }?;
    let module = driver::load_module(&dev.ctx, cfg)?;
    let s = &dev.stream;
    let bytes = 4 * input.len();
    let mut inp = window::alloc(s, bytes, "the scan's input")?;
    let out = window::alloc(s, bytes, "the scan's output")?;
    if !input.is_empty() {
        let mut dst = inp.slice.slice_mut(0..bytes);
        // SAFETY: u32 as bytes.
        let src = unsafe { std::slice::from_raw_parts(input.as_ptr() as *const u8, bytes) };
        s.memcpy_htod(src, &mut dst)
            .map_err(|e| CudaError::driver("uploading the scan's input", e))?;
    }
    let mut levels = Vec::new();
    let mut level_bufs = Vec::new();
    for t in step::scan_level_sizes(input.len()) {
        let (a, b) = (
            window::alloc(s, 4 * t, "scan sums")?,
            window::alloc(s, 4 * t, "scan sums")?,
        );
        levels.push((a.ptr, b.ptr, t as u32));
        level_bufs.push((a, b));
    }
    let fns = (
        module.function(kernels::Kernel::ScanTile),
        module.function(kernels::Kernel::ScanAdd),
    );
    step::exclusive_scan(s, fns, &levels, inp.ptr, out.ptr, n, 0)?;
    let mut host = vec![0u8; bytes];
    if bytes > 0 {
        s.memcpy_dtoh(&out.slice.slice(0..bytes), &mut host)
            .map_err(|e| CudaError::driver("downloading the scan", e))?;
    }
    s.synchronize()
        .map_err(|e| CudaError::driver("finishing the scan", e))?;
    Ok(host
        .chunks_exact(4)
        .map(|w| u32::from_ne_bytes(w.try_into().expect("4 bytes")))
        .collect())
}

/// The run constants of `case` as `sim::Simulation` derives them (meshes loaded: STL files are
/// read here).
pub fn step_context(case: &Case) -> Result<StepContext, CaseError> {
    Ok(StepContext::from_case(case, case.load_meshes()?))
}

impl Drop for CudaSim {
    fn drop(&mut self) {
        // (A GPU of a group follows its group's schedule, which the group reports.)
        if let Some(s) = self
            .skin
            .as_ref()
            .filter(|s| s.steps > 0 && self.window.is_none())
        {
            tracing::info!("{}", s.summary());
        }
        // Nothing may be freed while a kernel or copy still uses it.
        let _ = self.copy_stream.synchronize();
        let _ = self.stream.synchronize();
        let _ = &self.ctx;
    }
}

#[cfg(test)]
mod tests {
    use super::HistoryMode;

    /// The built-in case's kernels: one species, and no stream hints at the main job's 1 M
    /// particles (measured slower there), but from kernels::STREAM_HINTS_FROM on; the prefetch
    /// and the run ask for the same module when they are given the same count.
    #[test]
    fn module_config_follows_the_case_and_its_size() {
        let case = crate::case::Case::default_falling_box(1000);
        let sc = super::step_context(&case).expect("case");
        let opts = super::CudaOptions::default();
        let small = super::module_config(&sc, &opts, false, 1_000_000);
        assert!(small.one_species && small.friction && !small.stream_hints);
        let big = super::module_config(&sc, &opts, false, kernels::STREAM_HINTS_FROM);
        assert!(big.stream_hints);
        assert_eq!(
            super::ModuleConfig {
                stream_hints: false,
                passes: false,
                ..big
            },
            small
        );
    }

    /// `StateCopies::Fewest` (`solver --gpu-memory compact`): one copy of the state with
    /// symplectic Euler (and then owner keys), two with velocity Verlet (whose last forces must
    /// outlive the search; the pairs then kept by the ids), as the module is compiled.
    #[test]
    fn fewest_copies_are_one_but_with_velocity_verlet() {
        let compact = super::compact_options(
            Default::default(),
            super::COMPACT_ROWS,
            super::COMPACT_SPILL,
        );
        assert_eq!(
            super::StateCopies::parse("fewest"),
            Some(compact.state_copies)
        );
        assert_eq!(compact.state_copies.name(), "fewest");
        let mut case = crate::case::Case::default_falling_box(1000);
        let sc = super::step_context(&case).expect("case");
        let euler = super::module_config(&sc, &compact, false, 1000);
        assert!(euler.friction && euler.single_copy && euler.hist_in_place && euler.owner_keys);
        case.integrator = crate::case::Integrator::VelocityVerlet;
        let sc = super::step_context(&case).expect("case");
        let verlet = super::module_config(&sc, &compact, false, 1000);
        assert!(verlet.hist_pairs && verlet.hist_spill && verlet.hist_in_place);
        assert!(!verlet.single_copy && !verlet.owner_keys);
        // One copy asked for outright is still refused with velocity Verlet.
        let one = super::CudaOptions {
            state_copies: super::StateCopies::One,
            ..compact
        };
        let e = super::single_copy_possible(&sc, &one, true).expect_err("Verlet");
        assert!(e.to_string().contains("velocity Verlet"), "{e}");
    }

    /// Spill rows extend pairs-once rows of one GPU only, need an entry beside the link, and
    /// keep a row within its count word's slide flags; the module compiles them only then.
    #[test]
    fn spill_rows_are_refused_where_they_cannot_work() {
        let ok = super::CudaOptions {
            history: HistoryMode::Pairs,
            hist_cap: 6,
            hist_spill: 6,
            ..Default::default()
        };
        assert!(super::spill_possible(&ok).is_ok());
        let refused = |o: super::CudaOptions, why: &str| {
            let e = super::spill_possible(&o).expect_err(why).to_string();
            assert!(e.contains(why) && e.contains("spill rows"), "{e}");
        };
        refused(
            super::CudaOptions {
                history: HistoryMode::InPlace,
                ..ok.clone()
            },
            "pairs-once rows",
        );
        refused(
            super::CudaOptions {
                slab: true,
                ..ok.clone()
            },
            "moves history rows whole",
        );
        refused(
            super::CudaOptions {
                hist_cap: 1,
                ..ok.clone()
            },
            "beside its spill row's link",
        );
        refused(
            super::CudaOptions {
                hist_cap: 20,
                hist_spill: 8,
                ..ok.clone()
            },
            "hold more than 26",
        );
        assert!(super::spill_possible(&super::CudaOptions::default()).is_ok());
        let case = crate::case::Case::default_falling_box(1000);
        let sc = super::step_context(&case).expect("case");
        assert!(super::module_config(&sc, &ok, false, 1000).hist_spill);
        let in_place = super::CudaOptions {
            history: HistoryMode::InPlace,
            ..ok
        };
        assert!(!super::module_config(&sc, &in_place, false, 1000).hist_spill);
    }

    /// The command-line spellings of the history modes read back as themselves; anything else
    /// is refused (dem-gpu-bench and the tests' PARTICLE_SHM_TEST_HISTORY report it).
    #[test]
    fn history_modes_parse_their_names() {
        for m in [
            HistoryMode::Auto,
            HistoryMode::Double,
            HistoryMode::InPlace,
            HistoryMode::Pairs,
        ] {
            assert_eq!(HistoryMode::parse(m.name()), Some(m));
        }
        assert_eq!(HistoryMode::parse("inplace"), None);
        assert_eq!(HistoryMode::default(), HistoryMode::Auto);
    }
}
