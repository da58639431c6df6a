"""The network client's codec and error handling, standalone (no solver, no forwarder).

``wire_vectors.json`` holds every protocol message as the Rust forwarder encodes it
(tools/forwarder/tests/wire_vectors.rs writes it and fails when it is stale): each is decoded and
re-encoded here. A fake forwarder on loopback then plays the cases a real one cannot be made to
show: another protocol version, an oversized message, silence, a connection cut mid-message.
"""

import gc
import json
import os
import socket
import struct
import threading
import time
import unittest

import numpy as np

import particle_shm as p
from particle_shm import _bincode as B, _conn, _wire as W, command, remote

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "wire_vectors.json")) as _f:
    VECTORS = json.load(_f)
BY_NAME = {v["name"]: v for v in VECTORS["vectors"]}
T = 10.0

PRIMITIVES = B.Tuple(
    B.Tuple(B.U8, B.I8, B.U16, B.U16, B.U16, B.U32, B.U32, B.U64, B.U64, B.U64),
    B.Tuple(B.I16, B.I32, B.I64, B.I64, B.F32, B.F64, B.BOOL, B.STR, B.Option(B.U64), B.Option(B.U64), B.Seq(B.U32)),
)


def wire(name):
    return bytes.fromhex(BY_NAME[name]["hex"])


class Bincode(unittest.TestCase):
    def test_primitives_match_rust(self):
        v = BY_NAME["primitives"]
        raw = bytes.fromhex(v["hex"])
        self.assertEqual(PRIMITIVES.from_bytes(raw), v["value"])
        self.assertEqual(PRIMITIVES.to_bytes(v["value"]), raw)

    def test_varint_widths_and_zigzag(self):
        for n, enc in [(250, b"\xfa"), (251, b"\xfb\xfb\x00"), (2**16, b"\xfc\x00\x00\x01\x00")]:
            self.assertEqual(B.U64.to_bytes(n), enc)
        for n in (0, -1, 1, -2, 2**31 - 1, -(2**31)):
            self.assertEqual(B.I32.from_bytes(B.I32.to_bytes(n)), n)
        self.assertEqual(B.I64.to_bytes(-1), b"\x01")
        self.assertEqual(B.I64.to_bytes(1), b"\x02")

    def test_decoding_rejects_what_bincode_rejects(self):
        bad = [
            (B.U32, b"\xfd" + bytes(8), "u64 varint"),  # a marker wider than the type
            (B.U64, b"\xfe" + bytes(16), "u128"),
            (B.BOOL, b"\x02", "bool byte"),
            (B.Option(B.U8), b"\x02\x00", "Option tag"),
            (B.STR, b"\x02\xc3\x28", "UTF-8"),
            (W.POSITION_ENCODING, b"\x02", "variant index 2"),
        ]
        for t, raw, words in bad:
            with self.assertRaises(B.DecodeError) as cm:
                t.from_bytes(raw)
            self.assertIn(words, str(cm.exception))
        with self.assertRaises(B.Short):
            B.Seq(B.U32).from_bytes(B.U64.to_bytes(2**40))  # a lying length: nothing allocated
        with self.assertRaises(B.Short):
            B.F64.from_bytes(b"\x00" * 7)
        with self.assertRaises(B.DecodeError):
            B.U8.from_bytes(b"\x01\x02")  # trailing bytes

    def test_encoding_checks_ranges(self):
        for t, v in [(B.U8, 256), (B.U32, -1), (B.U64, 2**64), (B.I8, 128), (B.U32, True), (B.STR, b"x")]:
            with self.assertRaises(B.EncodeError):
                t.to_bytes(v)


class Messages(unittest.TestCase):
    def test_client_messages_match_rust(self):
        for v in VECTORS["vectors"]:
            if v["type"] != "ClientMsg":
                continue
            raw = bytes.fromhex(v["hex"])
            with self.subTest(v["name"]):
                self.assertEqual(struct.unpack("<I", raw[:4])[0], len(raw) - 4)
                self.assertEqual(W.CLIENT_MSG.from_bytes(raw[4:]), v["value"])
                self.assertEqual(W.frame(W.CLIENT_MSG.to_bytes(v["value"])), raw)

    def test_the_client_builds_the_same_hello_and_commands(self):
        h = BY_NAME["hello_token_quantized"]["value"]["Hello"]
        sub = W.subscription(0x83, True, 2.5, max_particles=200_000)
        self.assertEqual(W.hello("s3cret", "python test", sub), wire("hello_token_quantized"))
        self.assertEqual(sub, h["subscription"])
        texts = {
            "command_pause": "pause",
            "command_refresh_sim": "refresh 0.01",
            "command_refresh_wall": "refresh-wall 250",
            "command_update": "update",
            "command_resume": "resume",
            "command_stop": "stop",
            "command_checkpoint": "checkpoint",
        }
        for name, text in texts.items():
            c = BY_NAME[name]["value"]["Command"]
            with self.subTest(name):
                self.assertEqual(W.command(c["id"], c["timeout_ms"], command.encode(text)), wire(name))

    def test_server_messages_match_rust(self):
        for v in VECTORS["vectors"]:
            if v["type"] != "ServerMsg":
                continue
            raw = bytes.fromhex(v["hex"])
            with self.subTest(v["name"]):
                a, b = socket.socketpair()
                with a, b:
                    a.sendall(raw)
                    variant, content, payload, size = _conn.read_message(b, W.DEFAULT_MAX_MESSAGE, "pair")
                self.assertEqual(size, len(raw) - 4)
                self.assertEqual({variant: content}, v["value"])
                head = W.SERVER_MSG.to_bytes(v["value"])
                self.assertEqual(raw[4 : 4 + len(head)], head)
                if variant == "Frame":
                    self.check_frame(content, payload, v["arrays"])
                elif variant == "Static":
                    self.check_static(content, payload, v["arrays"])
                else:
                    self.assertIsNone(payload)

    def check_frame(self, h, payload, want):
        self.assertEqual(payload.ctypes.data % 64, 0, "payload received into an aligned buffer")
        bodies, arrays = W.frame_arrays(h, payload)
        self.assertEqual(bodies.dtype, p.layout.BODY_DTYPE)
        flat = np.concatenate(
            [bodies["rotation"].reshape(-1, 9), bodies["translation"], bodies["velocity"], bodies["angular_velocity"]],
            axis=1,
        ) if len(bodies) else np.zeros((0, 18), np.float32)
        np.testing.assert_array_equal(flat, np.array(want["bodies"], dtype=np.float32).reshape(-1, 18))
        n = h["meta"]["particle_count"]
        for name, dtype, k in p.layout.FIELDS.values():
            if want[name] is None:
                self.assertNotIn(name, arrays)
                continue
            a = arrays[name]
            self.assertEqual(a.dtype, np.dtype(dtype), name)
            self.assertEqual(a.shape, (n, k) if k > 1 else (n,), name)
            self.assertFalse(a.flags.writeable)
            # Exact: the dequantisation is float32 arithmetic in payload.rs's order.
            np.testing.assert_array_equal(a, np.array(want[name], dtype=dtype), name)

    def check_static(self, h, payload, want):
        ids, species, radii, meshes = W.static_arrays(h, payload)
        np.testing.assert_array_equal(ids, np.array(want["ids"], dtype=np.uint32))
        np.testing.assert_array_equal(species, np.array(want["species_ids"], dtype=np.uint32))
        np.testing.assert_array_equal(radii, np.array(want["radii"], dtype=np.float32))
        self.assertEqual([m[0] for m in meshes], [m["name"] for m in want["meshes"]])
        for (_, tris), m in zip(meshes, want["meshes"]):
            np.testing.assert_array_equal(tris.reshape(-1, 9), np.array(m["triangles"], dtype=np.float32).reshape(-1, 9))

    def test_payload_sizes_are_checked(self):
        a, b = socket.socketpair()
        with a, b:
            a.sendall(wire("frame_f32_fields_bodies_ids"))
            _, h, payload, _ = _conn.read_message(b, W.DEFAULT_MAX_MESSAGE, "pair")
        with self.assertRaises(W.PayloadError):
            W.frame_arrays(h, payload[:-1])
        huge = json.loads(json.dumps(h))
        huge["meta"]["particle_count"] = huge["frame_particles"] = 2**60
        with self.assertRaises(W.PayloadError):
            W.frame_arrays(huge, payload)
        # Subsampling the header does not add up to, or that names no particle.
        a, b = socket.socketpair()
        with a, b:
            a.sendall(wire("frame_subsampled_ids"))
            _, h, payload, _ = _conn.read_message(b, W.DEFAULT_MAX_MESSAGE, "pair")
        self.assertEqual((h["stride"], h["frame_particles"], h["meta"]["particle_count"]), (2, 3, 2))
        for key, value in (("stride", 0), ("stride", 3), ("frame_particles", 5)):
            bad = json.loads(json.dumps(h))
            bad[key] = value
            with self.subTest(key=key, value=value), self.assertRaisesRegex(W.PayloadError, "sampled every"):
                W.frame_arrays(bad, payload)
        no_ids = json.loads(json.dumps(h))
        no_ids["meta"]["fields"] &= ~(1 << 7)
        with self.assertRaisesRegex(W.PayloadError, "without particle ids"):
            W.frame_arrays(no_ids, payload)
        trailing = wire("welcome") + b"\x00"
        trailing = struct.pack("<I", len(trailing) - 4) + trailing[4:]
        with self.assertRaises(W.PayloadError):
            a, b = socket.socketpair()
            with a, b:
                a.sendall(trailing)
                _conn.read_message(b, W.DEFAULT_MAX_MESSAGE, "pair")


# ---- a fake forwarder ------------------------------------------------------------------------


def server_msg(value, payload=b""):
    return W.frame(W.SERVER_MSG.to_bytes(value) + payload)


def status(epoch=7, generation=4, frame_seq=300, state="Running", alive=True):
    return server_msg(
        {
            "Status": {
                "attached": True,
                "epoch": epoch,
                "solver": {
                    "state": state,
                    "owner_pid": 4242,
                    "alive": alive,
                    "heartbeat_age_s": 0.0,
                    "newest_seq": frame_seq,
                    "created_unix_ns": 1,
                },
                "static_generation": generation,
                "frame_seq": frame_seq,
                "message": "",
            }
        }
    )


def welcome(version=W.PROTOCOL_VERSION):
    return server_msg({"Welcome": {"version": version, "server": "fake", "segment": "fake-run"}})


def read_client_msg(conn):
    (n,) = struct.unpack("<I", recv_exact(conn, 4))
    return W.CLIENT_MSG.from_bytes(recv_exact(conn, n))


def recv_exact(conn, n):
    out = b""
    while len(out) < n:
        chunk = conn.recv(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


class Fake:
    """One connection on loopback, served by ``script(conn, fake)`` in a thread; what the client
    sent is collected in ``got``."""

    def __init__(self, script):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.script, self.got, self.error = script, [], None
        self.release = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        self.listener.settimeout(T)
        try:
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(T)
                self.script(conn, self)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def close(self):
        self.release.set()
        self.thread.join(T)
        self.listener.close()


class FakeForwarder(unittest.TestCase):
    def serve(self, script):
        fake = Fake(script)
        self.addCleanup(fake.close)
        return fake

    def test_connection_refused(self):
        s = socket.create_server(("127.0.0.1", 0))
        address = "127.0.0.1:%d" % s.getsockname()[1]
        s.close()
        with self.assertRaises(p.ConnectFailed) as cm:
            p.connect(address, timeout=2)
        self.assertIn("connection refused", str(cm.exception))
        self.assertIsInstance(cm.exception, ConnectionError)

    def test_bad_arguments_are_refused_before_connecting(self):
        for kw in [
            {"address": "no-port"},
            {"address": "host:0"},
            {"address": "127.0.0.1:1", "fields": ("positons",)},
            {"address": "127.0.0.1:1", "max_rate_hz": 1e-6},
            {"address": "127.0.0.1:1", "max_rate_hz": float("nan")},
            {"address": "127.0.0.1:1", "positions": "f16"},
            {"address": "127.0.0.1:1", "timeout": 0},
            {"address": "127.0.0.1:1", "max_message": 10},
        ]:
            with self.subTest(kw), self.assertRaises(p.InvalidArgument):
                p.connect(**kw)

    def test_wrong_token_and_other_versions_are_told_apart(self):
        # The forwarder's own words (auth.rs check_hello, through the vectors).
        reason = {n: BY_NAME[n]["value"]["Refused"]["reason"] for n in BY_NAME if n.startswith("refused_")}
        cases = [
            (reason["refused_wrong_token"], p.TokenRejected, None),
            (reason["refused_missing_token"], p.TokenRejected, None),
            (reason["refused_other_version"], p.ProtocolMismatch, W.PROTOCOL_VERSION),
            ("the forwarder has as many clients as it serves", p.Refused, None),
        ]
        for reason, cls, version in cases:
            with self.subTest(reason):

                def script(conn, fake, reason=reason):
                    fake.got.append(read_client_msg(conn))
                    conn.sendall(server_msg({"Refused": {"reason": reason}}))

                fake = self.serve(script)
                with self.assertRaises(cls) as cm:
                    p.connect(fake.address, token="abc", timeout=T)
                self.assertIs(type(cm.exception), cls)
                self.assertEqual(cm.exception.reason, reason)
                self.assertIn(reason, str(cm.exception))
                self.assertIn(fake.address, str(cm.exception))
                if version is not None:
                    self.assertEqual(cm.exception.server_version, version)
                    self.assertIsInstance(cm.exception, p.VersionMismatch)
                fake.close()
                self.assertEqual(fake.got[0]["Hello"]["token"], "abc")
                self.assertEqual(fake.got[0]["Hello"]["version"], W.PROTOCOL_VERSION)

    def test_a_welcome_of_another_version(self):
        other = W.PROTOCOL_VERSION + 1
        fake = self.serve(lambda conn, fake: (read_client_msg(conn), conn.sendall(welcome(other))))
        with self.assertRaises(p.ProtocolMismatch) as cm:
            p.connect(fake.address, timeout=T)
        self.assertEqual(cm.exception.server_version, other)

    def test_a_silent_peer_times_out(self):
        fake = self.serve(lambda conn, fake: fake.release.wait(T))
        t = time.monotonic()
        with self.assertRaises(p.ForwarderTimeout) as cm:
            p.connect(fake.address, timeout=0.3)
        self.assertLess(time.monotonic() - t, 3)
        self.assertIsInstance(cm.exception, TimeoutError)

    def test_not_a_forwarder(self):
        fake = self.serve(lambda conn, fake: conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n"))
        with self.assertRaises(p.ProtocolError) as cm:
            p.connect(fake.address, timeout=T)
        self.assertIn("did not answer like a forwarder", str(cm.exception))

    def session(self, *after, max_message=W.DEFAULT_MAX_MESSAGE, then=None):
        """A fake session: welcome, the vectors' static data, a status and frame, then
        ``after`` (bytes), then ``then(conn, fake)`` or waiting until the test ends."""

        def script(conn, fake):
            fake.got.append(read_client_msg(conn))
            conn.sendall(welcome() + wire("static_arrays") + status() + wire("frame_f32_fields_bodies_ids"))
            for b in after:
                conn.sendall(b)
            if then is not None:
                then(conn, fake)
            fake.release.wait(T)

        fake = self.serve(script)
        seg = p.connect(fake.address, timeout=T, max_message=max_message, fields=("positions", "velocities"))
        self.addCleanup(seg.close)
        return fake, seg

    def test_a_session_gives_the_frame_api(self):
        fake, seg = self.session()
        self.assertEqual(seg.name, "fake-run")
        hello = fake.got[0]["Hello"]
        # particle_ids is always subscribed: it maps a changing particle set to species.
        self.assertEqual(hello["subscription"]["fields"], 0b10000011)
        f = seg.latest()
        self.assertIsInstance(f, p.Frame)
        self.assertEqual((f.seq, f.step, f.static_generation, f.epoch), (300, 70000, 4, 7))
        self.assertEqual((f.removed_count, f.removed_mass), (5_000_000_000, 6.5e-5))
        self.assertEqual(f.positions.shape, (3, 3))
        self.assertFalse(f.positions.flags.writeable)
        np.testing.assert_array_equal(f.particle_ids, [1, 3, 5])
        self.assertTrue(f.valid())
        st = seg.static
        self.assertEqual([s.name for s in st.species], ["glass", "d\u00e9j\u00e0 vu"])
        self.assertEqual(st.species[0].method, "dem")
        self.assertEqual(st.species[0].params["restitution"], 0.3)
        self.assertEqual(st.species[1].method, "9")
        self.assertEqual(st.meshes[0][1].shape, (2, 3, 3))
        # Ids 1, 3, 5 of a static section of 3 particles: id 5 is unknown, as locally.
        with self.assertRaises(p.CorruptSegment) as cm:
            f.species
        self.assertIn("particle id 5", str(cm.exception))
        self.assertIn(fake.address, str(cm.exception))
        c = seg.latest(copy=True)
        self.assertTrue(c.positions.flags.writeable and c.owned)
        self.assertEqual(seg.status().state, "running")
        self.assertEqual(seg.newest_seq, 300)
        self.assertIsNone(seg.wait_newer(300, 0.2))

    def test_commands_and_their_failures(self):
        answers = [
            {"Ok": {"Done": "paused"}},
            {"Ok": {"Rejected": "no"}},
            {"Err": ["Timeout", "no acknowledgement"]},
            {"Err": ["Busy", "more than 4 commands in flight"]},
            {"Err": ["NotAttached", "the forwarder is not attached to a solver"]},
        ]

        def then(conn, fake):
            for outcome in answers:
                msg = read_client_msg(conn)
                fake.got.append(msg)
                conn.sendall(server_msg({"Ack": {"id": msg["Command"]["id"], "outcome": outcome}}))

        fake, seg = self.session(then=then)
        self.assertEqual(seg.send("pause"), p.Outcome(True, "paused"))
        self.assertEqual(seg.send(p.SetRefresh(sim_seconds=0.01), timeout=120), p.Outcome(False, "no"))
        with self.assertRaises(p.CommandTimeout):
            seg.send("resume")
        with self.assertRaises(p.TableFull):
            seg.send("stop")
        with self.assertRaises(p.SolverGone):
            seg.send("checkpoint")
        with self.assertRaises(p.InvalidCommand):
            seg.send("refresh 0")
        cmds = [m["Command"] for m in fake.got[1:]]
        self.assertEqual([c["id"] for c in cmds], [1, 2, 3, 4, 5])
        self.assertEqual(cmds[0]["command"], "Pause")
        self.assertEqual(cmds[1]["command"], {"SetRefresh": {"sim_seconds": 0.01, "wall_ms": None}})
        self.assertEqual(cmds[1]["timeout_ms"], 60000)  # the forwarder's cap
        self.assertEqual(cmds[0]["timeout_ms"], 5000)

    def test_no_answer_to_a_command_times_out(self):
        fake, seg = self.session()
        remote_margin, remote.ACK_MARGIN = remote.ACK_MARGIN, 0.0
        self.addCleanup(setattr, remote, "ACK_MARGIN", remote_margin)
        t = time.monotonic()
        with self.assertRaises(p.CommandTimeout):
            seg.send("pause", timeout=0.2)
        self.assertLess(time.monotonic() - t, 2)

    def test_a_message_over_the_limit_ends_the_connection(self):
        _, seg = self.session(struct.pack("<I", 5000) + bytes(100), max_message=2048)
        with self.assertRaises(p.MessageTooLarge) as cm:
            seg.wait_newer(300, T)
        self.assertEqual((cm.exception.length, cm.exception.limit), (5000, 2048))
        with self.assertRaises(p.MessageTooLarge):
            seg.status()

    def test_a_connection_cut_mid_message(self):
        half = wire("frame_f32_fields_bodies_ids")[:40]
        _, seg = self.session(half, then=lambda conn, fake: conn.shutdown(socket.SHUT_RDWR))
        with self.assertRaises(p.ConnectionLost) as cm:
            seg.wait_newer(300, T)
        self.assertIn("in the middle of a message", str(cm.exception))
        self.assertEqual(seg.latest().seq, 300)  # what arrived stays readable

    def test_garbage_is_a_protocol_error(self):
        _, seg = self.session(struct.pack("<I", 3) + b"\x09\x00\x00")
        with self.assertRaises(p.ProtocolError) as cm:
            seg.wait_newer(300, T)
        self.assertIn("variant index 9", str(cm.exception))

    def test_a_forwarder_gone_silent_is_given_up(self):
        silence, _conn.SILENCE_TIMEOUT = _conn.SILENCE_TIMEOUT, 0.3
        self.addCleanup(setattr, _conn, "SILENCE_TIMEOUT", silence)
        _, seg = self.session()
        with self.assertRaises(p.ConnectionLost) as cm:
            seg.wait_newer(300, T)
        self.assertIn("sent nothing", str(cm.exception))

    def test_an_unreferenced_connection_is_closed(self):
        def script(conn, fake):
            read_client_msg(conn)
            conn.sendall(welcome() + status(generation=0, frame_seq=0))
            fake.got.append(conn.recv(1))  # b"" once the client closes
            fake.release.wait(T)

        fake = self.serve(script)
        seg = p.connect(fake.address, timeout=T)
        thread = seg._link.thread
        del seg
        gc.collect()
        thread.join(T)
        self.assertFalse(thread.is_alive())
        until_got = time.monotonic() + T
        while not fake.got and time.monotonic() < until_got:
            time.sleep(0.01)
        self.assertEqual(fake.got, [b""])

    def test_newer_frames_and_the_end_of_the_run(self):
        newer = bytearray(wire("frame_f32_fields_bodies_ids"))
        at = newer.index(B.U64.to_bytes(300), 6)  # meta.seq after the variant and epoch
        newer[at : at + 3] = B.U64.to_bytes(301)

        def then(conn, fake):
            time.sleep(0.2)
            conn.sendall(bytes(newer))
            time.sleep(0.2)
            conn.sendall(status(frame_seq=301, state="Finished"))

        _, seg = self.session(then=then)
        t = time.monotonic()
        f = seg.wait_newer(300, T)
        self.assertEqual(f.seq, 301)
        self.assertGreater(time.monotonic() - t, 0.1)
        self.assertIsNone(seg.wait_newer(301, T))  # over, nothing newer: at once
        self.assertTrue(seg.status().over)
        seg.close()
        with self.assertRaises(p.ConnectionLost):
            seg.status()
        with self.assertRaises(p.ConnectionLost):
            seg.check_intact()


if __name__ == "__main__":
    unittest.main()
