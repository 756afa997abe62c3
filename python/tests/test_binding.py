"""python/tests/test_binding.py: the ctypes binding over the C API."""
import os

import pytest

import shmfilter


def test_version():
    assert shmfilter.version().count(".") == 2


@pytest.mark.parametrize("kind", ["set", "cuckoo", "bloom"])
def test_mark_is_new_once_per_key(seg, kind):
    with getattr(seg, kind)("x", capacity=10_000, create=True) as s:
        for k in (b"a", "b", 7, 2**64 - 1):
            assert s.mark(k) is True
            assert s.mark(k) is False
            assert k in s
        assert s.contains_many([b"a", b"zz", "b"]) == [True, False, True]
        assert s.contains_many([7, 8]) == [True, False]
        assert s.contains_many([]) == []


def test_str_and_bytes_keys_agree(seg):
    with seg.set("x", capacity=100, create=True) as s:
        assert s.mark("ü")
        assert not s.mark("ü".encode())


def test_forget(seg):
    with seg.set("x", capacity=100, create=True) as s, seg.cuckoo("c", capacity=100, create=True) as c:
        for h in (s, c):
            assert h.mark("k")
            assert h.forget("k") is True
            assert h.forget("k") is False
            assert h.mark("k") is True
        assert len(s) == 1 and len(c) == 1


def test_hll_counts(seg):
    with seg.hll("uv", create=True) as h:
        for i in range(1000):
            h.add(f"d{i}")
        assert h.add_many(list(range(1000))) is True
        assert abs(h.count() - 2000) <= 2000 * 0.0081 * 4  # 4 standard errors
        assert h.stats()["registers"] == 16384


def test_errors_carry_code_and_message(seg, segname):
    with pytest.raises(shmfilter.Error) as e:
        shmfilter.Segment.open(segname + "-absent")
    assert e.value.code == shmfilter.ENOTFOUND
    assert "does not exist" in e.value.message
    with pytest.raises(shmfilter.Error) as e:
        seg.set("nope")
    assert e.value.code == shmfilter.ENOTFOUND
    seg.bloom("b", capacity=10, create=True).close()
    with pytest.raises(shmfilter.Error) as e:
        seg.set("b")
    assert e.value.code == shmfilter.EWRONGKIND
    with pytest.raises(shmfilter.Error) as e:
        shmfilter.Segment.create(segname)
    assert e.value.code == shmfilter.EEXISTS
    with pytest.raises(TypeError):
        seg.set("s", capacity=1, create=True).mark(1.5)
    with pytest.raises(ValueError):
        seg.set("s").mark(-1)


def test_full_set_raises_efull(seg):
    with seg.set("tiny", capacity=1, create=True) as s:
        with pytest.raises(shmfilter.Error) as e:
            for i in range(1000):
                s.mark(i)
        assert e.value.code == shmfilter.EFULL


def test_drop_then_calls_fail_dropped(seg):
    s = seg.set("d", capacity=10, create=True)
    assert seg.drop("d") == 1
    with pytest.raises(shmfilter.Error) as e:
        s.mark("k")
    assert e.value.code == shmfilter.EDROPPED
    s.close()
    assert seg.drop("d") == 0


def test_stats(seg):
    with seg.bloom("b", capacity=1000, error=0.01, create=True) as b:
        b.add_many(list(range(100)))
        st = b.stats()
        assert st["capacity"] == 1000 and 90 <= st["inserted_estimate"] <= 110


def test_closed_handle_raises(seg):
    s = seg.set("c", capacity=10, create=True)
    s.close()
    s.close()
    with pytest.raises(shmfilter.Error):
        s.mark("x")


def test_after_fork_child_reopens(seg, segname):
    s = seg.set("f", capacity=10_000, create=True)
    pid = os.fork()
    if pid == 0:  # child: the inherited handle refuses; a fresh attachment works
        code = 0
        try:
            s.mark("x")
            code = 10
        except shmfilter.ForkedHandleError:
            pass
        with shmfilter.Segment.open(segname) as mine, mine.set("f") as t:
            if not t.mark("from-child"):
                code = 11
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert "from-child" in s
    s.close()


def test_forked_workers_exact_oracle(seg, segname):
    """8 forked processes mark the same 5,000 keys: exactly one 'new' per key."""
    seg.set("race", capacity=20_000, create=True).close()
    n_proc, keys = 8, 5000
    r_fds = []
    pids = []
    for w in range(n_proc):
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            with shmfilter.Segment.open(segname) as mine, mine.set("race") as t:
                order = range(keys) if w % 2 == 0 else reversed(range(keys))
                won = [k for k in order if t.mark(f"k{k}")]
            os.write(wfd, ",".join(map(str, won)).encode())
            os._exit(0)
        os.close(wfd)
        r_fds.append(r)
        pids.append(pid)
    wins = []
    for r in r_fds:
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
        os.close(r)
        wins += [int(x) for x in data.decode().split(",") if x]
    for pid in pids:
        assert os.WEXITSTATUS(os.waitpid(pid, 0)[1]) == 0
    assert sorted(wins) == list(range(keys))


def test_roaring(seg):
    with seg.roaring("ids", create=True) as r:
        r.add(5)
        r.add_many(range(100, 200))
        assert 5 in r and 150 in r and 99 not in r
        assert r.contains_many([5, 6, 199]) == [True, False, True]
        r.remove(5)
        assert 5 not in r
        assert len(r) == 100
        assert r.compact() in (True, False)
        assert len(r) == 100 and r.stats()["cardinality"] == 100
        with pytest.raises(ValueError):
            r.add(2**32)
