// lib/capi/c_api_internal.h: what the two files of the C API share: the handle
// structs behind the opaque shmf_* types and guard()/fail()/need(), which turn
// every exception into a negative SHMF_E* code and a thread-local message.
// Included by lib/capi/*.cpp only.
#pragma once

#include <climits>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/error.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/shmfilter.h"
#include "shmfilter/text.hpp"

struct shmf_segment {
  shmfilter::Segment seg;
};
struct shmf_bloom {
  shmfilter::Bloom h;
};
struct shmf_cuckoo {
  shmfilter::Cuckoo h;
};
struct shmf_roaring {
  shmfilter::RoaringSet h;
};
struct shmf_hll {
  shmfilter::Hll h;
};
struct shmf_set {
  shmfilter::ExactSet h;
};

namespace shmfilter::capi {


inline thread_local std::string t_last_error;  // per thread: the C API is used by many threads

// The message as shmf_last_error_message() gives it: escaped (shmfilter/text.hpp), since
// it may quote a name holding any byte and C front ends write it to logs (nginx).
inline int fail(int code, const char* what) noexcept {
  try {
    t_last_error = shmfilter::escape_text(what, true);
  } catch (...) {
    // Out of memory for the message: keep the old one; the code still tells.
  }
  return -code;
}

inline int fail(int code, const std::string& what) noexcept { return fail(code, what.c_str()); }

// Runs F, converting every exception into a negative code and a message.
template <class F>
int guard(F&& f) noexcept {
  try {
    return f();
  } catch (const Error& e) {
    return fail(static_cast<int>(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(SHMF_ENOMEM, "out of process memory (std::bad_alloc): free memory or use smaller batches");
  } catch (const std::exception& e) {
    return fail(SHMF_EINTERNAL, std::string("internal error: ") + e.what() + " (please report it)");
  } catch (...) {
    return fail(SHMF_EINTERNAL, "internal error: unknown exception (please report it)");
  }
}

// Throws kInvalidArgument naming the NULL argument.
inline void need(const void* p, const char* fn, const char* arg) {
  if (p == nullptr)
    throw Error(ErrorCode::kInvalidArgument,
                std::string(fn) + ": argument '" + arg + "' is NULL: pass a valid pointer");
}

inline void need_batch(size_t n, const char* fn) {
  if (n > static_cast<size_t>(INT_MAX))
    throw Error(ErrorCode::kInvalidArgument, std::string(fn) + ": batch of " + std::to_string(n) +
                                                 " keys exceeds INT_MAX: split it into smaller batches");
}

inline std::string_view sv(const void* key, size_t len) { return {static_cast<const char*>(key), len}; }

inline int dropped(const char* fn) {
  return fail(SHMF_EDROPPED, std::string(fn) +
                                 ": the structure was dropped by some process: close this handle and open the "
                                 "new structure of that name, if any");
}

inline int forked(const char* fn) {
  return fail(SHMF_EFORKED, std::string(fn) +
                                ": this handle was inherited across fork(): open the segment and the structure "
                                "again in this process");
}

inline int read_only(const char* fn) {
  return fail(SHMF_EREADONLY, std::string(fn) +
                                  ": the segment was opened read-only: open it without read_only to write");
}

// Byte keys of a batch as string_views (allocates; the C++ API takes spans of views).
inline std::vector<std::string_view> views(const void* const* keys, const size_t* lens, size_t n) {
  std::vector<std::string_view> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = sv(keys[i], lens[i]);
  return v;
}

template <class H, class Make>
int make_handle(H** out, const char* fn, Make&& make) {
  need(out, fn, "out");
  *out = nullptr;
  auto* h = new H{make()};
  *out = h;
  return 0;
}


}  // namespace shmfilter::capi

// Common open/close/drop shapes of the C functions (used inside extern "C").
#define SHMF_OPEN_FN(fn, H, Cxx)                                                      \
  int fn(shmf_segment* seg, const char* name, H** out) {                              \
    return guard([&] {                                                                \
      need(seg, #fn, "seg");                                                          \
      need(name, #fn, "name");                                                        \
      return make_handle(out, #fn, [&] { return Cxx::open(seg->seg, name); });        \
    });                                                                               \
  }
#define SHMF_CLOSE_FN(fn, H) \
  int fn(H* h) {             \
    return guard([&] {       \
      delete h;              \
      return 0;              \
    });                      \
  }
#define SHMF_DROP_FN(fn, Cxx)                          \
  int fn(shmf_segment* seg, const char* name) {        \
    return guard([&] {                                 \
      need(seg, #fn, "seg");                           \
      need(name, #fn, "name");                         \
      return Cxx::drop(seg->seg, name) ? 1 : 0;        \
    });                                                \
  }
