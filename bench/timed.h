// bench/timed.h: clocks, clock-cost measurement and latency percentiles for
// the plain-program benches (latency, scaling, memory, redis_compare).
//
// Clock. On x86-64 with an invariant TSC (constant_tsc + nonstop_tsc in
// /proc/cpuinfo) a sample is `lfence; rdtsc; lfence` on each side of the
// operation: the fences stop the CPU from moving the operation's loads across
// the reads. Otherwise clock_gettime(CLOCK_MONOTONIC) (vDSO). Ticks are
// converted to ns with a frequency calibrated against CLOCK_MONOTONIC.
//
// Clock cost. Two back-to-back reads with nothing between them measure the
// cost of one sample's bracket; its median (clock_cost_ticks) is subtracted
// from every sample (floored at 0), so a reported latency is the operation's
// own time. The cost itself is printed with every table.
//
// Percentiles: every sample is kept (a few hundred thousand floats) and the
// exact order statistics are taken: no bucketing error.
#pragma once

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace shmf_bench {

inline uint64_t mono_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

class Clock {
 public:
  Clock() {
#if defined(__x86_64__)
    std::ifstream f("/proc/cpuinfo");
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    use_tsc_ = all.find(" constant_tsc") != std::string::npos && all.find(" nonstop_tsc") != std::string::npos;
#endif
    calibrate();
  }
  // One clock read (ticks). Fenced on x86-64 so that the timed work stays between two reads.
  inline uint64_t now() const noexcept {
#if defined(__x86_64__)
    if (use_tsc_) {
      _mm_lfence();
      uint64_t t = __rdtsc();
      _mm_lfence();
      return t;
    }
#endif
    return mono_ns();
  }
  double ns_per_tick() const noexcept { return ns_per_tick_; }
  uint64_t cost_ticks() const noexcept { return cost_ticks_; }
  double cost_ns() const noexcept { return static_cast<double>(cost_ticks_) * ns_per_tick_; }
  double gettime_cost_ns() const noexcept { return gettime_cost_ns_; }
  // Smallest nonzero step seen between two reads: samples are multiples of about this.
  double resolution_ns() const noexcept { return resolution_ns_; }
  const char* source() const noexcept { return use_tsc_ ? "rdtsc (lfence-fenced, invariant TSC)" : "clock_gettime(CLOCK_MONOTONIC)"; }
  // Ticks of a measured interval, with the clock's own cost taken off (never below 0).
  inline double ns_of(uint64_t t0, uint64_t t1) const noexcept {
    uint64_t d = t1 - t0;
    d = d > cost_ticks_ ? d - cost_ticks_ : 0;
    return static_cast<double>(d) * ns_per_tick_;
  }

 private:
  void calibrate() {
    // Frequency: ticks over 100 ms of CLOCK_MONOTONIC.
    if (use_tsc_) {
      const uint64_t n0 = mono_ns(), t0 = now();
      while (mono_ns() - n0 < 100000000ull) {
      }
      const uint64_t n1 = mono_ns(), t1 = now();
      ns_per_tick_ = static_cast<double>(n1 - n0) / static_cast<double>(t1 - t0);
    }
    // Cost of one bracket: median of back-to-back reads.
    std::vector<uint64_t> d(200001);
    for (auto& x : d) {
      const uint64_t a = now(), b = now();
      x = b - a;
    }
    std::sort(d.begin(), d.end());
    cost_ticks_ = d[d.size() / 2];
    // Resolution: the smallest gap between two distinct bracket readings.
    uint64_t step = ~0ull;
    for (size_t i = 1; i < d.size(); ++i)
      if (d[i] > d[i - 1]) step = std::min(step, d[i] - d[i - 1]);
    resolution_ns_ = step == ~0ull ? 0 : static_cast<double>(step) * ns_per_tick_;
    std::vector<uint64_t> g(200001);
    for (auto& x : g) {
      const uint64_t a = mono_ns(), b = mono_ns();
      x = b - a;
    }
    std::nth_element(g.begin(), g.begin() + g.size() / 2, g.end());
    gettime_cost_ns_ = static_cast<double>(g[g.size() / 2]);
  }
  bool use_tsc_ = false;
  double ns_per_tick_ = 1.0;
  uint64_t cost_ticks_ = 0;
  double gettime_cost_ns_ = 0;
  double resolution_ns_ = 0;
};

// All samples of one measurement (ns); exact percentiles.
class Samples {
 public:
  void reserve(size_t n) { v_.reserve(n); }
  void add(double ns) { v_.push_back(static_cast<float>(ns)); }
  size_t size() const noexcept { return v_.size(); }
  // q in [0, 1]: the ceil(q * n)-th smallest sample (nearest-rank definition).
  double pct(double q) {
    if (v_.empty()) return 0;
    sort();
    size_t r = static_cast<size_t>(std::ceil(q * static_cast<double>(v_.size())));
    r = std::clamp<size_t>(r, 1, v_.size());
    return v_[r - 1];
  }
  double mean() const {
    double s = 0;
    for (float x : v_) s += x;
    return v_.empty() ? 0 : s / static_cast<double>(v_.size());
  }
  void clear() {
    v_.clear();
    sorted_ = false;
  }

 private:
  void sort() {
    if (!sorted_) std::sort(v_.begin(), v_.end());
    sorted_ = true;
  }
  std::vector<float> v_;
  bool sorted_ = false;
};

// "12.3 ns", "4.56 us", "7.89 ms"
inline std::string fmt_ns(double ns) {
  char b[32];
  if (ns < 1000) snprintf(b, sizeof b, "%.1f ns", ns);
  else if (ns < 1e6) snprintf(b, sizeof b, "%.2f us", ns / 1e3);
  else snprintf(b, sizeof b, "%.2f ms", ns / 1e6);
  return b;
}

inline std::string fmt_bytes(double b) {
  char s[32];
  if (b < 1024) snprintf(s, sizeof s, "%.0f B", b);
  else if (b < 1024.0 * 1024) snprintf(s, sizeof s, "%.1f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024) snprintf(s, sizeof s, "%.1f MiB", b / 1024 / 1024);
  else snprintf(s, sizeof s, "%.2f GiB", b / 1024 / 1024 / 1024);
  return s;
}

// Reads "L3 cache: 32 MiB (1 instance)" style sizes from sysfs: the largest
// data/unified cache of cpu0 in bytes (0 if unknown).
inline uint64_t llc_bytes() {
  uint64_t best = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    if (!f) continue;
    std::string s;
    f >> s;
    if (s.empty()) continue;
    uint64_t v = std::stoull(s);
    if (s.back() == 'K') v <<= 10;
    else if (s.back() == 'M') v <<= 20;
    best = std::max(best, v);
  }
  return best;
}

// Keeps a value alive without a memory clobber (the compiler must compute it).
template <class T>
inline void keep(const T& v) noexcept {
  asm volatile("" : : "r,m"(v));
}

}  // namespace shmf_bench
