// tests/unit/test_c_api.cpp: the C API (include/shmfilter/shmfilter.h) end to end:
// each structure through its shmf_* functions, error codes and messages, and a
// forked child that sees the parent's inserts. tests/unit/c_api_smoke.c (compiled as
// C99, see tests/CMakeLists.txt) runs the same calls from a C translation unit.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "shmfilter/shmfilter.h"
#include "test_util.h"

extern "C" int shmf_c_smoke(const char* segment_name);

using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

// A small segment for one test; closed (not removed: SegmentGuard does) on exit.
struct CSeg {
  std::string name = unique_name("capi");
  SegmentGuard guard{name};
  shmf_segment* seg = nullptr;
  CSeg() {
    shmf_segment_options o;
    shmf_segment_options_init(&o);
    o.size = 8u << 20;
    o.max_size = 256u << 20;
    EXPECT_EQ(shmf_segment_create(name.c_str(), &o, &seg), 0) << shmf_last_error_message();
  }
  ~CSeg() { shmf_segment_close(seg); }
};

std::string last() { return shmf_last_error_message(); }

}  // namespace

TEST(CApi, SmokeFromC) {
  std::string name = unique_name("csmoke");
  SegmentGuard guard(name);
  EXPECT_EQ(shmf_c_smoke(name.c_str()), 0);
}

TEST(CApi, VersionAndStrerror) {
  std::string v = std::to_string(SHMF_VERSION_MAJOR) + "." + std::to_string(SHMF_VERSION_MINOR) + "." +
                  std::to_string(SHMF_VERSION_PATCH);
  EXPECT_EQ(std::string(shmf_version()), v);
  for (int c : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 30, 31}) {
    EXPECT_STRNE(shmf_strerror(-c), "unknown error code") << c;
    EXPECT_STREQ(shmf_strerror(-c), shmf_strerror(c)) << c;
  }
  EXPECT_STREQ(shmf_strerror(0), "success");
  EXPECT_STREQ(shmf_strerror(-999), "unknown error code");
}

TEST(CApi, SegmentErrors) {
  shmf_segment* seg = reinterpret_cast<shmf_segment*>(0x1);
  std::string missing = unique_name("missing");
  EXPECT_EQ(shmf_segment_open(missing.c_str(), nullptr, &seg), -SHMF_ENOTFOUND);
  EXPECT_EQ(seg, nullptr);  // cleared on failure
  EXPECT_NE(last().find(missing), std::string::npos) << last();
  EXPECT_EQ(shmf_segment_remove(missing.c_str(), nullptr), 0);

  std::string too_long(300, 'x');
  EXPECT_EQ(shmf_segment_create(too_long.c_str(), nullptr, &seg), -SHMF_ENAMETOOLONG) << last();
  EXPECT_FALSE(last().empty());

  EXPECT_EQ(shmf_segment_create(nullptr, nullptr, &seg), -SHMF_EINVAL);
  EXPECT_NE(last().find("'name' is NULL"), std::string::npos) << last();
  EXPECT_EQ(shmf_segment_open("x", nullptr, nullptr), -SHMF_EINVAL);

  CSeg s;
  ASSERT_NE(s.seg, nullptr);
  shmf_segment* again = nullptr;
  EXPECT_EQ(shmf_segment_create(s.name.c_str(), nullptr, &again), -SHMF_EEXISTS) << last();
  EXPECT_EQ(shmf_segment_open_or_create(s.name.c_str(), nullptr, &again), 0) << last();
  EXPECT_EQ(shmf_segment_close(again), 0);
  EXPECT_EQ(shmf_segment_close(nullptr), 0);
}

TEST(CApi, LastErrorIsThreadLocal) {
  shmf_segment* seg = nullptr;
  EXPECT_EQ(shmf_segment_open(nullptr, nullptr, &seg), -SHMF_EINVAL);
  std::string mine = last();
  std::thread t([] {
    shmf_segment* other = nullptr;
    std::string missing = unique_name("thread-missing");
    EXPECT_EQ(shmf_segment_open(missing.c_str(), nullptr, &other), -SHMF_ENOTFOUND);
    EXPECT_NE(std::string(shmf_last_error_message()).find(missing), std::string::npos);
  });
  t.join();
  EXPECT_EQ(last(), mine);
}

TEST(CApi, BloomThroughC) {
  CSeg s;
  shmf_bloom_options o;
  shmf_bloom_options_init(&o);
  shmf_bloom* b = nullptr;
  // capacity 0 (left at the default) is rejected, the segment is unchanged.
  EXPECT_EQ(shmf_bloom_create(s.seg, "b", &o, &b), -SHMF_EINVAL);
  EXPECT_NE(last().find("capacity"), std::string::npos) << last();
  o.capacity = 10000;
  o.error = 1.5;
  EXPECT_EQ(shmf_bloom_create(s.seg, "b", &o, &b), -SHMF_EINVAL) << last();
  o.error = 0.01;
  o.layout = 7;
  EXPECT_EQ(shmf_bloom_create(s.seg, "b", &o, &b), -SHMF_EINVAL) << last();
  o.layout = 0;
  EXPECT_EQ(shmf_bloom_open(s.seg, "b", &b), -SHMF_ENOTFOUND) << last();
  EXPECT_EQ(shmf_bloom_create(s.seg, std::string(64, 'n').c_str(), &o, &b), -SHMF_ENAMETOOLONG) << last();
  o.seed = 7;
  o.has_seed = 1;
  ASSERT_EQ(shmf_bloom_create(s.seg, "b", &o, &b), 0) << last();
  shmf_bloom* dup = nullptr;
  EXPECT_EQ(shmf_bloom_create(s.seg, "b", &o, &dup), -SHMF_EEXISTS) << last();

  EXPECT_EQ(shmf_bloom_add(b, "alpha", 5), 1);
  EXPECT_EQ(shmf_bloom_add(b, "alpha", 5), 0);
  EXPECT_EQ(shmf_bloom_contains(b, "alpha", 5), 1);
  EXPECT_EQ(shmf_bloom_add_u64(b, 42), 1);
  EXPECT_EQ(shmf_bloom_contains_u64(b, 42), 1);
  std::vector<uint64_t> keys;
  for (uint64_t i = 1000; i < 2000; ++i) keys.push_back(i);
  std::vector<uint8_t> out(keys.size());
  EXPECT_EQ(shmf_bloom_add_many_u64(b, keys.data(), keys.size(), out.data()), 1000);
  EXPECT_EQ(shmf_bloom_contains_many_u64(b, keys.data(), keys.size(), out.data()), 1000);
  // 1000 absent keys at p = 0.01: expect ~10 false positives; bound 40 (P(X>40) < 1e-12, Poisson(10)).
  std::vector<uint64_t> absent;
  for (uint64_t i = 1u << 30; i < (1u << 30) + 1000; ++i) absent.push_back(i);
  EXPECT_LE(shmf_bloom_contains_many_u64(b, absent.data(), absent.size(), out.data()), 40);

  const void* bkeys[3] = {"alpha", "beta", "x"};
  size_t lens[3] = {5, 4, 1};
  uint8_t bout[3];
  EXPECT_GE(shmf_bloom_contains_many(b, bkeys, lens, 3, bout), 1);
  EXPECT_EQ(bout[0], 1);

  shmf_bloom_stats st;
  ASSERT_EQ(shmf_bloom_stats_get(b, &st), 0);
  EXPECT_EQ(st.capacity, 10000u);
  EXPECT_EQ(st.seed, 7u);
  EXPECT_GT(st.k, 0u);
  EXPECT_GT(st.inserted_estimate, 900.0);

  // Open through a second handle; wrong kind through another structure's open.
  shmf_bloom* b2 = nullptr;
  ASSERT_EQ(shmf_bloom_open(s.seg, "b", &b2), 0) << last();
  EXPECT_EQ(shmf_bloom_contains(b2, "alpha", 5), 1);
  shmf_set* wrong = nullptr;
  EXPECT_EQ(shmf_set_open(s.seg, "b", &wrong), -SHMF_EWRONGKIND) << last();
  EXPECT_NE(last().find("bloom"), std::string::npos) << last();
  shmf_cuckoo* wrongc = nullptr;
  EXPECT_EQ(shmf_cuckoo_open(s.seg, "b", &wrongc), -SHMF_EWRONGKIND) << last();

  // Dropped: every data-plane call reports it, never touches freed memory.
  EXPECT_EQ(shmf_bloom_drop(s.seg, "b"), 1);
  EXPECT_EQ(shmf_bloom_drop(s.seg, "b"), 0);
  EXPECT_EQ(shmf_bloom_contains(b2, "alpha", 5), -SHMF_EDROPPED);
  EXPECT_EQ(shmf_bloom_add_u64(b, 1), -SHMF_EDROPPED);
  EXPECT_EQ(shmf_bloom_contains_many_u64(b, keys.data(), keys.size(), out.data()), -SHMF_EDROPPED);
  EXPECT_EQ(shmf_bloom_stats_get(b, &st), -SHMF_EDROPPED);
  EXPECT_NE(last().find("dropped"), std::string::npos) << last();
  EXPECT_EQ(shmf_bloom_add(nullptr, "a", 1), -SHMF_EINVAL);
  shmf_bloom_close(b2);
  shmf_bloom_close(b);
}

TEST(CApi, CuckooThroughC) {
  CSeg s;
  shmf_cuckoo_options o;
  shmf_cuckoo_options_init(&o);
  o.capacity = 1000;
  o.fingerprint_bits = 9;
  shmf_cuckoo* c = nullptr;
  EXPECT_EQ(shmf_cuckoo_create(s.seg, "c", &o, &c), -SHMF_EINVAL) << last();
  EXPECT_FALSE(last().empty());
  o.fingerprint_bits = 12;
  o.seed = 11;
  ASSERT_EQ(shmf_cuckoo_create(s.seg, "c", &o, &c), 0) << last();
  EXPECT_EQ(shmf_cuckoo_insert_unique(c, "k1", 2), 1);
  EXPECT_EQ(shmf_cuckoo_insert_unique(c, "k1", 2), 0);
  EXPECT_EQ(shmf_cuckoo_contains(c, "k1", 2), 1);
  EXPECT_EQ(shmf_cuckoo_add_u64(c, 5), 0);
  EXPECT_EQ(shmf_cuckoo_add_u64(c, 5), 0);
  EXPECT_EQ(shmf_cuckoo_count_u64(c, 5), 2);
  EXPECT_EQ(shmf_cuckoo_insert_unique_u64(c, 6), 1);
  uint64_t keys[3] = {5, 6, 7};
  uint8_t out[3];
  EXPECT_GE(shmf_cuckoo_contains_many_u64(c, keys, 3, out), 2);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 1);
  const void* bk[1] = {"k1"};
  size_t bl[1] = {2};
  EXPECT_EQ(shmf_cuckoo_contains_many(c, bk, bl, 1, out), 1);
  uint64_t n = 0;
  ASSERT_EQ(shmf_cuckoo_size(c, &n), 0);
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(shmf_cuckoo_erase_u64(c, 5), 1);
  EXPECT_EQ(shmf_cuckoo_erase(c, "k1", 2), 1);
  EXPECT_EQ(shmf_cuckoo_contains(c, "k1", 2), 0);
  shmf_cuckoo_stats st;
  ASSERT_EQ(shmf_cuckoo_stats_get(c, &st), 0);
  EXPECT_EQ(st.size, 2u);
  EXPECT_EQ(st.fingerprint_bits, 12u);
  EXPECT_EQ(st.erases, 2u);

  // A fixed-size filter fills up: -SHMF_EFULL with a message saying what to do.
  int rc = 0;
  for (uint64_t i = 100; i < 100 + 4 * st.slots && rc >= 0; ++i) rc = shmf_cuckoo_add_u64(c, i);
  EXPECT_EQ(rc, -SHMF_EFULL);
  EXPECT_NE(last().find("capacity"), std::string::npos) << last();
  EXPECT_EQ(shmf_cuckoo_drop(s.seg, "c"), 1);
  EXPECT_EQ(shmf_cuckoo_insert_unique_u64(c, 1), -SHMF_EDROPPED);
  shmf_cuckoo_close(c);
}

TEST(CApi, RoaringThroughC) {
  CSeg s;
  shmf_roaring_options o;
  shmf_roaring_options_init(&o);
  o.delta_capacity = 1000;  // not a power of two
  shmf_roaring* r = nullptr;
  EXPECT_EQ(shmf_roaring_create(s.seg, "r", &o, &r), -SHMF_EINVAL) << last();
  ASSERT_EQ(shmf_roaring_create(s.seg, "r", nullptr, &r), 0) << last();
  EXPECT_EQ(shmf_roaring_add(r, 7), 0);
  EXPECT_EQ(shmf_roaring_add_u64(r, 8), 0);
  EXPECT_EQ(shmf_roaring_add_u64(r, 1ull << 32), -SHMF_EINVAL);
  EXPECT_NE(last().find("2^32"), std::string::npos) << last();
  std::vector<uint32_t> vals;
  for (uint32_t i = 100; i < 200; ++i) vals.push_back(i);
  EXPECT_EQ(shmf_roaring_add_many(r, vals.data(), vals.size()), 0);
  EXPECT_EQ(shmf_roaring_contains(r, 7), 1);
  EXPECT_EQ(shmf_roaring_contains(r, 9), 0);
  EXPECT_EQ(shmf_roaring_contains_u64(r, 1ull << 32), 0);
  std::vector<uint8_t> out(vals.size());
  EXPECT_EQ(shmf_roaring_contains_many(r, vals.data(), vals.size(), out.data()), 100);
  uint64_t q[2] = {8, 1ull << 40};
  EXPECT_EQ(shmf_roaring_contains_many_u64(r, q, 2, out.data()), 1);
  uint64_t card = 0;
  ASSERT_EQ(shmf_roaring_cardinality(r, &card), 0);
  EXPECT_EQ(card, 102u);
  EXPECT_EQ(shmf_roaring_remove(r, 7), 0);
  EXPECT_EQ(shmf_roaring_compact(r), 1) << last();
  shmf_roaring* r2 = nullptr;
  ASSERT_EQ(shmf_roaring_open(s.seg, "r", &r2), 0) << last();
  EXPECT_EQ(shmf_roaring_contains(r2, 7), 0);
  EXPECT_EQ(shmf_roaring_contains(r2, 150), 1);
  shmf_roaring_stats st;
  ASSERT_EQ(shmf_roaring_stats_get(r2, &st), 0);
  EXPECT_EQ(st.cardinality, 101u);
  EXPECT_GE(st.compactions, 1u);
  shmf_roaring_close(r2);
  EXPECT_EQ(shmf_roaring_drop(s.seg, "r"), 1);
  EXPECT_EQ(shmf_roaring_add(r, 1), -SHMF_EDROPPED);
  EXPECT_EQ(shmf_roaring_stats_get(r, &st), -SHMF_EDROPPED);
  shmf_roaring_close(r);
}

TEST(CApi, HllThroughC) {
  CSeg s;
  shmf_hll* h = nullptr;
  ASSERT_EQ(shmf_hll_create(s.seg, "h", &h), 0) << last();
  shmf_hll* dup = nullptr;
  EXPECT_EQ(shmf_hll_create(s.seg, "h", &dup), -SHMF_EEXISTS);
  EXPECT_EQ(shmf_hll_add(h, "a", 1), 1);
  EXPECT_EQ(shmf_hll_add(h, "a", 1), 0);
  std::vector<uint64_t> keys;
  for (uint64_t i = 0; i < 100000; ++i) keys.push_back(i * 2654435761u);
  // 100,000 keys over 16,384 registers: a register stays untouched with
  // probability e^-6.1 = 0.2% (~37 expected), so > 16,000 registers grew at least once.
  int grew = shmf_hll_add_many_u64(h, keys.data(), keys.size());
  EXPECT_GT(grew, 16000);
  EXPECT_LE(grew, static_cast<int>(keys.size()));
  EXPECT_EQ(shmf_hll_add_many_u64(h, keys.data(), keys.size()), 0) << "re-adding changes no register";
  uint64_t n = 0;
  ASSERT_EQ(shmf_hll_count(h, &n), 0);
  // Standard error 1.04/sqrt(16384) = 0.81%; bound 4% (~5 sigma) for 100,001 keys.
  EXPECT_NEAR(static_cast<double>(n), 100001.0, 4000.0);
  shmf_hll* h2 = nullptr;
  ASSERT_EQ(shmf_hll_open(s.seg, "h", &h2), 0);
  shmf_hll_stats st;
  ASSERT_EQ(shmf_hll_stats_get(h2, &st), 0);
  EXPECT_EQ(st.estimate, n);
  EXPECT_EQ(st.registers, 16384u);
  shmf_hll_close(h2);
  shmf_hll_close(h);
}

TEST(CApi, ExactSetThroughC) {
  CSeg s;
  shmf_set_options o;
  shmf_set_options_init(&o);
  shmf_set* x = nullptr;
  EXPECT_EQ(shmf_set_create(s.seg, "x", &o, &x), -SHMF_EINVAL) << last();  // capacity 0
  o.capacity = 100;
  o.max_load = 2.0;
  EXPECT_EQ(shmf_set_create(s.seg, "x", &o, &x), -SHMF_EINVAL) << last();
  o.max_load = 0.8;
  ASSERT_EQ(shmf_set_create(s.seg, "x", &o, &x), 0) << last();
  EXPECT_EQ(shmf_set_insert_unique(x, "dev-1", 5), 1);
  EXPECT_EQ(shmf_set_insert_unique(x, "dev-1", 5), 0);
  EXPECT_EQ(shmf_set_contains(x, "dev-1", 5), 1);
  EXPECT_EQ(shmf_set_contains(x, "dev-2", 5), 0);
  const void* bk[2] = {"dev-1", "dev-2"};
  size_t bl[2] = {5, 5};
  uint8_t out[100];
  EXPECT_EQ(shmf_set_contains_many(x, bk, bl, 2, out), 1);
  EXPECT_EQ(shmf_set_erase(x, "dev-1", 5), 1);
  EXPECT_EQ(shmf_set_erase(x, "dev-1", 5), 0);
  std::vector<uint64_t> keys;
  for (uint64_t i = 1; i <= 100; ++i) keys.push_back(i);
  for (uint64_t k : keys) ASSERT_EQ(shmf_set_insert_unique_u64(x, k), 1) << k << last();
  EXPECT_EQ(shmf_set_contains_many_u64(x, keys.data(), keys.size(), out), 100);
  EXPECT_EQ(shmf_set_insert_unique_u64(x, 1000), -SHMF_EFULL);  // capacity 100 reached
  EXPECT_NE(last().find("capacity"), std::string::npos) << last();
  EXPECT_EQ(shmf_set_erase_u64(x, 1), 1);
  EXPECT_EQ(shmf_set_insert_unique_u64(x, 1000), 1);
  uint64_t n = 0;
  ASSERT_EQ(shmf_set_size(x, &n), 0);
  EXPECT_EQ(n, 100u);
  shmf_set_stats st;
  ASSERT_EQ(shmf_set_stats_get(x, &st), 0);
  EXPECT_EQ(st.size, 100u);
  EXPECT_EQ(st.capacity, 100u);
  shmf_set_close(x);
}

// A forked child opens the segment itself through the C API, sees what the
// parent inserted, inserts its own keys; the parent then sees those.
TEST(CApi, ForkedChildSeesParentInserts) {
  CSeg s;
  shmf_bloom_options bo;
  shmf_bloom_options_init(&bo);
  bo.capacity = 10000;
  shmf_bloom* b = nullptr;
  shmf_set_options xo;
  shmf_set_options_init(&xo);
  xo.capacity = 1000;
  shmf_set* x = nullptr;
  ASSERT_EQ(shmf_bloom_create(s.seg, "seen", &bo, &b), 0) << last();
  ASSERT_EQ(shmf_set_create(s.seg, "exact", &xo, &x), 0) << last();
  for (uint64_t i = 0; i < 500; ++i) {
    ASSERT_EQ(shmf_bloom_add_u64(b, i), 1);
    ASSERT_EQ(shmf_set_insert_unique_u64(x, i), 1);
  }
  std::string name = s.name;
  shmf_segment* inherited = s.seg;
  pid_t pid = shmf_test::fork_child([name, inherited] {
    // The parent's attachment is not the child's: control-plane use is refused.
    shmf_hll* stale = nullptr;
    if (shmf_hll_create(inherited, "from-child", &stale) != -SHMF_EFORKED) return 9;
    shmf_segment* seg = nullptr;
    if (shmf_segment_open(name.c_str(), nullptr, &seg) != 0) return 10;
    shmf_bloom* cb = nullptr;
    shmf_set* cx = nullptr;
    if (shmf_bloom_open(seg, "seen", &cb) != 0 || shmf_set_open(seg, "exact", &cx) != 0) return 11;
    for (uint64_t i = 0; i < 500; ++i) {
      if (shmf_bloom_contains_u64(cb, i) != 1) return 12;
      if (shmf_set_insert_unique_u64(cx, i) != 0) return 13;  // parent's key: already there
    }
    for (uint64_t i = 500; i < 600; ++i)
      if (shmf_set_insert_unique_u64(cx, i) != 1 || shmf_bloom_add_u64(cb, i) < 0) return 14;
    shmf_set_close(cx);
    shmf_bloom_close(cb);
    shmf_segment_close(seg);
    return 0;
  });
  int status = shmf_test::wait_status(pid);
  ASSERT_TRUE(shmf_test::exited_ok(status)) << "child status " << status;
  for (uint64_t i = 0; i < 600; ++i) {
    EXPECT_EQ(shmf_set_contains_u64(x, i), 1) << i;
    EXPECT_EQ(shmf_bloom_contains_u64(b, i), 1) << i;
  }
  uint64_t n = 0;
  ASSERT_EQ(shmf_set_size(x, &n), 0);
  EXPECT_EQ(n, 600u);
  shmf_set_close(x);
  shmf_bloom_close(b);
}

// shmf_segment_open_ex: read-only inspection through the C API (what a
// monitoring sidecar with read permission only uses), and its bad options.
TEST(CApi, OpenExReadOnlyInspects) {
  CSeg s;
  shmf_bloom_options bo;
  shmf_bloom_options_init(&bo);
  bo.capacity = 1000;
  shmf_bloom* b = nullptr;
  ASSERT_EQ(shmf_bloom_create(s.seg, "b", &bo, &b), 0) << last();
  ASSERT_EQ(shmf_bloom_add(b, "alpha", 5), 1);
  shmf_roaring_options ro;
  shmf_roaring_options_init(&ro);
  shmf_roaring* r = nullptr;
  ASSERT_EQ(shmf_roaring_create(s.seg, "r", &ro, &r), 0) << last();
  shmf_roaring_close(r);
  shmf_cuckoo_options co;
  shmf_cuckoo_options_init(&co);
  co.capacity = 1000;
  co.fingerprint_bits = 16;
  shmf_cuckoo* c = nullptr;
  ASSERT_EQ(shmf_cuckoo_create(s.seg, "c", &co, &c), 0) << last();
  shmf_cuckoo_close(c);
  shmf_set_options xo;
  shmf_set_options_init(&xo);
  xo.capacity = 1000;
  shmf_set* x = nullptr;
  ASSERT_EQ(shmf_set_create(s.seg, "x", &xo, &x), 0) << last();
  shmf_set_close(x);
  EXPECT_EQ(shmf_segment_is_read_only(s.seg), 0);

  shmf_open_options oo;
  shmf_open_options_init(&oo);
  EXPECT_EQ(oo.read_only, 0);
  EXPECT_EQ(oo.trusted_owner, -1);
  EXPECT_EQ(oo.file, nullptr);
  oo.read_only = 1;
  shmf_segment* view = nullptr;
  ASSERT_EQ(shmf_segment_open_ex(s.name.c_str(), &oo, &view), 0) << last();
  EXPECT_EQ(shmf_segment_is_read_only(view), 1);
  shmf_bloom* vb = nullptr;
  ASSERT_EQ(shmf_bloom_open(view, "b", &vb), 0) << last();
  EXPECT_EQ(shmf_bloom_contains(vb, "alpha", 5), 1);
  EXPECT_EQ(shmf_bloom_add(vb, "beta", 4), 0) << "a read-only attachment sets nothing";
  EXPECT_EQ(shmf_bloom_contains(b, "beta", 4), 0) << "and the writer's view is unchanged";
  shmf_bloom* nb = nullptr;
  EXPECT_EQ(shmf_bloom_create(view, "b2", &bo, &nb), -SHMF_EREADONLY) << last();
  EXPECT_NE(last().find("read-only"), std::string::npos) << last();
  shmf_roaring* vr = nullptr;
  EXPECT_EQ(shmf_roaring_open(view, "r", &vr), -SHMF_EREADONLY) << last();
  // The writers that would take a lock name the read-only attachment (not "dropped", not "forked").
  shmf_cuckoo* vc = nullptr;
  ASSERT_EQ(shmf_cuckoo_open(view, "c", &vc), 0) << last();
  EXPECT_EQ(shmf_cuckoo_add_u64(vc, 1), -SHMF_EREADONLY) << last();
  shmf_set* vx = nullptr;
  ASSERT_EQ(shmf_set_open(view, "x", &vx), 0) << last();
  EXPECT_EQ(shmf_set_insert_unique_u64(vx, 1), -SHMF_EREADONLY) << last();
  EXPECT_NE(last().find("read-only"), std::string::npos) << last();
  shmf_set_close(vx);
  shmf_cuckoo_close(vc);
  shmf_bloom_close(vb);
  shmf_segment_close(view);

  // NULL options: a read-write attachment, as shmf_segment_open.
  shmf_segment* rw = nullptr;
  ASSERT_EQ(shmf_segment_open_ex(s.name.c_str(), nullptr, &rw), 0) << last();
  EXPECT_EQ(shmf_segment_is_read_only(rw), 0);
  shmf_segment_close(rw);

  shmf_open_options bad;
  shmf_open_options_init(&bad);
  bad.trusted_owner = -7;
  shmf_segment* none = nullptr;
  EXPECT_EQ(shmf_segment_open_ex(s.name.c_str(), &bad, &none), -SHMF_EINVAL) << last();
  EXPECT_NE(last().find("trusted_owner"), std::string::npos) << last();
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(shmf_segment_open_ex(nullptr, &oo, &none), -SHMF_EINVAL) << last();
  EXPECT_LT(shmf_segment_is_read_only(nullptr), 0);
  shmf_bloom_close(b);
}
