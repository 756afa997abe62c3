// shmtool/commands/stats.cpp: `shmtool stats NAME [--prometheus|--json]`: the
// segment's and every structure's numbers (the library's shmfilter::prometheus_text
// and structure_metrics, so the CLI and any /metrics endpoint agree).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/json.h"
#include "cli/report.h"
#include "cli/numbers.h"
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

std::string count(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

int run_stats(const Args& args) {
  const std::string& name = segment_name(args);
  shmfilter::Segment seg = open_segment(name, args);
  if (args.has("--prometheus") && args.has("--json")) throw UsageError("--prometheus and --json exclude each other");
  const bool bounds = args.has("--max-structures") || args.has("--max-spaces") || args.has("--max-bytes");
  if (bounds && !args.has("--prometheus"))
    throw UsageError("--max-structures, --max-spaces and --max-bytes go with --prometheus");
  if (args.has("--prometheus")) {
    shmfilter::MetricsOptions o;
    o.max_structures = static_cast<uint32_t>(uint_option(args, "--max-structures", o.max_structures, 0, UINT32_MAX));
    o.max_spaces = static_cast<uint32_t>(uint_option(args, "--max-spaces", o.max_spaces, 0, UINT32_MAX));
    o.max_bytes = size_option(args, "--max-bytes", o.max_bytes);
    std::fputs(shmfilter::prometheus_text(seg, o).c_str(), stdout);
    return 0;
  }
  const auto st = seg.stats();
  uint32_t dead = 0;
  for (const auto& p : seg.processes()) dead += p.alive ? 0 : 1;
  const auto items = shmfilter::structure_metrics(seg);

  Json j;
  j.add("segment", name).add_size("size_bytes", st.size).add_size("max_size_bytes", st.max_size);
  j.add_size("used_bytes", st.used_bytes).add_size("free_bytes", st.free_bytes);
  j.add_size("quarantined_bytes", st.quarantined_bytes).add_size("largest_free_bytes", st.largest_free);
  j.add("free_extents", st.free_extents).add("structures", st.structures);
  j.add("directory_capacity", st.directory_capacity).add("processes_alive", st.processes_alive);
  j.add("dead_attachments", dead);
  if (args.has("--json")) {
    std::vector<Json> rows;
    for (const auto& m : items) {
      Json r;
      r.add("name", m.region.name).add("kind", std::string(shmfilter::kind_name(m.region.kind)));
      r.add("bytes", m.bytes).add("capacity", m.capacity).add("items", m.items).add("fill_ratio", m.fill_ratio);
      r.add("fp_rate_estimate", m.fp_rate_estimate).add("over_capacity", m.over_capacity);
      if (!m.error.empty()) r.add("error", m.error);
      rows.push_back(r);
    }
    j.add_array("items", rows);
    print_report(j, true);
    return 0;
  }
  print_report(j, false);
  if (items.empty()) return 0;
  // One row per structure; columns sized to their widest cell.
  std::vector<std::vector<std::string>> table = {{"NAME", "KIND", "ITEMS", "CAPACITY", "FILL", "FP-NOW", "OVER", "BYTES"}};
  for (const auto& m : items) {
    if (!m.error.empty()) {
      table.push_back({shmfilter::escape_text(m.region.name), std::string(shmfilter::kind_name(m.region.kind)), "-",
                       "-", "-", "-", "-", "error: " + shmfilter::escape_text(m.error)});
      continue;
    }
    table.push_back({shmfilter::escape_text(m.region.name), std::string(shmfilter::kind_name(m.region.kind)),
                     count(m.items), m.capacity ? count(static_cast<double>(m.capacity)) : "-", pct(m.fill_ratio),
                     m.fp_rate_estimate > 0 ? pct(m.fp_rate_estimate) : "exact", m.over_capacity ? "OVER" : "no",
                     shmfilter::format_size(m.bytes)});
  }
  std::vector<size_t> w(table[0].size(), 0);
  for (const auto& row : table)
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  std::printf("\n");
  for (const auto& row : table) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      bool right = i >= 2 && i != 6 && row[i].rfind("error", 0) != 0;  // numbers right-aligned
      std::string cell = row[i];
      std::string pad(w[i] - std::min(w[i], cell.size()), ' ');
      if (i) line += "  ";
      line += right ? pad + cell : (i + 1 == row.size() ? cell : cell + pad);
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

SHMTOOL_COMMAND("stats", run_stats, R"(the segment's and every structure's numbers; Prometheus text with --prometheus
Usage: shmtool stats NAME [--prometheus [--max-structures N] [--max-spaces N] [--max-bytes SIZE] | --json]

Prints segment NAME's size, use, free and quarantined bytes, processes alive and
dead attachments, then one row per structure: items (estimated for bloom and
hll), capacity, fill, the false-positive rate estimated from the fill right now,
the over-capacity flag and bytes. --prometheus prints the same numbers and each
kind's counters in the Prometheus text format (metric names in docs/metrics.md);
the library's shmfilter::prometheus_text() returns the same text, for any process
to serve on /metrics. Takes no lock: safe while others work.

The Prometheus text stays small at any number of structures (docs/metrics.md,
"Bounded scrapes"): the per-kind totals count every structure, and only the
largest structures (by directory region bytes) get their own series, while the
text stays within --max-bytes; the rest are counted in each kind's "other" row.
Names are shown escaped: control bytes and invalid UTF-8 as \xNN.

Options:
  --prometheus     Prometheus text exposition format (HELP and TYPE lines)
  --max-structures N  structures with their own series (default 64; 0: per-kind totals only)
  --max-spaces N   per-space (per-plan) series per keyed structure (default 0: none)
  --max-bytes SIZE  bound on the text's size (default 96000, at least 16k)
  --json           one JSON object: segment numbers and an "items" array
Example:
  shmtool stats freqcap --prometheus > /var/lib/node_exporter/textfile/shmfilter.prom
)");

}  // namespace
}  // namespace shmtool
