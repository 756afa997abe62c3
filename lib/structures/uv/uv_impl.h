// lib/structures/uv/uv_impl.h: the UV family's shared layout and its stateless kernels
// (namespace internal::uv). A UV family keeps, for every space (a plan id) and every day
// bucket, a distinct-count sketch whose representation follows the space's size, in ONE
// named region (docs/uv.md). The handle is uv.cpp (include/shmfilter/uv.hpp).
//
// Layout (all offsets from the segment base; nothing here is a pointer):
//   region   UvHeader (2 lines) + DaySlot[retention]. Written once by create's init, except
//            the slots (rotation, under the segment lock) and line 1's statistics.
//   day      one extent per kept bucket: DayHeader (3 lines) + chunk offsets[kMaxChunks]
//            + the day's all-spaces HLL (hll kernels, Redis's exact 6-bit registers)
//            + SpaceSlot[space_table] (open addressing on the space id).
//   chunks   extents of chunk_bytes each, owned by the day; a per-space block is carved
//            from them by a bump position (DayHeader::bump) under the segment lock.
//   block    BlockHead (1 line) + body. Two encodings:
//              exact  body = cap uint64 slots: 0 empty, 1 sealed-empty, else a 64-bit hash
//                     (MurmurHash64A, Redis's seed; 0 and 1 are stored as 2 and 3).
//              dense  body = kDenseWords words of 15 4-bit registers and a 4-bit word base
//                     (bits 60..63): register = base + field. The base rises to the word's
//                     minimum when a value would not fit (HLL-TailCut's idea per word, so
//                     one CAS updates a register); a value still > base + 15 is clamped to
//                     base + 15, which for p = 14 happens only to a register 16 above the
//                     least of its 14 neighbours (docs/uv.md gives the bound).
//              sparse body = kSparseBuf uint32 append slots (0 empty, 1 sealed, else 2 + (index << 5 |
//                     value): lock-free like an exact table), kSparseGroups uint16 byte offsets
//                     into the code, then `cap` bytes of code: every register of the group
//                     (kSparseGroupRegs of them, byte-aligned groups) as `value` one bits and a
//                     zero bit (a unary code: 1 bit for an empty register). Code and offsets are
//                     written before desc names the block and never change; a register is the
//                     max of its code and its buffer entries. Promoted (merged into a new sparse
//                     block, or dense when the code would not fit in a dense block's bytes) when
//                     the buffer is 3/4 full.
//   A space's block is named by its SpaceSlot::desc = (bump position of the block) | enc.
//   Promotion (exact -> bigger exact -> dense) runs under the segment lock: it seals every
//   empty slot of the old block (CAS 0 -> 1), so no writer can add to it any more, copies
//   the sealed contents into a new block and publishes it with ONE release store of desc.
//   A writer that meets a sealed slot takes the lock and finishes the promotion itself if
//   its promoter died. Old blocks stay readable (they are frozen) until their day is freed.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "shmfilter/segment.hpp"
#include "shmfilter/uv.hpp"
#include "structures/hll/hll_impl.h"

namespace shmfilter::internal::snapshot {
struct In;
}

namespace shmfilter::internal::uv {

inline constexpr uint32_t kMagic = 0x31465655;     // "UVF1" little-endian
inline constexpr uint32_t kDayMagic = 0x31445655;  // "UVD1"
inline constexpr uint32_t kBlockMagic = 0x31425655;  // "UVB1"
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kMaxRetention = 64;
inline constexpr uint32_t kMaxSpaces = 1u << 20;
inline constexpr uint32_t kMaxChunks = 256;
inline constexpr uint64_t kMinChunkBytes = 64ull << 10;
inline constexpr uint64_t kMaxChunkBytes = 256ull << 20;
inline constexpr uint32_t kMinExactSlots = 8;
inline constexpr uint32_t kMaxExactMax = 1u << 16;  // the exact threshold may be at most this
enum : uint32_t { kEncNone = 0, kEncExact = 1, kEncDense = 2, kEncSparse = 3 };
inline constexpr uint64_t kEncMask = 3;
inline constexpr uint64_t kEmpty = 0, kSealed = 1;

// Dense registers: 15 per word, 4 bits each, word base in bits 60..63.
inline constexpr uint32_t kDensePerWord = 15;
inline constexpr uint32_t kDenseWords = (hll::kHllRegisters + kDensePerWord - 1) / kDensePerWord;  // 1093
inline constexpr uint32_t kDenseMaxValue = 30;  // base 15 + field 15

// Region header. Line 0: parameters, written by create's init before publication, immutable.
struct alignas(64) UvHeader {
  uint32_t magic;           // kMagic
  uint32_t version;         // kVersion
  uint32_t retention;       // R: buckets kept, 1..kMaxRetention; also the number of DaySlots
  uint32_t max_spaces;      // spaces a day can hold (1..kMaxSpaces)
  uint32_t space_table;     // SpaceSlots per day: a power of two >= 2 x max_spaces
  uint32_t exact_max;       // a space stays exact up to this many distinct items (1..kMaxExactMax)
  uint64_t bucket_seconds;  // >= 1
  int64_t utc_offset;       // |utc_offset| < 2^40
  uint64_t chunk_bytes;     // size of each chunk extent, kMinChunkBytes..kMaxChunkBytes, a multiple of 64
  uint64_t region_offset;   // this header's own offset (validation)
  uint64_t region_bytes;    // the region's size as created
  // Line 1: statistics, relaxed RMWs by any process; only grow.
  alignas(64) std::atomic<uint64_t> rotations;   // days started (slot taken by a new bucket)
  std::atomic<uint64_t> promotions;               // blocks replaced by a bigger or denser one
  std::atomic<uint64_t> spaces_full;              // adds refused: the day's space table was full
  std::atomic<uint64_t> no_space;                 // adds refused: no chunk could be allocated
  std::atomic<uint64_t> stale;                    // adds refused: the clock named a bucket older than the kept ones
  std::atomic<uint64_t> epoch;                    // reclamation epoch: +1 (seq_cst fetch_add, under the segment
                                                  // lock) each time a block is retired (see Announce)
  uint8_t pad1[16];
};
static_assert(sizeof(UvHeader) == 128, "UvHeader is part of the format: 2 cache lines");
static_assert(offsetof(UvHeader, magic) == 0 && offsetof(UvHeader, version) == 4, "region prefix");
static_assert(offsetof(UvHeader, rotations) == 64, "statistics on line 1");

// Epoch-based reuse of retired blocks (docs/uv.md "Reuse"). One entry per registry slot of
// the segment (the low 16 bits of an owner token), after the DaySlots. A process that reads
// or writes blocks announces itself first:
//   token  the owner token of the attachment using the entry. Written (release) once per
//          attachment, under a process-local mutex, after `word` was reset to 0 (a dead
//          predecessor may have left it non-zero).
//   word   (epoch << 16) | calls in flight, by that process's threads only: a CAS (seq_cst)
//          from 0 calls to (UvHeader::epoch << 16) | 1, or +1 keeping the older epoch; -1 on
//          the way out (release).
// A block retired when UvHeader::epoch was R may be handed out again once every entry whose
// calls are in flight and whose token is alive has an epoch > R: such a process loaded the
// epoch after the retirement's increment, which follows the store that replaced the block's
// descriptor, so it can never have seen that descriptor. A dead process is ignored.
inline constexpr uint32_t kAnnounceSlots = 1024;
struct alignas(64) Announce {
  std::atomic<uint64_t> token;
  std::atomic<uint64_t> word;
  uint8_t pad[48];
};
static_assert(sizeof(Announce) == 64, "one announcement per cache line");

// One kept bucket. Readers: acquire tag, then day, read, acquire fence, re-read tag (a changed
// tag means the bucket was replaced: its answer is dropped). Writers: the rotation, under the
// segment lock, with logged stores: tag -> 0, day -> new extent, tag -> bucket + 1 (release).
struct DaySlot {
  std::atomic<uint64_t> tag;  // bucket + 1 of the day in `day`; 0 none
  uint64_t day;               // offset of the DayHeader extent, 0 none
};
static_assert(sizeof(DaySlot) == 16, "DaySlot is part of the format");

// A space's entry in a day's table.
struct SpaceSlot {
  std::atomic<uint64_t> key;   // space + 1, 0 free. 0 -> space + 1 by a CAS (any process, lock-free); never changes after
  std::atomic<uint64_t> desc;  // 0 (no block yet) or block position | enc. Release stores under the segment lock only
};
static_assert(sizeof(SpaceSlot) == 16, "SpaceSlot is part of the format");

// The first bytes of a day extent. Written under the segment lock: line 0 by the rotation
// into fresh memory before the slot names it; chunks/chunk_count/bump by block allocation.
struct alignas(64) DayHeader {
  uint32_t magic;            // kDayMagic
  uint32_t space_table;      // = UvHeader::space_table
  int64_t bucket;            // the bucket this day holds
  uint64_t chunk_bytes;      // = UvHeader::chunk_bytes
  uint64_t extent_bytes;     // this day extent's size
  uint8_t pad0[32];
  // Line 1: allocation state, written under the segment lock only (release stores, never
  // logged: each only grows, and a position or chunk a dead holder left behind is merely unused).
  alignas(64) std::atomic<uint64_t> bump;         // bytes handed out, counted over the chunks in order
  std::atomic<uint32_t> chunk_count;              // chunks[0 .. chunk_count) are allocated
  uint32_t reserved1;
  std::atomic<uint64_t> retired_bytes;            // bytes of blocks replaced by a promotion (stay until the day goes)
  std::atomic<uint64_t> spaces;                   // space keys claimed (relaxed RMW, any process)
  uint8_t pad1[32];
  // Line 2: statistics, relaxed RMWs by any process.
  alignas(64) std::atomic<uint64_t> adds;         // adds that reached this day
  std::atomic<uint64_t> reused;                   // blocks handed out again from the retired lists
  uint8_t pad2[48];
  // Lines 3-4: retired exact blocks per size class (kExactClasses), FIFO lists linked through
  // BlockHead::next, written under the segment lock only (unlogged: a holder killed mid-way
  // can only lose blocks from a list, never put a live one in it). Positions as desc's, 0 none.
  alignas(64) std::atomic<uint64_t> free_head[8];
  std::atomic<uint64_t> free_tail[8];
  // Lines 5-10: retired sparse blocks per size class (block bytes / kSparseClassBytes, the
  // last class also holds bigger ones), same protocol as free_head/free_tail.
  alignas(64) std::atomic<uint64_t> sparse_head[24];
  std::atomic<uint64_t> sparse_tail[24];
};
static_assert(sizeof(DayHeader) == 704, "DayHeader is part of the format");
inline constexpr uint32_t kExactClasses = 8;
inline constexpr uint32_t kSparseClasses = 24;
inline constexpr uint64_t kSparseClassBytes = 512;
inline constexpr uint64_t kFirstBlock = 64;  // a day's bump position starts here: no block is at position 0

struct alignas(64) BlockHead {
  uint32_t magic;       // kBlockMagic: written before desc names the block, immutable
  uint32_t enc;         // kEncExact / kEncDense: idem
  uint64_t space;       // the space it belongs to: idem
  uint32_t cap;         // exact: slots; dense: kDenseWords; sparse: code bytes (a multiple of 64): idem
  uint32_t reserved;
  std::atomic<uint64_t> entries;  // exact / sparse: inserts that took a (buffer) slot (relaxed fetch_add, a trigger only: counts scan)
  std::atomic<uint64_t> next;     // retired: the next block of its free list (position), 0 last. Under the lock
  std::atomic<uint64_t> retired;  // retired: UvHeader::epoch's value when it was retired, + 1 (0: never retired)
  uint8_t pad[16];
};
static_assert(sizeof(BlockHead) == 64, "BlockHead is part of the format");

inline uint64_t round64(uint64_t b) { return (b + 63) & ~uint64_t{63}; }
inline uint64_t announce_offset(uint32_t retention) { return sizeof(UvHeader) + round64(uint64_t{retention} * sizeof(DaySlot)); }
inline uint64_t region_bytes_for(uint32_t retention) { return announce_offset(retention) + uint64_t{kAnnounceSlots} * sizeof(Announce); }
inline uint64_t day_chunks_offset() { return sizeof(DayHeader); }
inline uint64_t day_hll_offset() { return sizeof(DayHeader) + round64(kMaxChunks * 8ull); }
inline uint64_t day_spaces_offset() { return day_hll_offset() + round64(hll::kHllWords * 8ull); }
inline uint64_t day_extent_bytes(uint32_t space_table) { return day_spaces_offset() + uint64_t{space_table} * sizeof(SpaceSlot); }
inline uint64_t exact_block_bytes(uint32_t cap) { return sizeof(BlockHead) + round64(uint64_t{cap} * 8); }
inline uint64_t dense_block_bytes() { return sizeof(BlockHead) + round64(uint64_t{kDenseWords} * 8); }
inline constexpr uint32_t kSparseBuf = 64;
inline constexpr uint32_t kSparseGroups = 128;
inline constexpr uint32_t kSparseGroupRegs = 128;  // kSparseGroups x kSparseGroupRegs = 16,384 registers
inline constexpr uint64_t kSparseFixed = 64 + kSparseBuf * 4 + kSparseGroups * 2;  // head + buffer + offsets: 576
inline constexpr uint64_t kSparseMaxBlock = uint64_t{kSparseClasses} * kSparseClassBytes;  // 12 KiB
inline uint64_t sparse_block_bytes(uint32_t cap) { return kSparseFixed + cap; }
inline uint32_t sparse_class(uint64_t bytes) { return static_cast<uint32_t>(std::min<uint64_t>(bytes / kSparseClassBytes, kSparseClasses - 1)); }
inline uint32_t space_table_for(uint32_t max_spaces) {
  uint32_t t = 16;
  while (t < 2ull * max_spaces) t <<= 1;
  return t;
}

// Writes a fresh (zeroed, unpublished) region's header from validated options: create and
// restore both build a region this way. Plain stores: nobody sees the region yet.
template <class Options>
inline void init_header(UvHeader* h, const Options& o, uint64_t region_offset, uint64_t region_bytes) {
  h->magic = kMagic;
  h->version = kVersion;
  h->retention = o.retention;
  h->max_spaces = o.max_spaces;
  h->space_table = space_table_for(o.max_spaces);
  h->exact_max = o.exact_max;
  h->bucket_seconds = o.bucket_seconds;
  h->utc_offset = o.utc_offset;
  h->chunk_bytes = o.chunk_bytes;
  h->region_offset = region_offset;
  h->region_bytes = region_bytes;
}
// Final exact capacity: exact_max items at a load of at most 9/10 (linear probing stays
// bounded by cap; the smaller steps grow at 3/4 load, 4x at a time, to leave less behind).
inline uint32_t exact_final_cap(uint32_t exact_max) { return std::max<uint32_t>(kMinExactSlots, (exact_max * 10 + 8) / 9 + 1); }
inline constexpr uint32_t kExactGrowth = 4;

inline DaySlot* day_slots(UvHeader* h) { return reinterpret_cast<DaySlot*>(h + 1); }
inline Announce* announces(UvHeader* h) {
  return reinterpret_cast<Announce*>(reinterpret_cast<std::byte*>(h) + announce_offset(h->retention));
}
// The size class of an exact table of `cap` slots: caps are 8 x 4^k below the final one.
inline int exact_class(uint32_t cap, uint32_t exact_max) noexcept {
  const uint32_t final_cap = exact_final_cap(exact_max);
  if (cap == final_cap) return kExactClasses - 1;
  int k = 0;
  for (uint32_t c = kMinExactSlots; c < final_cap && k < static_cast<int>(kExactClasses) - 1; c *= kExactGrowth, ++k)
    if (c == cap) return k;
  return -1;
}
inline uint64_t* day_chunks(DayHeader* d) { return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(d) + day_chunks_offset()); }
inline uint64_t* day_hll(DayHeader* d) { return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(d) + day_hll_offset()); }
inline SpaceSlot* day_spaces(DayHeader* d) { return reinterpret_cast<SpaceSlot*>(reinterpret_cast<std::byte*>(d) + day_spaces_offset()); }

// ---- hashing -------------------------------------------------------------------------
inline uint64_t item_hash(const void* p, size_t n) noexcept { return hll::murmur64a(p, n, hll::kRedisHllSeed); }
inline uint64_t item_hash(uint64_t v) noexcept {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
  return item_hash(le, 8);
}
// The value an exact slot stores for hash h (0 and 1 mean empty and sealed).
inline uint64_t stored_hash(uint64_t h) noexcept { return h < 2 ? h + 2 : h; }
inline uint64_t space_mix(uint64_t space) noexcept {
  uint64_t x = space + 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint32_t fastrange(uint64_t h, uint32_t n) noexcept {
  return static_cast<uint32_t>(((h >> 32) * n) >> 32);  // Lemire's range reduction on the high 32 bits
}

// ---- exact blocks ----------------------------------------------------------------------
enum class ExactResult { kInserted, kPresent, kSealedBlock, kFull };
// Lock-free insert of stored hash v (linear probing from fastrange(v, cap), at most cap probes).
inline ExactResult exact_insert(uint64_t* slots, uint32_t cap, uint64_t v) noexcept {
  uint32_t i = fastrange(v * 0x9e3779b97f4a7c15ull, cap);
  for (uint32_t n = 0; n < cap; ++n) {
    std::atomic_ref<uint64_t> s(slots[i]);
    uint64_t cur = s.load(std::memory_order_acquire);  // acquire: pairs with the CAS below (a hash is the whole value)
    for (;;) {
      if (cur == v) return ExactResult::kPresent;
      if (cur == kSealed) return ExactResult::kSealedBlock;
      if (cur != kEmpty) break;
      // release: the hash; a promoter that seals this slot later (acq_rel CAS) sees it.
      if (s.compare_exchange_strong(cur, v, std::memory_order_acq_rel, std::memory_order_acquire)) return ExactResult::kInserted;
    }
    if (++i == cap) i = 0;
  }
  return ExactResult::kFull;
}
// Seals every empty slot (CAS 0 -> 1). Afterwards no insert can succeed in this block. Idempotent.
inline void exact_seal(uint64_t* slots, uint32_t cap) noexcept {
  for (uint32_t i = 0; i < cap; ++i) {
    uint64_t expect = kEmpty;
    std::atomic_ref<uint64_t>(slots[i]).compare_exchange_strong(expect, kSealed, std::memory_order_acq_rel);
  }
}
inline uint64_t exact_load(const uint64_t* slots, uint32_t i) noexcept {
  return std::atomic_ref<const uint64_t>(slots[i]).load(std::memory_order_acquire);
}

// ---- dense blocks -----------------------------------------------------------------------
inline uint32_t dense_fields(uint32_t wi) noexcept {
  return wi + 1 < kDenseWords ? kDensePerWord : hll::kHllRegisters - (kDenseWords - 1) * kDensePerWord;
}
// The word after raising register slot s to value v (v <= kDenseMaxValue); == w when it would not grow.
// Deterministic in (w, s, v), so racing writers and a rerun compute the same word.
inline uint64_t dense_raise(uint64_t w, uint32_t wi, uint32_t s, uint32_t v) noexcept {
  uint32_t base = static_cast<uint32_t>(w >> 60);
  uint32_t cur = base + static_cast<uint32_t>((w >> (4 * s)) & 15);
  if (cur >= v) return w;
  const uint32_t nf = dense_fields(wi);
  uint32_t vals[kDensePerWord];
  uint32_t lo = kDenseMaxValue;
  for (uint32_t i = 0; i < nf; ++i) {
    vals[i] = base + static_cast<uint32_t>((w >> (4 * i)) & 15);
    if (i == s) vals[i] = v;
    lo = std::min(lo, vals[i]);
  }
  const uint32_t nb = std::min<uint32_t>(lo, 15);
  uint64_t out = static_cast<uint64_t>(nb) << 60;
  for (uint32_t i = 0; i < nf; ++i) out |= static_cast<uint64_t>(std::min<uint32_t>(vals[i] - nb, 15)) << (4 * i);
  return out;
}
// Lock-free register max (one CAS on one word). True when the word changed.
inline bool dense_update(uint64_t* words, uint32_t index, uint8_t rank) noexcept {
  const uint32_t wi = index / kDensePerWord, s = index % kDensePerWord;
  const uint32_t v = std::min<uint32_t>(rank, kDenseMaxValue);
  std::atomic_ref<uint64_t> w(words[wi]);
  uint64_t cur = w.load(std::memory_order_relaxed);  // relaxed: registers are monotone values, nothing else published
  for (;;) {
    uint64_t next = dense_raise(cur, wi, s, v);
    if (next == cur) return false;
    if (w.compare_exchange_weak(cur, next, std::memory_order_relaxed)) return true;
  }
}
// Register max of byte registers regs[j] into acc (acc[j] = max).
inline void dense_read_max(const uint64_t* words, uint8_t* acc) noexcept {
  for (uint32_t wi = 0; wi < kDenseWords; ++wi) {
    const uint64_t w = std::atomic_ref<const uint64_t>(words[wi]).load(std::memory_order_relaxed);
    const uint32_t base = static_cast<uint32_t>(w >> 60), nf = dense_fields(wi);
    for (uint32_t s = 0; s < nf; ++s) {
      const uint8_t v = static_cast<uint8_t>(base + ((w >> (4 * s)) & 15));
      uint8_t& a = acc[wi * kDensePerWord + s];
      if (v > a) a = v;
    }
  }
}
// A dense word is well formed: no bits past its fields (the last word has 4).
inline bool dense_word_ok(uint64_t w, uint32_t wi) noexcept {
  const uint32_t nf = dense_fields(wi);
  return nf == kDensePerWord || ((w & ((1ull << 60) - 1)) >> (4 * nf)) == 0;
}
// ---- sparse blocks ----------------------------------------------------------------------
inline uint32_t* sparse_buf(void* body) noexcept { return static_cast<uint32_t*>(body); }
inline uint16_t* sparse_groups(void* body) noexcept { return reinterpret_cast<uint16_t*>(static_cast<std::byte*>(body) + kSparseBuf * 4); }
inline uint8_t* sparse_code(void* body) noexcept { return reinterpret_cast<uint8_t*>(static_cast<std::byte*>(body) + kSparseBuf * 4 + kSparseGroups * 2); }
inline uint32_t sparse_entry(uint32_t index, uint32_t value) noexcept { return ((index << 5) | value) + 2; }
// Lock-free insert of register `index` >= `value` (1..30) into the append buffer. kPresent when
// the buffer already holds the index at >= value (entries of one index share a probe path and
// slots are never emptied, so the path up to the first empty slot holds them all).
inline ExactResult sparse_buf_insert(uint32_t* buf, uint32_t index, uint32_t value) noexcept {
  const uint32_t v = sparse_entry(index, value);
  uint32_t i = static_cast<uint32_t>((index * 0x9e3779b1u) >> 26) % kSparseBuf;
  for (uint32_t n = 0; n < kSparseBuf; ++n) {
    std::atomic_ref<uint32_t> s(buf[i]);
    uint32_t cur = s.load(std::memory_order_acquire);
    for (;;) {
      if (cur == kSealed) return ExactResult::kSealedBlock;
      if (cur != kEmpty) {
        if (((cur - 2) >> 5) == index && ((cur - 2) & 31) >= value) return ExactResult::kPresent;
        break;
      }
      // acq_rel: pairs with the promoter's sealing CAS (it sees the entry or seals first).
      if (s.compare_exchange_strong(cur, v, std::memory_order_acq_rel, std::memory_order_acquire)) return ExactResult::kInserted;
    }
    if (++i == kSparseBuf) i = 0;
  }
  return ExactResult::kFull;
}
inline void sparse_seal(uint32_t* buf) noexcept {
  for (uint32_t i = 0; i < kSparseBuf; ++i) {
    uint32_t expect = kEmpty;
    std::atomic_ref<uint32_t>(buf[i]).compare_exchange_strong(expect, kSealed, std::memory_order_acq_rel);
  }
}
// Bits of the unary code of registers regs[lo, hi).
inline uint64_t sparse_group_bits(const uint8_t* regs) noexcept {
  uint64_t bits = 0;
  for (uint32_t i = 0; i < kSparseGroupRegs; ++i) bits += 1u + std::min<uint32_t>(regs[i], kDenseMaxValue);
  return bits;
}
// Code bytes for the registers (each group byte-aligned).
inline uint64_t sparse_code_bytes(const uint8_t* regs) noexcept {
  uint64_t bytes = 0;
  for (uint32_t g = 0; g < kSparseGroups; ++g) bytes += (sparse_group_bits(regs + g * kSparseGroupRegs) + 7) / 8;
  return bytes;
}
// Writes the code (cap bytes, zeroed by the caller, >= sparse_code_bytes) and the group offsets.
inline void sparse_encode(const uint8_t* regs, uint16_t* groups, uint8_t* code) noexcept {
  uint64_t byte = 0;
  for (uint32_t g = 0; g < kSparseGroups; ++g) {
    groups[g] = static_cast<uint16_t>(byte);
    uint64_t bit = byte * 8;
    for (uint32_t i = 0; i < kSparseGroupRegs; ++i) {
      const uint32_t v = std::min<uint32_t>(regs[g * kSparseGroupRegs + i], kDenseMaxValue);
      for (uint32_t k = 0; k < v; ++k, ++bit) code[bit >> 3] |= static_cast<uint8_t>(1u << (bit & 7));
      ++bit;  // the terminating zero
    }
    byte = (bit + 7) / 8;
  }
}
// Decodes group g into out[0, kSparseGroupRegs) (max-merged); false when the code is malformed
// (an offset or a register past cap, a value above kDenseMaxValue): the block is not trusted.
inline bool sparse_decode_group(const uint16_t* groups, const uint8_t* code, uint32_t cap, uint32_t g, uint8_t* out,
                                uint32_t upto = kSparseGroupRegs) noexcept {
  const uint64_t start = groups[g];
  if (start >= cap || (g > 0 && start < groups[g - 1])) return false;
  uint64_t bit = start * 8;
  const uint64_t end = uint64_t{cap} * 8;
  for (uint32_t i = 0; i < upto; ++i) {
    uint32_t v = 0;
    for (;;) {
      if (bit >= end) return false;
      const bool one = (code[bit >> 3] >> (bit & 7)) & 1;
      ++bit;
      if (!one) break;
      if (++v > kDenseMaxValue) return false;
    }
    if (v > out[i]) out[i] = static_cast<uint8_t>(v);
  }
  return true;
}
// Every register of a sparse block (code and buffer) max-merged into regs[16384].
inline bool sparse_read_max(void* body, uint32_t cap, uint8_t* regs) noexcept {
  const uint16_t* groups = sparse_groups(body);
  const uint8_t* code = sparse_code(body);
  for (uint32_t g = 0; g < kSparseGroups; ++g)
    if (!sparse_decode_group(groups, code, cap, g, regs + g * kSparseGroupRegs)) return false;
  const uint32_t* buf = sparse_buf(body);
  for (uint32_t i = 0; i < kSparseBuf; ++i) {
    const uint32_t e = std::atomic_ref<const uint32_t>(buf[i]).load(std::memory_order_acquire);
    if (e < 2) continue;
    const uint32_t idx = (e - 2) >> 5, v = (e - 2) & 31;
    if (idx >= hll::kHllRegisters || v > kDenseMaxValue) return false;
    if (v > regs[idx]) regs[idx] = static_cast<uint8_t>(v);
  }
  return true;
}
// Register `index` as the code holds it (-1: malformed).
inline int sparse_code_get(void* body, uint32_t cap, uint32_t index) noexcept {
  uint8_t out[kSparseGroupRegs] = {};
  const uint32_t g = index / kSparseGroupRegs, i = index % kSparseGroupRegs;
  if (!sparse_decode_group(sparse_groups(body), sparse_code(body), cap, g, out, i + 1)) return -1;
  return out[i];
}
// Dense words holding the registers regs[16384] (clamped to kDenseMaxValue); words zeroed by the caller.
inline void dense_from_regs(const uint8_t* regs, uint64_t* words) noexcept {
  for (uint32_t i = 0; i < hll::kHllRegisters; ++i)
    if (regs[i] != 0) dense_update(words, i, regs[i]);
}
inline void hash_into_regs(uint64_t h, uint8_t* acc) noexcept {
  uint32_t idx;
  uint8_t rank;
  hll::hll_index_rank(h, idx, rank);
  if (rank > acc[idx]) acc[idx] = rank;
}

// The announcement of this attachment around a call that reads or writes blocks (see
// Announce): a no-op for a read-only attachment or a forked handle (token 0), whose reads
// then re-validate what they follow and retry once a descriptor moved. uv.cpp.
class Pin {
 public:
  Pin(const Segment& seg, UvHeader* h) noexcept;
  ~Pin();
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;

 private:
  std::atomic<uint64_t>* word_ = nullptr;
};

// "" when the options are valid, else what is wrong (uv.cpp).
std::string options_problem(const UvOptions& o);

// Checker and save/restore (uv.cpp, uv_snapshot.cpp); uv_kind.cpp names them in the table.
void check_uv(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);
std::string save(Segment& seg, const RegionInfo& r);
void restore(Segment& seg, const std::string& name, snapshot::In in);

}  // namespace shmfilter::internal::uv
