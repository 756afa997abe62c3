// tests/unit/test_hll.cpp: the Hll handle in a segment: multi-process adds, merge
// into a named HLL and into a count, clear, drop, kill points, check.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "structures/hll/hll_impl.h"
#include "base/kill_point.h"
#include "shmfilter/hll.hpp"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter;
using shmf_test::exited_ok;
using shmf_test::fork_child;
using shmf_test::killed_by;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;
using shmf_test::wait_status;

namespace {
const double kSe = 1.04 / std::sqrt(16384.0);  // 0.8125%

void expect_clean(Segment& s) {
  CheckReport r = s.check(false);
  for (const auto& f : r.findings)
    if (f.where.rfind("registry", 0) != 0) ADD_FAILURE() << f.where << ": " << f.problem;
}
}  // namespace

TEST(Hll, AddCountOpenDrop) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll h = Hll::create(seg, "uv:plan1:2026-11-30");
  EXPECT_EQ(h.count(), 0u);
  auto keys = shmf_bench::distinct_keys(100000, 2);
  EXPECT_GT(h.add_many(keys), 0u);
  EXPECT_LE(std::fabs(static_cast<double>(h.count()) - 1e5) / 1e5, 3 * kSe);  // bound: 3 standard errors
  EXPECT_EQ(h.add_many(keys), 0u) << "re-adding the same keys changes no register";
  Hll again = Hll::open(seg, "uv:plan1:2026-11-30");
  EXPECT_EQ(again.count(), h.count());
  HllStats st = h.stats();
  EXPECT_EQ(st.registers, 16384u);
  EXPECT_LE(st.max_register, 51u);
  EXPECT_EQ(st.bytes, 13240u);  // 128-byte header (layout 2: count cache) + 1639 words
  EXPECT_THROW(Hll::create(seg, "uv:plan1:2026-11-30"), Error);
  EXPECT_TRUE(Hll::drop(seg, "uv:plan1:2026-11-30"));
  EXPECT_FALSE(h.valid());
  EXPECT_FALSE(h.add(uint64_t{1}));
  EXPECT_EQ(h.count(), 0u);
  EXPECT_THROW(h.export_redis(), Error);
  EXPECT_THROW(Hll::open(seg, "uv:plan1:2026-11-30"), Error);
}

// Four processes add disjoint quarters concurrently: the registers equal
// those of one process adding everything (atomic max loses nothing).
TEST(Hll, ConcurrentAddsFromProcessesLoseNothing) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll shared = Hll::create(seg, "shared");
  Hll solo = Hll::create(seg, "solo");
  auto keys = shmf_bench::distinct_keys(400000, 3);
  std::vector<pid_t> kids;
  for (int p = 0; p < 4; ++p)
    kids.push_back(fork_child([&, p] {
      Segment s2 = Segment::open(g.name);
      Hll h = Hll::open(s2, "shared");
      for (size_t i = p; i < keys.size(); i += 4) h.add(keys[i]);
      return 0;
    }));
  solo.add_many(keys);
  for (pid_t k : kids) ASSERT_TRUE(exited_ok(wait_status(k)));
  EXPECT_EQ(shared.registers(), solo.registers());
  expect_clean(seg);
}

// 7 daily HLLs: merge into a named weekly HLL == count_union == HLL of the union.
TEST(Hll, SevenDayMerge) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  std::vector<Hll> days;
  Hll uni = Hll::create(seg, "union");
  for (int d = 0; d < 7; ++d) {
    days.push_back(Hll::create(seg, "uv:day" + std::to_string(d)));
    for (uint64_t i = 0; i < 50000; ++i) {
      uint64_t k = d * 30000ull + i;  // consecutive days overlap by 20000
      days.back().add(k);
      uni.add(k);
    }
  }
  Hll week = Hll::create(seg, "uv:week");
  week.merge_from(days);
  EXPECT_EQ(week.registers(), uni.registers());
  EXPECT_EQ(Hll::count_union(days), uni.count());
  double truth = 6 * 30000 + 50000;
  EXPECT_LE(std::fabs(static_cast<double>(week.count()) - truth) / truth, 3 * kSe);
  week.merge_from(days);  // idempotent
  EXPECT_EQ(week.registers(), uni.registers());
}

// A merge killed midway leaves a partial (valid) merge; running it again completes it.
TEST(Hll, KilledMergeCompletesOnRerun) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll a = Hll::create(seg, "a");
  Hll into = Hll::create(seg, "into");
  a.add_many(shmf_bench::distinct_keys(200000, 4));
  pid_t pid = fork_child([&] {
    Segment s2 = Segment::open(g.name);
    std::vector<Hll> src{Hll::open(s2, "a")};
    Hll dst = Hll::open(s2, "into");
    internal::arm_kill_point("hll.merge.midway");
    dst.merge_from(src);
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  EXPECT_NE(into.registers(), a.registers()) << "half merged";
  expect_clean(seg);
  std::vector<Hll> src{a};
  into.merge_from(src);
  EXPECT_EQ(into.registers(), a.registers());
}

// clear(): zero registers; a clear killed midway is reported by check and
// finished by running clear again.
TEST(Hll, ClearAndKilledClear) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll h = Hll::create(seg, "h");
  h.add_many(shmf_bench::distinct_keys(10000, 5));
  h.clear();
  EXPECT_EQ(h.count(), 0u);
  h.add_many(shmf_bench::distinct_keys(10000, 5));
  pid_t pid = fork_child([&] {
    Segment s2 = Segment::open(g.name);
    Hll c = Hll::open(s2, "h");
    internal::arm_kill_point("hll.clear.after_token");
    c.clear();
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  CheckReport r = seg.check(false);
  bool reported = false;
  for (const auto& f : r.findings) reported |= f.problem.find("clear()") != std::string::npos;
  EXPECT_TRUE(reported) << "check reports the interrupted clear";
  seg.check(true);
  expect_clean(seg);
  h.clear();
  EXPECT_EQ(h.count(), 0u);
}

TEST(Hll, ImportRejectsGarbageAndOpenChecksKind) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll h = Hll::create(seg, "h");
  try {
    h.import_redis("definitely not an HLL");
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find("HYLL"), std::string::npos);
  }
  seg.create_region("blob", Kind::kBlob, 64, {});
  EXPECT_THROW(Hll::open(seg, "blob"), Error);
  // Export/import roundtrip through the Redis encoding is register-exact.
  h.add_many(shmf_bench::distinct_keys(30000, 6));
  Hll copy = Hll::create(seg, "copy");
  copy.import_redis(h.export_redis());
  EXPECT_EQ(copy.registers(), h.registers());
  EXPECT_EQ(Hll::count_redis(h.export_redis()), h.count());
}

// check_hll finds a register above 51 (impossible for the hash) and stray bits;
// --repair clamps them.
TEST(Hll, CheckFindsImpossibleRegisters) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll h = Hll::create(seg, "h");
  h.add_many(shmf_bench::distinct_keys(1000, 8));
  expect_clean(seg);
  RegionInfo info = *seg.find("h");
  auto* words = reinterpret_cast<uint64_t*>(seg.base() + info.offset + sizeof(internal::hll::HllHeader));
  words[5] |= uint64_t{63} << 12;  // register 52 := 63
  words[9] |= uint64_t{1} << 62;   // a spare bit
  CheckReport r = seg.check(false);
  bool found = false;
  for (const auto& f : r.findings) found |= f.problem.find("> 51") != std::string::npos;
  EXPECT_TRUE(found);
  seg.check(true);
  expect_clean(seg);
  EXPECT_EQ(h.registers()[52], 51);
}

// Adders SIGKILLed at random moments: every acknowledged add is reflected
// (re-adding it grows no register) and every register is valid (check clean).
TEST(Hll, AddersKilledAtRandomLoseNothingAcknowledged) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll h = Hll::create(seg, "h");
  const uint64_t n = 2000000;
  RegionInfo progress = seg.create_region("progress", Kind::kBlob, 64 * 3, {});
  auto keys = shmf_bench::distinct_keys(n, 12);
  shmf_bench::Rng rng(5);
  for (int p = 0; p < 3; ++p) {
    pid_t pid = fork_child([&, p] {
      Segment s2 = Segment::open(g.name);
      Hll c = Hll::open(s2, "h");
      std::atomic_ref<uint64_t> done(*reinterpret_cast<uint64_t*>(s2.base() + progress.offset + 64 * p));
      for (uint64_t i = p; i < n; i += 3) {
        c.add(keys[i]);
        done.store(i + 1);  // keys[p], keys[p+3], ... < i+1 are acknowledged
      }
      while (true) c.add(keys[rng.below(n)]);  // keep adding until killed
      return 0;
    });
    // The kill lands 2..22 ms after the child's first acknowledged add (by progress: on a
    // loaded machine the child may not run for a while; a child that died is reported below).
    std::atomic_ref<uint64_t> done(*reinterpret_cast<uint64_t*>(seg.base() + progress.offset + 64 * p));
    auto ended = [pid] {  // without reaping it: wait_status below does
      siginfo_t si{};
      return waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
    };
    for (int i = 0; i < 600000 && done.load() == 0 && !ended(); ++i) usleep(100);
    usleep(static_cast<useconds_t>(2000 + rng.below(20000)));
    kill(pid, SIGKILL);
    ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  }
  for (int p = 0; p < 3; ++p) {
    uint64_t acked = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(seg.base() + progress.offset + 64 * p)).load();
    for (uint64_t i = p; i < acked; i += 3) ASSERT_FALSE(h.add(keys[i])) << "acknowledged add of key " << i << " lost";
  }
  expect_clean(seg);
}

// ---- count cache (layout 2, docs/hll.md "Count cache") ----------------------------

namespace {
internal::hll::HllCountSync& sync_of(Segment& seg, const char* name) {
  return reinterpret_cast<internal::hll::HllHeader*>(seg.base() + seg.find(name)->offset)->sync;
}
}  // namespace

// Golden bytes of the count-cache line: counters bracket every register change,
// the cache word is tag << 36 | (estimate + 1).
TEST(HllCountCache, GoldenCounterAndCacheWords) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll h = Hll::create(seg, "h");
  auto& s = sync_of(seg, "h");
  EXPECT_EQ(s.begins, 0u);
  EXPECT_EQ(s.ends, 0u);
  EXPECT_EQ(s.count_cache, 0u) << "created empty";
  EXPECT_FALSE(h.stats().count_cached);
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(s.count_cache, 1u) << "tag 0, estimate 0 + 1";
  EXPECT_TRUE(h.stats().count_cached);
  EXPECT_TRUE(h.add(uint64_t{42}));  // grows one register: one bracket
  EXPECT_EQ(s.begins, 1u);
  EXPECT_EQ(s.ends, 1u);
  EXPECT_FALSE(h.stats().count_cached) << "a grown register invalidates the cache";
  EXPECT_FALSE(h.add(uint64_t{42}));  // grows nothing: no bracket, no write
  EXPECT_EQ(s.begins, 1u);
  EXPECT_EQ(h.count(), 1u);
  EXPECT_EQ(s.count_cache, (uint64_t{1} << 36) | 2u) << "tag 1, estimate 1 + 1";
  EXPECT_EQ(h.stats().changes_in_flight, 0u);
}

// Every kind of register change (add, add_many, merge, import, clear), made by
// this process or another, invalidates the cached count: after each, count()
// equals the estimate recomputed from the registers (stats().estimate).
TEST(HllCountCache, EveryChangeFromAnyProcessInvalidates) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll h = Hll::create(seg, "h");
  Hll other = Hll::create(seg, "other");
  auto expect_exact = [&](const char* after) {
    const uint64_t c1 = h.count();
    EXPECT_EQ(c1, h.stats().estimate) << "after " << after;
    EXPECT_TRUE(h.stats().count_cached) << "after " << after;
    EXPECT_EQ(h.count(), c1) << "cached answer after " << after;
  };
  h.add_many(shmf_bench::distinct_keys(5000, 21));
  expect_exact("add_many");
  uint64_t before = h.count();
  for (uint64_t i = 0; h.count() == before; ++i) h.add(shmf_bench::distinct_keys(1, 1000 + i)[0]);
  expect_exact("single adds");
  other.add_many(shmf_bench::distinct_keys(20000, 22));
  Hll srcs[1] = {other};
  before = h.count();
  h.merge_from(srcs);
  EXPECT_NE(h.count(), before);
  expect_exact("merge_from");
  Hll third = Hll::create(seg, "third");
  third.add_many(shmf_bench::distinct_keys(50000, 23));
  before = h.count();
  h.import_redis(third.export_redis());
  EXPECT_NE(h.count(), before);
  expect_exact("import_redis");
  // Another process adds; this process's next count sees it.
  before = h.count();
  pid_t pid = fork_child([&] {
    Segment s2 = Segment::open(g.name);
    Hll c = Hll::open(s2, "h");
    c.add_many(shmf_bench::distinct_keys(30000, 24));
    return 0;
  });
  ASSERT_TRUE(exited_ok(wait_status(pid)));
  EXPECT_NE(h.count(), before) << "a stale cached count survived another process's adds";
  expect_exact("another process's adds");
  h.clear();
  EXPECT_EQ(h.count(), 0u);
  expect_exact("clear");
}

// Processes add while others count in a loop (every count may write the
// cache); once all stop, the count equals the registers' estimate.
TEST(HllCountCache, CountersRacingAddersEndExact) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll h = Hll::create(seg, "h");
  auto keys = shmf_bench::distinct_keys(300000, 25);
  std::vector<pid_t> kids;
  for (int p = 0; p < 2; ++p)
    kids.push_back(fork_child([&, p] {
      Segment s2 = Segment::open(g.name);
      Hll c = Hll::open(s2, "h");
      for (size_t i = p; i < keys.size(); i += 2) c.add(keys[i]);
      return 0;
    }));
  kids.push_back(fork_child([&] {
    Segment s2 = Segment::open(g.name);
    Hll c = Hll::open(s2, "h");
    for (int i = 0; i < 3000; ++i) (void)c.count();
    return 0;
  }));
  for (int i = 0; i < 3000; ++i) (void)h.count();
  for (pid_t k : kids) ASSERT_TRUE(exited_ok(wait_status(k)));
  EXPECT_EQ(h.count(), h.stats().estimate);
  EXPECT_EQ(h.count(), h.stats().estimate) << "second (cached) answer";
  EXPECT_TRUE(h.stats().count_cached);
  expect_clean(seg);
}

// A writer SIGKILLed inside its bracket (before or after its CAS): counts stay
// exact (the cache turns off, never stale); check is clean; --repair turns the
// cache back on.
TEST(HllCountCache, WriterKilledInsideTheBracketLeavesCountsExact) {
  for (const char* point : {"hll.add.after_begin", "hll.add.before_end"}) {
    SCOPED_TRACE(point);
    SegmentGuard g(unique_name("hll"));
    Segment seg = Segment::create(g.name);
    Hll h = Hll::create(seg, "h");
    h.add_many(shmf_bench::distinct_keys(2000, 26));
    const uint64_t cached = h.count();
    ASSERT_TRUE(h.stats().count_cached);
    pid_t pid = fork_child([&] {
      Segment s2 = Segment::open(g.name);
      Hll c = Hll::open(s2, "h");
      internal::arm_kill_point(point);
      c.add_many(shmf_bench::distinct_keys(50000, 27));  // grows registers: reaches the point
      return 3;
    });
    ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
    HllStats st = h.stats();
    EXPECT_EQ(st.changes_in_flight, 1u);
    EXPECT_FALSE(st.count_cached);
    EXPECT_EQ(h.count(), st.estimate) << "count equals the registers' estimate";
    EXPECT_FALSE(h.stats().count_cached) << "not cached while a change may be in flight";
    if (std::string(point) == "hll.add.before_end") {
      EXPECT_NE(h.count(), cached);
    }
    expect_clean(seg);
    CheckReport r = seg.check(true);
    bool resynced = false;
    for (const auto& f : r.findings) resynced |= f.problem.find("count cache off") != std::string::npos && f.repaired;
    EXPECT_TRUE(resynced);
    EXPECT_EQ(h.count(), h.stats().estimate);
    EXPECT_TRUE(h.stats().count_cached) << "--repair turned the cache back on";
    expect_clean(seg);
  }
}

// A clear killed after zeroing but before resetting the cache: the pre-clear
// estimate is never answered.
TEST(HllCountCache, KilledClearNeverAnswersThePreClearCount) {
  SegmentGuard g(unique_name("hll"));
  Segment seg = Segment::create(g.name);
  Hll h = Hll::create(seg, "h");
  h.add_many(shmf_bench::distinct_keys(20000, 28));
  ASSERT_GT(h.count(), 0u);
  ASSERT_TRUE(h.stats().count_cached);
  pid_t pid = fork_child([&] {
    Segment s2 = Segment::open(g.name);
    Hll c = Hll::open(s2, "h");
    internal::arm_kill_point("hll.clear.after_zero");
    c.clear();
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.count(), h.stats().estimate);
}
