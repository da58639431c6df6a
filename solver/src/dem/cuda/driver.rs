//! Driver detection and module loading: cudarc panics when `libcuda` is missing, so the driver
//! library is probed with `dlopen` first; each (device, configuration) module is compiled with
//! NVRTC once per process and cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use kernels::{Kernel, ModuleConfig};

use super::{kernel_cache, CudaError};

/// GPUs the driver reports (call [`driver_available`] first).
pub fn device_count() -> Result<usize, CudaError> {
    cudarc::driver::CudaContext::device_count()
        .map(|n| n as usize)
        .map_err(|e| CudaError::driver("counting GPUs", e))
}

/// `Ok(())` when the NVIDIA driver library can be loaded, otherwise a one-line reason.
pub fn driver_available() -> Result<(), CudaError> {
    for lib in ["libcuda.so.1", "libcuda.so"] {
        let c = std::ffi::CString::new(lib).expect("no NUL in a literal");
        // SAFETY: dlopen with a valid C string; the handle is closed right away. Loading the
        // driver library runs no user-visible initialisation (cuInit is not called).
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if !h.is_null() {
            // SAFETY: `h` is a live handle returned by dlopen just above.
            unsafe { libc::dlclose(h) };
            return Ok(());
        }
    }
    Err(CudaError::NoDriver)
}

/// A device opened for a simulation: its context (event tracking off), its name, a compute
/// stream and a stream for frame copies.
pub(crate) struct OpenDevice {
    pub ctx: Arc<CudaContext>,
    pub name: String,
    pub stream: Arc<cudarc::driver::CudaStream>,
    pub copy_stream: Arc<cudarc::driver::CudaStream>,
}

/// Opens GPU `device` with cudarc's per-buffer event tracking off (call [`driver_available`]
/// first).
///
/// # Safety
/// The caller orders every use of its buffers across the two streams (and any other GPU's)
/// with events of its own, and frees a buffer only after every stream that uses it passed it.
pub(crate) unsafe fn open_device(device: usize) -> Result<OpenDevice, CudaError> {
    let ctx = CudaContext::new(device).map_err(|e| CudaError::NoDevice {
        device,
        message: e.to_string(),
    })?;
    // SAFETY: the caller's contract.
    unsafe { ctx.disable_event_tracking() };
    let name = ctx.name().unwrap_or_else(|_| "unknown CUDA device".into());
    let stream = ctx
        .new_stream()
        .map_err(|e| CudaError::driver("creating the compute stream", e))?;
    let copy_stream = ctx
        .new_stream()
        .map_err(|e| CudaError::driver("creating the copy stream", e))?;
    Ok(OpenDevice {
        ctx,
        name,
        stream,
        copy_stream,
    })
}

/// Free bytes of GPU `device` now (cuMemGetInfo on its primary context).
pub(crate) fn free_bytes(device: usize) -> Result<u64, CudaError> {
    let ctx = CudaContext::new(device).map_err(|e| CudaError::NoDevice {
        device,
        message: e.to_string(),
    })?;
    let (free, _total) = ctx
        .mem_get_info()
        .map_err(|e| CudaError::driver("querying free memory", e))?;
    Ok(free as u64)
}

/// The compiled DEM module of one device and configuration, with its kernels looked up.
pub struct DemModule {
    _modules: [Arc<CudaModule>; 2],
    functions: HashMap<Kernel, CudaFunction>,
    /// How the module was compiled or loaded.
    pub timing: ModuleTiming,
}

impl DemModule {
    pub fn function(&self, k: Kernel) -> &CudaFunction {
        &self.functions[&k]
    }
}

/// How a module came to be: compiled now, or loaded from the disk cache
/// (`kernel_cache.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModuleTiming {
    /// NVRTC compile time [s] (0 when loaded from the cache).
    pub compile_s: f64,
    /// Loading the machine code into the context [s].
    pub load_s: f64,
    /// Whether the machine code came from the disk cache.
    pub cached: bool,
}

impl ModuleTiming {
    /// "kernels compiled in 1.21 s" or "kernels from the cache in 0.02 s", for start logs.
    pub fn describe(&self) -> String {
        if self.cached {
            format!("kernels from the cache in {:.2} s", self.load_s)
        } else {
            format!("kernels compiled in {:.2} s", self.compile_s + self.load_s)
        }
    }
}

/// NVRTC's option to optimise functions in parallel on every core.
const SPLIT_COMPILE: &str = "--split-compile=0";

/// The driver's CUDA version (e.g. 13000), part of the kernel cache's key.
fn driver_version() -> i32 {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: cuDriverGetVersion writes one int; the driver library is loaded (the caller
    // holds a context).
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    if r == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        v
    } else {
        0
    }
}

/// Compiles `source` with NVRTC for `ctx`'s device with the `-D` options `defines` and loads
/// it; `double` is the parity mode (no fused multiply-add, so that every product is rounded as
/// the CPU rounds it). NVRTC builds the device's machine code (a CUBIN), which is loaded as is
/// and kept in the disk cache, from which a later run with the same key loads it without
/// NVRTC (`kernel_cache.rs`). `what` names the module in errors.
pub(crate) fn compile_module(
    ctx: &Arc<CudaContext>,
    source: &str,
    defines: Vec<String>,
    double: bool,
    what: &str,
) -> Result<(Arc<CudaModule>, ModuleTiming), CudaError> {
    let dir = kernel_cache::cache_dir();
    compile_module_in(ctx, source, defines, double, what, dir.as_deref())
}

/// NVRTC's options for a module of `defines` on `arch` (`sm_XY`): without fused multiply-adds
/// in the parity mode (`double`). Also what `solver/tests/nvrtc_compile.rs` compiles with.
pub fn nvrtc_options(arch: &str, double: bool, defines: Vec<String>) -> Vec<String> {
    let mut options = Vec::new();
    if double {
        options.push("--fmad=false".to_string());
    }
    options.push(format!("--gpu-architecture={arch}"));
    options.extend(defines);
    // contact.cu uses `if constexpr` (NVRTC's default since CUDA 11; stated, not assumed).
    options.push("-std=c++17".to_string());
    // NVRTC optimises the kernels on all cores (CUDA 12.1 and later; dropped by
    // compile_module_in for one that does not know the option): a machine's first main job
    // compiled in 1.2 s instead of 1.7 (H100, session 14). Only the compile's speed changes.
    options.push(SPLIT_COMPILE.to_string());
    options
}

/// [`compile_module`] with the disk cache in `dir` (None: no disk cache).
pub fn compile_module_in(
    ctx: &Arc<CudaContext>,
    source: &str,
    defines: Vec<String>,
    double: bool,
    what: &str,
    dir: Option<&std::path::Path>,
) -> Result<(Arc<CudaModule>, ModuleTiming), CudaError> {
    let (major, minor) = ctx
        .compute_capability()
        .map_err(|e| CudaError::driver("reading the compute capability", e))?;
    let arch = format!("sm_{major}{minor}");
    let mut options = nvrtc_options(&arch, double, defines);
    // Extra NVRTC options for experiments and profiling (`-DSPH_CHORD=0`, `-lineinfo`), so that
    // variants compare on one build; the parity tests never set it.
    if let Ok(extra) = std::env::var("PARTICLE_SHM_NVRTC_OPTIONS") {
        options.extend(extra.split_whitespace().map(str::to_string));
    }
    let key = kernel_cache::cache_key(&arch, driver_version(), &options, source);
    if let Some(cubin) = dir.and_then(|d| kernel_cache::load(d, &key)) {
        let t0 = std::time::Instant::now();
        match ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin)) {
            Ok(module) => {
                let timing = ModuleTiming {
                    compile_s: 0.0,
                    load_s: t0.elapsed().as_secs_f64(),
                    cached: true,
                };
                return Ok((module, timing));
            }
            // A cached file the driver refuses is compiled again and replaced.
            Err(e) => tracing::debug!("{what} kernels in the cache not loadable ({e}): compiling"),
        }
    }
    let t0 = std::time::Instant::now();
    let cubin = match kernel_cache::compile_cubin(source, &options, what) {
        // An NVRTC older than 12.1 refuses the option: compiled without it.
        Err(CudaError::Compile(m)) if m.contains("INVALID_OPTION") => {
            options.retain(|o| o != SPLIT_COMPILE);
            kernel_cache::compile_cubin(source, &options, what)?
        }
        other => other?,
    };
    let compile_s = t0.elapsed().as_secs_f64();
    let t1 = std::time::Instant::now();
    let module = ctx
        .load_module(cudarc::nvrtc::Ptx::from_binary(cubin.clone()))
        .map_err(|e| CudaError::driver(&format!("loading the {what} module"), e))?;
    let load_s = t1.elapsed().as_secs_f64();
    if let Some(d) = dir {
        if let Err(e) = kernel_cache::store(d, &key, &cubin) {
            tracing::debug!("{what} kernels not kept in the cache {}: {e}", d.display());
        }
    }
    Ok((
        module,
        ModuleTiming {
            compile_s,
            load_s,
            cached: false,
        },
    ))
}

type ModuleKey = (usize, ModuleConfig);

/// A module of the process-wide cache: empty until compiled; its lock is held while it
/// compiles, so a second caller (the start of a run, while a prefetch compiles) waits for it
/// instead of compiling it again.
type ModuleSlot = Arc<Mutex<Option<Arc<DemModule>>>>;

fn cache() -> &'static Mutex<HashMap<ModuleKey, ModuleSlot>> {
    static CACHE: OnceLock<Mutex<HashMap<ModuleKey, ModuleSlot>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Compiles (once per process) and loads the DEM module for `ctx`'s device.
pub fn load_module(ctx: &Arc<CudaContext>, cfg: ModuleConfig) -> Result<Arc<DemModule>, CudaError> {
    let key = (ctx.ordinal(), cfg);
    let slot = cache()
        .lock()
        .map_err(|_| CudaError::Poisoned)?
        .entry(key)
        .or_default()
        .clone();
    let mut ready = slot.lock().map_err(|_| CudaError::Poisoned)?;
    if let Some(m) = ready.as_ref() {
        return Ok(m.clone());
    }
    // Two modules compiled side by side (NVRTC is thread-safe): the collide and everything
    // else, and the energies, which are the collide's body a second time. A machine's first
    // run waits for the longer of the two instead of their sum.
    let source = kernels::dem_module_source();
    let compile_part = |part: u32| {
        let mut defines = cfg.defines();
        defines.push(format!("-DDEM_MODULE_PART={part}"));
        compile_module(ctx, &source, defines, cfg.double, "DEM")
    };
    let (step_part, energies_part) = std::thread::scope(|s| {
        let energies = s.spawn(|| compile_part(kernels::DEM_PART_ENERGIES));
        let step = compile_part(kernels::DEM_PART_STEP);
        let energies = energies.join().unwrap_or_else(|_| {
            Err(CudaError::Compile(
                "DEM: the compile thread panicked".into(),
            ))
        });
        (step, energies)
    });
    let (module, t1) = step_part?;
    let (energies_module, t2) = energies_part?;
    let mut functions = HashMap::new();
    for k in Kernel::ALL {
        if !cfg.passes && matches!(k, Kernel::CollideInterior | Kernel::CollideBoundary) {
            // Not compiled (DEM_PASSES 0): one GPU never launches them.
            continue;
        }
        if k == Kernel::Springs && !(cfg.friction && cfg.hist_pairs) {
            // Only the pairs-once history has it (DEM_HIST_PAIRS).
            continue;
        }
        if k == Kernel::SpillCount && !(cfg.friction && cfg.hist_pairs && cfg.hist_spill) {
            // Only spill rows have it (DEM_HIST_SPILL).
            continue;
        }
        if matches!(k, Kernel::OwnerKeys | Kernel::Adopt) && !cfg.owner_keys {
            // Only owner keys have them (DEM_OWNER_KEYS).
            continue;
        }
        let m = if k == Kernel::Energies {
            &energies_module
        } else {
            &module
        };
        let f = m
            .load_function(k.symbol())
            .map_err(|e| CudaError::driver(k.symbol(), e))?;
        functions.insert(k, f);
    }
    // The collide's registers and spills (local memory) per variant: its speed follows them.
    for k in [
        Kernel::Collide,
        Kernel::CollideInterior,
        Kernel::CollideBoundary,
        Kernel::Energies,
    ] {
        if let Some(f) = functions.get(&k) {
            tracing::debug!(
                "{}: {} registers, {} bytes of local memory per thread",
                k.symbol(),
                f.num_regs().unwrap_or(-1),
                f.local_size_bytes().unwrap_or(-1)
            );
        }
    }
    let timing = ModuleTiming {
        compile_s: t1.compile_s.max(t2.compile_s),
        load_s: t1.load_s + t2.load_s,
        cached: t1.cached && t2.cached,
    };
    let m = Arc::new(DemModule {
        _modules: [module, energies_module],
        functions,
        timing,
    });
    *ready = Some(m.clone());
    Ok(m)
}

/// Starts compiling the DEM module `cfg` for each of `devices` on a thread of its own, so that
/// NVRTC (seconds on a machine's first run) works while the host places the particles; the
/// run's [`load_module`] then finds it, or waits for it. Does nothing without a driver; a
/// failure here is left for the run's own compile to report.
pub fn prefetch_module(devices: &[usize], cfg: ModuleConfig) {
    if driver_available().is_err() {
        return;
    }
    for &device in devices {
        let spawned = std::thread::Builder::new()
            .name(format!("kernels-gpu{device}"))
            .spawn(move || {
                let loaded = CudaContext::new(device)
                    .map_err(|e| CudaError::driver("opening the GPU", e))
                    .and_then(|ctx| load_module(&ctx, cfg));
                if let Err(e) = loaded {
                    tracing::debug!("compiling the kernels ahead for GPU {device}: {e}");
                }
            });
        if let Err(e) = spawned {
            tracing::debug!("no thread to compile the kernels ahead: {e}");
        }
    }
}

/// Makes `stream`'s context current on this thread before a raw driver call (`result::` or
/// `sys::`), which, unlike cudarc's safe calls, does not bind it: one host thread drives every
/// GPU of a group, so the current context may be another GPU's.
/// A stream of the device's highest priority, for work queued beside a long kernel whose
/// blocks would otherwise all be scheduled before its own (`what` names it in errors).
pub(crate) fn high_priority_stream(
    ctx: &std::sync::Arc<cudarc::driver::CudaContext>,
    what: &str,
) -> Result<std::sync::Arc<cudarc::driver::CudaStream>, CudaError> {
    let err = |e| CudaError::driver(&format!("creating {what}"), e);
    ctx.bind_to_thread().map_err(err)?;
    let (_least, greatest) = cudarc::driver::result::stream::get_priority_range().map_err(err)?;
    ctx.new_stream_with_priority(greatest).map_err(err)
}

/// Makes `waiter` run what is queued on it from now on only after the work queued on
/// `producer` so far (an event between the two streams), e.g. a frame's copy after its pack.
pub(crate) fn wait_for(
    waiter: &cudarc::driver::CudaStream,
    producer: &cudarc::driver::CudaStream,
) -> Result<(), CudaError> {
    let ev = producer
        .record_event(None)
        .map_err(|e| CudaError::driver("recording an event", e))?;
    waiter
        .wait(&ev)
        .map_err(|e| CudaError::driver("ordering two streams", e))
}

pub(crate) fn bind(stream: &cudarc::driver::CudaStream) -> Result<(), CudaError> {
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| CudaError::driver("binding the context", e))
}
