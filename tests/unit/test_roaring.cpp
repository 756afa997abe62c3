// tests/unit/test_roaring.cpp: RoaringSet in a real segment: exactness against a
// std::set oracle (one and several processes, across compactions), memory
// against the mission's figures, set algebra, import/export, drop, check.
#include <gtest/gtest.h>
#include <roaring/roaring.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

CreateOptions seg_options(uint64_t size = 64ull << 20) {
  CreateOptions o;
  o.size = size;
  o.max_size = 2ull << 30;
  o.directory_capacity = 64;
  return o;
}

using shmf_test::code_of;

RoaringOptions small_delta(uint32_t cap = 1024) {
  RoaringOptions o;
  o.delta_capacity = cap;
  return o;
}

void expect_equal(const RoaringSet& s, const std::set<uint32_t>& oracle, uint32_t universe) {
  for (uint32_t v = 0; v < universe; ++v) ASSERT_EQ(s.contains(v), oracle.count(v) == 1) << "value " << v;
  EXPECT_EQ(s.cardinality(), oracle.size());
}

}  // namespace

TEST(Roaring, AddRemoveContainsAcrossCompactions) {
  SegmentGuard g(unique_name("rs"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet s = RoaringSet::create(seg, "ids", small_delta(256));
  std::set<uint32_t> oracle;
  shmf_bench::Rng r(1);
  for (int i = 0; i < 20000; ++i) {
    uint32_t v = static_cast<uint32_t>(r.below(5000));
    if (r.below(3)) {
      ASSERT_EQ(s.add(v), RoaringStatus::kOk);
      oracle.insert(v);
    } else {
      ASSERT_EQ(s.remove(v), RoaringStatus::kOk);
      oracle.erase(v);
    }
  }
  auto st = s.stats();
  EXPECT_GT(st.compactions, 10u) << "256-slot delta must have compacted many times";
  expect_equal(s, oracle, 5000);
  ASSERT_TRUE(s.compact());
  expect_equal(s, oracle, 5000);
  EXPECT_EQ(s.stats().delta_fill, 0u);
  // uint64 entry points never truncate.
  EXPECT_EQ(s.add_u64(1ull << 32), RoaringStatus::kOutOfRange);
  EXPECT_FALSE(s.contains_u64((1ull << 32) + 7));
  std::vector<uint64_t> wide = {1, 2, 1ull << 33};
  EXPECT_EQ(s.add_many(std::span<const uint64_t>(wide)), RoaringStatus::kOutOfRange);
  EXPECT_EQ(s.cardinality(), oracle.size()) << "a rejected batch writes nothing";
  EXPECT_EQ(seg.check().consistent(), true);
}

TEST(Roaring, BatchesAndRange) {
  SegmentGuard g(unique_name("rb"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet s = RoaringSet::create(seg, "b", small_delta());
  std::vector<uint32_t> vals = {5, 10, 15, 4000000000u};
  ASSERT_EQ(s.add_many(std::span<const uint32_t>(vals)), RoaringStatus::kOk);
  ASSERT_EQ(s.add_range(100000, 300000), RoaringStatus::kOk);  // bulk path (a compaction)
  ASSERT_EQ(s.add_range(10, 20), RoaringStatus::kOk);          // small: via the delta
  EXPECT_EQ(s.add_range(0, (1ull << 32) + 1), RoaringStatus::kOutOfRange);
  std::vector<uint32_t> q = {5, 6, 12, 99999, 100000, 299999, 300000, 4000000000u};
  std::vector<uint8_t> out(q.size());
  EXPECT_EQ(s.contains_many(std::span<const uint32_t>(q), out), 5u);
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 0, 1, 0, 1, 1, 0, 1}));
  EXPECT_EQ(s.cardinality(), 200000u + 10 + 2);  // 5, 4e9, 10..19 (10 and 15 already counted)
  ASSERT_EQ(s.remove(150000), RoaringStatus::kOk);
  EXPECT_FALSE(s.contains(150000));
  // A remove in the delta survives a merge of a bitmap holding other values...
  roaring_bitmap_t* b = roaring_bitmap_from_range(500000, 500010, 1);
  s.merge(b);
  EXPECT_FALSE(s.contains(150000));
  // ...and a merge that holds the value re-adds it (merge = add of every value).
  roaring_bitmap_add(b, 150000);
  s.merge(b);
  EXPECT_TRUE(s.contains(150000));
  roaring_bitmap_free(b);
}

// Four processes write disjoint value classes (v % 4 == p) with random
// adds/removes while a fifth compacts in a loop; each writer's own oracle
// decides the final state of its values exactly.
TEST(Roaring, ExactAcrossProcessesDuringCompactions) {
  SegmentGuard g(unique_name("rmp"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet::create(seg, "mp", small_delta(512));
  const int kProcs = 4, kOps = 6000;
  const uint32_t kRange = 3000;
  auto replay = [&](int p, std::set<uint32_t>& oracle) {
    shmf_bench::Rng r(500 + p);
    for (int i = 0; i < kOps; ++i) {
      uint32_t v = static_cast<uint32_t>(r.below(kRange)) * kProcs + static_cast<uint32_t>(p);
      if (r.below(3)) oracle.insert(v); else oracle.erase(v);
    }
  };
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p)
    pids.push_back(shmf_test::fork_child([&, p] {
      Segment s2 = Segment::open(g.name);
      RoaringSet rs = RoaringSet::open(s2, "mp");
      shmf_bench::Rng r(500 + p);
      std::set<uint32_t> mine;
      for (int i = 0; i < kOps; ++i) {
        uint32_t v = static_cast<uint32_t>(r.below(kRange)) * kProcs + static_cast<uint32_t>(p);
        bool add = r.below(3) != 0;
        if ((add ? rs.add(v) : rs.remove(v)) != RoaringStatus::kOk) return 3;
        if (add) mine.insert(v); else mine.erase(v);
        // Read-your-writes at once, whatever compaction is doing.
        if (rs.contains(v) != add) return 4;
      }
      return 0;
    }));
  pid_t compactor = shmf_test::fork_child([&] {
    Segment s2 = Segment::open(g.name);
    RoaringSet rs = RoaringSet::open(s2, "mp");
    for (int i = 0; i < 60; ++i) {
      rs.compact();
      usleep(500);
    }
    return 0;
  });
  for (pid_t pid : pids) {
    int st = shmf_test::wait_status(pid);
    ASSERT_TRUE(shmf_test::exited_ok(st)) << "writer exit " << (WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  ASSERT_TRUE(shmf_test::exited_ok(shmf_test::wait_status(compactor)));
  std::set<uint32_t> oracle;
  for (int p = 0; p < kProcs; ++p) {
    std::set<uint32_t> o;
    replay(p, o);
    oracle.insert(o.begin(), o.end());
  }
  RoaringSet rs = RoaringSet::open(seg, "mp");
  expect_equal(rs, oracle, kRange * kProcs);
  EXPECT_GT(rs.stats().compactions, 20u);
  ASSERT_TRUE(rs.compact());
  expect_equal(rs, oracle, kRange * kProcs);
  EXPECT_TRUE(seg.check().consistent());
}

// Memory vs the mission (shared/mission/SEED-SUMMARY.md):
//   dense 0..1e8 -> 1526 bitmap containers x 8 KiB = 12.5 MB, i.e. 1.25 MB per 1e7 (bound: 5%).
//   sparse random 32-bit values -> array containers, 2 bytes/value (bound: 10%).
TEST(Roaring, MemoryAgainstMissionFigures) {
  SegmentGuard g(unique_name("rmem"));
  Segment seg = Segment::create(g.name, seg_options(128ull << 20));
  {
    RoaringSet d = RoaringSet::create(seg, "dense", small_delta());
    ASSERT_EQ(d.add_range(0, 10000000), RoaringStatus::kOk);
    auto st = d.stats();
    ASSERT_EQ(st.cardinality, 10000000u);
    // Without run containers (the mission's figure assumes bitmaps): a frozen
    // bitmap built from the same ids, not run-optimised.
    roaring_bitmap_t* plain = roaring_bitmap_from_range(0, 10000000, 1);
    roaring_bitmap_remove_run_compression(plain);
    double bitmap_bytes = static_cast<double>(roaring_bitmap_frozen_size_in_bytes(plain));
    roaring_bitmap_free(plain);
    const double mission = 12.5e6 / 10;  // bytes per 1e7 dense ids
    printf("[memory] dense 0..1e7: bitmap containers %.0f B (mission %.0f B, %.2f%%), run-optimised snapshot "
           "%llu B (%u run containers), whole set in segment %llu B\n",
           bitmap_bytes, mission, 100.0 * (bitmap_bytes - mission) / mission,
           static_cast<unsigned long long>(st.snapshot_bytes), st.run_containers,
           static_cast<unsigned long long>(st.total_bytes));
    EXPECT_NEAR(bitmap_bytes, mission, mission * 0.05);
    EXPECT_LE(st.snapshot_bytes, bitmap_bytes) << "run-optimisation never makes the snapshot larger";
  }
  {
    // The mission's sparse case is 1.2e8 hashes over 2^32: ~1830 values per
    // 65536-wide container. 1e6 values keep that density over the first
    // 2^32 * 1e6 / 1.2e8 = 35,791,394 ids (546 containers), so per-value
    // bytes are what 1.2e8 would give (the bench measures 1.2e8 itself).
    // Spread over all 2^32 instead, 1e6 values leave ~15 per container and
    // the per-container header (~5 B) shows: printed, not asserted.
    const uint64_t n_ids = 1000000, span = (uint64_t{1} << 32) * n_ids / 120000000;
    for (bool mission_density : {true, false}) {
      std::string name = mission_density ? "sparse" : "sparse-wide";
      RoaringSet sp = RoaringSet::create(seg, name, small_delta());
      shmf_bench::Rng r(9);
      roaring_bitmap_t* b = roaring_bitmap_create();
      for (uint64_t i = 0; i < n_ids; ++i)
        roaring_bitmap_add(b, static_cast<uint32_t>(mission_density ? r.below(span) : r.next() >> 32));
      sp.merge(b);
      uint64_t n = roaring_bitmap_get_cardinality(b);
      roaring_bitmap_free(b);
      auto st = sp.stats();
      ASSERT_EQ(st.cardinality, n);
      double per = static_cast<double>(st.snapshot_bytes) / static_cast<double>(n);
      printf("[memory] sparse 1e6 random ids over %s (%llu distinct): snapshot %llu B = %.3f B/value (mission: 2), "
             "%u array containers\n",
             mission_density ? "the mission's density (1.2e8 per 2^32)" : "all of 2^32",
             static_cast<unsigned long long>(n), static_cast<unsigned long long>(st.snapshot_bytes), per,
             st.array_containers);
      if (mission_density) {
        EXPECT_NEAR(per, 2.0, 0.2);
      }
    }
  }
}

TEST(Roaring, SetAlgebraAndContainsAny) {
  SegmentGuard g(unique_name("ralg"));
  Segment seg = Segment::create(g.name, seg_options());
  std::vector<std::string> days;
  std::vector<std::set<uint32_t>> oracle(7);
  std::vector<RoaringSet> sets;
  shmf_bench::Rng r(3);
  for (int d = 0; d < 7; ++d) {
    days.push_back("day" + std::to_string(d));
    sets.push_back(RoaringSet::create(seg, days.back(), small_delta()));
    for (int i = 0; i < 3000; ++i) {
      uint32_t v = static_cast<uint32_t>(r.below(20000));
      sets.back().add(v);
      oracle[d].insert(v);
    }
    if (d % 2) sets.back().compact();  // mix snapshot and delta residents
  }
  std::set<uint32_t> uni, inter = oracle[0], diff = oracle[0], x = oracle[0];
  for (auto& o : oracle) uni.insert(o.begin(), o.end());
  for (int d = 1; d < 7; ++d) {
    std::set<uint32_t> t, df, xr;
    for (uint32_t v : inter) if (oracle[d].count(v)) t.insert(v);
    inter = t;
    for (uint32_t v : diff) if (!oracle[d].count(v)) df.insert(v);
    diff = df;
    for (uint32_t v : x) if (!oracle[d].count(v)) xr.insert(v);
    for (uint32_t v : oracle[d]) if (!x.count(v)) xr.insert(v);
    x = xr;
  }
  EXPECT_EQ(RoaringSet::compute_cardinality(seg, SetOp::kUnion, days), uni.size());
  EXPECT_EQ(RoaringSet::compute_cardinality(seg, SetOp::kIntersection, days), inter.size());
  EXPECT_EQ(RoaringSet::compute_cardinality(seg, SetOp::kDifference, days), diff.size());
  EXPECT_EQ(RoaringSet::compute_cardinality(seg, SetOp::kXor, days), x.size());
  std::vector<std::string> two = {days[0], days[1]};
  std::set<uint32_t> u2 = oracle[0];
  u2.insert(oracle[1].begin(), oracle[1].end());
  EXPECT_EQ(RoaringSet::compute_cardinality(seg, SetOp::kUnion, two), u2.size());
  RoaringSet week = RoaringSet::store(seg, "week", SetOp::kUnion, days);
  for (uint32_t v = 0; v < 20000; ++v) {
    bool want = uni.count(v) == 1;
    ASSERT_EQ(week.contains(v), want);
    ASSERT_EQ(RoaringSet::contains_any(sets, v), want);
  }
  EXPECT_EQ(code_of([&] { RoaringSet::store(seg, "week", SetOp::kUnion, days); }), ErrorCode::kExists);
  std::vector<std::string> missing = {days[0], "nope"};
  EXPECT_EQ(code_of([&] { RoaringSet::compute(seg, SetOp::kUnion, missing); }), ErrorCode::kNotFound);
}

TEST(Roaring, ExportImportPortableRoundTrip) {
  SegmentGuard g(unique_name("rio"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet a = RoaringSet::create(seg, "a", small_delta());
  a.add_range(1000, 70000);
  for (uint32_t i = 0; i < 500; ++i) a.add(i * 7777777u);
  a.remove(2000);
  std::string bytes = a.export_portable();
  // CRoaring itself reads it back (the format Java/Go/Python read).
  roaring_bitmap_t* back = roaring_bitmap_portable_deserialize_safe(bytes.data(), bytes.size());
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(roaring_bitmap_get_cardinality(back), a.cardinality());
  EXPECT_FALSE(roaring_bitmap_contains(back, 2000));
  roaring_bitmap_free(back);
  RoaringSet b = RoaringSet::create(seg, "b", small_delta());
  b.import_portable(bytes);
  EXPECT_EQ(b.cardinality(), a.cardinality());
  EXPECT_TRUE(b.contains(69999));
  EXPECT_FALSE(b.contains(2000));
  uint64_t before = b.cardinality();
  EXPECT_EQ(code_of([&] { b.import_portable(bytes.substr(0, bytes.size() / 2)); }), ErrorCode::kBadInput);
  EXPECT_EQ(code_of([&] { b.import_portable("12\n13\n"); }), ErrorCode::kBadInput);
  EXPECT_EQ(b.cardinality(), before) << "bad input leaves the set unchanged";
  // Files.
  std::string path = "/tmp/" + unique_name("exp") + ".roaring";
  a.export_portable_file(path);
  RoaringSet c = RoaringSet::create(seg, "c", small_delta());
  c.import_portable_file(path);
  EXPECT_EQ(c.cardinality(), a.cardinality());
  std::remove(path.c_str());
  EXPECT_EQ(code_of([&] { c.import_portable_file(path); }), ErrorCode::kIo);
}

TEST(Roaring, CreateOpenErrorsAndDrop) {
  SegmentGuard g(unique_name("rerr"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringOptions bad;
  bad.delta_capacity = 1000;
  EXPECT_EQ(code_of([&] { RoaringSet::create(seg, "x", bad); }), ErrorCode::kInvalidArgument);
  bad = {};
  bad.compact_at = 0.95;
  EXPECT_EQ(code_of([&] { RoaringSet::create(seg, "x", bad); }), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(seg.find("x").has_value()) << "bad parameters leave the segment unchanged";
  EXPECT_EQ(code_of([&] { RoaringSet::open(seg, "x"); }), ErrorCode::kNotFound);
  seg.create_region("blob", Kind::kBlob, 128, {});
  EXPECT_EQ(code_of([&] { RoaringSet::open(seg, "blob"); }), ErrorCode::kWrongKind);
  uint64_t used0 = seg.stats().used_bytes;
  RoaringSet s = RoaringSet::create(seg, "x", small_delta());
  s.add_range(0, 100000);
  s.add(5000000);
  RoaringSet other = RoaringSet::open(seg, "x");
  EXPECT_TRUE(other.contains(5000000));
  EXPECT_TRUE(RoaringSet::drop(seg, "x"));
  EXPECT_FALSE(RoaringSet::drop(seg, "x"));
  EXPECT_FALSE(other.valid());
  EXPECT_FALSE(other.contains(5000000));
  std::vector<uint32_t> q{1, 5000000};
  std::vector<uint8_t> qo{7, 7};
  EXPECT_EQ(other.contains_many(std::span<const uint32_t>(q), qo), 0u) << "a dropped set reports nothing present";
  EXPECT_EQ(qo, (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(other.add(1), RoaringStatus::kDropped);
  EXPECT_EQ(other.cardinality(), 0u);
  EXPECT_EQ(code_of([&] { other.compact(); }), ErrorCode::kDropped);
  EXPECT_EQ(seg.stats().used_bytes, used0) << "drop frees the snapshot and delta extents too";
  EXPECT_TRUE(seg.check().consistent());
}

TEST(Roaring, ReaderTableFull) {
  SegmentGuard g(unique_name("rrt"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringOptions o = small_delta();
  o.reader_slots = 1;
  RoaringSet s = RoaringSet::create(seg, "one", o);
  Segment other = Segment::open(g.name);  // a second attachment needs its own slot
  try {
    RoaringSet::open(other, "one");
    ADD_FAILURE() << "opened with a full reader table";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFull);
    EXPECT_NE(std::string(e.what()).find("--readers"), std::string::npos) << e.what();
  }
  // A dead holder's slot is taken over.
  pid_t child = shmf_test::fork_child([&] {
    Segment s2 = Segment::open(g.name);
    RoaringSet r2 = RoaringSet::create(s2, "two", o);
    raise(SIGKILL);
    return 0;
  });
  shmf_test::wait_status(child);
  RoaringSet two = RoaringSet::open(seg, "two");
  EXPECT_TRUE(two.valid());
}

namespace {
// A forked process that opens `set`, asks contains(probe) (which makes, and
// pins, a view of the generation published then) and keeps that view until
// release(); it exits 0 when the answer was `expect`.
struct PinningReader {
  int go[2] = {-1, -1}, done[2] = {-1, -1};
  pid_t pid = -1;
  PinningReader(const std::string& seg_name, const char* set, uint32_t probe, bool expect) {
    EXPECT_EQ(pipe(go), 0);
    EXPECT_EQ(pipe(done), 0);
    pid = shmf_test::fork_child([&] {
      Segment s2 = Segment::open(seg_name);
      RoaringSet rs = RoaringSet::open(s2, set);
      const bool seen = rs.contains(probe);
      char c = 1;
      if (write(done[1], &c, 1) != 1) return 5;
      if (read(go[0], &c, 1) != 1) return 6;
      return seen == expect && rs.stats().snapshot_generation >= 1 ? 0 : 7;
    });
    char c;
    EXPECT_EQ(read(done[0], &c, 1), 1) << "the reader pinned its view";
  }
  // Lets the reader drop its view and exit; true when it exited 0.
  bool release() {
    char c = 1;
    return write(go[1], &c, 1) == 1 && shmf_test::exited_ok(shmf_test::wait_status(pid));
  }
  ~PinningReader() {
    for (int fd : {go[0], go[1], done[0], done[1]}) close(fd);
  }
};
}  // namespace

// A process that keeps an old view pins its snapshot: the compactor must not
// free it; once the view is released the next compaction frees it.
TEST(Roaring, OldSnapshotFreedOnlyWhenUnread) {
  SegmentGuard g(unique_name("rrec"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet::create(seg, "r", small_delta());
  PinningReader reader(g.name, "r", 42, false);  // pins generation 1
  RoaringSet rs = RoaringSet::open(seg, "r");
  rs.add(42);
  ASSERT_TRUE(rs.compact());
  EXPECT_EQ(rs.stats().pending_free, 1u) << "generation 1 is still pinned by the reader";
  ASSERT_TRUE(reader.release()) << "the reader read generation 1 intact";
  EXPECT_EQ(rs.reclaim(), 1u) << "dead or finished readers do not pin";
  EXPECT_EQ(rs.stats().pending_free, 0u);
  EXPECT_TRUE(rs.contains(42));
}

// Layout 4: a pack that a compaction drops is freed with the retired
// generation g only when no reader pins any generation from the pack's
// birth to g, not just g-1 and g. Chunks 0..9 hold 100 values each in the
// pack born at generation 1 (create_from); a reader pins generation 1;
// generations 2 and 3 each touch one chunk (the pack stays more than half
// live), generation 4 touches four more (30% live: repacked and dropped at
// 4, so retired generation 3 carries it). Generations 1 and 2 stay pending
// by [g-1, g]; generation 3 only by the pack's birth.
TEST(Roaring, DroppedPackWaitsForReadersOfItsWholeLifetime) {
  SegmentGuard g(unique_name("rpack"));
  Segment seg = Segment::create(g.name, seg_options());
  const uint64_t used0 = seg.stats().used_bytes;
  {
    roaring_bitmap_t* b = roaring_bitmap_create();
    for (uint32_t c = 0; c < 10; ++c)
      for (uint32_t i = 0; i < 100; ++i) roaring_bitmap_add(b, c << 16 | i * 7);
    RoaringSet::create_from(seg, "p", b, small_delta());
    roaring_bitmap_free(b);
  }
  PinningReader reader(g.name, "p", 3 << 16 | 14, true);  // pins generation 1
  RoaringSet rs = RoaringSet::open(seg, "p");
  auto touch = [&](std::initializer_list<uint32_t> chunks) {
    for (uint32_t ch : chunks) ASSERT_EQ(rs.add(ch << 16 | 1), RoaringStatus::kOk);
    ASSERT_TRUE(rs.compact());
  };
  touch({0});           // generation 2
  touch({1});           // generation 3
  touch({2, 3, 4, 5});  // generation 4: the first pack is 30% live, dropped
  EXPECT_EQ(rs.stats().snapshot_generation, 4u);
  EXPECT_EQ(rs.stats().pending_free, 3u) << "1 and 2 pinned by [g-1, g]; 3 by the birth of the pack it dropped";
  ASSERT_TRUE(reader.release());
  EXPECT_EQ(rs.reclaim(), 3u);
  EXPECT_EQ(rs.stats().pending_free, 0u);
  for (uint32_t ch = 0; ch < 10; ++ch) {
    EXPECT_TRUE(rs.contains(ch << 16 | 693)) << ch;
    EXPECT_EQ(rs.contains(ch << 16 | 1), ch < 6) << ch;
  }
  EXPECT_EQ(rs.cardinality(), 1006u);
  EXPECT_TRUE(seg.check(false).consistent());
  rs = RoaringSet();
  EXPECT_TRUE(RoaringSet::drop(seg, "p"));
  EXPECT_EQ(seg.stats().used_bytes, used0) << "every snapshot, pack and delta returned";
}

// Layout 4: a compaction rebuilds only the containers its deltas touched.
// 5,000 chunks of 40 values (an INDEXED table), then 120 compactions each
// touching 1% of the chunks at random (fixed seed), checked against an
// oracle every round. Bounds: the median compaction writes <= 5% of the
// containers' bytes into its new pack (1% touched, plus the occasional
// repack), the directory never exceeds 64 packs, the packs never hold more
// than 2x the live container bytes, and dropping the set returns every byte.
TEST(Roaring, IncrementalCompactionRewritesOnlyTouchedContainers) {
  SegmentGuard g(unique_name("rinc"));
  Segment seg = Segment::create(g.name, seg_options(256ull << 20));
  const uint64_t used0 = seg.stats().used_bytes;
  RoaringOptions o = small_delta(1u << 16);
  o.auto_compact = false;
  RoaringSet rs = RoaringSet::create(seg, "inc", o);
  std::set<uint32_t> oracle;
  constexpr uint32_t kChunks = 5000;
  for (uint32_t ch = 0; ch < kChunks; ++ch)
    for (uint32_t i = 0; i < 40; ++i) {
      const uint32_t v = ch << 16 | (i * 1601u) % 65536u;
      ASSERT_EQ(rs.add(v), RoaringStatus::kOk);
      oracle.insert(v);
    }
  ASSERT_TRUE(rs.compact());
  RegionInfo info = seg.open_region("inc", Kind::kRoaring);
  auto u32 = [](const std::byte* p) { uint32_t v; memcpy(&v, p, 4); return v; };
  auto u64 = [](const std::byte* p) { uint64_t v; memcpy(&v, p, 8); return v; };
  auto snapshot = [&] { return seg.base() + u64(seg.base() + info.offset + 64); };
  ASSERT_EQ(u32(snapshot() + 4), 1u) << "5,000 containers: the indexed table";
  uint64_t rng = 20261202;
  auto next = [&] {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(rng >> 33);
  };
  std::vector<double> new_share;
  for (int round = 0; round < 120; ++round) {
    for (int t = 0; t < 50; ++t) {  // 1% of the chunks: one add and one remove each
      const uint32_t ch = next() % kChunks;
      const uint32_t add = ch << 16 | (next() % 65536u);
      ASSERT_EQ(rs.add(add), RoaringStatus::kOk);
      oracle.insert(add);
      auto it = oracle.lower_bound(ch << 16);
      ASSERT_EQ(rs.remove(*it), RoaringStatus::kOk);
      oracle.erase(it);
    }
    ASSERT_TRUE(rs.compact());
    const std::byte* sh = snapshot();
    const uint64_t gen = u64(sh + 8);
    const uint32_t npacks = u32(sh + 52);
    ASSERT_LE(npacks, 64u) << round;
    uint64_t bytes = 0, live = 0, fresh = 0;
    for (uint32_t k = 0; k < npacks; ++k) {
      const std::byte* p = sh + 64 + 32 * k;
      bytes += u64(p + 8);
      live += u64(p + 16);
      if (u64(p + 24) == gen) fresh = u64(p + 8);
    }
    ASSERT_LE(bytes, 2 * live) << "round " << round << ": packs hold at most 2x their live bytes";
    new_share.push_back(static_cast<double>(fresh) / static_cast<double>(live));
    for (int q = 0; q < 200; ++q) {
      const uint32_t v = (next() % kChunks) << 16 | (next() % 65536u);
      ASSERT_EQ(rs.contains(v), oracle.count(v) == 1) << "round " << round << " value " << v;
    }
    ASSERT_EQ(rs.cardinality(), oracle.size()) << round;
  }
  for (uint32_t v : oracle) ASSERT_TRUE(rs.contains(v)) << v;
  std::sort(new_share.begin(), new_share.end());
  const double median = new_share[new_share.size() / 2];
  printf("[incremental] median new-pack share %.4f, max %.4f over %zu compactions\n", median, new_share.back(),
         new_share.size());
  EXPECT_LE(median, 0.05) << "a 1% touch rewrites about 1% of the containers";
  EXPECT_EQ(rs.stats().containers, kChunks);
  EXPECT_TRUE(seg.check(false).consistent());
  rs = RoaringSet();
  EXPECT_TRUE(RoaringSet::drop(seg, "inc"));
  EXPECT_EQ(seg.stats().used_bytes, used0) << "every snapshot, pack and delta returned";
}

namespace {
// Threads of one process share the handle: kWriters writers on disjoint value
// classes, 1 thread compacting, `readers` threads checking what writers
// already acknowledged (through an atomic high-water mark). Each thread keeps
// its own view, so with several readers the process's reader slot churns
// between its exact pins and its [lo, hi] range on every compaction.
void threads_share_one_handle(const char* tag, int readers) {
  SegmentGuard g(unique_name(tag));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet s = RoaringSet::create(seg, "t", small_delta(256));
  const int kWriters = 3;
  const uint32_t kPer = 20000;
  std::atomic<uint32_t> acked[kWriters];
  for (auto& a : acked) a.store(0);
  std::atomic<bool> stop{false}, bad{false};
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      for (uint32_t i = 0; i < kPer; ++i) {
        if (auto st = s.add(i * kWriters + static_cast<uint32_t>(w)); st != RoaringStatus::kOk) {
          if (!bad.exchange(true))
            ADD_FAILURE() << "writer " << w << " add #" << i << " answered " << roaring_status_name(st);
        }
        acked[w].store(i + 1);
      }
    });
  std::atomic<int> busy{0};
  std::thread compactor([&] {
    while (!stop) {
      try {
        s.compact();
      } catch (const Error& e) {
        // kBusy: every retired-snapshot slot is still read by some thread (legal, retried).
        if (e.code() != ErrorCode::kBusy) bad = true;
        ++busy;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  });
  std::vector<std::thread> rs;
  for (int k = 0; k < readers; ++k)
    rs.emplace_back([&, k] {
      shmf_bench::Rng r(5 + static_cast<uint64_t>(k));
      while (!stop) {
        int w = static_cast<int>(r.below(kWriters));
        uint32_t n = acked[w].load();
        if (n == 0) continue;
        uint32_t i = static_cast<uint32_t>(r.below(n));
        if (!s.contains(i * kWriters + static_cast<uint32_t>(w))) bad = true;
      }
    });
  for (auto& t : ts) t.join();
  stop = true;
  compactor.join();
  for (auto& t : rs) t.join();
  EXPECT_FALSE(bad.load()) << "an add failed or an acknowledged add was not visible to another thread";
  EXPECT_EQ(s.cardinality(), uint64_t{kPer} * kWriters);
  EXPECT_GT(s.stats().compactions, 5u);
  s.reclaim();
  EXPECT_EQ(s.stats().pending_free, 0u) << "with every other thread gone nothing old is pinned";
  printf("[threads x%d readers] compactions %llu, busy refusals %d\n", readers,
         static_cast<unsigned long long>(s.stats().compactions), busy.load());
}
}  // namespace

TEST(Roaring, ThreadsShareOneHandle) { threads_share_one_handle("rthr", 1); }

// Four readers: more live generations than a slot's five exact pins, so the
// slot moves between exact and range mode (the pin rewrite that lost
// acknowledged adds in CI; RoaringKernels.PinsNeverHideALiveGenerationFromAScan
// forces the torn scan deterministically).
TEST(Roaring, ThreadsShareOneHandleManyReaders) {
  for (int round = 0; round < 5 && !::testing::Test::HasFailure(); ++round) threads_share_one_handle("rthr4", 4);
}

// A damaged header is kCorrupt on open (never a crash) and a finding of check;
// a damaged delta word is a finding too.
TEST(Roaring, CorruptionIsReportedNotFollowed) {
  SegmentGuard g(unique_name("rcor"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet s = RoaringSet::create(seg, "c", small_delta());
  s.add(7);
  RegionInfo info = seg.open_region("c", Kind::kRoaring);
  auto* magic = reinterpret_cast<uint32_t*>(seg.base() + info.offset);
  uint32_t saved = *magic;
  *magic = 0x12345678;
  Segment other = Segment::open(g.name);
  EXPECT_EQ(code_of([&] { RoaringSet::open(other, "c"); }), ErrorCode::kCorrupt);
  CheckReport rep = seg.check(false);
  bool found = false;
  for (const auto& f : rep.findings) found |= f.where.find("roaring 'c'") != std::string::npos;
  EXPECT_TRUE(found);
  *magic = saved;
  // current pointing outside the segment.
  auto* current = reinterpret_cast<std::atomic<uint64_t>*>(seg.base() + info.offset + 64);
  uint64_t cur = current->load();
  current->store(seg.size() + 4096);
  EXPECT_EQ(code_of([&] { RoaringSet::open(other, "c"); }), ErrorCode::kCorrupt);
  current->store(cur);
  EXPECT_TRUE(RoaringSet::open(other, "c").contains(7));
  // A malformed delta word.
  auto* sh = reinterpret_cast<const uint64_t*>(seg.base() + cur);
  uint64_t delta_off = sh[4];  // SnapHeader::delta_off
  auto* slots = reinterpret_cast<std::atomic<uint64_t>*>(seg.base() + delta_off + 64);
  uint32_t empty = 0;
  while (slots[empty].load() != 0) ++empty;
  slots[empty].store(0xdead);
  rep = seg.check(false);
  found = false;
  for (const auto& f : rep.findings) found |= f.problem.find("malformed") != std::string::npos;
  EXPECT_TRUE(found);
  slots[empty].store(0);
  EXPECT_TRUE(seg.check(true).consistent());
}

// A delta's fill counter is segment bytes: a corrupt one (found by
// fuzz_segment in CI: 2^35 made the fold reserve 32 GiB and abort under ASan,
// std::terminate through the noexcept cardinality() elsewhere) is only a size
// hint, bounded by the table's validated capacity.
TEST(Roaring, CorruptDeltaFillIsOnlyAHint) {
  SegmentGuard g(unique_name("rfill"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet s = RoaringSet::create(seg, "c", small_delta());
  for (uint32_t v = 0; v < 20; ++v) ASSERT_EQ(s.add(v * 3), RoaringStatus::kOk);
  RegionInfo info = seg.open_region("c", Kind::kRoaring);
  auto* current = reinterpret_cast<std::atomic<uint64_t>*>(seg.base() + info.offset + 64);
  auto* sh = reinterpret_cast<const uint64_t*>(seg.base() + current->load());
  auto* fill = reinterpret_cast<std::atomic<uint64_t>*>(seg.base() + sh[4] + 8);  // DeltaHeader::fill
  const uint64_t saved = fill->load();
  ASSERT_GE(saved, 20u) << "the 20 adds are in the head delta, below its link trigger (layout changed?)";
  for (uint64_t bad : {uint64_t{1} << 35, ~uint64_t{0} - 7}) {
    SCOPED_TRACE(bad);
    fill->store(bad);
    Segment other = Segment::open(g.name);
    RoaringSet o = RoaringSet::open(other, "c");
    EXPECT_EQ(o.cardinality(), 20u);
    EXPECT_TRUE(o.contains(19 * 3));
    EXPECT_FALSE(o.contains(1));
  }
  fill->store(saved);
  EXPECT_TRUE(s.compact());
  EXPECT_EQ(s.cardinality(), 20u);
  EXPECT_TRUE(seg.check(false).consistent());
}

// A handle inherited across fork() has no reader slot in the child: it must
// not read unpinned memory, so it answers false / kForked; a fresh open works.
TEST(Roaring, InheritedHandleRefusesAfterFork) {
  SegmentGuard g(unique_name("rfork"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet s = RoaringSet::create(seg, "f", small_delta());
  s.add(11);
  pid_t child = shmf_test::fork_child([&] {
    if (s.contains(11)) return 3;
    if (s.add(12) != RoaringStatus::kForked) return 4;
    Segment mine = Segment::open(g.name);
    RoaringSet r = RoaringSet::open(mine, "f");
    return r.contains(11) && r.add(13) == RoaringStatus::kOk ? 0 : 5;
  });
  const int status = shmf_test::wait_status(child);
  ASSERT_TRUE(shmf_test::exited_ok(status)) << "child exit " << WEXITSTATUS(status);
  EXPECT_TRUE(s.contains(13));
  EXPECT_FALSE(s.contains(12));
}

// Issue 16: an empty set costs < 4 KiB of segment (64-slot delta, 32 reader
// slots), and the delta grows with the set (about cardinality / 16 slots at
// each compaction, up to the maximum), so memory follows use.
TEST(Roaring, EmptySetIsSmallAndDeltaGrowsWithUse) {
  SegmentGuard g(unique_name("rgrow"));
  Segment seg = Segment::create(g.name, seg_options());
  uint64_t used0 = seg.stats().used_bytes;
  RoaringSet s = RoaringSet::create(seg, "g");
  uint64_t empty_cost = seg.stats().used_bytes - used0;  // extents with their 64-byte headers
  printf("[memory] empty set with default options: %llu B of segment, stats().total_bytes %llu B\n",
         static_cast<unsigned long long>(empty_cost), static_cast<unsigned long long>(s.stats().total_bytes));
  EXPECT_LE(empty_cost, 4096u);
  EXPECT_LE(s.stats().total_bytes, empty_cost);
  EXPECT_EQ(s.stats().delta_capacity, 64u);
  EXPECT_EQ(s.stats().delta_max_capacity, uint64_t{1} << 24);
  // Fill to 200,000 values with auto-compaction: the delta grows, all present.
  std::set<uint32_t> oracle;
  shmf_bench::Rng r(16);
  uint64_t last_cap = 64, grew = 0;
  while (oracle.size() < 200000) {
    uint32_t v = static_cast<uint32_t>(r.below(1u << 26));
    ASSERT_EQ(s.add(v), RoaringStatus::kOk);
    oracle.insert(v);
    if (oracle.size() % 1024 != 0) continue;  // stats() is not free (O(delta entries): up to half the set): sample it
    uint64_t cap = s.stats().delta_capacity;
    if (cap != last_cap) {
      ASSERT_GT(cap, last_cap) << "a set that only grows never shrinks its delta";
      ++grew;
      last_cap = cap;
    }
  }
  auto st = s.stats();
  // >= cardinality / 16 at the last compaction (the deterministic floor), more when
  // compactions cost more (by CPU time), never above the power of two >= cardinality / 4.
  EXPECT_LE(st.delta_capacity, 65536u);
  EXPECT_GE(st.delta_capacity, 4096u) << "200,000 values / 16 needs at least 8192 slots at the last compaction, give or take one";
  // Compactions run when the chain of 4 tables is full (~7.5x the head's
  // capacity in values, the set 1.5x to 4.75x larger each time): 4 to 15 from
  // 480 to 200,000 values, each sizing the head anew (sometimes two doublings
  // at once, from the compaction's CPU cost).
  EXPECT_GE(grew, 4u) << "64 -> 8192 slots is 7 doublings over ~15 compactions";
  EXPECT_GE(st.compactions, 4u) << "the set grows at most ~4.75x per compaction (a head of up to card / 2 slots after rounding)";
  for (uint32_t v : oracle) ASSERT_TRUE(s.contains(v)) << v;
  EXPECT_EQ(s.cardinality(), oracle.size());
  EXPECT_TRUE(seg.check(false).consistent());
  // A small maximum caps growth.
  RoaringSet capped = RoaringSet::create(seg, "capped", small_delta(256));
  for (uint32_t v = 0; v < 100000; ++v) ASSERT_EQ(capped.add(v * 7), RoaringStatus::kOk);
  EXPECT_EQ(capped.stats().delta_capacity, 256u);
  EXPECT_EQ(capped.cardinality(), 100000u);
}

// Golden bytes of layout version 4: the region header, a snapshot header and
// a delta header of an empty set with default options, then the snapshot of
// a set of three values (one array container in one pack), read byte by
// byte (the format is the bytes, not the structs: docs/roaring.md, docs/FORMAT.md).
TEST(Roaring, LayoutGoldenBytes) {
  SegmentGuard g(unique_name("rgold"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet::create(seg, "g");
  RegionInfo info = seg.open_region("g", Kind::kRoaring);
  const std::byte* region = seg.base() + info.offset;
  auto u16 = [](const std::byte* p) { uint16_t v; memcpy(&v, p, 2); return v; };
  auto u32 = [](const std::byte* p) { uint32_t v; memcpy(&v, p, 4); return v; };
  auto u64 = [](const std::byte* p) { uint64_t v; memcpy(&v, p, 8); return v; };
  EXPECT_EQ(u32(region + 0), 0x53524f41u);  // magic "AORS"
  EXPECT_EQ(u32(region + 4), 4u);           // layout version
  EXPECT_EQ(u32(region + 8), 1u << 24);     // delta_capacity: the maximum
  EXPECT_EQ(u32(region + 12), 32u);         // reader_slots
  EXPECT_EQ(u32(region + 16), 500u);        // compact_permille
  EXPECT_EQ(u32(region + 20), 0u);          // flags
  EXPECT_EQ(info.size, 960u + 32u * 64u) << "header 960 B + 32 reader slots of 64 B";
  uint64_t cur = u64(region + 64);          // current
  EXPECT_EQ(u64(region + 72), 1u);          // gen_counter
  EXPECT_EQ(u64(region + 128), 0u);         // claim
  EXPECT_EQ(u64(region + 136), 0u);         // staged_snap
  EXPECT_EQ(u64(region + 144), 0u);         // staged_from
  EXPECT_EQ(u64(region + 152), 0u);         // compactions
  EXPECT_EQ(u64(region + 160), 0u);         // staged_link
  EXPECT_EQ(u64(region + 168), 0u);         // staged_link_onto
  EXPECT_EQ(u64(region + 176), 0u);         // links
  EXPECT_EQ(u64(region + 184), 0u);         // link_claim
  EXPECT_EQ(u64(region + 192), 0u);         // pending[0].snap_off
  ASSERT_EQ(cur % 64, 0u);
  const std::byte* snap = seg.base() + cur;
  EXPECT_EQ(u32(snap + 0), 0x534e4150u);    // "PANS"
  EXPECT_EQ(u32(snap + 4), 0u);             // shape: sorted table
  EXPECT_EQ(u64(snap + 8), 1u);             // generation
  EXPECT_EQ(u64(snap + 16), 0u);            // table_bytes: an empty table has none
  EXPECT_EQ(u64(snap + 24), 0u);            // cardinality
  uint64_t delta = u64(snap + 32);          // delta_off
  EXPECT_EQ(u64(snap + 40), 0u);            // prev_delta_off
  EXPECT_EQ(u32(snap + 48), 0u);            // containers
  EXPECT_EQ(u32(snap + 52), 0u);            // npacks
  EXPECT_EQ(u64(snap + 56), 0u);            // ndropped
  ASSERT_EQ(delta % 64, 0u);
  const std::byte* d = seg.base() + delta;
  EXPECT_EQ(u32(d + 0), 0x444c5441u);       // "ATLD"
  EXPECT_EQ(u32(d + 4), 64u);               // this delta's capacity: the initial 64
  EXPECT_EQ(u64(d + 8), 0u);                // fill
  EXPECT_EQ(u64(d + 16), 0u);               // next: no table linked after it
  for (uint32_t i = 0; i < 64; ++i) ASSERT_EQ(u64(d + 64 + 8 * i), 0u) << "slot " << i;

  // {5, 9, 65536 * 3 + 1} folded by a compaction: two array containers
  // (chunks 0 and 3), both in the one pack generation 2 built.
  RoaringSet s = RoaringSet::open(seg, "g");
  for (uint32_t v : {9u, 5u, 65536u * 3 + 1}) ASSERT_EQ(s.add(v), RoaringStatus::kOk);
  ASSERT_TRUE(s.compact());
  cur = u64(region + 64);
  snap = seg.base() + cur;
  EXPECT_EQ(u64(snap + 8), 2u);             // generation
  EXPECT_EQ(u32(snap + 4), 0u);             // shape: sorted (< 4,096 containers)
  EXPECT_EQ(u64(snap + 24), 3u);            // cardinality
  EXPECT_EQ(u32(snap + 48), 2u);            // containers
  ASSERT_EQ(u32(snap + 52), 1u);            // npacks
  EXPECT_EQ(u64(snap + 16), 8u + 16u);      // table_bytes: 2 keys padded to 8 B, then 2 words
  const std::byte* dir = snap + 64;         // PackRef {off, bytes, live_bytes, birth}
  const uint64_t pack = u64(dir + 0);
  EXPECT_EQ(pack % 64, 0u);
  EXPECT_EQ(u64(dir + 8), 16u);             // bytes: [5, 9] padded to 8 B, then [1] padded to 8 B
  EXPECT_EQ(u64(dir + 16), 16u);            // live_bytes
  EXPECT_EQ(u64(dir + 24), 2u);             // birth: generation 2
  const std::byte* table = snap + 64 + 64;  // after the directory and the (empty) dropped area
  EXPECT_EQ(u16(table + 0), 0u);            // key of chunk 0
  EXPECT_EQ(u16(table + 2), 3u);            // key of chunk 3
  const uint64_t w0 = u64(table + 8), w1 = u64(table + 16);
  EXPECT_EQ(w0 & 3, 2u);                    // type: array
  EXPECT_EQ((w0 >> 2) & 0x1ffff, 2u);       // count
  EXPECT_EQ((w0 >> 19) << 3, pack);         // offset: the pack's first bytes
  EXPECT_EQ(w1 & 3, 2u);
  EXPECT_EQ((w1 >> 2) & 0x1ffff, 1u);
  EXPECT_EQ((w1 >> 19) << 3, pack + 8);
  EXPECT_EQ(u16(seg.base() + pack), 5u);
  EXPECT_EQ(u16(seg.base() + pack + 2), 9u);
  EXPECT_EQ(u16(seg.base() + pack + 8), 1u);
}

// Version-1 (fixed-size deltas), version-2 (no delta chains) and version-3 (CRoaring frozen snapshots) regions
// are refused with kVersionMismatch, and
// a delta whose capacity exceeds the header's maximum is never followed.
TEST(Roaring, OldLayoutRefusedAndBadDeltaCapacityNotFollowed) {
  SegmentGuard g(unique_name("rold"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet s = RoaringSet::create(seg, "o", small_delta(1024));
  ASSERT_EQ(s.add(5), RoaringStatus::kOk);
  RegionInfo info = seg.open_region("o", Kind::kRoaring);
  auto* version = reinterpret_cast<uint32_t*>(seg.base() + info.offset + 4);
  Segment other = Segment::open(g.name);
  for (uint32_t old : {1u, 2u, 3u}) {
    *version = old;
    EXPECT_EQ(code_of([&] { RoaringSet::open(other, "o"); }), ErrorCode::kVersionMismatch) << old;
  }
  *version = 4;
  uint64_t cur = reinterpret_cast<std::atomic<uint64_t>*>(seg.base() + info.offset + 64)->load();
  uint64_t delta_off = reinterpret_cast<const uint64_t*>(seg.base() + cur)[4];
  auto* cap = reinterpret_cast<uint32_t*>(seg.base() + delta_off + 4);
  for (uint32_t bad : {2048u, 100u, 32u}) {  // above the maximum, not a power of two, below 64
    uint32_t saved = *cap;
    *cap = bad;
    RoaringSet fresh = RoaringSet::open(other, "o");
    EXPECT_FALSE(fresh.contains(5)) << bad << ": a bad delta makes the version unreadable, never followed";
    EXPECT_EQ(fresh.add(6), RoaringStatus::kDropped) << bad;
    CheckReport rep = seg.check(false);
    bool found = false;
    for (const auto& f : rep.findings) found |= f.problem.find("not a snapshot") != std::string::npos;
    EXPECT_TRUE(found) << bad << ": check names the published version as unreadable";
    *cap = saved;
  }
  EXPECT_TRUE(RoaringSet::open(other, "o").contains(5));
}

// Issue 16: sets big enough for the per-view container index (>= 1 MiB of
// frozen bytes) answer contains, contains_many (prefetching batches) and
// contains_any (7 sets interleaved) exactly as a process-local CRoaring copy,
// with values in the snapshot, in the deltas and removed; add_many equals adds.
TEST(Roaring, IndexedLookupsAndBatchesAgreeWithOracle) {
  SegmentGuard g(unique_name("ridx"));
  Segment seg = Segment::create(g.name, seg_options(256ull << 20));
  const uint64_t span = (uint64_t{1} << 32) * 1000000 / 120000000;  // the mission's density, 547 chunks
  std::vector<RoaringSet> sets;
  std::vector<roaring_bitmap_t*> oracle;
  shmf_bench::Rng r(77);
  for (int d = 0; d < 7; ++d) {
    RoaringSet s = RoaringSet::create(seg, "day" + std::to_string(d));
    roaring_bitmap_t* o = roaring_bitmap_create();
    std::vector<uint32_t> vals(d == 0 ? 700000 : 120000);
    for (auto& v : vals) v = static_cast<uint32_t>(r.below(span));
    ASSERT_EQ(s.add_many(std::span<const uint32_t>(vals)), RoaringStatus::kOk);
    ASSERT_TRUE(s.compact());  // into the snapshot (writers only link tables: up to half the set stays in them)
    roaring_bitmap_add_many(o, vals.size(), vals.data());
    for (int i = 0; i < 2000; ++i) {  // removes and fresh adds that stay in the delta
      uint32_t rm = vals[r.below(vals.size())], add = static_cast<uint32_t>(r.below(span));
      ASSERT_EQ(s.remove(rm), RoaringStatus::kOk);
      roaring_bitmap_remove(o, rm);
      ASSERT_EQ(s.add(add), RoaringStatus::kOk);
      roaring_bitmap_add(o, add);
    }
    sets.push_back(std::move(s));
    oracle.push_back(o);
  }
  EXPECT_GE(sets[0].stats().snapshot_bytes, 1u << 20) << "day0 must be indexed";
  EXPECT_EQ(sets[0].cardinality(), roaring_bitmap_get_cardinality(oracle[0]));
  std::vector<uint32_t> q(300000);
  for (size_t i = 0; i < q.size(); ++i)
    q[i] = i % 3 == 0 ? static_cast<uint32_t>(r.next()) : static_cast<uint32_t>(r.below(span));
  std::vector<uint8_t> out(q.size());
  uint64_t present = sets[0].contains_many(std::span<const uint32_t>(q), std::span<uint8_t>(out));
  uint64_t want_present = 0, any_hits = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    const bool want = roaring_bitmap_contains(oracle[0], q[i]);
    want_present += want;
    ASSERT_EQ(sets[0].contains(q[i]), want) << q[i];
    ASSERT_EQ(out[i] != 0, want) << q[i];
    bool any = false;
    for (auto* o : oracle) any |= roaring_bitmap_contains(o, q[i]);
    any_hits += any;
    ASSERT_EQ(RoaringSet::contains_any(sets, q[i]), any) << q[i];
  }
  EXPECT_EQ(present, want_present);
  EXPECT_GT(want_present, 3000u);  // expected 2/3 x 300,000 x 700,000 / 35.8e6 = 3,910 hits
  EXPECT_GT(any_hits, want_present);
  for (auto* o : oracle) roaring_bitmap_free(o);
}

// Issue 16, "bound the work a writer does inline": a writer whose delta
// passes compact_at links a newer, twice larger table after it (64, 128, 256,
// 512 slots here) instead of rebuilding the snapshot; no compaction runs
// until the chain of 4 tables is full. A process that made its view before
// any link sees every write in the linked tables (views follow `next`), a
// remove in a newer table hides an add in an older one, and maintain() folds
// the chain into one snapshot.
TEST(Roaring, WritersLinkTablesInsteadOfCompacting) {
  SegmentGuard g(unique_name("rlink"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet s = RoaringSet::create(seg, "l");  // defaults: head 64 slots, compact_at 0.5, auto_compact
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  pid_t child = shmf_test::fork_child([&] {
    Segment cs = Segment::open(g.name);
    RoaringSet c = RoaringSet::open(cs, "l");
    if (c.contains(7)) return 2;  // makes (and keeps) a view of the empty generation 1
    char b = 'r';
    if (write(to_parent[1], &b, 1) != 1) return 3;
    if (read(to_child[0], &b, 1) != 1) return 4;  // blocks until the parent wrote (EOF if it died)
    for (uint32_t v = 0; v < 400; ++v)
      if (c.contains(v * 11) != (v >= 50)) return 10;
    if (c.cardinality() != 350) return 11;
    return 0;
  });
  char b;
  ASSERT_EQ(read(to_parent[0], &b, 1), 1) << "child did not make its view";
  for (uint32_t v = 0; v < 400; ++v) ASSERT_EQ(s.add(v * 11), RoaringStatus::kOk) << v;
  auto st = s.stats();
  EXPECT_EQ(st.compactions, 0u) << "no writer rebuilt the snapshot";
  EXPECT_EQ(st.delta_tables, 4u) << "64 + 128 + 256 slots passed their halves at 32, 96, 224 values";
  EXPECT_EQ(st.delta_links, 3u);
  EXPECT_EQ(st.delta_capacity, 64u) << "the head keeps the size it got at the last compaction";
  EXPECT_EQ(st.delta_bytes, 64u * 4 + 8u * (64 + 128 + 256 + 512));
  for (uint32_t v = 0; v < 50; ++v) ASSERT_EQ(s.remove(v * 11), RoaringStatus::kOk);  // into the newest table
  EXPECT_EQ(s.cardinality(), 350u);
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  int status = shmf_test::wait_status(child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child (whose view predates every link) saw a different set: status " << status;
  for (int* p : {to_child, to_parent}) {
    close(p[0]);
    close(p[1]);
  }
  EXPECT_TRUE(seg.check(false).consistent());
  EXPECT_TRUE(s.maintain()) << "a chain of 4 tables is due";
  st = s.stats();
  EXPECT_EQ(st.compactions, 1u);
  EXPECT_EQ(st.delta_tables, 1u);
  EXPECT_EQ(st.snapshot_cardinality, 350u);
  EXPECT_FALSE(s.maintain()) << "an empty head is not due";
  for (uint32_t v = 0; v < 400; ++v) ASSERT_EQ(s.contains(v * 11), v >= 50) << v;
  EXPECT_EQ(s.cardinality(), 350u);
  // With the chain full (4 tables, the last past its half) the writer of an
  // auto_compact set compacts: the one inline rebuild, after 15x the head's
  // capacity / 2 writes.
  RoaringSet f = RoaringSet::create(seg, "full");
  for (uint32_t v = 0; v < 480; ++v) ASSERT_EQ(f.add(v), RoaringStatus::kOk);
  EXPECT_EQ(f.stats().compactions, 1u) << "32 + 64 + 128 + 256 = 480 values fill the chain's halves";
  EXPECT_EQ(f.stats().delta_tables, 1u);
  EXPECT_EQ(f.cardinality(), 480u);
  EXPECT_TRUE(seg.check(false).consistent());
}

// Writers link tables while a maintain() thread compacts (links take their
// own claim, so they go on during a build) and a reader checks every
// acknowledged add: nothing acknowledged is ever missing, across links,
// links stored while a compaction built, publishes and chain-full fallbacks.
// No timing assumption: the maintainer runs as often as it is scheduled.
TEST(Roaring, MaintainThreadWhileWritersLink) {
  SegmentGuard g(unique_name("rmnt"));
  Segment seg = Segment::create(g.name, seg_options());
  RoaringSet s = RoaringSet::create(seg, "m");  // defaults: links 64 -> 128 -> 256 -> 512, then larger heads
  const int kWriters = 2;
  const uint32_t kPer = 30000;
  std::atomic<uint32_t> acked[kWriters];
  for (auto& a : acked) a.store(0);
  std::atomic<bool> stop{false}, bad{false};
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w)
    ts.emplace_back([&, w] {
      for (uint32_t i = 0; i < kPer; ++i) {
        if (s.add(i * kWriters + static_cast<uint32_t>(w)) != RoaringStatus::kOk) bad = true;
        acked[w].store(i + 1);
      }
    });
  std::atomic<int> maintained{0};
  std::thread maintainer([&] {
    while (!stop) {
      try {
        if (s.maintain()) ++maintained;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kBusy) bad = true;  // kBusy: every retired slot still read (legal)
      }
      std::this_thread::yield();
    }
  });
  std::thread reader([&] {
    shmf_bench::Rng r(9);
    while (!stop) {
      int w = static_cast<int>(r.below(kWriters));
      uint32_t n = acked[w].load();
      if (n == 0) continue;
      uint32_t i = static_cast<uint32_t>(r.below(n));
      if (!s.contains(i * kWriters + static_cast<uint32_t>(w))) bad = true;
    }
  });
  for (auto& t : ts) t.join();
  stop = true;
  maintainer.join();
  reader.join();
  EXPECT_FALSE(bad.load()) << "an acknowledged add was not visible to another thread";
  EXPECT_EQ(s.cardinality(), uint64_t{kPer} * kWriters);
  for (uint32_t v = 0; v < kPer * kWriters; ++v) ASSERT_TRUE(s.contains(v)) << v;
  EXPECT_GT(s.stats().delta_links, 0u) << "the writers linked tables";
  EXPECT_TRUE(seg.check(false).consistent());
  printf("[maintain] compactions %llu (%d by maintain), links %llu\n",
         static_cast<unsigned long long>(s.stats().compactions), maintained.load(),
         static_cast<unsigned long long>(s.stats().delta_links));
}
