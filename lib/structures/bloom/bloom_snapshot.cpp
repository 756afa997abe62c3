// lib/structures/bloom/bloom_snapshot.cpp: a Bloom filter's entry in a save file
// (docs/save-restore.md): the region (header, layer table, layer 0), then layers 1.. as
// extents, read with relaxed atomic loads while writers run. Restore checks every layer's
// size against the header before copying, relocates the stored offsets and publishes the
// whole filter with the directory's one release store.
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "shmfilter/bloom.hpp"
#include "structures/bloom/bloom_impl.h"
#include "structures/snapshot_io.h"

namespace shmfilter::internal::bloom {

namespace bl = ::shmfilter::internal::bloom;
using namespace snapshot;

// Bloom: region (header, layer table, layer 0) then layers 1.. as extents.
std::string save(Segment& seg, const RegionInfo& r) {
  Bloom::open(seg, r.name);  // validates the header and every published layer
  const auto* h = reinterpret_cast<const bl::BloomHeader*>(seg.base() + r.offset);
  const uint64_t count = h->layer_count.load(std::memory_order_acquire);  // acquire: the layers it publishes
  Out o;
  o.u64(r.size);
  copy_live(o.b, seg.base() + r.offset, r.size);
  o.u32(static_cast<uint32_t>(count - 1));
  const bl::BloomLayer* s = bl::slots(h);
  for (uint64_t i = 1; i < count; ++i) {
    uint64_t ext = bl::layer_extent_bytes(s[i].bits);
    o.u64(ext);
    copy_live(o.b, seg.base() + s[i].offset, ext);
  }
  // The saved layer_count must be the one whose layers follow (a layer added meanwhile is left out).
  uint64_t c = count;
  std::memcpy(o.b.data() + 8 + offsetof(bl::BloomHeader, layer_count), &c, 8);
  return o.b;
}

void restore(Segment& seg, const std::string& name, In in) {
  uint64_t size = in.u64();
  if (size < sizeof(bl::BloomHeader)) fail(ErrorCode::kBadInput, in.what + ": a Bloom region shorter than its header");
  const unsigned char* bytes = in.take(size);
  bl::BloomHeader h0;
  std::memcpy(static_cast<void*>(&h0), bytes, sizeof h0);
  uint64_t count = 0;
  std::memcpy(&count, bytes + offsetof(bl::BloomHeader, layer_count), 8);
  if (h0.magic != bl::kMagic || h0.version != bl::kLayoutVersion)
    fail(ErrorCode::kBadInput, in.what + ": not a Bloom filter of layout version " + std::to_string(bl::kLayoutVersion));
  if (h0.max_layers < 1 || h0.max_layers > bl::kMaxLayersLimit || count < 1 || count > h0.max_layers ||
      bl::header_bytes(h0.max_layers) > size)
    fail(ErrorCode::kBadInput, in.what + ": the Bloom header's layer counts are out of range");
  const auto* s0 = reinterpret_cast<const bl::BloomLayer*>(bytes + sizeof(bl::BloomHeader));
  bl::BloomLayer layer0;
  std::memcpy(&layer0, s0, sizeof layer0);
  if (layer0.offset != h0.region_offset + bl::header_bytes(h0.max_layers) ||
      bl::header_bytes(h0.max_layers) + bl::layer_extent_bytes(layer0.bits) != size)
    fail(ErrorCode::kBadInput, in.what + ": the Bloom region does not hold its first layer");
  uint32_t extents = in.u32();
  if (extents != count - 1) fail(ErrorCode::kBadInput, in.what + ": the Bloom layer count does not match its extents");
  std::vector<std::pair<uint64_t, const unsigned char*>> ext;
  for (uint32_t i = 1; i <= extents; ++i) {
    bl::BloomLayer li;
    std::memcpy(&li, s0 + i, sizeof li);
    uint64_t len = in.u64();
    if (len != bl::layer_extent_bytes(li.bits))
      fail(ErrorCode::kBadInput, in.what + ": Bloom layer " + std::to_string(i) + " has the wrong size");
    ext.emplace_back(len, in.take(len));
  }
  seg.create_region(name, Kind::kBloom, size, [&](std::byte* region, uint64_t, ControlTxn& txn) {
    std::memcpy(region, bytes, size);
    auto* h = reinterpret_cast<bl::BloomHeader*>(region);
    h->region_offset = static_cast<uint64_t>(region - txn.base());
    bl::BloomLayer* s = bl::slots(h);
    s[0].offset = h->region_offset + bl::header_bytes(h->max_layers);
    for (uint32_t i = 1; i <= extents; ++i) {
      uint64_t off = txn.allocate(ext[i - 1].first);  // fresh: unpublished until the directory store
      std::memcpy(txn.base() + off, ext[i - 1].second, ext[i - 1].first);
      s[i].offset = off;
      s[i].state = bl::kSlotReady;
    }
    for (uint64_t i = count; i < h->max_layers; ++i) s[i] = bl::BloomLayer{};  // not yet grown
    h->layer_count.store(count, std::memory_order_relaxed);  // relaxed: the directory's release store publishes
  });
}

}  // namespace shmfilter::internal::bloom
