// tests/multiprocess/test_snapshot_multiprocess.cpp: a save taken while forked
// writers keep inserting and erasing restores with every operation that was
// acknowledged before the save began. The oracle lives outside the segment
// (an anonymous shared mapping): writer w stores j after its op j returned,
// so a value read before save() is a watermark of acknowledged ops.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/snapshot.hpp"
#include "shmfilter/window.hpp"
#include "structures/snapshot_io.h"
#include "load_clock.h"
#include "test_util.h"

using namespace shmfilter;

namespace {
// A write's answer (kNew / kSeen), not one of the failures (dropped, no space, busy, forked...).
inline bool answered(WindowStatus s) { return s == WindowStatus::kNew || s == WindowStatus::kSeen; }
}  // namespace

using shmf_test::fork_child;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;
using shmf_test::wait_status;

namespace {

constexpr int kWriters = 3;
constexpr uint64_t kKeySpace = 1'000'000;  // writer w's keys: w * kKeySpace + j

uint64_t key(int w, uint64_t j) { return static_cast<uint64_t>(w) * kKeySpace + j; }
// Op j inserts key j everywhere; when j % 4 == 3 it then erases key j - 3 (set, roaring, cuckoo).
// (Never key 0, which no op inserts: erasing a never-inserted key may remove
// another key's cuckoo fingerprint, docs/cuckoo.md.)
bool erased_by(uint64_t j) { return j % 4 == 3 && j >= 7; }

}  // namespace

TEST(SnapshotMultiProcess, SaveUnderConcurrentWritersKeepsEveryAcknowledgedOperation) {
  SegmentGuard src(unique_name("snapmp-src")), dst(unique_name("snapmp-dst"));
  const std::string file = "/tmp/" + unique_name("snapmp") + ".save";
  {
    Segment seg = Segment::create(src.name, shmf_test::small_options(64ull << 20, 1ull << 30, 64));
    BloomOptions bo;
    bo.capacity = 50'000;
    bo.growth = 2;  // layers are added while the save may run
    bo.seed = 5;
    Bloom::create(seg, "bloom", bo);
    ExactSetOptions eo;
    eo.capacity = 3 * kKeySpace / 2;
    ExactSet::create(seg, "set", eo);
    Hll::create(seg, "hll");
    RoaringOptions ro;
    ro.delta_capacity = 1024;  // compactions run during the save
    RoaringSet::create(seg, "roaring", ro);
    CuckooOptions co;
    co.capacity = 20'000;
    co.expansion = 2;  // sub-filters are added while the save may run
    co.max_subfilters = 12;
    Cuckoo::create(seg, "cuckoo", co);
  }
  auto* acked = static_cast<std::atomic<uint64_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(acked, MAP_FAILED);
  for (int w = 0; w < kWriters; ++w) new (&acked[w]) std::atomic<uint64_t>(0);

  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    pids.push_back(fork_child([&, w] {
      Segment seg = Segment::open(src.name);
      Bloom b = Bloom::open(seg, "bloom");
      ExactSet s = ExactSet::open(seg, "set");
      Hll h = Hll::open(seg, "hll");
      RoaringSet r = RoaringSet::open(seg, "roaring");
      Cuckoo c = Cuckoo::open(seg, "cuckoo");
      for (uint64_t j = 1; j < kKeySpace; ++j) {
        const uint64_t k = key(w, j);
        b.add(k);
        if (s.insert(k) == InsertResult::kFull) return 3;
        h.add(k);
        if (r.add(static_cast<uint32_t>(k)) != RoaringStatus::kOk) return 4;
        if (c.add(k) != CuckooStatus::kInserted) return 5;
        if (erased_by(j)) {
          s.erase(key(w, j - 3));
          r.remove(static_cast<uint32_t>(key(w, j - 3)));
          c.erase(key(w, j - 3));
        }
        acked[w].store(j, std::memory_order_release);  // release: op j returned before this store
      }
      return 0;
    }));
  }
  // Wait for progress (not time): every writer past 20,000 ops. Bounded: a writer that
  // exited fails at once, one that makes no progress for 120 uncontended seconds
  // (tests/support/load_clock.h) fails then.
  std::string early;
  for (int w = 0; w < kWriters && early.empty(); ++w) {
    shmf_test::LoadClock clock;
    const uint64_t limit = uint64_t(120 * shmf_test::time_scale() * 1e9);
    while (acked[w].load(std::memory_order_acquire) < 20'000 && early.empty()) {
      int st = 0;
      if (waitpid(pids[w], &st, WNOHANG) == pids[w]) {
        early = "writer " + std::to_string(w) + " ended before 20,000 operations (exit " +
                std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)) +
                "; 3: set full, 4: roaring add failed, 5: cuckoo insert failed)";
        pids[w] = -1;
      } else if (clock.now() > limit) {
        early = "writer " + std::to_string(w) + " did not reach 20,000 operations in 120 uncontended seconds";
      } else {
        usleep(1000);
      }
    }
  }
  // The save must overlap the writers' work, or the test proves nothing. One save is short
  // (milliseconds): on a loaded machine the scheduler may run no writer during it. Then it
  // is taken again, up to 20 times; the last one is restored and checked.
  uint64_t mark[kWriters] = {}, after[kWriters] = {};
  SnapshotInfo info;
  bool concurrent = false;
  for (int attempt = 0; attempt < 20 && !concurrent && early.empty(); ++attempt) {
    for (int w = 0; w < kWriters; ++w) mark[w] = acked[w].load(std::memory_order_acquire);
    {
      Segment seg = Segment::open(src.name);
      info = save(seg, file);
    }
    for (int w = 0; w < kWriters; ++w) after[w] = acked[w].load(std::memory_order_acquire);
    for (int w = 0; w < kWriters; ++w) concurrent = concurrent || after[w] > mark[w];
  }
  for (pid_t p : pids)
    if (p > 0) kill(p, SIGKILL);
  for (pid_t p : pids)
    if (p > 0) wait_status(p);
  ASSERT_EQ(early, "");
  ASSERT_EQ(info.entries.size(), 5u);
  EXPECT_TRUE(concurrent) << "the writers made no progress during any of 20 saves: the test proved nothing";

  restore(file, dst.name);
  std::remove(file.c_str());
  Segment out = Segment::open(dst.name);
  EXPECT_TRUE(out.check().consistent());
  Bloom b = Bloom::open(out, "bloom");
  ExactSet s = ExactSet::open(out, "set");
  RoaringSet r = RoaringSet::open(out, "roaring");
  Cuckoo c = Cuckoo::open(out, "cuckoo");
  // The HLL's registers only grow: the restored registers dominate those of the acknowledged keys alone.
  SegmentGuard scratch(unique_name("snapmp-hll"));
  Segment ss = Segment::create(scratch.name, shmf_test::small_options());
  Hll ref = Hll::create(ss, "ref");
  uint64_t missing = 0, resurrected = 0;
  for (int w = 0; w < kWriters; ++w) {
    for (uint64_t j = 1; j <= mark[w]; ++j) {
      const uint64_t k = key(w, j);
      ref.add(k);
      const bool erased_before = j % 4 == 0 && erased_by(j + 3) && j + 3 <= mark[w];  // its erase (op j+3) was acknowledged
      missing += !b.contains(k);
      if (j % 4 != 0) missing += !c.contains(k);
      if (erased_before) {
        resurrected += s.contains(k) + r.contains(static_cast<uint32_t>(k));
      } else if (j % 4 != 0) {  // never erased
        missing += !s.contains(k) + !r.contains(static_cast<uint32_t>(k));
      }
    }
  }
  EXPECT_EQ(missing, 0u);
  // Cuckoo: the restored item count is the source's count at some instant after the
  // watermark: at least the acknowledged inserts minus the acknowledged erases.
  uint64_t least = 0;
  for (int w = 0; w < kWriters; ++w) least += mark[w] - (mark[w] >= 7 ? (mark[w] - 7) / 4 + 1 : 0);
  EXPECT_GE(c.size(), least);
  EXPECT_EQ(resurrected, 0u);
  std::vector<uint8_t> got = Hll::open(out, "hll").registers(), want = ref.registers();
  uint64_t lower = 0;
  for (size_t i = 0; i < want.size(); ++i) lower += got[i] < want[i];
  EXPECT_EQ(lower, 0u);
  munmap(acked, 4096);
}

// ---- windows ---------------------------------------------------------------------------
// A window saved while three forked writers keep answering mark_if_unseen and while the
// day rotates (and maintain() re-prepares a slot) in the middle of the copy. Both are made
// to happen during the save, not hoped for: the save's test hook (structures/snapshot_io.h), at
// its first slot, opens the writers' gates, waits (bounded, by progress, not time) until
// every writer acknowledged more operations, then moves the shared clock to day 1,
// rotates through another handle and runs maintain() through another attachment.
// Every pair acknowledged before the save began (kNew: stored; kSeen: found in a table
// the save copies) is seen over the window in the restored copy; the per-space counts
// lie between the kNew answers acknowledged before the save and those after it; the
// restored ring is at day 1 (the rotation the save saw), consistent, and keeps working.
namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC
constexpr uint64_t kSpaces = 16;
constexpr uint64_t kGateStep = 15'000;

struct WindowShared {
  std::atomic<int64_t> day;
  std::atomic<uint64_t> acked[kWriters];  // writer w: its op j returned (and its news were counted) before this store
  std::atomic<uint64_t> gate[kWriters];   // writer w waits while j > gate
  std::atomic<uint64_t> news[kWriters][kSpaces];  // kNew answers acknowledged, per space
  std::atomic<int> done[kWriters];        // nonzero: the writer stopped (its exit code + 1000)
};

int64_t shared_clock(void* ctx) {
  return kT0 + static_cast<WindowShared*>(ctx)->day.load(std::memory_order_acquire) * kDay + 3600;
}

// Waits (bounded) until pred() holds; false after `limit_s` seconds of no success.
template <class Pred>
bool wait_for(Pred pred, int limit_s) {
  for (int i = 0; i < limit_s * 1000; ++i) {
    if (pred()) return true;
    usleep(1000);
  }
  return pred();
}

struct WindowRace {
  WindowShared* sh;
  std::string seg_name;
  uint64_t start[kWriters];
  bool fired = false;
  std::string failure;
};

void window_race_hook(uint32_t, int, void* ctx) {
  auto* r = static_cast<WindowRace*>(ctx);
  if (r->fired) return;
  r->fired = true;
  for (int w = 0; w < kWriters; ++w) r->sh->gate[w].fetch_add(kGateStep, std::memory_order_release);
  for (int w = 0; w < kWriters; ++w)
    if (!wait_for([&] { return r->sh->acked[w].load(std::memory_order_acquire) > r->start[w] ||
                               r->sh->done[w].load() != 0; }, 300) ||
        r->sh->done[w].load() != 0) {
      r->failure = "writer " + std::to_string(w) + " made no progress during the save (done=" +
                   std::to_string(r->sh->done[w].load()) + ")";
      return;
    }
  r->sh->day.store(1, std::memory_order_release);
  Segment other = Segment::open(r->seg_name);  // its own attachment: its quiescent points are not the saver's
  Window w = Window::open(other, "freq");
  w.set_now(shared_clock(r->sh));
  if (!answered(w.mark(999, uint64_t{1}))) r->failure = "the rotation's mark failed";
  w.maintain();
}

class WindowSnapshotMP : public ::testing::TestWithParam<WindowVariant> {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(Variants, WindowSnapshotMP, ::testing::Values(WindowVariant::kBloom, WindowVariant::kCuckoo),
                         [](const auto& p) { return std::string(window_variant_name(p.param)); });

TEST_P(WindowSnapshotMP, SaveUnderConcurrentWritersAndARotationKeepsEveryAcknowledgedMark) {
  SegmentGuard src(unique_name("snapmpw-src")), dst(unique_name("snapmpw-dst"));
  const std::string file = "/tmp/" + unique_name("snapmpw") + ".save";
  constexpr uint32_t kRetention = 3;
  auto* sh = static_cast<WindowShared*>(
      mmap(nullptr, sizeof(WindowShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(sh, MAP_FAILED);
  new (sh) WindowShared{};
  for (int w = 0; w < kWriters; ++w) sh->gate[w].store(kGateStep);
  int64_t e0 = 0;
  {
    Segment seg = Segment::create(src.name, shmf_test::small_options(64ull << 20, 1ull << 30, 64));
    WindowOptions o;
    o.variant = GetParam();
    o.expected_per_bucket = 100'000;
    o.retention = kRetention;
    o.max_spaces = 64;
    o.seed = 9;
    Window w = Window::create(seg, "freq", o);
    w.set_clock(&shared_clock, sh);
    w.maintain();  // day 0's table and the spare for day 1
    e0 = w.bucket_of(shared_clock(sh));
  }
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    pids.push_back(fork_child([&, w] {
      Segment seg = Segment::open(src.name);
      Window win = Window::open(seg, "freq");
      win.set_clock(&shared_clock, sh);
      for (uint64_t j = 1; j < kKeySpace; ++j) {
        while (j > sh->gate[w].load(std::memory_order_acquire)) usleep(200);  // until the parent opens the gate (or kills us)
        const uint64_t space = j % kSpaces;
        WindowStatus st = win.mark_if_unseen(space, key(w, j), kRetention);
        if (st != WindowStatus::kNew && st != WindowStatus::kSeen) {
          sh->done[w].store(1000 + static_cast<int>(st));
          return 3;
        }
        if (st == WindowStatus::kNew) sh->news[w][space].fetch_add(1, std::memory_order_relaxed);  // relaxed: ordered by the release below
        sh->acked[w].store(j, std::memory_order_release);  // release: op j (and its count) happened before
      }
      sh->done[w].store(1000);
      return 0;
    }));
  }
  // Progress, not time: every writer reached its first gate.
  for (int w = 0; w < kWriters; ++w)
    ASSERT_TRUE(wait_for([&] { return sh->acked[w].load() >= kGateStep || sh->done[w].load() != 0; }, 300))
        << "writer " << w << " did not reach " << kGateStep << " operations in 300 s";
  for (int w = 0; w < kWriters; ++w) ASSERT_EQ(sh->done[w].load(), 0) << "writer " << w << " stopped early";
  uint64_t mark[kWriters], news_before[kSpaces] = {};
  WindowRace race{sh, src.name, {}, false, ""};
  for (int w = 0; w < kWriters; ++w) {
    mark[w] = race.start[w] = sh->acked[w].load(std::memory_order_acquire);
    for (uint64_t s = 0; s < kSpaces; ++s) news_before[s] += sh->news[w][s].load(std::memory_order_relaxed);
  }
  {
    Segment seg = Segment::open(src.name);
    internal::snapshot::set_window_copy_hook(&window_race_hook, &race);
    try {
      save(seg, file);
    } catch (...) {
      internal::snapshot::set_window_copy_hook(nullptr, nullptr);
      for (pid_t p : pids) kill(p, SIGKILL);
      for (pid_t p : pids) wait_status(p);
      throw;
    }
    internal::snapshot::set_window_copy_hook(nullptr, nullptr);
  }
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) wait_status(p);
  ASSERT_TRUE(race.fired);
  ASSERT_EQ(race.failure, "");
  uint64_t news_after[kSpaces] = {};
  for (int w = 0; w < kWriters; ++w)
    for (uint64_t s = 0; s < kSpaces; ++s) news_after[s] += sh->news[w][s].load(std::memory_order_relaxed);

  restore(file, dst.name);
  std::remove(file.c_str());
  Segment out = Segment::open(dst.name);
  {
    CheckReport rep = out.check(false);
    for (const auto& f : rep.findings) ADD_FAILURE() << f.where << ": " << f.problem;
  }
  Window r = Window::open(out, "freq");
  r.set_now(kT0 + 3600);  // day 0's clock: the restored epoch (day 1, seen during the save) wins
  EXPECT_EQ(r.stats().current_bucket, e0 + 1);
  uint64_t missing = 0;
  for (int w = 0; w < kWriters; ++w)
    for (uint64_t j = 1; j <= mark[w]; ++j) missing += !r.seen(j % kSpaces, key(w, j), kRetention);
  EXPECT_EQ(missing, 0u) << "acknowledged marks missing from the restored window";
  for (uint64_t s = 0; s < kSpaces; ++s) {
    uint64_t n = 0;
    for (uint32_t age = 0; age < kRetention; ++age) n += r.new_count(s, age);
    EXPECT_GE(n, news_before[s]) << "space " << s;
    EXPECT_LE(n, news_after[s] + kWriters) << "space " << s << " (a killed writer may have counted one unacknowledged kNew)";
  }
  // The restored copy keeps working: an old pair is seen, a new one is new.
  EXPECT_EQ(r.mark_if_unseen(1, key(0, 1), kRetention), WindowStatus::kSeen);
  EXPECT_EQ(r.mark_if_unseen(1, uint64_t{123'456'789'012}, kRetention), WindowStatus::kNew);
  munmap(sh, sizeof(WindowShared));
}
