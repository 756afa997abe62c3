// tests/unit/test_c_api_uv.cpp: the UV family through the C API (shmfilter.h, "uv" block):
// bad options (-SHMF_EINVAL, segment unchanged), add / count over buckets (union), the
// HLL count and Redis export, count_all, stats, kSpacesFull as -SHMF_EFULL, a window out
// of range as -SHMF_EINVAL, and a dropped handle answering -SHMF_EDROPPED.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shmfilter/hll.hpp"
#include "shmfilter/shmfilter.h"
#include "test_util.h"

namespace {

constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC

struct CSeg {
  shmf_test::SegmentGuard guard{shmf_test::unique_name("capiuv")};
  shmf_segment* seg = nullptr;
  CSeg() {
    shmf_segment_options o;
    shmf_segment_options_init(&o);
    o.size = 16ull << 20;
    o.max_size = 1ull << 30;
    EXPECT_EQ(shmf_segment_create(guard.name.c_str(), &o, &seg), 0) << shmf_last_error_message();
  }
  ~CSeg() { shmf_segment_close(seg); }
};

}  // namespace

TEST(CApiUv, BadOptionsAreInvalidAndLeaveTheSegmentUnchanged) {
  CSeg s;
  shmf_uv_options o;
  shmf_uv_options_init(&o);
  shmf_uv* u = nullptr;
  o.retention = 0;
  EXPECT_EQ(shmf_uv_create(s.seg, "u", &o, &u), -SHMF_EINVAL);
  shmf_uv_options_init(&o);
  o.chunk_bytes = 100;
  EXPECT_EQ(shmf_uv_create(s.seg, "u", &o, &u), -SHMF_EINVAL);
  EXPECT_NE(std::string(shmf_last_error_message()).find("chunk_bytes"), std::string::npos) << shmf_last_error_message();
  EXPECT_EQ(u, nullptr);
  EXPECT_EQ(shmf_uv_open(s.seg, "u", &u), -SHMF_ENOTFOUND);
  EXPECT_EQ(shmf_uv_drop(s.seg, "u"), 0);
}

TEST(CApiUv, AddCountUnionExportStatsAndDrop) {
  CSeg s;
  shmf_uv_options o;
  shmf_uv_options_init(&o);
  o.retention = 3;
  o.max_spaces = 4;
  o.chunk_bytes = 1 << 20;
  shmf_uv* u = nullptr;
  ASSERT_EQ(shmf_uv_create(s.seg, "uv", &o, &u), 0) << shmf_last_error_message();
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(shmf_uv_set_now(u, kT0 + d * 86400 + 5), 0);
    for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(shmf_uv_add_u64(u, 42, i + 50 * uint64_t(d)), 1);
    EXPECT_EQ(shmf_uv_add_u64(u, 42, 50 * uint64_t(d)), 0);  // again: unchanged
    const std::string dev = "device-" + std::to_string(d);
    EXPECT_EQ(shmf_uv_add(u, 7, dev.data(), dev.size()), 1);
  }
  uint64_t n = 0;
  ASSERT_EQ(shmf_uv_count(u, 42, 1, &n), 0);
  EXPECT_EQ(n, 100u);
  ASSERT_EQ(shmf_uv_count(u, 42, 2, &n), 0);
  EXPECT_EQ(n, 150u);  // the union of [0,100) and [50,150)
  ASSERT_EQ(shmf_uv_count(u, 7, 3, &n), 0);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(shmf_uv_count(u, 42, 4, &n), -SHMF_EINVAL);
  EXPECT_EQ(shmf_uv_count(u, 42, 0, &n), -SHMF_EINVAL);
  uint64_t all = 0;
  ASSERT_EQ(shmf_uv_count_all(u, 2, &all), 0);
  EXPECT_NEAR(static_cast<double>(all), 152.0, 3.0);  // HLL estimate at 152 items: linear counting, within 2%
  uint64_t hll = 0;
  ASSERT_EQ(shmf_uv_count_hll(u, 42, 2, &hll), 0);
  std::vector<char> buf(SHMF_UV_REDIS_BYTES);
  size_t needed = 0;
  EXPECT_EQ(shmf_uv_export_redis(u, 42, 2, buf.data(), 10, &needed), -SHMF_EFULL);
  EXPECT_EQ(needed, size_t{SHMF_UV_REDIS_BYTES});
  ASSERT_EQ(shmf_uv_export_redis(u, 42, 2, buf.data(), buf.size(), &needed), 0);
  EXPECT_EQ(shmfilter::Hll::count_redis(std::string_view(buf.data(), needed)), hll);
  // max_spaces 4: the fifth space of a bucket is refused with -SHMF_EFULL.
  for (uint64_t sp = 100; sp < 102; ++sp) EXPECT_EQ(shmf_uv_add_u64(u, sp, 1), 1);
  EXPECT_EQ(shmf_uv_add_u64(u, 200, 1), -SHMF_EFULL);
  shmf_uv_stats st;
  ASSERT_EQ(shmf_uv_stats_get(u, &st), 0);
  EXPECT_EQ(st.retention, 3u);
  EXPECT_EQ(st.buckets, 2u);
  EXPECT_EQ(st.today_spaces, 4u);
  EXPECT_EQ(st.refused_spaces_full, 1u);
  EXPECT_EQ(shmf_uv_drop(s.seg, "uv"), 1);
  EXPECT_EQ(shmf_uv_add_u64(u, 42, 9999), -SHMF_EDROPPED);
  EXPECT_EQ(shmf_uv_close(u), 0);
}
