// lib/base/hash.cpp
#include "base/hash.h"

#include <sys/random.h>

#include <chrono>

namespace shmfilter::internal {

uint64_t random_seed() noexcept {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed)) {
    seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return seed;
}

}  // namespace shmfilter::internal
