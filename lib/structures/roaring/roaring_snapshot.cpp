// lib/structures/roaring/roaring_snapshot.cpp: a Roaring set's entry in a save file
// (docs/save-restore.md): [u32 maximum delta capacity][portable serialization], restored
// with RoaringSet::create_from (published complete).
#include <roaring/roaring.h>

#include <memory>
#include <string>
#include <string_view>

#include "shmfilter/roaring_set.hpp"
#include "structures/roaring/roaring_impl.h"
#include "structures/snapshot_io.h"

namespace shmfilter::internal::roaring {

using namespace snapshot;

// Roaring: [u32 maximum delta capacity][portable serialization].
std::string save(Segment& seg, const RegionInfo& r) {
  RoaringSet set = RoaringSet::open(seg, r.name);
  Out o;
  o.u32(static_cast<uint32_t>(set.stats().delta_max_capacity));  // the option (the active delta grows to it)
  o.b += set.export_portable();
  return o.b;
}

void restore(Segment& seg, const std::string& name, In in) {
  RoaringOptions ro;
  ro.delta_capacity = in.u32();
  const size_t n = in.left;
  const unsigned char* bytes = in.take(n);
  roaring_bitmap_t* b = RoaringSet::parse_portable(std::string_view(reinterpret_cast<const char*>(bytes), n));
  std::unique_ptr<roaring_bitmap_t, void (*)(roaring_bitmap_t*)> guard(b, [](roaring_bitmap_t* x) {
    roaring_bitmap_free(x);
  });
  RoaringSet::create_from(seg, name, b, ro);
}

}  // namespace shmfilter::internal::roaring
