//! The segment's byte layout: `#[repr(C)]` records and the offset plan computed from capacities.
//!
//! Every offset in the segment is a pure function of [`Capacities`] ([`LayoutPlan::new`]), so an
//! attaching process recomputes the plan from the capacities in the header and requires the
//! stored offsets to match: a corrupt or hostile header can never point outside the mapping.
//! `LAYOUT.md` documents the same layout byte by byte for readers in other languages.

use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicU32, AtomicU64};

/// First 8 bytes of every segment.
pub const MAGIC: [u8; 8] = *b"PSHMSEG\0";
/// Bumped on any incompatible change of this file; readers refuse other versions.
pub const ABI_VERSION: u32 = 2;
/// Alignment of every section and every array inside a section, in bytes.
pub const SECTION_ALIGN: u64 = 64;
/// Fewest frame slots a segment may have (one being written, one newest, one being read).
pub const MIN_SLOTS: u32 = 3;
/// Most frame slots a segment may have.
pub const MAX_SLOTS: u32 = 64;
/// Hard ceiling on particles per segment (ids are u32).
pub const MAX_PARTICLES_LIMIT: u64 = u32::MAX as u64;
/// Bytes reserved for a command's bincode request and for its acknowledgement.
pub const COMMAND_PAYLOAD: usize = 96;
/// Bytes of a species or mesh name (UTF-8, NUL-padded).
pub const NAME_LEN: usize = 32;

/// Solver lifecycle state stored in the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[repr(u32)]
pub enum SolverState {
    Starting = 0,
    Running = 1,
    Paused = 2,
    Finished = 3,
    Failed = 4,
}

impl SolverState {
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Starting,
            1 => Self::Running,
            2 => Self::Paused,
            3 => Self::Finished,
            4 => Self::Failed,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Finished => "finished",
            Self::Failed => "failed",
        }
    }
}

/// Per-particle arrays a frame slot can carry. The discriminant is the bit in the field masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum FieldKind {
    /// `[f32; 3]` metres.
    Position = 0,
    /// `[f32; 3]` m/s.
    Velocity = 1,
    /// `[f32; 3]` rad/s.
    AngularVelocity = 2,
    /// `[f32; 3]` newtons, total contact force on the particle.
    Force = 3,
    /// `u32` number of contacts.
    ContactCount = 4,
    /// `f32` kg/m^3 (SPH).
    Density = 5,
    /// `f32` Pa (SPH).
    Pressure = 6,
    /// `u32` particle id of each element of this frame (runs whose particle set changes:
    /// inflow, outflow). Absent: the static section's `particle_ids`.
    ParticleId = 7,
    /// `u32` [`ParticleKind`] of each particle (a method with several kinds of particle).
    ParticleKind = 8,
}

/// What a particle is, in the [`FieldKind::ParticleKind`] array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ParticleKind {
    /// A DEM grain.
    Grain = 0,
    /// An SPH fluid particle.
    Fluid = 1,
    /// An SPH boundary particle (walls, moving bodies).
    Boundary = 2,
}

impl FieldKind {
    pub const ALL: [FieldKind; 9] = [
        FieldKind::Position,
        FieldKind::Velocity,
        FieldKind::AngularVelocity,
        FieldKind::Force,
        FieldKind::ContactCount,
        FieldKind::Density,
        FieldKind::Pressure,
        FieldKind::ParticleId,
        FieldKind::ParticleKind,
    ];
    /// Number of field slots in the header's offset table (room to grow without an ABI bump).
    pub const TABLE_LEN: usize = 16;

    pub const fn bit(self) -> u32 {
        1 << self as u32
    }
    /// Bytes per particle.
    pub const fn element_size(self) -> u64 {
        match self {
            Self::Position | Self::Velocity | Self::AngularVelocity | Self::Force => 12,
            Self::ContactCount
            | Self::Density
            | Self::Pressure
            | Self::ParticleId
            | Self::ParticleKind => 4,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Position => "position",
            Self::Velocity => "velocity",
            Self::AngularVelocity => "angular_velocity",
            Self::Force => "force",
            Self::ContactCount => "contact_count",
            Self::Density => "density",
            Self::Pressure => "pressure",
            Self::ParticleId => "particle_id",
            Self::ParticleKind => "particle_kind",
        }
    }
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Mask of every defined field bit.
pub const ALL_FIELDS_MASK: u32 = 0x1ff;
/// Fields every DEM segment carries unless told otherwise.
pub const DEFAULT_FIELDS: u32 =
    FieldKind::Position.bit() | FieldKind::Velocity.bit() | FieldKind::AngularVelocity.bit();

/// The process-shared mutex guarding the command table: a glibc `pthread_mutex_t` (40 bytes on
/// x86_64 and aarch64) in 64 reserved bytes so the layout does not depend on the C library.
#[repr(C, align(8))]
pub struct MutexStorage(pub [u8; 64]);

/// Segment header at offset 0. Fields marked "fixed" are written once by the creator before
/// `abi_version` is stored (last, with release ordering); the rest are live atomics.
#[repr(C)]
pub struct SegmentHeader {
    /// fixed: [`MAGIC`].
    pub magic: [u8; 8],
    /// fixed, stored last: [`ABI_VERSION`]; 0 while the creator is still initialising.
    pub abi_version: AtomicU32,
    /// fixed: `size_of::<SegmentHeader>()`.
    pub header_size: u32,
    /// fixed: [`LAYOUT_HASH`].
    pub layout_hash: u64,
    /// fixed: bytes of the whole segment.
    pub total_size: u64,
    /// fixed: the capacities the plan was computed from.
    pub capacities: Capacities,
    /// fixed: the plan (offsets and sizes), checked against a recomputation on attach.
    pub plan: LayoutPlan,
    /// Owner pid (the solver; rewritten when a solver takes the segment over with `--load-shm`).
    pub owner_pid: AtomicU32,
    /// Non-zero when the owner grants group read/write (informational).
    pub group_access: u32,
    /// Owner's start time in clock ticks since boot (`/proc/<pid>/stat` field 22), against pid reuse.
    pub owner_start_ticks: AtomicU64,
    /// Creation time, Unix nanoseconds.
    pub created_unix_ns: u64,
    /// [`SolverState`] as u32.
    pub solver_state: AtomicU32,
    /// Futex word bumped after each frame publication (and each state change).
    pub frame_futex: AtomicU32,
    /// Futex word bumped after each command acknowledgement.
    pub ack_futex: AtomicU32,
    /// Futex word bumped after each command submission (a paused solver sleeps on it).
    pub command_futex: AtomicU32,
    /// Waiters' lease on `frame_futex`: `CLOCK_MONOTONIC` ms (u32, wrapping) until which a
    /// waiter may be asleep; the writer skips the wake system call once it passed. Each waiter
    /// stores now + 300 ms before every sleep of at most 200 ms (see `notify.rs`), so a waiter
    /// killed asleep costs nothing after its lease ends.
    pub frame_waiters: AtomicU32,
    /// Waiters' lease on `ack_futex`, as above.
    pub ack_waiters: AtomicU32,
    /// Heartbeat: `CLOCK_MONOTONIC` nanoseconds of the owner's last step (system-wide clock).
    pub heartbeat_mono_ns: AtomicU64,
    /// Heartbeat: Unix nanoseconds of the owner's last step.
    pub heartbeat_unix_ns: AtomicU64,
    /// Sequence number of the newest complete frame (0: none yet). Frame numbers start at 1.
    pub newest_seq: AtomicU64,
    /// Slot index of the newest complete frame (valid when `newest_seq > 0`).
    pub newest_slot: AtomicU32,
    pub _pad0: u32,
    /// Total commands submitted (also each record's submission order).
    pub command_submit_seq: AtomicU64,
    /// Guards allocation and submission in the command table (robust, process-shared).
    pub command_mutex: MutexStorage,
    /// Reserved for future use; zero.
    pub _reserved: [u64; 8],
}

/// Declared capacities; every offset follows from these.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacities {
    /// Most particles a frame can carry.
    pub max_particles: u64,
    /// Most mesh triangles in the static section.
    pub max_triangles: u64,
    /// Most meshes (moving bodies).
    pub max_bodies: u32,
    /// Most species.
    pub max_species: u32,
    /// Number of frame slots, [`MIN_SLOTS`]..=[`MAX_SLOTS`].
    pub slot_count: u32,
    /// Number of command records.
    pub command_records: u32,
    /// Bitmask of [`FieldKind`]s every slot has room for.
    pub fields: u32,
    /// Bytes reserved for the case configuration text.
    pub config_bytes: u32,
}

impl Capacities {
    /// Capacities for a DEM run of `particles` with the default fields.
    pub fn for_particles(particles: u64) -> Self {
        Self {
            max_particles: particles,
            max_triangles: 0,
            max_bodies: 0,
            max_species: 16,
            slot_count: MIN_SLOTS,
            command_records: 64,
            fields: DEFAULT_FIELDS,
            config_bytes: 64 * 1024,
        }
    }
}

/// Offsets (from the segment start) and sizes of every section and array.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayoutPlan {
    pub static_offset: u64,
    pub static_size: u64,
    /// Offsets inside the static section, from the segment start.
    pub config_offset: u64,
    pub species_offset: u64,
    pub particle_id_offset: u64,
    pub particle_species_offset: u64,
    pub particle_radius_offset: u64,
    pub mesh_table_offset: u64,
    pub triangles_offset: u64,
    /// First frame slot; slot `i` starts at `slots_offset + i * slot_stride`.
    pub slots_offset: u64,
    pub slot_stride: u64,
    /// Offset of the body transforms inside a slot.
    pub slot_bodies_offset: u64,
    /// Offset of each field's array inside a slot (index = `FieldKind as usize`), 0 = absent.
    pub slot_field_offsets: [u64; FieldKind::TABLE_LEN],
    pub commands_offset: u64,
    pub commands_size: u64,
    pub total_size: u64,
}

/// Start of the static section: counts and world description, guarded by a seqlock.
#[repr(C)]
pub struct StaticHeader {
    /// Seqlock: odd while the static section is being (re)written; `generation / 2` counts rewrites.
    pub generation: AtomicU64,
    pub particle_count: u64,
    pub triangle_count: u64,
    pub species_count: u32,
    pub mesh_count: u32,
    /// Bytes of configuration text used.
    pub config_len: u32,
    /// 1 = TOML (UTF-8).
    pub config_format: u32,
    /// World bounds [m].
    pub world_min: [f64; 3],
    pub world_max: [f64; 3],
    /// Neighbour-grid cell size [m] (0 when not applicable).
    pub cell_size: f64,
    pub _reserved: [u64; 4],
}

/// One species (size, density and the material parameters of its method), in the static
/// section. 128 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpeciesRecord {
    /// UTF-8, NUL-padded.
    pub name: [u8; NAME_LEN],
    /// [`SpeciesMethod`] as u32: which method's particles these are and what `params` mean.
    pub method: u32,
    pub _pad: u32,
    /// Particle radius [m] (SPH: half the particle spacing).
    pub radius: f64,
    /// Material density [kg/m^3] (SPH: the rest density).
    pub density: f64,
    /// The method's parameters, in the order [`SpeciesMethod::param_names`] gives; unused
    /// entries are 0.
    pub params: [f64; SPECIES_PARAMS],
    pub _reserved: u64,
}

/// Parameters a species record carries.
pub const SPECIES_PARAMS: usize = 8;

/// Which method a species belongs to, in [`SpeciesRecord::method`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum SpeciesMethod {
    /// Not said (a test publisher); `params` are all 0.
    Unspecified = 0,
    /// DEM grains: Young's modulus [Pa] (0 when the linear model gives a stiffness instead),
    /// Poisson's ratio, restitution, sliding and rolling friction coefficients, normal
    /// stiffness [N/m] (0 when derived from the modulus).
    Dem = 1,
    /// SPH fluid: speed of sound [m/s], Monaghan's artificial-viscosity alpha [-], smoothing
    /// length [m].
    SphFluid = 2,
    /// SPH boundary particles: the same parameters as the fluid they bound, the viscosity being
    /// the alpha of fluid-boundary pairs.
    SphBoundary = 3,
}

impl SpeciesMethod {
    pub const ALL: [SpeciesMethod; 4] = [
        Self::Unspecified,
        Self::Dem,
        Self::SphFluid,
        Self::SphBoundary,
    ];

    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|m| *m as u32 == v)
    }

    /// The method of a [`SpeciesMethod::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Dem => "dem",
            Self::SphFluid => "sph_fluid",
            Self::SphBoundary => "sph_boundary",
        }
    }

    /// Names of the `params` entries, in order.
    pub fn param_names(self) -> &'static [&'static str] {
        match self {
            Self::Unspecified => &[],
            Self::Dem => &[
                "young_modulus",
                "poisson_ratio",
                "restitution",
                "sliding_friction",
                "rolling_friction",
                "normal_stiffness",
            ],
            Self::SphFluid | Self::SphBoundary => &["sound_speed", "viscosity", "smoothing_length"],
        }
    }
}

/// The DEM material of a [`SpeciesMethod::Dem`] species record.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DemMaterial {
    /// [Pa]; 0 when the linear model gives `normal_stiffness` instead.
    pub young_modulus: f64,
    pub poisson_ratio: f64,
    pub restitution: f64,
    pub sliding_friction: f64,
    pub rolling_friction: f64,
    /// [N/m]; 0 when derived from the modulus.
    pub normal_stiffness: f64,
}

impl SpeciesRecord {
    /// A DEM species.
    pub fn dem(name: &str, radius: f64, density: f64, m: DemMaterial) -> Self {
        let mut params = [0.0; SPECIES_PARAMS];
        params[..6].copy_from_slice(&[
            m.young_modulus,
            m.poisson_ratio,
            m.restitution,
            m.sliding_friction,
            m.rolling_friction,
            m.normal_stiffness,
        ]);
        Self {
            name: crate::static_data::encode_name(name),
            method: SpeciesMethod::Dem as u32,
            radius,
            density,
            params,
            ..Self::default()
        }
    }

    /// The method, if this build knows it.
    pub fn method(&self) -> Option<SpeciesMethod> {
        SpeciesMethod::from_u32(self.method)
    }

    /// The DEM material, for a DEM species.
    pub fn dem_material(&self) -> Option<DemMaterial> {
        let p = &self.params;
        (self.method() == Some(SpeciesMethod::Dem)).then_some(DemMaterial {
            young_modulus: p[0],
            poisson_ratio: p[1],
            restitution: p[2],
            sliding_friction: p[3],
            rolling_friction: p[4],
            normal_stiffness: p[5],
        })
    }
}

/// One mesh (a rigid body), in the static section. Its triangles are
/// `triangles[first_triangle .. first_triangle + triangle_count]`, in the body frame.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MeshRecord {
    /// UTF-8, NUL-padded.
    pub name: [u8; NAME_LEN],
    pub first_triangle: u64,
    pub triangle_count: u64,
    pub _reserved: [u64; 2],
}

/// Start of each frame slot.
#[repr(C)]
pub struct SlotHeader {
    /// Seqlock: odd while the writer fills this slot, even when complete.
    pub lock_seq: AtomicU64,
    /// Frame sequence number held by this slot (1, 2, ...).
    pub frame_seq: u64,
    /// Solver step index.
    pub step: u64,
    /// Simulated time [s].
    pub sim_time: f64,
    /// Time step [s].
    pub dt: f64,
    /// Wall clock at publication, Unix ns.
    pub wall_unix_ns: u64,
    /// `CLOCK_MONOTONIC` ns at publication (latency measurements).
    pub publish_mono_ns: u64,
    /// Particles in this frame (<= max_particles).
    pub particle_count: u64,
    /// Bitmask of the [`FieldKind`]s filled in this frame.
    pub fields: u32,
    /// Body transforms filled (<= max_bodies).
    pub body_count: u32,
    /// Static generation this frame belongs to.
    pub static_generation: u64,
    /// Solver speed when published [steps/s].
    pub steps_per_s: f64,
    /// Particles removed by outflow regions since t = 0 (0 in runs without outflow).
    pub removed_count: u64,
    /// Their mass [kg].
    pub removed_mass: f64,
    pub _reserved: [u64; 1],
}

/// A mesh's pose in a frame: `x_world = rotation * x_body + translation`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BodyTransform {
    /// Row-major 3x3.
    pub rotation: [f32; 9],
    /// [m]
    pub translation: [f32; 3],
    /// Linear velocity of the body origin [m/s].
    pub velocity: [f32; 3],
    /// Angular velocity [rad/s].
    pub angular_velocity: [f32; 3],
}

impl BodyTransform {
    pub const IDENTITY: Self = Self {
        rotation: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        translation: [0.0; 3],
        velocity: [0.0; 3],
        angular_velocity: [0.0; 3],
    };
}

/// One entry of the command table.
#[repr(C)]
pub struct CommandRecord {
    /// [`RecordState`] as u32.
    pub state: AtomicU32,
    /// Sender's client id (its pid by default).
    pub client_id: u32,
    /// Sender's request id (unique per client).
    pub request_id: u64,
    /// Submission order (from `command_submit_seq`).
    pub submit_seq: u64,
    /// `CLOCK_MONOTONIC` ns when submitted / acknowledged (reclaiming abandoned records).
    pub submit_mono_ns: u64,
    pub ack_mono_ns: u64,
    pub request_len: u32,
    pub ack_len: u32,
    /// bincode of [`crate::Command`].
    pub request: [u8; COMMAND_PAYLOAD],
    /// bincode of [`crate::CommandOutcome`].
    pub ack: [u8; COMMAND_PAYLOAD],
    /// `CLOCK_MONOTONIC` ns after which the sender no longer waits for the answer: the solver
    /// drops (does not apply) a command it takes later, and the record may be reclaimed
    /// [`crate::command::RECLAIM_GRACE`] after it. 0: none (older senders; reclaimed
    /// [`crate::command::ABANDONED_AFTER`] after the acknowledgement).
    pub deadline_mono_ns: u64,
    pub _reserved: u64,
}

/// Life of a command record: Free -> (client, under the mutex) Pending -> (solver) Taken ->
/// (solver) Acked -> (client) Free. A client that gives up withdraws its record: Pending ->
/// Free (never applied), or Taken -> Withdrawn, which the solver frees instead of acknowledging.
/// The solver frees a Pending record whose deadline passed without applying it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum RecordState {
    Free = 0,
    Pending = 1,
    Taken = 2,
    Acked = 3,
    Withdrawn = 4,
}

const _: () = {
    assert!(size_of::<SegmentHeader>().is_multiple_of(8));
    assert!(size_of::<SegmentHeader>() <= 1024);
    assert!(size_of::<Capacities>() == 40);
    assert!(size_of::<StaticHeader>() == 128);
    assert!(size_of::<SpeciesRecord>() == 128);
    assert!(offset_of!(SpeciesRecord, params) == 56);
    assert!(size_of::<MeshRecord>() == 64);
    assert!(size_of::<SlotHeader>() == 112);
    assert!(size_of::<BodyTransform>() == 72);
    assert!(size_of::<CommandRecord>() == 256);
    assert!(size_of::<MutexStorage>() >= size_of::<libc::pthread_mutex_t>());
    assert!(cfg!(target_endian = "little"));
};

const fn fnv1a(mut h: u64, v: u64) -> u64 {
    let bytes = v.to_le_bytes();
    let mut i = 0;
    while i < 8 {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
        i += 1;
    }
    h
}

/// Hash of the record sizes and key field offsets: two builds agree on it only when they agree
/// on the layout.
pub const LAYOUT_HASH: u64 = {
    let parts: [u64; 17] = [
        ABI_VERSION as u64,
        size_of::<SegmentHeader>() as u64,
        size_of::<LayoutPlan>() as u64,
        size_of::<StaticHeader>() as u64,
        size_of::<SpeciesRecord>() as u64,
        size_of::<MeshRecord>() as u64,
        size_of::<SlotHeader>() as u64,
        size_of::<BodyTransform>() as u64,
        size_of::<CommandRecord>() as u64,
        offset_of!(SegmentHeader, plan) as u64,
        offset_of!(SegmentHeader, newest_seq) as u64,
        offset_of!(SegmentHeader, command_mutex) as u64,
        offset_of!(SlotHeader, particle_count) as u64,
        offset_of!(CommandRecord, request) as u64,
        // Command deadlines and waiter leases (the same bytes as the earlier reserved words
        // and waiter counts, with new meanings): older builds must not mix with this one.
        offset_of!(CommandRecord, deadline_mono_ns) as u64,
        SECTION_ALIGN,
        COMMAND_PAYLOAD as u64,
    ];
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut i = 0;
    while i < parts.len() {
        h = fnv1a(h, parts[i]);
        i += 1;
    }
    h
};

/// Why capacities cannot be laid out.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CapacityError {
    #[error("slot_count must be between {MIN_SLOTS} and {MAX_SLOTS}, got {0}")]
    SlotCount(u32),
    #[error("max_particles must be between 1 and {MAX_PARTICLES_LIMIT}, got {0}")]
    Particles(u64),
    #[error("field mask {0:#x} is empty or names unknown fields (known: {ALL_FIELDS_MASK:#x})")]
    Fields(u32),
    #[error("command_records must be between 1 and 65536, got {0}")]
    Commands(u32),
    #[error("capacities give a segment larger than the address space allows")]
    Overflow,
}

struct Cursor(u64);

impl Cursor {
    fn take(&mut self, bytes: u64) -> Result<u64, CapacityError> {
        let start = self.0;
        let end = start.checked_add(bytes).ok_or(CapacityError::Overflow)?;
        self.0 = end
            .checked_add(SECTION_ALIGN - 1)
            .ok_or(CapacityError::Overflow)?
            & !(SECTION_ALIGN - 1);
        Ok(start)
    }
}

fn array(count: u64, element: u64) -> Result<u64, CapacityError> {
    count.checked_mul(element).ok_or(CapacityError::Overflow)
}

impl LayoutPlan {
    /// Lays out a segment for `caps`. Deterministic: the attach path recomputes it.
    pub fn new(caps: &Capacities) -> Result<Self, CapacityError> {
        if !(MIN_SLOTS..=MAX_SLOTS).contains(&caps.slot_count) {
            return Err(CapacityError::SlotCount(caps.slot_count));
        }
        if caps.max_particles == 0 || caps.max_particles > MAX_PARTICLES_LIMIT {
            return Err(CapacityError::Particles(caps.max_particles));
        }
        if caps.fields == 0 || caps.fields & !ALL_FIELDS_MASK != 0 {
            return Err(CapacityError::Fields(caps.fields));
        }
        if caps.command_records == 0 || caps.command_records > 65536 {
            return Err(CapacityError::Commands(caps.command_records));
        }
        // Bound the remaining inputs so that no product below can overflow.
        if caps.max_triangles > 1 << 40 || caps.max_bodies > 1 << 20 || caps.max_species > 1 << 16 {
            return Err(CapacityError::Overflow);
        }
        let n = caps.max_particles;
        let mut c = Cursor(0);
        c.take(size_of::<SegmentHeader>() as u64)?;
        let static_offset = c.take(size_of::<StaticHeader>() as u64)?;
        let config_offset = c.take(caps.config_bytes as u64)?;
        let species_offset = c.take(array(
            caps.max_species as u64,
            size_of::<SpeciesRecord>() as u64,
        )?)?;
        let particle_id_offset = c.take(array(n, 4)?)?;
        let particle_species_offset = c.take(array(n, 4)?)?;
        let particle_radius_offset = c.take(array(n, 4)?)?;
        let mesh_table_offset = c.take(array(
            caps.max_bodies as u64,
            size_of::<MeshRecord>() as u64,
        )?)?;
        let triangles_offset = c.take(array(caps.max_triangles, 36)?)?;
        let static_size = c.0 - static_offset;

        // One slot, laid out relative to its own start.
        let mut s = Cursor(0);
        s.take(size_of::<SlotHeader>() as u64)?;
        let slot_bodies_offset = s.take(array(
            caps.max_bodies as u64,
            size_of::<BodyTransform>() as u64,
        )?)?;
        let mut slot_field_offsets = [0u64; FieldKind::TABLE_LEN];
        for f in FieldKind::ALL {
            if caps.fields & f.bit() != 0 {
                slot_field_offsets[f as usize] = s.take(array(n, f.element_size())?)?;
            }
        }
        let slot_stride = s.0;
        let slots_offset = c.take(array(slot_stride, caps.slot_count as u64)?)?;
        let commands_size = array(
            caps.command_records as u64,
            size_of::<CommandRecord>() as u64,
        )?;
        let commands_offset = c.take(commands_size)?;
        let total_size = c.0;
        if total_size > isize::MAX as u64 {
            return Err(CapacityError::Overflow);
        }
        Ok(Self {
            static_offset,
            static_size,
            config_offset,
            species_offset,
            particle_id_offset,
            particle_species_offset,
            particle_radius_offset,
            mesh_table_offset,
            triangles_offset,
            slots_offset,
            slot_stride,
            slot_bodies_offset,
            slot_field_offsets,
            commands_offset,
            commands_size,
            total_size,
        })
    }

    /// Offset of slot `index` from the segment start.
    pub fn slot_offset(&self, index: u32) -> u64 {
        self.slots_offset + index as u64 * self.slot_stride
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn species_methods_round_trip_by_number_and_name() {
        for m in SpeciesMethod::ALL {
            assert_eq!(SpeciesMethod::from_u32(m as u32), Some(m));
            assert_eq!(SpeciesMethod::from_name(m.name()), Some(m));
        }
        assert_eq!(SpeciesMethod::from_u32(4), None);
        assert_eq!(SpeciesMethod::from_name("fem"), None);
    }

    #[test]
    fn plan_is_aligned_and_in_bounds() {
        let mut caps = Capacities::for_particles(1001);
        caps.max_bodies = 3;
        caps.max_triangles = 77;
        caps.fields = ALL_FIELDS_MASK;
        let p = LayoutPlan::new(&caps).unwrap();
        for off in [
            p.static_offset,
            p.config_offset,
            p.species_offset,
            p.particle_id_offset,
            p.particle_radius_offset,
            p.mesh_table_offset,
            p.triangles_offset,
            p.slots_offset,
            p.slot_stride,
            p.commands_offset,
            p.total_size,
        ] {
            assert_eq!(off % SECTION_ALIGN, 0, "{p:?}");
        }
        assert!(p.slot_offset(caps.slot_count - 1) + p.slot_stride <= p.commands_offset);
        assert_eq!(p.commands_offset + p.commands_size, p.total_size);
        let last = p.slot_field_offsets[FieldKind::Pressure as usize];
        assert!(last + 1001 * 4 <= p.slot_stride);
    }

    #[test]
    fn absurd_capacities_are_refused_not_overflowed() {
        let mut caps = Capacities::for_particles(u32::MAX as u64);
        caps.max_triangles = 1 << 40;
        caps.slot_count = MAX_SLOTS;
        caps.fields = ALL_FIELDS_MASK;
        // Large but representable: a plan, not a panic.
        assert!(LayoutPlan::new(&caps).is_ok());
        caps.max_triangles = u64::MAX;
        assert_eq!(LayoutPlan::new(&caps), Err(CapacityError::Overflow));
        caps.max_triangles = 0;
        caps.slot_count = 2;
        assert_eq!(LayoutPlan::new(&caps), Err(CapacityError::SlotCount(2)));
    }
}
