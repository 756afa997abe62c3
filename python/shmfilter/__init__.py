"""shmfilter for Python: deduplication structures in one shared-memory segment, over
the C API (include/shmfilter/shmfilter.h). docs/python.md.

Install: python3 -m venv v && v/bin/pip install ./python (no package index needed).

    import shmfilter
    with shmfilter.Segment.open_or_create("ads", size=64 << 20) as seg:
        freq = seg.window("freq", create=True, expected_per_bucket=1_000_000)
        if freq.mark_if_unseen(42, "0123456789abcdef"):   # True: new (not served in 7 days)
            serve_ad()

BINDING says which binding the import chose: "compiled" (shmfilter._native, the
CPython C API, carries every per-key call and batch) or "ctypes" (the fallback: no
compiled module, or SHMFILTER_BINDING=ctypes). The control plane (open, create,
stats) is ctypes over the same loaded library (library_path). Without the compiled
module the library is found as $SHMFILTER_LIBRARY, the package's own
libshmfilter.so.0, a build tree of the repository (build/*/shared/), or the system
loader's.

Keys are bytes, str (UTF-8) or int (a uint64, hashed as its 8 little-endian
bytes: the same key as the C/C++ APIs' u64 calls); the empty key is refused
everywhere (InvalidArgumentError), as nginx treats it as no key. Batched calls
take buffers of uint64 (numpy arrays, array('Q'): read in place) or sequences,
and an optional out= buffer. Options passed when opening a structure that exists
must match it (OptionsMismatchError). Errors raise shmfilter.Error carrying .code
(the C API's SHMF_E* number) and the library's message; each failure of the C
API's vocabulary has its own subclass: DroppedError (EDROPPED), NoSpaceError
(ENOSPACE), BusyError (EBUSY: retry), FullError (EFULL), ForkedHandleError
(EFORKED), OptionsMismatchError (EEXISTS), InvalidArgumentError (EINVAL: an
argument out of range, never clamped).

fork(): an attachment belongs to the process that made it (docs/c_api.md).
Open segments after fork (gunicorn: in post_fork or lazily per worker);
handles used in a process other than the one that opened them raise
ForkedHandleError (code EFORKED), here or from the library.
Concurrency contracts are the C API's (docs/c_api.md, docs/CONCURRENCY.md).
"""
from __future__ import annotations

import ctypes as C
import glob
import importlib
import math
import operator
import os
import array
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, overload

__all__ = ["Error", "DroppedError", "NoSpaceError", "BusyError", "FullError", "ForkedHandleError",
           "InvalidArgumentError", "OptionsMismatchError", "Segment", "Bloom", "Cuckoo", "ExactSet", "Hll",
           "RoaringSet", "Window", "UvFamily", "StructureInfo", "hll_count_redis", "library_path", "version",
           "BINDING", "__version__", "Key", "U64s"]

Key = Union[bytes, bytearray, memoryview, str, int]
"""A key or item: bytes (or any bytes buffer), str (UTF-8) or int (a uint64); never empty."""

# Which binding the import chose: "compiled" (shmfilter._native, the CPython C API:
# the data plane without ctypes) or "ctypes" (no compiled module: a package built
# without a compiler, the source tree, or SHMFILTER_BINDING=ctypes).
_native: Any = None
_NATIVE_WHY = ""
if os.environ.get("SHMFILTER_BINDING", "") not in ("", "compiled", "ctypes"):
    raise ImportError(f"SHMFILTER_BINDING={os.environ['SHMFILTER_BINDING']!r}: 'compiled', 'ctypes' or unset")
if os.environ.get("SHMFILTER_BINDING") != "ctypes":
    try:
        # (not "from . import _native": the global above would satisfy it without importing)
        _native = importlib.import_module("._native", __name__)
    except ImportError as _e:
        if os.environ.get("SHMFILTER_BINDING") == "compiled":
            raise ImportError(f"SHMFILTER_BINDING=compiled but shmfilter._native does not import: {_e}") from None
        _NATIVE_WHY = str(_e)
BINDING: str = "compiled" if _native is not None else "ctypes"
"""Which binding this import chose: "compiled" (shmfilter._native) or "ctypes"."""

# Error codes (the C header's SHMF_E*): from the compiled module when there is one
# (the compiler read them from shmfilter.h); python/tests/test_header.py checks the copy below
# against the header.
EINVAL, ENAMETOOLONG, ENOTFOUND, EEXISTS, EWRONGKIND = 1, 2, 3, 4, 5
ENOTSEGMENT, EBYTEORDER, EVERSION, EABI, ETRUNCATED, ECORRUPT = 6, 7, 8, 9, 10, 11
ENOSPACE, EFULL, EDROPPED, EIO, EPERM, EBUSY, EBADINPUT, EREADONLY = 12, 13, 14, 15, 16, 17, 18, 19
EFORKED = 20
ENOMEM, EINTERNAL = 30, 31
_ERROR_NAMES = ("EINVAL", "ENAMETOOLONG", "ENOTFOUND", "EEXISTS", "EWRONGKIND", "ENOTSEGMENT", "EBYTEORDER",
                "EVERSION", "EABI", "ETRUNCATED", "ECORRUPT", "ENOSPACE", "EFULL", "EDROPPED", "EIO", "EPERM",
                "EBUSY", "EBADINPUT", "EREADONLY", "EFORKED", "ENOMEM", "EINTERNAL")
if _native is not None:
    for _n in _ERROR_NAMES:
        if globals()[_n] != getattr(_native, "SHMF_" + _n):
            raise ImportError(f"shmfilter: {_n} is {globals()[_n]} here but {getattr(_native, 'SHMF_' + _n)} in "
                              "the compiled module's shmfilter.h: the package and its module disagree (reinstall)")
_KIND_IDS = {"bloom": 1, "cuckoo": 2, "roaring": 3, "hll": 4, "set": 5, "window": 7, "uv": 8}
_WINDOW_VARIANTS = {"bloom": 0, "cuckoo": 1, "stamped": 2}  # SHMF_WINDOW_BLOOM, _CUCKOO, _STAMPED
if _native is not None:
    for _n, _v in [("KIND_" + k.upper(), v) for k, v in _KIND_IDS.items()] + \
            [("WINDOW_" + k.upper(), v) for k, v in _WINDOW_VARIANTS.items()]:
        if getattr(_native, "SHMF_" + _n) != _v:
            raise ImportError(f"shmfilter: SHMF_{_n} is {_v} here but {getattr(_native, 'SHMF_' + _n)} in the "
                              "compiled module's shmfilter.h: the package and its module disagree (reinstall)")


def _find_library() -> str:
    if _native is not None:  # the library the compiled module is linked against (one instance)
        return _native.library_path()
    env = os.environ.get("SHMFILTER_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise OSError(f"SHMFILTER_LIBRARY={env} does not exist: point it at a built libshmfilter.so")
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "libshmfilter.so.0")  # an installed package without its compiled module
    if os.path.exists(bundled):
        return bundled
    repo = os.path.dirname(os.path.dirname(here))
    found = sorted(glob.glob(os.path.join(repo, "build", "*", "shared", "libshmfilter.so")),
                   key=os.path.getmtime, reverse=True)
    if found:
        return found[0]
    import ctypes.util
    name = ctypes.util.find_library("shmfilter")
    if name:
        return name
    raise OSError("libshmfilter.so not found: install the package (pip install ./python), or set "
                  "SHMFILTER_LIBRARY=/path/to/libshmfilter.so, or build the CMake target shmfilter_shared "
                  "(build/<dir>/shared/libshmfilter.so)")


library_path: str = _find_library()
"""The path of the libshmfilter.so this import loaded."""
_lib = C.CDLL(library_path)


class Error(Exception):
    """A failed C API call: .code is the positive SHMF_E* number, .message the library's text."""

    def __init__(self, code: int, message: str, call: str = ""):
        self.code = code
        self.message = message
        self.call = call
        super().__init__(f"{call}: {message} (shmfilter error {code}: {_strerror(code)})" if call
                         else f"{message} (shmfilter error {code})")


class InvalidArgumentError(Error, ValueError, TypeError):
    """EINVAL: an argument out of range or of the wrong type (never clamped or wrapped), e.g. a
    window's w outside 1..retention, an int outside the C parameter's range (-1 or 2**64 for a
    uint64). Also a ValueError and a TypeError, so code written for those still catches it."""


class NoSpaceError(Error):
    """ENOSPACE: the segment (or /dev/shm) has no space for a table, a layer or a compaction."""


class FullError(Error):
    """EFULL: a fixed-capacity structure or table is full."""


class DroppedError(Error):
    """EDROPPED: the structure was dropped by some process: open the new one of that name, if any."""


class BusyError(Error):
    """EBUSY: other processes kept the call from finishing within its bound (e.g. a window's buckets
    rotated in faster than the call could write): retry."""


class OptionsMismatchError(Error, ValueError):
    """EEXISTS: a structure of that name exists with other options than the ones passed
    (Segment.window(..., variant=, retention=) and the like): open it without them, or drop
    and recreate it. Also a ValueError."""


class ForkedHandleError(Error):
    """EFORKED: a handle opened in another process (before fork) was used: open it again in this process."""


_ERROR_CLASSES = {EINVAL: InvalidArgumentError, ENOSPACE: NoSpaceError, EFULL: FullError, EDROPPED: DroppedError,
                  EBUSY: BusyError, EFORKED: ForkedHandleError}


def _strerror(code: int) -> str:
    return _lib.shmf_strerror(code).decode()


# ---- prototypes ----------------------------------------------------------
_vp, _cp, _sz, _u64, _u8p = C.c_void_p, C.c_char_p, C.c_size_t, C.c_uint64, C.POINTER(C.c_uint8)


_CTYPE_NAMES = {C.c_uint8: "uint8", C.c_uint32: "uint32", C.c_uint64: "uint64", C.c_int: "int32",
                C.c_int64: "int64"}


class _Opts(C.Structure):
    """An options struct whose integer fields are range-checked when set (InvalidArgumentError)."""

    def __setattr__(self, name, value):
        for f, t in self._fields_:
            if f == name:
                if t in _CTYPE_NAMES:
                    value = _int(value, _CTYPE_NAMES[t], name, type(self).__name__.strip("_"))
                elif t is C.c_double:
                    if isinstance(value, bool) or not isinstance(value, (int, float)):
                        raise _bad(f"{name} {value!r}: a number")
                    try:
                        value = float(value)
                    except OverflowError:
                        raise _bad(f"{name} {value!r} is too large for a double") from None
                break
        super().__setattr__(name, value)


class _SegOpts(_Opts):
    _fields_ = [("size", C.c_uint64), ("max_size", C.c_uint64), ("directory_capacity", C.c_uint32),
                ("mode", C.c_uint32), ("group", C.c_int64), ("file", C.c_char_p)]


class _OpenOpts(_Opts):
    _fields_ = [("file", C.c_char_p), ("read_only", C.c_int), ("huge_pages", C.c_int),
                ("trusted_owner", C.c_int64)]


class _BloomOpts(_Opts):
    _fields_ = [("capacity", C.c_uint64), ("error", C.c_double), ("growth", C.c_double),
                ("tightening", C.c_double), ("max_layers", C.c_uint32), ("layout", C.c_uint32),
                ("seed", C.c_uint64), ("has_seed", C.c_uint32), ("reserved", C.c_uint32)]


class _CuckooOpts(_Opts):
    _fields_ = [("capacity", C.c_uint64), ("fingerprint_bits", C.c_uint32), ("expansion", C.c_uint32),
                ("error", C.c_double), ("max_subfilters", C.c_uint32), ("max_path", C.c_uint32),
                ("seed", C.c_uint64)]


class _SetOpts(_Opts):
    _fields_ = [("capacity", C.c_uint64), ("max_load", C.c_double)]


class _BloomStats(C.Structure):
    _fields_ = ([(n, C.c_uint64) for n in ("capacity", "total_capacity", "bits", "memory_bytes", "racing_adds",
                                           "seed")]
                + [(n, C.c_double) for n in ("error", "growth", "tightening", "fp_bound", "inserted_estimate",
                                             "fill_ratio", "fp_rate_now", "bits_per_element")]
                + [(n, C.c_uint32) for n in ("layers", "max_layers", "k", "over_capacity")])


class _CuckooStats(C.Structure):
    _fields_ = ([(n, C.c_uint64) for n in ("capacity", "slots", "size", "failures", "longest_path", "moves",
                                           "inserts", "erases", "repairs", "expansions", "bytes")]
                + [(n, C.c_double) for n in ("target_error", "load_factor", "bits_per_item", "fp_rate_bound",
                                             "fp_rate_estimate")]
                + [(n, C.c_uint32) for n in ("fingerprint_bits", "lane_bits", "subfilters", "max_path",
                                             "expansion", "reserved")])


class _SetStats(C.Structure):
    _fields_ = ([(n, C.c_uint64) for n in ("capacity", "slots", "size", "used_slots", "bytes", "seed")]
                + [(n, C.c_double) for n in ("max_load", "load", "bytes_per_key_at_capacity")]
                + [(n, C.c_uint32) for n in ("stripes", "reserved")])


class _RoaringOpts(_Opts):
    _fields_ = [("delta_capacity", C.c_uint32), ("reader_slots", C.c_uint32), ("compact_at", C.c_double),
                ("auto_compact", C.c_uint32), ("reserved", C.c_uint32)]


class _RoaringStats(C.Structure):
    _fields_ = ([(n, C.c_uint64) for n in ("cardinality", "snapshot_cardinality", "snapshot_bytes",
                                           "snapshot_generation", "delta_capacity", "delta_fill", "prev_delta_fill",
                                           "delta_bytes", "total_bytes", "pending_free", "compactions",
                                           "claim_owner")]
                + [(n, C.c_uint32) for n in ("containers", "array_containers", "bitmap_containers",
                                             "run_containers", "readers", "reserved")])


class _HllStats(C.Structure):
    _fields_ = ([(n, C.c_uint64) for n in ("estimate", "bytes")] + [("standard_error", C.c_double)]
                + [(n, C.c_uint32) for n in ("registers", "nonzero_registers", "max_register", "reserved")])


class _WindowOpts(_Opts):
    _fields_ = [("variant", C.c_uint32), ("retention", C.c_uint32), ("expected_per_bucket", C.c_uint64),
                ("error", C.c_double), ("error_window", C.c_uint32), ("max_spaces", C.c_uint32),
                ("bucket_seconds", C.c_uint64), ("utc_offset", C.c_int64), ("seed", C.c_uint64)]


class _WindowStats(C.Structure):
    _fields_ = ([(n, C.c_uint32) for n in ("variant", "retention", "spaces", "max_spaces")]
                + [("current_bucket", C.c_int64)]
                + [(n, C.c_uint64) for n in ("memory_bytes", "rotations", "racing_marks", "rotation_races",
                                             "inline_allocations", "overflow_failures", "other_marks")]
                + [("one_bucket_error", C.c_double)]
                + [(n, C.c_uint64) for n in ("today_distinct", "today_capacity")]
                + [(n, C.c_int32) for n in ("today_overflow", "today_over_capacity")]
                + [(n, C.c_double) for n in ("fp_now_1", "fp_bound_1", "fp_now_all", "fp_bound_all")]
                + [("forget_ambiguous", C.c_uint64), ("lanes", C.c_uint64), ("swept_bucket", C.c_int64),
                   ("shared_bytes", C.c_uint64)])


class _MetricsOpts(_Opts):
    _fields_ = [("max_structures", C.c_uint32), ("max_spaces", C.c_uint32), ("max_bytes", C.c_uint64),
                ("reserved", C.c_uint64 * 2)]
class _UvOpts(C.Structure):
    _fields_ = ([(n, C.c_uint32) for n in ("retention", "max_spaces", "exact_max", "reserved")]
                + [("bucket_seconds", C.c_uint64), ("utc_offset", C.c_int64), ("chunk_bytes", C.c_uint64)])


class _UvStats(C.Structure):
    _fields_ = ([(n, C.c_uint32) for n in ("retention", "max_spaces", "exact_max", "buckets")]
                + [("current_bucket", C.c_int64)]
                + [(n, C.c_uint64) for n in ("memory_bytes", "rotations", "promotions", "refused_spaces_full",
                                             "refused_no_space", "refused_stale", "today_spaces",
                                             "today_exact_spaces", "today_dense_spaces", "today_adds")])


class _StructInfo(C.Structure):
    _fields_ = ([("name", C.c_char * 64)]
                + [(n, C.c_uint32) for n in ("kind", "readable", "over_capacity", "slot", "generation", "reserved")]
                + [(n, C.c_uint64) for n in ("offset", "region_bytes", "bytes", "capacity")]
                + [(n, C.c_double) for n in ("items", "fill_ratio", "fp_rate_estimate")])


def _proto(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_lib.shmf_strerror.restype = C.c_char_p
_lib.shmf_strerror.argtypes = [C.c_int]
_proto("shmf_version", C.c_char_p)
_proto("shmf_last_error_message", C.c_char_p)
_proto("shmf_segment_options_init", None, C.POINTER(_SegOpts))
for _n in ("shmf_segment_create", "shmf_segment_open_or_create"):
    _proto(_n, C.c_int, _cp, C.POINTER(_SegOpts), C.POINTER(_vp))
_proto("shmf_segment_open", C.c_int, _cp, _cp, C.POINTER(_vp))
_proto("shmf_open_options_init", None, C.POINTER(_OpenOpts))
_proto("shmf_segment_open_ex", C.c_int, _cp, C.POINTER(_OpenOpts), C.POINTER(_vp))
_proto("shmf_segment_is_read_only", C.c_int, _vp)
_proto("shmf_segment_close", C.c_int, _vp)
_proto("shmf_segment_remove", C.c_int, _cp, _cp)

_KINDS = {
    "bloom": (_BloomOpts, _BloomStats),
    "cuckoo": (_CuckooOpts, _CuckooStats),
    "set": (_SetOpts, _SetStats),
    "hll": (None, _HllStats),
    "roaring": (_RoaringOpts, _RoaringStats),
    "window": (_WindowOpts, _WindowStats),
    "uv": (_UvOpts, _UvStats),
}
for _k, (_o, _s) in _KINDS.items():
    if _o is not None:
        _proto(f"shmf_{_k}_options_init", None, C.POINTER(_o))
        _proto(f"shmf_{_k}_create", C.c_int, _vp, _cp, C.POINTER(_o), C.POINTER(_vp))
    _proto(f"shmf_{_k}_open", C.c_int, _vp, _cp, C.POINTER(_vp))
    _proto(f"shmf_{_k}_close", C.c_int, _vp)
    _proto(f"shmf_{_k}_stats_get", C.c_int, _vp, C.POINTER(_s))
    _proto(f"shmf_{_k}_drop", C.c_int, _vp, _cp)
_proto("shmf_hll_create", C.c_int, _vp, _cp, C.POINTER(_vp))
_proto("shmf_hll_open_or_create", C.c_int, _vp, _cp, C.POINTER(_vp))

for _n in ("shmf_bloom_add", "shmf_bloom_contains", "shmf_cuckoo_add", "shmf_cuckoo_insert_unique",
           "shmf_cuckoo_contains", "shmf_cuckoo_erase", "shmf_set_insert_unique", "shmf_set_contains",
           "shmf_set_erase", "shmf_hll_add"):
    _proto(_n, C.c_int, _vp, C.c_char_p, _sz)
for _n in ("shmf_bloom_add_u64", "shmf_bloom_contains_u64", "shmf_cuckoo_add_u64", "shmf_cuckoo_insert_unique_u64",
           "shmf_cuckoo_contains_u64", "shmf_cuckoo_erase_u64", "shmf_set_insert_unique_u64", "shmf_set_contains_u64",
           "shmf_set_erase_u64", "shmf_hll_add_u64"):
    _proto(_n, C.c_int, _vp, _u64)
for _n in ("shmf_bloom_contains_many", "shmf_cuckoo_contains_many", "shmf_set_contains_many"):
    _proto(_n, C.c_int, _vp, C.POINTER(C.c_char_p), C.POINTER(_sz), _sz, _u8p)
for _n in ("shmf_bloom_contains_many_u64", "shmf_cuckoo_contains_many_u64", "shmf_set_contains_many_u64",
           "shmf_bloom_add_many_u64"):
    _proto(_n, C.c_int, _vp, C.POINTER(_u64), _sz, _u8p)
_proto("shmf_hll_add_many_u64", C.c_int, _vp, C.POINTER(_u64), _sz)
_u32 = C.c_uint32
for _n in ("shmf_roaring_add", "shmf_roaring_remove", "shmf_roaring_contains"):
    _proto(_n, C.c_int, _vp, _u32)
_proto("shmf_roaring_add_many", C.c_int, _vp, C.POINTER(_u32), _sz)
_proto("shmf_roaring_contains_many", C.c_int, _vp, C.POINTER(_u32), _sz, _u8p)
_proto("shmf_roaring_cardinality", C.c_int, _vp, C.POINTER(_u64))
_proto("shmf_roaring_compact", C.c_int, _vp)
_proto("shmf_hll_count", C.c_int, _vp, C.POINTER(_u64))
_proto("shmf_set_size", C.c_int, _vp, C.POINTER(_u64))
_proto("shmf_cuckoo_size", C.c_int, _vp, C.POINTER(_u64))
# HLL: Redis interchange
_proto("shmf_hll_export_redis", C.c_int, _vp, C.c_void_p, _sz, C.POINTER(_sz))
_proto("shmf_hll_import_redis", C.c_int, _vp, C.c_char_p, _sz)
_proto("shmf_hll_count_redis", C.c_int, C.c_char_p, _sz, C.POINTER(_u64))
# directory
_proto("shmf_kind_name", C.c_char_p, C.c_uint32)
_proto("shmf_structure_drop", C.c_int, _vp, _cp)
_proto("shmf_kind_from_name", C.c_int, _cp, C.c_size_t)
_proto("shmf_segment_list", C.c_int, _vp, C.POINTER(_StructInfo), _sz, C.POINTER(_sz))
_proto("shmf_segment_find", C.c_int, _vp, _cp, C.POINTER(_StructInfo))
_proto("shmf_segment_prometheus_text", C.c_int, _vp, C.c_char_p, _sz, C.POINTER(_sz))
_proto("shmf_metrics_options_init", None, C.POINTER(_MetricsOpts))
_proto("shmf_segment_prometheus_text_ex", C.c_int, _vp, C.POINTER(_MetricsOpts), C.c_char_p, _sz, C.POINTER(_sz))
# window
_proto("shmf_window_set_now", C.c_int, _vp, C.c_int64)
for _n in ("shmf_window_mark", "shmf_window_forget"):
    _proto(_n, C.c_int, _vp, _u64, C.c_char_p, _sz)
for _n in ("shmf_window_mark_u64", "shmf_window_forget_u64"):
    _proto(_n, C.c_int, _vp, _u64, _u64)
for _n in ("shmf_window_seen", "shmf_window_mark_if_unseen"):
    _proto(_n, C.c_int, _vp, _u64, C.c_char_p, _sz, C.c_uint32)
for _n in ("shmf_window_seen_u64", "shmf_window_mark_if_unseen_u64"):
    _proto(_n, C.c_int, _vp, _u64, _u64, C.c_uint32)
for _n in ("shmf_window_seen_many", "shmf_window_mark_if_unseen_many"):
    _proto(_n, C.c_int, _vp, C.POINTER(_u64), C.POINTER(C.c_char_p), C.POINTER(_sz), _sz, C.c_uint32, _u8p)
for _n in ("shmf_window_seen_many_u64", "shmf_window_mark_if_unseen_many_u64"):
    _proto(_n, C.c_int, _vp, C.POINTER(_u64), C.POINTER(_u64), _sz, C.c_uint32, _u8p)
_proto("shmf_window_new_count", C.c_int, _vp, _u64, C.c_uint32, C.POINTER(_u64))
_proto("shmf_window_maintain", C.c_int, _vp)
_proto("shmf_window_mark_if_under", C.c_int, _vp, _u64, C.c_char_p, _sz, C.c_uint32, C.c_uint32)
_proto("shmf_window_mark_if_under_u64", C.c_int, _vp, _u64, _u64, C.c_uint32, C.c_uint32)
# uv
_proto("shmf_uv_set_now", C.c_int, _vp, C.c_int64)
_proto("shmf_uv_add", C.c_int, _vp, _u64, C.c_char_p, _sz)
_proto("shmf_uv_add_u64", C.c_int, _vp, _u64, _u64)
for _n in ("shmf_uv_count", "shmf_uv_count_hll"):
    _proto(_n, C.c_int, _vp, _u64, C.c_uint32, C.POINTER(_u64))
_proto("shmf_uv_count_all", C.c_int, _vp, C.c_uint32, C.POINTER(_u64))
_proto("shmf_uv_export_redis", C.c_int, _vp, _u64, C.c_uint32, C.c_void_p, _sz, C.POINTER(_sz))

_HLL_REDIS_DENSE_BYTES = 12304


def version() -> str:
    """The loaded library's version ("0.1.0")."""
    return _lib.shmf_version().decode()


def _check(rc: int, call: str) -> int:
    if rc < 0:
        msg = _lib.shmf_last_error_message().decode(errors="replace") or _strerror(rc)
        raise _ERROR_CLASSES.get(-rc, Error)(-rc, msg, call)
    return rc


def _bad(message: str, call: str = "") -> InvalidArgumentError:
    return InvalidArgumentError(EINVAL, message, call)


def _encode(s: str, what: str) -> bytes:
    try:
        return s.encode()
    except UnicodeEncodeError as e:  # a lone surrogate: not UTF-8
        raise _bad(f"{what} {s!r} is not valid UTF-8 text ({e.reason}): pass bytes") from None


def _name(s: Union[str, bytes]) -> bytes:
    if isinstance(s, str):
        b = _encode(s, "name")
    elif isinstance(s, (bytes, bytearray, memoryview)):
        b = bytes(s)
    else:
        raise _bad(f"a name of type {type(s).__name__}: use str or bytes")
    if b"\0" in b:  # the C API takes NUL-terminated names: it would see a shorter one
        raise _bad(f"name {s!r} holds a NUL byte: names may hold any byte but NUL")
    return b


# Integer arguments are checked against the C parameter's range, as the C API's callers
# must: ctypes would wrap -1 to 2**64-1 silently. One exception type for all of it.
_RANGES = {"uint8": (0, 1 << 8), "uint32": (0, 1 << 32), "uint64": (0, 1 << 64), "int32": (-(1 << 31), 1 << 31),
           "int64": (-(1 << 63), 1 << 63)}


def _int(v, ctype: str, what: str, call: str = "") -> int:
    lo, hi = _RANGES[ctype]
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(f"{what} {v!r}: an int in [{lo}, {hi})", call)
    if not lo <= v < hi:
        raise _bad(f"{what} {v} is outside [{lo}, 2**{hi.bit_length() - 1}) (a {ctype})", call)
    return v


def _blob(data, what: str, call: str) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise _bad(f"{what} of type {type(data).__name__}: pass bytes", call)
    return bytes(data)


U64s = Union[Sequence[int], memoryview, bytearray, "array.array[int]", Any]
"""A batch of uint64 values: a buffer of 8-byte unsigned items (numpy uint64 array,
array('Q'), memoryview: read in place, never copied by the compiled binding) or a
sequence of ints."""


Items = Union[U64s, Sequence[Union[str, bytes, bytearray, memoryview]]]
"""A window batch's items: uint64 values (U64s) or a sequence of str/bytes items."""


def _u64_array(values: Any, what: str, call: str, broadcast: Optional[int] = None) -> Tuple[Any, int]:
    """(a ctypes uint64 array, n) of VALUES (see U64s); an int with BROADCAST=n: n copies."""
    if broadcast is not None and isinstance(values, int) and not isinstance(values, bool):
        v = _int(values, "uint64", what, call)
        return (C.c_uint64 * max(broadcast, 1))(*([v] * broadcast)), broadcast
    if isinstance(values, (bytes, bytearray, str)):
        raise _bad(f"{what} of type {type(values).__name__}: a buffer of uint64 or a sequence of ints", call)
    try:
        mv = memoryview(values)
    except TypeError:
        mv = None
    if mv is not None:
        if mv.itemsize != 8 or mv.format.lstrip("@=<") not in ("Q", "L", "q", "l"):
            raise _bad(f"{what}: a buffer of uint64 is needed (format 'Q'), not format {mv.format!r} "
                       "(numpy: astype(np.uint64))", call)
        if not mv.c_contiguous:
            raise _bad(f"{what}: a C-contiguous buffer is needed (numpy: np.ascontiguousarray(a, np.uint64))", call)
        n = mv.nbytes // 8
        if mv.format.lstrip("@=<") in ("q", "l"):
            for i, x in enumerate(mv.cast("B").cast("q")):
                if x < 0:
                    raise _bad(f"{what}[{i}] = {x} is outside [0, 2**64) (a uint64)", call)
        return (C.c_uint64 * max(n, 1)).from_buffer_copy(mv.cast("B")) if n else (C.c_uint64 * 1)(), n
    try:
        vals = [_int(v, "uint64", what, call) for v in values]
    except TypeError:
        raise _bad(f"{what} of type {type(values).__name__}: a buffer of uint64 or a sequence of ints", call) from None
    return (C.c_uint64 * max(len(vals), 1))(*vals), len(vals)


_BYTES_LIKE = (str, bytes, bytearray, memoryview)


def _byte_items(values: Any, what: str, call: str) -> Tuple[Optional[List[bytes]], Any]:
    """(keys, values): a window batch's items as bytes when VALUES is a sequence holding
    str/bytes items (keys None: uint64 items, see U64s; VALUES a list if it was an iterator).
    A batch's items are all uint64 or all str/bytes: an int among str/bytes is refused (the
    int 7 and the text "7" are different items), and so is an empty item (_EMPTY_KEY)."""
    if isinstance(values, (bytes, bytearray, str, int)):
        return None, values
    if not isinstance(values, (list, tuple)):
        try:
            memoryview(values)
            return None, values  # a buffer: uint64 items
        except TypeError:
            pass
        try:
            values = list(values)
        except TypeError:
            return None, values
    if not any(isinstance(v, _BYTES_LIKE) for v in values):
        return None, values
    keys = []
    for i, v in enumerate(values):
        if isinstance(v, str):
            b = _encode(v, f"{what}[{i}]")
        elif isinstance(v, (bytes, bytearray, memoryview)):
            b = bytes(v)
        elif isinstance(v, int) or (hasattr(type(v), "__index__") and not isinstance(v, bool)):
            raise _bad(f"{what}[{i}] = {v!r} is an int among str/bytes items: a batch's items are all uint64 "
                       "ints or all str/bytes (the int 7 and the text '7' are different items)", call)
        else:
            raise _bad(f"{what}[{i}] of type {type(v).__name__}: use bytes or str (or a batch of uint64 ints)", call)
        if not b:
            raise _bad(f"{what}[{i}]: {_EMPTY_KEY}", call)
        keys.append(b)
    return keys, values


def _out_array(out: Any, n: int, call: str) -> Any:
    """A ctypes uint8 array over OUT (a writable buffer of N bytes), or a fresh one for None."""
    if out is None:
        return (C.c_uint8 * max(n, 1))()
    try:
        mv = memoryview(out)
    except TypeError:
        raise _bad(f"out of type {type(out).__name__}: a writable C-contiguous buffer of {n} bytes "
                   "(bytearray, numpy uint8/bool)", call) from None
    if mv.readonly or not mv.c_contiguous or mv.itemsize != 1:
        raise _bad(f"out of type {type(out).__name__}: a writable C-contiguous buffer of {n} bytes "
                   "(bytearray, numpy uint8/bool)", call)
    if mv.nbytes != n:
        raise _bad(f"out holds {mv.nbytes} bytes: it must hold exactly one byte per key ({n})", call)
    return (C.c_uint8 * max(n, 1)).from_buffer(mv.cast("B")) if n else (C.c_uint8 * 1)()


def _out_result(arr: Any, n: int, given: bool) -> Union[List[bool], int]:
    if given:
        return sum(1 for i in range(n) if arr[i])
    return [bool(arr[i]) for i in range(n)]


def _key(k: Key):
    """(is_u64, value): ints are uint64 keys, everything else bytes."""
    if isinstance(k, bool):
        raise _bad("a bool is not a key: use bytes, str or int")
    if isinstance(k, int):
        if not 0 <= k < 1 << 64:
            raise _bad(f"int key {k} is outside uint64 [0, 2**64)")
        return True, k
    if isinstance(k, str):
        b = _encode(k, "key")
    elif isinstance(k, (bytes, bytearray, memoryview)):
        b = bytes(k)
    elif hasattr(type(k), "__index__"):  # an integer type of another library (numpy.uint64): its int
        return _key(operator.index(k))
    else:
        raise _bad(f"key of type {type(k).__name__}: use bytes, str or int")
    if not b:
        raise _bad(_EMPTY_KEY)
    return False, b


# The one rule for empty keys, in both bindings and every call that takes a key or an
# item (docs/python.md, "Keys"): refused, as nginx treats an empty key as no key.
_EMPTY_KEY = ("an empty key: empty keys are refused everywhere (nginx treats an empty key as no key); "
              "pass at least one byte")


class _CtypesHandle:
    """An open C handle owned by the process that opened it; closed once (the ctypes binding)."""
    _kind = ""

    def __init__(self, ptr: int, owner: "Segment"):
        self._ptr: Optional[int] = ptr
        self._pid = os.getpid()
        self._owner = owner  # keeps the segment alive while the handle is

    def _p(self) -> int:
        if self._ptr is None:
            raise InvalidArgumentError(EINVAL, f"this {self._kind} handle is closed", self._kind)
        if self._pid != os.getpid():
            raise ForkedHandleError(EFORKED, f"this {self._kind} handle was opened in process {self._pid}, before a "
                                    f"fork: open the segment and the structure again in process {os.getpid()}",
                                    self._kind)
        return self._ptr

    def close(self) -> None:
        """Process-local: frees this handle (the structure stays)."""
        if self._ptr is not None and self._pid == os.getpid():
            getattr(_lib, f"shmf_{self._kind}_close")(self._ptr)
        self._ptr = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


if _native is not None:
    class _CompiledHandle(_native.Handle):  # type: ignore[name-defined, misc]
        """An open C handle held by the compiled module (closed once; fork-checked per call)."""
        _kind = ""

        def __init__(self, ptr: int, owner: "Segment"):
            super().__init__(ptr, owner, _KIND_IDS[self._kind])

    _HandleBase: type = _CompiledHandle
else:
    _HandleBase = _CtypesHandle


class _Handle(_HandleBase):  # type: ignore[valid-type, misc]
    """The common part of every structure handle (either binding)."""
    _kind = ""

    def __enter__(self) -> "_Handle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _one(self, op: str, k: Key) -> int:
        is_u64, v = _key(k)
        if is_u64:
            return _check(getattr(_lib, f"shmf_{self._kind}_{op}_u64")(self._p(), v), f"{self._kind}.{op}")
        return _check(getattr(_lib, f"shmf_{self._kind}_{op}")(self._p(), v, len(v)), f"{self._kind}.{op}")

    def _many_contains(self, keys: Any, out: Any = None) -> Union[List[bool], int]:
        call = f"{self._kind}.contains_many"
        if isinstance(keys, (bytes, bytearray, str)):
            raise _bad(f"keys of type {type(keys).__name__}: a buffer of uint64 or a sequence of keys", call)
        if isinstance(keys, (list, tuple)) and keys and not all(
                isinstance(k, int) and not isinstance(k, bool) for k in keys):
            kinds = [_key(k) for k in keys]
            n = len(kinds)
            arr = _out_array(out, n, call)
            if not any(u for u, _ in kinds):
                vals = [v for _, v in kinds]
                ptrs = (C.c_char_p * n)(*vals)
                lens = (C.c_size_t * n)(*[len(v) for v in vals])
                _check(getattr(_lib, f"shmf_{self._kind}_contains_many")(self._p(), ptrs, lens, n, arr), call)
            else:
                for i, k in enumerate(keys):
                    arr[i] = 1 if self._one("contains", k) == 1 else 0
            return _out_result(arr, n, out is not None)
        u, n = _u64_array(keys, "keys", call)
        arr = _out_array(out, n, call)
        if n:
            _check(getattr(_lib, f"shmf_{self._kind}_contains_many_u64")(self._p(), u, n, arr), call)
        return _out_result(arr, n, out is not None)

    def stats(self) -> Dict[str, Any]:
        """Lock-free snapshot of the structure's numbers, as a dict (the C API's shmf_<kind>_stats fields)."""
        st = _KINDS[self._kind][1]()
        _check(getattr(_lib, f"shmf_{self._kind}_stats_get")(self._p(), C.byref(st)), f"{self._kind}.stats")
        return {name: getattr(st, name) for name, _ in st._fields_ if name != "reserved"}


class Bloom(_Handle):
    """Bloom filter: lock-free; false positives, never false negatives."""
    _kind = "bloom"

    def add(self, key: Key) -> bool:
        """Lock-free: True if this call set a bit (the key was new)."""
        return self._one("add", key) == 1

    def mark(self, key: Key) -> bool:
        """"Mark if unseen": add(); True = new."""
        return self.add(key)

    def contains(self, key: Key) -> bool:
        """Lock-free: True if the key may have been added (false positives at the filter's rate)."""
        return self._one("contains", key) == 1

    def __contains__(self, key: Key) -> bool:
        return self.contains(key)

    @overload
    def add_many(self, keys: U64s) -> List[bool]: ...
    @overload
    def add_many(self, keys: U64s, out: Any) -> int: ...

    def add_many(self, keys: U64s, out: Any = None) -> Union[List[bool], int]:
        """Lock-free: adds uint64 keys (a buffer of uint64, read in place, or a sequence of
        ints). Per key True when new: a list, or, with OUT (a writable buffer of len(keys)
        bytes, e.g. numpy.empty(n, numpy.uint8)), written into OUT and the number of new keys
        returned."""
        call = "bloom.add_many"
        u, n = _u64_array(keys, "keys", call)
        arr = _out_array(out, n, call)
        if n:
            _check(_lib.shmf_bloom_add_many_u64(self._p(), u, n, arr), call)
        return _out_result(arr, n, out is not None)

    @overload
    def contains_many(self, keys: Union[U64s, Sequence[Key]]) -> List[bool]: ...
    @overload
    def contains_many(self, keys: Union[U64s, Sequence[Key]], out: Any) -> int: ...

    def contains_many(self, keys: Union[U64s, Sequence[Key]], out: Any = None) -> Union[List[bool], int]:
        """Lock-free, prefetched: per key, contains(); KEYS and OUT as for add_many."""
        return self._many_contains(keys, out)


class Cuckoo(_Handle):
    """Cuckoo filter: deletable; optimistic lock-free reads, one writer lock per filter."""
    _kind = "cuckoo"

    def add(self, key: Key) -> None:
        """Stores a copy (duplicates kept); raises FullError (EFULL) when full."""
        self._one("add", key)

    def insert_unique(self, key: Key) -> bool:
        """True stored, False already present (or a false-positive match)."""
        return self._one("insert_unique", key) == 1

    def mark(self, key: Key) -> bool:
        """"Mark if unseen": insert_unique(); True = new."""
        return self.insert_unique(key)

    def contains(self, key: Key) -> bool:
        """Lock-free: True if a copy of the key may be stored."""
        return self._one("contains", key) == 1

    def __contains__(self, key: Key) -> bool:
        return self.contains(key)

    def erase(self, key: Key) -> bool:
        """Removes one copy: True removed, False absent. Erase only added keys."""
        return self._one("erase", key) == 1

    def forget(self, key: Key) -> bool:
        """erase()."""
        return self.erase(key)

    @overload
    def contains_many(self, keys: Union[U64s, Sequence[Key]]) -> List[bool]: ...
    @overload
    def contains_many(self, keys: Union[U64s, Sequence[Key]], out: Any) -> int: ...

    def contains_many(self, keys: Union[U64s, Sequence[Key]], out: Any = None) -> Union[List[bool], int]:
        """Per key, contains(); KEYS and OUT as for Bloom.add_many."""
        return self._many_contains(keys, out)

    def __len__(self) -> int:
        n = C.c_uint64()
        _check(_lib.shmf_cuckoo_size(self._p(), C.byref(n)), "cuckoo.size")
        return n.value


class ExactSet(_Handle):
    """Exact hash set of 64-bit key hashes (striped writer locks, lock-free reads)."""
    _kind = "set"

    def insert_unique(self, key: Key) -> bool:
        """True inserted, False present; exactly one of racing inserters of a key gets True."""
        return self._one("insert_unique", key) == 1

    def mark(self, key: Key) -> bool:
        """"Mark if unseen": insert_unique(); True = new."""
        return self.insert_unique(key)

    def contains(self, key: Key) -> bool:
        """Lock-free: True if the key is in the set."""
        return self._one("contains", key) == 1

    def __contains__(self, key: Key) -> bool:
        return self.contains(key)

    def erase(self, key: Key) -> bool:
        """True removed, False absent."""
        return self._one("erase", key) == 1

    def forget(self, key: Key) -> bool:
        """erase()."""
        return self.erase(key)

    @overload
    def contains_many(self, keys: Union[U64s, Sequence[Key]]) -> List[bool]: ...
    @overload
    def contains_many(self, keys: Union[U64s, Sequence[Key]], out: Any) -> int: ...

    def contains_many(self, keys: Union[U64s, Sequence[Key]], out: Any = None) -> Union[List[bool], int]:
        """Per key, contains(); KEYS and OUT as for Bloom.add_many."""
        return self._many_contains(keys, out)

    def __len__(self) -> int:
        n = C.c_uint64()
        _check(_lib.shmf_set_size(self._p(), C.byref(n)), "set.size")
        return n.value


class Hll(_Handle):
    """HyperLogLog (precision 14, Redis-compatible counts; atomic register max)."""
    _kind = "hll"

    def add(self, key: Key) -> bool:
        """True if a register grew (Redis PFADD's 1)."""
        return self._one("add", key) == 1

    def add_many(self, keys: U64s) -> bool:
        """Adds uint64 keys (a buffer of uint64, read in place, or a sequence of ints):
        True if some register grew."""
        arr, n = _u64_array(keys, "keys", "hll.add_many")
        if n == 0:
            return False
        return _check(_lib.shmf_hll_add_many_u64(self._p(), arr, n), "hll.add_many") > 0

    def count(self) -> int:
        """The estimate of distinct keys added (Redis PFCOUNT's)."""
        n = C.c_uint64()
        _check(_lib.shmf_hll_count(self._p(), C.byref(n)), "hll.count")
        return n.value

    def __len__(self) -> int:
        return self.count()

    def export_redis(self) -> bytes:
        """Lock-free snapshot as Redis's dense HLL string (12,304 bytes): SET it in Redis,
        then PFCOUNT / PFMERGE it there (docs/DEPLOYMENT.md)."""
        buf = C.create_string_buffer(_HLL_REDIS_DENSE_BYTES)
        need = C.c_size_t()
        n = _check(_lib.shmf_hll_export_redis(self._p(), buf, len(buf), C.byref(need)), "hll.export_redis")
        return buf.raw[:n]

    def import_redis(self, data: Union[bytes, bytearray, memoryview]) -> None:
        """Lock-free register max of a Redis HLL string (dense or sparse: what GET of a
        Redis HLL key returns) into this HLL; Error(EBADINPUT) for anything else."""
        b = _blob(data, "a Redis HLL string", "hll.import_redis")
        _check(_lib.shmf_hll_import_redis(self._p(), b, len(b)), "hll.import_redis")


class RoaringSet(_Handle):
    """Exact set of uint32 ids (CRoaring snapshot + shared delta; lock-free readers)."""
    _kind = "roaring"

    @staticmethod
    def _id(v: int) -> int:
        return _int(v, "uint32", "a RoaringSet id", "roaring")

    def add(self, value: int) -> None:
        """Visible to all processes on return; FullError (EFULL) means retry later (delta full)."""
        _check(_lib.shmf_roaring_add(self._p(), self._id(value)), "roaring.add")

    def add_many(self, values: Sequence[int]) -> None:
        """add() of each uint32 id, in one call."""
        vals = [self._id(v) for v in values]
        if vals:
            _check(_lib.shmf_roaring_add_many(self._p(), (C.c_uint32 * len(vals))(*vals), len(vals)),
                   "roaring.add_many")

    def remove(self, value: int) -> None:
        """Removes the id (absent: nothing happens)."""
        _check(_lib.shmf_roaring_remove(self._p(), self._id(value)), "roaring.remove")

    def contains(self, value: int) -> bool:
        """Lock-free: True if the id is in the set."""
        return _check(_lib.shmf_roaring_contains(self._p(), self._id(value)), "roaring.contains") == 1

    def __contains__(self, value: int) -> bool:
        return self.contains(value)

    def contains_many(self, values: Sequence[int]) -> List[bool]:
        """Per uint32 id, contains()."""
        vals = [self._id(v) for v in values]
        if not vals:
            return []
        out = (C.c_uint8 * len(vals))()
        _check(_lib.shmf_roaring_contains_many(self._p(), (C.c_uint32 * len(vals))(*vals), len(vals), out),
               "roaring.contains_many")
        return [bool(x) for x in out]

    def __len__(self) -> int:
        n = C.c_uint64()
        _check(_lib.shmf_roaring_cardinality(self._p(), C.byref(n)), "roaring.cardinality")
        return n.value

    def compact(self) -> bool:
        """True compacted; False another process holds the compaction claim."""
        return _check(_lib.shmf_roaring_compact(self._p()), "roaring.compact") == 1


def hll_count_redis(data: Union[bytes, bytearray, memoryview]) -> int:
    """Redis's PFCOUNT of a Redis HLL string (dense or sparse), without a segment."""
    b = _blob(data, "a Redis HLL string", "hll_count_redis")
    n = C.c_uint64()
    _check(_lib.shmf_hll_count_redis(b, len(b), C.byref(n)), "hll_count_redis")
    return n.value


class Window(_Handle):
    """(space, item) pairs over time buckets (docs/window.md): the frequency cap "has
    device D been served by plan P in the last w days? if not, it is now".

    space is a uint64 (the plan id); item is bytes, str or int (a device id; never
    empty). w is a number of buckets, 1..retention (None: the whole retention)."""
    _kind = "window"

    def _pair(self, op: str, space: int, item: Key, *extra: int) -> int:
        _int(space, "uint64", "space (the plan id)", f"window.{op}")
        is_u64, v = _key(item)
        call = f"window.{op}"
        if is_u64:
            return _check(getattr(_lib, f"shmf_window_{op}_u64")(self._p(), space, v, *extra), call)
        return _check(getattr(_lib, f"shmf_window_{op}")(self._p(), space, v, len(v), *extra), call)

    def _w(self, w: Optional[int]) -> int:
        return self.retention if w is None else _int(w, "uint32", "w (buckets)", "window")

    @property
    def retention(self) -> int:
        """Buckets kept (fixed at creation; read once per handle)."""
        r = self.__dict__.get("_retention")
        if r is None:
            r = self.__dict__["_retention"] = self.stats()["retention"]
        return r

    def set_now(self, unix_seconds: Optional[int]) -> None:
        """This handle's clock (tests, replays); None: the system clock again."""
        _check(_lib.shmf_window_set_now(self._p(), -(1 << 63) if unix_seconds is None
                                        else _int(unix_seconds, "int64", "unix_seconds", "window.set_now")),
               "window.set_now")

    def mark(self, space: int, item: Key) -> bool:
        """Adds the pair to the current bucket: True new there, False already in it."""
        return self._pair("mark", space, item) == 1

    def seen(self, space: int, item: Key, w: Optional[int] = None) -> bool:
        """Lock-free: is the pair in the last w buckets?"""
        return self._pair("seen", space, item, self._w(w)) == 1

    def mark_if_unseen(self, space: int, item: Key, w: Optional[int] = None) -> bool:
        """True (new: marked now) if the pair is in none of the last w buckets, else False.
        Cuckoo variant: exactly one of racing callers gets True (except across a rotation,
        counted in stats()['rotation_races'])."""
        return self._pair("mark_if_unseen", space, item, self._w(w)) == 1

    def mark_if_under(self, space: int, item: Key, cap: int, w: Optional[int] = None) -> bool:
        """Frequency cap (stamped variant): True (allowed: counted, the pair marked) while the
        pair has fewer than CAP (1..15) such marks in the last w buckets, a sliding window;
        False (capped: nothing stored). Racing callers in any processes never together get
        more than CAP True answers in a window. Bloom and cuckoo variants:
        InvalidArgumentError (EINVAL). Use one w per space (a mark counts in every window)."""
        return self._pair("mark_if_under", space, item, _int(cap, "uint32", "cap (marks)", "window.mark_if_under"),
                          self._w(w)) == 1

    def forget(self, space: int, item: Key) -> bool:
        """Cuckoo variant: removes the pair from every bucket (True removed, False absent).
        Forget only pairs that were marked. Bloom variant: InvalidArgumentError (EINVAL)."""
        return self._pair("forget", space, item) == 1

    def _many(self, fn: str, spaces: Union[int, U64s], items: Union[U64s, Sequence[Union[str, bytes]]],
              w: Optional[int], out: Any) -> Union[List[bool], int]:
        keys, items = _byte_items(items, "items", fn)
        if keys is None:
            iarr, n = _u64_array(items, "items", fn)
        else:
            n = len(keys)
            fn = fn[:-len("_u64")]  # the byte-item call: shmf_window_seen_many, ..._mark_if_unseen_many
        sarr, ns = _u64_array(spaces, "spaces", fn, broadcast=n)
        if ns != n:
            raise _bad(f"{ns} spaces and {n} items: pass one space per item (or one int for all)", fn)
        ww = self._w(w)
        arr = _out_array(out, n, fn)
        if n:
            if keys is None:
                _check(getattr(_lib, fn)(self._p(), sarr, iarr, n, ww, arr), fn)
            else:
                ptrs = (C.c_char_p * n)(*keys)
                lens = (C.c_size_t * n)(*[len(k) for k in keys])
                _check(getattr(_lib, fn)(self._p(), sarr, ptrs, lens, n, ww, arr), fn)
        return _out_result(arr, n, out is not None)

    @overload
    def seen_many(self, spaces: Union[int, U64s], items: Items, w: Optional[int] = None) -> List[bool]: ...
    @overload
    def seen_many(self, spaces: Union[int, U64s], items: Items, w: Optional[int] = None, *, out: Any) -> int: ...

    def seen_many(self, spaces: Union[int, U64s], items: Items, w: Optional[int] = None, *,
                  out: Any = None) -> Union[List[bool], int]:
        """Lock-free, prefetched: per (space, item) pair, seen in the last w buckets.
        SPACES: a buffer of uint64 (numpy uint64 array, array('Q'): read in place) or a
        sequence of ints, or one int for every item. ITEMS: the same for uint64 items, or a
        sequence of str/bytes items (e.g. 16-hex device ids; all str/bytes, none empty), each
        answering what seen(space, item) answers. Answers: a list of bools, or, with OUT (a
        writable buffer of len(items) bytes), written there and counted."""
        return self._many("shmf_window_seen_many_u64", spaces, items, w, out)

    @overload
    def mark_if_unseen_many(self, spaces: Union[int, U64s], items: Items,
                            w: Optional[int] = None) -> List[bool]: ...
    @overload
    def mark_if_unseen_many(self, spaces: Union[int, U64s], items: Items, w: Optional[int] = None, *,
                            out: Any) -> int: ...

    def mark_if_unseen_many(self, spaces: Union[int, U64s], items: Items, w: Optional[int] = None, *,
                            out: Any = None) -> Union[List[bool], int]:
        """Per (space, item) pair: True new (marked now), False seen. Arguments (uint64 or
        str/bytes items) and answers as for seen_many (with OUT: the number of new pairs)."""
        return self._many("shmf_window_mark_if_unseen_many_u64", spaces, items, w, out)

    def new_count(self, space: int, age: int = 0) -> int:
        """"New" answers for SPACE in the bucket AGE buckets ago (0: the current one)."""
        n = C.c_uint64()
        _check(_lib.shmf_window_new_count(self._p(), _int(space, "uint64", "space", "window.new_count"),
                                          _int(age, "uint32", "age", "window.new_count"), C.byref(n)),
               "window.new_count")
        return n.value

    def maintain(self) -> None:
        """Control plane: rotate if due, free expired buckets, prepare the next table."""
        _check(_lib.shmf_window_maintain(self._p()), "window.maintain")

    def stats(self) -> Dict[str, Any]:
        """Lock-free snapshot (the C API's shmf_window_stats; variant as "bloom"/"cuckoo"/"stamped";
        stamped: lanes, swept_bucket and shared_bytes describe its one table)."""
        d = super().stats()
        d["variant"] = {v: k for k, v in _WINDOW_VARIANTS.items()}.get(d["variant"], "bloom")
        return d


class UvFamily(_Handle):
    """Distinct counts for every space (plan) and time bucket (day) in one structure
    (docs/uv.md): add(space, item); count(space, w) is the number of distinct items of the
    space in the UNION of the last w buckets (exact up to exact_max, 1,000 by default; a
    Redis-compatible HLL beyond); count_all(w) over every space."""
    _kind = "uv"

    @staticmethod
    def _space(space: int) -> int:
        if isinstance(space, bool) or not isinstance(space, int) or not 0 <= space < 1 << 64:
            raise TypeError(f"space {space!r}: a uint64 (the plan id)")
        return space

    @property
    def retention(self) -> int:
        """Buckets kept (fixed at creation; read once per handle)."""
        r = getattr(self, "_retention", None)
        if r is None:
            r = self._retention = self.stats()["retention"]
        return r

    def _w(self, w: Optional[int]) -> int:
        w = 1 if w is None else w
        if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w < 1 << 32:
            raise InvalidArgumentError(EINVAL, f"window {w!r}: an int in 1..retention", "uv")
        return w

    def set_now(self, unix_seconds: Optional[int]) -> None:
        """This handle's clock (tests, replays); None: the system clock again."""
        _check(_lib.shmf_uv_set_now(self._p(), -(1 << 63) if unix_seconds is None else unix_seconds), "uv.set_now")

    def add(self, space: int, item: Key) -> bool:
        """Counts ITEM for SPACE in the current bucket: True when the sketch changed."""
        is_u64, v = _key(item)
        if is_u64:
            return _check(_lib.shmf_uv_add_u64(self._p(), self._space(space), v), "uv.add") == 1
        return _check(_lib.shmf_uv_add(self._p(), self._space(space), v, len(v)), "uv.add") == 1

    def count(self, space: int, w: Optional[int] = None) -> int:
        """Distinct items of SPACE over the last w buckets (default 1: the current one)."""
        n = C.c_uint64()
        _check(_lib.shmf_uv_count(self._p(), self._space(space), self._w(w), C.byref(n)), "uv.count")
        return n.value

    def count_hll(self, space: int, w: Optional[int] = None) -> int:
        """The HLL estimate of the same union: what Redis's PFCOUNT gives for export_redis()."""
        n = C.c_uint64()
        _check(_lib.shmf_uv_count_hll(self._p(), self._space(space), self._w(w), C.byref(n)), "uv.count_hll")
        return n.value

    def count_all(self, w: Optional[int] = None) -> int:
        """Distinct items of every space together over the last w buckets (an estimate)."""
        n = C.c_uint64()
        _check(_lib.shmf_uv_count_all(self._p(), self._w(w), C.byref(n)), "uv.count_all")
        return n.value

    def export_redis(self, space: int, w: Optional[int] = None) -> bytes:
        """Redis's dense HLL string (12,304 bytes) of the union: SET it, PFCOUNT/PFMERGE it."""
        buf = C.create_string_buffer(_HLL_REDIS_DENSE_BYTES)
        n = C.c_size_t()
        _check(_lib.shmf_uv_export_redis(self._p(), self._space(space), self._w(w), buf, len(buf), C.byref(n)),
               "uv.export_redis")
        return buf.raw[:n.value]


class StructureInfo:
    """One named structure of a segment (Segment.structures()); what shmtool list shows."""
    __slots__ = ("name", "name_bytes", "kind", "readable", "over_capacity", "slot", "generation", "offset", "region_bytes",
                 "bytes", "capacity", "items", "fill_ratio", "fp_rate_estimate")

    def __init__(self, e: "_StructInfo"):
        self.name_bytes = bytes(e.name)  # exact; .name shows invalid UTF-8 as U+FFFD
        self.name = self.name_bytes.decode(errors="replace")
        self.kind = _lib.shmf_kind_name(e.kind).decode()
        self.readable = bool(e.readable)
        self.over_capacity = bool(e.over_capacity)
        for f in ("slot", "generation", "offset", "region_bytes", "bytes", "capacity", "items", "fill_ratio",
                  "fp_rate_estimate"):
            setattr(self, f, getattr(e, f))

    def __repr__(self) -> str:
        return f"StructureInfo(name={self.name!r}, kind={self.kind!r}, bytes={self.bytes}, items={self.items})"


class Segment:
    """One attached shmfilter segment (process-local: reopen after fork)."""

    def __init__(self, ptr: int, name: str):
        self._ptr = ptr
        self._pid = os.getpid()
        self.name = name

    # -- opening --
    @staticmethod
    def _opts(size: Optional[int], max_size: Optional[int], mode: Optional[int], group: Optional[int],
              file: Optional[str]) -> _SegOpts:
        o = _SegOpts()
        _lib.shmf_segment_options_init(C.byref(o))
        if size is not None:
            o.size = size
        if max_size is not None:
            o.max_size = max_size
        if mode is not None:
            o.mode = mode
        if group is not None:
            o.group = group
        if file is not None:
            o.file = _name(file)
        return o

    @classmethod
    def open(cls, name: str, file: Optional[str] = None, *, read_only: bool = False,
             trusted_owner: Optional[int] = None) -> "Segment":
        """Control plane: attaches to an existing segment.

        read_only=True inspects only (docs/SECURITY.md): the segment is mapped
        read-only, writes raise Error(EREADONLY) or answer "not done", and
        Roaring sets and windows cannot be opened. trusted_owner: also trust
        a segment file owned by this uid (default: only your own and root's).
        """
        p = _vp()
        o = _OpenOpts()
        _lib.shmf_open_options_init(C.byref(o))
        if file:
            o.file = _name(file)
        o.read_only = 1 if read_only else 0
        if trusted_owner is not None:
            o.trusted_owner = trusted_owner
        _check(_lib.shmf_segment_open_ex(_name(name), C.byref(o), C.byref(p)), "Segment.open")
        return cls(p.value, name)

    @property
    def read_only(self) -> bool:
        """True when this attachment was opened read_only."""
        return _check(_lib.shmf_segment_is_read_only(self._p()), "Segment.read_only") == 1

    @classmethod
    def create(cls, name: str, *, size: Optional[int] = None, max_size: Optional[int] = None,
               mode: Optional[int] = None, group: Optional[int] = None, file: Optional[str] = None) -> "Segment":
        """Control plane: creates a new segment; Error(EEXISTS) when it exists."""
        p = _vp()
        o = cls._opts(size, max_size, mode, group, file)
        _check(_lib.shmf_segment_create(_name(name), C.byref(o), C.byref(p)), "Segment.create")
        return cls(p.value, name)

    @classmethod
    def open_or_create(cls, name: str, *, size: Optional[int] = None, max_size: Optional[int] = None,
                       mode: Optional[int] = None, group: Optional[int] = None,
                       file: Optional[str] = None) -> "Segment":
        """Control plane: opens or creates; of racing callers exactly one creates."""
        p = _vp()
        o = cls._opts(size, max_size, mode, group, file)
        _check(_lib.shmf_segment_open_or_create(_name(name), C.byref(o), C.byref(p)), "Segment.open_or_create")
        return cls(p.value, name)

    @staticmethod
    def remove(name: str, file: Optional[str] = None) -> bool:
        """Control plane: removes the name (attached processes keep their mapping)."""
        return _check(_lib.shmf_segment_remove(_name(name), _name(file) if file else None), "Segment.remove") == 1

    def _p(self) -> int:
        if self._ptr is None:
            raise InvalidArgumentError(EINVAL, f"segment {self.name!r} is closed", "Segment")
        if self._pid != os.getpid():
            raise ForkedHandleError(EFORKED, f"segment {self.name!r} was opened in process {self._pid}, before a "
                                    f"fork: call Segment.open again in process {os.getpid()}", "Segment")
        return self._ptr

    def close(self) -> None:
        """Process-local: detaches (the segment and its data stay). Close structures first."""
        if self._ptr is not None and self._pid == os.getpid():
            _lib.shmf_segment_close(self._ptr)
        self._ptr = None

    def __enter__(self) -> "Segment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # -- structures --
    def _get(self, kind: str, cls: Any, name: str, create: bool, opts: Any,
             declared: Optional[Dict[str, Any]] = None) -> Any:
        p = _vp()
        call = f"Segment.{kind}({name!r})"
        rc = getattr(_lib, f"shmf_{kind}_open")(self._p(), _name(name), C.byref(p))
        if rc == -ENOTFOUND and create:
            if kind == "hll":
                rc = _lib.shmf_hll_open_or_create(self._p(), _name(name), C.byref(p))
            else:
                rc = getattr(_lib, f"shmf_{kind}_create")(self._p(), _name(name), C.byref(opts), C.byref(p))
                if rc == -EEXISTS:  # a racing process created it
                    rc = getattr(_lib, f"shmf_{kind}_open")(self._p(), _name(name), C.byref(p))
        _check(rc, call)
        h = cls(p.value, self)
        if declared:
            self._check_declared(h, kind, name, declared, call)
        return h

    def _check_declared(self, h: "_Handle", kind: str, name: str, declared: Dict[str, Any], call: str) -> None:
        """Options checked on open (docs/python.md, "Options"): each option the caller passed
        that the structure's stats hold must equal what exists, as nginx refuses a declared
        variant or retention that differs. A mismatch raises OptionsMismatchError."""
        held = h.stats()
        diff = []
        for opt, (field, want) in declared.items():
            have = held[field]
            same = math.isclose(have, want, rel_tol=1e-12) if isinstance(want, float) else have == want
            if not same:
                diff.append((opt, want, have))
        if diff:
            h.close()
            asked = ", ".join(f"{o}={w!r}" for o, w, _ in diff)
            has = ", ".join(f"{o}={hv!r}" for o, _, hv in diff)
            raise OptionsMismatchError(
                EEXISTS, f"{kind} {name!r} exists with {has}; asked for {asked}: open it without those options "
                f"(or with the ones it has), or drop it (shmtool drop {self.name} {name}) to recreate it", call)

    def bloom(self, name: str, *, capacity: Optional[int] = None, error: Optional[float] = None,
              create: bool = False) -> Bloom:
        """Opens Bloom NAME (create=True: creates it with CAPACITY and ERROR, default 0.01, when
        absent). CAPACITY and ERROR, when given, must match an existing filter's."""
        o = _BloomOpts()
        _lib.shmf_bloom_options_init(C.byref(o))
        o.capacity = 0 if capacity is None else capacity
        o.error = 0.01 if error is None else error
        d = {k: v for k, v in (("capacity", ("capacity", capacity)), ("error", ("error", error))) if v[1] is not None}
        return self._get("bloom", Bloom, name, create, o, d)

    def cuckoo(self, name: str, *, capacity: Optional[int] = None, error: Optional[float] = None,
               create: bool = False) -> Cuckoo:
        """Opens Cuckoo filter NAME (create=True: creates it with CAPACITY and ERROR, default
        0.01, when absent). CAPACITY and ERROR, when given, must match an existing filter's."""
        o = _CuckooOpts()
        _lib.shmf_cuckoo_options_init(C.byref(o))
        o.capacity = 0 if capacity is None else capacity
        o.error = 0.01 if error is None else error
        d = {k: v for k, v in (("capacity", ("capacity", capacity)), ("error", ("target_error", error)))
             if v[1] is not None}
        return self._get("cuckoo", Cuckoo, name, create, o, d)

    def set(self, name: str, *, capacity: Optional[int] = None, create: bool = False) -> ExactSet:
        """Opens exact set NAME (create=True: creates it with CAPACITY when absent). CAPACITY,
        when given, must match an existing set's."""
        o = _SetOpts()
        _lib.shmf_set_options_init(C.byref(o))
        o.capacity = 0 if capacity is None else capacity
        d = {"capacity": ("capacity", capacity)} if capacity is not None else None
        return self._get("set", ExactSet, name, create, o, d)

    def hll(self, name: str, *, create: bool = False) -> Hll:
        """Opens HyperLogLog NAME (create=True: creates it when absent; it has no options)."""
        return self._get("hll", Hll, name, create, None)

    def roaring(self, name: str, *, create: bool = False, delta_capacity: Optional[int] = None) -> RoaringSet:
        """Opens Roaring set NAME (create=True: creates it when absent). DELTA_CAPACITY is a
        creation option only (the stats hold the delta table's size in other units)."""
        o = _RoaringOpts()
        _lib.shmf_roaring_options_init(C.byref(o))
        if delta_capacity is not None:
            o.delta_capacity = delta_capacity
        return self._get("roaring", RoaringSet, name, create, o)

    def window(self, name: str, *, create: bool = False, expected_per_bucket: int = 0,
               variant: Optional[str] = None, error: Optional[float] = None, retention: Optional[int] = None,
               bucket_seconds: Optional[int] = None, utc_offset: Optional[int] = None,
               max_spaces: Optional[int] = None, error_window: Optional[int] = None,
               seed: Optional[int] = None) -> Window:
        """Opens window NAME (create=True: creates it when absent; expected_per_bucket required;
        variant "stamped", the default, "bloom" or "cuckoo"). VARIANT, RETENTION and MAX_SPACES, when
        given, must match an existing window's (OptionsMismatchError), as nginx checks; the
        others are creation options only (the window's stats do not hold them)."""
        o = _WindowOpts()
        _lib.shmf_window_options_init(C.byref(o))
        if variant not in (None, "bloom", "cuckoo", "stamped"):
            raise _bad(f"variant {variant!r}: 'bloom' (insert-only), 'cuckoo' (deletable) or 'stamped' (deletable, "
                       "one table for every bucket, frequency caps: mark_if_under)", "Segment.window")
        if variant is not None:
            o.variant = _WINDOW_VARIANTS[variant]  # else shmf_window_options_init's default (stamped)
        o.expected_per_bucket = expected_per_bucket
        for f, v in (("error", error), ("retention", retention), ("bucket_seconds", bucket_seconds),
                     ("utc_offset", utc_offset), ("max_spaces", max_spaces), ("error_window", error_window),
                     ("seed", seed)):
            if v is not None:
                setattr(o, f, v)
        d = {k: v for k, v in (("variant", ("variant", variant)), ("retention", ("retention", retention)),
                               ("max_spaces", ("max_spaces", max_spaces))) if v[1] is not None}
        return self._get("window", Window, name, create, o, d)

    def uv(self, name: str, *, create: bool = False, retention: Optional[int] = None,
           bucket_seconds: Optional[int] = None, utc_offset: Optional[int] = None, max_spaces: Optional[int] = None,
           exact_max: Optional[int] = None, chunk_bytes: Optional[int] = None) -> UvFamily:
        """Opens UV family NAME (create=True: creates it with these options when absent).
        RETENTION, MAX_SPACES and EXACT_MAX, when given, must match an existing family's."""
        o = _UvOpts()
        _lib.shmf_uv_options_init(C.byref(o))
        for f, v in (("retention", retention), ("bucket_seconds", bucket_seconds), ("utc_offset", utc_offset),
                     ("max_spaces", max_spaces), ("exact_max", exact_max), ("chunk_bytes", chunk_bytes)):
            if v is not None:
                setattr(o, f, v)
        d = {k: (k, v) for k, v in (("retention", retention), ("max_spaces", max_spaces), ("exact_max", exact_max))
             if v is not None}
        return self._get("uv", UvFamily, name, create, o, d)

    def structures(self) -> List[StructureInfo]:
        """Lock-free: every named structure (name order), as StructureInfo."""
        for _ in range(8):  # a structure created between the two calls: ask again
            n = C.c_size_t()
            rc = _lib.shmf_segment_list(self._p(), None, 0, C.byref(n))
            if rc >= 0:
                return []
            if rc != -EFULL:
                _check(rc, "Segment.structures")
            arr = (_StructInfo * n.value)()
            rc = _lib.shmf_segment_list(self._p(), arr, n.value, C.byref(n))
            if rc >= 0:
                return [StructureInfo(arr[i]) for i in range(rc)]
            if rc != -EFULL:
                _check(rc, "Segment.structures")
        raise BusyError(EBUSY, "the directory kept changing while it was listed: try again", "Segment.structures")

    def find(self, name: str) -> Optional[StructureInfo]:
        """Lock-free: the StructureInfo of NAME, or None."""
        e = _StructInfo()
        return StructureInfo(e) if _check(_lib.shmf_segment_find(self._p(), _name(name), C.byref(e)),
                                          "Segment.find") == 1 else None

    def prometheus_text(self, *, max_structures: Optional[int] = None, max_spaces: Optional[int] = None,
                        max_bytes: Optional[int] = None) -> str:
        """Lock-free: the segment's Prometheus text (docs/metrics.md), bounded as the
        options say ("Bounded scrapes": None keeps the library's default: the 64 largest
        structures get their own series, per-space series off, at most 96,000 bytes)."""
        o = _MetricsOpts()
        _lib.shmf_metrics_options_init(C.byref(o))
        for f, v in (("max_structures", max_structures), ("max_spaces", max_spaces), ("max_bytes", max_bytes)):
            if v is not None:
                setattr(o, f, v)
        for _ in range(8):
            need = C.c_size_t()
            rc = _lib.shmf_segment_prometheus_text_ex(self._p(), C.byref(o), None, 0, C.byref(need))
            if rc != -EFULL:
                _check(rc, "Segment.prometheus_text")
            buf = C.create_string_buffer(need.value + 4096)
            rc = _lib.shmf_segment_prometheus_text_ex(self._p(), C.byref(o), buf, len(buf), C.byref(need))
            if rc == 0:
                try:
                    return buf.value.decode()
                except UnicodeDecodeError as e:  # the library promises UTF-8: never expected
                    raise Error(EINTERNAL, f"the metrics text is not UTF-8 ({e}): please report it",
                                "Segment.prometheus_text") from None
            if rc != -EFULL:
                _check(rc, "Segment.prometheus_text")
        raise BusyError(EBUSY, "the segment kept changing while its text was built: try again", "Segment.prometheus_text")

    def drop(self, name: str, kind: Optional[str] = None) -> int:
        """Control plane: drops NAME (1 dropped, 0 absent) with every extent it owns.

        KIND None: whichever kind it is (the library's own drop for that kind); a kind
        name: only a structure of that kind (EWRONGKIND for another)."""
        if kind is None:
            return _check(_lib.shmf_structure_drop(self._p(), _name(name)), f"Segment.drop({name!r})")
        if kind not in _KINDS:
            raise Error(EINVAL, f"unknown kind {kind!r}: expected one of {', '.join(sorted(_KINDS))}", "Segment.drop")
        return _check(getattr(_lib, f"shmf_{kind}_drop")(self._p(), _name(name)), f"Segment.drop({name!r})")


# ---- the compiled binding's data plane ----------------------------------------
_CTYPES_METHODS: Dict[Tuple[str, str], Any] = {}
# With shmfilter._native, the per-key calls are the C methods of _native.Handle
# themselves (no Python frame between the caller and the C API): same arguments,
# answers and errors as the ctypes methods above, which stay the fallback.
if _native is not None:
    _H = _native.Handle
    _COMPILED_METHODS = {
        Bloom: {"add": "_add", "mark": "_add", "contains": "_contains", "add_many": "_add_many",
                "contains_many": "_contains_many"},
        Cuckoo: {"add": "_add", "insert_unique": "_insert_unique", "mark": "_insert_unique",
                 "contains": "_contains", "erase": "_erase", "forget": "_erase", "contains_many": "_contains_many"},
        ExactSet: {"insert_unique": "_insert_unique", "mark": "_insert_unique", "contains": "_contains",
                   "erase": "_erase", "forget": "_erase", "contains_many": "_contains_many"},
        Hll: {"add": "_add", "add_many": "_add_many"},
        Window: {"mark": "_mark", "seen": "_seen", "mark_if_unseen": "_mark_if_unseen", "forget": "_forget",
                 "mark_if_under": "_mark_if_under",
                 "seen_many": "_seen_many", "mark_if_unseen_many": "_mark_if_unseen_many"},
        UvFamily: {"add": "_add"},
    }
    for _cls, _methods in _COMPILED_METHODS.items():
        for _pub, _c in _methods.items():
            _CTYPES_METHODS[(_cls.__name__, _pub)] = _cls.__dict__[_pub]  # kept: bench/python_bench.py
            setattr(_cls, _pub, getattr(_H, _c))
    _native._set_errors(dict(_ERROR_CLASSES), Error, InvalidArgumentError)
    # The ctypes structs (control plane) against the sizes the compiler gave the header's.
    for _s, _ct in (("shmf_segment_options", _SegOpts), ("shmf_open_options", _OpenOpts),
                    ("shmf_bloom_options", _BloomOpts), ("shmf_bloom_stats", _BloomStats),
                    ("shmf_cuckoo_options", _CuckooOpts), ("shmf_cuckoo_stats", _CuckooStats),
                    ("shmf_roaring_options", _RoaringOpts), ("shmf_roaring_stats", _RoaringStats),
                    ("shmf_hll_stats", _HllStats), ("shmf_set_options", _SetOpts), ("shmf_set_stats", _SetStats),
                    ("shmf_structure_info", _StructInfo), ("shmf_metrics_options", _MetricsOpts),
                    ("shmf_window_options", _WindowOpts), ("shmf_window_stats", _WindowStats),
                    ("shmf_uv_options", _UvOpts), ("shmf_uv_stats", _UvStats)):
        if C.sizeof(_ct) != _native.STRUCT_SIZES[_s]:
            raise ImportError(f"shmfilter: struct {_s} is {C.sizeof(_ct)} bytes in the package but "
                              f"{_native.STRUCT_SIZES[_s]} in shmfilter.h: the package and the header disagree")


def _project_version() -> str:
    try:
        from ._version import __version__ as v  # written by the build (python/_build_backend, CMake)
        return str(v)
    except ImportError:  # the source tree: the project's version in CMakeLists.txt
        import re
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                            "CMakeLists.txt")
        try:
            m = re.search(r"project\(\s*shmfilter\s+VERSION\s+([0-9][0-9.]*)", open(path, encoding="utf-8").read())
        except OSError:
            m = None
        return m.group(1) if m else version()


__version__: str = _project_version()
"""The package's version: the CMake project's (CMakeLists.txt), the library's version() too."""
