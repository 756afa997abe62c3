// lib/check/checkers.cpp: the kind -> checker table. One line per structure.
#include "check/checkers.h"

#include "structures/bloom_impl.h"   // bloom::check_bloom
#include "structures/cuckoo_impl.h"  // check_cuckoo
#include "structures/window_impl.h"  // check_window

namespace shmfilter::internal {

void check_roaring(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);    // lib/structures/roaring.cpp
void check_hll(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);        // lib/structures/hll.cpp
void check_exact_set(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);  // lib/structures/exact_set.cpp

CheckerFn checker_for(Kind kind) noexcept {
  switch (kind) {
    case Kind::kBloom: return &check_bloom;
    case Kind::kCuckoo: return &check_cuckoo;
    case Kind::kRoaring: return &check_roaring;
    case Kind::kHll: return &check_hll;
    case Kind::kExactSet: return &check_exact_set;
    case Kind::kWindow: return &check_window;
    default:
      return nullptr;
  }
}

}  // namespace shmfilter::internal
