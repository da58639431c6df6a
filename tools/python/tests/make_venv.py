#!/usr/bin/env python3
"""Makes the virtual environment the Rust tests run the Python tests in, installing this package
the way a user does (``pip install tools/python``), offline:

    python3 tools/python/tests/make_venv.py DIR      # prints the interpreter, DIR/bin/python

1. ``python3 -m venv --system-site-packages --without-pip DIR``: numpy, pip, setuptools and
   wheel come from the system (``.ci/run`` installs them); no pip is copied in, which keeps
   this step at a tenth of a second.
2. ``DIR/bin/python -m pip install --no-deps --no-build-isolation --no-index`` of a copy of
   tools/python: nothing is downloaded, and the build's ``build/`` and ``*.egg-info`` land in the
   copy, not in the checkout, so concurrent test binaries cannot collide.
3. Checks that ``particle_shm`` now imports from DIR, not from the checkout.

Directories ``python-venv-*-PID`` beside DIR whose process is gone are removed first (left by
earlier test runs; the Rust tests name theirs after their own pid).
"""

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STALE = re.compile(r"python-venv-.*-(\d+)$")


def fail(message):
    sys.exit(f"make_venv: {message}")


def check_prerequisites():
    missing = [m for m in ("numpy", "setuptools", "wheel", "pip") if importlib.util.find_spec(m) is None]
    if missing:
        fail(
            f"{sys.executable} lacks {', '.join(missing)}: `{sys.executable} -m pip install numpy "
            "'setuptools>=61' wheel` (what .ci/run does) so the package builds and installs offline"
        )
    version = importlib.metadata.version("setuptools")
    if int(version.split(".")[0]) < 61:
        fail(f"setuptools {version} cannot read pyproject.toml: install setuptools>=61")


def prune_stale(parent):
    for entry in os.listdir(parent):
        m = STALE.match(entry)
        if not m:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
        except PermissionError:
            pass  # alive, another user's


def run(args, what):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        fail(f"{what} failed ({' '.join(args)}):\n{r.stdout}")


def main(target):
    check_prerequisites()
    target = os.path.abspath(target)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    prune_stale(parent)
    shutil.rmtree(target, ignore_errors=True)
    run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", target], "creating the venv")
    python = os.path.join(target, "bin", "python")
    with tempfile.TemporaryDirectory(prefix="particle-shm-src-") as src:
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(os.path.join(PACKAGE_DIR, name), src)
        shutil.copytree(
            os.path.join(PACKAGE_DIR, "particle_shm"),
            os.path.join(src, "particle_shm"),
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
        run(
            [python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", src],
            "pip install",
        )
    r = subprocess.run(
        [python, "-c", "import particle_shm; print(particle_shm.__file__)"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=parent,
    )
    if r.returncode != 0 or not r.stdout.strip().startswith(target + os.sep):
        fail(f"particle_shm does not import from {target}: {r.stdout.strip()}")
    print(python)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_venv.py DIR")
    main(sys.argv[1])
