// lib/structures/uv/uv_impl.h: the UV family's shared layout and its stateless kernels
// (namespace internal::uv). A UV family keeps, for every space (a plan id) and every day
// bucket, a distinct-count sketch whose representation follows the space's size, in ONE
// named region (docs/uv.md). The handle is uv.cpp (include/shmfilter/uv.hpp).
//
// Layout (format version 2; all offsets from the segment base, nothing here is a pointer):
//   region   UvHeader (2 lines) + DaySlot[retention] + space lock words[kLockStripes].
//            Written once by create's init, except the slots (rotation, under the segment
//            lock), line 1's statistics and the lock words (owner tokens).
//   day      one extent per kept bucket: DayHeader (3 lines) + chunk offsets[kMaxChunks]
//            + the day's all-spaces HLL (hll kernels, Redis's exact 6-bit registers)
//            + SpaceSlot[space_table] (open addressing on the space id).
//   chunks   extents of chunk_bytes each, owned by the day, cut into pages of kPage bytes.
//            Page p (u32, 0 = none) lies in chunk p / (chunk_bytes / kPage). Pages are handed
//            out by the day's allocator (DayHeader::alloc_lock): fresh from the bump number,
//            or again from the free list once no process can still read them (the segment's
//            reader announcements: Segment's ReadGuard, docs/CONCURRENCY.md).
//   sketch   a head page (PageHead + body by encoding) and data pages the head names:
//              exact  u32 refs[kExactRefs] to pages of kExactPerPage 6-byte entries (the low
//                     48 bits of the item's hash; 0/1 stored as 2/3), appended in order.
//                     `count` entries are published (release store, under the space lock).
//              sparse u32 buf[kSparseBuf] (lock-free append of register raises: 0 empty,
//                     1 sealed, else 2 + (index << 5 | value)), u32 refs[kSparseRefs] to pages
//                     that hold, as one byte string, kSparseGroups u16 bit offsets and then
//                     the code: per group of kSparseGroupRegs registers, for every non-zero
//                     register the Rice-coded (parameter `rice`) count of zero registers before
//                     it and its value v as v-1 one bits and a zero bit; then the Rice-coded
//                     count of zero registers to the group's end. Immutable once published.
//              dense  u32 refs[kDenseRefs] to pages of 32 words of 15 4-bit registers and a
//                     4-bit word base (bits 60..63): register = base + field (HLL-TailCut's
//                     idea per word, so one CAS updates a register).
//   A space's sketch is named by SpaceSlot::desc = (head page << 2) | enc.
//   Exact appends, first sketches, promotions and sparse merges of a space run under its
//   space lock (lock word = owner token; a waiter takes over a lock whose owner is dead),
//   never under the segment lock: a promotion builds the new sketch in fresh pages, publishes
//   it with ONE store of desc, then retires the old pages (stamped with the segment's epoch).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shmfilter/segment.hpp"
#include "shmfilter/uv.hpp"
#include "structures/hll/hll_impl.h"

namespace shmfilter::internal::snapshot {
struct In;
}

namespace shmfilter::internal::uv {

inline constexpr uint32_t kMagic = 0x31465655;     // "UVF1" little-endian
inline constexpr uint32_t kDayMagic = 0x32445655;  // "UVD2"
inline constexpr uint32_t kHeadMagic = 0x32485655;  // "UVH2"
inline constexpr uint32_t kVersion = 2;            // 1: blocks in size classes + the family's own announcements
inline constexpr uint32_t kMaxRetention = 64;
inline constexpr uint32_t kMaxSpaces = 1u << 20;
inline constexpr uint32_t kMaxChunks = 1024;
inline constexpr uint64_t kMinChunkBytes = 64ull << 10;
inline constexpr uint64_t kMaxChunkBytes = 256ull << 20;
inline constexpr uint32_t kLockStripes = 4096;
enum : uint32_t { kEncNone = 0, kEncExact = 1, kEncDense = 2, kEncSparse = 3 };
inline constexpr uint64_t kEncMask = 3;
inline constexpr uint64_t kEmpty = 0, kSealed = 1;

inline constexpr uint32_t kPage = 256;
inline constexpr uint32_t kExactEntry = 6;
inline constexpr uint32_t kExactPerPage = kPage / kExactEntry;  // 42
inline constexpr uint32_t kExactRefs = 56;
inline constexpr uint32_t kMaxExactMax = 2048;  // <= kExactRefs x kExactPerPage (2,352)
inline constexpr uint32_t kSparseBuf = 32;
inline constexpr uint32_t kSparseMergeAt = 24;  // buffer entries that trigger a merge
inline constexpr uint32_t kSparseRefs = 24;
inline constexpr uint32_t kSparseGroups = 64;
inline constexpr uint32_t kSparseGroupRegs = 256;  // kSparseGroups x kSparseGroupRegs = 16,384 registers
inline constexpr uint32_t kSparseOffsetsBytes = kSparseGroups * 2;
inline constexpr uint64_t kSparseMaxBytes = uint64_t{kSparseRefs} * kPage;  // offsets + code
inline constexpr uint32_t kRiceMax = 7;

// Dense registers: 15 per word, 4 bits each, word base in bits 60..63; 32 words a page.
inline constexpr uint32_t kDensePerWord = 15;
inline constexpr uint32_t kDenseWords = (hll::kHllRegisters + kDensePerWord - 1) / kDensePerWord;  // 1093
inline constexpr uint32_t kDenseWordsPerPage = kPage / 8;
inline constexpr uint32_t kDenseRefs = (kDenseWords + kDenseWordsPerPage - 1) / kDenseWordsPerPage;  // 35
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
  uint64_t chunk_bytes;     // size of each chunk extent, kMinChunkBytes..kMaxChunkBytes, a multiple of kPage
  uint64_t region_offset;   // this header's own offset (validation)
  uint64_t region_bytes;    // the region's size as created
  // Line 1: statistics, relaxed RMWs by any process; only grow.
  alignas(64) std::atomic<uint64_t> rotations;   // days started (slot taken by a new bucket)
  std::atomic<uint64_t> promotions;               // sketches replaced by a bigger or denser one (or merged)
  std::atomic<uint64_t> spaces_full;              // adds refused: the day's space table was full
  std::atomic<uint64_t> no_space;                 // adds refused: no chunk could be allocated
  std::atomic<uint64_t> stale;                    // adds refused: the clock named a bucket older than the kept ones
  std::atomic<uint64_t> lock_takeovers;           // space or allocator locks taken over from a dead owner
  uint8_t pad1[16];
};
static_assert(sizeof(UvHeader) == 128, "UvHeader is part of the format: 2 cache lines");
static_assert(offsetof(UvHeader, magic) == 0 && offsetof(UvHeader, version) == 4, "region prefix");
static_assert(offsetof(UvHeader, rotations) == 64, "statistics on line 1");

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
  std::atomic<uint64_t> desc;  // 0 (no sketch yet) or (head page << 2) | enc. Stores (seq_cst) under the space's lock only
};
static_assert(sizeof(SpaceSlot) == 16, "SpaceSlot is part of the format");

// The first bytes of a day extent. Line 0 written by the rotation into fresh memory before the
// slot names it, immutable after.
struct alignas(64) DayHeader {
  uint32_t magic;            // kDayMagic
  uint32_t space_table;      // = UvHeader::space_table
  int64_t bucket;            // the bucket this day holds
  uint64_t chunk_bytes;      // = UvHeader::chunk_bytes
  uint64_t extent_bytes;     // this day extent's size
  uint8_t pad0[32];
  // Line 1: the page allocator. Every field but `spaces` is written by the holder of
  // alloc_lock only (release stores, never logged: a holder killed anywhere leaves pages
  // unused or lost from a list, never a page in two places).
  alignas(64) std::atomic<uint64_t> alloc_lock;   // owner token of the holder, 0 free (a dead owner's is taken over)
  std::atomic<uint64_t> bump;                     // the next fresh page number (1 at start: page 0 is "none")
  std::atomic<uint32_t> chunk_count;              // chunks[0 .. chunk_count) are allocated (logged, own transaction)
  std::atomic<uint32_t> free_head;                // pages nobody can read any more: a list linked by each page's first u32
  uint32_t reserved1;
  std::atomic<uint64_t> spaces;                   // space keys claimed (relaxed RMW, any process)
  uint8_t pad1[24];
  // Line 2: statistics, relaxed RMWs by any process (allocator counts by its lock holder).
  alignas(64) std::atomic<uint64_t> adds;         // adds that reached this day
  std::atomic<uint64_t> reused;                   // pages handed out again from the free list
  std::atomic<uint64_t> retired_pages;            // pages on the limbo and free lists now
  uint8_t pad2[40];
  // Line 3: retired pages not yet safe to hand out, in kLimbo generations (a retirement at
  // segment epoch E goes to generation (E / kLimboEpochs) % kLimbo, so a generation stops
  // growing and becomes safe while later ones fill, also under continuous retirements by many
  // processes). limbo_epoch[i]: the epoch of the newest retirement in generation i, raised
  // BEFORE a page is linked into it. Written by the alloc_lock holder only.
  alignas(64) std::atomic<uint32_t> limbo_head[4];
  std::atomic<uint64_t> limbo_epoch[4];
  uint8_t pad3[16];
};
static_assert(sizeof(DayHeader) == 256, "DayHeader is part of the format");
inline constexpr uint32_t kLimbo = 4;
inline constexpr uint64_t kLimboEpochs = 64;
inline uint32_t limbo_generation(uint64_t epoch) noexcept { return static_cast<uint32_t>((epoch / kLimboEpochs) % kLimbo); }

// A sketch's head page (kPage bytes): this header, then the body of its encoding.
struct PageHead {
  uint32_t magic;                 // kHeadMagic: written before desc names the page, immutable
  uint8_t enc;                    // kEncExact / kEncSparse / kEncDense: idem
  uint8_t rice;                   // sparse: the Rice parameter (0..kRiceMax): idem
  uint16_t npages;                // sparse / dense: data pages (refs[0 .. npages)): idem. Exact: 0
  uint64_t space;                 // the space it belongs to: idem
  std::atomic<uint32_t> count;    // exact: entries published (release, under the space lock); sparse: buffer
                                  // entries taken (relaxed fetch_add, a merge trigger only); dense: 0
  uint32_t code_bits;             // sparse: bits of code after the group offsets: immutable
  uint64_t reserved;
};
static_assert(sizeof(PageHead) == 32, "PageHead is part of the format");
static_assert(sizeof(PageHead) + kExactRefs * 4 == kPage, "exact head");
static_assert(sizeof(PageHead) + kSparseBuf * 4 + kSparseRefs * 4 == kPage, "sparse head");
static_assert(sizeof(PageHead) + kDenseRefs * 4 <= kPage, "dense head");
static_assert(kMaxExactMax <= kExactRefs * kExactPerPage, "exact_max fits the head's refs");

inline uint64_t round64(uint64_t b) { return (b + 63) & ~uint64_t{63}; }
inline uint64_t locks_offset(uint32_t retention) { return sizeof(UvHeader) + round64(uint64_t{retention} * sizeof(DaySlot)); }
inline uint64_t region_bytes_for(uint32_t retention) { return locks_offset(retention) + uint64_t{kLockStripes} * 8; }
inline uint64_t day_chunks_offset() { return sizeof(DayHeader); }
inline uint64_t day_hll_offset() { return sizeof(DayHeader) + round64(kMaxChunks * 8ull); }
inline uint64_t day_spaces_offset() { return day_hll_offset() + round64(hll::kHllWords * 8ull); }
inline uint64_t day_extent_bytes(uint32_t space_table) { return day_spaces_offset() + uint64_t{space_table} * sizeof(SpaceSlot); }
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
// Writes a fresh day extent's line 0 and allocator start (rotation and restore).
inline void init_day(std::byte* p, uint32_t space_table, int64_t bucket, uint64_t chunk_bytes) {
  auto* d = reinterpret_cast<DayHeader*>(p);
  d->magic = kDayMagic;
  d->space_table = space_table;
  d->bucket = bucket;
  d->chunk_bytes = chunk_bytes;
  d->extent_bytes = day_extent_bytes(space_table);
  d->bump.store(1, std::memory_order_relaxed);
}

inline DaySlot* day_slots(UvHeader* h) { return reinterpret_cast<DaySlot*>(h + 1); }
inline std::atomic<uint64_t>* space_locks(UvHeader* h) {
  return reinterpret_cast<std::atomic<uint64_t>*>(reinterpret_cast<std::byte*>(h) + locks_offset(h->retention));
}
inline uint64_t* day_chunks(DayHeader* d) { return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(d) + day_chunks_offset()); }
inline uint64_t* day_hll(DayHeader* d) { return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(d) + day_hll_offset()); }
inline SpaceSlot* day_spaces(DayHeader* d) { return reinterpret_cast<SpaceSlot*>(reinterpret_cast<std::byte*>(d) + day_spaces_offset()); }

// Head bodies.
inline uint32_t* head_refs(PageHead* p) {
  auto* b = reinterpret_cast<uint32_t*>(p + 1);
  return p->enc == kEncSparse ? b + kSparseBuf : b;
}
inline uint32_t* sparse_buf(PageHead* p) { return reinterpret_cast<uint32_t*>(p + 1); }
inline uint32_t max_refs(uint32_t enc) { return enc == kEncExact ? kExactRefs : enc == kEncSparse ? kSparseRefs : kDenseRefs; }

// ---- hashing -------------------------------------------------------------------------
inline uint64_t item_hash(const void* p, size_t n) noexcept { return hll::murmur64a(p, n, hll::kRedisHllSeed); }
inline uint64_t item_hash(uint64_t v) noexcept {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
  return item_hash(le, 8);
}
inline constexpr uint64_t kHash48 = (uint64_t{1} << 48) - 1;
// The value an exact entry stores for hash h: its low 48 bits (0 and 1 stored as 2 and 3, so
// that the registers stay Redis's: index = low 14 bits, rank from bits 14..47, clamped to 30).
inline uint64_t stored_hash(uint64_t h) noexcept {
  const uint64_t v = h & kHash48;
  return v < 2 ? v + 2 : v;
}
// Register index and rank (clamped to kDenseMaxValue) of a stored 48-bit value: the same as the
// full hash's (a rank above 30 needs bits 14..44 all zero, and is clamped either way).
inline void index_rank48(uint64_t v, uint32_t& idx, uint8_t& rank) noexcept {
  uint8_t r;
  hll::hll_index_rank(v | (uint64_t{1} << 50), idx, r);  // bit 50: rank <= 37 from 48 bits
  rank = static_cast<uint8_t>(std::min<uint32_t>(r, kDenseMaxValue));
}
inline void put48(std::byte* p, uint64_t v) noexcept {
  for (int i = 0; i < 6; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
inline uint64_t get48(const std::byte* p) noexcept {
  uint64_t v = 0;
  for (int i = 0; i < 6; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
// Whether the first m entries of an exact page hold v: one unaligned 8-byte load per entry
// (entry i ends 2 bytes before the next or, for the last, 4 bytes before the page's end).
inline bool exact_page_has(const std::byte* page, uint32_t m, uint64_t v) noexcept {
  static_assert(kExactPerPage * kExactEntry + 2 <= kPage, "the last entry's 8-byte load stays inside its page");
  bool hit = false;
  for (uint32_t i = 0; i < m; ++i) {
    uint64_t x;
    std::memcpy(&x, page + i * kExactEntry, 8);
    hit |= (x & kHash48) == v;
  }
  return hit;
}
inline uint64_t space_mix(uint64_t space) noexcept {
  uint64_t x = space + 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint32_t lock_stripe(uint64_t space) noexcept { return static_cast<uint32_t>(space_mix(space) >> 52) % kLockStripes; }

enum class InsertResult { kInserted, kPresent, kSealedBlock, kFull };

// ---- dense words ------------------------------------------------------------------------
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
// Lock-free register max of one word (one CAS). True when the word changed.
inline bool dense_update_word(uint64_t* word, uint32_t wi, uint32_t s, uint8_t rank) noexcept {
  const uint32_t v = std::min<uint32_t>(rank, kDenseMaxValue);
  std::atomic_ref<uint64_t> w(*word);
  uint64_t cur = w.load(std::memory_order_relaxed);  // relaxed: registers are monotone values, nothing else published
  for (;;) {
    uint64_t next = dense_raise(cur, wi, s, v);
    if (next == cur) return false;
    if (w.compare_exchange_weak(cur, next, std::memory_order_relaxed)) return true;
  }
}
// The byte registers of one dense word, max-merged into acc[wi * 15 ..].
inline void dense_word_max(uint64_t w, uint32_t wi, uint8_t* acc) noexcept {
  const uint32_t base = static_cast<uint32_t>(w >> 60), nf = dense_fields(wi);
  for (uint32_t s = 0; s < nf; ++s) {
    const uint8_t v = static_cast<uint8_t>(base + ((w >> (4 * s)) & 15));
    uint8_t& a = acc[wi * kDensePerWord + s];
    if (v > a) a = v;
  }
}
// A dense word is well formed: no bits past its fields (the last word has 4).
inline bool dense_word_ok(uint64_t w, uint32_t wi) noexcept {
  const uint32_t nf = dense_fields(wi);
  return nf == kDensePerWord || ((w & ((1ull << 60) - 1)) >> (4 * nf)) == 0;
}
// Dense words holding the registers regs[16384] (clamped); words zeroed by the caller.
inline void dense_from_regs(const uint8_t* regs, uint64_t* words) noexcept {
  for (uint32_t i = 0; i < hll::kHllRegisters; ++i)
    if (regs[i] != 0) dense_update_word(&words[i / kDensePerWord], i / kDensePerWord, i % kDensePerWord, regs[i]);
}

// ---- sparse buffer ---------------------------------------------------------------------
inline uint32_t sparse_entry(uint32_t index, uint32_t value) noexcept { return ((index << 5) | value) + 2; }
// Lock-free insert of register `index` >= `value` (1..30) into the append buffer. kPresent when
// the buffer already holds the index at >= value (entries of one index share a probe path and
// slots are never emptied, so the path up to the first empty slot holds them all).
inline InsertResult sparse_buf_insert(uint32_t* buf, uint32_t index, uint32_t value) noexcept {
  const uint32_t v = sparse_entry(index, value);
  uint32_t i = static_cast<uint32_t>((index * 0x9e3779b1u) >> 27) % kSparseBuf;
  for (uint32_t n = 0; n < kSparseBuf; ++n) {
    std::atomic_ref<uint32_t> s(buf[i]);
    uint32_t cur = s.load(std::memory_order_acquire);
    for (;;) {
      if (cur == kSealed) return InsertResult::kSealedBlock;
      if (cur != kEmpty) {
        if (((cur - 2) >> 5) == index && ((cur - 2) & 31) >= value) return InsertResult::kPresent;
        break;
      }
      // acq_rel: pairs with the merger's sealing CAS (it sees the entry or seals first).
      if (s.compare_exchange_strong(cur, v, std::memory_order_acq_rel, std::memory_order_acquire)) return InsertResult::kInserted;
    }
    if (++i == kSparseBuf) i = 0;
  }
  return InsertResult::kFull;
}
// Seals every empty slot (CAS 0 -> 1): afterwards no insert can succeed. Idempotent.
inline void sparse_seal(uint32_t* buf) noexcept {
  for (uint32_t i = 0; i < kSparseBuf; ++i) {
    uint32_t expect = kEmpty;
    std::atomic_ref<uint32_t>(buf[i]).compare_exchange_strong(expect, kSealed, std::memory_order_acq_rel);
  }
}
// The buffer's entries max-merged into regs; false when an entry is malformed.
inline bool sparse_buf_max(const uint32_t* buf, uint8_t* regs) noexcept {
  for (uint32_t i = 0; i < kSparseBuf; ++i) {
    const uint32_t e = std::atomic_ref<const uint32_t>(buf[i]).load(std::memory_order_acquire);
    if (e < 2) continue;
    const uint32_t idx = (e - 2) >> 5, v = (e - 2) & 31;
    if (idx >= hll::kHllRegisters || v > kDenseMaxValue || v == 0) return false;
    if (v > regs[idx]) regs[idx] = static_cast<uint8_t>(v);
  }
  return true;
}

// ---- sparse code (Rice-coded gaps, unary values) ------------------------------------------
// A byte string split over pages: byte i of the string is pages[i / kPage][i % kPage].
struct PagedBytes {
  std::byte* pages[kSparseRefs] = {};
  uint32_t n = 0;  // pages
  uint8_t byte(uint64_t i) const noexcept { return static_cast<uint8_t>(pages[i / kPage][i % kPage]); }
  uint16_t u16(uint64_t i) const noexcept { return static_cast<uint16_t>(byte(i) | (byte(i + 1) << 8)); }
  // Copies bytes [from, to) (to <= n x kPage) into out[0 ..].
  void copy_out(uint64_t from, uint64_t to, uint8_t* out) const noexcept {
    while (from < to) {
      const uint64_t in = from % kPage, m = std::min<uint64_t>(kPage - in, to - from);
      std::memcpy(out, pages[from / kPage] + in, m);
      out += m;
      from += m;
    }
  }
  void copy_in(const uint8_t* in, uint64_t bytes) noexcept {
    for (uint64_t at = 0; at < bytes; at += kPage) std::memcpy(pages[at / kPage], in + at, std::min<uint64_t>(kPage, bytes - at));
  }
};
inline bool sparse_string_bytes_ok(uint64_t bytes, uint32_t code_bits) noexcept {
  return bytes >= kSparseOffsetsBytes + (uint64_t{code_bits} + 7) / 8 && bytes <= kSparseMaxBytes;
}
inline constexpr uint64_t kCode0 = uint64_t{kSparseOffsetsBytes} * 8;  // the code's first bit in the string
// Reads bits of a contiguous buffer followed by >= 8 readable bytes, LSB first, up to `end`.
struct BitReader {
  const uint8_t* p;
  uint64_t bit, end;
  uint64_t peek() const noexcept {
    uint64_t x;
    std::memcpy(&x, p + (bit >> 3), 8);
    return x >> (bit & 7);  // >= 57 valid bits
  }
  // A run of one bits and its terminating zero: the run's length, -1 past the end or above limit.
  int64_t unary(uint64_t limit) noexcept {
    uint64_t n = 0;
    for (;;) {
      if (bit >= end) return -1;
      const uint32_t t = static_cast<uint32_t>(__builtin_ctzll(~peek() | (uint64_t{1} << 56)));
      if (t < 56) {
        n += t;
        bit += t + 1;
        return bit > end || n > limit ? -1 : static_cast<int64_t>(n);
      }
      n += 56;
      bit += 56;
      if (n > limit) return -1;
    }
  }
  int64_t bits(uint32_t k) noexcept {
    if (k == 0) return 0;
    const uint64_t v = peek() & ((uint64_t{1} << k) - 1);
    bit += k;
    return bit > end ? -1 : static_cast<int64_t>(v);
  }
};
// Decodes one group's registers into out[0 .. kSparseGroupRegs) (max-merged), its code being
// the bits [r.bit, r.end), stopping once register `upto` is decoded; false when malformed (a
// gap past the group, a value above kDenseMaxValue, a code past its end).
inline bool sparse_decode_group(BitReader r, uint32_t rice, uint8_t* out, uint32_t upto = kSparseGroupRegs) noexcept {
  uint32_t pos = 0;
  for (;;) {
    const int64_t q = r.unary((kSparseGroupRegs - pos) >> rice);
    if (q < 0) return false;
    const int64_t low = r.bits(rice);
    if (low < 0) return false;
    const uint64_t gap = (static_cast<uint64_t>(q) << rice) | static_cast<uint64_t>(low);
    if (gap > kSparseGroupRegs - pos) return false;
    pos += static_cast<uint32_t>(gap);
    if (pos == kSparseGroupRegs || pos > upto) return true;
    const int64_t ones = r.unary(kDenseMaxValue - 1);
    if (ones < 0) return false;
    const uint8_t v = static_cast<uint8_t>(ones + 1);
    if (v > out[pos]) out[pos] = v;
    if (pos == upto) return true;
    ++pos;
  }
}
// Every register of a sparse string (buf: the whole string, bytes long, plus 8 readable bytes)
// max-merged into regs[16384]; false when malformed.
inline bool sparse_decode_all(const uint8_t* buf, uint64_t bytes, uint32_t code_bits, uint32_t rice, uint8_t* regs) noexcept {
  if (sparse_string_bytes_ok(bytes, code_bits) == false) return false;
  for (uint32_t g = 0; g < kSparseGroups; ++g) {
    const uint32_t start = static_cast<uint32_t>(buf[2 * g] | (buf[2 * g + 1] << 8));
    if (start > code_bits) return false;
    if (!sparse_decode_group(BitReader{buf, kCode0 + start, kCode0 + code_bits}, rice, regs + g * kSparseGroupRegs)) return false;
  }
  return true;
}
// Register `idx` as the string in pb holds it (the code only, not the buffer); -1 when malformed.
// Copies only the bytes of idx's group.
inline int sparse_code_get(const PagedBytes& pb, uint32_t code_bits, uint32_t rice, uint32_t idx) noexcept {
  const uint32_t g = idx / kSparseGroupRegs;
  const uint32_t start = pb.u16(uint64_t{g} * 2);
  uint32_t gend = g + 1 < kSparseGroups ? pb.u16(uint64_t{g} * 2 + 2) : code_bits;
  if (start > code_bits) return -1;
  if (gend < start || gend > code_bits) gend = code_bits;
  const uint64_t b0 = (kCode0 + start) >> 3, b1 = (kCode0 + gend + 7) >> 3;
  if (b1 > uint64_t{pb.n} * kPage || b1 - b0 > kSparseMaxBytes) return -1;
  uint8_t tmp[kSparseMaxBytes + 8];
  pb.copy_out(b0, b1, tmp);
  std::memset(tmp + (b1 - b0), 0, 8);  // the reader's 8-byte loads past the group's last byte
  uint8_t out[kSparseGroupRegs] = {};
  const uint64_t first = (kCode0 + start) & 7;
  if (!sparse_decode_group(BitReader{tmp, first, first + (gend - start)}, rice, out, idx % kSparseGroupRegs)) return -1;
  return out[idx % kSparseGroupRegs];
}
// The Rice parameter with the shortest code for regs, and its bits.
inline uint32_t sparse_best_rice(const uint8_t* regs, uint64_t* bits) noexcept {
  static thread_local std::vector<uint16_t> gaps;
  gaps.clear();
  uint64_t vbits = 0;
  for (uint32_t g = 0; g < kSparseGroups; ++g) {
    uint32_t pos = 0;
    for (uint32_t i = 0; i < kSparseGroupRegs; ++i) {
      const uint32_t v = std::min<uint32_t>(regs[g * kSparseGroupRegs + i], kDenseMaxValue);
      if (v == 0) continue;
      gaps.push_back(static_cast<uint16_t>(i - pos));
      vbits += v;
      pos = i + 1;
    }
    gaps.push_back(static_cast<uint16_t>(kSparseGroupRegs - pos));
  }
  uint32_t best = 0;
  uint64_t lo = ~uint64_t{0};
  for (uint32_t k = 0; k <= kRiceMax; ++k) {
    uint64_t b = vbits + uint64_t{k + 1} * gaps.size();
    for (uint16_t x : gaps) b += x >> k;
    if (b < lo) lo = b, best = k;
  }
  *bits = lo;
  return best;
}
// Bytes of the string (group offsets + code) for `bits` of code.
inline uint64_t sparse_string_bytes(uint64_t bits) noexcept { return kSparseOffsetsBytes + (bits + 7) / 8; }
// Writes the group offsets and the code with Rice parameter k into out (zeroed by the caller,
// sparse_string_bytes(bits) + 8 bytes long). Returns the code's bits.
inline uint64_t sparse_encode(const uint8_t* regs, uint32_t k, uint8_t* out) noexcept {
  uint64_t bit = kCode0;
  auto put = [&](uint64_t v, uint32_t n) {  // n <= 56 bits of v at bit
    uint64_t x;
    std::memcpy(&x, out + (bit >> 3), 8);
    x |= v << (bit & 7);
    std::memcpy(out + (bit >> 3), &x, 8);
    bit += n;
  };
  auto ones = [&](uint32_t n) {
    for (; n >= 56; n -= 56) put((uint64_t{1} << 56) - 1, 56);
    put((uint64_t{1} << n) - 1, n + 1);  // and the terminating zero
  };
  for (uint32_t g = 0; g < kSparseGroups; ++g) {
    const uint64_t rel = bit - kCode0;
    out[2 * g] = static_cast<uint8_t>(rel & 0xff);
    out[2 * g + 1] = static_cast<uint8_t>((rel >> 8) & 0xff);
    uint32_t pos = 0;
    for (uint32_t i = 0; i <= kSparseGroupRegs; ++i) {
      const uint32_t v = i < kSparseGroupRegs ? std::min<uint32_t>(regs[g * kSparseGroupRegs + i], kDenseMaxValue) : 1;
      if (v == 0) continue;
      const uint32_t gap = i - pos;
      ones(gap >> k);
      if (k) put(gap & ((1u << k) - 1), k);
      if (i < kSparseGroupRegs) ones(v - 1);
      pos = i + 1;
    }
  }
  return bit - kCode0;
}

// A robust lock word in shared memory: the owner's token, 0 free. A waiter takes over a lock
// whose owner is no longer alive (the kernel's liveness of its registry slot); the wait is
// bounded (then the caller answers kBusy). uv.cpp.
bool lock_word(const Segment& seg, std::atomic<uint64_t>& w, uint64_t token, bool wait, std::atomic<uint64_t>* takeovers) noexcept;
inline void unlock_word(std::atomic<uint64_t>& w) noexcept { w.store(0, std::memory_order_release); }

// "" when the options are valid, else what is wrong (uv.cpp).
std::string options_problem(const UvOptions& o);

// A bucket's content as a save file holds it (uv_snapshot.cpp): per space its exact entries
// (stored 48-bit values) or dense words (sparse sketches are saved as dense words: the same
// registers). read_days (uv.cpp) reads them through the validated data plane; throws kCorrupt.
struct SavedSpace {
  uint64_t space;
  uint32_t enc;  // kEncExact / kEncDense
  std::vector<uint64_t> v;
};
struct SavedDay {
  int64_t bucket;
  std::vector<uint64_t> hll;
  std::vector<SavedSpace> spaces;
};
std::vector<SavedDay> read_days(Segment& seg, const RegionInfo& r);

// Checker and save/restore (uv.cpp, uv_snapshot.cpp); uv_kind.cpp names them in the table.
void check_uv(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);
std::string save(Segment& seg, const RegionInfo& r);
void restore(Segment& seg, const std::string& name, snapshot::In in);

}  // namespace shmfilter::internal::uv
