// tests/support/check_clean.h: the GoogleTest assertion many tests end with: the segment's
// whole check (every region, by its kind's checker) finds nothing. Kept out of test_util.h,
// which bench/ and examples/ include without GoogleTest.
#pragma once

#include <gtest/gtest.h>

#include "shmfilter/segment.hpp"

namespace shmf_test {

// Each finding is one failure naming where and what; then the report must say consistent.
inline void expect_check_clean(shmfilter::Segment& seg) {
  shmfilter::CheckReport r = seg.check(false);
  for (const auto& f : r.findings) ADD_FAILURE() << f.where << ": " << f.problem;
  EXPECT_TRUE(r.consistent());
}

}  // namespace shmf_test
