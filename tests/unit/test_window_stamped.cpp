// tests/unit/test_window_stamped.cpp: the stamped window variant in one process (the
// behaviour every variant shares runs in test_window.cpp's WindowBoth): one lane per pair
// whatever its days; stamps never alias, with or without maintain(); frequency caps over a
// sliding window; forget; overload to 8x keeps accepting and reports its rate; the shared
// table's fields are validated before any path follows them; bad options are clear errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "shmfilter/window.hpp"
#include "structures/cuckoo/cuckoo_impl.h"
#include "structures/window/window_impl.h"
#include "check_clean.h"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::SegmentGuard;
namespace wi = shmfilter::internal::window;
namespace ck = shmfilter::internal::cuckoo;

namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC

struct Fixture {
  SegmentGuard guard;
  Segment seg;
  explicit Fixture(const std::string& tag, uint64_t max = 1ull << 30) : guard(shmf_test::unique_name(tag)) {
    CreateOptions o;
    o.size = 16ull << 20;
    o.max_size = max;
    seg = Segment::create(guard.name, o);
  }
};

WindowOptions opts(uint64_t n, uint32_t retention = 7, double p = 0.01) {
  WindowOptions o;
  o.variant = WindowVariant::kStamped;
  o.expected_per_bucket = n;
  o.error = p;
  o.retention = retention;
  o.max_spaces = 1024;
  o.seed = 23;
  o.now = kT0;
  return o;
}

using shmf_test::expect_check_clean;  // tests/support/check_clean.h

wi::WindowHeader* header_of(Segment& seg, const char* name) {
  return reinterpret_cast<wi::WindowHeader*>(seg.base() + seg.find(name)->offset);
}

}  // namespace

TEST(WindowStamped, BadOptionsAreClearErrors) {
  Fixture f("wsbad");
  const auto before = f.seg.stats().used_bytes;
  WindowOptions o = opts(1000, 13);
  EXPECT_EQ(shmf_test::code_of([&] { Window::create(f.seg, "w", o); }), ErrorCode::kInvalidArgument);
  o = opts(1000, 7, 0.001);  // below what 12-bit fingerprints give
  try {
    Window::create(f.seg, "w", o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("variant cuckoo"), std::string::npos) << e.what();
  }
  EXPECT_EQ(f.seg.stats().used_bytes, before);
  EXPECT_FALSE(f.seg.find("w").has_value());
  EXPECT_EQ(window_variant_name(WindowVariant::kStamped), "stamped");
  EXPECT_EQ(window_status_name(WindowStatus::kCapped), "capped");
}

TEST(WindowStamped, APairMarkedOnManyDaysHoldsOneLane) {
  Fixture f("wslane");
  Window w = Window::create(f.seg, "w", opts(2000));
  for (int d = 0; d < 7; ++d) {
    w.set_now(kT0 + d * kDay);
    for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(w.mark(1, i), WindowStatus::kNew) << d << " " << i;
    for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(w.mark(1, i), WindowStatus::kSeen) << d << " " << i;
  }
  WindowStats st = w.stats();
  EXPECT_EQ(st.lanes, 1000u);  // seven days of the same pairs: one lane each
  EXPECT_EQ(st.buckets[0].distinct, 1000u);
  EXPECT_EQ(st.buckets[6].distinct, 1000u);
  // mark_if_unseen over the window: seen; over w = 1 tomorrow: new, restamped (still one lane).
  w.set_now(kT0 + 7 * kDay);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(w.mark_if_unseen(1, i, 7), WindowStatus::kSeen);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(w.mark_if_unseen(1, i, 1), WindowStatus::kNew);
  EXPECT_EQ(w.stats().lanes, 1000u);
  expect_check_clean(f.seg);
}

// Stamps are 4 bits: bucket E and E + 16 share one. A pair marked once must not answer seen
// 16 (or 32) buckets later, whether maintain() swept in between or the writers had to.
TEST(WindowStamped, StampsNeverAliasWithOrWithoutMaintain) {
  for (const bool maintain : {false, true}) {
    SCOPED_TRACE(maintain ? "maintain every day" : "no maintain");
    Fixture f(maintain ? "wsalias1" : "wsalias0");
    Window w = Window::create(f.seg, "w", opts(2000, 7));
    w.set_now(kT0);
    for (uint64_t i = 0; i < 1500; ++i) ASSERT_EQ(w.mark(1, i), WindowStatus::kNew);
    uint64_t marked_later = 0;
    for (int d = 1; d <= 40; ++d) {
      w.set_now(kT0 + d * kDay);
      if (maintain) w.maintain();
      // Some traffic on a few days only, so that writers must sweep inline when nobody else did.
      if (d % 5 == 0) {
        for (uint64_t i = 0; i < 100; ++i) ASSERT_EQ(w.mark(2, i + 10000 * d), WindowStatus::kNew);
        marked_later += 100;
      }
      uint64_t hits = 0;
      for (uint64_t i = 0; i < 1500; ++i) hits += w.seen(1, i, 7);
      if (d < 7) {
        EXPECT_EQ(hits, 1500u) << "day " << d;
      } else {
        EXPECT_LE(hits, 10u) << "day " << d << ": day 0's pairs came back (stamps aliased)";
      }
    }
    // Day 0's lanes are gone (reclaimed), not just hidden.
    const WindowStats st = w.stats();
    EXPECT_LE(st.lanes, 1500u + marked_later);
    EXPECT_GT(st.swept_bucket, w.bucket_of(kT0 + 20 * kDay));
    expect_check_clean(f.seg);
  }
}

TEST(WindowStamped, CapsCountASlidingWindow) {
  Fixture f("wscap");
  Window w = Window::create(f.seg, "w", opts(2000, 7));
  // Three impressions a week: days 0, 1, 2 use them; days 3..6 are capped; day 7 gets one
  // back (day 0 left the window), day 8 one more (day 1 left).
  const auto at = [&](int d) { w.set_now(kT0 + d * kDay + 3600); };
  // Per device, the answers of days 0..8 (the clock only moves forward: days outer).
  constexpr uint64_t kDevs = 200;
  std::vector<std::string> got(kDevs);
  const std::string want = "NNNCCCCCNCNC";  // d0 N, d1 N, d2 N C, d3..d6 C, d7 N C, d8 N C
  for (int d = 0; d <= 8; ++d) {
    at(d);
    const int calls = d == 2 || d >= 7 ? 2 : 1;
    for (uint64_t dev = 0; dev < kDevs; ++dev)
      for (int k = 0; k < calls; ++k) {
        const WindowStatus a = w.mark_if_under(5, dev, 3, 7);
        got[dev] += a == WindowStatus::kNew ? 'N' : a == WindowStatus::kCapped ? 'C' : '?';
      }
  }
  // A false positive on a tally counts an impression that was not (capped early, never late):
  // at 200 devices x 3 tallies x 0.2%, at most a few devices differ, and only by an early C.
  uint64_t differ = 0;
  for (uint64_t dev = 0; dev < kDevs; ++dev) {
    if (got[dev] == want) continue;
    ++differ;
    ASSERT_EQ(got[dev].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_FALSE(got[dev][i] == 'N' && want[i] == 'C') << "device " << dev << " allowed past its cap: " << got[dev];
  }
  EXPECT_LE(differ, 3u);
  at(8);
  for (uint64_t dev = 0; dev < kDevs; ++dev) EXPECT_TRUE(w.seen(5, dev, 1)) << "an allowed impression marks the pair";
  // Daily caps (w = 1) of up to 15.
  at(20);
  uint64_t early = 0;
  for (uint64_t dev = 0; dev < 100; ++dev) {
    uint32_t allowed = 0;
    for (uint32_t k = 0; k < 20; ++k) allowed += w.mark_if_under(6, dev, 15, 1) == WindowStatus::kNew;
    ASSERT_LE(allowed, 15u) << dev;
    early += allowed < 15;
  }
  EXPECT_LE(early, 3u);  // false positives among 15 tallies (0.2% each at most)
  at(21);
  uint64_t next_day = 0;
  for (uint64_t dev = 0; dev < 100; ++dev) next_day += w.mark_if_under(6, dev, 15, 1) == WindowStatus::kNew;
  EXPECT_GE(next_day, 97u);
  // Arguments.
  EXPECT_EQ(w.mark_if_under(6, uint64_t{1}, 0, 1), WindowStatus::kInvalidArgument);
  EXPECT_EQ(w.mark_if_under(6, uint64_t{1}, 16, 1), WindowStatus::kInvalidArgument);
  EXPECT_EQ(w.mark_if_under(6, uint64_t{1}, 3, 8), WindowStatus::kInvalidArgument);
  EXPECT_EQ(w.mark_if_under(6, std::string_view("0123456789abcdef"), 2, 0), WindowStatus::kNew);  // w 0 = retention
  expect_check_clean(f.seg);
}

TEST(WindowStamped, CapsAreUnsupportedOnTheOtherVariants) {
  Fixture f("wscapu");
  for (const WindowVariant v : {WindowVariant::kBloom, WindowVariant::kCuckoo}) {
    WindowOptions o = opts(1000);
    o.variant = v;
    Window w = Window::create(f.seg, std::string(window_variant_name(v)), o);
    EXPECT_EQ(w.mark_if_under(1, uint64_t{1}, 3, 1), WindowStatus::kUnsupported);
  }
}

TEST(WindowStamped, ForgetRemovesThePairNotItsCaps) {
  Fixture f("wsforget");
  Window w = Window::create(f.seg, "w", opts(2000));
  w.set_now(kT0);
  for (uint64_t i = 0; i < 500; ++i) {
    ASSERT_EQ(w.mark(1, i), WindowStatus::kNew);
    ASSERT_EQ(w.mark_if_under(2, i, 2, 7), WindowStatus::kNew);
    ASSERT_EQ(w.mark_if_under(2, i, 2, 7), WindowStatus::kNew);
    ASSERT_EQ(w.mark_if_under(2, i, 2, 7), WindowStatus::kCapped);
  }  // (seed 23: no false positive among these 2,000 keys)
  const uint64_t lanes = w.stats().lanes;
  for (uint64_t i = 0; i < 250; ++i) {
    ASSERT_EQ(w.forget(1, i), WindowStatus::kRemoved) << i << " seen " << w.seen(1, i, 7);
    ASSERT_EQ(w.forget(2, i), WindowStatus::kRemoved) << i;
  }
  uint64_t back = 0;
  for (uint64_t i = 0; i < 250; ++i) back += w.seen(1, i, 7) + w.seen(2, i, 7);
  EXPECT_LE(back, 2u);
  for (uint64_t i = 250; i < 500; ++i) ASSERT_TRUE(w.seen(1, i, 7));  // the others stay
  EXPECT_EQ(w.stats().lanes, lanes - 250 * 2);  // the pair's own lane in spaces 1 and 2; tallies stay
  // An impression served stays counted: the forgotten pairs are still capped in space 2.
  for (uint64_t i = 0; i < 250; ++i) ASSERT_EQ(w.mark_if_under(2, i, 2, 7), WindowStatus::kCapped) << i;
  for (uint64_t i = 0; i < 250; ++i) ASSERT_EQ(w.mark_if_unseen(1, i, 7), WindowStatus::kNew) << "served again";
  EXPECT_EQ(w.forget(1, uint64_t{999999}), WindowStatus::kAbsent);
  expect_check_clean(f.seg);
}

// A day at 8x what the window was sized for: every mark is accepted, the shared table grows
// sub-filters, and stats() says what rate that gives (the FP measured here stays within it).
TEST(WindowStamped, EightTimesExpectedKeepsAcceptingAndSaysItsRate) {
  Fixture f("wsover");
  const uint64_t n = 4000;
  Window w = Window::create(f.seg, "w", opts(n, 1));
  w.set_now(kT0);
  uint64_t seen_new = 0;
  for (uint64_t i = 0; i < 8 * n; ++i) {
    const WindowStatus a = w.mark(1, i);
    ASSERT_TRUE(a == WindowStatus::kNew || a == WindowStatus::kSeen) << i << " " << window_status_name(a);
    seen_new += a == WindowStatus::kSeen;  // a false positive: the pair answers marked already
  }
  EXPECT_LE(seen_new, 8 * n / 100);
  for (uint64_t i = 0; i < 8 * n; ++i) ASSERT_TRUE(w.seen(1, i, 1)) << i;
  const WindowStats st = w.stats();
  EXPECT_GE(st.buckets[0].layers, 2u);
  EXPECT_EQ(st.lanes, 8 * n - seen_new);
  // The shared table's bytes count its sub-filters (the front ends print this field).
  EXPECT_GT(st.shared_bytes, Window::plan(opts(n, 1)).shared_bytes);
  EXPECT_LT(st.shared_bytes, st.memory_bytes);
  uint64_t fp = 0;
  const uint64_t probes = 200000;
  for (uint64_t i = 0; i < probes; ++i) fp += w.seen(1, i + (1ull << 40), 1);
  const double measured = static_cast<double>(fp) / probes;
  printf("stamped 8x: measured FP %.4f%%, reported %.4f%%, layers %u, over %d\n", 100 * measured,
         100 * st.buckets[0].fp_rate_now, st.buckets[0].layers, st.buckets[0].over_capacity);
  EXPECT_LE(measured, 1.25 * st.window_fp_now(1) + 0.0005);
  EXPECT_LE(measured, 0.01) << "the asked 1% holds at 8x";
  expect_check_clean(f.seg);
}

// Every field of the shared table a path follows is validated at open (and by check).
TEST(WindowStamped, SharedTableFieldsAreValidated) {
  Fixture f("wstrust");
  Window w = Window::create(f.seg, "w", opts(3000, 1));
  w.set_now(kT0);
  for (uint64_t i = 0; i < 12000; ++i) ASSERT_NE(w.mark(1, i), WindowStatus::kFull);  // sub-filters 1..
  wi::WindowHeader* h = header_of(f.seg, "w");
  auto* t = reinterpret_cast<wi::TableHead*>(f.seg.base() + h->shared);
  auto* ch = reinterpret_cast<ck::Header*>(f.seg.base() + h->shared + wi::main_offset_in_table(h->space_table));
  ASSERT_GE(ch->sub_count, 2u);
  ASSERT_NO_THROW(Window::open(f.seg, "w"));
  const auto refused = [&](const char* what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(shmf_test::code_of([&] { Window::open(f.seg, "w"); }), ErrorCode::kCorrupt);
    EXPECT_FALSE(f.seg.check(false).consistent());
  };
  const uint64_t shared = h->shared;
  h->shared = shared + 64;
  refused("shared offset");
  h->shared = f.seg.size() - 64;
  refused("shared offset past the data");
  h->shared = shared;
  const uint64_t g = t->geometry;
  t->geometry = g + 1;
  refused("geometry");
  t->geometry = uint64_t{1} << 40;
  refused("huge geometry");
  t->geometry = g;
  const uint32_t lanes = ch->lane_bits;
  ch->lane_bits = 8;
  refused("lane bits");
  ch->lane_bits = lanes;
  const uint64_t sub1 = ch->subs[1].offset;
  ch->subs[1].offset = shared;
  refused("sub-filter 1 over the table");
  ch->subs[1].offset = sub1;
  const uint32_t l2 = ch->subs[1].log2_buckets;
  ch->subs[1].log2_buckets = l2 + 1;
  refused("sub-filter 1 shape");
  ch->subs[1].log2_buckets = l2;
  const uint32_t n = ch->sub_count;
  ch->sub_count = wi::kStampedMaxSubs + 1;
  refused("sub count");
  ch->sub_count = n;
  const uint32_t k = h->k_main;
  h->k_main = 16;
  refused("fingerprint bits");
  h->k_main = k;
  EXPECT_NO_THROW(Window::open(f.seg, "w"));
  expect_check_clean(f.seg);
}

TEST(WindowStamped, DropFreesTheSharedTableAndItsSubFilters) {
  Fixture f("wsdrop");
  const uint64_t used0 = f.seg.stats().used_bytes;
  {
    Window w = Window::create(f.seg, "w", opts(2000, 3));
    for (int d = 0; d < 6; ++d) {
      w.set_now(kT0 + d * kDay);
      for (uint64_t i = 0; i < 9000; ++i) (void)w.mark(1, i + 100000 * d);
      w.maintain();
    }
    EXPECT_GE(w.stats().buckets[0].layers, 1u);
  }
  EXPECT_TRUE(Window::drop(f.seg, "w"));
  EXPECT_EQ(f.seg.stats().used_bytes, used0);
  expect_check_clean(f.seg);
}

TEST(WindowStamped, PlanCountsTheSharedTable) {
  // The mission's week: 1.2e8 new pairs a day, 7 buckets, 1% over w = 7.
  WindowOptions o = opts(120000000, 7);
  const WindowSizing s = Window::plan(o);
  EXPECT_GT(s.shared_bytes, 7ull * 120000000 * 2);  // 16-bit lanes at <= 95% load
  EXPECT_LT(s.shared_bytes, 1800ull << 20);         // the insert-only variant's 7 tables + spare: 1,800 MiB
  EXPECT_EQ(s.full_window_bytes, s.region_bytes + 8 * s.table_bytes + s.shared_bytes);
}

// check: a dead process's writer lock is taken over by --repair, a wrong size counter recounted,
// a lane with fingerprint 0 (no writer stores one) reported as damage.
TEST(WindowStamped, CheckRepairsTheSharedTable) {
  Fixture f("wscheck");
  Window w = Window::create(f.seg, "w", opts(2000));
  w.set_now(kT0);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_NE(w.mark(1, i), WindowStatus::kFull);
  expect_check_clean(f.seg);
  wi::WindowHeader* h = header_of(f.seg, "w");
  auto* ch = reinterpret_cast<ck::Header*>(f.seg.base() + h->shared + wi::main_offset_in_table(h->space_table));
  const uint64_t size = ch->size;
  ch->size = size + 5;
  CheckReport r = f.seg.check(false);
  EXPECT_FALSE(r.consistent());
  r = f.seg.check(true);
  EXPECT_EQ(ch->size, size);
  expect_check_clean(f.seg);
  // A lock owned by a token no process holds (a dead writer).
  ch->lock_owner = (uint64_t{0x7fff} << 32) | 12345;
  EXPECT_FALSE(f.seg.check(false).consistent());
  f.seg.check(true);
  EXPECT_EQ(ch->lock_owner, 0u);
  expect_check_clean(f.seg);
  EXPECT_TRUE(w.seen(1, uint64_t{7}, 1));
  // Damage: a lane with fingerprint 0 and stamp 3.
  ck::Sub s = ck::sub_view(f.seg.base(), ch->subs[0]);
  uint64_t* words = static_cast<uint64_t*>(s.buckets);
  uint64_t b = 0;
  while (words[b] != 0) ++b;
  words[b] = 3;
  ch->size += 1;
  r = f.seg.check(false);
  bool said = false;
  for (const auto& fd : r.findings) said = said || fd.problem.find("fingerprint 0") != std::string::npos;
  EXPECT_TRUE(said);
  words[b] = 0;
  ch->size -= 1;
  expect_check_clean(f.seg);
}
