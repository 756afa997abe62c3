// tests/unit/test_c_api_directory.cpp: the C API's directory listing
// (shmf_segment_list / shmf_segment_find / shmf_kind_name /
// shmf_kind_from_name) and the HLL's Redis interchange (shmf_hll_export_redis /
// import_redis / count_redis), against the C++ API they wrap. The C-only side (strict C99) is in c_api_smoke.c.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "shmfilter/hll.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/shmfilter.h"
#include "test_util.h"

namespace {

struct CSeg {
  shmf_test::SegmentGuard g;
  shmf_segment* seg = nullptr;
  explicit CSeg(const char* tag) : g(shmf_test::unique_name(tag)) {
    shmf_segment_options o;
    shmf_segment_options_init(&o);
    o.size = 16u << 20;
    o.max_size = 256u << 20;
    EXPECT_EQ(shmf_segment_create(g.name.c_str(), &o, &seg), 0) << shmf_last_error_message();
  }
  ~CSeg() { shmf_segment_close(seg); }
};

std::string sparse_one_register(uint32_t index, uint8_t value) {
  // Redis sparse: header "HYLL", encoding 1; XZERO runs around one VAL opcode.
  std::string s("HYLL\x01\0\0\0\0\0\0\0\0\0\0\0", 16);
  auto xzero = [&](uint32_t run) {
    if (run == 0) return;
    s.push_back(static_cast<char>(0x40 | ((run - 1) >> 8)));
    s.push_back(static_cast<char>((run - 1) & 0xff));
  };
  xzero(index);
  s.push_back(static_cast<char>(0x80 | ((value - 1) << 2)));
  xzero(16384 - index - 1);
  return s;
}

}  // namespace

TEST(CApiDirectory, KindNamesAreTheCxxNames) {
  EXPECT_STREQ(shmf_kind_name(SHMF_KIND_BLOOM), "bloom");
  EXPECT_STREQ(shmf_kind_name(SHMF_KIND_CUCKOO), "cuckoo");
  EXPECT_STREQ(shmf_kind_name(SHMF_KIND_ROARING), "roaring");
  EXPECT_STREQ(shmf_kind_name(SHMF_KIND_HLL), "hll");
  EXPECT_STREQ(shmf_kind_name(SHMF_KIND_SET), "set");
  EXPECT_STREQ(shmf_kind_name(SHMF_KIND_WINDOW), "window");
  EXPECT_STREQ(shmf_kind_name(SHMF_KIND_UV), "uv");
  for (uint32_t k = 1; k <= SHMF_KIND_UV; ++k)
    EXPECT_EQ(shmf_kind_name(k), shmfilter::kind_name(static_cast<shmfilter::Kind>(k))) << k;
  EXPECT_STREQ(shmf_kind_name(0), "unknown");
  EXPECT_STREQ(shmf_kind_name(SHMF_KIND_UV + 1), "unknown");
}

TEST(CApiDirectory, KindFromNameIsTheInverseOfKindName) {
  for (uint32_t k = 1; k <= SHMF_KIND_WINDOW; ++k) {
    const char* name = shmf_kind_name(k);
    EXPECT_EQ(shmf_kind_from_name(name, std::strlen(name)), static_cast<int>(k)) << name;
  }
  EXPECT_EQ(shmf_kind_from_name("set", 3), SHMF_KIND_SET) << "the exact set is spelled \"set\"";
  EXPECT_EQ(shmf_kind_from_name("window=7", 6), SHMF_KIND_WINDOW) << "LEN bytes, no NUL needed";
  EXPECT_EQ(shmf_kind_from_name("exact_set", 9), 0);
  EXPECT_EQ(shmf_kind_from_name("Bloom", 5), 0) << "names are case-sensitive";
  EXPECT_EQ(shmf_kind_from_name("bloo", 4), 0) << "no prefix matches";
  EXPECT_EQ(shmf_kind_from_name("bloomx", 6), 0);
  EXPECT_EQ(shmf_kind_from_name("unknown", 7), 0) << "shmf_kind_name's answer for a bad number is no kind";
  EXPECT_EQ(shmf_kind_from_name("none", 4), 0);
  EXPECT_EQ(shmf_kind_from_name("", 0), 0);
  EXPECT_EQ(shmf_kind_from_name(nullptr, 0), 0);
}

TEST(CApiDirectory, ListAsksItsSizeThenFillsEveryStructure) {
  CSeg s("capi-dir");
  ASSERT_NE(s.seg, nullptr);
  size_t count = 99;
  EXPECT_EQ(shmf_segment_list(s.seg, nullptr, 0, &count), 0) << "an empty segment lists 0 structures";
  EXPECT_EQ(count, 0u);

  shmf_set_options so;
  shmf_set_options_init(&so);
  so.capacity = 1000;
  shmf_set* set = nullptr;
  ASSERT_EQ(shmf_set_create(s.seg, "pairs", &so, &set), 0) << shmf_last_error_message();
  for (uint64_t k = 0; k < 10; ++k) ASSERT_EQ(shmf_set_insert_unique_u64(set, k), 1);
  shmf_hll* hll = nullptr;
  ASSERT_EQ(shmf_hll_create(s.seg, "uv", &hll), 0);
  shmf_window_options wo;
  shmf_window_options_init(&wo);
  wo.expected_per_bucket = 1000;
  wo.seed = 7;
  shmf_window* win = nullptr;
  ASSERT_EQ(shmf_window_create(s.seg, "freq", &wo, &win), 0) << shmf_last_error_message();
  const std::string longest(63, 'n');
  shmf_bloom_options bo;
  shmf_bloom_options_init(&bo);
  bo.capacity = 100;
  shmf_bloom* bloom = nullptr;
  ASSERT_EQ(shmf_bloom_create(s.seg, longest.c_str(), &bo, &bloom), 0) << shmf_last_error_message();

  EXPECT_EQ(shmf_segment_list(s.seg, nullptr, 0, &count), -SHMF_EFULL);
  EXPECT_EQ(count, 4u);
  EXPECT_NE(std::string(shmf_last_error_message()).find("call again"), std::string::npos);
  std::vector<shmf_structure_info> few(3);
  EXPECT_EQ(shmf_segment_list(s.seg, few.data(), few.size(), &count), -SHMF_EFULL);
  std::vector<shmf_structure_info> all(count);
  ASSERT_EQ(shmf_segment_list(s.seg, all.data(), all.size(), &count), 4) << shmf_last_error_message();

  shmfilter::Segment cpp = shmfilter::Segment::open(s.g.name);
  const auto regions = cpp.list();
  ASSERT_EQ(regions.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const shmf_structure_info& e = all[i];
    SCOPED_TRACE(e.name);
    EXPECT_EQ(std::string(e.name), regions[i].name) << "name order, NUL-terminated";
    EXPECT_EQ(e.kind, static_cast<uint32_t>(regions[i].kind));
    EXPECT_EQ(e.slot, regions[i].slot);
    EXPECT_EQ(e.generation, regions[i].generation);
    EXPECT_EQ(e.offset, regions[i].offset);
    EXPECT_EQ(e.region_bytes, regions[i].size);
    EXPECT_EQ(e.readable, 1u);
    EXPECT_GE(e.bytes, e.region_bytes) << "region + extents";
    EXPECT_EQ(e.reserved, 0u);
  }
  auto by_name = [&](const std::string& n) -> const shmf_structure_info& {
    for (const auto& e : all)
      if (n == e.name) return e;
    ADD_FAILURE() << "no entry " << n;
    return all[0];
  };
  EXPECT_EQ(by_name("pairs").kind, static_cast<uint32_t>(SHMF_KIND_SET));
  EXPECT_EQ(by_name("pairs").capacity, 1000u);
  EXPECT_EQ(by_name("pairs").items, 10.0);
  EXPECT_EQ(by_name("pairs").over_capacity, 0u);
  EXPECT_EQ(by_name("uv").kind, static_cast<uint32_t>(SHMF_KIND_HLL));
  EXPECT_EQ(by_name("uv").capacity, 0u) << "an HLL is unbounded";
  EXPECT_EQ(by_name("freq").kind, static_cast<uint32_t>(SHMF_KIND_WINDOW));
  EXPECT_GT(by_name("freq").bytes, by_name("freq").region_bytes) << "the window's bucket tables are extents";
  EXPECT_EQ(by_name(longest).kind, static_cast<uint32_t>(SHMF_KIND_BLOOM));

  shmf_structure_info one;
  EXPECT_EQ(shmf_segment_find(s.seg, "freq", &one), 1) << shmf_last_error_message();
  EXPECT_EQ(std::memcmp(&one, &by_name("freq"), offsetof(shmf_structure_info, bytes)), 0);
  EXPECT_EQ(shmf_segment_find(s.seg, "nosuch", &one), 0);
  EXPECT_EQ(one.kind, 0u) << "a miss clears OUT";
  EXPECT_EQ(shmf_segment_find(s.seg, nullptr, &one), -SHMF_EINVAL);
  EXPECT_EQ(shmf_segment_list(nullptr, all.data(), all.size(), &count), -SHMF_EINVAL);
  EXPECT_EQ(shmf_segment_list(s.seg, all.data(), all.size(), nullptr), -SHMF_EINVAL);

  ASSERT_EQ(shmf_set_drop(s.seg, "pairs"), 1);
  ASSERT_EQ(shmf_segment_list(s.seg, all.data(), all.size(), &count), 3) << "a dropped structure is not listed";
  EXPECT_EQ(shmf_segment_find(s.seg, "pairs", &one), 0);

  shmf_bloom_close(bloom);
  shmf_window_close(win);
  shmf_hll_close(hll);
  shmf_set_close(set);
}

TEST(CApiHllRedis, ExportImportAndCountAgreeWithTheCxxApi) {
  CSeg s("capi-hllx");
  ASSERT_NE(s.seg, nullptr);
  shmf_hll* a = nullptr;
  shmf_hll* b = nullptr;
  ASSERT_EQ(shmf_hll_create(s.seg, "a", &a), 0);
  ASSERT_EQ(shmf_hll_create(s.seg, "b", &b), 0);
  for (uint64_t k = 0; k < 5000; ++k) shmf_hll_add_u64(a, k);
  for (uint64_t k = 2500; k < 10000; ++k) shmf_hll_add_u64(b, k);

  size_t need = 0;
  EXPECT_EQ(shmf_hll_export_redis(a, nullptr, 0, &need), -SHMF_EFULL);
  ASSERT_EQ(need, static_cast<size_t>(SHMF_HLL_REDIS_DENSE_BYTES));
  std::vector<char> small(need - 1);
  EXPECT_EQ(shmf_hll_export_redis(a, small.data(), small.size(), &need), -SHMF_EFULL);
  std::string dense(need, '\0');
  ASSERT_EQ(shmf_hll_export_redis(a, dense.data(), dense.size(), &need), SHMF_HLL_REDIS_DENSE_BYTES);
  EXPECT_EQ(dense.substr(0, 4), "HYLL");
  shmfilter::Segment cpp = shmfilter::Segment::open(s.g.name);
  EXPECT_EQ(dense, shmfilter::Hll::open(cpp, "a").export_redis()) << "the same bytes as Hll::export_redis";

  uint64_t na = 0, nr = 0, nb = 0;
  ASSERT_EQ(shmf_hll_count(a, &na), 0);
  ASSERT_EQ(shmf_hll_count_redis(dense.data(), dense.size(), &nr), 0) << shmf_last_error_message();
  EXPECT_EQ(nr, na) << "PFCOUNT of the exported string is the HLL's count";

  // import = register max: b becomes the union of a and b
  ASSERT_EQ(shmf_hll_import_redis(b, dense.data(), dense.size()), 0) << shmf_last_error_message();
  ASSERT_EQ(shmf_hll_count(b, &nb), 0);
  EXPECT_NEAR(static_cast<double>(nb), 10000.0, 10000.0 * 0.05) << "union of 0..9999 (5 standard errors: 4%)";
  const shmfilter::Hll union_ab[] = {shmfilter::Hll::open(cpp, "a"), shmfilter::Hll::open(cpp, "b")};
  EXPECT_EQ(nb, shmfilter::Hll::count_union(union_ab));

  // a sparse Redis string: one register of value 3 -> a count of 1
  const std::string sparse = sparse_one_register(100, 3);
  ASSERT_EQ(shmf_hll_count_redis(sparse.data(), sparse.size(), &nr), 0) << shmf_last_error_message();
  EXPECT_EQ(nr, 1u);
  shmf_hll* c = nullptr;
  ASSERT_EQ(shmf_hll_create(s.seg, "c", &c), 0);
  ASSERT_EQ(shmf_hll_import_redis(c, sparse.data(), sparse.size()), 0) << shmf_last_error_message();
  shmf_hll_stats st;
  ASSERT_EQ(shmf_hll_stats_get(c, &st), 0);
  EXPECT_EQ(st.nonzero_registers, 1u);
  EXPECT_EQ(st.max_register, 3u);

  // bad input: one error naming the problem, the HLL unchanged
  const std::string bad = "HYLX" + dense.substr(4);
  EXPECT_EQ(shmf_hll_import_redis(c, bad.data(), bad.size()), -SHMF_EBADINPUT);
  EXPECT_NE(std::string(shmf_last_error_message()).find("HYLL"), std::string::npos) << shmf_last_error_message();
  EXPECT_EQ(shmf_hll_import_redis(c, dense.data(), 12000), -SHMF_EBADINPUT);
  EXPECT_NE(std::string(shmf_last_error_message()).find("12304"), std::string::npos) << shmf_last_error_message();
  EXPECT_EQ(shmf_hll_count_redis(nullptr, 0, &nr), -SHMF_EBADINPUT);
  ASSERT_EQ(shmf_hll_stats_get(c, &st), 0);
  EXPECT_EQ(st.nonzero_registers, 1u) << "a rejected import changes nothing";
  EXPECT_EQ(shmf_hll_import_redis(nullptr, dense.data(), dense.size()), -SHMF_EINVAL);
  EXPECT_EQ(shmf_hll_export_redis(a, dense.data(), dense.size(), nullptr), -SHMF_EINVAL);

  // dropped: -SHMF_EDROPPED, nothing touched
  ASSERT_EQ(shmf_hll_drop(s.seg, "c"), 1);
  EXPECT_EQ(shmf_hll_export_redis(c, dense.data(), dense.size(), &need), -SHMF_EDROPPED);
  EXPECT_EQ(shmf_hll_import_redis(c, dense.data(), dense.size()), -SHMF_EDROPPED);
  shmf_hll_close(c);
  shmf_hll_close(b);
  shmf_hll_close(a);
}
