// lib/structures/window/window_impl.h: the shared layout of a Window region and the
// kernels over one bucket table (base, length). The handle (window.cpp) finds
// tables through the slot ring and calls these; docs/window.md has the design
// and docs/FORMAT.md the byte table.
//
// ---------------------------------------------------------------------------
// Layout
//   region  = WindowHeader (256 B) | BucketSlot[slots] (16 B each, slots = retention + 1,
//             rounded to 64) | space keys u64[space_table] (space_table = pow2 >= 2 x max_spaces)
//   a table = one extent per bucket, from ControlTxn::allocate (zeroed):
//             TableHead (576 B) | counters u64[space_table + 1] (rounded to 64) | main table
//             main table: kBloom: blocks x 64 B blocked-Bloom lines (bloom_impl.h kernels)
//                         kCuckoo: cuckoo::Header + sub-filter 0 (cuckoo_impl.h kernels)
//   overflow = one more extent per bucket when its main table reached capacity:
//             kBloom: blocked-Bloom lines sized for `capacity` at overflow_error;
//             kCuckoo: a second cuckoo sub-filter of the same geometry (subs[1]).
//
// Hash (part of the format): h = XXH3-64(item bytes, seed ^ fmix64(space + 1));
// a uint64 item is its 8 LE bytes. kBloom: block = FastRange32(h >> 32, blocks)
// of each table, probe bits from uint32(h) (bloom_impl.h), so ONE hash and one
// set of masks serve every bucket of a query. kCuckoo: cuckoo::split_hash(h, f).
//
// Bucket numbers: E = floor((unix + utc_offset) / bucket_seconds), clamped at 0.
// Bucket E lives in slot E mod slots. A slot's tag says what it holds:
//   0          a fresh zeroed table, ready for whichever bucket lands on the slot
//   E + 1      bucket E (live while E > current - retention, else expired data)
//   kRetired   no table (maintain() freed it)
//
// ---------------------------------------------------------------------------
// Sizing maths (docs/window.md):
//   the user's error p is for a query over w_e buckets; one bucket gets
//   p1 = 1 - (1 - p)^(1/w_e) (~ p / w_e), so a w_e-bucket query has
//   1 - (1 - p1)^w_e = p when every bucket is at its bound.
//   p1 is split: main table p1 * 2/3 at capacity, overflow p1 * 1/3 at capacity,
//   so one bucket stays <= p1 up to 2x its capacity (union bound; the two tables
//   are independent: 1 - (1 - a)(1 - b) <= a + b).
//   kBloom main: bloom::size_blocked(capacity, p1 * 2/3) (measured-calibrated).
//   kCuckoo: fingerprint f = ceil(log2(2b / (p1 / 2))) rounded up to 8/12/16
//   (two sub-filters at most 2b/2^f each, Fan et al. 2014).
#pragma once

#include <string>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/hash.h"
#include "shmfilter/segment.hpp"
#include "structures/bloom/bloom_impl.h"
#include "structures/cuckoo/cuckoo_impl.h"

namespace shmfilter::internal::window {

inline constexpr uint32_t kMagic = 0x4e495753;  // "SWIN" little-endian
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kMaxRetention = 64;
inline constexpr uint32_t kMaxSpaces = 1u << 20;
inline constexpr uint64_t kRetired = ~uint64_t{0};
inline constexpr uint32_t kStripes = 8;
inline constexpr double kMainShare = 2.0 / 3.0;  // of p1, for the main table
inline constexpr double kHeadroom = 1.5;         // a bucket that outgrew its table: next = 1.5 x its distinct count
enum : uint32_t { kVariantBloom = 0, kVariantCuckoo = 1, kVariantStamped = 2 };
// TableHead.flags bits. kTableAllChecked: set when the table is created; cleared (sticky,
// before the insert) by the first kCuckoo insert into it that did not check every older
// bucket of the window (mark, mark_if_unseen with w < retention), and on the newer tables
// by an insert that straggled behind a rotation. While it is set, no pair has a copy in
// this table AND in an older table of the window (its inserts saw the older tables), which
// is what lets forget() tell a pair's own copy from a collider's (docs/window.md "forget").
// A table written by an older build reads 0: treated as unchecked (forget erases there).
// kTableSealed (kCuckoo): this table takes no more inserts, because a newer bucket exists.
// Set (release fetch_or) only by a holder of the table's cuckoo writer lock: by an insert that
// found, under that lock, the header epoch past this bucket (it then retries in the newer
// bucket), or by a mark_if_unseen of a newer bucket whose window covers this one, before it
// trusts its lock-free check of this table (docs/window.md "Answers and race bounds"). Never
// cleared while the table lives; a recycled table starts without it (start_table / alloc_table
// write flags whole), a restored one too (snapshot_window.cpp keeps only kTableOverflowFailed).
// An older build ignores the bit (it neither sets nor reads it): no misreading, no version bump.
// kTableLayered: set when the table is created (alloc / start_table write flags whole) by a build
// that grows a bucket past 2x its capacity in layers (docs/window.md "Overload"): kBloom: the
// overflow extent ends with a BloomLayerDir naming layers 2.. (each twice the previous one's
// capacity at half its error); kCuckoo: the table's cuckoo header allows kLayeredMaxSubs
// sub-filters (sub j >= 1 has 2^(j-1) x the main table's buckets). Never changes while the table
// lives. A table without it (an older build's, or a restored one) keeps the one overflow.
enum : uint32_t { kTableOverflowFailed = 1u, kTableAllChecked = 2u, kTableSealed = 4u, kTableLayered = 8u };

// Overload (docs/window.md "Overload"). The FP bound holds up to kOverloadTarget x a table's
// capacity: kBloom: main p1 x 2/3, layer i >= 1 (capacity C x 2^(i-1)) at p1/3 x 2^-i, so the sum
// stays < p1 at any number of layers (scalable Bloom filters, Almeida et al. 2007); kCuckoo: every
// sub-filter shares the fingerprint, sized so kCuckooBudgetSubs full sub-filters stay <= p1
// (C, C, 2C, 4C hold 8C at the load one sub-filter reaches); past that the rate now is reported.
inline constexpr uint32_t kOverloadTarget = 8;
inline constexpr uint32_t kBloomMaxLayers = 10;   // overflow layers of a kBloom table (1 + kBloomMaxExtra)
inline constexpr uint32_t kBloomMaxExtra = kBloomMaxLayers - 1;  // layers 2.. named by the BloomLayerDir
inline constexpr uint32_t kCuckooBudgetSubs = 4;  // sub-filters the fingerprint is sized for
inline constexpr uint32_t kLayeredMaxSubs = 16;   // = cuckoo::kMaxSubs: sub-filters of a layered kCuckoo table
inline constexpr uint32_t kStampedMaxSubs = 5;   // kStamped: sub 0 + 1x, 2x, 4x, 8x of it (15x in all past sub 0)
inline constexpr uint32_t kStampedMaxPath = 5;   // BFS moves of a kStamped insert
inline constexpr uint64_t kSweepChunk = 1u << 16; // buckets a sweep clears per writer-lock hold (512 KiB)
inline constexpr uint32_t kLayeredMaxPath = 2;    // BFS moves of a layered kCuckoo insert: <= 42 bucket reads,
                                                  // then the next sub-filter (no latency cliff near full)

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared counters must be lock-free across processes");

// Region header. Lines 0-1: parameters, written once by create's init (under the
// segment lock, before the directory entry is published), immutable afterwards.
struct alignas(64) WindowHeader {
  uint32_t magic;           // kMagic
  uint32_t version;         // kVersion
  uint32_t variant;         // kVariantBloom / kVariantCuckoo
  uint32_t retention;       // R: buckets a window query may cover (1..kMaxRetention)
  uint32_t slots;           // R + 1 (the extra one is the spare the next bucket rotates into)
  uint32_t max_spaces;      // spaces with their own counter row
  uint32_t space_table;     // key table size: power of two >= 2 x max_spaces
  uint32_t error_window;    // w the error is for (1..R)
  uint64_t bucket_seconds;  // >= 1
  int64_t utc_offset;       // seconds added to Unix time before dividing (UTC+8: 28800)
  uint64_t seed;            // XXH3 seed
  uint64_t expected;        // expected distinct pairs per bucket, as asked (>= 1)
  double error;             // p, as asked, for error_window buckets
  double p1;                // one-bucket rate
  double main_error;        // p1 x kMainShare
  double overflow_error;    // p1 x (1 - kMainShare)
  uint32_t k_main;          // kBloom: probes of main tables; kCuckoo: fingerprint bits
  uint32_t k_overflow;      // kBloom: probes of overflow tables; kCuckoo: = k_main
  uint64_t region_offset;   // this header's own offset (validation)
  uint64_t region_bytes;    // the region's size as created
  uint64_t shared;          // kStamped: offset of the one table every bucket shares (TableHead + counters +
                            // cuckoo header + sub-filter 0, structures/window/stamped_impl.h), written by create
                            // before publication, immutable; 0 for kBloom / kCuckoo (was pad, zero)
  // ---- line 2: read by every data-plane call; written at rotations only.
  alignas(64) std::atomic<uint64_t> epoch;  // E + 1 of the newest bucket any caller rotated to; 0 before the
      // first rotation. Only grows: raised by a CAS-max loop (release) by the rotation winner and by anyone
      // who sees its slot tag already claimed. Read with acquire.
  std::atomic<uint64_t> swept;  // kStamped: the bucket at which the last complete sweep of dead lanes began
                                // (create: the first bucket). CAS-max by a sweeper after its last chunk;
                                // acquire-loaded by every stamped call to decode stamps (stamped_impl.h).
                                // Zero (was pad) for kBloom / kCuckoo.
  uint8_t pad1[48];  // zero
  // ---- line 3: statistics, relaxed RMWs by any process; only grow.
  alignas(64) std::atomic<uint64_t> rotations;           // slot-tag claims won
  std::atomic<uint64_t> racing_marks;                    // kBloom: kNew answers whose fetch_or lost a race
  std::atomic<uint64_t> rotation_races;                  // kCuckoo: kNew answers that straddled a rotation. Kept
                                                         // for the format; 0 since tables are sealed (nothing writes it)
  std::atomic<uint64_t> inline_allocations;              // tables allocated by data-plane callers
  std::atomic<uint64_t> overflow_failures;               // overflow allocations that failed (kNoSpace)
  std::atomic<uint32_t> spaces_claimed;                  // key rows claimed (may pass max_spaces by the
                                                         // number of racing claimers; never past space_table/2)
  uint32_t reserved3;
  std::atomic<uint64_t> forget_ambiguous;  // kCuckoo: copies forget removed that may belong to another pair
                                           // (an upper bound; docs/window.md "forget"); relaxed fetch_add
  uint8_t pad3[8];
};
static_assert(sizeof(WindowHeader) == 256, "WindowHeader is part of the format: 4 cache lines");
static_assert(offsetof(WindowHeader, magic) == 0 && offsetof(WindowHeader, version) == 4,
              "every region header starts with magic + layout version (region_handle.h RegionPrefix)");
static_assert(offsetof(WindowHeader, epoch) == 128, "the epoch word has its own (read-mostly) line");
static_assert(offsetof(WindowHeader, swept) == 136, "swept shares the epoch's read-mostly line (both read per call)");
static_assert(offsetof(WindowHeader, shared) == 120, "shared took pad0");
static_assert(offsetof(WindowHeader, rotations) == 192, "statistics on the fourth line");

// One ring slot. tag and table are read by every call (acquire tag, relaxed
// table, acquire fence, relaxed tag re-check: a seqlock without odd values,
// because tags never return to an earlier value).
struct BucketSlot {
  std::atomic<uint64_t> tag;  // see the top comment. 0 -> E + 1: data-plane CAS (the rotation; one winner).
                              // E + 1 -> kRetired -> 0: maintain() or an inline preparer, under the segment
                              // lock, undo-logged stores (txn.store_u64), release fence before the table store.
  uint64_t table;             // offset of this slot's table extent, 0 when retired. Written under the
                              // segment lock (logged) only while tag is kRetired.
};
static_assert(sizeof(BucketSlot) == 16, "BucketSlot is part of the format: tag + table");

// Distinct-count stripe of a table (one line each: no false sharing).
struct alignas(64) TableStripe {
  std::atomic<uint64_t> distinct;  // kNew answers in this bucket counted by this stripe's handles; relaxed fetch_add
  uint8_t pad[56];
};

// First bytes of every table extent. Line 0 fields marked "alloc" are written
// once by the allocating transaction into fresh memory before the table is
// reachable, immutable afterwards.
struct alignas(64) TableHead {
  uint64_t capacity;              // alloc: main table capacity (pairs)
  uint64_t geometry;              // alloc: kBloom: blocks of the main table; kCuckoo: log2 buckets
  uint32_t check_shift;           // alloc: a stripe sums all stripes when it crosses a multiple of 2^shift
  uint32_t reserved0;             // zero
  std::atomic<uint32_t> main_full;  // 0 -> 1 (sticky) by any caller who sums the stripes >= capacity; relaxed
  std::atomic<uint32_t> flags;      // kTableOverflowFailed (fetch_or relaxed, any process); kTableAllChecked
                                    // (alloc: set; then only cleared, by a relaxed fetch_and, see the enum);
                                    // kTableSealed (kCuckoo: release fetch_or under the table's cuckoo writer
                                    // lock only; read with acquire outside it, relaxed under it; see the enum)
  std::atomic<uint64_t> overflow;   // overflow extent offset, 0 none. Release store by the allocator AFTER its
                                    // transaction committed (never logged: a rollback must not unpublish it)
  uint64_t pending_overflow;        // logged store in the allocating transaction: the extent exists even if its
                                    // allocator died before publishing; the next allocator publishes it
  uint64_t overflow_geometry;       // logged store in the same transaction: kBloom blocks of the overflow
  std::atomic<uint64_t> prep_cursor;  // 0: the table is ready (zeroed, and for kCuckoo its header initialised).
      // Else a spare in chunked preparation (its slot tagged kRetired): bytes [0, cursor) of the extent are
      // zeroed and pre-faulted, the rest may hold a freed table's bytes. Written only under the segment lock
      // (unlogged release stores, only grows until the final 0): by maintain_step's chunks or an inline
      // preparer that finishes it. No data-plane call reads a table whose slot is kRetired.
  TableStripe stripes[kStripes];
};
static_assert(sizeof(TableHead) == 64 + 64 * kStripes, "TableHead: one parameter line + kStripes counter lines");
static_assert(offsetof(TableHead, prep_cursor) == 56, "prep_cursor takes the former pad of line 0 (0 = ready: old tables read as ready)");
static_assert(offsetof(TableHead, stripes) == 64, "stripes start on line 1");

// One kBloom overflow layer (i >= 2) of a layered table: its lines' extent and shape.
struct BloomLayer {
  uint64_t offset;  // extent of blocks x 64 B lines (zeroed at allocation)
  uint64_t blocks;  // lines
  uint64_t k;       // probes (u64 so that one logged store writes it)
};
static_assert(sizeof(BloomLayer) == 24, "BloomLayer is part of the format");
// At the end of a layered kBloom table's overflow extent (layer 1's lines, then this).
// k1 is written into the fresh extent before the overflow is published (release store of
// TableHead.overflow) and never changes. layer[j] (layer j + 2) and pending: logged stores in the
// transaction that allocates layer j + 2, under the segment lock. count: the layers of layer[]
// published: release store (CAS count -> count + 1) by the allocator AFTER its transaction
// committed (never logged: a rollback must not unpublish it), read with acquire by every caller
// that found the overflow published; only grows. pending: the extent of the layer being added
// (committed, perhaps unpublished if its allocator died): the next allocator publishes it when it
// is not already layer[count - 1].
struct alignas(64) BloomLayerDir {
  std::atomic<uint64_t> count;  // layers 2.. published (0..kBloomMaxExtra)
  uint64_t pending;             // see above
  uint64_t k1;                  // probes of layer 1 (the overflow lines before this dir)
  uint64_t reserved;            // zero
  BloomLayer layer[kBloomMaxExtra];
};
static_assert(sizeof(BloomLayerDir) == 256, "BloomLayerDir: 32 B head + 9 layers, 4 lines");
// Layer i >= 1 of a layered kBloom table: capacity C x 2^(i-1) at p1/3 x 2^-i.
inline uint64_t bloom_layer_capacity(uint64_t capacity, uint32_t i) { return capacity << (i - 1); }
inline double bloom_layer_error(double p1, uint32_t i) { return p1 / 3 * std::ldexp(1.0, -static_cast<int>(i)); }
// kCuckoo sub-filter j >= 1 of a layered table: log2 buckets (the main table's g for j = 1, then doubling).
inline uint32_t cuckoo_sub_log2(uint32_t g, uint32_t j) { return std::min<uint32_t>(32, g + (j > 1 ? j - 1 : 0)); }

inline uint64_t round64(uint64_t b) { return (b + 63) & ~uint64_t{63}; }
inline uint64_t slots_bytes(uint32_t slots) { return round64(uint64_t{slots} * sizeof(BucketSlot)); }
inline uint64_t region_bytes(uint32_t slots, uint32_t space_table) {
  return sizeof(WindowHeader) + slots_bytes(slots) + round64(uint64_t{space_table} * 8);
}
inline uint64_t counters_bytes(uint32_t space_table) { return round64((uint64_t{space_table} + 1) * 8); }
inline uint64_t main_offset_in_table(uint32_t space_table) { return sizeof(TableHead) + counters_bytes(space_table); }
inline uint64_t bloom_main_bytes(uint64_t blocks) { return blocks * 64; }
inline uint64_t cuckoo_main_bytes(uint32_t log2, uint32_t lane_bits) { return cuckoo::region_bytes_for(log2, lane_bits); }
inline uint32_t space_table_for(uint32_t max_spaces) {
  uint32_t t = 2;
  while (t < 2ull * max_spaces) t <<= 1;
  return t;
}

inline BucketSlot* slot_table(WindowHeader* h) { return reinterpret_cast<BucketSlot*>(h + 1); }
inline uint64_t* space_keys(WindowHeader* h) {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(h + 1) + slots_bytes(h->slots));
}

// ---------------------------------------------------------------------------
// Sizing.
inline double one_bucket_error(double p, uint32_t w) { return -std::expm1(std::log1p(-p) / static_cast<double>(w)); }
// kCuckoo fingerprint bits: kCuckooBudgetSubs full sub-filters (2b/2^f each, Fan et al.) stay
// within p1 (an older build sized for 2: main and one overflow).
inline uint32_t cuckoo_fp_bits(double p1) {
  double f = std::ceil(std::log2(2.0 * cuckoo::kSlots / (p1 / kCuckooBudgetSubs)));
  if (f <= 8) return 8;
  if (f <= 12) return 12;
  return 16;
}
// Stripe check interval: overshoot of the "full" mark <= kStripes x 2^shift <= capacity / 256.
inline uint32_t check_shift_for(uint64_t capacity) {
  uint32_t shift = 0;
  while (shift < 12 && (uint64_t{kStripes} << (shift + 1)) <= capacity / 256) ++shift;
  return shift;
}

// ---------------------------------------------------------------------------
// Kernels over one blocked-Bloom table: `words` 64-byte aligned, `blocks` lines.
// Same concurrency argument as bloom_impl.h: bits only go 0 -> 1 while the
// table is reachable (a table is zero only when freshly allocated), relaxed
// loads and relaxed fetch_or of the missing bits only.
struct Masks {
  uint64_t w[8];
};
inline Masks masks_of(uint64_t h, uint32_t k) {
  Masks m;
  bloom::blocked_masks(h, k, m.w);
  return m;
}
inline const uint64_t* line_of(const uint64_t* words, uint64_t blocks, uint64_t h) noexcept {
  return words + bloom::blocked_block(h, blocks) * 8;
}
inline bool line_has(const uint64_t* line, const Masks& m) noexcept {
  uint64_t missing = 0;
  for (int i = 0; i < 8; ++i) missing |= m.w[i] & ~bloom::load_word(line + i);
  return missing == 0;
}
// Snapshot first, then fetch_or: the missing bits of ALL words are loaded before
// the first RMW. This makes `raced` a sound bound: if two callers both set a bit
// of one key's mask, at least one of them finds a bit of its snapshot set by the
// other at its fetch_or (proof in docs/window.md), so of n callers answering kNew
// for one pair at least n - 1 report raced. (Loading each word just before its
// own RMW, as bloom::or_word does, lets both miss the race: A sets word 0, B sees
// word 0 set and sets word 1, A then sees word 1 set and skips it.)
inline bloom::AddResult line_add(uint64_t* line, const Masks& m) noexcept {
  uint64_t miss[8];
  uint64_t any = 0;
  for (int i = 0; i < 8; ++i) any |= miss[i] = m.w[i] & ~bloom::load_word(line + i);
  bloom::AddResult r;
  if (any == 0) return r;  // present: no RMW, no cache-line ownership transfer
  for (int i = 0; i < 8; ++i) {
    if (miss[i] == 0) continue;
    // relaxed: the RMW alone guarantees no lost bits; nothing else is published.
    uint64_t prev = std::atomic_ref<uint64_t>(line[i]).fetch_or(miss[i], std::memory_order_relaxed);
    uint64_t mine = miss[i] & ~prev;
    r.newly_set += static_cast<uint32_t>(std::popcount(mine));
    r.raced |= mine != miss[i];
  }
  return r;
}

// Pair hash (see top).
inline uint64_t pair_seed(uint64_t seed, uint64_t space) noexcept { return seed ^ bloom::fmix64(space + 1); }
inline uint64_t pair_hash(uint64_t seed, uint64_t space, std::string_view item) noexcept {
  return hash_key(item, pair_seed(seed, space));
}
inline uint64_t pair_hash(uint64_t seed, uint64_t space, uint64_t item) noexcept {
  return hash_key(item, pair_seed(seed, space));
}

// Bucket number of a Unix time (floor division; clamped at 0).
inline int64_t bucket_number(int64_t unix_s, int64_t utc_offset, uint64_t bucket_seconds) noexcept {
  // |utc_offset| < 2^40 (validated): clamp unix_s so the sum cannot overflow.
  constexpr int64_t kLimit = int64_t{1} << 62;
  int64_t t = std::min(std::max(unix_s, -kLimit), kLimit) + utc_offset;
  if (t < 0) return 0;
  return static_cast<int64_t>(static_cast<uint64_t>(t) / bucket_seconds);
}

// Integrity checker (window.cpp); its row in the kinds table (window_kind.cpp) names it.
void check_window(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);

}  // namespace shmfilter::internal::window

// Its save/restore (window_snapshot.cpp); window_kind.cpp puts them in the kinds table.
namespace shmfilter::internal::snapshot {
struct In;
std::string save_window(Segment& seg, const RegionInfo& r);
void restore_window(Segment& seg, const std::string& name, In in);
}  // namespace shmfilter::internal::snapshot
