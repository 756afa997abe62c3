// lib/structures/bloom/bloom_kind.cpp: the bloom filter's row of the kinds table (structures/kind.h):
// its metrics (families and the shared numbers), its fuzz image and fuzz exercise, and the
// row that names them with its handle's open and drop, its checker (check_bloom, bloom.cpp)
// and its save/restore (bloom_snapshot.cpp).
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "shmfilter/bloom.hpp"
#include "structures/kind.h"
#include "structures/bloom/bloom_impl.h"

namespace shmfilter::internal::bloom {
namespace {

constexpr MetricFamily kFamilies[] = {
    {"shmfilter_bloom_layers", "gauge", "Layers of a Bloom filter (more than 1 only with scaling)."},
    {"shmfilter_bloom_fp_bound", "gauge", "The filter's false-positive bound at capacity (p, or p/(1-r) with scaling)."},
    {"shmfilter_bloom_racing_adds_total", "counter", "Adds that returned true after losing a race on one of their bits."},
};

CommonMetrics metrics(Segment& seg, const RegionInfo& r, const std::string& l, MetricsCollector& c) {
  BloomStats st = Bloom::open(seg, r.name).stats();
  CommonMetrics v{static_cast<double>(st.memory_bytes), static_cast<double>(st.total_capacity),
                    std::round(st.inserted_estimate), st.fill_ratio, st.fp_rate_now, st.over_capacity};
  c.add("shmfilter_bloom_layers", l, st.layers);
  c.add("shmfilter_bloom_fp_bound", l, st.fp_bound);
  c.add("shmfilter_bloom_racing_adds_total", l, static_cast<double>(st.racing_adds));
  return v;
}

void fuzz_image(Segment& seg, std::string_view prefix) {
  const std::string p(prefix);
  {  // blocked layout, one layer, a third full
    BloomOptions b;
    b.capacity = 300;
    b.error = 0.01;
    b.seed = 11;
    Bloom f = Bloom::create(seg, p + "bloom", b);
    for (int i = 0; i < 100; ++i) f.add("key" + std::to_string(i));
  }
  {  // classic layout, scaling: past its capacity, two or three layers
    BloomOptions b;
    b.capacity = 40;
    b.error = 0.05;
    b.layout = BloomLayout::kClassic;
    b.growth = 2;
    b.max_layers = 4;
    b.seed = 12;
    Bloom f = Bloom::create(seg, p + "bloom-classic", b);
    for (int i = 0; i < 120; ++i) f.add(static_cast<uint64_t>(i) * 7919u);
  }
}

void fuzz_exercise(Segment& seg, const RegionInfo& r) {
  Bloom b = Bloom::open(seg, r.name);
  (void)b.stats();
  (void)b.contains("key1");
  (void)b.contains(uint64_t{7919});
  (void)b.add("fuzz-new-key");
  for (uint64_t k = 0; k < 64; ++k) (void)b.add(k * 104729u + 5);  // may grow a layer
  (void)b.stats();
}

// The header's shape and the layer table (every slot, published or not).
void fuzz_fields(const Segment& seg, const RegionInfo& r, std::vector<FuzzField>& out) {
  using F = FuzzField;
  const uint64_t h = r.offset;
  fuzz_field(out, h + offsetof(BloomHeader, layout), 4, F::kDescriptor);
  fuzz_field(out, h + offsetof(BloomHeader, max_layers), 4, F::kCount);
  fuzz_field(out, h + offsetof(BloomHeader, capacity), 8, F::kCount);
  fuzz_field(out, h + offsetof(BloomHeader, region_offset), 8, F::kOffset);
  fuzz_field(out, h + offsetof(BloomHeader, layer_count), 8, F::kCount);
  fuzz_field(out, h + offsetof(BloomHeader, flags), 4, F::kDescriptor);
  if (!fuzz_in_segment(seg, h, sizeof(BloomHeader))) return;
  const auto* hdr = reinterpret_cast<const BloomHeader*>(seg.base() + h);
  const uint32_t n = std::min<uint32_t>(hdr->max_layers, 8);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t s = h + sizeof(BloomHeader) + uint64_t{i} * sizeof(BloomLayer);
    if (s + sizeof(BloomLayer) > r.offset + r.size) break;
    fuzz_field(out, s + offsetof(BloomLayer, offset), 8, F::kOffset);
    fuzz_field(out, s + offsetof(BloomLayer, bits), 8, F::kSize);
    fuzz_field(out, s + offsetof(BloomLayer, capacity), 8, F::kCount);
    fuzz_field(out, s + offsetof(BloomLayer, grow_at_bits), 8, F::kCount);
    fuzz_field(out, s + offsetof(BloomLayer, k), 4, F::kCount);
    fuzz_field(out, s + offsetof(BloomLayer, state), 4, F::kDescriptor);
    fuzz_field(out, s + offsetof(BloomLayer, check_shift), 4, F::kShift);
  }
}

}  // namespace

SHMF_KIND_ROW(Kind::kBloom, "bloom", "bloom filter", Bloom, check_bloom, save, restore,
              nullptr);

}  // namespace shmfilter::internal::bloom
