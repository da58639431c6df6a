"""Futex waits, an atomic add, the robust mutex and liveness, through ctypes on libc.

* Waiting: the protocol's futex condition variable (LAYOUT.md "Waiting for a newer frame").
  Python has no atomic read-modify-write on shared memory, so the waiter count
  (``frame_waiters``/``ack_waiters``) is changed with ``FUTEX_WAKE_OP`` and ``FUTEX_OP_ADD``:
  the kernel adds to the word atomically (and wakes nobody: both wake counts are 0). The same
  call bumps and wakes ``command_futex`` after a submission. If the futex system call is
  unavailable (unknown architecture, seccomp), waits fall back to polling every millisecond
  without registering as a waiter, which is always correct, only slower to wake.
* Memory ordering: fields are read with single aligned loads (ctypes); x86-64 orders loads and
  stores as the protocol's acquire/release require. On aarch64 the reader relies on the
  barriers the interpreter executes between two Python-level loads (documented limitation).
"""

import ctypes
import ctypes.util
import errno
import os
import platform
import time

SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98}.get(
    platform.machine().lower()
)
FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAKE_OP = 0, 1, 5
FUTEX_OP_ADD = 1
INT_MAX = 2**31 - 1
EOWNERDEAD = getattr(errno, "EOWNERDEAD", 130)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _pthread_fn(name):
    for lib in (_libc, ctypes.CDLL(ctypes.util.find_library("pthread") or "libpthread.so.0")):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p]
            return fn
    raise OSError(f"{name} not found in libc or libpthread")


_trylock = _pthread_fn("pthread_mutex_trylock")
_consistent = _pthread_fn("pthread_mutex_consistent")
_unlock = _pthread_fn("pthread_mutex_unlock")


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _futex(addr, op, val, timeout_or_val2, uaddr2, val3):
    if SYS_FUTEX is None:
        return -1, errno.ENOSYS
    ctypes.set_errno(0)
    r = _libc.syscall(
        ctypes.c_long(SYS_FUTEX),
        ctypes.c_void_p(addr),
        ctypes.c_int(op),
        ctypes.c_uint32(val & 0xFFFFFFFF),
        timeout_or_val2,
        ctypes.c_void_p(uaddr2),
        ctypes.c_uint32(val3),
    )
    return r, ctypes.get_errno() if r < 0 else 0


def atomic_add_u32(addr, delta):
    """Atomically adds ``delta`` (-2048..2047) to the u32 at ``addr``; False if unsupported."""
    op = (FUTEX_OP_ADD << 28) | ((delta & 0xFFF) << 12)
    r, _ = _futex(addr, FUTEX_WAKE_OP, 0, ctypes.c_void_p(0), addr, op)
    return r >= 0


def bump_and_wake(addr):
    """Atomically increments the futex word at ``addr`` and wakes every sleeper on it."""
    op = (FUTEX_OP_ADD << 28) | (1 << 12)
    r, _ = _futex(addr, FUTEX_WAKE_OP, INT_MAX, ctypes.c_void_p(0), addr, op)
    return r >= 0


def futex_wait(addr, expected, seconds):
    """Sleeps while the u32 at ``addr`` equals ``expected``, at most ``seconds``. Returns False
    when the system call is unusable (the caller then polls)."""
    seconds = max(0.0, seconds)
    ts = _Timespec(int(seconds), int((seconds - int(seconds)) * 1e9))
    r, err = _futex(addr, FUTEX_WAIT, expected, ctypes.byref(ts), 0, 0)
    return r >= 0 or err in (errno.EAGAIN, errno.ETIMEDOUT, errno.EINTR)


def monotonic_ns():
    """CLOCK_MONOTONIC in ns: the clock of heartbeat_mono_ns (system-wide)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def process_start_ticks(pid):
    """Field 22 of /proc/<pid>/stat, or None when the process is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 1 :].split()
    if len(rest) < 20 or rest[0] in ("Z", "X"):
        return None
    try:
        return int(rest[19])
    except ValueError:
        return None


def process_alive(pid, start_ticks):
    """The process recorded as (pid, start_ticks) still runs (pid reuse detected)."""
    if pid == 0:
        return False
    t = process_start_ticks(pid)
    return t is not None and (start_ticks == 0 or t == start_ticks)


class RobustMutex:
    """The header's glibc robust process-shared pthread mutex, at a fixed address."""

    def __init__(self, addr):
        self.addr = ctypes.c_void_p(addr)

    def lock(self, timeout):
        """Takes the mutex within ``timeout`` seconds (trylock with backoff). Returns True when
        the previous holder died holding it (made consistent here), False otherwise; raises
        TimeoutError."""
        deadline = time.monotonic() + timeout
        pause = 50e-6
        while True:
            rc = _trylock(self.addr)
            if rc == 0:
                return False
            if rc == EOWNERDEAD:
                rc2 = _consistent(self.addr)
                if rc2 != 0:
                    raise OSError(rc2, f"pthread_mutex_consistent: {os.strerror(rc2)}")
                return True
            if rc != errno.EBUSY:
                raise OSError(rc, f"pthread_mutex_trylock: {os.strerror(rc)}")
            if time.monotonic() >= deadline:
                raise TimeoutError
            time.sleep(pause)
            pause = min(pause * 2, 2e-3)

    def unlock(self):
        _unlock(self.addr)
