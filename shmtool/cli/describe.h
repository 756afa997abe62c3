// shmtool/cli/describe.h: per-kind descriptions of a structure, built only on
// the public API. Each structure's command file registers one with
// SHMTOOL_STRUCTURE, which also makes its `KIND info` command: `list`, `dump`,
// `KIND info` and `KIND create` all show the same object.
#pragma once

#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/json.h"
#include "cli/segment.h"
#include "shmfilter/segment.hpp"

namespace shmtool {

using DescribeFn = Json (*)(shmfilter::Segment&, const shmfilter::RegionInfo&);

struct StructureRegistrar {
  StructureRegistrar(shmfilter::Kind kind, DescribeFn describe, std::string_view info_summary,
                     std::string_view info_description, std::string_view example_args, RunFn info_run = nullptr);
};

// Registers DESCRIBE (Json(Segment&, const RegionInfo&)) for KIND and the
// command `shmtool KIND info SEG NAME [--json]` that prints it: SUMMARY is its
// line in the command list, DESCRIPTION its help, EXAMPLE "SEG NAME" for the
// help's example. An optional last argument replaces the shared run (show_info).
#define SHMTOOL_STRUCTURE(KIND, DESCRIBE, SUMMARY, DESCRIPTION, EXAMPLE, ...)                                  \
  const ::shmtool::StructureRegistrar SHMTOOL_COMMAND_CAT(shmtool_structure_, __LINE__)(KIND, DESCRIBE, SUMMARY, \
                                                                                        DESCRIPTION, EXAMPLE __VA_OPT__(, ) __VA_ARGS__)

// The kind's describer, or nullptr (blobs have none).
DescribeFn describer_for(shmfilter::Kind kind);

// {"name":..., "kind":..., then the describer's fields}; errors propagate.
Json describe(shmfilter::Segment& seg, const shmfilter::RegionInfo& region);

// The same, but a failure becomes {"error": "..."} (for list/dump, which go
// on to the next region).
Json describe_region(shmfilter::Segment& seg, const shmfilter::RegionInfo& region);

// One directory entry as list --json and dump --json show it: name, kind,
// slot, generation, offset, size and, for kinds with a describer, "stats".
Json directory_entry(shmfilter::Segment& seg, const shmfilter::RegionInfo& region);

// `shmtool KIND info SEG NAME [--json]` and what every `KIND create` prints:
// describe() as a report. A missing or wrong-kind NAME is an error (exit 1).
void show_info(shmfilter::Segment& seg, const std::string& name, shmfilter::Kind kind, bool json);
int show_info(const Args& args, shmfilter::Kind kind);

// The end of every `KIND create SEG NAME ...`, once its options are parsed:
// opens SEG, calls create(seg, name) and prints the new structure as `KIND info` would.
template <class CreateFn>
int create_and_show(const Args& args, shmfilter::Kind kind, CreateFn&& create) {
  args.no_more_than(2);
  shmfilter::Segment seg = open_segment(args.at(0, "SEG"), args);
  const std::string& name = args.at(1, "NAME");
  create(seg, name);
  show_info(seg, name, kind, args.has("--json"));
  return 0;
}

}  // namespace shmtool
