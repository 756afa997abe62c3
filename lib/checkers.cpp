// lib/checkers.cpp: the kind -> checker table. One line per structure.
#include "checkers.h"

namespace shmfilter::internal {

CheckerFn checker_for(Kind kind) noexcept {
  switch (kind) {
    default:
      return nullptr;
  }
}

}  // namespace shmfilter::internal
