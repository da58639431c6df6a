"""particle_shm: read a particle-shm segment from Python (stdlib mmap + numpy).

Written from ``shm-protocol/LAYOUT.md`` (ABI version 1)::

    import particle_shm as p
    seg = p.attach("run1")              # validates magic, version, layout hash, size, plan
    st = seg.static                     # ids, species_ids, radii, species, meshes, config, world box
    f = seg.latest()                    # newest frame; f.positions is an (N, 3) float32 view
    ...use f.positions...
    if not f.valid(): ...               # the writer reused the slot meanwhile: discard
    f = seg.wait_newer(f.seq, 1.0)      # next frame (None on timeout or when the run is over)
    seg.send("pause")                   # Outcome(done=True, message=...)
"""

from .command import Outcome, SetRefresh
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
    ParticleShmError,
    PermissionDenied,
    SegmentNotFound,
    SizeMismatch,
    SolverGone,
    TableFull,
    Truncated,
    VersionMismatch,
)
from .frame import Frame
from .layout import ABI_VERSION, LAYOUT_HASH
from .segment import Segment, Static, Status, attach

__all__ = [
    "attach",
    "Segment",
    "Frame",
    "Static",
    "Status",
    "Outcome",
    "SetRefresh",
    "ABI_VERSION",
    "LAYOUT_HASH",
    "ParticleShmError",
    "InvalidName",
    "SegmentNotFound",
    "PermissionDenied",
    "NotOurSegment",
    "NotInitialised",
    "VersionMismatch",
    "LayoutMismatch",
    "CorruptSegment",
    "Truncated",
    "SizeMismatch",
    "NoStaticData",
    "Contended",
    "CommandError",
    "SolverGone",
    "CommandTimeout",
    "TableFull",
]
