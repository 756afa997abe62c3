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

LockResult robust_mutex_lock(pthread_mutex_t* m, uint32_t timeout_ms, int* err) noexcept {
  timespec deadline{};
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += static_cast<long>(timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  int rc = pthread_mutex_timedlock(m, &deadline);
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
