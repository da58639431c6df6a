"""The connection under ``RemoteSegment`` (remote.py): the arguments of the hello, opening and
the handshake, reading messages, and the reader thread that keeps what arrived.

A message is read as: its length (checked against the limit before anything else), the first
HEAD_PREFIX bytes, whose header is decoded first, then the payload straight into a 64-byte
aligned buffer, whose arrays are handed out as read-only views (_wire.py).
"""

import math
import numbers
import os
import re
import socket
import struct
import threading
import time

import numpy as np

from . import _wire, layout as L
from ._bincode import DecodeError, Short
from .errors import (
    ConnectFailed,
    ConnectionLost,
    ForwarderError,
    ForwarderTimeout,
    InvalidArgument,
    MessageTooLarge,
    ProtocolError,
    ProtocolMismatch,
    Refused,
    TokenRejected,
)
from .segment import Species, Static

# The forwarder sends its status at least every second; this long without any message means
# the connection is gone [s].
SILENCE_TIMEOUT = 15.0
# Bytes read before the rest of a message: enough for any frame header, so the payload can be
# received straight into a 64-byte aligned buffer.
HEAD_PREFIX = 512
# Largest first message accepted: a welcome or a refusal is a few hundred bytes, so a bigger
# length means the peer is not a forwarder (an HTTP server's "HTTP" reads as 1.3 GB).
MAX_WELCOME = _wire.MAX_CLIENT_MESSAGE
# Static sections kept per connection, by (epoch, generation), for frames still held.
STATICS_KEPT = 4

FIELD_BITS = {name: bit for bit, (name, _, _) in L.FIELDS.items()}
_PARTICLE_ID_BIT = FIELD_BITS["particle_ids"]


# ---- the hello -----------------------------------------------------------------------------


def split_address(address):
    if not isinstance(address, str):
        raise InvalidArgument(f"connect: the address is a 'host:port' string, got {address!r}")
    host, sep, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise InvalidArgument(
            f"connect: forwarder address {address!r} is not HOST:PORT (e.g. 127.0.0.1:7788, [::1]:7788)"
        )
    return host, int(port)


def token_arg(token):
    if token is None:
        token = os.environ.get("PARTICLE_SHM_TOKEN", "")
    if not isinstance(token, str):
        raise InvalidArgument(f"connect: the token is a str, got {type(token).__name__}")
    if len(token.encode("utf-8")) > _wire.MAX_TOKEN_LEN:
        raise InvalidArgument(f"connect: the token is longer than {_wire.MAX_TOKEN_LEN} bytes")
    return token


def field_mask(fields):
    if isinstance(fields, numbers.Integral) and not isinstance(fields, bool):
        mask = int(fields)
        if mask < 0 or mask & ~L.ALL_FIELDS_MASK:
            raise InvalidArgument(f"connect: field mask {mask:#x} names unknown fields (all: {L.ALL_FIELDS_MASK:#x})")
    else:
        if isinstance(fields, str):
            fields = (fields,)
        mask = 0
        try:
            names = list(fields)
        except TypeError:
            names = [fields]
        for name in names:
            if name == "all":
                mask |= L.ALL_FIELDS_MASK
            elif name in FIELD_BITS:
                mask |= 1 << FIELD_BITS[name]
            else:
                raise InvalidArgument(
                    f"connect: unknown field {name!r}; known: {', '.join(FIELD_BITS)}, or 'all'"
                )
    return mask | 1 << _PARTICLE_ID_BIT


def rate_arg(hz):
    """``max_rate_hz`` as the f32 the forwarder reads, checked as it checks it (values.rs)."""
    if isinstance(hz, bool) or not isinstance(hz, numbers.Real):
        raise InvalidArgument(f"connect: max_rate_hz must be a number, got {hz!r}")
    try:
        as_f32 = struct.unpack("<f", struct.pack("<f", float(hz)))[0]
    except OverflowError:
        as_f32 = math.inf
    if as_f32 != 0.0 and not (math.isfinite(as_f32) and as_f32 >= _wire.MIN_RATE_HZ):
        raise InvalidArgument(
            f"connect: max_rate_hz must be 0 (no limit) or a rate of at least 1/86400 Hz (one "
            f"frame a day), finite, got {hz!r}"
        )
    return as_f32


def open_socket(host, port, address, timeout):
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.timeout:
        raise ForwarderTimeout(f"connecting to forwarder {address} timed out after {timeout:g} s") from None
    except socket.gaierror as e:
        raise ConnectFailed(f"cannot resolve the forwarder's host {host!r}: {e.strerror}") from None
    except ConnectionRefusedError:
        raise ConnectFailed(
            f"cannot connect to forwarder {address}: connection refused (is a forwarder listening "
            "there? `forwarder --attach NAME --listen ADDR:PORT`)"
        ) from None
    except OSError as e:
        raise ConnectFailed(f"cannot connect to forwarder {address}: {e.strerror or e}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def send_hello(sock, data, deadline, address):
    try:
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        sock.sendall(data)
    except socket.timeout:
        raise ForwarderTimeout(f"forwarder {address} did not take the hello in time") from None
    except OSError as e:
        raise ConnectFailed(f"sending the hello to {address} failed: {e.strerror or e}") from None


def handshake(sock, deadline, address):
    """Reads the answer to the hello: the welcome's content, or the refusal raised."""
    try:
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        variant, content, _, _ = read_message(sock, MAX_WELCOME, address)
    except socket.timeout:
        raise ForwarderTimeout(f"forwarder {address} did not answer the hello in time") from None
    except _Eof as e:
        raise ConnectFailed(
            f"{address} closed the connection without answering the hello{e.detail()} (not a "
            "forwarder, or one with too many connections in their handshake)"
        ) from None
    except MessageTooLarge as e:
        raise ProtocolError(
            f"{address} did not answer like a forwarder: its answer announces {e.length} bytes, "
            f"a welcome is a few hundred"
        ) from None
    except (DecodeError, _wire.PayloadError) as e:
        raise ProtocolError(f"{address} did not answer like a forwarder: {e}") from None
    except OSError as e:
        raise ConnectFailed(f"reading the answer of {address} failed: {e.strerror or e}") from None
    if variant == "Refused":
        raise _refusal(address, content["reason"])
    if variant == "Error":
        raise ProtocolError(f"forwarder {address} refused the hello: {content['reason']}")
    if variant != "Welcome":
        raise ProtocolError(f"{address} did not answer like a forwarder: a {variant} before the welcome")
    if content["version"] != _wire.PROTOCOL_VERSION:
        raise ProtocolMismatch(
            f"forwarder {address} speaks protocol version {content['version']}, this package "
            f"version {_wire.PROTOCOL_VERSION}: use the particle_shm of the forwarder's build",
            f"welcome of version {content['version']}",
            content["version"],
        )
    return content


def _refusal(address, reason):
    """The exception for a ``Refused`` answer (auth.rs ``check_hello`` words its reasons)."""
    message = f"forwarder {address} refused the connection: {reason}"
    if reason == "wrong token" or "requires a token" in reason:
        return TokenRejected(message + " (pass token=... or set PARTICLE_SHM_TOKEN)", reason)
    m = re.search(r"protocol version (\d+), this forwarder speaks (\d+)", reason)
    if m:
        return ProtocolMismatch(
            message + f"; this package speaks version {_wire.PROTOCOL_VERSION}", reason, int(m.group(2))
        )
    return Refused(message, reason)


# ---- messages -------------------------------------------------------------------------------


class _Eof(Exception):
    """The peer closed the connection; ``got`` of ``want`` bytes of a message had arrived."""

    def __init__(self, got=0, want=0):
        super().__init__(got, want)
        self.got, self.want = got, want

    def detail(self):
        if self.got == 0 and self.want == 4:
            return ""
        return f" in the middle of a message ({self.got} of {self.want} bytes)"


def _recv_into(sock, view, done=0, want=None):
    """Fills ``view``; ``done`` and ``want`` put the bytes in context for _Eof."""
    got, n = 0, len(view)
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            total = want if want is not None else n
            raise _Eof(done + got, total)
        got += k


def _aligned(n):
    """A writable uint8 array of ``n`` bytes starting on a 64-byte boundary (the payload's
    arrays are then aligned as a segment's are)."""
    raw = np.empty(n + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start : start + n]


def read_message(sock, limit, address):
    """Reads one message; returns ``(variant, content, payload or None, body length)``.

    The length is checked against ``limit`` before anything else is read. The first bytes are
    decoded first, so a frame's payload is received straight into an aligned buffer."""
    prefix = bytearray(4)
    _recv_into(sock, memoryview(prefix), 0, 4)
    (size,) = struct.unpack("<I", prefix)
    if size == 0:
        raise ProtocolError(f"forwarder {address} sent an empty message (length 0)")
    if size > limit:
        raise MessageTooLarge(
            f"forwarder {address} sent a message of {size} bytes, over the limit of {limit} "
            "(connect(..., max_message=N) raises it; fewer fields or quantized16 positions shrink frames)",
            size,
            limit,
        )
    head = bytearray(min(size, HEAD_PREFIX))
    _recv_into(sock, memoryview(head), 4, size + 4)
    try:
        variant, content, used = _wire.decode_header(head)
        body = None
    except Short:
        if len(head) == size:
            raise
        body = bytearray(size)
        body[: len(head)] = head
        _recv_into(sock, memoryview(body)[len(head) :], 4 + len(head), size + 4)
        variant, content, used = _wire.decode_header(body)
    if variant not in ("Frame", "Static"):
        if used != size:
            raise _wire.PayloadError(f"{size - used} trailing bytes after a {variant} message")
        return variant, content, None, size
    payload = _aligned(size - used)
    if body is not None:
        payload[:] = np.frombuffer(body, dtype=np.uint8, offset=used)
    else:
        have = len(head) - used
        payload[:have] = np.frombuffer(head, dtype=np.uint8, offset=used)
        _recv_into(sock, memoryview(payload)[have:], 4 + len(head), size + 4)
    return variant, content, payload, size


def _static(h, payload):
    ids, species_ids, radii, meshes = _wire.static_arrays(h, payload)
    species = [
        Species(s["name"], s["method"], s["radius"], s["density"], {k: v for k, v in s["params"]})
        for s in h["species"]
    ]
    return Static(
        generation=h["generation"],
        ids=ids,
        species_ids=species_ids,
        radii=radii,
        species=species,
        meshes=meshes,
        config=h["config_toml"],
        world_min=tuple(h["world_min"]),
        world_max=tuple(h["world_max"]),
        cell_size=h["cell_size"],
    )


class Received:
    """A decoded frame message: metadata, arrays, and the static data of its generation."""

    __slots__ = ("epoch", "meta", "bodies", "arrays", "static", "stride", "frame_particles")

    def __init__(self, epoch, meta, bodies, arrays, static, stride=1, frame_particles=None):
        self.epoch, self.meta, self.bodies, self.arrays, self.static = epoch, meta, bodies, arrays, static
        self.stride = stride
        self.frame_particles = meta["particle_count"] if frame_particles is None else frame_particles


class Link:
    """The socket, the reader thread and what it received, guarded by ``cond``. The thread holds
    only this object, so an unreferenced RemoteSegment is collected and closes it."""

    def __init__(self, sock, address, segment, max_message):
        self.sock, self.address, self.segment, self.max_message = sock, address, segment, max_message
        self.cond = threading.Condition()
        self.write_lock = threading.Lock()
        self.status, self.status_at = None, 0.0
        self.statics = {}
        self.frame = None
        self.acks = {}
        self.error = None
        self.closing = False
        self.frames = self.bytes = 0
        self.thread = threading.Thread(target=self.run, name=f"particle-shm {address}", daemon=True)

    def start(self):
        self.sock.settimeout(SILENCE_TIMEOUT)
        self.thread.start()

    def run(self):
        try:
            while True:
                variant, content, payload, size = read_message(self.sock, self.max_message, self.address)
                self.handle(variant, content, payload, size)
        except BaseException as e:  # noqa: BLE001 - every end of the thread is reported
            error = self.lost(e)
        with self.cond:
            self.error = error
            self.cond.notify_all()
        try:
            self.sock.close()
        except OSError:
            pass

    def lost(self, e):
        """The exception that later calls raise, for what ended the reading."""
        where = f"forwarder {self.address}"
        if self.closing:
            return ConnectionLost(f"the connection to {where} was closed (close())")
        if isinstance(e, ForwarderError):
            return e
        if isinstance(e, socket.timeout):
            return ConnectionLost(
                f"{where} sent nothing for {SILENCE_TIMEOUT:g} s (it sends its status every second): "
                "connection given up"
            )
        if isinstance(e, _Eof):
            return ConnectionLost(f"{where} closed the connection{e.detail()}")
        if isinstance(e, OSError):
            return ConnectionLost(f"the connection to {where} failed: {e.strerror or e}")
        if isinstance(e, (DecodeError, _wire.PayloadError)):
            return ProtocolError(f"{where} sent an invalid message: {e}")
        return ProtocolError(f"{where}: reading failed: {type(e).__name__}: {e}")

    def handle(self, variant, h, payload, size):
        if variant == "Frame":
            bodies, arrays = _wire.frame_arrays(h, payload)
            with self.cond:
                static = self.statics.get((h["epoch"], h["meta"]["static_generation"]))
                self.frame = Received(
                    h["epoch"], h["meta"], bodies, arrays, static, h["stride"], h["frame_particles"]
                )
                self.frames += 1
                self.bytes += size + 4
                self.cond.notify_all()
        elif variant == "Static":
            st = _static(h, payload)
            with self.cond:
                self.statics[(h["epoch"], h["generation"])] = st
                while len(self.statics) > STATICS_KEPT:
                    del self.statics[next(iter(self.statics))]
                self.cond.notify_all()
        elif variant == "Status":
            with self.cond:
                self.status, self.status_at = h, time.monotonic()
                self.cond.notify_all()
        elif variant == "Ack":
            with self.cond:
                self.acks[h["id"]] = h["outcome"]
                self.cond.notify_all()
        elif variant in ("Error", "Refused"):
            raise ProtocolError(f"forwarder {self.address} says: {h['reason']}")
        else:
            raise ProtocolError(f"forwarder {self.address} sent a second {variant}")

    def wait(self, ready, timeout):
        """Waits (holding ``cond``, re-entrant) until ``ready()``, the connection ends or
        ``timeout`` seconds pass; returns ``ready()``."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not ready():
                left = deadline - time.monotonic()
                if self.error is not None or left <= 0:
                    return False
                self.cond.wait(min(left, 1.0))
            return True

    def raise_if_closed(self):
        if self.error is not None:
            raise self.error.with_traceback(None)

    def write(self, data):
        with self.write_lock:
            with self.cond:
                self.raise_if_closed()
            try:
                self.sock.sendall(data)
            except OSError as e:
                what = "accepted nothing" if isinstance(e, socket.timeout) else (e.strerror or str(e))
                raise ConnectionLost(f"sending to forwarder {self.address} failed: {what}") from None

    def close(self, join=True):
        self.closing = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if join and self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(2.0)
