// lib/capi/c_api.cpp: the C API (include/shmfilter/shmfilter.h), a front end that
// calls only the public C++ API. Every entry point is noexcept and catches
// every exception (guard(), lib/capi/c_api_internal.h); failures return -SHMF_E*
// and record a detailed thread-local message for shmf_last_error_message().
// This file: version, errors, segment, Bloom, Cuckoo; c_api_sets.cpp: Roaring,
// HyperLogLog, exact set.
#include <cstdint>
#include <cstring>
#include <string>

#include "capi/c_api_internal.h"

using namespace shmfilter;
using namespace shmfilter::capi;

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

void shmf_open_options_init(shmf_open_options* o) {
  if (o == nullptr) return;
  OpenOptions d;
  o->file = nullptr;
  o->read_only = d.read_only ? 1 : 0;
  o->huge_pages = d.huge_pages ? 1 : 0;
  o->trusted_owner = d.trusted_owner;
}

int shmf_segment_open_ex(const char* name, const shmf_open_options* opts, shmf_segment** out) {
  return guard([&] {
    need(name, "shmf_segment_open_ex", "name");
    OpenOptions o;
    if (opts != nullptr) {
      if (opts->file != nullptr) o.file = opts->file;
      o.read_only = opts->read_only != 0;
      o.huge_pages = opts->huge_pages != 0;
      if (opts->trusted_owner < -1 || opts->trusted_owner > INT32_MAX)
        throw Error(ErrorCode::kInvalidArgument, "shmf_segment_open_ex: trusted_owner " +
                                                     std::to_string(opts->trusted_owner) +
                                                     " is not a uid: pass -1 (own files and root only) or a uid");
      o.trusted_owner = opts->trusted_owner;
    }
    return make_handle(out, "shmf_segment_open_ex", [&] { return Segment::open(name, o); });
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

int shmf_segment_is_read_only(const shmf_segment* seg) {
  return guard([&] {
    need(seg, "shmf_segment_is_read_only", "seg");
    return seg->seg.read_only() ? 1 : 0;
  });
}

int shmf_segment_remove(const char* name, const char* file) {
  return guard([&] {
    need(name, "shmf_segment_remove", "name");
    return Segment::remove(name, to_open(file)) ? 1 : 0;
  });
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
    case CuckooStatus::kForked: return forked(fn);
    case CuckooStatus::kReadOnly: return read_only(fn);
    case CuckooStatus::kNoSpace:
      return fail(SHMF_ENOSPACE, std::string(fn) +
                                     ": the cuckoo filter is full and the segment has no space for its next "
                                     "sub-filter: grow the segment (shmtool resize) or free space in it");
  }
  return fail(SHMF_EINTERNAL, std::string(fn) + ": unknown cuckoo status (please report it)");
}

int shmf_cuckoo_add(shmf_cuckoo* c, const void* key, size_t len) {
  return guard([&] {
    need(c, "shmf_cuckoo_add", "c");
    if (len) need(key, "shmf_cuckoo_add", "key");
    return cuckoo_status(c->h.add(sv(key, len)), "shmf_cuckoo_add", 0, 0);
  });
}

int shmf_cuckoo_add_u64(shmf_cuckoo* c, uint64_t key) {
  return guard([&] {
    need(c, "shmf_cuckoo_add_u64", "c");
    return cuckoo_status(c->h.add(key), "shmf_cuckoo_add_u64", 0, 0);
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

}  // extern "C"
