// lib/ops/metrics.cpp: prometheus_text(): the segment's and every structure's
// numbers in the Prometheus text format, one metric family at a time.
//
// A per-kind table (kKindMetrics below) says what each kind reports; a new
// kind adds one function and one line there. Every family is declared once
// (name, type, help) in kFamilies so the names stay stable and documented
// (docs/metrics.md); samples are collected per family and printed grouped,
// as the format requires (all samples of a family together, after its HELP
// and TYPE lines).
#include "shmfilter/metrics.hpp"

#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/window.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/roaring_set.hpp"

namespace shmfilter {
namespace {

struct Family {
  const char* name;
  const char* type;  // "gauge" or "counter"
  const char* help;
};

// Every family this file can print, in output order. Names are part of the
// interface (dashboards and alerts use them): add, never rename.
constexpr Family kFamilies[] = {
    {"shmfilter_segment_size_bytes", "gauge", "Backing size of the segment now."},
    {"shmfilter_segment_max_size_bytes", "gauge", "Reserved address space: the most the segment may grow to."},
    {"shmfilter_segment_used_bytes", "gauge", "Bytes allocated to live structures."},
    {"shmfilter_segment_free_bytes", "gauge", "Free bytes inside the backing size (holes and tail)."},
    {"shmfilter_segment_quarantined_bytes", "gauge", "Freed bytes waiting for every process to pass a quiescent point."},
    {"shmfilter_segment_largest_free_bytes", "gauge", "Largest extent allocatable without growing the segment."},
    {"shmfilter_segment_free_extents", "gauge", "Free holes (a fragmentation indicator)."},
    {"shmfilter_segment_structures", "gauge", "Named structures in the directory."},
    {"shmfilter_segment_directory_capacity", "gauge", "Directory slots (most structures the segment can name)."},
    {"shmfilter_segment_processes_alive", "gauge", "Attached processes the kernel reports alive."},
    {"shmfilter_segment_dead_attachments", "gauge", "Registry slots of processes that died attached (not yet reclaimed)."},
    {"shmfilter_segment_format_version", "gauge", "On-segment format version."},
    {"shmfilter_structure_bytes", "gauge", "Bytes a structure occupies in the segment, extents included."},
    {"shmfilter_structure_capacity", "gauge", "Items the structure was sized for (0: unbounded, e.g. roaring, hll)."},
    {"shmfilter_structure_items", "gauge", "Items in the structure (estimated for bloom and hll)."},
    {"shmfilter_structure_fill_ratio", "gauge", "Fill: bloom set bits/bits, cuckoo and set load, roaring delta fill."},
    {"shmfilter_structure_fp_rate_estimate", "gauge", "False-positive rate estimated from the fill right now (0: exact)."},
    {"shmfilter_structure_over_capacity", "gauge", "1 when the structure is beyond what it was sized for."},
    {"shmfilter_structure_error", "gauge", "1 when the structure could not be read (dropped meanwhile or corrupt)."},
    {"shmfilter_bloom_layers", "gauge", "Layers of a Bloom filter (more than 1 only with scaling)."},
    {"shmfilter_bloom_fp_bound", "gauge", "The filter's false-positive bound at capacity (p, or p/(1-r) with scaling)."},
    {"shmfilter_bloom_racing_adds_total", "counter", "Adds that returned true after losing a race on one of their bits."},
    {"shmfilter_cuckoo_insert_failures_total", "counter", "Cuckoo inserts answered full (no path, no expansion left)."},
    {"shmfilter_cuckoo_inserts_total", "counter", "Cuckoo inserts stored."},
    {"shmfilter_cuckoo_erases_total", "counter", "Cuckoo erases that removed a copy."},
    {"shmfilter_cuckoo_moves_total", "counter", "Fingerprints moved along cuckoo paths."},
    {"shmfilter_cuckoo_repairs_total", "counter", "Writer locks of dead processes taken over."},
    {"shmfilter_cuckoo_subfilters", "gauge", "Cuckoo sub-filters (more than 1 only with expansion)."},
    {"shmfilter_roaring_delta_fill", "gauge", "Claimed slots of the active delta table."},
    {"shmfilter_roaring_delta_capacity", "gauge", "Slots of the delta table."},
    {"shmfilter_roaring_compactions_total", "counter", "Snapshots built from the delta."},
    {"shmfilter_roaring_containers", "gauge", "Containers of the published snapshot, by container type."},
    {"shmfilter_roaring_pending_free_bytes", "gauge", "Retired snapshots waiting for their last reader."},
    {"shmfilter_roaring_readers", "gauge", "Live reader-table slots."},
    {"shmfilter_hll_nonzero_registers", "gauge", "HyperLogLog registers touched at least once (of 16384)."},
    {"shmfilter_window_fp_rate_window", "gauge", "False-positive rate of a query over the whole retention window, from the buckets now."},
    {"shmfilter_window_fp_bound_window", "gauge", "What the sizing guarantees for a query over the whole window."},
    {"shmfilter_window_spaces", "gauge", "Spaces (plans) with their own counter row."},
    {"shmfilter_window_rotations_total", "counter", "Bucket rotations by the clock."},
    {"shmfilter_window_racing_marks_total", "counter", "Bloom variant: new answers that lost a race on one of their bits."},
    {"shmfilter_window_rotation_races_total", "counter", "Cuckoo variant: new answers given twice across a rotation (0 since the day tables are sealed)."},
    {"shmfilter_window_inline_allocations_total", "counter", "Bucket tables the data plane allocated (maintain() was late)."},
    {"shmfilter_window_overflow_failures_total", "counter", "Overflow tables that could not be allocated."},
    {"shmfilter_window_forget_ambiguous_total", "counter", "Cuckoo variant: copies forget removed that may belong to another pair (an upper bound)."},
};

// Prometheus label values are UTF-8 with \\, \" and \n escaped. Structure
// names may hold any byte but NUL: invalid UTF-8 becomes U+FFFD.
std::string escape_label(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\') { out += "\\\\"; ++i; continue; }
    if (c == '"') { out += "\\\""; ++i; continue; }
    if (c == '\n') { out += "\\n"; ++i; continue; }
    if (c < 0x80) { out += static_cast<char>(c); ++i; continue; }
    size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    bool ok = len != 0 && i + len <= s.size();
    for (size_t j = 1; ok && j < len; ++j) ok = (static_cast<unsigned char>(s[i + j]) & 0xc0) == 0x80;
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Samples collected per family name, printed in kFamilies order.
class Collector {
 public:
  // labels: already formatted, e.g. segment="s",name="n",kind="bloom"
  void add(const char* family, const std::string& labels, double value) {
    samples_[family].push_back(std::string(family) + "{" + labels + "} " + format_value(value) + "\n");
  }
  void merge(const Collector& other) {
    for (const auto& [family, lines] : other.samples_)
      samples_[family].insert(samples_[family].end(), lines.begin(), lines.end());
  }
  std::string text() const {
    std::string out;
    for (const Family& f : kFamilies) {
      auto it = samples_.find(f.name);
      if (it == samples_.end()) continue;
      out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n");
      out.append("# TYPE ").append(f.name).append(" ").append(f.type).append("\n");
      for (const auto& line : it->second) out += line;
    }
    return out;
  }

 private:
  std::map<std::string, std::vector<std::string>> samples_;
};

// What every kind reports through the shared families.
struct Common {
  double bytes = 0, capacity = 0, items = 0, fill = 0, fp = 0;
  bool over = false;
};

void add_common(Collector& c, const std::string& l, const Common& v) {
  c.add("shmfilter_structure_bytes", l, v.bytes);
  c.add("shmfilter_structure_capacity", l, v.capacity);
  c.add("shmfilter_structure_items", l, v.items);
  c.add("shmfilter_structure_fill_ratio", l, v.fill);
  c.add("shmfilter_structure_fp_rate_estimate", l, v.fp);
  c.add("shmfilter_structure_over_capacity", l, v.over ? 1 : 0);
}

Common bloom_metrics(Segment& seg, const RegionInfo& r, const std::string& l, Collector& c) {
  BloomStats st = Bloom::open(seg, r.name).stats();
  Common v{static_cast<double>(st.memory_bytes), static_cast<double>(st.total_capacity),
                    std::round(st.inserted_estimate), st.fill_ratio, st.fp_rate_now, st.over_capacity};
  c.add("shmfilter_bloom_layers", l, st.layers);
  c.add("shmfilter_bloom_fp_bound", l, st.fp_bound);
  c.add("shmfilter_bloom_racing_adds_total", l, static_cast<double>(st.racing_adds));
  return v;
}

Common cuckoo_metrics(Segment& seg, const RegionInfo& r, const std::string& l, Collector& c) {
  CuckooStats st = Cuckoo::open(seg, r.name).stats();
  // Over capacity: more items than sized for, or inserts already failing.
  bool over = st.size > st.capacity || (st.failures > 0 && st.subfilters >= 1 && st.expansion == 0);
  Common v{static_cast<double>(st.bytes), static_cast<double>(st.capacity), static_cast<double>(st.size),
           st.load_factor, st.fp_rate_estimate, over};
  c.add("shmfilter_cuckoo_insert_failures_total", l, static_cast<double>(st.failures));
  c.add("shmfilter_cuckoo_inserts_total", l, static_cast<double>(st.inserts));
  c.add("shmfilter_cuckoo_erases_total", l, static_cast<double>(st.erases));
  c.add("shmfilter_cuckoo_moves_total", l, static_cast<double>(st.moves));
  c.add("shmfilter_cuckoo_repairs_total", l, static_cast<double>(st.repairs));
  c.add("shmfilter_cuckoo_subfilters", l, st.subfilters);
  return v;
}

Common roaring_metrics(Segment& seg, const RegionInfo& r, const std::string& l, Collector& c) {
  RoaringStats st = RoaringSet::open(seg, r.name).stats();
  double fill = st.delta_capacity ? static_cast<double>(st.delta_fill) / static_cast<double>(st.delta_capacity) : 0;
  Common v{static_cast<double>(st.total_bytes), 0, static_cast<double>(st.cardinality), fill, 0, false};
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

Common hll_metrics(Segment& seg, const RegionInfo& r, const std::string& l, Collector& c) {
  HllStats st = Hll::open(seg, r.name).stats();
  Common v{static_cast<double>(st.bytes), 0, static_cast<double>(st.estimate),
           static_cast<double>(st.nonzero_registers) / st.registers, 0, false};
  c.add("shmfilter_hll_nonzero_registers", l, st.nonzero_registers);
  return v;
}

Common exact_set_metrics(Segment& seg, const RegionInfo& r, const std::string&, Collector&) {
  ExactSetStats st = ExactSet::open(seg, r.name).stats();
  return {static_cast<double>(st.bytes), static_cast<double>(st.capacity), static_cast<double>(st.size), st.load, 0,
          st.size >= st.capacity};
}

Common window_metrics(Segment& seg, const RegionInfo& r, const std::string& l, Collector& c) {
  WindowStats st = Window::open(seg, r.name).stats();
  // The current bucket carries the shared numbers: what the next mark_if_unseen sees.
  const WindowBucketStats cur = st.buckets.empty() ? WindowBucketStats{} : st.buckets.front();
  bool over = false;
  for (const WindowBucketStats& b : st.buckets) over = over || b.over_capacity;
  double fill = cur.capacity ? static_cast<double>(cur.distinct) / static_cast<double>(cur.capacity) : 0;
  Common v{static_cast<double>(st.memory_bytes), static_cast<double>(cur.capacity),
           static_cast<double>(cur.distinct), fill, cur.fp_rate_now, over};
  c.add("shmfilter_window_fp_rate_window", l, st.window_fp_now(st.retention));
  c.add("shmfilter_window_fp_bound_window", l, st.window_fp_bound(st.retention));
  c.add("shmfilter_window_spaces", l, st.spaces);
  c.add("shmfilter_window_rotations_total", l, static_cast<double>(st.rotations));
  c.add("shmfilter_window_racing_marks_total", l, static_cast<double>(st.racing_marks));
  c.add("shmfilter_window_rotation_races_total", l, static_cast<double>(st.rotation_races));
  c.add("shmfilter_window_inline_allocations_total", l, static_cast<double>(st.inline_allocations));
  c.add("shmfilter_window_overflow_failures_total", l, static_cast<double>(st.overflow_failures));
  if (st.variant == WindowVariant::kCuckoo)
    c.add("shmfilter_window_forget_ambiguous_total", l, static_cast<double>(st.forget_ambiguous));
  return v;
}

// Adds the kind's own families to the collector and returns the shared numbers.
using KindMetricsFn = Common (*)(Segment&, const RegionInfo&, const std::string& labels, Collector&);

// The per-kind table: one line per structure kind. Kinds not listed (blobs)
// report only shmfilter_structure_bytes.
constexpr struct {
  Kind kind;
  KindMetricsFn fn;
} kKindMetrics[] = {
    {Kind::kBloom, &bloom_metrics},
    {Kind::kCuckoo, &cuckoo_metrics},
    {Kind::kRoaring, &roaring_metrics},
    {Kind::kHll, &hll_metrics},
    {Kind::kExactSet, &exact_set_metrics},
    {Kind::kWindow, &window_metrics},
};

KindMetricsFn metrics_fn(Kind kind) {
  for (const auto& e : kKindMetrics)
    if (e.kind == kind) return e.fn;
  return nullptr;
}

}  // namespace

std::vector<StructureMetrics> structure_metrics(Segment& seg) {
  std::vector<StructureMetrics> out;
  for (const RegionInfo& r : seg.list()) {
    StructureMetrics m;
    m.region = r;
    m.bytes = r.size;
    if (KindMetricsFn fn = metrics_fn(r.kind)) {
      try {
        Collector ignored;
        Common v = fn(seg, r, "", ignored);
        m.bytes = static_cast<uint64_t>(v.bytes);
        m.capacity = static_cast<uint64_t>(v.capacity);
        m.items = v.items;
        m.fill_ratio = v.fill;
        m.fp_rate_estimate = v.fp;
        m.over_capacity = v.over;
      } catch (const std::exception& e) {
        m.error = e.what();
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::string prometheus_text(Segment& seg) {
  Collector c;
  const std::string sl = "segment=\"" + escape_label(seg.name()) + "\"";
  SegmentStats st = seg.stats();
  c.add("shmfilter_segment_size_bytes", sl, static_cast<double>(st.size));
  c.add("shmfilter_segment_max_size_bytes", sl, static_cast<double>(st.max_size));
  c.add("shmfilter_segment_used_bytes", sl, static_cast<double>(st.used_bytes));
  c.add("shmfilter_segment_free_bytes", sl, static_cast<double>(st.free_bytes));
  c.add("shmfilter_segment_quarantined_bytes", sl, static_cast<double>(st.quarantined_bytes));
  c.add("shmfilter_segment_largest_free_bytes", sl, static_cast<double>(st.largest_free));
  c.add("shmfilter_segment_free_extents", sl, st.free_extents);
  c.add("shmfilter_segment_structures", sl, st.structures);
  c.add("shmfilter_segment_directory_capacity", sl, st.directory_capacity);
  c.add("shmfilter_segment_processes_alive", sl, st.processes_alive);
  uint32_t dead = 0;
  for (const ProcessInfo& p : seg.processes())
    if (!p.alive) ++dead;
  c.add("shmfilter_segment_dead_attachments", sl, dead);
  c.add("shmfilter_segment_format_version", sl, st.format_version);

  for (const RegionInfo& r : seg.list()) {
    const std::string l = sl + ",name=\"" + escape_label(r.name) + "\",kind=\"" + std::string(kind_name(r.kind)) + "\"";
    KindMetricsFn fn = metrics_fn(r.kind);
    if (fn == nullptr) {
      c.add("shmfilter_structure_bytes", l, static_cast<double>(r.size));
      continue;
    }
    try {
      Collector part;  // all of a structure's samples or none of them
      add_common(part, l, fn(seg, r, l, part));
      c.merge(part);
      c.add("shmfilter_structure_error", l, 0);
    } catch (const std::exception&) {
      c.add("shmfilter_structure_error", l, 1);
    }
  }
  return c.text();
}

}  // namespace shmfilter
