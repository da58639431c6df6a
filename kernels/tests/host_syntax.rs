//! The CUDA sources checked as C++ on the host: each module the solver compiles with NVRTC, with
//! its defines, goes through `g++ -fsyntax-only` after a header of stand-ins for the CUDA
//! built-ins (`cuda_host_stub.h`). NVRTC is only on the GPU machines, so without this a name used
//! before its definition, a typo or a missing `#define` shows up only there (session 17 lost a
//! device run to one). It checks names and types, not CUDA's rules (address spaces, launch
//! bounds) or anything at run time. Without a `g++` on PATH the test says so and passes
//! (`.ci/run` installs it).

use kernels::variants::{self, Module};
use std::io::Write;
use std::process::{Command, Stdio};

const STUB: &str = include_str!("cuda_host_stub.h");

/// `g++ -fsyntax-only` on `source` with `defines`; Err(the compiler's messages).
fn check(source: &str, defines: &[String]) -> Result<(), String> {
    let mut child = Command::new("g++")
        .args(["-std=c++17", "-fsyntax-only", "-x", "c++"])
        .args(defines)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("g++ did not start: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let text = format!("{STUB}\n{source}");
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    writer
        .join()
        .expect("writer thread")
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn have_gxx() -> bool {
    let ok = Command::new("g++")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("no g++ on PATH: the CUDA sources were not checked on the host");
    }
    ok
}

/// Checks every module and fails with all the compilers' messages.
fn check_all(modules: Vec<Module>) {
    let failures: Vec<String> = modules
        .iter()
        .filter_map(|m| {
            check(&m.source, &m.defines)
                .err()
                .map(|e| format!("== {} ({})\n{e}", m.name, m.defines.join(" ")))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn dem_modules_are_valid_cxx() {
    if !have_gxx() {
        return;
    }
    check_all(variants::dem_modules());
}

#[test]
fn sph_modules_are_valid_cxx() {
    if !have_gxx() {
        return;
    }
    let src = kernels::sph_module_source();
    // A reach whose row would span three x-blocks is refused by name (SPH_XBLOCK in sph.cu).
    let mut far = variants::sph_constants(0, 2);
    far.retain(|d| !d.starts_with("-DSPH_REACH="));
    far.push("-DSPH_REACH=16".into());
    let err = check(&src, &far).expect_err("a reach of 16 cells needs a third x-block");
    assert!(err.contains("two x-blocks"), "{err}");
    // Float mode's pair sums read the sph_localize copies: the update inside the rates kernel
    // writes the state arrays, so the old -DSPH_LOCAL=0 comparison is refused by name.
    let mut local0 = variants::sph_constants(0, 2);
    local0.push("-DSPH_LOCAL=0".into());
    let err = check(&src, &local0).expect_err("SPH_LOCAL follows the mode");
    assert!(err.contains("SPH_LOCAL follows the mode"), "{err}");
    check_all(variants::sph_modules());
}

/// The check can fail: a name used before its definition is refused.
#[test]
fn a_name_used_before_its_definition_is_refused() {
    if !have_gxx() {
        return;
    }
    let bad = "__device__ int f() { return g(); }\n__device__ int g() { return 1; }\n";
    let err = check(bad, &[]).expect_err("g is used before it is declared");
    assert!(err.contains("'g'") || err.contains("‘g’"), "{err}");
    check("__device__ int g() { return 1; }\n", &[]).expect("a valid source passes");
}
