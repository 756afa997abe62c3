#!/usr/bin/python3
"""tests/servers/mission.py MODE PORT ...: the client side of nginx_mission.sh.

It sends the requests through pipeline.py (so it knows the answer of every
request it sent) and checks them against an exact oracle it keeps itself.

uv PORT BUCKET_SECONDS SEGMENT SHMTOOL
    8,000 plans, Zipf-sized per day (scaled down from the mission's 1.2e8 device
    IDs a day: ~33,000 adds a day, the biggest plan ~3,100 devices, 3 plans past
    the exact tier's 1,000, every plan at least 1 device), over 3 day buckets of
    BUCKET_SECONDS (a short bucket stands in for the day: nginx has no injected
    clock), each day sharing half its devices with the day before. After days 1
    and 3, every plan's today count and 7-bucket count (the union) is read
    through nginx and compared with the oracle's: equal while every bucket of the
    plan holds at most 1,000 devices (the exact tier), else within 4 standard
    errors of the HLL (1.04/sqrt(16384) = 0.8125%: 3.25%). The oracle knows each
    add's bucket from the client's clock: a request is sent in chunks that stay
    clear of the bucket boundaries (0.6 s guard); a chunk that still crossed one
    (a stalled machine) makes its adds ambiguous between the buckets it spans,
    and the check for a plan holding such adds is the range of both readings
    (reported; none on an idle machine). A count chunk that crossed a boundary is
    read again. Then 8,000 per-plan HLLs uv:PLAN are created through nginx (the
    pattern the family replaces), and /status (and shmtool stats --prometheus)
    with the 8,000 plans in the family, a window holding 8,000 plans' pairs and the
    8,000 HLLs must be at most 100 KB.

overload PORT SEGMENT
    Two windows (cuckoo and bloom variants, expected=20,000 a bucket, error=0.01
    over 7 buckets: p1 = 1 - 0.99^(1/7) = 0.1435% a bucket) driven to 8x their
    expected day through nginx: 160,000 distinct (plan, device) pairs over 8,000
    plans (20 a plan), each sent once, in shuffled order, over 4 connections (both
    workers), in eighths (1x .. 8x). Then every pair is sent again. Served twice = a pair answered
    "new" more than once: must be 0 for both variants (no pair is ever in flight
    twice at once, so a Bloom window's racing marks cannot happen either).
    False positives: pairs answered "seen" on first sight (never served), and
    40,000 fresh pairs probed read-only at 8x: each at most n x p1 + 4 sigma
    (sigma = sqrt(n p1)) + 2. Every answer is new or seen (no fail-open: no
    "failed", no $shmfilter_error), and /status shows overflow layers in use.
"""
import collections, math, os, random, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pipeline import get_many  # noqa: E402

CONNS = 4


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def fetch(port, path):
    return get_many(port, [path], conns=1)[0]


# ---------------------------------------------------------------- uv
def uv(port, bucket_s, segment, shmtool):
    rng = random.Random(20261205)
    plans = 8000
    per_day = 30000
    harmonic = sum(1.0 / r for r in range(1, plans + 1))
    ids = list(range(1, plans + 1))
    rng.shuffle(ids)  # plan id of rank r: the big plans are not the small ids
    size = {ids[r - 1] * 7 + 100: max(1, int(per_day / (harmonic * r))) for r in range(1, plans + 1)}
    GUARD, LAG = 0.6, 0.05  # LAG: the library reads CLOCK_REALTIME_COARSE (a few ms behind)

    def bucket(t):
        return int(t // bucket_s)

    def wait_fresh_bucket():
        t = time.time()
        time.sleep(bucket_s - (t % bucket_s) + LAG)

    def guard():
        t = time.time()
        if bucket_s - (t % bucket_s) < GUARD:
            time.sleep(bucket_s - (t % bucket_s) + LAG)

    # truth[plan] = list of (device, bucket_lo, bucket_hi): the bucket range an add landed in
    truth = {p: [] for p in size}
    ambiguous = 0
    answers = {"0": 0, "1": 0}
    day_buckets = []

    def add_day(d):
        nonlocal ambiguous
        reqs = []
        for p, n in size.items():
            start = d * (n // 2 + 1)  # half of yesterday's devices again
            for k in range(start, start + n):
                reqs.append((p, f"d{p}x{k}"))
        # a tenth of the adds repeated within the day (answered 0 by the sketch)
        reqs += rng.sample(reqs, len(reqs) // 10)
        rng.shuffle(reqs)
        wait_fresh_bucket()
        first = bucket(time.time())
        chunk = 3000
        for i in range(0, len(reqs), chunk):
            part = reqs[i:i + chunk]
            guard()
            t0 = time.time() - LAG
            got = get_many(port, [f"/add?plan={p}&device={dev}" for p, dev in part], conns=CONNS)
            t1 = time.time()
            lo, hi = bucket(t0), bucket(t1)
            if lo != hi:
                ambiguous += len(part)
            for (p, dev), a in zip(part, got):
                x = a.split()
                if len(x) != 2 or x[0] not in ("0", "1") or x[1] not in ("new", "seen"):
                    fail(f"plan {p} device {dev} answered {a!r} (expected uv_add 0|1, mark new|seen)")
                answers[x[0]] += 1
                truth[p].append((dev, lo, hi))
        day_buckets.append((first, bucket(time.time())))
        return len(reqs)

    def expected(p, a, b):
        """(lo, hi, max_per_bucket): the plan's distinct devices over buckets a..b."""
        sure, maybe = set(), set()
        per_bucket = {}
        for dev, lo, hi in truth[p]:
            if a <= lo and hi <= b:
                sure.add(dev)
            elif hi >= a and lo <= b:
                maybe.add(dev)
            for k in range(lo, hi + 1):
                per_bucket.setdefault(k, set()).add(dev)
        top = max((len(s) for k, s in per_bucket.items() if a <= k <= b), default=0)
        return len(sure), len(sure | maybe), top

    checked = {"exact": 0, "hll": 0}
    worst = 0.0
    week_above_today = [0]

    def check_counts(label):
        nonlocal worst
        plist = sorted(size)
        chunk = 4000
        for i in range(0, len(plist), chunk):
            part = plist[i:i + chunk]
            for attempt in range(5):
                guard()
                t0 = time.time() - LAG
                got = get_many(port, [f"/uv?plan={p}" for p in part], conns=CONNS)
                t1 = time.time()
                if bucket(t0) == bucket(t1):
                    break
            else:
                fail("5 count chunks in a row crossed a bucket boundary")
            q = bucket(t1)
            for p, a in zip(part, got):
                today, week = (int(x) for x in a.split())
                week_above_today[0] += week > today
                for what, n, w in (("today", today, 1), ("7-bucket", week, 7)):
                    lo, hi, top = expected(p, q - w + 1, q)
                    if top <= 1000:  # every bucket's sketch is exact: so is the union
                        checked["exact"] += 1
                        if not lo <= n <= hi:
                            fail(f"{label}: plan {p} {what} count {n}, oracle {lo}..{hi} (exact tier)")
                    else:
                        checked["hll"] += 1
                        if not lo * (1 - 0.0325) <= n <= hi * (1 + 0.0325):
                            fail(f"{label}: plan {p} {what} count {n}, oracle {lo}..{hi} "
                                 f"+- 3.25% (4 sigma of p=14)")
                        worst = max(worst, abs(n - lo) / lo if lo == hi else 0.0)

    t_start = time.time()
    n0 = add_day(0)
    check_counts("day 1")
    week_above_today[0] = 0
    n1 = add_day(1)
    n2 = add_day(2)
    check_counts("day 3")
    # the test's own shape: every plan has devices of days 1 and 2 that it did not see on
    # day 3, so (while those buckets are within the last 7) its week counts more than today
    if week_above_today[0] < 0.9 * len(size):
        fail(f"day 3: only {week_above_today[0]} of {len(size)} plans count more over 7 buckets than "
             "today: the days did not land in different buckets within the window")
    big = sum(1 for n in size.values() if n > 1000)
    print(f"uv: {len(size)} plans, {n0 + n1 + n2} adds over 3 buckets of {bucket_s} s "
          f"(buckets {day_buckets}), answers {answers}, {big} plans past the exact tier a day; "
          f"checked {checked['exact']} exact and {checked['hll']} HLL counts (worst HLL error "
          f"{100 * worst:.2f}%), {ambiguous} adds in chunks that crossed a boundary; "
          f"{time.time() - t_start:.1f} s")
    if answers["1"] == 0 or answers["0"] == 0:
        fail(f"answers {answers}: expected both 1 (new device) and 0 (repeat)")
    t = time.time()
    got = get_many(port, [f"/hll?plan={p}&device=d{p}" for p in sorted(size)], conns=CONNS)
    made = sum(1 for a in got if a == "1 \n")
    print(f"uv: {made} per-plan HLLs uv:PLAN created through nginx in {time.time() - t:.1f} s")
    if made != len(size):
        fail(f"{made} of {len(size)} per-plan HLLs created: {collections.Counter(got).most_common(3)}")
    scrape = fetch(port, "/status")
    print(f"uv: /status with 8,000 plans (a UV family, a window, 8,000 HLLs): {len(scrape)} bytes, "
          f"{scrape.count(chr(10))} lines")
    if len(scrape.encode()) > 100_000:
        fail(f"/status is {len(scrape.encode())} bytes with 8,000 plans (bound 100,000)")
    for fam in ("shmfilter_uv_spaces", "shmfilter_window_", "shmfilter_requests_total"):
        if fam not in scrape:
            fail(f"/status lacks {fam}")
    text = subprocess.run([shmtool, "stats", segment, "--prometheus"], check=True, capture_output=True).stdout
    print(f"uv: shmtool stats --prometheus: {len(text)} bytes")
    if len(text) > 100_000:
        fail(f"shmtool stats --prometheus is {len(text)} bytes with 8,000 plans (bound 100,000)")


# ---------------------------------------------------------------- rescue (nginx_edges.sh removed)
def stream(port, stopfile, outfile, limit=60000):
    """Fresh (plan, device) pairs over 8,000 plans, 250 a batch over 4 connections
    (reconnecting when a reload's old worker closes one), a batch every 40 ms or
    slower (so that the stream lasts through the whole sequence: at most ~6,000
    pairs a second, 60,000 in all), until STOPFILE exists: what the edges test
    runs while the segment is removed, rescued and reloaded."""
    answers, i = [], 0
    while not os.path.exists(stopfile) and i < limit:
        batch = [(1 + (k * 7919) % 8000, f"r{k}") for k in range(i, i + 250)]
        got = get_many(port, [f"/m?plan={p}&device={d}" for p, d in batch], conns=CONNS, retry=True)
        answers += [(p, d, a.strip()) for (p, d), a in zip(batch, got)]
        i += 250
        time.sleep(0.04)
    with open(outfile, "w") as f:
        for p, d, a in answers:
            f.write(f"{p} {d} {a}\n")
    print(f"stream: {len(answers)} pairs over 8,000 plans marked while the segment was removed and reloaded"
          f"{' (stopped at its limit before the end)' if not os.path.exists(stopfile) else ''}")


def recheck(port, infile):
    """Every pair the stream sent, sent again: all must answer 'seen seen' (set and
    window). A pair answered 'new' by either structure more than once over both
    passes was served twice: the bound is 0."""
    rows = [line.rstrip("\n").split(" ", 2) for line in open(infile)]
    first = collections.Counter(r[2] for r in rows)
    got = get_many(port, [f"/m?plan={p}&device={d}" for p, d, _ in rows], conns=CONNS, retry=True)
    twice = [(p, d, a, b.strip()) for (p, d, a), b in zip(rows, got) if b.strip() != "seen seen"]
    print(f"recheck: {len(rows)} pairs, first answers {dict(first)}, {len(twice)} answered other than "
          f"'seen seen' on the second pass")
    if twice:
        fail(f"{len(twice)} pairs served twice or failing after remove + rescue + reload, e.g. {twice[:5]}")
    # First answers: 'new new'; 'seen seen' where a closed connection lost the answer of a
    # request that was then sent again (its 'new' went to nobody); 'new seen' a false
    # positive of the window (error=0.01 over 7 buckets: at most p1 = 0.1435% a query;
    # bound n p1 + 4 sigma + 2). Never a failure answer, never 'seen new' (the exact set
    # has no false positives: that would be a lost mark).
    fp = sum(1 for r in rows if r[2] == "new seen")
    p1 = 1 - 0.99 ** (1 / 7)
    bound = int(len(rows) * p1 + 4 * math.sqrt(len(rows) * p1) + 2)
    bad = [r for r in rows if r[2] not in ("new new", "seen seen", "new seen")]
    if bad or fp > bound:
        fail(f"{len(bad)} first answers not new|seen for both, e.g. {bad[:5]}; {fp} window false positives "
             f"(bound {bound})")


# ---------------------------------------------------------------- exhaustion
def exhaust(port):
    """A window (expected=20,000, day buckets) in a segment that cannot grow and has no
    room left for an overflow layer, driven to 8x through nginx: 160,000 fresh pairs
    over 8,000 plans. Pairs answered 'new' with no $shmfilter_error are acknowledged
    marks; past the table the window cannot add a layer and new pairs answer per
    shmfilter_fail (open: 'new', with the cause in $shmfilter_error). Then every pair is
    sent again: every acknowledged one must answer 'seen' (the workers keep answering
    from what exists: none served twice); the log bound is nginx_mission.sh's."""
    rng = random.Random(22)
    pairs = [(1 + (p * 7919) % 1000003, f"x{p}-{k}") for p in range(8000) for k in range(20)]
    rng.shuffle(pairs)
    first = get_many(port, [f"/m?plan={p}&device={d}" for p, d in pairs], conns=CONNS)
    acked, failed, causes = set(), 0, collections.Counter()
    for (p, d), a in zip(pairs, first):
        x = a.split()
        if not x or x[0] not in ("new", "seen") or len(x) > 2:
            fail(f"pair ({p}, {d}) answered {a!r}")
        if len(x) == 2:
            causes[x[1]] += 1
        if x == ["new"]:
            acked.add((p, d))
        elif x[0] == "new":
            failed += 1
    again = get_many(port, [f"/m?plan={p}&device={d}" for p, d in pairs], conns=CONNS)
    twice = [(p, d, a.strip()) for (p, d), a in zip(pairs, again) if (p, d) in acked and a.split()[0] != "seen"]
    print(f"exhaustion: {len(pairs)} pairs (8x expected 20,000): {len(acked)} acknowledged 'new', {failed} "
          f"answered 'new' per shmfilter_fail open, causes {dict(causes)}; {len(twice)} acknowledged pairs "
          f"not 'seen' when sent again")
    if twice:
        fail(f"{len(twice)} acknowledged pairs served twice after the segment ran out, e.g. {twice[:5]}")
    if failed < len(pairs) // 2 or not acked:
        fail("the segment did not run out where the test expects (past the first table)")
    if set(causes) - {"full", "no_space"}:
        fail(f"causes {dict(causes)}: expected full or no_space")


# ---------------------------------------------------------------- overload
def overload(port, segment):
    rng = random.Random(8)
    expected, plans, per_plan = 20000, 8000, 20
    p1 = 1 - 0.99 ** (1 / 7)
    pairs = [(1 + (p * 7919) % 1000003, f"dev{p}-{k}") for p in range(plans) for k in range(per_plan)]
    assert len(pairs) == 8 * expected
    rng.shuffle(pairs)
    new = {"cuckoo": {}, "bloom": {}}
    first_seen = {"cuckoo": 0, "bloom": 0}

    def mark(batch, phase):
        got = get_many(port, [f"/m?plan={p}&device={d}" for p, d in batch], conns=CONNS)
        for (p, d), a in zip(batch, got):
            parts = a.split()
            if len(parts) != 2 or any(x not in ("new", "seen") for x in parts):
                fail(f"{phase}: pair ({p}, {d}) answered {a!r}: expected new|seen for both windows "
                     "(anything else fails open)")
            for v, x in zip(("cuckoo", "bloom"), parts):
                if x == "new":
                    new[v][(p, d)] = new[v].get((p, d), 0) + 1
                elif phase == "first":
                    first_seen[v] += 1

    # 1x .. 8x in eighths, so the layers are added while requests run
    for i in range(8):
        mark(pairs[i * expected:(i + 1) * expected], "first")
    again = pairs[:]
    rng.shuffle(again)
    mark(again, "again")
    probes = [(1 + (p * 7919) % 1000003, f"fresh{p}-{k}") for p in range(plans) for k in range(5)]
    got = get_many(port, [f"/s?plan={p}&device={d}" for p, d in probes], conns=CONNS)
    probe_fp = {"cuckoo": 0, "bloom": 0}
    for (p, d), a in zip(probes, got):
        parts = a.split()
        if len(parts) != 2 or any(x not in ("seen", "unseen") for x in parts):
            fail(f"probe ({p}, {d}) answered {a!r}")
        for v, x in zip(("cuckoo", "bloom"), parts):
            probe_fp[v] += x == "seen"

    def bound(n):
        m = n * p1
        return int(m + 4 * math.sqrt(m) + 2)

    scrape = fetch(port, "/status")
    layers = {}
    for line in scrape.splitlines():
        if line.startswith("shmfilter_window_overflow_layers{"):
            for v in ("cuckoo", "bloom"):
                if f'name="w_{v}"' in line:
                    layers[v] = float(line.split()[-1])
    per_worker = collections.Counter()
    for line in scrape.splitlines():
        if line.startswith("shmfilter_requests_total{") and 'op="mark"' in line:
            per_worker[line.split('worker="')[1].split('"')[0]] += float(line.split()[-1])
    print(f"overload: mark evaluations per worker: {dict(per_worker)}")
    ok = True
    for v in ("cuckoo", "bloom"):
        twice = sum(1 for c in new[v].values() if c > 1)
        print(f"overload: {v} window at 8x ({len(pairs)} pairs, expected {expected}): {twice} pairs served "
              f"twice, {first_seen[v]} first-sight false positives (bound {bound(len(pairs))}), "
              f"{probe_fp[v]} of {len(probes)} fresh probes seen (bound {bound(len(probes))}; "
              f"p1 {100 * p1:.4f}%, 4 sigma), overflow layers {layers.get(v)}")
        if twice:
            print(f"FAIL: {v}: {twice} pairs answered 'new' more than once, bound 0")
            ok = False
        if first_seen[v] > bound(len(pairs)) or probe_fp[v] > bound(len(probes)):
            print(f"FAIL: {v}: false positives above the asked rate's bound")
            ok = False
        if not layers.get(v):
            print(f"FAIL: {v}: /status shows no overflow layer at 8x: was the window driven past its table?")
            ok = False
    if "failures_total" in scrape:
        for line in scrape.splitlines():
            if line.startswith("shmfilter_failures_total{") and float(line.split()[-1]) != 0:
                print(f"FAIL: {line}")
                ok = False
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "uv":
        uv(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif mode == "stream":
        stream(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif mode == "recheck":
        recheck(int(sys.argv[2]), sys.argv[3])
    elif mode == "exhaustion":
        exhaust(int(sys.argv[2]))
    elif mode == "overload":
        overload(int(sys.argv[2]), sys.argv[3])
    else:
        fail(f"unknown mode {mode}")
    print(f"mission {mode}: OK")
