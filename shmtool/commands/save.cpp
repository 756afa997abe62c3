// shmtool/commands/save.cpp: `shmtool save NAME FILE` and `shmtool restore FILE NAME`
// (shmfilter::save / restore, docs/save-restore.md).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/json.h"
#include "cli/numbers.h"
#include "cli/report.h"
#include "cli/segment.h"
#include "shmfilter/snapshot.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string n = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (n.empty()) throw UsageError("--structures has an empty name: pass names separated by commas, e.g. a,b");
    out.push_back(n);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Json describe(const shmfilter::SnapshotInfo& info, const std::string& file) {
  Json j;
  j.add("file", file).add_size("file_bytes", info.file_bytes).add("format_version", info.format_version);
  j.add("source_segment", info.source_segment).add("structures", static_cast<uint64_t>(info.entries.size()));
  std::vector<Json> items;
  for (const auto& e : info.entries) {
    Json x;
    x.add("name", e.name).add("kind", std::string(shmfilter::kind_name(e.kind))).add("bytes", e.bytes);
    items.push_back(x);
  }
  j.add_array("items", items);
  if (!info.skipped.empty()) {
    std::vector<Json> sk;
    for (const auto& s : info.skipped) sk.push_back(Json().add("skipped", s));
    j.add_array("skipped", sk);
  }
  return j;
}

void print_entries(const shmfilter::SnapshotInfo& info) {
  for (const auto& e : info.entries)
    std::printf("  %-8s %-30s %s\n", std::string(shmfilter::kind_name(e.kind)).c_str(),
                shmfilter::escape_text(e.name).c_str(), shmfilter::format_size(e.bytes).c_str());
  for (const auto& s : info.skipped) std::printf("  skipped  %s\n", shmfilter::escape_text(s).c_str());
}

int run_save(const Args& a) {
  a.no_more_than(2);
  const std::string& name = a.at(0, "NAME");
  const std::string& file = a.at(1, "FILE");
  shmfilter::Segment seg = open_segment(name, a);
  shmfilter::SaveOptions o;
  if (a.has("--structures")) o.structures = split_names(a.get("--structures"));
  auto info = shmfilter::save(seg, file, o);
  if (a.has("--json")) {
    print_report(describe(info, file), true);
    return 0;
  }
  std::printf("saved %zu structures of segment '%s' to %s (%s)\n", info.entries.size(),
              shmfilter::escape_text(name).c_str(), shmfilter::escape_text(file).c_str(),
              shmfilter::format_size(info.file_bytes).c_str());
  print_entries(info);
  return 0;
}

int run_restore(const Args& a) {
  a.no_more_than(2);
  const std::string& file = a.at(0, "FILE");
  const std::string& name = a.at(1, "NAME");
  shmfilter::RestoreOptions o;
  o.into_existing = a.has("--into");
  if (a.has("--structures")) o.structures = split_names(a.get("--structures"));
  o.create.file = open_options(a).file;
  o.size_limit = size_option(a, "--size-limit", 0);
  auto info = shmfilter::restore(file, name, o);
  if (!o.structures.empty()) {  // report only what was restored
    std::vector<shmfilter::SnapshotEntry> kept;
    for (const auto& e : info.entries)
      for (const auto& w : o.structures)
        if (e.name == w) kept.push_back(e);
    info.entries = kept;
  }
  if (a.has("--json")) {
    print_report(describe(info, file), true);
    return 0;
  }
  std::printf("restored %zu structures from %s into %s segment '%s'\n", info.entries.size(),
              shmfilter::escape_text(file).c_str(), o.into_existing ? "existing" : "new",
              shmfilter::escape_text(name).c_str());
  print_entries(info);
  return 0;
}

SHMTOOL_COMMAND("save", run_save, R"(save a segment's structures to a file while workers keep writing
Usage: shmtool save NAME FILE [--structures a,b] [--json]

Writes a checksummed, versioned copy of segment NAME (or of the chosen
structures) to FILE, atomically (a temporary file, fsync, rename). Consistent
per structure: every operation acknowledged before the save began is in the
file (a cuckoo filter is copied under its writer lock: its writers wait for the
copy). Blobs are listed as skipped. With restore, this is how a
host is warmed after a reboot and how a day is archived (docs/save-restore.md).

Options:
  --structures LIST  only these structures (comma-separated names)
  --json             one JSON object: file, structures saved, skipped
Example:
  shmtool save freqcap /var/lib/shmfilter/freqcap-2026-11-30.save
)");

SHMTOOL_COMMAND("restore", run_restore, R"(create a segment (or add structures to one) from a save file
Usage: shmtool restore FILE NAME [--into] [--structures a,b] [--size-limit SIZE] [--json]

Checks FILE completely (format version, checksums, end marker) before changing
anything: a truncated, corrupted or newer-version file is one error and nothing
is created. Without --into it creates segment NAME (built under a temporary
name, renamed into place only when complete; an existing NAME is an error;
its sizes follow the file only as far as the file's content justifies, see
--size-limit). With --into it adds the structures to existing segment NAME,
refusing any name that is already there: all of them or none, even if the
restore is killed (they are published together; a killed restore's leftovers
are removed by the next restore or 'check --repair').

Options:
  --into             add to the existing segment NAME instead of creating it
  --structures LIST  only these structures of the file (comma-separated names)
  --size-limit SIZE  a new segment may take the sizes the file records up to
                     SIZE (default: 2 x the file's content + 64 MiB backing,
                     a 64 GiB reservation)
  --json             one JSON object: what was restored
Example:
  shmtool restore /var/lib/shmfilter/freqcap-2026-11-30.save freqcap
)");

}  // namespace
}  // namespace shmtool
