#!/usr/bin/python3
"""bench/python_bench.py: the per-call cost of Window.mark_if_unseen(plan, device) with a
str device, from Python, in one run: the compiled binding (shmfilter._native), the
package's ctypes binding, a minimal raw ctypes call, the C API itself (bench/python/
capi_loop.c, same keys, same library), redis-py's SET NX against a local redis-server,
and a trivial Python function call (def f(a, b): return b) in the same loop.
Writes bench/results/python.md (scripts/bench.sh appends it to bench/RESULTS.md).

    python3 bench/python_bench.py [--n 50000] [--reps 5] [--redis-n 20000]
        [--library build/bench/shared/libshmfilter.so] [--out bench/results/python.md]

It installs the package as a user would (a venv under build/python-bench, pip install
--no-index ./python: the library is built by the package's own CMake build, Release,
unless --library names one) and measures there. Each repetition uses a fresh window
(retention 7, expected_per_bucket = 4 x N): pass "new" marks N new pairs, pass "seen"
asks the same N again. Each of the --reps rounds runs every Python variant in a fresh
process, then the C loop, so all are measured at the same times. Numbers are the best of
the rounds (as timeit reports: on a shared machine the other processes only ever add
time), the median beside it; ratios are best to best.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN = 42
T0 = 1_700_000_000
REDIS_PORT = 26379


def inner(args):
    """Runs inside the venv: prints one JSON object."""
    import ctypes as C
    import types

    import shmfilter
    res = {"binding": shmfilter.BINDING, "file": shmfilter.__file__, "version": shmfilter.__version__, "runs": []}
    if shmfilter.BINDING != "compiled":
        raise SystemExit(f"python_bench: the installed package has no compiled binding ({shmfilter._NATIVE_WHY})")
    n = args.n
    devs = [f"{i:016x}" for i in range(n)]
    seg_name = f"shmf-pybench-{os.getpid()}"
    seg = shmfilter.Segment.create(seg_name, size=1 << 30)

    def loop(fn):
        t = time.perf_counter_ns()
        for d in devs:
            fn(PLAN, d)
        return (time.perf_counter_ns() - t) / n

    def trivial(a, b):
        return b

    lib_fn = shmfilter._lib.shmf_window_mark_if_unseen
    try:
        for rep in range(args.reps):
            run = {}
            run["trivial"] = [loop(trivial), loop(trivial)]
            for variant in ("compiled", "ctypes", "raw_ctypes"):
                w = seg.window(f"w-{variant}-{rep}", create=True, expected_per_bucket=4 * n, retention=7)
                w.set_now(T0)
                if variant == "compiled":
                    fn = w.mark_if_unseen
                elif variant == "ctypes":
                    fn = types.MethodType(shmfilter._CTYPES_METHODS[("Window", "mark_if_unseen")], w)
                else:
                    ptr = C.c_void_p(w._p())

                    def fn(plan, d, ptr=ptr):  # the least a ctypes caller can do
                        b = d.encode()
                        return lib_fn(ptr, plan, b, len(b), 7) == 1
                run[variant] = [loop(fn), loop(fn)]
                w.close()
                seg.drop(f"w-{variant}-{rep}")
            res["runs"].append(run)
        if args.redis_n:
            try:
                import redis
            except ImportError:
                res["redis"] = "redis-py not importable (Debian package python3-redis)"
            else:
                r = redis.Redis(port=REDIS_PORT)
                rdevs = devs[:args.redis_n]
                out = []
                for rep in range(args.reps):
                    r.flushall()
                    passes = []
                    for _ in range(2):
                        t = time.perf_counter_ns()
                        for d in rdevs:
                            r.set(f"{PLAN}:{d}", 1, nx=True)
                        passes.append((time.perf_counter_ns() - t) / len(rdevs))
                    out.append(passes)
                res["redis"] = out
    finally:
        seg.close()
        shmfilter.Segment.remove(seg_name)
    print(json.dumps(res))


def run(cmd, **kw):
    print("python_bench: $ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, **kw)


def outer(args):
    work = os.path.join(REPO, "build", "python-bench")
    venv = os.path.join(work, "venv")
    shutil.rmtree(venv, ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    # --system-site-packages: redis-py (Debian python3-redis) for the Redis row
    run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    py = os.path.join(venv, "bin", "python")
    env = dict(os.environ, SHMFILTER_REQUIRE_COMPILED="1")
    env.pop("SHMFILTER_LIBRARY", None)
    if args.library:
        env["SHMFILTER_BUILD_LIBRARY"] = os.path.abspath(args.library)
    run([py, "-m", "pip", "install", "-q", "--no-index", os.path.join(REPO, "python")], env=env, cwd=work)
    pkg = subprocess.run([py, "-c", "import shmfilter, os; print(os.path.dirname(shmfilter.__file__))"],
                         check=True, capture_output=True, text=True, cwd=work).stdout.strip()
    lib = os.path.join(pkg, "libshmfilter.so.0")
    capi = os.path.join(work, "capi_loop")
    run(["cc", "-O2", "-I", os.path.join(REPO, "include"), os.path.join(REPO, "bench", "python", "capi_loop.c"),
         "-o", capi, lib, f"-Wl,-rpath,{pkg}"])
    load = open("/proc/loadavg").read().split()[:3]
    redis_proc = None
    if args.redis_n and shutil.which("redis-server"):
        rdir = tempfile.mkdtemp(prefix="shmf-pybench-redis-")
        redis_proc = subprocess.Popen(["redis-server", "--port", str(REDIS_PORT), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--dir", rdir], stdout=subprocess.DEVNULL)
        time.sleep(0.5)
    # Rounds: each runs the Python variants once (a fresh process) and then the C loop once,
    # so that every variant is measured at the same times as the others (a shared machine's
    # load moves within minutes).
    res = None
    res_capi = []
    try:
        for rnd in range(args.reps):
            out = run([py, os.path.abspath(__file__), "--inner", "--n", str(args.n), "--reps", "1",
                       "--redis-n", str(args.redis_n if redis_proc and rnd < 3 else 0)], env=env, cwd=work,
                      capture_output=True, text=True).stdout
            r = json.loads(out)
            if res is None:
                res = r
                res["redis"] = r.get("redis")
            else:
                res["runs"] += r["runs"]
                if isinstance(r.get("redis"), list):
                    res["redis"] += r["redis"]
            capi_out = run([capi, f"shmf-pybench-capi-{os.getpid()}", str(args.n), "1", str(4 * args.n)],
                           capture_output=True, text=True).stdout
            res_capi += [[float(x) for x in line.split()] for line in capi_out.splitlines() if line.strip()]
    finally:
        if redis_proc:
            redis_proc.terminate()
            redis_proc.wait(timeout=30)
            shutil.rmtree(rdir, ignore_errors=True)
    res["capi"] = res_capi
    load_end = open("/proc/loadavg").read().split()[:3]
    write(args, res, load, load_end)


def med(xs):
    return statistics.median(xs)


def write(args, res, load, load_end):
    runs = res["runs"]
    rows = []
    triv = min(r["trivial"][0] for r in runs)
    for key, label in (("trivial", "trivial Python function call `f(plan, device)`"),
                       ("compiled", "**compiled binding** (`shmfilter._native`): `w.mark_if_unseen(plan, device)`"),
                       ("ctypes", "the package's ctypes binding (`SHMFILTER_BINDING=ctypes`)"),
                       ("raw_ctypes", "raw ctypes: `lib.shmf_window_mark_if_unseen(ptr, plan, d.encode(), 16, 7)`")):
        new = [r[key][0] for r in runs]
        seen = [r[key][1] for r in runs]
        rows.append((label, min(new), min(seen), med(new), med(seen)))
    capi_new = [c[0] for c in res["capi"]]
    capi_seen = [c[1] for c in res["capi"]]
    rows.append(("the C API itself (bench/python/capi_loop.c, same keys and library)", min(capi_new),
                 min(capi_seen), med(capi_new), med(capi_seen)))
    redis_line = ""
    if isinstance(res.get("redis"), list):
        rn = [x[0] for x in res["redis"]]
        rs = [x[1] for x in res["redis"]]
        rows.append((f"redis-py 4.3 `r.set(f'{{plan}}:{{device}}', 1, nx=True)` (local redis-server, "
                     f"{args.redis_n:,} devices)", min(rn), min(rs), med(rn), med(rs)))
    elif res.get("redis"):
        redis_line = f"\nredis-py row left out: {res['redis']}.\n"
    comp = next(r for r in rows if r[0].startswith("**compiled"))
    cmd = "python3 bench/python_bench.py" + (f" --n {args.n}" if args.n != 50000 else "") + \
        (f" --reps {args.reps}" if args.reps != 9 else "") + (f" --library {args.library}" if args.library else "")
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines = [
        "# Python: per-call cost of the compiled binding",
        "",
        "`Window.mark_if_unseen(plan, device)` with a str device (16 hex digits), from Python, in one run;",
        "written by `bench/python_bench.py` (docs/python.md, \"The compiled binding\").",
        "The package is installed as a user would (a venv, `pip install --no-index ./python`); every row",
        f"runs {args.n:,} calls per pass on a fresh window (retention 7, expected_per_bucket {4 * args.n:,}):",
        "pass *new* marks new pairs, pass *seen* asks the same pairs again. Best of "
        f"{args.reps} repetitions (as timeit reports: on a shared machine other processes only add time),",
        "the median beside it; ratios are best to best.",
        "",
        "```",
        f"$ {cmd}",
        "```",
        "",
        f"Machine: {cpu or platform.processor()}, {os.cpu_count()} CPUs, Linux {platform.release()}, "
        f"Python {platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"load average {' '.join(load)} at the start, {' '.join(load_end)} at the end (a shared machine).",
        "",
        "| per call (ns) | new: best | seen: best | new / trivial | seen / trivial | new: median | seen: median |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, new, seen, mnew, mseen in rows:
        lines.append(f"| {label} | {new:,.0f} | {seen:,.0f} | {new / triv:.1f}x | {seen / triv:.1f}x | "
                     f"{mnew:,.0f} | {mseen:,.0f} |")
    r_new, r_seen = comp[1] / triv, comp[2] / triv
    capi_new, capi_seen = min(capi_new), min(capi_seen)
    ok_abs = comp[1] <= 600 and comp[2] <= 600
    lines += [
        redis_line,
        f"Target (issue #25): at most 0.6 us a call: new {comp[1]:.0f} ns, seen {comp[2]:.0f} ns: "
        f"{'met' if ok_abs else 'NOT met'}. At most 5x a trivial Python call: new {r_new:.1f}x, seen "
        f"{r_seen:.1f}x: {'met' if max(r_new, r_seen) <= 5 else 'met for seen only' if r_seen <= 5 else 'NOT met'}.",
        f"What the binding adds to the C call: {comp[1] - capi_new:.0f} ns (new), {comp[2] - capi_seen:.0f} ns (seen); "
        f"the C work of a new pair alone is {capi_new / triv:.1f}x a trivial call.",
        "",
    ]
    text = "\n".join(lines)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=50000, help="calls per pass (distinct devices)")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--redis-n", type=int, default=20000, help="calls per pass for redis-py (0: leave it out)")
    ap.add_argument("--library", help="a built libshmfilter.so to bundle (default: the package's own build)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results", "python.md"))
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    (inner if args.inner else outer)(args)


if __name__ == "__main__":
    main()
