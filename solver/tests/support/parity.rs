//! Compiles a parity module (`kernels::parity_module_source`, `sph_parity_module_source`) the
//! way the parity mode compiles the kernels (`-DDEM_DOUBLE`, no FMA contraction, the device's
//! architecture) and returns its kernel with a stream to run it on.
#![allow(dead_code)]

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream};
use cudarc::nvrtc::CompileOptions;

/// Kernel `kernel` of `source` on device 0 (panics with what failed: a test helper).
pub fn parity_kernel(source: String, kernel: &str) -> (CudaFunction, Arc<CudaStream>) {
    let ctx = CudaContext::new(0).expect("device 0");
    let (major, minor) = ctx.compute_capability().expect("compute capability");
    let arch: &'static str = Box::leak(format!("sm_{major}{minor}").into_boxed_str());
    let opts = CompileOptions {
        arch: Some(arch),
        options: vec!["-DDEM_DOUBLE".into()],
        fmad: Some(false),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, opts).expect("parity module compiles");
    let module = ctx.load_module(ptx).expect("load");
    let f = module.load_function(kernel).expect("kernel");
    (f, ctx.default_stream())
}
