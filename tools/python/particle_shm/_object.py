"""The shared-memory object behind a segment: opening /dev/shm/NAME as the Rust tools do, and
watching its size afterwards.

Opening mirrors shm-protocol/src/segment.rs (``check_object`` + ``shm_open``, which glibc calls
with ``O_NOFOLLOW``): what sits at the name is looked at first (``lstat``), a symbolic link is
never followed (``O_NOFOLLOW``), and whatever was opened must be a regular file (``fstat`` on the
descriptor, so a swap between the two checks is caught too). Every failure becomes one of the
package's exceptions naming the segment and the cause, like the Rust ``AttachError`` messages.

Truncation: another process may ``ftruncate`` the object while it is mapped; touching a page past
the new end raises SIGBUS, which kills a Python process (the Rust tools catch it, see
shm-protocol/src/guard.rs; Python cannot return from a SIGBUS handler). So the descriptor stays
open and ``check_intact()`` compares the object's size with the mapped size before the reader
touches the mapping, raising SegmentTruncated instead. This narrows the window to the time
between the check and the access; it cannot close it.
"""

import errno
import os
import stat

from .errors import (
    NotAnObject,
    PermissionDenied,
    SegmentNotFound,
    SegmentOSError,
    SegmentTruncated,
)

SHM_DIR = "/dev/shm"

_SYMLINK = "a symbolic link (segments are never opened through links)"
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def path_of(name):
    return os.path.join(SHM_DIR, name)


def _kind(mode):
    """What a non-regular file is, in the words of segment.rs ``check_object``."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return _SYMLINK
    return "a special file"


def _not_an_object(name, kind):
    return NotAnObject(f"/dev/shm/{name} is {kind}, not a shared-memory segment", kind)


def _owner_uid(name):
    try:
        return os.lstat(path_of(name)).st_uid
    except OSError:
        return None


def _permission_denied(name):
    uid = _owner_uid(name)
    whose = f" (it belongs to uid {uid}; you are uid {os.geteuid()})" if uid is not None else ""
    return PermissionDenied(
        f"permission denied opening segment {name!r}{whose}: segments are owner-only unless "
        "created with group access (solver --group-access), which lets the owner's group in",
        uid,
    )


def _os_error(name, e, what):
    return SegmentOSError(e.errno, f"segment {name!r}: {what} failed: {os.strerror(e.errno)}")


def _open_error(name, e):
    """The package's exception for a failed open(2) of /dev/shm/NAME."""
    if e.errno == errno.ENOENT:
        return SegmentNotFound(
            f"no segment named {name!r} (is the solver running? `shmctl list` shows segments)"
        )
    if e.errno in (errno.EACCES, errno.EPERM):
        return _permission_denied(name)
    if e.errno == errno.ELOOP:
        return _not_an_object(name, _SYMLINK)
    if e.errno == errno.EISDIR:
        return _not_an_object(name, "a directory")
    if e.errno in (errno.ENXIO, errno.ENODEV):
        return _not_an_object(name, "a special file")
    return _os_error(name, e, f"opening /dev/shm/{name}")


def open_object(name):
    """Opens /dev/shm/NAME for reading and writing, or reading only where writing is refused.
    Returns (fd, writable, stat). Raises the package's exceptions, never a bare OSError."""
    path = path_of(name)
    try:
        st = os.lstat(path)
    except OSError as e:
        raise _open_error(name, e) from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_an_object(name, _kind(st.st_mode))
    try:
        fd, writable = os.open(path, os.O_RDWR | _OPEN_FLAGS), True
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise _open_error(name, e) from None
        try:
            fd, writable = os.open(path, os.O_RDONLY | _OPEN_FLAGS), False
        except OSError as e2:
            raise _open_error(name, e2) from None
    try:
        st = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise _os_error(name, e, "fstat") from None
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _not_an_object(name, _kind(st.st_mode))
    return fd, writable, st


def check_intact(name, fd, expected):
    """Raises SegmentTruncated when the object behind ``fd`` is now shorter than the ``expected``
    bytes that were mapped (reading the mapping past its end would raise SIGBUS)."""
    try:
        size = os.fstat(fd).st_size
    except OSError as e:
        raise _os_error(name, e, "fstat (checking its size)") from None
    if size < expected:
        raise SegmentTruncated(
            f"segment {name!r} was truncated to {size} bytes by another process (expected "
            f"{expected}); its data is gone: attach again once the solver recreated it",
            size,
            expected,
        )
