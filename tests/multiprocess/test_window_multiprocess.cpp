// tests/multiprocess/test_window_multiprocess.cpp: several processes on one Window.
//  - mark_if_unseen races on the same pairs: kCuckoo answers kNew exactly once per
//    pair, also while buckets rotate under the racers; kBloom's double answers are
//    bounded by stats().racing_marks.
//  - rotation at a bucket boundary reached by several processes at once (a shared
//    injected clock): one claim per bucket, no acknowledged mark lost.
//  - SIGKILL at every window kill point (rotation, table preparation, overflow,
//    maintain, space claim, forget, sealing): the segment stays consistent, acknowledged
//    marks stay, acknowledged forgets stay forgotten, the work can be redone.
//  - SIGKILL in the middle of a chunked spare preparation (maintain_step): the next
//    step, or the first writer that needs the bucket, finishes it; the table is zero.
// The oracle lives outside the segment (an anonymous shared mapping).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "base/kill_point.h"
#include "shmfilter/window.hpp"
#include "structures/window/window_impl.h"
#include "load_clock.h"
#include "check_clean.h"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter;

namespace {

// A write's answer (kNew / kSeen), not one of the failures (dropped, no space, busy, forked...).
inline bool answered(WindowStatus s) { return s == WindowStatus::kNew || s == WindowStatus::kSeen; }

constexpr int64_t kDay = 86400;
constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC
constexpr int kProcs = 3;
constexpr uint64_t kPairs = 20000;

template <class T>
T* shared_oracle() {
  void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) T{};
}

WindowOptions opts(WindowVariant v, uint64_t n) {
  WindowOptions o;
  o.variant = v;
  o.expected_per_bucket = n;
  o.error = 0.01;
  o.retention = 7;
  o.max_spaces = 256;
  o.seed = 5;
  return o;
}

using shmf_test::expect_check_clean;  // tests/support/check_clean.h

struct RaceOracle {
  std::atomic<uint32_t> news[kPairs];
  std::atomic<int> ready;
};

struct ClockOracle {
  std::atomic<int64_t> now;
  std::atomic<uint64_t> acked[kProcs];    // pairs [0, acked) of process p were acknowledged
  std::atomic<uint64_t> allowed[kProcs];  // process p may mark pairs [0, allowed) (the parent raises it per day)
  std::atomic<int> ready;
  std::atomic<int> stop;
};

int64_t shared_clock(void* ctx) { return static_cast<ClockOracle*>(ctx)->now.load(std::memory_order_acquire); }

uint64_t own_item(int p, uint64_t i) { return shmf_bench::mix64((uint64_t(p + 1) << 40) + i); }

class WindowMP : public ::testing::TestWithParam<WindowVariant> {};

}  // namespace

TEST_P(WindowMP, MarkIfUnseenRacesAnswerNewOnceOrWithinTheCountedBound) {
  shmf_test::SegmentGuard guard(shmf_test::unique_name("wrace"));
  Segment seg = Segment::create(guard.name, shmf_test::small_options());
  Window::create(seg, "w", opts(GetParam(), 2 * kPairs));
  auto* orc = shared_oracle<RaceOracle>();
  ASSERT_NE(orc, nullptr);
  std::string name = guard.name;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    kids.push_back(shmf_test::fork_child([&, p] {
      Segment s = Segment::open(name);
      Window w = Window::open(s, "w");
      w.set_now(kT0 + 100);
      std::vector<uint64_t> order(kPairs);
      for (uint64_t i = 0; i < kPairs; ++i) order[i] = i;
      shmf_bench::Rng rng(static_cast<uint64_t>(p) + 1);
      for (uint64_t i = kPairs; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
      orc->ready.fetch_add(1);
      while (orc->ready.load() < kProcs) {
      }
      for (uint64_t i : order) {
        WindowStatus st = w.mark_if_unseen(i % 17, shmf_bench::mix64(i), 7);
        if (st == WindowStatus::kNew) orc->news[i].fetch_add(1);
        else if (st != WindowStatus::kSeen) return 10;
      }
      return 0;
    }));
  }
  for (pid_t k : kids) EXPECT_TRUE(shmf_test::exited_ok(shmf_test::wait_status(k)));
  Window w = Window::open(seg, "w");
  w.set_now(kT0 + 100);
  uint64_t zero = 0, extra = 0, total = 0;
  for (uint64_t i = 0; i < kPairs; ++i) {
    uint32_t n = orc->news[i].load();
    total += n;
    if (n == 0) ++zero;
    if (n > 1) extra += n - 1;
    ASSERT_TRUE(w.seen(i % 17, shmf_bench::mix64(i), 1)) << "pair " << i << " lost";
  }
  WindowStats st = w.stats();
  uint64_t counted = 0;
  for (uint64_t s = 0; s < 17; ++s) counted += w.new_count(s, 0);
  EXPECT_EQ(counted, total);  // per-space counters count kNew answers exactly
  // A pair answers kSeen to all only when it was a false positive before anyone marked it: <= p1 x pairs.
  EXPECT_LE(zero, static_cast<uint64_t>(kPairs * st.one_bucket_error * 3 + 10));
  std::printf("%s: %llu pairs, %llu answered kNew twice or more (extra %llu), racing_marks %llu, rotation_races %llu\n",
              std::string(window_variant_name(GetParam())).c_str(), (unsigned long long)kPairs,
              (unsigned long long)extra, (unsigned long long)extra, (unsigned long long)st.racing_marks,
              (unsigned long long)st.rotation_races);
  if (GetParam() == WindowVariant::kCuckoo)
    EXPECT_EQ(extra, 0u);  // exactly once (no rotation in this run)
  else
    EXPECT_LE(extra, st.racing_marks);  // every double answer was counted
  expect_check_clean(seg);
  munmap(orc, sizeof(RaceOracle));
}

// kCuckoo: exactly one kNew per pair ACROSS rotations. kProcs processes race mark_if_unseen
// over w = 64 on the same pairs in the same order (so they meet on a pair at about the same
// moment) while a virtual clock, driven by the processes' own operation count, crosses a bucket
// boundary every kOpsPerBucket operations: a process that read bucket E before the boundary
// inserts while another, already in E + 1, checks E. The whole run spans kBuckets < w buckets,
// so every two answers' windows overlap: a pair must answer kNew exactly once (or never: a
// false positive before anyone marked it, bounded below). Process 2 uses mark_if_unseen_many
// (16-pair calls), the others single calls. Without sealing (the first version) such a test
// sees double answers (docs/window.md "Answers and race bounds"). No timing: the clock is
// the operation count, waits are bounded in uncontended seconds (tests/support/load_clock.h).
namespace {
constexpr uint64_t kRotPairs = 24000;
constexpr uint64_t kBuckets = 60;
constexpr uint64_t kOpsPerBucket = kProcs * kRotPairs / kBuckets;
struct RotRaceOracle {
  std::atomic<uint32_t> news[kRotPairs];
  std::atomic<uint64_t> ops;
  std::atomic<int> ready;
};
int64_t ops_clock(void* ctx) {
  const uint64_t ops = static_cast<RotRaceOracle*>(ctx)->ops.load(std::memory_order_relaxed);
  return kT0 + static_cast<int64_t>(std::min<uint64_t>(ops / kOpsPerBucket, kBuckets - 1));
}
}  // namespace

TEST(WindowMPCuckoo, MarkIfUnseenAnswersNewOnceAcrossRotations) {
  shmf_test::SegmentGuard guard(shmf_test::unique_name("wrotrace"));
  Segment seg = Segment::create(guard.name, shmf_test::small_options());
  WindowOptions o = opts(WindowVariant::kCuckoo, 2000);
  o.bucket_seconds = 1;
  o.utc_offset = 0;
  o.retention = 64;
  o.error = 0.05;  // over 64 buckets: 8e-4 per bucket (16-bit fingerprints)
  Window::create(seg, "w", o);
  auto* orc = shared_oracle<RotRaceOracle>();
  ASSERT_NE(orc, nullptr);
  std::string name = guard.name;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    kids.push_back(shmf_test::fork_child([&, p] {
      Segment s = Segment::open(name);
      Window w = Window::open(s, "w");
      w.set_clock(&ops_clock, orc);
      std::vector<uint64_t> order(kRotPairs);
      for (uint64_t i = 0; i < kRotPairs; ++i) order[i] = i;
      shmf_bench::Rng rng(77);  // the same order in every process: they race on the same pair
      for (uint64_t i = kRotPairs; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
      orc->ready.fetch_add(1);
      shmf_test::LoadClock clock;
      const uint64_t limit = uint64_t(60 * shmf_test::time_scale() * 1e9);
      while (orc->ready.load() < kProcs)
        if (clock.now() > limit) return 12;  // the others did not start in 60 uncontended seconds
      auto count = [&](uint64_t i, WindowStatus st) {
        if (st == WindowStatus::kNew) orc->news[i].fetch_add(1);
        return st == WindowStatus::kNew || st == WindowStatus::kSeen;
      };
      if (p != 2) {
        for (uint64_t i : order) {
          if (!count(i, w.mark_if_unseen(i % 17, shmf_bench::mix64(i), 64))) return 10;
          orc->ops.fetch_add(1, std::memory_order_relaxed);
        }
      } else {
        uint64_t sp[16], it[16];
        WindowStatus st[16];
        for (uint64_t at = 0; at < kRotPairs; at += 16) {
          const size_t n = static_cast<size_t>(std::min<uint64_t>(16, kRotPairs - at));
          for (size_t j = 0; j < n; ++j) {
            sp[j] = order[at + j] % 17;
            it[j] = shmf_bench::mix64(order[at + j]);
          }
          w.mark_if_unseen_many(std::span<const uint64_t>(sp, n), std::span<const uint64_t>(it, n), 64,
                                std::span<WindowStatus>(st, n));
          for (size_t j = 0; j < n; ++j)
            if (!count(order[at + j], st[j])) return 11;
          orc->ops.fetch_add(n, std::memory_order_relaxed);
        }
      }
      return 0;
    }));
  }
  for (pid_t k : kids) {
    int status = 0;
    // Hung: no operation of any process for 60 uncontended seconds.
    ASSERT_TRUE(shmf_test::wait_child_bounded(k, 60, status, [&] { return orc->ops.load(); }))
        << "the racing processes made no progress for 60 uncontended seconds";
    // 10 / 11: a mark_if_unseen (single / batched) answered neither kNew nor kSeen; 12: start barrier timed out
    EXPECT_TRUE(shmf_test::exited_ok(status)) << "child status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  Window w = Window::open(seg, "w");
  w.set_now(kT0 + kBuckets - 1);
  uint64_t zero = 0, doubled = 0, total = 0;
  for (uint64_t i = 0; i < kRotPairs; ++i) {
    const uint32_t n = orc->news[i].load();
    total += n;
    zero += n == 0;
    if (n > 1 && doubled++ < 5) ADD_FAILURE() << "pair " << i << " answered kNew " << n << " times";
    ASSERT_TRUE(w.seen(i % 17, shmf_bench::mix64(i), 64)) << "pair " << i << " lost";
  }
  WindowStats st = w.stats();
  std::printf("kCuckoo across rotations: %llu pairs x %d processes, %llu rotations, %llu pairs answered kNew twice or "
              "more, %llu never (false positives), rotation_races %llu\n",
              (unsigned long long)kRotPairs, kProcs, (unsigned long long)st.rotations, (unsigned long long)doubled,
              (unsigned long long)zero, (unsigned long long)st.rotation_races);
  EXPECT_EQ(doubled, 0u) << "exactly once across rotations";
  EXPECT_EQ(st.rotation_races, 0u);
  // The run crossed the boundaries it was built to cross (the clock is the operation count).
  EXPECT_EQ(st.current_bucket, w.bucket_of(kT0 + kBuckets - 1));
  EXPECT_GE(st.rotations, kBuckets - 1);
  // Per-space counters count kNew answers exactly, summed over the buckets of the run.
  uint64_t counted = 0;
  for (uint64_t s = 0; s < 17; ++s)
    for (uint32_t age = 0; age < kBuckets; ++age) counted += w.new_count(s, age);
  EXPECT_EQ(counted, total);
  // A pair answers kSeen to all only when it was a false positive before anyone marked it.
  EXPECT_LE(zero, static_cast<uint64_t>(kRotPairs * st.window_fp_bound(64) * 3 + 10));
  expect_check_clean(seg);
  munmap(orc, sizeof(RotRaceOracle));
}

TEST_P(WindowMP, RotationAtTheBoundaryBySeveralProcessesLosesNothing) {
  for (bool with_maintainer : {false, true}) {
    shmf_test::SegmentGuard guard(shmf_test::unique_name("wrot"));
    Segment seg = Segment::create(guard.name, shmf_test::small_options());
    Window::create(seg, "w", opts(GetParam(), 20000));
    auto* orc = shared_oracle<ClockOracle>();
    ASSERT_NE(orc, nullptr);
    orc->now.store(kT0 + kDay - 1);
    // 3 processes x 2 x 3,500 = 21,000 pairs a day at most, against expected_per_bucket 20,000 plus an overflow
    // table as large: a day that fills up fails the test, whatever the machine's load.
    constexpr uint64_t kPerDay = 3500;
    for (int p = 0; p < kProcs; ++p) orc->allowed[p].store(kPerDay);
    std::string name = guard.name;
    std::vector<pid_t> kids;
    for (int p = 0; p < kProcs; ++p) {
      kids.push_back(shmf_test::fork_child([&, p] {
        Segment s = Segment::open(name);
        Window w = Window::open(s, "w");
        w.set_clock(&shared_clock, orc);
        orc->ready.fetch_add(1);
        for (uint64_t i = 0; orc->stop.load() == 0 && i < 60000; ++i) {
          // Wait for the parent's allowance: however the scheduler runs the parent, one day never gets more
          // than 2 x kPerDay pairs of a process, inside the bucket's capacity (main table plus its overflow).
          while (i >= orc->allowed[p].load(std::memory_order_acquire) && orc->stop.load() == 0) usleep(50);
          if (orc->stop.load() != 0) break;
          WindowStatus st = w.mark(uint64_t(p), own_item(p, i));
          if (st != WindowStatus::kNew && st != WindowStatus::kSeen) {
            std::fprintf(stderr, "child %d: mark answered %s\n", p, std::string(window_status_name(st)).c_str());
            return 10;
          }
          orc->acked[p].store(i + 1, std::memory_order_release);
          if (!w.seen(uint64_t(p), own_item(p, i), 7)) return 11;  // read-your-write across rotations
        }
        return 0;
      }));
    }
    pid_t maint = -1;
    if (with_maintainer) {
      maint = shmf_test::fork_child([&] {
        Segment s = Segment::open(name);
        Window w = Window::open(s, "w");
        w.set_clock(&shared_clock, orc);
        while (orc->stop.load() == 0) {
          w.maintain();
          usleep(2000);
        }
        return 0;
      });
    }
    while (orc->ready.load() < kProcs) usleep(100);
    // Five day boundaries, each reached by every process at once (one store of the shared clock).
    // Each pass lets every process mark kPerDay more and waits for 3,000 of them under the current day, so every
    // day 0..5 gets marks (the sixth pass only waits for day 5's) and none gets more than 2 x kPerDay a process.
    for (int d = 1; d <= 6; ++d) {
      uint64_t before = 0;
      for (int p = 0; p < kProcs; ++p) {
        uint64_t a = orc->acked[p].load();
        before += a;
        orc->allowed[p].store(a + kPerDay, std::memory_order_release);
      }
      // The children mark up to kProcs x kPerDay more, then wait; a child that failed stops marking, so the
      // wait is bounded (60 uncontended seconds, tests/support/load_clock.h) and fails the test, and the
      // children's exit statuses are reported below.
      shmf_test::LoadClock clock;
      const uint64_t limit = uint64_t(60 * shmf_test::time_scale() * 1e9);
      uint64_t now = 0;
      for (;;) {
        now = 0;
        for (int p = 0; p < kProcs; ++p) now += orc->acked[p].load();
        if (now >= before + 3000 || clock.now() > limit) break;
        usleep(1000);
      }
      EXPECT_GE(now, before + 3000) << "pass " << d << ": the children marked " << now - before
                                    << " pairs in 60 uncontended seconds, 3000 expected";
      if (d <= 5) orc->now.store(kT0 + d * kDay);
    }
    usleep(20000);
    orc->stop.store(1);
    for (pid_t k : kids) {
      int status = shmf_test::wait_status(k);
      // 10: a mark answered neither kNew nor kSeen; 11: a marked pair not seen right after
      EXPECT_TRUE(shmf_test::exited_ok(status)) << "child status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    if (maint > 0) {
      EXPECT_TRUE(shmf_test::exited_ok(shmf_test::wait_status(maint)));
    }
    Window w = Window::open(seg, "w");
    w.set_now(kT0 + 5 * kDay);
    for (int p = 0; p < kProcs; ++p) {
      uint64_t n = orc->acked[p].load();
      for (uint64_t i = 0; i < n; ++i) ASSERT_TRUE(w.seen(uint64_t(p), own_item(p, i), 7)) << "lost p" << p << " i" << i;
    }
    WindowStats st = w.stats();
    // Buckets of days 0..5: one claim each (the ones create() did not pre-claim: all six).
    EXPECT_EQ(st.rotations, 6u) << "maintainer " << with_maintainer;
    EXPECT_EQ(st.current_bucket, w.bucket_of(kT0 + 5 * kDay));
    if (with_maintainer) {
      std::printf("with a maintainer: %llu inline allocations\n", (unsigned long long)st.inline_allocations);
    } else {
      EXPECT_GE(st.inline_allocations, 4u);
    }
    expect_check_clean(seg);
    munmap(orc, sizeof(ClockOracle));
  }
}

// ---- kill points -----------------------------------------------------------
namespace {
struct KillCase {
  const char* point;
  int action;  // 0 rotate (next day, no maintain), 1 overflow (over capacity), 2 maintain, 3 new space, 4 forget,
               // 5 seal, 6 a layer past the first overflow (10x capacity)
};
}  // namespace

TEST_P(WindowMP, KilledAtEveryKillPointLeavesAConsistentWindow) {
  const KillCase cases[] = {
      {"window.rotate.after_claim", 0},     {"window.prepare.after_free", 0}, {"window.prepare.before_ready", 0},
      {"window.table.after_allocate", 0},   {"window.overflow.after_allocate", 1},
      {"window.overflow.after_commit", 1},  {"window.maintain.after_retire", 2}, {"window.prepare.before_ready", 2},
      {"window.space.after_claim", 3},      {"window.forget.between_buckets", 4},
      {"window.seal.locked", 5},            {"window.layer.after_commit", 6},
  };
  for (const KillCase& kc : cases) {
    if ((kc.action == 4 || kc.action == 5) && GetParam() != WindowVariant::kCuckoo) continue;
    // A bucket's own overflow layers (kStamped's buckets are counter rows; its shared table's
    // layers and kill points: test_window_stamped_mp.cpp).
    if ((kc.action == 1 || kc.action == 6) && GetParam() == WindowVariant::kStamped) continue;
    SCOPED_TRACE(kc.point);
    shmf_test::SegmentGuard guard(shmf_test::unique_name("wkill"));
    Segment seg = Segment::create(guard.name, shmf_test::small_options());
    Window w = Window::create(seg, "w", opts(GetParam(), 2000));
    // Acknowledged state before the crash: days 0..2, 1000 pairs each, in space 1.
    for (int d = 0; d < 3; ++d) {
      w.set_now(kT0 + d * kDay);
      w.maintain();
      for (uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(answered(w.mark(1, own_item(d, i))));
    }
    if (kc.action == 4) {
      for (uint64_t i = 0; i < 10; ++i) ASSERT_EQ(w.forget(1, own_item(0, i)), WindowStatus::kRemoved);
    }
    if (kc.action == 2) {
      w.set_now(kT0 + 9 * kDay);  // days 0..2 expire: maintain retires them
    }
    std::string name = guard.name;
    pid_t kid = shmf_test::fork_child([&] {
      Segment s = Segment::open(name);
      Window c = Window::open(s, "w");
      internal::arm_kill_point(kc.point, 1);
      switch (kc.action) {
        case 0:
          c.set_now(kT0 + 4 * kDay);  // two days on: no spare there, the caller prepares one
          c.mark(1, uint64_t{42});
          break;
        case 1:
          c.set_now(kT0 + 2 * kDay);
          for (uint64_t i = 0; i < 5000; ++i) c.mark(2, own_item(7, i));
          break;
        case 2:
          c.set_now(kT0 + 9 * kDay);
          c.maintain();
          break;
        case 3:
          c.set_now(kT0 + 2 * kDay);
          c.mark(99, uint64_t{1});
          break;
        case 4:
          c.set_now(kT0 + 2 * kDay);
          c.forget(1, own_item(1, 500));
          break;
        case 6:  // 10x the day's capacity: overflow layers 2.. (a layer committed, not yet published)
          c.set_now(kT0 + 2 * kDay);
          for (uint64_t i = 0; i < 20000; ++i) c.mark(2, own_item(7, i));
          break;
        case 5:  // days 0 and 1 took only plain marks: nobody sealed them; this caller of day 2 does
          c.set_now(kT0 + 2 * kDay);
          c.mark_if_unseen(1, uint64_t{777}, 7);
          break;
      }
      return 3;  // not killed: the point was not reached
    });
    int status = shmf_test::wait_status(kid);
    EXPECT_TRUE(shmf_test::killed_by(status, SIGKILL)) << "kill point not reached: " << kc.point;
    // Whatever the crash left: the next control-plane call repairs it; the window is consistent.
    Window v = Window::open(seg, "w");
    v.set_now(kc.action == 2 ? kT0 + 9 * kDay : kT0 + 2 * kDay);
    v.maintain();  // takes the segment lock: rolls back what the dead child left half-done
    // Repairs the dead child's registry slot (a segment finding) and, after a kill
    // between a space claim and its counter increment, the claimed-space counter.
    EXPECT_TRUE(seg.check(true).consistent());
    expect_check_clean(seg);
    if (kc.action != 2) {
      for (int d = 0; d < 3; ++d)
        for (uint64_t i = (d == 0 && kc.action == 4) ? 10 : 0; i < 1000; ++i) {
          if (kc.action == 4 && d == 1 && i == 500) continue;  // the child's unacknowledged forget: either state
          ASSERT_TRUE(v.seen(1, own_item(d, i), 7)) << "acknowledged mark lost: day " << d << " i " << i;
        }
    }
    if (kc.action == 4) {
      for (uint64_t i = 0; i < 10; ++i) EXPECT_FALSE(v.seen(1, own_item(0, i), 7)) << "forgotten pair came back";
      // The interrupted forget, redone, completes.
      v.forget(1, own_item(1, 500));
      EXPECT_FALSE(v.seen(1, own_item(1, 500), 7)) << "a redone forget left the pair";
    }
    // The interrupted work can be redone.
    v.set_now(kc.action == 0 ? kT0 + 4 * kDay : (kc.action == 2 ? kT0 + 9 * kDay : kT0 + 2 * kDay));
    EXPECT_TRUE(answered(v.mark(1, uint64_t{42})));
    EXPECT_TRUE(v.seen(1, uint64_t{42}, 1));
    if (kc.action == 0) {
      // A handle whose clock is behind sees what a handle at the new bucket marked after the
      // crash (the epoch the dead claimer did not raise is raised by the next writer).
      Window behind = Window::open(seg, "w");
      behind.set_now(kT0 + 2 * kDay);
      EXPECT_EQ(v.mark(1, uint64_t{4242}), WindowStatus::kNew);
      EXPECT_TRUE(behind.seen(1, uint64_t{4242}, 1));
    }
    if (kc.action == 1) {
      for (uint64_t i = 0; i < 5000; ++i) ASSERT_TRUE(answered(v.mark(2, own_item(7, i))));
      for (uint64_t i = 0; i < 5000; ++i) ASSERT_TRUE(v.seen(2, own_item(7, i), 1));
      EXPECT_TRUE(v.stats().buckets[0].overflow);
    }
    if (kc.action == 6) {
      // The committed, unpublished layer is published by the next writer that needs it (no leak:
      // check above found every extent owned); every pair marked after the crash is kept.
      for (uint64_t i = 0; i < 20000; ++i) ASSERT_EQ(v.mark(2, own_item(7, i)) == WindowStatus::kFull, false) << i;
      for (uint64_t i = 0; i < 20000; ++i) ASSERT_TRUE(v.seen(2, own_item(7, i), 1)) << i;
      EXPECT_GE(v.stats().buckets[0].layers, 2u);
    }
    if (kc.action == 3) {
      EXPECT_TRUE(answered(v.mark(99, uint64_t{2})));
      EXPECT_GE(v.new_count(99, 0), 1u);
    }
    if (kc.action == 5) {
      // The dead sealer's lock of day 1's table is taken over (by the next sealer here); the
      // question it died in completes, and a later one, from a handle whose clock is behind, sees it.
      EXPECT_EQ(v.mark_if_unseen(1, uint64_t{777}, 7), WindowStatus::kNew);
      EXPECT_EQ(v.mark_if_unseen(1, uint64_t{777}, 7), WindowStatus::kSeen);
      Window behind = Window::open(seg, "w");
      behind.set_now(kT0 + 1 * kDay);
      EXPECT_EQ(behind.mark_if_unseen(1, uint64_t{778}, 7), WindowStatus::kNew);
      EXPECT_EQ(v.mark_if_unseen(1, uint64_t{778}, 7), WindowStatus::kSeen);
      EXPECT_EQ(v.new_count(1, 1), 1000u) << "the handle behind marked in day 2 (the newest bucket), not in day 1";
    }
    v.maintain();
    expect_check_clean(seg);
    EXPECT_TRUE(Window::drop(seg, "w"));
    seg.quiesce();
    expect_check_clean(seg);
  }
}

// Lock-free validation (open, stats) racing a housekeeper that allocates tables: a table the
// lock holder allocated from the top of the data area after the validator read top is not
// corrupt. An earlier build read top once per validation and so answered kCorrupt ("table at
// X is not an allocated extent of this window") for a table allocated meanwhile (torture_ci,
// seed 20261130: a worker's open() died). Counts, not time: the housekeeper rotates kBuckets
// buckets (each a new spare, most from top, expired ones freed); two readers open and read
// stats until it is done; none may see kCorrupt.
struct ValidateRaceOracle {
  std::atomic<int> ready;
  std::atomic<int> stop;
  std::atomic<uint64_t> opens;
};

TEST_P(WindowMP, ValidationRacingTableAllocationsReportsNoCorruption) {
  shmf_test::SegmentGuard guard(shmf_test::unique_name("wvalrace"));
  Segment seg = Segment::create(guard.name, shmf_test::small_options(8ull << 20));
  WindowOptions o = opts(GetParam(), 32);
  o.bucket_seconds = 1;
  o.utc_offset = 0;
  o.retention = GetParam() == WindowVariant::kStamped ? 12 : 64;  // kStamped keeps <= 12 buckets
  o.error = 0.05;
  o.now = 0;
  Window::create(seg, "w", o);
  auto* orc = shared_oracle<ValidateRaceOracle>();
  ASSERT_NE(orc, nullptr);
  const std::string name = guard.name;
  constexpr int kReaders = 2;
  constexpr int64_t kBuckets = 400;
  std::vector<pid_t> kids;
  for (int p = 0; p < kReaders; ++p) {
    kids.push_back(shmf_test::fork_child([&] {
      Segment s = Segment::open(name);
      orc->ready.fetch_add(1);
      int corrupt = 0;
      while (orc->stop.load() == 0) {
        try {
          Window w = Window::open(s, "w");
          (void)w.stats();
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kCorrupt) throw;
          if (corrupt++ < 3) std::fprintf(stderr, "reader %d: %s\n", getpid(), e.what());
        }
        orc->opens.fetch_add(1, std::memory_order_relaxed);
      }
      return corrupt == 0 ? 0 : 20;  // 20: a validation answered kCorrupt for a sound window
    }));
  }
  shmf_test::LoadClock clock;
  const uint64_t limit = uint64_t(60 * shmf_test::time_scale() * 1e9);
  while (orc->ready.load() < kReaders && clock.now() < limit) {
  }
  ASSERT_EQ(orc->ready.load(), kReaders) << "the readers did not start in 60 uncontended seconds";
  {
    Window w = Window::open(seg, "w");
    for (int64_t e = 0; e < kBuckets; ++e) {
      w.set_now(e);
      // Busy buckets (past `expected`): overflow layers and resized spares allocate too.
      for (uint64_t i = 0; i < 40 + uint64_t(e % 7) * 20; ++i) ASSERT_TRUE(answered(w.mark_if_unseen(1, shmf_bench::mix64(uint64_t(e) << 20 | i), 1)));
      w.maintain();
    }
  }
  orc->stop.store(1);
  for (pid_t k : kids) {
    int status = 0;
    ASSERT_TRUE(shmf_test::wait_child_bounded(k, 60, status, [&] { return orc->opens.load(); }));
    EXPECT_TRUE(shmf_test::exited_ok(status)) << "reader status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  std::printf("validation racing %lld buckets' allocations: %llu opens\n", (long long)kBuckets,
              (unsigned long long)orc->opens.load());
  expect_check_clean(seg);
  munmap(orc, sizeof(ValidateRaceOracle));
}

INSTANTIATE_TEST_SUITE_P(Variants, WindowMP, ::testing::Values(WindowVariant::kBloom, WindowVariant::kCuckoo, WindowVariant::kStamped),
                         [](const auto& pi) { return std::string(window_variant_name(pi.param)); });

// A housekeeper killed in the middle of preparing the next bucket's spare in chunks
// (maintain_step with a small budget, killed at its 3rd chunk, after memory that held an
// expired table was partly zeroed): the next maintain_step finishes it (and the rotation
// is then one CAS), or, if none runs, the first writer that needs the bucket finishes it
// inline. Either way the finished table is entirely zero and acknowledged marks stay.
TEST_P(WindowMP, KilledMidChunkedPrepareIsFinishedByTheNextStepOrTheFirstWriter) {
  namespace wi = shmfilter::internal::window;
  for (int finisher = 0; finisher < 2; ++finisher) {
    SCOPED_TRACE(finisher == 0 ? "finished by the next maintain_step" : "finished by the first writer");
    shmf_test::SegmentGuard guard(shmf_test::unique_name("wchunk"));
    Segment seg = Segment::create(guard.name, shmf_test::small_options());
    Window w = Window::create(seg, "w", opts(GetParam(), 2000));
    // Days 0..8, 300 pairs each: from day 7 on maintain retires a day per call, so the
    // spares prepared later reuse extents that held marked tables (dirty memory).
    for (int d = 0; d <= 8; ++d) {
      w.set_now(kT0 + d * kDay);
      w.maintain();
      for (uint64_t i = 0; i < 300; ++i) ASSERT_TRUE(answered(w.mark(1, own_item(d, i))));
    }
    std::string name = guard.name;
    pid_t kid = shmf_test::fork_child([&] {
      Segment s = Segment::open(name);
      Window c = Window::open(s, "w");
      c.set_now(kT0 + 9 * kDay);  // retires day 2, starts day 10's spare, zeroes it 1 KiB per step
      internal::arm_kill_point("window.prepare.mid_chunk", 3);
      for (int i = 0; i < 10000; ++i)
        if (c.maintain_step(1024)) return 4;  // finished: the kill point was not reached 3 times
      return 3;
    });
    int status = shmf_test::wait_status(kid);
    ASSERT_TRUE(shmf_test::killed_by(status, SIGKILL)) << "kill point window.prepare.mid_chunk not reached 3 times";
    EXPECT_TRUE(seg.check(true).consistent());  // repairs the dead child's registry slot
    expect_check_clean(seg);
    Window v = Window::open(seg, "w");
    auto* h = reinterpret_cast<wi::WindowHeader*>(seg.base() + seg.find("w")->offset);
    const wi::BucketSlot& spare = wi::slot_table(h)[(v.bucket_of(kT0 + 10 * kDay)) % h->slots];
    ASSERT_EQ(spare.tag.load(), wi::kRetired) << "the killed step left day 10's spare in preparation";
    ASSERT_NE(spare.table, 0u);
    {
      // Two chunks were done before the kill; the rest of the extent is what
      // allocate_unzeroed may hand out: bytes of a freed table. Make them so.
      auto* t = reinterpret_cast<wi::TableHead*>(seg.base() + spare.table);
      const uint64_t cur = t->prep_cursor.load();
      EXPECT_EQ(cur, sizeof(wi::TableHead) + 2048) << "the killed step did 2 chunks of 1 KiB";
      const uint64_t total = wi::main_offset_in_table(h->space_table) +
                             (GetParam() == WindowVariant::kBloom
                                  ? wi::bloom_main_bytes(t->geometry)
                                  : wi::cuckoo_main_bytes(static_cast<uint32_t>(t->geometry), h->k_main <= 8 ? 8 : 16));
      ASSERT_GT(cur, 0u);
      ASSERT_LT(cur, total);
      std::memset(reinterpret_cast<unsigned char*>(t) + cur, 0xA5, total - cur);
    }
    const uint64_t inline0 = v.stats().inline_allocations;
    if (finisher == 0) {
      v.set_now(kT0 + 9 * kDay);
      bool ready = false;
      for (int i = 0; i < 10000 && !ready; ++i) ready = v.maintain_step(1024);
      ASSERT_TRUE(ready) << "maintain_step did not finish the spare within 10,000 steps of 1 KiB";
      ASSERT_EQ(spare.tag.load(), 0u);
      // The whole table body is zero (the dirty bytes of the expired table are gone).
      const auto* t = reinterpret_cast<const wi::TableHead*>(seg.base() + spare.table);
      EXPECT_EQ(t->prep_cursor.load(), 0u);
      const uint64_t moff = wi::main_offset_in_table(h->space_table);
      const uint64_t body = GetParam() == WindowVariant::kBloom ? wi::bloom_main_bytes(t->geometry) : 0;
      const auto* bytes = reinterpret_cast<const unsigned char*>(t);
      uint64_t nonzero = 0;
      for (uint64_t i = sizeof(wi::TableHead); i < moff + body; ++i) nonzero += bytes[i] != 0;
      EXPECT_EQ(nonzero, 0u) << "the finished spare still holds bytes of the table that used its memory";
    }
    v.set_now(kT0 + 10 * kDay);
    EXPECT_EQ(v.mark(1, uint64_t{42}), WindowStatus::kNew);
    EXPECT_TRUE(v.seen(1, uint64_t{42}, 1));
    EXPECT_EQ(v.stats().inline_allocations, inline0 + (finisher == 0 ? 0 : 1))
        << (finisher == 0 ? "the rotation after a finished step must be one CAS" : "the writer finishes the spare inline");
    // Acknowledged marks of the days still in the window (4..8 from day 10).
    for (int d = 4; d <= 8; ++d)
      for (uint64_t i = 0; i < 300; ++i) ASSERT_TRUE(v.seen(1, own_item(d, i), 7)) << "acknowledged mark lost: day " << d;
    // The new bucket answers like an empty table: of 200 fresh pairs at most 2 are false
    // positives (load 201/2000 of the capacity: the one-bucket rate there is < 1e-4).
    int fresh_new = 0;
    for (uint64_t i = 0; i < 200; ++i) fresh_new += v.mark_if_unseen(3, own_item(20, i), 1) == WindowStatus::kNew;
    EXPECT_GE(fresh_new, 198);
    expect_check_clean(seg);
  }
}
