"""particle_shm: read a particle-shm segment from Python (stdlib mmap + numpy).

Written from ``shm-protocol/LAYOUT.md`` (ABI version 1)::

    import particle_shm as p
    seg = p.attach("run1")              # validates magic, version, layout hash, size, plan
    st = seg.static                     # ids, species_ids, radii, species, meshes, config, world box
    f = seg.latest()                    # newest frame; f.positions is an (N, 3) float32 view
    f.particle_ids, f.species, f.radii  # per element, by id (runs whose particle set changes)
    ...use f.positions...
    if not f.valid(): ...               # the writer reused the slot meanwhile: discard
    f = seg.wait_newer(f.seq, 1.0)      # next frame (None on timeout or when the run is over)
    seg.send("pause")                   # Outcome(done=True, message=...)

Every failure raises a subclass of ``ParticleShmError`` whose message names the segment and the
cause (``particle_shm.errors``); command values are checked against ``particle_shm.limits``.
"""

from .command import Outcome, SetRefresh
from .errors import (
    CommandError,
    CommandTimeout,
    Contended,
    CorruptSegment,
    InvalidArgument,
    InvalidCommand,
    InvalidName,
    LayoutMismatch,
    NoStaticData,
    NotAnObject,
    NotInitialised,
    NotOurSegment,
    ParticleShmError,
    PermissionDenied,
    SegmentNotFound,
    SegmentOSError,
    SegmentTruncated,
    SizeMismatch,
    SolverGone,
    StaticMismatch,
    TableFull,
    Truncated,
    VersionMismatch,
)
from .frame import Frame
from .layout import ABI_VERSION, LAYOUT_HASH
from . import limits
from .segment import Segment, Static, Status, attach

__all__ = [
    "attach",
    "Segment",
    "Frame",
    "Static",
    "Status",
    "Outcome",
    "SetRefresh",
    "limits",
    "ABI_VERSION",
    "LAYOUT_HASH",
    "ParticleShmError",
    "InvalidArgument",
    "InvalidName",
    "SegmentNotFound",
    "PermissionDenied",
    "NotAnObject",
    "SegmentOSError",
    "NotOurSegment",
    "NotInitialised",
    "VersionMismatch",
    "LayoutMismatch",
    "CorruptSegment",
    "Truncated",
    "SizeMismatch",
    "SegmentTruncated",
    "NoStaticData",
    "StaticMismatch",
    "Contended",
    "CommandError",
    "InvalidCommand",
    "SolverGone",
    "CommandTimeout",
    "TableFull",
]
