// lib/check/checkers.cpp: the kind -> checker table. One line per structure;
// each checker is declared the same way in its lib/structures/X_impl.h as
// internal::X::check_X (none is declared here by hand).
#include "check/checkers.h"

#include "structures/bloom_impl.h"
#include "structures/cuckoo_impl.h"
#include "structures/exact_set_impl.h"
#include "structures/hll_impl.h"
#include "structures/roaring_impl.h"

namespace shmfilter::internal {

namespace {

struct CheckerRow {
  Kind kind;
  CheckerFn check;
};

constexpr CheckerRow kCheckers[] = {
    {Kind::kBloom, &bloom::check_bloom},
    {Kind::kCuckoo, &cuckoo::check_cuckoo},
    {Kind::kRoaring, &roaring::check_roaring},
    {Kind::kHll, &hll::check_hll},
    {Kind::kExactSet, &exact_set::check_exact_set},
    // Kind::kBlob has no checker: raw bytes, only its region bounds are checked.
};

}  // namespace

CheckerFn checker_for(Kind kind) noexcept {
  for (const CheckerRow& row : kCheckers)
    if (row.kind == kind) return row.check;
  return nullptr;
}

}  // namespace shmfilter::internal
