// tests/unit/test_readme_examples.cpp: the README's API examples, compiled and run
// (with small capacities), so the README cannot drift from the headers.
#include <gtest/gtest.h>

#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/window.hpp"
#include "test_util.h"

TEST(Readme, ApiAtAGlance) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("readme"));
  auto seg = shmfilter::Segment::open_or_create(g.name, {.size = 16ull << 20});
  auto seg2 = shmfilter::Segment::open(g.name);
  const uint64_t device_id = 0x3f2a9c0d11e4b7a5ull;
  int served = 0;
  auto serve = [&] { ++served; };

  auto seen = shmfilter::Bloom::create(seg, "freq:17:2026-11-30", {.capacity = 150'000, .error = 0.01});
  for (int i = 0; i < 2; ++i)
    if (!seen.contains(device_id)) { serve(); seen.add(device_id); }
  EXPECT_EQ(served, 1);
  EXPECT_TRUE(shmfilter::Bloom::open(seg2, "freq:17:2026-11-30").contains(device_id));

  auto today = shmfilter::Cuckoo::create(seg, "cf:17:2026-11-30", {.capacity = 150'000, .error = 0.002});
  EXPECT_EQ(today.insert_unique(device_id), shmfilter::CuckooStatus::kInserted);
  EXPECT_EQ(today.insert_unique(device_id), shmfilter::CuckooStatus::kExists);
  EXPECT_TRUE(today.erase(device_id));
  EXPECT_FALSE(today.contains(device_id));

  auto orders = shmfilter::RoaringSet::create(seg, "orders:2026-11-30", {});
  orders.add(4'000'017u);
  bool dup = orders.contains(4'000'017u);
  EXPECT_TRUE(dup);
  EXPECT_FALSE(orders.contains(4'000'018u));

  auto uv = shmfilter::Hll::create(seg, "uv:17:2026-11-30", {});
  uv.add(device_id);
  uint64_t distinct = uv.count();
  EXPECT_EQ(distinct, 1u);

  auto served_set = shmfilter::ExactSet::create(seg, "served:vip", {.capacity = 1'000'000});
  served = 0;
  for (int i = 0; i < 3; ++i)
    if (served_set.insert(device_id) == shmfilter::InsertResult::kInserted) serve();
  EXPECT_EQ(served, 1);

  const uint64_t plan = 17;
  auto week = shmfilter::Window::create(seg, "week", {.expected_per_bucket = 12'000, .utc_offset = 8 * 3600});
  served = 0;
  for (int i = 0; i < 2; ++i)
    if (week.mark_if_unseen(plan, device_id, 7) == shmfilter::WindowStatus::kNew) serve();  // once a week
  EXPECT_EQ(served, 1);
  served = 0;
  for (int i = 0; i < 5; ++i)
    if (week.mark_if_under(plan, device_id, 3, 7) == shmfilter::WindowStatus::kNew) serve();  // at most 3 a week
  EXPECT_EQ(served, 3);
  EXPECT_EQ(week.stats().variant, shmfilter::WindowVariant::kStamped);
  EXPECT_TRUE(seg.check().consistent());
}
