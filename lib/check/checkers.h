// lib/check/checkers.h: per-kind integrity checkers that Segment::check runs.
//
// Each structure declares internal::X::check_X() in its lib/structures/X_impl.h and
// defines it in X.cpp; the one table in lib/check/checkers.cpp maps kinds to them. A checker validates the structure's invariants, adds a finding per
// problem, and with repair fixes what it can (marking the finding repaired).
// It must be safe to run while other processes work on the structure.
#pragma once

#include "shmfilter/segment.hpp"

namespace shmfilter::internal {

using CheckerFn = void (*)(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);

// nullptr when the kind has no checker (its region bounds are still checked).
CheckerFn checker_for(Kind kind) noexcept;

}  // namespace shmfilter::internal
