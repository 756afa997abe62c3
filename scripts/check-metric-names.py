#!/usr/bin/env python3
"""Every metric name the docs mention exists, and every metric the code declares is documented.

Metric families are read from the code that declares them: the library's
`{"shmfilter_...", "gauge"|"counter", ...}` rows (lib/ops/metrics.cpp, each kind's
lib/structures/<kind>/<kind>_kind.cpp) and the nginx module's
`ngx_http_shmfilter_family(t, "shmfilter_...", "gauge", ...)` calls. A doc token is a
metric mention when it reads `shmfilter_<prefix>_<rest>` for a family prefix (segment,
structure, a kind's name, ...) and is not an nginx directive (read from the module's
command table). Also checks docs/metrics.md's `kind="a|b|..."` list against the kinds
table (the names in lib/structures/*/*_kind.cpp rows).

Usage: scripts/check-metric-names.py [ROOT]   (exit 1 and one line per problem)
       scripts/check-metric-names.py --self-test
"""
import glob
import os
import re
import sys

FAMILY = re.compile(r'"(shmfilter_[a-z0-9_]+)",\s*"(?:gauge|counter|histogram|summary)"')
DIRECTIVE = re.compile(r'ngx_string\("(shmfilter_[a-z0-9_]+)"\)')
KIND_NAME = re.compile(r'Kind::k\w+,\s*(?://[^\n]*\n\s*)?"([a-z_0-9]+)"')
TOKEN = re.compile(r'\bshmfilter_[a-z0-9_]*[a-z0-9]\b')
KIND_LIST = re.compile(r'kind="([a-z_|\\]+)"')


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def sources(root):
    return (glob.glob(os.path.join(root, "lib", "**", "*.cpp"), recursive=True)
            + glob.glob(os.path.join(root, "lib", "**", "*.h"), recursive=True)
            + glob.glob(os.path.join(root, "nginx", "*.c")))


def docs(root):
    out = glob.glob(os.path.join(root, "docs", "*.md")) + [os.path.join(root, "README.md")]
    out += glob.glob(os.path.join(root, "*", "README.md"))
    return [p for p in out if os.path.exists(p)]


def check(root):
    families, directives, kinds = set(), set(), set()
    for p in sources(root):
        text = read(p)
        families.update(FAMILY.findall(text))
        directives.update(DIRECTIVE.findall(text))
        if p.endswith("_kind.cpp"):
            kinds.update(KIND_NAME.findall(text))
    problems = []
    if not families:
        return ["no metric family found in lib/ or nginx/: has the declaration form changed?"]
    prefixes = {f.split("_")[1] for f in families}
    mentioned = set()
    for p in docs(root):
        rel = os.path.relpath(p, root)
        for n, line in enumerate(read(p).splitlines(), 1):
            for tok in TOKEN.findall(line):
                if tok in directives or tok.split("_")[1] not in prefixes or tok.count("_") < 2:
                    continue
                mentioned.add(tok)
                if tok not in families:
                    problems.append(f"{rel}:{n}: metric {tok} does not exist (no family declares it)")
    metrics_md = os.path.join(root, "docs", "metrics.md")
    nginx_md = os.path.join(root, "docs", "nginx.md")
    documented = set(TOKEN.findall(read(metrics_md))) if os.path.exists(metrics_md) else set()
    if os.path.exists(nginx_md):
        documented |= set(TOKEN.findall(read(nginx_md)))
    for f in sorted(families - documented):
        problems.append(f"docs/metrics.md: metric {f} (declared in the code) is not documented")
    if os.path.exists(metrics_md):
        lists = KIND_LIST.findall(read(metrics_md))
        if not lists:
            problems.append('docs/metrics.md: no kind="a|b|..." list of the kinds table')
        for lst in lists:
            named = set(lst.replace("\\", "").split("|"))
            if named != kinds:
                problems.append(f'docs/metrics.md: kind="{lst}" lists {sorted(named)}; the kinds table has '
                                f"{sorted(kinds)}")
    return problems


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "lib", "structures", "x"))
        os.makedirs(os.path.join(d, "nginx"))
        os.makedirs(os.path.join(d, "docs"))
        with open(os.path.join(d, "lib", "structures", "x", "x_kind.cpp"), "w") as f:
            f.write('{"shmfilter_x_items", "gauge", "h"},\nSHMF_KIND_ROW(Kind::kX, "x", "x thing"\n'
                    'constinit const KindRow kRow(\n    Kind::kY,  // kind\n    "y",  // name\n')
        with open(os.path.join(d, "nginx", "m.c"), "w") as f:
            f.write('ngx_string("shmfilter_x_add") f(t, "shmfilter_segment_attached",\n "gauge"')
        with open(os.path.join(d, "docs", "metrics.md"), "w") as f:
            f.write('`shmfilter_x_items` kind="x|z" shmfilter_x_add shmfilter_x_missing shmfilter_module\n')
        got = check(d)
        want = ["docs/metrics.md:1: metric shmfilter_x_missing does not exist (no family declares it)",
                "docs/metrics.md: metric shmfilter_segment_attached (declared in the code) is not documented",
                "docs/metrics.md: kind=\"x|z\" lists ['x', 'z']; the kinds table has ['x', 'y']"]
        if got != want:
            print("self-test failed:\n  got  " + "\n       ".join(got) + "\n  want " + "\n       ".join(want))
            return 1
    print("self-test passed: a missing metric, an undocumented family and a wrong kind list are each found")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problems: fix the docs (or the name) so that every metric named exists")
        return 1
    print("every metric named in the docs exists, every declared metric is documented, the kind list matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
