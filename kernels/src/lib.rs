//! CUDA C sources of the solver, embedded with `include_str!` and compiled at run time with NVRTC
//! by the solver's CUDA backend (issue 4). This crate holds text only, so it builds anywhere.
//!
//! NVRTC gets one translation unit: the headers ([`Header`], in dependency order) followed by the
//! kernel files ([`Source`]). The kernel files therefore carry no `#include` of their own.
//! Compile-time switches (`-D` options) specialise the module; see [`ModuleConfig`].

pub mod variants;

/// Shared headers, in the order they are concatenated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// `real`, `real3`, `dvec3` and the vec3 helpers (twins of `solver/src/core/vec3.rs`).
    Vec3,
    /// Twins of `solver/src/dem/physics.rs` and of the history partner encoding.
    Physics,
    /// `#[repr(C)]` parameter structs mirrored in `solver/src/dem/cuda/params.rs`.
    Params,
    /// Particle-triangle geometry (twins of `solver/src/core/geometry/triangle.rs`), the mesh
    /// wall velocity and the bins.
    Mesh,
}

impl Header {
    pub const ALL: [Header; 4] = [Header::Vec3, Header::Physics, Header::Params, Header::Mesh];

    pub fn file_name(self) -> &'static str {
        match self {
            Header::Vec3 => "vec3.cuh",
            Header::Physics => "physics.cuh",
            Header::Params => "params.cuh",
            Header::Mesh => "mesh.cuh",
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            Header::Vec3 => include_str!("cuda/vec3.cuh"),
            Header::Physics => include_str!("cuda/physics.cuh"),
            Header::Params => include_str!("cuda/params.cuh"),
            Header::Mesh => include_str!("cuda/mesh.cuh"),
        }
    }
}

/// Kernel source files, in the order they are concatenated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Cell coordinates and the exclusive scan (shared with the SPH module).
    Cells,
    /// Cell hash, counting sort, per-cell id order, scan, reorder.
    Grid,
    /// Pack into id order for publication (before `Contact`, whose collide packs a deferred
    /// frame with the same function).
    Publish,
    /// Fused collide + integrate; velocity Verlet's kick + drift.
    Contact,
    /// Migrants and ghosts between the GPUs of one run.
    Exchange,
}

impl Source {
    pub const ALL: [Source; 5] = [
        Source::Cells,
        Source::Grid,
        Source::Publish,
        Source::Contact,
        Source::Exchange,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            Source::Cells => "cells.cu",
            Source::Grid => "grid.cu",
            Source::Contact => "contact.cu",
            Source::Publish => "publish.cu",
            Source::Exchange => "exchange.cu",
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            Source::Cells => include_str!("cuda/cells.cu"),
            Source::Grid => include_str!("cuda/grid.cu"),
            Source::Contact => include_str!("cuda/contact.cu"),
            Source::Publish => include_str!("cuda/publish.cu"),
            Source::Exchange => include_str!("cuda/exchange.cu"),
        }
    }
}

/// Every kernel entry point of the DEM module, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    HashCount,
    ScanTile,
    ScanAdd,
    Scatter,
    CellSort,
    Gather,
    Collide,
    CollideInterior,
    CollideBoundary,
    Springs,
    SpillCount,
    OwnerKeys,
    Adopt,
    KickDrift,
    Integrate,
    GatherWords,
    SearchCells,
    Pack,
    Classify,
    ClassifyBand,
    Unpack,
    LayerCounts,
    Outflow,
    MeshFilter,
    Energies,
    Neighbours,
    RefreshCount,
    RefreshFill,
    RefreshPack,
    RefreshUnpack,
    WordsOut,
}

impl Kernel {
    pub const ALL: [Kernel; 31] = [
        Kernel::HashCount,
        Kernel::ScanTile,
        Kernel::ScanAdd,
        Kernel::Scatter,
        Kernel::CellSort,
        Kernel::Gather,
        Kernel::Collide,
        Kernel::CollideInterior,
        Kernel::CollideBoundary,
        Kernel::Springs,
        Kernel::SpillCount,
        Kernel::OwnerKeys,
        Kernel::Adopt,
        Kernel::KickDrift,
        Kernel::Integrate,
        Kernel::GatherWords,
        Kernel::SearchCells,
        Kernel::Pack,
        Kernel::Classify,
        Kernel::ClassifyBand,
        Kernel::Unpack,
        Kernel::LayerCounts,
        Kernel::Outflow,
        Kernel::MeshFilter,
        Kernel::Energies,
        Kernel::Neighbours,
        Kernel::RefreshCount,
        Kernel::RefreshFill,
        Kernel::RefreshPack,
        Kernel::RefreshUnpack,
        Kernel::WordsOut,
    ];

    /// The `extern "C"` symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            Kernel::HashCount => "dem_hash_count",
            Kernel::ScanTile => "scan_tile",
            Kernel::ScanAdd => "scan_add",
            Kernel::Scatter => "dem_scatter",
            Kernel::CellSort => "dem_cell_sort",
            Kernel::Gather => "dem_gather",
            Kernel::Collide => "dem_collide",
            Kernel::CollideInterior => "dem_collide_interior",
            Kernel::CollideBoundary => "dem_collide_boundary",
            Kernel::Springs => "dem_springs",
            Kernel::SpillCount => "dem_spill_count",
            Kernel::OwnerKeys => "dem_owner_keys",
            Kernel::Adopt => "dem_adopt",
            Kernel::KickDrift => "dem_kick_drift",
            Kernel::Integrate => "dem_integrate",
            Kernel::GatherWords => "dem_gather_words",
            Kernel::SearchCells => "dem_search_cells",
            Kernel::Pack => "dem_pack",
            Kernel::Classify => "dem_classify",
            Kernel::ClassifyBand => "dem_classify_band",
            Kernel::Unpack => "dem_unpack",
            Kernel::LayerCounts => "dem_layer_counts",
            Kernel::Outflow => "dem_outflow",
            Kernel::MeshFilter => "dem_mesh_filter",
            Kernel::Energies => "dem_energies",
            Kernel::Neighbours => "dem_neighbours",
            Kernel::RefreshCount => "dem_refresh_count",
            Kernel::RefreshFill => "dem_refresh_fill",
            Kernel::RefreshPack => "dem_refresh_pack",
            Kernel::RefreshUnpack => "dem_refresh_unpack",
            Kernel::WordsOut => "dem_words_out",
        }
    }
}

/// Elements per tile of `scan_tile` (`SCAN_TILE` in cells.cu).
pub const SCAN_TILE: usize = 1024;
/// Threads per block of `scan_tile` (`SCAN_THREADS` in cells.cu).
pub const SCAN_THREADS: u32 = 256;
/// Elements per thread of `scan_tile` and `scan_add` (`SCAN_ITEMS` in cells.cu).
pub const SCAN_ITEMS: u32 = 4;
/// Threads of `dem_mesh_filter` per particle in small cases (its `lanes` argument: 1, 2, 4 or 8).
pub const MESH_FILTER_LANES: u32 = 8;
/// Slots each block of `dem_classify` handles (`CLASSIFY_CHUNK` in exchange.cu).
pub const CLASSIFY_CHUNK: u32 = 4096;
/// Work items each block of `dem_classify_band` handles (`BAND_ITEMS` in exchange.cu).
pub const BAND_ITEMS: u32 = 1024;
/// Block size `dem_collide` is compiled for (`__launch_bounds__` in contact.cu).
pub const COLLIDE_THREADS: u32 = 128;
/// A pairs-once history row's count word ([`ModuleConfig::hist_pairs`]): the entry count in its
/// low bits (`DEM_ROW_COUNT_BITS` in contact.cu), a slide flag per entry above them.
pub const PAIRS_ROW_COUNT_BITS: u32 = 6;
/// Most entries of a pairs-once row: one slide flag each in the count word (`DEM_ROW_SLIDE_BITS`).
pub const PAIRS_MAX_ROW: u32 = 32 - PAIRS_ROW_COUNT_BITS;

/// Compile-time specialisation of the DEM module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ModuleConfig {
    /// 0 linear spring-dashpot, 1 Hertz-Mindlin.
    pub model: u32,
    /// Tangential springs with history and rolling resistance.
    pub friction: bool,
    /// Angular velocities integrated (implied by friction).
    pub rotation: bool,
    /// `real` = double instead of float (parity runs).
    pub double: bool,
    /// Particle-triangle contacts compiled in. Off for cases without meshes: the mesh path
    /// (a call the compiler cannot inline) costs registers even when never taken.
    pub meshes: bool,
    /// Particle contacts buffered per thread before they are evaluated (`DEM_CANDIDATES`;
    /// 0: evaluated as found, the kernel before issue 13's compaction). See contact.cu.
    pub candidates: u32,
    /// `__launch_bounds__` minimum blocks of the collide kernel; 0: [`Self::collide_min_blocks`]'s
    /// measured default (other values are for sweeps).
    pub min_blocks: u32,
    /// With friction: one contact-history buffer updated in place (half the history memory,
    /// slower) instead of two (`DEM_HIST_IN_PLACE`, contact.cu).
    pub hist_in_place: bool,
    /// With friction and [`Self::hist_in_place`]: each particle pair's spring kept once, by the
    /// pair's owner (`DEM_HIST_PAIRS`): `dem_springs` updates the owned springs in place, then
    /// `dem_collide` reads every contact's spring, the other side's from its owner's row.
    pub hist_pairs: bool,
    /// How the collide walks a Verlet list: [`LIST_BUFFERED`], [`LIST_DIRECT`] or
    /// [`LIST_BY_WARP`] (the default; the same contacts in the same order whichever).
    pub list_walk: u32,
    /// The case has one species (`DEM_ONE_SPECIES`): no species index is loaded, and a
    /// partner's properties come from the species table's first row (an address known before
    /// the partner's), which removes the chain partner -> species -> table from each contact.
    pub one_species: bool,
    /// The history and the Verlet list loaded and stored evict-first (`DEM_STREAM_HINTS`, f32):
    /// L2 then keeps the partners' state. Set for cases of [`STREAM_HINTS_FROM`] particles and
    /// more.
    pub stream_hints: bool,
    /// The collide's two passes over disjoint slots are compiled too (`DEM_PASSES`:
    /// `dem_collide_interior` and `dem_collide_boundary`, for a GPU of a group or rank that
    /// collides its interior beside the ghost refresh, then its boundary layers; contact.cu).
    /// Off for one GPU: they lengthen the compile. (Selected at run time inside one kernel, the
    /// pass cost `dem_collide` 11 % in a 10 M dense bed with friction: 3.41 -> 3.78 ms.)
    pub passes: bool,
    /// One copy of the particle state instead of two (`DEM_SINGLE_COPY`): `dem_collide` stores
    /// each slot's force and torque, `dem_integrate` then moves the particles in place, and a
    /// search reorders the state one array at a time through the force buffer
    /// (`dem_gather_words`). 56 B less per frictional particle, for a force buffer of 24.
    pub single_copy: bool,
    /// With [`Self::hist_pairs`]: rows that need more than `hist_cap` entries keep the rest in
    /// spill rows (`DEM_HIST_SPILL`, contact.cu), so rows can be sized for the common particle
    /// rather than for the busiest.
    pub hist_spill: bool,
    /// With [`Self::hist_spill`] and [`Self::single_copy`] (one GPU, slot-major rows): each
    /// pair's spring is kept by the particle the two owner keys name (`DEM_OWNER_KEYS`,
    /// contact.cu: positions at the last search), not the ids, so rows hold about half of any
    /// particle's contacts whatever its id; `dem_owner_keys` and `dem_adopt` hand pairs over at
    /// each search.
    pub owner_keys: bool,
}

/// Particles from which a GPU's collide streams its history and list past L2
/// ([`ModuleConfig::stream_hints`]). Measured on an H100: 10 M and 100 M dense beds 7-10 %
/// faster with the hints, the 1 M main job 2.5 % slower (part of a step's history is still in L2
/// at the next step; session 17); dense beds of 2, 4 and 6 M 7 % faster (session 18,
/// bench/results/raw/session18/dem/threshold.jsonl). Between 1 M and 2 M it was not measured.
pub const STREAM_HINTS_FROM: usize = 2_000_000;

/// `-DDEM_MODULE_PART=` of the DEM module holding every kernel but `dem_energies` (contact.cu;
/// the host compiles the two parts side by side; without the define a module holds both).
pub const DEM_PART_STEP: u32 = 1;
/// `-DDEM_MODULE_PART=` of the DEM module holding `dem_energies` (and the small kernels, but
/// not `dem_collide`).
pub const DEM_PART_ENERGIES: u32 = 2;

/// The collide buffers a Verlet list's contacts before it evaluates them (as the cell walk does).
pub const LIST_BUFFERED: u32 = 0;
/// The collide evaluates a Verlet list's contacts as it meets them.
pub const LIST_DIRECT: u32 = 1;
/// Unbuffered where a warp's particles had about as many contacts as list entries last step
/// (a dense bed), buffered elsewhere: measured best in both (issue 13, session 14).
pub const LIST_BY_WARP: u32 = 2;

impl ModuleConfig {
    /// Blocks of [`COLLIDE_THREADS`] the collide kernel is compiled to fit per SM
    /// (`__launch_bounds__`), which caps its registers. Measured on an H100, 1 M dense pack
    /// (bench/results/raw/friction/launch_bounds/): with friction (79 registers unbounded, 37.5 %
    /// occupancy) 6 blocks gave +11 % (8: +7 %; 10 and more spill: 2-5x slower); frictionless,
    /// 10 blocks gave +17 % (8: +13 %).
    pub fn collide_min_blocks(&self) -> u32 {
        if self.min_blocks > 0 {
            self.min_blocks
        } else if self.friction {
            6
        } else {
            10
        }
    }

    /// NVRTC `-D` options for this configuration.
    pub fn defines(&self) -> Vec<String> {
        let mut d = vec![
            format!("-DDEM_MODEL={}", self.model),
            format!("-DDEM_FRICTION={}", u32::from(self.friction)),
            format!(
                "-DDEM_ROTATION={}",
                u32::from(self.rotation || self.friction)
            ),
        ];
        d.push(format!("-DDEM_MESHES={}", u32::from(self.meshes)));
        d.push(format!(
            "-DDEM_COLLIDE_MIN_BLOCKS={}",
            self.collide_min_blocks()
        ));
        d.push(format!("-DCOLLIDE_BLOCK={COLLIDE_THREADS}"));
        d.push(format!("-DDEM_COMPACT={}", u32::from(self.candidates > 0)));
        if self.candidates > 0 {
            d.push(format!("-DDEM_CANDIDATES={}", self.candidates));
        }
        if self.double {
            d.push("-DDEM_DOUBLE".into());
        }
        if self.friction && (self.hist_in_place || self.hist_pairs) {
            d.push("-DDEM_HIST_IN_PLACE=1".into());
        }
        if self.friction && self.hist_pairs {
            d.push("-DDEM_HIST_PAIRS=1".into());
            if self.hist_spill {
                d.push("-DDEM_HIST_SPILL=1".into());
                if self.owner_keys {
                    d.push("-DDEM_OWNER_KEYS=1".into());
                }
            }
        }
        d.push(format!("-DDEM_LIST_WALK={}", self.list_walk));
        d.push(format!("-DDEM_ONE_SPECIES={}", u32::from(self.one_species)));
        d.push(format!(
            "-DDEM_STREAM_HINTS={}",
            u32::from(self.stream_hints)
        ));
        d.push(format!("-DDEM_PASSES={}", u32::from(self.passes)));
        d.push(format!("-DDEM_SINGLE_COPY={}", u32::from(self.single_copy)));
        d
    }
}

/// The physics parity module (`parity.cu`): the headers and one kernel, [`PARITY_KERNEL`], that
/// evaluates every physics twin on given inputs. Compile it with [`ModuleConfig::double`] set
/// (`-DDEM_DOUBLE`) and without FMA contraction; solver/tests/physics_parity.rs does.
pub fn parity_module_source() -> String {
    let mut s = headers_source();
    s.push_str("#line 1 \"parity.cu\"\n");
    s.push_str(include_str!("cuda/parity.cu"));
    s.push('\n');
    s
}

/// The `extern "C"` symbol of the parity kernel.
pub const PARITY_KERNEL: &str = "physics_parity";

/// The SPH physics parity module (`sph_parity.cu`): `vec3.cuh`, `sph_physics.cuh` (the twins of
/// `solver/src/sph/physics.rs`) and one kernel, [`SPH_PARITY_KERNEL`], that evaluates every twin
/// on given inputs. Self-contained: none of the DEM headers. Compile it with `-DDEM_DOUBLE` and
/// without FMA contraction; solver/tests/sph_physics_parity.rs does.
pub fn sph_parity_module_source() -> String {
    let mut s = String::new();
    s.push_str(&format!("#line 1 \"{}\"\n", Header::Vec3.file_name()));
    s.push_str(Header::Vec3.text());
    s.push('\n');
    s.push_str("#line 1 \"sph_physics.cuh\"\n");
    s.push_str(SPH_PHYSICS_HEADER);
    s.push('\n');
    s.push_str("#line 1 \"sph_parity.cu\"\n");
    s.push_str(include_str!("cuda/sph_parity.cu"));
    s.push('\n');
    s
}

/// `sph_physics.cuh`: the CUDA twins of `solver/src/sph/physics.rs` (needs `vec3.cuh` before it).
/// Not in [`Header::ALL`]: the DEM module does not use it.
pub const SPH_PHYSICS_HEADER: &str = include_str!("cuda/sph_physics.cuh");

/// The `extern "C"` symbol of the SPH parity kernel.
pub const SPH_PARITY_KERNEL: &str = "sph_physics_parity";

/// The SPH module (`sph.cu`, the GPU twin of `solver/src/sph/cpu.rs`): `vec3.cuh`,
/// `sph_physics.cuh`, `cells.cu`, `sph.cu`. `-DDEM_DOUBLE` without FMA contraction is the parity
/// mode (the CPU reference's bits). The case's constants of the pair terms are required as `-D`
/// options (`SPH_KERNEL`, `SPH_DIFFUSION`, `SPH_H`, ...; `solver::sph::cuda`'s `pair_constants`).
pub fn sph_module_source() -> String {
    let mut s = String::new();
    let parts = [
        (Header::Vec3.file_name(), Header::Vec3.text()),
        ("sph_physics.cuh", SPH_PHYSICS_HEADER),
        (Source::Cells.file_name(), Source::Cells.text()),
        ("sph.cu", include_str!("cuda/sph.cu")),
    ];
    for (name, text) in parts {
        s.push_str(&format!("#line 1 \"{name}\"\n"));
        s.push_str(text);
        s.push('\n');
    }
    s
}

/// Every kernel entry point of the SPH module.
pub const SPH_KERNELS: [&str; 33] = [
    "sph_hash_count",
    "scan_tile",
    "scan_add",
    "sph_scatter",
    "sph_cell_rank",
    "sph_gather",
    "sph_localize",
    "sph_own_fluid",
    "sph_list_fill",
    "sph_rates_fluid",
    "sph_rates_fluid_sends",
    "sph_rates_bound",
    "sph_reset_diag",
    "sph_update",
    "sph_pack",
    "sph_classify",
    "sph_unpack",
    "sph_own_bound",
    "sph_take",
    "sph_take_moving",
    "sph_pick_bound",
    "sph_put_bound",
    "sph_layer_count",
    "sph_pack_part",
    "sph_bound_layer",
    "sph_pick_words",
    "sph_put_words",
    "sph_bound_place",
    "sph_bound_gather",
    "sph_ghost_density",
    "sph_take_ghost",
    "sph_fluid_blocks",
    "sph_fluid_near",
];

fn headers_source() -> String {
    let mut s = String::new();
    for h in Header::ALL {
        s.push_str(&format!("#line 1 \"{}\"\n", h.file_name()));
        s.push_str(h.text());
        s.push('\n');
    }
    s
}

/// The whole DEM module as one translation unit: headers then kernel files, each preceded by a
/// `#line` directive so that NVRTC errors name the original file and line.
pub fn dem_module_source() -> String {
    let mut s = headers_source();
    for src in Source::ALL {
        s.push_str(&format!("#line 1 \"{}\"\n", src.file_name()));
        s.push_str(src.text());
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_symbol_is_defined() {
        let s = dem_module_source();
        for k in Kernel::ALL {
            assert!(
                s.contains(&format!("void {}(", k.symbol()))
                    || s.contains(&format!(") {}(", k.symbol())),
                "{}",
                k.symbol()
            );
        }
    }

    /// Constants the host shares with the CUDA sources have one value in both.
    #[test]
    fn shared_constants_match_the_sources() {
        let s = dem_module_source();
        assert!(s.contains(&format!("#define CLASSIFY_CHUNK {CLASSIFY_CHUNK}\n")));
        assert!(s.contains(&format!("#define BAND_ITEMS {BAND_ITEMS}\n")));
    }

    #[test]
    fn every_sph_kernel_symbol_is_defined() {
        let s = sph_module_source();
        // (A kernel's name may follow its launch bounds' macro, SPH_RATES_BOUNDS.)
        for k in SPH_KERNELS {
            let plain = s.contains(&format!("void {k}("));
            assert!(
                plain || s.contains(&format!("SPH_RATES_BOUNDS {k}(")),
                "{k}"
            );
        }
        // And the other way: a kernel of the module that is not listed cannot be launched (the
        // launch looks it up by name), which only a GPU run would show.
        let marker = "extern \"C\" __global__ void ";
        let mut at = 0;
        while let Some(k) = s[at..].find(marker) {
            let start = at + k + marker.len();
            let end = start + s[start..].find('(').expect("a parameter list");
            let name = s[start..end].trim_start_matches("SPH_RATES_BOUNDS ");
            assert!(SPH_KERNELS.contains(&name), "{name} is not in SPH_KERNELS");
            at = end;
        }
    }

    #[test]
    fn parity_kernel_is_defined() {
        assert!(parity_module_source().contains(&format!("void {PARITY_KERNEL}(")));
    }

    /// The collide's block size comes from the launch constant, and a buffer of 0 compiles the
    /// unbuffered contact loop.
    #[test]
    fn collide_defines_follow_the_config() {
        let cfg = ModuleConfig {
            candidates: 24,
            ..crate::variants::dem_config()
        };
        assert_eq!(cfg.list_walk, LIST_BY_WARP);
        let d = cfg.defines();
        assert!(d.contains(&"-DDEM_STREAM_HINTS=0".to_string()));
        assert!(d.contains(&"-DDEM_LIST_WALK=2".to_string()));
        assert!(d.contains(&"-DDEM_ONE_SPECIES=1".to_string()));
        let mixed = ModuleConfig {
            one_species: false,
            ..cfg
        };
        assert!(mixed.defines().contains(&"-DDEM_ONE_SPECIES=0".to_string()));
        assert!(!d.iter().any(|x| x.starts_with("-DDEM_HIST_IN_PLACE")));
        let in_place = ModuleConfig {
            hist_in_place: true,
            hist_pairs: false,
            ..cfg
        };
        assert!(in_place
            .defines()
            .contains(&"-DDEM_HIST_IN_PLACE=1".to_string()));
        assert!(!in_place
            .defines()
            .iter()
            .any(|x| x.starts_with("-DDEM_HIST_PAIRS")));
        let pairs = ModuleConfig {
            hist_in_place: true,
            hist_pairs: true,
            ..cfg
        }
        .defines();
        assert!(pairs.contains(&"-DDEM_HIST_IN_PLACE=1".to_string()));
        assert!(pairs.contains(&"-DDEM_HIST_PAIRS=1".to_string()));
        assert!(!pairs.iter().any(|x| x.starts_with("-DDEM_HIST_SPILL")));
        // Spill rows extend pairs-once rows only.
        let spill = |hist_pairs| {
            ModuleConfig {
                hist_in_place: true,
                hist_pairs,
                hist_spill: true,
                ..cfg
            }
            .defines()
            .contains(&"-DDEM_HIST_SPILL=1".to_string())
        };
        assert!(spill(true));
        assert!(!spill(false));
        // Owner keys come with spill rows only.
        let keys = |hist_spill| {
            ModuleConfig {
                hist_in_place: true,
                hist_pairs: true,
                hist_spill,
                single_copy: true,
                owner_keys: true,
                ..cfg
            }
            .defines()
            .contains(&"-DDEM_OWNER_KEYS=1".to_string())
        };
        assert!(keys(true));
        assert!(!keys(false));
        assert!(d.contains(&format!("-DCOLLIDE_BLOCK={COLLIDE_THREADS}")));
        assert!(d.contains(&"-DDEM_COMPACT=1".to_string()));
        assert!(d.contains(&"-DDEM_CANDIDATES=24".to_string()));
        assert!(d.contains(&"-DDEM_COLLIDE_MIN_BLOCKS=6".to_string()));
        let off = ModuleConfig {
            candidates: 0,
            min_blocks: 4,
            ..cfg
        }
        .defines();
        assert!(off.contains(&"-DDEM_COMPACT=0".to_string()));
        assert!(!off.iter().any(|x| x.starts_with("-DDEM_CANDIDATES")));
        assert!(off.contains(&"-DDEM_COLLIDE_MIN_BLOCKS=4".to_string()));
    }

    #[test]
    fn sources_have_no_local_includes() {
        for src in Source::ALL {
            assert!(!src.text().contains("#include \""), "{}", src.file_name());
        }
    }
}
