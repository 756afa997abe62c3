// lib/structures/roaring/roaring_kind.cpp: the Roaring set's row of the kinds table (structures/kind.h):
// its metrics (families and the shared numbers), its fuzz image and fuzz exercise, and the
// row that names them with its handle's open and drop, its checker (check_roaring, roaring.cpp)
// and its save/restore (roaring_snapshot.cpp).
#include <string>
#include <string_view>

#include "shmfilter/roaring_set.hpp"
#include "structures/kind.h"
#include "structures/roaring/roaring_impl.h"

namespace shmfilter::internal::roaring {
namespace {

constexpr MetricFamily kFamilies[] = {
    {"shmfilter_roaring_delta_fill", "gauge", "Claimed slots of the active delta table."},
    {"shmfilter_roaring_delta_capacity", "gauge", "Slots of the delta table."},
    {"shmfilter_roaring_compactions_total", "counter", "Snapshots built from the delta."},
    {"shmfilter_roaring_containers", "gauge", "Containers of the published snapshot, by container type."},
    {"shmfilter_roaring_pending_free_bytes", "gauge", "Retired snapshots waiting for their last reader."},
    {"shmfilter_roaring_readers", "gauge", "Live reader-table slots."},
};

CommonMetrics metrics(Segment& seg, const RegionInfo& r, const std::string& l, MetricsCollector& c) {
  RoaringStats st = RoaringSet::open(seg, r.name).stats();
  double fill = st.delta_capacity ? static_cast<double>(st.delta_fill) / static_cast<double>(st.delta_capacity) : 0;
  CommonMetrics v{static_cast<double>(st.total_bytes), 0, static_cast<double>(st.cardinality), fill, 0, false};
  c.add("shmfilter_roaring_delta_fill", l, static_cast<double>(st.delta_fill));
  c.add("shmfilter_roaring_delta_capacity", l, static_cast<double>(st.delta_capacity));
  c.add("shmfilter_roaring_compactions_total", l, static_cast<double>(st.compactions));
  c.add("shmfilter_roaring_containers", l + ",type=\"array\"", st.array_containers);
  c.add("shmfilter_roaring_containers", l + ",type=\"bitmap\"", st.bitmap_containers);
  c.add("shmfilter_roaring_containers", l + ",type=\"run\"", st.run_containers);
  c.add("shmfilter_roaring_pending_free_bytes", l, static_cast<double>(st.pending_free));
  c.add("shmfilter_roaring_readers", l, st.readers);
  return v;
}

void fuzz_image(Segment& seg, std::string_view prefix) {
  const std::string p(prefix);
  {  // compactions into several packs, a grown delta, a removal pending in the delta
    RoaringOptions r;
    r.delta_capacity = 128;
    r.reader_slots = 4;
    RoaringSet s = RoaringSet::create(seg, p + "roaring", r);
    for (uint32_t v = 0; v < 1100; ++v) s.add(v * 3);
    for (uint32_t v = 5000; v < 5010; ++v) s.add(v);
    s.remove(3);
  }
  {  // dense and run containers from a range, then a compaction that drops packs
    RoaringOptions r;
    r.delta_capacity = 64;
    r.reader_slots = 2;
    RoaringSet s = RoaringSet::create(seg, p + "roaring-dense", r);
    s.add_range(70000, 75000);
    for (uint32_t v = 0; v < 300; ++v) s.add(v * 2);
    s.compact();
    for (uint32_t v = 0; v < 100; ++v) s.remove(v * 2);
    s.compact();
  }
}

void fuzz_exercise(Segment& seg, const RegionInfo& r) {
  RoaringSet s = RoaringSet::open(seg, r.name);
  (void)s.stats();
  (void)s.contains(6);
  (void)s.cardinality();
  (void)s.add(77777);
  (void)s.remove(6);
  for (uint32_t v = 0; v < 40; ++v) (void)s.add(5000 + v);  // may compact
  (void)s.compact();
  (void)s.export_portable();
}

}  // namespace

SHMF_KIND_ROW(Kind::kRoaring, "roaring", "Roaring set", RoaringSet, check_roaring, save, restore,
              "its readers pin snapshots in the segment");

}  // namespace shmfilter::internal::roaring
