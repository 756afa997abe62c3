// lib/base/cpu_relax.h: the pause every spin-wait of the library issues between two tries.
//
// PAUSE on x86 (saves power and the memory-order flush when the spun-on line changes);
// nothing elsewhere. Spins are bounded by their callers, which yield or sleep after a few.
#pragma once

namespace shmfilter::internal {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace shmfilter::internal
