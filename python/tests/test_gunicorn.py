"""python/tests/test_gunicorn.py: a live gunicorn (Debian's python3-gunicorn)
with 4 prefork workers serving python/examples/gunicorn_app.py; a known stream of
requests from 16 client threads; an exact oracle on the answers."""
import http.client
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import free_port

import shmfilter

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")
WORKERS = 4
NOW = 1_764_547_200  # 2025-12-01 00:00 UTC: mid-bucket at utc_offset 0 after 12 hours


def _children(pid):
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, timeout=60).stdout
    except FileNotFoundError:
        pytest.fail("pgrep not found: install Debian package procps")
    return sorted(int(x) for x in out.split())


@pytest.fixture
def gunicorn(segname, tmp_path):
    try:
        import gunicorn  # noqa: F401
    except ImportError:
        pytest.fail("gunicorn not importable: install Debian package python3-gunicorn")
    port = free_port()
    # the window's clock pinned (SHMF_NOW): no day boundary during the test, so its answers
    # are exactly-once too (the cuckoo variant: one racer wins; docs/window.md)
    env = dict(os.environ, SHMF_SEGMENT=segname, SHMF_CAPACITY="100000", PYTHONDONTWRITEBYTECODE="1",
               SHMF_WINDOW="freq", SHMF_NOW=str(NOW))
    log = open(tmp_path / "gunicorn.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-w", str(WORKERS), "-b", f"127.0.0.1:{port}",
                             "--chdir", EXAMPLES, "--graceful-timeout", "30", "gunicorn_app:app"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    # Bounds here are hang detectors (60 s), not speed tests: a loaded 2-core CI machine
    # may run a fresh gunicorn, its workers and 16 client threads slowly.
    deadline = time.time() + 60
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/noop")
            c.getresponse().read()
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail(f"gunicorn did not start: {open(tmp_path / 'gunicorn.log').read()[-2000:]}")
            time.sleep(0.1)
    deadline = time.time() + 60
    while len(_children(proc.pid)) < WORKERS and time.time() < deadline:
        time.sleep(0.1)
    if os.environ.get("SHMF_TEST_INSTALLED") == "1":  # the workers run the installed package
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", "/which")
        where, binding = c.getresponse().read().decode().split()
        assert where == shmfilter.__file__, f"the workers imported {where}, the test {shmfilter.__file__}"
        assert binding == shmfilter.BINDING
    try:
        yield proc, port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            for c in _children(proc.pid):
                os.kill(c, signal.SIGKILL)
            proc.kill()
            proc.wait()
        log.close()


def _stream(distinct=3000, repeats=3, seed=14):
    keys = [(str(i % 7), f"{i:05x}") for i in range(distinct)] * repeats
    random.Random(seed).shuffle(keys)
    return keys


def _run(port, stream, threads=16, during=None):
    """Sends STREAM from THREADS threads; returns [(key, answer or None)] and fills
    _run.window with [(key, the window's answer or None)]."""
    results = [None] * len(stream)
    wresults = [None] * len(stream)
    nxt = iter(range(len(stream)))
    lock = threading.Lock()

    def worker():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            plan, dev = stream[i]
            try:
                c.request("GET", f"/fc?plan={plan}&device={dev}")
                r = c.getresponse()
                body = r.read().decode().strip()
                wresults[i] = r.getheader("X-Window")
                results[i] = body
            except (OSError, http.client.HTTPException):
                c.close()  # the worker died under this request: unacknowledged
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    if during:
        during()
    for t in ts:
        t.join(timeout=240)
        assert not t.is_alive(), "a client thread hung (240 s)"
    _run.window = list(zip(stream, wresults))
    return list(zip(stream, results))


def _oracle(answers, segname, slack):
    new = {}
    for k, a in answers:
        new.setdefault(k, 0)
        assert a in ("new", "seen", None), a
        if a == "new":
            new[k] += 1
    twice = [k for k, c in new.items() if c > 1]
    never = [k for k, c in new.items() if c == 0]
    assert not twice, f"{len(twice)} keys answered new twice: {twice[:5]}"
    assert len(never) <= slack, f"{len(never)} keys never answered new (bound {slack}): {never[:5]}"
    with shmfilter.Segment.open(segname) as s, s.set("pairs") as p:
        acked = [f"{pl}:{d}" for (pl, d), c in new.items() if c == 1]
        lost = [k for k, ok in zip(acked, p.contains_many(acked)) if not ok]
        assert not lost, f"acknowledged keys lost: {lost[:5]}"
        assert len(acked) <= len(p) <= len(new)
    _window_oracle(_run.window, segname, slack)
    return sum(1 for _, a in answers if a is None)


def _window_oracle(answers, segname, slack):
    """The window's mark_if_unseen through the workers: no pair new twice (cuckoo, one
    bucket), every pair answered new is seen afterwards, and pairs never new only from the
    filter's false positives (bound from its own fp estimate) or a killed request."""
    new = {}
    for k, a in answers:
        new.setdefault(k, 0)
        assert a in ("new", "seen", None), a
        if a == "new":
            new[k] += 1
    twice = [k for k, c in new.items() if c > 1]
    assert not twice, f"window: {len(twice)} pairs answered new twice: {twice[:5]}"
    with shmfilter.Segment.open(segname) as s, s.window("freq") as w:
        w.set_now(NOW)
        lost = [k for k, c in new.items() if c == 1 and not w.seen(int(k[0]), k[1])]
        assert not lost, f"window: pairs answered new are not seen: {lost[:5]}"
        fp = w.stats()["fp_now_all"]
    never = [k for k, c in new.items() if c == 0]
    bound = int(len(new) * fp + 4 * (len(new) * fp) ** 0.5 + 2) + slack
    assert len(never) <= bound, f"window: {len(never)} pairs never new, bound {bound} (fp {fp:.3g})"


def test_gunicorn_exact_oracle(gunicorn, segname):
    proc, port = gunicorn
    answers = _run(port, _stream())
    assert _oracle(answers, segname, slack=0) == 0


def test_gunicorn_worker_sigkill_under_load(gunicorn, segname):
    proc, port = gunicorn

    def kill_one():
        time.sleep(0.5)
        os.kill(_children(proc.pid)[0], signal.SIGKILL)

    answers = _run(port, _stream(seed=15), during=kill_one)
    # A sync worker holds one request at a time: at most one mark died unanswered.
    _oracle(answers, segname, slack=1)
    deadline = time.time() + 60
    while len(_children(proc.pid)) < WORKERS and time.time() < deadline:
        time.sleep(0.1)
    assert len(_children(proc.pid)) == WORKERS, "gunicorn did not respawn the killed worker (60 s)"


def test_gunicorn_hup_reload_under_load(gunicorn, segname):
    proc, port = gunicorn
    before = _children(proc.pid)

    def reload():
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGHUP)

    answers = _run(port, _stream(seed=16), during=reload)
    # Graceful: old workers finish their requests; a connection refused in the
    # switch is retried by nobody, so it only shrinks the stream (no answer).
    _oracle(answers, segname, slack=0)
    deadline = time.time() + 60
    while (set(_children(proc.pid)) & set(before) or len(_children(proc.pid)) < WORKERS) and time.time() < deadline:
        time.sleep(0.1)
    assert not set(_children(proc.pid)) & set(before), "SIGHUP did not replace the workers"


def _get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read().decode()


def test_gunicorn_functional_and_metrics(gunicorn, tmp_path):
    proc, port = gunicorn
    assert _get(port, "/fc?plan=1&device=a") == (200, "new\n")
    assert _get(port, "/fc?plan=1&device=a") == (200, "seen\n")
    assert _get(port, "/forget?plan=1&device=a") == (200, "forgotten\n")
    assert _get(port, "/forget?plan=1&device=a") == (200, "absent\n")
    assert _get(port, "/fc?plan=1&device=a") == (200, "new\n")
    assert _get(port, "/fc?plan=1")[0] == 400
    status, text = _get(port, "/metrics")
    assert status == 200
    assert 'shmfilter_structure_items{structure="pairs",kind="set"} 1\n' in text
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found: install Debian package prometheus")
    p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
