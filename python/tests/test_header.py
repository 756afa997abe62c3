"""python/tests/test_header.py: the package's constants and ctypes struct layouts
against the C header include/shmfilter/shmfilter.h, parsed here (the compiled module
also checks every struct's size at import: shmfilter/__init__.py)."""
import ctypes as C
import os
import re

import shmfilter

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(os.environ.get("SHMF_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE)),
                      "include", "shmfilter", "shmfilter.h")

CTYPES = {"uint64_t": C.c_uint64, "uint32_t": C.c_uint32, "int64_t": C.c_int64, "int32_t": C.c_int32,
          "int": C.c_int, "double": C.c_double, "const char *": C.c_char_p, "char": C.c_char}

STRUCTS = {
    "shmf_segment_options": shmfilter._SegOpts, "shmf_open_options": shmfilter._OpenOpts,
    "shmf_bloom_options": shmfilter._BloomOpts, "shmf_bloom_stats": shmfilter._BloomStats,
    "shmf_cuckoo_options": shmfilter._CuckooOpts, "shmf_cuckoo_stats": shmfilter._CuckooStats,
    "shmf_roaring_options": shmfilter._RoaringOpts, "shmf_roaring_stats": shmfilter._RoaringStats,
    "shmf_hll_stats": shmfilter._HllStats, "shmf_set_options": shmfilter._SetOpts,
    "shmf_set_stats": shmfilter._SetStats, "shmf_structure_info": shmfilter._StructInfo,
    "shmf_metrics_options": shmfilter._MetricsOpts, "shmf_window_options": shmfilter._WindowOpts,
    "shmf_window_stats": shmfilter._WindowStats, "shmf_uv_options": shmfilter._UvOpts,
    "shmf_uv_stats": shmfilter._UvStats,
}


def _header():
    text = open(HEADER, encoding="utf-8").read()
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def _fields(body):
    """[(name, ctype)] of a struct body."""
    out = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        m = re.fullmatch(r"(const char \*|[a-z0-9_]+) ?(.*)", decl)
        assert m, f"cannot read the declaration {decl!r} of {HEADER}"
        base = CTYPES[m.group(1)]
        for d in m.group(2).split(","):  # "uint64_t a, b, c" declares three
            dm = re.fullmatch(r"\s*([a-z0-9_]+)(?:\[(\d+)\])?\s*", d)
            assert dm, f"cannot read the declarator {d!r} in {decl!r} of {HEADER}"
            out.append((dm.group(1), base * int(dm.group(2)) if dm.group(2) else base))
    return out


def _same_type(a, b):
    if a is b:
        return True
    la, lb = getattr(a, "_length_", None), getattr(b, "_length_", None)
    return la is not None and la == lb and a._type_ is b._type_


def test_every_struct_matches_the_header():
    text = _header()
    found = dict(re.findall(r"typedef struct (shmf_\w+) \{(.*?)\} \1;", text, flags=re.S))
    for name, cls in STRUCTS.items():
        assert name in found, f"{name} is no longer in {HEADER}: update STRUCTS and the package"
        want = _fields(found[name])
        have = list(cls._fields_)
        assert [n for n, _ in have] == [n for n, _ in want], f"{name}: fields differ from the header"
        for (n, t_have), (_, t_want) in zip(have, want):
            assert _same_type(t_have, t_want), f"{name}.{n}: {t_have} in the package, {t_want} in the header"
    missing = sorted(set(found) - set(STRUCTS))
    assert not missing, f"structs of the header the package does not know: {missing}"


def test_error_codes_and_kinds_match_the_header():
    text = _header()
    codes = {m[0]: int(m[1]) for m in re.findall(r"#define SHMF_(E[A-Z]+) (\d+)", text)}
    codes.pop("ELAST")
    assert codes, HEADER
    assert sorted(codes) == sorted(shmfilter._ERROR_NAMES)
    for name, value in codes.items():
        assert getattr(shmfilter, name) == value, name
    kinds = {m[0].lower(): int(m[1]) for m in re.findall(r"#define SHMF_KIND_([A-Z]+) (\d+)", text)}
    for kind, value in shmfilter._KIND_IDS.items():
        assert kinds[kind] == value, kind
    variants = {m[0].lower(): int(m[1]) for m in re.findall(r"#define SHMF_WINDOW_([A-Z]+) (\d+)", text)}
    assert variants == shmfilter._WINDOW_VARIANTS
    assert int(re.search(r"#define SHMF_HLL_REDIS_DENSE_BYTES (\d+)", text).group(1)) == \
        shmfilter._HLL_REDIS_DENSE_BYTES


def test_compiled_module_agrees_with_the_header():
    if shmfilter.BINDING != "compiled":
        assert shmfilter._native is None
        return
    n = shmfilter._native
    for name in shmfilter._ERROR_NAMES:
        assert getattr(n, "SHMF_" + name) == getattr(shmfilter, name)
    for name, cls in STRUCTS.items():
        assert n.STRUCT_SIZES[name] == C.sizeof(cls), name


def test_version_is_the_projects():
    cmake = open(os.path.join(os.path.dirname(HEADER), "..", "..", "CMakeLists.txt"), encoding="utf-8").read()
    want = re.search(r"project\(\s*shmfilter\s+VERSION\s+([0-9.]+)", cmake).group(1)
    assert shmfilter.__version__ == want
    assert shmfilter.version() == want
