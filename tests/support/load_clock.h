// tests/support/load_clock.h: hang bounds that a loaded machine cannot trip.
//
// A hang detector must tell "stuck" from "slow": on a 2-core CI machine that
// also runs ctest -j, other engineers' builds and a torture test (load 8..20),
// a healthy process can wait seconds for a CPU. The bounds below are therefore
// in "uncontended seconds":
//
//   LoadClock   a clock that advances at wall speed divided by the CPU
//               contention it measures while it runs: the number of runnable
//               tasks per CPU (the 4th field of /proc/loadavg, instantaneous,
//               minus the sampler itself), at least 1. On an idle machine it
//               is the wall clock; with 20 runnable tasks on 2 CPUs, ten wall
//               seconds are one uncontended second. It only advances while
//               someone calls tick() (the waiting loops below call it every
//               few ms). A stuck process is still found: it never makes
//               progress, so any finite bound expires.
//   time_scale  a constant factor on every bound: 3 under AddressSanitizer
//               (instrumented code runs 2..5x slower), times the environment
//               variable SHMF_TEST_TIME_SCALE when set (a slow machine,
//               valgrind). 1 otherwise.
//
// These are hang detectors, not speed tests: nothing here may be used to
// assert that something is fast (speed goes to bench/).
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>

namespace shmf_test {

inline uint64_t wall_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// 3 under ASan, times SHMF_TEST_TIME_SCALE (a positive number) when set.
inline double time_scale() noexcept {
  double s = 1.0;
#if defined(__SANITIZE_ADDRESS__)
  s = 3.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  s = 3.0;
#endif
#endif
  if (const char* e = std::getenv("SHMF_TEST_TIME_SCALE")) {
    char* end = nullptr;
    double v = std::strtod(e, &end);
    if (end != e && v > 0) s *= v;
  }
  return s;
}

// CPUs this process may run on (at least 1).
inline int usable_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// Runnable tasks now (the kernel's nr_running, /proc/loadavg's "R/T" numerator), -1 if unreadable.
inline int runnable_tasks() noexcept {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return -1;
  double a, b, c;
  int running = -1, total = 0;
  if (std::fscanf(f, "%lf %lf %lf %d/%d", &a, &b, &c, &running, &total) != 5) running = -1;
  std::fclose(f);
  return running;
}

class LoadClock {
 public:
  LoadClock() : cpus_(usable_cpus()), last_wall_(wall_ns()) { ring_.push_back({last_wall_, 0}); }

  // Advances the clock by the wall time since the last tick, divided by the
  // contention measured now (the mean of this and the previous sample).
  void tick() noexcept {
    const uint64_t now = wall_ns();
    const int r = runnable_tasks();
    // The sampler is running while it reads: it is not competition.
    const double f = r < 0 ? 1.0 : std::max(1.0, double(r - 1) / double(cpus_));
    const double mean = (f + last_factor_) / 2;
    fair_ += double(now - last_wall_) / mean;
    last_wall_ = now;
    last_factor_ = f;
    max_factor_ = std::max(max_factor_, f);
    if (now - ring_.back().wall >= 50'000'000ull) {  // a (wall, fair) pair every 50 ms, the last 15 min
      ring_.push_back({now, uint64_t(fair_)});
      while (ring_.size() > 18000) ring_.pop_front();
    }
  }
  uint64_t now() noexcept {
    tick();
    return uint64_t(fair_);
  }
  // The fair clock at wall time w (in the past; within 50 ms; the oldest kept sample before that).
  uint64_t at(uint64_t w) const noexcept {
    if (w >= last_wall_) return uint64_t(fair_);
    auto it = std::upper_bound(ring_.begin(), ring_.end(), w, [](uint64_t x, const Sample& s) { return x < s.wall; });
    if (it == ring_.begin()) return ring_.front().fair;
    return std::prev(it)->fair;
  }
  // Contention factors seen so far: the largest, and the mean over the clock's life.
  double max_factor() const noexcept { return max_factor_; }
  double mean_factor() const noexcept {
    const double wall = double(last_wall_ - ring_.front().wall);
    return fair_ > 0 ? std::max(1.0, wall / fair_) : 1.0;
  }

 private:
  struct Sample {
    uint64_t wall;
    uint64_t fair;
  };
  int cpus_;
  uint64_t last_wall_;
  double fair_ = 0, last_factor_ = 1.0, max_factor_ = 1.0;
  std::deque<Sample> ring_;
};

// Waits for child pid. It is hung when `progress` (nullptr: none) has not
// changed for bound_s uncontended seconds (LoadClock) x time_scale(); without
// a progress counter, when it runs that long in all. On a hang: SIGCONT,
// SIGKILL, reap, false. True (status set) when the child ended by itself.
// Prints what a child that is about to be killed as hung is doing: its state and
// kernel wait channel from /proc, and, where gdb is installed, every thread's
// stack (bounded by timeout(1): a wedged gdb must not hang the test). A hang that
// a loaded CI machine shows once is then diagnosable from the log alone.
inline void dump_hung_child(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  if (FILE* f = std::fopen(path, "r")) {
    char line[512] = {0};
    if (std::fgets(line, sizeof line, f) != nullptr) std::fprintf(stderr, "hung child %d: stat: %s", int(pid), line);
    std::fclose(f);
  }
  std::snprintf(path, sizeof path, "/proc/%d/wchan", int(pid));
  if (FILE* f = std::fopen(path, "r")) {
    char line[128] = {0};
    if (std::fgets(line, sizeof line, f) != nullptr) std::fprintf(stderr, "hung child %d: wchan: %s\n", int(pid), line);
    std::fclose(f);
  }
  if (std::system("command -v gdb >/dev/null 2>&1") != 0) return;
  char cmd[256];
  std::snprintf(cmd, sizeof cmd,
                "timeout 30 gdb -batch -nx -p %d -ex 'thread apply all bt' </dev/null 2>&1 | "
                "grep -E '^(#|Thread)' 1>&2",
                int(pid));
  std::fflush(nullptr);
  if (std::system(cmd) != 0) std::fprintf(stderr, "hung child %d: no stack (gdb could not attach)\n", int(pid));
}

// on_hang (optional) runs before a hung child is killed: to print what the
// processes it may be waiting for are doing.
inline bool wait_child_bounded(pid_t pid, double bound_s, int& status,
                               const std::function<uint64_t()>& progress = nullptr,
                               const std::function<void()>& on_hang = nullptr) {
  LoadClock clock;
  const uint64_t bound = uint64_t(bound_s * time_scale() * 1e9);
  uint64_t seen = progress ? progress() : 0;
  uint64_t since = clock.now();
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;
    const uint64_t now = clock.now();
    if (progress) {
      const uint64_t p = progress();
      if (p != seen) {
        seen = p;
        since = now;
      }
    }
    if (now - since > bound) {
      kill(pid, SIGCONT);
      dump_hung_child(pid);
      if (on_hang) on_hang();
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return false;
    }
    usleep(2000);
  }
}

}  // namespace shmf_test
