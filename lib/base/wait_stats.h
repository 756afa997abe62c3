// lib/base/wait_stats.h: what every bounded wait of the library reports.
//
// Each wait that can block on another process (the control mutex, flock, the
// Cuckoo writer lock and odd-version reads, the exact-set stripe locks, the
// Roaring compaction claim) notes how long it waited, on its slow path only
// (one clock read when it starts yielding, one when it ends), and notes when
// it gave up at its bound. Process-local, lock-free; nothing here is in the
// segment. The torture program (tests/torture) publishes these per worker and
// fails a round when a wait expired or lasted longer than its stall bound.
#pragma once

#include <cstdint>

namespace shmfilter::internal {

struct WaitSnapshot {
  uint64_t longest_ns = 0;          // the longest wait so far in this process
  const char* longest_site = "";    // where it was (a static string)
  uint64_t expired = 0;             // waits that gave up at their bound
  const char* expired_site = "";    // the last one's site
};

uint64_t wait_clock_ns() noexcept;  // CLOCK_MONOTONIC
void note_wait(const char* site, uint64_t waited_ns) noexcept;
void note_wait_expired(const char* site) noexcept;
WaitSnapshot wait_snapshot() noexcept;
void reset_wait_stats() noexcept;

// A wait's clock, started on its slow path (start() is idempotent); the
// destructor notes the duration when it was started.
struct SlowWait {
  const char* site;
  uint64_t t0 = 0;
  explicit SlowWait(const char* s) noexcept : site(s) {}
  void start() noexcept {
    if (t0 == 0) t0 = wait_clock_ns();
  }
  ~SlowWait() {
    if (t0 != 0) note_wait(site, wait_clock_ns() - t0);
  }
  SlowWait(const SlowWait&) = delete;
  SlowWait& operator=(const SlowWait&) = delete;
};

}  // namespace shmfilter::internal
