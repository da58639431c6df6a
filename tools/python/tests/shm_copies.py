"""Shared by the test modules: the segment python_reader.rs made, and copies of it under new
names (their owner is the Rust test process, so they look alive; nobody answers their
commands), removed after each test."""

import os
import shutil
import subprocess
import sys
import unittest

SEG = os.environ.get("PSHM_TEST_SEGMENT")
EXPECTED = os.environ.get("PSHM_TEST_EXPECTED")
needs_segment = unittest.skipUnless(SEG, "needs a segment from python_reader.rs")
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(PACKAGE_DIR))


class Copies(unittest.TestCase):
    """Base class: ``self.copy(tag, data)`` writes /dev/shm/SEG-tag; everything made at a
    name with ``self.path(tag)`` is removed after the test."""

    _image = None

    @classmethod
    def image(cls):
        if Copies._image is None:
            with open(f"/dev/shm/{SEG}", "rb") as f:
                Copies._image = f.read()
        return Copies._image

    def setUp(self):
        self.made = []

    def tearDown(self):
        for path in reversed(self.made):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)

    def path(self, tag):
        name = f"{SEG}-{tag}"
        path = f"/dev/shm/{name}"
        self.made.append(path)
        return name, path

    def copy(self, tag, data=None, mode=0o600):
        name, path = self.path(tag)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(self.image() if data is None else data)
        os.chmod(path, mode)
        return name


def python(code, *args):
    """Starts ``code`` (with ``args`` as sys.argv[1:]) in a fresh interpreter, this one: it
    imports the particle_shm this test imports (the installed package); stdin, stdout and stderr
    are text pipes."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
