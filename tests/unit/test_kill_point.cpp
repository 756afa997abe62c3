// tests/unit/test_kill_point.cpp: SHMFILTER_KILL_POINTS decides whether the
// library's kill points exist. ON (scripts/test.sh): an armed point SIGKILLs
// the process that reaches it. OFF (the default, packages, benchmarks): arming
// changes nothing, because SHMF_KILL_POINT(...) compiled to nothing.
// The library and this test get the same definition from the same option.
#include <gtest/gtest.h>

#include <csignal>

#include "base/kill_point.h"
#include "shmfilter/segment.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::fork_child;
using shmf_test::SegmentGuard;
using shmf_test::small_options;
using shmf_test::unique_name;

TEST(KillPoint, ArmedLibraryPointFollowsTheBuildOption) {
  SegmentGuard g(unique_name("kp"));
  Segment s = Segment::create(g.name, small_options());
  pid_t pid = fork_child([&] {
    Segment c = Segment::open(g.name);
    internal::arm_kill_point("segment.txn.before_commit");
    c.transact([](ControlTxn&) {});
    return 7;  // reached only where the point is compiled out
  });
  int status = shmf_test::wait_status(pid);
#if defined(SHMFILTER_KILL_POINTS) && SHMFILTER_KILL_POINTS
  EXPECT_TRUE(shmf_test::killed_by(status, SIGKILL)) << "status " << status;
  EXPECT_TRUE(s.check(/*repair=*/true).consistent());  // the dead child's registry slot is repaired
#else
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_TRUE(s.check().consistent());  // it committed and detached
#endif
}
