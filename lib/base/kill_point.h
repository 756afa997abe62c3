// lib/base/kill_point.h: named points where a test can SIGKILL the process.
//
// SHMF_KILL_POINT("cuckoo.move.after_copy") compiles to nothing unless the
// library is built with -DSHMFILTER_KILL_POINTS=ON (default OFF; scripts/test.sh
// and CI turn it on; tests that arm points are registered only then). When compiled in, the point costs one relaxed
// load of a process-local flag until a test arms it:
//   - arm_kill_point("name", nth) in a forked child, or
//   - SHMF_KILL_POINT=name[:nth] in the environment (read once, at first hit).
// The nth time the armed point is reached, the process raises SIGKILL.
// Names are "<area>.<operation>.<where>", listed in docs/CONCURRENCY.md.
#pragma once

#include <cstdint>

namespace shmfilter::internal {

void kill_point_hit(const char* name) noexcept;
void arm_kill_point(const char* name, uint64_t nth = 1) noexcept;
void disarm_kill_points() noexcept;
// How many times `name` was reached in this process since it was armed (tests).
uint64_t kill_point_count(const char* name) noexcept;

}  // namespace shmfilter::internal

#if defined(SHMFILTER_KILL_POINTS) && SHMFILTER_KILL_POINTS
#define SHMF_KILL_POINT(name) ::shmfilter::internal::kill_point_hit(name)
#else
#define SHMF_KILL_POINT(name) ((void)0)
#endif
