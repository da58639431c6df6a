"""A run seen through a forwarder: ``connect("host:port")`` speaks the forwarder's binary TCP
protocol (tools/forwarder/PROTOCOL.md, version 4) with the standard library's sockets and numpy,
and returns a ``RemoteSegment`` with the API of a local ``Segment``: ``latest(copy=...)``,
``wait_newer(seq, timeout)``, ``status()``, ``newest_seq``, ``static``, ``static_for``,
``send(command, timeout)``; frames are ``Frame`` objects with the same attributes.

Like the Rust client (``forwarder::client::RemoteSource``), a background thread drains the
socket and keeps only the newest frame, so what ``latest()`` returns is never older than the
network makes it, and a client that reads rarely is never disconnected as stalled. Limit the
bandwidth with ``fields`` (only what you need), ``max_rate_hz`` and ``positions="quantized16"``.

Every wait has a deadline: connecting, the welcome and the first status within ``timeout``; a
frame or static data the forwarder announced within ARRIVAL_TIMEOUT; a command's answer within
its timeout plus ACK_MARGIN; and a connection whose forwarder says nothing for
_conn.SILENCE_TIMEOUT (it sends its status every second) is given up. The socket, the handshake
and the reader thread are in _conn.py.
"""

import math
import numbers
import os
import sys
import time

from . import _conn, _wire, command as _cmd, layout as L, limits
from .errors import (
    CommandError,
    CommandTimeout,
    ForwarderTimeout,
    InvalidArgument,
    NoStaticData,
    SolverGone,
    StaticMismatch,
    TableFull,
)
from .frame import Frame
from .segment import Static, Status

# client.rs ARRIVAL_TIMEOUT: how long a read waits for a frame or static data the forwarder
# said it has [s].
ARRIVAL_TIMEOUT = 10.0
# client.rs: a command's answer is awaited for its timeout plus this (the network) [s].
ACK_MARGIN = 2.0
# The forwarder caps a command's timeout at a minute (session.rs MAX_COMMAND_TIMEOUT) [ms].
MAX_COMMAND_TIMEOUT_MS = 60_000
# Shortest timeout a caller may give, as for local commands [s].
MIN_TIMEOUT = 1e-3

def connect(
    address,
    token=None,
    fields=("positions",),
    max_rate_hz=0.0,
    positions="f32",
    timeout=5.0,
    max_message=_wire.DEFAULT_MAX_MESSAGE,
    client=None,
    max_particles=0,
):
    """Connects to the forwarder at ``address`` (``"host:port"``, ``"[::1]:7788"``) and returns
    a ``RemoteSegment``.

    - ``token``: the forwarder's token (``forwarder --token-file``); None reads the environment
      variable PARTICLE_SHM_TOKEN, as the Rust tools do, else sends none.
    - ``fields``: the per-particle arrays to receive, by their ``Frame`` names (``"positions"``,
      ``"velocities"``, ``"angular_velocities"``, ``"forces"``, ``"contact_counts"``,
      ``"densities"``, ``"pressures"``, ``"particle_kinds"``), ``"all"``, or a LAYOUT.md field
      bitmask. ``particle_ids`` is always added: in a run whose particle set changes it is what
      maps each element to its species and radius (4 bytes a particle, sent only by such runs).
    - ``max_rate_hz``: most frames a second (0: as many as this client reads).
    - ``positions``: ``"f32"`` (exact) or ``"quantized16"`` (half the bytes; error at most
      half a step of the world box / 65535).
    - ``timeout``: seconds for connecting, the welcome and the first status.
    - ``max_message``: largest message accepted, in bytes (1 GiB: every field of ~18 M
      particles); a larger one ends the connection with MessageTooLarge.
    - ``client``: the name the forwarder logs.
    - ``max_particles``: most particles per frame (0: all). A larger frame arrives subsampled
      by the forwarder: every k-th particle, ``k = ceil(N / max_particles)``, each named by its
      id (``particle_ids``; ``species`` and ``radii`` follow them). The frame's ``stride`` is k
      and ``frame_particle_count`` the whole frame's N. For a quick look at a 100 M-particle
      run from a laptop.

    Raises ConnectFailed, ForwarderTimeout, TokenRejected, ProtocolMismatch, Refused or
    ProtocolError (all ForwarderError), or InvalidArgument for an argument out of range.
    """
    return RemoteSegment(
        address, token, fields, max_rate_hz, positions, timeout, max_message, client, max_particles
    )


class RemoteFrame(Frame):
    """A frame received from a forwarder: the attributes of a local ``Frame`` (``seq``,
    ``step``, ``sim_time``, ``positions``, ``particle_ids``, ``species``, ``radii``,
    ``removed_count``...) plus ``epoch`` (the forwarder's count of solver restarts; sequence
    numbers restart with it), ``stride`` (1, or k when the forwarder sent every k-th particle:
    see ``connect(max_particles=...)``) and ``frame_particle_count`` (the particles of the
    whole frame; ``particle_count`` is what this one holds). Only the subscribed fields are
    present (None otherwise).

    The arrays belong to this client alone, so a frame stays valid (``valid()`` is always
    True). ``copy=False``: read-only arrays, shared by every ``latest()`` of the same frame;
    ``copy=True``: writable copies."""

    def __init__(self, seg, received, copy):
        self._seg = seg
        self._static_at_arrival = received.static
        self.epoch = received.epoch
        self.stride = received.stride
        self.frame_particle_count = received.frame_particles
        meta = received.meta
        self.seq = meta["seq"]
        self.slot = meta["slot"]
        for k in Frame.META[1:]:
            setattr(self, k, meta[k])
        self.owned = bool(copy)
        for name, _, _ in L.FIELDS.values():
            a = received.arrays.get(name)
            if a is not None and copy:
                a = a.copy()
            setattr(self, "_frame_ids" if name == "particle_ids" else name, a)
        self.bodies = received.bodies.copy() if copy else received.bodies
        self._species = self._radii = None

    @property
    def static(self):
        """The static data this frame belongs to (its epoch and ``static_generation``)."""
        st = self._static_at_arrival
        if st is not None:
            return st
        return self._seg._static_of(self.epoch, self.static_generation, self.seq)

    def valid(self):
        """Always True: nobody else writes a received frame's arrays."""
        return True

    def _where(self):
        return f"{self._seg._label()}: frame {self.seq}"


class RemoteSegment:
    """A run seen through a forwarder (see ``connect``). ``name`` is the segment the forwarder
    follows, ``address`` the forwarder, ``server`` its name and version."""

    def __init__(
        self, address, token, fields, max_rate_hz, positions, timeout, max_message, client, max_particles=0
    ):
        if isinstance(max_particles, bool) or not isinstance(max_particles, numbers.Integral) or not (
            0 <= max_particles <= 2**64 - 1
        ):
            raise InvalidArgument(
                f"connect: max_particles must be 0 (every particle) or a positive integer, got {max_particles!r}"
            )
        host, port = _conn.split_address(address)
        token = _conn.token_arg(token)
        mask = _conn.field_mask(fields)
        rate = _conn.rate_arg(max_rate_hz)
        if positions not in ("f32", "quantized16"):
            raise InvalidArgument(f"connect: positions must be 'f32' or 'quantized16', got {positions!r}")
        try:
            timeout = limits.wall_duration("timeout", timeout, MIN_TIMEOUT)
        except ValueError as e:
            raise InvalidArgument(f"connect: {e}") from None
        if isinstance(max_message, bool) or not isinstance(max_message, numbers.Integral) or not (
            1024 <= max_message <= 2**32 - 1
        ):
            raise InvalidArgument(f"connect: max_message must be 1024 to 2^32-1 bytes, got {max_message!r}")
        if client is None:
            client = f"python {os.path.basename(sys.argv[0]) or 'interpreter'}"
        self.address = address
        self.name = None
        self._link = None
        self._read_epoch = 0
        self._next_id = 1
        deadline = time.monotonic() + timeout
        sock = _conn.open_socket(host, port, address, timeout)
        try:
            sub = _wire.subscription(mask, positions == "quantized16", rate, max_particles=int(max_particles))
            _conn.send_hello(sock, _wire.hello(token, str(client)[:64], sub), deadline, address)
            welcome = _conn.handshake(sock, deadline, address)
        except BaseException:
            sock.close()
            raise
        self.name = welcome["segment"]
        self.server = welcome["server"]
        self._link = _conn.Link(sock, address, self.name, int(max_message))
        self._link.start()
        if not self._link.wait(lambda: self._link.status is not None, deadline - time.monotonic()):
            self._link.raise_if_closed()
            self.close()
            raise ForwarderTimeout(f"forwarder {address} sent no status within {timeout:g} s of its welcome")
        self._read_epoch = self._link.status["epoch"]

    # ---- lifetime ---------------------------------------------------------------------------

    def close(self):
        """Closes the connection (later calls raise ConnectionLost)."""
        if self._link is not None:
            self._link.close()

    def __del__(self):
        link = getattr(self, "_link", None)
        if link is not None:
            link.close(join=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<particle_shm.RemoteSegment {self.name!r} via {self.address}>"

    def _label(self):
        return f"forwarder {self.address} (segment {self.name!r})"

    def check_intact(self):
        """Raises the connection's error (ConnectionLost...) once it has ended, as
        ``Segment.check_intact`` raises once the segment was truncated."""
        self._link.raise_if_closed()

    @property
    def epoch(self):
        """The forwarder's epoch: incremented when it attaches to a new solver of the name."""
        with self._link.cond:
            return self._link.status["epoch"]

    @property
    def received(self):
        """(frames, bytes) received so far."""
        with self._link.cond:
            return self._link.frames, self._link.bytes

    # ---- status -----------------------------------------------------------------------------

    def status(self):
        """The solver's status as the forwarder last reported it (at least every second), with
        the time since then added to ``heartbeat_age_s``. A forwarder without a segment reports
        ``Status('unknown', False, 0, inf, 0, True)``, what a local reader of a vanished segment
        would conclude. Raises ConnectionLost once the connection is gone."""
        link = self._link
        with link.cond:
            link.raise_if_closed()
            return _status(link.status, time.monotonic() - link.status_at)

    @property
    def newest_seq(self):
        """Sequence number of the newest frame the forwarder has read (or this client has
        received, when that is newer than its last status)."""
        link = self._link
        with link.cond:
            link.raise_if_closed()
            ws, rec = link.status, link.frame
            seq = ws["frame_seq"]
            if rec is not None and rec.epoch == ws["epoch"]:
                seq = max(seq, rec.meta["seq"])
            return seq

    # ---- static data ------------------------------------------------------------------------

    @property
    def static(self):
        """The static data (re-read on each access; cache it)."""
        return self.read_static()

    def read_static(self):
        """The static data of the forwarder's current generation, as ``Segment.read_static``
        returns it (owned arrays). Raises NoStaticData when the solver has published none."""
        st = self._current_static()
        return Static(
            generation=st.generation,
            ids=st.ids.copy(),
            species_ids=st.species_ids.copy(),
            radii=st.radii.copy(),
            species=list(st.species),
            meshes=[(name, tris.copy()) for name, tris in st.meshes],
            config=st.config,
            world_min=st.world_min,
            world_max=st.world_max,
            cell_size=st.cell_size,
        )

    def _current_static(self):
        link = self._link

        def ready():
            ws = link.status
            return ws["static_generation"] == 0 or (ws["epoch"], ws["static_generation"]) in link.statics

        with link.cond:
            link.wait(ready, ARRIVAL_TIMEOUT)
            ws = link.status
            st = link.statics.get((ws["epoch"], ws["static_generation"]))
            if st is not None:
                return st
            link.raise_if_closed()
            if ws["static_generation"] == 0:
                raise NoStaticData(
                    f"{self._label()}: no static data published yet (the solver publishes it "
                    "before its first frame; try again)"
                )
            raise ForwarderTimeout(
                f"{self._label()} announced static data generation {ws['static_generation']} but "
                f"did not send it within {ARRIVAL_TIMEOUT:g} s"
            )

    def static_for(self, generation, seq=None):
        """The static data of ``generation`` (a frame's ``static_generation``; ``seq`` names the
        frame in errors), as ``Segment.static_for``: shared, read-only arrays. Raises
        StaticMismatch when the forwarder has another generation."""
        return self._static_of(self._read_epoch, generation, seq)

    def _static_of(self, epoch, generation, seq):
        if generation == 0:
            raise NoStaticData(f"{self._label()}: frame {seq} was published before any static data")
        link = self._link
        with link.cond:
            link.wait(lambda: (epoch, generation) in link.statics, ARRIVAL_TIMEOUT)
            st = link.statics.get((epoch, generation))
            if st is not None:
                return st
            link.raise_if_closed()
            have = link.status["static_generation"]
        raise StaticMismatch(
            f"{self._label()}: frame {seq} belongs to static data generation {generation}, but "
            f"the forwarder sent generation {have}"
        )

    # ---- frames -----------------------------------------------------------------------------

    def latest(self, copy=False):
        """The newest frame received, or None when the forwarder has none yet. A new connection
        waits up to ARRIVAL_TIMEOUT for the first frame the forwarder said it has.
        ``copy=False``: read-only arrays (no copy); ``copy=True``: writable copies."""
        link = self._link
        with link.cond:
            link.wait(lambda: link.frame is not None or link.status["frame_seq"] == 0, ARRIVAL_TIMEOUT)
            rec = link.frame
            if rec is None:
                link.raise_if_closed()
                return None
            self._read_epoch = rec.epoch
        return RemoteFrame(self, rec, copy)

    def wait_newer(self, seq, timeout):
        """Waits up to ``timeout`` seconds (``math.inf``: no limit) for a frame newer than
        ``seq`` (or a frame of a newer epoch: the solver was restarted) and returns
        ``latest()``; None on timeout, or when the solver is over and the forwarder holds
        nothing newer (check ``status().over``). Raises ConnectionLost when the connection
        ends."""
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or math.isnan(timeout):
            raise InvalidArgument(
                f"wait_newer: timeout must be a number of seconds (math.inf: no limit), got {timeout!r}"
            )
        link, epoch = self._link, self._read_epoch

        def newer():
            rec = link.frame
            return rec is not None and (rec.epoch > epoch or (rec.epoch == epoch and rec.meta["seq"] > seq))

        def over():
            ws = link.status
            coming = ws["epoch"] > epoch or (ws["epoch"] == epoch and ws["frame_seq"] > seq)
            return _status(ws, 0.0).over and not coming

        with link.cond:
            link.wait(lambda: newer() or over(), timeout)
            if not newer():
                link.raise_if_closed()
                return None
        return self.latest()

    # ---- commands ---------------------------------------------------------------------------

    def send(self, command, timeout=5.0):
        """Sends a command (``"pause"``, ``"refresh 0.01"``, ``SetRefresh(...)``...) through the
        forwarder and waits for the solver's answer; returns ``Outcome(done, message)``, as
        ``Segment.send`` does.

        The command is checked first (InvalidCommand, before anything is sent). The forwarder
        waits at most ``timeout`` (capped at 60 s) for the solver; no answer raises
        CommandTimeout, a solver that is gone (or a forwarder without one) SolverGone, a full
        command table or too many commands in flight TableFull."""
        payload = _cmd.encode(command)
        try:
            timeout = limits.wall_duration("timeout", timeout, MIN_TIMEOUT)
        except ValueError as e:
            raise InvalidArgument(f"send: {e}") from None
        link = self._link
        with link.cond:
            link.raise_if_closed()
            id, self._next_id = self._next_id, self._next_id + 1
        timeout_ms = min(max(1, round(timeout * 1000)), MAX_COMMAND_TIMEOUT_MS)
        link.write(_wire.command(id, timeout_ms, payload))
        what = repr(command) if isinstance(command, str) else str(command)
        with link.cond:
            link.wait(lambda: id in link.acks, min(timeout, MAX_COMMAND_TIMEOUT_MS / 1000) + ACK_MARGIN)
            outcome = link.acks.pop(id, None)
            if outcome is None:
                link.raise_if_closed()
                raise CommandTimeout(
                    f"{self._label()}: no answer to {what} within {timeout:g} s (+{ACK_MARGIN:g} s for "
                    "the network); the command was not applied unless the solver took it in time"
                )
        return _outcome(outcome, what, self._label())


def _status(ws, since):
    s = ws["solver"]
    if s is None:
        return Status("unknown", False, 0, math.inf, 0, True)
    state = s["state"].lower() if s["state"] is not None else "unknown"
    over = not s["alive"] or state in ("finished", "failed")
    return Status(state, s["alive"], s["owner_pid"], s["heartbeat_age_s"] + since, s["newest_seq"], over)


def _outcome(outcome, what, label):
    """An Ack's outcome as an Outcome, or the CommandError it reports."""
    if "Ok" in outcome:
        ((kind, message),) = outcome["Ok"].items()
        return _cmd.Outcome(kind == "Done", message)
    failure, message = outcome["Err"]
    error = _FAILURES.get(failure, CommandError)
    raise error(f"{label}: {what}: {message}")


# protocol.rs CommandFailure -> the error a local send raises in the same case.
_FAILURES = {
    "Timeout": CommandTimeout,
    "SolverGone": SolverGone,
    "NotAttached": SolverGone,
    "Busy": TableFull,
}
