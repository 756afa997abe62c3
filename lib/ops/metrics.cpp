// lib/ops/metrics.cpp: prometheus_text(): the segment's and every structure's
// numbers in the Prometheus text format, one metric family at a time.
//
// Each kind's row in the kinds table (lib/structures/kind.h) says what it reports:
// its metrics hook fills its own families and returns the shared numbers. Every
// family is declared once (name, type, help): the segment's and the shared ones
// below, each kind's in its row, so the names stay stable and documented
// (docs/metrics.md). Samples are collected per family and printed grouped, as the
// format requires (structures/metrics_collector.h).
#include "shmfilter/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/text.h"
#include "structures/kind.h"
#include "structures/metrics_collector.h"

namespace shmfilter {
namespace {

using internal::CommonMetrics;
using internal::kind_row;
using internal::kind_rows;
using internal::KindRow;
using internal::MetricFamily;
using internal::MetricsCollector;

constexpr MetricFamily kSharedFamilies[] = {
    {"shmfilter_segment_size_bytes", "gauge", "Backing size of the segment now."},
    {"shmfilter_segment_max_size_bytes", "gauge", "Reserved address space: the most the segment may grow to."},
    {"shmfilter_segment_used_bytes", "gauge", "Bytes allocated to live structures."},
    {"shmfilter_segment_free_bytes", "gauge", "Free bytes inside the backing size (holes and tail)."},
    {"shmfilter_segment_quarantined_bytes", "gauge", "Freed bytes waiting for the calls in flight at the free to return."},
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
    {"shmfilter_kind_structures", "gauge", "Structures of the kind in the directory (all of them)."},
    {"shmfilter_kind_region_bytes", "gauge", "Directory region bytes of the kind's structures (extents not included)."},
    {"shmfilter_other_structures", "gauge", "Structures of the kind without their own series (past max_structures or the scrape's size bound)."},
    {"shmfilter_other_region_bytes", "gauge", "Directory region bytes of the structures counted in shmfilter_other_structures."},
};

void add_common(MetricsCollector& c, const std::string& l, const CommonMetrics& v) {
  c.add("shmfilter_structure_bytes", l, v.bytes);
  c.add("shmfilter_structure_capacity", l, v.capacity);
  c.add("shmfilter_structure_items", l, v.items);
  c.add("shmfilter_structure_fill_ratio", l, v.fill);
  c.add("shmfilter_structure_fp_rate_estimate", l, v.fp);
  c.add("shmfilter_structure_over_capacity", l, v.over ? 1 : 0);
}

// Every family this segment can print, in output order: the segment's and the shared
// structure families, then each kind's own, in kinds-table order. Built once: the table
// is constant, and a scrape should not rebuild it.
const std::vector<MetricFamily>& all_families() {
  static const std::vector<MetricFamily> all = [] {
    std::vector<MetricFamily> out(std::begin(kSharedFamilies), std::end(kSharedFamilies));
    for (const KindRow* row : kind_rows()) out.insert(out.end(), row->families.begin(), row->families.end());
    return out;
  }();
  return all;
}

}  // namespace

std::vector<StructureMetrics> structure_metrics(Segment& seg) {
  std::vector<StructureMetrics> out;
  for (const RegionInfo& r : seg.list()) {
    StructureMetrics m;
    m.region = r;
    m.bytes = r.size;
    if (const KindRow* row = kind_row(r.kind)) {
      try {
        MetricsCollector ignored;
        CommonMetrics v = row->metrics(seg, r, "", ignored);
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

std::string prometheus_text(Segment& seg) { return prometheus_text(seg, MetricsOptions{}); }

std::string prometheus_text(Segment& seg, const MetricsOptions& opts) {
  if (opts.max_bytes < kMetricsMinBytes)
    throw Error(ErrorCode::kInvalidArgument, "metrics options: max_bytes " + std::to_string(opts.max_bytes) +
                                                 " is below " + std::to_string(kMetricsMinBytes) +
                                                 ": the segment's and the per-kind families need room");
  MetricsCollector c;
  c.max_spaces = opts.max_spaces;
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

  // Per kind, from the directory alone (no structure is opened): every structure counted.
  struct KindTotals {
    double structures = 0, region_bytes = 0, shown = 0, shown_bytes = 0;
  };
  std::map<uint32_t, KindTotals> kinds;  // by on-disk kind value: a stable order
  std::vector<RegionInfo> regions = seg.list();
  for (const RegionInfo& r : regions) {
    KindTotals& k = kinds[static_cast<uint32_t>(r.kind)];
    k.structures += 1;
    k.region_bytes += static_cast<double>(r.size);
  }
  // Which structures get their own series: within each kind the largest first (region
  // bytes, ties: directory order), and the kinds take turns (kind order), so every kind
  // present shows its largest even beside 8,000 of another kind (a window's region is
  // small: its tables are extents). Indices are ranked, not the entries (no name is
  // copied), and only as far as a scrape can show; only these structures are opened.
  std::map<uint32_t, std::vector<uint32_t>> by_kind;
  for (uint32_t i = 0; i < regions.size(); ++i) by_kind[static_cast<uint32_t>(regions[i].kind)].push_back(i);
  const auto larger = [&](uint32_t a, uint32_t b) {
    return regions[a].size != regions[b].size ? regions[a].size > regions[b].size : a < b;
  };
  size_t deepest = 0;
  for (auto& [kind, idx] : by_kind) {
    const size_t ranked = std::min<size_t>(idx.size(), opts.max_structures);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(ranked), idx.end(), larger);
    deepest = std::max(deepest, ranked);
  }
  std::vector<uint32_t> order;  // the candidates, best first; every other structure is only counted
  for (size_t round = 0; round < deepest && order.size() < opts.max_structures; ++round)
    for (const auto& [kind, idx] : by_kind)
      if (round < idx.size() && order.size() < opts.max_structures) order.push_back(idx[round]);
  // Room kept for the HELP/TYPE lines and the per-kind rows printed after the structures.
  size_t reserve = 0;
  for (const MetricFamily& f : all_families())
    reserve += 16 + 2 * std::string_view(f.name).size() + std::string_view(f.help).size() +
               std::string_view(f.type).size();
  reserve += kinds.size() * 4 * (sl.size() + 96);
  const size_t budget = opts.max_bytes > reserve ? static_cast<size_t>(opts.max_bytes) - reserve : 0;

  for (const uint32_t index : order) {
    const RegionInfo& r = regions[index];
    if (c.bytes() >= budget) break;  // full: the rest are counted in the "other" rows
    const std::string l = sl + ",name=\"" + escape_label(r.name) + "\",kind=\"" + std::string(kind_name(r.kind)) + "\"";
    MetricsCollector part;  // all of a structure's samples or none of them
    part.max_spaces = opts.max_spaces;
    const KindRow* row = kind_row(r.kind);
    if (row == nullptr) {  // a kind this build does not know (a newer build wrote it)
      part.add("shmfilter_structure_bytes", l, static_cast<double>(r.size));
      part.add("shmfilter_structure_error", l, 1);
    } else {
      try {
        add_common(part, l, row->metrics(seg, r, l, part));
        part.add("shmfilter_structure_error", l, 0);
      } catch (const std::exception&) {
        part = MetricsCollector{};
        part.add("shmfilter_structure_error", l, 1);
      }
    }
    if (c.bytes() + part.bytes() > budget) continue;  // too long for what is left: counted in "other"
    c.merge(part);
    KindTotals& k = kinds[static_cast<uint32_t>(r.kind)];
    k.shown += 1;
    k.shown_bytes += static_cast<double>(r.size);
  }
  for (const auto& [kind, k] : kinds) {
    // A kind this build does not know keeps its number, so two of them stay two series.
    const std::string kn = kind_row(static_cast<Kind>(kind)) ? std::string(kind_name(static_cast<Kind>(kind)))
                                                             : "unknown-" + std::to_string(kind);
    const std::string kl = sl + ",kind=\"" + kn + "\"";
    c.add("shmfilter_kind_structures", kl, k.structures);
    c.add("shmfilter_kind_region_bytes", kl, k.region_bytes);
    // Not shown: past the candidates, or refused by the size bound.
    c.add("shmfilter_other_structures", kl, k.structures - k.shown);
    c.add("shmfilter_other_region_bytes", kl, k.region_bytes - k.shown_bytes);
  }
  std::string out;
  c.print(all_families(), out);
  return out;
}

}  // namespace shmfilter
