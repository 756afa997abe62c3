// bench/window_common.h: what the window benches share (window_bench, window_cuckoo_bench,
// window_v2_bench): the simulated week's clock, the mission's (plan, device) pairs of
// tests/support/workload.h, filling a bucket with them, the cache sweep every out-of-cache
// section starts from, and the list of window variants the library offers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "shmfilter/error.hpp"
#include "shmfilter/window.hpp"
#include "timed.h"
#include "workload.h"

namespace shmf_bench {

constexpr int64_t kWinDay = 86400;
constexpr int64_t kWinT0 = 1764547200;  // 2025-12-01 00:00 UTC: day d of the bench is kWinT0 + d * kWinDay
constexpr uint32_t kWinPlans = 8000;    // the mission's active plans

struct WinPair {
  uint64_t space, item;
};

// Pair i of the workload: its plan (Zipf) and its 64-bit device id.
inline WinPair win_pair(const Workload& wl, uint64_t i) noexcept { return WinPair{wl.plan_of(i), wl.device_of(i)}; }

// Marks pairs first .. first + n - 1 of `wl` into the window's current bucket (mark_many in
// calls of 65,536 pairs).
inline void mark_pairs(shmfilter::Window& w, const Workload& wl, uint64_t first, uint64_t n) {
  std::vector<uint64_t> sp(std::min<uint64_t>(n, 1 << 16)), it(sp.size());
  for (uint64_t at = 0; at < n; at += sp.size()) {
    const size_t m = static_cast<size_t>(std::min<uint64_t>(sp.size(), n - at));
    for (size_t j = 0; j < m; ++j) {
      const WinPair p = win_pair(wl, first + at + j);
      sp[j] = p.space;
      it[j] = p.item;
    }
    w.mark_many(std::span<const uint64_t>(sp.data(), m), std::span<const uint64_t>(it.data(), m));
  }
}

// Every window variant this build of the library offers: each WindowVariant value that
// Window::plan accepts (it refuses an unknown one with kInvalidArgument), so a bench that
// loops over this list measures a new variant without being edited.
inline std::vector<shmfilter::WindowVariant> window_variants() {
  std::vector<shmfilter::WindowVariant> out;
  for (uint32_t v = 0; v < 256; ++v) {
    shmfilter::WindowOptions o;
    o.variant = static_cast<shmfilter::WindowVariant>(v);
    o.expected_per_bucket = 1000000;
    o.retention = 7;
    try {
      (void)shmfilter::Window::plan(o);
      out.push_back(o.variant);
    } catch (const shmfilter::Error&) {
    }
  }
  return out;
}

// Reads and writes a buffer of 2x the last-level cache (at least 64 MiB), so the section after
// it starts with none of the structures' lines cached.
class CacheSweep {
 public:
  CacheSweep() : buf_(std::max<uint64_t>(2 * llc_bytes(), 64ull << 20), 1) {}
  void run() {
    for (size_t i = 0; i < buf_.size(); i += 64) sink_ += static_cast<uint64_t>(buf_[i]++);
    keep(sink_);
  }
  uint64_t bytes() const noexcept { return buf_.size(); }

 private:
  std::vector<char> buf_;
  uint64_t sink_ = 0;
};

}  // namespace shmf_bench
