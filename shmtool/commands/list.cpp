// shmtool/commands/list.cpp: `shmtool list NAME`: the structures in a segment.
#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/describe.h"
#include "cli/json.h"
#include "cli/report.h"
#include "cli/segment.h"

namespace shmtool {
namespace {

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

  printf("segment '%s': %u of %u structures, %s used of %s (may grow to %s)\n", name.c_str(), st.structures,
         st.directory_capacity, shmfilter::format_size(st.used_bytes).c_str(),
         shmfilter::format_size(st.size).c_str(), shmfilter::format_size(st.max_size).c_str());
  if (regions.empty()) {
    printf("(no structures)\n");
    return 0;
  }
  size_t w = 4;
  for (const auto& r : regions) w = std::max(w, r.name.size());
  printf("%-*s  %-8s  %12s  %s\n", static_cast<int>(w), "NAME", "KIND", "SIZE", "SUMMARY");
  for (const auto& r : regions) {
    std::string summary = describer_for(r.kind) ? one_line(describe_region(seg, r)) : "";
    printf("%-*s  %-8s  %12s  %s\n", static_cast<int>(w), r.name.c_str(),
           std::string(shmfilter::kind_name(r.kind)).c_str(), shmfilter::format_size(r.size).c_str(),
           summary.c_str());
  }
  return 0;
}

SHMTOOL_COMMAND("list", run_list, R"(list the structures in a segment: name, kind, size, usage
Usage: shmtool list NAME [--json]

Lists every named structure in segment NAME, one per line: its name, kind
(bloom, cuckoo, roaring, hll, set, blob), the bytes it occupies and a one-line
summary of its state from its kind (fill, load, count...). The first line says
how much of the segment is used. Lookups take no lock: safe while others work.

Options:
  --json           one JSON object: segment totals and an "items" array
Example:
  $ shmtool list freqcap
  segment 'freqcap': 2 of 4096 structures, 137.00 MiB used of 2.00 GiB (may grow to 64.00 GiB)
  NAME               KIND          SIZE  SUMMARY
  freq:17:2026-11-30 bloom   137.00 MiB  layout=blocked capacity=120000000 ...
  uv:17:2026-11-30   hll      12.06 KiB  count=48211 ...
)");

}  // namespace
}  // namespace shmtool
