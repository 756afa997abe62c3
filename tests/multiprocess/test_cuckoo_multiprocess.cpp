// tests/multiprocess/test_cuckoo_multiprocess.cpp: several processes insert, insert_unique, erase
// and look up overlapping keys in one filter at ~89% load (so inserts move
// items along cuckoo paths while readers read); an oracle outside the segment
// (a separate anonymous shared mapping) records what each process was told.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <span>
#include <vector>

#include "shmfilter/cuckoo.hpp"
#include "load_clock.h"
#include "test_util.h"
#include "workload.h"

using shmfilter::Cuckoo;
using shmfilter::CuckooStatus;
using shmfilter::Segment;

namespace {

constexpr int kWriters = 3;
constexpr uint64_t kOwned = 30000;   // keys per writer (inserted, then the even half erased)
constexpr uint64_t kUnique = 8000;   // keys every writer races to insert_unique
constexpr int kReaders = 2;
constexpr uint64_t kPrefill = 20000;
constexpr uint64_t kMinReaderChecks = 10000;  // lookups the readers make while the writers run, at least

struct Oracle {  // lives outside the segment
  std::atomic<uint64_t> acked[kWriters];         // owned keys [0, acked) were acknowledged
  std::atomic<uint64_t> erased[kWriters];        // even owned keys < erased were erased (acknowledged)
  std::atomic<uint32_t> wins[kUnique];           // kInserted answers per unique key
  std::atomic<uint32_t> exists[kUnique];         // kExists answers per unique key
  std::atomic<uint64_t> reader_errors;
  std::atomic<uint64_t> reader_checks;
  std::atomic<int> writers_done;
  std::atomic<int> readers_ready;  // writers start once every reader is attached and looking
};

uint64_t owned_key(int w, uint64_t i) { return shmf_bench::mix64((uint64_t{1} << 50) + (uint64_t(w) << 32) + i); }
uint64_t unique_key(uint64_t i) { return shmf_bench::mix64((uint64_t{3} << 50) + i); }

}  // namespace

TEST(CuckooMultiProcess, WritersReadersAndInsertUniqueRacesAgreeWithOracle) {
  shmf_test::SegmentGuard guard(shmf_test::unique_name("ckmp"));
  Segment seg = Segment::create(guard.name);
  shmfilter::CuckooOptions o;
  o.capacity = 120000;  // -> 2^15 buckets, 131072 slots; peak load (20000 + 90000 + 8000) / 131072 = 90%
  o.fingerprint_bits = 16;
  o.seed = 2024;
  Cuckoo::create(seg, "mp", o);
  // Pre-fill 15% so the run crosses 85-90% load at its peak (moves happen).
  {
    Cuckoo c = Cuckoo::open(seg, "mp");
    for (uint64_t i = 0; i < kPrefill; ++i) ASSERT_EQ(c.add(shmf_bench::mix64((uint64_t{5} << 50) + i)), CuckooStatus::kInserted);
  }
  auto* orc = static_cast<Oracle*>(mmap(nullptr, sizeof(Oracle), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(orc, MAP_FAILED);
  new (orc) Oracle{};
  std::string name = guard.name;
  std::vector<pid_t> kids;
  for (int w = 0; w < kWriters; ++w) {
    kids.push_back(shmf_test::fork_child([&, w] {
      // writers_done counts a writer that failed too: the readers stop either way.
      auto body = [&]() -> int {
        Segment s = Segment::open(name);
        Cuckoo c = Cuckoo::open(s, "mp");
        while (orc->readers_ready.load() < kReaders) usleep(1000);
        std::vector<uint64_t> order(kUnique);
        for (uint64_t i = 0; i < kUnique; ++i) order[i] = i;
        shmf_bench::Rng rng(static_cast<uint64_t>(w) + 1);
        for (uint64_t i = kUnique; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
        uint64_t u = 0;
        for (uint64_t i = 0; i < kOwned; ++i) {
          if (c.add(owned_key(w, i)) != CuckooStatus::kInserted) return 10;
          orc->acked[w].store(i + 1, std::memory_order_release);
          if (i % 2000 == 1999) {  // let the readers keep pace (2 vCPUs, 5 processes): <= 20 ms per pause
            for (int t = 0; t < 20 && orc->reader_checks.load() < i * 2; ++t) usleep(1000);
          }
          if (i == kOwned / 2) {
            // Halfway, the readers have checked more than the 10,000 the test asks for (by
            // progress: on a loaded machine they may have had little CPU so far). Bounded:
            // 60 uncontended seconds (tests/support/load_clock.h), then the EXPECT below fails.
            shmf_test::LoadClock clock;
            const uint64_t limit = uint64_t(60 * shmf_test::time_scale() * 1e9);
            while (orc->reader_checks.load() <= kMinReaderChecks && clock.now() < limit) usleep(1000);
          }
          if (i % 4 == 0 && u < kUnique) {  // interleave the insert_unique race
            uint64_t k = order[u++];
            auto st = c.insert_unique(unique_key(k));
            if (st == CuckooStatus::kInserted) orc->wins[k].fetch_add(1);
            else if (st == CuckooStatus::kExists) orc->exists[k].fetch_add(1);
            else return 11;
          }
        }
        for (; u < kUnique; ++u) {
          uint64_t k = order[u];
          auto st = c.insert_unique(unique_key(k));
          if (st == CuckooStatus::kInserted) orc->wins[k].fetch_add(1);
          else if (st == CuckooStatus::kExists) orc->exists[k].fetch_add(1);
          else return 11;
        }
        for (uint64_t i = 0; i < kOwned; i += 2) {
          if (!c.erase(owned_key(w, i))) return 12;
          orc->erased[w].store(i + 1, std::memory_order_release);
        }
        // Own view: odd keys were never erased.
        for (uint64_t i = 1; i < kOwned; i += 2)
          if (!c.contains(owned_key(w, i))) return 13;
        return 0;
      };
      const int rc = body();
      orc->writers_done.fetch_add(1);
      return rc;
    }));
  }
  for (int r = 0; r < kReaders; ++r) {
    kids.push_back(shmf_test::fork_child([&, r] {
      Segment s = Segment::open(name);
      Cuckoo c = Cuckoo::open(s, "mp");
      shmf_bench::Rng rng(100 + static_cast<uint64_t>(r));
      std::vector<uint64_t> batch;
      std::vector<uint8_t> out;
      orc->readers_ready.fetch_add(1);
      while (orc->writers_done.load() < kWriters) {
        // Acknowledged and never-erased keys must be present, at any instant, single and batched.
        batch.clear();
        for (int j = 0; j < 64; ++j) {
          int w = static_cast<int>(rng.below(kWriters));
          uint64_t a = orc->acked[w].load(std::memory_order_acquire);
          if (a < 2) continue;
          uint64_t i = rng.below(a) | 1;  // odd: never erased
          if (i >= a) continue;
          batch.push_back(owned_key(w, i));
        }
        out.assign(batch.size(), 0);
        c.contains_many(batch, out);
        for (size_t j = 0; j < batch.size(); ++j) {
          bool single = c.contains(batch[j]);
          if (!out[j] || !single) orc->reader_errors.fetch_add(1);
          orc->reader_checks.fetch_add(1, std::memory_order_relaxed);
        }
      }
      return 0;
    }));
  }
  for (pid_t p : kids) {
    int st = shmf_test::wait_status(p);
    EXPECT_TRUE(shmf_test::exited_ok(st)) << "child exit " << (WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
  }
  EXPECT_EQ(orc->reader_errors.load(), 0u);
  EXPECT_GT(orc->reader_checks.load(), kMinReaderChecks);
  // insert_unique: each key answered kInserted to exactly one process, kExists to the others.
  // (A key could get zero winners if another key's fingerprint falsely matched it first;
  // at f = 16 that needs P ~ 8 x 0.9 / 65535 x 8000 = 0.7 expected keys; bound: <= 5 such keys.)
  uint64_t zero = 0;
  for (uint64_t k = 0; k < kUnique; ++k) {
    ASSERT_LE(orc->wins[k].load(), 1u) << k;
    ASSERT_EQ(orc->wins[k].load() + orc->exists[k].load(), static_cast<uint32_t>(kWriters)) << k;
    zero += orc->wins[k].load() == 0;
  }
  EXPECT_LE(zero, 5u);
  uint64_t winners = kUnique - zero;
  Cuckoo c = Cuckoo::open(seg, "mp");
  for (int w = 0; w < kWriters; ++w)
    for (uint64_t i = 1; i < kOwned; i += 2) ASSERT_TRUE(c.contains(owned_key(w, i)));
  for (uint64_t k = 0; k < kUnique; ++k) {
    if (orc->wins[k].load()) {
      ASSERT_TRUE(c.contains(unique_key(k)));
    }
  }
  EXPECT_EQ(c.size(), kPrefill + kWriters * kOwned / 2 + winners);
  auto st = c.stats();
  EXPECT_GT(st.moves, 0u) << "the run should exercise cuckoo moves";
  EXPECT_EQ(st.failures, 0u);
  EXPECT_TRUE(seg.check(false).consistent());
  munmap(orc, sizeof(Oracle));
}

// Readers during a storm of cuckoo moves: the filter is held at ~95% load while
// one process churns (insert a fresh key, erase the oldest churn key), so most
// inserts move items along paths; readers look up a stable set that is never
// erased and must never miss one (the copy-before-clear order plus the seqlock;
// breaking either makes this test fail: checked by mutation while writing it).
namespace {

// The storm is bounded by work, not time: it runs until 20,000 moves happened
// (at most 4e6 churn steps), however slowly a loaded machine runs it.
void readers_never_miss_stable_keys_while_items_move(uint32_t fp_bits) {
  SCOPED_TRACE("f = " + std::to_string(fp_bits));
  shmf_test::SegmentGuard guard(shmf_test::unique_name("ckmv"));
  Segment seg = Segment::create(guard.name);
  shmfilter::CuckooOptions o;
  o.capacity = 60000;  // 2^14 buckets, 65536 slots
  o.fingerprint_bits = fp_bits;
  o.seed = 31;
  Cuckoo c = Cuckoo::create(seg, "mv", o);
  const uint64_t slots = c.stats().slots;
  auto stable = shmf_bench::distinct_keys(static_cast<uint64_t>(0.90 * static_cast<double>(slots)), 41);
  for (uint64_t k : stable) ASSERT_EQ(c.add(k), CuckooStatus::kInserted);
  auto* stop = static_cast<std::atomic<int>*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (stop) std::atomic<int>(0);
  new (stop + 1) std::atomic<int>(0);  // readers ready
  std::string name = guard.name;
  pid_t writer = shmf_test::fork_child([&] {
    Segment s = Segment::open(name);
    Cuckoo w = Cuckoo::open(s, "mv");
    uint64_t window = static_cast<uint64_t>(0.05 * static_cast<double>(slots)) - 16;  // stays just under 95%
    uint64_t next = 0, oldest = 0;
    auto churn = [](uint64_t i) { return shmf_bench::mix64((uint64_t{9} << 50) + i); };
    while (stop[1].load() < 2) usleep(1000);
    while (w.stats().moves < 20000) {  // the storm really moves items
      if (next > 4000000) return 32;
      for (int i = 0; i < 256; ++i) {
        if (w.add(churn(next++)) != CuckooStatus::kInserted) return 30;
        if (next - oldest > window && !w.erase(churn(oldest++))) return 31;
      }
    }
    stop->store(1);
    return 0;
  });
  std::vector<pid_t> readers;
  for (int r = 0; r < 2; ++r) {
    readers.push_back(shmf_test::fork_child([&, r] {
      Segment s = Segment::open(name);
      Cuckoo rd = Cuckoo::open(s, "mv");
      std::vector<uint8_t> out(256);
      stop[1].fetch_add(1);
      while (stop->load() == 0) {
        if (r == 0) {
          for (uint64_t k : stable)
            if (!rd.contains(k)) return 40;
        } else {
          for (size_t g = 0; g + 256 <= stable.size(); g += 256) {
            rd.contains_many(std::span<const uint64_t>(stable.data() + g, 256), out);
            for (auto b : out)
              if (!b) return 41;
          }
        }
      }
      return 0;
    }));
  }
  int ws = shmf_test::wait_status(writer);
  EXPECT_TRUE(shmf_test::exited_ok(ws)) << "writer exit " << WEXITSTATUS(ws)
                                        << " (30/31: insert/erase failed; 32: 10,000 moves not reached)";
  stop->store(1);
  for (pid_t p : readers) {
    int st = shmf_test::wait_status(p);
    EXPECT_TRUE(shmf_test::exited_ok(st)) << "reader exit " << WEXITSTATUS(st) << " (40/41: a stable key was missed)";
  }
  for (uint64_t k : stable) ASSERT_TRUE(c.contains(k));
  EXPECT_TRUE(seg.check(false).consistent());
  munmap(stop, 4096);
}

}  // namespace

TEST(CuckooMultiProcess, ReadersNeverMissStableKeysWhileItemsMove) { readers_never_miss_stable_keys_while_items_move(16); }

// Layout 3: half the buckets straddle two words, read with two loads and
// written with up to two stores; the stripe version must still cover every move.
TEST(CuckooMultiProcess, ReadersNeverMissStableKeysWhileItemsMovePackedLanes) {
  readers_never_miss_stable_keys_while_items_move(12);
}
