// lib/structures/exact_set/exact_set_snapshot.cpp: an exact set's entry in a save file
// (docs/save-restore.md): [u64 region bytes][region][u32 0], the slots read with relaxed
// atomic loads while writers run. Restore validates the header against the size, copies,
// and recomputes the per-stripe counts and hints from the slots; locks and intents of the
// source's processes are reset.
#include <cstring>
#include <string>

#include "shmfilter/exact_set.hpp"
#include "structures/exact_set/exact_set_impl.h"
#include "structures/snapshot_io.h"

namespace shmfilter::internal::exact_set {

using namespace snapshot;

std::string save(Segment& seg, const RegionInfo& r) {
  ExactSet::open(seg, r.name);  // validates the header first
  return save_region_only(seg, r);
}

void restore(Segment& seg, const std::string& name, In in) {
  uint64_t size = in.u64();
  if (size < sizeof(ExactSetHeader)) fail(ErrorCode::kBadInput, in.what + ": a set region shorter than its header");
  const unsigned char* bytes = in.take(size);
  ExactSetHeader h;
  std::memcpy(&h, bytes, sizeof h);
  if (h.magic != internal::exact_set::kMagic || h.version != kLayoutVersion)
    fail(ErrorCode::kBadInput, in.what + ": not an exact set of layout version " + std::to_string(kLayoutVersion));
  // Both offsets inside the region first, so the sums below cannot wrap (found by fuzz_restore:
  // stripes_offset 2^64 - 64 passed the stripes-before-slots test and restore wrote the
  // stripes over the extent header before the region).
  if (h.stripes_offset > size || h.slots_offset > size || h.stripes == 0 || (h.stripes & (h.stripes - 1)) != 0 ||
      h.stripes_offset < sizeof(ExactSetHeader) || h.slots < 8 || h.stripes_offset + uint64_t{h.stripes} * sizeof(ExactSetStripe) > h.slots_offset ||
      h.slots > (size - h.slots_offset) / 8 || h.slots_offset + h.slots * 8 != size)
    fail(ErrorCode::kBadInput, in.what + ": the set's header does not match its size");
  seg.create_region(name, Kind::kExactSet, size, [&](std::byte* region, uint64_t, ControlTxn&) {
    std::memcpy(region, bytes, size);
    auto* hh = reinterpret_cast<ExactSetHeader*>(region);
    auto* stripes = reinterpret_cast<ExactSetStripe*>(region + hh->stripes_offset);
    auto* slots = reinterpret_cast<uint64_t*>(region + hh->slots_offset);
    // Locks and intents belonged to the source's processes; counts are recomputed from the slots.
    for (uint32_t s = 0; s < hh->stripes; ++s) stripes[s] = ExactSetStripe{};
    uint64_t used = 0, live = 0;
    for (uint64_t i = 0; i < hh->slots; ++i) {
      if (slots[i] == kSlotEmpty) continue;
      ++used;
      if (slots[i] == kSlotTomb) continue;
      ++live;
      stripes[set_stripe(hh, set_hash(hh, slots[i]))].count++;
    }
    for (int k = 0; k < 2; ++k) {
      if (hh->special[k] > 1) hh->special[k] = 0;
      if (hh->special[k]) {
        ++live;
        stripes[set_stripe(hh, set_hash(hh, k == 0 ? kSlotEmpty : kSlotTomb))].count++;
      }
    }
    // The used limit is soft (an insert past it cleans tombstones, then may use every slot
    // but one: exact_set_impl.h), so a consistent set can hold more; what must hold is what
    // check requires, one EMPTY slot left.
    if (used >= hh->slots) fail(ErrorCode::kBadInput, in.what + ": the set has no EMPTY slot left");
    hh->live_hint = live;
    hh->used_hint = used;
  });
}

}  // namespace shmfilter::internal::exact_set
