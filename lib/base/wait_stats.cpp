// lib/base/wait_stats.cpp: the process-local record of bounded waits (wait_stats.h).
#include "base/wait_stats.h"

#include <time.h>

#include <atomic>

namespace shmfilter::internal {
namespace {
std::atomic<uint64_t> g_longest_ns{0};
std::atomic<const char*> g_longest_site{""};
std::atomic<uint64_t> g_expired{0};
std::atomic<const char*> g_expired_site{""};
}  // namespace

uint64_t wait_clock_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void note_wait(const char* site, uint64_t waited_ns) noexcept {
  uint64_t cur = g_longest_ns.load(std::memory_order_relaxed);  // relaxed: a statistic; the CAS below orders nothing
  while (waited_ns > cur) {
    if (g_longest_ns.compare_exchange_weak(cur, waited_ns, std::memory_order_relaxed)) {
      g_longest_site.store(site, std::memory_order_relaxed);  // relaxed: diagnostics (may name a near-longest)
      return;
    }
  }
}

void note_wait_expired(const char* site) noexcept {
  g_expired_site.store(site, std::memory_order_relaxed);  // relaxed: diagnostics
  g_expired.fetch_add(1, std::memory_order_relaxed);     // relaxed: a counter
}

WaitSnapshot wait_snapshot() noexcept {
  WaitSnapshot s;
  s.longest_ns = g_longest_ns.load(std::memory_order_relaxed);  // relaxed: statistics
  s.longest_site = g_longest_site.load(std::memory_order_relaxed);
  s.expired = g_expired.load(std::memory_order_relaxed);
  s.expired_site = g_expired_site.load(std::memory_order_relaxed);
  return s;
}

void reset_wait_stats() noexcept {
  g_longest_ns.store(0, std::memory_order_relaxed);  // relaxed: single-threaded use (a fresh torture worker)
  g_longest_site.store("", std::memory_order_relaxed);
  g_expired.store(0, std::memory_order_relaxed);
  g_expired_site.store("", std::memory_order_relaxed);
}

}  // namespace shmfilter::internal
