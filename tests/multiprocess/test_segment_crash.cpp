// tests/multiprocess/test_segment_crash.cpp: real processes, SIGKILLed at named kill points
// of the control plane; the survivors must proceed, consistent and leak-free.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "base/kill_point.h"
#include "base/wait_stats.h"
#include "shmfilter/segment.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::fork_child;
using shmf_test::killed_by;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;
using shmf_test::wait_status;

namespace {

using shmf_test::small_options;

// Every byte below top is accounted and nothing is leaked. Dead processes'
// registry slots are expected findings (the test kills processes); --repair
// releases them and a second run must find nothing at all.
void expect_clean(Segment& s) {
  CheckReport r = s.check(false);
  for (const auto& f : r.findings)
    if (f.where.rfind("registry", 0) != 0 && !f.repaired)
      ADD_FAILURE() << f.where << ": " << f.problem;
  s.check(true);
  r = s.check(false);
  for (const auto& f : r.findings) ADD_FAILURE() << "after repair: " << f.where << ": " << f.problem;
}

}  // namespace

// A child killed at each point of create_region / drop / allocate / free:
// the parent takes the lock at once, sees either all or nothing of the
// operation, and the allocator is exactly as before.
class KillPoint : public ::testing::TestWithParam<const char*> {};

TEST_P(KillPoint, ParentRecoversAndNothingLeaks) {
  const char* point = GetParam();
  SegmentGuard g(unique_name("kp"));
  Segment s = Segment::create(g.name, small_options());
  s.create_region("victim", Kind::kBlob, 5000, {});
  RegionInfo meta = s.create_region("meta", Kind::kBlob, 64, {});
  s.quiesce();
  SegmentStats before = s.stats();
  pid_t pid = fork_child([&] {
    Segment c = Segment::open(g.name);
    std::string spec = point;  // "name" or "name:nth" (die at the nth hit)
    uint64_t nth = 1;
    if (auto colon = spec.find(':'); colon != std::string::npos) {
      nth = std::stoull(spec.substr(colon + 1));
      spec.resize(colon);
    }
    internal::arm_kill_point(spec.c_str(), nth);
    // Each op below reaches a subset of the points; the first one armed kills us.
    c.create_region("newcomer", Kind::kBlob, 8ull << 20 /* grows the backing */, [](std::byte*, uint64_t, ControlTxn& txn) {
      txn.allocate(3000);  // an extra extent of the structure
    });
    c.drop("victim");
    c.transact([&](ControlTxn& txn) {
      uint64_t o = txn.allocate(777);
      txn.store_u64(reinterpret_cast<uint64_t*>(c.base() + meta.offset), o);
      txn.free(o);
    });
    return 3;  // not killed: the point was not reached
  });
  int status = wait_status(pid);
  ASSERT_TRUE(killed_by(status, SIGKILL)) << point << " was not reached (status " << status << ")";
  // Takes the lock and rolls the dead holder back at once (the robust mutex answers
  // EOWNERDEAD). Waiting on the dead holder instead would sit out the lock's 30 s
  // bound, count an expired wait and throw kBusy: checked without a wall clock.
  const uint64_t expired = shmfilter::internal::wait_snapshot().expired;
  ASSERT_NO_THROW(s.transact([](ControlTxn&) {}));
  EXPECT_EQ(shmfilter::internal::wait_snapshot().expired, expired) << "the parent must not wait on a dead holder";
  // All-or-nothing per committed operation: the directory is a prefix of the child's ops.
  bool has_new = s.find("newcomer").has_value();
  bool has_victim = s.find("victim").has_value();
  EXPECT_TRUE(has_victim || has_new) << "drop committed before create_region?";
  expect_clean(s);
  // The dead child's registry slot reads dead; the unfinished op left no bytes behind.
  SegmentStats after = s.stats();
  if (!has_new && has_victim) {
    EXPECT_EQ(after.used_bytes, before.used_bytes) << point;
  }
  EXPECT_EQ(after.processes_alive, 1u);
  // The segment keeps working: create, drop and reuse.
  EXPECT_NO_THROW(s.create_region("later", Kind::kBlob, 1000, {}));
  EXPECT_TRUE(s.drop("later"));
  expect_clean(s);
}

INSTANTIATE_TEST_SUITE_P(Segment, KillPoint,
                         ::testing::Values("segment.allocate.after_take", "segment.create_region.after_allocate",
                                           "segment.create_region.before_publish",
                                           "segment.create_region.after_publish", "segment.drop.after_on_drop",
                                           "segment.drop.after_unpublish", "segment.free.after_quarantine",
                                           "segment.drop.after_free", "segment.grow.after_fallocate",
                                           // later hits: the init's extra extent, the transaction's
                                           // allocation, the transaction's free
                                           "segment.txn.before_commit", "segment.txn.before_commit:3",
                                           "segment.allocate.after_take:2", "segment.allocate.after_take:3",
                                           "segment.free.after_quarantine:2"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (auto& c : n)
                             if (c == '.' || c == ':') c = '_';
                           return n;
                         });

// Of 8 processes creating the same name at once, exactly one creates it.
TEST(SegmentMultiProcess, ConcurrentCreateExactlyOneWins) {
  SegmentGuard g(unique_name("race"));
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    kids.push_back(fork_child([&] {
      char c;
      if (read(pipefd[0], &c, 1) != 1) return 9;  // start together
      try {
        Segment s = Segment::create(g.name, small_options());
        s.create_region("winner", Kind::kBlob, 64, {});
        return 0;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kExists) return 8;
      }
      Segment o = Segment::open_or_create(g.name, small_options());
      return o ? 1 : 7;
    }));
  }
  for (int i = 0; i < 8; ++i) ASSERT_EQ(write(pipefd[1], "g", 1), 1);
  int created = 0, opened = 0;
  for (pid_t k : kids) {
    int st = wait_status(k);
    ASSERT_TRUE(WIFEXITED(st));
    if (WEXITSTATUS(st) == 0) ++created;
    if (WEXITSTATUS(st) == 1) ++opened;
  }
  close(pipefd[0]);
  close(pipefd[1]);
  EXPECT_EQ(created, 1);
  EXPECT_EQ(opened, 7);
  Segment s = Segment::open(g.name);
  EXPECT_TRUE(s.find("winner").has_value());
}

// A creator killed before linking leaves nothing; after linking, a complete segment.
TEST(SegmentMultiProcess, KilledCreatorLeavesNothingOrAWholeSegment) {
  SegmentGuard g(unique_name("kc"));
  pid_t pid = fork_child([&] {
    internal::arm_kill_point("segment.create.before_link");
    Segment::create(g.name, small_options());
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  EXPECT_FALSE(Segment::exists(g.name));
  pid = fork_child([&] {
    internal::arm_kill_point("segment.create.after_link");
    Segment::create(g.name, small_options());
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  Segment s = Segment::open(g.name);
  expect_clean(s);
}

// A killed attached process disappears from the registry: the kernel drops
// its OFD lock; nothing asks kill(pid, 0).
TEST(SegmentMultiProcess, KilledProcessLeavesRegistry) {
  SegmentGuard g(unique_name("reg"));
  Segment s = Segment::create(g.name, small_options());
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork_child([&] {
    Segment c = Segment::open(g.name);
    uint64_t t = c.owner_token();
    if (write(pipefd[1], &t, sizeof t) != sizeof t) return 1;
    pause();
    return 0;
  });
  uint64_t token = 0;
  ASSERT_EQ(read(pipefd[0], &token, sizeof token), static_cast<ssize_t>(sizeof token));
  EXPECT_TRUE(s.token_alive(token));
  EXPECT_EQ(s.stats().processes_alive, 2u);
  kill(pid, SIGKILL);
  wait_status(pid);
  EXPECT_FALSE(s.token_alive(token));
  EXPECT_EQ(s.stats().processes_alive, 1u);
  // check --repair releases the stale slot; a second run finds nothing.
  CheckReport r = s.check(true);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_TRUE(r.findings[0].repaired);
  EXPECT_TRUE(s.check(false).findings.empty());
  EXPECT_EQ(s.processes().size(), 1u);
  close(pipefd[0]);
  close(pipefd[1]);
}

// Killed between growing the file and publishing the size, or between
// publishing a smaller size and truncating: the file is never shorter than
// the header says, and the next resize works.
TEST(SegmentMultiProcess, KilledDuringResize) {
  SegmentGuard g(unique_name("rs"));
  Segment s = Segment::create(g.name, small_options());
  const uint64_t size0 = s.size();
  pid_t pid = fork_child([&] {
    Segment c = Segment::open(g.name);
    internal::arm_kill_point("segment.resize.after_grow");
    c.resize(size0 + (8u << 20));
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  EXPECT_EQ(s.size(), size0);  // not published
  expect_clean(s);
  s.resize(size0 + (16u << 20));
  EXPECT_EQ(s.size(), size0 + (16u << 20));
  {  // dirty the grown space through a region, then free it again
    RegionInfo d = s.create_region("dirt", Kind::kBlob, 14u << 20, {});
    std::memset(s.base() + d.offset, 0xee, d.size);
    s.drop("dirt");
    s.quiesce();
    s.transact([](ControlTxn&) {});  // reclaim happens on demand; force it through an allocation
    s.transact([](ControlTxn& txn) { txn.free(txn.allocate(64)); });
    s.quiesce();
    s.transact([](ControlTxn& txn) { txn.free(txn.allocate(64)); });
  }
  pid = fork_child([&] {
    Segment c = Segment::open(g.name);
    internal::arm_kill_point("segment.resize.before_truncate");
    c.resize(size0);
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  EXPECT_EQ(s.size(), size0);  // published before the truncate
  expect_clean(s);
  Segment fresh = Segment::open(g.name);  // the longer file is fine
  RegionInfo r = s.create_region("after", Kind::kBlob, 12u << 20, {});
  // The bytes above the shrunk size were never truncated (the shrinker died):
  // regrowth must still hand out zeroed memory.
  for (uint64_t i = 0; i < r.size; i += 512) ASSERT_EQ(s.base()[r.offset + i], std::byte{0}) << i;
  std::memset(s.base() + r.offset, 3, r.size);
  expect_clean(s);
}

// check() itself takes the control lock: a dead holder's transaction is rolled
// back then, and reported as a repaired finding (the lock cannot be left
// owner-dead without making it unusable, so even a read-only check repairs it).
TEST(SegmentMultiProcess, CheckReportsRolledBackTransaction) {
  SegmentGuard g(unique_name("chk"));
  Segment s = Segment::create(g.name, small_options());
  pid_t pid = fork_child([&] {
    Segment c = Segment::open(g.name);
    internal::arm_kill_point("segment.create_region.before_publish");
    c.create_region("half", Kind::kBlob, 4096, {});
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  CheckReport r = s.check(false);
  bool rolled_back = false;
  for (const auto& f : r.findings)
    if (f.where == "control lock") {
      rolled_back = true;
      EXPECT_TRUE(f.repaired);
      EXPECT_NE(f.problem.find("rolled back"), std::string::npos) << f.problem;
    }
  EXPECT_TRUE(rolled_back);
  EXPECT_FALSE(s.find("half").has_value());
  s.check(true);
  EXPECT_TRUE(s.check(false).findings.empty());
}

// What a lock-free reader saw of a dead holder's create/drop stays true after
// recovery: the directory store is the transaction's commit point, so a death
// after it completes the transaction, and a death before it leaves nothing
// visible. (Found by the torture sweep: a drop killed right after its unpublish
// was rolled back, resurrecting a structure another process had already seen
// gone.)
TEST(SegmentMultiProcess, ReadersNeverSeeADeadTransactionUndone) {
  struct Case {
    const char* point;
    bool create;         // the child creates "x" (else it drops "x")
    bool visible_after;  // "x" exists once the child is dead
  };
  const Case cases[] = {
      {"segment.create_region.before_publish", true, false},
      {"segment.create_region.after_publish", true, true},
      {"segment.txn.before_commit", true, true},
      {"segment.drop.after_on_drop", false, true},
      {"segment.drop.after_free", false, true},
      {"segment.drop.after_unpublish", false, false},
      {"segment.txn.before_commit", false, false},
  };
  for (const Case& c : cases) {
    SegmentGuard g(unique_name("vis"));
    Segment s = Segment::create(g.name, small_options());
    if (!c.create) s.create_region("x", Kind::kBlob, 1000, {});
    pid_t pid = fork_child([&] {
      Segment w = Segment::open(g.name);
      internal::arm_kill_point(c.point);
      if (c.create)
        w.create_region("x", Kind::kBlob, 1000, {});
      else
        w.drop("x", [](std::byte*, uint64_t, ControlTxn& txn) { txn.allocate(64); });
      return 3;
    });
    ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL)) << c.point;
    // Before anyone takes the lock (no recovery yet): what a reader sees now...
    EXPECT_EQ(s.find("x").has_value(), c.visible_after) << c.point << (c.create ? " create" : " drop");
    s.transact([](ControlTxn&) {});  // ...is what recovery keeps
    EXPECT_EQ(s.find("x").has_value(), c.visible_after) << c.point << (c.create ? " create" : " drop") << " after recovery";
    expect_clean(s);
  }
}
