// lib/segment/robust_mutex.cpp: see robust_mutex.h.
#include "segment/robust_mutex.h"

#include <cerrno>
#include <ctime>

namespace shmfilter::internal {

int robust_mutex_init(pthread_mutex_t* m) noexcept {
  pthread_mutexattr_t attr;
  int rc = pthread_mutexattr_init(&attr);
  if (rc != 0) return rc;
  rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  if (rc == 0) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  if (rc == 0) rc = pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
  if (rc == 0) rc = pthread_mutex_init(m, &attr);
  pthread_mutexattr_destroy(&attr);
  return rc;
}

// One futex sleep is never trusted to end by a wake: a wake can be lost when the waiter it
// went to is SIGKILLed before it takes the lock while a third process takes it first (the
// kernel's exit path wakes a successor only while the word is free; the third process's
// uncontended CAS drops FUTEX_WAITERS, so its unlock wakes nobody) and every other waiter
// would then sleep its whole bound. So the wait is a series of short timed sleeps: a lost
// wake costs at most kSliceMs. The torture found it (a worker waited 19-31 s for a free lock).
// CLOCK_MONOTONIC: a wall-clock step neither shortens nor stretches the bound.
namespace {
constexpr uint32_t kSliceMs = 20;
timespec plus_ms(timespec t, uint64_t ms) noexcept {
  t.tv_sec += static_cast<time_t>(ms / 1000);
  t.tv_nsec += static_cast<long>(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}
bool before(const timespec& a, const timespec& b) noexcept {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}
}  // namespace

LockResult robust_mutex_lock(pthread_mutex_t* m, uint32_t timeout_ms, int* err) noexcept {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const timespec deadline = plus_ms(now, timeout_ms);
  int rc = 0;
  for (;;) {
    timespec slice = plus_ms(now, kSliceMs);
    if (before(deadline, slice)) slice = deadline;
    rc = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &slice);
    if (rc != ETIMEDOUT) break;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!before(now, deadline)) break;
  }
  if (err != nullptr) *err = rc;
  switch (rc) {
    case 0: return LockResult::kAcquired;
    case EOWNERDEAD: return LockResult::kOwnerDead;
    case ETIMEDOUT: return LockResult::kTimedOut;
    default: return LockResult::kUnusable;
  }
}

// glibc keeps the mutex type, robust and process-shared bits in __data.__kind;
// compare them with a mutex this build initialises the same way.
static int reference_kind() noexcept {
  static const int kind = [] {
    pthread_mutex_t ref;
    robust_mutex_init(&ref);
    int k = ref.__data.__kind;
    pthread_mutex_destroy(&ref);
    return k;
  }();
  return kind;
}

bool robust_mutex_kind_ok(const pthread_mutex_t* m) noexcept {
  return __atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED) == reference_kind();
}

bool robust_mutex_pristine(const pthread_mutex_t* m) noexcept {
  return robust_mutex_kind_ok(m) && __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) == 0 &&
         __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) == 0;
}

void robust_mutex_consistent(pthread_mutex_t* m) noexcept { pthread_mutex_consistent(m); }

void robust_mutex_unlock(pthread_mutex_t* m) noexcept { pthread_mutex_unlock(m); }

}  // namespace shmfilter::internal
