//! Driver detection and module loading: cudarc panics when `libcuda` is missing, so the driver
//! library is probed with `dlopen` first; each (device, configuration) module is compiled with
//! NVRTC once per process and cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::CompileOptions;
use kernels::{Kernel, ModuleConfig};

use super::CudaError;

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

/// The compiled DEM module of one device and configuration, with its kernels looked up.
pub struct DemModule {
    _module: Arc<CudaModule>,
    functions: HashMap<Kernel, CudaFunction>,
    /// NVRTC compile time [s] (0 when taken from the cache).
    pub compile_s: f64,
}

impl DemModule {
    pub fn function(&self, k: Kernel) -> &CudaFunction {
        &self.functions[&k]
    }
}

/// Compiles `source` with NVRTC for `ctx`'s device with the `-D` options `defines` and loads
/// it; `double` is the parity mode (no fused multiply-add, so that every product is rounded as
/// the CPU rounds it). Returns the module and the compile time [s]; `what` names it in errors.
pub(crate) fn compile_module(
    ctx: &Arc<CudaContext>,
    source: &str,
    defines: Vec<String>,
    double: bool,
    what: &str,
) -> Result<(Arc<CudaModule>, f64), CudaError> {
    let (major, minor) = ctx
        .compute_capability()
        .map_err(|e| CudaError::driver("reading the compute capability", e))?;
    let arch: &'static str = Box::leak(format!("sm_{major}{minor}").into_boxed_str());
    let t0 = std::time::Instant::now();
    let fmad = if double { Some(false) } else { None };
    let mut defines = defines;
    // contact.cu uses `if constexpr` (NVRTC's default since CUDA 11; stated, not assumed).
    defines.push("-std=c++17".to_string());
    // Extra NVRTC options for experiments and profiling (`-DSPH_LOCAL=0`, `-lineinfo`), so that
    // variants compare on one build; the parity tests never set it.
    if let Ok(extra) = std::env::var("PARTICLE_SHM_NVRTC_OPTIONS") {
        defines.extend(extra.split_whitespace().map(str::to_string));
    }
    let opts = CompileOptions {
        arch: Some(arch),
        options: defines,
        fmad,
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, opts)
        .map_err(|e| CudaError::Compile(format!("{what}: {e:?}")))?;
    let compile_s = t0.elapsed().as_secs_f64();
    let module = ctx
        .load_module(ptx)
        .map_err(|e| CudaError::driver(&format!("loading the {what} module"), e))?;
    Ok((module, compile_s))
}

type ModuleKey = (usize, ModuleConfig);

fn cache() -> &'static Mutex<HashMap<ModuleKey, Arc<DemModule>>> {
    static CACHE: OnceLock<Mutex<HashMap<ModuleKey, Arc<DemModule>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Compiles (once per process) and loads the DEM module for `ctx`'s device.
pub fn load_module(ctx: &Arc<CudaContext>, cfg: ModuleConfig) -> Result<Arc<DemModule>, CudaError> {
    let key = (ctx.ordinal(), cfg);
    if let Some(m) = cache().lock().map_err(|_| CudaError::Poisoned)?.get(&key) {
        return Ok(m.clone());
    }
    let (module, compile_s) = compile_module(
        ctx,
        &kernels::dem_module_source(),
        cfg.defines(),
        cfg.double,
        "DEM",
    )?;
    let mut functions = HashMap::new();
    for k in Kernel::ALL {
        let f = module
            .load_function(k.symbol())
            .map_err(|e| CudaError::driver(k.symbol(), e))?;
        functions.insert(k, f);
    }
    let m = Arc::new(DemModule {
        _module: module,
        functions,
        compile_s,
    });
    cache()
        .lock()
        .map_err(|_| CudaError::Poisoned)?
        .insert(key, m.clone());
    Ok(m)
}

/// Makes `stream`'s context current on this thread before a raw driver call (`result::` or
/// `sys::`), which, unlike cudarc's safe calls, does not bind it: one host thread drives every
/// GPU of a group, so the current context may be another GPU's.
pub(crate) fn bind(stream: &cudarc::driver::CudaStream) -> Result<(), CudaError> {
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| CudaError::driver("binding the context", e))
}
