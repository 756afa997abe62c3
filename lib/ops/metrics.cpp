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

#include <cmath>
#include <cstdio>
#include <exception>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "structures/kind.h"
#include "structures/metrics_collector.h"

namespace shmfilter {
namespace {

using internal::CommonMetrics;
using internal::escape_label;
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

std::string prometheus_text(Segment& seg) {
  MetricsCollector c;
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
    const KindRow* row = kind_row(r.kind);
    if (row == nullptr) {  // a kind this build does not know (a newer build wrote it)
      c.add("shmfilter_structure_bytes", l, static_cast<double>(r.size));
      c.add("shmfilter_structure_error", l, 1);
      continue;
    }
    try {
      MetricsCollector part;  // all of a structure's samples or none of them
      add_common(part, l, row->metrics(seg, r, l, part));
      c.merge(part);
      c.add("shmfilter_structure_error", l, 0);
    } catch (const std::exception&) {
      c.add("shmfilter_structure_error", l, 1);
    }
  }
  std::string out;
  c.print(all_families(), out);
  return out;
}

}  // namespace shmfilter
