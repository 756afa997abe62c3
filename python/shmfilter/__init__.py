"""shmfilter for Python: ctypes over the C API (include/shmfilter/shmfilter.h).

No compiler at install time: the package loads libshmfilter.so, found as
  1. $SHMFILTER_LIBRARY (a path to the .so),
  2. a build tree next to this package: ../../build/*/shared/libshmfilter.so,
  3. the system loader (ldconfig: an installed libshmfilter.so.0).

    import shmfilter
    with shmfilter.Segment.open_or_create("ads", size=64 << 20) as seg:
        pairs = seg.set("pairs", capacity=1_000_000, create=True)
        if pairs.mark("p42:0123456789abcdef"):     # True: new, False: seen
            serve_ad()

Keys are bytes, str (UTF-8) or int (a uint64, hashed as its 8 little-endian
bytes: the same key as the C/C++ APIs' u64 calls). Batched calls take
sequences. Errors raise shmfilter.Error carrying .code (the C API's SHMF_E*
number) and the library's message.

Each failure of the C API's vocabulary has its own code and Error subclass:
DroppedError (EDROPPED), NoSpaceError (ENOSPACE), BusyError (EBUSY: retry),
FullError (EFULL), ForkedHandleError (EFORKED), InvalidArgumentError (EINVAL:
an argument out of range, never clamped).

fork(): an attachment belongs to the process that made it (docs/c_api.md).
Open segments after fork (gunicorn: in post_fork or lazily per worker);
handles used in a process other than the one that opened them raise
ForkedHandleError (code EFORKED), here or from the library.
Concurrency contracts are the C API's (docs/c_api.md, docs/CONCURRENCY.md).
"""
from __future__ import annotations

import ctypes as C
import glob
import os
from typing import Iterable, Optional, Sequence, Union

__all__ = ["Error", "DroppedError", "NoSpaceError", "BusyError", "FullError", "ForkedHandleError",
           "InvalidArgumentError", "Segment", "Bloom", "Cuckoo", "ExactSet", "Hll", "RoaringSet", "Window", "UvFamily",
           "StructureInfo", "hll_count_redis", "library_path", "version"]

Key = Union[bytes, bytearray, memoryview, str, int]

# Error codes (the C header's SHMF_E*).
EINVAL, ENAMETOOLONG, ENOTFOUND, EEXISTS, EWRONGKIND = 1, 2, 3, 4, 5
ENOTSEGMENT, EBYTEORDER, EVERSION, EABI, ETRUNCATED, ECORRUPT = 6, 7, 8, 9, 10, 11
ENOSPACE, EFULL, EDROPPED, EIO, EPERM, EBUSY, EBADINPUT, EREADONLY = 12, 13, 14, 15, 16, 17, 18, 19
EFORKED = 20
ENOMEM, EINTERNAL = 30, 31


def _find_library() -> str:
    env = os.environ.get("SHMFILTER_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise OSError(f"SHMFILTER_LIBRARY={env} does not exist: point it at a built libshmfilter.so")
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    found = sorted(glob.glob(os.path.join(repo, "build", "*", "shared", "libshmfilter.so")),
                   key=os.path.getmtime, reverse=True)
    if found:
        return found[0]
    import ctypes.util
    name = ctypes.util.find_library("shmfilter")
    if name:
        return name
    raise OSError("libshmfilter.so not found: set SHMFILTER_LIBRARY=/path/to/libshmfilter.so, or build "
                  "the CMake target shmfilter_shared (build/<dir>/shared/libshmfilter.so), or install the "
                  "library")


library_path = _find_library()
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
                + [("forget_ambiguous", C.c_uint64)])


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
for _n in ("shmf_window_seen_many_u64", "shmf_window_mark_if_unseen_many_u64"):
    _proto(_n, C.c_int, _vp, C.POINTER(_u64), C.POINTER(_u64), _sz, C.c_uint32, _u8p)
_proto("shmf_window_new_count", C.c_int, _vp, _u64, C.c_uint32, C.POINTER(_u64))
_proto("shmf_window_maintain", C.c_int, _vp)
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


def _u64_array(values, what: str, call: str):
    vals = [_int(v, "uint64", what, call) for v in values]
    return (C.c_uint64 * max(len(vals), 1))(*vals), len(vals)


def _key(k: Key):
    """(is_u64, value): ints are uint64 keys, everything else bytes."""
    if isinstance(k, bool):
        raise _bad("a bool is not a key: use bytes, str or int")
    if isinstance(k, int):
        if not 0 <= k < 1 << 64:
            raise _bad(f"int key {k} is outside uint64 [0, 2**64)")
        return True, k
    if isinstance(k, str):
        return False, _encode(k, "key")
    if isinstance(k, (bytes, bytearray, memoryview)):
        return False, bytes(k)
    raise _bad(f"key of type {type(k).__name__}: use bytes, str or int")


class _Handle:
    """An open C handle owned by the process that opened it; closed once."""
    _kind = ""

    def __init__(self, ptr: int, owner):
        self._ptr = ptr
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _one(self, op: str, k: Key) -> int:
        is_u64, v = _key(k)
        if is_u64:
            return _check(getattr(_lib, f"shmf_{self._kind}_{op}_u64")(self._p(), v), f"{self._kind}.{op}")
        return _check(getattr(_lib, f"shmf_{self._kind}_{op}")(self._p(), v, len(v)), f"{self._kind}.{op}")

    def _many_contains(self, keys: Sequence[Key]) -> list:
        keys = list(keys)
        n = len(keys)
        out = (C.c_uint8 * max(n, 1))()
        if n == 0:
            return []
        kinds = [_key(k) for k in keys]
        if all(u for u, _ in kinds):
            arr = (C.c_uint64 * n)(*[v for _, v in kinds])
            _check(getattr(_lib, f"shmf_{self._kind}_contains_many_u64")(self._p(), arr, n, out),
                   f"{self._kind}.contains_many")
        elif not any(u for u, _ in kinds):
            vals = [v for _, v in kinds]
            ptrs = (C.c_char_p * n)(*vals)
            lens = (C.c_size_t * n)(*[len(v) for v in vals])
            _check(getattr(_lib, f"shmf_{self._kind}_contains_many")(self._p(), ptrs, lens, n, out),
                   f"{self._kind}.contains_many")
        else:
            return [self.contains(k) for k in keys]
        return [bool(out[i]) for i in range(n)]

    def stats(self) -> dict:
        """Lock-free snapshot of the structure's numbers, as a dict."""
        st = _KINDS[self._kind][1]()
        _check(getattr(_lib, f"shmf_{self._kind}_stats_get")(self._p(), C.byref(st)), f"{self._kind}.stats")
        return {name: getattr(st, name) for name, _ in st._fields_ if name != "reserved"}


class Bloom(_Handle):
    """Bloom filter: lock-free; false positives, never false negatives."""
    _kind = "bloom"

    def add(self, key: Key) -> bool:
        """Lock-free: True if this call set a bit (the key was new)."""
        return self._one("add", key) == 1

    mark = add  # "mark if unseen": True = new

    def contains(self, key: Key) -> bool:
        return self._one("contains", key) == 1

    __contains__ = contains

    def add_many(self, keys: Sequence[int]) -> list:
        """Lock-free: adds uint64 keys; per key True when new."""
        arr, n = _u64_array(keys, "key", "bloom.add_many")
        if n == 0:
            return []
        out = (C.c_uint8 * n)()
        _check(_lib.shmf_bloom_add_many_u64(self._p(), arr, n, out), "bloom.add_many")
        return [bool(out[i]) for i in range(n)]

    def contains_many(self, keys: Sequence[Key]) -> list:
        return self._many_contains(keys)


class Cuckoo(_Handle):
    """Cuckoo filter: deletable; optimistic lock-free reads, one writer lock per filter."""
    _kind = "cuckoo"

    def add(self, key: Key) -> None:
        """Stores a copy (duplicates kept); raises Error(EFULL) when full."""
        self._one("add", key)

    def insert_unique(self, key: Key) -> bool:
        """True stored, False already present (or a false-positive match)."""
        return self._one("insert_unique", key) == 1

    mark = insert_unique

    def contains(self, key: Key) -> bool:
        return self._one("contains", key) == 1

    __contains__ = contains

    def erase(self, key: Key) -> bool:
        """Removes one copy: True removed, False absent. Erase only added keys."""
        return self._one("erase", key) == 1

    forget = erase

    def contains_many(self, keys: Sequence[Key]) -> list:
        return self._many_contains(keys)

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

    mark = insert_unique

    def contains(self, key: Key) -> bool:
        return self._one("contains", key) == 1

    __contains__ = contains

    def erase(self, key: Key) -> bool:
        return self._one("erase", key) == 1

    forget = erase

    def contains_many(self, keys: Sequence[Key]) -> list:
        return self._many_contains(keys)

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

    def add_many(self, keys: Sequence[int]) -> bool:
        arr, n = _u64_array(keys, "key", "hll.add_many")
        if n == 0:
            return False
        return _check(_lib.shmf_hll_add_many_u64(self._p(), arr, n), "hll.add_many") > 0

    def count(self) -> int:
        n = C.c_uint64()
        _check(_lib.shmf_hll_count(self._p(), C.byref(n)), "hll.count")
        return n.value

    __len__ = count

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
        """Visible to all processes on return; Error(EFULL) means retry later (delta full)."""
        _check(_lib.shmf_roaring_add(self._p(), self._id(value)), "roaring.add")

    def add_many(self, values: Sequence[int]) -> None:
        vals = [self._id(v) for v in values]
        if vals:
            _check(_lib.shmf_roaring_add_many(self._p(), (C.c_uint32 * len(vals))(*vals), len(vals)),
                   "roaring.add_many")

    def remove(self, value: int) -> None:
        _check(_lib.shmf_roaring_remove(self._p(), self._id(value)), "roaring.remove")

    def contains(self, value: int) -> bool:
        return _check(_lib.shmf_roaring_contains(self._p(), self._id(value)), "roaring.contains") == 1

    __contains__ = contains

    def contains_many(self, values: Sequence[int]) -> list:
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

    space is a uint64 (the plan id); item is bytes, str or int (a device id). w is a
    number of buckets, 1..retention (None: the whole retention)."""
    _kind = "window"

    def _pair(self, op: str, space: int, item: Key, *extra) -> int:
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
        r = getattr(self, "_retention", None)
        if r is None:
            r = self._retention = self.stats()["retention"]
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

    def forget(self, space: int, item: Key) -> bool:
        """Cuckoo variant: removes the pair from every bucket (True removed, False absent).
        Forget only pairs that were marked. Bloom variant: Error(EINVAL)."""
        return self._pair("forget", space, item) == 1

    def _many(self, fn: str, spaces: Sequence[int], items: Sequence[int], w: Optional[int]) -> list:
        sarr, ns = _u64_array(spaces, "space", fn)
        iarr, n = _u64_array(items, "item", fn)
        if ns != n:
            raise _bad(f"{ns} spaces and {n} items: pass one space per item", fn)
        if n == 0:
            return []
        out = (C.c_uint8 * n)()
        _check(getattr(_lib, fn)(self._p(), sarr, iarr, n, self._w(w), out), fn)
        return [bool(x) for x in out]

    def seen_many(self, spaces: Sequence[int], items: Sequence[int], w: Optional[int] = None) -> list:
        """Lock-free, prefetched: per pair of uint64 (space, item), seen in the last w buckets."""
        return self._many("shmf_window_seen_many_u64", spaces, items, w)

    def mark_if_unseen_many(self, spaces: Sequence[int], items: Sequence[int], w: Optional[int] = None) -> list:
        """Per pair of uint64 (space, item): True new (marked now), False seen."""
        return self._many("shmf_window_mark_if_unseen_many_u64", spaces, items, w)

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

    def stats(self) -> dict:
        d = super().stats()
        d["variant"] = "cuckoo" if d["variant"] == 1 else "bloom"
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
    def _opts(size, max_size, mode, group, file) -> _SegOpts:
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
    def create(cls, name: str, *, size=None, max_size=None, mode=None, group=None, file=None) -> "Segment":
        """Control plane: creates a new segment; Error(EEXISTS) when it exists."""
        p = _vp()
        o = cls._opts(size, max_size, mode, group, file)
        _check(_lib.shmf_segment_create(_name(name), C.byref(o), C.byref(p)), "Segment.create")
        return cls(p.value, name)

    @classmethod
    def open_or_create(cls, name: str, *, size=None, max_size=None, mode=None, group=None, file=None) -> "Segment":
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
            raise ForkedHandleError(EBUSY, f"segment {self.name!r} was opened in process {self._pid}, before a "
                                    f"fork: call Segment.open again in process {os.getpid()}", "Segment")
        return self._ptr

    def close(self) -> None:
        """Process-local: detaches (the segment and its data stay). Close structures first."""
        if self._ptr is not None and self._pid == os.getpid():
            _lib.shmf_segment_close(self._ptr)
        self._ptr = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- structures --
    def _get(self, kind: str, cls, name: str, create: bool, opts):
        p = _vp()
        rc = getattr(_lib, f"shmf_{kind}_open")(self._p(), _name(name), C.byref(p))
        if rc == -ENOTFOUND and create:
            if kind == "hll":
                rc = _lib.shmf_hll_open_or_create(self._p(), _name(name), C.byref(p))
            else:
                rc = getattr(_lib, f"shmf_{kind}_create")(self._p(), _name(name), C.byref(opts), C.byref(p))
                if rc == -EEXISTS:  # a racing process created it
                    rc = getattr(_lib, f"shmf_{kind}_open")(self._p(), _name(name), C.byref(p))
        _check(rc, f"Segment.{kind}({name!r})")
        return cls(p.value, self)

    def bloom(self, name: str, *, capacity: int = 0, error: float = 0.01, create: bool = False) -> Bloom:
        """Opens Bloom NAME (create=True: creates it with CAPACITY and ERROR when absent)."""
        o = _BloomOpts()
        _lib.shmf_bloom_options_init(C.byref(o))
        o.capacity, o.error = capacity, error
        return self._get("bloom", Bloom, name, create, o)

    def cuckoo(self, name: str, *, capacity: int = 0, error: float = 0.01, create: bool = False) -> Cuckoo:
        o = _CuckooOpts()
        _lib.shmf_cuckoo_options_init(C.byref(o))
        o.capacity, o.error = capacity, error
        return self._get("cuckoo", Cuckoo, name, create, o)

    def set(self, name: str, *, capacity: int = 0, create: bool = False) -> ExactSet:
        o = _SetOpts()
        _lib.shmf_set_options_init(C.byref(o))
        o.capacity = capacity
        return self._get("set", ExactSet, name, create, o)

    def hll(self, name: str, *, create: bool = False) -> Hll:
        return self._get("hll", Hll, name, create, None)

    def roaring(self, name: str, *, create: bool = False, delta_capacity: Optional[int] = None) -> RoaringSet:
        o = _RoaringOpts()
        _lib.shmf_roaring_options_init(C.byref(o))
        if delta_capacity is not None:
            o.delta_capacity = delta_capacity
        return self._get("roaring", RoaringSet, name, create, o)

    def window(self, name: str, *, create: bool = False, expected_per_bucket: int = 0, variant: str = "bloom",
               error: Optional[float] = None, retention: Optional[int] = None, bucket_seconds: Optional[int] = None,
               utc_offset: Optional[int] = None, max_spaces: Optional[int] = None,
               error_window: Optional[int] = None, seed: Optional[int] = None) -> Window:
        """Opens window NAME (create=True: creates it when absent; expected_per_bucket required)."""
        o = _WindowOpts()
        _lib.shmf_window_options_init(C.byref(o))
        if variant not in ("bloom", "cuckoo"):
            raise _bad(f"variant {variant!r}: 'bloom' (insert-only) or 'cuckoo' (deletable)", "Segment.window")
        o.variant = 1 if variant == "cuckoo" else 0
        o.expected_per_bucket = expected_per_bucket
        for f, v in (("error", error), ("retention", retention), ("bucket_seconds", bucket_seconds),
                     ("utc_offset", utc_offset), ("max_spaces", max_spaces), ("error_window", error_window),
                     ("seed", seed)):
            if v is not None:
                setattr(o, f, v)
        return self._get("window", Window, name, create, o)

    def uv(self, name: str, *, create: bool = False, retention: Optional[int] = None,
           bucket_seconds: Optional[int] = None, utc_offset: Optional[int] = None, max_spaces: Optional[int] = None,
           exact_max: Optional[int] = None, chunk_bytes: Optional[int] = None) -> UvFamily:
        """Opens UV family NAME (create=True: creates it with these options when absent)."""
        o = _UvOpts()
        _lib.shmf_uv_options_init(C.byref(o))
        for f, v in (("retention", retention), ("bucket_seconds", bucket_seconds), ("utc_offset", utc_offset),
                     ("max_spaces", max_spaces), ("exact_max", exact_max), ("chunk_bytes", chunk_bytes)):
            if v is not None:
                setattr(o, f, v)
        return self._get("uv", UvFamily, name, create, o)

    def structures(self) -> list:
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
