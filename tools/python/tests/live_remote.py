"""particle_shm.connect against a real solver and forwarder, run by tests/tests/python_remote.rs
(which starts them and installs this package into a virtual environment):

- PSHM_LIVE_ADDR, PSHM_LIVE_SEGMENT, PSHM_LIVE_TOKEN: a live CPU run (the built-in case) served
  by a forwarder that requires the token. The test pauses it, compares what arrives with what
  the local reader sees for the same frame, resumes it and finally stops it.
- PSHM_SET_ADDR, PSHM_SET_SEGMENT: a finished run whose particle set changed (the silo case,
  filling from its inflow), served without a token: ids, species and radii arrive as locally.

Not named test_*: it needs those processes (tools/analysis/tests/python_reader.rs runs the
standalone modules).
"""

import os
import time
import unittest

import numpy as np

import particle_shm as p

LIVE_ADDR = os.environ.get("PSHM_LIVE_ADDR")
LIVE_SEGMENT = os.environ.get("PSHM_LIVE_SEGMENT")
TOKEN = os.environ.get("PSHM_LIVE_TOKEN")
SET_ADDR = os.environ.get("PSHM_SET_ADDR")
SET_SEGMENT = os.environ.get("PSHM_SET_SEGMENT")
needs_live = unittest.skipUnless(LIVE_ADDR and LIVE_SEGMENT and TOKEN, "needs python_remote.rs's live run")
needs_set = unittest.skipUnless(SET_ADDR and SET_SEGMENT, "needs python_remote.rs's silo run")
T = 20.0
FIELDS = ("positions", "velocities", "angular_velocities")


def until(what, check, timeout=T):
    """Polls ``check()`` until it returns something true; fails the test after ``timeout``."""
    end = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.02)


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def assert_same_static(test, remote, local):
    test.assertEqual(remote.generation, local.generation)
    for k in ("ids", "species_ids", "radii"):
        test.assertTrue(same_bits(getattr(remote, k), getattr(local, k)), k)
    test.assertEqual(remote.species, local.species)
    test.assertEqual([m[0] for m in remote.meshes], [m[0] for m in local.meshes])
    for (_, a), (_, b) in zip(remote.meshes, local.meshes):
        test.assertTrue(same_bits(a, b))
    test.assertEqual(remote.config, local.config)
    test.assertEqual((remote.world_min, remote.world_max), (local.world_min, local.world_max))
    test.assertEqual(remote.cell_size, local.cell_size)


def assert_same_frame(test, rf, lf, fields):
    test.assertEqual(rf.seq, lf.seq)
    for k in ("step", "sim_time", "dt", "particle_count", "static_generation", "removed_count", "removed_mass"):
        test.assertEqual(getattr(rf, k), getattr(lf, k), k)
    for k in fields:
        test.assertTrue(same_bits(getattr(rf, k), getattr(lf, k)), f"{k} differs from the local reader's")
    test.assertTrue(same_bits(rf.bodies, lf.bodies), "bodies")
    for k in ("particle_ids", "species", "radii"):
        test.assertTrue(same_bits(np.asarray(getattr(rf, k)), np.asarray(getattr(lf, k))), k)


@needs_live
class Auth(unittest.TestCase):
    def test_a_wrong_token_is_refused_clearly(self):
        with self.assertRaises(p.TokenRejected) as cm:
            p.connect(LIVE_ADDR, token="not-" + TOKEN, timeout=T)
        self.assertEqual(cm.exception.reason, "wrong token")
        self.assertIn(LIVE_ADDR, str(cm.exception))
        self.assertIsInstance(cm.exception, PermissionError)

    def test_a_missing_token_is_refused_clearly(self):
        saved = os.environ.pop("PARTICLE_SHM_TOKEN", None)
        try:
            with self.assertRaises(p.TokenRejected) as cm:
                p.connect(LIVE_ADDR, timeout=T)
        finally:
            if saved is not None:
                os.environ["PARTICLE_SHM_TOKEN"] = saved
        self.assertIn("requires a token", str(cm.exception))

    def test_the_token_from_the_environment(self):
        os.environ["PARTICLE_SHM_TOKEN"] = TOKEN
        try:
            with p.connect(LIVE_ADDR, timeout=T) as seg:
                self.assertEqual(seg.name, LIVE_SEGMENT)
        finally:
            del os.environ["PARTICLE_SHM_TOKEN"]


@needs_live
class LiveRun(unittest.TestCase):
    """One run, in order (test names sort): frames, pause, comparison, resume, stop."""

    @classmethod
    def setUpClass(cls):
        cls.seg = p.connect(LIVE_ADDR, token=TOKEN, fields=FIELDS, timeout=T)
        cls.local = p.attach(LIVE_SEGMENT)

    @classmethod
    def tearDownClass(cls):
        cls.seg.close()
        cls.local.close()

    def test_1_frames_arrive_with_the_local_shapes(self):
        seg = self.seg
        self.assertEqual(seg.name, LIVE_SEGMENT)
        self.assertIn("forwarder", seg.server)
        st = seg.status()
        self.assertEqual(st.state, "running")
        self.assertTrue(st.alive and not st.over)
        self.assertEqual(st.owner_pid, self.local.status().owner_pid)
        f = seg.latest()
        self.assertIsInstance(f, p.Frame)
        n = f.particle_count
        self.assertGreater(n, 0)
        for k in FIELDS:
            a = getattr(f, k)
            self.assertEqual((a.shape, a.dtype), ((n, 3), np.float32), k)
            self.assertFalse(a.flags.writeable)
        self.assertIsNone(f.forces)  # not subscribed
        self.assertIsNone(f.contact_counts)
        static = seg.static
        assert_same_static(self, static, self.local.static)
        np.testing.assert_array_equal(f.particle_ids, static.ids)
        self.assertEqual((f.species.shape, f.species.dtype), ((n,), np.uint32))
        self.assertEqual((f.radii.shape, f.radii.dtype), ((n,), np.float32))
        self.assertTrue(np.all(np.isfinite(f.positions)))

    def test_2_wait_newer_returns_the_next_frame(self):
        f = self.seg.latest()
        g = self.seg.wait_newer(f.seq, T)
        self.assertIsNotNone(g)
        self.assertGreater(g.seq, f.seq)
        self.assertGreater(g.sim_time, f.sim_time)
        self.assertGreaterEqual(self.seg.newest_seq, g.seq)

    def test_3_pause_is_acknowledged_and_the_solver_pauses(self):
        out = self.seg.send("pause", timeout=10)
        self.assertTrue(out.done, out)
        until("the forwarder reports the pause", lambda: self.seg.status().state == "paused")
        self.assertEqual(self.local.status().state, "paused")

    def test_4_frames_equal_the_local_readers(self):
        # Paused: the newest frame stays; the forwarder's copy of it arrives.
        lf = self.local.latest(copy=True)
        rf = until("the local newest frame arrives", lambda: self.seg.wait_newer(lf.seq - 1, 1.0))
        self.assertEqual(self.local.latest().seq, lf.seq, "the paused solver published again")
        assert_same_frame(self, rf, lf, FIELDS)
        c = self.seg.latest(copy=True)
        self.assertTrue(c.owned and c.positions.flags.writeable)
        self.assertTrue(same_bits(c.positions, lf.positions))

    def test_5_quantized_positions_are_within_half_a_step(self):
        lf = self.local.latest(copy=True)
        with p.connect(LIVE_ADDR, token=TOKEN, positions="quantized16", timeout=T) as q:
            qf = until("the quantised frame", lambda: q.wait_newer(lf.seq - 1, 1.0))
            self.assertEqual(qf.seq, lf.seq)
            self.assertIsNone(qf.velocities)  # positions only
            st = q.static
        lo, hi = np.array(st.world_min, np.float32), np.array(st.world_max, np.float32)
        half_step = (hi - lo) / 131070 * 1.01 + 1e-7
        err = np.abs(qf.positions - np.clip(lf.positions, lo, hi))
        self.assertTrue(np.all(err <= half_step), (err.max(axis=0), half_step))

    def test_5b_max_particles_sends_every_kth_named_by_id(self):
        lf = self.local.latest(copy=True)
        n = lf.particle_count
        k = 3
        with p.connect(LIVE_ADDR, token=TOKEN, fields=FIELDS, max_particles=-(-n // k), timeout=T) as q:
            sf = until("the subsampled frame", lambda: q.wait_newer(lf.seq - 1, 1.0))
            self.assertEqual(sf.seq, lf.seq)
            self.assertEqual((sf.stride, sf.frame_particle_count), (k, n))
            self.assertEqual(sf.particle_count, len(range(0, n, k)))
            np.testing.assert_array_equal(sf.particle_ids, lf.particle_ids[::k])
            for name in FIELDS:
                self.assertTrue(same_bits(getattr(sf, name), getattr(lf, name)[::k]), name)
            np.testing.assert_array_equal(sf.species, lf.species[::k])
            np.testing.assert_array_equal(sf.radii, lf.radii[::k])
        with self.assertRaises(p.InvalidArgument):
            p.connect(LIVE_ADDR, token=TOKEN, max_particles=-1, timeout=T)

    def test_6_wait_newer_times_out_while_paused(self):
        seq = self.seg.newest_seq
        t = time.monotonic()
        self.assertIsNone(self.seg.wait_newer(seq, 0.5))
        self.assertGreaterEqual(time.monotonic() - t, 0.45)

    def test_7_resume_and_refresh(self):
        seq = self.seg.newest_seq
        self.assertTrue(self.seg.send("resume", timeout=10).done)
        self.assertIsNotNone(self.seg.wait_newer(seq, T))
        until("the forwarder reports running", lambda: self.seg.status().state == "running")
        out = self.seg.send(p.SetRefresh(sim_seconds=0.001), timeout=10)
        self.assertTrue(out.done, out)
        with self.assertRaises(p.InvalidCommand):
            self.seg.send("refresh 0")  # refused here, before anything is sent

    def test_8_stop_ends_the_run(self):
        self.assertTrue(self.seg.send("stop", timeout=10).done)

        def ended():
            f = self.seg.wait_newer(self.seg.newest_seq, 1.0)
            return f is None and self.seg.status().over

        until("the run ends", ended)
        # Finished, or "unknown" once the solver removed its segment and the forwarder lost it.
        self.assertIn(self.seg.status().state, ("finished", "unknown"))


@needs_set
class ChangingSet(unittest.TestCase):
    def test_ids_species_and_radii_arrive_as_locally(self):
        local = p.attach(SET_SEGMENT)
        with p.connect(SET_ADDR, fields=("positions", "velocities"), timeout=T) as seg:
            st = seg.static
            assert_same_static(self, st, local.static)
            self.assertEqual([s.name for s in st.species], ["fine", "coarse"])
            self.assertEqual([m[0] for m in st.meshes], ["floor", "gate"])
            rf, lf = seg.latest(), local.latest(copy=True)
            assert_same_frame(self, rf, lf, ("positions", "velocities"))
            # The inflow has added only part of the planned particles: the frame holds those,
            # named by id, and species and radii follow the ids.
            self.assertLess(rf.particle_count, len(st.ids))
            self.assertIsNotNone(rf._frame_ids)
            np.testing.assert_array_equal(rf.species, st.species_ids[rf.particle_ids])
            self.assertEqual(set(np.unique(rf.species)), {0, 1})
            self.assertEqual(len(rf.bodies), 2)
            # The run is over: nothing newer, at once.
            t = time.monotonic()
            self.assertIsNone(seg.wait_newer(rf.seq, T))
            self.assertLess(time.monotonic() - t, 2.0)
            self.assertTrue(seg.status().over)
        local.close()


if __name__ == "__main__":
    unittest.main()
