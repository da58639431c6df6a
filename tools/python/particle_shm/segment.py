"""Attaching to a segment: validation, static data, frames, status and commands."""

import ctypes
import itertools
import mmap
import os
import re
import time
from collections import namedtuple

import numpy as np

from . import _sys, command as _cmd, layout as L
from .errors import (
    CommandError,
    CommandTimeout,
    Contended,
    CorruptSegment,
    InvalidName,
    LayoutMismatch,
    NoStaticData,
    NotInitialised,
    NotOurSegment,
    PermissionDenied,
    SegmentNotFound,
    SizeMismatch,
    SolverGone,
    TableFull,
    Truncated,
    VersionMismatch,
)
from .frame import Frame

SHM_DIR = "/dev/shm"
READ_RETRIES = 16
LIVENESS_POLL = 0.2
ABANDONED_AFTER_NS = 10 * 10**9
_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")
_request_ids = itertools.count(1)

Species = namedtuple(
    "Species",
    "name radius density young_modulus poisson_ratio restitution sliding_friction rolling_friction",
)
Status = namedtuple("Status", "state alive owner_pid heartbeat_age_s newest_seq over")
Status.__doc__ = (
    "state: 'starting'|'running'|'paused'|'finished'|'failed'|'unknown'; alive: the owner "
    "process exists (pid and start time match); over: finished, failed or owner gone."
)


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
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.startswith("."):
        raise InvalidName(
            f"invalid segment name {name!r}: use 1 to 200 of A-Z a-z 0-9 . _ -, not starting with '.'"
        )


def attach(name):
    """Attaches to segment ``name`` (the file /dev/shm/<name>), validating it as the Rust reader
    does: magic, ABI version, layout hash, size, and the plan recomputed from the capacities."""
    return Segment(name)


class Segment:
    def __init__(self, name):
        validate_name(name)
        self.name = name
        path = os.path.join(SHM_DIR, name)
        try:
            fd = os.open(path, os.O_RDWR)
            self.writable = True
        except FileNotFoundError:
            raise SegmentNotFound(
                f"no segment named {name!r} (is the solver running? `shmctl list` shows segments)"
            ) from None
        except PermissionError:
            try:
                fd = os.open(path, os.O_RDONLY)
                self.writable = False
            except PermissionError:
                raise PermissionDenied(
                    f"permission denied opening segment {name!r} (segments are owner-only "
                    "unless created with group access)"
                ) from None
        try:
            size = os.fstat(fd).st_size
            if size < L.HEADER_SIZE:
                raise Truncated(
                    f"segment {name!r} is truncated ({size} bytes): not a complete particle-shm segment"
                )
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if self.writable else 0)
            self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, prot)
        finally:
            os.close(fd)
        self.size = size
        self._validate()

    # ---- validation -------------------------------------------------------------------------

    def _struct(self, cls, offset):
        if self.writable:
            return cls.from_buffer(self._mm, offset)
        # Read-only mapping: ctypes needs a writable buffer, so go through the address.
        return cls.from_address(self._base + offset)

    def _validate(self):
        mm = self._mm
        self._base = ctypes.addressof(ctypes.c_char.from_buffer(mm)) if self.writable else _ro_base(mm)
        if bytes(mm[0:8]) != L.MAGIC:
            raise NotOurSegment(f"{self.name!r} is not a particle-shm segment (magic {bytes(mm[0:8])!r})")
        h = self._struct(L.Header, 0)
        self.header = h
        if h.abi_version == 0:
            raise NotInitialised(f"segment {self.name!r} is still being initialised by its creator; try again")
        if h.abi_version != L.ABI_VERSION:
            raise VersionMismatch(
                f"segment {self.name!r} has ABI version {h.abi_version}, this reader speaks "
                f"{L.ABI_VERSION}: update one side"
            )
        if h.header_size != L.HEADER_SIZE or h.layout_hash != L.LAYOUT_HASH:
            raise LayoutMismatch(
                f"segment {self.name!r} layout hash {h.layout_hash:#x} (header {h.header_size} "
                f"bytes) differs from this reader's {L.LAYOUT_HASH:#x}: update one side"
            )
        if h.total_size != self.size:
            raise SizeMismatch(
                f"segment {self.name!r} header says {h.total_size} bytes but the object has {self.size}"
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
        h = self.header
        state = L.STATES.get(h.solver_state, "unknown")
        alive = _sys.process_alive(h.owner_pid, h.owner_start_ticks)
        age = max(0, _sys.monotonic_ns() - h.heartbeat_mono_ns) * 1e-9
        over = (not alive) or state in ("finished", "failed")
        return Status(state, alive, h.owner_pid, age, h.newest_seq, over)

    @property
    def newest_seq(self):
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
            gen = sh.generation
            if gen == 0:
                raise NoStaticData(f"segment {self.name!r}: no static data published yet")
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
            if sh.generation != gen:
                continue
            if problem is not None:
                raise CorruptSegment(f"segment {self.name!r}: {problem}")
            return Static(
                generation=gen,
                ids=ids,
                species_ids=sp,
                radii=radii,
                species=[
                    Species(_name(r["name"]), *(float(r[k]) for k in L.SPECIES_DTYPE.names[1:8]))
                    for r in species
                ],
                meshes=meshes,
                config=config.decode("utf-8", "replace"),
                world_min=world_min,
                world_max=world_max,
                cell_size=cell_size,
            )
        raise Contended(f"segment {self.name!r}: the static section changed on every read")

    # ---- frames -----------------------------------------------------------------------------

    def latest(self, copy=False):
        """The newest complete frame, or None before the first publication.

        ``copy=False``: arrays are read-only numpy views into the slot (no copy); call
        ``frame.valid()`` after using them to know they were not overwritten meanwhile.
        ``copy=True``: owned arrays, validated by the slot's seqlock before returning.
        """
        h, caps = self.header, self.capacities
        for _ in range(READ_RETRIES):
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
            if sh.lock_seq != lock:
                continue
            _check_meta(self.name, meta, caps)
            frame = Frame(self, slot, lock, meta, copy)
            if frame.valid():
                return frame
        raise Contended(f"segment {self.name!r}: the writer overwrote the frame {READ_RETRIES} times while it was read")

    def wait_newer(self, seq, timeout):
        """Waits up to ``timeout`` seconds for a frame newer than ``seq`` and returns
        ``latest()``; None on timeout or when the solver is over with nothing newer (check
        ``status().over``)."""
        h = self.header
        deadline = time.monotonic() + timeout
        next_check = time.monotonic() + LIVENESS_POLL
        waiters, word = self._addr("frame_waiters"), self._addr("frame_futex")
        while True:
            registered = self.writable and _sys.atomic_add_u32(waiters, 1)
            seen = h.frame_futex
            try:
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
                if not (registered and _sys.futex_wait(word, seen, pause)):
                    time.sleep(min(pause, 1e-3))
            finally:
                if registered:
                    _sys.atomic_add_u32(waiters, -1)

    # ---- commands ---------------------------------------------------------------------------

    def _record(self, i):
        return self._struct(L.CommandRecord, self.plan["commands_offset"] + i * 256)

    def send(self, command, timeout=5.0):
        """Sends a command (``"pause"``, ``"refresh 0.01"``, ``SetRefresh(...)``...) and waits
        for the solver's acknowledgement; returns ``Outcome(done, message)``."""
        payload = _cmd.encode(command)
        if not self.writable:
            raise CommandError(f"segment {self.name!r} is open read-only: cannot send commands")
        st = self.status()
        if not st.alive:
            raise SolverGone(f"the solver (pid {st.owner_pid}) is gone; nobody will answer")
        client, request = os.getpid(), next(_request_ids)
        rec = self._submit(payload, client, request)
        return self._wait_ack(rec, client, request, timeout)

    def _submit(self, payload, client, request):
        h, count = self.header, self.capacities.command_records
        mutex = _sys.RobustMutex(self._addr("command_mutex"))
        try:
            mutex.lock(2.0)
        except TimeoutError:
            raise CommandTimeout("timed out after 2 s waiting for the command mutex") from None
        # A dead previous holder left nothing half-done: a record becomes pending only by the
        # final store below.
        try:
            now = _sys.monotonic_ns()
            pick = next((i for i in range(count) if self._record(i).state == 0), None)
            if pick is None:
                pick = next(
                    (
                        i
                        for i in range(count)
                        if self._record(i).state == 3
                        and now - self._record(i).ack_mono_ns > ABANDONED_AFTER_NS
                    ),
                    None,
                )
            if pick is None:
                raise TableFull(f"the command table is full ({count} records pending); the solver is not consuming commands")
            r = self._record(pick)
            submit_seq = h.command_submit_seq + 1
            r.client_id = client
            r.request_id = request
            r.submit_seq = submit_seq
            r.submit_mono_ns = now
            ctypes.memmove(ctypes.addressof(r.request), payload, len(payload))
            r.request_len = len(payload)
            r.ack_len = 0
            r.state = 1
            h.command_submit_seq = submit_seq
        finally:
            mutex.unlock()
        if not _sys.bump_and_wake(self._addr("command_futex")):
            h.command_futex = (h.command_futex + 1) & 0xFFFFFFFF  # polling solvers still see it
        return r

    def _wait_ack(self, r, client, request, timeout):
        h = self.header
        deadline = time.monotonic() + timeout
        next_check = time.monotonic() + 0.1
        waiters, word = self._addr("ack_waiters"), self._addr("ack_futex")
        while True:
            registered = _sys.atomic_add_u32(waiters, 1)
            seen = h.ack_futex
            try:
                if r.state == 3 and r.client_id == client and r.request_id == request:
                    n = min(r.ack_len, 96)
                    raw = bytes(r.ack[:n])
                    r.state = 0
                    try:
                        return _cmd.decode_outcome(raw)
                    except (ValueError, IndexError) as e:
                        raise CommandError(f"corrupt acknowledgement: {e}") from None
                now = time.monotonic()
                if now >= deadline:
                    raise CommandTimeout(
                        f"no acknowledgement within {timeout} s (the solver may be busy in a long step)"
                    )
                if now >= next_check:
                    next_check = now + 0.1
                    st = self.status()
                    if not st.alive:
                        raise SolverGone(f"the solver (pid {st.owner_pid}) is gone; nobody will answer")
                pause = min(deadline, next_check) - now
                if not (registered and _sys.futex_wait(word, seen, pause)):
                    time.sleep(min(pause, 1e-3))
            finally:
                if registered:
                    _sys.atomic_add_u32(waiters, -1)


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
