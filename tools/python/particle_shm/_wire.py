"""The forwarder's binary protocol, version 4 (tools/forwarder/PROTOCOL.md): message types as
bincode schemas (transcribed from tools/forwarder/src/protocol.rs and shm-protocol's
``FrameMeta``, ``SolverStatus``, ``Command``, ``CommandOutcome``), the framing, and the frame
and static payloads as numpy arrays.

Every message, both ways: ``len: u32 LE``, a bincode header, then for ``Frame`` and ``Static``
only the payload. tests/test_wire.py checks every schema against bytes the Rust side wrote
(tests/wire_vectors.json, kept current by tools/forwarder/tests/wire_vectors.rs).
"""

import struct

import numpy as np

from . import layout as L
from ._bincode import (
    BOOL,
    F32,
    F64,
    STR,
    U32,
    U64,
    Array,
    Enum,
    Option,
    Reader,
    Result,
    Seq,
    Struct,
    Tuple,
    varint,
)

PROTOCOL_NAME = "particle-shm-forwarder"
PROTOCOL_VERSION = 4
# protocol.rs MAX_CLIENT_MESSAGE: the forwarder refuses longer client messages.
MAX_CLIENT_MESSAGE = 64 * 1024
# protocol.rs DEFAULT_MAX_SERVER_MESSAGE: 1 GiB holds every field of ~18 M particles.
DEFAULT_MAX_MESSAGE = 1 << 30
# protocol.rs MAX_TOKEN_LEN.
MAX_TOKEN_LEN = 1024
# forwarder values.rs MIN_RATE_HZ: a rate is 0 (no limit) or at least one frame a day.
MIN_RATE_HZ = 1.0 / 86400.0
# Bytes of one body transform (18 f32).
BODY_BYTES = 72

POSITION_ENCODING = Enum(("F32", None), ("Quantized16", None))
SUBSCRIPTION = Struct(
    ("fields", U32),
    ("positions", POSITION_ENCODING),
    ("max_rate_hz", F32),
    ("static_arrays", BOOL),
    ("max_particles", U64),
)
COMMAND = Enum(
    ("SetRefresh", Struct(("sim_seconds", Option(F64)), ("wall_ms", Option(U64)))),
    ("UpdateNow", None),
    ("Pause", None),
    ("Resume", None),
    ("Stop", None),
    ("Checkpoint", None),
)
CLIENT_MSG = Enum(
    (
        "Hello",
        Struct(
            ("protocol", STR),
            ("version", U32),
            ("token", STR),
            ("client", STR),
            ("subscription", SUBSCRIPTION),
        ),
    ),
    ("Subscribe", SUBSCRIPTION),
    ("Command", Struct(("id", U64), ("timeout_ms", U32), ("command", COMMAND))),
)

SOLVER_STATE = Enum(*((s, None) for s in ("Starting", "Running", "Paused", "Finished", "Failed")))
SOLVER_STATUS = Struct(
    ("state", Option(SOLVER_STATE)),
    ("owner_pid", U32),
    ("alive", BOOL),
    ("heartbeat_age_s", F64),
    ("newest_seq", U64),
    ("created_unix_ns", U64),
)
WIRE_STATUS = Struct(
    ("attached", BOOL),
    ("epoch", U64),
    ("solver", Option(SOLVER_STATUS)),
    ("static_generation", U64),
    ("frame_seq", U64),
    ("message", STR),
)
WIRE_SPECIES = Struct(
    ("name", STR),
    ("method", STR),
    ("radius", F64),
    ("density", F64),
    ("params", Seq(Tuple(STR, F64))),
)
STATIC_HEADER = Struct(
    ("epoch", U64),
    ("generation", U64),
    ("world_min", Array(F64, 3)),
    ("world_max", Array(F64, 3)),
    ("cell_size", F64),
    ("config_toml", STR),
    ("species", Seq(WIRE_SPECIES)),
    ("meshes", Seq(Struct(("name", STR), ("triangle_count", U64)))),
    ("particle_count", U64),
    ("arrays", BOOL),
)
FRAME_META = Struct(
    ("seq", U64),
    ("slot", U32),
    ("step", U64),
    ("sim_time", F64),
    ("dt", F64),
    ("wall_unix_ns", U64),
    ("publish_mono_ns", U64),
    ("particle_count", U64),
    ("fields", U32),
    ("body_count", U32),
    ("static_generation", U64),
    ("steps_per_s", F64),
    ("removed_count", U64),
    ("removed_mass", F64),
)
FRAME_HEADER = Struct(
    ("epoch", U64),
    ("meta", FRAME_META),
    ("positions", POSITION_ENCODING),
    ("quant_min", Array(F32, 3)),
    ("quant_max", Array(F32, 3)),
    ("stride", U64),
    ("frame_particles", U64),
)
COMMAND_OUTCOME = Enum(("Done", STR), ("Rejected", STR))
COMMAND_FAILURE = Enum(*((s, None) for s in ("Timeout", "SolverGone", "NotAttached", "Busy", "Other")))
SERVER_MSG = Enum(
    ("Welcome", Struct(("version", U32), ("server", STR), ("segment", STR))),
    ("Refused", Struct(("reason", STR))),
    ("Status", WIRE_STATUS),
    ("Static", STATIC_HEADER),
    ("Frame", FRAME_HEADER),
    ("Ack", Struct(("id", U64), ("outcome", Result(COMMAND_OUTCOME, Tuple(COMMAND_FAILURE, STR))))),
    ("Error", Struct(("reason", STR))),
)
# Variant index of ClientMsg::Command (its content starts with id and timeout_ms).
_COMMAND_VARIANT = 2


class PayloadError(ValueError):
    """A payload does not match its header (size, field bits)."""


def frame(body):
    """A complete TCP message: the length prefix and ``body``."""
    return struct.pack("<I", len(body)) + body


def hello(token, client, subscription):
    return frame(
        CLIENT_MSG.to_bytes(
            {
                "Hello": {
                    "protocol": PROTOCOL_NAME,
                    "version": PROTOCOL_VERSION,
                    "token": token,
                    "client": client,
                    "subscription": subscription,
                }
            }
        )
    )


def command(id, timeout_ms, command_bytes):
    """``ClientMsg::Command``; ``command_bytes`` is the bincode of the ``Command`` (command.py
    ``encode``, which validates it first)."""
    head = bytearray(varint(_COMMAND_VARIANT))
    U64.encode(head, id)
    U32.encode(head, timeout_ms)
    return frame(bytes(head) + command_bytes)


def subscription(fields, quantized, max_rate_hz, static_arrays=True, max_particles=0):
    return {
        "fields": fields,
        "positions": "Quantized16" if quantized else "F32",
        "max_rate_hz": max_rate_hz,
        "static_arrays": static_arrays,
        "max_particles": max_particles,
    }


def decode_header(body):
    """Decodes a server message's header at the start of ``body``; returns ``(variant, content,
    payload offset)``. Raises ``DecodeError`` (``Short`` when ``body`` ends inside the header) and
    ``PayloadError`` for bytes after a message that carries no payload."""
    r = Reader(body)
    msg = SERVER_MSG.decode(r)
    ((variant, content),) = msg.items()
    if variant not in ("Frame", "Static") and r.left():
        raise PayloadError(f"{r.left()} trailing bytes after a {variant} message")
    return variant, content, r.at


# ---- payloads ------------------------------------------------------------------------------


def _pad4(n):
    return (n + 3) // 4 * 4


def _element(bit, quantized):
    """numpy dtype, components and bytes per particle of field ``bit`` on the wire."""
    _, dtype, k = L.FIELDS[bit]
    if bit == 0 and quantized:
        return np.dtype("<u2"), 3, 6
    return np.dtype(dtype), k, np.dtype(dtype).itemsize * k


def frame_payload_len(h):
    meta, quantized = h["meta"], h["positions"] == "Quantized16"
    total = meta["body_count"] * BODY_BYTES
    for bit in sorted(L.FIELDS):
        if meta["fields"] & (1 << bit):
            total += _pad4(meta["particle_count"] * _element(bit, quantized)[2])
    return total


def frame_arrays(h, payload):
    """The arrays of a frame message: ``(bodies, {field name: array})``, read-only views into
    ``payload`` (quantised positions: a new float32 array, decoded as payload.rs
    ``dequantise`` does, in float32). Every size is checked against the header first."""
    meta = h["meta"]
    if meta["fields"] & ~L.ALL_FIELDS_MASK:
        raise PayloadError(f"unknown field bits {meta['fields']:#x}")
    stride, n = h["stride"], meta["particle_count"]
    if stride == 0 or -(-h["frame_particles"] // stride) != n:
        raise PayloadError(f"frame of {h['frame_particles']} particles sampled every {stride} cannot hold {n}")
    if stride > 1 and not meta["fields"] & (1 << 7):
        raise PayloadError("subsampled frame without particle ids")
    want = frame_payload_len(h)
    if want != len(payload):
        raise PayloadError(f"frame payload is {len(payload)} bytes, the header implies {want}")
    n, quantized = meta["particle_count"], h["positions"] == "Quantized16"
    bodies = _read_only(np.frombuffer(payload, dtype=L.BODY_DTYPE, count=meta["body_count"]))
    at = meta["body_count"] * BODY_BYTES
    arrays = {}
    for bit in sorted(L.FIELDS):
        if not meta["fields"] & (1 << bit):
            continue
        dtype, k, size = _element(bit, quantized)
        a = np.frombuffer(payload, dtype=dtype, count=n * k, offset=at)
        if k > 1:
            a = a.reshape(n, k)
        if bit == 0 and quantized:
            lo = np.array(h["quant_min"], dtype=np.float32)
            hi = np.array(h["quant_max"], dtype=np.float32)
            # A box beyond float32's range gives inf and NaN, as in Rust: no warnings.
            with np.errstate(over="ignore", invalid="ignore"):
                step = (hi - lo) / np.float32(65535.0)
                a = a.astype(np.float32) * step + lo
        arrays[L.FIELDS[bit][0]] = _read_only(a)
        at += _pad4(n * size)
    return bodies, arrays


def static_arrays(h, payload):
    """``(ids, species_ids, radii, [(mesh name, triangles (t, 3, 3))])`` of a static message,
    read-only views into ``payload``; empty arrays when the header says it carries none."""
    n = h["particle_count"]
    tris = [m["triangle_count"] for m in h["meshes"]]
    want = (12 * n + 36 * sum(tris)) if h["arrays"] else 0
    if want != len(payload):
        raise PayloadError(f"static payload is {len(payload)} bytes, the header implies {want}")
    if not h["arrays"]:
        n, tris = 0, [0] * len(tris)
    ids = np.frombuffer(payload, dtype="<u4", count=n, offset=0)
    species = np.frombuffer(payload, dtype="<u4", count=n, offset=4 * n)
    radii = np.frombuffer(payload, dtype="<f4", count=n, offset=8 * n)
    at, meshes = 12 * n, []
    for m, t in zip(h["meshes"], tris):
        a = np.frombuffer(payload, dtype="<f4", count=9 * t, offset=at).reshape(t, 3, 3)
        meshes.append((m["name"], _read_only(a)))
        at += 36 * t
    return _read_only(ids), _read_only(species), _read_only(radii), meshes


def _read_only(a):
    a.flags.writeable = False
    return a

