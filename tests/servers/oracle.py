#!/usr/bin/python3
"""tests/servers/oracle.py: checks mark answers against the request stream.

Reads log lines "PLAN DEVICE ANSWER_SET [ANSWER_BLOOM]" (nginx access log or
the gunicorn app's log) and the segment through the Python binding:
  exact:  every distinct key was answered "new" exactly once, the set holds
          exactly the distinct keys;
  killed: a worker was SIGKILLed: no key got "new" twice; every key answered
          "new" is still in the set (nothing acknowledged was lost); keys never
          answered "new" (their marking request died with the worker) are at
          most --slack (the killed worker's in-flight requests).
Bloom column (optional): distinct keys never answered "new" are false
positives, bounded by --bloom-fp-max; keys answered "new" more than once are
racing adds (two requests setting different bits of one key), counted.
Window columns (optional, --window NAME for column 5, --window-bloom NAME for
column 6): mark-if-unseen of (space = PLAN, item = DEVICE) over the whole
retention. Cuckoo window: no pair "new" twice (except stats' rotation_races,
counted), every pair answered "new" still seen in the window, pairs never "new"
are false positives within the bound from the window's own FP estimate (plus
--slack when a worker was killed). Bloom window: the same FP bound; pairs "new"
more than once at most stats' racing_marks (an upper bound on double answers).
FP bound: n x fp_now_all (the FP of a query over all buckets at the final
load, an upper bound for every earlier query) + 4 standard deviations + 2.
"""
import argparse, collections, math, os, sys
sys.path.insert(0, os.path.join(os.environ["SHMF_SOURCE_DIR"], "python"))
import shmfilter

ap = argparse.ArgumentParser()
ap.add_argument("--log", required=True, nargs="+")
ap.add_argument("--segment", required=True)
ap.add_argument("--set", default="pairs")
ap.add_argument("--mode", choices=["exact", "killed"], default="exact")
ap.add_argument("--slack", type=int, default=0)
ap.add_argument("--bloom-fp-max", type=int, default=2)
ap.add_argument("--min-requests", type=int, default=1000)
ap.add_argument("--window", default=None, help="cuckoo window of column 5")
ap.add_argument("--window-bloom", default=None, help="bloom window of column 6")
a = ap.parse_args()
window_new = {5: collections.Counter(), 6: collections.Counter()}

new = collections.Counter()
bloom_new = collections.Counter()
keys = set()
lines = 0
has_bloom = False
for path in a.log:
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue
            lines += 1
            k = f"{parts[0]}:{parts[1]}"
            keys.add(k)
            if parts[2] == "new":
                new[k] += 1
            elif parts[2] != "seen":
                sys.exit(f"FAIL: answer {parts[2]!r} for {k} (line {line.strip()!r}): the structure failed")
            if len(parts) > 3:
                has_bloom = True
                if parts[3] == "new":
                    bloom_new[k] += 1
            for col in (5, 6):
                if len(parts) >= col:
                    if parts[col - 1] == "new":
                        window_new[col][k] += 1
                    elif parts[col - 1] != "seen":
                        sys.exit(f"FAIL: window answer {parts[col - 1]!r} for {k} (line {line.strip()!r})")
if lines < a.min_requests:
    sys.exit(f"FAIL: only {lines} answered requests in the log, expected >= {a.min_requests}")
twice = [k for k, c in new.items() if c > 1]
never = [k for k in keys if new[k] == 0]
with shmfilter.Segment.open(a.segment) as seg, seg.set(a.set) as s:
    present = s.contains_many([k.encode() for k in sorted(new)])
    lost = [k for k, p in zip(sorted(new), present) if not p]
    size = len(s)
print(f"oracle: {lines} requests, {len(keys)} distinct keys, {sum(new.values())} 'new', "
      f"{len(twice)} keys new twice, {len(never)} keys never new, {len(lost)} acknowledged keys lost, "
      f"set size {size}")
if twice:
    sys.exit(f"FAIL: {len(twice)} keys answered 'new' more than once, e.g. {twice[:5]}")
if lost:
    sys.exit(f"FAIL: {len(lost)} keys answered 'new' are not in the set (acknowledged and lost), e.g. {lost[:5]}")
if a.mode == "exact":
    if never:
        sys.exit(f"FAIL: {len(never)} keys never answered 'new', e.g. {never[:5]}")
    if size != len(keys):
        sys.exit(f"FAIL: the set holds {size} keys, the stream has {len(keys)} distinct")
else:
    if len(never) > a.slack:
        sys.exit(f"FAIL: {len(never)} keys never answered 'new' (bound: {a.slack} in-flight requests)")
    if size < len(new) or size > len(keys) + a.slack:
        sys.exit(f"FAIL: set size {size} outside [{len(new)}, {len(keys) + a.slack}]")
if has_bloom:
    fp = [k for k in keys if bloom_new[k] == 0]
    racing = sum(1 for k in keys if bloom_new[k] > 1)
    print(f"oracle: bloom: {len(fp)} false positives (bound {a.bloom_fp_max}), {racing} keys with racing adds")
    if len(fp) > a.bloom_fp_max:
        sys.exit(f"FAIL: bloom answered {len(fp)} distinct keys 'seen' on first sight, bound {a.bloom_fp_max}")


def fp_bound(n, p):
    mean = n * p
    return int(mean + 4 * math.sqrt(mean) + 2)


for col, name, variant in ((5, a.window, "cuckoo"), (6, a.window_bloom, "bloom")):
    if name is None:
        continue
    counts = window_new[col]
    with shmfilter.Segment.open(a.segment) as seg, seg.window(name) as w:
        st = w.stats()
        if st["variant"] != variant:
            sys.exit(f"FAIL: window {name} is a {st['variant']}, the oracle expected {variant}")
        keyed = sorted(counts)
        pairs = [(int(k.split(":")[0]), k.split(":", 1)[1]) for k in keyed]
        lost = [k for k, (sp, dev) in zip(keyed, pairs) if not w.seen(sp, dev)]
    twice = sum(c - 1 for c in counts.values() if c > 1)
    never = [k for k in keys if counts[k] == 0]
    bound = fp_bound(len(keys), st["fp_now_all"])
    slack = a.slack if a.mode == "killed" else 0
    print(f"oracle: window {name} ({variant}): {sum(counts.values())} 'new', {len(never)} pairs never new "
          f"(FP bound {bound} + slack {slack}: fp_now_all {st['fp_now_all']:.3g}), {twice} extra 'new' answers "
          f"(racing_marks {st['racing_marks']}, rotation_races {st['rotation_races']}), {len(lost)} lost")
    if lost:
        sys.exit(f"FAIL: {len(lost)} pairs answered 'new' are not seen in window {name}, e.g. {lost[:5]}")
    allowed_twice = st["rotation_races"] if variant == "cuckoo" else st["racing_marks"]
    if twice > allowed_twice:
        sys.exit(f"FAIL: window {name}: {twice} extra 'new' answers, bound {allowed_twice} "
                 f"({'rotation_races' if variant == 'cuckoo' else 'racing_marks'})")
    if len(never) > bound + slack:
        sys.exit(f"FAIL: window {name}: {len(never)} pairs never answered 'new', bound {bound} + {slack}")
print("oracle: OK")
