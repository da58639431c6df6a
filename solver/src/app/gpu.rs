//! Detecting a usable NVIDIA driver without touching cudarc (which panics when `libcuda` is
//! absent), so `--backend auto` can fall back to the CPU and `--backend cuda` can fail clearly.

/// Why no GPU can be used, in one line, or `Ok(())` when the driver library loads.
pub fn cuda_driver_available() -> Result<(), String> {
    for lib in ["libcuda.so.1", "libcuda.so"] {
        let c = std::ffi::CString::new(lib).expect("no NUL in a literal");
        // SAFETY: dlopen with a valid C string; the handle is closed right away. Loading the
        // driver library runs no user-visible initialisation (cuInit is not called).
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if !h.is_null() {
            unsafe { libc::dlclose(h) };
            return Ok(());
        }
    }
    Err("no NVIDIA driver found (libcuda.so.1 cannot be loaded)".into())
}
