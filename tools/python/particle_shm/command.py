"""Commands to the solver and their bincode encoding (bincode 2, standard configuration).

A command is given as text, like ``shmctl send``: ``"pause"``, ``"resume"``, ``"stop"``,
``"update"``, ``"checkpoint"``, ``"refresh 0.01"`` (simulated seconds), ``"refresh-wall 100"``
(milliseconds); or as ``SetRefresh(sim_seconds=..., wall_ms=...)``. Values are checked against
``particle_shm.limits`` (the Rust ``Command::validate``) before anything is sent.
"""

import numbers
import struct
from collections import namedtuple

from . import limits
from .errors import InvalidCommand

SetRefresh = namedtuple("SetRefresh", "sim_seconds wall_ms", defaults=(None, None))
SetRefresh.__doc__ = "Publication interval: simulated seconds and/or wall-clock milliseconds."

Outcome = namedtuple("Outcome", "done message")
Outcome.__doc__ = "The solver's answer: done (True) or rejected (False), and its text."

_SIMPLE = {"update": 1, "update-now": 1, "pause": 2, "resume": 3, "stop": 4, "checkpoint": 5}


def varint(n):
    """bincode's unsigned varint: < 251 in one byte, else 251/252/253 + u16/u32/u64 LE."""
    if n < 0:
        raise ValueError("varint of a negative number")
    if n < 251:
        return bytes([n])
    if n < 2**16:
        return b"\xfb" + struct.pack("<H", n)
    if n < 2**32:
        return b"\xfc" + struct.pack("<I", n)
    if n < 2**64:
        return b"\xfd" + struct.pack("<Q", n)
    raise ValueError("varint beyond u64")


def read_varint(buf, at):
    """Decodes a varint at ``at``; returns (value, next offset)."""
    b = buf[at]
    if b < 251:
        return b, at + 1
    size, fmt = {251: (2, "<H"), 252: (4, "<I"), 253: (8, "<Q")}.get(b, (None, None))
    if size is None or at + 1 + size > len(buf):
        raise ValueError(f"bad varint marker {b}")
    return struct.unpack_from(fmt, buf, at + 1)[0], at + 1 + size


def _number(words, what):
    """Command.parse's ``num``: the word after ``what`` as an f64, as Rust's ``str::parse`` reads
    it (Python's float() also takes ``1_000``, which Rust refuses)."""
    if len(words) < 2:
        raise InvalidCommand(f"invalid command: `{what}` needs a value")
    w = words[1]
    try:
        if "_" in w:
            raise ValueError
        return float(w)
    except ValueError:
        raise InvalidCommand(f'invalid command: `{what}` expects a number, got "{w}"') from None


def parse(text):
    """Parses the command-line form into a command value (str name or SetRefresh), as
    ``Command::parse`` in shm-protocol/src/command.rs does, with the same limits and messages.
    Raises InvalidCommand (a ValueError)."""
    if not isinstance(text, str):
        raise InvalidCommand(
            f"invalid command: a command is text like 'pause' or a SetRefresh, got {text!r}"
        )
    words = text.split()
    if not words:
        raise InvalidCommand("invalid command: no command given")
    head = words[0]
    if head in _SIMPLE:
        cmd, expected = head, 1
    elif head == "refresh":
        cmd, expected = _validated(SetRefresh(sim_seconds=_number(words, head))), 2
    elif head == "refresh-wall":
        ms = _number(words, head)
        try:
            cmd = SetRefresh(wall_ms=limits.parse_wall_interval_ms("refresh-wall", ms))
        except ValueError as e:
            raise InvalidCommand(f"invalid command: {e}") from None
        expected = 2
    else:
        raise InvalidCommand(
            f'invalid command: unknown command "{head}"; known: pause, resume, stop, update, '
            "checkpoint, refresh SECONDS, refresh-wall MS"
        )
    if len(words) > expected:
        raise InvalidCommand(f'invalid command: unexpected extra words after "{head}"')
    return cmd


def _validated(cmd):
    """``Command::validate``: a SetRefresh carries at least one interval, each within
    ``particle_shm.limits``. Returns the command with ``sim_seconds`` as float and ``wall_ms`` as
    int."""
    s, ms = cmd.sim_seconds, cmd.wall_ms
    if s is None and ms is None:
        raise InvalidCommand(
            "invalid command: refresh: give a simulated interval, a wall-clock interval or both"
        )
    try:
        if s is not None:
            if isinstance(s, bool) or not isinstance(s, numbers.Real):
                raise ValueError(f"refresh must be a number of simulated seconds, got {s!r}")
            s = limits.check_sim_interval("refresh", s)
        if ms is not None:
            if isinstance(ms, bool) or not isinstance(ms, numbers.Real):
                raise ValueError(
                    f"refresh-wall must be a whole number of milliseconds (0 turns it off), got {ms!r}"
                )
            if isinstance(ms, numbers.Integral):
                ms = limits.check_wall_interval_ms("refresh-wall", int(ms))
            else:
                ms = limits.parse_wall_interval_ms("refresh-wall", ms)
    except ValueError as e:
        raise InvalidCommand(f"invalid command: {e}") from None
    return SetRefresh(sim_seconds=s, wall_ms=ms)


def encode(command):
    """bincode bytes of a command (text or SetRefresh), validated first (InvalidCommand)."""
    if isinstance(command, SetRefresh):
        command = _validated(command)
    else:
        command = parse(command)
    if isinstance(command, SetRefresh):
        out = bytearray(varint(0))
        if command.sim_seconds is None:
            out += b"\x00"
        else:
            out += b"\x01" + struct.pack("<d", command.sim_seconds)
        if command.wall_ms is None:
            out += b"\x00"
        else:
            out += b"\x01" + varint(command.wall_ms)
        return bytes(out)
    return varint(_SIMPLE[command])


def decode_outcome(buf):
    """Decodes a CommandOutcome: 0 Done(String), 1 Rejected(String)."""
    variant, at = read_varint(buf, 0)
    if variant not in (0, 1):
        raise ValueError(f"unknown outcome variant {variant}")
    n, at = read_varint(buf, at)
    if at + n > len(buf):
        raise ValueError("outcome text runs past its record")
    return Outcome(variant == 0, bytes(buf[at : at + n]).decode("utf-8", "replace"))
