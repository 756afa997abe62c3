"""python/tests/conftest.py: shared fixtures: the package on sys.path, unique
/dev/shm names removed after each test, a free loopback port."""
import os
import socket
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import shmfilter  # noqa: E402


@pytest.fixture
def segname():
    name = f"shmf-test-{os.getpid()}-py-{uuid.uuid4().hex[:8]}"
    yield name
    try:
        os.unlink(f"/dev/shm/{name}")
    except FileNotFoundError:
        pass


@pytest.fixture
def seg(segname):
    with shmfilter.Segment.create(segname, size=16 << 20) as s:
        yield s


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
