// lib/structures/roaring/roaring_search.h: membership inside one Roaring container's
// values, over (pointer, count): the array and run searches the container
// table (roaring_containers.h) answers lookups with. No CRoaring types: the
// container kernels do not include CRoaring.
#pragma once

#include <cstdint>

namespace shmfilter::internal::roaring {

// Interpolation search over a sorted array of n uint16 values: the guess
// (low * n) >> 16 lands within ~sqrt(n)/2 positions for uniform values (n =
// 1,830, the mission's density: sigma ~21 positions = 42 bytes), so a window
// of +-32 positions (2-3 cache lines, fetched in parallel) usually holds the
// answer; otherwise a binary search over the rest.
inline bool array_contains_interp(const uint16_t* a, uint32_t n, uint16_t low) noexcept {
  if (n == 0) return false;
  int32_t g = static_cast<int32_t>((uint32_t{low} * n) >> 16);
  int32_t lo = g - 32 < 0 ? 0 : g - 32;
  int32_t hi = g + 32 > static_cast<int32_t>(n) ? static_cast<int32_t>(n) : g + 32;
  if (a[lo] > low) {
    hi = lo;
    lo = 0;
  } else if (a[hi - 1] < low) {
    lo = hi;
    hi = static_cast<int32_t>(n);
  }
  while (lo < hi) {  // lower bound of low in [lo, hi): the first a[i] >= low
    int32_t mid = lo + (hi - lo) / 2;
    if (a[mid] < low)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < static_cast<int32_t>(n) && a[lo] == low;
}

inline bool run_contains(const uint16_t* runs, uint32_t nruns, uint16_t low) noexcept {
  // runs: nruns pairs {start, length}: [start, start + length]. Last run with start <= low.
  int32_t lo = 0, hi = static_cast<int32_t>(nruns) - 1, found = -1;
  while (lo <= hi) {
    int32_t mid = (lo + hi) / 2;
    if (runs[2 * mid] <= low) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return found >= 0 && uint32_t{low} - runs[2 * found] <= runs[2 * found + 1];
}

}  // namespace shmfilter::internal::roaring
