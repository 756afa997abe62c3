// lib/structures/roaring_index.h: the per-snapshot container index of a
// RoaringSet view: high 16 bits -> (container type, count, where its data sits
// in the frozen bytes), so that an out-of-cache snapshot lookup costs one
// index load plus one container line (issue 16: <= 2 dependent misses), where
// CRoaring's frozen view binary-searches the key array (log2(containers)
// dependent loads, 16 for 65,536 containers) and then the container.
//
// The index is process-local (built once per view from CRoaring's frozen view
// of the published, immutable snapshot; never stored in the segment, so the
// on-disk layout does not carry it), 8 bytes per possible chunk: 512 KiB per
// view. Built only when the frozen bytes are at least kIndexMinFrozenBytes
// (the index then costs at most half the snapshot's size in each process
// that reads it; 0.2% of the mission's 240 MB sparse set) and there are at
// least kIndexMinContainers containers. Smaller sets (the per-plan-per-day
// sets of a few thousand ids) keep CRoaring's own search: their key array and
// containers are a few KiB.
#pragma once

#include <roaring/roaring.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "structures/roaring_search.h"

namespace shmfilter::internal::roaring {

inline constexpr uint32_t kIndexMinContainers = 64;
inline constexpr uint64_t kIndexMinFrozenBytes = 1u << 20;

// One index word: bits 0..39 byte offset of the container's data from the
// frozen bytes' start, 40..41 type (0 none, 1 bitmap, 2 array, 3 run),
// 42..58 count (array: values, run: runs; bitmap: unused).
enum : uint32_t { kCNone = 0, kCBitmap = 1, kCArray = 2, kCRun = 3 };
inline constexpr uint64_t index_word(uint64_t off, uint32_t type, uint32_t count) noexcept {
  return off | (uint64_t{type} << 40) | (uint64_t{count} << 42);
}
inline constexpr uint64_t iw_off(uint64_t w) noexcept { return w & ((uint64_t{1} << 40) - 1); }
inline constexpr uint32_t iw_type(uint64_t w) noexcept { return static_cast<uint32_t>(w >> 40) & 3; }
inline constexpr uint32_t iw_count(uint64_t w) noexcept { return static_cast<uint32_t>(w >> 42) & 0x1ffff; }

// Builds the index of a frozen view whose bytes start at `frozen` and span
// `len` bytes; nullptr when the bitmap is small (use CRoaring) or a container
// does not lie inside [frozen, frozen + len) (never expected of CRoaring's own
// view; the caller then falls back to CRoaring).
std::unique_ptr<uint64_t[]> build_index(const roaring_bitmap_t* bm, const char* frozen, uint64_t len);

// Where the lookup of `low` in the container `w` will read first: the
// interpolated position in an array (values of a chunk are close to uniform
// for hashed ids), the word of a bitmap, the middle of a run list.
inline const void* index_probe_address(const char* frozen, uint64_t w, uint16_t low) noexcept {
  const char* p = frozen + iw_off(w);
  switch (iw_type(w)) {
    case kCBitmap: return p + (low >> 6) * 8;
    case kCArray: return p + ((uint64_t{low} * iw_count(w)) >> 16) * 2;
    case kCRun: return p + (iw_count(w) / 2) * 4;
    default: return p;
  }
}

// Snapshot membership through the index word w of v's chunk.
inline bool index_contains(const char* frozen, uint64_t w, uint32_t v) noexcept {
  const uint16_t low = static_cast<uint16_t>(v);
  const char* p = frozen + iw_off(w);
  switch (iw_type(w)) {
    case kCBitmap: {
      uint64_t word;
      std::memcpy(&word, p + (low >> 6) * 8, 8);
      return (word >> (low & 63)) & 1;
    }
    case kCArray: return array_contains_interp(reinterpret_cast<const uint16_t*>(p), iw_count(w), low);
    case kCRun: return run_contains(reinterpret_cast<const uint16_t*>(p), iw_count(w), low);
    default: return false;
  }
}

}  // namespace shmfilter::internal::roaring
