"""Futex waits and wakes, the robust mutex and liveness, through ctypes on libc.

* Waiting: the protocol's futex condition variable (LAYOUT.md "Waiting for a newer frame",
  shm-protocol/src/notify.rs). A waiter takes a *lease*: right before each ``FUTEX_WAIT`` it
  stores ``lease_value()`` (CLOCK_MONOTONIC ms + LEASE_MS, truncated to u32) in the header word
  ``frame_waiters``/``ack_waiters`` with a plain store, and sleeps at most SLEEP_SLICE; the writer
  wakes while ``(lease - now_ms)`` as signed 32-bit is > 0. A waiter killed asleep leaves a lease
  that simply expires (the earlier waiter count leaked +1 per such waiter). If the futex system
  call is unavailable (unknown architecture, seccomp), waits fall back to polling every
  millisecond, which is always correct, only slower to wake.
* Submitting a command bumps ``command_futex`` atomically and wakes the solver in one
  ``FUTEX_WAKE_OP`` call (``FUTEX_OP_ADD``): Python has no atomic read-modify-write on shared
  memory, the kernel does it.
* Memory ordering: fields are read with single aligned loads (ctypes); x86-64 orders loads and
  stores as the protocol's acquire/release require, and the futex system call orders the lease
  store before the kernel's check of the word. On aarch64 the reader relies on the barriers the
  interpreter executes between two Python-level loads (documented limitation).
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
# notify.rs SLEEP_SLICE and LEASE_MS: the longest single futex sleep [s] and a waiter's lease [ms].
SLEEP_SLICE = 0.2
LEASE_MS = 300
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


def bump_and_wake(addr):
    """Atomically increments the futex word at ``addr`` and wakes every sleeper on it."""
    op = (FUTEX_OP_ADD << 28) | (1 << 12)
    r, _ = _futex(addr, FUTEX_WAKE_OP, INT_MAX, ctypes.c_void_p(0), addr, op)
    return r >= 0


def futex_wait(addr, expected, seconds):
    """Sleeps while the u32 at ``addr`` equals ``expected``, at most ``seconds`` and never more
    than SLEEP_SLICE (the lease stored before it must outlast the sleep). Returns False when the
    system call is unusable (the caller then polls)."""
    seconds = min(max(0.0, seconds), SLEEP_SLICE)
    ts = _Timespec(int(seconds), int((seconds - int(seconds)) * 1e9))
    r, err = _futex(addr, FUTEX_WAIT, expected, ctypes.byref(ts), 0, 0)
    return r >= 0 or err in (errno.EAGAIN, errno.ETIMEDOUT, errno.EINTR)


def monotonic_ns():
    """CLOCK_MONOTONIC in ns: the clock of heartbeat_mono_ns and deadline_mono_ns (system-wide)."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def now_ms():
    """CLOCK_MONOTONIC in ms truncated to u32 (wraps after 49 days), the unit of leases."""
    return (monotonic_ns() // 1_000_000) & 0xFFFFFFFF


def lease_value():
    """What a waiter stores in a lease word right before each futex wait: now + LEASE_MS."""
    return (now_ms() + LEASE_MS) & 0xFFFFFFFF


def lease_active(lease):
    """notify.rs ``lease_active``: the lease ``lease`` has not run out ((lease - now) as i32 > 0)."""
    d = (lease - now_ms()) & 0xFFFFFFFF
    return 0 < d < 2**31


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
    """The process recorded as (pid, start_ticks) still runs (pid reuse detected). A start time
    of 0 never matches (as sys.rs ``process_alive``): every owner records its real start time,
    so 0 means a corrupt header, and accepting it made a segment claiming pid 1 alive forever."""
    if pid == 0 or start_ticks == 0:
        return False
    return process_start_ticks(pid) == start_ticks


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
                    raise OSError(rc2, f"pthread_mutex_consistent failed: {os.strerror(rc2)}")
                return True
            if rc != errno.EBUSY:
                raise OSError(rc, f"pthread_mutex_trylock failed: {os.strerror(rc)}")
            if time.monotonic() >= deadline:
                raise TimeoutError
            time.sleep(pause)
            pause = min(pause * 2, 2e-3)

    def unlock(self):
        _unlock(self.addr)
