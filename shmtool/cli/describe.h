// shmtool/cli/describe.h: per-kind descriptions of a structure, built only on
// the public API. Each structure's command file registers one
// (SHMTOOL_DESCRIBER); `list`, `dump` and every `KIND info` show the same object.
#pragma once

#include <string>

#include "cli/args.h"
#include "cli/json.h"
#include "shmfilter/segment.hpp"

namespace shmtool {

using DescribeFn = Json (*)(shmfilter::Segment&, const shmfilter::RegionInfo&);

struct DescriberRegistrar {
  DescriberRegistrar(shmfilter::Kind kind, DescribeFn describe);
};

#define SHMTOOL_DESCRIBER_CAT2(a, b) a##b
#define SHMTOOL_DESCRIBER_CAT(a, b) SHMTOOL_DESCRIBER_CAT2(a, b)
// Registers DESCRIBE (Json(Segment&, const RegionInfo&)) for KIND.
#define SHMTOOL_DESCRIBER(KIND, DESCRIBE) \
  const ::shmtool::DescriberRegistrar SHMTOOL_DESCRIBER_CAT(shmtool_describer_, __LINE__)(KIND, DESCRIBE)

// The kind's describer, or nullptr (blobs have none).
DescribeFn describer_for(shmfilter::Kind kind);

// Describes one region; a failure becomes {"error": "..."} (for list/dump,
// which go on to the next region).
Json describe_region(shmfilter::Segment& seg, const shmfilter::RegionInfo& region);

// `shmtool KIND info SEG NAME [--json]`: prints the describer's object as a report.
// A missing or wrong-kind NAME is an error (exit 1).
void show_info(shmfilter::Segment& seg, const std::string& name, shmfilter::Kind kind, bool json);
int show_info(const Args& args, shmfilter::Kind kind);

}  // namespace shmtool
