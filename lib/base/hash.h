// lib/base/hash.h: the one hash of shmfilter: XXH3-64 with a per-structure seed.
//
// The hash is part of the on-disk format; golden values in tests/unit (test_segment_format.cpp
// DirectoryHashIsPinned, test_bloom_kernel.cpp GoldenBits, ...) pin it. A uint64 key is hashed as its 8 LE
// bytes, so add(uint64_t k) and add(std::string_view(8 LE bytes of k)) agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace shmfilter::internal {

inline uint64_t hash_bytes(const void* data, size_t len, uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(data, len, seed);
}
inline uint64_t hash_key(std::string_view key, uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(key.data(), key.size(), seed);
}
inline uint64_t hash_key(uint64_t key, uint64_t seed) noexcept {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "hash of uint64 keys assumes little-endian bytes");
  return XXH3_64bits_withSeed(&key, sizeof key, seed);
}

// Fresh per-structure seed (process-local entropy; stored in the structure's header).
uint64_t random_seed() noexcept;

}  // namespace shmfilter::internal
