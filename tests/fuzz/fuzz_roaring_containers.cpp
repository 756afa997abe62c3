// tests/fuzz/fuzz_roaring_containers.cpp: libFuzzer target for layout 4's
// container kernels (lib/structures/roaring/roaring_containers.h) over untrusted
// segment bytes.
//
// The input is a stand-in segment: bytes 0..7 say the table's shape
// (u32 containers, u8 indexed, u8 packs), then `packs` PackRefs, then the
// table; the whole input is the segment. table_validate must name any
// problem without reading outside the input (ASan); when it accepts, every
// lookup, the portable serialization (which CRoaring's portable_validate
// and deserializer must accept and read back with the same cardinality)
// and an incremental build over ops taken from the input must succeed, and
// the incremental result, published into a second buffer, must validate.
#include <roaring/roaring.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "structures/roaring/roaring_containers.h"
#include "structures/roaring/roaring_impl.h"

using namespace shmfilter::internal::roaring::c4;

namespace {
struct Aligned {
  std::byte* p;
  explicit Aligned(size_t n) : p(new (std::align_val_t(64)) std::byte[n ? n : 1]()) {}
  ~Aligned() { ::operator delete[](p, std::align_val_t(64)); }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8 || size > (1u << 20)) return 0;
  Aligned seg(size);
  std::memcpy(seg.p, data, size);
  uint32_t n;
  std::memcpy(&n, data, 4);
  const bool indexed = data[4] & 1;
  const uint32_t npacks = data[5];
  if (npacks > kMaxPacks) return 0;
  if (n > kChunks) return 0;
  const uint64_t dir_at = 8, table_at_off = (dir_at + uint64_t{npacks} * sizeof(PackRef) + 7) & ~uint64_t{7};
  const uint64_t tb = table_bytes(indexed, n);
  if (table_at_off > size || tb > size - table_at_off) return 0;
  std::vector<PackRef> packs(npacks);
  if (npacks) std::memcpy(packs.data(), data + dir_at, npacks * sizeof(PackRef));
  const Table t = table_at(seg.p + table_at_off, indexed, n);
  uint64_t card = 0;
  if (!table_validate(seg.p, size, t, packs.data(), npacks, true, &card).empty()) return 0;
  // Accepted: every read below must stay inside the input.
  for (uint32_t i = 0; i < 256; ++i) {
    const uint32_t v = i * 0x9E3779B9u;
    const uint64_t w = table_word(t, static_cast<uint16_t>(v >> 16));
    if (w != 0) (void)container_contains(seg.p, w, static_cast<uint16_t>(v));
  }
  std::string portable = table_portable(seg.p, t);
  size_t consumed = 0;
  if (!shmfilter::internal::roaring::portable_validate(portable.data(), portable.size(), &consumed).empty()) __builtin_trap();
  roaring_bitmap_t* b = roaring_bitmap_portable_deserialize_safe(portable.data(), portable.size());
  if (!b || roaring_bitmap_get_cardinality(b) != card) __builtin_trap();
  roaring_bitmap_free(b);
  // An incremental build over ops from the input's last bytes, one per distinct value.
  std::vector<uint64_t> ops;
  for (size_t i = size >= 64 ? size - 64 : 0; i + 4 <= size; i += 4) {
    uint32_t v;
    std::memcpy(&v, data + i, 4);
    ops.push_back(uint64_t{v} << 1 | (v & 1));
  }
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end(), [](uint64_t a, uint64_t c) { return (a >> 1) == (c >> 1); }), ops.end());
  Built nb;
  build_incremental(nb, seg.p, t, packs.data(), npacks, card, ops.data(), ops.size(), 2);
  // Publish: the old segment, then the new pack, then the new table.
  const uint64_t pack_off = (size + 63) / 64 * 64, pack_bytes = nb.pack.size() * 8;
  const uint32_t nn = static_cast<uint32_t>(nb.keys.size());
  const uint64_t tab_off = (pack_off + pack_bytes + 63) / 64 * 64, nsize = tab_off + table_bytes(table_indexed_for(nn), nn);
  Aligned seg2(nsize);
  std::memcpy(seg2.p, data, size);
  relocate(nb, pack_off == 0 ? 64 : pack_off);
  if (pack_bytes) std::memcpy(seg2.p + pack_off, nb.pack.data(), pack_bytes);
  table_image(nb, seg2.p + tab_off);
  const Table t2 = table_at(seg2.p + tab_off, table_indexed_for(nn), nn);
  uint64_t card2 = 0;
  if (!table_validate(seg2.p, nsize, t2, nb.packs.data(), static_cast<uint32_t>(nb.packs.size()), true, &card2).empty())
    __builtin_trap();
  if (card2 != nb.cardinality) __builtin_trap();
  return 0;
}
