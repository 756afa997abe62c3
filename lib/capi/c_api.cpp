// lib/capi/c_api.cpp: the C API (include/shmfilter/shmfilter.h), a front end that
// calls only the public C++ API. Every entry point is noexcept and catches
// every exception (guard()); failures return -SHMF_E* and record a detailed
// thread-local message for shmf_last_error_message().
#include "shmfilter/shmfilter.h"

#include <climits>
#include <cstring>
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

using namespace shmfilter;

struct shmf_segment {
  Segment seg;
};
struct shmf_bloom {
  Bloom h;
};
struct shmf_cuckoo {
  Cuckoo h;
};
struct shmf_roaring {
  RoaringSet h;
};
struct shmf_hll {
  Hll h;
};
struct shmf_set {
  ExactSet h;
};

namespace {

thread_local std::string t_last_error;  // per thread: the C API is used by many threads

int fail(int code, const char* what) noexcept {
  try {
    t_last_error = what;
  } catch (...) {
    // Out of memory for the message: keep the old one; the code still tells.
  }
  return -code;
}

int fail(int code, const std::string& what) noexcept { return fail(code, what.c_str()); }

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
void need(const void* p, const char* fn, const char* arg) {
  if (p == nullptr)
    throw Error(ErrorCode::kInvalidArgument,
                std::string(fn) + ": argument '" + arg + "' is NULL: pass a valid pointer");
}

void need_batch(size_t n, const char* fn) {
  if (n > static_cast<size_t>(INT_MAX))
    throw Error(ErrorCode::kInvalidArgument, std::string(fn) + ": batch of " + std::to_string(n) +
                                                 " keys exceeds INT_MAX: split it into smaller batches");
}

std::string_view sv(const void* key, size_t len) { return {static_cast<const char*>(key), len}; }

int dropped(const char* fn) {
  return fail(SHMF_EDROPPED, std::string(fn) +
                                 ": the structure was dropped by some process: close this handle and open the "
                                 "new structure of that name, if any");
}

// Byte keys of a batch as string_views (allocates; the C++ API takes spans of views).
std::vector<std::string_view> views(const void* const* keys, const size_t* lens, size_t n) {
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

}  // namespace

extern "C" {

const char* shmf_version(void) { return "0.1.0"; }
static_assert(SHMF_VERSION_MAJOR == 0 && SHMF_VERSION_MINOR == 1 && SHMF_VERSION_PATCH == 0,
              "keep shmf_version() and the SHMF_VERSION_* macros in step with project(VERSION)");

// Every C SHMF_E* code shared with the C++ API equals its ErrorCode (the table in
// shmfilter/error.hpp names the macro of each row), and there are as many.
#define SHMF_X_SAME_VALUE(e, v, name, c, msg)                               \
  static_assert((c) == static_cast<int>(ErrorCode::e) && (c) == (v),        \
                #c " differs from ErrorCode::" #e ": fix shmfilter.h or the " \
                "SHMFILTER_ERROR_CODES table in error.hpp");
SHMFILTER_ERROR_CODES(SHMF_X_SAME_VALUE)
#undef SHMF_X_SAME_VALUE
static_assert(SHMF_ELAST + 1 == kErrorCodeCount,
              "shmfilter.h's SHMF_ELAST and the SHMFILTER_ERROR_CODES table in error.hpp disagree on the count: "
              "add the code to both");
static_assert(SHMF_ENOMEM > SHMF_ELAST && SHMF_EINTERNAL > SHMF_ELAST,
              "the C-only codes must not collide with the shared ones");

const char* shmf_strerror(int code) {
  if (code < 0) code = -code;
  if (code <= SHMF_ELAST) return error_code_message(static_cast<ErrorCode>(code)).data();  // static, NUL-terminated
  switch (code) {
    case SHMF_ENOMEM: return "out of memory";
    case SHMF_EINTERNAL: return "internal error";
    default: return "unknown error code";
  }
}

const char* shmf_last_error_message(void) { return t_last_error.c_str(); }

// ---- segment ---------------------------------------------------------------

void shmf_segment_options_init(shmf_segment_options* o) {
  if (o == nullptr) return;
  CreateOptions d;
  o->size = d.size;
  o->max_size = d.max_size;
  o->directory_capacity = d.directory_capacity;
  o->mode = d.mode;
  o->group = d.group;
  o->file = nullptr;
}

static CreateOptions to_create(const shmf_segment_options* o) {
  CreateOptions c;
  if (o == nullptr) return c;
  c.size = o->size;
  c.max_size = o->max_size;
  c.directory_capacity = o->directory_capacity;
  c.mode = o->mode;
  c.group = o->group;
  if (o->file != nullptr) c.file = o->file;
  return c;
}

static OpenOptions to_open(const char* file) {
  OpenOptions o;
  if (file != nullptr) o.file = file;
  return o;
}

int shmf_segment_create(const char* name, const shmf_segment_options* opts, shmf_segment** out) {
  return guard([&] {
    need(name, "shmf_segment_create", "name");
    return make_handle(out, "shmf_segment_create", [&] { return Segment::create(name, to_create(opts)); });
  });
}

int shmf_segment_open(const char* name, const char* file, shmf_segment** out) {
  return guard([&] {
    need(name, "shmf_segment_open", "name");
    return make_handle(out, "shmf_segment_open", [&] { return Segment::open(name, to_open(file)); });
  });
}

int shmf_segment_open_or_create(const char* name, const shmf_segment_options* opts, shmf_segment** out) {
  return guard([&] {
    need(name, "shmf_segment_open_or_create", "name");
    return make_handle(out, "shmf_segment_open_or_create",
                       [&] { return Segment::open_or_create(name, to_create(opts)); });
  });
}

int shmf_segment_close(shmf_segment* seg) {
  return guard([&] {
    delete seg;
    return 0;
  });
}

int shmf_segment_remove(const char* name, const char* file) {
  return guard([&] {
    need(name, "shmf_segment_remove", "name");
    return Segment::remove(name, to_open(file)) ? 1 : 0;
  });
}

// Common open/close/drop shapes.
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

// ---- Bloom -----------------------------------------------------------------

void shmf_bloom_options_init(shmf_bloom_options* o) {
  if (o == nullptr) return;
  BloomOptions d;
  std::memset(o, 0, sizeof *o);
  o->capacity = d.capacity;
  o->error = d.error;
  o->growth = d.growth;
  o->tightening = d.tightening;
  o->max_layers = d.max_layers;
  o->layout = static_cast<uint32_t>(d.layout);
}

int shmf_bloom_create(shmf_segment* seg, const char* name, const shmf_bloom_options* opts, shmf_bloom** out) {
  return guard([&] {
    need(seg, "shmf_bloom_create", "seg");
    need(name, "shmf_bloom_create", "name");
    need(opts, "shmf_bloom_create", "opts");
    if (opts->layout > 1)
      throw Error(ErrorCode::kInvalidArgument, "shmf_bloom_create: layout " + std::to_string(opts->layout) +
                                                   " is invalid: pass 0 (blocked) or 1 (classic)");
    BloomOptions o;
    o.capacity = opts->capacity;
    o.error = opts->error;
    o.growth = opts->growth;
    o.tightening = opts->tightening;
    o.max_layers = opts->max_layers;
    o.layout = static_cast<BloomLayout>(opts->layout);
    if (opts->has_seed) o.seed = opts->seed;
    return make_handle(out, "shmf_bloom_create", [&] { return Bloom::create(seg->seg, name, o); });
  });
}

SHMF_OPEN_FN(shmf_bloom_open, shmf_bloom, Bloom)
SHMF_CLOSE_FN(shmf_bloom_close, shmf_bloom)
SHMF_DROP_FN(shmf_bloom_drop, Bloom)

int shmf_bloom_add(shmf_bloom* b, const void* key, size_t len) {
  return guard([&] {
    need(b, "shmf_bloom_add", "b");
    if (len) need(key, "shmf_bloom_add", "key");
    if (b->h.add(sv(key, len))) return 1;
    return b->h.valid() ? 0 : dropped("shmf_bloom_add");
  });
}

int shmf_bloom_add_u64(shmf_bloom* b, uint64_t key) {
  return guard([&] {
    need(b, "shmf_bloom_add_u64", "b");
    if (b->h.add(key)) return 1;
    return b->h.valid() ? 0 : dropped("shmf_bloom_add_u64");
  });
}

int shmf_bloom_contains(const shmf_bloom* b, const void* key, size_t len) {
  return guard([&] {
    need(b, "shmf_bloom_contains", "b");
    if (len) need(key, "shmf_bloom_contains", "key");
    if (b->h.contains(sv(key, len))) return 1;
    return b->h.valid() ? 0 : dropped("shmf_bloom_contains");
  });
}

int shmf_bloom_contains_u64(const shmf_bloom* b, uint64_t key) {
  return guard([&] {
    need(b, "shmf_bloom_contains_u64", "b");
    if (b->h.contains(key)) return 1;
    return b->h.valid() ? 0 : dropped("shmf_bloom_contains_u64");
  });
}

int shmf_bloom_add_many_u64(shmf_bloom* b, const uint64_t* keys, size_t n, uint8_t* out) {
  return guard([&] {
    need(b, "shmf_bloom_add_many_u64", "b");
    need_batch(n, "shmf_bloom_add_many_u64");
    if (n == 0) return 0;
    need(keys, "shmf_bloom_add_many_u64", "keys");
    if (!b->h.valid()) return dropped("shmf_bloom_add_many_u64");
    std::span<uint8_t> o;
    if (out != nullptr) o = {out, n};
    return static_cast<int>(b->h.add_many(std::span<const uint64_t>(keys, n), o));
  });
}

int shmf_bloom_contains_many_u64(const shmf_bloom* b, const uint64_t* keys, size_t n, uint8_t* out) {
  return guard([&] {
    need(b, "shmf_bloom_contains_many_u64", "b");
    need_batch(n, "shmf_bloom_contains_many_u64");
    if (n == 0) return 0;
    need(keys, "shmf_bloom_contains_many_u64", "keys");
    need(out, "shmf_bloom_contains_many_u64", "out");
    if (!b->h.valid()) return dropped("shmf_bloom_contains_many_u64");
    return static_cast<int>(b->h.contains_many(std::span<const uint64_t>(keys, n), std::span<uint8_t>(out, n)));
  });
}

int shmf_bloom_contains_many(const shmf_bloom* b, const void* const* keys, const size_t* lens, size_t n,
                             uint8_t* out) {
  return guard([&] {
    need(b, "shmf_bloom_contains_many", "b");
    need_batch(n, "shmf_bloom_contains_many");
    if (n == 0) return 0;
    need(keys, "shmf_bloom_contains_many", "keys");
    need(lens, "shmf_bloom_contains_many", "lens");
    need(out, "shmf_bloom_contains_many", "out");
    if (!b->h.valid()) return dropped("shmf_bloom_contains_many");
    auto v = views(keys, lens, n);
    return static_cast<int>(
        b->h.contains_many(std::span<const std::string_view>(v), std::span<uint8_t>(out, n)));
  });
}

int shmf_bloom_stats_get(const shmf_bloom* b, shmf_bloom_stats* out) {
  return guard([&] {
    need(b, "shmf_bloom_stats_get", "b");
    need(out, "shmf_bloom_stats_get", "out");
    if (!b->h.valid()) return dropped("shmf_bloom_stats_get");
    BloomStats s = b->h.stats();
    std::memset(out, 0, sizeof *out);
    out->capacity = s.capacity;
    out->total_capacity = s.total_capacity;
    out->bits = s.bits;
    out->memory_bytes = s.memory_bytes;
    out->racing_adds = s.racing_adds;
    out->seed = s.seed;
    out->error = s.error;
    out->growth = s.growth;
    out->tightening = s.tightening;
    out->fp_bound = s.fp_bound;
    out->inserted_estimate = s.inserted_estimate;
    out->fill_ratio = s.fill_ratio;
    out->fp_rate_now = s.fp_rate_now;
    out->bits_per_element = s.bits_per_element;
    out->layers = s.layers;
    out->max_layers = s.max_layers;
    out->k = s.k;
    out->over_capacity = s.over_capacity ? 1 : 0;
    return 0;
  });
}

// ---- Cuckoo ----------------------------------------------------------------

void shmf_cuckoo_options_init(shmf_cuckoo_options* o) {
  if (o == nullptr) return;
  CuckooOptions d;
  std::memset(o, 0, sizeof *o);
  o->capacity = d.capacity;
  o->fingerprint_bits = d.fingerprint_bits;
  o->expansion = d.expansion;
  o->error = d.error;
  o->max_subfilters = d.max_subfilters;
  o->max_path = d.max_path;
  o->seed = d.seed;
}

int shmf_cuckoo_create(shmf_segment* seg, const char* name, const shmf_cuckoo_options* opts, shmf_cuckoo** out) {
  return guard([&] {
    need(seg, "shmf_cuckoo_create", "seg");
    need(name, "shmf_cuckoo_create", "name");
    need(opts, "shmf_cuckoo_create", "opts");
    CuckooOptions o;
    o.capacity = opts->capacity;
    o.fingerprint_bits = opts->fingerprint_bits;
    o.error = opts->error;
    o.expansion = opts->expansion;
    o.max_subfilters = opts->max_subfilters;
    o.max_path = opts->max_path;
    o.seed = opts->seed;
    return make_handle(out, "shmf_cuckoo_create", [&] { return Cuckoo::create(seg->seg, name, o); });
  });
}

SHMF_OPEN_FN(shmf_cuckoo_open, shmf_cuckoo, Cuckoo)
SHMF_CLOSE_FN(shmf_cuckoo_close, shmf_cuckoo)
SHMF_DROP_FN(shmf_cuckoo_drop, Cuckoo)

static int cuckoo_status(CuckooStatus s, const char* fn, int inserted, int exists) {
  switch (s) {
    case CuckooStatus::kInserted: return inserted;
    case CuckooStatus::kExists: return exists;
    case CuckooStatus::kFull:
      return fail(SHMF_EFULL, std::string(fn) +
                                  ": the cuckoo filter is full (no free slot within max_path moves, no expansion "
                                  "left): create it with a larger capacity or with expansion >= 2");
    case CuckooStatus::kDropped: return dropped(fn);
  }
  return fail(SHMF_EINTERNAL, std::string(fn) + ": unknown cuckoo status (please report it)");
}

int shmf_cuckoo_add(shmf_cuckoo* c, const void* key, size_t len) {
  return guard([&] {
    need(c, "shmf_cuckoo_add", "c");
    if (len) need(key, "shmf_cuckoo_add", "key");
    return cuckoo_status(c->h.insert(sv(key, len)), "shmf_cuckoo_add", 0, 0);
  });
}

int shmf_cuckoo_add_u64(shmf_cuckoo* c, uint64_t key) {
  return guard([&] {
    need(c, "shmf_cuckoo_add_u64", "c");
    return cuckoo_status(c->h.insert(key), "shmf_cuckoo_add_u64", 0, 0);
  });
}

int shmf_cuckoo_insert_unique(shmf_cuckoo* c, const void* key, size_t len) {
  return guard([&] {
    need(c, "shmf_cuckoo_insert_unique", "c");
    if (len) need(key, "shmf_cuckoo_insert_unique", "key");
    return cuckoo_status(c->h.insert_unique(sv(key, len)), "shmf_cuckoo_insert_unique", 1, 0);
  });
}

int shmf_cuckoo_insert_unique_u64(shmf_cuckoo* c, uint64_t key) {
  return guard([&] {
    need(c, "shmf_cuckoo_insert_unique_u64", "c");
    return cuckoo_status(c->h.insert_unique(key), "shmf_cuckoo_insert_unique_u64", 1, 0);
  });
}

int shmf_cuckoo_contains(const shmf_cuckoo* c, const void* key, size_t len) {
  return guard([&] {
    need(c, "shmf_cuckoo_contains", "c");
    if (len) need(key, "shmf_cuckoo_contains", "key");
    if (c->h.contains(sv(key, len))) return 1;
    return c->h.valid() ? 0 : dropped("shmf_cuckoo_contains");
  });
}

int shmf_cuckoo_contains_u64(const shmf_cuckoo* c, uint64_t key) {
  return guard([&] {
    need(c, "shmf_cuckoo_contains_u64", "c");
    if (c->h.contains(key)) return 1;
    return c->h.valid() ? 0 : dropped("shmf_cuckoo_contains_u64");
  });
}

int shmf_cuckoo_contains_many_u64(const shmf_cuckoo* c, const uint64_t* keys, size_t n, uint8_t* out) {
  return guard([&] {
    need(c, "shmf_cuckoo_contains_many_u64", "c");
    need_batch(n, "shmf_cuckoo_contains_many_u64");
    if (n == 0) return 0;
    need(keys, "shmf_cuckoo_contains_many_u64", "keys");
    need(out, "shmf_cuckoo_contains_many_u64", "out");
    if (!c->h.valid()) return dropped("shmf_cuckoo_contains_many_u64");
    return static_cast<int>(c->h.contains_many(std::span<const uint64_t>(keys, n), std::span<uint8_t>(out, n)));
  });
}

int shmf_cuckoo_contains_many(const shmf_cuckoo* c, const void* const* keys, const size_t* lens, size_t n,
                              uint8_t* out) {
  return guard([&] {
    need(c, "shmf_cuckoo_contains_many", "c");
    need_batch(n, "shmf_cuckoo_contains_many");
    if (n == 0) return 0;
    need(keys, "shmf_cuckoo_contains_many", "keys");
    need(lens, "shmf_cuckoo_contains_many", "lens");
    need(out, "shmf_cuckoo_contains_many", "out");
    if (!c->h.valid()) return dropped("shmf_cuckoo_contains_many");
    auto v = views(keys, lens, n);
    return static_cast<int>(c->h.contains_many(std::span<const std::string_view>(v), std::span<uint8_t>(out, n)));
  });
}

int shmf_cuckoo_erase(shmf_cuckoo* c, const void* key, size_t len) {
  return guard([&] {
    need(c, "shmf_cuckoo_erase", "c");
    if (len) need(key, "shmf_cuckoo_erase", "key");
    if (c->h.erase(sv(key, len))) return 1;
    return c->h.valid() ? 0 : dropped("shmf_cuckoo_erase");
  });
}

int shmf_cuckoo_erase_u64(shmf_cuckoo* c, uint64_t key) {
  return guard([&] {
    need(c, "shmf_cuckoo_erase_u64", "c");
    if (c->h.erase(key)) return 1;
    return c->h.valid() ? 0 : dropped("shmf_cuckoo_erase_u64");
  });
}

int shmf_cuckoo_count_u64(const shmf_cuckoo* c, uint64_t key) {
  return guard([&] {
    need(c, "shmf_cuckoo_count_u64", "c");
    if (!c->h.valid()) return dropped("shmf_cuckoo_count_u64");
    return static_cast<int>(c->h.count(key));
  });
}

int shmf_cuckoo_size(const shmf_cuckoo* c, uint64_t* out) {
  return guard([&] {
    need(c, "shmf_cuckoo_size", "c");
    need(out, "shmf_cuckoo_size", "out");
    if (!c->h.valid()) return dropped("shmf_cuckoo_size");
    *out = c->h.size();
    return 0;
  });
}

int shmf_cuckoo_stats_get(const shmf_cuckoo* c, shmf_cuckoo_stats* out) {
  return guard([&] {
    need(c, "shmf_cuckoo_stats_get", "c");
    need(out, "shmf_cuckoo_stats_get", "out");
    if (!c->h.valid()) return dropped("shmf_cuckoo_stats_get");
    CuckooStats s = c->h.stats();
    std::memset(out, 0, sizeof *out);
    out->capacity = s.capacity;
    out->slots = s.slots;
    out->size = s.size;
    out->failures = s.failures;
    out->longest_path = s.longest_path;
    out->moves = s.moves;
    out->inserts = s.inserts;
    out->erases = s.erases;
    out->repairs = s.repairs;
    out->expansions = s.expansions;
    out->bytes = s.bytes;
    out->target_error = s.target_error;
    out->load_factor = s.load_factor;
    out->bits_per_item = s.bits_per_item;
    out->fp_rate_bound = s.fp_rate_bound;
    out->fp_rate_estimate = s.fp_rate_estimate;
    out->fingerprint_bits = s.fingerprint_bits;
    out->lane_bits = s.lane_bits;
    out->subfilters = s.subfilters;
    out->max_path = s.max_path;
    out->expansion = s.expansion;
    return 0;
  });
}

// ---- Roaring ---------------------------------------------------------------

void shmf_roaring_options_init(shmf_roaring_options* o) {
  if (o == nullptr) return;
  RoaringOptions d;
  std::memset(o, 0, sizeof *o);
  o->delta_capacity = d.delta_capacity;
  o->reader_slots = d.reader_slots;
  o->compact_at = d.compact_at;
  o->auto_compact = d.auto_compact ? 1 : 0;
}

int shmf_roaring_create(shmf_segment* seg, const char* name, const shmf_roaring_options* opts, shmf_roaring** out) {
  return guard([&] {
    need(seg, "shmf_roaring_create", "seg");
    need(name, "shmf_roaring_create", "name");
    RoaringOptions o;
    if (opts != nullptr) {
      o.delta_capacity = opts->delta_capacity;
      o.reader_slots = opts->reader_slots;
      o.compact_at = opts->compact_at;
      o.auto_compact = opts->auto_compact != 0;
    }
    return make_handle(out, "shmf_roaring_create", [&] { return RoaringSet::create(seg->seg, name, o); });
  });
}

SHMF_OPEN_FN(shmf_roaring_open, shmf_roaring, RoaringSet)
SHMF_CLOSE_FN(shmf_roaring_close, shmf_roaring)
SHMF_DROP_FN(shmf_roaring_drop, RoaringSet)

static int roaring_status(RoaringStatus s, const char* fn) {
  switch (s) {
    case RoaringStatus::kOk: return 0;
    case RoaringStatus::kOutOfRange:
      return fail(SHMF_EINVAL, std::string(fn) +
                                   ": a value >= 2^32 does not fit a Roaring set of uint32: nothing was written; "
                                   "map the ids to 32 bits or use a Bloom/Cuckoo filter or exact set");
    case RoaringStatus::kDropped: return dropped(fn);
    case RoaringStatus::kFull:
      return fail(SHMF_EFULL, std::string(fn) +
                                  ": the delta is full and compaction could not run now (segment full or another "
                                  "process compacting): retry later, or grow the segment");
  }
  return fail(SHMF_EINTERNAL, std::string(fn) + ": unknown roaring status (please report it)");
}

int shmf_roaring_add(shmf_roaring* r, uint32_t value) {
  return guard([&] {
    need(r, "shmf_roaring_add", "r");
    return roaring_status(r->h.add(value), "shmf_roaring_add");
  });
}

int shmf_roaring_add_u64(shmf_roaring* r, uint64_t value) {
  return guard([&] {
    need(r, "shmf_roaring_add_u64", "r");
    return roaring_status(r->h.add_u64(value), "shmf_roaring_add_u64");
  });
}

int shmf_roaring_remove(shmf_roaring* r, uint32_t value) {
  return guard([&] {
    need(r, "shmf_roaring_remove", "r");
    return roaring_status(r->h.remove(value), "shmf_roaring_remove");
  });
}

int shmf_roaring_add_many(shmf_roaring* r, const uint32_t* values, size_t n) {
  return guard([&] {
    need(r, "shmf_roaring_add_many", "r");
    if (n == 0) return 0;
    need(values, "shmf_roaring_add_many", "values");
    return roaring_status(r->h.add_many(std::span<const uint32_t>(values, n)), "shmf_roaring_add_many");
  });
}

int shmf_roaring_contains(const shmf_roaring* r, uint32_t value) {
  return guard([&] {
    need(r, "shmf_roaring_contains", "r");
    if (r->h.contains(value)) return 1;
    return r->h.valid() ? 0 : dropped("shmf_roaring_contains");
  });
}

int shmf_roaring_contains_u64(const shmf_roaring* r, uint64_t value) {
  return guard([&] {
    need(r, "shmf_roaring_contains_u64", "r");
    if (r->h.contains_u64(value)) return 1;
    return r->h.valid() ? 0 : dropped("shmf_roaring_contains_u64");
  });
}

int shmf_roaring_contains_many(const shmf_roaring* r, const uint32_t* values, size_t n, uint8_t* out) {
  return guard([&] {
    need(r, "shmf_roaring_contains_many", "r");
    need_batch(n, "shmf_roaring_contains_many");
    if (n == 0) return 0;
    need(values, "shmf_roaring_contains_many", "values");
    need(out, "shmf_roaring_contains_many", "out");
    if (!r->h.valid()) return dropped("shmf_roaring_contains_many");
    return static_cast<int>(r->h.contains_many(std::span<const uint32_t>(values, n), std::span<uint8_t>(out, n)));
  });
}

int shmf_roaring_contains_many_u64(const shmf_roaring* r, const uint64_t* values, size_t n, uint8_t* out) {
  return guard([&] {
    need(r, "shmf_roaring_contains_many_u64", "r");
    need_batch(n, "shmf_roaring_contains_many_u64");
    if (n == 0) return 0;
    need(values, "shmf_roaring_contains_many_u64", "values");
    need(out, "shmf_roaring_contains_many_u64", "out");
    if (!r->h.valid()) return dropped("shmf_roaring_contains_many_u64");
    return static_cast<int>(r->h.contains_many(std::span<const uint64_t>(values, n), std::span<uint8_t>(out, n)));
  });
}

int shmf_roaring_cardinality(const shmf_roaring* r, uint64_t* out) {
  return guard([&] {
    need(r, "shmf_roaring_cardinality", "r");
    need(out, "shmf_roaring_cardinality", "out");
    if (!r->h.valid()) return dropped("shmf_roaring_cardinality");
    *out = r->h.cardinality();
    return 0;
  });
}

int shmf_roaring_compact(shmf_roaring* r) {
  return guard([&] {
    need(r, "shmf_roaring_compact", "r");
    return r->h.compact() ? 1 : 0;
  });
}

int shmf_roaring_stats_get(const shmf_roaring* r, shmf_roaring_stats* out) {
  return guard([&] {
    need(r, "shmf_roaring_stats_get", "r");
    need(out, "shmf_roaring_stats_get", "out");
    RoaringStats s = r->h.stats();  // throws kDropped
    std::memset(out, 0, sizeof *out);
    out->cardinality = s.cardinality;
    out->snapshot_cardinality = s.snapshot_cardinality;
    out->snapshot_bytes = s.snapshot_bytes;
    out->snapshot_generation = s.snapshot_generation;
    out->delta_capacity = s.delta_capacity;
    out->delta_fill = s.delta_fill;
    out->prev_delta_fill = s.prev_delta_fill;
    out->delta_bytes = s.delta_bytes;
    out->total_bytes = s.total_bytes;
    out->pending_free = s.pending_free;
    out->compactions = s.compactions;
    out->claim_owner = s.claim_owner;
    out->containers = s.containers;
    out->array_containers = s.array_containers;
    out->bitmap_containers = s.bitmap_containers;
    out->run_containers = s.run_containers;
    out->readers = s.readers;
    return 0;
  });
}

// ---- HyperLogLog -----------------------------------------------------------

int shmf_hll_create(shmf_segment* seg, const char* name, shmf_hll** out) {
  return guard([&] {
    need(seg, "shmf_hll_create", "seg");
    need(name, "shmf_hll_create", "name");
    return make_handle(out, "shmf_hll_create", [&] { return Hll::create(seg->seg, name); });
  });
}

int shmf_hll_open_or_create(shmf_segment* seg, const char* name, shmf_hll** out) {
  return guard([&] {
    need(seg, "shmf_hll_open_or_create", "seg");
    need(name, "shmf_hll_open_or_create", "name");
    return make_handle(out, "shmf_hll_open_or_create", [&] { return Hll::open_or_create(seg->seg, name); });
  });
}

SHMF_OPEN_FN(shmf_hll_open, shmf_hll, Hll)
SHMF_CLOSE_FN(shmf_hll_close, shmf_hll)
SHMF_DROP_FN(shmf_hll_drop, Hll)

int shmf_hll_add(shmf_hll* h, const void* key, size_t len) {
  return guard([&] {
    need(h, "shmf_hll_add", "h");
    if (len) need(key, "shmf_hll_add", "key");
    if (h->h.add(sv(key, len))) return 1;
    return h->h.valid() ? 0 : dropped("shmf_hll_add");
  });
}

int shmf_hll_add_u64(shmf_hll* h, uint64_t key) {
  return guard([&] {
    need(h, "shmf_hll_add_u64", "h");
    if (h->h.add(key)) return 1;
    return h->h.valid() ? 0 : dropped("shmf_hll_add_u64");
  });
}

int shmf_hll_add_many_u64(shmf_hll* h, const uint64_t* keys, size_t n) {
  return guard([&] {
    need(h, "shmf_hll_add_many_u64", "h");
    need_batch(n, "shmf_hll_add_many_u64");
    if (n == 0) return 0;
    need(keys, "shmf_hll_add_many_u64", "keys");
    if (!h->h.valid()) return dropped("shmf_hll_add_many_u64");
    return static_cast<int>(h->h.add_many(std::span<const uint64_t>(keys, n)));  // <= n <= INT_MAX
  });
}

int shmf_hll_count(const shmf_hll* h, uint64_t* out) {
  return guard([&] {
    need(h, "shmf_hll_count", "h");
    need(out, "shmf_hll_count", "out");
    if (!h->h.valid()) return dropped("shmf_hll_count");
    *out = h->h.count();
    return 0;
  });
}

int shmf_hll_stats_get(const shmf_hll* h, shmf_hll_stats* out) {
  return guard([&] {
    need(h, "shmf_hll_stats_get", "h");
    need(out, "shmf_hll_stats_get", "out");
    HllStats s = h->h.stats();  // throws kDropped
    std::memset(out, 0, sizeof *out);
    out->estimate = s.estimate;
    out->bytes = s.bytes;
    out->standard_error = s.standard_error;
    out->registers = s.registers;
    out->nonzero_registers = s.nonzero_registers;
    out->max_register = s.max_register;
    return 0;
  });
}

// ---- exact set -------------------------------------------------------------

void shmf_set_options_init(shmf_set_options* o) {
  if (o == nullptr) return;
  ExactSetOptions d;
  std::memset(o, 0, sizeof *o);
  o->capacity = d.capacity;
  o->max_load = d.max_load;
}

int shmf_set_create(shmf_segment* seg, const char* name, const shmf_set_options* opts, shmf_set** out) {
  return guard([&] {
    need(seg, "shmf_set_create", "seg");
    need(name, "shmf_set_create", "name");
    need(opts, "shmf_set_create", "opts");
    ExactSetOptions o;
    o.capacity = opts->capacity;
    o.max_load = opts->max_load;
    return make_handle(out, "shmf_set_create", [&] { return ExactSet::create(seg->seg, name, o); });
  });
}

SHMF_OPEN_FN(shmf_set_open, shmf_set, ExactSet)
SHMF_CLOSE_FN(shmf_set_close, shmf_set)
SHMF_DROP_FN(shmf_set_drop, ExactSet)

static int insert_result(InsertResult r, const char* fn) {
  switch (r) {
    case InsertResult::kInserted: return 1;
    case InsertResult::kExists: return 0;
    case InsertResult::kFull:
      return fail(SHMF_EFULL, std::string(fn) +
                                  ": the exact set is at capacity: erase keys, or create a set with a larger "
                                  "capacity");
    case InsertResult::kDropped: return dropped(fn);
  }
  return fail(SHMF_EINTERNAL, std::string(fn) + ": unknown insert result (please report it)");
}

int shmf_set_insert_unique(shmf_set* s, const void* key, size_t len) {
  return guard([&] {
    need(s, "shmf_set_insert_unique", "s");
    if (len) need(key, "shmf_set_insert_unique", "key");
    return insert_result(s->h.insert(sv(key, len)), "shmf_set_insert_unique");
  });
}

int shmf_set_insert_unique_u64(shmf_set* s, uint64_t key) {
  return guard([&] {
    need(s, "shmf_set_insert_unique_u64", "s");
    return insert_result(s->h.insert(key), "shmf_set_insert_unique_u64");
  });
}

int shmf_set_contains(const shmf_set* s, const void* key, size_t len) {
  return guard([&] {
    need(s, "shmf_set_contains", "s");
    if (len) need(key, "shmf_set_contains", "key");
    if (s->h.contains(sv(key, len))) return 1;
    return s->h.valid() ? 0 : dropped("shmf_set_contains");
  });
}

int shmf_set_contains_u64(const shmf_set* s, uint64_t key) {
  return guard([&] {
    need(s, "shmf_set_contains_u64", "s");
    if (s->h.contains(key)) return 1;
    return s->h.valid() ? 0 : dropped("shmf_set_contains_u64");
  });
}

int shmf_set_contains_many_u64(const shmf_set* s, const uint64_t* keys, size_t n, uint8_t* out) {
  return guard([&] {
    need(s, "shmf_set_contains_many_u64", "s");
    need_batch(n, "shmf_set_contains_many_u64");
    if (n == 0) return 0;
    need(keys, "shmf_set_contains_many_u64", "keys");
    need(out, "shmf_set_contains_many_u64", "out");
    if (!s->h.valid()) return dropped("shmf_set_contains_many_u64");
    return static_cast<int>(s->h.contains_many(std::span<const uint64_t>(keys, n), std::span<uint8_t>(out, n)));
  });
}

int shmf_set_contains_many(const shmf_set* s, const void* const* keys, const size_t* lens, size_t n, uint8_t* out) {
  return guard([&] {
    need(s, "shmf_set_contains_many", "s");
    need_batch(n, "shmf_set_contains_many");
    if (n == 0) return 0;
    need(keys, "shmf_set_contains_many", "keys");
    need(lens, "shmf_set_contains_many", "lens");
    need(out, "shmf_set_contains_many", "out");
    if (!s->h.valid()) return dropped("shmf_set_contains_many");
    auto v = views(keys, lens, n);
    return static_cast<int>(s->h.contains_many(std::span<const std::string_view>(v), std::span<uint8_t>(out, n)));
  });
}

int shmf_set_erase(shmf_set* s, const void* key, size_t len) {
  return guard([&] {
    need(s, "shmf_set_erase", "s");
    if (len) need(key, "shmf_set_erase", "key");
    if (s->h.erase(sv(key, len))) return 1;
    return s->h.valid() ? 0 : dropped("shmf_set_erase");
  });
}

int shmf_set_erase_u64(shmf_set* s, uint64_t key) {
  return guard([&] {
    need(s, "shmf_set_erase_u64", "s");
    if (s->h.erase(key)) return 1;
    return s->h.valid() ? 0 : dropped("shmf_set_erase_u64");
  });
}

int shmf_set_size(const shmf_set* s, uint64_t* out) {
  return guard([&] {
    need(s, "shmf_set_size", "s");
    need(out, "shmf_set_size", "out");
    if (!s->h.valid()) return dropped("shmf_set_size");
    *out = s->h.size();
    return 0;
  });
}

int shmf_set_stats_get(const shmf_set* s, shmf_set_stats* out) {
  return guard([&] {
    need(s, "shmf_set_stats_get", "s");
    need(out, "shmf_set_stats_get", "out");
    ExactSetStats st = s->h.stats();  // throws kDropped
    std::memset(out, 0, sizeof *out);
    out->capacity = st.capacity;
    out->slots = st.slots;
    out->size = st.size;
    out->used_slots = st.used_slots;
    out->bytes = st.bytes;
    out->seed = st.seed;
    out->max_load = st.max_load;
    out->load = st.load;
    out->bytes_per_key_at_capacity = st.bytes_per_key_at_capacity;
    out->stripes = st.stripes;
    return 0;
  });
}

}  // extern "C"
