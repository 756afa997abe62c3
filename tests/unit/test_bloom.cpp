// tests/unit/test_bloom.cpp: the Bloom handle in a real segment: create/open/drop,
// no false negatives with and without scaling, the scaling bound p/(1-r),
// over capacity, bad input leaving the segment unchanged, dropped handles,
// forked writers, the header's golden bytes, integrity checks and kill points.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "structures/bloom/bloom_impl.h"
#include "base/kill_point.h"
#include "shmfilter/bloom.hpp"
#include "check_clean.h"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter;
namespace b = shmfilter::internal::bloom;
using shmf_test::SegmentGuard;

namespace {

struct Fixture {
  SegmentGuard guard;
  Segment seg;
  explicit Fixture(const std::string& tag, uint64_t size = 64ull << 20)
      : guard(shmf_test::unique_name(tag)) {
    CreateOptions o;
    o.size = size;
    o.max_size = 4ull << 30;
    seg = Segment::create(guard.name, o);
  }
};

BloomOptions opts(uint64_t n, double p, BloomLayout l, double growth = 0, uint64_t seed = 7) {
  BloomOptions o;
  o.capacity = n;
  o.error = p;
  o.layout = l;
  o.growth = growth;
  o.seed = seed;
  return o;
}

double measure_fp(const Bloom& f, uint64_t negatives, uint64_t key_seed) {
  auto absent = shmf_bench::absent_keys(negatives, key_seed);
  std::vector<uint8_t> out(absent.size());
  return static_cast<double>(f.contains_many(absent, out)) / static_cast<double>(negatives);
}

using shmf_test::expect_check_clean;  // tests/support/check_clean.h

}  // namespace

TEST(Bloom, CreateAddContainsOpen) {
  Fixture fx("bl-basic");
  Bloom f = Bloom::create(fx.seg, "plan42", opts(100000, 0.01, BloomLayout::kBlocked));
  EXPECT_TRUE(f.valid());
  EXPECT_FALSE(f.contains(std::string_view("0123456789abcdef")));
  EXPECT_TRUE(f.add(std::string_view("0123456789abcdef")));
  EXPECT_FALSE(f.add(std::string_view("0123456789abcdef")));
  EXPECT_TRUE(f.contains(std::string_view("0123456789abcdef")));
  // uint64 keys hash as their 8 little-endian bytes.
  uint64_t k = 0x1122334455667788ull;
  EXPECT_TRUE(f.add(k));
  char le[8];
  std::memcpy(le, &k, 8);
  EXPECT_TRUE(f.contains(std::string_view(le, 8)));
  Bloom g = Bloom::open(fx.seg, "plan42");
  EXPECT_TRUE(g.contains(std::string_view("0123456789abcdef")));
  BloomStats st = g.stats();
  EXPECT_EQ(st.layout, BloomLayout::kBlocked);
  EXPECT_EQ(st.layers, 1u);
  EXPECT_EQ(st.k, 6u);
  EXPECT_EQ(st.capacity, 100000u);
  EXPECT_EQ(st.bits % 512, 0u);
  EXPECT_NEAR(static_cast<double>(st.bits) / 100000, 10.0, 0.01);
  EXPECT_NEAR(st.inserted_estimate, 2.0, 0.1);
  EXPECT_FALSE(st.over_capacity);
  EXPECT_EQ(st.seed, 7u);
  EXPECT_GE(st.memory_bytes, st.bits / 8);
  EXPECT_THROW(Bloom::open(fx.seg, "nope"), Error);
}

TEST(Bloom, PlanMissionTestVector) {
  // n = 1.2e8, p = 0.01: classic m = 137 MiB, k = 7 (the mission's numbers).
  BloomSizing s = Bloom::plan(opts(120000000, 0.01, BloomLayout::kClassic));
  EXPECT_EQ(s.k, 7u);
  EXPECT_NEAR(static_cast<double>(s.bits) / 8 / (1 << 20), 137.1, 0.1);
  BloomSizing t = Bloom::plan(opts(120000000, 0.01, BloomLayout::kBlocked));
  EXPECT_EQ(t.k, 6u);
  EXPECT_NEAR(static_cast<double>(t.bits) / 8 / (1 << 20), 143.1, 0.1);  // 10.00 bits/key
}

// No false negatives: 1e6 keys, two seeds, both layouts, scaling off and on
// (capacity 1e5 with growth 2 grows to 4 layers for 1e6 keys).
TEST(Bloom, NoFalseNegativesAnyConfiguration) {
  Fixture fx("bl-nofn", 128ull << 20);
  int id = 0;
  for (BloomLayout l : {BloomLayout::kBlocked, BloomLayout::kClassic}) {
    for (double growth : {0.0, 2.0}) {
      for (uint64_t seed : {1ull, 0xfeedfaceull}) {
        std::string name = "f" + std::to_string(id++);
        uint64_t cap = growth == 0 ? 1000000 : 100000;
        Bloom f = Bloom::create(fx.seg, name, opts(cap, 0.01, l, growth, seed));
        auto keys = shmf_bench::distinct_keys(1000000, seed);
        // half one at a time, half batched
        for (size_t i = 0; i < keys.size() / 2; ++i) f.add(keys[i]);
        f.add_many(std::span<const uint64_t>(keys).subspan(keys.size() / 2));
        std::vector<uint8_t> out(keys.size());
        EXPECT_EQ(f.contains_many(keys, out), keys.size()) << name;
        for (size_t i = 0; i < keys.size(); i += 97) ASSERT_TRUE(f.contains(keys[i])) << name << " key " << i;
        BloomStats st = f.stats();
        if (growth != 0) {
          EXPECT_EQ(st.layers, 4u) << name;  // 1e5 + 2e5 + 4e5 + 8e5 >= 1e6
        }
        EXPECT_FALSE(st.over_capacity) << name;
        EXPECT_NEAR(st.inserted_estimate / 1e6, 1.0, 0.03) << name;
        EXPECT_TRUE(Bloom::drop(fx.seg, name));
      }
    }
  }
  expect_check_clean(fx.seg);
}

// Scaling: first layer gets exactly p, layer i gets p r^i and capacity n g^i;
// measured FP after 5 layers stays under the bound p / (1 - r) = 2%.
// Bound check: 1e6 negatives; the measured rate is 1.83% here (four full
// layers at ~0.97 p r^i sum to 1.82%, the top one is not yet full), below the
// 2% bound by ~12 sd (sd ~0.013% absolute); and above 0.5%, so the layers
// really are full and the bound is not vacuous.
TEST(Bloom, ScalingBoundMeasured) {
  Fixture fx("bl-scale");
  BloomOptions o = opts(10000, 0.01, BloomLayout::kBlocked, 2.0);
  o.tightening = 0.5;
  Bloom f = Bloom::create(fx.seg, "s", o);
  auto keys = shmf_bench::distinct_keys(300000, 3);  // 1e4+2e4+4e4+8e4+16e4 = 3.1e5 -> 5 layers
  f.add_many(keys);
  BloomStats st = f.stats();
  ASSERT_EQ(st.layers, 5u);
  EXPECT_DOUBLE_EQ(st.layer[0].error, 0.01);  // exactly what was asked (RedisBloom would give p/2)
  for (uint32_t i = 0; i < st.layers; ++i) {
    EXPECT_NEAR(st.layer[i].error, 0.01 * std::pow(0.5, i), 1e-12);
    EXPECT_EQ(st.layer[i].capacity, static_cast<uint64_t>(10000 * std::pow(2, i)));
  }
  EXPECT_DOUBLE_EQ(st.fp_bound, 0.02);
  double fp = measure_fp(f, 1000000, 3);
  std::printf("scaling 5 layers: measured FP %.4f%% (bound 2%%), estimate now %.4f%%\n", 100 * fp, 100 * st.fp_rate_now);
  EXPECT_LT(fp, 0.02);
  EXPECT_GT(fp, 0.005);  // the layers really are full: not a vacuous bound
  EXPECT_LT(st.fp_rate_now, 0.02);
  EXPECT_NEAR(st.fp_rate_now / fp, 1.0, 0.15);
}

TEST(Bloom, MaxLayersKeepsAnsweringAndFlags) {
  Fixture fx("bl-maxl");
  BloomOptions o = opts(1000, 0.01, BloomLayout::kBlocked, 2.0);
  o.max_layers = 2;
  Bloom f = Bloom::create(fx.seg, "m", o);
  auto keys = shmf_bench::distinct_keys(20000, 4);
  f.add_many(keys);
  BloomStats st = f.stats();
  EXPECT_EQ(st.layers, 2u);
  EXPECT_TRUE(st.over_capacity);
  std::vector<uint8_t> out(keys.size());
  EXPECT_EQ(f.contains_many(keys, out), keys.size());
}

// The mission's pitfall at 1/1000 scale: capacity 1e5, 2e5 inserts, classic
// k = 7: theory (1-e^{-kn/m})^k = 15.7%; band +-3% relative (sd 0.23%).
TEST(Bloom, OverCapacityIsVisible) {
  Fixture fx("bl-over");
  Bloom f = Bloom::create(fx.seg, "o", opts(100000, 0.01, BloomLayout::kClassic));
  auto keys = shmf_bench::distinct_keys(200000, 8);
  f.add_many(std::span<const uint64_t>(keys).first(90000));
  EXPECT_FALSE(f.stats().over_capacity);
  f.add_many(std::span<const uint64_t>(keys).subspan(90000));
  BloomStats st = f.stats();
  ASSERT_EQ(st.k, 7u);
  EXPECT_TRUE(st.over_capacity);
  double theory = std::pow(1 - std::exp(-7.0 * 200000 / static_cast<double>(st.bits)), 7);
  double fp = measure_fp(f, 1000000, 8);
  std::printf("over capacity: theory %.3f%% measured %.3f%% stats %.3f%%\n", 100 * theory, 100 * fp, 100 * st.fp_rate_now);
  EXPECT_NEAR(fp / theory, 1.0, 0.03);
  EXPECT_NEAR(st.fp_rate_now / theory, 1.0, 0.03);
  EXPECT_NEAR(st.inserted_estimate / 200000, 1.0, 0.03);
}

TEST(Bloom, BadInputLeavesSegmentUnchanged) {
  Fixture fx("bl-bad");
  Bloom::create(fx.seg, "taken", opts(1000, 0.01, BloomLayout::kBlocked));
  fx.seg.create_region("blob", Kind::kBlob, 64, [](std::byte*, uint64_t, ControlTxn&) {});
  SegmentStats before = fx.seg.stats();
  auto expect_code = [&](const BloomOptions& o, const std::string& name, ErrorCode code) {
    try {
      Bloom::create(fx.seg, name, o);
      ADD_FAILURE() << "no error for " << name;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  };
  expect_code(opts(0, 0.01, BloomLayout::kBlocked), "x", ErrorCode::kInvalidArgument);
  expect_code(opts(1000, 0.0, BloomLayout::kBlocked), "x", ErrorCode::kInvalidArgument);
  expect_code(opts(1000, 1.0, BloomLayout::kBlocked), "x", ErrorCode::kInvalidArgument);
  expect_code(opts(1000, std::nan(""), BloomLayout::kBlocked), "x", ErrorCode::kInvalidArgument);
  expect_code(opts(1000, 0.01, static_cast<BloomLayout>(7)), "x", ErrorCode::kInvalidArgument);
  expect_code(opts(1000, 0.01, BloomLayout::kBlocked, 0.5), "x", ErrorCode::kInvalidArgument);
  BloomOptions t = opts(1000, 0.01, BloomLayout::kBlocked, 2);
  t.tightening = 1.0;
  expect_code(t, "x", ErrorCode::kInvalidArgument);
  expect_code(opts(1000000000000000ull, 0.01, BloomLayout::kBlocked), "x", ErrorCode::kInvalidArgument);  // > max_size
  expect_code(opts(1000, 0.01, BloomLayout::kBlocked), std::string(64, 'n'), ErrorCode::kNameTooLong);
  expect_code(opts(1000, 0.01, BloomLayout::kBlocked), "taken", ErrorCode::kExists);
  expect_code(opts(1000, 0.01, BloomLayout::kBlocked), "blob", ErrorCode::kExists);
  SegmentStats after = fx.seg.stats();
  EXPECT_EQ(after.structures, before.structures);
  EXPECT_EQ(after.used_bytes, before.used_bytes);
  EXPECT_THROW(Bloom::open(fx.seg, "blob"), Error);
  expect_check_clean(fx.seg);
}

TEST(Bloom, DroppedHandleIsInert) {
  Fixture fx("bl-drop");
  Bloom f = Bloom::create(fx.seg, "d", opts(100000, 0.01, BloomLayout::kBlocked, 2));
  f.add_many(shmf_bench::distinct_keys(300000, 1));  // grows extra layers
  EXPECT_GT(f.stats().layers, 1u);
  SegmentStats with = fx.seg.stats();
  EXPECT_TRUE(Bloom::drop(fx.seg, "d"));
  EXPECT_FALSE(Bloom::drop(fx.seg, "d"));
  EXPECT_FALSE(f.valid());
  EXPECT_FALSE(f.add(uint64_t{1}));
  EXPECT_FALSE(f.contains(uint64_t{1}));
  std::vector<uint64_t> keys{1, 2, 3};
  std::vector<uint8_t> out{9, 9, 9};
  EXPECT_EQ(f.contains_many(keys, out), 0u);
  EXPECT_EQ(out, (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(f.add_many(keys, out), 0u);
  EXPECT_THROW(f.stats(), Error);
  EXPECT_THROW(f.clear(), Error);
  EXPECT_LT(fx.seg.stats().used_bytes, with.used_bytes);  // every layer freed, not only the region
  expect_check_clean(fx.seg);
}

TEST(Bloom, ClearForgetsEverything) {
  Fixture fx("bl-clear");
  Bloom f = Bloom::create(fx.seg, "c", opts(10000, 0.01, BloomLayout::kClassic));
  auto keys = shmf_bench::distinct_keys(5000, 2);
  f.add_many(keys);
  f.clear();
  std::vector<uint8_t> out(keys.size());
  EXPECT_EQ(f.contains_many(keys, out), 0u);
  EXPECT_EQ(f.stats().inserted_estimate, 0.0);
  // A re-add may be a false positive now and then (the key's bits set by others): <= 1%.
  EXPECT_GE(f.add_many(keys), keys.size() * 99 / 100);
}

// Four processes add overlapping ranges at once into a scaling filter that
// grows while they run; afterwards every key is present in every process,
// and the double-count statistic is an upper bound on what can be measured:
// sum of "true" returns - distinct keys <= racing_adds (+ false positives
// make some true returns false, never extra ones).
TEST(Bloom, ForkedWritersEveryKeyEverywhere) {
  Fixture fx("bl-fork", 64ull << 20);
  Bloom::create(fx.seg, "shared", opts(50000, 0.01, BloomLayout::kBlocked, 2));
  const int procs = 4;
  const uint64_t step = 60000, per = 120000;
  auto keys = shmf_bench::distinct_keys(step * (procs + 1), 9);
  auto* trues = static_cast<std::atomic<uint64_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (trues) std::atomic<uint64_t>(0);
  std::vector<pid_t> kids;
  for (int i = 0; i < procs; ++i) {
    kids.push_back(shmf_test::fork_child([&, i]() {
      Segment s = Segment::open(fx.guard.name);
      Bloom f = Bloom::open(s, "shared");
      uint64_t t = 0;
      for (uint64_t j = i * step; j < i * step + per; ++j) t += f.add(keys[j]);
      trues->fetch_add(t);
      return 0;
    }));
  }
  for (pid_t p : kids) ASSERT_TRUE(shmf_test::exited_ok(shmf_test::wait_status(p)));
  kids.clear();
  for (int i = 0; i < procs; ++i) {
    kids.push_back(shmf_test::fork_child([&]() {
      Segment s = Segment::open(fx.guard.name);
      Bloom f = Bloom::open(s, "shared");
      std::vector<uint8_t> out(step * procs + step);
      auto span = std::span<const uint64_t>(keys).first(step * procs + step);
      return f.contains_many(span, out) == span.size() ? 0 : 3;
    }));
  }
  for (pid_t p : kids) EXPECT_TRUE(shmf_test::exited_ok(shmf_test::wait_status(p)));
  Bloom f = Bloom::open(fx.seg, "shared");
  BloomStats st = f.stats();
  EXPECT_EQ(st.layers, 3u);  // 5e4 + 1e5 + 2e5 >= 3e5: grew twice while four processes were adding
  uint64_t distinct = step * (procs + 1);
  std::printf("forked: distinct %llu, true returns %llu, racing_adds %llu, layers %u\n", (unsigned long long)distinct,
              (unsigned long long)trues->load(), (unsigned long long)st.racing_adds, st.layers);
  EXPECT_LE(trues->load(), distinct + st.racing_adds);
  munmap(trues, 4096);
  expect_check_clean(fx.seg);
}

// Golden bytes through the handle: header constants and the first layer's bits.
TEST(Bloom, GoldenHeaderAndBits) {
  Fixture fx("bl-golden");
  for (BloomLayout l : {BloomLayout::kBlocked, BloomLayout::kClassic}) {
    std::string name = std::string("g-") + std::string(bloom_layout_name(l));
    Bloom f = Bloom::create(fx.seg, name, opts(1000, 0.01, l, 0, 0x0123456789abcdefull));
    for (int i = 0; i < 1000; ++i) f.add(std::string_view("golden-" + std::to_string(i)));
    for (uint64_t i = 0; i < 100; ++i) f.add(i);
    RegionInfo r = fx.seg.open_region(name, Kind::kBloom);
    const std::byte* region = fx.seg.base() + r.offset;
    uint32_t head[4];
    std::memcpy(head, region, sizeof head);
    EXPECT_EQ(head[0], 0x4d4c4253u);  // "SBLM"
    EXPECT_EQ(head[1], 1u);           // version
    EXPECT_EQ(head[2], l == BloomLayout::kClassic ? 1u : 0u);
    EXPECT_EQ(head[3], 1u);  // max_layers without scaling
    uint64_t seed;
    std::memcpy(&seed, region + 16, 8);
    EXPECT_EQ(seed, 0x0123456789abcdefull);
    BloomStats st = f.stats();
    const std::byte* bits = region + b::header_bytes(1) + b::kStripeBytes;
    uint64_t h = shmfilter::internal::hash_bytes(bits, (st.bits + 63) / 64 * 8, 0);
    // Same constants as tests/unit/test_bloom_kernel.cpp GoldenBits: the handle adds nothing to the bits.
    EXPECT_EQ(h, l == BloomLayout::kBlocked ? 0x6d8fad18c42293b9ull : 0x10a16686930ce90cull);
  }
}

TEST(Bloom, CheckFindsCorruption) {
  Fixture fx("bl-corrupt");
  Bloom::create(fx.seg, "c", opts(1000, 0.01, BloomLayout::kBlocked, 2));
  expect_check_clean(fx.seg);
  RegionInfo r = fx.seg.open_region("c", Kind::kBloom);
  auto* h = reinterpret_cast<b::BloomHeader*>(fx.seg.base() + r.offset);
  // A published layer pointing outside the segment.
  b::BloomLayer saved = b::slots(h)[1];
  b::slots(h)[1] = b::slots(h)[0];
  b::slots(h)[1].offset = fx.seg.size() - 64;
  h->layer_count.store(2);
  EXPECT_FALSE(fx.seg.check(false).consistent());
  try {
    Bloom::open(fx.seg, "c");
    ADD_FAILURE() << "open accepted a corrupt filter";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCorrupt) << e.what();
  }
  // A published layer pointing inside the segment but at no allocated extent.
  b::slots(h)[1].offset = b::slots(h)[0].offset + 4096 * 64;
  EXPECT_FALSE(fx.seg.check(false).consistent());
  h->layer_count.store(1);
  b::slots(h)[1] = saved;
  // Bad magic.
  h->magic ^= 1;
  EXPECT_FALSE(fx.seg.check(false).consistent());
  EXPECT_THROW(Bloom::open(fx.seg, "c"), Error);
  h->magic ^= 1;
  expect_check_clean(fx.seg);
  // Implausible counters: found, and repaired from a popcount.
  Bloom f = Bloom::open(fx.seg, "c");
  f.add_many(shmf_bench::distinct_keys(500, 1));
  auto* stripes = reinterpret_cast<b::BloomStripe*>(fx.seg.base() + b::slots(h)[0].offset);
  stripes[3].bits_set.store(1000000);
  CheckReport rep = fx.seg.check(true);
  ASSERT_EQ(rep.findings.size(), 1u);
  EXPECT_TRUE(rep.findings[0].repaired);
  expect_check_clean(fx.seg);
  EXPECT_NEAR(f.stats().inserted_estimate, 500, 25);
}

// A child SIGKILLed inside layer growth: before commit the transaction rolls
// back; after commit but before publishing, the next grower (here: open())
// publishes the ready layer. Either way the parent keeps working, keys the
// child had acknowledged are present, and Segment::check is clean (no leak).
TEST(Bloom, KilledInsideGrowth) {
  for (const char* point : {"bloom.grow.after_allocate", "bloom.grow.before_commit", "bloom.grow.after_commit"}) {
    Fixture fx("bl-kill");
    Bloom::create(fx.seg, "k", opts(2000, 0.01, BloomLayout::kBlocked, 2));
    auto keys = shmf_bench::distinct_keys(100000, 12);
    auto* acked = static_cast<std::atomic<uint64_t>*>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    new (acked) std::atomic<uint64_t>(0);
    pid_t pid = shmf_test::fork_child([&]() {
      Segment s = Segment::open(fx.guard.name);
      Bloom f = Bloom::open(s, "k");
      shmfilter::internal::arm_kill_point(point);
      for (uint64_t j = 0; j < keys.size(); ++j) {
        f.add(keys[j]);
        acked->store(j + 1);
      }
      return 0;
    });
    int status = shmf_test::wait_status(pid);
    ASSERT_TRUE(shmf_test::killed_by(status, SIGKILL)) << point;
    uint64_t n_acked = acked->load();
    // The child's death itself is a finding (registry slot, maybe a rolled-back
    // transaction); repair clears those, then the segment must be clean.
    fx.seg.check(true);
    EXPECT_GT(n_acked, 1000u) << point;
    Bloom f = Bloom::open(fx.seg, "k");
    for (uint64_t j = 0; j < n_acked; ++j) ASSERT_TRUE(f.contains(keys[j])) << point << " key " << j;
    uint32_t layers_after_kill = f.stats().layers;
    // after_allocate: slot never marked ready, nothing to adopt. after_commit:
    // open() publishes the committed layer. before_commit: open() may still see
    // the logged "ready" before the lock's recovery undoes it; it then takes the
    // lock, the rollback runs first, and it grows a fresh layer (layer 0 is full).
    if (std::string(point) == "bloom.grow.after_commit") EXPECT_EQ(layers_after_kill, 2u) << "open() adopts the ready layer";
    else if (std::string(point) == "bloom.grow.after_allocate") EXPECT_EQ(layers_after_kill, 1u) << point;
    else EXPECT_LE(layers_after_kill, 2u) << point;
    expect_check_clean(fx.seg);
    f.add_many(keys);  // parent grows on
    std::vector<uint8_t> out(keys.size());
    EXPECT_EQ(f.contains_many(keys, out), keys.size());
    EXPECT_GT(f.stats().layers, layers_after_kill);
    expect_check_clean(fx.seg);
    EXPECT_TRUE(Bloom::drop(fx.seg, "k"));
    expect_check_clean(fx.seg);
    munmap(acked, 4096);
  }
}

// A child killed halfway through clear(): the filter stays structurally valid
// (check clean), answers, and a second clear() finishes the job.
TEST(Bloom, KilledInsideClear) {
  Fixture fx("bl-killclear");
  Bloom f = Bloom::create(fx.seg, "c", opts(100000, 0.01, BloomLayout::kBlocked));
  auto keys = shmf_bench::distinct_keys(100000, 5);
  f.add_many(keys);
  pid_t pid = shmf_test::fork_child([&]() {
    Segment s = Segment::open(fx.guard.name);
    Bloom g = Bloom::open(s, "c");
    shmfilter::internal::arm_kill_point("bloom.clear.half_done");
    g.clear();
    return 0;
  });
  ASSERT_TRUE(shmf_test::killed_by(shmf_test::wait_status(pid), SIGKILL));
  fx.seg.check(true);  // the dead child's registry slot
  expect_check_clean(fx.seg);
  std::vector<uint8_t> out(keys.size());
  size_t left = f.contains_many(keys, out);
  EXPECT_GT(left, 0u);              // the second half of the words was not cleared yet
  EXPECT_LT(left, keys.size());     // the first half was
  f.clear();
  EXPECT_EQ(f.contains_many(keys, out), 0u);
  expect_check_clean(fx.seg);
}
