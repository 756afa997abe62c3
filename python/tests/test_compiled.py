"""python/tests/test_compiled.py: what only the compiled binding does (ctest
python_binding runs it; shmfilter.BINDING must be "compiled")."""
import array

import pytest

import shmfilter

T0 = 1_700_000_000


def test_binding_is_compiled():
    assert shmfilter.BINDING == "compiled", shmfilter._NATIVE_WHY
    assert shmfilter.Window.mark_if_unseen is shmfilter._native.Handle._mark_if_unseen

def test_close_while_another_thread_runs_a_batch(seg):
    """The compiled binding runs batches without the GIL: a close() from another thread
    meanwhile is deferred to the batch's end (never frees the handle under it)."""
    import threading
    w = seg.window("w", create=True, expected_per_bucket=400_000, retention=3)
    w.set_now(T0)
    items = array.array("Q", range(1, 300_001))
    out = bytearray(len(items))
    done = []
    t = threading.Thread(target=lambda: done.append(w.mark_if_unseen_many(5, items, out=out)))
    t.start()
    while not done and not w._busy():  # the batch thread releases the GIL inside the batch only
        pass
    overlapped = w._busy() == 1
    w.close()
    assert not overlapped or w._busy() == 1  # deferred: the batch still runs on the handle
    t.join(timeout=120)
    assert not t.is_alive()
    assert len(done) == 1 and done[0] >= 0.99 * len(items)  # finished on the open handle (FPs: a bloom window)
    assert overlapped, "close() came after the batch: the deferral was not exercised (a faster machine?)"
    with pytest.raises(shmfilter.InvalidArgumentError):
        w.seen(5, 1)
    with seg.window("w") as w2:
        w2.set_now(T0)
        assert w2.seen_many(5, items, out=out) == len(items)  # every pair it marked is there
