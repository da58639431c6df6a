"""Exceptions of the particle-shm reader: the cases of the Rust ``AttachError``, ``ReadError`` and
``CommandError`` (shm-protocol/src/error.rs), each message naming the segment and what is wrong.

Every failure of ``attach`` raises a subclass of ``ParticleShmError``, never a bare ``OSError``;
the classes that correspond to an OS condition also derive from the matching built-in exception
(``SegmentNotFound`` is a ``FileNotFoundError``...), so older ``except OSError`` code still works.
``connect`` raises ``ForwarderError`` subclasses (the cases of the Rust ``ConnectError`` and
``CodecError``, tools/forwarder/src/client.rs and codec.rs), each message naming the forwarder's
address; its commands raise the same ``CommandError`` classes as local ones.
"""


class ParticleShmError(Exception):
    """Base class of every error raised by particle_shm."""


class InvalidArgument(ParticleShmError, ValueError):
    """An argument is out of its range (a timeout, a command's value)."""


class InvalidName(InvalidArgument):
    """The segment name is not 1 to 200 characters of A-Z a-z 0-9 . _ - (not starting with '.')."""


class SegmentNotFound(ParticleShmError, FileNotFoundError):
    """No shared-memory object of that name exists."""


class PermissionDenied(ParticleShmError, PermissionError):
    """The object exists but may not be opened (segments are owner-only unless created with
    group access). ``owner_uid`` is the uid owning the object, when it could be read."""

    def __init__(self, message, owner_uid=None):
        super().__init__(message)
        self.owner_uid = owner_uid

    def __str__(self):
        return self.args[0]


class NotAnObject(ParticleShmError):
    """Something other than a shared-memory object sits at /dev/shm/NAME: a directory, a symbolic
    link (never followed, as the Rust tools' ``shm_open`` does not follow it) or a special file.
    ``kind`` says which."""

    def __init__(self, message, kind):
        super().__init__(message)
        self.kind = kind


class SegmentOSError(ParticleShmError, OSError):
    """An operating-system call on the segment failed for a reason not covered above (too many
    open files, out of address space...); ``errno`` is set."""

    def __init__(self, errno, message):
        OSError.__init__(self, errno, message)

    def __str__(self):
        return self.strerror


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
    """The object is too short to be a complete segment (at attach: empty, or shorter than a
    header)."""


class SizeMismatch(CorruptSegment):
    """The header's total_size differs from the object's real size."""


class SegmentTruncated(ParticleShmError):
    """Another process shrank the segment (``ftruncate``) after it was mapped: its data is gone.
    Raised instead of touching the memory past the new end, which would kill this process with
    SIGBUS. ``size`` is the object's size now, ``expected`` the size it was mapped with."""

    def __init__(self, message, size, expected):
        super().__init__(message)
        self.size = size
        self.expected = expected

    def __str__(self):
        return self.args[0]


class NoStaticData(ParticleShmError):
    """The solver has not published its static section yet."""


class StaticMismatch(ParticleShmError):
    """A frame belongs to another generation of the static section than the segment holds now
    (the solver rewrote it): its ids, species and radii would describe other particles."""


class Contended(ParticleShmError):
    """The writer overwrote the data on every attempt to read it."""


class CommandError(ParticleShmError):
    """A command could not be delivered or acknowledged."""


class InvalidCommand(CommandError, InvalidArgument):
    """The command is unknown or carries a value outside the limits the solver accepts
    (``particle_shm.limits``); raised before anything is written to the segment."""


class SolverGone(CommandError):
    """The solver process is gone: nobody will answer."""


class CommandTimeout(CommandError):
    """No acknowledgement (or no command mutex) within the timeout."""


class TableFull(CommandError):
    """Every command record is in use: the solver is not consuming commands, or their senders
    have not read their answers yet."""


# ---- the network client (particle_shm.connect, remote.py) ----------------------------------


class ForwarderError(ParticleShmError):
    """Base class of the errors of a connection to a forwarder (``particle_shm.connect``). Each
    message names the forwarder's address."""


class ConnectFailed(ForwarderError, ConnectionError):
    """No TCP connection could be made: the name does not resolve, nothing listens there
    (connection refused), the network is unreachable, or the peer closed the connection before
    answering the hello (not a forwarder)."""


class ForwarderTimeout(ForwarderError, TimeoutError):
    """The forwarder did not connect, welcome or report its status within the timeout."""


class Refused(ForwarderError):
    """The forwarder answered the hello with ``Refused``; ``reason`` is its text (too many
    clients, a rate it does not accept...). The connection is closed."""

    def __init__(self, message, reason):
        super().__init__(message)
        self.reason = reason

    def __str__(self):
        return self.args[0]


class TokenRejected(Refused, PermissionError):
    """The forwarder requires a token and the hello carried none or a wrong one."""


class ProtocolMismatch(Refused, VersionMismatch):
    """The forwarder speaks another protocol version than this package (``server_version``,
    when it said which)."""

    def __init__(self, message, reason, server_version=None):
        super().__init__(message, reason)
        self.server_version = server_version


class ProtocolError(ForwarderError):
    """The peer sent something that is not the protocol: an undecodable header, a payload that
    does not match its header, an unexpected message, or the forwarder's ``Error`` about what
    this client sent. The connection is closed."""


class MessageTooLarge(ProtocolError):
    """A message announced more bytes than ``max_message`` (``connect``'s argument): refused
    before reading it, and the connection is closed. ``length`` and ``limit`` are in bytes."""

    def __init__(self, message, length, limit):
        super().__init__(message)
        self.length = length
        self.limit = limit


class ConnectionLost(ForwarderError, ConnectionError):
    """The connection ended after the welcome (the forwarder stopped, the network failed, the
    forwarder went silent, or ``close()`` was called); every later call that needs the
    connection raises it again."""
