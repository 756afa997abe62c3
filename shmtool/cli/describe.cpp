// shmtool/cli/describe.cpp: the describer table and the shared info command.
#include "cli/describe.h"

#include <exception>
#include <utility>
#include <vector>

#include "cli/report.h"
#include "cli/segment.h"
#include "shmfilter/error.hpp"

namespace shmtool {
namespace {

std::vector<std::pair<shmfilter::Kind, DescribeFn>>& describers() {
  static std::vector<std::pair<shmfilter::Kind, DescribeFn>> table;
  return table;
}

}  // namespace

DescriberRegistrar::DescriberRegistrar(shmfilter::Kind kind, DescribeFn describe) {
  describers().emplace_back(kind, describe);
}

DescribeFn describer_for(shmfilter::Kind kind) {
  for (const auto& [k, fn] : describers())
    if (k == kind) return fn;
  return nullptr;
}

Json describe_region(shmfilter::Segment& seg, const shmfilter::RegionInfo& region) {
  DescribeFn fn = describer_for(region.kind);
  if (fn == nullptr) return Json();
  try {
    return fn(seg, region);
  } catch (const std::exception& e) {
    return Json().add("error", e.what());
  }
}

void show_info(shmfilter::Segment& seg, const std::string& name, shmfilter::Kind kind, bool json) {
  const shmfilter::RegionInfo info = seg.open_region(name, kind);
  DescribeFn fn = describer_for(kind);
  if (fn == nullptr)
    throw shmfilter::Error(shmfilter::ErrorCode::kInvalidArgument,
                           "shmtool cannot describe a " + std::string(shmfilter::kind_name(kind)));
  print_report(fn(seg, info), json);
}

int show_info(const Args& args, shmfilter::Kind kind) {
  args.no_more_than(2);
  shmfilter::Segment seg = open_segment(args.at(0, "SEG"), args);
  show_info(seg, args.at(1, "NAME"), kind, args.has("--json"));
  return 0;
}

}  // namespace shmtool
