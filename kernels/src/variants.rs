//! The modules the solver compiles with NVRTC, each with its defines: the DEM module's
//! configurations that the solver and its benchmarks select, the SPH module in both modes with
//! the walk's variants, the parity modules. For the checks of the CUDA sources without a GPU:
//! `kernels/tests/host_syntax.rs` (g++ on the host) and `solver/tests/nvrtc_compile.rs` (NVRTC
//! itself, with the solver's options, where its library can be loaded).

use crate::{ModuleConfig, LIST_BUFFERED, LIST_BY_WARP, LIST_DIRECT};

/// One module to compile: a name for messages, the source, the `-D` defines, and whether it
/// is a parity (f64) module, which the solver compiles without fused multiply-adds.
pub struct Module {
    pub name: String,
    pub source: String,
    pub defines: Vec<String>,
    pub double: bool,
    /// Compiled with `--use_fast_math` (the SPH module's float mode; an NVRTC option, so not
    /// among the defines, which g++ reads too).
    pub fast_math: bool,
}

impl Module {
    pub fn new(name: String, source: &str, defines: Vec<String>, double: bool) -> Self {
        Module {
            name,
            source: source.to_string(),
            defines,
            double,
            fast_math: false,
        }
    }

    /// The SPH module's float mode: fast math unless `double`.
    pub fn fast_unless(mut self, double: bool) -> Self {
        self.fast_math = !double;
        self
    }
}

/// The base of the DEM variants: linear with friction, f32, no meshes, 16 candidates buffered,
/// the Verlet list walked by warp, one species; every other option off.
pub fn dem_config() -> ModuleConfig {
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

/// The DEM module's configurations the solver and its benchmarks select, both parts of each,
/// and the physics parity module.
pub fn dem_modules() -> Vec<Module> {
    let src = crate::dem_module_source();
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
        for part in [crate::DEM_PART_STEP, crate::DEM_PART_ENERGIES] {
            let mut d = c.defines();
            d.push(format!("-DDEM_MODULE_PART={part}"));
            modules.push(Module::new(format!("DEM {c:?}"), &src, d, c.double));
        }
    }
    modules.push(Module::new(
        "physics parity".into(),
        &crate::parity_module_source(),
        ModuleConfig {
            double: true,
            ..base
        }
        .defines(),
        true,
    ));
    modules
}

/// The constants solver/src/sph/cuda/mod.rs defines (pair_constants), with plausible values.
pub fn sph_constants(kernel: u32, diffusion: u32) -> Vec<String> {
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
}

/// The SPH module in both modes and kernels, the walk's variants the benchmarks select, and the
/// SPH physics parity module.
pub fn sph_modules() -> Vec<Module> {
    let src = crate::sph_module_source();
    let mut modules = Vec::new();
    for (kernel, diffusion) in [(0, 2), (1, 1), (0, 0)] {
        for double in [false, true] {
            let mut d = sph_constants(kernel, diffusion);
            if double {
                d.push("-DDEM_DOUBLE".into());
            }
            modules.push(Module::new("SPH".into(), &src, d, double).fast_unless(double));
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
        let mut d = sph_constants(0, 2);
        d.extend(extra.split_whitespace().map(str::to_string));
        let double = d.iter().any(|o| o == "-DDEM_DOUBLE");
        modules.push(Module::new(format!("SPH {extra}"), &src, d, double).fast_unless(double));
    }
    modules.push(Module::new(
        "SPH physics parity".into(),
        &crate::sph_parity_module_source(),
        vec!["-DDEM_DOUBLE".into()],
        true,
    ));
    modules
}
