//! The SPH method on one NVIDIA GPU: the CPU reference ([`super::cpu`]) stage for stage, with
//! the kernels of `kernels/src/cuda/sph.cu`. Compiled with `double` (parity mode: `real` = f64,
//! no FMA contraction), a run has the CPU's bits; in float, velocities and densities are f32
//! and positions f64 (as the DEM backend).
//!
//! A step, as `SphSim::step`: sort the fluid by (cell, x, id) and reorder it; rates; predictor;
//! sort and reorder again at the half-step positions (the state and the half state alike, so
//! that the corrector pairs them slot by slot); rates; corrector; one 24-byte read of the
//! reduced time-step limits, which set the next step on the host with the CPU's function.
//! Boundary particles never move: the host sorts them once; unless solids move
//! ([`super::motion`]): then their particles are placed at each evaluation and the boundary is
//! sorted on the device as the fluid is.
//!
//! [`group`] runs one simulation on several GPUs, one slab of cell layers each; [`ranks`] runs
//! the same slabs over MPI ranks, one GPU each; [`slab`] holds what a slab adds to this one-GPU
//! engine (its halo exchange).

pub(crate) use crate::sph::parts::OwnedParticles;
mod group;
mod ranks;
mod slab;

pub use group::{
    classify_in_rates_from_env, overlap_from_env, SphGroup, SphGroupOptions, SPARE_SLOTS,
};
pub use ranks::{SphRank, SphRankOptions};

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    LaunchConfig, PushKernelArg,
};

use super::cpu::{first_time_step, next_time_step, sph_grid, verlet_is_euler, PrevState, SphState};
use super::motion::{MovingSolids, MAX_MOVING_SOLIDS};
use super::setup::{Diffusion, Integrator, SphConstants, SphParticles, KIND_FLUID};
use crate::core::grid::{CellList, Grid};
use crate::core::vec3::V3;
use crate::dem::cuda::{driver, CudaError, HostRegistration, MemoryReport};

/// `SphParams` of sph.cu: case constants, the step and the slab.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KernelParams {
    pub origin: [f64; 3],
    pub cell: f64,
    pub gravity: [f64; 3],
    pub h: f64,
    pub rho0: f64,
    pub c0: f64,
    pub b: f64,
    pub mass: f64,
    pub alpha: f64,
    pub delta: f64,
    pub dt: f64,
    pub dims: [u32; 3],
    /// Elements of the launch.
    pub n: u32,
    /// `physics::SphKernel` as the twins number it (0 Wendland C2, 1 cubic spline).
    pub kernel: i32,
    /// 0 none, 1 Molteni-Colagrossi, 2 Fourtakas.
    pub diffusion: i32,
    /// The cell layers [own_lo, own_hi) along `axis` whose particles this GPU owns (all of them
    /// on one GPU).
    pub axis: u32,
    pub own_lo: u32,
    pub own_hi: u32,
    /// Cells a neighbour may lie away along an axis (`cpu::sph_reach`; also `SPH_REACH`).
    pub reach: u32,
}

/// `SphArrays` of sph.cu: one copy of the fluid state (device addresses; `id` may be 0).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct SphArrays {
    pos: u64,
    vel: u64,
    rho: u64,
    id: u64,
}

/// `SphUpdate` of sph.cu: the integrator's update that the rates kernels end with (the
/// boundary's always, the fluid's in float mode; see sph.cu).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct SphUpdate {
    s: SphArrays,
    half: SphArrays,
    brho: u64,
    bhalf: u64,
    /// One of the `STAGE_*` constants.
    stage: u32,
    /// Verlet: 1 on an Euler step.
    euler: u32,
}

/// `SphFrame` of sph.cu: a frame's arrays on the device (f32, particle-id order; 0: not
/// wanted): positions and velocities (3 per particle), densities, pressures.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SphFrame {
    pos: u64,
    vel: u64,
    rho: u64,
    press: u64,
}

impl SphFrame {
    /// The frame of staging arrays `st` (positions, velocities, densities, pressures).
    pub(crate) fn of(st: [u64; 4]) -> Self {
        SphFrame {
            pos: st[0],
            vel: st[1],
            rho: st[2],
            press: st[3],
        }
    }
}

/// `SPH_STAGE_*` of sph.cu: the rates stored for an update kernel (the parity mode's fluid).
const STAGE_NONE: u32 = 0;
/// The symplectic predictor.
const STAGE_PREDICT: u32 = 1;
/// The symplectic corrector.
const STAGE_CORRECT: u32 = 2;
/// Verlet.
const STAGE_VERLET: u32 = 3;

/// `SphGrid` of sph.cu: the fluid's counting sort.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct SphGrid {
    cell: u64,
    rank: u64,
    perm: u64,
    count: u64,
    start: u64,
}

/// `SphBound` of sph.cu: the boundary arrays a sort of the boundary reorders (moving solids):
/// position (f64 x 3), velocity (real x 3), density, half-step density (real), id (u32), position
/// at rest (f64 x 3), moving solid (u32, `u32::MAX`: fixed).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct SphBound {
    pos: u64,
    vel: u64,
    rho: u64,
    half: u64,
    id: u64,
    rest: u64,
    body: u64,
    /// mDBC: the ghost nodes at rest (0 with DBC).
    ghost: u64,
}

/// `SphBody` of sph.cu: a [`crate::core::geometry::BodyTransform`] (row-major rotation,
/// translation, velocity, angular velocity, center), 21 f64.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct SphBody([f64; 21]);

/// `SphBodies` of sph.cu: the poses of the moving solids, one launch parameter.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct SphBodies([SphBody; MAX_MOVING_SOLIDS]);

const _: () = assert!(std::mem::size_of::<KernelParams>() == 160);
const _: () = assert!(std::mem::size_of::<SphArrays>() == 32);
const _: () = assert!(std::mem::size_of::<SphGrid>() == 40);
const _: () = assert!(std::mem::size_of::<SphUpdate>() == 88);
const _: () = assert!(std::mem::size_of::<SphFrame>() == 32);
const _: () = assert!(std::mem::size_of::<SphBound>() == 64);
const _: () = assert!(std::mem::size_of::<SphBodies>() == 16 * 168);

// SAFETY: plain #[repr(C)] structs of f64, u32, i32 and u64 with the layout of their sph.cu
// twins (sizes asserted above), passed by value as kernel parameters.
unsafe impl DeviceRepr for KernelParams {}
unsafe impl DeviceRepr for SphArrays {}
unsafe impl DeviceRepr for SphGrid {}
unsafe impl DeviceRepr for SphUpdate {}
unsafe impl DeviceRepr for SphFrame {}
unsafe impl DeviceRepr for SphBound {}
unsafe impl DeviceRepr for SphBodies {}

impl SphBodies {
    fn at(solids: &MovingSolids, t: f64) -> SphBodies {
        let mut out = SphBodies::default();
        for (slot, tr) in out.0.iter_mut().zip(solids.transforms(t)) {
            let mut v = [0.0; 21];
            v[..9].copy_from_slice(&tr.rotation);
            v[9..12].copy_from_slice(&tr.translation);
            v[12..15].copy_from_slice(&tr.velocity);
            v[15..18].copy_from_slice(&tr.omega);
            v[18..].copy_from_slice(&tr.center);
            *slot = SphBody(v);
        }
        out
    }
}

/// The moving solids on the GPU: the boundary arrays (current and reorder copy) and the
/// boundary's counting sort.
struct MovingGpu {
    solids: MovingSolids,
    b: SphBound,
    alt: SphBound,
    grid: SphGrid,
}

/// Device bytes per boundary particle that moving solids add (`real` bytes per real): velocity,
/// position at rest and solid for the two copies, the second copy's position, densities and id,
/// and the sort's cell, rank and permutation.
pub fn moving_bytes_per_boundary(real: u64) -> u64 {
    2 * (3 * real + 24 + 4) + (24 + 2 * real + 4) + 12
}

/// Bytes of `SphDiag` in sph.cu: dt_f and dt_cv as f64 bits, the non-finite count, padding.
const DIAG_BYTES: usize = 24;
/// Threads per block of every launch (a multiple of 32: the rates reduce by warp).
const THREADS: u32 = 128;

/// Options of the SPH GPU backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SphCudaOptions {
    pub device: usize,
    /// The parity mode: `real` = double, no FMA (the CPU reference's bits; slower).
    pub double: bool,
}

/// Device, parity mode, and the constants of the pair code (`pair_constants`).
type ModuleKey = (usize, bool, Vec<String>);

struct SphModule {
    _module: Arc<CudaModule>,
    functions: HashMap<&'static str, CudaFunction>,
}

fn modules() -> &'static Mutex<HashMap<ModuleKey, Arc<SphModule>>> {
    static CACHE: OnceLock<Mutex<HashMap<ModuleKey, Arc<SphModule>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The `-D` options that make the case's constants those of the pair code in sph.cu: the kernel
/// and the diffusion (as run-time branches they cost 12 % of the step at 10 M), and h, rho0, B,
/// c0, the particle mass, alpha (and `alpha_boundary`, fluid-boundary pairs), delta and gravity
/// (folded into the arithmetic instead of held in registers); and the cells a neighbour may lie
/// away (`SPH_REACH`), and the block size the rates kernels' register bound assumes
/// (`SPH_BLOCK`). `{:?}` writes the shortest decimal that parses back to the same f64, so
/// the parity mode keeps its bits.
fn pair_constants(p: &KernelParams, alpha_boundary: f64) -> Vec<String> {
    let mut d = vec![
        format!("-DSPH_KERNEL={}", p.kernel),
        format!("-DSPH_DIFFUSION={}", p.diffusion),
        format!("-DSPH_REACH={}", p.reach),
        format!("-DSPH_BLOCK={THREADS}"),
    ];
    let values = [
        ("SPH_H", p.h),
        ("SPH_RHO0", p.rho0),
        ("SPH_B", p.b),
        ("SPH_C0", p.c0),
        ("SPH_MASS", p.mass),
        ("SPH_ALPHA", p.alpha),
        ("SPH_ALPHA_BOUND", alpha_boundary),
        ("SPH_DELTA", p.delta),
        ("SPH_GX", p.gravity[0]),
        ("SPH_GY", p.gravity[1]),
        ("SPH_GZ", p.gravity[2]),
    ];
    d.extend(values.iter().map(|(name, v)| format!("-D{name}={v:?}")));
    if hydrostatic_series_suffices(p) {
        d.push("-DSPH_HYDROSTATIC_SERIES".to_string());
        let a = hydrostatic_polynomial(p);
        d.push(format!("-DSPH_HYDRO_TERMS={}", a.len()));
        let list: Vec<String> = a.iter().map(|v| format!("{v:?}")).collect();
        d.push(format!("-DSPH_HYDRO_COEFFS={}", list.join(",")));
    }
    d
}

/// Float mode's hydrostatic density difference as a polynomial in s = g . r_ij: the binomial
/// series of `physics::hydrostatic_density_difference`, rho0 sum_k C(1/7, k) (-rho0 s / B)^k,
/// with its coefficients a_k = rho0 C(1/7, k) (-rho0 / B)^k folded here and cut after the last
/// term that float can see: the first term left out is below 2^-26 of the first at the case's
/// largest |t| (three terms in the 10 M dam break, where |t| is about 1e-3; four at the shipped
/// case's 4 cm). Four or five float operations per pair instead of twelve (the division's, the
/// series' eight and the scalings). Only where [`hydrostatic_series_suffices`].
fn hydrostatic_polynomial(p: &KernelParams) -> Vec<f64> {
    let c = super::physics::SEVENTH_ROOT_SERIES;
    let t_max = hydrostatic_t_max(p);
    let terms = (1..c.len())
        .find(|&k| (c[k] / c[0]).abs() * t_max.powi(k as i32) <= f64::powi(2.0, -26))
        .unwrap_or(c.len());
    let step = -p.rho0 / p.b;
    (0..terms)
        .map(|k| p.rho0 * c[k] * step.powi(k as i32 + 1))
        .collect()
}

/// The largest argument of the hydrostatic seventh root over the pairs of a case, |t| =
/// rho0 |g| 2h / B (r_ij < 2h).
fn hydrostatic_t_max(p: &KernelParams) -> f64 {
    p.rho0 * crate::core::vec3::norm(p.gravity) * 2.0 * p.h / p.b
}

/// Whether every pair's argument of the hydrostatic seventh root, |t| = rho0 |g . r_ij| / B with
/// r_ij < 2h, lies within the binomial series' range (with 1 % for rounding): then
/// `seventh_root_minus_one` takes the series for every pair and the GPU calls the series alone
/// (`SPH_HYDROSTATIC_SERIES`; the same bits). About 1e-3 in a dam break (14 h / (coef^2 H)).
fn hydrostatic_series_suffices(p: &KernelParams) -> bool {
    let t_max = hydrostatic_t_max(p);
    t_max.is_finite() && 1.01 * t_max <= super::physics::SEVENTH_ROOT_SERIES_MAX
}

fn load_module(
    ctx: &Arc<CudaContext>,
    double: bool,
    constants: Vec<String>,
) -> Result<Arc<SphModule>, CudaError> {
    let key = (ctx.ordinal(), double, constants.clone());
    if let Some(m) = modules().lock().map_err(|_| CudaError::Poisoned)?.get(&key) {
        return Ok(m.clone());
    }
    // Float mode compiles with fast math (approximate division and square root, denormals
    // flushed): it has no bits to keep, and the pair terms are division-heavy. The parity mode
    // keeps IEEE arithmetic.
    let mut defines = if double {
        vec!["-DDEM_DOUBLE".to_string()]
    } else {
        vec!["--use_fast_math".to_string()]
    };
    defines.extend(constants);
    let (module, timing) =
        driver::compile_module(ctx, &kernels::sph_module_source(), defines, double, "SPH")?;
    tracing::debug!("SPH {}", timing.describe());
    let mut functions = HashMap::new();
    for name in kernels::SPH_KERNELS {
        let f = module
            .load_function(name)
            .map_err(|e| CudaError::driver(name, e))?;
        functions.insert(name, f);
    }
    let m = Arc::new(SphModule {
        _module: module,
        functions,
    });
    modules()
        .lock()
        .map_err(|_| CudaError::Poisoned)?
        .insert(key, m.clone());
    Ok(m)
}

/// Blocks of `reach`^3 cells over a grid of `dims` cells (`sph_block_dims` in sph.cu).
fn fluid_block_count_of(dims: [u32; 3], reach: u32) -> u64 {
    dims.iter().map(|&d| d.div_ceil(reach) as u64).product()
}

/// [`fluid_block_count_of`] the grid of `p`.
fn fluid_block_count(p: &KernelParams) -> u64 {
    fluid_block_count_of(p.dims, p.reach)
}

fn blocks(n: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(THREADS).max(1), 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: only used with f64, f32 and u32 (no padding, every bit pattern valid as bytes);
    // the length covers exactly the slice's memory.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn as_bytes_mut<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as `as_bytes`; f32, f64 and u32 accept any bit pattern written through the bytes.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

/// Device bytes per fluid and per boundary particle, and per cell, for `real` of `real` bytes:
/// fluid state, half state and reorder copy (positions f64), rates, sort arrays, publication
/// staging (f32 position, velocity, density, pressure), cell-relative positions; boundary
/// position, three densities, id, staging, cell-relative positions; per cell the fluid's count
/// and start and the boundary's start.
pub fn bytes_per_particle(real: u64) -> (u64, u64, u64) {
    let state = 24 + 3 * real + real;
    let fluid = 3 * state + 2 * 4 + rates_bytes(real) + 12 + 32 + 2 * local_bytes(real);
    let boundary = 24 + 2 * real + 4 + 32 + local_bytes(real);
    (fluid, boundary, 12)
}

/// Bytes per fluid slot of the stored rates (acceleration and density rate): the parity mode's
/// only, whose update is a kernel of its own; float mode updates inside the rates kernel.
pub fn rates_bytes(real: u64) -> u64 {
    if real == 4 {
        0
    } else {
        4 * real
    }
}

/// Bytes per particle of each array `sph_localize` fills for the pair sums (a float4 of
/// position and density, and for the fluid one of velocity and pressure; float mode only).
pub fn local_bytes(real: u64) -> u64 {
    if real == 4 {
        16
    } else {
        0
    }
}

/// A frame copy in flight: the event recorded on the copy stream after its last copy.
#[derive(Default)]
pub struct FrameCopy(Option<CudaEvent>);

impl FrameCopy {
    /// Whether no copy is in flight any more (true once the last one completed).
    fn done(&mut self) -> Result<bool, CudaError> {
        let Some(ev) = &self.0 else {
            return Ok(true);
        };
        if ev
            .try_is_complete()
            .map_err(|e| CudaError::driver("querying the frame copy", e))?
        {
            self.0 = None;
            return Ok(true);
        }
        Ok(false)
    }

    /// Waits for the copy in flight, if any.
    fn wait(&mut self) -> Result<(), CudaError> {
        if let Some(ev) = self.0.take() {
            ev.synchronize()
                .map_err(|e| CudaError::driver("waiting for the frame copy", e))?;
        }
        Ok(())
    }
}

/// An SPH engine on the GPU as a run drives it: one device ([`SphCuda`]) or several
/// ([`SphGroup`]), the same steps, states and frames.
pub trait SphGpu {
    fn constants(&self) -> &SphConstants;
    /// One symplectic step of [`SphGpu::dt`]; sets the next step from the CFL condition.
    fn step(&mut self) -> Result<(), CudaError>;
    fn dt(&self) -> f64;
    /// Sets the next step (only ever shortened, to land on an end time).
    fn set_dt(&mut self, dt: f64);
    fn time(&self) -> f64;
    fn step_index(&self) -> u64;
    fn particle_count(&self) -> usize;
    fn kinds(&self) -> &[u32];
    fn device_name(&self) -> String;
    /// The full state in id order (for checkpoints and tests).
    fn state(&self) -> Result<SphState, CudaError>;
    /// Page-locks the host range `ptr..ptr + len` (the segment, once) so that
    /// [`SphGpu::publish_async`] copies into it without blocking.
    ///
    /// # Safety
    /// The range must stay mapped until [`SphGpu::release_host`] (or the drop).
    unsafe fn register_host(&mut self, ptr: *mut u8, len: usize) -> Result<(), CudaError>;
    /// Waits for a frame copy in flight and unregisters the host range.
    fn release_host(&mut self);
    /// Starts publishing the current state: packs on the device, copies on a copy stream into
    /// `targets` (positions, velocities, densities, pressures; null: not wanted) and returns at
    /// once. The frame is complete once [`SphGpu::publish_done`] says so (or
    /// [`SphGpu::publish_wait`] returned). A copy still in flight is waited for first. Packing
    /// may wait for the next step, which does it before changing the state (one GPU); then
    /// `publish_done` stays false until a step came, and `publish_wait` packs at once.
    ///
    /// # Safety
    /// Each non-null target must hold one element per particle ([f32; 3] or f32) and stay
    /// valid and untouched by the host until the copy completed.
    unsafe fn publish_async(&mut self, targets: [*mut u8; 4]) -> Result<(), CudaError>;
    /// Packs a frame on the device (id order, f32): read it with [`SphGpu::frame_vec3`] and
    /// [`SphGpu::frame_scalar`] before the next step.
    fn pack_frame(&self) -> Result<(), CudaError>;
    /// Copies the packed positions or velocities into `out` (one element per particle).
    fn frame_vec3(&self, a: FrameArray, out: &mut [[f32; 3]]) -> Result<(), CudaError>;
    /// Copies the packed densities or pressures into `out` (one element per particle).
    fn frame_scalar(&self, a: FrameArray, out: &mut [f32]) -> Result<(), CudaError>;
    /// The frame copy in flight.
    fn frame_copy(&mut self) -> &mut FrameCopy;

    /// One step, shortened so as not to pass `t_end`.
    fn step_within(&mut self, t_end: f64) -> Result<(), CudaError> {
        let (t, dt) = (self.time(), self.dt());
        if t + dt > t_end && t_end > t {
            self.set_dt(t_end - t);
        }
        self.step()
    }

    /// Steps until `t` (the last step shortened to land on it).
    fn run_to(&mut self, t: f64) -> Result<(), CudaError> {
        while self.time() < t - 1e-12 {
            self.step_within(t)?;
        }
        Ok(())
    }

    /// Whether no frame copy is in flight any more (true once the last one completed).
    fn publish_done(&mut self) -> Result<bool, CudaError> {
        self.frame_copy().done()
    }

    /// Waits for the frame copy in flight, if any.
    fn publish_wait(&mut self) -> Result<(), CudaError> {
        self.frame_copy().wait()
    }
}

/// An SPH simulation on one GPU.
pub struct SphCuda {
    pub c: SphConstants,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Frame copies to the host, overlapping the next steps.
    copy_stream: Arc<CudaStream>,
    /// The frame copy in flight: recorded on the copy stream after its last copy.
    copy_done: FrameCopy,
    /// A frame published but not packed yet (its host targets): the next step's first gather
    /// packs its fluid part from the state it reads and queues the copy (one GPU only; the
    /// boundary part was packed at once).
    frame_pending: Option<[usize; 4]>,
    /// The staging holds the fixed boundary's positions and velocities (zero), which never
    /// change: later frames pack only its densities and pressures (one GPU, no moving solids).
    fixed_boundary_staged: bool,
    /// The segment, page-locked so that frame copies are asynchronous.
    registration: Option<HostRegistration>,
    module: Arc<SphModule>,
    device_name: String,
    p: KernelParams,
    /// Fluid particles in the sorted arrays (owned and halo on a slab), slots filled before the
    /// next sort (received halo appended), and particles that sort keeps.
    nf: u32,
    slots: u32,
    next_nf: u32,
    /// Fluid slots allocated.
    cap: u32,
    nb: u32,
    cells: u32,
    grid: Grid,
    /// The boundary particles' ids in their (sorted) slot order.
    bids: Vec<u32>,
    /// Slab mode (several GPUs): the exchange state; `None` on one GPU.
    slab: Option<slab::Slab>,
    /// Moving solids (one GPU only); `None` without.
    mv: Option<MovingGpu>,
    /// The fluid state, its half step and the reorder copy, all in the current sorted order.
    s: SphArrays,
    half: SphArrays,
    alt: SphArrays,
    acc: u64,
    drho: u64,
    /// sph_localize of the fluid (positions and densities, velocities and pressures) and of the
    /// boundary before each evaluation (float mode; 0 in the parity mode).
    loc: u64,
    kin: u64,
    bloc: u64,
    bpos: u64,
    brho: u64,
    bhalf: u64,
    bid: u64,
    /// mDBC: each boundary slot's ghost node at rest (0 with DBC).
    bghost: u64,
    /// mDBC in a slab of several GPUs: the densities this slab computed for the slots whose
    /// node lies in its layers, NaN elsewhere (`sph_ghost_density`; 0 otherwise).
    bghost_rho: u64,
    bstart: u64,
    /// Per block of `reach`^3 cells: whether the sorted fluid has a particle in it, and whether
    /// in it or a block beside it (sph_fluid_blocks, sph_fluid_near): boundary particles whose
    /// block has none skip their walk (see sph.cu).
    fluid_blocks: u64,
    fluid_near: u64,
    g: SphGrid,
    scan_levels: Vec<(u64, u64, u32)>,
    diag: u64,
    /// Publication staging: positions, velocities, densities, pressures (f32, id order).
    staging: [u64; 4],
    bufs: Vec<(u64, CudaSlice<u8>)>,
    memory: MemoryReport,
    /// Particle kinds in id order (they never change).
    kind: Vec<u32>,
    time: f64,
    step: u64,
    dt: f64,
    real: usize,
    /// Verlet: `half` and `bhalf` hold the state one step back (velocities and densities); false
    /// before the first step of a run without it, which is then an Euler step.
    verlet_ready: bool,
}

impl SphCuda {
    /// Places the particles of a case at t = 0 on the GPU.
    pub fn new(
        c: SphConstants,
        p: SphParticles,
        opts: SphCudaOptions,
    ) -> Result<SphCuda, CudaError> {
        let dt = first_time_step(&c);
        let state = SphState::initial(&p);
        SphCuda::from_state_moving(c, state, dt, opts, p.moving)
    }

    /// Continues from `state` with the step `dt` it was about to take (a checkpoint, whichever
    /// backend wrote it).
    pub fn from_state(
        c: SphConstants,
        state: SphState,
        dt: f64,
        opts: SphCudaOptions,
    ) -> Result<SphCuda, CudaError> {
        SphCuda::from_state_moving(c, state, dt, opts, MovingSolids::default())
    }

    /// As [`SphCuda::from_state`] with the case's moving solids (`SphSim::from_state_moving`).
    pub fn from_state_moving(
        c: SphConstants,
        state: SphState,
        dt: f64,
        opts: SphCudaOptions,
        moving: MovingSolids,
    ) -> Result<SphCuda, CudaError> {
        moving
            .check(state.pos.len())
            .map_err(CudaError::Unsupported)?;
        let grid = sph_grid(&c, &moving.at_rest(&state.pos), &state.kind);
        let fluid: Vec<u32> = (0..state.pos.len() as u32)
            .filter(|&k| state.kind[k as usize] == KIND_FLUID)
            .collect();
        let bound: Vec<u32> = (0..state.pos.len() as u32)
            .filter(|&k| state.kind[k as usize] != KIND_FLUID)
            .collect();
        let layers = grid.dims[0];
        let mut sim = SphCuda::build(
            c,
            grid,
            &state,
            dt,
            opts,
            &fluid,
            &bound,
            None,
            (0, 0, layers),
            !moving.is_empty(),
        )?;
        let ghosts = super::mdbc::ghosts_at_rest(&sim.c, &moving, &state.pos, &state.kind);
        if !moving.is_empty() {
            sim.attach_moving(&state, moving)?;
        }
        if let Some(ghosts) = ghosts {
            sim.attach_ghosts(&ghosts)?;
        }
        if let (Integrator::Verlet { .. }, Some(back)) = (sim.c.integrator, &state.prev) {
            sim.upload_prev(back, &fluid)?;
        }
        Ok(sim)
    }

    /// Verlet: the state one step back (`back`, id order) into `half` (the fluid `fluid`, in the
    /// order `upload` placed it) and `bhalf` (the boundary's slots).
    fn upload_prev(&mut self, back: &PrevState, fluid: &[u32]) -> Result<(), CudaError> {
        let fv = self.reals(fluid.iter().flat_map(|&k| back.vel[k as usize]));
        self.put(self.half.vel, &fv)?;
        let fr = self.reals(fluid.iter().map(|&k| back.rho[k as usize]));
        self.put(self.half.rho, &fr)?;
        let br = self.reals(self.bids.iter().map(|&k| back.rho[k as usize]));
        self.put(self.bhalf, &br)?;
        self.verlet_ready = true;
        Ok(())
    }

    /// mDBC: uploads the ghost nodes at rest (`ghosts`, id order) in the boundary's slot order;
    /// with moving solids they are reordered with the boundary (`sph_bound_gather`).
    fn attach_ghosts(&mut self, ghosts: &[V3]) -> Result<(), CudaError> {
        let nb = self.nb as usize;
        self.bghost = self.alloc("boundary.ghost", 24 * nb)?;
        if self.slab.is_some() {
            self.bghost_rho = self.alloc("slab.ghost_density", self.real * nb.max(1))?;
        }
        let g: Vec<f64> = self.bids.iter().flat_map(|&k| ghosts[k as usize]).collect();
        self.put(self.bghost, as_bytes(&g))?;
        if self.mv.is_some() {
            let alt = self.alloc("boundary.reorder.ghost", 24 * nb)?;
            if let Some(mv) = &mut self.mv {
                mv.b.ghost = self.bghost;
                mv.alt.ghost = alt;
            }
        }
        Ok(())
    }

    /// mDBC: the boundary's densities from the fluid around their ghost nodes at the state's
    /// positions (`SphSim::correct_boundary`); the fluid is sorted, the boundary too. In a slab
    /// of several GPUs, those of the nodes in its layers, into `bghost_rho` (the group then
    /// hands each to the particle's holders: `SphCuda::queue_take_ghost`).
    fn correct_boundary(&self) -> Result<(), CudaError> {
        if self.bghost == 0 {
            return Ok(());
        }
        let p = KernelParams {
            n: self.nb,
            ..self.p
        };
        let (body, bodies) = match &self.mv {
            Some(mv) => (mv.b.body, SphBodies::at(&mv.solids, self.time)),
            None => (0u64, SphBodies::default()),
        };
        self.mark_fluid_blocks()?;
        self.launch(
            "sph_ghost_density",
            blocks(self.nb),
            &[
                &p,
                &self.s,
                &self.g.start,
                &self.bpos,
                &self.bghost,
                &body,
                &bodies,
                &self.brho,
                &self.bghost_rho,
                &self.fluid_near,
            ],
        )
    }

    /// Marks the blocks of cells with sorted fluid in reach (`fluid_near`, from the cell starts
    /// `g.start`) for the boundary passes that follow: mDBC's ghost nodes and the walls' rates.
    fn mark_fluid_blocks(&self) -> Result<(), CudaError> {
        let nblocks = fluid_block_count(&self.p) as u32;
        self.launch(
            "sph_fluid_blocks",
            blocks(nblocks),
            &[&self.p, &self.g.start, &self.fluid_blocks],
        )?;
        self.launch(
            "sph_fluid_near",
            blocks(nblocks),
            &[&self.p, &self.fluid_blocks, &self.fluid_near],
        )
    }

    /// A GPU holding the fluid particles `fluid` and the boundary particles `bound` of `state`
    /// on the run's `grid`, owning the layers `slab` = (axis, lo, hi). `slab_setup`: slab mode
    /// (several GPUs), with its fluid capacity and frame size.
    #[allow(clippy::too_many_arguments)]
    fn build(
        c: SphConstants,
        grid: Grid,
        state: &SphState,
        dt: f64,
        opts: SphCudaOptions,
        fluid: &[u32],
        bound: &[u32],
        slab_setup: Option<slab::SlabSetup>,
        own: (u32, u32, u32),
        moving: bool,
    ) -> Result<SphCuda, CudaError> {
        driver::driver_available()?;
        let n = state.pos.len();
        if n as u64 >= u32::MAX as u64 {
            return Err(CudaError::TooManyParticles(n, u32::MAX as u64 - 1));
        }
        // SAFETY: every buffer is used on `stream` only, except the publication staging
        // buffers, which the copy stream reads after waiting on an event recorded on `stream`
        // and which are packed again only after that copy completed, and a slab's send and
        // receive buffers, which its neighbours' streams read or write between events (see
        // group.rs); buffers are freed only after both streams synchronised (Drop), or, when a
        // slab grows one, after its stream did.
        let driver::OpenDevice {
            ctx,
            name: device_name,
            stream,
            copy_stream,
        } = unsafe { driver::open_device(opts.device) }?;
        let cells = grid.num_cells();
        let real = if opts.double { 8 } else { 4 };
        let (nf, nb) = (fluid.len(), bound.len());
        let cap = slab_setup.as_ref().map_or(nf, |s| s.cap as usize).max(nf);
        let frame_n = slab_setup.as_ref().map_or(n, |s| s.frame_n);
        // Refuse before compiling or allocating anything.
        let (per_f, per_b, per_c) = bytes_per_particle(real as u64);
        let need = (cap as u64)
            .saturating_mul(per_f)
            .saturating_add((nb as u64).saturating_mul(per_b))
            .saturating_add((cells as u64 + 1).saturating_mul(per_c))
            .saturating_add(2 * fluid_block_count_of(grid.dims, super::cpu::sph_reach(&c, &grid)))
            .saturating_add(
                slab_setup
                    .as_ref()
                    .map_or(0, |s| s.extra_bytes(real, nb as u64)),
            )
            .saturating_add(if moving {
                (nb as u64).saturating_mul(moving_bytes_per_boundary(real as u64))
            } else {
                0
            })
            .saturating_add(1 << 20);
        let (free, _) = ctx
            .mem_get_info()
            .map_err(|e| CudaError::driver("querying free memory", e))?;
        let margin: u64 = 256 << 20;
        if need.saturating_add(margin) > free as u64 {
            let bpp = need as f64 / (nf + nb).max(1) as f64;
            return Err(CudaError::DoesNotFit {
                device: opts.device,
                particles: nf + nb,
                need_gib: need as f64 / 1073741824.0,
                free_gib: free as f64 / 1073741824.0,
                bytes_per_particle: bpp,
                max_particles: ((free as u64).saturating_sub(margin) as f64 / bpp) as u64,
            });
        }
        let mut p = KernelParams {
            origin: grid.origin,
            cell: grid.cell,
            gravity: c.gravity,
            h: c.h,
            rho0: c.rho0,
            c0: c.c0,
            b: c.b,
            mass: c.mass,
            alpha: c.alpha,
            delta: c.delta,
            dt,
            dims: grid.dims,
            n: nf as u32,
            kernel: match c.kernel {
                super::physics::SphKernel::WendlandC2 => 0,
                super::physics::SphKernel::CubicSpline => 1,
            },
            diffusion: match c.diffusion {
                Diffusion::None => 0,
                Diffusion::Molteni => 1,
                Diffusion::Fourtakas => 2,
            },
            axis: own.0,
            own_lo: own.1,
            own_hi: own.2,
            reach: super::cpu::sph_reach(&c, &grid),
        };
        p.own_hi = p
            .own_hi
            .min(super::cpu::sph_layers(&grid, p.axis as usize, p.reach));
        let mut constants = pair_constants(&p, c.alpha_boundary);
        if moving {
            constants.push("-DSPH_MOVING=1".to_string());
        }
        let module = load_module(&ctx, opts.double, constants)?;
        let mut sim = SphCuda {
            c,
            ctx,
            stream,
            copy_stream,
            copy_done: FrameCopy::default(),
            frame_pending: None,
            fixed_boundary_staged: false,
            registration: None,
            module,
            device_name,
            p,
            nf: nf as u32,
            slots: nf as u32,
            next_nf: nf as u32,
            cap: cap as u32,
            nb: 0,
            cells: cells as u32,
            grid,
            bids: Vec::new(),
            slab: None,
            mv: None,
            s: SphArrays::default(),
            half: SphArrays::default(),
            alt: SphArrays::default(),
            acc: 0,
            drho: 0,
            loc: 0,
            kin: 0,
            bloc: 0,
            bpos: 0,
            brho: 0,
            bhalf: 0,
            bid: 0,
            bghost: 0,
            bghost_rho: 0,
            bstart: 0,
            fluid_blocks: 0,
            fluid_near: 0,
            g: SphGrid::default(),
            scan_levels: Vec::new(),
            diag: 0,
            staging: [0; 4],
            bufs: Vec::new(),
            memory: MemoryReport {
                particles: n as u64,
                cells: cells as u64,
                ..MemoryReport::default()
            },
            kind: Vec::new(),
            time: state.time,
            step: state.step,
            dt,
            real,
            verlet_ready: false,
        };
        sim.upload(state, fluid, bound, frame_n)?;
        if let Some(setup) = slab_setup {
            slab::Slab::attach(&mut sim, &setup)?;
        }
        sim.kind = state.kind.clone();
        Ok(sim)
    }

    /// Slab layers along the split axis (`cpu::sph_layers`).
    fn layers(&self) -> u32 {
        super::cpu::sph_layers(&self.grid, self.p.axis as usize, self.p.reach)
    }

    fn alloc(&mut self, name: &str, bytes: usize) -> Result<u64, CudaError> {
        if bytes == 0 {
            return Ok(0);
        }
        let slice = self
            .stream
            .alloc_zeros::<u8>(bytes)
            .map_err(|e| CudaError::driver(&format!("allocating {name} ({bytes} bytes)"), e))?;
        let ptr = {
            let (ptr, _sync) = slice.device_ptr(&self.stream);
            ptr
        };
        self.bufs.push((ptr, slice));
        self.memory.arrays.push((name.to_string(), bytes as u64));
        Ok(ptr)
    }

    /// Frees an array of [`SphCuda::alloc`] once the stream has passed every use of it (0: none).
    fn free(&mut self, ptr: u64) {
        if ptr == 0 {
            return;
        }
        let _ = self.stream.synchronize();
        if let Some(k) = self.bufs.iter().position(|b| b.0 == ptr) {
            self.bufs.swap_remove(k);
            self.memory.arrays.swap_remove(k);
        }
    }

    fn buf(&self, ptr: u64) -> &CudaSlice<u8> {
        &self
            .bufs
            .iter()
            .find(|b| b.0 == ptr)
            .expect("pointer of an allocated buffer")
            .1
    }

    fn put(&mut self, ptr: u64, data: &[u8]) -> Result<(), CudaError> {
        if data.is_empty() {
            return Ok(());
        }
        let stream = self.stream.clone();
        let buf = &mut self
            .bufs
            .iter_mut()
            .find(|b| b.0 == ptr)
            .expect("pointer of an allocated buffer")
            .1;
        stream
            .memcpy_htod(data, &mut buf.slice_mut(0..data.len()))
            .map_err(|e| CudaError::driver("uploading the SPH state", e))
    }

    /// Queues zeroing the first `bytes` bytes of an array.
    fn zero(&self, ptr: u64, bytes: usize) -> Result<(), CudaError> {
        if bytes == 0 {
            return Ok(());
        }
        assert!(
            self.bufs.iter().any(|b| b.0 == ptr && b.1.len() >= bytes),
            "zeroing {bytes} bytes of an array that does not hold them"
        );
        crate::dem::cuda::driver::bind(&self.stream)?;
        // SAFETY: the array holds at least `bytes` bytes (asserted) and is used on this stream.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, 0, bytes, self.stream.cu_stream()) }
            .map_err(|e| CudaError::driver("zeroing an array", e))
    }

    fn get(&self, ptr: u64, out: &mut [u8]) -> Result<(), CudaError> {
        if out.is_empty() {
            return Ok(());
        }
        self.stream
            .memcpy_dtoh(&self.buf(ptr).slice(0..out.len()), out)
            .map_err(|e| CudaError::driver("downloading the SPH state", e))
    }

    fn reals(&self, v: impl Iterator<Item = f64>) -> Vec<u8> {
        if self.real == 8 {
            v.flat_map(f64::to_ne_bytes).collect()
        } else {
            v.flat_map(|x| (x as f32).to_ne_bytes()).collect()
        }
    }

    fn upload(
        &mut self,
        st: &SphState,
        fluid: &[u32],
        bound: &[u32],
        frame_n: usize,
    ) -> Result<(), CudaError> {
        let (cap, r) = (self.cap as usize, self.real);
        let cells = self.cells as usize;
        for (name, set) in [("state", 0), ("half", 1), ("reorder", 2)] {
            let a = SphArrays {
                pos: self.alloc(&format!("{name}.pos"), 24 * cap)?,
                vel: self.alloc(&format!("{name}.vel"), 3 * r * cap)?,
                rho: self.alloc(&format!("{name}.rho"), r * cap)?,
                id: if set == 1 {
                    0
                } else {
                    self.alloc(&format!("{name}.id"), 4 * cap)?
                },
            };
            match set {
                0 => self.s = a,
                1 => self.half = a,
                _ => self.alt = a,
            }
        }
        // The stored rates: 3 reals of acceleration and 1 of density rate (parity mode only).
        let rate = rates_bytes(r as u64) as usize / 4;
        self.acc = self.alloc("rates.acc", 3 * rate * cap)?;
        self.drho = self.alloc("rates.drho", rate * cap)?;
        self.loc = self.alloc("rates.local", local_bytes(r as u64) as usize * cap)?;
        self.kin = self.alloc("rates.kinematics", local_bytes(r as u64) as usize * cap)?;
        self.g = SphGrid {
            cell: self.alloc("grid.cell", 4 * cap)?,
            rank: self.alloc("grid.rank", 4 * cap)?,
            perm: self.alloc("grid.perm", 4 * cap)?,
            count: self.alloc("grid.count", 4 * (cells + 1))?,
            start: self.alloc("grid.start", 4 * (cells + 1))?,
        };
        self.scan_levels = self.alloc_scan_levels("scan", cells + 1)?;
        self.diag = self.alloc("diag", DIAG_BYTES)?;
        self.bstart = self.alloc("boundary.cell_start", 4 * (cells + 1))?;
        let nblocks = fluid_block_count(&self.p) as usize;
        self.fluid_blocks = self.alloc("grid.fluid_blocks", nblocks)?;
        self.fluid_near = self.alloc("grid.fluid_near", nblocks)?;
        self.fixed_boundary_staged = false;
        self.staging = [
            self.alloc("publish.pos", 12 * frame_n)?,
            self.alloc("publish.vel", 12 * frame_n)?,
            self.alloc("publish.rho", 4 * frame_n)?,
            self.alloc("publish.pressure", 4 * frame_n)?,
        ];
        let bpos: Vec<V3> = bound.iter().map(|&k| st.pos[k as usize]).collect();
        let brho: Vec<f64> = bound.iter().map(|&k| st.rho[k as usize]).collect();
        self.upload_boundary(bound, &bpos, &brho)?;
        // Fluid: in id order; the first step sorts it.
        let fp: Vec<f64> = fluid.iter().flat_map(|&k| st.pos[k as usize]).collect();
        self.put(self.s.pos, as_bytes(&fp))?;
        let fv = self.reals(fluid.iter().flat_map(|&k| st.vel[k as usize]));
        self.put(self.s.vel, &fv)?;
        let fr = self.reals(fluid.iter().map(|&k| st.rho[k as usize]));
        self.put(self.s.rho, &fr)?;
        self.put(self.s.id, as_bytes(fluid))?;
        self.stream
            .synchronize()
            .map_err(|e| CudaError::driver("uploading the SPH state", e))
    }

    /// Places the boundary particles `bound` (positions `pos` and densities `rho`, one per
    /// entry), sorted by (cell, x, id) on the host: they never move.
    fn upload_boundary(&mut self, bound: &[u32], pos: &[V3], rho: &[f64]) -> Result<(), CudaError> {
        let (nb, r, cells) = (bound.len(), self.real, self.cells as usize);
        let mut list = CellList::by_x();
        list.build(&self.grid, pos, bound);
        let mut bstart = vec![0u32; cells + 1];
        for &c in &list.sorted_cell {
            bstart[c as usize + 1] += 1;
        }
        for c in 0..cells {
            bstart[c + 1] += bstart[c];
        }
        let order: Vec<usize> = list.sorted.iter().map(|&slot| slot as usize).collect();
        self.nb = nb as u32;
        self.bpos = self.alloc("boundary.pos", 24 * nb)?;
        self.brho = self.alloc("boundary.rho", r * nb)?;
        self.bhalf = self.alloc("boundary.rho_half", r * nb)?;
        self.bid = self.alloc("boundary.id", 4 * nb)?;
        self.bloc = self.alloc("boundary.local", local_bytes(r as u64) as usize * nb)?;
        let bp: Vec<f64> = order.iter().flat_map(|&j| pos[j]).collect();
        self.put(self.bpos, as_bytes(&bp))?;
        let brho = self.reals(order.iter().map(|&j| rho[j]));
        self.put(self.brho, &brho)?;
        self.bids = order.iter().map(|&j| bound[j]).collect();
        let bids = std::mem::take(&mut self.bids);
        self.put(self.bid, as_bytes(&bids))?;
        self.bids = bids;
        self.put(self.bstart, as_bytes(&bstart))
    }

    /// Moving solids: the boundary's velocities, rest positions and solids in the slot order of
    /// `upload_boundary`, the reorder copy and the boundary's counting sort.
    pub(super) fn attach_moving(
        &mut self,
        st: &SphState,
        solids: MovingSolids,
    ) -> Result<(), CudaError> {
        let (nb, r, cells) = (self.nb as usize, self.real, self.cells as usize);
        let mut body = vec![u32::MAX; st.pos.len()];
        let mut rest = st.pos.clone();
        for ((&id, &b), &x0) in solids.ids.iter().zip(&solids.body).zip(&solids.rest) {
            body[id as usize] = b;
            rest[id as usize] = x0;
        }
        let b = SphBound {
            pos: self.bpos,
            vel: self.alloc("boundary.vel", 3 * r * nb)?,
            rho: self.brho,
            half: self.bhalf,
            id: self.bid,
            rest: self.alloc("boundary.rest", 24 * nb)?,
            body: self.alloc("boundary.solid", 4 * nb)?,
            ghost: 0,
        };
        let alt = SphBound {
            pos: self.alloc("boundary.reorder.pos", 24 * nb)?,
            vel: self.alloc("boundary.reorder.vel", 3 * r * nb)?,
            rho: self.alloc("boundary.reorder.rho", r * nb)?,
            half: self.alloc("boundary.reorder.rho_half", r * nb)?,
            id: self.alloc("boundary.reorder.id", 4 * nb)?,
            rest: self.alloc("boundary.reorder.rest", 24 * nb)?,
            body: self.alloc("boundary.reorder.solid", 4 * nb)?,
            ghost: 0,
        };
        let grid = SphGrid {
            cell: self.alloc("boundary.grid.cell", 4 * nb)?,
            rank: self.alloc("boundary.grid.rank", 4 * nb)?,
            perm: self.alloc("boundary.grid.perm", 4 * nb)?,
            count: self.alloc("boundary.grid.count", 4 * (cells + 1))?,
            start: self.bstart,
        };
        let bids = self.bids.clone();
        let vel = self.reals(bids.iter().flat_map(|&k| st.vel[k as usize]));
        self.put(b.vel, &vel)?;
        let rp: Vec<f64> = bids.iter().flat_map(|&k| rest[k as usize]).collect();
        self.put(b.rest, as_bytes(&rp))?;
        let bb: Vec<u32> = bids.iter().map(|&k| body[k as usize]).collect();
        self.put(b.body, as_bytes(&bb))?;
        self.mv = Some(MovingGpu {
            solids,
            b,
            alt,
            grid,
        });
        self.stream
            .synchronize()
            .map_err(|e| CudaError::driver("uploading the moving solids", e))
    }

    /// Moving solids: places their particles at time `t`.
    fn place_boundary(&self, t: f64) -> Result<(), CudaError> {
        let Some(mv) = &self.mv else { return Ok(()) };
        let p = KernelParams {
            n: self.nb,
            ..self.p
        };
        let bodies = SphBodies::at(&mv.solids, t);
        self.launch("sph_bound_place", blocks(self.nb), &[&p, &bodies, &mv.b])
    }

    /// Moving solids: sorts the boundary by (cell, x, id) at its current positions (as `SphSim`
    /// rebuilds its boundary cells at each evaluation) and reorders its arrays.
    fn sort_boundary(&mut self) -> Result<(), CudaError> {
        let Some(mv) = &self.mv else { return Ok(()) };
        let (b, alt, g) = (mv.b, mv.alt, mv.grid);
        let p = KernelParams {
            n: self.nb,
            ..self.p
        };
        self.counting_sort(p, b.pos, 0, g, b.id)?;
        self.launch(
            "sph_bound_gather",
            blocks(self.nb),
            &[&p, &b, &alt, &g.rank],
        )?;
        (self.bpos, self.brho, self.bhalf, self.bid) = (alt.pos, alt.rho, alt.half, alt.id);
        self.bghost = alt.ghost;
        if let Some(mv) = &mut self.mv {
            (mv.b, mv.alt) = (alt, b);
        }
        // A slab owns the boundary particles in its layers at this evaluation's positions.
        self.flag_own_boundary()
    }

    /// The solid of every boundary slot (moving solids; 0: none).
    fn bbody_ptr(&self) -> u64 {
        self.mv.as_ref().map_or(0, |m| m.b.body)
    }

    /// The boundary's velocities (moving solids; 0: none, every boundary particle at rest).
    fn bvel_ptr(&self) -> u64 {
        self.mv.as_ref().map_or(0, |m| m.b.vel)
    }

    fn launch(&self, name: &str, cfg: LaunchConfig, args: &[&dyn ArgRef]) -> Result<(), CudaError> {
        self.launch_on(&self.stream, name, cfg, args)
    }

    /// [`SphCuda::launch`] on another stream of this GPU (an early exchange's).
    fn launch_on(
        &self,
        stream: &Arc<CudaStream>,
        name: &str,
        cfg: LaunchConfig,
        args: &[&dyn ArgRef],
    ) -> Result<(), CudaError> {
        let f = &self.module.functions[name];
        let mut b = stream.launch_builder(f);
        for a in args {
            a.push(&mut b);
        }
        // SAFETY: every SPH launch passes the arguments of its sph.cu signature in order
        // (KernelParams, SphArrays, SphGrid by value; device addresses as u64 of arrays sized for
        // the launch's `n` elements, allocated in `upload`; u32 counts).
        unsafe { b.launch(cfg) }.map_err(|e| CudaError::driver(&format!("launching {name}"), e))?;
        Ok(())
    }

    /// Sorts the fluid slots by (cell, x, id) of the positions at `pos` (the ids are the state's;
    /// on a slab, slots not kept go last): leaves the order in `g.perm` and the cell starts in
    /// `g.start`; the fluid count becomes the kept count.
    fn sort_fluid(&mut self, pos: u64) -> Result<(), CudaError> {
        let p = KernelParams {
            n: self.slots,
            ..self.p
        };
        let keep = self.slab.as_ref().map_or(0, |s| s.keep);
        self.counting_sort(p, pos, keep, self.g, self.s.id)?;
        std::mem::swap(&mut self.g.perm, &mut self.g.rank);
        self.set_fluid_count(self.next_nf);
        Ok(())
    }

    /// The counting sort of the `p.n` slots at `pos` with ids `ids` by (cell, x, id) (slots whose
    /// `keep` flag, when given, is 0 go last), into `g`: the cell starts in `g.start` and the
    /// permutation (sorted slot k takes slot `g.rank[k]`) in `g.rank`, which is free once the
    /// scatter used it.
    fn counting_sort(
        &self,
        p: KernelParams,
        pos: u64,
        keep: u64,
        g: SphGrid,
        ids: u64,
    ) -> Result<(), CudaError> {
        self.launch("sph_hash_count", blocks(p.n), &[&p, &pos, &keep, &g])?;
        self.scan(&self.scan_levels, g.count, g.start, self.cells + 1)?;
        self.launch("sph_scatter", blocks(p.n), &[&p, &g])?;
        self.launch("sph_cell_rank", blocks(p.n), &[&p, &pos, &ids, &g, &g.rank])
    }

    /// Queues the exclusive scan of the `n` counts at `input` into `output`, with the scan
    /// buffers `levels` ([`SphCuda::alloc_scan_levels`] for `n` or more).
    fn scan(
        &self,
        levels: &[(u64, u64, u32)],
        input: u64,
        output: u64,
        n: u32,
    ) -> Result<(), CudaError> {
        let fns = (
            &self.module.functions["scan_tile"],
            &self.module.functions["scan_add"],
        );
        crate::dem::cuda::exclusive_scan(&self.stream, fns, levels, input, output, n, 0)
    }

    /// The buffers of a scan of `n` counts, named `{name}.sums{level}` and `{name}.scanned{level}`.
    fn alloc_scan_levels(
        &mut self,
        name: &str,
        n: usize,
    ) -> Result<Vec<(u64, u64, u32)>, CudaError> {
        let mut levels = Vec::new();
        for (l, t) in crate::dem::cuda::scan_level_sizes(n)
            .into_iter()
            .enumerate()
        {
            let sums = self.alloc(&format!("{name}.sums{l}"), 4 * t)?;
            let scanned = self.alloc(&format!("{name}.scanned{l}"), 4 * t)?;
            levels.push((sums, scanned, t as u32));
        }
        Ok(levels)
    }

    fn set_fluid_count(&mut self, n: u32) {
        self.nf = n;
        self.slots = n;
        self.next_nf = n;
        self.p.n = n;
    }

    fn own_ptr(&self) -> u64 {
        self.slab.as_ref().map_or(0, |s| s.own)
    }

    fn bown_ptr(&self) -> u64 {
        self.slab.as_ref().map_or(0, |s| s.bown)
    }

    /// Reorders `src` into `self.alt` by `g.perm` and swaps them (the id only with `ids`).
    fn reorder(&mut self, which: Which) -> Result<(), CudaError> {
        let p = self.p;
        let src = match which {
            Which::State => self.s,
            Which::Half => self.half,
        };
        let mut dst = self.alt;
        if which == Which::Half {
            dst.id = 0;
        }
        // A pending frame: the step's first gather reads the state it shows.
        let frame = match which {
            Which::State => self.frame_pending.take(),
            Which::Half => None,
        };
        let fr = frame.map_or_else(SphFrame::default, |_| SphFrame::of(self.staging));
        self.launch(
            "sph_gather",
            blocks(self.nf),
            &[&p, &src, &dst, &self.g.perm, &fr],
        )?;
        match which {
            Which::State => std::mem::swap(&mut self.s, &mut self.alt),
            Which::Half => {
                let id = self.alt.id;
                std::mem::swap(&mut self.half, &mut self.alt);
                (self.half.id, self.alt.id) = (0, id);
            }
        }
        if let Some(t) = frame {
            // SAFETY: publish_async's caller keeps the targets valid and untouched until the
            // copy completed (publish_done or publish_wait).
            unsafe { self.copy_frame_async(t.map(|a| a as *mut u8), self.kind.len()) }?;
        }
        Ok(())
    }

    /// The update of `stage` on the current arrays (`euler`: Verlet's Euler step).
    fn update(&self, stage: u32, euler: bool) -> SphUpdate {
        SphUpdate {
            s: self.s,
            half: self.half,
            brho: self.brho,
            bhalf: self.bhalf,
            stage,
            euler: u32::from(euler),
        }
    }

    /// Whether the fluid's update runs inside the rates kernel: float mode (whose pair sums read
    /// the sph_localize copies, not the state arrays the update writes; see sph.cu).
    fn fused_update(&self) -> bool {
        self.loc != 0
    }

    /// Rates of every (owned) particle at the fluid state `f` and boundary densities `brho`,
    /// each particle updated by `u` as soon as its rates are summed (the fluid in float mode;
    /// the parity mode stores the fluid's rates and runs sph_update after).
    fn rates(&mut self, f: SphArrays, brho: u64, u: SphUpdate) -> Result<(), CudaError> {
        let sends = self.take_sends(u.stage == STAGE_PREDICT)?;
        let mut p = self.p;
        let start = self.g.start;
        let (own, bown) = (self.own_ptr(), self.bown_ptr());
        let counts = self.slab.as_ref().map_or(0, |s| s.act.counts);
        let bvel = self.bvel_ptr();
        let fluid_update = if self.fused_update() {
            u
        } else {
            SphUpdate {
                stage: STAGE_NONE,
                ..u
            }
        };
        // On a slab, the fluid's localize flags the owned slots at the evaluation's positions
        // too (float mode; the parity mode has no localize and a pass of its own).
        let localize = self.loc != 0 || self.bloc != 0;
        if localize {
            self.launch(
                "sph_localize",
                blocks(self.nf),
                &[
                    &p, &f.pos, &f.rho, &f.vel, &self.loc, &self.kin, &own, &counts,
                ],
            )?;
            let pb = KernelParams { n: self.nb, ..p };
            let none = 0u64;
            self.launch(
                "sph_localize",
                blocks(self.nb),
                &[
                    &pb, &self.bpos, &brho, &none, &self.bloc, &none, &none, &none,
                ],
            )?;
        }
        self.list_own_fluid(f.pos, localize)?;
        let [act, act_n] = self.owned_list();
        let args: [&dyn ArgRef; 16] = [
            &p,
            &f,
            &self.loc,
            &self.kin,
            &start,
            &self.bpos,
            &self.bloc,
            &brho,
            &bvel,
            &self.bstart,
            &self.acc,
            &self.drho,
            &act,
            &act_n,
            &self.diag,
            &fluid_update,
        ];
        match &sends {
            // A slab's kernel classifies each owned particle for the next exchange too.
            Some(c) => {
                let mut with = args.to_vec();
                with.push(c);
                self.launch("sph_rates_fluid_sends", blocks(self.nf), &with)?;
            }
            None => self.launch("sph_rates_fluid", blocks(self.nf), &args)?,
        }
        // An early exchange starts here (armed by a group): the fluid's next positions are
        // written, and what follows reads none of what it writes.
        self.mark_early(u.stage == STAGE_PREDICT)?;
        // The blocks with fluid in reach, from the cell starts the fluid kernel walked (again
        // after mDBC's pass, which marked the same sort: a few microseconds).
        self.mark_fluid_blocks()?;
        p.n = self.nb;
        self.launch(
            "sph_rates_bound",
            blocks(self.nb),
            &[
                &p,
                &f,
                &self.loc,
                &self.kin,
                &start,
                &self.bpos,
                &brho,
                &bvel,
                &bown,
                &self.fluid_near,
                &self.diag,
                &u,
            ],
        )?;
        if self.fused_update() {
            return Ok(());
        }
        let p = self.p;
        self.launch(
            "sph_update",
            blocks(self.nf),
            &[&p, &u, &self.acc, &self.drho, &own, &self.diag],
        )
    }

    /// The predictor half of a step: sort and reorder at the state's positions, the walls'
    /// densities (mDBC), rates, and the half state of the (owned) fluid and boundary.
    fn predictor(&mut self) -> Result<(), CudaError> {
        self.predictor_sort()?;
        self.predictor_rates()
    }

    /// The predictor up to its rates: sort and reorder, the walls' densities (mDBC; a slab's
    /// share, which the group hands out before [`SphCuda::predictor_rates`]).
    fn predictor_sort(&mut self) -> Result<(), CudaError> {
        self.sort_fluid(self.s.pos)?;
        self.reorder(Which::State)?;
        self.sort_boundary()?;
        self.correct_boundary()
    }

    /// The rest of the predictor: rates and the half state.
    fn predictor_rates(&mut self) -> Result<(), CudaError> {
        self.rates(self.s, self.brho, self.update(STAGE_PREDICT, false))
    }

    /// The corrector half: sort and reorder both states at the half-step positions, rates (the
    /// time-step limits reduced into `diag`), and the corrected state.
    fn corrector(&mut self) -> Result<(), CudaError> {
        self.sort_fluid(self.half.pos)?;
        self.reorder(Which::State)?;
        self.reorder(Which::Half)?;
        // Moving solids at the half step (SphSim::step places them there too).
        self.place_boundary(self.time + 0.5 * self.dt)?;
        self.sort_boundary()?;
        let one = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        self.launch("sph_reset_diag", one, &[&self.diag])?;
        self.rates(self.half, self.bhalf, self.update(STAGE_CORRECT, false))?;
        // Moving solids at the end of the step, where frames and states read them.
        self.place_boundary(self.time + self.dt)
    }

    /// One Verlet step (`SphSim::step_verlet`): sort and reorder the state and the state one
    /// step back (kept in `half`) at the state's positions, the walls' densities (mDBC), rates
    /// (the time-step limits reduced into `diag`), and the update, after which `half` holds the
    /// state at n.
    fn verlet(&mut self, euler_every: u32) -> Result<(), CudaError> {
        self.verlet_sort()?;
        self.verlet_update(euler_every)
    }

    /// The first part of a Verlet step: sort and reorder (the state one step back with the
    /// state), the walls' densities (mDBC; a slab's share, which a group hands out before
    /// [`SphCuda::verlet_update`]).
    fn verlet_sort(&mut self) -> Result<(), CudaError> {
        self.sort_fluid(self.s.pos)?;
        self.reorder(Which::State)?;
        self.reorder(Which::Half)?;
        self.sort_boundary()?;
        self.correct_boundary()
    }

    /// The rest of a Verlet step: rates and the update of the (owned) particles.
    fn verlet_update(&mut self, euler_every: u32) -> Result<(), CudaError> {
        let one = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        self.launch("sph_reset_diag", one, &[&self.diag])?;
        let euler = verlet_is_euler(self.step, euler_every, self.verlet_ready);
        self.rates(self.s, self.brho, self.update(STAGE_VERLET, euler))?;
        self.verlet_ready = true;
        // Moving solids at the end of the step, where frames and states read them.
        self.place_boundary(self.time + self.dt)
    }

    /// The reduced limits of the last corrector: (dt_f, dt_cv, non-finite particles). Waits for
    /// the stream.
    fn read_diag(&self) -> Result<(f64, f64, u32), CudaError> {
        let mut d = [0u8; DIAG_BYTES];
        self.get(self.diag, &mut d)?;
        let word = |k: usize| u64::from_ne_bytes(d[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        let nonfinite = u32::from_ne_bytes(d[16..20].try_into().expect("4 bytes"));
        Ok((f64::from_bits(word(0)), f64::from_bits(word(1)), nonfinite))
    }

    /// The device context (to page-lock more host memory for frames).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    pub fn memory(&self) -> &MemoryReport {
        &self.memory
    }

    fn download_reals(&self, ptr: u64, len: usize) -> Result<Vec<f64>, CudaError> {
        let mut bytes = vec![0u8; len * self.real];
        self.get(ptr, &mut bytes)?;
        Ok(if self.real == 8 {
            bytes
                .chunks_exact(8)
                .map(|c| f64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .collect()
        } else {
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_ne_bytes(c.try_into().expect("4 bytes")) as f64)
                .collect()
        })
    }

    /// This GPU's (owned) particles: ids, positions, velocities and densities (downloads).
    fn owned_particles(&self) -> Result<OwnedParticles, CudaError> {
        let (nf, nb) = (self.nf as usize, self.nb as usize);
        let mut fid = vec![0u32; nf];
        self.get(self.s.id, as_bytes_mut(&mut fid))?;
        let mut fpos = vec![0f64; 3 * nf];
        self.get(self.s.pos, as_bytes_mut(&mut fpos))?;
        let fvel = self.download_reals(self.s.vel, 3 * nf)?;
        let frho = self.download_reals(self.s.rho, nf)?;
        let mut bpos = vec![0f64; 3 * nb];
        self.get(self.bpos, as_bytes_mut(&mut bpos))?;
        let brho = self.download_reals(self.brho, nb)?;
        // Moving solids: the boundary's slot order changes at each sort; its ids and velocities
        // are on the device.
        let (bids, bvel) = match &self.mv {
            Some(mv) => {
                let mut ids = vec![0u32; nb];
                self.get(mv.b.id, as_bytes_mut(&mut ids))?;
                (ids, self.download_reals(mv.b.vel, 3 * nb)?)
            }
            None => (self.bids.clone(), vec![0.0; 3 * nb]),
        };
        let (own, bown) = match &self.slab {
            Some(_) => self.own_flags()?,
            None => (vec![1; nf], vec![1; nb]),
        };
        // Verlet: the state one step back (`half`, `bhalf`; a boundary particle's velocity is
        // not kept).
        let (pvel, prho, pbrho) = if self.verlet_ready {
            (
                self.download_reals(self.half.vel, 3 * nf)?,
                self.download_reals(self.half.rho, nf)?,
                self.download_reals(self.bhalf, nb)?,
            )
        } else {
            (Vec::new(), Vec::new(), Vec::new())
        };
        let mut out = OwnedParticles::default();
        for (k, &id) in fid.iter().enumerate() {
            if own[k] != 0 {
                out.id.push(id);
                out.pos
                    .push([fpos[3 * k], fpos[3 * k + 1], fpos[3 * k + 2]]);
                out.vel
                    .push([fvel[3 * k], fvel[3 * k + 1], fvel[3 * k + 2]]);
                out.rho.push(frho[k]);
                if self.verlet_ready {
                    out.prev_vel
                        .push([pvel[3 * k], pvel[3 * k + 1], pvel[3 * k + 2]]);
                    out.prev_rho.push(prho[k]);
                }
            }
        }
        for (k, &id) in bids.iter().enumerate() {
            if bown[k] != 0 {
                out.id.push(id);
                out.pos
                    .push([bpos[3 * k], bpos[3 * k + 1], bpos[3 * k + 2]]);
                out.vel
                    .push([bvel[3 * k], bvel[3 * k + 1], bvel[3 * k + 2]]);
                out.rho.push(brho[k]);
                if self.verlet_ready {
                    out.prev_vel.push([0.0; 3]);
                    out.prev_rho.push(pbrho[k]);
                }
            }
        }
        Ok(out)
    }

    /// Writes this GPU's (owned) particles into `s` by id.
    fn write_into(&self, s: &mut SphState) -> Result<(), CudaError> {
        self.owned_particles()?.write_into(s);
        Ok(())
    }

    /// Queues the copy of the packed frame (`n` particles) into `targets` on the copy stream,
    /// after everything queued on the compute stream.
    ///
    /// # Safety
    /// As [`SphCuda::publish_async`].
    unsafe fn copy_frame_async(
        &mut self,
        targets: [*mut u8; 4],
        n: usize,
    ) -> Result<(), CudaError> {
        crate::dem::cuda::driver::wait_for(&self.copy_stream, &self.stream)?;
        crate::dem::cuda::driver::bind(&self.copy_stream)?;
        for (k, &dst) in targets.iter().enumerate() {
            if dst.is_null() || n == 0 {
                continue;
            }
            let bytes = if k < 2 { 12 * n } else { 4 * n };
            // SAFETY: the caller's contract (`bytes` writable bytes at `dst` until the copy
            // completed); the staging array holds `bytes` bytes.
            let dst = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
            unsafe {
                cudarc::driver::result::memcpy_dtoh_async(
                    dst,
                    self.staging[k],
                    self.copy_stream.cu_stream(),
                )
            }
            .map_err(|e| CudaError::driver("queuing the frame copy", e))?;
        }
        self.copy_done.0 = Some(
            self.copy_stream
                .record_event(None)
                .map_err(|e| CudaError::driver("recording an event", e))?,
        );
        Ok(())
    }

    /// The event of the frame copy in flight (the group waits on it itself).
    fn take_copy_event(&mut self) -> FrameCopy {
        std::mem::take(&mut self.copy_done)
    }

    /// Packs this GPU's (owned) particles into the staging arrays `st` (id order; on a slab,
    /// GPU 0's).
    fn pack_into(&self, st: [u64; 4]) -> Result<(), CudaError> {
        self.pack_part_into(st, true, true)
    }

    /// Packs the fluid's (owned) particles, the boundary's, or both into `st`.
    fn pack_part_into(&self, st: [u64; 4], fluid: bool, boundary: bool) -> Result<(), CudaError> {
        let p = KernelParams {
            n: if fluid { self.nf } else { 0 },
            ..self.p
        };
        let nb = if boundary { self.nb } else { 0 };
        if p.n + nb == 0 {
            return Ok(());
        }
        let (own, bown) = (self.own_ptr(), self.bown_ptr());
        let bvel = self.bvel_ptr();
        self.launch(
            "sph_pack",
            blocks(p.n + nb),
            &[
                &p,
                &self.s,
                &nb,
                &self.bpos,
                &self.brho,
                &bvel,
                &self.bid,
                &own,
                &bown,
                &SphFrame::of(st),
            ],
        )
    }

    /// Packs the boundary into the staging (one GPU). Without moving solids the boundary's
    /// positions and velocities are those of the first frame: only its densities and pressures
    /// are packed again (at 100 M particles, 17 M boundary particles, that is 8 of 32 bytes a
    /// particle written and a quarter of the bytes read).
    fn pack_boundary(&mut self) -> Result<(), CudaError> {
        if !self.fixed_boundary_staged || self.mv.is_some() {
            self.pack_part_into(self.staging, false, true)?;
            self.fixed_boundary_staged = self.mv.is_none();
            return Ok(());
        }
        let st = self.staging;
        self.pack_part_into([0, 0, st[2], st[3]], false, true)
    }

    fn copy_staging(&self, a: FrameArray, out: &mut [u8], size: usize) -> Result<(), CudaError> {
        let k = a as usize;
        let want = if k < 2 { 12 } else { 4 };
        assert!(
            size == want && out.len() == size * self.kind.len(),
            "frame array {a:?}: {} bytes for {} particles",
            out.len(),
            self.kind.len()
        );
        self.get(self.staging[k], out)
    }
}

impl SphGpu for SphCuda {
    fn step(&mut self) -> Result<(), CudaError> {
        self.p.dt = self.dt;
        match self.c.integrator {
            Integrator::Symplectic => {
                self.predictor()?;
                self.corrector()?;
            }
            Integrator::Verlet { euler_every } => self.verlet(euler_every)?,
        }
        let (dt_f, dt_cv, nonfinite) = self.read_diag()?;
        self.time += self.dt;
        self.step += 1;
        if nonfinite > 0 {
            return Err(CudaError::NonFinite {
                count: nonfinite,
                step: self.step,
            });
        }
        self.dt = next_time_step(&self.c, dt_f, dt_cv);
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
        let mut s = SphState::zeroed(self.time, self.step, self.kind.clone());
        self.write_into(&mut s)?;
        Ok(s)
    }
    unsafe fn register_host(&mut self, ptr: *mut u8, len: usize) -> Result<(), CudaError> {
        self.release_host();
        // SAFETY: the caller's contract.
        self.registration = Some(unsafe { crate::dem::cuda::register_host(&self.ctx, ptr, len) }?);
        Ok(())
    }
    fn release_host(&mut self) {
        let _ = self.publish_wait();
        self.registration = None;
    }
    /// On one GPU only the boundary is packed now (moving solids move within a step); the
    /// fluid is packed by the next step's first gather, which reads the frame's state anyway,
    /// and the copy queued after it (`frame_pending`). Without a step before
    /// [`SphGpu::publish_wait`], that packs the fluid itself.
    unsafe fn publish_async(&mut self, targets: [*mut u8; 4]) -> Result<(), CudaError> {
        self.publish_wait()?;
        if self.slab.is_none() && self.nf > 0 {
            self.pack_boundary()?;
            self.frame_pending = Some(targets.map(|t| t as usize));
            return Ok(());
        }
        self.pack_frame()?;
        // SAFETY: the caller's contract.
        unsafe { self.copy_frame_async(targets, self.kind.len()) }
    }
    fn publish_done(&mut self) -> Result<bool, CudaError> {
        if self.frame_pending.is_some() {
            return Ok(false);
        }
        self.copy_done.done()
    }
    fn publish_wait(&mut self) -> Result<(), CudaError> {
        if let Some(t) = self.frame_pending.take() {
            // No step since: the fluid still holds the frame's state.
            self.pack_part_into(self.staging, true, false)?;
            // SAFETY: publish_async's caller keeps the targets valid and untouched until the
            // copy completed.
            unsafe { self.copy_frame_async(t.map(|a| a as *mut u8), self.kind.len()) }?;
        }
        self.copy_done.wait()
    }
    fn pack_frame(&self) -> Result<(), CudaError> {
        self.pack_into(self.staging)
    }
    fn frame_vec3(&self, a: FrameArray, out: &mut [[f32; 3]]) -> Result<(), CudaError> {
        self.copy_staging(a, as_bytes_mut(out), 12)
    }
    fn frame_scalar(&self, a: FrameArray, out: &mut [f32]) -> Result<(), CudaError> {
        self.copy_staging(a, as_bytes_mut(out), 4)
    }
    fn device_name(&self) -> String {
        self.device_name.clone()
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

/// The arrays of a packed frame, in staging order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameArray {
    Position = 0,
    Velocity = 1,
    Density = 2,
    Pressure = 3,
}

impl Drop for SphCuda {
    fn drop(&mut self) {
        // Nothing may be freed while a kernel or copy still uses it.
        let _ = self.copy_stream.synchronize();
        let _ = self.stream.synchronize();
        self.registration = None;
        let _ = &self.ctx;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    State,
    Half,
}

/// A kernel argument of any of the types the SPH launches pass.
trait ArgRef {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>);
}

impl<T: DeviceRepr> ArgRef for T {
    fn push<'a>(&'a self, b: &mut cudarc::driver::LaunchArgs<'a>) {
        b.arg(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sph::setup::SphCase;

    fn params_of(text: &str) -> KernelParams {
        let c = SphCase::from_toml_str(text)
            .expect("case")
            .constants()
            .expect("constants");
        KernelParams {
            gravity: c.gravity,
            h: c.h,
            rho0: c.rho0,
            b: c.b,
            ..KernelParams::default()
        }
    }

    /// The shipped dam break keeps every pair within the series' range (|t| about 1e-3); a case
    /// whose sound speed is far too low for its depth does not, and keeps the full function.
    #[test]
    fn the_hydrostatic_series_alone_only_where_the_case_bounds_t() {
        let text = include_str!("../../../cases/dambreak.toml");
        let p = params_of(text);
        assert!(hydrostatic_series_suffices(&p));
        assert!(pair_constants(&p, 0.1).contains(&"-DSPH_HYDROSTATIC_SERIES".to_string()));
        let slow = KernelParams { b: p.b / 1e3, ..p };
        assert!(!hydrostatic_series_suffices(&slow));
        assert!(!pair_constants(&slow, 0.1).contains(&"-DSPH_HYDROSTATIC_SERIES".to_string()));
        let weightless = KernelParams {
            gravity: [0.0; 3],
            ..p
        };
        assert!(hydrostatic_series_suffices(&weightless));
    }

    /// The folded polynomial gives the hydrostatic difference to float's rounding over the
    /// support, with four terms in the shipped dam break, and more where |t| is larger.
    #[test]
    fn the_hydrostatic_polynomial_is_the_series_to_float_rounding() {
        use crate::sph::physics::{hydrostatic_density_difference, DiffusionParams};
        let p = params_of(include_str!("../../../cases/dambreak.toml"));
        let a = hydrostatic_polynomial(&p);
        // Four terms at the shipped case's spacing (three at the 10 M benchmark's, |t| ~ 1e-3).
        assert_eq!(a.len(), 4, "{a:?}");
        let dp = DiffusionParams {
            delta: 0.1,
            h: p.h,
            c0: 1.0,
            rho0: p.rho0,
            b: p.b,
            gravity: p.gravity,
        };
        let mut rng = crate::core::rng::SplitMix64::new(5);
        for _ in 0..100_000 {
            let s = 2.0 * p.h / 3f64.sqrt();
            let r = [rng.range(-s, s), rng.range(-s, s), rng.range(-s, s)];
            let want = hydrostatic_density_difference(&dp, r);
            let x = crate::core::vec3::dot(p.gravity, r);
            let got = a.iter().rev().fold(0.0, |acc, ak| ak + x * acc) * x;
            assert!(
                (got - want).abs() <= f64::from(f32::EPSILON) / 4.0 * want.abs() + 1e-300,
                "r = {r:?}: {got:e} vs {want:e}"
            );
        }
        // Ten times the largest |t| takes more terms.
        let slower = KernelParams { b: p.b / 10.0, ..p };
        assert!(hydrostatic_polynomial(&slower).len() > 4);
        assert!(pair_constants(&p, 0.1).contains(&"-DSPH_HYDRO_TERMS=4".to_string()));
    }
}
