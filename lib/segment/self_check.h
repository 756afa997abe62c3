// lib/segment/self_check.h: the segment's own part of Segment::check.
//
// Segment::check (lib/check/check.cpp) calls this, then each live region's
// checker. Nothing here knows about structures.
#pragma once

#include <vector>

#include "shmfilter/segment.hpp"

namespace shmfilter::internal {

// Checks (and with repair fixes) the header, control lock recovery, registry,
// directory and allocator of `seg` under its control lock; adds findings to
// `report`. Returns the live regions whose entry and extent are sound: the
// ones a structure checker may look inside.
std::vector<RegionInfo> check_segment_only(Segment& seg, bool repair, CheckReport& report);

}  // namespace shmfilter::internal
