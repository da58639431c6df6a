"""Regression: ``send()`` validates commands exactly as the Rust side does (``Command::parse`` and
``Command::validate`` in shm-protocol/src/command.rs, bounds in shm-protocol/src/limits.rs), with
the same messages, before anything is written to the segment.

Before: ``refresh 1e-300`` or ``refresh 1e300`` were sent (the solver's schedule never advances
or overflows), ``refresh-wall 0.5`` was silently sent as 0 (off), ``SetRefresh()`` was sent empty.
"""

import math
import os
import re
import struct
import unittest

import particle_shm as p
from particle_shm import _send, _sys, command, limits
from shm_copies import REPO, Copies, needs_segment

RUST = {
    "limits": os.path.join(REPO, "shm-protocol/src/limits.rs"),
    "command": os.path.join(REPO, "shm-protocol/src/command.rs"),
    "notify": os.path.join(REPO, "shm-protocol/src/notify.rs"),
}

# (command, the Rust message after "invalid command: ").
REJECTED = [
    ("refresh 1e-300", "refresh must be between 1e-12 and 1e9 simulated seconds, got 1e-300"),
    ("refresh 2e9", "refresh must be between 1e-12 and 1e9 simulated seconds, got 2e9"),
    ("refresh 0", "refresh must be between 1e-12 and 1e9 simulated seconds, got 0e0"),
    ("refresh -0.5", "refresh must be between 1e-12 and 1e9 simulated seconds, got -5e-1"),
    ("refresh nan", "refresh must be a finite number of simulated seconds, got NaN"),
    ("refresh inf", "refresh must be a finite number of simulated seconds, got inf"),
    ("refresh abc", '`refresh` expects a number, got "abc"'),
    ("refresh 1_0", '`refresh` expects a number, got "1_0"'),
    ("refresh", "`refresh` needs a value"),
    ("refresh 0.1 0.2", 'unexpected extra words after "refresh"'),
    ("refresh-wall 0.5", "refresh-wall must be a whole number of milliseconds (0 turns it off), got 0.5"),
    ("refresh-wall -1", "refresh-wall must be a whole number of milliseconds (0 turns it off), got -1"),
    ("refresh-wall 86400001", "refresh-wall must be 0 (off) or at most 86400000 ms (one day), got 86400001"),
    ("refresh-wall 1e300", "refresh-wall must be 0 (off) or at most 86400000 ms (one day), got 1" + "0" * 300),
    ("pause now", 'unexpected extra words after "pause"'),
    ("explode", 'unknown command "explode"; known: pause, resume, stop, update, checkpoint'),
    ("", "no command given"),
    (p.SetRefresh(), "refresh: give a simulated interval, a wall-clock interval or both"),
    (p.SetRefresh(sim_seconds=math.nan), "refresh must be a finite number of simulated seconds, got NaN"),
    (p.SetRefresh(sim_seconds=1e-13), "refresh must be between 1e-12 and 1e9 simulated seconds, got 1e-13"),
    (p.SetRefresh(sim_seconds="0.1"), "refresh must be a number of simulated seconds, got '0.1'"),
    (p.SetRefresh(wall_ms=-1), "refresh-wall must be a whole number of milliseconds (0 turns it off), got -1"),
    (p.SetRefresh(wall_ms=2**64), f"refresh-wall must be 0 (off) or at most 86400000 ms (one day), got {2**64}"),
    (p.SetRefresh(wall_ms=2.5), "refresh-wall must be a whole number of milliseconds (0 turns it off), got 2.5"),
]


class CommandLimits(unittest.TestCase):
    def test_out_of_range_commands_are_refused_with_the_rust_messages(self):
        for cmd, message in REJECTED:
            with self.assertRaises(p.InvalidCommand, msg=cmd) as cm:
                command.encode(cmd)
            self.assertIn(f"invalid command: {message}", str(cm.exception))
            self.assertIsInstance(cm.exception, ValueError)
            self.assertIsInstance(cm.exception, p.CommandError)

    def test_the_bounds_themselves_are_accepted(self):
        sim = lambda s: b"\x00\x01" + struct.pack("<d", s) + b"\x00"
        self.assertEqual(command.encode("refresh 1e-12"), sim(1e-12))
        self.assertEqual(command.encode("refresh 1e9"), sim(1e9))
        self.assertEqual(command.encode("refresh-wall 0"), b"\x00\x00\x01\x00")
        self.assertEqual(command.encode("refresh-wall 86400000"), b"\x00\x00\x01\xfc" + struct.pack("<I", 86_400_000))
        self.assertEqual(command.encode(p.SetRefresh(wall_ms=250.0)), b"\x00\x00\x01\xfa")
        self.assertEqual(command.encode("update-now"), b"\x01")

    def test_constants_match_the_rust_sources(self):
        def const(file, name):
            with open(RUST[file]) as f:
                m = re.search(rf"pub const {name}: \w+ = ([^;]+);", f.read())
            self.assertIsNotNone(m, f"{name} in {RUST[file]}")
            return m.group(1)

        num = lambda file, name: const(file, name).replace("_", "")

        self.assertEqual(float(num("limits", "SIM_INTERVAL_MIN_S")), limits.SIM_INTERVAL_MIN_S)
        self.assertEqual(float(num("limits", "SIM_INTERVAL_MAX_S")), limits.SIM_INTERVAL_MAX_S)
        self.assertEqual(int(num("limits", "WALL_INTERVAL_MAX_MS")), limits.WALL_INTERVAL_MAX_MS)
        self.assertEqual(float(num("limits", "WALL_DURATION_MAX_S")), limits.WALL_DURATION_MAX_S)
        self.assertEqual(const("command", "RECLAIM_GRACE"), "Duration::from_secs(2)")
        self.assertEqual(_send.RECLAIM_GRACE_NS, 2 * 10**9)
        self.assertEqual(const("command", "ABANDONED_AFTER"), "Duration::from_secs(10)")
        self.assertEqual(_send.ABANDONED_AFTER_NS, 10 * 10**9)
        self.assertEqual(int(num("notify", "LEASE_MS")), _sys.LEASE_MS)
        self.assertEqual(const("notify", "SLEEP_SLICE"), "Duration::from_millis(200)")
        self.assertEqual(_sys.SLEEP_SLICE, 0.2)

    def test_rust_float_formatting(self):
        for x, display, exp in [
            (0.01, "0.01", "1e-2"),
            (-1.0, "-1", "-1e0"),
            (2.5e10, "25000000000", "2.5e10"),
            (1e-12, "0.000000000001", "1e-12"),
            (-0.0, "-0", "-0e0"),
            (math.inf, "inf", "inf"),
        ]:
            self.assertEqual((limits.rust_display(x), limits.rust_exp(x)), (display, exp), x)


@needs_segment
class InvalidCommandsLeaveTheSegmentAlone(Copies):
    def test_nothing_is_written_before_the_command_is_refused(self):
        name = self.copy("limits")
        seg = p.attach(name)
        before = read(name)
        for cmd, _ in REJECTED:
            with self.assertRaises(p.InvalidCommand, msg=cmd):
                seg.send(cmd, timeout=0.3)
        for timeout in (math.nan, math.inf, -1.0, 0.0, 1e6, "5"):
            with self.assertRaises(p.InvalidArgument, msg=timeout) as cm:
                seg.send("pause", timeout=timeout)
            self.assertIn("send: timeout must be between 0.001 and 86400 seconds", str(cm.exception))
        self.assertEqual(read(name), before)


def read(name):
    with open(f"/dev/shm/{name}", "rb") as f:
        return f.read()


if __name__ == "__main__":
    unittest.main()
