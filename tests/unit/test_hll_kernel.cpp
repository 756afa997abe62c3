// tests/unit/test_hll_kernel.cpp: HLL kernels over plain memory: accuracy, duplication,
// merge, the Redis string format (golden bytes), register packing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "structures/hll/hll_impl.h"
#include "workload.h"

using namespace shmfilter::internal::hll;

namespace {

struct Sketch {
  std::vector<uint64_t> words = std::vector<uint64_t>(kHllWords, 0);
  void add_u64(uint64_t k) {
    uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(k >> (8 * i));
    uint32_t idx;
    uint8_t rank;
    hll_index_rank(murmur64a(le, 8, kRedisHllSeed), idx, rank);
    hll_update(words.data(), idx, rank);
  }
  std::vector<uint8_t> regs() const {
    std::vector<uint8_t> r(kHllRegisters);
    hll_read_registers(words.data(), r.data());
    return r;
  }
  uint64_t count() const { return hll_estimate(regs().data()); }
};

// Standard error of HLL with m = 2^14 registers: 1.04 / sqrt(m) = 0.8125%.
const double kSe = 1.04 / std::sqrt(16384.0);

}  // namespace

TEST(HllKernel, RankAndIndexFollowRedisRules) {
  uint32_t idx;
  uint8_t rank;
  hll_index_rank(0, idx, rank);  // all zero: sentinel bit 50 -> rank 51
  EXPECT_EQ(idx, 0u);
  EXPECT_EQ(rank, 51);
  hll_index_rank((1ull << 14) | 5, idx, rank);  // lowest bit above the index set -> rank 1
  EXPECT_EQ(idx, 5u);
  EXPECT_EQ(rank, 1);
  hll_index_rank((1ull << 20) | 16383, idx, rank);  // 6 zeros then a one -> rank 7
  EXPECT_EQ(idx, 16383u);
  EXPECT_EQ(rank, 7);
}

// Golden values taken from Debian's redis-server 7.0.15 (PFADD of one element,
// GET, sparse opcodes decoded by hand): they pin the hash, seed, index and rank rules.
TEST(HllKernel, GoldenRegistersFromRedis) {
  struct G {
    const char* key;
    uint32_t index;
    uint8_t rank;
  };
  for (G g : {G{"hello", 9216, 1}, G{"00ab34cd56ef7890", 9952, 2}, G{"device:42", 3739, 2}}) {
    uint32_t idx;
    uint8_t rank;
    hll_index_rank(murmur64a(g.key, std::strlen(g.key), kRedisHllSeed), idx, rank);
    EXPECT_EQ(idx, g.index) << g.key;
    EXPECT_EQ(rank, g.rank) << g.key;
  }
}

TEST(HllKernel, UpdateIsAMaxAndNeverTouchesNeighbours) {
  std::vector<uint64_t> w(kHllWords, 0);
  for (uint32_t r = 0; r < kHllRegisters; r += 7) EXPECT_TRUE(hll_update(w.data(), r, static_cast<uint8_t>(1 + r % 51)));
  EXPECT_FALSE(hll_update(w.data(), 0, 1));  // not larger
  std::vector<uint8_t> regs(kHllRegisters);
  hll_read_registers(w.data(), regs.data());
  for (uint32_t r = 0; r < kHllRegisters; ++r) EXPECT_EQ(regs[r], r % 7 == 0 ? 1 + r % 51 : 0) << r;
  for (uint64_t x : w) EXPECT_EQ(x & ~kHllWordMask, 0u);
}

// Relative error within 3 standard errors (3 x 0.8125% = 2.44%) at 1e3..1e7
// distinct keys, fixed seeds. Per trial a 3-sigma miss has probability ~0.3%.
TEST(HllKernel, AccuracyWithinThreeStandardErrors) {
  struct Case {
    uint64_t n;
    int seeds;
  };
  for (Case c : {Case{1000, 20}, Case{10000, 20}, Case{100000, 10}, Case{1000000, 3}, Case{10000000, 1}}) {
    double sum_sq = 0;
    for (int s = 0; s < c.seeds; ++s) {
      Sketch sk;
      for (uint64_t i = 0; i < c.n; ++i) sk.add_u64(shmf_bench::mix64((uint64_t(s + 1) << 40) + i));
      double err = (static_cast<double>(sk.count()) - c.n) / c.n;
      sum_sq += err * err;
      EXPECT_LE(std::fabs(err), 3 * kSe) << "n=" << c.n << " seed=" << s << " estimate=" << sk.count();
    }
    // The RMS error over seeds stays near the standard error (bound: 2 SE).
    EXPECT_LE(std::sqrt(sum_sq / c.seeds), 2 * kSe) << "n=" << c.n;
  }
}

// Heavy duplication: 5e4 distinct keys each added 40 times in random order give
// exactly the registers of adding each once (HLL is idempotent), within 3 SE.
TEST(HllKernel, HeavyDuplicationChangesNothing) {
  const uint64_t n = 50000;
  Sketch once, many;
  for (uint64_t i = 0; i < n; ++i) once.add_u64(i * 7919 + 3);
  shmf_bench::Rng rng(7);
  for (uint64_t j = 0; j < n * 40; ++j) many.add_u64(rng.below(n) * 7919 + 3);
  for (uint64_t i = 0; i < n; ++i) many.add_u64(i * 7919 + 3);  // make sure every key was seen
  EXPECT_EQ(once.regs(), many.regs());
  EXPECT_LE(std::fabs(static_cast<double>(many.count()) - n) / n, 3 * kSe);
}

// Merge of 7 overlapping HLLs == the HLL of the union, register for register.
TEST(HllKernel, MergeEqualsHllOfUnion) {
  std::vector<Sketch> days(7);
  Sketch uni, merged;
  for (int d = 0; d < 7; ++d)
    for (uint64_t i = 0; i < 30000; ++i) {
      uint64_t key = static_cast<uint64_t>(d) * 20000 + i;  // neighbouring days overlap by 10000
      days[d].add_u64(key);
      uni.add_u64(key);
    }
  for (int d = 0; d < 7; ++d)
    for (uint32_t wi = 0; wi < kHllWords; ++wi) hll_max_word(merged.words.data(), wi, days[d].words[wi]);
  EXPECT_EQ(merged.words, uni.words);
  double truth = 6 * 20000 + 30000;
  EXPECT_LE(std::fabs(static_cast<double>(merged.count()) - truth) / truth, 3 * kSe);
}

// Golden bytes of Redis's dense encoding: header and register bit positions.
TEST(HllKernel, RedisDenseGoldenBytes) {
  std::vector<uint8_t> regs(kHllRegisters, 0);
  std::string empty = hll_redis_encode_dense(regs.data());
  ASSERT_EQ(empty.size(), 12304u);
  EXPECT_EQ(empty.substr(0, 4), "HYLL");
  EXPECT_EQ(static_cast<uint8_t>(empty[4]), 0);     // dense
  EXPECT_EQ(static_cast<uint8_t>(empty[15]), 0x80); // cardinality cache invalid
  for (size_t i = 16; i < empty.size(); ++i) ASSERT_EQ(empty[i], 0);
  regs[0] = 51;    // 110011 in bits 0..5 of byte 16
  regs[1] = 1;     // bits 6..11: bit 6 of byte 16
  regs[2] = 63 & 0x2a;  // 101010 in bits 12..17: byte 17 bits 4..7 = 1010, byte 18 bits 0..1 = 10
  regs[16383] = 51;     // bits 98298..98303: last byte bits 2..7 = 110011
  std::string s = hll_redis_encode_dense(regs.data());
  EXPECT_EQ(static_cast<uint8_t>(s[16]), 0x73);  // 01 110011
  EXPECT_EQ(static_cast<uint8_t>(s[17]), 0xa0);
  EXPECT_EQ(static_cast<uint8_t>(s[18]), 0x02);
  EXPECT_EQ(static_cast<uint8_t>(s[12303]), 0xcc);
  std::vector<uint8_t> back(kHllRegisters);
  EXPECT_EQ(hll_redis_decode(s, back.data()), "");
  EXPECT_EQ(back, regs);
}

TEST(HllKernel, RedisSparseDecodes) {
  // HYLL, sparse; XZERO run 100; VAL value 3 run 2; ZERO run 10; XZERO for the rest.
  std::string s("HYLL\x01\0\0\0\0\0\0\0\0\0\0\0", 16);
  auto xzero = [&](uint32_t run) {
    s.push_back(static_cast<char>(0x40 | ((run - 1) >> 8)));
    s.push_back(static_cast<char>((run - 1) & 0xff));
  };
  xzero(100);
  s.push_back(static_cast<char>(0x80 | ((3 - 1) << 2) | (2 - 1)));
  s.push_back(static_cast<char>(10 - 1));
  xzero(16384 - 112);
  std::vector<uint8_t> regs(kHllRegisters);
  ASSERT_EQ(hll_redis_decode(s, regs.data()), "");
  for (uint32_t i = 0; i < kHllRegisters; ++i) EXPECT_EQ(regs[i], (i == 100 || i == 101) ? 3 : 0) << i;
  std::string bad = s.substr(0, s.size() - 2);  // 2 bytes short: too few registers
  EXPECT_NE(hll_redis_decode(bad, regs.data()).find("truncated"), std::string::npos);
  EXPECT_NE(hll_redis_decode("HYLX", regs.data()).find("HYLL"), std::string::npos);
  std::string dense_short = hll_redis_encode_dense(regs.data()).substr(0, 12000);
  EXPECT_NE(hll_redis_decode(dense_short, regs.data()).find("12304"), std::string::npos);
}

// An all-zero HLL counts 0; one key counts 1 (Redis gives the same).
TEST(HllKernel, SmallCountsAreExact) {
  Sketch sk;
  EXPECT_EQ(sk.count(), 0u);
  sk.add_u64(42);
  EXPECT_EQ(sk.count(), 1u);
  for (uint64_t i = 0; i < 100; ++i) sk.add_u64(i * 1000003);
  EXPECT_NEAR(static_cast<double>(sk.count()), 101.0, 2.0);
}
