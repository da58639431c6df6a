"""Frames: numpy views into a slot (zero-copy) or owned copies, validated by the slot's seqlock."""

import numpy as np

from . import layout as L


class Frame:
    """One frame. Per-particle arrays (``positions``, ``velocities``, ``angular_velocities``,
    ``forces``: (N, 3) float32; ``contact_counts`` uint32, ``densities``, ``pressures``: (N,)
    float32) are None when the frame does not carry them. ``bodies`` is a structured array
    (rotation (3, 3), translation, velocity, angular_velocity) with one row per mesh body.

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
            setattr(self, name, arr)
        bodies = np.frombuffer(
            segment._mm, dtype=L.BODY_DTYPE, count=self.body_count, offset=base + plan["slot_bodies_offset"]
        )
        self.bodies = bodies.copy() if copy else _read_only(bodies)
        # An owned copy is good only if the slot still held this frame after copying (and the
        # segment was not truncated meanwhile: then the lock_seq load itself would fault).
        if copy:
            segment.check_intact()
        self._copy_ok = copy and self._slot_header.lock_seq == self._lock

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


def _read_only(a):
    a.flags.writeable = False
    return a
