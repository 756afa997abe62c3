// lib/structures/hll/hll_impl.h: HyperLogLog kernels over a register array in shared memory,
// and Redis's HLL string encodings (dense and sparse). Stateless functions;
// the handle is hll.cpp. Design and sources: docs/hll.md.
//
// Redis compatibility (Redis >= 5, hyperloglog.c; the rules, not its code):
//   hash   MurmurHash64A(key bytes, seed 0xadc83b19)
//   index  the low 14 bits of the hash (2^14 = 16384 registers)
//   rank   1 + the number of trailing zeros of (hash >> 14), with bit 50 set
//          as a sentinel so the rank is at most 64 - 14 + 1 = 51
//   count  Ertl's estimator (arXiv:1702.01284) over the register histogram,
//          rounded with llround: the same arithmetic, so the same number.
//
// Our in-segment layout is NOT Redis's byte layout: Redis packs 6-bit
// registers across byte boundaries, so a register can straddle two 64-bit
// words and cannot be updated with one CAS. We pack 10 registers of 6 bits in
// each 64-bit word (bits 0..59, bits 60..63 always 0): 1639 words, 13,112
// bytes, and an atomic max is one CAS on one word. Export/import convert.
//
// Count cache (layout version 2, docs/hll.md "Count cache"): the header's
// second line holds two change counters (begins, ends) that bracket every
// register CAS and a cached estimate tagged with the begins value it was
// computed at. A reader uses the cache only when no change is in flight and
// none began since; a writer killed inside its bracket leaves the counters
// unequal, which only turns the cache off (counts recomputed, still exact).
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/kill_point.h"
#include "shmfilter/segment.hpp"  // Segment, RegionInfo, CheckReport: the checker's signature

namespace shmfilter::internal::snapshot {
struct In;  // structures/snapshot_io.h
}

namespace shmfilter::internal::hll {

inline constexpr uint32_t kMagic = 0x314c4c48;  // "HLL1" in little-endian bytes
inline constexpr uint32_t kLayoutVersion = 2;  // 2: 128-byte header with the count cache (line 1)
inline constexpr uint32_t kHllP = 14;                               // precision
inline constexpr uint32_t kHllRegisters = 1u << kHllP;              // 16384
inline constexpr uint32_t kHllQ = 64 - kHllP;                       // 50 hash bits left for the rank
inline constexpr uint8_t kHllMaxRank = kHllQ + 1;                   // 51: highest legal register value
inline constexpr uint32_t kHllBits = 6;                             // bits per register
inline constexpr uint32_t kHllPerWord = 10;                         // registers per 64-bit word
inline constexpr uint32_t kHllWords = (kHllRegisters + kHllPerWord - 1) / kHllPerWord;  // 1639
inline constexpr uint64_t kHllFieldMask = (1ull << kHllBits) - 1;
inline constexpr uint64_t kHllWordMask = (1ull << (kHllBits * kHllPerWord)) - 1;  // bits 0..59
inline constexpr uint64_t kRedisHllSeed = 0xadc83b19ull;

// Redis string encoding constants ("HYLL" header, see docs/hll.md).
inline constexpr size_t kRedisHllHeader = 16;                                 // magic4 enc1 unused3 card8
inline constexpr size_t kRedisHllDenseRegisterBytes = kHllRegisters * kHllBits / 8;  // 12288
inline constexpr size_t kRedisHllDenseSize = kRedisHllHeader + kRedisHllDenseRegisterBytes;  // 12304
inline constexpr uint8_t kRedisHllDense = 0;
inline constexpr uint8_t kRedisHllSparse = 1;

// Count cache words (the header's second cache line). Any process.
//   begins       +1 (relaxed RMW) before a writer's first CAS attempt on a register word
//                (add, merge, import) and by clear() before it zeroes; only grows.
//   ends         +1 (release RMW) after that writer's last attempt; only grows; ends <= begins.
//                Equal counters = no register change in flight.
//   count_cache  0 (empty) or tag << 36 | (estimate + 1), tag = begins & kHllTagMask at a
//                moment with no change in flight and none during the registers' read;
//                stored (relaxed) by count(); reset to 0 by clear() after zeroing.
// Why a reader may trust it: every register CAS lies between a begins and an ends
// increment, so an unchanged, quiescent begins means unchanged registers (proof and
// the 28-bit tag's wrap bound in docs/hll.md "Count cache").
struct HllCountSync {
  uint64_t begins;
  uint64_t ends;
  uint64_t count_cache;
  uint64_t reserved[5];  // zero; room for later versions
};
static_assert(sizeof(HllCountSync) == 64, "the count cache is one cache line; part of the on-segment format");
inline constexpr uint32_t kHllTagBits = 28;
inline constexpr uint64_t kHllTagMask = (1ull << kHllTagBits) - 1;
inline constexpr uint64_t kHllCacheValueMask = (1ull << (64 - kHllTagBits)) - 1;  // 36 bits: estimate + 1

// The region: this header, then kHllWords register words. Lives at the start
// of the region create_region() returns (64-byte aligned).
struct alignas(64) HllHeader {
  uint32_t magic;               // written once by create() under the segment lock, before publication; read-only after
  uint32_t version;             // idem: kLayoutVersion
  uint32_t precision;           // idem: 14
  uint32_t register_bits;       // idem: 6
  uint32_t registers_per_word;  // idem: 10
  uint32_t words;               // idem: 1639
  uint64_t hash_seed;           // idem: 0xadc83b19 (MurmurHash64A seed, Redis's)
  uint64_t registers_offset;    // idem: offset of the register words from the region start (128)
  uint64_t clear_token;         // owner token of a clear() in progress, 0 when none. clear() stores its
                                // token (seq_cst) before zeroing and 0 after; check --repair finishes a
                                // clear whose owner died. Any process.
  uint64_t reserved[2];         // zero; room for later versions
  HllCountSync sync;            // line 1: the count cache (see HllCountSync), written by any process
};
static_assert(sizeof(HllHeader) == 128, "HllHeader is two cache lines; it is part of the on-segment format");
static_assert(offsetof(HllHeader, hash_seed) == 24, "HllHeader field offsets are part of the format");
static_assert(offsetof(HllHeader, clear_token) == 40, "HllHeader field offsets are part of the format");
static_assert(offsetof(HllHeader, sync) == 64, "the count cache is the header's second cache line (format)");
inline constexpr uint64_t kHllRegionBytes = sizeof(HllHeader) + kHllWords * sizeof(uint64_t);  // 13,240
static_assert(kHllRegionBytes == 13240, "HLL region size is part of the format");
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free, "register words need lock-free 64-bit CAS across processes");

// MurmurHash64A (Austin Appleby, public domain), the variant Redis uses: the
// tail bytes are mixed in little-endian order, the length is multiplied into
// the seed. Independent of host byte order.
inline uint64_t murmur64a(const void* key, size_t len, uint64_t seed) noexcept {
  constexpr uint64_t m = 0xc6a4a7935bd1e995ull;
  constexpr int r = 47;
  const auto* p = static_cast<const uint8_t*>(key);
  uint64_t h = seed ^ (static_cast<uint64_t>(len) * m);
  size_t blocks = len / 8;
  for (size_t b = 0; b < blocks; ++b, p += 8) {
    uint64_t k = 0;
    for (int i = 7; i >= 0; --i) k = (k << 8) | p[i];
    k *= m;
    k ^= k >> r;
    k *= m;
    h ^= k;
    h *= m;
  }
  size_t tail = len & 7;
  if (tail != 0) {
    for (size_t i = tail; i-- > 0;) h ^= static_cast<uint64_t>(p[i]) << (8 * i);
    h *= m;
  }
  h ^= h >> r;
  h *= m;
  h ^= h >> r;
  return h;
}

// Register index and rank of a 64-bit hash (Redis's rules).
inline void hll_index_rank(uint64_t hash, uint32_t& index, uint8_t& rank) noexcept {
  index = static_cast<uint32_t>(hash & (kHllRegisters - 1));
  uint64_t rest = (hash >> kHllP) | (1ull << kHllQ);  // sentinel: rank <= 51
  rank = static_cast<uint8_t>(__builtin_ctzll(rest) + 1);
}

inline uint8_t hll_field(uint64_t word, uint32_t slot) noexcept {
  return static_cast<uint8_t>((word >> (slot * kHllBits)) & kHllFieldMask);
}

// The bracket around register CASes (HllCountSync). Null sync: bare words (kernel tests).
inline void hll_change_begin(HllCountSync* sync) noexcept {
  // relaxed: the register CAS that follows is a release, which orders this increment
  // before it for any reader that sees the CAS (reader: relaxed loads, acquire fence, re-read).
  if (sync != nullptr) std::atomic_ref<uint64_t>(sync->begins).fetch_add(1, std::memory_order_relaxed);
}
inline void hll_change_end(HllCountSync* sync) noexcept {
  // release: a reader that sees this increment (acquire) sees the CASes before it.
  if (sync != nullptr) std::atomic_ref<uint64_t>(sync->ends).fetch_add(1, std::memory_order_release);
}

// Atomic max of register `index` with `rank`. Lock-free, any process.
// Returns true when the register grew. Registers are monotone counters that
// publish no other data, so the loads are relaxed; the CAS is a release only
// for the count cache's bracket (hll_change_begin). A register that would not
// grow costs one load and no write.
inline bool hll_update(uint64_t* words, uint32_t index, uint8_t rank, HllCountSync* sync = nullptr) noexcept {
  std::atomic_ref<uint64_t> w(words[index / kHllPerWord]);
  uint32_t shift = (index % kHllPerWord) * kHllBits;
  uint64_t cur = w.load(std::memory_order_relaxed);  // relaxed: see above
  if (((cur >> shift) & kHllFieldMask) >= rank) return false;
  hll_change_begin(sync);
  SHMF_KILL_POINT("hll.add.after_begin");
  bool grew = false;
  while (((cur >> shift) & kHllFieldMask) < rank) {
    uint64_t next = (cur & ~(kHllFieldMask << shift)) | (static_cast<uint64_t>(rank) << shift);
    // release on success: see hll_change_begin; relaxed on failure (cur is reloaded, nothing published).
    if (w.compare_exchange_weak(cur, next, std::memory_order_release, std::memory_order_relaxed)) {
      grew = true;
      break;
    }
  }
  SHMF_KILL_POINT("hll.add.before_end");
  hll_change_end(sync);
  return grew;
}

inline uint8_t hll_max_field(uint64_t a, uint64_t b, uint32_t s) noexcept {
  uint8_t x = hll_field(a, s), y = hll_field(b, s);
  return x > y ? x : y;
}
inline uint64_t hll_max_of_words(uint64_t a, uint64_t b) noexcept {
  uint64_t next = 0;
  for (uint32_t s = 0; s < kHllPerWord; ++s) next |= static_cast<uint64_t>(hll_max_field(a, b, s)) << (s * kHllBits);
  return next;
}

// Word-wise max of `src` (10 registers) into words[w]. Lock-free. True if it changed.
inline bool hll_max_word(uint64_t* words, uint32_t wi, uint64_t src, HllCountSync* sync = nullptr) noexcept {
  std::atomic_ref<uint64_t> w(words[wi]);
  uint64_t cur = w.load(std::memory_order_relaxed);  // relaxed: monotone registers (see hll_update)
  uint64_t next = hll_max_of_words(cur, src);
  if (next == cur) return false;
  hll_change_begin(sync);
  bool changed = false;
  while (next != cur) {
    // release / relaxed: as in hll_update.
    if (w.compare_exchange_weak(cur, next, std::memory_order_release, std::memory_order_relaxed)) {
      changed = true;
      break;
    }
    next = hll_max_of_words(cur, src);
  }
  hll_change_end(sync);
  return changed;
}

// Snapshot of the registers, one byte each. Each word is read atomically.
inline void hll_read_registers(const uint64_t* words, uint8_t* out) noexcept {
  for (uint32_t wi = 0; wi < kHllWords; ++wi) {
    uint64_t w = std::atomic_ref<const uint64_t>(words[wi]).load(std::memory_order_relaxed);  // relaxed: see hll_update
    for (uint32_t s = 0; s < kHllPerWord; ++s) {
      uint32_t r = wi * kHllPerWord + s;
      if (r < kHllRegisters) out[r] = hll_field(w, s);
    }
  }
}

// Packs byte registers into the word for word index wi.
inline uint64_t hll_pack_word(const uint8_t* regs, uint32_t wi) noexcept {
  uint64_t w = 0;
  for (uint32_t s = 0; s < kHllPerWord; ++s) {
    uint32_t r = wi * kHllPerWord + s;
    if (r < kHllRegisters) w |= static_cast<uint64_t>(regs[r] & kHllFieldMask) << (s * kHllBits);
  }
  return w;
}

// Ertl's sigma and tau (arXiv:1702.01284, Algorithm 6), iterated to a fixed point.
inline double hll_sigma(double x) noexcept {
  if (x == 1.0) return INFINITY;
  double y = 1.0, z = x, prev;
  do {
    x *= x;
    prev = z;
    z += x * y;
    y += y;
  } while (prev != z);
  return z;
}
inline double hll_tau(double x) noexcept {
  if (x == 0.0 || x == 1.0) return 0.0;
  double y = 1.0, z = 1.0 - x, prev;
  do {
    x = std::sqrt(x);
    prev = z;
    y *= 0.5;
    z -= (1.0 - x) * (1.0 - x) * y;
  } while (prev != z);
  return z / 3.0;
}

// The estimate Redis's PFCOUNT returns for these registers (same operations
// in the same order, double precision, llround): Ertl's improved raw
// estimator, E = alpha_inf m^2 / (m sigma(C0/m) + sum_k C_k 2^-k + m tau(1 - C51/m) 2^-50),
// alpha_inf = 1/(2 ln 2). Relative standard error 1.04/sqrt(m) = 0.81%.
inline uint64_t hll_estimate_histogram(const uint32_t* hist) noexcept {
  const double m = kHllRegisters;
  double z = m * hll_tau((m - hist[kHllQ + 1]) / m);
  for (int j = static_cast<int>(kHllQ); j >= 1; --j) {
    z += hist[j];
    z *= 0.5;
  }
  z += m * hll_sigma(hist[0] / m);
  constexpr double kAlphaInf = 0.721347520444481703680;  // 1 / (2 ln 2)
  return static_cast<uint64_t>(std::llround(kAlphaInf * m * m / z));
}

inline uint64_t hll_estimate(const uint8_t* regs) noexcept {
  uint32_t hist[64] = {0};
  for (uint32_t i = 0; i < kHllRegisters; ++i) ++hist[regs[i] & 63];
  return hll_estimate_histogram(hist);
}

// count() straight from the packed words: one pass, no register copy.
inline uint64_t hll_estimate_words(const uint64_t* words) noexcept {
  uint32_t hist[64] = {0};
  for (uint32_t wi = 0; wi < kHllWords; ++wi) {
    uint64_t w = std::atomic_ref<const uint64_t>(words[wi]).load(std::memory_order_relaxed);  // relaxed: see hll_update
    uint32_t fields = wi + 1 < kHllWords ? kHllPerWord : kHllRegisters - wi * kHllPerWord;
    for (uint32_t s = 0; s < fields; ++s, w >>= kHllBits) ++hist[w & kHllFieldMask];
  }
  return hll_estimate_histogram(hist);
}

// count() through the cache (HllCountSync). Lock-free, any process; writes
// only the cache word, and only when its value changes.
//   fast path: ends, begins (acquire, in that order), equal, and the cache's
//     tag is begins' low 28 bits: the registers are those the cached estimate
//     was computed from (three loads on one line).
//   slow path: the estimate from the words; cached when the counters were
//     equal before the read and begins unchanged after it (acquire fence
//     between: a CAS the read saw makes its begins increment visible).
inline uint64_t hll_count_cached(HllCountSync* sync, const uint64_t* words) noexcept {
  const uint64_t e = std::atomic_ref<uint64_t>(sync->ends).load(std::memory_order_acquire);  // acquire: see above
  const uint64_t b = std::atomic_ref<uint64_t>(sync->begins).load(std::memory_order_acquire);  // acquire: see above
  std::atomic_ref<uint64_t> cache(sync->count_cache);
  const uint64_t tag = (b & kHllTagMask) << (64 - kHllTagBits);
  if (e == b) {
    const uint64_t k = cache.load(std::memory_order_relaxed);  // relaxed: validated by the tag, a value only
    if (k != 0 && (k & ~kHllCacheValueMask) == tag) return (k & kHllCacheValueMask) - 1;
  }
  const uint64_t est = hll_estimate_words(words);
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint64_t b1 = std::atomic_ref<uint64_t>(sync->begins).load(std::memory_order_relaxed);  // relaxed: after the fence
  if (e == b && b1 == b && est < kHllCacheValueMask) {
    const uint64_t k = tag | (est + 1);
    if (cache.load(std::memory_order_relaxed) != k) cache.store(k, std::memory_order_relaxed);  // relaxed: a tagged value
  }
  return est;
}

// True when count() would be answered from the cache now (stats, tests).
inline bool hll_cache_current(const HllCountSync* sync) noexcept {
  const uint64_t e = std::atomic_ref<const uint64_t>(sync->ends).load(std::memory_order_acquire);
  const uint64_t b = std::atomic_ref<const uint64_t>(sync->begins).load(std::memory_order_acquire);
  const uint64_t k = std::atomic_ref<const uint64_t>(sync->count_cache).load(std::memory_order_relaxed);
  return e == b && k != 0 && (k & ~kHllCacheValueMask) == (b & kHllTagMask) << (64 - kHllTagBits);
}

// ---- Redis string encodings ---------------------------------------------------

// Dense encoding of byte registers: "HYLL", encoding 0, 3 zero bytes, the
// cardinality cache marked invalid (bit 7 of byte 15) so Redis recomputes it,
// then 16384 6-bit registers, little-endian bit order across bytes.
inline std::string hll_redis_encode_dense(const uint8_t* regs) {
  std::string out(kRedisHllDenseSize, '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  p[0] = 'H';
  p[1] = 'Y';
  p[2] = 'L';
  p[3] = 'L';
  p[4] = kRedisHllDense;
  p[15] = 0x80;  // cached cardinality invalid
  uint8_t* reg = p + kRedisHllHeader;
  for (uint32_t i = 0; i < kHllRegisters; ++i) {
    uint32_t bit = i * kHllBits, byte = bit / 8, off = bit % 8;
    uint32_t v = static_cast<uint32_t>(regs[i] & kHllFieldMask) << off;
    reg[byte] = static_cast<uint8_t>(reg[byte] | (v & 0xff));
    if (off > 2) reg[byte + 1] = static_cast<uint8_t>(reg[byte + 1] | (v >> 8));
  }
  return out;
}

// Decodes a Redis HLL string (dense or sparse) into byte registers.
// Returns an empty string on success, else what is wrong and what to do.
inline std::string hll_redis_decode(std::string_view bytes, uint8_t* regs) {
  auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < kRedisHllHeader || std::memcmp(p, "HYLL", 4) != 0)
    return "not a Redis HyperLogLog string (no \"HYLL\" header): export it with GET KEY from a key written by PFADD/PFMERGE";
  std::memset(regs, 0, kHllRegisters);
  const uint8_t* reg = p + kRedisHllHeader;
  size_t n = bytes.size() - kRedisHllHeader;
  if (p[4] == kRedisHllDense) {
    if (bytes.size() != kRedisHllDenseSize)
      return "Redis dense HyperLogLog must be " + std::to_string(kRedisHllDenseSize) + " bytes, got " +
             std::to_string(bytes.size()) + ": the string was truncated or altered (GET it again, binary-safe)";
    for (uint32_t i = 0; i < kHllRegisters; ++i) {
      uint32_t bit = i * kHllBits, byte = bit / 8, off = bit % 8;
      uint32_t v = reg[byte] >> off;
      if (off > 2) v |= static_cast<uint32_t>(reg[byte + 1]) << (8 - off);
      regs[i] = static_cast<uint8_t>(v & kHllFieldMask);
      if (regs[i] > kHllMaxRank)
        return "Redis HyperLogLog register " + std::to_string(i) + " holds " + std::to_string(regs[i]) +
               " (> 51): the bytes are corrupt";
    }
    return {};
  }
  if (p[4] == kRedisHllSparse) {
    // Opcodes: 00xxxxxx ZERO run of x+1; 01xxxxxx yyyyyyyy XZERO run of
    // (x<<8|y)+1; 1vvvvvxx VAL: x+1 registers of value v+1.
    uint32_t i = 0;
    size_t k = 0;
    while (k < n) {
      uint8_t op = reg[k];
      uint32_t run;
      uint8_t val = 0;
      if ((op & 0xc0) == 0x00) {
        run = (op & 0x3fu) + 1;
        k += 1;
      } else if ((op & 0xc0) == 0x40) {
        if (k + 1 >= n) return "Redis sparse HyperLogLog ends inside an XZERO opcode: the bytes are truncated";
        run = ((static_cast<uint32_t>(op & 0x3f) << 8) | reg[k + 1]) + 1;
        k += 2;
      } else {
        run = (op & 0x3u) + 1;
        val = static_cast<uint8_t>(((op >> 2) & 0x1f) + 1);
        k += 1;
      }
      if (i + run > kHllRegisters)
        return "Redis sparse HyperLogLog describes more than 16384 registers: the bytes are corrupt";
      for (uint32_t j = 0; j < run; ++j) regs[i + j] = val;
      i += run;
    }
    if (i != kHllRegisters)
      return "Redis sparse HyperLogLog describes " + std::to_string(i) +
             " registers, not 16384: the bytes are truncated (GET it again, binary-safe)";
    return {};
  }
  return "Redis HyperLogLog encoding byte " + std::to_string(p[4]) +
         " is neither dense (0) nor sparse (1): the bytes are corrupt";
}

// The integrity checker of this kind (hll.cpp), what Segment::check runs for every
// region of Kind::kHll; its row in the kinds table (hll_kind.cpp) names it.
void check_hll(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);

// Its save/restore (hll_snapshot.cpp); hll_kind.cpp puts them in the kinds table.
std::string save(Segment& seg, const RegionInfo& r);
void restore(Segment& seg, const std::string& name, snapshot::In in);

}  // namespace shmfilter::internal::hll
