// lib/segment/extents.h: what a structure may ask the segment about extents (ownership
// proved against the allocator's own walk, docs/SECURITY.md rule 1). Implemented in
// lib/segment/extent_index.cpp over SegmentImpl's index.
#pragma once

#include <cstdint>
#include <string>

#include "shmfilter/segment.hpp"

namespace shmfilter::internal {

// The size (ExtentHeader included) of the allocated extent whose PAYLOAD starts there, when the
// allocator's own walk (check's: data_offset to top, past the free and quarantine spans) reaches
// an allocated extent at PAYLOAD - 64; 0 otherwise. Such extents never overlap one another nor
// a free or quarantined span. O(log extents) after one O(extents) walk per control-plane
// transaction of any process; never called on a data plane. Throws only what taking the control
// lock throws (a walk that keeps racing other processes' transactions is redone under it).
uint64_t reached_extent_size(const Segment& seg, uint64_t payload);

// "" when REGION's payload is such an extent holding at least REGION.size bytes; else why not.
std::string region_extent_problem(const Segment& seg, const RegionInfo& region);

}  // namespace shmfilter::internal
