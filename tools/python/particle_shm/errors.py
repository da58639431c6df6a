"""Exceptions of the particle-shm reader (the same cases as the Rust ``AttachError``/``ReadError``)."""


class ParticleShmError(Exception):
    """Base class of every error raised by particle_shm."""


class InvalidName(ParticleShmError, ValueError):
    """The segment name is not 1 to 200 characters of A-Z a-z 0-9 . _ - (not starting with '.')."""


class SegmentNotFound(ParticleShmError, FileNotFoundError):
    """No shared-memory object of that name exists."""


class PermissionDenied(ParticleShmError, PermissionError):
    """The object exists but may not be opened (segments are owner-only by default)."""


class NotOurSegment(ParticleShmError):
    """The object does not start with the particle-shm magic."""


class NotInitialised(ParticleShmError):
    """The creator has not finished initialising the segment (abi_version is still 0)."""


class VersionMismatch(ParticleShmError):
    """The segment speaks another ABI version."""


class LayoutMismatch(VersionMismatch):
    """Same ABI version but a different layout hash or header size: rebuild one side."""


class CorruptSegment(ParticleShmError):
    """The segment's contents are inconsistent (counts beyond capacities, wrong offsets...)."""


class Truncated(CorruptSegment):
    """The object is too short to be a complete segment."""


class SizeMismatch(CorruptSegment):
    """The header's total_size differs from the object's real size."""


class NoStaticData(ParticleShmError):
    """The solver has not published its static section yet."""


class Contended(ParticleShmError):
    """The writer overwrote the data on every attempt to read it."""


class CommandError(ParticleShmError):
    """A command could not be delivered or acknowledged."""


class SolverGone(CommandError):
    """The solver process is gone: nobody will answer."""


class CommandTimeout(CommandError):
    """No acknowledgement (or no command mutex) within the timeout."""


class TableFull(CommandError):
    """Every command record is in use: the solver is not consuming commands."""
