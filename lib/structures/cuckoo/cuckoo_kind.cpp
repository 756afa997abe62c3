// lib/structures/cuckoo/cuckoo_kind.cpp: the cuckoo filter's row of the kinds table (structures/kind.h):
// its metrics (families and the shared numbers), its fuzz image and fuzz exercise, and the
// row that names them with its handle's open and drop, its checker (check_cuckoo, cuckoo.cpp)
// and its save/restore (cuckoo_snapshot.cpp).
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>
#include <string_view>

#include "shmfilter/cuckoo.hpp"
#include "structures/kind.h"
#include "structures/cuckoo/cuckoo_impl.h"

namespace shmfilter::internal::cuckoo {
namespace {

constexpr MetricFamily kFamilies[] = {
    {"shmfilter_cuckoo_insert_failures_total", "counter", "Cuckoo inserts answered full (no path, no expansion left)."},
    {"shmfilter_cuckoo_inserts_total", "counter", "Cuckoo inserts stored."},
    {"shmfilter_cuckoo_erases_total", "counter", "Cuckoo erases that removed a copy."},
    {"shmfilter_cuckoo_moves_total", "counter", "Fingerprints moved along cuckoo paths."},
    {"shmfilter_cuckoo_repairs_total", "counter", "Writer locks of dead processes taken over."},
    {"shmfilter_cuckoo_subfilters", "gauge", "Cuckoo sub-filters (more than 1 only with expansion)."},
};

CommonMetrics metrics(Segment& seg, const RegionInfo& r, const std::string& l, MetricsCollector& c) {
  CuckooStats st = Cuckoo::open(seg, r.name).stats();
  // Over capacity: more items than sized for, or inserts already failing.
  bool over = st.size > st.capacity || (st.failures > 0 && st.subfilters >= 1 && st.expansion == 0);
  CommonMetrics v{static_cast<double>(st.bytes), static_cast<double>(st.capacity), static_cast<double>(st.size),
           st.load_factor, st.fp_rate_estimate, over};
  c.add("shmfilter_cuckoo_insert_failures_total", l, static_cast<double>(st.failures));
  c.add("shmfilter_cuckoo_inserts_total", l, static_cast<double>(st.inserts));
  c.add("shmfilter_cuckoo_erases_total", l, static_cast<double>(st.erases));
  c.add("shmfilter_cuckoo_moves_total", l, static_cast<double>(st.moves));
  c.add("shmfilter_cuckoo_repairs_total", l, static_cast<double>(st.repairs));
  c.add("shmfilter_cuckoo_subfilters", l, st.subfilters);
  return v;
}

void fuzz_image(Segment& seg, std::string_view prefix) {
  const std::string p(prefix);
  {  // packed 12-bit lanes, one expansion, an erase
    CuckooOptions c;
    c.capacity = 200;
    c.fingerprint_bits = 12;
    c.expansion = 2;
    c.max_subfilters = 3;
    c.seed = 13;
    Cuckoo f = Cuckoo::create(seg, p + "cuckoo", c);
    for (int i = 0; i < 260; ++i) f.add(static_cast<uint64_t>(i) * 31u);
    f.erase(uint64_t{31});
  }
  {  // 8-bit lanes, no expansion, filled until an insert fails
    CuckooOptions c;
    c.capacity = 64;
    c.fingerprint_bits = 8;
    c.seed = 14;
    Cuckoo f = Cuckoo::create(seg, p + "cuckoo-full", c);
    for (uint64_t i = 0; i < 200; ++i) (void)f.add(i * 131u + 7);
  }
}

void fuzz_exercise(Segment& seg, const RegionInfo& r) {
  Cuckoo c = Cuckoo::open(seg, r.name);
  (void)c.stats();
  (void)c.contains(uint64_t{62});
  (void)c.count(uint64_t{93});
  (void)c.add(uint64_t{123456789});
  (void)c.erase(uint64_t{62});
  for (uint64_t k = 0; k < 64; ++k) (void)c.add(k * 7777u + 3);  // may expand
  (void)c.size();
}

void fuzz_fields(const Segment& seg, const RegionInfo& r, std::vector<FuzzField>& out) {
  fuzz_header_fields(seg, r.offset, r.offset + r.size, out);
}

}  // namespace

void fuzz_header_fields(const Segment& seg, uint64_t h, uint64_t end, std::vector<FuzzField>& out) {
  using F = FuzzField;
  if (end < h + sizeof(Header) || !fuzz_in_segment(seg, h, sizeof(Header))) return;
  fuzz_field(out, h + offsetof(Header, fp_bits), 4, F::kShift);
  fuzz_field(out, h + offsetof(Header, lane_bits), 4, F::kShift);
  fuzz_field(out, h + offsetof(Header, max_path), 4, F::kCount);
  fuzz_field(out, h + offsetof(Header, expansion), 4, F::kCount);
  fuzz_field(out, h + offsetof(Header, max_subs), 4, F::kCount);
  fuzz_field(out, h + offsetof(Header, capacity), 8, F::kCount);
  fuzz_field(out, h + offsetof(Header, region_bytes), 8, F::kSize);
  fuzz_field(out, h + offsetof(Header, sub_count), 4, F::kCount);
  fuzz_field(out, h + offsetof(Header, pending_extent), 8, F::kOffset);
  fuzz_field(out, h + offsetof(Header, lock_owner), 8, F::kDescriptor);
  fuzz_field(out, h + offsetof(Header, intent) + offsetof(Intent, op), 4, F::kDescriptor);
  fuzz_field(out, h + offsetof(Header, intent) + offsetof(Intent, sub), 4, F::kCount);
  fuzz_field(out, h + offsetof(Header, intent) + offsetof(Intent, bucket), 8, F::kCount);
  fuzz_field(out, h + offsetof(Header, intent) + offsetof(Intent, lane), 4, F::kCount);
  fuzz_field(out, h + offsetof(Header, intent) + offsetof(Intent, dst_bucket), 8, F::kCount);
  fuzz_field(out, h + offsetof(Header, intent) + offsetof(Intent, stripe), 4, F::kCount);
  fuzz_field(out, h + offsetof(Header, size), 8, F::kCount);
  const auto* hdr = reinterpret_cast<const Header*>(seg.base() + h);
  // Every published descriptor and the next (unpublished) one: a corrupt count reaches it.
  const uint32_t n = std::min<uint32_t>(hdr->sub_count + 1, kMaxSubs);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t d = h + offsetof(Header, subs) + uint64_t{i} * sizeof(SubDesc);
    fuzz_field(out, d + offsetof(SubDesc, offset), 8, F::kOffset);
    fuzz_field(out, d + offsetof(SubDesc, log2_buckets), 4, F::kShift);
    fuzz_field(out, d + offsetof(SubDesc, log2_stripes), 2, F::kShift);
    fuzz_field(out, d + offsetof(SubDesc, chunks_minus_1), 2, F::kCount);
  }
}

SHMF_KIND_ROW(Kind::kCuckoo, "cuckoo", "cuckoo filter", Cuckoo, check_cuckoo, save, restore,
              nullptr);

}  // namespace shmfilter::internal::cuckoo
