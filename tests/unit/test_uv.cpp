// tests/unit/test_uv.cpp: the UV family (include/shmfilter/uv.hpp, docs/uv.md).
// Fixed seeds; every statistical bound is stated where it is asserted. The HLL's relative
// standard error is 1.04/sqrt(16384) = 0.81%; single estimates are held to 4 sigma (3.25%),
// RMS errors over many spaces to 1.2% (0.81% with the spread of an RMS over 30 samples).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/kill_point.h"
#include "shmfilter/hll.hpp"
#include "shmfilter/kinds.hpp"
#include "shmfilter/snapshot.hpp"
#include "shmfilter/uv.hpp"
#include "structures/snapshot_io.h"
#include "structures/uv/uv_impl.h"
#include "test_util.h"

using namespace shmfilter;
using namespace shmf_test;

namespace {

constexpr int64_t kDay0 = 1764547200;  // 2025-12-01 00:00 UTC
constexpr double kSigma = 0.0081;

UvOptions test_options() {
  UvOptions o;
  o.retention = 7;
  o.max_spaces = 256;
  o.chunk_bytes = 1 << 20;
  return o;
}

double rel(uint64_t est, uint64_t truth) { return std::fabs(static_cast<double>(est) - truth) / truth; }

// White-box: the day extent of the bucket holding `now`, and SPACE's slot in it (nullptr if none).
internal::uv::DayHeader* day_of(Segment& seg, const UvFamily& f, int64_t now) {
  using namespace internal::uv;
  auto* h = reinterpret_cast<UvHeader*>(seg.base() + seg.find("uv")->offset);
  DaySlot& slot = day_slots(h)[static_cast<uint64_t>(f.bucket_of(now)) % h->retention];
  return reinterpret_cast<DayHeader*>(seg.base() + slot.day);
}
internal::uv::SpaceSlot* space_slot(Segment& seg, const UvFamily& f, int64_t now, uint64_t space) {
  using namespace internal::uv;
  auto* h = reinterpret_cast<UvHeader*>(seg.base() + seg.find("uv")->offset);
  SpaceSlot* t = day_spaces(day_of(seg, f, now));
  for (uint32_t i = 0; i < h->space_table; ++i)
    if (t[i].key.load() == space + 1) return &t[i];
  return nullptr;
}

// A child process attached to the segment and inside a call (it holds a ReadGuard) from
// construction until leave(); then it waits for finish() and exits 0.
struct PinnedChild {
  int to_child[2] = {-1, -1}, to_parent[2] = {-1, -1};
  pid_t pid = -1;
  explicit PinnedChild(const std::string& name) {
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) std::abort();
    pid = fork_child([&] {
      Segment s = Segment::open(name);
      char c = 0;
      {
        ReadGuard guard(s);
        if (write(to_parent[1], &c, 1) != 1) return 2;
        if (read(to_child[0], &c, 1) != 1) return 3;  // held until leave()
      }
      if (write(to_parent[1], &c, 1) != 1) return 4;
      if (read(to_child[0], &c, 1) != 1) return 5;  // until finish()
      return 0;
    });
    char c = 0;
    if (read(to_parent[0], &c, 1) != 1) std::abort();  // it is inside its call
  }
  void leave() {  // returns once the child left its call
    char c = 0;
    if (write(to_child[1], &c, 1) != 1 || read(to_parent[0], &c, 1) != 1) std::abort();
  }
  bool finish() {  // leave() first
    char c = 0;
    if (write(to_child[1], &c, 1) != 1) return false;
    return exited_ok(wait_status(pid));
  }
  ~PinnedChild() {
    for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
  }
};

}  // namespace

TEST(Uv, OptionsOutOfRangeAreRefusedAndLeaveTheSegmentUnchanged) {
  SegmentGuard g(unique_name("uvopt"));
  Segment seg = Segment::create(g.name, small_options());
  const uint64_t used = seg.stats().used_bytes;
  for (auto bad : {+[](UvOptions& o) { o.retention = 0; }, +[](UvOptions& o) { o.retention = 65; },
                   +[](UvOptions& o) { o.bucket_seconds = 0; }, +[](UvOptions& o) { o.max_spaces = 0; },
                   +[](UvOptions& o) { o.exact_max = 0; }, +[](UvOptions& o) { o.chunk_bytes = 1000; }}) {
    UvOptions o = test_options();
    bad(o);
    EXPECT_EQ(code_of([&] { UvFamily::create(seg, "u", o); }), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(seg.stats().used_bytes, used);
  EXPECT_FALSE(seg.find("u").has_value());
}

TEST(Uv, CountsAreExactUpToExactMax) {
  SegmentGuard g(unique_name("uvexact"));
  Segment seg = Segment::create(g.name, small_options(16 << 20));
  UvFamily f = UvFamily::create(seg, "uv", test_options());
  f.set_now(kDay0 + 100);
  // Space s gets n_s distinct items, each added three times (duplicates never count).
  const std::vector<uint64_t> sizes = {1, 2, 7, 100, 500, 999, 1000};
  for (size_t s = 0; s < sizes.size(); ++s)
    for (int rep = 0; rep < 3; ++rep)
      for (uint64_t i = 0; i < sizes[s]; ++i) {
        UvStatus st = f.add(s, "device-" + std::to_string(s) + "-" + std::to_string(i));
        ASSERT_TRUE(st == UvStatus::kChanged || st == UvStatus::kUnchanged) << uv_status_name(st);
        if (rep > 0) {
          ASSERT_EQ(st, UvStatus::kUnchanged);
        }
      }
  for (size_t s = 0; s < sizes.size(); ++s) EXPECT_EQ(f.count(s, 1), sizes[s]) << "space " << s;
  EXPECT_EQ(f.count(999, 1), 0u);
  const UvStats st = f.stats();
  ASSERT_EQ(st.buckets.size(), 1u);
  EXPECT_EQ(st.buckets[0].dense_spaces, 0u);
  EXPECT_EQ(st.buckets[0].exact_spaces, sizes.size());
  // The 1001st item makes space 6 sparse (registers); its count is then the HLL estimate.
  f.add(6, "one-more");
  EXPECT_EQ(f.stats().buckets[0].sparse_spaces, 1u);
  EXPECT_EQ(f.stats().buckets[0].dense_spaces, 0u);
  EXPECT_LE(rel(f.count(6, 1), 1001), 4 * kSigma);
  EXPECT_TRUE(seg.check().consistent());
}

TEST(Uv, ErrorAtTenThousandHundredThousandAndAMillion) {
  SegmentGuard g(unique_name("uverr"));
  Segment seg = Segment::create(g.name, small_options(32 << 20));
  UvOptions o = test_options();
  UvFamily f = UvFamily::create(seg, "uv", o);
  f.set_now(kDay0 + 100);
  std::mt19937_64 rng(20261204);
  // 30 spaces of 1e4: RMS relative error <= 1.2%.
  double sq = 0;
  for (uint64_t s = 0; s < 30; ++s) {
    for (int i = 0; i < 10000; ++i) f.add(s, rng());
    const double e = rel(f.count(s, 1), 10000);
    EXPECT_LE(e, 4 * kSigma) << "space " << s;
    sq += e * e;
  }
  EXPECT_LE(std::sqrt(sq / 30), 0.012);
  // One space each of 1e5 and 1e6: within 4 sigma.
  for (int i = 0; i < 100000; ++i) f.add(100, rng());
  EXPECT_LE(rel(f.count(100, 1), 100000), 4 * kSigma);
  for (int i = 0; i < 1000000; ++i) f.add(101, rng());
  EXPECT_LE(rel(f.count(101, 1), 1000000), 4 * kSigma);
  // count_all: 30e4 + 1e5 + 1e6 distinct items over every space.
  EXPECT_LE(rel(f.count_all(1), 1400000), 4 * kSigma);
  EXPECT_TRUE(seg.check().consistent());
}

TEST(Uv, WindowCountIsTheUnionOverBucketsNotTheSum) {
  SegmentGuard g(unique_name("uvunion"));
  Segment seg = Segment::create(g.name, small_options(32 << 20));
  UvFamily f = UvFamily::create(seg, "uv", test_options());
  // Day d: space 1 (small) sees items [10d, 10d + 300): overlapping windows; space 2 (big)
  // sees [20000 d, 20000 d + 50000): 60% overlap from day to day.
  std::vector<std::set<uint64_t>> small(7), big(7);
  for (int d = 0; d < 7; ++d) {
    f.set_now(kDay0 + d * 86400 + 5);
    for (uint64_t i = 10 * uint64_t(d); i < 10 * uint64_t(d) + 300; ++i) {
      f.add(1, i);
      small[d].insert(i);
    }
    for (uint64_t i = 20000 * uint64_t(d); i < 20000 * uint64_t(d) + 50000; ++i) {
      f.add(2, i);
      big[d].insert(i);
    }
  }
  for (uint32_t w = 1; w <= 7; ++w) {
    std::set<uint64_t> us, ub;
    for (uint32_t a = 0; a < w; ++a) {
      us.insert(small[6 - a].begin(), small[6 - a].end());
      ub.insert(big[6 - a].begin(), big[6 - a].end());
    }
    EXPECT_EQ(f.count(1, w), us.size()) << "w=" << w;  // exact sketches: the exact union
    EXPECT_LE(rel(f.count(2, w), ub.size()), 4 * kSigma) << "w=" << w;
    EXPECT_LE(rel(f.count_all(w), us.size() + ub.size() - 0), 4 * kSigma + 300.0 / ub.size()) << "w=" << w;
  }
  EXPECT_EQ(code_of([&] { (void)f.count(1, 0); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { (void)f.count(1, 8); }), ErrorCode::kInvalidArgument);
}

TEST(Uv, RetentionDropsTheOldestBucketAndAStaleClockIsRefused) {
  SegmentGuard g(unique_name("uvret"));
  Segment seg = Segment::create(g.name, small_options(16 << 20));
  UvOptions o = test_options();
  o.retention = 3;
  UvFamily f = UvFamily::create(seg, "uv", o);
  for (int d = 0; d < 5; ++d) {
    f.set_now(kDay0 + d * 86400 + 1);
    for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(f.add(7, uint64_t(d) * 1000 + i), UvStatus::kChanged);
  }
  EXPECT_EQ(f.count(7, 1), 10u);
  EXPECT_EQ(f.count(7, 3), 30u);  // days 2..4; days 0 and 1 left
  const UvStats st = f.stats();
  EXPECT_EQ(st.buckets.size(), 3u);
  EXPECT_EQ(st.rotations, 5u);
  // A handle whose clock is two days behind names bucket 2 (kept): allowed; one older: refused.
  UvFamily late = UvFamily::open(seg, "uv");
  late.set_now(kDay0 + 2 * 86400 + 1);
  EXPECT_EQ(late.add(7, uint64_t{999999}), UvStatus::kChanged);
  late.set_now(kDay0 + 1 * 86400 + 1);
  EXPECT_EQ(late.add(7, uint64_t{999998}), UvStatus::kStale);
  EXPECT_EQ(f.stats().stale, 1u);
  // A day with no adds answers 0 and does not stop a wider window.
  f.set_now(kDay0 + 6 * 86400 + 1);
  EXPECT_EQ(f.count(7, 1), 0u);
  EXPECT_EQ(f.count(7, 3), 10u);  // day 4 only (days 5, 6 empty)
  EXPECT_TRUE(seg.check().consistent());
}

TEST(Uv, ExportedRegistersCountInRedisEncodingAsCountHll) {
  SegmentGuard g(unique_name("uvexport"));
  Segment seg = Segment::create(g.name, small_options(16 << 20));
  UvFamily f = UvFamily::create(seg, "uv", test_options());
  f.set_now(kDay0 + 5);
  Hll ref = Hll::create(seg, "ref");
  std::mt19937_64 rng(7);
  for (int i = 0; i < 600; ++i) {
    uint64_t v = rng();
    f.add(1, v);
    ref.add(v);
  }
  for (int i = 0; i < 30000; ++i) f.add(2, rng());
  for (uint64_t s : {uint64_t{1}, uint64_t{2}}) {
    const std::string redis = f.export_redis(s, 1);
    ASSERT_EQ(redis.size(), 12304u);
    EXPECT_EQ(Hll::count_redis(redis), f.count_hll(s, 1)) << "space " << s;
  }
  // An exact space's registers are the registers an Hll given the same items holds.
  EXPECT_EQ(f.export_redis(1, 1), ref.export_redis());
  EXPECT_EQ(f.count(1, 1), 600u);
  EXPECT_EQ(f.count(2, 1), f.count_hll(2, 1));  // dense: count is the HLL estimate
}

TEST(Uv, SpacesFullIsRefusedLoudly) {
  SegmentGuard g(unique_name("uvfull"));
  Segment seg = Segment::create(g.name, small_options(16 << 20));
  UvOptions o = test_options();
  o.max_spaces = 4;
  UvFamily f = UvFamily::create(seg, "uv", o);
  f.set_now(kDay0);
  for (uint64_t s = 0; s < 4; ++s) EXPECT_EQ(f.add(s, uint64_t{1}), UvStatus::kChanged);
  EXPECT_EQ(f.add(4, uint64_t{1}), UvStatus::kSpacesFull);
  EXPECT_EQ(f.add(0, uint64_t{2}), UvStatus::kChanged);  // known spaces carry on
  EXPECT_EQ(f.stats().spaces_full, 1u);
  EXPECT_EQ(f.spaces(1), (std::vector<uint64_t>{0, 1, 2, 3}));
}

TEST(Uv, DropFreesEveryExtentAndSaveRestoreKeepsEveryCount) {
  SegmentGuard g(unique_name("uvdrop"));
  Segment seg = Segment::create(g.name, small_options(32 << 20));
  seg.quiesce();
  const uint64_t used0 = seg.stats().used_bytes;
  UvFamily f = UvFamily::create(seg, "uv", test_options());
  std::mt19937_64 rng(11);
  for (int d = 0; d < 3; ++d) {
    f.set_now(kDay0 + d * 86400);
    for (uint64_t s = 0; s < 20; ++s)
      for (uint64_t i = 0; i < 50 * s * s; ++i) f.add(s, rng() % 40000);
  }
  std::vector<uint64_t> before;
  for (uint64_t s = 0; s < 20; ++s)
    for (uint32_t w = 1; w <= 3; ++w) before.push_back(f.count(s, w));
  const std::string blob = internal::uv::save(seg, *seg.find("uv"));
  ASSERT_TRUE(UvFamily::drop(seg, "uv"));
  EXPECT_EQ(seg.stats().used_bytes, used0);  // region, bucket extents and chunks all freed
  EXPECT_TRUE(seg.check().consistent());
  internal::snapshot::In in{reinterpret_cast<const unsigned char*>(blob.data()), blob.size(), "entry 'uv'"};
  internal::uv::restore(seg, "uv", in);
  UvFamily r = UvFamily::open(seg, "uv");
  r.set_now(kDay0 + 2 * 86400);
  std::vector<uint64_t> after;
  for (uint64_t s = 0; s < 20; ++s)
    for (uint32_t w = 1; w <= 3; ++w) after.push_back(r.count(s, w));
  EXPECT_EQ(before, after);
  EXPECT_TRUE(seg.check().consistent());
  // Truncated input is refused and creates nothing.
  ASSERT_TRUE(UvFamily::drop(seg, "uv"));
  internal::snapshot::In cut{reinterpret_cast<const unsigned char*>(blob.data()), blob.size() / 2, "entry 'uv'"};
  EXPECT_EQ(code_of([&] { internal::uv::restore(seg, "uv", cut); }), ErrorCode::kBadInput);
  EXPECT_FALSE(seg.find("uv").has_value());
}

TEST(Uv, CorruptDescriptorIsFoundByOpenReadsAndCheck) {
  SegmentGuard g(unique_name("uvcorrupt"));
  Segment seg = Segment::create(g.name, small_options(16 << 20));
  UvFamily f = UvFamily::create(seg, "uv", test_options());
  f.set_now(kDay0);
  for (uint64_t i = 0; i < 50; ++i) f.add(3, i);
  EXPECT_TRUE(seg.check().consistent());
  using namespace internal::uv;
  DayHeader* d = day_of(seg, f, kDay0);
  SpaceSlot* ss = space_slot(seg, f, kDay0, 3);
  ASSERT_NE(ss, nullptr);
  const uint64_t good = ss->desc.load();
  ss->desc.store(good + (1ull << 40));  // past every chunk
  EXPECT_EQ(code_of([&] { (void)f.count(3, 1); }), ErrorCode::kCorrupt);
  EXPECT_EQ(f.add(3, uint64_t{1}), UvStatus::kCorrupt);
  EXPECT_FALSE(seg.check().consistent());
  ss->desc.store(good);
  d->magic = 0;  // the bucket's extent
  EXPECT_EQ(code_of([&] { UvFamily::open(seg, "uv"); }), ErrorCode::kCorrupt);
  EXPECT_FALSE(seg.check().consistent());
  d->magic = kDayMagic;
  EXPECT_TRUE(seg.check().consistent());
  // An allocation state past the bucket's chunk list is refused before anything indexes it.
  const uint32_t chunks = d->chunk_count.load();
  const uint64_t bump = d->bump.load();
  d->chunk_count.store(100000);
  d->bump.store(uint64_t{1} << 50);
  EXPECT_EQ(f.add(77, uint64_t{1}), UvStatus::kCorrupt);
  EXPECT_EQ(code_of([&] { (void)f.count(3, 1); }), ErrorCode::kCorrupt);
  EXPECT_FALSE(seg.check().consistent());
  d->chunk_count.store(chunks);
  d->bump.store(bump);
  EXPECT_TRUE(seg.check().consistent());
  EXPECT_EQ(f.count(3, 1), 50u);
}

TEST(Uv, ConcurrentProcessesCountEveryItemOnce) {
  SegmentGuard g(unique_name("uvmp"));
  Segment seg = Segment::create(g.name, small_options(32 << 20));
  UvFamily::create(seg, "uv", test_options());
  // 4 processes add the same items (each space s gets items [0, 40 s^2)) in different orders;
  // the promotions of every space race between them.
  std::vector<pid_t> kids;
  for (int p = 0; p < 4; ++p)
    kids.push_back(fork_child([&, p] {
      Segment s = Segment::open(g.name);
      UvFamily f = UvFamily::open(s, "uv");
      f.set_now(kDay0 + 10);
      std::mt19937_64 rng(p + 1);
      std::vector<std::pair<uint64_t, uint64_t>> work;
      for (uint64_t sp = 1; sp <= 12; ++sp)
        for (uint64_t i = 0; i < 40 * sp * sp; ++i) work.emplace_back(sp, i);
      std::shuffle(work.begin(), work.end(), rng);
      for (auto [sp, i] : work) {
        UvStatus st = f.add(sp, i);
        if (st != UvStatus::kChanged && st != UvStatus::kUnchanged) {
          std::fprintf(stderr, "writer %d: add(%llu, %llu) answered status %d\n", p, (unsigned long long)sp,
                       (unsigned long long)i, static_cast<int>(st));
          return 3;
        }
      }
      return 0;
    }));
  // A reader counts every space while they write (and promotions retire and reuse blocks):
  // it never meets an invalid block and never counts an exact space past its size.
  int stop[2];
  ASSERT_EQ(pipe(stop), 0);
  pid_t reader = fork_child([&] {
    close(stop[1]);
    Segment s = Segment::open(g.name);
    UvFamily f = UvFamily::open(s, "uv");
    f.set_now(kDay0 + 10);
    fcntl(stop[0], F_SETFL, O_NONBLOCK);
    char c;
    for (int round = 0;; ++round) {
      for (uint64_t sp = 1; sp <= 12; ++sp) {
        const uint64_t n = 40 * sp * sp, got = f.count(sp, 1);
        if (n <= 1000 && got > n) return 6;
      }
      if (read(stop[0], &c, 1) == 0) return round > 0 ? 0 : 7;
    }
  });
  close(stop[0]);
  for (pid_t k : kids) EXPECT_TRUE(exited_ok(wait_status(k)));
  close(stop[1]);
  EXPECT_TRUE(exited_ok(wait_status(reader)));
  UvFamily f = UvFamily::open(seg, "uv");
  f.set_now(kDay0 + 10);
  for (uint64_t sp = 1; sp <= 12; ++sp) {
    const uint64_t n = 40 * sp * sp;
    if (n <= 1000) {
      EXPECT_EQ(f.count(sp, 1), n) << "space " << sp;
    } else {
      EXPECT_LE(rel(f.count(sp, 1), n), 4 * kSigma) << "space " << sp;
      // Sparse (n <= 5,760): the registers are exactly those of its items, whatever raced
      // (no buffer entry lost to a concurrent merge).
      std::vector<uint8_t> want(internal::hll::kHllRegisters), got(internal::hll::kHllRegisters);
      for (uint64_t i = 0; i < n; ++i) {
        uint32_t idx;
        uint8_t rank;
        internal::hll::hll_index_rank(internal::uv::item_hash(i), idx, rank);
        want[idx] = std::max<uint8_t>(want[idx], std::min<uint8_t>(rank, 30));
      }
      ASSERT_EQ(internal::hll::hll_redis_decode(f.export_redis(sp, 1), got.data()), "");
      EXPECT_TRUE(got == want) << "space " << sp;
    }
  }
  EXPECT_EQ(f.stats().buckets.at(0).sparse_spaces, 7u);  // spaces 6..12 (1,440..5,760 items)
  EXPECT_TRUE(seg.check().consistent());
}

#if defined(SHMFILTER_KILL_POINTS) && SHMFILTER_KILL_POINTS
// A process killed inside a promotion (after collecting the exact entries, before publishing),
// a rotation, a retirement (after linking the first old page), the page allocator (after
// popping a free page) or an exact append (entry written, count not yet published) leaves a
// family whose acknowledged items all count: the next writer takes over the dead process's
// space lock or allocator lock and finishes the work. The child adds items of space 5 (exact,
// acknowledged in a pipe) interleaved with items of spaces 6 and 7, which grow past exact_max
// (promotions), retire their exact pages and, on the second day, take them again (pops).
TEST(Uv, KilledInsidePromotionOrRotationLosesNoAcknowledgedItem) {
  for (const char* point : {"uv.promote.after_seal", "uv.promote.before_publish", "uv.rotate.after_free",
                            "uv.retire.after_link", "uv.alloc.after_pop", "uv.exact.before_count"}) {
    SCOPED_TRACE(point);
    SegmentGuard g(unique_name("uvkill"));
    Segment seg = Segment::create(g.name, small_options(32 << 20));
    UvOptions o = test_options();
    o.retention = 2;
    UvFamily::create(seg, "uv", o);
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const bool pop = std::string(point) == "uv.alloc.after_pop";
    pid_t kid = fork_child([&] {
      close(fds[0]);
      Segment s = Segment::open(g.name);
      UvFamily f = UvFamily::open(s, "uv");
      f.set_now(kDay0);
      for (uint64_t i = 0; i < 20; ++i) f.add(5, i);
      f.set_now(kDay0 + 2 * 86400);  // the rotation point: the slot of day 0 is replaced
      if (pop) {
        // Free pages on the new day's list: space 8 goes past exact_max (its exact pages retire),
        // and this call's successor hands them out (the kill comes at the first such pop).
        for (uint64_t i = 0; i < 1100; ++i) f.add(8, (uint64_t{8} << 32) | i);
      }
      internal::arm_kill_point(point, std::string(point) == "uv.exact.before_count" ? 300 : 1);
      for (uint64_t i = 0; i < 900; ++i) {
        for (uint64_t sp : {6, 7})
          for (uint64_t j = 0; j < 3; ++j) f.add(sp, (sp << 32) | (3 * i + j));
        if (f.add(5, i) != UvStatus::kChanged) return 4;
        if (write(fds[1], &i, sizeof i) != sizeof i) return 5;
      }
      return 0;
    });
    close(fds[1]);
    std::vector<uint64_t> acked;
    uint64_t v;
    while (read(fds[0], &v, sizeof v) == sizeof v) acked.push_back(v);
    close(fds[0]);
    EXPECT_TRUE(killed_by(wait_status(kid), SIGKILL));
    UvFamily f = UvFamily::open(seg, "uv");
    f.set_now(kDay0 + 2 * 86400);
    // The survivor carries on (taking over any lock the child held); then every acknowledged
    // item counts (exact below 1,000), and spaces 6 and 7 go on growing.
    for (uint64_t i = 0; i < 50; ++i) {
      UvStatus st = f.add(5, 100000 + i);
      ASSERT_TRUE(st == UvStatus::kChanged) << uv_status_name(st);
      for (uint64_t sp : {6, 7}) {
        st = f.add(sp, (sp << 32) | (100000 + i));
        ASSERT_TRUE(st == UvStatus::kChanged || st == UvStatus::kUnchanged) << uv_status_name(st);
      }
    }
    // The item in flight at the kill may or may not count; every acknowledged one does.
    const uint64_t n = f.count(5, 1);
    EXPECT_GE(n, acked.size() + 50);
    EXPECT_LE(n, acked.size() + 51);
    EXPECT_TRUE(seg.check(true).consistent());
    EXPECT_TRUE(seg.check().consistent());
  }
}
#endif

// The registers a space must hold for items [from, to) of ids (space << 32) | i: Redis's
// index and rank of each item's hash, clamped to 30 as the family keeps them.
static void expected_regs(uint64_t space, uint64_t from, uint64_t to, std::vector<uint8_t>& regs) {
  regs.resize(internal::hll::kHllRegisters);
  for (uint64_t i = from; i < to; ++i) {
    uint32_t idx;
    uint8_t rank;
    internal::hll::hll_index_rank(internal::uv::item_hash((space << 32) | i), idx, rank);
    regs[idx] = std::max<uint8_t>(regs[idx], std::min<uint8_t>(rank, 30));
  }
}
static std::vector<uint8_t> exported_regs(const UvFamily& f, uint64_t space) {
  std::vector<uint8_t> regs(internal::hll::kHllRegisters);
  EXPECT_EQ(internal::hll::hll_redis_decode(f.export_redis(space, 1), regs.data()), "");
  return regs;
}

// Mid-size spaces (above exact_max) keep sparse registers: a Rice code of the registers plus
// an append buffer, far smaller than a dense sketch (36 pages, 9,216 bytes), holding exactly the
// registers of their items (so the Redis export and PFCOUNT are the same as a dense sketch's).
// Fixed items; the byte bounds are the sketch's pages for these sizes (measured, see below)
// plus one page.
TEST(Uv, MidSizeSpacesAreSparseSmallAndHoldExactlyTheirRegisters) {
  SegmentGuard g(unique_name("uvsparse"));
  Segment seg = Segment::create(g.name, small_options(64 << 20));
  struct Case {
    uint64_t n;
    uint64_t max_bytes;  // bound on the space's live block
    bool sparse;
  };
  // Computed for these items (head + data pages of the code of their registers): 1,500:
  // 1,792 B; 3,000: 2,560 B; 6,000: 3,840 B; 20,000: 6,144 B (sparse while the code fits 24
  // pages, to ~22,000 devices); 100,000: dense (9,216 B).
  const std::vector<Case> cases = {{1500, 2048, true}, {3000, 2816, true}, {6000, 4096, true},
                                   {20000, 6400, true}, {100000, 9216, false}};
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(cases[c].n);
    UvFamily f = UvFamily::create(seg, "uv" + std::to_string(c), test_options());
    f.set_now(kDay0 + 100);
    const uint64_t space = 40 + c;
    for (int rep = 0; rep < 2; ++rep)
      for (uint64_t i = 0; i < cases[c].n; ++i) {
        const UvStatus st = f.add(space, (space << 32) | i);
        ASSERT_TRUE(st == UvStatus::kChanged || st == UvStatus::kUnchanged) << uv_status_name(st);
        // (a dense word may recover a register it had clamped: only sparse is asserted)
        if (rep > 0 && cases[c].sparse) {
          ASSERT_EQ(st, UvStatus::kUnchanged);
        }
      }
    const UvBucketStats b = f.stats().buckets.at(0);
    EXPECT_EQ(b.sparse_spaces, cases[c].sparse ? 1u : 0u);
    EXPECT_EQ(b.dense_spaces, cases[c].sparse ? 0u : 1u);
    std::vector<uint8_t> want;
    expected_regs(space, 0, cases[c].n, want);
    EXPECT_LE(b.block_bytes, cases[c].max_bytes);
    if (cases[c].sparse) {
      EXPECT_TRUE(exported_regs(f, space) == want);
    } else {
      const std::vector<uint8_t> got = exported_regs(f, space);
      uint32_t differ = 0;
      for (uint32_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
      EXPECT_LE(differ, 16u);  // dense clamps a register 16 above its word's least: rare (docs/uv.md)
    }
    EXPECT_EQ(f.count(space, 1), f.count_hll(space, 1));
    EXPECT_LE(rel(f.count(space, 1), cases[c].n), 4 * kSigma);
    // The union with another day: the register max of both (day 2 holds the odd half again).
    f.set_now(kDay0 + 86400 + 100);
    for (uint64_t i = 1; i < cases[c].n; i += 2) f.add(space, (space << 32) | i);
    for (uint64_t i = cases[c].n; i < cases[c].n + 500; ++i) f.add(space, (space << 32) | i);
    EXPECT_LE(rel(f.count(space, 2), cases[c].n + 500), 4 * kSigma);
    EXPECT_TRUE(seg.check().consistent());
    // Saved and restored (sparse as dense words): the same registers.
    const std::string name = "uv" + std::to_string(c);
    f.set_now(kDay0 + 100);
    const uint64_t hll_before = f.count_hll(space, 1);
    const std::string blob = internal::uv::save(seg, *seg.find(name));
    ASSERT_TRUE(UvFamily::drop(seg, name));
    internal::uv::restore(seg, name, internal::snapshot::In{reinterpret_cast<const unsigned char*>(blob.data()),
                                                            blob.size(), "entry"});
    UvFamily r = UvFamily::open(seg, name);
    r.set_now(kDay0 + 100);
    if (cases[c].sparse) {
      EXPECT_TRUE(exported_regs(r, space) == want);
    }
    EXPECT_EQ(r.count_hll(space, 1), hll_before);
  }
}

// 200 spaces of 2,000 devices each, grown one after the other (each reuses the pages the
// previous one left): the day's chunks hold 200 sparse sketches of about 2.3 KiB, where dense
// sketches alone were 200 x 8,832 = 1,766,400 bytes (the code before the sparse tier, same
// adds: 29 chunks of 64 KiB = 1,900,544; the unary sparse tier of format 1: 14 chunks, 917,504).
// Bound: 200 x 2,560 (live: head + 9 pages) + 2 x 64 KiB (pages not yet taken again, the last
// chunk's tail).
TEST(Uv, MidSizeSpacesCostAFractionOfDenseBlocks) {
  SegmentGuard g(unique_name("uvsmem"));
  Segment seg = Segment::create(g.name, small_options(32 << 20));
  UvOptions o = test_options();
  o.chunk_bytes = 64 << 10;
  UvFamily f = UvFamily::create(seg, "uv", o);
  f.set_now(kDay0 + 100);
  for (uint64_t s = 0; s < 200; ++s)
    for (uint64_t i = 0; i < 2000; ++i) {
      const UvStatus st = f.add(s, (s << 32) | i);
      ASSERT_TRUE(st == UvStatus::kChanged || st == UvStatus::kUnchanged) << uv_status_name(st);
    }
  const UvBucketStats b = f.stats().buckets.at(0);
  EXPECT_EQ(b.sparse_spaces, 200u);
  EXPECT_LE(b.block_bytes, 200u * 2560);
  EXPECT_LE(b.chunk_bytes, 200u * 2560 + 2 * (64 << 10));
  double sq = 0;
  for (uint64_t s = 0; s < 200; ++s) sq += std::pow(rel(f.count(s, 1), 2000), 2);
  EXPECT_LE(std::sqrt(sq / 200), 1.2 * kSigma);  // RMS over 200 spaces: sigma x (1 + ~0.1)
  EXPECT_TRUE(seg.check().consistent());
}

#if defined(SHMFILTER_KILL_POINTS) && SHMFILTER_KILL_POINTS
// A process killed inside a sparse merge (after sealing the buffer, before publishing the
// merged block, while linking the old one into a retired list) loses no acknowledged register:
// the next writer finishes the merge.
TEST(Uv, KilledInsideASparseMergeLosesNoAcknowledgedRegister) {
  // (uv.retire.after_link is the same code for sparse lists: the test above kills there.)
  for (const char* point : {"uv.promote.after_seal", "uv.promote.before_publish"}) {
    SCOPED_TRACE(point);
    SegmentGuard g(unique_name("uvskill"));
    Segment seg = Segment::create(g.name, small_options(32 << 20));
    UvFamily::create(seg, "uv", test_options());
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t kid = fork_child([&] {
      close(fds[0]);
      Segment s = Segment::open(g.name);
      UvFamily f = UvFamily::open(s, "uv");
      f.set_now(kDay0);
      for (uint64_t i = 0; i < 1200; ++i) f.add(5, (uint64_t{5} << 32) | i);  // sparse now
      internal::arm_kill_point(point, 3);  // the third merge from now
      for (uint64_t i = 1200; i < 8000; ++i) {
        const UvStatus st = f.add(5, (uint64_t{5} << 32) | i);
        if (st != UvStatus::kChanged && st != UvStatus::kUnchanged) return 4;
        if (write(fds[1], &i, sizeof i) != sizeof i) return 5;
      }
      return 0;
    });
    close(fds[1]);
    uint64_t last = 1199, v;
    while (read(fds[0], &v, sizeof v) == sizeof v) last = v;
    close(fds[0]);
    EXPECT_TRUE(killed_by(wait_status(kid), SIGKILL));
    ASSERT_LT(last, 7999u);
    UvFamily f = UvFamily::open(seg, "uv");
    f.set_now(kDay0);
    for (uint64_t i = 8000; i < 9000; ++i) {
      const UvStatus st = f.add(5, (uint64_t{5} << 32) | i);
      ASSERT_TRUE(st == UvStatus::kChanged || st == UvStatus::kUnchanged) << uv_status_name(st);
    }
    std::vector<uint8_t> want, got = exported_regs(f, 5);
    expected_regs(5, 0, last + 1, want);
    expected_regs(5, 8000, 9000, want);
    for (uint32_t i = 0; i < want.size(); ++i) ASSERT_GE(got[i], want[i]) << "register " << i;
    EXPECT_TRUE(seg.check(true).consistent());
    EXPECT_TRUE(seg.check().consistent());
  }
}
#endif

// Pages a replaced sketch leaves are handed out again (to any sketch of the bucket) once no
// process can hold them, and never while a process that announced a call before their
// retirement (the segment's ReadGuard, docs/CONCURRENCY.md) is still inside it.
TEST(Uv, RetiredBlocksAreReusedOnlyWhenNoProcessCanHoldThem) {
  SegmentGuard g(unique_name("uvreuse"));
  Segment seg = Segment::create(g.name, small_options(32 << 20));
  UvOptions o = test_options();
  UvFamily f = UvFamily::create(seg, "uv", o);
  f.set_now(kDay0 + 1);
  // Space 1 grows past exact alone: its 25 exact pages retire, and its merges take them.
  for (uint64_t i = 0; i < 1500; ++i) f.add(1, i);
  const UvBucketStats a = f.stats().buckets.at(0);
  EXPECT_GT(a.reused, 0u);
  // Space 2 goes the same way: its pages come from those space 1 left.
  for (uint64_t i = 0; i < 1500; ++i) f.add(2, i);
  const UvBucketStats b = f.stats().buckets.at(0);
  EXPECT_GE(b.reused - a.reused, 20u);
  EXPECT_LE(b.chunk_bytes - a.chunk_bytes, 0u + o.chunk_bytes);
  EXPECT_EQ(f.count(1, 1), f.count_hll(1, 1));
  EXPECT_LE(rel(f.count(2, 1), 1500), 4 * kSigma);
  EXPECT_TRUE(seg.check().consistent());

  // A process inside a call (it holds a ReadGuard) blocks the reuse of pages retired after it
  // announced; once it leaves, they are reused.
  PinnedChild kid(g.name);
  // The pages free now (retired before the guard, and no call of this process in flight) are
  // all that may be handed out again while the child holds its guard.
  const UvBucketStats before = f.stats().buckets.at(0);
  for (uint64_t i = 0; i < 1500; ++i) f.add(3, i);
  for (uint64_t i = 0; i < 1500; ++i) f.add(4, i);
  const UvBucketStats pinned = f.stats().buckets.at(0);
  const uint64_t reused_pinned = pinned.reused - before.reused;
  EXPECT_LE(reused_pinned, before.retired_bytes / internal::uv::kPage);
  EXPECT_GT(pinned.retired_bytes, 20u * internal::uv::kPage);  // spaces 3 and 4 left pages that wait
  kid.leave();
  for (uint64_t i = 0; i < 1500; ++i) f.add(5, i);
  const uint64_t reused_after = f.stats().buckets.at(0).reused - pinned.reused;
  EXPECT_TRUE(kid.finish());
  // While the guard was held only pages retired before it could be handed out; after it,
  // space 5 reuses a whole exact sketch's pages and more.
  EXPECT_GE(reused_after, 20u);
  for (uint64_t s = 1; s <= 5; ++s) EXPECT_LE(rel(f.count(s, 1), 1500), 4 * kSigma) << "space " << s;
  EXPECT_TRUE(seg.check().consistent());
}

// A replaced sketch stays exactly as published while a process that may hold its old desc is
// inside a call: the limbo list links retired heads through their `reserved` word only. (It
// linked every retired page through its first u32, the head's magic included, at once: a
// concurrent add that had loaded the old desc then failed validation and answered kCorrupt,
// 1 run in 4..15 of ConcurrentProcessesCountEveryItemOnce.)
TEST(Uv, ARetiredSketchStaysAsPublishedWhileAProcessMayReadIt) {
  SegmentGuard g(unique_name("uvlimbo"));
  Segment seg = Segment::create(g.name, small_options(32 << 20));
  UvFamily f = UvFamily::create(seg, "uv", test_options());
  f.set_now(kDay0 + 1);
  for (uint64_t i = 0; i < 1500; ++i) f.add(7, i);  // past exact: a sparse sketch
  using namespace internal::uv;
  DayHeader* d = day_of(seg, f, kDay0 + 1);
  SpaceSlot* ss = space_slot(seg, f, kDay0 + 1, 7);
  ASSERT_NE(ss, nullptr);
  const uint64_t ppc = d->chunk_bytes / kPage;
  auto page = [&](uint64_t p) { return seg.base() + day_chunks(d)[p / ppc] + (p % ppc) * kPage; };
  const uint64_t old = ss->desc.load();
  ASSERT_EQ(old & kEncMask, uint64_t{kEncSparse});
  auto* hd = reinterpret_cast<PageHead*>(page(old >> 2));
  struct {
    uint32_t magic, code_bits;
    uint8_t enc;
    uint16_t npages;
    uint64_t space;
  } head_before{hd->magic, hd->code_bits, hd->enc, hd->npages, hd->space};
  std::vector<std::vector<std::byte>> data_before;
  for (uint32_t i = 0; i < hd->npages; ++i) {
    const std::byte* q = page(head_refs(hd)[i]);
    data_before.emplace_back(q, q + kPage);
  }
  PinnedChild kid(g.name);  // a call in flight that began before the replacement
  uint64_t i = 1500;
  while (ss->desc.load() == old && i < 200000) f.add(7, i++);  // until a merge replaces the sketch
  ASSERT_NE(ss->desc.load(), old) << "no merge replaced the sketch";
  for (uint64_t s = 8; s < 40; ++s)  // more retirements and allocations while the child holds its call
    for (uint64_t j = 0; j < 1500; ++j) f.add(s, j);
  EXPECT_EQ(hd->magic, head_before.magic);
  EXPECT_EQ(hd->enc, head_before.enc);
  EXPECT_EQ(hd->space, head_before.space);
  EXPECT_EQ(hd->npages, head_before.npages);
  EXPECT_EQ(hd->code_bits, head_before.code_bits);
  for (uint32_t k = 0; k < data_before.size(); ++k)
    EXPECT_EQ(std::memcmp(page(head_refs(hd)[k]), data_before[k].data(), kPage), 0) << "data page " << k;
  kid.leave();
  EXPECT_TRUE(kid.finish());
  EXPECT_TRUE(seg.check().consistent());
}

// Merges, promotions and exact appends take the space's own lock word, never the segment's
// lock (docs/uv.md "Concurrency"): while this process holds the segment lock (inside a
// transaction), a child's adds that merge a sparse sketch ~100 times, promote an exact one and
// append to a new one all complete. (Layout 1 merged under the segment lock: the child blocked
// until the transaction ended, and the 30-second hang guard below failed the test.)
TEST(Uv, MergesAndExactAddsNeverTakeTheSegmentLock) {
  SegmentGuard g(unique_name("uvnolock"));
  Segment seg = Segment::create(g.name, small_options(32 << 20));
  UvFamily f = UvFamily::create(seg, "uv", test_options());
  f.set_now(kDay0 + 5);
  for (uint64_t i = 0; i < 1200; ++i) {
    const UvStatus st = f.add(1, (uint64_t{1} << 32) | i);  // sparse past 1,000
    ASSERT_TRUE(st == UvStatus::kChanged || st == UvStatus::kUnchanged) << uv_status_name(st);
  }
  for (uint64_t i = 0; i < 990; ++i) ASSERT_EQ(f.add(3, i), UvStatus::kChanged);                        // exact, near the threshold
  int go[2], done[2], ready[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(done), 0);
  ASSERT_EQ(pipe(ready), 0);
  pid_t kid = fork_child([&] {
    Segment s = Segment::open(g.name);
    UvFamily c = UvFamily::open(s, "uv");  // before the parent takes the lock: an open may walk the allocator under it
    c.set_now(kDay0 + 5);
    char x = 0;
    if (write(ready[1], &x, 1) != 1) return 7;
    if (read(go[0], &x, 1) != 1) return 2;
    for (uint64_t i = 1200; i < 4000; ++i)
      if (UvStatus st = c.add(1, (uint64_t{1} << 32) | i); st != UvStatus::kChanged && st != UvStatus::kUnchanged) return 3;
    for (uint64_t i = 990; i < 1100; ++i)  // promoted at 1,001
      if (UvStatus st = c.add(3, i); st != UvStatus::kChanged && (i < 1000 || st != UvStatus::kUnchanged)) return 4;
    for (uint64_t i = 0; i < 500; ++i)
      if (c.add(2, i) != UvStatus::kChanged) return 5;  // a first sketch and 12 appended pages
    return write(done[1], &x, 1) == 1 ? 0 : 6;
  });
  bool finished = false;
  char r = 0;
  ASSERT_EQ(read(ready[0], &r, 1), 1) << "the child could not open the family";
  seg.transact([&](ControlTxn&) {
    char x = 0;
    ASSERT_EQ(write(go[1], &x, 1), 1);
    struct pollfd p = {done[0], POLLIN, 0};
    finished = poll(&p, 1, 30000) == 1 && read(done[0], &x, 1) == 1;  // a hang guard, not a speed bound
  });
  EXPECT_TRUE(finished) << "the child's adds waited for the segment lock";
  EXPECT_TRUE(exited_ok(wait_status(kid)));
  EXPECT_EQ(f.count(2, 1), 500u);
  EXPECT_LE(rel(f.count(1, 1), 4000), 4 * kSigma);
  EXPECT_LE(rel(f.count(3, 1), 1100), 4 * kSigma);
  const UvBucketStats b = f.stats().buckets.at(0);
  EXPECT_EQ(b.sparse_spaces, 2u);
  EXPECT_TRUE(seg.check().consistent());
}
