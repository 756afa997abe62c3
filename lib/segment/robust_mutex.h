// lib/segment/robust_mutex.h: the process-shared ROBUST pthread mutex of the control plane.
//
// Why not Boost.Interprocess: 1.74's interprocess_mutex is a spin/futex lock
// with no owner-death notification; a holder killed by SIGKILL leaves it
// locked and every other process hangs forever. glibc's robust mutexes are
// released by the kernel when the owner dies (robust futex list) and the next
// locker gets EOWNERDEAD, which is where our undo log is applied.
#pragma once

#include <pthread.h>

#include <cstdint>

namespace shmfilter::internal {

enum class LockResult {
  kAcquired,   // normal acquisition
  kOwnerDead,  // acquired, but the previous holder died: repair, then mark_consistent()
  kTimedOut,   // a live holder kept it longer than the bound
  kUnusable,   // ENOTRECOVERABLE or another error (errno-like code in *err)
};

// Initialises a robust, process-shared, errorcheck mutex in place. Returns 0 or an errno value.
int robust_mutex_init(pthread_mutex_t* m) noexcept;
// Locks with a bound of timeout_ms (a live holder that keeps it longer yields kTimedOut), in
// short timed sleeps so that a lost futex wake costs milliseconds, not the bound (see the .cpp).
LockResult robust_mutex_lock(pthread_mutex_t* m, uint32_t timeout_ms, int* err) noexcept;
// The mutex's bytes read from the segment are untrusted: glibc aborts on some
// kind bits (priority inheritance) and waits forever for an owner thread id
// that died without the kernel marking it (a copy of a segment taken while it
// was held). kind_ok: the type/robust/pshared bits are exactly what
// robust_mutex_init writes. pristine: kind_ok and unlocked with no owner.
// (glibc's pthread_mutex_t layout: the ABI descriptor's mutex_size pins it.)
bool robust_mutex_kind_ok(const pthread_mutex_t* m) noexcept;
bool robust_mutex_pristine(const pthread_mutex_t* m) noexcept;
// After kOwnerDead and repair: makes the mutex usable again.
void robust_mutex_consistent(pthread_mutex_t* m) noexcept;
void robust_mutex_unlock(pthread_mutex_t* m) noexcept;

}  // namespace shmfilter::internal
