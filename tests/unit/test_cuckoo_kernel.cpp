// tests/unit/test_cuckoo_kernel.cpp: the cuckoo kernels (lib/structures/cuckoo_impl.h) over
// plain anonymous MAP_SHARED memory, no Segment: load to 95% with zero
// failures, FP rate band, and a writer killed mid-move repaired by a waiter.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdio>
#include <string>
#include <vector>

#include "structures/cuckoo_impl.h"
#include "test_util.h"
#include "workload.h"

namespace ck = shmfilter::internal::cuckoo;

namespace {

// Plain-memory liveness: a token is a pid; alive while /proc/<pid>/stat exists and is not a zombie.
bool pid_alive(const void*, uint64_t token) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%llu/stat", static_cast<unsigned long long>(token));
  FILE* f = fopen(path, "r");
  if (!f) return false;
  char buf[512] = {};
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  std::string s(buf, n);
  auto rp = s.rfind(')');
  return rp != std::string::npos && rp + 2 < s.size() && s[rp + 2] != 'Z';
}
ck::Liveness self_liveness() { return ck::Liveness{static_cast<uint64_t>(getpid()), nullptr, &pid_alive}; }

struct Mem {
  std::byte* base = nullptr;
  size_t bytes = 0;
  ck::Header* h = nullptr;
  Mem(uint32_t fp_bits, uint32_t log2_buckets, uint32_t max_path = ck::kDefaultMaxPath) {
    uint32_t lane = fp_bits <= 8 ? 8 : 16;
    bytes = ck::region_bytes_for(log2_buckets, lane);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    base = static_cast<std::byte*>(p);
    h = reinterpret_cast<ck::Header*>(base);
    ck::init_header(h, fp_bits, max_path, 0, 1, 12345, 0, 0, bytes, log2_buckets, sizeof(ck::Header));
  }
  ~Mem() { munmap(base, bytes); }
  ck::KeyHash kh(uint64_t key) const {
    return ck::split_hash(shmfilter::internal::hash_key(key, h->seed), h->fp_bits);
  }
};

template <class LT>
void fill_to(Mem& m, const std::vector<uint64_t>& keys, size_t n, uint64_t& fails) {
  auto lv = self_liveness();
  for (size_t i = 0; i < n; ++i)
    if (ck::insert<LT>(m.base, m.h, m.kh(keys[i]), false, lv, nullptr, nullptr) != ck::Status::kInserted) ++fails;
}

}  // namespace

TEST(CuckooKernel, ZeroFailuresTo95PercentAt1MSlots) {
  // 2^18 buckets x 4 = 1,048,576 slots; 95% load = 996,147 items; bound: 0 failures
  // (ANCHORS: BFS with <= 4 moves reached 96.2% with none).
  Mem m(12, 18);
  uint64_t slots = uint64_t{4} << 18;
  auto keys = shmf_bench::distinct_keys(slots, 7);
  uint64_t fails = 0;
  size_t n95 = static_cast<size_t>(0.95 * static_cast<double>(slots));
  fill_to<ck::Lanes16>(m, keys, n95, fails);
  EXPECT_EQ(fails, 0u);
  EXPECT_EQ(m.h->size, n95);
  uint64_t bad = 0;
  EXPECT_EQ(ck::count_occupied<ck::Lanes16>(m.base, m.h, 12, &bad), n95);
  EXPECT_EQ(bad, 0u);
  EXPECT_LE(m.h->longest_path, 5u);
  auto lv = self_liveness();
  for (size_t i = 0; i < n95; ++i) ASSERT_TRUE(ck::contains<ck::Lanes16>(m.base, m.h, m.kh(keys[i]), lv)) << i;
}

TEST(CuckooKernel, FalsePositiveRateWithinBandOf2bOver2f) {
  // f = 8, load 95%: expected FP ~ 1 - (1 - 1/255)^(2*4*0.95) = 2.94%; band [2.5%, 3.4%] with 1e6 negatives
  // (binomial sd = 0.017%, so the band is > 20 sd wide; it catches a wrong fp/bucket derivation).
  Mem m(8, 16);
  uint64_t slots = uint64_t{4} << 16;
  auto keys = shmf_bench::distinct_keys(slots, 9);
  uint64_t fails = 0;
  fill_to<ck::Lanes8>(m, keys, static_cast<size_t>(0.95 * static_cast<double>(slots)), fails);
  EXPECT_EQ(fails, 0u);
  auto neg = shmf_bench::absent_keys(1000000, 9);
  auto lv = self_liveness();
  uint64_t fp = 0;
  for (uint64_t k : neg) fp += ck::contains<ck::Lanes8>(m.base, m.h, m.kh(k), lv);
  double rate = static_cast<double>(fp) / 1e6;
  EXPECT_GT(rate, 0.025);
  EXPECT_LT(rate, 0.034);
}

TEST(CuckooKernel, WriterKilledMidMoveIsRepairedByWaiter) {
  const char* points[] = {"cuckoo.move.begin", "cuckoo.move.version_odd", "cuckoo.move.after_copy",
                          "cuckoo.move.after_clear", "cuckoo.insert.before_store", "cuckoo.insert.after_store",
                          "cuckoo.insert.after_size"};
  for (const char* point : points) {
    SCOPED_TRACE(point);
    Mem m(16, 10);
    uint64_t slots = uint64_t{4} << 10;
    auto keys = shmf_bench::distinct_keys(slots, 11);
    size_t pre = static_cast<size_t>(0.90 * static_cast<double>(slots));
    uint64_t fails = 0;
    fill_to<ck::Lanes16>(m, keys, pre, fails);  // parent inserts: acknowledged
    ASSERT_EQ(fails, 0u);
    pid_t c = shmf_test::fork_child([&] {
      shmfilter::internal::arm_kill_point(point);
      auto lv = self_liveness();
      for (size_t i = pre; i < slots; ++i) ck::insert<ck::Lanes16>(m.base, m.h, m.kh(keys[i]), false, lv, nullptr, nullptr);
      return 3;  // never reached a kill point
    });
    int st = shmf_test::wait_status(c);
    ASSERT_TRUE(shmf_test::killed_by(st, SIGKILL)) << st;
    // A reader finishes (bounded) even though the version may be odd and the lock held by a dead pid.
    auto lv = self_liveness();
    for (size_t i = 0; i < pre; ++i) ASSERT_TRUE(ck::contains<ck::Lanes16>(m.base, m.h, m.kh(keys[i]), lv)) << i;
    // A writer gets the lock; after it the structure is consistent.
    EXPECT_EQ(ck::insert<ck::Lanes16>(m.base, m.h, m.kh(keys[slots - 1] + 1), false, lv, nullptr, nullptr),
              ck::Status::kInserted);
    EXPECT_EQ(m.h->lock_owner, 0u);
    EXPECT_EQ(m.h->intent.op, ck::kOpNone);
    uint64_t bad = 0;
    EXPECT_EQ(ck::count_occupied<ck::Lanes16>(m.base, m.h, 16, &bad), m.h->size);
    ck::Sub s = ck::sub_view(m.base, m.h->subs[0]);
    for (uint64_t i = 0; i <= s.stripe_mask; ++i) ASSERT_EQ(s.versions[i] & 1, 0u);
    for (size_t i = 0; i < pre; ++i) ASSERT_TRUE(ck::contains<ck::Lanes16>(m.base, m.h, m.kh(keys[i]), lv)) << i;
  }
}

// Golden values: the fingerprint / bucket derivation is part of the on-disk
// format (a filter written by one build must be read the same by the next).
TEST(CuckooKernel, GoldenHashFingerprintAndBuckets) {
  struct G {
    const char* key;
    uint32_t f, fp;
    uint64_t i2;
  } golden[] = {{"device-1", 8, 9, 63584},           {"device-1", 12, 132, 621632},
                {"device-1", 16, 2101, 671876},      {"42:00ff00ff00ff00ff", 8, 213, 367979},
                {"42:00ff00ff00ff00ff", 12, 3410, 963292}, {"42:00ff00ff00ff00ff", 16, 54567, 473110}};
  const uint64_t mask = (1u << 20) - 1;
  for (const G& g : golden) {
    uint64_t h = shmfilter::internal::hash_key(std::string_view(g.key), 2024);
    auto kh = ck::split_hash(h, g.f);
    EXPECT_EQ(kh.fp, g.fp) << g.key << " f=" << g.f;
    EXPECT_EQ(ck::alt_bucket(h & mask, kh.fp, mask), g.i2) << g.key << " f=" << g.f;
    EXPECT_EQ(ck::alt_bucket(g.i2, kh.fp, mask), h & mask) << "alt is an involution";
  }
  EXPECT_EQ(shmfilter::internal::hash_key(std::string_view("device-1"), 2024) & mask, 245733u);
  EXPECT_EQ(offsetof(ck::Header, lock_owner), 384u);
  EXPECT_EQ(offsetof(ck::Header, intent), 448u);
  EXPECT_EQ(offsetof(ck::Header, size), 512u);
  EXPECT_EQ(offsetof(ck::Header, pending_extent), 328u);
}
