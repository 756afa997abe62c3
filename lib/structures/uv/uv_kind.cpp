// lib/structures/uv/uv_kind.cpp: the UV family's row of the kinds table (structures/kind.h):
// its metrics (families and the shared numbers; no per-space series: a family holds
// thousands of spaces), its fuzz image and fuzz exercise, and the row naming its handle's
// open and drop, its checker (check_uv, uv.cpp) and its save/restore (uv_snapshot.cpp).
#include <string>
#include <string_view>

#include "shmfilter/uv.hpp"
#include "structures/kind.h"
#include "structures/uv/uv_impl.h"

namespace shmfilter::internal::uv {
namespace {

constexpr MetricFamily kFamilies[] = {
    {"shmfilter_uv_spaces", "gauge", "Spaces (plans) with a sketch in the current bucket."},
    {"shmfilter_uv_dense_spaces", "gauge", "Of them, spaces whose sketch is dense HLL registers (the rest are exact)."},
    {"shmfilter_uv_buckets", "gauge", "Buckets kept now."},
    {"shmfilter_uv_retired_bytes", "gauge", "Bytes of blocks replaced by promotions, freed with their bucket."},
    {"shmfilter_uv_promotions_total", "counter", "Sketches replaced by a bigger exact or a dense one."},
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

}  // namespace

SHMF_KIND_ROW(Kind::kUv, "uv", "UV family", UvFamily, check_uv, save, restore, nullptr);

}  // namespace shmfilter::internal::uv
