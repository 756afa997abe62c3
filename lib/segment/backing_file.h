// lib/segment/backing_file.h: what layers above lib/segment may know of a segment's
// backing file: its mode and owner, which a copy of the segment (a save, an export)
// gets (lib/base/safe_file.h, docs/SECURITY.md "Save, restore and files").
#pragma once

#include "base/safe_file.h"
#include "shmfilter/segment.hpp"

namespace shmfilter::internal {

// fstat of the attachment's own descriptor (never the path, which may have been replaced).
FileMode segment_file_mode(const Segment& segment) noexcept;

}  // namespace shmfilter::internal
