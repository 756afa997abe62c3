#!/usr/bin/env python3
# scripts/check-paths.py: fails on any repository path named in a text of the
# repository that does not exist (issue 21, "texts that cannot drift"); ctest
# `doc_paths` runs it on the tree, `doc_paths_self_test` runs --self-test.
#
#   python3 scripts/check-paths.py [ROOT]      every missing path as file:line, exit 1
#   python3 scripts/check-paths.py --list [ROOT]  also every reference it checked
#   python3 scripts/check-paths.py --self-test  proves it finds a missing path
#
# What is read: every text file under the top-level folders of TOP below (docs/,
# the READMEs, scripts, CMake, Python, Lua, nginx/config ...) and the top-level
# README.md and CMakeLists.txt, whole; of C/C++ sources (.h .hpp .c .cpp) the
# comments only (code is checked by the compiler). Not read: tests/fuzz/corpus/
# (fuzzer inputs), build trees (build*/ is not in TOP) and this file.
#
# What counts as a repository path (a "reference"):
#   1. a token that starts with a top-level folder of the repository (TOP below:
#      lib/, docs/, tests/ ...), not preceded by a path character (so /usr/lib/x
#      and $ROOT/tests/x are not references), e.g. lib/segment/txn.cpp, docs/,
#      tests/unit/test_*.cpp, ./scripts/test.sh (commands run from the root);
#   2. a file name with one of the repository's extensions (EXT) behind a folder
#      prefix whose first folder is the name of a folder of the repository, e.g.
#      segment/layout.h, support/test_util.h, shmfilter/segment.hpp. It exists when
#      some path of the tree ends with it (the text names it relative to its layer,
#      its own folder or an include root); sys/mman.h or gtest/gtest.h are not
#      references because the tree has no folder sys/ or gtest/;
#   3. a relative path that starts with ../ (../consumer.cmake), and in
#      Markdown a link's target ([x](window.md#anchor): the anchor is not
#      checked; URLs and absolute paths are not references): resolved against
#      the folder of the text that names it, it must land inside the tree, where
#      rules 1 and 2 could not tell (a link from docs/ to docs/x.md is wrong).
#      Only a build tree (build*/, git-ignored) may be named outside it.
# Trailing punctuation (. , : ;) and Markdown's ** are not part of a reference;
# a trailing / says the reference is a folder. Every occurrence is reported.
#
# Patterns: a reference may hold placeholders, and then it must match at least
# one existing path: * (any characters but /), <word> (one or more characters
# but /), a path part X delimited by _ . - / or the ends (X_impl.h, test_X.cpp),
# ... (anything, e.g. lib/...), and {a,b} (expanded: each alternative must exist).
#
# A build product named after its source exists when the source does: a
# program (bench/latency_bench: bench/latency_bench.cpp), a shared object
# (nginx/ngx_http_shmfilter_module.so: its .c), an object file (X.cpp.o).
# NOT_IN_TREE lists the few other paths a text may name that are not files of
# the tree, each with its reason; keep it short.

import os
import re
import sys

TOP = ("lib", "include", "shmtool", "tests", "bench", "docs", "examples",
       "scripts", "nginx", "python", "cmake", ".ci")
EXT = ("h", "hpp", "c", "cpp", "md", "py", "sh", "cmake", "txt", "lua", "in",
       "bash")
C_EXT = (".h", ".hpp", ".c", ".cpp")
SKIP_DIRS = ("tests/fuzz/corpus",)

# The checker's own self-test plants missing paths in its source.
SELF = "scripts/check-paths.py"
NOT_IN_TREE = {
    # CMakeLists.txt: an install LIBDIR (GNUInstallDirs, Debian multiarch)
    "lib/x86_64-linux-gnu",
}
SOURCE_EXT = (".c", ".cpp")

PATH_CHARS = r"A-Za-z0-9_.\-+*"
_PART = r"(?:[" + PATH_CHARS + r"/]|<[A-Za-z_]+>|\{[A-Za-z0-9_.,*/\-]+\})"
_LEFT = r"(?<![A-Za-z0-9_./\-$}~@])"
RULE1 = re.compile(_LEFT + r"(?:\./)?((?:" + "|".join(re.escape(t) for t in TOP) + r")/"
                   + _PART + r"*)")
RULE3 = re.compile(_LEFT + r"((?:\.\./)+" + _PART + r"*)")
MD_LINK = re.compile(r"\]\(<?([^)<>\s]+?)>?(?:\s+\"[^\"]*\")?\)")
RULE2 = re.compile(_LEFT + r"((?:[A-Za-z0-9_\-]+/)+" + _PART + r"*?\.(?:"
                   + "|".join(EXT) + r"))(?![A-Za-z0-9_])")


def list_tree(root):
    """Every file and folder under root (relative, / separated), build trees and
    .git left out: the set a reference must be found in."""
    files, dirs = set(), set()
    for top in os.listdir(root):
        full = os.path.join(root, top)
        if os.path.isdir(full):
            if top not in TOP:
                continue
            dirs.add(top)
            for d, subdirs, names in os.walk(full):
                rel = os.path.relpath(d, root).replace(os.sep, "/")
                subdirs[:] = [s for s in subdirs if not s.startswith(".")]
                for s in subdirs:
                    dirs.add(rel + "/" + s)
                for n in names:
                    files.add(rel + "/" + n)
        else:
            files.add(top)
    return files, dirs


_C_TOKEN = re.compile(
    r"(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))"
    r'|(?<![A-Za-z0-9_])R"(?P<delim>[^()\\ ]{0,16})\(.*?(?:\)(?P=delim)"|\Z)'
    r'|"(?:\\.|[^"\\\n])*"?'
    r"|(?<![A-Za-z0-9_])'(?:\\.|[^'\\\n])*'?",  # not a digit separator (1'000)
    re.S)


def c_comments(text):
    """The comments of C/C++ text, everything else (code, string and character
    literals) reduced to its newlines, so offsets still give the line."""
    out, pos = [], 0
    for m in _C_TOKEN.finditer(text):
        gap = text[pos:m.start()] if m.group("comment") else text[pos:m.end()]
        out.append("\n" * gap.count("\n") or " ")
        if m.group("comment"):
            out.append(m.group("comment"))
        pos = m.end()
    out.append("\n" * text.count("\n", pos))
    return "".join(out)


def expand_braces(s):
    m = re.search(r"\{([^{}]*)\}", s)
    if not m:
        return [s]
    return [r for alt in m.group(1).split(",")
            for r in expand_braces(s[:m.start()] + alt + s[m.end():])]


def pattern_regex(ref):
    """A regex for ref when it holds a placeholder, else None."""
    parts = re.split(r"(\.\.\.|\*|<[A-Za-z_]+>|(?<![A-Za-z0-9])X(?![A-Za-z0-9]))", ref)
    if len(parts) == 1:
        return None
    rx = ""
    for k, p in enumerate(parts):
        if k % 2 == 0:
            rx += re.escape(p)
        elif p == "...":
            rx += ".*"
        elif p == "*":
            rx += "[^/]*"
        else:
            rx += "[^/]+"
    return re.compile(rx + r"\Z")


def clean(token):
    """token less trailing punctuation and Markdown bold (**)."""
    while True:
        t = token.rstrip(".,:;")
        t = t[:-2] if t.endswith("**") else t
        if t == token:
            return t
        token = t


def resolve(ref, files, dirs, suffix):
    """True when ref (one brace alternative) names something in the tree. With
    suffix, any path ending in /ref counts (rule 2)."""
    want_dir = ref.endswith("/")
    ref = ref.rstrip("/")
    pool = dirs if want_dir else (files | dirs)
    rx = pattern_regex(ref)
    if rx is None:
        if ref in NOT_IN_TREE:
            return True
        stem, ext = os.path.splitext(ref)
        names = [ref]
        if not want_dir and ext in ("", ".so", ".a"):
            names += [stem + e for e in SOURCE_EXT]  # the program or library built from it
        elif ext == ".o":
            names.append(stem)  # the object of stem
        for name in names:
            if name in pool or (suffix and any(p.endswith("/" + name) for p in pool)):
                return True
        return False
    for p in pool:
        if rx.match(p) or (suffix and any(rx.match(p[k + 1:]) for k in
                                          range(len(p)) if p[k] == "/")):
            return True
    return False


def hint(ref, files, dirs):
    base = ref.rstrip("/").rsplit("/", 1)[-1]
    rx = pattern_regex(base) or re.compile(re.escape(base) + r"\Z")
    same = sorted(p for p in files | dirs if rx.match(p.rsplit("/", 1)[-1]))
    if 0 < len(same) <= 3:
        return "moved? the tree has " + ", ".join(same)
    parent = ref.rstrip("/").rsplit("/", 1)[0]
    if ref.split("/", 1)[0] in TOP and "/" in ref.rstrip("/") and parent not in dirs:
        return "its folder %s/ does not exist either" % parent
    return "nothing of that name in the tree: fix or remove the reference"


def relative_refs(rel, text):
    """(offset, reference as written, path from the root) of rule 3."""
    found = [(m.start(1), m.group(1)) for m in RULE3.finditer(text)]
    if rel.endswith(".md"):
        for m in MD_LINK.finditer(text):
            target = m.group(1).split("#", 1)[0]
            if target and "://" not in target and not target.startswith(("/", "mailto:")):
                found.append((m.start(1), target))
    out = []
    for start, written in found:
        ref = clean(written)
        if not ref:
            continue
        path = os.path.normpath(os.path.join(os.path.dirname(rel), ref)).replace(os.sep, "/")
        if ref.endswith("/") and not path.endswith("/"):
            path += "/"
        out.append((start, ref, "" if path == "." else path))
    return out


def scan_text(rel, text, files, dirs, top_dirs, listing=None):
    """(line, reference, hint) for every reference in text that is missing;
    listing, when given, receives (line, reference, found) for every reference."""
    if rel.endswith(C_EXT):
        text = c_comments(text)
    elif rel.endswith(".md"):
        text = text.replace("&lt;", "<").replace("&gt;", ">")  # docs/&lt;kind&gt;.md
    missing = []
    for rule, suffix in ((RULE1, False), (RULE2, True)):
        for m in rule.finditer(text):
            ref = clean(m.group(1))
            if not ref:
                continue
            if suffix:
                first = ref.split("/", 1)[0]
                if first in TOP or first not in top_dirs:
                    continue
            bad = [alt for alt in expand_braces(ref)
                   if not resolve(alt, files, dirs, suffix)]
            line = text.count("\n", 0, m.start(1)) + 1
            if listing is not None:
                listing.append((line, ref, not bad))
            if bad:
                for alt in bad:
                    missing.append((line, alt, hint(alt, files, dirs)))
    for start, ref, path in relative_refs(rel, text):
        first = path.split("/", 1)[0]
        if first.startswith("build"):
            continue  # a build tree's output (git-ignored)
        line = text.count("\n", 0, start) + 1
        if path.startswith("../") or path == "..":
            bad, why = [ref], "it leads out of the repository"
        elif first not in TOP and path not in files:
            bad, why = [ref], "the tree has no top-level %s" % first
        else:
            bad = [alt for alt in expand_braces(path) if not resolve(alt, files, dirs, False)]
            why = None
        if listing is not None:
            listing.append((line, ref, not bad))
        for alt in bad:
            shown = ref if alt == ref else "%s (%s)" % (ref, alt)
            missing.append((line, shown, why or hint(alt, files, dirs)))
    return sorted(missing)


def scan(root, listing=False):
    files, dirs = list_tree(root)
    top_dirs = {d.rsplit("/", 1)[-1] for d in dirs}
    found = []
    for rel in sorted(files):
        if rel == SELF or any(rel.startswith(s + "/") for s in SKIP_DIRS):
            continue
        if "/" not in rel and rel not in ("README.md", "CMakeLists.txt"):
            continue
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue  # not text
        if "\0" in text:
            continue
        refs = [] if listing else None
        for line, ref, why in scan_text(rel, text, files, dirs, top_dirs, refs):
            found.append("%s:%d: %s does not exist (%s)" % (rel, line, ref, why))
        for line, ref, ok in refs or []:
            print("%s:%d: %s %s" % (rel, line, ref, "ok" if ok else "MISSING"))
    return found


def self_test():
    """The checker on a planted tree: it must name the missing paths and only them."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        def put(rel, text):
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        put("lib/segment/txn.cpp", "// lib/segment/txn.cpp: see docs/FORMAT.md.\n"
            'const char* s = "docs/in_a_string_is_code.md // docs/nor_this.md";\n'
            "/* docs/gone_in_comment.md */\n"
            'auto r = R"x(*/ docs/raw_string.md)x"; int n = 1\'000; char c = \'"\';\n'
            "int m = 2; // docs/gone_after_literals.md\n")
        put("lib/structures/bloom/bloom_impl.h", "// structures/bloom/bloom_impl.h\n")
        put("lib/structures/window_impl.h", "")
        put("tests/consumer/CMakeLists.txt", "# see ../consumer.cmake and ./CMakeLists.txt, ../../build/x.so\n")
        put("docs/links.md", "[a](FORMAT.md#x) [b](docs/FORMAT.md) [c](../README.md) [d](https://x/y)\n"
            "[e](#anchor) [f](../lib/segment/) ../../outside.md\n")
        put("README.md", "[g](docs/FORMAT.md) [h](docs/links.md#a)\n")
        put("docs/FORMAT.md", "\n".join([
            "Good: lib/segment/txn.cpp, `lib/segment/`, **docs/FORMAT.md**, (docs/FORMAT.md), ./docs/FORMAT.md, ./configure.",
            "Patterns: lib/structures/<kind>/, lib/structures/X_impl.h, lib/*/txn.cpp,",
            "lib/segment/{txn.cpp,}, lib/..., segment/txn.cpp, sys/mman.h, /usr/lib/x.h.",
            "Missing: lib/segment/gone.cpp, docs/nothing.md.",
            "Missing folder: lib/nowhere/",
            "Bad pattern: tests/test_*.cpp and lib/structures/<kind>/gone.h",
            "Bad brace: lib/segment/{txn,undo}.cpp and relative segment/undo.cpp",
            "Built: lib/segment/txn, lib/segment/txn.so, lib/segment/txn.cpp.o, not lib/segment/txn.o",
        ]) + "\n")
        got = scan(root)
        want = [
            "docs/FORMAT.md:4: lib/segment/gone.cpp does not exist",
            "docs/FORMAT.md:4: docs/nothing.md does not exist",
            "docs/FORMAT.md:5: lib/nowhere/ does not exist",
            "docs/FORMAT.md:6: tests/test_*.cpp does not exist",
            "docs/FORMAT.md:6: lib/structures/<kind>/gone.h does not exist",
            "docs/FORMAT.md:7: lib/segment/undo.cpp does not exist",
            "docs/FORMAT.md:7: segment/undo.cpp does not exist",
            "docs/FORMAT.md:8: lib/segment/txn.o does not exist",
            "docs/links.md:1: docs/FORMAT.md (docs/docs/FORMAT.md) does not exist",
            "docs/links.md:2: ../../outside.md does not exist",
            "tests/consumer/CMakeLists.txt:1: ../consumer.cmake (tests/consumer.cmake) does not exist",
            "lib/segment/txn.cpp:3: docs/gone_in_comment.md does not exist",
            "lib/segment/txn.cpp:5: docs/gone_after_literals.md does not exist",
        ]
        ok = len(got) == len(want) and all(
            sum(g.startswith(w + " ") for g in got) == 1 for w in want)
        print("\n".join(got))
        if not ok:
            print("self-test FAILED: expected exactly\n  " + "\n  ".join(want))
            return 1
        print("self-test passed: %d planted missing paths found, good paths and patterns accepted"
              % len(want))
        return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    listing = "--list" in argv[1:]
    args = [a for a in argv[1:] if a != "--list"]
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(args[0] if args else os.path.join(here, ".."))
    found = scan(root, listing)
    for f in found:
        print(f)
    if found:
        print("%d missing repository path(s) named in texts: fix each reference to "
              "name a path that exists (scripts/check-paths.py)" % len(found))
        return 1
    print("every repository path named in the texts exists")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
