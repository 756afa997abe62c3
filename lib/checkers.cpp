// lib/checkers.cpp: the kind -> checker table. One line per structure.
#include "checkers.h"
#include "cuckoo_impl.h"  // check_cuckoo

#include "bloom_impl.h"

namespace shmfilter::internal {

CheckerFn checker_for(Kind kind) noexcept {
  switch (kind) {
    case Kind::kBloom: return check_bloom;
    case Kind::kCuckoo: return &check_cuckoo;
    case Kind::kRoaring: { void check_roaring(Segment&, const RegionInfo&, bool, CheckReport&); return check_roaring; }
    default:
      return nullptr;
  }
}

}  // namespace shmfilter::internal
