// lib/structures/cuckoo/cuckoo_snapshot.cpp: a cuckoo filter's entry in a save file
// (docs/save-restore.md): the region (header + sub-filter 0), then sub-filters 1.. as
// extents, copied under the filter's writer lock (see below). Restore checks the layout
// version, lane width and every sub-filter's shape and size before copying.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "shmfilter/cuckoo.hpp"
#include "structures/cuckoo/cuckoo_impl.h"
#include "structures/snapshot_io.h"

namespace shmfilter::internal::cuckoo {

namespace ck = ::shmfilter::internal::cuckoo;
using namespace snapshot;

// Cuckoo: region (header + sub-filter 0) then sub-filters 1.. as extents, copied
// under the filter's writer lock (items move between buckets while writers run:
// a lock-free copy could miss one that moved from an uncopied bucket to a copied
// one). Writers wait for the copy; readers do not. A saver that dies holding the
// lock is taken over like any dead writer (owner token + liveness).
template <class LT>
std::string save_cuckoo_locked(Segment& seg, const RegionInfo& r) {
  auto* h = reinterpret_cast<ck::Header*>(seg.base() + r.offset);
  ck::Liveness lv{seg.owner_token(), &seg,
                  [](const void* ctx, uint64_t t) { return static_cast<const Segment*>(ctx)->token_alive(t); }, nullptr};
  ck::lock<LT>(seg.base(), h, lv);
  Out o;
  try {
    const uint32_t count = ck::A(h->sub_count).load(std::memory_order_acquire);  // acquire: subs[] it publishes
    o.u64(r.size);
    copy_live(o.b, seg.base() + r.offset, r.size);
    o.u32(count - 1);
    for (uint32_t i = 1; i < count; ++i) {
      const ck::SubDesc d = h->subs[i];
      uint64_t len = ck::sub_bytes(d, h->lane_bits);
      o.u64(len);
      copy_live(o.b, seg.base() + d.offset, len);
    }
  } catch (...) {
    ck::unlock(h);
    throw;
  }
  ck::unlock(h);
  return o.b;
}

std::string save(Segment& seg, const RegionInfo& r) {
  Cuckoo::open(seg, r.name);  // validates the header and the sub-filter table
  const auto* h = reinterpret_cast<const ck::Header*>(seg.base() + r.offset);
  return h->lane_bits == 8    ? save_cuckoo_locked<ck::Lanes8>(seg, r)
         : h->lane_bits == 12 ? save_cuckoo_locked<ck::Lanes12>(seg, r)
                              : save_cuckoo_locked<ck::Lanes16>(seg, r);
}

void restore(Segment& seg, const std::string& name, In in) {
  uint64_t size = in.u64();
  if (size < sizeof(ck::Header)) fail(ErrorCode::kBadInput, in.what + ": a cuckoo region shorter than its header");
  const unsigned char* bytes = in.take(size);
  ck::Header h0;
  std::memcpy(static_cast<void*>(&h0), bytes, sizeof h0);
  if (h0.magic != ck::kMagic || (h0.layout_version != ck::kLayoutVersion && h0.layout_version != ck::kLayoutVersionPow2 &&
                                 h0.layout_version != ck::kLayoutVersionPacked))
    fail(ErrorCode::kBadInput, in.what + ": not a cuckoo filter of layout version " + std::to_string(ck::kLayoutVersionPow2) +
                                   ", " + std::to_string(ck::kLayoutVersion) + " or " +
                                   std::to_string(ck::kLayoutVersionPacked));
  // Layout 3 is exactly packed 12-bit lanes; layouts 1 and 2 have 8 or 16 (Cuckoo::open re-checks the rest).
  if ((h0.layout_version == ck::kLayoutVersionPacked ? h0.lane_bits != 12 : (h0.lane_bits != 8 && h0.lane_bits != 16)))
    fail(ErrorCode::kBadInput, in.what + ": the cuckoo header's lane width " + std::to_string(h0.lane_bits) +
                                   " does not match its layout version " + std::to_string(h0.layout_version));
  if (h0.max_subs < 1 || h0.max_subs > ck::kMaxSubs ||
      h0.sub_count < 1 || h0.sub_count > h0.max_subs)
    fail(ErrorCode::kBadInput, in.what + ": the cuckoo header's sub-filter counts are out of range");
  for (uint32_t i = 0; i < h0.sub_count; ++i)
    if (!ck::sub_shape_ok(h0.subs[i]) || (i > 0 && !ck::nests_in(h0.subs[i - 1], h0.subs[i])) ||
        (h0.layout_version == ck::kLayoutVersionPow2 && h0.subs[i].chunks_minus_1 != 0))
      fail(ErrorCode::kBadInput, in.what + ": cuckoo sub-filter " + std::to_string(i) + " has a bad size");
  if (sizeof(ck::Header) + ck::sub_bytes(h0.subs[0], h0.lane_bits) > size)
    fail(ErrorCode::kBadInput, in.what + ": the cuckoo region does not hold its first sub-filter");
  uint32_t extents = in.u32();
  if (extents != h0.sub_count - 1) fail(ErrorCode::kBadInput, in.what + ": the sub-filter count does not match its extents");
  std::vector<std::pair<uint64_t, const unsigned char*>> ext;
  for (uint32_t i = 1; i <= extents; ++i) {
    uint64_t len = in.u64();
    if (len != ck::sub_bytes(h0.subs[i], h0.lane_bits))
      fail(ErrorCode::kBadInput, in.what + ": cuckoo sub-filter " + std::to_string(i) + " has the wrong size");
    ext.emplace_back(len, in.take(len));
  }
  seg.create_region(name, Kind::kCuckoo, size, [&](std::byte* region, uint64_t got, ControlTxn& txn) {
    std::memcpy(region, bytes, size);
    auto* h = reinterpret_cast<ck::Header*>(region);
    h->region_bytes = got;
    h->subs[0].offset = static_cast<uint64_t>(region - txn.base()) + sizeof(ck::Header);
    for (uint32_t i = 1; i <= extents; ++i) {
      uint64_t off = txn.allocate(ext[i - 1].first);  // fresh: unpublished until the directory store
      std::memcpy(txn.base() + off, ext[i - 1].second, ext[i - 1].first);
      h->subs[i].offset = off;
    }
    for (uint32_t i = h->sub_count; i < ck::kMaxSubs; ++i) h->subs[i] = ck::SubDesc{};
    h->pending_extent = 0;  // the source's unpublished extent is not ours
    h->lock_owner = 0;      // copied under the saver's lock: no step was in flight
    h->intent = ck::Intent{};
  });
}

}  // namespace shmfilter::internal::cuckoo
