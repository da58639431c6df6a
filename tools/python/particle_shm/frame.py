"""Frames: numpy views into a slot (zero-copy) or owned copies, validated by the slot's seqlock."""

import numpy as np

from . import layout as L
from .errors import Contended, CorruptSegment


class Frame:
    """One frame. Per-particle arrays (``positions``, ``velocities``, ``angular_velocities``,
    ``forces``: (N, 3) float32; ``contact_counts`` uint32, ``densities``, ``pressures``: (N,)
    float32) are None when the frame does not carry them. ``bodies`` is a structured array
    (rotation (3, 3), translation, velocity, angular_velocity) with one row per mesh body.

    Runs whose particle set changes (outflow, inflow) hold only the live particles in each frame
    and name them by id: ``particle_ids`` is the id of each element (the static ids when the
    frame carries none), and ``species`` (index into ``static.species``) and ``radii`` [m] are
    the static entries of those ids, element by element. ``removed_count`` and ``removed_mass``
    [kg] count what outflow regions removed since t = 0 (0 without outflow).

    Views (``copy=False``) are read-only and point into the shared slot: the writer reuses the
    slot after ``slot_count - 2`` further frames, so call ``valid()`` after using them; False
    means what was read may be torn and must be discarded. ``valid()`` raises SegmentTruncated
    when another process shrank the segment; views touched after that point would fault
    (SIGBUS), so keep views short-lived or take copies where that can happen.
    """

    META = (
        "frame_seq",
        "step",
        "sim_time",
        "dt",
        "wall_unix_ns",
        "publish_mono_ns",
        "particle_count",
        "fields",
        "body_count",
        "static_generation",
        "steps_per_s",
        "removed_count",
        "removed_mass",
    )

    def __init__(self, segment, slot, lock, meta, copy):
        self._seg = segment
        self._lock = lock
        self._slot_header = segment._slots[slot]
        self.slot = slot
        self.seq = meta["frame_seq"]
        for k in self.META[1:]:
            setattr(self, k, meta[k])
        self.owned = bool(copy)
        plan = segment.plan
        base = plan["slots_offset"] + slot * plan["slot_stride"]
        n = self.particle_count
        for bit, (name, dtype, k) in L.FIELDS.items():
            arr = None
            if self.fields & (1 << bit):
                off = base + plan["slot_field_offsets"][bit]
                arr = np.frombuffer(segment._mm, dtype=dtype, count=n * k, offset=off)
                if k > 1:
                    arr = arr.reshape(n, k)
                arr = arr.copy() if copy else _read_only(arr)
            # The frame's own ids; the property `particle_ids` falls back to the static ids.
            setattr(self, "_frame_ids" if name == "particle_ids" else name, arr)
        self._species = self._radii = None
        bodies = np.frombuffer(
            segment._mm, dtype=L.BODY_DTYPE, count=self.body_count, offset=base + plan["slot_bodies_offset"]
        )
        self.bodies = bodies.copy() if copy else _read_only(bodies)
        # An owned copy is good only if the slot still held this frame after copying (and the
        # segment was not truncated meanwhile: then the lock_seq load itself would fault).
        if copy:
            segment.check_intact()
        self._copy_ok = copy and self._slot_header.lock_seq == self._lock

    @property
    def particle_ids(self):
        """Id of each particle of this frame (uint32, N): the frame's ``particle_id`` array in a
        run whose particle set changes, else the static ids (element i is static entry i)."""
        if self._frame_ids is not None:
            return self._frame_ids
        return self._by_id(self.static.ids)

    @property
    def species(self):
        """Species of each particle of this frame (uint32, N; index into ``static.species``),
        looked up by id."""
        if self._species is None:
            self._species = self._by_id(self.static.species_ids)
        return self._species

    @property
    def radii(self):
        """Radius [m] of each particle of this frame (float32, N), looked up by id."""
        if self._radii is None:
            self._radii = self._by_id(self.static.radii)
        return self._radii

    @property
    def static(self):
        """The static section this frame belongs to (``Segment.static_for`` its generation:
        read once per generation and shared; StaticMismatch when the segment's is another)."""
        return self._seg.static_for(self.static_generation, self.seq)

    def _where(self):
        """Names this frame in error messages."""
        return f"segment {self._seg.name!r}: frame {self.seq}"

    def _by_id(self, arr):
        where = self._where()
        if self._frame_ids is None and len(arr) != self.particle_count:
            raise CorruptSegment(
                f"{where} holds {self.particle_count} particles without particle ids, but the "
                f"static section lists {len(arr)}"
            )
        try:
            out = per_element(arr, self._frame_ids)
        except CorruptSegment as e:
            if not self.valid():
                raise Contended(f"{where}: the writer reused the slot while it was read; read again") from None
            raise CorruptSegment(f"{where}: {e}") from None
        # The static arrays themselves are shared by every frame of their generation.
        return _read_only(arr.view()) if out is arr else out

    def valid(self):
        """Views: True while the slot still holds this frame. Copies: True if the slot was not
        rewritten while the copy was made (``latest(copy=True)`` returns only such copies).
        Raises SegmentTruncated (views) once another process shrank the segment."""
        if self.owned:
            return self._copy_ok
        self._seg.check_intact()
        return self._slot_header.lock_seq == self._lock

    def __repr__(self):
        kind = "copy" if self.owned else "view"
        return f"<Frame seq={self.seq} step={self.step} t={self.sim_time:g} N={self.particle_count} {kind}>"


def per_element(arr, ids):
    """The entries of the static per-particle array ``arr`` (static order) for each element of
    a frame: ``arr`` itself when the frame carries no ids (``ids`` None: element i is entry i),
    else ``arr[ids]`` (a copy). Raises CorruptSegment for an id outside ``arr``."""
    if ids is None:
        return arr
    if len(ids) and int(ids.max()) >= len(arr):
        raise CorruptSegment(
            f"frame names particle id {int(ids.max())}, but the static section lists {len(arr)} particles"
        )
    return arr[ids]


def _read_only(a):
    a.flags.writeable = False
    return a
