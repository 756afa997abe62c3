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
    with pytest.raises(shmfilter.DroppedError) as e:
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
        except shmfilter.ForkedHandleError as e:
            if e.code != shmfilter.EFORKED:
                code = 12
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


# ---- window: (space, item) pairs over day buckets (docs/window.md) -----------------
DAY = 86400
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z, a bucket start (utc_offset 0)


@pytest.mark.parametrize("variant", ["cuckoo", "bloom"])
def test_window_frequency_cap_over_days(seg, variant):
    with seg.window("freq", create=True, expected_per_bucket=10_000, variant=variant, seed=7) as w:
        w.set_now(T0 + 100)
        assert w.retention == 7
        assert w.mark_if_unseen(42, "dev-1") is True       # not served in 7 days: it is now
        assert w.mark_if_unseen(42, "dev-1") is False      # capped
        assert w.mark_if_unseen(43, "dev-1") is True       # another plan
        assert w.mark_if_unseen(42, b"dev-2", 1) is True   # bytes item, w = 1
        assert w.mark_if_unseen(42, 0xDEADBEEF) is True    # uint64 item
        assert w.seen(42, 0xDEADBEEF, 1) and not w.seen(42, 0xDEADBEF0, 7)
        assert w.new_count(42) == 3 and w.new_count(43) == 1 and w.new_count(44) == 0
        w.set_now(T0 + DAY + 5)                              # the next day
        assert w.seen(42, "dev-1", 7) and not w.seen(42, "dev-1", 1)
        assert w.mark_if_unseen(42, "dev-1", 7) is False     # served yesterday: capped for the week
        assert w.mark_if_unseen(42, "dev-1", 1) is True      # a daily cap serves again
        assert w.new_count(42, 0) == 1 and w.new_count(42, 1) == 3
        w.maintain()
        w.set_now(T0 + 8 * DAY)                              # both marks left the 7-day window
        assert not w.seen(42, "dev-1", 7)
        assert w.mark_if_unseen(42, "dev-1") is True
        st = w.stats()
        assert st["variant"] == variant and st["retention"] == 7 and st["rotations"] >= 3
        assert st["forget_ambiguous"] == 0                   # no forget yet
        with pytest.raises(shmfilter.Error) as e:
            w.seen(42, "dev-1", 8)                           # w > retention
        assert e.value.code == shmfilter.EINVAL and "outside [1, 7]" in e.value.message
        with pytest.raises(TypeError):
            w.mark_if_unseen(-1, "dev-1")
        if variant == "cuckoo":
            assert w.forget(42, "dev-1") is True and w.forget(42, "dev-1") is False
            assert w.mark_if_unseen(42, "dev-1") is True
        else:
            with pytest.raises(shmfilter.Error) as e:
                w.forget(42, "dev-1")
            assert e.value.code == shmfilter.EINVAL and "SHMF_WINDOW_CUCKOO" in e.value.message


def test_window_batches_and_reopen(seg):
    with seg.window("freq", create=True, expected_per_bucket=10_000, variant="cuckoo", retention=3) as w:
        w.set_now(T0)
        assert w.mark_if_unseen_many([1, 1, 2, 1], [10, 11, 10, 10]) == [True, True, True, False]
        assert w.seen_many([1, 2, 3], [10, 10, 10], 1) == [True, True, False]
        with pytest.raises(ValueError):
            w.seen_many([1], [1, 2])
        assert w.seen_many([], []) == []
    with seg.window("freq") as again:                       # open: the options are the segment's
        again.set_now(T0)
        assert again.retention == 3 and again.seen(1, 11, 1)
    with pytest.raises(shmfilter.Error) as e:
        seg.window("nosuch")
    assert e.value.code == shmfilter.ENOTFOUND
    with pytest.raises(shmfilter.Error) as e:
        seg.window("bad", create=True)                       # expected_per_bucket missing
    assert e.value.code == shmfilter.EINVAL
    assert seg.drop("freq") == 1


@pytest.mark.parametrize("variant", ["bloom", "cuckoo"])
def test_window_batches_take_str_and_bytes_items(seg, variant):
    """Issue 24: the window's batches take str/bytes items (16-hex device ids), each answering
    what the single call answers: two windows of the same seed get the same pairs, one by
    batch, one by single calls, over 3 days, with repeats inside a batch."""
    kw = dict(create=True, expected_per_bucket=2000, variant=variant, retention=3, seed=24)
    with seg.window("batched", **kw) as a, seg.window("single", **kw) as b:
        for day in range(3):
            a.set_now(T0 + day * 86400)
            b.set_now(T0 + day * 86400)
            ids = [f"{(day * 700 + i) * 0x9E3779B97F4A7C15 % 2**64:016x}" for i in range(1500)]
            items = ids + ids[:5] + [ids[3].encode(), bytearray(ids[4].encode()), memoryview(b"raw\xff")]
            spaces = [i % 5 for i in range(len(items))]
            spaces[-3:] = [3, 4, 1]
            got = a.mark_if_unseen_many(spaces, items, 2)
            assert got == [b.mark_if_unseen(s, it, 2) for s, it in zip(spaces, items)]
            # day 0: all new (but FP); later days: 800 of the ids are the day before's (seen over w=2)
            assert got[:len(ids)].count(True) >= (1400 if day == 0 else 650)
            assert got[len(ids):len(ids) + 5] == [False] * 5  # repeats inside the batch
            assert got[-3:-1] == [False, False]             # a str and its UTF-8 bytes are one item
            probe = items + [f"never-{i}" for i in range(1500)]
            ps = spaces + [i % 5 for i in range(1500)]
            for w in (1, 2, 3, None):
                assert a.seen_many(ps, probe, w) == [b.seen(s, it, w) for s, it in zip(ps, probe)]
                assert a.seen_many(ps, tuple(probe), w) == [a.seen(s, it, w) for s, it in zip(ps, probe)]
            out = bytearray(len(probe))
            assert a.seen_many(ps, iter(probe), 3, out=out) == sum(b.seen(s, it, 3) for s, it in zip(ps, probe))
            if day == 0:
                assert a.seen_many(7, ["x", b"y"]) == [False, False]  # one int for every item
                assert a.mark_if_unseen_many(7, ["x", b"y"], 1) == [True, True]
                assert b.mark_if_unseen(7, "x", 1) and b.mark_if_unseen(7, b"y", 1)
        assert a.stats()["today_distinct"] == b.stats()["today_distinct"]
        # iterators of either kind of item
        assert a.seen_many([1, 2], iter([b"x", "y"]), 3) == [a.seen(1, b"x", 3), a.seen(2, "y", 3)]
        assert a.seen_many([9, 9], (v for v in (5, 6)), 3) == [a.seen(9, 5, 3), a.seen(9, 6, 3)]
        assert a.mark_if_unseen_many([9, 9], (v for v in (5, 6)), 1) == [True, True]
        # a str item and the int of the same digits are different items
        assert a.mark_if_unseen_many([9], ["12"], 1) == [True] and not a.seen(9, 12, 1)


def test_window_str_batch_argument_errors(seg):
    with seg.window("w", create=True, expected_per_bucket=1000, variant="cuckoo", retention=3) as w:
        w.set_now(T0)
        bad = [([1, 2], ["a", 7]),            # an int among str items
               ([1, 2], ["a", ""]),           # an empty item
               ([1, 2], ["a", None]),         # not a key
               ([1, 2], ["a", 1.5]),
               ([1, 2], [b"a", True]),
               ([1], ["a", "b"]),             # 1 space, 2 items
               ([1, -1], ["a", "b"]),         # a space outside uint64
               ([1, 2], ["a", "\ud800"])]     # not UTF-8
        for spaces, items in bad:
            for call in (w.seen_many, w.mark_if_unseen_many):
                with pytest.raises(shmfilter.InvalidArgumentError) as e:
                    call(spaces, items, 1)
                assert e.value.code == shmfilter.EINVAL, (spaces, items)
        with pytest.raises(shmfilter.InvalidArgumentError) as e:
            w.mark_if_unseen_many([1, 2], ["a", "b"], 4)  # w past retention
        assert "outside" in str(e.value)
        with pytest.raises(shmfilter.InvalidArgumentError):
            w.seen_many([1, 2], ["a", "b"], out=bytearray(3))
        assert not w.seen(1, "a", 3) and not w.seen(2, "b", 3)     # nothing was marked
    w2 = seg.window("w2", create=True, expected_per_bucket=1000)
    assert seg.drop("w2") == 1
    for call in (lambda: w2.seen_many([1], ["a"], 1), lambda: w2.mark_if_unseen_many([1], [b"a"], 1)):
        with pytest.raises(shmfilter.Error) as e:
            call()
        assert e.value.code == shmfilter.EDROPPED


def test_window_forked_workers_new_once(seg, segname):
    """6 forked processes race mark_if_unseen on the same 3,000 (plan, device) pairs on one
    clock (no rotation): no pair 'new' twice; pairs never 'new' are cuckoo false positives,
    bounded from the window's own estimate (mean + 4 sd + 2)."""
    seg.window("race", create=True, expected_per_bucket=20_000, variant="cuckoo", seed=3).close()
    n_proc, pairs = 6, 3000
    r_fds, pids = [], []
    for p in range(n_proc):
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            with shmfilter.Segment.open(segname) as mine, mine.window("race") as w:
                w.set_now(T0 + 7)
                order = range(pairs) if p % 2 == 0 else reversed(range(pairs))
                won = [i for i in order if w.mark_if_unseen(i % 50, f"dev{i}")]
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
    with seg.window("race") as w:
        st = w.stats()
        w.set_now(T0 + 7)
        assert all(w.seen(i % 50, f"dev{i}", 1) for i in set(wins)), "an acknowledged 'new' is not seen"
    assert len(wins) == len(set(wins)), "a pair was answered 'new' twice"
    assert st["rotation_races"] == 0
    mean = pairs * st["fp_now_all"]
    assert pairs - len(wins) <= int(mean + 4 * mean ** 0.5 + 2)


# ---- HLL: Redis interchange ------------------------------------------------------
def test_hll_export_import_redis(seg):
    with seg.hll("a", create=True) as a, seg.hll("b", create=True) as b:
        a.add_many(range(5000))
        b.add_many(range(2500, 10_000))
        data = a.export_redis()
        assert isinstance(data, bytes) and len(data) == 12304 and data[:4] == b"HYLL"
        assert shmfilter.hll_count_redis(data) == a.count()
        b.import_redis(data)                                  # register max: the union
        assert abs(b.count() - 10_000) <= 400                 # 5 standard errors (0.81% each)
        sparse = bytearray(b"HYLL\x01" + b"\0" * 11)          # Redis sparse: one register = 3
        sparse += bytes([0x40 | (99 >> 8), 99 & 0xFF, 0x80 | (2 << 2)])   # XZERO 100, VAL 3
        rest = 16384 - 101
        sparse += bytes([0x40 | ((rest - 1) >> 8), (rest - 1) & 0xFF])
        assert shmfilter.hll_count_redis(sparse) == 1
        with pytest.raises(shmfilter.Error) as e:
            a.import_redis(b"HYLX" + data[4:])
        assert e.value.code == shmfilter.EBADINPUT and "HYLL" in e.value.message
        with pytest.raises(shmfilter.Error) as e:
            shmfilter.hll_count_redis(data[:100])
        assert e.value.code == shmfilter.EBADINPUT


# ---- the directory -----------------------------------------------------------------
def test_structures_lists_the_directory(seg):
    assert seg.structures() == []
    seg.set("pairs", capacity=1000, create=True).close()
    with seg.set("pairs") as s:
        for k in range(10):
            s.mark(k)
    seg.hll("uv", create=True).close()
    seg.window("freq", create=True, expected_per_bucket=1000).close()
    infos = seg.structures()
    assert [(i.name, i.kind) for i in infos] == [("freq", "window"), ("pairs", "set"), ("uv", "hll")]
    pairs = infos[1]
    assert pairs.capacity == 1000 and pairs.items == 10 and pairs.readable and not pairs.over_capacity
    assert all(i.bytes >= i.region_bytes > 0 for i in infos)
    assert seg.find("uv").kind == "hll" and seg.find("nosuch") is None
    text = seg.prometheus_text()
    assert 'name="freq",kind="window"' in text and "shmfilter_window_spaces" in text
    assert seg.drop("pairs") == 1
    assert [i.name for i in seg.structures()] == ["freq", "uv"]


def test_read_only_open_inspects_and_writes_nothing(seg, segname):
    with seg.bloom("b", capacity=1000, create=True) as b:
        assert b.mark("alpha")
        seg.roaring("r", create=True).close()
        ro = shmfilter.Segment.open(segname, read_only=True)
        try:
            assert ro.read_only and not seg.read_only
            with ro.bloom("b") as vb:
                assert "alpha" in vb
                assert vb.mark("beta") is False  # "not done": a read-only attachment sets nothing
            assert "beta" not in b
            with pytest.raises(shmfilter.Error) as e:
                ro.bloom("b2", capacity=10, create=True)
            assert e.value.code == shmfilter.EREADONLY and "read-only" in e.value.message
            with pytest.raises(shmfilter.Error) as e:
                ro.roaring("r")
            assert e.value.code == shmfilter.EREADONLY
        finally:
            ro.close()
    with pytest.raises(shmfilter.Error) as e:
        shmfilter.Segment.open(segname, trusted_owner=-7)
    assert e.value.code == shmfilter.EINVAL and "trusted_owner" in e.value.message


def test_status_vocabulary_codes_are_distinct():
    """Dropped, no space, busy, full, forked and invalid argument: one code and one Error
    subclass each, the C header's numbers (issue 21)."""
    codes = {shmfilter.EDROPPED: shmfilter.DroppedError, shmfilter.ENOSPACE: shmfilter.NoSpaceError,
             shmfilter.EBUSY: shmfilter.BusyError, shmfilter.EFULL: shmfilter.FullError,
             shmfilter.EFORKED: shmfilter.ForkedHandleError, shmfilter.EINVAL: shmfilter.InvalidArgumentError}
    assert len(codes) == 6 and len(set(codes.values())) == 6
    assert (shmfilter.EDROPPED, shmfilter.ENOSPACE, shmfilter.EBUSY, shmfilter.EFULL, shmfilter.EFORKED) == \
        (14, 12, 17, 13, 20)
    for code, cls in codes.items():
        assert issubclass(cls, shmfilter.Error)
        assert shmfilter._strerror(code) != shmfilter._strerror(shmfilter.EINTERNAL)
    assert "fork" in shmfilter._strerror(shmfilter.EFORKED)


def test_window_without_room_for_a_table_raises_nospace(segname):
    with shmfilter.Segment.create(segname, size=8 << 20, max_size=8 << 20) as small:   # cannot grow
        with small.window("w", create=True, expected_per_bucket=1_000_000, seed=3) as w:
            with pytest.raises(shmfilter.NoSpaceError) as e:
                for d in range(7):
                    w.set_now(T0 + d * DAY)
                    assert w.mark(1, 100 + d) is True
            assert e.value.code == shmfilter.ENOSPACE and "out of space" in e.value.message
            assert w.stats()["retention"] == 7                    # valid: neither dropped nor broken


def test_window_w_out_of_range_is_rejected_not_clamped(seg):
    with seg.window("w", create=True, expected_per_bucket=1000, variant="cuckoo", retention=3, seed=3) as w:
        w.set_now(T0)
        assert w.mark(1, 10) is True
        for call in (lambda: w.seen(1, 10, 4), lambda: w.mark_if_unseen(1, 11, 4),
                     lambda: w.seen_many([1], [10], 4), lambda: w.mark_if_unseen_many([1], [11], 4),
                     lambda: w.seen(1, 10, 0), lambda: w.new_count(1, 3)):
            with pytest.raises(shmfilter.InvalidArgumentError) as e:
                call()
            assert e.value.code == shmfilter.EINVAL
        assert not w.seen(1, 11, 3)                               # nothing was marked
        assert w.seen(1, 10, 3) and w.new_count(1, 2) == 0


def test_forked_deletable_window_raises_forked(seg, segname):
    w = seg.window("w", create=True, expected_per_bucket=1000, variant="cuckoo", seed=3)
    w.set_now(T0)
    assert w.mark(1, 10) is True
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            w.mark(1, 11)
            code = 10
        except shmfilter.ForkedHandleError as e:
            code = 0 if e.code == shmfilter.EFORKED else 11
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert not w.seen(1, 11, 1)
    w.close()


def test_binding_kinds_are_the_librarys():
    # The library's kinds table is the one list of kinds: every kind the binding has
    # ctypes structs for is a name the library spells, and Segment.drop without a kind
    # drops any kind through the library's own drop.
    lib_names = set()
    k = 1
    while True:
        name = shmfilter._lib.shmf_kind_name(k).decode()
        if name == "unknown":
            break
        lib_names.add(name)
        k += 1
    assert {"bloom", "cuckoo", "roaring", "hll", "set", "blob", "window"} <= lib_names
    assert set(shmfilter._KINDS) <= lib_names
    for kind in shmfilter._KINDS:
        assert shmfilter._lib.shmf_kind_from_name(kind.encode(), len(kind)) > 0


def test_drop_without_kind_drops_any_kind(seg):
    seg.window("w", create=True, expected_per_bucket=1000).close()
    seg.bloom("b", create=True, capacity=1000).close()
    assert seg.drop("w") == 1
    assert seg.drop("b") == 1
    assert seg.drop("b") == 0
    with pytest.raises(shmfilter.Error):
        seg.drop("x", kind="no-such-kind")


# ---- #23: one exception type, integers range-checked like C's, text always decodes ----

U64_BAD = [-1, 2**64, 2**64 + 7, 1.5, "7", None, True]


def test_integer_arguments_are_range_checked_not_wrapped(seg):
    """Each used to wrap silently through ctypes (add_many([-1, 2**64+7]) added 2**64-1 and 7,
    new_count(-1) read space 2**64-1, seen(w=2**32+1) asked w=1) while add(-1) raised."""
    b = seg.bloom("b", capacity=1000, create=True)
    h = seg.hll("h", create=True)
    with seg.window("w", create=True, expected_per_bucket=1000, retention=3) as w:
        w.set_now(T0)
        calls = [lambda v: b.add_many([1, v]), lambda v: h.add_many([v]), lambda v: b.add(v),
                 lambda v: w.new_count(v), lambda v: w.mark_if_unseen(v, "d"), lambda v: w.seen_many([v], [1]),
                 lambda v: w.seen_many([1], [v]), lambda v: w.mark_if_unseen_many([v], [1])]
        for call in calls:
            for v in U64_BAD:
                if isinstance(v, str) and call in (calls[2], calls[6]):
                    continue  # a str is a valid (bytes) key for add, and a valid item of a window batch
                with pytest.raises(shmfilter.InvalidArgumentError) as e:
                    call(v)
                assert e.value.code == shmfilter.EINVAL
        for bad_w in (2**32 + 1, -1, 2**64, 1.0):
            with pytest.raises(shmfilter.InvalidArgumentError):
                w.seen(1, "d", w=bad_w)
        with pytest.raises(shmfilter.InvalidArgumentError):
            w.new_count(1, age=-1)
        with pytest.raises(shmfilter.InvalidArgumentError):
            w.new_count(1, age=2**32)
        with pytest.raises(shmfilter.InvalidArgumentError):
            w.set_now(2**63)
        assert w.new_count(0) == 0 and b.add_many([2**64 - 1, 0]) == [True, True]
    with pytest.raises(shmfilter.InvalidArgumentError):
        seg.roaring("r", create=True).add(2**32)
    # Options structs: an int outside its field's type is refused, not wrapped.
    for bad in (dict(capacity=-1), dict(capacity=2**64)):
        with pytest.raises(shmfilter.InvalidArgumentError):
            seg.set("s2", create=True, **bad)
    with pytest.raises(shmfilter.InvalidArgumentError):
        seg.window("w2", create=True, expected_per_bucket=1000, retention=2**32)
    with pytest.raises(shmfilter.InvalidArgumentError):
        shmfilter.Segment.create("shmf-test-never", size=-1)
    for bad in ("a string", 5, None):                     # bytes(5) would have been 5 zero bytes
        with pytest.raises(shmfilter.InvalidArgumentError):
            h.import_redis(bad)
        with pytest.raises(shmfilter.InvalidArgumentError):
            shmfilter.hll_count_redis(bad)
    # One type, still a ValueError and a TypeError for code written for those.
    assert issubclass(shmfilter.InvalidArgumentError, (ValueError)) and issubclass(shmfilter.InvalidArgumentError, TypeError)


def test_names_with_nul_or_lone_surrogates_are_one_error(seg):
    with pytest.raises(shmfilter.InvalidArgumentError):
        seg.hll("a\0b", create=True)                        # C would see "a"
    with pytest.raises(shmfilter.InvalidArgumentError):
        seg.hll("a\udc80", create=True)                     # not encodable as UTF-8
    with pytest.raises(shmfilter.InvalidArgumentError):
        seg.set("s", capacity=10, create=True).mark("\ud800")


def test_prometheus_text_with_hostile_names_decodes_and_is_bounded(seg):
    """prometheus_text() raised UnicodeDecodeError for a name holding ED A0 80."""
    for n in (b"uv:\xed\xa0\x80", b"uv:\xc0\xaf", b"uv:\xf5\x80", b"t:\x1b]0;x\x07", b"t:\x1b[2J"):
        seg.hll(n, create=True).close()
    text = seg.prometheus_text()
    assert 'name="uv:\\\\xed\\\\xa0\\\\x80",kind="hll"' in text
    assert all(c == "\n" or ord(c) >= 0x20 for c in text)
    names = sorted(i.name_bytes for i in seg.structures())
    assert b"uv:\xed\xa0\x80" in names
    only_kinds = seg.prometheus_text(max_structures=0)
    assert 'name="' not in only_kinds and 'shmfilter_other_structures{segment="' in only_kinds
    with pytest.raises(shmfilter.InvalidArgumentError):
        seg.prometheus_text(max_bytes=100)                   # below the 16384 floor
    with pytest.raises(shmfilter.InvalidArgumentError):
        seg.prometheus_text(max_structures=-1)


def test_uv_family_counts_union_over_days_and_exports_redis(seg):
    """The UV family (docs/uv.md): exact below exact_max, the union over w days, count_all,
    the Redis export's count equal to count_hll, named errors for bad arguments."""
    uv = seg.uv("uv", create=True, retention=3, max_spaces=64, chunk_bytes=1 << 20)
    t0 = 1764547200
    for d in range(2):
        uv.set_now(t0 + d * 86400 + 5)
        for i in range(100):
            assert uv.add(42, i + 50 * d) is True
        assert uv.add(42, 50 * d) is False
        uv.add(7, f"device-{d}")
    assert uv.count(42) == 100
    assert uv.count(42, 2) == 150  # [0, 100) and [50, 150): a union, not a sum
    assert uv.count(7, 3) == 2
    assert abs(uv.count_all(2) - 152) <= 3
    assert shmfilter.hll_count_redis(uv.export_redis(42, 2)) == uv.count_hll(42, 2)
    with pytest.raises(shmfilter.InvalidArgumentError):
        uv.count(42, 4)
    with pytest.raises(TypeError):
        uv.add(-1, "x")
    again = seg.uv("uv")
    assert again.count(42, 2) == 0  # its own clock: the system's, years after these days
    again.set_now(t0 + 86400 + 5)
    assert again.count(42, 2) == 150
    assert uv.stats()["today_spaces"] == 2
    assert uv.retention == 3


# ---- window: the stamped variant and frequency caps (issue 24) -----------------------
def test_window_stamped_mark_if_under_caps_over_a_sliding_window(seg):
    """variant="stamped": mark_if_under(space, item, cap, w) answers True (allowed and counted)
    up to CAP times in the last w buckets, then False (capped, nothing stored); the stats show
    the one shared table; bloom/cuckoo windows and bad caps raise InvalidArgumentError."""
    with seg.window("caps", create=True, expected_per_bucket=10_000, variant="stamped", seed=7) as w:
        w.set_now(T0 + 100)
        assert [w.mark_if_under(42, "dev-1", 3) for _ in range(5)] == [True] * 3 + [False] * 2
        assert w.seen(42, "dev-1", 1)                          # an allowed call marks the pair
        assert w.mark_if_under(42, b"dev-1", 3) is False       # bytes: the same item as the str
        assert w.mark_if_under(43, "dev-1", 3) is True         # another plan
        assert w.mark_if_under(42, 0xDEADBEEF, cap=2, w=7) is True  # a uint64 item, keywords
        assert w.mark_if_under(space=42, item=0xDEADBEEF, cap=2) is True
        assert w.mark_if_under(42, 0xDEADBEEF, 2, None) is False
        w.set_now(T0 + 6 * DAY)                                # still in the last 7 buckets
        assert w.mark_if_under(42, "dev-1", 3) is False
        assert w.mark_if_under(42, "dev-1", 3, 1) is True      # a daily cap counts today's only
        w.set_now(T0 + 7 * DAY)                                # day 0's marks left the window
        assert [w.mark_if_under(42, "dev-1", 3, 7) for _ in range(3)] == [True, True, False]
        assert w.forget(42, "dev-1") is True                   # the pair's own lane
        st = w.stats()
        assert st["variant"] == "stamped" and st["retention"] == 7
        assert st["lanes"] >= 8 and st["shared_bytes"] > 0 and st["shared_bytes"] < st["memory_bytes"]
        assert isinstance(st["swept_bucket"], int)
        for bad in (0, 16):
            with pytest.raises(shmfilter.InvalidArgumentError) as e:
                w.mark_if_under(42, "dev-9", bad)
            assert e.value.code == shmfilter.EINVAL and f"cap {bad} is outside [1, 15]" in e.value.message
        with pytest.raises(shmfilter.InvalidArgumentError) as e:
            w.mark_if_under(42, "dev-9", 3, 8)                 # w > retention
        assert "outside [1, 7]" in e.value.message
        with pytest.raises(TypeError):
            w.mark_if_under(42, "dev-9", -1)
        with pytest.raises(TypeError):
            w.mark_if_under(42, "dev-9")                       # cap is required
        assert not w.seen(42, "dev-9", 7)                      # refused calls stored nothing
    with seg.window("caps", variant="stamped") as again:       # open checks the variant
        assert again.stats()["variant"] == "stamped"
    with pytest.raises(shmfilter.OptionsMismatchError):
        seg.window("caps", variant="cuckoo")
    with pytest.raises(shmfilter.InvalidArgumentError):
        seg.window("s13", create=True, expected_per_bucket=1000, variant="stamped", retention=13)
    with pytest.raises(shmfilter.InvalidArgumentError):
        seg.window("x", create=True, expected_per_bucket=1000, variant="tree")
    for variant in ("bloom", "cuckoo"):
        with seg.window(variant, create=True, expected_per_bucket=1000, variant=variant) as w:
            st = w.stats()
            assert st["lanes"] == 0 and st["shared_bytes"] == 0
            with pytest.raises(shmfilter.InvalidArgumentError) as e:
                w.mark_if_under(1, "x", 3)
            assert "SHMF_WINDOW_STAMPED" in e.value.message
            assert not w.seen(1, "x", 7)


def test_window_stamped_forked_workers_never_exceed_the_cap(seg, segname):
    """6 forked processes race mark_if_under(cap=4) on the same 200 pairs: each pair gets
    exactly 4 True answers over all of them."""
    seg.window("race", create=True, expected_per_bucket=20_000, variant="stamped", seed=3).close()
    n_proc, pairs, cap = 6, 200, 4
    r_fds, pids = [], []
    for p in range(n_proc):
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            with shmfilter.Segment.open(segname) as mine, mine.window("race") as w:
                w.set_now(T0 + 7)
                order = range(pairs) if p % 2 == 0 else reversed(range(pairs))
                won = [i for i in order for _ in range(2) if w.mark_if_under(i % 9, f"dev{i}", cap, 7)]
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
    per_pair = {i: 0 for i in range(pairs)}
    for i in wins:
        per_pair[i] += 1
    assert sorted(set(per_pair.values())) == [cap], "12 calls per pair, cap 4: exactly 4 allowed each"
