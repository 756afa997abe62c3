// lib/structures/roaring/roaring_containers.h: the per-container snapshot of layout 4
// (docs/roaring.md, "Layout 4: a per-container snapshot"), as stateless
// kernels over (base, size): no Segment, no allocation in shared memory.
// RoaringSet's snapshots (layout 4, roaring_impl.h's SnapHeader) are these
// tables; compaction builds them with build_incremental (or, for a merge of
// a whole bitmap, build_from_portable). Unit tests:
// tests/unit/test_roaring_containers.cpp.
//
// A layout-4 snapshot is a CONTAINER TABLE: for each 16-bit chunk key one
// 8-byte word naming an immutable container in a PACK (an extent holding
// the containers one compaction built, each 8-byte aligned, bitsets
// 64-byte aligned). A compaction copies the table and the pack directory,
// builds new containers only for the chunks its deltas touched (into one
// new pack) and leaves every other word as it was: untouched containers are
// shared between generations. Why packs and not one extent per container
// (the first sketch): the segment's allocator tracks 8,192 free holes and
// 4,096 quarantined extents and logs at most 8,192 stores per transaction
// (lib/segment/layout.h), and every extent costs a 64 B header: 65,536
// container extents per set would overflow all three (and cost 128 B for a
// one-value container). A pack is one extent per compaction.
//
// Freeing without reference counts on shared words: each snapshot carries
// its own pack directory {offset, bytes, live_bytes, birth generation}; a
// compaction subtracts the bytes of the containers it replaced from their
// packs' live_bytes in the NEW directory (a process-local computation, the
// old snapshot is immutable), and drops from the directory every pack whose
// live bytes reach 0, after also rebuilding ("repacking") the remaining
// containers of any pack less than half live. Dropped packs are freed with
// the retired generation g once no reader pins [birth, g] (a reader of any
// generation in that range may hold words into the pack). Repacking bounds
// the segment bytes of the containers at 2x their live bytes, and the
// directory at kMaxPacks entries (the smallest packs are repacked first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "structures/roaring/roaring_search.h"

namespace shmfilter::internal::roaring::c4 {

// ---- container words ------------------------------------------------------------
// bits 0..1 type, 2..18 count, 19..63 byte offset / 8 of the container's
// data from the segment base (45 bits: 256 TiB). count: array = values
// (1..4096), bitmap = values (4097..65536: the set's cardinality needs no
// container read), run = runs (1..32768, each {start, length} u16, the run
// covers [start, start + length], CRoaring's rle16_t). 0 = no container.
enum : uint32_t { kNone = 0, kBitmap = 1, kArray = 2, kRun = 3 };
inline constexpr uint32_t kArrayMax = 4096;       // CRoaring's DEFAULT_MAX_SIZE
inline constexpr uint32_t kBitmapBytes = 8192;
inline constexpr uint32_t kMaxRuns = 32768;       // runs of one chunk are separated by gaps
inline constexpr uint64_t kMaxOffset = (uint64_t{1} << 48) - 8;

inline constexpr uint64_t cw_make(uint32_t type, uint32_t count, uint64_t off) noexcept {
  return uint64_t{type} | (uint64_t{count} << 2) | ((off >> 3) << 19);
}
inline constexpr uint32_t cw_type(uint64_t w) noexcept { return static_cast<uint32_t>(w) & 3; }
inline constexpr uint32_t cw_count(uint64_t w) noexcept { return static_cast<uint32_t>(w >> 2) & 0x1ffff; }
inline constexpr uint64_t cw_off(uint64_t w) noexcept { return (w >> 19) << 3; }
// Bytes of the container's data (0 for a malformed type or count).
inline constexpr uint64_t cw_bytes(uint64_t w) noexcept {
  switch (cw_type(w)) {
    case kArray: return cw_count(w) >= 1 && cw_count(w) <= kArrayMax ? uint64_t{cw_count(w)} * 2 : 0;
    case kBitmap: return cw_count(w) > kArrayMax && cw_count(w) <= 65536 ? kBitmapBytes : 0;
    case kRun: return cw_count(w) >= 1 && cw_count(w) <= kMaxRuns ? uint64_t{cw_count(w)} * 4 : 0;
    default: return 0;
  }
}
// Bytes the container occupies in a pack (rounded to its alignment).
inline constexpr uint64_t cw_footprint(uint64_t w) noexcept { return (cw_bytes(w) + 7) & ~uint64_t{7}; }

// A word that may be dereferenced: a known type, a count in range, the data
// inside [0, size) of the segment and aligned (8 B; bitmaps 64 B).
inline bool cw_ok(uint64_t w, uint64_t size) noexcept {
  const uint64_t n = cw_bytes(w), off = cw_off(w);
  if (n == 0 || off == 0 || off > size || n > size - off) return false;
  return cw_type(w) != kBitmap || off % 64 == 0;
}

// Values of the container (bitmap: the count; run: the sum of run lengths).
uint32_t container_cardinality(const std::byte* base, uint64_t w) noexcept;

// Membership of `low` in the container w (cw_ok(w) checked by the caller:
// every read stays inside the container's bytes whatever they hold).
inline bool container_contains(const std::byte* base, uint64_t w, uint16_t low) noexcept {
  const std::byte* p = base + cw_off(w);
  const uint32_t n = cw_count(w);
  switch (cw_type(w)) {
    case kBitmap: {
      uint64_t word;
      std::memcpy(&word, p + (low >> 6) * 8, 8);
      return (word >> (low & 63)) & 1;
    }
    case kArray: return array_contains_interp(reinterpret_cast<const uint16_t*>(p), n, low);
    case kRun: return run_contains(reinterpret_cast<const uint16_t*>(p), n, low);
    default: return false;
  }
}

// The line a lookup of `low` reads first (for prefetching).
inline const void* container_probe_address(const std::byte* base, uint64_t w, uint16_t low) noexcept {
  const std::byte* p = base + cw_off(w);
  switch (cw_type(w)) {
    case kBitmap: return p + (low >> 6) * 8;
    case kArray: return p + ((uint64_t{low} * cw_count(w)) >> 16) * 2;
    case kRun: return p + (cw_count(w) / 2) * 4;
    default: return p;
  }
}

// Deep check of one container: cw_ok, arrays strictly increasing, bitmap
// popcount == count, runs increasing, separated, inside the chunk. "" or the problem.
std::string container_validate(const std::byte* base, uint64_t size, uint64_t w);

// Appends the container's values (key << 16 | low), ascending.
void container_values(const std::byte* base, uint64_t w, uint32_t key, std::vector<uint32_t>& out);

// ---- the container table -----------------------------------------------------------
// Two shapes of the same words, both in ascending key order:
//   SORTED (n keys u16, padded to 8 B, then n words) below
//     kIndexedMinContainers containers: an empty set's table is 0 B and a
//     small set's a few hundred (issue 16: an empty or small set <= 4 KiB);
//     a lookup is a binary search over <= 511 cached keys (<= 1 KiB).
//   INDEXED (1,024 RankEntry of 16 B = 16 KiB, then n words) from there on:
//     entry k holds the presence bits of keys 64k..64k+63 and how many
//     containers precede them, so a lookup is one entry (the 16 KiB index
//     stays cached while the set is used), a popcount, then the word and the
//     container: issue 16's <= 2 dependent misses. Its cost is 16 KiB + 8 B
//     a container (a DIRECT table of 65,536 words, the first design, cost
//     512 KiB whatever the count: 128 B a container for a 4,096-container
//     set, per-plan-per-day sets 30x their values).
inline constexpr uint32_t kIndexedMinContainers = 512;
inline constexpr uint32_t kChunks = 65536;
inline constexpr uint32_t kRankEntries = kChunks / 64;

struct RankEntry {
  uint64_t bits;    // bit j: key 64k + j has a container
  uint32_t before;  // containers with keys < 64k (the index of this group's first word)
  uint32_t zero;    // 0
};
static_assert(sizeof(RankEntry) == 16, "a rank entry is 16 bytes: 4 to a cache line");
inline constexpr uint64_t kRankBytes = uint64_t{kRankEntries} * sizeof(RankEntry);

struct Table {
  bool indexed = false;
  uint32_t n = 0;                   // containers
  const uint16_t* keys = nullptr;   // sorted only
  const RankEntry* rank = nullptr;  // indexed only
  const uint64_t* words = nullptr;  // n, in key order
};
inline uint64_t table_bytes(bool indexed, uint32_t n) noexcept {
  return indexed ? kRankBytes + uint64_t{n} * 8 : ((uint64_t{n} * 2 + 7) & ~uint64_t{7}) + uint64_t{n} * 8;
}
// Where chunk `key`'s word is, nullptr when the chunk has no container. An
// index past n (a rank entry changed after table_validate passed) answers
// nullptr, never a read past the table. A batched lookup prefetches the
// pointer and reads it a stage later; one lookup dereferences it at once.
inline const uint64_t* table_word_ptr(const Table& t, uint16_t key) noexcept {
  if (t.indexed) {
    const RankEntry& e = t.rank[key >> 6];
    const uint64_t bit = uint64_t{1} << (key & 63);
    if ((e.bits & bit) == 0) return nullptr;
    const uint64_t i = uint64_t{e.before} + static_cast<uint64_t>(__builtin_popcountll(e.bits & (bit - 1)));
    return i < t.n ? &t.words[i] : nullptr;
  }
  uint32_t lo = 0, hi = t.n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (t.keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < t.n && t.keys[lo] == key ? &t.words[lo] : nullptr;
}
// The word of chunk `key`, 0 when absent.
inline uint64_t table_word(const Table& t, uint16_t key) noexcept {
  const uint64_t* p = table_word_ptr(t, key);
  return p ? *p : 0;
}
// The line a lookup of `key` reads first (for prefetching): the rank entry, or the sorted keys' middle.
inline const void* table_probe_address(const Table& t, uint16_t key) noexcept {
  return t.indexed ? static_cast<const void*>(&t.rank[key >> 6]) : static_cast<const void*>(t.keys + t.n / 2);
}
// Table over `bytes` at p (the caller bounds p + table_bytes inside the segment).
inline Table table_at(const std::byte* p, bool indexed, uint32_t n) noexcept {
  Table t;
  t.indexed = indexed;
  t.n = n;
  if (indexed) {
    t.rank = reinterpret_cast<const RankEntry*>(p);
    t.words = reinterpret_cast<const uint64_t*>(p + kRankBytes);
  } else {
    t.keys = reinterpret_cast<const uint16_t*>(p);
    t.words = reinterpret_cast<const uint64_t*>(p + ((uint64_t{n} * 2 + 7) & ~uint64_t{7}));
  }
  return t;
}
// Calls fn(key, word) for every container, ascending keys (at most n words
// are read whatever the rank entries say).
template <class Fn>
inline void table_for_each(const Table& t, Fn&& fn) {
  if (t.indexed) {
    uint32_t i = 0;
    for (uint32_t k = 0; k < kRankEntries; ++k)
      for (uint64_t bits = t.rank[k].bits; bits != 0 && i < t.n; bits &= bits - 1)
        fn(static_cast<uint16_t>(k * 64 + static_cast<uint32_t>(__builtin_ctzll(bits))), t.words[i++]);
  } else {
    for (uint32_t i = 0; i < t.n; ++i) fn(t.keys[i], t.words[i]);
  }
}

// ---- pack directory ----------------------------------------------------------------
inline constexpr uint32_t kMaxPacks = 64;
struct PackRef {
  uint64_t off;         // the pack extent's payload offset in the segment
  uint64_t bytes;       // payload bytes (containers at [off, off + bytes))
  uint64_t live_bytes;  // cw_footprint sum of this snapshot's words into the pack
  uint64_t birth;       // generation of the compaction that built it
};
static_assert(sizeof(PackRef) == 32, "a pack reference is four u64 words");

// Validates a table and directory against a segment of `size` bytes: every
// word cw_ok (deep: container_validate too, when `deep`), sorted keys
// strictly increasing (indexed: every rank entry's `before` the count of the
// bits before it, `zero` 0, n bits in all), every container inside exactly one pack, each pack's
// live_bytes equal to the footprints of the words into it, packs inside the
// segment and disjoint, the directory at most kMaxPacks. "" or the problem.
std::string table_validate(const std::byte* base, uint64_t size, const Table& t, const PackRef* packs,
                           uint32_t npacks, bool deep, uint64_t* cardinality_out);

// ---- building (process-local; the caller copies the result into the segment) -----
// A snapshot under construction: the new pack's bytes (containers at local
// offsets, relocated by `relocate` once the pack extent is allocated), the
// new table (sorted keys + words, converted to the chosen shape by
// `table_image`), the new directory and the packs it dropped.
struct Built {
  std::vector<uint64_t> pack;          // the new pack's payload (8-byte units)
  std::vector<uint16_t> keys;          // ascending
  std::vector<uint64_t> words;         // words[i] of keys[i]; new containers flagged by local offsets (see fresh)
  std::vector<uint8_t> fresh;          // fresh[i]: words[i] points into the new pack (local offset)
  std::vector<PackRef> packs;          // directory of the new snapshot (the new pack last, off 0 until relocated)
  std::vector<PackRef> dropped;        // packs of the old directory not in the new one
  uint64_t cardinality = 0;
  uint32_t rebuilt = 0;                // containers written into the new pack (touched + repacked)
  uint32_t shared = 0;                 // containers kept from the old snapshot
};

// Encodes the sorted, distinct low halves vals[0..n) of one chunk as the
// smallest of array / bitmap / run (ties: array, then run) into b.pack;
// returns its word with a LOCAL offset (0 when n == 0).
uint64_t encode_chunk(Built& b, const uint16_t* vals, uint32_t n);

// A whole snapshot from sorted distinct values (every container new).
void build_full(Built& b, const uint32_t* vals, size_t n, uint64_t gen);

// An incremental snapshot: the old table/directory and cardinality
// (validated by the caller: table_validate), and per touched chunk the sorted values to add and to remove
// (ops: value << 1 | is_remove, sorted by value, one op per value: the
// fold's newest op). Untouched containers keep their words; a touched
// chunk's container is rebuilt (merge of old values and ops); then packs
// less than half live, or beyond kMaxPacks - 1 (smallest first), are
// repacked (their remaining containers rebuilt too) and dropped.
void build_incremental(Built& b, const std::byte* base, const Table& old, const PackRef* old_packs,
                       uint32_t old_npacks, uint64_t old_cardinality, const uint64_t* ops, size_t nops,
                       uint64_t gen);

// A whole snapshot from one CRoaring portable serialization (the caller
// validated it: portable_validate, or CRoaring wrote it): every container is
// copied as it is (arrays, bitsets, runs are the same bytes), so a merge of
// a wide range costs its serialized bytes, not its values. False (b
// unusable) when the bytes are truncated or a container's count is out of
// this format's range.
bool build_from_portable(Built& b, const char* buf, size_t len, uint64_t gen);

// After the new pack's extent is allocated at `pack_off` (64-aligned):
// fresh words get their absolute offsets, the directory's last entry its off.
void relocate(Built& b, uint64_t pack_off) noexcept;

// The shape for n containers, and the table image (table_bytes(indexed, n) bytes) for b.keys/b.words.
bool table_indexed_for(uint32_t n) noexcept;
void table_image(const Built& b, std::byte* out) noexcept;

// CRoaring portable serialization of a table's containers (to_bitmap,
// export: roaring_bitmap_portable_deserialize_safe reads it back).
std::string table_portable(const std::byte* base, const Table& t);

}  // namespace shmfilter::internal::roaring::c4
