// lib/structures/uv/uv_kind.cpp: the UV family's row of the kinds table (structures/kind.h):
// its metrics (families and the shared numbers; no per-space series: a family holds
// thousands of spaces), its fuzz image and fuzz exercise, and the row naming its handle's
// open and drop, its checker (check_uv, uv.cpp) and its save/restore (uv_snapshot.cpp).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/uv.hpp"
#include "structures/kind.h"
#include "structures/uv/uv_impl.h"

namespace shmfilter::internal::uv {
namespace {

constexpr MetricFamily kFamilies[] = {
    {"shmfilter_uv_spaces", "gauge", "Spaces (plans) with a sketch in the current bucket."},
    {"shmfilter_uv_dense_spaces", "gauge", "Of them, spaces whose sketch is dense HLL registers."},
    {"shmfilter_uv_buckets", "gauge", "Buckets kept now."},
    {"shmfilter_uv_retired_bytes", "gauge", "Bytes of pages of replaced sketches not yet handed out again."},
    {"shmfilter_uv_promotions_total", "counter", "Sketches replaced by registers, merged or made dense."},
    {"shmfilter_uv_rotations_total", "counter", "Buckets started by the clock."},
    {"shmfilter_uv_refused_total", "counter", "Adds refused, by cause (spaces_full, no_space, stale)."},
};

CommonMetrics metrics(Segment& seg, const RegionInfo& r, const std::string& l, MetricsCollector& c) {
  UvFamily f = UvFamily::open(seg, r.name);
  UvStats st = f.stats();
  const UvBucketStats cur = !st.buckets.empty() && st.buckets.front().age == 0 ? st.buckets.front() : UvBucketStats{};
  uint64_t retired = 0;
  for (const UvBucketStats& b : st.buckets) retired += b.retired_bytes;
  CommonMetrics v{static_cast<double>(st.memory_bytes), static_cast<double>(st.max_spaces),
                  static_cast<double>(f.count_all(1)),
                  st.max_spaces ? static_cast<double>(cur.spaces) / st.max_spaces : 0, 0, st.spaces_full != 0};
  c.add("shmfilter_uv_spaces", l, static_cast<double>(cur.spaces));
  c.add("shmfilter_uv_dense_spaces", l, static_cast<double>(cur.dense_spaces));
  c.add("shmfilter_uv_buckets", l, static_cast<double>(st.buckets.size()));
  c.add("shmfilter_uv_retired_bytes", l, static_cast<double>(retired));
  c.add("shmfilter_uv_promotions_total", l, static_cast<double>(st.promotions));
  c.add("shmfilter_uv_rotations_total", l, static_cast<double>(st.rotations));
  const std::string sep = l.empty() ? "" : ",";
  c.add("shmfilter_uv_refused_total", l + sep + "cause=\"spaces_full\"", static_cast<double>(st.spaces_full));
  c.add("shmfilter_uv_refused_total", l + sep + "cause=\"no_space\"", static_cast<double>(st.no_space));
  c.add("shmfilter_uv_refused_total", l + sep + "cause=\"stale\"", static_cast<double>(st.stale));
  return v;
}

constexpr int64_t kDay0 = 1764547200;  // 2025-12-01 00:00 UTC: the image is the same every run

UvOptions small_options() {
  UvOptions o;
  o.retention = 3;
  o.max_spaces = 8;
  o.exact_max = 40;
  o.chunk_bytes = 64 << 10;
  return o;
}

void fuzz_image(Segment& seg, std::string_view prefix) {
  const std::string p(prefix);
  UvFamily::create(seg, p + "uv-empty", small_options());
  UvFamily f = UvFamily::create(seg, p + "uv", small_options());
  // Four days (a rotation frees the oldest); spaces small (exact), mid (promoted exact) and
  // big (dense); the last day past max_spaces (refused adds).
  for (int day = 0; day < 4; ++day) {
    f.set_now(kDay0 + day * 86400 + 3600);
    for (uint64_t i = 0; i < 120; ++i) (void)f.add(1, i + static_cast<uint64_t>(day) * 50);
    for (uint64_t i = 0; i < 25; ++i) (void)f.add(2, "d" + std::to_string(i));
    (void)f.add(3 + static_cast<uint64_t>(day), uint64_t{7});
    if (day == 3)
      for (uint64_t s = 10; s < 20; ++s) (void)f.add(s, uint64_t{1});
  }
}

void fuzz_exercise(Segment& seg, const RegionInfo& r) {
  UvFamily f = UvFamily::open(seg, r.name);
  f.set_now(kDay0 + 3 * 86400 + 7200);
  (void)f.stats();
  const uint32_t R = f.retention();
  (void)f.count(1, 1);
  (void)f.count(2, R);
  (void)f.count_hll(1, R);
  (void)f.count_all(R);
  (void)f.export_redis(1, 1);
  (void)f.spaces(R);
  (void)f.add(1, "fuzz");
  for (uint64_t i = 0; i < 60; ++i) (void)f.add(5, i);
  f.set_now(kDay0 + 4 * 86400 + 60);  // the next day: a rotation
  (void)f.add(1, uint64_t{3});
  (void)f.stats();
}

// Every field open/validate, check, drop and the data plane follow: the header's parameters,
// each day slot's tag and day offset, and in each day extent (bounds-checked first) its
// parameters, allocation state (lock word, bump, page lists, limbo epoch), chunk offsets, every
// space's sketch descriptor and, in the head page it names, its counts and first page reference.
void fuzz_fields(const Segment& seg, const RegionInfo& r, std::vector<FuzzField>& out) {
  using F = FuzzField;
  const uint64_t h = r.offset;
  fuzz_field(out, h + offsetof(UvHeader, retention), 4, F::kCount);
  fuzz_field(out, h + offsetof(UvHeader, max_spaces), 4, F::kCount);
  fuzz_field(out, h + offsetof(UvHeader, space_table), 4, F::kCount);
  fuzz_field(out, h + offsetof(UvHeader, exact_max), 4, F::kCount);
  fuzz_field(out, h + offsetof(UvHeader, bucket_seconds), 8, F::kCount);
  fuzz_field(out, h + offsetof(UvHeader, utc_offset), 8, F::kCount);
  fuzz_field(out, h + offsetof(UvHeader, chunk_bytes), 8, F::kSize);
  fuzz_field(out, h + offsetof(UvHeader, region_offset), 8, F::kOffset);
  fuzz_field(out, h + offsetof(UvHeader, region_bytes), 8, F::kSize);
  auto* hdr = reinterpret_cast<const UvHeader*>(seg.base() + h);
  const uint32_t slots = hdr->retention;
  if (slots > kMaxRetention) return;
  const uint64_t slots_at = h + sizeof(UvHeader);
  if (!fuzz_in_segment(seg, slots_at, uint64_t{slots} * sizeof(DaySlot))) return;
  for (uint32_t i = 0; i < slots; ++i) {
    const uint64_t s = slots_at + uint64_t{i} * sizeof(DaySlot);
    fuzz_field(out, s + offsetof(DaySlot, tag), 8, F::kTag);
    fuzz_field(out, s + offsetof(DaySlot, day), 8, F::kOffset);
    const uint64_t d = reinterpret_cast<const DaySlot*>(seg.base() + s)->day;
    if (d == 0 || !fuzz_in_segment(seg, d, sizeof(DayHeader))) continue;
    fuzz_field(out, d + offsetof(DayHeader, space_table), 4, F::kCount);
    fuzz_field(out, d + offsetof(DayHeader, bucket), 8, F::kCount);
    fuzz_field(out, d + offsetof(DayHeader, chunk_bytes), 8, F::kSize);
    fuzz_field(out, d + offsetof(DayHeader, extent_bytes), 8, F::kSize);
    fuzz_field(out, d + offsetof(DayHeader, bump), 8, F::kSize);
    fuzz_field(out, d + offsetof(DayHeader, chunk_count), 4, F::kCount);
    fuzz_field(out, d + offsetof(DayHeader, alloc_lock), 8, F::kTag);
    fuzz_field(out, d + offsetof(DayHeader, free_head), 4, F::kCount);
    for (uint32_t g = 0; g < kLimbo; ++g) {
      fuzz_field(out, d + offsetof(DayHeader, limbo_head) + 4 * g, 4, F::kCount);
      fuzz_field(out, d + offsetof(DayHeader, limbo_epoch) + 8 * g, 8, F::kCount);
    }
    auto* dh = reinterpret_cast<const DayHeader*>(seg.base() + d);
    const uint32_t chunks = dh->chunk_count.load(std::memory_order_relaxed);  // relaxed: a quiescent image
    if (chunks <= kMaxChunks && fuzz_in_segment(seg, d + day_chunks_offset(), uint64_t{chunks} * 8))
      for (uint32_t c = 0; c < chunks; ++c) fuzz_field(out, d + day_chunks_offset() + uint64_t{c} * 8, 8, F::kOffset);
    const uint32_t st = dh->space_table;
    if (st > 2 * kMaxSpaces || !fuzz_in_segment(seg, d + day_spaces_offset(), uint64_t{st} * sizeof(SpaceSlot))) continue;
    for (uint32_t j = 0; j < st; ++j) {
      const uint64_t sp = d + day_spaces_offset() + uint64_t{j} * sizeof(SpaceSlot);
      const uint64_t desc = reinterpret_cast<const SpaceSlot*>(seg.base() + sp)->desc.load(std::memory_order_relaxed);
      if (desc == 0) continue;
      fuzz_field(out, sp + offsetof(SpaceSlot, desc), 8, F::kDescriptor);
      // The head page it names (found as the data plane would, bounds-checked here): its page
      // count, entry count, code length and first data page.
      const uint64_t ppc = dh->chunk_bytes / kPage, pn = desc >> 2;
      if (ppc == 0 || pn / ppc >= chunks || chunks > kMaxChunks) continue;
      const uint64_t chunk = *reinterpret_cast<const uint64_t*>(seg.base() + d + day_chunks_offset() + pn / ppc * 8);
      const uint64_t hp = chunk + (pn % ppc) * kPage;
      if (chunk == 0 || !fuzz_in_segment(seg, hp, kPage)) continue;
      fuzz_field(out, hp + offsetof(PageHead, npages), 2, F::kCount);
      fuzz_field(out, hp + offsetof(PageHead, count), 4, F::kCount);
      fuzz_field(out, hp + offsetof(PageHead, code_bits), 4, F::kSize);
      fuzz_field(out, hp + sizeof(PageHead) + ((desc & kEncMask) == kEncSparse ? kSparseBuf * 4 : 0), 4, F::kCount);
    }
  }
}

}  // namespace

SHMF_KIND_ROW(Kind::kUv, "uv", "UV family", UvFamily, check_uv, save, restore, nullptr);

}  // namespace shmfilter::internal::uv
