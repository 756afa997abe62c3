// lib/structures/roaring_index.cpp: builds the per-view container index of
// roaring_index.h from CRoaring's frozen view (its container structs point
// into the frozen bytes; 0.2.66's layouts from <roaring/containers/*.h>).
#include "structures/roaring_index.h"

#include <roaring/containers/array.h>
#include <roaring/containers/bitset.h>
#include <roaring/containers/containers.h>
#include <roaring/containers/run.h>
#include <roaring/roaring_array.h>

namespace shmfilter::internal::roaring {

std::unique_ptr<uint64_t[]> build_index(const roaring_bitmap_t* bm, const char* frozen, uint64_t len) {
  const roaring_array_t& ra = bm->high_low_container;
  if (ra.size < 0 || static_cast<uint32_t>(ra.size) < kIndexMinContainers || len < kIndexMinFrozenBytes) return nullptr;
  std::unique_ptr<uint64_t[]> idx(new uint64_t[65536]());
  // A container's data must lie inside the frozen bytes, or we do not index.
  auto offset_of = [&](const void* p, uint64_t bytes, uint64_t* off) {
    const char* c = static_cast<const char*>(p);
    if (c < frozen || static_cast<uint64_t>(c - frozen) > len || bytes > len - static_cast<uint64_t>(c - frozen))
      return false;
    *off = static_cast<uint64_t>(c - frozen);
    return *off < (uint64_t{1} << 40);
  };
  for (int32_t i = 0; i < ra.size; ++i) {
    const void* c = ra.containers[i];
    uint64_t off = 0;
    switch (ra.typecodes[i]) {
      case BITSET_CONTAINER_TYPE_CODE: {
        auto* b = static_cast<const bitset_container_t*>(c);
        if (!offset_of(b->array, 8192, &off)) return nullptr;
        idx[ra.keys[i]] = index_word(off, kCBitmap, 0);
        break;
      }
      case ARRAY_CONTAINER_TYPE_CODE: {
        auto* a = static_cast<const array_container_t*>(c);
        if (a->cardinality <= 0 || a->cardinality > 4096 ||
            !offset_of(a->array, uint64_t(a->cardinality) * 2, &off))
          return nullptr;
        idx[ra.keys[i]] = index_word(off, kCArray, static_cast<uint32_t>(a->cardinality));
        break;
      }
      case RUN_CONTAINER_TYPE_CODE: {
        auto* r = static_cast<const run_container_t*>(c);
        if (r->n_runs <= 0 || r->n_runs > 32768 || !offset_of(r->runs, uint64_t(r->n_runs) * 4, &off)) return nullptr;
        idx[ra.keys[i]] = index_word(off, kCRun, static_cast<uint32_t>(r->n_runs));
        break;
      }
      default: return nullptr;  // shared containers never appear in a frozen view
    }
  }
  return idx;
}

}  // namespace shmfilter::internal::roaring
