"""Commands to the solver and their bincode encoding (bincode 2, standard configuration).

A command is given as text, like ``shmctl send``: ``"pause"``, ``"resume"``, ``"stop"``,
``"update"``, ``"checkpoint"``, ``"refresh 0.01"`` (simulated seconds), ``"refresh-wall 100"``
(milliseconds); or as ``SetRefresh(sim_seconds=..., wall_ms=...)``.
"""

import struct
from collections import namedtuple

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


def parse(text):
    """Parses the command-line form into a command value (str name or SetRefresh)."""
    words = text.split()
    if not words:
        raise ValueError("no command given")
    head, rest = words[0], words[1:]
    if head in _SIMPLE:
        if rest:
            raise ValueError(f"unexpected extra words after {head!r}")
        return head
    if head in ("refresh", "refresh-wall") and len(rest) == 1:
        v = float(rest[0])
        if head == "refresh":
            if not v > 0 or v != v or v == float("inf"):
                raise ValueError(f"refresh interval must be > 0 simulated seconds, got {v}")
            return SetRefresh(sim_seconds=v)
        if not v >= 0 or v == float("inf"):
            raise ValueError(f"refresh-wall must be >= 0 ms, got {v}")
        return SetRefresh(wall_ms=int(v))
    raise ValueError(
        f"unknown command {text!r}; known: pause, resume, stop, update, checkpoint, "
        "refresh SECONDS, refresh-wall MS"
    )


def encode(command):
    """bincode bytes of a command (text or SetRefresh)."""
    if isinstance(command, str):
        command = parse(command)
    if isinstance(command, SetRefresh):
        out = bytearray(varint(0))
        if command.sim_seconds is None:
            out += b"\x00"
        else:
            out += b"\x01" + struct.pack("<d", float(command.sim_seconds))
        if command.wall_ms is None:
            out += b"\x00"
        else:
            out += b"\x01" + varint(int(command.wall_ms))
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
