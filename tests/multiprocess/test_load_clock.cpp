// tests/multiprocess/test_load_clock.cpp: the hang detectors of the tests
// (tests/support/load_clock.h) still find a hang, never call progress one, and
// their clock slows down when the CPUs are contended.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include "load_clock.h"
#include "test_util.h"

namespace {

using shmf_test::LoadClock;
using shmf_test::wait_child_bounded;

TEST(LoadClock, AChildThatNeverProgressesIsReportedHungAndKilled) {
  pid_t pid = shmf_test::fork_child([] {
    for (;;) pause();  // blocked forever: no CPU, no progress
    return 0;
  });
  int st = 0;
  EXPECT_FALSE(wait_child_bounded(pid, 1, st)) << "a child blocked forever was not reported hung";
  EXPECT_TRUE(shmf_test::killed_by(st, SIGKILL)) << "the hung child was not killed and reaped: status " << st;
}

TEST(LoadClock, ASpinningChildWithoutProgressIsReportedHung) {
  auto* counter = static_cast<std::atomic<uint64_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(counter, MAP_FAILED);
  new (counter) std::atomic<uint64_t>(0);
  pid_t pid = shmf_test::fork_child([&] {
    counter->store(1);
    // livelock: uses a CPU, completes nothing. The relaxed load keeps the loop defined:
    // a loop without one ([intro.progress]) is undefined, and clang acts on it.
    for (;;) (void)counter->load(std::memory_order_relaxed);
    return 0;
  });
  int st = 0;
  EXPECT_FALSE(wait_child_bounded(pid, 1, st, [&] { return counter->load(); }));
  EXPECT_TRUE(shmf_test::killed_by(st, SIGKILL));
  munmap(counter, 4096);
}

// Progress resets the bound: a child that runs for several bounds in all but completes an
// operation every 10 ms is never hung.
TEST(LoadClock, AChildThatKeepsProgressingIsNotHungHoweverLongItRuns) {
  auto* counter = static_cast<std::atomic<uint64_t>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(counter, MAP_FAILED);
  new (counter) std::atomic<uint64_t>(0);
  pid_t pid = shmf_test::fork_child([&] {
    for (int i = 0; i < 300; ++i) {  // >= 3 s in all
      usleep(10000);
      counter->fetch_add(1);
    }
    return 0;
  });
  int st = 0;
  EXPECT_TRUE(wait_child_bounded(pid, 1, st, [&] { return counter->load(); })) << "a progressing child was killed";
  EXPECT_TRUE(shmf_test::exited_ok(st)) << "status " << st;
  EXPECT_EQ(counter->load(), 300u);
  munmap(counter, 4096);
}

// With twice as many spinning processes as CPUs, at least 2 runnable tasks wait per CPU
// besides the sampler: the clock runs at most at half the wall speed (the first interval
// may count as (1 + 2) / 2; the bound below allows for it).
TEST(LoadClock, RunsSlowerWhileTheCpusAreContended) {
  const int hogs = 2 * shmf_test::usable_cpus();
  auto* go = static_cast<std::atomic<int>*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(go, MAP_FAILED);
  new (go) std::atomic<int>(0);
  std::vector<pid_t> kids;
  for (int i = 0; i < hogs; ++i)
    kids.push_back(shmf_test::fork_child([&] {
      go->fetch_add(1);
      for (;;) (void)go->load(std::memory_order_relaxed);  // spins (defined: an atomic access)
      return 0;
    }));
  while (go->load() < hogs) usleep(1000);  // every hog runs (bounded by the ctest TIMEOUT only: fork_child)
  LoadClock clock;
  const uint64_t w0 = shmf_test::wall_ns();
  uint64_t f = 0;
  while (shmf_test::wall_ns() - w0 < 500'000'000ull) {
    f = clock.now();
    usleep(1000);
  }
  const uint64_t wall = shmf_test::wall_ns() - w0;
  for (pid_t k : kids) kill(k, SIGKILL);
  for (pid_t k : kids) shmf_test::wait_status(k);
  EXPECT_LE(double(f), 0.6 * double(wall)) << "fair " << f << " ns over " << wall << " ns of wall time with " << hogs
                                           << " spinning processes on " << shmf_test::usable_cpus() << " CPUs";
  EXPECT_GE(clock.max_factor(), 2.0);
  munmap(go, 4096);
}

}  // namespace
