"""python/examples/gunicorn_app.py: a frequency-capping endpoint for gunicorn.

    SHMF_SEGMENT=ads python3 -m gunicorn -w 4 -b 127.0.0.1:8000 \
        --chdir python/examples gunicorn_app:app

GET /fc?plan=P&device=D   "new" (serve: first time this (plan, device) is seen)
                          or "seen"; 400 without plan or device
GET /forget?plan=P&device=D  "forgotten" / "absent" (the operator's un-serve)
GET /redis?plan=P&device=D   the same question answered by Redis (SET NX) on
                          SHMF_REDIS_PORT: the per-request cost beside it
GET /noop                 nothing: the baseline of the framework itself
GET /which                the shmfilter package file and binding this worker imported
GET /metrics              Prometheus text: the set's numbers (shared by all
                          workers) and the answering worker's counters

Each gunicorn worker attaches after fork, on its first request (Segment
handles belong to the process that opened them, docs/python.md); the first
worker to arrive creates the segment and the set, racing workers open them.
Environment: SHMF_SEGMENT (required), SHMF_SET (default "pairs"),
SHMF_CAPACITY (default 1,000,000), SHMF_REDIS_PORT (optional).
SHMF_WINDOW (optional): /fc also asks the (deletable) window of that name
mark_if_unseen(plan, device), the frequency cap over 7 days, and says its
answer in the header X-Window ("new"/"seen"); SHMF_NOW pins the window's
clock (unix seconds: tests).
"""
import os
import sys
from urllib.parse import parse_qs

try:
    import shmfilter  # the installed package (pip install ./python)
except ImportError:  # run from the repository without installing: the source tree (ctypes)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import shmfilter  # noqa: E402

_state = {"pid": None}
_counts = {"new": 0, "seen": 0, "forgotten": 0, "absent": 0, "failed": 0}


def _pairs():
    """This worker's handle to the set, opened after fork (once per process)."""
    if _state["pid"] != os.getpid():
        seg = shmfilter.Segment.open_or_create(os.environ["SHMF_SEGMENT"], size=64 << 20)
        _state["seg"] = seg
        _state["set"] = seg.set(os.environ.get("SHMF_SET", "pairs"),
                                capacity=int(os.environ.get("SHMF_CAPACITY", "1000000")), create=True)
        _state["window"] = None
        if os.environ.get("SHMF_WINDOW"):
            w = seg.window(os.environ["SHMF_WINDOW"], create=True, variant="cuckoo",
                           expected_per_bucket=int(os.environ.get("SHMF_CAPACITY", "1000000")))
            if os.environ.get("SHMF_NOW"):
                w.set_now(int(os.environ["SHMF_NOW"]))
            _state["window"] = w
        _state["redis"] = None
        if os.environ.get("SHMF_REDIS_PORT"):
            import redis
            _state["redis"] = redis.Redis(host="127.0.0.1", port=int(os.environ["SHMF_REDIS_PORT"]))
        _state["pid"] = os.getpid()
        for k in _counts:
            _counts[k] = 0
    return _state["set"]


def _metrics():
    st = _pairs().stats()
    name = os.environ.get("SHMF_SET", "pairs")
    lab = f'structure="{name}",kind="set"'
    out = []
    for metric, help_, value in (
            ("shmfilter_structure_items", "Keys held by the exact set.", st["size"]),
            ("shmfilter_structure_capacity", "Keys the set was sized for.", st["capacity"]),
            ("shmfilter_structure_fill_ratio", "size / capacity.", st["size"] / max(st["capacity"], 1)),
            ("shmfilter_structure_bytes", "Segment bytes the set uses.", st["bytes"])):
        out += [f"# HELP {metric} {help_}", f"# TYPE {metric} gauge", f"{metric}{{{lab}}} {value}"]
    out += ["# HELP shmfilter_answers_total Answers given by the worker that served this scrape.",
            "# TYPE shmfilter_answers_total counter"]
    out += [f'shmfilter_answers_total{{worker="{os.getpid()}",answer="{a}"}} {n}' for a, n in _counts.items()]
    return "\n".join(out) + "\n"


def _reply(start_response, status, body, headers=()):
    data = body.encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))] + list(headers))
    return [data]


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/noop":
        return _reply(start_response, "200 OK", "ok\n")
    if path == "/which":  # which package and binding this worker imported
        return _reply(start_response, "200 OK", f"{shmfilter.__file__} {shmfilter.BINDING}\n")
    if path == "/metrics":
        return _reply(start_response, "200 OK", _metrics())
    q = parse_qs(environ.get("QUERY_STRING", ""))
    plan, device = q.get("plan", [""])[0], q.get("device", [""])[0]
    if not plan or not device:
        return _reply(start_response, "400 Bad Request", "plan and device are required\n")
    key = f"{plan}:{device}"
    try:
        pairs = _pairs()
        if path == "/fc":
            headers = []
            if _state["window"] is not None:
                wnew = _state["window"].mark_if_unseen(int(plan), device)
                headers.append(("X-Window", "new" if wnew else "seen"))
            answer = "new" if pairs.mark(key) else "seen"
            _counts[answer] += 1
            return _reply(start_response, "200 OK", answer + "\n", headers)
        if path == "/forget":
            answer = "forgotten" if pairs.forget(key) else "absent"
            _counts[answer] += 1
            return _reply(start_response, "200 OK", answer + "\n")
        if path == "/redis" and _state["redis"] is not None:
            fresh = _state["redis"].set("fc:" + key, 1, nx=True)
            return _reply(start_response, "200 OK", "new\n" if fresh else "seen\n")
    except ValueError:  # int(plan) with SHMF_WINDOW: the window's space is a number
        return _reply(start_response, "400 Bad Request", "plan must be a number (the window's space)\n")
    except shmfilter.Error as e:  # fail open: serve, and say why in the log
        _counts["failed"] += 1
        print(f"shmfilter: {e}", file=sys.stderr, flush=True)
        return _reply(start_response, "200 OK", "new\n")
    return _reply(start_response, "404 Not Found", "unknown path\n")
