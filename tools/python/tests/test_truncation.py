"""Regression: another process shrinks the segment (``ftruncate``) while it is mapped. Touching a
page past the new end raises SIGBUS, which used to kill the reading process; every read now
checks the object's size first and raises SegmentTruncated.

The reader runs in a child process, so that a SIGBUS shows as a negative return code instead of
killing the test runner.
"""

import json
import os
import signal
import unittest

import particle_shm as p
from shm_copies import Copies, needs_segment, python

# Attaches, reads once (fine), says "ready", waits for the parent to truncate the object, then
# tries every kind of read and prints one JSON line per attempt.
CHILD = r"""
import json, sys
import particle_shm as p

seg = p.attach(sys.argv[1])
view = seg.latest()
try:
    seg.read_static()
except p.NoStaticData:
    pass  # a segment without static data (shm-fixture's) still tests the check
seq = seg.newest_seq
print("ready", flush=True)
sys.stdin.readline()
attempts = {
    "latest": lambda: seg.latest(),
    "latest_copy": lambda: seg.latest(copy=True),
    "read_static": lambda: seg.read_static(),
    "status": lambda: seg.status(),
    "newest_seq": lambda: seg.newest_seq,
    "wait_newer": lambda: seg.wait_newer(seq, 0.1),
    "send": lambda: seg.send("pause", timeout=0.2),
    "view_valid": lambda: view.valid(),
}
for op, attempt in attempts.items():
    try:
        attempt()
        out = {"op": op, "error": None}
    except Exception as e:
        out = {"op": op, "error": type(e).__name__, "message": str(e),
               "size": getattr(e, "size", None), "expected": getattr(e, "expected", None)}
    print(json.dumps(out), flush=True)
"""


@needs_segment
class Truncation(Copies):
    def read_after_truncating_to(self, tag, size):
        name = self.copy(tag)
        path = f"/dev/shm/{name}"
        full = os.path.getsize(path)
        child = python(CHILD, name)
        try:
            if child.stdout.readline().strip() != "ready":
                self.fail(f"the reader did not start:\n{child.communicate(timeout=60)[1]}")
            os.truncate(path, size)  # as another process would, while the child has it mapped
            child.stdin.write("go\n")
            child.stdin.flush()
            out, err = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        self.assertEqual(
            child.returncode,
            0,
            f"reader died ({_signal_name(child.returncode)}) after truncation to {size} bytes:\n{err}",
        )
        results = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(len(results), 8, out + err)
        for r in results:
            self.assertEqual(r["error"], "SegmentTruncated", r)
            self.assertEqual((r["size"], r["expected"]), (size, full), r)
            self.assertIn(
                f"segment {name!r} was truncated to {size} bytes by another process (expected {full})",
                r["message"],
            )

    def test_truncated_to_nothing(self):
        self.read_after_truncating_to("trunc0", 0)

    def test_truncated_inside_the_frame_slots(self):
        # The header and static section survive; the slots (a page past the plan's slot start)
        # do not.
        plan = p.attach(self.copy("plan")).plan
        cut = (plan["slots_offset"] // 4096 + 1) * 4096
        self.assertLess(cut, plan["total_size"])
        self.read_after_truncating_to("truncslots", cut)


def _signal_name(rc):
    if rc is not None and rc < 0:
        return f"killed by {signal.Signals(-rc).name}"
    return f"exit status {rc}"


if __name__ == "__main__":
    unittest.main()
