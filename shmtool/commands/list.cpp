// shmtool/commands/list.cpp: `shmtool list NAME`: the structures in a segment.
#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/describe.h"
#include "cli/json.h"
#include "cli/report.h"
#include "cli/segment.h"
#include "shmfilter/metrics.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%%", 100 * v);
  return buf;
}

// The row's summary: the shared numbers (shmfilter::structure_metrics), as
// `stats` shows them; `dump` and `KIND info` have every field.
std::string summary(const shmfilter::StructureMetrics& m) {
  if (!m.error.empty()) return "error: " + shmfilter::escape_text(m.error);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", m.items);
  std::string s = std::string(m.region.kind == shmfilter::Kind::kBloom || m.region.kind == shmfilter::Kind::kHll
                                  ? "~" : "") + buf + " items";
  if (m.capacity) s += " of " + std::to_string(m.capacity);
  s += ", fill " + pct(m.fill_ratio);
  if (m.fp_rate_estimate > 0) s += ", fp now " + pct(m.fp_rate_estimate);
  if (m.over_capacity) s += ", OVER CAPACITY";
  return s;
}

int run_list(const Args& args) {
  const std::string& name = segment_name(args);
  shmfilter::Segment seg = open_segment(name, args);
  const auto st = seg.stats();
  const auto regions = seg.list();

  if (args.has("--json")) {
    std::vector<Json> items;
    for (const auto& r : regions) items.push_back(directory_entry(seg, r));
    Json out;
    out.add("segment", name).add("size", st.size).add("max_size", st.max_size).add("used_bytes", st.used_bytes)
        .add("free_bytes", st.free_bytes).add("structures", st.structures)
        .add("directory_capacity", st.directory_capacity).add_array("items", items);
    printf("%s\n", out.str().c_str());
    return 0;
  }

  printf("segment '%s': %u of %u structures, %s used of %s (may grow to %s)\n", shmfilter::escape_text(name).c_str(),
         st.structures, st.directory_capacity, shmfilter::format_size(st.used_bytes).c_str(),
         shmfilter::format_size(st.size).c_str(), shmfilter::format_size(st.max_size).c_str());
  if (regions.empty()) {
    printf("(no structures)\n");
    return 0;
  }
  size_t w = 4;
  for (const auto& r : regions) w = std::max(w, shmfilter::escape_text(r.name).size());
  printf("%-*s  %-8s  %12s  %s\n", static_cast<int>(w), "NAME", "KIND", "SIZE", "SUMMARY");
  for (const auto& m : shmfilter::structure_metrics(seg)) {
    const auto& r = m.region;
    std::string sum = describer_for(r.kind) ? summary(m) : "";
    printf("%-*s  %-8s  %12s  %s\n", static_cast<int>(w), shmfilter::escape_text(r.name).c_str(),
           std::string(shmfilter::kind_name(r.kind)).c_str(), shmfilter::format_size(m.bytes).c_str(), sum.c_str());
  }
  return 0;
}

SHMTOOL_COMMAND("list", run_list, R"(list the structures in a segment: name, kind, size, usage
Usage: shmtool list NAME [--json]

Lists every named structure in segment NAME, one per line: its name, kind
(bloom, cuckoo, roaring, hll, set, blob), the bytes it occupies (extents
included) and a summary: items (~ estimated), capacity, fill, the false-positive
rate from the fill now, and OVER CAPACITY when it is (all of it: 'dump', 'KIND info'). The first line says
how much of the segment is used. Lookups take no lock: safe while others work.

Options:
  --json           one JSON object: segment totals and an "items" array
Example:
  $ shmtool list freqcap
  segment 'freqcap': 2 of 4096 structures, 137.00 MiB used of 2.00 GiB (may grow to 64.00 GiB)
  NAME                KIND              SIZE  SUMMARY
  freq:17:2026-11-30  bloom       143.05 MiB  ~48211034 items of 120000000, fill 33.1%, fp now 0.0214%
  uv:17:2026-11-30    hll          12.93 KiB  ~48211 items, fill 94.8%
)");

}  // namespace
}  // namespace shmtool
