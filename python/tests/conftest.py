"""python/tests/conftest.py: shared fixtures: the package on sys.path, unique
/dev/shm names removed after each test, a free loopback port."""
import glob
import os
import random
import socket
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
# SHMF_TEST_INSTALLED=1: test the package as installed (a venv's pip install ./python),
# never the source tree; else the source tree (python/shmfilter: ctypes, or the compiled
# module when the CMake build staged one: SHMF_PYTHON_PATH, tests/servers/CMakeLists.txt).
if os.environ.get("SHMF_TEST_INSTALLED") == "1":
    sys.path = [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(os.path.dirname(HERE))]
else:
    sys.path.insert(0, os.environ.get("SHMF_PYTHON_PATH") or os.path.dirname(HERE))

import shmfilter  # noqa: E402

if os.environ.get("SHMF_TEST_INSTALLED") == "1":
    assert not os.path.realpath(shmfilter.__file__).startswith(os.path.realpath(os.path.dirname(HERE)) + os.sep), \
        f"SHMF_TEST_INSTALLED=1 but shmfilter comes from the source tree: {shmfilter.__file__}"
if os.environ.get("SHMF_TEST_BINDING"):
    assert shmfilter.BINDING == os.environ["SHMF_TEST_BINDING"], \
        f"the tests want binding {os.environ['SHMF_TEST_BINDING']}, the import chose {shmfilter.BINDING} " \
        f"({getattr(shmfilter, '_NATIVE_WHY', '')})"


@pytest.fixture
def segname():
    name = f"shmf-test-{os.getpid()}-py-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        os.unlink(f"/dev/shm/{name}")
    except FileNotFoundError:
        pass
    for lock in glob.glob(f"/dev/shm/{name}.lock-*"):  # its lock file (docs/SECURITY.md)
        os.unlink(lock)


@pytest.fixture
def seg(segname):
    with shmfilter.Segment.create(segname, size=16 << 20) as s:
        yield s


def free_port():
    """A free loopback port below the ephemeral range (where no client
    connection of a parallel test can be holding it)."""
    try:
        lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        lo = 32768
    lo = lo if lo > 12000 else 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10000, lo)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port below the ephemeral range")
