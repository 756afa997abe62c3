// lib/structures/roaring/roaring_kind.cpp: the Roaring set's row of the kinds table (structures/kind.h):
// its metrics (families and the shared numbers), its fuzz image and fuzz exercise, and the
// row that names them with its handle's open and drop, its checker (check_roaring, roaring.cpp)
// and its save/restore (roaring_snapshot.cpp).
#include <algorithm>
#include <future>
#include <thread>
#include <cstddef>
#include <vector>
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
    // Another thread reads (its cached view pins this version in the reader table) while
    // this one compacts twice more: the retired snapshots, with the packs their successors
    // dropped, stay pending for reclamation in the image.
    std::promise<void> pinned, done;
    std::thread reader([&] {
      RoaringSet r2 = RoaringSet::open(seg, p + "roaring-dense");
      (void)r2.contains(70001);
      pinned.set_value();
      done.get_future().wait();
    });
    pinned.get_future().wait();
    for (uint32_t v = 0; v < 50; ++v) s.remove(v * 2 + 1000);
    for (uint32_t v = 0; v < 50; ++v) s.remove(70000 + v * 7);
    s.compact();
    for (uint32_t v = 80000; v < 80100; ++v) s.add(v);
    s.compact();
    done.set_value();
    reader.join();
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

// Fields of the delta chain from OFF (each DeltaHeader: capacity, fill, next), at most 8 tables.
void fuzz_delta_fields(const Segment& seg, uint64_t off, std::vector<FuzzField>& out) {
  using F = FuzzField;
  for (int i = 0; i < 8 && off != 0 && fuzz_in_segment(seg, off, sizeof(DeltaHeader)); ++i) {
    fuzz_field(out, off + offsetof(DeltaHeader, capacity), 4, F::kCount);
    fuzz_field(out, off + offsetof(DeltaHeader, fill), 8, F::kCount);
    fuzz_field(out, off + offsetof(DeltaHeader, next), 8, F::kOffset);
    off = reinterpret_cast<const DeltaHeader*>(seg.base() + off)->next.load(std::memory_order_relaxed);
  }
}

// Fields of the snapshot at OFF: its header, its pack directory and dropped packs, its deltas.
void fuzz_snap_fields(const Segment& seg, uint64_t off, std::vector<FuzzField>& out) {
  using F = FuzzField;
  if (off == 0 || !fuzz_in_segment(seg, off, sizeof(SnapHeader))) return;
  fuzz_field(out, off + offsetof(SnapHeader, shape), 4, F::kDescriptor);
  fuzz_field(out, off + offsetof(SnapHeader, generation), 8, F::kCount);
  fuzz_field(out, off + offsetof(SnapHeader, table_bytes), 8, F::kSize);
  fuzz_field(out, off + offsetof(SnapHeader, cardinality), 8, F::kCount);
  fuzz_field(out, off + offsetof(SnapHeader, delta_off), 8, F::kOffset);
  fuzz_field(out, off + offsetof(SnapHeader, prev_delta_off), 8, F::kOffset);
  fuzz_field(out, off + offsetof(SnapHeader, containers), 4, F::kCount);
  fuzz_field(out, off + offsetof(SnapHeader, npacks), 4, F::kCount);
  fuzz_field(out, off + offsetof(SnapHeader, ndropped), 8, F::kCount);
  const auto* sh = reinterpret_cast<const SnapHeader*>(seg.base() + off);
  const uint64_t refs = uint64_t{std::min<uint32_t>(sh->npacks, 64)} + std::min<uint64_t>(sh->ndropped, 64);
  if (fuzz_in_segment(seg, off + sizeof(SnapHeader), refs * sizeof(c4::PackRef))) {
    for (uint64_t i = 0; i < refs; ++i) {  // the directory, then the dropped packs
      const uint64_t ref = off + sizeof(SnapHeader) + i * sizeof(c4::PackRef);
      fuzz_field(out, ref + offsetof(c4::PackRef, off), 8, F::kOffset);
      fuzz_field(out, ref + offsetof(c4::PackRef, bytes), 8, F::kSize);
      fuzz_field(out, ref + offsetof(c4::PackRef, live_bytes), 8, F::kSize);
      fuzz_field(out, ref + offsetof(c4::PackRef, birth), 8, F::kCount);
    }
  }
  fuzz_delta_fields(seg, sh->delta_off, out);
  fuzz_delta_fields(seg, sh->prev_delta_off, out);
}

// The header (shape, current version, compaction and link claims, retired versions awaiting
// reclamation), the first reader slot, and every snapshot reachable from them.
void fuzz_fields(const Segment& seg, const RegionInfo& r, std::vector<FuzzField>& out) {
  using F = FuzzField;
  const uint64_t h = r.offset;
  if (!fuzz_in_segment(seg, h, sizeof(RoaringHeader))) return;
  fuzz_field(out, h + offsetof(RoaringHeader, delta_capacity), 4, F::kCount);
  fuzz_field(out, h + offsetof(RoaringHeader, reader_slots), 4, F::kCount);
  fuzz_field(out, h + offsetof(RoaringHeader, compact_permille), 4, F::kCount);
  fuzz_field(out, h + offsetof(RoaringHeader, flags), 4, F::kDescriptor);
  fuzz_field(out, h + offsetof(RoaringHeader, current), 8, F::kOffset);
  fuzz_field(out, h + offsetof(RoaringHeader, gen_counter), 8, F::kCount);
  fuzz_field(out, h + offsetof(RoaringHeader, claim), 8, F::kDescriptor);
  fuzz_field(out, h + offsetof(RoaringHeader, staged_snap), 8, F::kOffset);
  fuzz_field(out, h + offsetof(RoaringHeader, staged_from), 8, F::kOffset);
  fuzz_field(out, h + offsetof(RoaringHeader, staged_link), 8, F::kOffset);
  fuzz_field(out, h + offsetof(RoaringHeader, staged_link_onto), 8, F::kOffset);
  fuzz_field(out, h + offsetof(RoaringHeader, link_claim), 8, F::kDescriptor);
  const auto* hdr = reinterpret_cast<const RoaringHeader*>(seg.base() + h);
  for (uint32_t i = 0; i < kPendingSlots; ++i) {
    const uint64_t e = h + offsetof(RoaringHeader, pending) + uint64_t{i} * sizeof(PendingFree);
    if (i > 1 && hdr->pending[i].snap_off == 0) continue;
    fuzz_field(out, e + offsetof(PendingFree, snap_off), 8, F::kOffset);
    fuzz_field(out, e + offsetof(PendingFree, delta_off), 8, F::kOffset);
    fuzz_field(out, e + offsetof(PendingFree, generation), 8, F::kCount);
    fuzz_snap_fields(seg, hdr->pending[i].snap_off, out);
  }
  if (hdr->reader_slots > 0 && sizeof(RoaringHeader) + sizeof(ReaderSlot) <= r.size) {
    const uint64_t rs = h + sizeof(RoaringHeader);
    fuzz_field(out, rs + offsetof(ReaderSlot, token), 8, F::kDescriptor);
    fuzz_field(out, rs + offsetof(ReaderSlot, lo), 8, F::kCount);
    fuzz_field(out, rs + offsetof(ReaderSlot, hi), 8, F::kCount);
  }
  fuzz_snap_fields(seg, hdr->current.load(std::memory_order_relaxed), out);
}

}  // namespace

SHMF_KIND_ROW(Kind::kRoaring, "roaring", "Roaring set", RoaringSet, check_roaring, save, restore,
              "its readers pin snapshots in the segment");

}  // namespace shmfilter::internal::roaring
