"""particle_shm: read a particle-shm run from Python (standard library + numpy), from its segment
on this machine or through a forwarder on another.

Written from ``shm-protocol/LAYOUT.md`` (ABI version 2)::

    import particle_shm as p
    seg = p.attach("run1")              # validates magic, version, layout hash, size, plan
    st = seg.static                     # ids, species_ids, radii, species, meshes, config, world box
    f = seg.latest()                    # newest frame; f.positions is an (N, 3) float32 view
    f.particle_ids, f.species, f.radii  # per element, by id (runs whose particle set changes)
    ...use f.positions...
    if not f.valid(): ...               # the writer reused the slot meanwhile: discard
    f = seg.wait_newer(f.seq, 1.0)      # next frame (None on timeout or when the run is over)
    seg.send("pause")                   # Outcome(done=True, message=...)

The same API over the network, through a forwarder (``forwarder --attach run1 --listen ...``;
``tools/forwarder/PROTOCOL.md``, version 4)::

    seg = p.connect("gpu-server:7788", token="...", fields=("positions", "velocities"))
    f = seg.latest()                    # the newest frame received; the same Frame attributes
    f = seg.wait_newer(f.seq, 1.0)
    seg.send("pause")

Every failure raises a subclass of ``ParticleShmError`` whose message names the segment (or the
forwarder) and the cause (``particle_shm.errors``); command values are checked against
``particle_shm.limits``.
"""

from .command import Outcome, SetRefresh
from .errors import (
    CommandError,
    CommandTimeout,
    ConnectFailed,
    ConnectionLost,
    Contended,
    CorruptSegment,
    ForwarderError,
    ForwarderTimeout,
    InvalidArgument,
    InvalidCommand,
    InvalidName,
    LayoutMismatch,
    MessageTooLarge,
    NoStaticData,
    NotAnObject,
    NotInitialised,
    NotOurSegment,
    ParticleShmError,
    PermissionDenied,
    ProtocolError,
    ProtocolMismatch,
    Refused,
    SegmentNotFound,
    SegmentOSError,
    SegmentTruncated,
    SizeMismatch,
    SolverGone,
    StaticMismatch,
    TableFull,
    TokenRejected,
    Truncated,
    VersionMismatch,
)
from .frame import Frame
from .layout import ABI_VERSION, LAYOUT_HASH
from . import limits
from .remote import RemoteFrame, RemoteSegment, connect
from .segment import Segment, Static, Status, attach

__all__ = [
    "attach",
    "connect",
    "Segment",
    "RemoteSegment",
    "Frame",
    "RemoteFrame",
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
    "ForwarderError",
    "ConnectFailed",
    "ForwarderTimeout",
    "Refused",
    "TokenRejected",
    "ProtocolMismatch",
    "ProtocolError",
    "MessageTooLarge",
    "ConnectionLost",
]
