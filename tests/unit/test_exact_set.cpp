// tests/unit/test_exact_set.cpp: ExactSet semantics, capacity, tombstone reuse,
// special keys, check, and exactly-once insert/erase across processes.
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

#include "structures/exact_set/exact_set_impl.h"
#include "shmfilter/exact_set.hpp"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter;
using shmf_test::exited_ok;
using shmf_test::fork_child;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;
using shmf_test::wait_status;

namespace {

void expect_clean(Segment& s) {
  CheckReport r = s.check(false);
  for (const auto& f : r.findings)
    if (f.where.rfind("registry", 0) != 0) ADD_FAILURE() << f.where << ": " << f.problem;
}

}  // namespace

TEST(ExactSet, InsertContainsEraseSize) {
  SegmentGuard g(unique_name("set"));
  Segment seg = Segment::create(g.name);
  ExactSet s = ExactSet::create(seg, "devices", {.capacity = 10000});
  auto keys = shmf_bench::distinct_keys(10000, 1);
  for (uint64_t k : keys) ASSERT_EQ(s.insert(k), InsertResult::kInserted);
  for (uint64_t k : keys) ASSERT_EQ(s.insert(k), InsertResult::kExists);
  EXPECT_EQ(s.size(), 10000u);
  for (uint64_t k : keys) ASSERT_TRUE(s.contains(k));
  for (uint64_t k : shmf_bench::absent_keys(10000, 1)) ASSERT_FALSE(s.contains(k));
  // Full at capacity: a clear kFull, the key not silently lost or half added.
  EXPECT_EQ(s.insert(uint64_t{12345678901}), InsertResult::kFull);
  EXPECT_FALSE(s.contains(uint64_t{12345678901}));
  for (size_t i = 0; i < keys.size(); i += 2) ASSERT_TRUE(s.erase(keys[i]));
  for (size_t i = 0; i < keys.size(); i += 2) ASSERT_FALSE(s.erase(keys[i]));
  EXPECT_EQ(s.size(), 5000u);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(s.contains(keys[i]), i % 2 == 1) << i;
  std::vector<uint8_t> out(keys.size());
  EXPECT_EQ(s.contains_many(keys, out), keys.size() / 2);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(out[i], i % 2) << i;
  expect_clean(seg);
}

// Key 0 and ~0 are the EMPTY/TOMBSTONE slot values: they live in side flags.
TEST(ExactSet, ReservedKeysWork) {
  SegmentGuard g(unique_name("set"));
  Segment seg = Segment::create(g.name);
  ExactSet s = ExactSet::create(seg, "s", {.capacity = 4});
  for (uint64_t k : {uint64_t{0}, ~uint64_t{0}}) {
    EXPECT_FALSE(s.contains(k));
    EXPECT_EQ(s.insert(k), InsertResult::kInserted);
    EXPECT_EQ(s.insert(k), InsertResult::kExists);
    EXPECT_TRUE(s.contains(k));
  }
  EXPECT_EQ(s.size(), 2u);
  EXPECT_TRUE(s.erase(uint64_t{0}));
  EXPECT_FALSE(s.contains(uint64_t{0}));
  EXPECT_TRUE(s.contains(~uint64_t{0}));
  EXPECT_EQ(s.size(), 1u);
  expect_clean(seg);
}

// Churn: erase and reinsert many times. Tombstones are reused, the set never
// holds a key twice, and a model (std::set) agrees at every step.
TEST(ExactSet, ChurnReusesTombstonesAndMatchesModel) {
  SegmentGuard g(unique_name("set"));
  Segment seg = Segment::create(g.name);
  ExactSet s = ExactSet::create(seg, "s", {.capacity = 2000, .max_load = 0.9});
  std::set<uint64_t> model;
  shmf_bench::Rng rng(3);
  for (int step = 0; step < 200000; ++step) {
    uint64_t k = 1 + rng.below(3000);
    if (rng.below(2) == 0) {
      InsertResult r = s.insert(k);
      if (model.count(k)) {
        ASSERT_EQ(r, InsertResult::kExists);
      } else if (model.size() >= 2000) {
        ASSERT_EQ(r, InsertResult::kFull);
      } else {
        ASSERT_NE(r, InsertResult::kExists);
        if (r == InsertResult::kInserted) model.insert(k);
      }
    } else {
      ASSERT_EQ(s.erase(k), model.erase(k) == 1);
    }
  }
  EXPECT_EQ(s.size(), model.size());
  for (uint64_t k = 1; k <= 3000; ++k) ASSERT_EQ(s.contains(k), model.count(k) == 1) << k;
  expect_clean(seg);
}

TEST(ExactSet, StringKeysAndBadParameters) {
  SegmentGuard g(unique_name("set"));
  Segment seg = Segment::create(g.name);
  EXPECT_THROW(ExactSet::create(seg, "bad", {.capacity = 0}), Error);
  EXPECT_THROW(ExactSet::create(seg, "bad", {.capacity = 10, .max_load = 0.99}), Error);
  EXPECT_FALSE(seg.find("bad").has_value()) << "bad parameters leave the segment unchanged";
  ExactSet s = ExactSet::create(seg, "s", {.capacity = 100});
  EXPECT_EQ(s.insert(std::string_view("12:00ab34cd56ef7890")), InsertResult::kInserted);
  EXPECT_TRUE(s.contains(std::string_view("12:00ab34cd56ef7890")));
  EXPECT_FALSE(s.contains(std::string_view("12:00ab34cd56ef7891")));
  EXPECT_TRUE(s.contains(s.key_of("12:00ab34cd56ef7890")));
  ExactSet again = ExactSet::open(seg, "s");
  EXPECT_TRUE(again.contains(std::string_view("12:00ab34cd56ef7890")));
  EXPECT_TRUE(ExactSet::drop(seg, "s"));
  EXPECT_FALSE(s.valid());
  EXPECT_EQ(s.insert(uint64_t{5}), InsertResult::kDropped);
  EXPECT_FALSE(s.contains(std::string_view("12:00ab34cd56ef7890")));
  std::vector<uint64_t> ks{5, 6};
  std::vector<uint8_t> outs{7, 7};
  EXPECT_EQ(s.contains_many(ks, outs), 0u) << "a dropped set reports nothing present";
  EXPECT_EQ(outs, (std::vector<uint8_t>{0, 0}));
  EXPECT_THROW(ExactSet::open(seg, "s"), Error);
}

// Bytes per key at full load: region bytes / capacity <= 16 (target), and
// about 8 / max_load for large sets.
TEST(ExactSet, BytesPerKeyAtCapacity) {
  SegmentGuard g(unique_name("set"));
  Segment seg = Segment::create(g.name);
  ExactSet s = ExactSet::create(seg, "s", {.capacity = 1000000});
  ExactSetStats st = s.stats();
  EXPECT_LE(st.bytes_per_key_at_capacity, 16.0);
  EXPECT_NEAR(st.bytes_per_key_at_capacity, 10.0, 0.2);
}

// Exactly once across processes: 4 processes insert the same 20,000 keys
// (each in its own order) and then erase them; per key exactly one process
// saw kInserted and exactly one saw erase() == true.
TEST(ExactSet, ExactlyOnceAcrossProcesses) {
  SegmentGuard g(unique_name("set"));
  Segment seg = Segment::create(g.name);
  const uint64_t n = 20000;
  const int procs = 4;
  ExactSet::create(seg, "s", {.capacity = n});
  // Results: per process one byte per key, in a blob region.
  RegionInfo res = seg.create_region("results", Kind::kBlob, n * procs * 2 + 64, {});
  // Barrier word after the results: all processes start each phase together
  // (erasing before every process inserted would make "inserted" legitimately repeat).
  auto barrier = [&](Segment& s2, uint64_t phase) {
    std::atomic_ref<uint64_t> b(*reinterpret_cast<uint64_t*>(s2.base() + res.offset + n * procs * 2));
    b.fetch_add(1);
    while (b.load() < phase * procs) sched_yield();
  };
  auto keys = shmf_bench::distinct_keys(n, 11);
  std::vector<pid_t> kids;
  for (int p = 0; p < procs; ++p) {
    kids.push_back(fork_child([&, p] {
      Segment s2 = Segment::open(g.name);
      ExactSet set = ExactSet::open(s2, "s");
      uint8_t* out = reinterpret_cast<uint8_t*>(s2.base() + res.offset);
      shmf_bench::Rng rng(100 + p);
      std::vector<uint64_t> order(n);
      for (uint64_t i = 0; i < n; ++i) order[i] = i;
      for (uint64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
      barrier(s2, 1);
      for (uint64_t i : order) out[p * n + i] = set.insert(keys[i]) == InsertResult::kInserted;
      barrier(s2, 2);
      for (uint64_t i : order) out[(procs + p) * n + i] = set.erase(keys[i]);
      return 0;
    }));
  }
  for (pid_t k : kids) ASSERT_TRUE(exited_ok(wait_status(k)));
  const uint8_t* out = reinterpret_cast<const uint8_t*>(seg.base() + res.offset);
  for (uint64_t i = 0; i < n; ++i) {
    int ins = 0, era = 0;
    for (int p = 0; p < procs; ++p) {
      ins += out[p * n + i];
      era += out[(procs + p) * n + i];
    }
    ASSERT_EQ(ins, 1) << "key " << i << " inserted " << ins << " times";
    ASSERT_EQ(era, 1) << "key " << i << " erased " << era << " times";
  }
  ExactSet s = ExactSet::open(seg, "s");
  EXPECT_EQ(s.size(), 0u);
  expect_clean(seg);
}

// Concurrent churn from several processes on a small key space (heavy tombstone
// reuse): no key is ever stored twice and size() equals the keys stored.
TEST(ExactSet, ConcurrentChurnNeverDuplicates) {
  SegmentGuard g(unique_name("set"));
  Segment seg = Segment::create(g.name);
  ExactSet::create(seg, "s", {.capacity = 512, .max_load = 0.5});
  RegionInfo go = seg.create_region("go", Kind::kBlob, 64, {});
  std::vector<pid_t> kids;
  for (int p = 0; p < 3; ++p) {
    kids.push_back(fork_child([&, p] {
      Segment s2 = Segment::open(g.name);
      ExactSet set = ExactSet::open(s2, "s");
      shmf_bench::Rng rng(7 + p);
      std::atomic_ref<uint64_t> b(*reinterpret_cast<uint64_t*>(s2.base() + go.offset));
      b.fetch_add(1);
      while (b.load() < 3) sched_yield();  // start together
      for (int i = 0; i < 200000; ++i) {
        uint64_t k = 1 + rng.below(400);
        if (rng.below(2)) {
          set.insert(k);
        } else {
          set.erase(k);
        }
      }
      return 0;
    }));
  }
  for (pid_t k : kids) ASSERT_TRUE(exited_ok(wait_status(k)));
  ExactSet s = ExactSet::open(seg, "s");
  uint64_t present = 0;
  for (uint64_t k = 1; k <= 400; ++k) present += s.contains(k);
  EXPECT_EQ(s.size(), present);
  expect_clean(seg);  // includes "no key stored twice" and chain reachability
}

// check_exact_set finds what it promises: a broken probe chain (an EMPTY
// written between a key and its home), a key stored twice, a wrong count.
TEST(ExactSet, CheckFindsBrokenChainsDuplicatesAndBadCounts) {
  using namespace shmfilter::internal::exact_set;
  SegmentGuard g(unique_name("set"));
  Segment seg = Segment::create(g.name);
  ExactSet s = ExactSet::create(seg, "s", {.capacity = 1000, .max_load = 0.9});
  for (uint64_t k : shmf_bench::distinct_keys(1000, 9)) s.insert(k);
  expect_clean(seg);
  RegionInfo info = *seg.find("s");
  auto* h = reinterpret_cast<ExactSetHeader*>(seg.base() + info.offset);
  auto* slots = reinterpret_cast<uint64_t*>(seg.base() + info.offset + h->slots_offset);
  // A key not at its home slot: blank the slot just before it.
  uint64_t victim = kNoSlot;
  for (uint64_t i = 1; i < h->slots && victim == kNoSlot; ++i)
    if (slots[i] != kSlotEmpty && slots[i] != kSlotTomb && slots[i - 1] != kSlotEmpty &&
        set_home(h, set_hash(h, slots[i])) != i)
      victim = i;
  ASSERT_NE(victim, kNoSlot);
  uint64_t saved = slots[victim - 1];
  slots[victim - 1] = kSlotEmpty;
  CheckReport r = seg.check(false);
  bool chain = false, count = false;
  for (const auto& f : r.findings) {
    chain |= f.problem.find("unreachable") != std::string::npos;
    count |= f.problem.find("count differs") != std::string::npos;
  }
  EXPECT_TRUE(chain);
  EXPECT_TRUE(count) << "the blanked key is missing from its stripe's count";
  slots[victim - 1] = saved;
  expect_clean(seg);
  // A duplicate: copy a key into an EMPTY slot further along its chain.
  uint64_t k = slots[victim];
  uint64_t e = victim;
  while (slots[e] != kSlotEmpty) e = (e + 1) % h->slots;
  slots[e] = k;
  r = seg.check(false);
  bool dup = false;
  for (const auto& f : r.findings) dup |= f.problem.find("twice") != std::string::npos;
  EXPECT_TRUE(dup);
  slots[e] = kSlotEmpty;
  expect_clean(seg);
}

// Threads of one process share one owner token: a thread finding the stripe
// lock held by its own process waits (never "takes over" from itself).
TEST(ExactSet, ThreadsOfOneProcessExactlyOnce) {
  SegmentGuard g(unique_name("set"));
  Segment seg = Segment::create(g.name);
  const uint64_t n = 20000;
  ExactSet s = ExactSet::create(seg, "s", {.capacity = n});
  auto keys = shmf_bench::distinct_keys(n, 21);
  std::vector<std::vector<uint8_t>> got(4, std::vector<uint8_t>(n));
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t j = (i * 7919 + t * 5003) % n;
        got[t][j] = s.insert(keys[j]) == InsertResult::kInserted;
      }
    });
  for (auto& th : ts) th.join();
  for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(got[0][i] + got[1][i] + got[2][i] + got[3][i], 1) << i;
  EXPECT_EQ(s.size(), n);
  expect_clean(seg);
}

// A damaged header is a kCorrupt error at open(), never a crash.
TEST(ExactSet, CorruptHeaderIsAnErrorNotACrash) {
  using namespace shmfilter::internal::exact_set;
  SegmentGuard g(unique_name("set"));
  Segment seg = Segment::create(g.name);
  ExactSet::create(seg, "s", {.capacity = 100});
  auto* h = reinterpret_cast<ExactSetHeader*>(seg.base() + seg.find("s")->offset);
  auto expect_code = [&](ErrorCode want) {
    try {
      ExactSet::open(seg, "s");
      ADD_FAILURE() << "open succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), want) << e.what();
    }
  };
  uint64_t slots = h->slots;
  h->slots = uint64_t{1} << 40;  // beyond the region
  expect_code(ErrorCode::kCorrupt);
  h->slots = slots;
  h->stripes = 3;  // not a power of two
  expect_code(ErrorCode::kCorrupt);
  h->stripes = 8;
  h->version = 99;
  expect_code(ErrorCode::kVersionMismatch);
  h->version = kLayoutVersion;
  h->magic = 0;
  expect_code(ErrorCode::kCorrupt);
  CheckReport r = seg.check(false);
  EXPECT_FALSE(r.consistent()) << "check reports the damaged set";
}

// The status vocabulary (issue 21): each refusal has its own name; insert_unique is the C and
// Python name of insert.
TEST(ExactSetVocabulary, StatusNamesAndTheInsertUniqueName) {
  EXPECT_EQ(insert_result_name(InsertResult::kDropped), "dropped");
  EXPECT_EQ(insert_result_name(InsertResult::kForked), "forked");
  EXPECT_EQ(insert_result_name(InsertResult::kReadOnly), "read-only");
  SegmentGuard g(unique_name("esvocab"));
  Segment seg = Segment::create(g.name);
  ExactSet s = ExactSet::create(seg, "s", ExactSetOptions{.capacity = 100});
  EXPECT_EQ(s.insert_unique(uint64_t{1}), InsertResult::kInserted);
  EXPECT_EQ(s.insert(uint64_t{1}), InsertResult::kExists);
  EXPECT_EQ(s.insert_unique("k"), InsertResult::kInserted);
  pid_t child = fork_child([&] {
    return s.insert(uint64_t{2}) == InsertResult::kForked && s.contains(uint64_t{1}) ? 0 : 1;
  });
  EXPECT_TRUE(exited_ok(wait_status(child)));
  EXPECT_FALSE(s.contains(uint64_t{2}));
}
