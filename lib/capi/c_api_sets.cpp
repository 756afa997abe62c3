// lib/capi/c_api_sets.cpp: the C API's Roaring, HyperLogLog and exact-set
// functions (include/shmfilter/shmfilter.h); the rest is in c_api.cpp, the
// shared guard()/need() in c_api_internal.h.
#include <cstring>

#include "capi/c_api_internal.h"

using namespace shmfilter;
using namespace shmfilter::capi;

extern "C" {

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
                                  ": the delta is full and could not be compacted (a delta chain that cannot be "
                                  "followed): run shmtool check on the segment");
    case RoaringStatus::kNoSpace:
      return fail(SHMF_ENOSPACE, std::string(fn) +
                                     ": the delta is full and the segment has no space for the compaction: grow "
                                     "the segment (shmtool resize)");
    case RoaringStatus::kBusy:
      return fail(SHMF_EBUSY, std::string(fn) +
                                  ": the delta is full and another process kept the compaction claim past the "
                                  "wait bound: retry later");
    case RoaringStatus::kForked: return forked(fn);
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
    case InsertResult::kForked: return forked(fn);
    case InsertResult::kReadOnly: return read_only(fn);
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
