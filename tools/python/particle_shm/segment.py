"""Attaching to a segment: validation, static data, frames and status (commands: _send.py).

Every access to the mapping is preceded by ``check_intact()`` (the object was not shrunk by
another process, see _object.py); a read validated by a seqlock checks it again before the
validation, whose load would otherwise touch the memory too.
"""

import ctypes
import math
import mmap
import numbers
import os
import time
from collections import namedtuple

import numpy as np

from . import _object, _send, _sys, layout as L
from .errors import (
    Contended,
    CorruptSegment,
    InvalidArgument,
    InvalidName,
    LayoutMismatch,
    NoStaticData,
    NotInitialised,
    NotOurSegment,
    ParticleShmError,
    SegmentOSError,
    SizeMismatch,
    StaticMismatch,
    Truncated,
    VersionMismatch,
)
from .frame import Frame

SHM_DIR = _object.SHM_DIR
READ_RETRIES = 16
LIVENESS_POLL = 0.2

Species = namedtuple("Species", "name method radius density params")
Species.__doc__ = (
    "method: 'dem', 'sph_fluid', 'sph_boundary', 'unspecified' (or the number of a method this "
    "reader does not know); params: the method's parameters by name, e.g. params['restitution']."
)
Status = namedtuple("Status", "state alive owner_pid heartbeat_age_s newest_seq over")
Status.__doc__ = (
    "state: 'starting'|'running'|'paused'|'finished'|'failed'|'unknown'; alive: the owner "
    "process exists (pid and start time match); over: finished, failed or owner gone."
)


def _species(r):
    """One species record as a Species: its method's name and its params by name."""
    method, names = L.SPECIES_METHODS.get(int(r["method"]), (str(int(r["method"])), ()))
    params = {n: float(v) for n, v in zip(names, r["params"])}
    return Species(_name(r["name"]), method, float(r["radius"]), float(r["density"]), params)


class Static:
    """The static section, copied (owned numpy arrays) and validated by its generation."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return (
            f"Static(generation={self.generation}, particles={len(self.ids)}, "
            f"species={[s.name for s in self.species]}, meshes={[m[0] for m in self.meshes]})"
        )


def validate_name(name):
    """segment.rs ``validate_name``: 1 to 200 characters of A-Z a-z 0-9 . _ -, not starting
    with '.'. Raises InvalidName saying what is wrong."""
    if not isinstance(name, str):
        reason = f"a segment name is a str, got {type(name).__name__}"
    elif not name:
        reason = "the name is empty"
    elif len(name.encode("utf-8")) > 200:
        reason = f"the name is {len(name.encode('utf-8'))} bytes long; at most 200"
    elif name.startswith("."):
        reason = "the name may not start with '.'"
    else:
        bad = next((c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))), None)
        if bad is None:
            return
        reason = f"the name contains {bad!r}; use only letters, digits, '.', '_' and '-'"
    raise InvalidName(f"invalid segment name {name!r}: {reason}")


def attach(name):
    """Attaches to segment ``name`` (the file /dev/shm/<name>), validating it as the Rust reader
    does: magic, ABI version, layout hash, size, and the plan recomputed from the capacities."""
    return Segment(name)


class Segment:
    def __init__(self, name):
        validate_name(name)
        self.name = name
        fd, self.writable, st = _object.open_object(name)
        try:
            size = st.st_size
            if size == 0:
                raise Truncated(
                    f"segment {name!r}{_whose(st.st_uid)} is empty (0 bytes): its creator has not "
                    "sized it yet, or it is not a particle-shm segment"
                )
            if size < L.HEADER_SIZE:
                raise Truncated(
                    f"segment {name!r}{_whose(st.st_uid)} is truncated ({size} bytes; a header "
                    f"alone is {L.HEADER_SIZE}): not a complete particle-shm segment"
                )
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if self.writable else 0)
            try:
                self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, prot)
            except OSError as e:
                raise SegmentOSError(
                    e.errno, f"segment {name!r}: mapping its {size} bytes failed: {os.strerror(e.errno)}"
                ) from None
        except BaseException:
            os.close(fd)
            raise
        # Kept open to watch the object's size (truncation by another process).
        self._fd = fd
        self.size = size
        self.owner_uid = st.st_uid
        self._static_copy = None
        self._validate()

    def close(self):
        """Releases the descriptor and, when no numpy view of it is alive, the mapping."""
        fd, self._fd = getattr(self, "_fd", -1), -1
        if fd >= 0:
            os.close(fd)
        try:
            self._mm.close()
        except (BufferError, AttributeError):
            pass  # views still use it: unmapped when they are gone

    def __del__(self):
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def check_intact(self):
        """Raises SegmentTruncated when another process shrank the object since it was mapped
        (reading past the new end would kill this process with SIGBUS). Every read calls it."""
        if self._fd < 0:
            raise ParticleShmError(f"segment {self.name!r} was closed")
        _object.check_intact(self.name, self._fd, self.size)

    # ---- validation -------------------------------------------------------------------------

    def _struct(self, cls, offset):
        if self.writable:
            return cls.from_buffer(self._mm, offset)
        # Read-only mapping: ctypes needs a writable buffer, so go through the address.
        return cls.from_address(self._base + offset)

    def _validate(self):
        self.check_intact()
        mm = self._mm
        self._base = ctypes.addressof(ctypes.c_char.from_buffer(mm)) if self.writable else _ro_base(mm)
        magic = bytes(mm[0:8])
        if magic != L.MAGIC:
            raise NotOurSegment(
                f"segment {self.name!r}{_whose(self.owner_uid)} is not a particle-shm segment "
                f"(magic {magic.hex(' ')}, "
                f"expected {L.MAGIC.hex(' ')})"
            )
        h = self._struct(L.Header, 0)
        self.header = h
        if h.abi_version == 0:
            raise NotInitialised(f"segment {self.name!r} is still being initialised by its creator; try again")
        if h.abi_version != L.ABI_VERSION:
            raise VersionMismatch(
                f"segment {self.name!r} has ABI version {h.abi_version}, this reader reads version "
                f"{L.ABI_VERSION}: the segment was made by "
                f"{'an older' if h.abi_version < L.ABI_VERSION else 'a newer'} particle-shm build; "
                "use the Python reader of the solver's build, or restart the run with this build's solver"
            )
        if h.header_size != L.HEADER_SIZE or h.layout_hash != L.LAYOUT_HASH:
            raise LayoutMismatch(
                f"segment {self.name!r} layout hash {h.layout_hash:#x} (header {h.header_size} "
                f"bytes) differs from this reader's {L.LAYOUT_HASH:#x}: update one side"
            )
        if h.total_size != self.size:
            raise SizeMismatch(
                f"segment {self.name!r}: its header says {h.total_size} bytes but the object has "
                f"{self.size}"
            )
        caps = L.Capacities.from_buffer_copy(h.capacities)
        try:
            plan = L.compute_plan(caps)
        except L.BadCapacities as e:
            raise CorruptSegment(f"segment {self.name!r} has impossible capacities: {e}") from None
        if h.plan.as_dict() != plan or plan["total_size"] != self.size:
            raise CorruptSegment(
                f"segment {self.name!r}: section offsets do not follow from the capacities"
            )
        self.capacities = caps
        self.plan = plan
        self._static = self._struct(L.StaticHeader, plan["static_offset"])
        self._slots = [
            self._struct(L.SlotHeader, plan["slots_offset"] + i * plan["slot_stride"])
            for i in range(caps.slot_count)
        ]
        self._addr = lambda field: self._base + getattr(L.Header, field).offset

    def __repr__(self):
        return f"<particle_shm.Segment {self.name!r} {self.size} bytes>"

    # ---- status -----------------------------------------------------------------------------

    def status(self):
        self.check_intact()
        h = self.header
        state = L.STATES.get(h.solver_state, "unknown")
        alive = _sys.process_alive(h.owner_pid, h.owner_start_ticks)
        age = max(0, _sys.monotonic_ns() - h.heartbeat_mono_ns) * 1e-9
        over = (not alive) or state in ("finished", "failed")
        return Status(state, alive, h.owner_pid, age, h.newest_seq, over)

    @property
    def newest_seq(self):
        self.check_intact()
        return self.header.newest_seq

    # ---- static section ---------------------------------------------------------------------

    def _array(self, dtype, offset, count):
        return np.frombuffer(self._mm, dtype=dtype, count=count, offset=offset)

    @property
    def static(self):
        """The static section (re-read on each access; cache it)."""
        return self.read_static()

    def read_static(self):
        caps, plan, sh = self.capacities, self.plan, self._static
        for _ in range(READ_RETRIES):
            self.check_intact()
            gen = sh.generation
            if gen == 0:
                raise NoStaticData(
                    f"segment {self.name!r}: no static data published yet (the solver publishes "
                    "it before its first frame; try again)"
                )
            if gen % 2 == 1:
                time.sleep(0)
                continue
            n, t, s, m, c = (
                sh.particle_count,
                sh.triangle_count,
                sh.species_count,
                sh.mesh_count,
                sh.config_len,
            )
            problem = None
            if n > caps.max_particles:
                problem = f"static section claims {n} particles, capacity {caps.max_particles}"
            elif t > caps.max_triangles:
                problem = f"static section claims {t} triangles, capacity {caps.max_triangles}"
            elif s > caps.max_species:
                problem = f"static section claims {s} species, capacity {caps.max_species}"
            elif m > caps.max_bodies:
                problem = f"static section claims {m} meshes, capacity {caps.max_bodies}"
            elif c > caps.config_bytes:
                problem = f"configuration length {c} exceeds its {caps.config_bytes} bytes"
            if problem is None:
                config = bytes(self._mm[plan["config_offset"] : plan["config_offset"] + c])
                species = self._array(L.SPECIES_DTYPE, plan["species_offset"], s).copy()
                ids = self._array(np.uint32, plan["particle_id_offset"], n).copy()
                sp = self._array(np.uint32, plan["particle_species_offset"], n).copy()
                radii = self._array(np.float32, plan["particle_radius_offset"], n).copy()
                records = self._array(L.MESH_DTYPE, plan["mesh_table_offset"], m).copy()
                tris = self._array(np.float32, plan["triangles_offset"], t * 9).reshape(t, 3, 3).copy()
                world_min, world_max = tuple(sh.world_min), tuple(sh.world_max)
                cell_size = sh.cell_size
                meshes = []
                for i, r in enumerate(records):
                    first, count = int(r["first_triangle"]), int(r["triangle_count"])
                    if first + count > t:
                        problem = f"mesh {i} triangle range {first}+{count} is outside the {t} triangles"
                        break
                    meshes.append((_name(r["name"]), tris[first : first + count]))
            self.check_intact()
            if sh.generation != gen:
                continue
            if problem is not None:
                raise CorruptSegment(f"segment {self.name!r}: {problem}")
            return Static(
                generation=gen,
                ids=ids,
                species_ids=sp,
                radii=radii,
                species=[_species(r) for r in species],
                meshes=meshes,
                config=config.decode("utf-8", "replace"),
                world_min=world_min,
                world_max=world_max,
                cell_size=cell_size,
            )
        raise Contended(
            f"segment {self.name!r}: the writer rewrote the static section {READ_RETRIES} times "
            "while it was read; try again"
        )

    def static_for(self, generation, seq=None):
        """The static section of ``generation`` (a frame's ``static_generation``; ``seq`` names
        the frame in errors): read once and kept while the segment's stays that generation.
        Raises StaticMismatch when the segment's static section is another generation."""
        st = self._static_copy
        if st is None or st.generation != generation:
            st = self._static_copy = self.read_static()
        if st.generation != generation:
            raise StaticMismatch(
                f"segment {self.name!r}: frame {seq} belongs to static data generation {generation}, "
                f"but the segment's static section is generation {st.generation}"
            )
        return st

    # ---- frames -----------------------------------------------------------------------------

    def latest(self, copy=False):
        """The newest complete frame, or None before the first publication.

        ``copy=False``: arrays are read-only numpy views into the slot (no copy); call
        ``frame.valid()`` after using them to know they were not overwritten meanwhile.
        ``copy=True``: owned arrays, validated by the slot's seqlock before returning.
        """
        h, caps = self.header, self.capacities
        for _ in range(READ_RETRIES):
            self.check_intact()
            if h.newest_seq == 0:
                return None
            slot = h.newest_slot
            if slot >= caps.slot_count:
                return None
            sh = self._slots[slot]
            lock = sh.lock_seq
            if lock == 0 or lock % 2 == 1:
                continue
            meta = {k: getattr(sh, k) for k in Frame.META}
            self.check_intact()
            if sh.lock_seq != lock:
                continue
            _check_meta(self.name, meta, caps)
            frame = Frame(self, slot, lock, meta, copy)
            if frame.valid():
                return frame
        raise Contended(
            f"segment {self.name!r}: the writer overwrote the frame {READ_RETRIES} times while it "
            "was read; try again"
        )

    def wait_newer(self, seq, timeout):
        """Waits up to ``timeout`` seconds (``math.inf``: no limit) for a frame newer than
        ``seq`` and returns ``latest()``; None on timeout or when the solver is over with nothing
        newer (check ``status().over``).

        Sleeps on ``frame_futex`` under a lease (see _sys.py): ``frame_waiters`` is set to now +
        300 ms before every sleep of at most 200 ms, so the writer wakes us, and a waiter killed
        asleep costs the writer nothing once its lease ran out."""
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or math.isnan(timeout):
            raise InvalidArgument(
                f"wait_newer: timeout must be a number of seconds (math.inf: no limit), got {timeout!r}"
            )
        h = self.header
        deadline = time.monotonic() + timeout
        next_check = time.monotonic() + LIVENESS_POLL
        word = self._addr("frame_futex")
        while True:
            self.check_intact()
            if self.writable:
                h.frame_waiters = _sys.lease_value()
            seen = h.frame_futex
            if h.newest_seq > seq:
                return self.latest()
            now = time.monotonic()
            if now >= deadline:
                return None
            if now >= next_check:
                next_check = now + LIVENESS_POLL
                if self.status().over:
                    return None
            pause = min(deadline, next_check) - now
            # Read-only mapping: no lease can be taken, so the writer may not wake us: poll.
            if not (self.writable and _sys.futex_wait(word, seen, pause)):
                time.sleep(min(pause, 1e-3))

    # ---- commands ---------------------------------------------------------------------------

    def send(self, command, timeout=5.0):
        """Sends a command (``"pause"``, ``"refresh 0.01"``, ``SetRefresh(...)``...) and waits
        up to ``timeout`` seconds for the solver's acknowledgement; returns
        ``Outcome(done, message)``.

        The command is checked first (InvalidCommand, a ValueError, before anything is written).
        The record carries the deadline now + ``timeout``: a solver that only gets to it later
        drops it unapplied, so on CommandTimeout the command was not applied unless the solver
        took it before the deadline."""
        return _send.send(self, command, timeout)


def _whose(uid):
    """The suffix ' (it belongs to uid N)' for an object of another user, else ''."""
    return "" if uid == os.geteuid() else f" (it belongs to uid {uid})"


def _name(raw):
    return bytes(raw).split(b"\0", 1)[0].decode("utf-8", "replace")


def _ro_base(mm):
    # A read-only mmap refuses from_buffer; numpy exposes its address without copying.
    return np.frombuffer(mm, dtype=np.uint8).ctypes.data


def _check_meta(name, meta, caps):
    if meta["particle_count"] > caps.max_particles:
        raise CorruptSegment(
            f"segment {name!r}: frame {meta['frame_seq']} claims {meta['particle_count']} particles, capacity {caps.max_particles}"
        )
    if meta["body_count"] > caps.max_bodies:
        raise CorruptSegment(
            f"segment {name!r}: frame {meta['frame_seq']} claims {meta['body_count']} bodies, capacity {caps.max_bodies}"
        )
    if meta["fields"] & ~caps.fields:
        raise CorruptSegment(
            f"segment {name!r}: frame {meta['frame_seq']} has fields {meta['fields']:#x} outside the reserved {caps.fields:#x}"
        )
