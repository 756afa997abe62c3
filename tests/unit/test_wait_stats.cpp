// tests/unit/test_wait_stats.cpp: the record of bounded waits (lib/base/wait_stats.h)
// that the torture program's stall bound reads (tests/torture/main.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "base/wait_stats.h"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/segment.hpp"
#include "structures/cuckoo/cuckoo_impl.h"
#include "test_util.h"

using namespace shmfilter;
using namespace shmf_test;
namespace in = shmfilter::internal;

TEST(WaitStats, OnlyStartedWaitsAreRecordedWithTheirSite) {
  in::reset_wait_stats();
  { in::SlowWait fast("fast path"); }
  EXPECT_EQ(in::wait_snapshot().longest_ns, 0u) << "a wait that never started was recorded";
  {
    in::SlowWait slow("slow path");
    slow.start();
    const uint64_t t = in::wait_clock_ns();
    while (in::wait_clock_ns() == t) {
    }
  }
  in::WaitSnapshot s = in::wait_snapshot();
  EXPECT_GT(s.longest_ns, 0u);
  EXPECT_STREQ(s.longest_site, "slow path");
  in::note_wait("shorter", 0);
  EXPECT_STREQ(in::wait_snapshot().longest_site, "slow path") << "a shorter wait replaced the longest";
  EXPECT_EQ(s.expired, 0u);
  in::note_wait_expired("gave up");
  EXPECT_EQ(in::wait_snapshot().expired, 1u);
  EXPECT_STREQ(in::wait_snapshot().expired_site, "gave up");
}

// A real bounded wait of the library reports its expiry: the Cuckoo checker
// waits (bounded) for the writer lock, here held by a live token (our own).
TEST(WaitStats, ACuckooCheckThatGivesUpOnTheWriterLockIsRecorded) {
  SegmentGuard g(unique_name("waits"));
  Segment seg = Segment::create(g.name, small_options());
  CuckooOptions o;
  o.capacity = 1000;
  Cuckoo ck = Cuckoo::create(seg, "ck", o);
  RegionInfo info = seg.open_region("ck", Kind::kCuckoo);
  auto* h = reinterpret_cast<in::cuckoo::Header*>(seg.base() + info.offset);
  in::reset_wait_stats();
  __atomic_store_n(&h->lock_owner, seg.owner_token(), __ATOMIC_RELEASE);  // a live writer holds it
  (void)seg.check(false);
  __atomic_store_n(&h->lock_owner, uint64_t{0}, __ATOMIC_RELEASE);
  in::WaitSnapshot s = in::wait_snapshot();
  EXPECT_EQ(s.expired, 1u) << "the checker's bounded wait for the writer lock was not recorded as expired";
  EXPECT_NE(std::string(s.expired_site).find("cuckoo check"), std::string::npos) << s.expired_site;
}
