// lib/structures/hll/hll_snapshot.cpp: an HLL's entry in a save file (docs/save-restore.md):
// [u64 region bytes][region][u32 0]. Restore copies the registers into a fresh region inside
// create_region's init (unpublished until complete) and resets what belonged to the source's
// processes (clear token, count cache); Hll::open then validates it as untrusted bytes.
#include <cstring>
#include <string>

#include "shmfilter/hll.hpp"
#include "structures/hll/hll_impl.h"
#include "structures/snapshot_io.h"

namespace shmfilter::internal::hll {

using namespace snapshot;

// Raw regions: [u64 region bytes][region][u32 extents]{[u64 bytes][extent]}...
std::string save(Segment& seg, const RegionInfo& r) {
  Hll::open(seg, r.name);  // validates the header first
  return save_region_only(seg, r);
}

void restore(Segment& seg, const std::string& name, In in) {
  uint64_t size = in.u64();
  if (size != internal::hll::kHllRegionBytes)
    fail(ErrorCode::kBadInput, in.what + ": an HLL region of " + std::to_string(size) + " bytes (this build's are " +
                                   std::to_string(internal::hll::kHllRegionBytes) + ")");
  const unsigned char* bytes = in.take(size);
  seg.create_region(name, Kind::kHll, size, [&](std::byte* region, uint64_t, ControlTxn&) {
    std::memcpy(region, bytes, size);
    auto* hh = reinterpret_cast<internal::hll::HllHeader*>(region);
    hh->clear_token = 0;  // the source's clear, if any, is not ours
    // Nothing is in flight in the copy: equal counters, no cached count (the
    // source's counters may have been mid-change when it was saved).
    hh->sync.ends = hh->sync.begins;
    hh->sync.count_cache = 0;
  });
}

}  // namespace shmfilter::internal::hll
