// lib/structures/exact_set/exact_set_kind.cpp: the exact set's row of the kinds table (structures/kind.h):
// its metrics (families and the shared numbers), its fuzz image and fuzz exercise, and the
// row that names them with its handle's open and drop, its checker (check_exact_set, exact_set.cpp)
// and its save/restore (exact_set_snapshot.cpp).
#include <cstddef>
#include <vector>
#include <string>
#include <string_view>

#include "shmfilter/exact_set.hpp"
#include "structures/kind.h"
#include "structures/exact_set/exact_set_impl.h"

namespace shmfilter::internal::exact_set {
namespace {

constexpr std::span<const MetricFamily> kFamilies{};

CommonMetrics metrics(Segment& seg, const RegionInfo& r, const std::string&, MetricsCollector&) {
  ExactSetStats st = ExactSet::open(seg, r.name).stats();
  return {static_cast<double>(st.bytes), static_cast<double>(st.capacity), static_cast<double>(st.size), st.load, 0,
          st.size >= st.capacity};
}

void fuzz_image(Segment& seg, std::string_view prefix) {
  const std::string p(prefix);
  ExactSetOptions e;
  e.capacity = 64;
  ExactSet s = ExactSet::create(seg, p + "set", e);
  for (uint64_t k = 1; k <= 40; ++k) s.insert(k * 1000003u);
  for (uint64_t k = 1; k <= 8; ++k) s.erase(k * 1000003u);  // tombstones
  (void)s.insert(uint64_t{0});  // the special keys that live outside the slots
  (void)s.insert(~uint64_t{0});
  // At capacity: inserts answered kFull, then erases and re-inserts that reuse tombstones,
  // so the used count (keys + tombstones) sits at its limit.
  ExactSetOptions f;
  f.capacity = 16;
  ExactSet full = ExactSet::create(seg, p + "set-full", f);
  for (uint64_t k = 1; k <= 24; ++k) (void)full.insert(k * 7919u);
  for (uint64_t k = 1; k <= 6; ++k) full.erase(k * 7919u);
  for (uint64_t k = 100; k <= 130; ++k) (void)full.insert(k * 7919u);
}

void fuzz_exercise(Segment& seg, const RegionInfo& r) {
  ExactSet s = ExactSet::open(seg, r.name);
  (void)s.stats();
  (void)s.contains(uint64_t{2000006});
  (void)s.insert(uint64_t{424242});
  (void)s.erase(uint64_t{3000009});
  for (uint64_t k = 0; k < 32; ++k) (void)s.insert(k * 99991u + 1);
  (void)s.size();
}

void fuzz_fields(const Segment&, const RegionInfo& r, std::vector<FuzzField>& out) {
  using F = FuzzField;
  const uint64_t h = r.offset;
  fuzz_field(out, h + offsetof(ExactSetHeader, capacity), 8, F::kCount);
  fuzz_field(out, h + offsetof(ExactSetHeader, slots), 8, F::kCount);
  fuzz_field(out, h + offsetof(ExactSetHeader, stripes), 4, F::kCount);
  fuzz_field(out, h + offsetof(ExactSetHeader, used_limit), 8, F::kCount);
  fuzz_field(out, h + offsetof(ExactSetHeader, stripes_offset), 8, F::kOffset);
  fuzz_field(out, h + offsetof(ExactSetHeader, slots_offset), 8, F::kOffset);
  fuzz_field(out, h + offsetof(ExactSetHeader, live_hint), 8, F::kCount);
  fuzz_field(out, h + offsetof(ExactSetHeader, used_hint), 8, F::kCount);
  fuzz_field(out, h + offsetof(ExactSetHeader, special), 8, F::kDescriptor);
  fuzz_field(out, h + offsetof(ExactSetHeader, special) + 8, 8, F::kDescriptor);
}

}  // namespace

SHMF_KIND_ROW(Kind::kExactSet, "set", "exact set", ExactSet, check_exact_set, save, restore,
              nullptr);

}  // namespace shmfilter::internal::exact_set
