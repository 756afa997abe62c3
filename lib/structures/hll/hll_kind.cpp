// lib/structures/hll/hll_kind.cpp: the HyperLogLog's row of the kinds table (structures/kind.h):
// its metrics (families and the shared numbers), its fuzz image and fuzz exercise, and the
// row that names them with its handle's open and drop, its checker (check_hll, hll.cpp)
// and its save/restore (hll_snapshot.cpp).
#include <cstddef>
#include <vector>
#include <string>
#include <string_view>

#include "shmfilter/hll.hpp"
#include "structures/kind.h"
#include "structures/hll/hll_impl.h"

namespace shmfilter::internal::hll {
namespace {

constexpr MetricFamily kFamilies[] = {
    {"shmfilter_hll_nonzero_registers", "gauge", "HyperLogLog registers touched at least once (of 16384)."},
};

CommonMetrics metrics(Segment& seg, const RegionInfo& r, const std::string& l, MetricsCollector& c) {
  HllStats st = Hll::open(seg, r.name).stats();
  CommonMetrics v{static_cast<double>(st.bytes), 0, static_cast<double>(st.estimate),
           static_cast<double>(st.nonzero_registers) / st.registers, 0, false};
  c.add("shmfilter_hll_nonzero_registers", l, st.nonzero_registers);
  return v;
}

void fuzz_image(Segment& seg, std::string_view prefix) {
  const std::string p(prefix);
  Hll::create(seg, p + "hll-empty");
  Hll h = Hll::create(seg, p + "hll");
  for (int i = 0; i < 200; ++i) h.add("u" + std::to_string(i));
}

void fuzz_exercise(Segment& seg, const RegionInfo& r) {
  Hll h = Hll::open(seg, r.name);
  (void)h.stats();
  (void)h.count();
  (void)h.add("fuzz");
  (void)h.export_redis();
}

void fuzz_fields(const Segment&, const RegionInfo& r, std::vector<FuzzField>& out) {
  using F = FuzzField;
  const uint64_t h = r.offset;
  fuzz_field(out, h + offsetof(HllHeader, precision), 4, F::kShift);
  fuzz_field(out, h + offsetof(HllHeader, register_bits), 4, F::kShift);
  fuzz_field(out, h + offsetof(HllHeader, registers_per_word), 4, F::kCount);
  fuzz_field(out, h + offsetof(HllHeader, words), 4, F::kCount);
  fuzz_field(out, h + offsetof(HllHeader, registers_offset), 8, F::kOffset);
  fuzz_field(out, h + offsetof(HllHeader, clear_token), 8, F::kDescriptor);
  fuzz_field(out, h + offsetof(HllHeader, sync), 8, F::kDescriptor);
  fuzz_field(out, h + offsetof(HllHeader, sync) + 8, 8, F::kCount);
}

}  // namespace

SHMF_KIND_ROW(Kind::kHll, "hll", "HyperLogLog", Hll, check_hll, save, restore,
              nullptr);

}  // namespace shmfilter::internal::hll
