"""The segment layout of ABI version 2, transcribed from shm-protocol/LAYOUT.md.

Records are ctypes structures laid over the mapping (``from_buffer``): reading a field is one
aligned load of its width, which is atomic on x86-64 and aarch64 as the layout requires.
"""

import ctypes

import numpy as np

MAGIC = b"PSHMSEG\0"
ABI_VERSION = 2
# shm-protocol/src/layout.rs LAYOUT_HASH; layout_hash() recomputes it from the records below.
LAYOUT_HASH = 0xCE1F14EFC046B582
HEADER_SIZE = 536
ALIGN = 64

MIN_SLOTS, MAX_SLOTS = 3, 64
MAX_PARTICLES = 2**32 - 1
ALL_FIELDS_MASK = 0x1FF
FIELD_TABLE_LEN = 16

u32, u64, f64 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_double

# Field number -> (name, numpy element dtype, components per particle).
FIELDS = {
    0: ("positions", np.float32, 3),
    1: ("velocities", np.float32, 3),
    2: ("angular_velocities", np.float32, 3),
    3: ("forces", np.float32, 3),
    4: ("contact_counts", np.uint32, 1),
    5: ("densities", np.float32, 1),
    6: ("pressures", np.float32, 1),
    7: ("particle_ids", np.uint32, 1),
    8: ("particle_kinds", np.uint32, 1),
}
# ParticleKind (the particle_kinds array).
PARTICLE_KINDS = {0: "grain", 1: "fluid", 2: "boundary"}
# SpeciesMethod -> (name, names of the species record's params, in order).
SPECIES_METHODS = {
    0: ("unspecified", ()),
    1: (
        "dem",
        (
            "young_modulus",
            "poisson_ratio",
            "restitution",
            "sliding_friction",
            "rolling_friction",
            "normal_stiffness",
        ),
    ),
    2: ("sph_fluid", ("sound_speed", "viscosity", "smoothing_length")),
    3: ("sph_boundary", ("sound_speed", "viscosity", "smoothing_length")),
}
SPECIES_PARAMS = 8
FIELD_SIZES = {bit: np.dtype(dt).itemsize * k for bit, (_, dt, k) in FIELDS.items()}

STATES = {0: "starting", 1: "running", 2: "paused", 3: "finished", 4: "failed"}

# Command record states (layout.rs RecordState). Withdrawn: a Rust sender gave up while the
# solver had the record Taken; the solver frees it instead of acknowledging. Not free.
FREE, PENDING, TAKEN, ACKED, WITHDRAWN = 0, 1, 2, 3, 4
COMMAND_PAYLOAD = 96


class Capacities(ctypes.Structure):
    _fields_ = [
        ("max_particles", u64),
        ("max_triangles", u64),
        ("max_bodies", u32),
        ("max_species", u32),
        ("slot_count", u32),
        ("command_records", u32),
        ("fields", u32),
        ("config_bytes", u32),
    ]


PLAN_FIELDS = [
    "static_offset",
    "static_size",
    "config_offset",
    "species_offset",
    "particle_id_offset",
    "particle_species_offset",
    "particle_radius_offset",
    "mesh_table_offset",
    "triangles_offset",
    "slots_offset",
    "slot_stride",
    "slot_bodies_offset",
]


class Plan(ctypes.Structure):
    _fields_ = [(n, u64) for n in PLAN_FIELDS] + [
        ("slot_field_offsets", u64 * FIELD_TABLE_LEN),
        ("commands_offset", u64),
        ("commands_size", u64),
        ("total_size", u64),
    ]

    def as_dict(self):
        d = {n: getattr(self, n) for n in PLAN_FIELDS}
        d["slot_field_offsets"] = list(self.slot_field_offsets)
        for n in ("commands_offset", "commands_size", "total_size"):
            d[n] = getattr(self, n)
        return d


class Header(ctypes.Structure):
    _fields_ = [
        ("magic", ctypes.c_ubyte * 8),
        ("abi_version", u32),
        ("header_size", u32),
        ("layout_hash", u64),
        ("total_size", u64),
        ("capacities", Capacities),
        ("plan", Plan),
        ("owner_pid", u32),
        ("group_access", u32),
        ("owner_start_ticks", u64),
        ("created_unix_ns", u64),
        ("solver_state", u32),
        ("frame_futex", u32),
        ("ack_futex", u32),
        ("command_futex", u32),
        ("frame_waiters", u32),
        ("ack_waiters", u32),
        ("heartbeat_mono_ns", u64),
        ("heartbeat_unix_ns", u64),
        ("newest_seq", u64),
        ("newest_slot", u32),
        ("_pad0", u32),
        ("command_submit_seq", u64),
        ("command_mutex", ctypes.c_ubyte * 64),
        ("_reserved", u64 * 8),
    ]


class StaticHeader(ctypes.Structure):
    _fields_ = [
        ("generation", u64),
        ("particle_count", u64),
        ("triangle_count", u64),
        ("species_count", u32),
        ("mesh_count", u32),
        ("config_len", u32),
        ("config_format", u32),
        ("world_min", f64 * 3),
        ("world_max", f64 * 3),
        ("cell_size", f64),
        ("_reserved", u64 * 4),
    ]


class SlotHeader(ctypes.Structure):
    _fields_ = [
        ("lock_seq", u64),
        ("frame_seq", u64),
        ("step", u64),
        ("sim_time", f64),
        ("dt", f64),
        ("wall_unix_ns", u64),
        ("publish_mono_ns", u64),
        ("particle_count", u64),
        ("fields", u32),
        ("body_count", u32),
        ("static_generation", u64),
        ("steps_per_s", f64),
        ("removed_count", u64),
        ("removed_mass", f64),
        ("_reserved", u64 * 1),
    ]


class CommandRecord(ctypes.Structure):
    _fields_ = [
        ("state", u32),
        ("client_id", u32),
        ("request_id", u64),
        ("submit_seq", u64),
        ("submit_mono_ns", u64),
        ("ack_mono_ns", u64),
        ("request_len", u32),
        ("ack_len", u32),
        ("request", ctypes.c_ubyte * COMMAND_PAYLOAD),
        ("ack", ctypes.c_ubyte * COMMAND_PAYLOAD),
        # CLOCK_MONOTONIC ns after which the sender no longer waits: the solver drops a command
        # it takes later; 0 = none (older senders).
        ("deadline_mono_ns", u64),
        ("_reserved", u64),
    ]


SPECIES_DTYPE = np.dtype(
    [
        ("name", "S32"),
        ("method", "<u4"),
        ("_pad", "<u4"),
        ("radius", "<f8"),
        ("density", "<f8"),
        ("params", "<f8", SPECIES_PARAMS),
        ("_reserved", "<u8"),
    ]
)
MESH_DTYPE = np.dtype(
    [("name", "S32"), ("first_triangle", "<u8"), ("triangle_count", "<u8"), ("_reserved", "<u8", 2)]
)
BODY_DTYPE = np.dtype(
    [
        ("rotation", "<f4", (3, 3)),
        ("translation", "<f4", 3),
        ("velocity", "<f4", 3),
        ("angular_velocity", "<f4", 3),
    ]
)

for _rec, _size in [
    (Capacities, 40),
    (Plan, 248),
    (Header, HEADER_SIZE),
    (StaticHeader, 128),
    (SlotHeader, 112),
    (CommandRecord, 256),
]:
    assert ctypes.sizeof(_rec) == _size, (_rec.__name__, ctypes.sizeof(_rec))
assert SPECIES_DTYPE.itemsize == 128 and MESH_DTYPE.itemsize == 64 and BODY_DTYPE.itemsize == 72
assert Header.newest_seq.offset == 384 and Header.command_mutex.offset == 408
assert Header.frame_waiters.offset == 360 and Header.ack_waiters.offset == 364
assert CommandRecord.deadline_mono_ns.offset == 240


def layout_hash():
    """layout.rs ``LAYOUT_HASH``, computed the same way (FNV-1a over the little-endian bytes of
    record sizes and key offsets) from this module's records, so that a transcription error in
    them shows as a hash that differs from the Rust one."""
    parts = [
        ABI_VERSION,
        ctypes.sizeof(Header),
        ctypes.sizeof(Plan),
        ctypes.sizeof(StaticHeader),
        SPECIES_DTYPE.itemsize,
        MESH_DTYPE.itemsize,
        ctypes.sizeof(SlotHeader),
        BODY_DTYPE.itemsize,
        ctypes.sizeof(CommandRecord),
        Header.plan.offset,
        Header.newest_seq.offset,
        Header.command_mutex.offset,
        SlotHeader.particle_count.offset,
        CommandRecord.request.offset,
        CommandRecord.deadline_mono_ns.offset,
        ALIGN,
        COMMAND_PAYLOAD,
    ]
    h = 0xCBF29CE484222325
    for v in parts:
        for b in v.to_bytes(8, "little"):
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


assert layout_hash() == LAYOUT_HASH, hex(layout_hash())


class BadCapacities(ValueError):
    pass


class _Cursor:
    def __init__(self):
        self.at = 0

    def take(self, n):
        start = self.at
        self.at = (start + n + ALIGN - 1) // ALIGN * ALIGN
        return start


def compute_plan(c):
    """The plan (dict of offsets) for capacities ``c``, exactly as LAYOUT.md "Computing the plan".

    Raises BadCapacities for capacities outside the valid ranges.
    """
    if not MIN_SLOTS <= c.slot_count <= MAX_SLOTS:
        raise BadCapacities(f"slot_count must be between 3 and 64, got {c.slot_count}")
    if not 1 <= c.max_particles <= MAX_PARTICLES:
        raise BadCapacities(f"max_particles must be between 1 and 2^32-1, got {c.max_particles}")
    if c.fields == 0 or c.fields & ~ALL_FIELDS_MASK:
        raise BadCapacities(f"field mask {c.fields:#x} is empty or names unknown fields")
    if not 1 <= c.command_records <= 65536:
        raise BadCapacities(f"command_records must be between 1 and 65536, got {c.command_records}")
    if c.max_triangles > 2**40 or c.max_bodies > 2**20 or c.max_species > 2**16:
        raise BadCapacities("capacities give a segment larger than the address space allows")
    n = c.max_particles
    cur = _Cursor()
    cur.take(HEADER_SIZE)
    p = {}
    p["static_offset"] = cur.take(128)
    p["config_offset"] = cur.take(c.config_bytes)
    p["species_offset"] = cur.take(c.max_species * SPECIES_DTYPE.itemsize)
    p["particle_id_offset"] = cur.take(n * 4)
    p["particle_species_offset"] = cur.take(n * 4)
    p["particle_radius_offset"] = cur.take(n * 4)
    p["mesh_table_offset"] = cur.take(c.max_bodies * 64)
    p["triangles_offset"] = cur.take(c.max_triangles * 36)
    p["static_size"] = cur.at - p["static_offset"]
    s = _Cursor()
    s.take(112)
    p["slot_bodies_offset"] = s.take(c.max_bodies * 72)
    fields = [0] * FIELD_TABLE_LEN
    for bit in sorted(FIELDS):
        if c.fields & (1 << bit):
            fields[bit] = s.take(n * FIELD_SIZES[bit])
    p["slot_field_offsets"] = fields
    p["slot_stride"] = s.at
    p["slots_offset"] = cur.take(p["slot_stride"] * c.slot_count)
    p["commands_size"] = c.command_records * 256
    p["commands_offset"] = cur.take(p["commands_size"])
    p["total_size"] = cur.at
    if p["total_size"] > 2**63 - 1:
        raise BadCapacities("capacities give a segment larger than the address space allows")
    return p
