"""Sending a command and waiting for its acknowledgement: the client side of
shm-protocol/src/command.rs (``submit``, ``wait_ack``) and LAYOUT.md "Commands".

A sender takes the robust mutex, fills a free record, stores ``deadline_mono_ns`` = now + its
timeout, marks the record Pending, bumps ``command_futex``, then waits on ``ack_futex`` (under a
lease on ``ack_waiters``) for its own Acked record, reads the answer and frees the record.

Giving up: a Rust sender withdraws its record by compare-and-swap; Python has no atomic
compare-and-swap on shared memory, so it relies on the deadline instead: a solver that takes
the record after the deadline drops it unapplied and frees it, and an answer nobody read is
reclaimed RECLAIM_GRACE_NS after the deadline.
"""

import ctypes
import itertools
import os
import time

from . import _sys, command as _cmd, layout as L, limits
from .errors import (
    CommandError,
    CommandTimeout,
    InvalidArgument,
    SolverGone,
    TableFull,
)

# command.rs ABANDONED_AFTER: an Acked record without a deadline (older senders) is reclaimed
# this long after its acknowledgement [ns].
ABANDONED_AFTER_NS = 10 * 10**9
# command.rs RECLAIM_GRACE: an Acked record with a deadline is reclaimed this long after it [ns].
RECLAIM_GRACE_NS = 2 * 10**9
# command.rs LOCK_TIMEOUT: how long a sender waits for the command mutex [s].
LOCK_TIMEOUT = 2.0
# Shortest timeout a sender may give [s]: less leaves the solver no time to take the command.
MIN_TIMEOUT = 1e-3
# How often the wait for an answer checks that the solver is alive [s] (command.rs: 100 ms).
LIVENESS_POLL = 0.1
U64_MAX = 2**64 - 1

_request_ids = itertools.count(1)


def send(seg, command, timeout):
    """Segment.send: validate, submit, wait for the answer (see the module docstring)."""
    payload = _cmd.encode(command)
    try:
        timeout = limits.wall_duration("timeout", timeout, MIN_TIMEOUT)
    except ValueError as e:
        raise InvalidArgument(f"send: {e}") from None
    if not seg.writable:
        raise CommandError(
            f"segment {seg.name!r} is open read-only (it belongs to uid {seg.owner_uid}, whose "
            "permissions give this user no write access): cannot send commands"
        )
    st = seg.status()
    if not st.alive:
        raise SolverGone(
            f"the solver (pid {st.owner_pid}) of segment {seg.name!r} is gone; nobody will answer"
        )
    client, request = os.getpid(), next(_request_ids)
    record, deadline_ns = submit(seg, payload, client, request, int(timeout * 1e9))
    return wait_ack(seg, record, client, request, deadline_ns, _describe(command), timeout)


def _describe(command):
    return repr(command) if isinstance(command, str) else str(command)


def _record(seg, i):
    return seg._struct(L.CommandRecord, seg.plan["commands_offset"] + i * ctypes.sizeof(L.CommandRecord))


def reclaimable(r, now_ns):
    """command.rs ``reclaimable``: an Acked record whose sender no longer waits."""
    if r.state != L.ACKED:
        return False
    if r.deadline_mono_ns != 0:
        return now_ns > r.deadline_mono_ns + RECLAIM_GRACE_NS
    return now_ns - r.ack_mono_ns > ABANDONED_AFTER_NS


def submit(seg, payload, client, request, answer_within_ns):
    """Writes ``payload`` into a free record under the mutex, with the deadline now +
    ``answer_within_ns`` (tests pass a negative value for a deadline already past). Returns
    (record, deadline_ns)."""
    h, count = seg.header, seg.capacities.command_records
    seg.check_intact()
    mutex = _sys.RobustMutex(seg._addr("command_mutex"))
    try:
        mutex.lock(LOCK_TIMEOUT)
    except TimeoutError:
        raise CommandTimeout(
            f"segment {seg.name!r}: timed out after {LOCK_TIMEOUT:g} s waiting for the command "
            "mutex (another client holds it)"
        ) from None
    except OSError as e:
        raise CommandError(f"segment {seg.name!r}: command mutex: {e.strerror}") from None
    # A dead previous holder left nothing half-done: a record becomes pending only by the
    # final store below.
    try:
        seg.check_intact()
        now = _sys.monotonic_ns()
        pick = next((i for i in range(count) if _record(seg, i).state == L.FREE), None)
        if pick is None:
            pick = next((i for i in range(count) if reclaimable(_record(seg, i), now)), None)
        if pick is None:
            raise _table_full(seg, now)
        r = _record(seg, pick)
        submit_seq = h.command_submit_seq + 1
        deadline = min(max(now + answer_within_ns, 1), U64_MAX)
        r.client_id = client
        r.request_id = request
        r.submit_seq = submit_seq
        r.submit_mono_ns = now
        ctypes.memmove(ctypes.addressof(r.request), payload, len(payload))
        r.request_len = len(payload)
        r.ack_len = 0
        r.deadline_mono_ns = deadline
        r.state = L.PENDING
        h.command_submit_seq = submit_seq
    finally:
        mutex.unlock()
    if not _sys.bump_and_wake(seg._addr("command_futex")):
        h.command_futex = (h.command_futex + 1) & 0xFFFFFFFF  # polling solvers still see it
    return r, deadline


def _table_full(seg, now_ns):
    """command.rs ``table_full``: why no record is free."""
    count = seg.capacities.command_records
    states = [_record(seg, i).state for i in range(count)]
    waiting = sum(s in (L.PENDING, L.TAKEN) for s in states)
    answered = sum(s == L.ACKED for s in states)
    idle_s = max(0, now_ns - seg.header.heartbeat_mono_ns) * 1e-9
    why = ""
    if waiting > 0 and idle_s > 2.0:
        why = f" (the solver has not stepped for {idle_s:.0f} s: paused, stopped or stuck)"
    return TableFull(
        f"segment {seg.name!r}: the command table is full: of {count} records, {waiting} wait "
        f"for the solver and {answered} hold answers their senders have not read yet{why}; try "
        "again shortly"
    )


def wait_ack(seg, r, client, request, deadline_ns, what, timeout):
    """Waits until ``r`` is Acked for (client, request) or the deadline passes; frees the record
    when its answer is read."""
    h = seg.header
    next_check = time.monotonic() + LIVENESS_POLL
    word = seg._addr("ack_futex")
    while True:
        seg.check_intact()
        h.ack_waiters = _sys.lease_value()
        seen = h.ack_futex
        if r.state == L.ACKED and r.client_id == client and r.request_id == request:
            raw = bytes(r.ack[: min(r.ack_len, L.COMMAND_PAYLOAD)])
            r.state = L.FREE
            try:
                return _cmd.decode_outcome(raw)
            except (ValueError, IndexError) as e:
                raise CommandError(
                    f"segment {seg.name!r}: corrupt acknowledgement of {what}: {e}"
                ) from None
        now_ns = _sys.monotonic_ns()
        if now_ns >= deadline_ns:
            raise CommandTimeout(
                f"segment {seg.name!r}: no acknowledgement of {what} within {timeout:g} s (the "
                "solver may be busy in a long step or stopped); the command was not applied "
                "unless the solver took it before the deadline"
            )
        now = time.monotonic()
        if now >= next_check:
            next_check = now + LIVENESS_POLL
            st = seg.status()
            if not st.alive:
                raise SolverGone(
                    f"the solver (pid {st.owner_pid}) of segment {seg.name!r} is gone; nobody "
                    f"will answer {what}"
                )
        pause = min((deadline_ns - now_ns) * 1e-9, next_check - now)
        if not _sys.futex_wait(word, seen, pause):
            time.sleep(min(pause, 1e-3))
