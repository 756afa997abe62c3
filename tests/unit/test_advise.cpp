// tests/unit/test_advise.cpp: shmfilter::advise against the seed's figures
// (mission/SEED-SUMMARY.md) and its selection table.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "shmfilter/advise.hpp"
#include "shmfilter/window.hpp"
#include "test_util.h"

using shmfilter::Advice;
using shmfilter::AdviseOptions;

namespace {

const shmfilter::Candidate& candidate(const Advice& a, const std::string& name) {
  for (const auto& c : a.candidates)
    if (c.structure == name) return c;
  ADD_FAILURE() << "no candidate " << name;
  static shmfilter::Candidate none;
  return none;
}

std::vector<uint64_t> random_ids(size_t n, uint64_t bound_bits, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> v(n);
  for (auto& x : v) x = bound_bits == 64 ? rng() : rng() & ((uint64_t{1} << bound_bits) - 1);
  return v;
}

AdviseOptions at(uint64_t daily) {
  AdviseOptions o;
  o.daily = daily;
  o.headroom = 1;  // the seed's figures are at capacity = daily
  return o;
}

}  // namespace

// Dense 0..1e8: 1,526 full chunks, all bitmaps: 1526 x 8 KiB = 12.5 MB (seed).
TEST(Advise, DenseSequentialIsRoaringAtTheSeedsTwelvePointFiveMegabytes) {
  std::vector<uint64_t> ids(1'000'000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  Advice a = shmfilter::advise(ids, at(100'000'000));
  EXPECT_EQ(a.choice, "roaring");
  EXPECT_NEAR(static_cast<double>(a.roaring_bytes_without_runs), 12.5e6, 0.02 * 12.5e6);
  // Run containers make a fully sequential range far smaller still (our snapshots are run-optimised).
  EXPECT_LT(candidate(a, "roaring").bytes, 100'000u);
  EXPECT_EQ(a.profile.chunks, 16u);
  EXPECT_EQ(a.profile.run_containers, 16u);
  EXPECT_TRUE(a.profile.fits_32);
}

// 1.2e8 hashes over 2^32: ~1,831 per chunk, arrays of 2 B each: 240 MB (seed), more than Bloom.
TEST(Advise, SparseThirtyTwoBitIsBloomAndRoaringCostsTheSeedsTwoHundredFortyMegabytes) {
  Advice a = shmfilter::advise(random_ids(200'000, 32, 1), at(120'000'000));
  EXPECT_EQ(a.choice, "bloom");
  EXPECT_NEAR(static_cast<double>(candidate(a, "roaring").bytes), 240e6, 0.03 * 240e6);
  EXPECT_GT(a.profile.array_containers, 50'000u);
}

// m = -n ln p / (ln 2)^2: n = 1.2e8, p = 0.01 -> 137 MiB (seed), classic layout.
TEST(Advise, BloomAtTheSeedsVolumeIsOneHundredThirtySevenMebibytes) {
  Advice a = shmfilter::advise(random_ids(100'000, 64, 2), at(120'000'000));
  EXPECT_EQ(a.choice, "bloom");
  EXPECT_NEAR(static_cast<double>(candidate(a, "bloom-classic").bytes) / (1 << 20), 137.1, 0.5);
  EXPECT_FALSE(candidate(a, "roaring").applicable);
  EXPECT_DOUBLE_EQ(candidate(a, "bloom").fp_rate, 0.01);
  EXPECT_FALSE(candidate(a, "bloom").deletes);
}

TEST(Advise, WindowDeletesSmallSetsAndCountsFollowTheSelectionTable) {
  const auto ids = random_ids(50'000, 64, 3);
  AdviseOptions o = at(120'000'000);
  o.window_days = 7;
  Advice w = shmfilter::advise(ids, o);
  EXPECT_EQ(w.choice, "window");
  {
    // Sized by Window::plan with the default variant, stamped: one table of 7 x 1.2e8 lanes.
    shmfilter::WindowOptions wo;
    wo.expected_per_bucket = 120'000'000;
    wo.error = 0.01;
    wo.retention = 7;
    const shmfilter::WindowSizing ws = shmfilter::Window::plan(wo);
    EXPECT_EQ(candidate(w, "window").bytes, ws.full_window_bytes);
    EXPECT_DOUBLE_EQ(candidate(w, "window").fp_rate, 0.01);
    EXPECT_TRUE(candidate(w, "window").deletes);
    EXPECT_NE(candidate(w, "window").note.find("stamped"), std::string::npos) << candidate(w, "window").note;
    // docs/window.md: 1,780.8 MiB of lanes at 90% (+ versions, counters) against the insert-only
    // ring's 225.0 MiB a bucket, 1,800 MiB for 7 days + the spare.
    EXPECT_NEAR(static_cast<double>(candidate(w, "window").bytes) / (1 << 20), 1782.0, 4.0);
    wo.variant = shmfilter::WindowVariant::kBloom;
    const shmfilter::WindowSizing ring = shmfilter::Window::plan(wo);
    EXPECT_NEAR(static_cast<double>(ring.table_bytes) / (1 << 20), 225.0, 0.5);
    EXPECT_NEAR(static_cast<double>(ring.full_window_bytes) / (1 << 20), 1800.0, 4.0);
    EXPECT_LT(candidate(w, "window").bytes, ring.full_window_bytes);
    EXPECT_GT(candidate(w, "window").bytes, 7 * candidate(w, "bloom").bytes) << "7 days of pairs, 16 bits each";
  }
  // --deletes with --window: the window's deletable (cuckoo) variant, 256.2 MiB a bucket.
  o.deletes = true;
  Advice wd = shmfilter::advise(ids, o);
  EXPECT_EQ(wd.choice, "window");
  EXPECT_TRUE(candidate(wd, "window").deletes);
  EXPECT_NEAR(static_cast<double>(candidate(wd, "window").bytes) / (1 << 20), 1782.0, 4.0);  // stamped deletes too
  // More days than a window keeps: not applicable, and the choice falls back to bloom.
  o.deletes = false;
  o.window_days = 100;
  Advice w100 = shmfilter::advise(ids, o);
  EXPECT_FALSE(candidate(w100, "window").applicable);
  EXPECT_EQ(w100.choice, "bloom");
  o.window_days = 7;
  o.deletes = false;

  o = at(30'000'000);
  o.deletes = true;
  Advice d = shmfilter::advise(ids, o);
  EXPECT_EQ(d.choice, "cuckoo");
  EXPECT_TRUE(candidate(d, "cuckoo").deletes);

  Advice s = shmfilter::advise(ids, at(5'000'000));
  EXPECT_EQ(s.choice, "set");
  EXPECT_NEAR(static_cast<double>(candidate(s, "set").bytes) / 5e6, 10.0, 0.1);  // 8 B / 0.8 load

  o = at(120'000'000);
  o.count_only = true;
  Advice h = shmfilter::advise(ids, o);
  EXPECT_EQ(h.choice, "hll");
  EXPECT_FALSE(candidate(h, "hll").membership);
}

TEST(Advise, ProfileCountsDuplicatesRangeAndChunks) {
  std::vector<uint64_t> ids = {5, 5, 5, 70000, 70001, 1u << 20};
  Advice a = shmfilter::advise(ids, {});
  EXPECT_EQ(a.profile.lines, 6u);
  EXPECT_EQ(a.profile.distinct, 4u);
  EXPECT_DOUBLE_EQ(a.profile.duplicates_ratio, 2.0 / 6.0);
  EXPECT_EQ(a.profile.min, 5u);
  EXPECT_EQ(a.profile.max, 1u << 20);
  EXPECT_EQ(a.profile.chunks, 3u);  // chunks 0, 1, 16
  EXPECT_EQ(a.profile.runs, 3u);    // {5}, {70000, 70001}, {2^20}
  EXPECT_EQ(a.daily, 4u);           // no --daily: the sample's distinct count
  EXPECT_EQ(a.capacity, 6u);        // x1.5 headroom
  uint64_t total = 0;
  for (uint64_t b : a.profile.value_histogram) total += b;
  EXPECT_EQ(total, 4u);
  EXPECT_EQ(a.profile.chunk_histogram[0], 2u);  // two chunks of 1 value
  EXPECT_EQ(a.profile.chunk_histogram[1], 1u);  // one chunk of 2
}

TEST(Advise, BadInputIsOneClearError) {
  std::vector<uint64_t> none;
  EXPECT_EQ(shmf_test::code_of([&] { shmfilter::advise(none, {}); }), shmfilter::ErrorCode::kBadInput);
  std::vector<uint64_t> one = {1};
  AdviseOptions o;
  o.error = 0;
  EXPECT_EQ(shmf_test::code_of([&] { shmfilter::advise(one, o); }), shmfilter::ErrorCode::kInvalidArgument);
  o = {};
  o.headroom = 0.5;
  EXPECT_EQ(shmf_test::code_of([&] { shmfilter::advise(one, o); }), shmfilter::ErrorCode::kInvalidArgument);
}

// #23: a daily volume near 2^64 made capacity = daily x headroom a double beyond uint64,
// converted to an integer anyway (undefined behaviour; `advise --daily 1.8e19`). The range
// is checked before any conversion, with one clear error; NaN/inf headroom too.
TEST(Advise, DailyAndHeadroomAreRangeCheckedBeforeConverting) {
  std::vector<uint64_t> ids = {1, 2, 3};
  for (uint64_t daily : {uint64_t{18'000'000'000'000'000'000u}, ~uint64_t{0}, shmfilter::kAdviseMaxDaily + 1}) {
    AdviseOptions o;
    o.daily = daily;
    std::string msg;
    try {
      shmfilter::advise(ids, o);
    } catch (const shmfilter::Error& e) {
      EXPECT_EQ(e.code(), shmfilter::ErrorCode::kInvalidArgument);
      msg = e.what();
    }
    EXPECT_NE(msg.find("daily volume"), std::string::npos) << daily << ": " << msg;
  }
  for (double h : {std::nan(""), std::numeric_limits<double>::infinity(), -1.0}) {
    AdviseOptions o;
    o.headroom = h;
    EXPECT_EQ(shmf_test::code_of([&] { shmfilter::advise(ids, o); }), shmfilter::ErrorCode::kInvalidArgument) << h;
  }
  AdviseOptions o;
  o.daily = 100'000'000'000;  // 1e11 a day: every candidate is still sized
  EXPECT_EQ(shmfilter::advise(ids, o).capacity, 150'000'000'000u);
  // At the bound a candidate may not be sizeable (a Bloom layer holds at most 2^41 bits):
  // that is the candidate's own clear error, never a conversion out of range.
  o.daily = shmfilter::kAdviseMaxDaily;
  o.headroom = 100;
  EXPECT_EQ(shmf_test::code_of([&] { shmfilter::advise(ids, o); }), shmfilter::ErrorCode::kInvalidArgument);
}
