// tests/multiprocess/test_exact_set_crash.cpp: children SIGKILLed at every kill point of
// insert and erase. Oracle outside the set (a blob region): per key, whether
// its insert or erase was acknowledged. After each kill: every acknowledged
// insert present, every acknowledged erase gone, size() exact, the dead
// holder's stripe lock taken over, check_exact_set clean.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "base/kill_point.h"
#include "shmfilter/exact_set.hpp"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter;
using shmf_test::fork_child;
using shmf_test::killed_by;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;
using shmf_test::wait_status;

namespace {

enum : uint8_t { kNone = 0, kInsertAcked = 1, kEraseAcked = 2, kInFlight = 3 };  // kInFlight: either outcome is fine

struct Case {
  const char* point;
  bool erase_phase;  // the kill point lies in erase: insert everything first
  uint64_t nth;      // die at the nth time the point is reached
};

std::vector<uint64_t> test_keys(uint64_t n) {
  auto keys = shmf_bench::distinct_keys(n - 2, 5);
  keys.push_back(0);  // the two reserved slot values, kept in side flags
  keys.push_back(~uint64_t{0});
  return keys;
}

}  // namespace

class ExactSetKill : public ::testing::TestWithParam<Case> {};

TEST_P(ExactSetKill, AcknowledgedOperationsSurvive) {
  const Case c = GetParam();
  SegmentGuard g(unique_name("setkill"));
  Segment seg = Segment::create(g.name);
  const uint64_t n = 3000;
  ExactSet::create(seg, "s", {.capacity = n, .max_load = 0.9});
  RegionInfo oracle = seg.create_region("oracle", Kind::kBlob, n, {});
  auto keys = test_keys(n);
  for (uint64_t trial = 0; trial < 3; ++trial) {
    pid_t pid = fork_child([&] {
      Segment s2 = Segment::open(g.name);
      ExactSet set = ExactSet::open(s2, "s");
      auto* ack = reinterpret_cast<uint8_t*>(s2.base() + oracle.offset);
      if (!c.erase_phase) shmfilter::internal::arm_kill_point(c.point, c.nth + trial * 97);
      for (uint64_t i = 0; i < n; ++i) {
        InsertResult r = set.insert(keys[i]);
        if (r == InsertResult::kInserted || r == InsertResult::kExists)
          std::atomic_ref<uint8_t>(ack[i]).store(kInsertAcked);
      }
      if (c.erase_phase) shmfilter::internal::arm_kill_point(c.point, c.nth + trial * 97);
      for (uint64_t i = 0; i < n; i += 2) {
        std::atomic_ref<uint8_t>(ack[i]).store(kInFlight);
        if (set.erase(keys[i])) std::atomic_ref<uint8_t>(ack[i]).store(kEraseAcked);
      }
      return 3;  // the kill point was never reached: a test bug
    });
    int status = wait_status(pid);
    ASSERT_TRUE(killed_by(status, SIGKILL)) << c.point << ": child was not killed (status " << status << ")";

    ExactSet set = ExactSet::open(seg, "s");
    auto* ack = reinterpret_cast<uint8_t*>(seg.base() + oracle.offset);
    uint64_t present = 0;
    for (uint64_t i = 0; i < n; ++i) {
      bool has = set.contains(keys[i]);
      present += has;
      if (ack[i] == kInsertAcked) {
        ASSERT_TRUE(has) << c.point << ": acknowledged insert of key #" << i << " lost";
      }
      if (ack[i] == kEraseAcked) {
        ASSERT_FALSE(has) << c.point << ": acknowledged erase of key #" << i << " undone";
      }
    }
    // Every operation below touches every stripe, including the one the dead
    // child held locked: it must be taken over (no hang) and its intent replayed.
    EXPECT_EQ(set.size(), present) << c.point << ": size() drifted";
    CheckReport r = seg.check(false);
    for (const auto& f : r.findings)
      if (f.where.rfind("registry", 0) != 0 && f.problem.find("dead process") == std::string::npos)
        ADD_FAILURE() << c.point << ": " << f.where << ": " << f.problem;
    // Reset for the next trial: insert-phase points need every key absent
    // again, erase-phase points every key present.
    for (uint64_t i = 0; i < n; ++i) {
      if (c.erase_phase) {
        InsertResult ir = set.insert(keys[i]);
        ASSERT_TRUE(ir == InsertResult::kInserted || ir == InsertResult::kExists) << insert_result_name(ir);
      } else {
        set.erase(keys[i]);
      }
      ack[i] = kNone;
    }
    EXPECT_EQ(set.size(), c.erase_phase ? n : 0);
    seg.check(true);
    r = seg.check(false);
    for (const auto& f : r.findings)
      if (f.where.rfind("registry", 0) != 0) ADD_FAILURE() << "after repair: " << f.where << ": " << f.problem;
  }
  // Finally erase everything from the parent: the set ends empty.
  ExactSet set = ExactSet::open(seg, "s");
  for (uint64_t k : keys) set.erase(k);
  EXPECT_EQ(set.size(), 0u);
}

// The tombstone clean-up holds EVERY stripe lock at once (exact_set.clean.locked), which
// no other point does; the torture sweep's workers never run a set long enough to reach
// it. A child churns keys through a small set (insert one, erase the one 100 before), so
// tombstones pile up until an insert past the used limit cleans them, and dies there.
// Then: no acknowledged insert or erase undone, size() exact, and every stripe the dead
// child held is taken over: new inserts (and another clean-up, from the parent) finish.
TEST(ExactSetKillClean, DeathHoldingEveryStripeLosesNothing) {
  SegmentGuard g(unique_name("setclean"));
  Segment seg = Segment::create(g.name);
  const uint64_t pool = 40000, live = 100;
  ExactSet::create(seg, "s", {.capacity = 1000, .max_load = 0.9});
  RegionInfo oracle = seg.create_region("oracle", Kind::kBlob, pool, {});
  const auto keys = shmf_bench::distinct_keys(pool, 11);
  pid_t pid = fork_child([&] {
    Segment s2 = Segment::open(g.name);
    ExactSet set = ExactSet::open(s2, "s");
    auto* ack = reinterpret_cast<uint8_t*>(s2.base() + oracle.offset);
    shmfilter::internal::arm_kill_point("exact_set.clean.locked", 1);
    for (uint64_t i = 0; i < pool; ++i) {
      std::atomic_ref<uint8_t>(ack[i]).store(kInFlight);
      InsertResult r = set.insert(keys[i]);
      if (r != InsertResult::kInserted) return 4;  // each key is new: anything else is a bug
      std::atomic_ref<uint8_t>(ack[i]).store(kInsertAcked);
      if (i >= live) {
        std::atomic_ref<uint8_t>(ack[i - live]).store(kInFlight);
        if (set.erase(keys[i - live])) std::atomic_ref<uint8_t>(ack[i - live]).store(kEraseAcked);
      }
    }
    return 3;  // the clean-up never ran: a test bug
  });
  int status = wait_status(pid);
  ASSERT_TRUE(killed_by(status, SIGKILL)) << "child was not killed at exact_set.clean.locked (status " << status
                                          << ")";
  ExactSet set = ExactSet::open(seg, "s");
  auto* ack = reinterpret_cast<uint8_t*>(seg.base() + oracle.offset);
  uint64_t present = 0, acked = 0;
  for (uint64_t i = 0; i < pool; ++i) {
    const bool has = set.contains(keys[i]);
    present += has;
    if (ack[i] == kInsertAcked) {
      ++acked;
      ASSERT_TRUE(has) << "acknowledged insert of key #" << i << " lost";
    }
    if (ack[i] == kEraseAcked) {
      ASSERT_FALSE(has) << "acknowledged erase of key #" << i << " undone";
    }
    if (ack[i] == kNone) {
      ASSERT_FALSE(has) << "key #" << i << " was never inserted";
    }
  }
  EXPECT_GE(acked, live - 1) << "the child died before its churn filled the set";
  EXPECT_EQ(set.size(), present) << "size() drifted";
  // Every stripe was held by the dead child: the same churn from the parent (which
  // cleans again, taking every stripe lock) must finish with exact answers.
  const auto more = shmf_bench::distinct_keys(pool + 4000, 11);
  for (uint64_t i = pool; i < pool + 4000; ++i) {
    ASSERT_EQ(set.insert(more[i]), InsertResult::kInserted) << "insert after the kill, key #" << i;
    if (i >= pool + live) {
      ASSERT_TRUE(set.erase(more[i - live]));
    }
  }
  EXPECT_EQ(set.size(), present + live);
  CheckReport r = seg.check(false);
  for (const auto& f : r.findings)
    if (f.where.rfind("registry", 0) != 0 && f.problem.find("dead process") == std::string::npos)
      ADD_FAILURE() << f.where << ": " << f.problem;
}

INSTANTIATE_TEST_SUITE_P(
    Points, ExactSetKill,
    ::testing::Values(Case{"exact_set.insert.locked", false, 700}, Case{"exact_set.insert.after_intent", false, 900},
                      Case{"exact_set.insert.after_cas", false, 1100}, Case{"exact_set.insert.after_count", false, 1300},
                      Case{"exact_set.erase.after_intent", true, 400}, Case{"exact_set.erase.after_cas", true, 500},
                      Case{"exact_set.erase.after_count", true, 600}),
    [](const ::testing::TestParamInfo<Case>& i) {
      std::string s = i.param.point;
      for (auto& ch : s)
        if (ch == '.') ch = '_';
      return s;
    });
