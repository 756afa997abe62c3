// shmtool/commands/dump.cpp: `shmtool dump NAME`: everything about a segment.
#include <cstdio>
#include <ctime>
#include <string>

#include "cli/command.h"
#include "cli/describe.h"
#include "cli/json.h"
#include "cli/report.h"
#include "cli/segment.h"
#include "shmfilter/segment.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

std::string format_time(uint64_t unix_ns) {
  if (unix_ns == 0) return "-";
  time_t t = static_cast<time_t>(unix_ns / 1000000000ull);
  struct tm tm_utc;
  gmtime_r(&t, &tm_utc);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  return buf;
}

// Share of free space not in the largest free extent: 0 = one contiguous hole.
double fragmentation(const shmfilter::SegmentStats& st) {
  return st.free_bytes == 0 ? 0.0
                            : 1.0 - static_cast<double>(st.largest_free) / static_cast<double>(st.free_bytes);
}

int run_dump(const Args& args) {
  const std::string& name = segment_name(args);
  const bool json = args.has("--json");
  shmfilter::Segment seg = open_segment(name, args);
  const auto st = seg.stats();
  const auto regions = seg.list();
  const auto procs = seg.processes();
  const uint64_t me = seg.owner_token();
  const std::string backing = backing_path(name, args);

  if (json) {
    Json header;
    header.add("name", name).add("backing", backing).add("format_version", st.format_version)
        .add("size", st.size).add("max_size", st.max_size).add("directory_capacity", st.directory_capacity)
        .add("structures", st.structures).add("processes_alive", st.processes_alive);
    Json alloc;
    alloc.add("used_bytes", st.used_bytes).add("free_bytes", st.free_bytes)
        .add("quarantined_bytes", st.quarantined_bytes).add("largest_free", st.largest_free)
        .add("free_extents", st.free_extents).add("fragmentation", fragmentation(st));
    std::vector<Json> dir, ps;
    for (const auto& r : regions) dir.push_back(directory_entry(seg, r));
    for (const auto& p : procs) {
      Json j;
      j.add("slot", p.slot).add("pid", p.pid).add("token", p.token).add("alive", p.alive)
          .add("attached_unix_ns", p.attached_unix_ns).add("self", p.token == me);
      ps.push_back(j);
    }
    Json out;
    out.add("header", header).add("allocator", alloc).add_array("directory", dir).add_array("processes", ps);
    printf("%s\n", out.str().c_str());
    return 0;
  }

  printf("segment '%s'\n", shmfilter::escape_text(name).c_str());
  printf("  backing            %s\n", shmfilter::escape_text(backing).c_str());
  printf("  format version     %u\n", st.format_version);
  printf("  size               %s (%llu bytes), may grow to %s\n", shmfilter::format_size(st.size).c_str(),
         static_cast<unsigned long long>(st.size), shmfilter::format_size(st.max_size).c_str());
  printf("  directory          %u of %u entries used\n", st.structures, st.directory_capacity);
  printf("allocator\n");
  printf("  used               %s\n", shmfilter::format_size(st.used_bytes).c_str());
  printf("  free               %s in %u free extents (largest %s, fragmentation %.1f%%)\n",
         shmfilter::format_size(st.free_bytes).c_str(), st.free_extents,
         shmfilter::format_size(st.largest_free).c_str(), 100.0 * fragmentation(st));
  printf("  quarantined        %s (freed, reused once every process has moved on)\n",
         shmfilter::format_size(st.quarantined_bytes).c_str());
  printf("processes (%u alive; liveness from kernel locks, not pids)\n", st.processes_alive);
  for (const auto& p : procs)
    printf("  slot %-4u pid %-8d %-5s attached %s token %016llx%s\n", p.slot, p.pid, p.alive ? "alive" : "dead",
           format_time(p.attached_unix_ns).c_str(), static_cast<unsigned long long>(p.token),
           p.token == me ? "  (this shmtool)" : "");
  printf("directory (%zu structures)\n", regions.size());
  for (const auto& r : regions) {
    printf("  [%u] '%s' %s gen %u offset %llu size %s\n", r.slot, shmfilter::escape_text(r.name).c_str(),
           std::string(shmfilter::kind_name(r.kind)).c_str(), r.generation, static_cast<unsigned long long>(r.offset),
           shmfilter::format_size(r.size).c_str());
    if (describer_for(r.kind) != nullptr) printf("      %s\n", one_line(describe_region(seg, r)).c_str());
  }
  return 0;
}

SHMTOOL_COMMAND("dump", run_dump, R"(show everything: header, allocator, processes, directory, per-structure stats
Usage: shmtool dump NAME [--json]

Prints what segment NAME holds: the header (format version, size, reservation),
the allocator (used, free, free extents and fragmentation, quarantined bytes
waiting for every process to move on), the registry of attached processes
(alive or dead, as the kernel reports it through each attachment's lock; the
pid is shown for information only), and the directory with each structure's
own statistics. Takes no lock: safe while others work (figures may be a
moment stale). This shmtool is attached while it runs and shows up marked.

Options:
  --json           one JSON object: header, allocator, directory, processes
Example:
  $ shmtool dump freqcap
  segment 'freqcap'
    backing            /dev/shm/freqcap
    ...
  processes (5 alive; liveness from kernel locks, not pids)
    slot 0    pid 4121     alive attached 2026-11-30T16:00:02Z token 0000000100000000
  $ shmtool dump freqcap --json | jq .allocator
)");

}  // namespace
}  // namespace shmtool
