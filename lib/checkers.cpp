// lib/checkers.cpp: the kind -> checker table. One line per structure.
#include "checkers.h"

#include "bloom_impl.h"

namespace shmfilter::internal {

CheckerFn checker_for(Kind kind) noexcept {
  switch (kind) {
    case Kind::kBloom: return check_bloom;
    default:
      return nullptr;
  }
}

}  // namespace shmfilter::internal
