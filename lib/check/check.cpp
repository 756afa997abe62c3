// lib/check/check.cpp: Segment::check, above the structures.
//
// The segment checks itself (lib/segment/self_check.h: header, registry,
// directory, allocator), then each sound live region is handed to its kind's
// checker, read from the kinds table (lib/structures/kind.h), which looks inside
// the structure.
#include "segment/self_check.h"
#include "shmfilter/segment.hpp"
#include "structures/kind.h"

namespace shmfilter {

CheckReport Segment::check(bool repair) {
  CheckReport report;
  std::vector<RegionInfo> live = internal::check_segment_only(*this, repair, report);
  for (const auto& info : live) {
    const internal::KindRow* row = internal::kind_row(info.kind);
    if (row == nullptr) continue;  // the segment's own check reports a kind this build does not know
    // Read-only: the kinds whose readers write the segment (Roaring pins,
    // window rotation) cannot be looked into through a PROT_READ mapping.
    if (read_only() && row->reads_write != nullptr) {
      report.findings.push_back({std::string(row->name) + " '" + info.name + "'",
                                 "not checked: a read-only check cannot look inside this kind; run check read-write",
                                 true});
      continue;
    }
    const ReadGuard in_call(*this);  // the structure's memory stays ours while it is read (docs/CONCURRENCY.md)
    row->check(*this, info, repair, report);
  }
  return report;
}

}  // namespace shmfilter
