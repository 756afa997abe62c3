// lib/capi/c_api_directory.cpp: the C API's directory listing
// (shmf_segment_list, shmf_segment_find, shmf_kind_name, shmf_kind_from_name)
// and the HyperLogLog's Redis interchange (shmf_hll_export_redis /
// import_redis / count_redis).
// The listing's numbers are lib/ops's structure_metrics (the same numbers the
// Prometheus text and `shmtool list` show).
#include <cstring>

#include "capi/c_api_internal.h"
#include "shmfilter/metrics.hpp"
#include "shmfilter/kinds.hpp"

using namespace shmfilter;
using namespace shmfilter::capi;

// The C kind numbers are the on-disk Kind values.
static_assert(SHMF_KIND_BLOOM == static_cast<int>(Kind::kBloom), "C kind numbers are the on-disk Kind values");
static_assert(SHMF_KIND_CUCKOO == static_cast<int>(Kind::kCuckoo), "C kind numbers are the on-disk Kind values");
static_assert(SHMF_KIND_ROARING == static_cast<int>(Kind::kRoaring), "C kind numbers are the on-disk Kind values");
static_assert(SHMF_KIND_HLL == static_cast<int>(Kind::kHll), "C kind numbers are the on-disk Kind values");
static_assert(SHMF_KIND_SET == static_cast<int>(Kind::kExactSet), "C kind numbers are the on-disk Kind values");
static_assert(SHMF_KIND_BLOB == static_cast<int>(Kind::kBlob), "C kind numbers are the on-disk Kind values");
static_assert(SHMF_KIND_WINDOW == static_cast<int>(Kind::kWindow), "C kind numbers are the on-disk Kind values");
static_assert(SHMF_KIND_WINDOW == static_cast<int>(Kind::kWindow) && SHMF_KIND_UV == static_cast<int>(kLastKind), "a new Kind needs its SHMF_KIND_* in shmfilter.h");
static_assert(sizeof(shmf_structure_info::name) == kMaxStructureNameLength + 1,
              "shmf_structure_info.name holds the longest structure name and its NUL");

namespace {

void fill(shmf_structure_info& o, const StructureMetrics& m) {
  std::memset(&o, 0, sizeof o);
  const std::string& n = m.region.name;
  std::memcpy(o.name, n.data(), n.size() < sizeof o.name ? n.size() : sizeof o.name - 1);
  o.kind = static_cast<uint32_t>(m.region.kind);
  o.readable = m.error.empty() ? 1 : 0;
  o.over_capacity = m.over_capacity ? 1 : 0;
  o.slot = m.region.slot;
  o.generation = m.region.generation;
  o.offset = m.region.offset;
  o.region_bytes = m.region.size;
  if (!m.error.empty()) return;  // the numbers stay 0
  o.bytes = m.bytes;
  o.capacity = m.capacity;
  o.items = m.items;
  o.fill_ratio = m.fill_ratio;
  o.fp_rate_estimate = m.fp_rate_estimate;
}

}  // namespace

extern "C" {

const char* shmf_kind_name(uint32_t kind) {
  if (kind == 0 || kind > static_cast<uint32_t>(kLastKind)) return "unknown";
  return kind_name(static_cast<Kind>(kind)).data();  // the kinds table's NUL-terminated literals
}

int shmf_structure_drop(shmf_segment* seg, const char* name) {
  return guard([&] {
    need(seg, "shmf_structure_drop", "seg");
    need(name, "shmf_structure_drop", "name");
    return drop_structure(seg->seg, name) ? 1 : 0;
  });
}

int shmf_kind_from_name(const char* name, size_t len) {
  if (name == nullptr) return 0;
  const std::optional<Kind> k = kind_from_name(std::string_view(name, len));  // the kinds table
  return k ? static_cast<int>(*k) : 0;
}

int shmf_segment_list(shmf_segment* seg, shmf_structure_info* out, size_t cap, size_t* count) {
  return guard([&] {
    need(seg, "shmf_segment_list", "seg");
    need(count, "shmf_segment_list", "count");
    const std::vector<StructureMetrics> all = structure_metrics(seg->seg);
    *count = all.size();
    if (all.size() > static_cast<size_t>(INT_MAX))
      return fail(SHMF_EINTERNAL, "shmf_segment_list: more than INT_MAX structures (please report it)");
    if (cap < all.size() || (out == nullptr && !all.empty()))
      return fail(SHMF_EFULL, "shmf_segment_list: room for " + std::to_string(cap) + " entries, the segment has " +
                                  std::to_string(all.size()) + ": call again with *count entries");
    for (size_t i = 0; i < all.size(); ++i) fill(out[i], all[i]);
    return static_cast<int>(all.size());
  });
}

int shmf_segment_find(shmf_segment* seg, const char* name, shmf_structure_info* out) {
  return guard([&] {
    need(seg, "shmf_segment_find", "seg");
    need(name, "shmf_segment_find", "name");
    need(out, "shmf_segment_find", "out");
    std::memset(out, 0, sizeof *out);
    if (!seg->seg.find(name)) return 0;  // the common miss costs one directory lookup
    for (const StructureMetrics& m : structure_metrics(seg->seg))
      if (m.region.name == name) {
        fill(*out, m);
        return 1;
      }
    return 0;  // dropped in between
  });
}

// ---- HyperLogLog: Redis interchange ------------------------------------------

int shmf_hll_export_redis(const shmf_hll* h, void* buf, size_t cap, size_t* needed) {
  return guard([&] {
    need(h, "shmf_hll_export_redis", "h");
    need(needed, "shmf_hll_export_redis", "needed");
    if (!h->h.valid()) return dropped("shmf_hll_export_redis");
    const std::string s = h->h.export_redis();
    *needed = s.size();
    if (buf == nullptr || cap < s.size())
      return fail(SHMF_EFULL, "shmf_hll_export_redis: the buffer holds " + std::to_string(cap) +
                                  " bytes, the Redis string needs " + std::to_string(s.size()) +
                                  ": call again with a buffer of *needed bytes");
    std::memcpy(buf, s.data(), s.size());
    return static_cast<int>(s.size());
  });
}

int shmf_hll_import_redis(shmf_hll* h, const void* bytes, size_t len) {
  return guard([&] {
    need(h, "shmf_hll_import_redis", "h");
    if (len) need(bytes, "shmf_hll_import_redis", "bytes");
    if (!h->h.valid()) return dropped("shmf_hll_import_redis");
    h->h.import_redis(sv(bytes, len));
    return 0;
  });
}

int shmf_hll_count_redis(const void* bytes, size_t len, uint64_t* out) {
  return guard([&] {
    if (len) need(bytes, "shmf_hll_count_redis", "bytes");
    need(out, "shmf_hll_count_redis", "out");
    *out = Hll::count_redis(sv(bytes, len));
    return 0;
  });
}

}  // extern "C"
