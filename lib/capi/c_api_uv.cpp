// lib/capi/c_api_uv.cpp: the C API of the UV family (include/shmfilter/shmfilter.h, "uv"
// block) over shmfilter::UvFamily. Same shapes as c_api.cpp: guard() turns every exception
// into a negative SHMF_E* code and a thread-local message.
#include <climits>
#include <cstring>

#include "capi/c_api_internal.h"
#include "shmfilter/uv.hpp"

struct shmf_uv {
  shmfilter::UvFamily h;
};

using namespace shmfilter;
using namespace shmfilter::capi;

namespace {

int add_status(UvStatus s, const char* fn) {
  switch (s) {
    case UvStatus::kChanged: return 1;
    case UvStatus::kUnchanged: return 0;
    case UvStatus::kSpacesFull:
      return fail(SHMF_EFULL, std::string(fn) + ": the current bucket holds max_spaces spaces already: create the "
                                                "family with a larger max_spaces");
    case UvStatus::kNoSpace:
      return fail(SHMF_ENOSPACE, std::string(fn) + ": no storage could be allocated (the segment is out of space): "
                                                   "grow the segment (shmtool resize)");
    case UvStatus::kDropped: return dropped(fn);
    case UvStatus::kBusy:
      return fail(SHMF_EBUSY, std::string(fn) + ": other processes kept the call from finishing within its bound: retry");
    case UvStatus::kForked: return forked(fn);
    case UvStatus::kReadOnly: return read_only(fn);
    case UvStatus::kStale:
      return fail(SHMF_EBUSY, std::string(fn) + ": this process's clock names a bucket older than the kept ones "
                                                "(another process's clock is a bucket ahead): fix the clocks, retry");
    case UvStatus::kCorrupt:
      return fail(SHMF_ECORRUPT, std::string(fn) + ": the family failed validation on this path: run 'shmtool check'");
  }
  return fail(SHMF_EINTERNAL, std::string(fn) + ": unknown UV status (please report it)");
}

UvOptions options_of(const shmf_uv_options* opts) {
  UvOptions o;
  if (opts == nullptr) return o;
  o.retention = opts->retention;
  o.max_spaces = opts->max_spaces;
  o.exact_max = opts->exact_max;
  o.bucket_seconds = opts->bucket_seconds;
  o.utc_offset = opts->utc_offset;
  o.chunk_bytes = opts->chunk_bytes;
  return o;
}

}  // namespace

extern "C" {

void shmf_uv_options_init(shmf_uv_options* opts) {
  if (opts == nullptr) return;
  UvOptions d;
  *opts = shmf_uv_options{};
  opts->retention = d.retention;
  opts->max_spaces = d.max_spaces;
  opts->exact_max = d.exact_max;
  opts->bucket_seconds = d.bucket_seconds;
  opts->utc_offset = d.utc_offset;
  opts->chunk_bytes = d.chunk_bytes;
}

int shmf_uv_create(shmf_segment* seg, const char* name, const shmf_uv_options* opts, shmf_uv** out) {
  return guard([&] {
    need(seg, "shmf_uv_create", "seg");
    need(name, "shmf_uv_create", "name");
    need(opts, "shmf_uv_create", "opts");
    const UvOptions o = options_of(opts);
    return make_handle(out, "shmf_uv_create", [&] { return UvFamily::create(seg->seg, name, o); });
  });
}

int shmf_uv_open_or_create(shmf_segment* seg, const char* name, const shmf_uv_options* opts, shmf_uv** out) {
  return guard([&] {
    need(seg, "shmf_uv_open_or_create", "seg");
    need(name, "shmf_uv_open_or_create", "name");
    const UvOptions o = options_of(opts);
    return make_handle(out, "shmf_uv_open_or_create", [&] { return UvFamily::open_or_create(seg->seg, name, o); });
  });
}

SHMF_OPEN_FN(shmf_uv_open, shmf_uv, UvFamily)
SHMF_CLOSE_FN(shmf_uv_close, shmf_uv)
SHMF_DROP_FN(shmf_uv_drop, UvFamily)

int shmf_uv_set_now(shmf_uv* u, int64_t unix_seconds) {
  return guard([&] {
    need(u, "shmf_uv_set_now", "u");
    if (unix_seconds == INT64_MIN)
      u->h.use_system_clock();
    else
      u->h.set_now(unix_seconds);
    return 0;
  });
}

int shmf_uv_add(shmf_uv* u, uint64_t space, const void* item, size_t len) {
  return guard([&] {
    need(u, "shmf_uv_add", "u");
    if (len) need(item, "shmf_uv_add", "item");
    return add_status(u->h.add(space, sv(item, len)), "shmf_uv_add");
  });
}

int shmf_uv_add_u64(shmf_uv* u, uint64_t space, uint64_t item) {
  return guard([&] {
    need(u, "shmf_uv_add_u64", "u");
    return add_status(u->h.add(space, item), "shmf_uv_add_u64");
  });
}

int shmf_uv_count(const shmf_uv* u, uint64_t space, uint32_t window, uint64_t* out) {
  return guard([&] {
    need(u, "shmf_uv_count", "u");
    need(out, "shmf_uv_count", "out");
    *out = u->h.count(space, window);
    return 0;
  });
}

int shmf_uv_count_hll(const shmf_uv* u, uint64_t space, uint32_t window, uint64_t* out) {
  return guard([&] {
    need(u, "shmf_uv_count_hll", "u");
    need(out, "shmf_uv_count_hll", "out");
    *out = u->h.count_hll(space, window);
    return 0;
  });
}

int shmf_uv_count_all(const shmf_uv* u, uint32_t window, uint64_t* out) {
  return guard([&] {
    need(u, "shmf_uv_count_all", "u");
    need(out, "shmf_uv_count_all", "out");
    *out = u->h.count_all(window);
    return 0;
  });
}

int shmf_uv_export_redis(const shmf_uv* u, uint64_t space, uint32_t window, void* buf, size_t cap, size_t* needed) {
  return guard([&] {
    need(u, "shmf_uv_export_redis", "u");
    const std::string s = u->h.export_redis(space, window);
    if (needed) *needed = s.size();
    if (cap < s.size())
      return fail(SHMF_EFULL, "shmf_uv_export_redis: the buffer holds " + std::to_string(cap) + " bytes, the string " +
                                  std::to_string(s.size()) + ": pass SHMF_UV_REDIS_BYTES");
    need(buf, "shmf_uv_export_redis", "buf");
    std::memcpy(buf, s.data(), s.size());
    return 0;
  });
}

int shmf_uv_stats_get(const shmf_uv* u, shmf_uv_stats* out) {
  return guard([&] {
    need(u, "shmf_uv_stats_get", "u");
    need(out, "shmf_uv_stats_get", "out");
    const UvStats s = u->h.stats();
    *out = shmf_uv_stats{};
    out->retention = s.retention;
    out->max_spaces = s.max_spaces;
    out->exact_max = s.exact_max;
    out->buckets = static_cast<uint32_t>(s.buckets.size());
    out->current_bucket = s.current_bucket;
    out->memory_bytes = s.memory_bytes;
    out->rotations = s.rotations;
    out->promotions = s.promotions;
    out->refused_spaces_full = s.spaces_full;
    out->refused_no_space = s.no_space;
    out->refused_stale = s.stale;
    if (!s.buckets.empty() && s.buckets.front().age == 0) {
      out->today_spaces = s.buckets.front().spaces;
      out->today_exact_spaces = s.buckets.front().exact_spaces;
      out->today_dense_spaces = s.buckets.front().dense_spaces;
      out->today_adds = s.buckets.front().adds;
    }
    return 0;
  });
}

}  // extern "C"
