// tests/multiprocess/test_roaring_crash.cpp: SIGKILL at every named kill point of RoaringSet
// (lib/structures/roaring/roaring.cpp), with an oracle outside the segment: a forked child
// reports each acknowledged write through a pipe before it is killed; the
// parent then checks that every acknowledged change is there, that the set
// stays readable, that the next compaction finishes or discards the dead
// one's work, and that dropping the set afterwards returns every byte.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/kill_point.h"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

CreateOptions seg_options() {
  CreateOptions o;
  o.size = 32ull << 20;
  o.max_size = 1ull << 30;
  o.directory_capacity = 64;
  return o;
}

RoaringOptions opts() {
  RoaringOptions o;
  o.delta_capacity = 1024;
  o.auto_compact = false;  // compactions happen where the test says
  return o;
}

struct Ack {
  int fd[2];
  Ack() { EXPECT_EQ(pipe(fd), 0); }
  ~Ack() {
    close(fd[0]);
    if (fd[1] >= 0) close(fd[1]);
  }
  // intent before the call, ack after it returned: a killed call leaves an
  // intent without an ack, and its value may end up either way.
  void send(uint32_t v, bool add, bool intent = false) const {
    uint64_t w = v | (uint64_t{add} << 32) | (uint64_t{intent} << 33);
    if (write(fd[1], &w, sizeof w) != sizeof w) _exit(9);
  }
  // Parent: the acknowledged writes in order (call after the child is reaped).
  // Acknowledged writes are (v, add); an unacknowledged intent is (v, -1).
  std::vector<std::pair<uint32_t, int>> drain() {
    close(fd[1]);
    fd[1] = -1;
    std::vector<std::pair<uint32_t, int>> out;
    uint64_t w;
    while (read(fd[0], &w, sizeof w) == sizeof w) {
      bool intent = (w >> 33) & 1;
      if (intent)
        out.emplace_back(static_cast<uint32_t>(w), -1);
      else
        out.back().second = static_cast<int>((w >> 32) & 1);  // the ack completes the intent before it
    }
    return out;
  }
};

// Runs a child that opens the set, performs `ops` writes (acknowledging each),
// and then runs `then` with the kill point armed. Returns the acknowledged log.
std::vector<std::pair<uint32_t, int>> run_killed_child(const std::string& seg_name, const char* point, uint64_t nth,
                                                        int ops, bool arm_before_writes,
                                                        const std::function<void(RoaringSet&)>& then) {
  Ack ack;
  pid_t child = shmf_test::fork_child([&] {
    Segment s = Segment::open(seg_name);
    RoaringSet rs = RoaringSet::open(s, "set");
    if (arm_before_writes) internal::arm_kill_point(point, nth);
    for (int i = 0; i < ops; ++i) {
      uint32_t v = static_cast<uint32_t>(i * 3);
      bool add = (i % 5) != 4;
      uint32_t w = add ? v : v / 2 * 2;
      ack.send(w, add, true);
      if ((add ? rs.add(w) : rs.remove(w)) != RoaringStatus::kOk) return 3;
      ack.send(w, add);
    }
    if (!arm_before_writes) internal::arm_kill_point(point, nth);
    then(rs);
    return 0;  // the kill point must fire before this
  });
  auto log = ack.drain();  // reads until the child's end closes: before waiting, so a full pipe cannot block the child
  int st = shmf_test::wait_status(child);
  EXPECT_TRUE(shmf_test::killed_by(st, SIGKILL)) << point << ": child was not killed at the kill point";
  return log;
}

// The last acknowledged write of every value must hold, unless a later
// unacknowledged (killed) write of the same value may have landed.
void expect_acknowledged(const RoaringSet& rs, const std::vector<std::pair<uint32_t, int>>& log) {
  std::map<uint32_t, int> last;
  for (auto [v, add] : log) last[v] = add;
  for (auto [v, add] : last) {
    if (add < 0) continue;
    ASSERT_EQ(rs.contains(v), add == 1) << "acknowledged " << (add ? "add" : "remove") << " of " << v << " lost";
  }
}

// check --repair: the dead child's registry slot is a repairable finding.
::testing::AssertionResult consistent(Segment& seg) {
  CheckReport r = seg.check(true);
  if (r.consistent()) return ::testing::AssertionSuccess();
  auto f = ::testing::AssertionFailure();
  for (const auto& x : r.findings) f << x.where << ": " << x.problem << (x.repaired ? " (repaired)" : "") << "; ";
  return f;
}

}  // namespace

TEST(RoaringCrash, KilledInsideAddAndRemove) {
  for (const char* point : {"roaring.add.after_commit", "roaring.remove.after_commit"}) {
    SegmentGuard g(unique_name("rck"));
    Segment seg = Segment::create(g.name, seg_options());
    RoaringSet::create(seg, "set", opts());
    auto log = run_killed_child(g.name, point, 40, 1000, true, [](RoaringSet&) {});
    ASSERT_GE(log.size(), 40u);
    EXPECT_EQ(log.back().second, -1) << "the 40th hit was killed before it returned";
    RoaringSet rs = RoaringSet::open(seg, "set");
    expect_acknowledged(rs, log);
    ASSERT_TRUE(rs.compact());
    expect_acknowledged(rs, log);
    EXPECT_TRUE(consistent(seg));
  }
}

TEST(RoaringCrash, KilledDuringCompactionIsFinishedByTheNext) {
  for (const char* point :
       {"roaring.compact.after_pack", "roaring.compact.after_build", "roaring.compact.after_publish",
        "roaring.compact.before_free"}) {
    SCOPED_TRACE(point);
    SegmentGuard g(unique_name("rcc"));
    Segment seg = Segment::create(g.name, seg_options());
    uint64_t used0 = seg.stats().used_bytes;
    RoaringSet::create(seg, "set", opts());
    auto log = run_killed_child(g.name, point, 1, 700, false, [](RoaringSet& rs) { rs.compact(); });
    ASSERT_EQ(log.size(), 700u);
    EXPECT_NE(log.back().second, -1);
    RoaringSet rs = RoaringSet::open(seg, "set");
    expect_acknowledged(rs, log);  // readable at once, nothing lost, whatever the dead compactor left
    // Integrity: a dead claim is reported (and repaired) by check.
    CheckReport rep = seg.check(false);
    bool dead_claim = false;
    for (const auto& f : rep.findings) dead_claim |= f.problem.find("dead process") != std::string::npos;
    EXPECT_TRUE(dead_claim) << "check must report the dead compactor's claim";
    // Writes go on while the claim is dead; the next compaction takes it over.
    std::vector<std::pair<uint32_t, int>> more;
    for (uint32_t v = 100000; v < 100300; ++v) {
      ASSERT_EQ(rs.add(v), RoaringStatus::kOk);
      more.emplace_back(v, 1);
    }
    ASSERT_TRUE(rs.compact());
    expect_acknowledged(rs, log);
    expect_acknowledged(rs, more);
    EXPECT_EQ(rs.stats().claim_owner, 0u);
    EXPECT_EQ(rs.stats().pending_free, 0u) << "retired snapshots were freed once unread";
    EXPECT_GE(rs.stats().compactions, 1u);
    EXPECT_TRUE(consistent(seg));
    // No extent leaked by the crash: dropping returns every byte.
    rs = RoaringSet();
    EXPECT_TRUE(RoaringSet::drop(seg, "set"));
    EXPECT_EQ(seg.stats().used_bytes, used0) << point;
  }
}

// The writer whose delta is full takes over a dead compactor's claim itself.
TEST(RoaringCrash, FullDeltaTakesOverDeadClaim) {
  SegmentGuard g(unique_name("rcf"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringOptions o = opts();
  o.delta_capacity = 64;
  RoaringSet::create(seg, "set", o);
  auto log = run_killed_child(g.name, "roaring.compact.after_build", 1, 50, false,
                              [](RoaringSet& rs) { rs.compact(); });
  RoaringSet rs = RoaringSet::open(seg, "set");
  // 64 slots, 90% bound: these writes fill the delta and force compactions
  // through the dead claim.
  for (uint32_t v = 200000; v < 200500; ++v) ASSERT_EQ(rs.add(v), RoaringStatus::kOk) << v;
  for (uint32_t v = 200000; v < 200500; ++v) ASSERT_TRUE(rs.contains(v));
  expect_acknowledged(rs, log);
  EXPECT_TRUE(consistent(seg));
}

// Repeated random kills of a writer+compactor child; the parent's oracle is
// the acknowledgement log of every child so far.
TEST(RoaringCrash, RandomKillsLoseNothingAcknowledged) {
  SegmentGuard g(unique_name("rcr"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringOptions o = opts();
  o.delta_capacity = 128;
  o.auto_compact = true;
  RoaringSet::create(seg, "set", o);
  std::vector<std::pair<uint32_t, int>> all;
  const char* points[] = {"roaring.add.after_commit",      "roaring.remove.after_commit", "roaring.compact.after_build",
                          "roaring.compact.after_publish", "roaring.compact.before_free", "roaring.link.after_alloc",
                          "roaring.link.after_link",       "roaring.compact.after_pack"};
  constexpr int kPoints = static_cast<int>(sizeof points / sizeof points[0]);
  for (int round = 0; round < 3 * kPoints; ++round) {
    Ack ack;
    const char* point = points[round % kPoints];
    pid_t child = shmf_test::fork_child([&] {
      Segment s = Segment::open(g.name);
      RoaringSet rs = RoaringSet::open(s, "set");
      internal::arm_kill_point(point, 3 + static_cast<uint64_t>(round));
      for (uint32_t i = 0; i < 5000; ++i) {
        uint32_t v = (i * 2654435761u + static_cast<uint32_t>(round)) % 20000;
        bool add = (i + static_cast<uint32_t>(round)) % 3 != 0;
        ack.send(v, add, true);
        if ((add ? rs.add(v) : rs.remove(v)) != RoaringStatus::kOk) return 3;
        ack.send(v, add);
      }
      return 0;
    });
    auto log = ack.drain();  // until the child's end closes (a child the kill point missed writes 10,000 words: more than a pipe holds)
    shmf_test::wait_status(child);
    all.insert(all.end(), log.begin(), log.end());
    RoaringSet rs = RoaringSet::open(seg, "set");
    expect_acknowledged(rs, all);
  }
  RoaringSet rs = RoaringSet::open(seg, "set");
  ASSERT_TRUE(rs.compact());
  expect_acknowledged(rs, all);
  EXPECT_TRUE(consistent(seg));
}

// Issue 16: the delta grows inside the compaction's transaction. A writer
// killed there (roaring.delta.grow, between the snapshot's and the bigger
// delta's allocation) leaves nothing half-made: the segment's recovery rolls
// the transaction back, every acknowledged write is still there, the next
// compaction takes over the dead claim and grows the delta itself, and
// dropping the set returns every byte.
TEST(RoaringCrash, KilledWhileGrowingTheDelta) {
  SegmentGuard g(unique_name("rcg"));
  Segment seg = Segment::create(g.name, seg_options());
  uint64_t used0 = seg.stats().used_bytes;
  RoaringOptions o;
  o.delta_capacity = 1u << 16;
  o.auto_compact = true;
  RoaringSet::create(seg, "set", o);
  Ack ack;
  pid_t child = shmf_test::fork_child([&] {
    Segment s = Segment::open(g.name);
    RoaringSet rs = RoaringSet::open(s, "set");
    internal::arm_kill_point("roaring.delta.grow", 2);  // the second growth
    for (uint32_t v = 0; v < 20000; ++v) {
      ack.send(v * 5, true, true);
      if (rs.add(v * 5) != RoaringStatus::kOk) return 3;
      ack.send(v * 5, true);
    }
    return 0;  // the kill point must fire before this (the delta grows within the first thousand values)
  });
  auto log = ack.drain();  // before waiting: a child that ran to the end writes more than a pipe holds
  int st = shmf_test::wait_status(child);
  ASSERT_TRUE(shmf_test::killed_by(st, SIGKILL)) << "child was not killed at roaring.delta.grow";
  ASSERT_GT(log.size(), 100u) << "two growths need more than 64 values";
  RoaringSet rs = RoaringSet::open(seg, "set");
  expect_acknowledged(rs, log);
  const auto before = rs.stats();
  EXPECT_GT(before.delta_capacity, 64u) << "the first growth published";
  EXPECT_NE(before.claim_owner, 0u) << "the killed growth left its (dead) claim";
  for (uint32_t v = 1000000; v < 1040000; ++v) ASSERT_EQ(rs.add(v), RoaringStatus::kOk) << v;
  const auto after = rs.stats();
  EXPECT_GT(after.compactions, before.compactions) << "compactions went on through the dead claim";
  EXPECT_GT(after.delta_capacity, before.delta_capacity) << "and grew the delta (40,000 more values: >= 2,500 slots)";
  expect_acknowledged(rs, log);
  EXPECT_TRUE(consistent(seg));
  rs = RoaringSet();
  EXPECT_TRUE(RoaringSet::drop(seg, "set"));
  EXPECT_EQ(seg.stats().used_bytes, used0) << "no extent leaked by the killed growth";
}

// Issue 16: a writer whose delta passes compact_at links a newer table (two
// small transactions around one store of the tail's `next`). Killed after
// the allocation committed but before the link (roaring.link.after_alloc),
// the table is unreachable and the next claimer frees it; killed after the
// link (roaring.link.after_link), it is in the chain and the next claimer
// only clears the staging. Either way every acknowledged write is there,
// writes go on through the dead claim, check is clean and dropping the set
// returns every byte.
TEST(RoaringCrash, KilledWhileLinkingADelta) {
  for (const char* point : {"roaring.link.after_alloc", "roaring.link.after_link"}) {
    SCOPED_TRACE(point);
    SegmentGuard g(unique_name("rcl"));
    Segment seg = Segment::create(g.name, seg_options());
    uint64_t used0 = seg.stats().used_bytes;
    RoaringOptions o;  // defaults: head 64 slots, links of 128, 256, 512
    RoaringSet::create(seg, "set", o);
    auto log = run_killed_child(g.name, point, 2, 400, true, [](RoaringSet&) {});  // the second link (at 96 values)
    ASSERT_GE(log.size(), 96u);
    EXPECT_EQ(log.back().second, -1) << "killed inside the add that linked";
    RoaringSet rs = RoaringSet::open(seg, "set");
    expect_acknowledged(rs, log);
    const auto before = rs.stats();
    EXPECT_NE(before.link_claim_owner, 0u) << "the killed link left its (dead) link claim";
    EXPECT_EQ(before.claim_owner, 0u) << "linking takes no compaction claim";
    EXPECT_EQ(before.delta_tables, std::string(point) == "roaring.link.after_link" ? 3u : 2u);
    std::vector<std::pair<uint32_t, int>> more;
    for (uint32_t v = 100000; v < 100300; ++v) {
      ASSERT_EQ(rs.add(v), RoaringStatus::kOk) << v;
      more.emplace_back(v, 1);
    }
    const auto after = rs.stats();
    EXPECT_EQ(after.link_claim_owner, 0u) << "the next link took the dead link claim over";
    EXPECT_GT(after.delta_links, before.delta_links);
    expect_acknowledged(rs, log);
    expect_acknowledged(rs, more);
    EXPECT_TRUE(consistent(seg));
    ASSERT_TRUE(rs.maintain());
    expect_acknowledged(rs, log);
    expect_acknowledged(rs, more);
    rs.reclaim();
    EXPECT_TRUE(consistent(seg));
    rs = RoaringSet();
    EXPECT_TRUE(RoaringSet::drop(seg, "set"));
    EXPECT_EQ(seg.stats().used_bytes, used0) << "no extent leaked by the killed link";
  }
}

// The torture found a dead linker's claim with its table still staged that `check --repair`
// reported but left (the next linker would have taken it over), so the check after the repair
// still failed. --repair now takes it over itself (as maintain() does): frees or keeps the table.
TEST(RoaringCrash, CheckRepairTakesOverADeadLinkClaim) {
  for (const char* point : {"roaring.link.after_alloc", "roaring.link.after_link"}) {
    SCOPED_TRACE(point);
    SegmentGuard g(unique_name("rcr"));
    Segment seg = Segment::create(g.name, seg_options());
    uint64_t used0 = seg.stats().used_bytes;
    RoaringSet::create(seg, "set", RoaringOptions{});
    auto log = run_killed_child(g.name, point, 2, 400, true, [](RoaringSet&) {});
    ASSERT_GE(log.size(), 96u);
    {
      RoaringSet rs = RoaringSet::open(seg, "set");
      ASSERT_NE(rs.stats().link_claim_owner, 0u) << "the killed link left its (dead) link claim";
    }
    shmfilter::CheckReport fix = seg.check(true);
    bool saw = false;
    for (const auto& f : fix.findings)
      if (f.problem.find("delta link claim held by a dead process") != std::string::npos) {
        saw = true;
        EXPECT_TRUE(f.repaired) << f.problem;
      }
    EXPECT_TRUE(saw) << "check reports the dead link claim";
    EXPECT_TRUE(seg.check(false).consistent()) << "nothing left after the repair";
    RoaringSet rs = RoaringSet::open(seg, "set");
    EXPECT_EQ(rs.stats().link_claim_owner, 0u);
    expect_acknowledged(rs, log);
    for (uint32_t v = 100000; v < 100300; ++v) ASSERT_EQ(rs.add(v), RoaringStatus::kOk) << v;
    expect_acknowledged(rs, log);
    rs.reclaim();
    EXPECT_TRUE(consistent(seg));
    rs = RoaringSet();
    EXPECT_TRUE(RoaringSet::drop(seg, "set"));
    seg.quiesce();
    EXPECT_EQ(seg.stats().used_bytes, used0) << "no extent leaked by the killed link or the repair";
  }
}
