// tests/multiprocess/test_window_stamped_mp.cpp: the stamped window variant (kStamped, issue #24)
// under racing processes and SIGKILLs: exactly-once mark_if_unseen and cap-N mark_if_under.
//  - Racing mark_if_unseen over w = retention: exactly one kNew per pair (zero only for a false
//    positive before anyone marked the pair, bounded), also while the buckets rotate under the
//    racers and writers sweep inline (nobody runs maintain()).
//  - Racing mark_if_under(N, w), N in {1, 3, 15}, w in {1, retention}, with a rotation half-way:
//    per pair never more than N kNew in any w consecutive buckets, exactly N where no tally
//    collides (bounded); after the first impressions leave w, new ones are allowed again.
//  - SIGKILL at random points of racing workers (op-count triggers, fixed seeds) over six
//    buckets: acknowledged marks stay seen, no pair gets two acknowledged kNew, no pair more than
//    N acknowledged impressions, nobody hangs, check is clean after repair.
//  - SIGKILL at every kill point the stamped writer reaches (its own, the sweep's, the layer
//    commit's and the cuckoo kernel's insert / move steps; a repairer killed inside its repair
//    too): the next process takes the writer lock over, acknowledged marks stay, caps hold,
//    check is clean, the shared table's size counts its lanes, the call can be redone.
//  - A sweeper whose stamp base went stale while it waited for the lock (a concurrent sweep
//    published a newer one and writers stamped past the old base's range): it must clear no
//    live lane. Failed on e8cbbf2; passes since the sweep reads its base under each chunk's lock.
// Oracles live outside the segment (anonymous shared mappings); a worker records an answer
// only after the call returned ("acknowledged" = recorded). Hang bounds are in uncontended
// seconds (tests/support/load_clock.h); nothing asserts speed.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "base/kill_point.h"
#include "shmfilter/window.hpp"
#include "structures/window/stamped_impl.h"
#include "structures/window/window_impl.h"
#include "load_clock.h"
#include "check_clean.h"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter;
namespace wi = shmfilter::internal::window;
namespace ck = shmfilter::internal::cuckoo;
namespace stp = shmfilter::internal::stamped;

namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC: bucket kT0 / kDay

template <class T>
T* shared_oracle() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) T{};
}
template <class T>
void release_oracle(T* p) {
  munmap(p, sizeof(T));
}

WindowOptions stamped_opts(uint64_t expected, uint32_t retention) {
  WindowOptions o;
  o.variant = WindowVariant::kStamped;
  o.expected_per_bucket = expected;
  o.error = 0.01;
  o.retention = retention;
  o.max_spaces = 256;
  o.seed = 5;
  o.now = kT0;
  return o;
}

using shmf_test::expect_check_clean;  // tests/support/check_clean.h

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Waits for KID; a child that makes no progress for 60 uncontended seconds is SIGKILLed and
// reported by pid and role (false). PROGRESS: a counter the child advances (nullptr: none, the
// bound then runs from the start of the wait).
bool reap(pid_t kid, const std::string& role, int& status, const std::function<uint64_t()>& progress = nullptr) {
  if (shmf_test::wait_child_bounded(kid, 60, status, progress)) return true;
  ADD_FAILURE() << role << " (pid " << kid << ") hung: no progress for 60 uncontended seconds; killed";
  return false;
}

// A ready barrier with a bound (60 uncontended seconds): false when the others never came.
bool barrier(std::atomic<int>& ready, int n) {
  ready.fetch_add(1);
  shmf_test::LoadClock clock;
  const uint64_t limit = uint64_t(60 * shmf_test::time_scale() * 1e9);
  while (ready.load() < n)
    if (clock.now() > limit) return false;
  return true;
}

// A barrier for one step of a lockstep walk (N processes): yields while waiting (2 CPUs for 4
// processes), bounded like barrier(). False when the others never came.
bool step_barrier(std::atomic<uint32_t>& arrived, uint32_t n) {
  arrived.fetch_add(1);
  for (int i = 0; i < 64; ++i)
    if (arrived.load() >= n) return true;
  shmf_test::LoadClock clock;
  const uint64_t limit = uint64_t(60 * shmf_test::time_scale() * 1e9);
  for (uint32_t spins = 0; arrived.load() < n; ++spins) {
    sched_yield();
    if (spins % 256 == 255 && clock.now() > limit) return false;
  }
  return true;
}

uint64_t item_of(uint64_t tag, uint64_t i) { return shmf_bench::mix64((tag << 40) + i); }

const wi::WindowHeader* header_of(Segment& s, const char* name) {
  return reinterpret_cast<const wi::WindowHeader*>(s.base() + s.find(name)->offset);
}

// The shared table's own invariants, read from the segment (check_window validates the
// window's structure, not the table's lanes): no writer mid-step (intent clear), the writer lock
// free, every stripe version even, the size counter equal to the lanes stored, no lane whose
// fingerprint is 0. Call it with no writer running, after the dead writers' repair.
void expect_shared_table_sound(Segment& seg, const char* name = "w") {
  const wi::WindowHeader* h = header_of(seg, name);
  auto* ch = reinterpret_cast<ck::Header*>(seg.base() + h->shared + wi::main_offset_in_table(h->space_table));
  EXPECT_EQ(ck::load_relaxed(ch->lock_owner), 0u) << "the shared table's writer lock is held";
  EXPECT_EQ(ck::load_relaxed(ch->intent.op), ck::kOpNone) << "a writer's step was left unrepaired";
  const uint64_t sw = h->swept.load();
  const stp::Census c = stp::census(seg.base(), ch, stp::clock_of(static_cast<int64_t>(sw), sw, h->retention));
  EXPECT_EQ(c.bad, 0u) << "lanes with fingerprint 0";
  EXPECT_EQ(c.live + c.dead, ck::load_relaxed(ch->size)) << "the size counter is not the lanes stored";
  uint64_t odd = 0;
  for (uint32_t j = 0; j < ck::sub_count_acquire(ch); ++j) {
    const ck::Sub sub = ck::sub_view(seg.base(), ch->subs[j]);
    for (uint64_t i = 0; i <= sub.stripe_mask; ++i) odd += ck::load_relaxed(sub.versions[i]) & 1;
  }
  EXPECT_EQ(odd, 0u) << "stripe versions left odd";
}

}  // namespace

// ---- 1. racing mark_if_unseen ------------------------------------------------------
// 4 processes mark_if_unseen(w = retention) the same 12,000 pairs, each in its own order, in
// lockstep over blocks of 16 pairs (every process takes block b after all finished block b - 1;
// inside a block each shuffles the 16 with its own seed 1..4): they meet on the same pairs at
// the same moment. Process 3 marks a block with one mark_if_unseen_many call. Exactly one kNew
// per pair; a pair with none was a false positive for every caller (it matched another pair's
// lane before anyone marked it): at most pairs x the table's FP rate at the end x 3 + 10.
// Never two. (Checked to fail on a writer without the lock: doubled answers.)
namespace {
constexpr int kRacers = 4;
constexpr uint64_t kRacePairs = 12000;
constexpr uint64_t kBlock = 16;
constexpr uint64_t kBlocks = (kRacePairs + kBlock - 1) / kBlock;
struct UnseenOracle {
  std::atomic<uint32_t> news[kRacePairs];
  std::atomic<uint32_t> arrived[kBlocks];
  std::atomic<uint64_t> ops;
  std::atomic<int> ready;
};
}  // namespace

TEST(WindowStampedMP, RacingMarkIfUnseenAnswersNewExactlyOnce) {
  shmf_test::SegmentGuard guard(shmf_test::unique_name("stunseen"));
  Segment seg = Segment::create(guard.name, shmf_test::small_options());
  constexpr uint32_t kR = 7;
  Window::create(seg, "w", stamped_opts(kRacePairs, kR));
  auto* orc = shared_oracle<UnseenOracle>();
  ASSERT_NE(orc, nullptr);
  const std::string name = guard.name;
  std::vector<pid_t> kids;
  for (int p = 0; p < kRacers; ++p) {
    kids.push_back(shmf_test::fork_child([&, p] {
      Segment s = Segment::open(name);
      Window w = Window::open(s, "w");
      w.set_now(kT0 + 100);
      shmf_bench::Rng rng(static_cast<uint64_t>(p) + 1);
      if (!barrier(orc->ready, kRacers)) return 12;
      auto record = [&](uint64_t i, WindowStatus st) {
        if (st == WindowStatus::kNew) orc->news[i].fetch_add(1);
        orc->ops.fetch_add(1, std::memory_order_relaxed);
        return st == WindowStatus::kNew || st == WindowStatus::kSeen;
      };
      uint64_t order[kBlock], sp[kBlock], it[kBlock];
      WindowStatus st[kBlock];
      for (uint64_t b = 0; b < kBlocks; ++b) {
        const uint64_t at = b * kBlock;
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, kRacePairs - at));
        for (size_t j = 0; j < n; ++j) order[j] = at + j;
        for (size_t j = n; j > 1; --j) std::swap(order[j - 1], order[rng.below(j)]);
        if (!step_barrier(orc->arrived[b], kRacers)) return 12;
        if (p != 3) {
          for (size_t j = 0; j < n; ++j)
            if (!record(order[j], w.mark_if_unseen(order[j] % 17, item_of(1, order[j]), kR))) return 10;
        } else {
          for (size_t j = 0; j < n; ++j) {
            sp[j] = order[j] % 17;
            it[j] = item_of(1, order[j]);
          }
          w.mark_if_unseen_many(std::span<const uint64_t>(sp, n), std::span<const uint64_t>(it, n), kR,
                                std::span<WindowStatus>(st, n));
          for (size_t j = 0; j < n; ++j)
            if (!record(order[j], st[j])) return 11;
        }
      }
      return 0;
    }));
  }
  for (pid_t k : kids) {
    int status = 0;
    if (!reap(k, "racer", status, [&] { return orc->ops.load(); })) continue;
    // 10 / 11: a (batched) mark_if_unseen answered neither kNew nor kSeen; 12: start barrier timed out
    EXPECT_TRUE(shmf_test::exited_ok(status)) << "racer " << k << ": " << describe(status);
  }
  Window w = Window::open(seg, "w");
  w.set_now(kT0 + 100);
  uint64_t zero = 0, doubled = 0, total = 0;
  for (uint64_t i = 0; i < kRacePairs; ++i) {
    const uint32_t n = orc->news[i].load();
    total += n;
    zero += n == 0;
    if (n > 1 && doubled++ < 5) ADD_FAILURE() << "pair " << i << " answered kNew " << n << " times";
    ASSERT_TRUE(w.seen(i % 17, item_of(1, i), kR)) << "pair " << i << " lost";
    ASSERT_TRUE(w.seen(i % 17, item_of(1, i), 1)) << "pair " << i << " not in the current bucket";
  }
  WindowStats st = w.stats();
  std::printf("stamped mark_if_unseen race: %llu pairs x %d processes, %llu answered kNew twice or more, %llu never "
              "(false positives; FP now %.5f), lanes %llu\n",
              (unsigned long long)kRacePairs, kRacers, (unsigned long long)doubled, (unsigned long long)zero,
              st.window_fp_now(kR), (unsigned long long)st.lanes);
  EXPECT_EQ(doubled, 0u) << "exactly once";
  EXPECT_LE(zero, static_cast<uint64_t>(kRacePairs * st.window_fp_now(kR) * 3 + 10));
  EXPECT_EQ(st.lanes, total) << "one lane per pair that answered kNew";
  uint64_t counted = 0;
  for (uint64_t s = 0; s < 17; ++s) counted += w.new_count(s, 0);
  EXPECT_EQ(counted, total);  // per-space counters count kNew answers exactly
  expect_check_clean(seg);
  expect_shared_table_sound(seg);
  release_oracle(orc);
}

// The same across rotations and inline sweeps: retention 12 (stamps decode from the first
// writer's bucket E0; a writer past the stamp limit, swept + 16 - 12 = E0 + 4, sweeps first), a
// virtual clock driven by the processes' operation count crosses a boundary every
// kOpsPerBucket operations, 10 buckets in all (< w = 12, so every two answers' windows overlap)
// and nobody calls maintain(): at E0 + 5 the writers sweep inline while others mark. The
// processes walk the pairs in the same order (seed 77) so they meet on a pair at the same moment.
// Failed intermittently on e8cbbf2, before the fix below (2 of 20 runs of the program on a loaded 2-core machine:
// 290 and 415 pairs answered kNew twice): two writers both sweep at E0 + 5, one with the stamp
// base it read before the other published swept = E0 + 5, and that one clears the lanes stamped
// E0 + 5 meanwhile as dead (ASweeperWithAStaleBaseClearsNoLaneStampedAfterAConcurrentSweep
// below reproduces it deterministically).
namespace {
constexpr uint64_t kRotPairs = 6000;
constexpr uint64_t kRotBuckets = 10;
constexpr uint64_t kOpsPerBucket = kRacers * kRotPairs / kRotBuckets;
struct RotOracle {
  std::atomic<uint32_t> news[kRotPairs];
  std::atomic<uint64_t> ops;
  std::atomic<int> ready;
};
int64_t ops_clock(void* ctx) {
  const uint64_t ops = static_cast<RotOracle*>(ctx)->ops.load(std::memory_order_relaxed);
  return kT0 + static_cast<int64_t>(std::min<uint64_t>(ops / kOpsPerBucket, kRotBuckets - 1));
}
}  // namespace

TEST(WindowStampedMP, RacingMarkIfUnseenAnswersNewOnceAcrossRotationsAndInlineSweeps) {
  shmf_test::SegmentGuard guard(shmf_test::unique_name("strot"));
  Segment seg = Segment::create(guard.name, shmf_test::small_options());
  constexpr uint32_t kR = 12;
  WindowOptions o = stamped_opts(kRotPairs / 4, kR);
  o.bucket_seconds = 1;
  Window::create(seg, "w", o);
  auto* orc = shared_oracle<RotOracle>();
  ASSERT_NE(orc, nullptr);
  const std::string name = guard.name;
  std::vector<pid_t> kids;
  for (int p = 0; p < kRacers; ++p) {
    kids.push_back(shmf_test::fork_child([&, p] {
      Segment s = Segment::open(name);
      Window w = Window::open(s, "w");
      w.set_clock(&ops_clock, orc);
      std::vector<uint64_t> order(kRotPairs);
      for (uint64_t i = 0; i < kRotPairs; ++i) order[i] = i;
      shmf_bench::Rng rng(77);
      for (uint64_t i = kRotPairs; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
      if (!barrier(orc->ready, kRacers)) return 12;
      for (uint64_t i : order) {
        const WindowStatus st = w.mark_if_unseen(i % 17, item_of(2, i), kR);
        if (st == WindowStatus::kNew) orc->news[i].fetch_add(1);
        else if (st != WindowStatus::kSeen) {
          std::fprintf(stderr, "racer %d: mark_if_unseen answered %s\n", p, std::string(window_status_name(st)).c_str());
          return 10;
        }
        orc->ops.fetch_add(1, std::memory_order_relaxed);
      }
      return 0;
    }));
  }
  for (pid_t k : kids) {
    int status = 0;
    if (!reap(k, "racer", status, [&] { return orc->ops.load(); })) continue;
    EXPECT_TRUE(shmf_test::exited_ok(status)) << "racer " << k << ": " << describe(status);
  }
  Window w = Window::open(seg, "w");
  w.set_now(kT0 + kRotBuckets - 1);
  uint64_t zero = 0, doubled = 0, total = 0;
  for (uint64_t i = 0; i < kRotPairs; ++i) {
    const uint32_t n = orc->news[i].load();
    total += n;
    zero += n == 0;
    if (n > 1 && doubled++ < 5) ADD_FAILURE() << "pair " << i << " answered kNew " << n << " times";
    ASSERT_TRUE(w.seen(i % 17, item_of(2, i), kR)) << "pair " << i << " lost";
  }
  WindowStats st = w.stats();
  std::printf("stamped mark_if_unseen across rotations: %llu pairs x %d processes, %llu rotations, swept at %lld "
              "(first bucket %lld), %llu answered kNew twice or more, %llu never (FP now %.5f)\n",
              (unsigned long long)kRotPairs, kRacers, (unsigned long long)st.rotations, (long long)st.swept_bucket,
              (long long)w.bucket_of(kT0), (unsigned long long)doubled, (unsigned long long)zero, st.window_fp_now(kR));
  EXPECT_EQ(doubled, 0u) << "exactly once across rotations and sweeps";
  EXPECT_EQ(st.current_bucket, w.bucket_of(kT0 + kRotBuckets - 1));
  // The run crossed the stamp limit without maintain(). A writer that stores a stamp past it
  // sweeps first; a repeat answers kSeen lock-free and stores nothing, so whether a racer swept
  // depends on whether a fresh pair was still being stored by then (scheduling). A fresh mark at
  // the last bucket must sweep.
  if (st.swept_bucket == w.bucket_of(kT0)) {
    EXPECT_EQ(w.mark_if_unseen(99, item_of(3, 1), kR), WindowStatus::kNew);
    st = w.stats();  // (space 99: outside the per-space sum below)
  }
  EXPECT_GT(st.swept_bucket, w.bucket_of(kT0)) << "no writer swept past the stamp limit";
  EXPECT_LE(zero, static_cast<uint64_t>(kRotPairs * st.window_fp_now(kR) * 3 + 10));
  uint64_t counted = 0;
  for (uint64_t s = 0; s < 17; ++s)
    for (uint32_t age = 0; age < kRotBuckets; ++age) counted += w.new_count(s, age);
  EXPECT_EQ(counted, total);
  expect_check_clean(seg);
  expect_shared_table_sound(seg);
  release_oracle(orc);
}

// ---- 2. racing caps ------------------------------------------------------------------
// 4 processes call mark_if_under(space, item, N, w) for the same pairs: six configurations
// (N in {1, 3, 15}) x (w in {1, retention 3}), each its own space of 300 pairs, each pair
// attempted N + 2 times by every process (4N + 8 attempts for N allowed), in per-process
// orders (seeds 11..14). Half-way through its list a process moves its clock from bucket E0 to
// E0 + 1 (set_now), so the rotation falls among the racers. A kNew is attributed to the bucket
// it was stamped in when that is certain: the stamp is max(caller's bucket, the newest bucket
// any caller rotated to) read under the lock, so the header epoch read before and after the
// call brackets it; a call whose bracket spans the boundary is "ambiguous".
// Invariants: w = 3 (both buckets in one window): total kNew <= N per pair, == N except for
// pairs whose tallies collide; w = 1: <= N per bucket (certain ones), <= 2N in all. Then a fresh
// process walks the sliding window: w = 1 at E0 + 2 allows N again; w = 3 at E0 + 1 allows
// nothing more, at E0 + 3 (E0's tallies out) N minus those of E0 + 1, at E0 + 4 N minus those
// of E0 + 3. "Collide": a pair below its exact count is a false positive of one of its tally
// lookups: at most pairs x N x the FP rate at the end x 3 + 5 per configuration.
namespace {
constexpr uint64_t kCapPairs = 300;
constexpr int kCapConfigs = 6;
constexpr uint32_t kCapR = 3;
constexpr uint32_t cap_n(int c) { return c / 2 == 0 ? 1 : c / 2 == 1 ? 3 : 15; }
constexpr uint32_t cap_w(int c) { return c % 2 == 0 ? 1 : kCapR; }
struct CapOracle {
  std::atomic<uint32_t> certain[kCapConfigs][kCapPairs][2];  // kNew stamped for sure in E0 / E0 + 1
  std::atomic<uint32_t> ambiguous[kCapConfigs][kCapPairs];   // kNew stamped in E0 or E0 + 1
  std::atomic<uint64_t> ops;
  std::atomic<int> ready;
};
}  // namespace

TEST(WindowStampedMP, RacingCapsNeverExceedNInAnyWindowAcrossARotation) {
  shmf_test::SegmentGuard guard(shmf_test::unique_name("stcap"));
  Segment seg = Segment::create(guard.name, shmf_test::small_options());
  // Lanes: 300 pairs x (1 + N) per configuration, both w: 13,200 of 24,000 (expected 8,000 x 3).
  Window::create(seg, "w", stamped_opts(8000, kCapR));
  auto* orc = shared_oracle<CapOracle>();
  ASSERT_NE(orc, nullptr);
  const std::string name = guard.name;
  std::vector<pid_t> kids;
  for (int p = 0; p < kRacers; ++p) {
    kids.push_back(shmf_test::fork_child([&, p] {
      Segment s = Segment::open(name);
      Window w = Window::open(s, "w");
      const wi::WindowHeader* h = header_of(s, "w");
      const int64_t e0 = w.bucket_of(kT0);
      std::vector<uint32_t> ops;  // config << 16 | pair
      for (int c = 0; c < kCapConfigs; ++c)
        for (uint64_t i = 0; i < kCapPairs; ++i)
          for (uint32_t a = 0; a < cap_n(c) + 2; ++a) ops.push_back(uint32_t(c) << 16 | uint32_t(i));
      shmf_bench::Rng rng(11 + static_cast<uint64_t>(p));
      for (size_t i = ops.size(); i > 1; --i) std::swap(ops[i - 1], ops[rng.below(i)]);
      w.set_now(kT0);
      if (!barrier(orc->ready, kRacers)) return 12;
      for (size_t k = 0; k < ops.size(); ++k) {
        if (k == ops.size() / 2) w.set_now(kT0 + kDay);  // half-way: the next bucket
        const int c = static_cast<int>(ops[k] >> 16);
        const uint64_t i = ops[k] & 0xffff;
        const int64_t mine = k < ops.size() / 2 ? e0 : e0 + 1;
        const int64_t lo = std::max<int64_t>(mine, static_cast<int64_t>(h->epoch.load()) - 1);
        const WindowStatus st = w.mark_if_under(uint64_t(c) + 1, item_of(3, i), cap_n(c), cap_w(c));
        const int64_t hi = std::max<int64_t>(mine, static_cast<int64_t>(h->epoch.load()) - 1);
        if (st == WindowStatus::kNew) {
          if (lo < e0 || hi > e0 + 1) return 13;  // stamped outside the two buckets of the run
          if (lo == hi)
            orc->certain[c][i][lo - e0].fetch_add(1);
          else
            orc->ambiguous[c][i].fetch_add(1);
        } else if (st != WindowStatus::kCapped) {
          std::fprintf(stderr, "racer %d: mark_if_under answered %s\n", p, std::string(window_status_name(st)).c_str());
          return 10;
        }
        orc->ops.fetch_add(1, std::memory_order_relaxed);
      }
      return 0;
    }));
  }
  for (pid_t k : kids) {
    int status = 0;
    if (!reap(k, "racer", status, [&] { return orc->ops.load(); })) continue;
    // 10: an answer other than kNew / kCapped; 12: start barrier timed out; 13: a stamp outside E0..E0+1
    EXPECT_TRUE(shmf_test::exited_ok(status)) << "racer " << k << ": " << describe(status);
  }
  if (HasFailure()) {
    release_oracle(orc);
    return;
  }
  // The race: per pair, never more than N in a window; exactly N where no tally collides.
  Window w = Window::open(seg, "w");
  w.set_now(kT0 + kDay);
  const double fp = w.stats().window_fp_now(kCapR);
  uint64_t amb_total = 0;
  for (int c = 0; c < kCapConfigs; ++c) {
    const uint32_t n = cap_n(c);
    uint64_t below = 0;
    for (uint64_t i = 0; i < kCapPairs; ++i) {
      const uint32_t c0 = orc->certain[c][i][0].load(), c1 = orc->certain[c][i][1].load(), a = orc->ambiguous[c][i].load();
      amb_total += a;
      if (cap_w(c) == kCapR) {
        ASSERT_LE(c0 + c1 + a, n) << "N " << n << " w " << cap_w(c) << " pair " << i << ": more than N in one window";
        below += c0 + c1 + a < n;
      } else {
        ASSERT_LE(c0, n) << "N " << n << " w 1 pair " << i << ": more than N in bucket E0";
        ASSERT_LE(c1, n) << "N " << n << " w 1 pair " << i << ": more than N in bucket E0 + 1";
        ASSERT_LE(c0 + c1 + a, 2 * n) << "N " << n << " w 1 pair " << i << ": more than N per bucket";
      }
    }
    if (cap_w(c) == kCapR) {
      EXPECT_LE(below, static_cast<uint64_t>(kCapPairs * n * fp * 3 + 5))
          << "N " << n << ": pairs allowed fewer than N impressions (tally collisions)";
    }
  }
  std::printf("stamped caps race: %d configurations x %llu pairs x %d processes, %llu ambiguous kNew at the rotation, "
              "FP now %.5f\n",
              kCapConfigs, (unsigned long long)kCapPairs, kRacers, (unsigned long long)amb_total, fp);
  // The sliding window, in a fresh process, in clock order (a step names a bucket at or past the
  // newest one; each pair is attempted N + 2 times per step): 0: w = 3 at E0 + 1; 1: w = 1 at
  // E0 + 2; 2: w = 1 again at E0 + 2; 3: w = 3 at E0 + 3; 4: w = 3 at E0 + 4.
  struct Fresh {
    std::atomic<uint32_t> news[kCapConfigs][kCapPairs][5];  // kNew answers per step
  };
  auto* fr = shared_oracle<Fresh>();
  ASSERT_NE(fr, nullptr);
  pid_t kid = shmf_test::fork_child([&] {
    Segment s = Segment::open(name);
    Window v = Window::open(s, "w");
    const struct {
      uint32_t w;
      int64_t t;
    } steps[5] = {{kCapR, kT0 + kDay}, {1, kT0 + 2 * kDay}, {1, kT0 + 2 * kDay}, {kCapR, kT0 + 3 * kDay}, {kCapR, kT0 + 4 * kDay}};
    for (int step = 0; step < 5; ++step) {
      v.set_now(steps[step].t);
      for (int c = 0; c < kCapConfigs; ++c) {
        if (cap_w(c) != steps[step].w) continue;
        for (uint64_t i = 0; i < kCapPairs; ++i)
          for (uint32_t a = 0; a < cap_n(c) + 2; ++a) {
            const WindowStatus st = v.mark_if_under(uint64_t(c) + 1, item_of(3, i), cap_n(c), cap_w(c));
            if (st == WindowStatus::kNew) fr->news[c][i][step].fetch_add(1);
            else if (st != WindowStatus::kCapped) return 10;
          }
      }
    }
    return 0;
  });
  int status = 0;
  if (reap(kid, "sliding-window checker", status)) {
    ASSERT_TRUE(shmf_test::exited_ok(status)) << "checker: " << describe(status);
  }
  for (int c = 0; c < kCapConfigs; ++c) {
    const uint32_t n = cap_n(c);
    uint64_t below = 0;
    for (uint64_t i = 0; i < kCapPairs; ++i) {
      const uint32_t c0 = orc->certain[c][i][0].load(), c1 = orc->certain[c][i][1].load(), a = orc->ambiguous[c][i].load();
      const uint32_t f0 = fr->news[c][i][0].load(), f1 = fr->news[c][i][1].load(), f2 = fr->news[c][i][2].load(),
                     f3 = fr->news[c][i][3].load(), f4 = fr->news[c][i][4].load();
      SCOPED_TRACE("N " + std::to_string(n) + " w " + std::to_string(cap_w(c)) + " pair " + std::to_string(i));
      if (cap_w(c) == 1) {
        // A new bucket: N again (the tallies of E0 / E0 + 1 are out of w = 1), then capped.
        ASSERT_LE(f1, n) << "allowed past N in bucket E0 + 2";
        ASSERT_EQ(f2, 0u) << "allowed past N in bucket E0 + 2 (second round)";
        below += f1 < n;
      } else {
        // E0 + 1: the race's impressions are all in the window: nothing more past N.
        ASSERT_LE(c0 + c1 + a + f0, n) << "allowed past N at E0 + 1";
        // E0 + 3: the window is E0 + 1 .. E0 + 3: those stamped E0 + 1 (c1 certain, up to a more) still count.
        ASSERT_LE(f3 + c1, n) << "allowed past N in E0 + 1 .. E0 + 3";
        // E0 + 4: the window is E0 + 2 .. E0 + 4: step 3's impressions only.
        ASSERT_LE(f3 + f4, n) << "allowed past N in E0 + 2 .. E0 + 4";
        below += c0 + c1 + a + f0 < n || f3 + c1 + a < n || f3 + f4 < n;
      }
    }
    EXPECT_LE(below, static_cast<uint64_t>(kCapPairs * n * fp * 3 * 3 + 5))
        << "N " << n << " w " << cap_w(c) << ": pairs allowed fewer than the window leaves (collisions)";
  }
  expect_check_clean(seg);
  expect_shared_table_sound(seg);
  release_oracle(fr);
  release_oracle(orc);
}

// ---- 3. SIGKILL during races ---------------------------------------------------------
// Six rounds, round r at bucket E0 + r (retention 7: every round in one window). Each round
// forks 4 workers over the same work in their own orders: mark_if_unseen(w = 7) of 2,000
// pairs and mark_if_under(N = 3, w = 7) of 300 pairs (each 4 times); worker 0 also runs
// maintain() every 256 operations (a sweep, rotation and preparation under the kills). The
// parent SIGKILLs 3 of the 4 workers (seed 1000 + round picks which and after how many of
// their operations: the kill lands in whatever call the worker is in then). A worker records
// an answer in the oracle only after the call returned. After every round: no worker hung
// (bounded waits naming the pid); survivors checked that every acknowledged mark was seen.
// After all rounds, a fresh process: every acknowledged mark is seen and mark_if_unseen answers
// it kSeen; no pair has two acknowledged kNew; acknowledged plus the fresh process's kNew of
// mark_if_under <= 3 per pair; then check(true) repairs and check(false) is clean.
namespace {
constexpr uint64_t kKillPairs = 2000;
constexpr uint64_t kKillCaps = 300;
constexpr uint32_t kKillCapN = 3;
constexpr uint32_t kKillR = 7;
constexpr int kRounds = 6;
struct KillOracle {
  std::atomic<uint32_t> unseen_new[kKillPairs];  // acknowledged kNew of mark_if_unseen
  std::atomic<uint8_t> unseen_ack[kKillPairs];   // acknowledged kNew or kSeen (the pair is in the window)
  std::atomic<uint32_t> cap_new[kKillCaps];      // acknowledged kNew of mark_if_under
  std::atomic<uint64_t> ops[kRacers];            // operations each worker of this round completed
  std::atomic<uint64_t> maintains;
  std::atomic<int> ready;
};
}  // namespace

TEST(WindowStampedMP, SigkilledRacersLoseNoAcknowledgedMarkAndNeverExceedTheCap) {
  shmf_test::SegmentGuard guard(shmf_test::unique_name("stkill"));
  Segment seg = Segment::create(guard.name, shmf_test::small_options());
  Window::create(seg, "w", stamped_opts(2000, kKillR));
  auto* orc = shared_oracle<KillOracle>();
  ASSERT_NE(orc, nullptr);
  const std::string name = guard.name;
  constexpr uint64_t kOps = kKillPairs + kKillCaps * 4;
  uint64_t killed_total = 0;
  for (int r = 0; r < kRounds; ++r) {
    SCOPED_TRACE("round " + std::to_string(r));
    orc->ready.store(0);
    for (int p = 0; p < kRacers; ++p) orc->ops[p].store(0);
    std::vector<pid_t> kids;
    for (int p = 0; p < kRacers; ++p) {
      kids.push_back(shmf_test::fork_child([&, p, r] {
        Segment s = Segment::open(name);
        Window w = Window::open(s, "w");
        w.set_now(kT0 + r * kDay);
        std::vector<uint32_t> order;  // < kKillPairs: mark_if_unseen of that pair; else a cap pair
        for (uint32_t i = 0; i < kKillPairs; ++i) order.push_back(i);
        for (uint32_t j = 0; j < kKillCaps; ++j)
          for (int a = 0; a < 4; ++a) order.push_back(uint32_t(kKillPairs) + j);
        shmf_bench::Rng rng(100 * uint64_t(r) + uint64_t(p));
        for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
        if (!barrier(orc->ready, kRacers)) return 12;
        for (size_t k = 0; k < order.size(); ++k) {
          const uint32_t o = order[k];
          if (o < kKillPairs) {
            const WindowStatus st = w.mark_if_unseen(1, item_of(4, o), kKillR);
            if (st == WindowStatus::kNew) orc->unseen_new[o].fetch_add(1);
            if (st == WindowStatus::kNew || st == WindowStatus::kSeen) orc->unseen_ack[o].store(1);
            else {
              std::fprintf(stderr, "worker %d: mark_if_unseen answered %s\n", getpid(), std::string(window_status_name(st)).c_str());
              return 10;
            }
          } else {
            const uint32_t j = o - uint32_t(kKillPairs);
            const WindowStatus st = w.mark_if_under(2, item_of(5, j), kKillCapN, kKillR);
            if (st == WindowStatus::kNew) orc->cap_new[j].fetch_add(1);
            else if (st != WindowStatus::kCapped) {
              std::fprintf(stderr, "worker %d: mark_if_under answered %s\n", getpid(), std::string(window_status_name(st)).c_str());
              return 10;
            }
          }
          orc->ops[p].fetch_add(1);
          if (p == 0 && k % 256 == 255) {
            w.maintain();
            orc->maintains.fetch_add(1);
          }
        }
        // A survivor: every acknowledged mark (of any worker, any round) is seen.
        for (uint32_t i = 0; i < kKillPairs; ++i)
          if (orc->unseen_ack[i].load() && !w.seen(1, item_of(4, i), kKillR)) {
            std::fprintf(stderr, "worker %d: acknowledged pair %u not seen\n", getpid(), i);
            return 11;
          }
        for (uint32_t j = 0; j < kKillCaps; ++j)
          if (orc->cap_new[j].load() && !w.seen(2, item_of(5, j), kKillR)) {
            std::fprintf(stderr, "worker %d: allowed cap pair %u not seen\n", getpid(), j);
            return 11;
          }
        return 0;
      }));
    }
    // Which workers die, and after how many of their operations (the first round kills early,
    // inside the first inserts; later rounds anywhere).
    shmf_bench::Rng rng(1000 + uint64_t(r));
    const uint64_t spare = rng.below(kRacers);
    uint64_t target[kRacers];
    for (int p = 0; p < kRacers; ++p) target[p] = uint64_t(p) == spare ? ~uint64_t{0} : rng.below(r == 0 ? 200 : kOps);
    bool dead[kRacers] = {false, false, false, false};
    shmf_test::LoadClock clock;
    const uint64_t limit = uint64_t(60 * shmf_test::time_scale() * 1e9);
    uint64_t last = 0, since = clock.now();
    for (;;) {
      bool pending = false;
      uint64_t sum = 0;
      for (int p = 0; p < kRacers; ++p) {
        const uint64_t done = orc->ops[p].load();
        sum += done;
        if (dead[p] || target[p] == ~uint64_t{0}) continue;
        if (done >= target[p]) {
          kill(kids[p], SIGKILL);
          dead[p] = true;
        } else {
          pending = true;
        }
      }
      if (!pending) break;
      const uint64_t now = clock.now();
      if (sum != last) {
        last = sum;
        since = now;
      } else if (now - since > limit) {
        ADD_FAILURE() << "round " << r << ": no worker completed an operation for 60 uncontended seconds";
        break;
      }
      usleep(200);
    }
    for (int p = 0; p < kRacers; ++p) {
      int status = 0;
      if (!reap(kids[p], "worker " + std::to_string(p) + " of round " + std::to_string(r), status,
                [&] { return orc->ops[p].load(); }))
        continue;
      if (dead[p] && shmf_test::killed_by(status, SIGKILL)) {
        ++killed_total;
        continue;
      }
      // A worker marked for death that finished first exited 0 (its kill missed): fine.
      // 10: an answer other than kNew / kSeen / kCapped; 11: an acknowledged mark not seen; 12: barrier; 97: exception
      EXPECT_TRUE(shmf_test::exited_ok(status)) << "worker " << p << " (pid " << kids[p] << "): " << describe(status);
    }
    if (HasFailure()) break;
  }
  // A fresh process checks the whole history.
  struct Verdict {
    std::atomic<uint32_t> fresh_cap_new[kKillCaps];
    std::atomic<uint64_t> ops;
  };
  auto* vd = shared_oracle<Verdict>();
  ASSERT_NE(vd, nullptr);
  pid_t kid = shmf_test::fork_child([&] {
    Segment s = Segment::open(name);
    Window v = Window::open(s, "w");
    v.set_now(kT0 + (kRounds - 1) * kDay);
    for (uint32_t i = 0; i < kKillPairs; ++i) {
      if (!orc->unseen_ack[i].load()) continue;
      if (!v.seen(1, item_of(4, i), kKillR)) return 11;
      if (v.mark_if_unseen(1, item_of(4, i), kKillR) != WindowStatus::kSeen) return 12;
      vd->ops.fetch_add(1);
    }
    for (uint32_t j = 0; j < kKillCaps; ++j)
      for (int a = 0; a < 4; ++a) {
        const WindowStatus st = v.mark_if_under(2, item_of(5, j), kKillCapN, kKillR);
        if (st == WindowStatus::kNew) vd->fresh_cap_new[j].fetch_add(1);
        else if (st != WindowStatus::kCapped) return 10;
        vd->ops.fetch_add(1);
      }
    return 0;
  });
  int status = 0;
  if (reap(kid, "fresh verifier", status, [&] { return vd->ops.load(); })) {
    // 11: an acknowledged mark not seen; 12: mark_if_unseen answered an acknowledged pair other than kSeen
    EXPECT_TRUE(shmf_test::exited_ok(status)) << "fresh verifier: " << describe(status);
  }
  uint64_t acked = 0, doubled = 0, capped = 0;
  for (uint32_t i = 0; i < kKillPairs; ++i) {
    acked += orc->unseen_ack[i].load();
    if (orc->unseen_new[i].load() > 1 && doubled++ < 5)
      ADD_FAILURE() << "pair " << i << " got " << orc->unseen_new[i].load() << " acknowledged kNew";
  }
  for (uint32_t j = 0; j < kKillCaps; ++j) {
    const uint32_t n = orc->cap_new[j].load() + vd->fresh_cap_new[j].load();
    capped += n == kKillCapN;
    if (n > kKillCapN) ADD_FAILURE() << "cap pair " << j << ": " << orc->cap_new[j].load() << " acknowledged + "
                                     << vd->fresh_cap_new[j].load() << " fresh kNew, cap " << kKillCapN;
  }
  std::printf("stamped SIGKILL races: %d rounds, %llu workers killed, %llu maintain() calls, %llu pairs acknowledged "
              "(%llu with two kNew), %llu of %llu cap pairs at exactly N\n",
              kRounds, (unsigned long long)killed_total, (unsigned long long)orc->maintains.load(),
              (unsigned long long)acked, (unsigned long long)doubled, (unsigned long long)capped,
              (unsigned long long)kKillCaps);
  EXPECT_GE(killed_total, uint64_t(kRounds));  // the kills happened (3 a round are aimed)
  EXPECT_EQ(acked, kKillPairs);  // the spared worker of each round acknowledges every pair
  EXPECT_TRUE(seg.check(true).consistent());  // repairs the dead workers' registry slots
  expect_check_clean(seg);
  expect_shared_table_sound(seg);
  release_oracle(vd);
  release_oracle(orc);
}

// ---- 4. SIGKILL at every kill point the stamped writer reaches -----------------------------
// Acknowledged state (the parent, bucket E0): 1,000 pairs marked (mark_if_unseen kNew, space
// 1), 200 pairs capped (3 of N = 3, w = retention, space 2), 50 pairs at 2 of 3 (space 3); the
// sweep cases add 500 pairs and 100 capped pairs at E0 + 5. A child arms one point and runs the
// action that reaches it; it must die there. Then a verifier process (bounded wait: a hang names
// its pid) reads first (a reader meets what the crash left: odd versions, the dead owner's lock),
// then writes: every acknowledged mark still in the window is seen, a capped pair stays capped,
// the 2-of-3 pairs (one of them the child's) get at most one more, the interrupted call is
// redone, a fresh pair answers kNew. Then check(true) repairs (the dead child's registry slot)
// and check(false) is clean.
namespace {
enum Action : int {
  kMarkNew = 0,      // mark_if_unseen(w = R) of a new pair at E0 + 1
  kRestamp = 1,      // mark_if_unseen(w = 1) of an acknowledged pair at E0 + 1: its lane is restamped
  kCap = 2,          // mark_if_under of a 2-of-3 pair at E0 + 1
  kForget = 3,       // forget of an acknowledged pair at E0 + 1 (its own lane; its cap tallies stay)
  kMany = 4,         // 30,000 new pairs at E0 + 1 (cuckoo moves, then layers)
  kOverload = 5,     // retention 1: 8x expected new pairs at E0 (layers)
  kInlineSweep = 6,  // a write at E0 + 10 without maintain(): past the stamp limit, the writer sweeps
  kMaintain = 7,     // maintain() at E0 + 6: rotation, then the sweep
  kFarSweep = 8,     // a write at E0 + 14 without maintain(): everything expired, the writer sweeps
};
struct KillCase {
  const char* point;
  Action action;
  const char* repair_point = nullptr;  // then a second writer, killed here while it repairs the first's step
};
constexpr uint32_t kKpR = 7;
constexpr uint64_t kKpExpected = 2000;
struct KpOracle {
  std::atomic<uint64_t> acked;  // kMany / kOverload: the child's pairs [0, acked) were acknowledged
  std::atomic<uint64_t> progress;
};
uint32_t retention_for(Action a) { return a == kOverload ? 1 : kKpR; }
int64_t child_bucket(Action a) {  // days after E0
  switch (a) {
    case kOverload: return 0;
    case kInlineSweep: return 10;
    case kMaintain: return 6;
    case kFarSweep: return 14;
    default: return 1;
  }
}
bool with_later_state(Action a) { return a == kInlineSweep || a == kMaintain || a == kFarSweep; }
uint64_t many_count(Action a) { return a == kOverload ? 8 * kKpExpected : 30000; }
}  // namespace

TEST(WindowStampedMP, KilledAtEveryStampedKillPointLeavesAConsistentWindow) {
  const KillCase cases[] = {
      {"window.stamped.locked", kMarkNew},
      {"window.stamped.locked", kCap},
      {"window.stamped.before_restamp", kRestamp},
      {"window.stamped.clear.before_store", kForget},
      {"window.stamped.clear.before_store", kInlineSweep},
      {"window.stamped.cap.after_tally", kCap},
      {"window.stamped.before_unlock", kMarkNew},
      {"window.stamped.before_unlock", kCap},
      {"window.stamped.before_unlock", kRestamp},
      {"window.stamped.forget.after_clear", kForget},
      {"window.stamped.sweep.chunk", kInlineSweep},
      {"window.stamped.sweep.chunk", kFarSweep},
      {"window.stamped.sweep.chunk", kMaintain},
      {"window.stamped.layer.after_commit", kOverload},
      {"window.stamped.layer.after_commit", kMany},
      {"cuckoo.insert.before_store", kMarkNew},
      {"cuckoo.insert.after_store", kMarkNew},
      {"cuckoo.insert.after_size", kMarkNew},
      {"cuckoo.insert.after_size", kCap},
      {"cuckoo.move.begin", kMany},
      {"cuckoo.move.version_odd", kMany},
      {"cuckoo.move.after_copy", kMany},
      {"cuckoo.move.after_clear", kMany},
      // The repairer killed too: the next writer takes the lock over from the first dead writer,
      // is killed inside the repair, and the verifier's writer repairs again (idempotent).
      {"cuckoo.move.after_copy", kMany, "cuckoo.repair.begin"},
      {"cuckoo.move.version_odd", kMany, "cuckoo.repair.after_data"},
      {"cuckoo.insert.after_store", kMarkNew, "cuckoo.repair.after_data"},
      {"window.stamped.clear.before_store", kForget, "cuckoo.repair.after_data"},
  };
  auto* orc = shared_oracle<KpOracle>();
  ASSERT_NE(orc, nullptr);
  for (const KillCase& kc : cases) {
    const Action act = kc.action;
    SCOPED_TRACE(std::string(kc.point) + " action " + std::to_string(int(act)) +
                 (kc.repair_point ? std::string(", then ") + kc.repair_point : std::string()));
    orc->acked.store(0);
    orc->progress.store(0);
    shmf_test::SegmentGuard guard(shmf_test::unique_name("stkp"));
    Segment seg = Segment::create(guard.name, shmf_test::small_options());
    const uint32_t R = retention_for(act);
    Window w = Window::create(seg, "w", stamped_opts(kKpExpected, R));
    // Acknowledged state at E0 (and E0 + 5 for the sweep cases).
    w.set_now(kT0);
    for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(w.mark_if_unseen(1, item_of(10, i), R), WindowStatus::kNew) << i;
    uint64_t capped0 = 0;
    for (uint64_t j = 0; j < 200; ++j) {
      uint32_t n = 0;
      for (int a = 0; a < 3; ++a) n += w.mark_if_under(2, item_of(11, j), 3, R) == WindowStatus::kNew;
      capped0 += n == 3;
      ASSERT_EQ(w.mark_if_under(2, item_of(11, j), 3, R), WindowStatus::kCapped) << j;
    }
    ASSERT_GE(capped0, 195u) << "tally collisions: at most 5 of 200 pairs below N";
    for (uint64_t j = 0; j < 50; ++j)
      for (int a = 0; a < 2; ++a) ASSERT_EQ(w.mark_if_under(3, item_of(12, j), 3, R), WindowStatus::kNew) << j;
    if (with_later_state(act)) {
      w.set_now(kT0 + 5 * kDay);
      for (uint64_t i = 0; i < 500; ++i) ASSERT_EQ(w.mark_if_unseen(1, item_of(13, i), R), WindowStatus::kNew) << i;
      for (uint64_t j = 0; j < 100; ++j) {
        for (int a = 0; a < 3; ++a) (void)w.mark_if_under(2, item_of(14, j), 3, R);
        ASSERT_EQ(w.mark_if_under(2, item_of(14, j), 3, R), WindowStatus::kCapped) << j;
      }
    }
    const int64_t tc = kT0 + child_bucket(act) * kDay;
    const std::string name = guard.name;
    pid_t kid = shmf_test::fork_child([&] {
      Segment s = Segment::open(name);
      Window c = Window::open(s, "w");
      c.set_now(tc);
      internal::arm_kill_point(kc.point, 1);
      switch (act) {
        case kMarkNew:
        case kInlineSweep:
        case kFarSweep:
          c.mark_if_unseen(1, uint64_t{777}, R);
          break;
        case kRestamp:
          c.mark_if_unseen(1, item_of(10, 5), 1);
          break;
        case kCap:
          c.mark_if_under(3, item_of(12, 0), 3, R);
          break;
        case kForget:
          c.forget(1, item_of(10, 7));
          break;
        case kMany:
        case kOverload:
          for (uint64_t i = 0; i < many_count(act); ++i) {
            const WindowStatus st = c.mark_if_unseen(4, item_of(15, i), R);
            if (st != WindowStatus::kNew && st != WindowStatus::kSeen) return 10;
            orc->acked.store(i + 1);
          }
          break;
        case kMaintain:
          c.maintain();
          break;
      }
      return 3;  // not killed: the point was not reached
    });
    int status = 0;
    ASSERT_TRUE(reap(kid, "armed child", status));
    ASSERT_TRUE(shmf_test::killed_by(status, SIGKILL)) << "kill point not reached: " << kc.point << " (" << describe(status) << ")";
    const uint64_t child_acked = orc->acked.load();
    if (kc.repair_point != nullptr) {
      pid_t rep = shmf_test::fork_child([&] {
        Segment s = Segment::open(name);
        Window c = Window::open(s, "w");
        c.set_now(tc);
        internal::arm_kill_point(kc.repair_point, 1);
        c.mark_if_unseen(6, uint64_t{999}, R);  // takes the dead writer's lock over and repairs
        return 3;
      });
      ASSERT_TRUE(reap(rep, "armed repairer", status));
      ASSERT_TRUE(shmf_test::killed_by(status, SIGKILL))
          << "kill point not reached by the repairer: " << kc.repair_point << " (" << describe(status) << ")";
    }
    // The next process: reads, takes the writer lock over, redoes the call.
    pid_t ver = shmf_test::fork_child([&] {
      Segment s = Segment::open(name);
      Window v = Window::open(s, "w");
      v.set_now(tc);
      const int64_t age0 = child_bucket(act), age5 = age0 - 5;  // ages of E0's and E0 + 5's marks
      auto step = [&] { orc->progress.fetch_add(1); };
      // Reads first.
      if (age0 < R)
        for (uint64_t i = 0; i < 1000; ++i) {
          if (act == kForget && i == 7) continue;  // the interrupted forget: either state
          if (!v.seen(1, item_of(10, i), R)) return 20;  // acknowledged mark of E0 lost
          step();
        }
      if (with_later_state(act) && age5 < R)
        for (uint64_t i = 0; i < 500; ++i)
          if (!v.seen(1, item_of(13, i), R)) return 21;  // acknowledged mark of E0 + 5 lost
      for (uint64_t i = 0; i < child_acked; ++i)
        if (!v.seen(4, item_of(15, i), R)) return 22;  // the child's acknowledged mark lost
      // Writes: the dead child's lock is taken over here (or was, by a reader's repair).
      if (v.mark_if_unseen(5, uint64_t{4242}, R) != WindowStatus::kNew) return 23;
      if (!v.seen(5, uint64_t{4242}, 1)) return 24;
      step();
      // Caps: capped pairs still in the window stay capped; the 2-of-3 pairs get at most one more.
      if (age0 < R) {
        for (uint64_t j = 0; j < 200; ++j)
          if (v.mark_if_under(2, item_of(11, j), 3, R) == WindowStatus::kNew) {
            // Only a pair below N before the crash (a tally collision at setup) may be allowed.
            std::fprintf(stderr, "capped pair %llu allowed again\n", (unsigned long long)j);
            return 25;
          }
        for (uint64_t j = 0; j < 50; ++j) {
          uint32_t n = 0;
          for (int a = 0; a < 3; ++a) {
            const WindowStatus st = v.mark_if_under(3, item_of(12, j), 3, R);
            if (st == WindowStatus::kNew) ++n;
            else if (st != WindowStatus::kCapped) return 26;
          }
          if (n > 1) return 27;  // 2 acknowledged + n > 3
          if (n == 0 && !(act == kCap && j == 0)) return 28;  // nobody else took the third impression
        }
      }
      if (with_later_state(act) && age5 < R)
        for (uint64_t j = 0; j < 100; ++j)
          if (v.mark_if_under(2, item_of(14, j), 3, R) == WindowStatus::kNew) return 29;
      step();
      // The interrupted call, redone.
      WindowStatus st = WindowStatus::kNew;
      switch (act) {
        case kMarkNew:
        case kInlineSweep:
        case kFarSweep:
          st = v.mark_if_unseen(1, uint64_t{777}, R);
          if (st != WindowStatus::kNew && st != WindowStatus::kSeen) return 30;
          if (!v.seen(1, uint64_t{777}, 1)) return 31;
          if (v.mark_if_unseen(1, uint64_t{777}, R) != WindowStatus::kSeen) return 32;
          break;
        case kRestamp:
          st = v.mark_if_unseen(1, item_of(10, 5), 1);
          if (st != WindowStatus::kNew && st != WindowStatus::kSeen) return 30;
          if (!v.seen(1, item_of(10, 5), 1)) return 31;
          break;
        case kCap:
          break;  // redone above (pair 0 of the 2-of-3 pairs)
        case kForget:
          st = v.forget(1, item_of(10, 7));
          if (st != WindowStatus::kRemoved && st != WindowStatus::kAbsent) return 30;
          if (v.seen(1, item_of(10, 7), R)) return 33;  // a redone forget left the pair
          break;
        case kMany:
        case kOverload:
          for (uint64_t i = 0; i < many_count(act); ++i) {
            st = v.mark_if_unseen(4, item_of(15, i), R);
            if (st != WindowStatus::kNew && st != WindowStatus::kSeen) return 30;
            step();
          }
          for (uint64_t i = 0; i < many_count(act); ++i)
            if (!v.seen(4, item_of(15, i), R)) return 34;
          break;
        case kMaintain:
          v.maintain();
          break;
      }
      // Sweeps: the interrupted sweep is completed by the next writer or maintain().
      if (act == kInlineSweep || act == kFarSweep || act == kMaintain) {
        if (act == kMaintain) (void)v.mark_if_unseen(5, uint64_t{4343}, R);
        if (v.stats().swept_bucket != v.bucket_of(tc)) return 35;
        // E0's lanes left every window (kInlineSweep, kFarSweep): they answer unseen (but for false positives).
        uint64_t still = 0;
        if (age0 >= R)
          for (uint64_t i = 0; i < 1000; ++i) still += v.seen(1, item_of(10, i), R);
        if (still > 10) return 36;
      }
      return 0;
    });
    ASSERT_TRUE(reap(ver, "verifier after " + std::string(kc.point), status, [&] { return orc->progress.load(); }));
    // 20-22: an acknowledged mark lost; 23/24: a fresh write after the crash failed; 25-29: a cap broken;
    // 30-34: the interrupted call could not be redone; 35: the sweep was not completed; 36: expired lanes answer
    EXPECT_TRUE(shmf_test::exited_ok(status)) << "verifier: " << describe(status);
    EXPECT_TRUE(seg.check(true).consistent());
    expect_check_clean(seg);
    expect_shared_table_sound(seg);
    if (act == kOverload || act == kMany) {
      Window v = Window::open(seg, "w");
      v.set_now(tc);
      EXPECT_GE(v.stats().buckets[0].layers, 1u) << "the overload grew no sub-filter";
    }
    EXPECT_TRUE(Window::drop(seg, "w"));
    seg.quiesce();
    expect_check_clean(seg);
  }
  release_oracle(orc);
}

// ---- 5. a sweeper whose stamp base went stale ------------------------------------------
// Two sweeps of one limit crossing (nobody runs maintain(): each writer past the stamp limit
// sweeps inline). Sweeper B reads the stamp base (swept = E0) and waits for the writer lock;
// meanwhile sweeper S sweeps, publishes swept = E0 + 5, and marks: a new pair Y, a restamp of
// 100 pairs marked at E0 and 3 impressions of a pair capped at N = 3, all stamped E0 + 5
// (acknowledged). Then B sweeps its chunk. Its stale base decodes E0 + 5 as E0 - 11 (4-bit
// stamps: E0 + 5 is past base + 15): age 16, dead, cleared. Every acknowledged mark of S must
// survive B's sweep: Y answers kSeen, the capped pair stays capped.
// Deterministic: this process holds the shared table's writer lock while B reaches it (B has
// raised the epoch and burnt CPU in the lock's wait), stops B (SIGSTOP), releases the lock,
// lets S run to completion, then resumes B (SIGCONT).
// Failed on e8cbbf2: stamped_sweep (window.cpp) read the clock once, before its first chunk's
// lock, so a concurrent sweep's publication was not seen. The same loss showed as doubled kNew
// in RacingMarkIfUnseenAnswersNewOnceAcrossRotationsAndInlineSweeps when its racers ran in
// parallel. Fixed: each chunk is decoded with the base read under that chunk's lock.
namespace {
// CPU ticks (utime + stime) of PID so far, -1 if unreadable.
long cpu_ticks(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  char buf[1024] = {0};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  long ut = 0, st = 0;
  // After ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15).
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) != 2) return -1;
  return ut + st;
}
}  // namespace

TEST(WindowStampedMP, ASweeperWithAStaleBaseClearsNoLaneStampedAfterAConcurrentSweep) {
  shmf_test::SegmentGuard guard(shmf_test::unique_name("ststale"));
  Segment seg = Segment::create(guard.name, shmf_test::small_options());
  constexpr uint32_t kR = 12;  // stamp limit: swept + 15 - 12 + 1 = E0 + 4
  Window w = Window::create(seg, "w", stamped_opts(1000, kR));
  w.set_now(kT0);
  const int64_t e0 = w.bucket_of(kT0);
  for (uint64_t i = 0; i < 100; ++i) ASSERT_EQ(w.mark_if_unseen(1, item_of(20, i), kR), WindowStatus::kNew);
  ASSERT_EQ(w.stats().swept_bucket, e0) << "the first writer sets the stamp base";
  const wi::WindowHeader* h = header_of(seg, "w");
  auto* ch = reinterpret_cast<ck::Header*>(seg.base() + h->shared + wi::main_offset_in_table(h->space_table));
  const ck::Liveness me{seg.owner_token(), nullptr, nullptr, nullptr};
  ASSERT_NE(me.self, 0u);
  ck::lock<stp::Lanes>(seg.base(), ch, me);
  const std::string name = guard.name;
  bool reaped_b = false;
  pid_t b = -1;
  // A failed assertion below returns with B spinning on the lock (or stopped): end it.
  struct EndB {
    pid_t& pid;
    bool& reaped;
    ~EndB() {
      if (pid > 0 && !reaped) {
        kill(pid, SIGKILL);
        shmf_test::wait_status(pid);
      }
    }
  } end_b{b, reaped_b};
  b = shmf_test::fork_child([&] {
    Segment s = Segment::open(name);
    Window c = Window::open(s, "w");
    c.set_now(kT0 + 5 * kDay);  // past the limit: sweeps first
    const WindowStatus st = c.mark_if_unseen(1, uint64_t{555}, kR);
    return st == WindowStatus::kNew || st == WindowStatus::kSeen ? 0 : 10;
  });
  // B raised the epoch (its sweep began) and spins on the lock we hold.
  shmf_test::LoadClock clock;
  const uint64_t limit = uint64_t(60 * shmf_test::time_scale() * 1e9);
  while (h->epoch.load() < static_cast<uint64_t>(e0 + 6) && clock.now() < limit) usleep(1000);
  ASSERT_EQ(h->epoch.load(), static_cast<uint64_t>(e0 + 6)) << "sweeper B (pid " << b << ") did not begin its sweep";
  const long t0 = cpu_ticks(b);
  while (cpu_ticks(b) < t0 + 5 && clock.now() < limit) usleep(1000);
  ASSERT_GE(cpu_ticks(b), t0 + 5) << "sweeper B (pid " << b << ") is not waiting for the lock";
  ASSERT_EQ(kill(b, SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(waitpid(b, &status, WUNTRACED), b);
  ASSERT_TRUE(WIFSTOPPED(status));
  ck::unlock(ch);
  // S: sweeps (its own, with the base it reads now), publishes E0 + 5, marks.
  pid_t s = shmf_test::fork_child([&] {
    Segment sg = Segment::open(name);
    Window c = Window::open(sg, "w");
    c.set_now(kT0 + 5 * kDay);
    if (c.mark_if_unseen(1, uint64_t{777}, kR) != WindowStatus::kNew) return 10;
    for (uint64_t i = 0; i < 100; ++i)
      if (c.mark_if_unseen(1, item_of(20, i), 1) != WindowStatus::kNew) return 11;  // restamped E0 + 5
    for (int a = 0; a < 3; ++a)
      if (c.mark_if_under(2, uint64_t{888}, 3, kR) != WindowStatus::kNew) return 13;  // 3 of N = 3 at E0 + 5
    if (c.mark_if_under(2, uint64_t{888}, 3, kR) != WindowStatus::kCapped) return 14;
    return c.stats().swept_bucket == e0 + 5 ? 0 : 12;
  });
  if (reap(s, "sweeper S", status)) {
    EXPECT_TRUE(shmf_test::exited_ok(status)) << "sweeper S: " << describe(status);
  }
  kill(b, SIGCONT);
  reaped_b = true;
  if (reap(b, "sweeper B", status)) {
    EXPECT_TRUE(shmf_test::exited_ok(status)) << "sweeper B: " << describe(status);
  }
  Window v = Window::open(seg, "w");
  v.set_now(kT0 + 5 * kDay);
  uint64_t lost = 0;
  for (uint64_t i = 0; i < 100; ++i) lost += !v.seen(1, item_of(20, i), 1);
  EXPECT_EQ(lost, 0u) << "acknowledged restamps (E0 + 5) cleared by the stale sweep";
  EXPECT_TRUE(v.seen(1, uint64_t{777}, kR)) << "S's acknowledged kNew cleared by the stale sweep";
  EXPECT_EQ(v.mark_if_unseen(1, uint64_t{777}, kR), WindowStatus::kSeen) << "a second kNew for one pair";
  EXPECT_EQ(v.mark_if_under(2, uint64_t{888}, 3, kR), WindowStatus::kCapped) << "a 4th impression of N = 3 in one window";
  expect_check_clean(seg);
  expect_shared_table_sound(seg);
}
