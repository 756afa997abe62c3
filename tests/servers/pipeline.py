"""tests/servers/pipeline.py: a client that knows every answer it got.

get_many(port, paths, conns, depth) sends each path once (GET, HTTP/1.1
keep-alive), spread over `conns` connections (so several nginx workers answer
at once), each connection pipelining `depth` requests at a time, and returns
the response bodies in the order of `paths`. wrk is faster but does not say
which request got which answer; the mission-shaped tests (nginx_mission.sh)
need exactly that: which pairs were answered "new", which plan counted what.
Every read is bounded (socket timeout); a non-200 answer or a closed
connection raises, naming the request.
"""
import socket
import threading


class PipelineError(Exception):
    pass


def _connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _run_conn(port, paths, out, base, depth, errors, retry):
    """retry: a connection closed by the server (a reload's old worker) is opened
    again and the unanswered requests are sent again (each may then have been
    processed twice: only its answers count). At most 100 reconnections."""
    try:
        s = _connect(port)
        buf = b""
        i = 0  # the first unanswered request
        reconnects = 0
        while i < len(paths):
            batch = paths[i:i + depth]
            try:
                s.sendall(b"".join(b"GET " + p.encode() + b" HTTP/1.1\r\nHost: t\r\n\r\n" for p in batch))
                for j in range(len(batch)):
                    while True:
                        h = buf.find(b"\r\n\r\n")
                        if h >= 0:
                            head = buf[:h].decode("latin-1")
                            status = head.split(" ", 2)[1] if " " in head else "?"
                            clen = None
                            for line in head.split("\r\n")[1:]:
                                k, _, v = line.partition(":")
                                if k.strip().lower() == "content-length":
                                    clen = int(v)
                            if clen is None:
                                raise PipelineError(f"answer to {batch[j]} has no Content-Length: {head!r}")
                            if len(buf) >= h + 4 + clen:
                                body = buf[h + 4:h + 4 + clen]
                                buf = buf[h + 4 + clen:]
                                if status != "200":
                                    raise PipelineError(f"{batch[j]}: HTTP {status} {body!r}")
                                out[base + i] = body.decode()
                                i += 1
                                break
                        chunk = s.recv(1 << 16)
                        if not chunk:
                            raise ConnectionResetError(f"connection closed before the answer to {batch[j]}")
                        buf += chunk
            except (ConnectionResetError, BrokenPipeError) as e:
                if not retry or reconnects >= 100:
                    raise PipelineError(str(e))
                reconnects += 1
                s.close()
                s = _connect(port)
                buf = b""
        s.close()
    except Exception as e:  # reported by get_many
        errors.append(e)


def get_many(port, paths, conns=4, depth=64, retry=False):
    out = [None] * len(paths)
    errors = []
    per = (len(paths) + conns - 1) // conns
    threads = []
    for c in range(conns):
        part = paths[c * per:(c + 1) * per]
        if not part:
            continue
        t = threading.Thread(target=_run_conn, args=(port, part, out, c * per, depth, errors, retry))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    if errors:
        raise PipelineError(str(errors[0]))
    return out
