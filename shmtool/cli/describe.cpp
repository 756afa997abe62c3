// shmtool/cli/describe.cpp: the describer table and the shared info command.
#include "cli/describe.h"

#include <exception>
#include <utility>
#include <vector>

#include "cli/report.h"
#include "cli/segment.h"
#include "shmfilter/error.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

std::vector<std::pair<shmfilter::Kind, DescribeFn>>& describers() {
  static std::vector<std::pair<shmfilter::Kind, DescribeFn>> table;
  return table;
}

}  // namespace

StructureRegistrar::StructureRegistrar(shmfilter::Kind kind, DescribeFn describe, std::string_view info_summary,
                                       std::string_view info_description, std::string_view example_args,
                                       RunFn info_run) {
  describers().emplace_back(kind, describe);
  const std::string group(shmfilter::kind_name(kind));
  if (!info_run) info_run = [kind](const Args& args) { return show_info(args, kind); };
  std::string spec;
  spec.append(info_summary).append("\nUsage: shmtool ").append(group).append(" info SEG NAME [--json]\n\n");
  spec.append(info_description).append("\n\nOptions:\n  --json           one JSON object instead of aligned lines\n");
  spec.append("Example:\n  shmtool ").append(group).append(" info ").append(example_args).append(" --json\n");
  CommandRegistrar(group + " info", std::move(info_run), spec);
}

DescribeFn describer_for(shmfilter::Kind kind) {
  for (const auto& [k, fn] : describers())
    if (k == kind) return fn;
  return nullptr;
}

Json describe(shmfilter::Segment& seg, const shmfilter::RegionInfo& region) {
  DescribeFn fn = describer_for(region.kind);
  if (fn == nullptr)
    throw shmfilter::Error(shmfilter::ErrorCode::kInvalidArgument,
                           "shmtool cannot describe a " + std::string(shmfilter::kind_name(region.kind)));
  Json j;
  j.add("name", region.name);
  if (!shmfilter::valid_utf8(region.name)) j.add("name_hex", shmfilter::hex_bytes(region.name));
  j.add("kind", std::string(shmfilter::kind_name(region.kind)));
  return j.append(fn(seg, region));
}

Json describe_region(shmfilter::Segment& seg, const shmfilter::RegionInfo& region) {
  try {
    return describe(seg, region);
  } catch (const std::exception& e) {
    return Json().add("error", e.what());
  }
}

Json directory_entry(shmfilter::Segment& seg, const shmfilter::RegionInfo& r) {
  Json j;
  j.add("name", r.name);
  // JSON carries only valid UTF-8 (an invalid byte reads U+FFFD there): the exact bytes in hex.
  if (!shmfilter::valid_utf8(r.name)) j.add("name_hex", shmfilter::hex_bytes(r.name));
  j.add("kind", std::string(shmfilter::kind_name(r.kind))).add("slot", r.slot);
  j.add("generation", r.generation).add("offset", r.offset).add("size", r.size);
  if (describer_for(r.kind) != nullptr) j.add("stats", describe_region(seg, r));
  return j;
}

void show_info(shmfilter::Segment& seg, const std::string& name, shmfilter::Kind kind, bool json) {
  print_report(describe(seg, seg.open_region(name, kind)), json);
}

int show_info(const Args& args, shmfilter::Kind kind) {
  args.no_more_than(2);
  shmfilter::Segment seg = open_segment(args.at(0, "SEG"), args);
  show_info(seg, args.at(1, "NAME"), kind, args.has("--json"));
  return 0;
}

}  // namespace shmtool
