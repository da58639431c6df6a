//! The CUDA sources checked as C++ on the host: each module the solver compiles with NVRTC, with
//! its defines, goes through `g++ -fsyntax-only` after a header of stand-ins for the CUDA
//! built-ins (`cuda_host_stub.h`). NVRTC is only on the GPU machines, so without this a name used
//! before its definition, a typo or a missing `#define` shows up only there (session 17 lost a
//! device run to one). It checks names and types, not CUDA's rules (address spaces, launch
//! bounds) or anything at run time. Without a `g++` on PATH the test says so and passes
//! (`.ci/run` installs it).

use kernels::{ModuleConfig, LIST_BUFFERED, LIST_BY_WARP, LIST_DIRECT};
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

/// Checks every (name, source, defines) and fails with all the compilers' messages.
fn check_all(modules: Vec<(String, String, Vec<String>)>) {
    let failures: Vec<String> = modules
        .iter()
        .filter_map(|(name, src, defs)| {
            check(src, defs)
                .err()
                .map(|e| format!("== {name} ({})\n{e}", defs.join(" ")))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn dem_config() -> ModuleConfig {
    ModuleConfig {
        model: 0,
        friction: true,
        rotation: true,
        double: false,
        meshes: false,
        candidates: 16,
        min_blocks: 0,
        hist_in_place: false,
        hist_pairs: false,
        list_walk: LIST_BY_WARP,
        one_species: true,
        stream_hints: false,
        passes: false,
        single_copy: false,
        hist_spill: false,
        owner_keys: false,
    }
}

#[test]
fn dem_modules_are_valid_cxx() {
    if !have_gxx() {
        return;
    }
    let src = kernels::dem_module_source();
    let base = dem_config();
    let mut configs = Vec::new();
    for model in [0, 1] {
        for friction in [false, true] {
            for double in [false, true] {
                configs.push(ModuleConfig {
                    model,
                    friction,
                    rotation: friction,
                    double,
                    ..base
                });
            }
        }
    }
    configs.extend([
        ModuleConfig {
            meshes: true,
            one_species: false,
            ..base
        },
        ModuleConfig {
            hist_in_place: true,
            stream_hints: true,
            passes: true,
            ..base
        },
        // One copy of the state (dem_integrate, dem_gather_words), with pairs and in place.
        ModuleConfig {
            hist_in_place: true,
            hist_pairs: true,
            single_copy: true,
            ..base
        },
        ModuleConfig {
            model: 1,
            hist_in_place: true,
            single_copy: true,
            double: true,
            meshes: true,
            ..base
        },
        ModuleConfig {
            friction: false,
            rotation: false,
            single_copy: true,
            ..base
        },
        // Spill rows behind pairs-once rows, one copy and two, f32 and f64 with meshes.
        ModuleConfig {
            hist_in_place: true,
            hist_pairs: true,
            hist_spill: true,
            single_copy: true,
            ..base
        },
        ModuleConfig {
            model: 1,
            hist_in_place: true,
            hist_pairs: true,
            hist_spill: true,
            double: true,
            meshes: true,
            stream_hints: true,
            ..base
        },
        // Owner keys (dem_owner_keys, dem_adopt): one copy with spill rows, f32 and f64.
        ModuleConfig {
            hist_in_place: true,
            hist_pairs: true,
            hist_spill: true,
            single_copy: true,
            owner_keys: true,
            ..base
        },
        ModuleConfig {
            model: 1,
            hist_in_place: true,
            hist_pairs: true,
            hist_spill: true,
            single_copy: true,
            owner_keys: true,
            double: true,
            meshes: true,
            ..base
        },
        // Each pair's spring once (dem_springs), in f32 and f64, with meshes and Hertz.
        ModuleConfig {
            hist_in_place: true,
            hist_pairs: true,
            ..base
        },
        ModuleConfig {
            model: 1,
            hist_in_place: true,
            hist_pairs: true,
            double: true,
            meshes: true,
            ..base
        },
        ModuleConfig {
            candidates: 0,
            list_walk: LIST_DIRECT,
            ..base
        },
        ModuleConfig {
            list_walk: LIST_BUFFERED,
            double: true,
            meshes: true,
            ..base
        },
    ]);
    let mut modules = Vec::new();
    for c in configs {
        for part in [kernels::DEM_PART_STEP, kernels::DEM_PART_ENERGIES] {
            let mut d = c.defines();
            d.push(format!("-DDEM_MODULE_PART={part}"));
            modules.push((format!("DEM {c:?}"), src.clone(), d));
        }
    }
    modules.push((
        "physics parity".into(),
        kernels::parity_module_source(),
        ModuleConfig {
            double: true,
            ..base
        }
        .defines(),
    ));
    check_all(modules);
}

#[test]
fn sph_modules_are_valid_cxx() {
    if !have_gxx() {
        return;
    }
    // The constants solver/src/sph/cuda/mod.rs defines (pair_constants), with plausible values.
    let constants = |kernel: u32, diffusion: u32| -> Vec<String> {
        let mut d = vec![
            format!("-DSPH_KERNEL={kernel}"),
            format!("-DSPH_DIFFUSION={diffusion}"),
            "-DSPH_REACH=3".into(),
            "-DSPH_BLOCK=128".into(),
        ];
        for (name, v) in [
            ("SPH_H", 0.013),
            ("SPH_RHO0", 1000.0),
            ("SPH_B", 1.6e5),
            ("SPH_C0", 33.0),
            ("SPH_MASS", 4.2e-4),
            ("SPH_ALPHA", 0.1),
            ("SPH_ALPHA_BOUND", 0.1),
            ("SPH_DELTA", 0.1),
            ("SPH_GX", 0.0),
            ("SPH_GY", 0.0),
            ("SPH_GZ", -9.81),
        ] {
            d.push(format!("-D{name}={v:?}"));
        }
        d
    };
    let src = kernels::sph_module_source();
    let mut modules = Vec::new();
    for (kernel, diffusion) in [(0, 2), (1, 1), (0, 0)] {
        for extra in [vec![], vec!["-DDEM_DOUBLE".to_string()]] {
            let mut d = constants(kernel, diffusion);
            d.extend(extra);
            modules.push(("SPH".to_string(), src.clone(), d));
        }
    }
    // The walk's variants that the benchmarks select through PARTICLE_SHM_NVRTC_OPTIONS.
    for extra in [
        "-DSPH_CHORD=0",
        "-DSPH_RATES_UNBOUNDED",
        "-DSPH_RATES_MIN_BLOCKS=10",
        "-DSPH_PTR_WALK=1",
        // The hydrostatic series alone, and float mode's folded polynomial of it.
        "-DSPH_HYDROSTATIC_SERIES -DSPH_HYDRO_TERMS=3 -DSPH_HYDRO_COEFFS=-0.46,-6.4e-4,-1.2e-6",
        "-DSPH_HYDROSTATIC_SERIES -DSPH_HYDRO_TERMS=1 -DSPH_HYDRO_COEFFS=-0.46 -DDEM_DOUBLE",
    ] {
        let mut d = constants(0, 2);
        d.extend(extra.split_whitespace().map(str::to_string));
        modules.push((format!("SPH {extra}"), src.clone(), d));
    }
    // A reach whose row would span three x-blocks is refused by name (SPH_XBLOCK in sph.cu).
    let mut far = constants(0, 2);
    far.retain(|d| !d.starts_with("-DSPH_REACH="));
    far.push("-DSPH_REACH=16".into());
    let err = check(&src, &far).expect_err("a reach of 16 cells needs a third x-block");
    assert!(err.contains("two x-blocks"), "{err}");
    // Float mode's pair sums read the sph_localize copies: the update inside the rates kernel
    // writes the state arrays, so the old -DSPH_LOCAL=0 comparison is refused by name.
    let mut local0 = constants(0, 2);
    local0.push("-DSPH_LOCAL=0".into());
    let err = check(&src, &local0).expect_err("SPH_LOCAL follows the mode");
    assert!(err.contains("SPH_LOCAL follows the mode"), "{err}");
    modules.push((
        "SPH physics parity".into(),
        kernels::sph_parity_module_source(),
        vec!["-DDEM_DOUBLE".into()],
    ));
    check_all(modules);
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
