"""Regression: every failure to attach raises the package's own exception, with a message naming
the segment and what is wrong, as the Rust ``AttachError`` does (shm-protocol/src/error.rs).

Before: a symbolic link at /dev/shm/NAME was followed (every Rust tool refuses it: glibc's
``shm_open`` opens with O_NOFOLLOW), a directory raised a raw IsADirectoryError, a FIFO was
reported as "truncated (0 bytes)", permission errors did not say whose the segment was, and an
invalid name did not say what was wrong with it.
"""

import ctypes
import ctypes.util
import errno
import json
import os
import unittest

import particle_shm as p
from shm_copies import SEG, Copies, needs_segment

NOBODY = 65534


def shm_open_errno(name):
    """errno of libc ``shm_open("/name", O_RDONLY)``, the call the Rust tools attach with (the
    shared_memory crate); 0 when it opened."""
    lib = ctypes.CDLL(None, use_errno=True)
    if not hasattr(lib, "shm_open"):
        lib = ctypes.CDLL(ctypes.util.find_library("rt"), use_errno=True)
    fd = lib.shm_open(f"/{name}".encode(), os.O_RDONLY, 0)
    if fd >= 0:
        os.close(fd)
        return 0
    return ctypes.get_errno()


def as_other_user(action):
    """Runs ``action()`` in a forked child that dropped to uid/gid 65534 (we are root here, for
    whom permissions are not checked); returns what it returned (JSON-able)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            out = {"ok": action()}
        except BaseException as e:  # the child must always exit here, never return
            out = {"error": type(e).__name__, "message": str(e)}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@needs_segment
class AttachErrors(Copies):
    def assert_attach_raises(self, name, cls, *parts):
        with self.assertRaises(p.ParticleShmError) as cm:
            p.attach(name)
        e = cm.exception
        self.assertIsInstance(e, cls, f"{type(e).__name__}: {e}")
        for part in parts:
            self.assertIn(part, str(e))
        return e

    def test_a_symlink_is_refused_as_shm_open_refuses_it(self):
        target = self.copy("target")
        name, path = self.path("link")
        os.symlink(f"/dev/shm/{target}", path)
        self.assertEqual(p.attach(target).name, target)  # the target itself is a good segment
        self.assertEqual(shm_open_errno(name), errno.ELOOP)  # what every Rust tool gets
        e = self.assert_attach_raises(
            name, p.NotAnObject, f"/dev/shm/{name} is a symbolic link", "never opened through links"
        )
        self.assertNotIsInstance(e, OSError)

    def test_a_directory_is_not_reported_as_truncated(self):
        name, path = self.path("dir")
        os.mkdir(path)
        e = self.assert_attach_raises(name, p.NotAnObject, f"/dev/shm/{name} is a directory")
        self.assertNotIn("bytes", str(e))
        self.assertNotIsInstance(e, IsADirectoryError)

    def test_a_fifo_is_a_special_file_and_does_not_block(self):
        name, path = self.path("fifo")
        os.mkfifo(path, 0o600)
        e = self.assert_attach_raises(name, p.NotAnObject, "is a special file")
        self.assertNotIn("0 bytes", str(e))

    def test_missing_empty_and_short_objects(self):
        e = self.assert_attach_raises(f"{SEG}-absent", p.SegmentNotFound, f"{SEG}-absent", "shmctl list")
        self.assertIsInstance(e, FileNotFoundError)
        empty = self.copy("empty", b"")
        self.assert_attach_raises(empty, p.Truncated, repr(empty), "is empty (0 bytes)")
        short = self.copy("short", self.image()[:100])
        self.assert_attach_raises(short, p.Truncated, repr(short), "(100 bytes; a header alone is 536)")

    def test_wrong_magic_and_version_name_the_segment(self):
        bad = self.copy("magic", b"XSHMSEG\0" + self.image()[8:])
        self.assert_attach_raises(bad, p.NotOurSegment, repr(bad), "magic 58 53 48 4d")
        img = bytearray(self.image())
        img[8:12] = (7).to_bytes(4, "little")
        old = self.copy("version", bytes(img))
        self.assert_attach_raises(old, p.VersionMismatch, repr(old), "ABI version 7")
        # A version-1 segment (made by an older solver) names both versions and what to do.
        img[8:12] = (1).to_bytes(4, "little")
        v1 = self.copy("version1", bytes(img))
        e = self.assert_attach_raises(v1, p.VersionMismatch, "ABI version 1", "reads version 2")
        self.assertIn("older", str(e))

    def test_an_object_of_another_user_says_whose_it_is(self):
        if os.geteuid() != 0:
            return  # only root can make a file owned by someone else
        bad = self.copy("foreign", b"not ours" * 100, mode=0o644)
        os.chown(f"/dev/shm/{bad}", NOBODY, NOBODY)
        self.assert_attach_raises(
            bad, p.NotOurSegment, f"segment {bad!r} (it belongs to uid {NOBODY}) is not a particle-shm segment"
        )

    def test_invalid_names_say_what_is_wrong(self):
        for bad, why in [
            ("", "the name is empty"),
            (".hidden", "may not start with '.'"),
            ("a/b", "contains '/'"),
            ("x" * 201, "201 bytes long; at most 200"),
            (None, "a segment name is a str"),
        ]:
            with self.assertRaises(p.InvalidName, msg=bad) as cm:
                p.attach(bad)
            self.assertIn(why, str(cm.exception))
            self.assertIsInstance(cm.exception, ValueError)

    def test_permission_denied_says_whose_segment_it_is(self):
        root = os.geteuid() == 0
        # Root is never refused: a child drops to nobody; otherwise our own file loses its bits.
        name = self.copy("private", mode=0o600 if root else 0o000)
        owner = os.stat(f"/dev/shm/{name}").st_uid

        def attach():
            p.attach(name)

        out = as_other_user(attach) if root else _catch(attach)
        self.assertEqual(out.get("error"), "PermissionDenied", out)
        for part in (repr(name), f"belongs to uid {owner}", "owner-only unless created with group access"):
            self.assertIn(part, out["message"])

    def test_a_readable_segment_of_another_user_says_whose_it_is_when_sending(self):
        root = os.geteuid() == 0
        name = self.copy("readable", mode=0o644 if root else 0o444)
        owner = os.stat(f"/dev/shm/{name}").st_uid

        def send():
            seg = p.attach(name)
            assert not seg.writable and seg.latest() is not None
            seg.send("pause", timeout=0.2)

        out = as_other_user(send) if root else _catch(send)
        self.assertEqual(out.get("error"), "CommandError", out)
        self.assertIn(f"belongs to uid {owner}", out["message"])
        self.assertIn("read-only", out["message"])


def _catch(action):
    try:
        return {"ok": action()}
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e)}


if __name__ == "__main__":
    unittest.main()
