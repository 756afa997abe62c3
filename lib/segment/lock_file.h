// lib/segment/lock_file.h: what layers above lib/segment may do with a
// segment's lock file (lock_file.cpp; docs/SECURITY.md rule 5).
#pragma once

#include <string>

namespace shmfilter::internal {

// After renaming a detached segment file FROM -> TO (a restore), moves its
// lock file along (never replacing one): else it would be left behind, and
// the first writer of TO would create another. Best effort, never throws.
void move_lock_file(const std::string& from, const std::string& to) noexcept;

}  // namespace shmfilter::internal
