"""The protocol changes of the hardening issue, on the Python side:

* command records carry ``deadline_mono_ns`` (now + the sender's timeout); the solver drops a
  command it takes after the deadline; an answer nobody read is reclaimed 2 s after the deadline
  (10 s after the acknowledgement without one); state 4 (Withdrawn) is not free;
* ``frame_waiters``/``ack_waiters`` hold a lease (monotonic ms + 300, u32) stored before every
  futex sleep of at most 200 ms, instead of a count that a waiter killed asleep leaked.
"""

import ctypes
import os
import threading
import time
import unittest

import particle_shm as p
from particle_shm import _send, _sys, command, layout as L
from shm_copies import SEG, Copies, needs_segment

NOT_APPLIED = "the command was not applied unless the solver took it before the deadline"


def lease_ahead_ms(lease):
    """(lease - now) in ms as a signed 32-bit number, as the writer computes it."""
    d = (lease - _sys.now_ms()) & 0xFFFFFFFF
    return d - 2**32 if d >= 2**31 else d


def records(seg):
    return [_send._record(seg, i) for i in range(seg.capacities.command_records)]


class FutexSleepIsCapped(unittest.TestCase):
    def test_a_single_futex_wait_never_sleeps_more_than_200_ms(self):
        word = ctypes.c_uint32(7)
        t = time.monotonic()
        self.assertTrue(_sys.futex_wait(ctypes.addressof(word), 7, 5.0))
        self.assertLess(time.monotonic() - t, 0.5)

    def test_lease_arithmetic_wraps_like_the_rust_writer(self):
        self.assertTrue(0 < lease_ahead_ms(_sys.lease_value()) <= _sys.LEASE_MS)
        self.assertTrue(_sys.lease_active(_sys.lease_value()))
        self.assertFalse(_sys.lease_active((_sys.now_ms() - 1) & 0xFFFFFFFF))
        self.assertFalse(hasattr(_sys, "atomic_add_u32"))  # no counter left to add to


@needs_segment
class Deadlines(Copies):
    def test_a_timed_out_command_carries_its_deadline_and_says_it_was_not_applied(self):
        seg = p.attach(self.copy("deadline"))  # nobody answers a copy
        t = _sys.monotonic_ns()
        with self.assertRaises(p.CommandTimeout) as cm:
            seg.send("pause", timeout=0.3)
        self.assertIn(NOT_APPLIED, str(cm.exception))
        self.assertIn("'pause' within 0.3 s", str(cm.exception))
        mine = [r for r in records(seg) if r.state == L.PENDING and r.client_id == os.getpid()]
        self.assertEqual(len(mine), 1)
        r = mine[0]
        self.assertAlmostEqual((r.deadline_mono_ns - r.submit_mono_ns) * 1e-9, 0.3, delta=0.01)
        self.assertGreaterEqual(r.submit_mono_ns, t)
        self.assertEqual(r._reserved, 0)
        # The wait ended at the record's deadline, not before: the solver would drop it now.
        self.assertGreaterEqual(_sys.monotonic_ns(), r.deadline_mono_ns)

    def test_acked_records_are_reclaimed_after_deadline_plus_grace_and_withdrawn_ones_never(self):
        seg = p.attach(self.copy("reclaim"))
        n = seg.capacities.command_records

        def fill(state, deadline_from_now_s, acked_ago_s):
            now = _sys.monotonic_ns()
            for r in records(seg):
                r.state = state
                r.deadline_mono_ns = 0 if deadline_from_now_s is None else now + int(deadline_from_now_s * 1e9)
                r.ack_mono_ns = now - int(acked_ago_s * 1e9)

        # Acked just now, but the sender's deadline passed 3 s ago (> 2 s grace): reclaimed.
        fill(L.ACKED, -3.0, 0.0)
        with self.assertRaises(p.CommandTimeout):
            seg.send("pause", timeout=0.05)
        # Its sender may still be reading it (deadline 1 s ago, or ahead): not reclaimed.
        for ahead in (-1.0, 60.0):
            fill(L.ACKED, ahead, 60.0)
            with self.assertRaises(p.TableFull) as cm:
                seg.send("pause", timeout=0.05)
            self.assertIn(
                f"the command table is full: of {n} records, 0 wait for the solver and {n} hold "
                "answers their senders have not read yet",
                str(cm.exception),
            )
        # No deadline (an older sender): the old rule, acknowledged more than 10 s ago.
        fill(L.ACKED, None, 11.0)
        with self.assertRaises(p.CommandTimeout):
            seg.send("pause", timeout=0.05)
        fill(L.ACKED, None, 5.0)
        with self.assertRaises(p.TableFull):
            seg.send("pause", timeout=0.05)
        # Withdrawn (state 4) is not free, whatever its times say.
        fill(L.WITHDRAWN, -60.0, 60.0)
        with self.assertRaises(p.TableFull) as cm:
            seg.send("pause", timeout=0.05)
        self.assertIn(f"of {n} records, 0 wait for the solver and 0 hold answers", str(cm.exception))


@needs_segment
class TheRustSolverHonoursTheDeadline(unittest.TestCase):
    """On the live segment, whose solver python_reader.rs plays with the Rust Publisher."""

    def test_a_command_taken_after_its_deadline_is_dropped_not_applied(self):
        seg = p.attach(SEG)
        client = os.getpid()
        r, deadline = _send.submit(seg, command.encode("pause"), client, 10**9, -10**9)
        self.assertLess(deadline, _sys.monotonic_ns())
        seen, t = set(), time.monotonic()
        while time.monotonic() - t < 5:
            seen.add(r.state)
            if r.state == L.FREE:
                break
            time.sleep(0.0005)
        self.assertEqual(r.state, L.FREE, f"states seen: {seen}")
        self.assertNotIn(L.ACKED, seen)
        self.assertEqual(r.ack_len, 0)
        # A command within its deadline is still answered.
        self.assertTrue(seg.send("pause", timeout=10).done)


@needs_segment
class Leases(Copies):
    def sample_while(self, word, action):
        """Runs ``action`` in a thread and samples the header word every 10 ms meanwhile."""
        thread = threading.Thread(target=action)
        samples = []
        thread.start()
        time.sleep(0.05)
        while thread.is_alive():
            samples.append(lease_ahead_ms(getattr(self.seg.header, word)))
            time.sleep(0.01)
        thread.join()
        return samples[:-3]  # the last ones may be after the wait ended

    def test_a_frame_waiter_keeps_a_running_lease_while_it_waits(self):
        self.seg = p.attach(self.copy("frame-lease"))
        seq = self.seg.newest_seq
        samples = self.sample_while("frame_waiters", lambda: self.seg.wait_newer(seq, 1.0))
        self.assertGreater(len(samples), 40)
        for ahead in samples:
            self.assertTrue(0 < ahead <= _sys.LEASE_MS, samples)

    def test_a_command_sender_keeps_a_running_lease_while_it_waits(self):
        self.seg = p.attach(self.copy("ack-lease"))

        raised = []

        def send():
            try:
                self.seg.send("pause", timeout=1.0)
            except p.ParticleShmError as e:
                raised.append(e)

        samples = self.sample_while("ack_waiters", send)
        self.assertIsInstance(raised[0], p.CommandTimeout)
        self.assertGreater(len(samples), 40)
        for ahead in samples:
            self.assertTrue(0 < ahead <= _sys.LEASE_MS, samples)
        # Nothing to undo when the wait ends: the lease runs out by itself.
        time.sleep(0.35)
        self.assertFalse(_sys.lease_active(self.seg.header.ack_waiters))


if __name__ == "__main__":
    unittest.main()
