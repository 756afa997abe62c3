// shmtool/commands/check.cpp: `shmtool check NAME [--repair]`: integrity check.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/json.h"
#include "cli/segment.h"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

int run_check(const Args& args) {
  const std::string& name = segment_name(args);
  const bool repair = args.has("--repair"), json = args.has("--json");
  shmfilter::Segment seg = open_segment(name, args);
  shmfilter::CheckReport report;
  try {
    report = seg.check(repair);
  } catch (const shmfilter::Error& e) {
    rethrow_naming(e, name);
  }
  size_t repaired = 0, open = 0;
  for (const auto& f : report.findings) (f.repaired ? repaired : open)++;
  const bool ok = report.consistent();

  if (json) {
    std::vector<Json> items;
    for (const auto& f : report.findings)
      items.push_back(Json().add("where", f.where).add("problem", f.problem).add("repaired", f.repaired));
    Json out;
    out.add("segment", name).add("consistent", ok).add("repair", repair).add("problems", open)
        .add("repaired", repaired).add_array("findings", items);
    printf("%s\n", out.str().c_str());
    return ok ? 0 : 1;
  }
  for (const auto& f : report.findings)
    printf("%s %s: %s\n", f.repaired ? "repaired" : "PROBLEM ", shmfilter::escape_text(f.where).c_str(),
           shmfilter::escape_text(f.problem).c_str());
  if (ok)
    printf("segment '%s' is consistent%s\n", shmfilter::escape_text(name).c_str(),
           repaired ? (" (" + std::to_string(repaired) + " problems repaired)").c_str() : "");
  else
    printf("segment '%s': %zu problems%s\n", shmfilter::escape_text(name).c_str(), open,
           repaired ? (", " + std::to_string(repaired) + " repaired").c_str() : "");
  if (!ok && !repair)
    printf("run 'shmtool check %s --repair' to fix what can be fixed\n", shmfilter::escape_text(name).c_str());
  return ok ? 0 : 1;
}

SHMTOOL_COMMAND("check", run_check, R"(verify a segment's integrity (exit 0 consistent, 1 problems); --repair fixes
Usage: shmtool check NAME [--repair] [--json]

Checks segment NAME: the header, the process registry, the directory, the
allocator (every extent in bounds, no overlap, nothing leaked) and every
structure's own invariants. Prints one line per finding and a verdict. Safe
while other processes work. Exit 0 when consistent (including when every
problem found was repaired), 1 when problems remain.

Options:
  --repair         fix what can be fixed (leaked extents, stale locks of dead
                   processes, half-done operations) and say what was fixed
  --json           one JSON object: consistent, problems, repaired, findings
Example:
  $ shmtool check freqcap
  segment 'freqcap' is consistent
  $ shmtool check freqcap --repair --json
)");

}  // namespace
}  // namespace shmtool
