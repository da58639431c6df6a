//! `#[repr(C)]` mirrors of `kernels/src/cuda/params.cuh` (and `MaterialPair` of physics.cuh),
//! passed by value as kernel parameters. Device pointers are `u64` (0 = not allocated).
//! Size asserts below and in the `.cuh` comments keep the two in step.

use cudarc::driver::DeviceRepr;

/// `SpeciesProps`: per-species constants [m, kg, kg m^2].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SpeciesProps {
    pub radius: f64,
    pub mass: f64,
    pub inertia: f64,
    pub pad: f64,
}

/// `DEM_INTEGRATE_EULER`: symplectic Euler in `dem_collide`.
pub const INTEGRATE_EULER: u32 = 0;
/// `DEM_INTEGRATE_HALF_KICK`: velocity Verlet's closing half kick in `dem_collide`.
pub const INTEGRATE_HALF_KICK: u32 = 1;
/// `DEM_INTEGRATE_NONE`: forces only.
pub const INTEGRATE_NONE: u32 = 2;

/// `DemParams`: case-wide constants of one step.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DemParams {
    pub origin: [f64; 3],
    pub cell: f64,
    pub dt: f64,
    pub gravity: [f64; 3],
    pub box_min: [f64; 3],
    pub box_max: [f64; 3],
    pub dims: [u32; 3],
    pub n: u32,
    /// Bit f: box face f (x_min, x_max, y_min, y_max, z_min, z_max) is a wall.
    pub walls: u32,
    pub n_species: u32,
    pub n_walls: u32,
    pub hist_cap: u32,
    /// History entry c of row r is at `c * hist_sc + r * hist_sr` ([`HistLayout`]).
    pub hist_sc: u32,
    pub hist_sr: u32,
    pub diag: u32,
    /// `DEM_INTEGRATE_*` of params.cuh: what `dem_collide` does after the forces.
    pub integrate: u32,
    /// Axis of the GPUs' slabs (0 x, 1 y, 2 z).
    pub split_axis: u32,
    /// This GPU's slab, cell layers `slab_lo..slab_hi` along `split_axis`; particles outside
    /// are ghosts (one GPU: the whole grid).
    pub slab_lo: u32,
    pub slab_hi: u32,
    /// `dem_collide` carries the history rows of slots `0..max(n, n_rows)` (a group's dead
    /// tail behind its live slots too; set per launch).
    pub n_rows: u32,
    pub species: u64,
    pub pp: u64,
    pub pw: u64,
    /// Largest contact distance between two particles, 2 r_max [m] (`skin.rs`).
    pub reach: f64,
    /// Verlet list entries per slot (0: none) and the stride of an entry index (`skin.rs`).
    pub list_cap: u32,
    pub list_stride: u32,
    /// `dem_collide_boundary`: the slots it collides (`pass_count` of them), a GPU of a group
    /// overlapping its ghost refresh (contact.cu).
    pub pass_list: u64,
    pub pass_count: u32,
    /// `dem_collide_interior`: the owned layers it leaves out (`u32::MAX`: none).
    pub pass_skip: [u32; 2],
    pub pass_pad: u32,
    /// Spill rows of a pairs-once history (`buffers::Spill`; all 0 without): the buffer the
    /// rows' links point into now, the one `dem_springs` writes this step's into, and the
    /// counters (rows asked for in buffers 0 and 1, the most any step asked for).
    pub spill_cur: u64,
    pub spill_next: u64,
    pub spill_ctl: u64,
    /// Rows of each spill buffer (0: no spill), entries per spill row, and the counter of
    /// `spill_next` (0 or 1).
    pub spill_rows: u32,
    pub spill_width: u32,
    pub spill_sel: u32,
    pub spill_pad: u32,
    /// Owner keys (`DEM_OWNER_KEYS`): on the `dem_springs` of a step that searched, each slot's
    /// adoption row (`dem_adopt`, contact.cu), else 0.
    pub adopt: u64,
}

/// `ParticleArrays`: one copy of the sorted particle state.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParticleArrays {
    pub pos: u64,
    pub vel: u64,
    pub omega: u64,
    pub id: u64,
    pub species: u64,
    pub hist_count: u64,
    /// `HistEntry` array (packed spring + partner), `hist_cap * n` entries.
    pub hist: u64,
    pub force: u64,
    pub contacts: u64,
    pub torque: u64,
    pub row: u64,
    /// Owner key of each slot (u32, `state::owner_key` at the last search), with owner keys
    /// only (then `row` is 0: every slot's row is its slot).
    pub key: u64,
}

/// `GridArrays`: neighbour-search arrays.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GridArrays {
    pub cell: u64,
    pub rank: u64,
    pub perm: u64,
    pub count: u64,
    pub start: u64,
    /// Verlet skin (`skin.rs`; 0 without): cell of each slot at the last search (u32), the
    /// distance moved since (f32), and the largest of those (one u32, float bits).
    pub scell: u64,
    pub path: u64,
    pub dmax: u64,
    /// Verlet list (`skin.rs`; 0 without): `list_cap` slots per slot, slot-major, and each
    /// slot's entry count (or `DEM_LIST_FULL`).
    pub nlist: u64,
    pub ncount: u64,
}

impl GridArrays {
    /// The same grid for a search every step: no skin arrays, no Verlet list.
    pub(crate) fn without_skin(&mut self) {
        (self.scell, self.path, self.dmax, self.nlist, self.ncount) = (0, 0, 0, 0, 0);
    }
}

/// `DemDiag`: integer diagnostics of the collide kernel.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DemDiag {
    pub contacts: u64,
    pub hist_overflow: u32,
    pub nonfinite: u32,
}

/// `MeshBody`: one mesh's velocity field at the step's time and its constants.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MeshBody {
    pub velocity: [f64; 3],
    pub omega: [f64; 3],
    pub center: [f64; 3],
    pub first_tri: u32,
    pub n_tri: u32,
    pub material: u32,
    pub pad: u32,
}

/// `MeshArrays`: world triangles, their meshes and the grid bins (all 0 without meshes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MeshArrays {
    pub tris: u64,
    pub tri_mesh: u64,
    pub bodies: u64,
    pub fixed_cell: u64,
    pub fixed_tri: u64,
    pub moving_cell: u64,
    pub moving_tri: u64,
    pub n_fixed: u32,
    pub n_moving: u32,
    pub n_meshes: u32,
    pub n_tris: u32,
    /// Two `u64` per slot (fixed, moving bins), or 0: the touching candidates dem_mesh_filter found.
    pub hit_mask: u64,
}

/// `DemFrame`: a published frame whose kinematics the next step's collide writes in id order
/// (`dem_frame_put` in publish.cu; `publish.rs`). Device addresses, 0: none (`pos` 0: no frame).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DemFrame {
    /// Positions [m], `[f32; 3]` by frame index.
    pub pos: u64,
    /// Velocities [m/s], `[f32; 3]` by frame index.
    pub vel: u64,
    /// Angular velocities [rad/s], `[f32; 3]` by frame index (zeros without rotation).
    pub omega: u64,
    /// `u32` frame index of each id (removed particles: the scan of the alive flags), 0: the id.
    pub rank: u64,
}

const _: () = assert!(std::mem::size_of::<SpeciesProps>() == 32);
const _: () = assert!(std::mem::size_of::<MeshBody>() == 88);
const _: () = assert!(std::mem::size_of::<MeshArrays>() == 80);
const _: () = assert!(
    std::mem::size_of::<DemParams>()
        == 5 * 8 + 3 * 3 * 8 + 16 * 4 + 3 * 8 + 8 + 8 + 24 + 3 * 8 + 16 + 8
);
const _: () = assert!(std::mem::size_of::<ParticleArrays>() == 96);
const _: () = assert!(std::mem::size_of::<GridArrays>() == 80);
const _: () = assert!(std::mem::size_of::<DemDiag>() == 16);
const _: () = assert!(std::mem::size_of::<DemFrame>() == 32);
const _: () = assert!(std::mem::size_of::<crate::dem::physics::MaterialPair>() == 56);

// SAFETY: plain-old-data #[repr(C)] structs of integers and floats with the layout of their C
// twins (sizes asserted above); the kernels read them by value or through device pointers.
unsafe impl DeviceRepr for SpeciesProps {}
unsafe impl DeviceRepr for DemParams {}
unsafe impl DeviceRepr for ParticleArrays {}
unsafe impl DeviceRepr for GridArrays {}
unsafe impl DeviceRepr for DemDiag {}
unsafe impl DeviceRepr for DemFrame {}
unsafe impl DeviceRepr for MeshBody {}
unsafe impl cudarc::driver::ValidAsZeroBits for MeshBody {}
unsafe impl DeviceRepr for MeshArrays {}
unsafe impl cudarc::driver::ValidAsZeroBits for DemDiag {}
