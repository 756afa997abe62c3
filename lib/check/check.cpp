// lib/check/check.cpp: Segment::check, above the structures.
//
// The segment checks itself (lib/segment/self_check.h: header, registry,
// directory, allocator), then each sound live region is handed to its kind's
// checker (checkers.h), which looks inside the structure.
#include "check/checkers.h"
#include "segment/self_check.h"
#include "shmfilter/segment.hpp"

namespace shmfilter {

CheckReport Segment::check(bool repair) {
  CheckReport report;
  std::vector<RegionInfo> live = internal::check_segment_only(*this, repair, report);
  for (const auto& info : live) {
    // Read-only: the kinds whose readers write the segment (Roaring pins,
    // window rotation) cannot be looked into through a PROT_READ mapping.
    if (read_only() && (info.kind == Kind::kRoaring || info.kind == Kind::kWindow)) {
      report.findings.push_back({std::string(kind_name(info.kind)) + " '" + info.name + "'",
                                 "not checked: a read-only check cannot look inside this kind; run check read-write",
                                 true});
      continue;
    }
    if (internal::CheckerFn fn = internal::checker_for(info.kind)) fn(*this, info, repair, report);
  }
  return report;
}

}  // namespace shmfilter
