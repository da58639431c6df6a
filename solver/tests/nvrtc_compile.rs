//! The CUDA sources compiled by NVRTC itself, without a GPU: every module of
//! `kernels::variants` (the DEM configurations, the SPH modes and variants, the parity modules)
//! with the solver's own options (`driver::nvrtc_options`) and compile call
//! (`kernel_cache::compile_cubin_logged`), to a CUBIN for a real architecture, so ptxas runs
//! too. `kernels/tests/host_syntax.rs` checks names and types with g++; this one also checks
//! CUDA's own rules (address spaces, intrinsics, launch bounds, registers), and that the SPH
//! module holds every kernel the solver loads (`kernels::SPH_KERNELS`).
//!
//! NVRTC is a library (`libnvrtc.so.13`, no driver needed): on a machine without the CUDA
//! toolkit, `pip download "nvidia-cuda-nvrtc==13.0.*"` and unzip the wheel, then point
//! `LD_LIBRARY_PATH` at its `nvidia/cu13/lib`. Without the library the test says so and passes,
//! unless `PARTICLE_SHM_REQUIRE_NVRTC=1`. `PARTICLE_SHM_NVRTC_ARCHS` (default `sm_90`, the H100
//! and H200) lists the architectures; `PARTICLE_SHM_NVRTC_VERBOSE=1` prints ptxas's registers
//! and spills per kernel (with `--nocapture`); `PARTICLE_SHM_NVRTC_DUMP=DIR` writes each CUBIN
//! and its options there (`bench/gpu/cubin_text.py` compares two builds' kernels).

use cudarc::nvrtc::sys;
use kernels::variants::{self, Module};
use solver::dem::cuda::{driver, kernel_cache};

/// Whether the library can be loaded (a failure instead where `PARTICLE_SHM_REQUIRE_NVRTC=1`).
/// Not in CI's sub-domain pass (`PARTICLE_SHM_TEST_SUBDOMAINS`), which changes nothing here and
/// would compile every module a second time (about 50 s on 2 cores).
fn nvrtc_present() -> bool {
    if std::env::var("PARTICLE_SHM_TEST_SUBDOMAINS").is_ok_and(|v| !v.trim().is_empty()) {
        println!("the kernels do not depend on sub-domains: skipped in the sub-domain pass");
        return false;
    }
    // SAFETY: only tries to open the library by its names; nothing is called through it.
    let present = unsafe { sys::is_culib_present() };
    if !present {
        let required = std::env::var("PARTICLE_SHM_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "PARTICLE_SHM_REQUIRE_NVRTC=1 but libnvrtc cannot be loaded (LD_LIBRARY_PATH?)"
        );
        eprintln!("no libnvrtc: the CUDA sources were not compiled with NVRTC");
    }
    present
}

/// The solver's options for `m` on `arch` (SPH's float mode adds fast math to its defines,
/// `sph/cuda/mod.rs`), with ptxas's report when `verbose`.
fn options(m: &Module, arch: &str, verbose: bool) -> Vec<String> {
    let mut defines = m.defines.clone();
    if m.fast_math {
        defines.insert(0, "--use_fast_math".to_string());
    }
    let mut o = driver::nvrtc_options(arch, m.double, defines);
    if verbose {
        o.push("--ptxas-options=-v".to_string());
    }
    o
}

/// Compiles `source` with `options`: Ok((CUBIN, log)) or Err(NVRTC's error and log).
fn compile(source: &str, options: &[String]) -> Result<(Vec<u8>, String), String> {
    kernel_cache::compile_cubin_logged(source, options, "test module").map_err(|e| e.to_string())
}

/// `name` is a symbol of the CUBIN (its ELF string table holds it NUL-terminated).
fn has_symbol(cubin: &[u8], name: &str) -> bool {
    let mut needle = Vec::with_capacity(name.len() + 2);
    needle.push(0u8);
    needle.extend_from_slice(name.as_bytes());
    needle.push(0u8);
    cubin.windows(needle.len()).any(|w| w == needle.as_slice())
}

fn archs() -> Vec<String> {
    std::env::var("PARTICLE_SHM_NVRTC_ARCHS")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.split(',').map(|a| a.trim().to_string()).collect())
        .unwrap_or_else(|| vec!["sm_90".to_string()])
}

/// Compiles every module on every architecture; `symbols(m)` lists kernels the CUBIN must hold.
/// Fails with every failure's message.
fn compile_all(modules: Vec<Module>, symbols: impl Fn(&Module) -> &'static [&'static str]) {
    let verbose = std::env::var("PARTICLE_SHM_NVRTC_VERBOSE").is_ok_and(|v| v == "1");
    let dump = std::env::var_os("PARTICLE_SHM_NVRTC_DUMP").map(std::path::PathBuf::from);
    let tag = |name: &str| -> String {
        let t: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        t.chars().take(40).collect()
    };
    let mut failures = Vec::new();
    for arch in archs() {
        for (i, m) in modules.iter().enumerate() {
            let opts = options(m, &arch, verbose);
            let what = format!("{} on {arch} ({})", m.name, opts.join(" "));
            match compile(&m.source, &opts) {
                Err(e) => failures.push(format!("== {what}\n{e}")),
                Ok((cubin, log)) => {
                    if verbose {
                        println!("== {what}\n{log}");
                    }
                    if let Some(dir) = &dump {
                        let stem = format!("{}-{i:02}-{arch}", tag(&m.name));
                        std::fs::create_dir_all(dir).expect("the dump directory");
                        std::fs::write(dir.join(format!("{stem}.cubin")), &cubin).expect("a CUBIN");
                        std::fs::write(dir.join(format!("{stem}.options")), opts.join("\n"))
                            .expect("its options");
                    }
                    let missing: Vec<_> = symbols(m)
                        .iter()
                        .filter(|s| !has_symbol(&cubin, s))
                        .collect();
                    if !missing.is_empty() {
                        failures.push(format!("== {what}\nkernels missing: {missing:?}"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn dem_modules_compile_with_nvrtc() {
    if !nvrtc_present() {
        return;
    }
    compile_all(variants::dem_modules(), |_| &[]);
}

#[test]
fn sph_modules_compile_with_nvrtc() {
    if !nvrtc_present() {
        return;
    }
    compile_all(variants::sph_modules(), |m| {
        if m.name.contains("parity") {
            &[]
        } else {
            &kernels::SPH_KERNELS
        }
    });
}

/// The check can fail: NVRTC refuses what g++ would take (a host function called from a
/// kernel), and a kernel that is not in the source is missing from the CUBIN.
#[test]
fn nvrtc_refuses_device_errors() {
    if !nvrtc_present() {
        return;
    }
    let arch = format!("--gpu-architecture={}", archs()[0]);
    let bad = "int host_only() { return 1; }\nextern \"C\" __global__ void k(int* o) { *o = host_only(); }\n";
    let err = compile(bad, std::slice::from_ref(&arch))
        .expect_err("a host function called from a kernel");
    assert!(err.contains("host_only"), "{err}");
    let good = "extern \"C\" __global__ void k(int* o) { *o = 1; }\n";
    let (cubin, _) = compile(good, &[arch]).expect("a valid kernel compiles");
    assert!(has_symbol(&cubin, "k"));
    assert!(!has_symbol(&cubin, "sph_rates_fluid"));
}
