"""particle_shm against a segment written by the Rust Publisher.

Run by ``tools/analysis/tests/python_reader.rs`` (``cargo test``), which creates the segment,
dumps what the Rust reader sees to JSON, plays the solver for commands, and sets
PSHM_TEST_SEGMENT / PSHM_TEST_EXPECTED. The encoding tests also run standalone.
"""

import json
import os
import struct
import time
import unittest

import numpy as np

import particle_shm as p
from particle_shm import command, layout

SEG = os.environ.get("PSHM_TEST_SEGMENT")
EXPECTED = os.environ.get("PSHM_TEST_EXPECTED")
needs_segment = unittest.skipUnless(SEG and EXPECTED, "needs a segment from python_reader.rs")


class Bincode(unittest.TestCase):
    def test_layout_md_examples(self):
        self.assertEqual(command.encode("pause"), b"\x02")
        self.assertEqual(
            command.encode(p.SetRefresh(sim_seconds=0.01)), b"\x00\x01" + struct.pack("<d", 0.01) + b"\x00"
        )
        self.assertEqual(command.decode_outcome(b"\x00\x02ok"), p.Outcome(True, "ok"))
        self.assertEqual(command.decode_outcome(b"\x01\x01x"), p.Outcome(False, "x"))

    def test_varints(self):
        self.assertEqual(command.varint(250), b"\xfa")
        self.assertEqual(command.varint(251), b"\xfb\xfb\x00")
        self.assertEqual(command.varint(2**16), b"\xfc\x00\x00\x01\x00")
        self.assertEqual(command.varint(2**32), b"\xfd" + struct.pack("<Q", 2**32))
        for n in (0, 250, 251, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1):
            self.assertEqual(command.read_varint(command.varint(n), 0), (n, len(command.varint(n))))

    def test_parse_rejects_like_rust(self):
        self.assertEqual(command.encode("refresh-wall 100"), b"\x00\x00\x01\x64")
        for bad in ("explode", "pause now", "refresh 0", "refresh", ""):
            with self.assertRaises(ValueError):
                command.encode(bad)

    def test_plan_matches_the_documented_example_sizes(self):
        caps = layout.Capacities(1001, 77, 3, 16, 3, 64, 0x7F, 65536)
        plan = layout.compute_plan(caps)
        for k in ("static_offset", "slots_offset", "slot_stride", "commands_offset", "total_size"):
            self.assertEqual(plan[k] % 64, 0, k)
        self.assertEqual(plan["commands_offset"] + plan["commands_size"], plan["total_size"])
        caps.slot_count = 2
        with self.assertRaises(layout.BadCapacities):
            layout.compute_plan(caps)


@needs_segment
class ReadsTheRustWriter(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.seg = p.attach(SEG)
        with open(EXPECTED) as f:
            cls.exp = json.load(f)

    def test_attach_checks_size_and_capacities(self):
        self.assertEqual(self.seg.size, self.exp["total_size"])
        self.assertEqual(self.seg.capacities.slot_count, self.exp["capacities"]["slot_count"])
        self.assertEqual(self.seg.capacities.fields, self.exp["capacities"]["fields"])

    def test_static_matches(self):
        s, e = self.seg.static, self.exp["static"]
        self.assertEqual(s.generation, e["generation"])
        np.testing.assert_array_equal(s.ids, np.array(e["ids"], dtype=np.uint32))
        np.testing.assert_array_equal(s.species_ids, np.array(e["species_ids"], dtype=np.uint32))
        np.testing.assert_array_equal(s.radii, np.array(e["radii"], dtype=np.float32))
        self.assertEqual([x.name for x in s.species], [x["name"] for x in e["species"]])
        self.assertEqual([x.density for x in s.species], [x["density"] for x in e["species"]])
        self.assertEqual([x.method for x in s.species], [x["method"] for x in e["species"]])
        self.assertEqual([x.params["restitution"] for x in s.species], [x["restitution"] for x in e["species"]])
        self.assertEqual(s.config, e["config"])
        self.assertEqual(s.world_min, tuple(e["world_min"]))
        self.assertEqual(s.world_max, tuple(e["world_max"]))
        self.assertEqual(s.cell_size, e["cell_size"])
        self.assertEqual([m[0] for m in s.meshes], [m["name"] for m in e["meshes"]])
        for (name, tris), m in zip(s.meshes, e["meshes"]):
            self.assertEqual(tris.shape, (len(m["triangles"]), 3, 3))
            np.testing.assert_array_equal(tris.reshape(-1, 9), np.array(m["triangles"], dtype=np.float32))

    def check_frame(self, f):
        e = self.exp["frame"]
        self.assertEqual((f.seq, f.step, f.sim_time, f.dt), (e["seq"], e["step"], e["sim_time"], e["dt"]))
        self.assertEqual(f.particle_count, e["particle_count"])
        self.assertEqual(f.static_generation, e["static_generation"])
        for k in ("positions", "velocities", "angular_velocities", "forces"):
            a = getattr(f, k)
            self.assertEqual(a.dtype, np.float32)
            self.assertEqual(a.shape, (e["particle_count"], 3))
            np.testing.assert_array_equal(a, np.array(e[k], dtype=np.float32), k)
        self.assertIsNone(f.contact_counts)
        self.assertEqual(len(f.bodies), len(e["bodies"]))
        np.testing.assert_array_equal(
            f.bodies["rotation"].reshape(-1, 9), np.array([b["rotation"] for b in e["bodies"]], dtype=np.float32)
        )

    def test_latest_views_match_rust_without_copying(self):
        f = self.seg.latest()
        self.check_frame(f)
        self.assertFalse(f.owned)
        self.assertFalse(f.positions.flags.owndata)
        self.assertFalse(f.positions.flags.writeable)
        self.assertTrue(f.valid())

    def test_copy_gives_owned_validated_arrays(self):
        f = self.seg.latest(copy=True)
        self.check_frame(f)
        self.assertTrue(f.owned and f.valid())
        self.assertTrue(f.positions.flags.writeable)

    def test_copy_of_a_slot_rewritten_meanwhile_is_not_valid(self):
        # A copy is judged by the slot's seqlock after copying: here the lock the copy started
        # from is older than the slot's, as if the writer reused the slot during the copy.
        f = self.seg.latest(copy=True)
        meta = {k: getattr(f, k) for k in p.Frame.META[1:]}
        meta["frame_seq"] = f.seq
        torn = p.Frame(self.seg, f.slot, f._lock - 2, meta, True)
        self.assertTrue(torn.owned)
        self.assertFalse(torn.valid())

    def test_status_of_a_live_running_solver(self):
        st = self.seg.status()
        self.assertEqual(st.state, "running")
        self.assertTrue(st.alive)
        self.assertFalse(st.over)
        self.assertEqual(st.owner_pid, self.exp["owner_pid"])
        self.assertLess(st.heartbeat_age_s, 30)

    def test_wait_newer_times_out_without_a_new_frame(self):
        seq = self.seg.newest_seq
        t = time.monotonic()
        self.assertIsNone(self.seg.wait_newer(seq, 0.3))
        self.assertGreaterEqual(time.monotonic() - t, 0.25)
        self.assertEqual(self.seg.wait_newer(seq - 1, 0.3).seq, seq)

    def test_zz_commands_and_waking_on_a_new_frame(self):
        # Runs last (names sort): `update` makes the test's solver publish a frame.
        self.assertEqual(self.seg.send("pause", timeout=10), p.Outcome(True, "Pause"))
        self.assertEqual(
            self.seg.send(p.SetRefresh(sim_seconds=0.01), timeout=10),
            p.Outcome(True, "SetRefresh { sim_seconds: Some(0.01), wall_ms: None }"),
        )
        self.assertEqual(
            self.seg.send("refresh-wall 250", timeout=10).message,
            "SetRefresh { sim_seconds: None, wall_ms: Some(250) }",
        )
        before = self.seg.latest(copy=True)
        self.assertTrue(self.seg.send("update", timeout=10).done)
        f = self.seg.wait_newer(before.seq, 10)
        self.assertIsNotNone(f)
        self.assertEqual((f.seq, f.step), (before.seq + 1, before.step + 100))
        np.testing.assert_allclose(f.positions[:, 0] - before.positions[:, 0], 0.001, atol=1e-6)
        self.assertTrue(f.valid())


@needs_segment
class CorruptSegments(unittest.TestCase):
    """The corrupt-segment cases of shm-protocol/tests/corrupt.rs, on copies of the segment."""

    @classmethod
    def setUpClass(cls):
        with open(f"/dev/shm/{SEG}", "rb") as f:
            cls.image = f.read()
        cls.plan = p.attach(SEG).plan

    def setUp(self):
        self.made = []

    def tearDown(self):
        for path in self.made:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def copy(self, tag, data):
        name = f"{SEG}-{tag}"
        path = f"/dev/shm/{name}"
        with open(path, "wb") as f:
            f.write(data)
        self.made.append(path)
        return name

    def edited(self, tag, offset, fmt, value):
        b = bytearray(self.image)
        struct.pack_into(fmt, b, offset, value)
        return self.copy(tag, bytes(b))

    def test_missing_and_invalid_names(self):
        with self.assertRaises(p.SegmentNotFound) as cm:
            p.attach(f"{SEG}-absent")
        self.assertIn("no segment named", str(cm.exception))
        self.assertIsInstance(cm.exception, FileNotFoundError)
        for bad in ("", ".hidden", "a/b", "x" * 201):
            with self.assertRaises(p.InvalidName):
                p.attach(bad)

    def test_truncated(self):
        for n in (0, 8, 471, 1000, len(self.image) - 64):
            with self.assertRaises(p.CorruptSegment, msg=n) as cm:
                p.attach(self.copy(f"trunc{n}", self.image[:n]))
            # Shorter than a header: Truncated; longer: the header's total_size disagrees.
            self.assertIsInstance(cm.exception, p.Truncated if n < 472 else p.SizeMismatch)

    def test_wrong_magic(self):
        with self.assertRaises(p.NotOurSegment):
            p.attach(self.copy("magic", b"X" + self.image[1:]))

    def test_version_layout_and_initialisation(self):
        with self.assertRaises(p.VersionMismatch) as cm:
            p.attach(self.edited("version", 8, "<I", 99))
        self.assertIn("ABI version 99", str(cm.exception))
        with self.assertRaises(p.LayoutMismatch):
            p.attach(self.edited("hash", 16, "<Q", layout.LAYOUT_HASH ^ 1))
        with self.assertRaises(p.NotInitialised):
            p.attach(self.edited("init", 8, "<I", 0))

    def test_size_capacities_and_plan(self):
        with self.assertRaises(p.SizeMismatch):
            p.attach(self.copy("longer", self.image + bytes(64)))
        with self.assertRaises(p.CorruptSegment) as cm:
            p.attach(self.edited("slots", 32 + 24, "<I", 2))
        self.assertIn("impossible capacities", str(cm.exception))
        with self.assertRaises(p.CorruptSegment) as cm:
            p.attach(self.edited("plan", 72, "<Q", self.plan["static_offset"] + 64))
        self.assertIn("offsets do not follow", str(cm.exception))

    def test_counts_beyond_capacities(self):
        so = self.plan["static_offset"]
        seg = p.attach(self.edited("static", so + 8, "<Q", 10**9))
        with self.assertRaises(p.CorruptSegment):
            seg.read_static()
        newest = struct.unpack_from("<I", self.image, layout.Header.newest_slot.offset)[0]
        slot = self.plan["slots_offset"] + newest * self.plan["slot_stride"]
        seg = p.attach(self.edited("frame", slot + 56, "<Q", 10**9))
        with self.assertRaises(p.CorruptSegment) as cm:
            seg.latest()
        self.assertIn("particles, capacity", str(cm.exception))
        seg = p.attach(self.edited("mesh", self.plan["mesh_table_offset"] + 40, "<Q", 99))
        with self.assertRaises(p.CorruptSegment):
            seg.read_static()


if __name__ == "__main__":
    unittest.main()
