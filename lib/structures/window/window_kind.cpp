// lib/structures/window/window_kind.cpp: the window's row of the kinds table (structures/kind.h):
// its metrics (families and the shared numbers), its fuzz image and fuzz exercise, and the
// row that names them with its handle's open and drop, its checker (check_window, window.cpp)
// and its save/restore (window_snapshot.cpp).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shmfilter/window.hpp"
#include "structures/kind.h"
#include "structures/window/window_impl.h"

namespace shmfilter::internal::window {
namespace {

constexpr MetricFamily kFamilies[] = {
    {"shmfilter_window_fp_rate_window", "gauge", "False-positive rate of a query over the whole retention window, from the buckets now."},
    {"shmfilter_window_fp_bound_window", "gauge", "What the sizing guarantees for a query over the whole window."},
    {"shmfilter_window_spaces", "gauge", "Spaces (plans) with their own counter row."},
    {"shmfilter_window_rotations_total", "counter", "Bucket rotations by the clock."},
    {"shmfilter_window_racing_marks_total", "counter", "Bloom variant: new answers that lost a race on one of their bits."},
    {"shmfilter_window_rotation_races_total", "counter", "Cuckoo variant: new answers given twice across a rotation (0 since the day tables are sealed)."},
    {"shmfilter_window_inline_allocations_total", "counter", "Bucket tables the data plane allocated (maintain() was late)."},
    {"shmfilter_window_overflow_failures_total", "counter", "Overflow tables that could not be allocated."},
    {"shmfilter_window_overflow_layers", "gauge", "Overflow layers (sub-filters) the current bucket uses beyond its main table."},
    {"shmfilter_window_forget_ambiguous_total", "counter", "Cuckoo variant: copies forget removed that may belong to another pair (an upper bound); stamped: forgets that left the pair's lane beside a collider's."},
    {"shmfilter_window_stamped_lanes", "gauge", "Stamped variant: lanes of the shared table (one per pair, one per cap tally)."},
    {"shmfilter_window_stamped_shared_bytes", "gauge", "Stamped variant: bytes of the shared table, its overflow sub-filters included."},
    {"shmfilter_window_stamped_last_sweep", "gauge", "Stamped variant: the bucket the last complete sweep of dead lanes began at (0: none yet)."},
    {"shmfilter_window_space_new", "gauge", "Opt-in (max_spaces): new answers in the current bucket of the spaces with the most; space=\"other\" sums the rest."},
};

// Opt-in per-space series (MetricsCollector::max_spaces > 0): the current bucket's new
// answers of the max_spaces spaces with the most (ties: the smaller space), and one
// space="other" row with the rest (the spaces not shown and the window's own "other"
// row of spaces past max_spaces). Bounded: max_spaces + 1 samples per window.
void space_series(Segment& seg, const RegionInfo& r, const Window& w, const std::string& l, MetricsCollector& c) {
  auto* h = reinterpret_cast<WindowHeader*>(seg.base() + r.offset);
  const uint64_t keys_at = sizeof(WindowHeader) + slots_bytes(h->slots);
  const uint64_t table = h->space_table;
  if (keys_at > r.size || table > (r.size - keys_at) / 8) return;  // open() validated it; never read past the region
  const uint64_t* keys = space_keys(h);
  std::vector<std::pair<uint64_t, uint64_t>> rows;  // (count, space)
  for (uint64_t i = 0; i < table; ++i) {
    // relaxed: a key is claimed once and never changes; a racing claim is simply not seen yet
    const uint64_t key = std::atomic_ref<const uint64_t>(keys[i]).load(std::memory_order_relaxed);
    if (key != 0) rows.emplace_back(w.new_count(key - 1, 0), key - 1);
  }
  const size_t shown = std::min<size_t>(rows.size(), c.max_spaces);
  std::partial_sort(
      rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(shown), rows.end(),
      [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  double other = static_cast<double>(w.new_count(~uint64_t{0}, 0));  // the window's row for spaces past max_spaces
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i < shown)
      c.add("shmfilter_window_space_new", l + ",space=\"" + std::to_string(rows[i].second) + "\"",
            static_cast<double>(rows[i].first));
    else
      other += static_cast<double>(rows[i].first);
  }
  c.add("shmfilter_window_space_new", l + ",space=\"other\"", other);
}

CommonMetrics metrics(Segment& seg, const RegionInfo& r, const std::string& l, MetricsCollector& c) {
  const Window w = Window::open(seg, r.name);
  WindowStats st = w.stats();
  // The current bucket carries the shared numbers: what the next mark_if_unseen sees.
  const WindowBucketStats cur = st.buckets.empty() ? WindowBucketStats{} : st.buckets.front();
  bool over = false;
  for (const WindowBucketStats& b : st.buckets) over = over || b.over_capacity;
  double fill = cur.capacity ? static_cast<double>(cur.distinct) / static_cast<double>(cur.capacity) : 0;
  CommonMetrics v{static_cast<double>(st.memory_bytes), static_cast<double>(cur.capacity),
           static_cast<double>(cur.distinct), fill, cur.fp_rate_now, over};
  c.add("shmfilter_window_fp_rate_window", l, st.window_fp_now(st.retention));
  c.add("shmfilter_window_fp_bound_window", l, st.window_fp_bound(st.retention));
  c.add("shmfilter_window_spaces", l, st.spaces);
  c.add("shmfilter_window_rotations_total", l, static_cast<double>(st.rotations));
  c.add("shmfilter_window_racing_marks_total", l, static_cast<double>(st.racing_marks));
  c.add("shmfilter_window_rotation_races_total", l, static_cast<double>(st.rotation_races));
  c.add("shmfilter_window_inline_allocations_total", l, static_cast<double>(st.inline_allocations));
  c.add("shmfilter_window_overflow_failures_total", l, static_cast<double>(st.overflow_failures));
  c.add("shmfilter_window_overflow_layers", l, static_cast<double>(cur.layers));
  if (st.variant != WindowVariant::kBloom)
    c.add("shmfilter_window_forget_ambiguous_total", l, static_cast<double>(st.forget_ambiguous));
  if (st.variant == WindowVariant::kStamped) {
    c.add("shmfilter_window_stamped_lanes", l, static_cast<double>(st.lanes));
    c.add("shmfilter_window_stamped_shared_bytes", l, static_cast<double>(st.shared_bytes));
    c.add("shmfilter_window_stamped_last_sweep", l, static_cast<double>(st.swept_bucket));
  }
  if (c.max_spaces > 0) space_series(seg, r, w, l, c);
  return v;
}

// A fixed clock (2025-12-01 00:00 UTC and the days after) so the image is the same every run.
constexpr int64_t kDay0 = 1764547200;

void fuzz_image(Segment& seg, std::string_view prefix) {
  const std::string p(prefix);
  for (WindowVariant v : {WindowVariant::kBloom, WindowVariant::kCuckoo}) {
    WindowOptions o;
    o.variant = v;
    o.expected_per_bucket = 64;
    o.retention = 3;
    o.max_spaces = 4;
    o.seed = v == WindowVariant::kBloom ? 21 : 22;
    Window w = Window::create(seg, p + (v == WindowVariant::kBloom ? "window-bloom" : "window-cuckoo"), o);
    // Four days: rotations retire the oldest table; the last day goes past its expected
    // pairs into the overflow table; spaces past max_spaces land in the "other" row.
    for (int day = 0; day < 4; ++day) {
      w.set_now(kDay0 + day * 86400 + 3600);
      const uint64_t pairs = day == 3 ? 200 : 40;
      for (uint64_t i = 0; i < pairs; ++i) (void)w.mark_if_unseen(i % 6, i * 7 + static_cast<uint64_t>(day));
      (void)w.maintain();
    }
    if (v == WindowVariant::kCuckoo) (void)w.forget(1, uint64_t{7 * 1 + 3});
  }
  for (WindowVariant v : {WindowVariant::kBloom, WindowVariant::kCuckoo}) {
    // A window left idle: two days of marks (plain marks too, which leave a kCuckoo table
    // not all-checked), then the clock jumps past its retention and one maintain step with
    // no byte budget retires the expired buckets' slots and starts a spare it does not
    // finish: retired slots and a table in chunked preparation are in the image.
    WindowOptions o;
    o.variant = v;
    o.expected_per_bucket = 64;
    o.retention = 2;
    o.max_spaces = 2;
    o.seed = v == WindowVariant::kBloom ? 23 : 24;
    Window w = Window::create(seg, p + (v == WindowVariant::kBloom ? "window-bloom-idle" : "window-cuckoo-idle"), o);
    for (int day = 0; day < 2; ++day) {
      w.set_now(kDay0 + day * 86400 + 3600);
      for (uint64_t i = 0; i < 30; ++i) (void)w.mark_if_unseen(i % 3, i * 11 + static_cast<uint64_t>(day));
      for (uint64_t i = 0; i < 10; ++i) (void)w.mark(i % 3, i * 13 + 1);
      (void)w.maintain();
    }
    w.set_now(kDay0 + 7 * 86400 + 3600);
    (void)w.maintain_step(0);
  }
}

void fuzz_exercise(Segment& seg, const RegionInfo& r) {
  Window w = Window::open(seg, r.name);
  w.set_now(kDay0 + 3 * 86400 + 7200);
  (void)w.stats();
  (void)w.seen(1, uint64_t{1}, 1);
  (void)w.seen(1, uint64_t{1}, 3);
  (void)w.mark_if_unseen(1, uint64_t{2}, 0);
  (void)w.mark(2, "fuzz-item");
  (void)w.forget(1, uint64_t{2});
  (void)w.new_count(1, 0);
  w.set_now(kDay0 + 4 * 86400 + 60);  // the next day: a rotation
  (void)w.mark_if_unseen(1, uint64_t{3}, 0);
  (void)w.maintain();
  (void)w.stats();
}

// The header's parameters and epoch, every slot's tag and table offset, each table's head
// (geometry, overflow and pending overflow, preparation cursor) and, kCuckoo, its filter header.
void fuzz_fields(const Segment& seg, const RegionInfo& r, std::vector<FuzzField>& out) {
  using F = FuzzField;
  const uint64_t h = r.offset;
  if (!fuzz_in_segment(seg, h, sizeof(WindowHeader))) return;
  fuzz_field(out, h + offsetof(WindowHeader, variant), 4, F::kDescriptor);
  fuzz_field(out, h + offsetof(WindowHeader, retention), 4, F::kCount);
  fuzz_field(out, h + offsetof(WindowHeader, slots), 4, F::kCount);
  fuzz_field(out, h + offsetof(WindowHeader, max_spaces), 4, F::kCount);
  fuzz_field(out, h + offsetof(WindowHeader, space_table), 4, F::kCount);
  fuzz_field(out, h + offsetof(WindowHeader, error_window), 4, F::kCount);
  fuzz_field(out, h + offsetof(WindowHeader, bucket_seconds), 8, F::kCount);
  fuzz_field(out, h + offsetof(WindowHeader, utc_offset), 8, F::kCount);
  fuzz_field(out, h + offsetof(WindowHeader, expected), 8, F::kCount);
  fuzz_field(out, h + offsetof(WindowHeader, k_main), 4, F::kShift);
  fuzz_field(out, h + offsetof(WindowHeader, k_overflow), 4, F::kShift);
  fuzz_field(out, h + offsetof(WindowHeader, region_offset), 8, F::kOffset);
  fuzz_field(out, h + offsetof(WindowHeader, region_bytes), 8, F::kSize);
  fuzz_field(out, h + offsetof(WindowHeader, epoch), 8, F::kTag);
  fuzz_field(out, h + offsetof(WindowHeader, spaces_claimed), 4, F::kCount);
  const auto* hdr = reinterpret_cast<const WindowHeader*>(seg.base() + h);
  const uint32_t slots = std::min<uint32_t>(hdr->slots, kMaxRetention + 1);
  if (sizeof(WindowHeader) + slots_bytes(slots) > r.size) return;
  fuzz_field(out, h + sizeof(WindowHeader) + slots_bytes(slots), 8, F::kTag);  // the first space key
  const uint64_t main_at = main_offset_in_table(hdr->space_table);
  for (uint32_t i = 0; i < slots; ++i) {
    const uint64_t s = h + sizeof(WindowHeader) + uint64_t{i} * sizeof(BucketSlot);
    fuzz_field(out, s + offsetof(BucketSlot, tag), 8, F::kTag);
    fuzz_field(out, s + offsetof(BucketSlot, table), 8, F::kOffset);
    const uint64_t t = reinterpret_cast<const BucketSlot*>(seg.base() + s)->table;
    if (t == 0 || !fuzz_in_segment(seg, t, sizeof(TableHead))) continue;
    fuzz_field(out, t + offsetof(TableHead, capacity), 8, F::kCount);
    fuzz_field(out, t + offsetof(TableHead, geometry), 8, hdr->variant == kVariantCuckoo ? F::kShift : F::kCount);
    fuzz_field(out, t + offsetof(TableHead, check_shift), 4, F::kShift);
    fuzz_field(out, t + offsetof(TableHead, main_full), 4, F::kDescriptor);
    fuzz_field(out, t + offsetof(TableHead, flags), 4, F::kDescriptor);
    fuzz_field(out, t + offsetof(TableHead, overflow), 8, F::kOffset);
    fuzz_field(out, t + offsetof(TableHead, pending_overflow), 8, F::kOffset);
    fuzz_field(out, t + offsetof(TableHead, overflow_geometry), 8, F::kCount);
    fuzz_field(out, t + offsetof(TableHead, prep_cursor), 8, F::kSize);
    fuzz_field(out, t + offsetof(TableHead, stripes), 8, F::kCount);  // stripe 0's distinct count
    if (hdr->variant == kVariantCuckoo) cuckoo::fuzz_header_fields(seg, t + main_at, ~uint64_t{0}, out);
  }
}

}  // namespace

SHMF_KIND_ROW(Kind::kWindow, "window", "window", Window, check_window, snapshot::save_window, snapshot::restore_window,
              "its readers may rotate its buckets");

}  // namespace shmfilter::internal::window
