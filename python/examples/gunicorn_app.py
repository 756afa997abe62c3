"""python/examples/gunicorn_app.py: a frequency-capping endpoint for gunicorn.

    SHMF_SEGMENT=ads python3 -m gunicorn -w 4 -b 127.0.0.1:8000 \
        --chdir python/examples gunicorn_app:app

GET /fc?plan=P&device=D   "new" (serve: first time this (plan, device) is seen)
                          or "seen"; 400 without plan or device
GET /forget?plan=P&device=D  "forgotten" / "absent" (the operator's un-serve)
GET /redis?plan=P&device=D   the same question answered by Redis (SET NX) on
                          SHMF_REDIS_PORT: the per-request cost beside it
GET /noop                 nothing: the baseline of the framework itself

Each gunicorn worker attaches after fork, on its first request (Segment
handles belong to the process that opened them, docs/python.md); the first
worker to arrive creates the segment and the set, racing workers open them.
Environment: SHMF_SEGMENT (required), SHMF_SET (default "pairs"),
SHMF_CAPACITY (default 1,000,000), SHMF_REDIS_PORT (optional).
"""
import os
import sys
from urllib.parse import parse_qs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import shmfilter  # noqa: E402

_state = {"pid": None}


def _pairs():
    """This worker's handle to the set, opened after fork (once per process)."""
    if _state["pid"] != os.getpid():
        seg = shmfilter.Segment.open_or_create(os.environ["SHMF_SEGMENT"], size=64 << 20)
        _state["seg"] = seg
        _state["set"] = seg.set(os.environ.get("SHMF_SET", "pairs"),
                                capacity=int(os.environ.get("SHMF_CAPACITY", "1000000")), create=True)
        _state["redis"] = None
        if os.environ.get("SHMF_REDIS_PORT"):
            import redis
            _state["redis"] = redis.Redis(host="127.0.0.1", port=int(os.environ["SHMF_REDIS_PORT"]))
        _state["pid"] = os.getpid()
    return _state["set"]


def _reply(start_response, status, body):
    data = body.encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(data)))])
    return [data]


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/noop":
        return _reply(start_response, "200 OK", "ok\n")
    q = parse_qs(environ.get("QUERY_STRING", ""))
    plan, device = q.get("plan", [""])[0], q.get("device", [""])[0]
    if not plan or not device:
        return _reply(start_response, "400 Bad Request", "plan and device are required\n")
    key = f"{plan}:{device}"
    try:
        pairs = _pairs()
        if path == "/fc":
            return _reply(start_response, "200 OK", "new\n" if pairs.mark(key) else "seen\n")
        if path == "/forget":
            return _reply(start_response, "200 OK", "forgotten\n" if pairs.forget(key) else "absent\n")
        if path == "/redis" and _state["redis"] is not None:
            fresh = _state["redis"].set("fc:" + key, 1, nx=True)
            return _reply(start_response, "200 OK", "new\n" if fresh else "seen\n")
    except shmfilter.Error as e:  # fail open: serve, and say why in the log
        print(f"shmfilter: {e}", file=sys.stderr, flush=True)
        return _reply(start_response, "200 OK", "new\n")
    return _reply(start_response, "404 Not Found", "unknown path\n")
