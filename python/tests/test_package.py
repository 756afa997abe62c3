"""python/tests/test_package.py: what issue #25 asks of the package, in either binding:
options checked on open, the one empty-key rule, batches over buffers (numpy,
array('Q')) without copies, out= buffers, fork checks, docstrings, typing marker."""
import array
import inspect
import os

import pytest

import shmfilter

T0 = 1_700_000_000


def test_binding_is_said_and_version_is_set():
    assert shmfilter.BINDING in ("compiled", "ctypes")
    assert (shmfilter._native is not None) == (shmfilter.BINDING == "compiled")
    assert shmfilter.__version__ == shmfilter.version()
    assert os.path.exists(os.path.join(os.path.dirname(shmfilter.__file__), "py.typed"))


def test_window_options_checked_on_open(seg):
    seg.window("freq", create=True, expected_per_bucket=1000, variant="cuckoo", retention=7).close()
    # the example: returned the cuckoo window silently before
    with pytest.raises(shmfilter.OptionsMismatchError) as e:
        seg.window("freq", create=True, variant="bloom", retention=3)
    assert e.value.code == shmfilter.EEXISTS
    assert "variant='cuckoo'" in str(e.value) and "retention=7" in str(e.value) and "variant='bloom'" in str(e.value)
    assert "shmtool drop" in str(e.value)
    with pytest.raises(shmfilter.OptionsMismatchError):
        seg.window("freq", retention=3)
    with pytest.raises(shmfilter.OptionsMismatchError):
        seg.window("freq", variant="bloom")
    # what exists, or no options: opens
    with seg.window("freq", create=True, variant="cuckoo", retention=7) as w:
        assert w.retention == 7
    with seg.window("freq") as w:
        assert w.stats()["variant"] == "cuckoo"
    # a new window with variant left out: stamped, the default
    with seg.window("w2", create=True, expected_per_bucket=1000) as w:
        assert w.stats()["variant"] == "stamped"


def test_other_kinds_options_checked_on_open(seg):
    seg.bloom("b", capacity=1000, error=0.01, create=True).close()
    seg.bloom("b", capacity=1000, error=0.01).close()
    with pytest.raises(shmfilter.OptionsMismatchError):
        seg.bloom("b", capacity=2000, create=True)
    with pytest.raises(shmfilter.OptionsMismatchError):
        seg.bloom("b", error=0.001)
    seg.set("s", capacity=500, create=True).close()
    seg.set("s").close()
    with pytest.raises(shmfilter.OptionsMismatchError):
        seg.set("s", capacity=501)
    seg.uv("u", create=True, retention=7).close()
    with pytest.raises(shmfilter.OptionsMismatchError):
        seg.uv("u", retention=30)


def test_empty_key_refused_everywhere(seg):
    b = seg.bloom("b", capacity=1000, create=True)
    c = seg.cuckoo("c", capacity=1000, create=True)
    s = seg.set("s", capacity=1000, create=True)
    h = seg.hll("h", create=True)
    u = seg.uv("u", create=True)
    w = seg.window("w", create=True, expected_per_bucket=1000, variant="cuckoo")
    w.set_now(T0)
    calls = [b.add, b.contains, b.mark, c.add, c.insert_unique, c.contains, c.erase, s.insert_unique, s.contains,
             s.erase, h.add, lambda k: u.add(1, k), lambda k: w.mark(1, k), lambda k: w.seen(1, k),
             lambda k: w.mark_if_unseen(1, k), lambda k: w.forget(1, k), lambda k: b.contains_many(["a", k]),
             lambda k: s.contains_many([k])]
    for call in calls:
        for empty in ("", b"", bytearray(), memoryview(b"")):
            with pytest.raises(shmfilter.InvalidArgumentError) as e:
                call(empty)
            assert "empty key" in str(e.value)
    assert len(s) == 0 and b.contains("x") is False and h.count() == 0
    # int 0 is a key like any other uint64
    assert w.mark_if_unseen(1, 0) is True and w.mark_if_unseen(1, 0) is False


def test_batches_take_buffers_in_place(seg):
    w = seg.window("w", create=True, expected_per_bucket=10000, retention=3)
    w.set_now(T0)
    items = array.array("Q", range(100, 200))
    spaces = array.array("Q", [7] * 100)
    assert w.mark_if_unseen_many(spaces, items) == [True] * 100
    out = bytearray(100)
    assert w.mark_if_unseen_many(7, items, out=out) == 0  # one int for every item; out= counts
    assert out == bytearray(100)
    assert w.seen_many(7, memoryview(items), out=out) == 100 and out == bytearray([1] * 100)
    with pytest.raises(shmfilter.InvalidArgumentError):
        w.seen_many(7, array.array("I", [1, 2]))  # 4-byte items: not uint64
    with pytest.raises(shmfilter.InvalidArgumentError):
        w.seen_many(7, items, out=bytearray(3))  # out of the wrong length
    with pytest.raises(shmfilter.InvalidArgumentError):
        w.seen_many(7, items, out=bytes(100))  # read-only
    with pytest.raises(shmfilter.InvalidArgumentError):
        w.seen_many(array.array("Q", [1, 2]), items)  # 2 spaces, 100 items
    b = seg.bloom("b", capacity=10000, create=True)
    assert b.add_many(items) == [True] * 100
    assert b.contains_many(items, bytearray(100)) == 100
    h = seg.hll("h", create=True)
    assert h.add_many(items) is True


def test_batches_take_numpy_arrays_without_copies(seg):
    np = _numpy()
    # the insert-only ring: 10,000 marks at 1/30 of its capacity answer new without a false positive
    w = seg.window("w", create=True, expected_per_bucket=100000, retention=3, variant="bloom")
    w.set_now(T0)
    items = np.arange(1, 10001, dtype=np.uint64)
    out = np.zeros(items.size, dtype=np.uint8)
    assert w.mark_if_unseen_many(np.full(items.size, 3, dtype=np.uint64), items, out=out) == items.size
    assert out.all()
    res = np.zeros(items.size, dtype=np.bool_)
    assert w.seen_many(3, items, out=res) == items.size and res.all()
    assert w.seen_many(3, items[::2].copy()) == [True] * 5000
    with pytest.raises(shmfilter.InvalidArgumentError):
        w.seen_many(3, items[::2])  # strided: not C-contiguous
    with pytest.raises(shmfilter.InvalidArgumentError):
        w.seen_many(3, items.astype(np.float64))
    with pytest.raises(shmfilter.InvalidArgumentError):
        w.seen_many(3, np.array([1, -1], dtype=np.int64))  # int64 accepted only when no value is negative
    assert w.seen_many(3, np.array([1, 2], dtype=np.int64)) == [True, True]
    s = seg.set("s", capacity=100000, create=True)
    for k in items[:10]:
        s.insert_unique(k)  # a numpy.uint64 is its int (operator.index), the same key
    assert s.contains(int(items[0])) and s.contains(items[9])
    assert s.contains_many(items[:20]) == [True] * 10 + [False] * 10


def _numpy():
    try:
        import numpy
    except ImportError:
        pytest.fail("numpy not importable: install Debian package python3-numpy (scripts/install-deps.sh)")
    return numpy


def test_handles_refuse_use_after_fork(seg):
    w = seg.window("w", create=True, expected_per_bucket=1000)
    w.set_now(T0)
    s = seg.set("s", capacity=100, create=True)
    r, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for call in (lambda: w.mark_if_unseen(1, "d"), lambda: s.insert_unique("k"), lambda: s.contains("k")):
                try:
                    call()
                    code = 3
                except shmfilter.ForkedHandleError as e:
                    if e.code != shmfilter.EFORKED:
                        code = 4
        finally:
            os.write(wr, bytes([code]))
            os._exit(0)
    os.close(wr)
    assert os.read(r, 1) == b"\0"
    os.waitpid(pid, 0)
    assert w.mark_if_unseen(1, "d") is True  # the parent's handle still works


def test_closed_handle_raises(seg):
    w = seg.window("w", create=True, expected_per_bucket=1000)
    w.close()
    with pytest.raises(shmfilter.InvalidArgumentError):
        w.mark_if_unseen(1, "d")
    w.close()  # twice is fine


def test_every_public_name_is_documented():
    undocumented = []
    for name in shmfilter.__all__:
        obj = getattr(shmfilter, name)
        if name in ("BINDING", "__version__", "library_path", "Key", "U64s"):
            continue  # values: documented in the module docstring and docs/python.md
        if not (obj.__doc__ or "").strip():
            undocumented.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if callable(member) or isinstance(member, property):
                    m = getattr(obj, attr)
                    if not (getattr(m, "__doc__", None) or "").strip():
                        undocumented.append(f"{name}.{attr}")
    assert not undocumented, undocumented


def test_return_annotations_are_precise():
    loose = []
    for name in ("Segment", "Bloom", "Cuckoo", "ExactSet", "Hll", "RoaringSet", "Window", "UvFamily"):
        cls = getattr(shmfilter, name)
        for attr, member in vars(cls).items():
            if attr.startswith("_") or not inspect.isfunction(member):
                continue
            ann = inspect.signature(member).return_annotation
            if ann is inspect.Signature.empty or ann in ("list", "dict", list, dict):
                loose.append(f"{name}.{attr} -> {ann}")
    assert not loose, loose


def test_str_item_with_surrogate_refused(seg):
    w = seg.window("w", create=True, expected_per_bucket=1000)
    with pytest.raises(shmfilter.InvalidArgumentError):
        w.mark_if_unseen(1, "\udc80")


def test_bytes_and_str_are_not_batches_of_ints(seg):
    w = seg.window("w", create=True, expected_per_bucket=1000)
    b = seg.bloom("b", capacity=1000, create=True)
    for bad in (b"abcdefgh", bytearray(8), "abc"):
        with pytest.raises(shmfilter.InvalidArgumentError):
            w.seen_many(1, bad)
        with pytest.raises(shmfilter.InvalidArgumentError):
            b.contains_many(bad)
        with pytest.raises(shmfilter.InvalidArgumentError):
            b.add_many(bad)

