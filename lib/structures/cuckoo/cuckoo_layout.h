// lib/structures/cuckoo/cuckoo_layout.h: the cuckoo filter's shared layout (Header,
// sub-filter descriptors, intent record), sizing, hashing, the packed bucket
// lanes and the atomics over shared words: the part of the on-disk format
// (docs/cuckoo.md has the byte table; golden tests pin it). The kernels that
// use it (writer lock, lookups, inserts, erase) are in cuckoo_impl.h.
//
// Layout:
//   region = Header | sub-filter 0 (versions[stripes] | buckets[chunks x 2^log2_buckets])
//   further sub-filters (expansion) live in extents from ControlTxn::allocate.
// A bucket is 4 slots. Layouts 1 and 2 pack them in ONE word: 4 x 8-bit lanes
// in a uint32_t for f = 8, 4 x 16-bit lanes in a uint64_t for f = 12 or 16
// (the top 4 bits of a 12-bit lane stay 0), so a reader loads a bucket with one
// atomic load. Layout 3 (f = 12 only, new filters) packs 4 x 12-bit lanes into
// 48 bits: bucket i is bits 48i .. 48i + 47 of a little-endian array of 64-bit
// words (4 buckets per 3 words; buckets 1 and 2 of each group, and one lane in
// each of them, straddle two words). A reader loads the one or two aligned
// words with relaxed atomic loads inside the stripe's seqlock section, so a
// torn pair is caught by the version re-check like any other; a writer stores
// each changed word separately (see bucket_store: a lane that straddles two
// words passes through a half-written value, which the repair completes).
// 12/0.95 = 12.63 bits per item at the 95% load filters are sized for.
// Fingerprint 0 means "empty slot".
//
// Bucket count (layout 2): not a power of two. A sub-filter is `chunks`
// chunks of C = 2^log2_chunk buckets. New filters use C = 2^16 (or, below
// 2^16 buckets, one chunk of the next power of two). A key's chunk is
// fastrange(bits 16..47 of h, chunks) (Lemire 2019: (x * n) >> 32), its
// offset in the chunk the low log2_chunk bits of h; i1 = chunk * C + offset,
// i2 = i1 XOR (H(fp) & (C - 1)): partial-key cuckoo hashing (Fan et al. 2014)
// inside the chunk, still an involution, so a bucket's alternate is computed
// from the fingerprint alone. This is the Vacuum filter's answer (Wang et al.,
// VLDB 2019: alternates within a chunk so that the table size need not be a
// power of two), with a chunk large enough (262,144 slots) that the load
// reached with zero failures is that of a whole table.
//
// Sub-filters NEST (the property erase relies on, docs/cuckoo.md "Why
// sub-filters must nest"): every sub-filter of a filter has the same C and a
// chunk count that is a multiple of the previous one's, so two keys with the
// same fingerprint and the same bucket pair in a later sub-filter have the
// same pair in every earlier one. A layout-1 filter (2^n buckets, i1 = h mod
// 2^n) is the case chunks = 1, C = 2^n: it is read unchanged and expands as
// layout 1 did (C doubles, chunks stay 1), which nests too.
#pragma once

#include "base/cpu_relax.h"
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/kill_point.h"

namespace shmfilter::internal::cuckoo {


inline constexpr uint32_t kMagic = 0x4b434653;  // "SFCK" little-endian
inline constexpr uint32_t kLayoutVersion = 2;  // written by create: chunked bucket count (docs/cuckoo.md)
inline constexpr uint32_t kLayoutVersionPow2 = 1;  // layout 1 (2^n buckets): still read, the chunks = 1 case
inline constexpr uint32_t kLayoutVersionPacked = 3;  // written by create for f = 12: layout 2's geometry with
                                                     // 12-bit lanes packed 4 to 48 bits (lane_bits 12)
inline constexpr uint32_t kSlots = 4;           // slots per bucket (b)
inline constexpr uint32_t kMaxSubs = 16;        // sub-filter table size
inline constexpr uint32_t kMaxPathLimit = 6;    // longest BFS path (moves) a filter may be created with
inline constexpr uint32_t kDefaultMaxPath = 5;  // libcuckoo's MAX_BFS_PATH_LEN is 5
inline constexpr uint32_t kMaxStripesLog2 = 13; // 8192 version counters per sub-filter (64 KiB)
inline constexpr uint32_t kChunkLog2 = 16;      // chunk size of multi-chunk sub-filters: 2^16 buckets
inline constexpr uint64_t kMaxBuckets = uint64_t{1} << 32;  // BFS nodes hold 32-bit bucket indices

// Operation kinds in the intent record.
enum : uint32_t { kOpNone = 0, kOpPlace = 1, kOpErase = 2, kOpMove = 3, kOpExpand = 4 };

// Immutable description of one sub-filter. Written once (create's init, or an
// expansion inside a ControlTxn) BEFORE sub_count makes it visible; never
// changed afterwards.
struct SubDesc {
  uint64_t offset;          // from the segment base: versions array, then buckets (64-byte aligned)
  uint32_t log2_buckets;    // log2 of ONE CHUNK's bucket count (1..32; <= 16 when chunks > 1): the
                            // sub-filter's bucket count when chunks_minus_1 == 0, as in layout 1
                            // (the layout-1 name is kept: the window's tables are one chunk)
  uint16_t log2_stripes;    // version counters = 2^log2_stripes (floor(log2(bucket count)), <= 13)
  uint16_t chunks_minus_1;  // chunks - 1 (0..2^16 - 1); 0 in every layout-1 region (bytes 14-15 were 0)
};
static_assert(sizeof(SubDesc) == 16, "SubDesc is part of the on-disk format: 16 bytes");
static_assert(offsetof(SubDesc, log2_buckets) == 8 && offsetof(SubDesc, log2_stripes) == 12 &&
                  offsetof(SubDesc, chunks_minus_1) == 14,
              "SubDesc field offsets are part of the on-disk format (layout 1 had u32 log2_stripes at 12)");
inline uint64_t sub_chunks(const SubDesc& d) noexcept { return uint64_t{d.chunks_minus_1} + 1; }
inline uint64_t sub_buckets(const SubDesc& d) noexcept { return sub_chunks(d) << d.log2_buckets; }

// The move/insert/erase in progress. Written only by the writer-lock holder
// (plain relaxed stores, published to a repairer by the lock CAS). op != 0
// while a multi-store step is in flight.
struct Intent {
  uint32_t op;           // kOp*; the last field written before the data stores, cleared after
  uint32_t sub;          // sub-filter index of the step
  uint64_t bucket;       // place/erase: target bucket; move: source bucket
  uint32_t lane;         // place/erase: target lane; move: source lane
  uint32_t fp;           // fingerprint placed / erased / moved
  uint64_t dst_bucket;   // move: destination bucket
  uint32_t dst_lane;     // move: destination lane (was empty when the move began)
  uint32_t stripe;       // move: version counter made odd
  uint64_t size_before;  // place/erase: size counter before the step
};
static_assert(sizeof(Intent) == 48, "Intent is part of the on-disk format: 48 bytes");

struct alignas(64) Header {
  // ---- line 0: parameters, written by create's init before publication, immutable.
  uint32_t magic;            // kMagic
  uint32_t layout_version;   // kLayoutVersion
  uint32_t fp_bits;          // f: 8, 12 or 16
  uint32_t lane_bits;        // 8 (uint32_t buckets) or 16 (uint64_t buckets); 12 (48-bit packed buckets)
                             // exactly when layout_version == 3 (then fp_bits == 12)
  uint32_t max_path;         // BFS path limit in moves (1..kMaxPathLimit)
  uint32_t expansion;        // 0: no expansion (kFull); k >= 2: a new sub-filter k times larger
  uint32_t max_subs;         // sub-filters allowed (1..kMaxSubs)
  uint32_t reserved0;        // 0
  uint64_t seed;             // XXH3 seed of this filter
  uint64_t capacity;         // requested capacity (items)
  double target_error;       // requested false-positive rate, 0 if fp bits were given
  uint64_t region_bytes;     // size of the region this header starts
  // ---- lines 1-5: sub-filter table.
  alignas(64) uint32_t sub_count;  // published sub-filters; grows only; release store after subs[i] is written
  uint32_t reserved2;              // 0
  SubDesc subs[kMaxSubs];          // see SubDesc
  uint64_t pending_extent;         // expansion: extent allocated (txn-logged store in the allocating
                                   // ControlTxn) but maybe not yet published in subs[]; reset to 0 by
                                   // the lock holder after publishing; a leftover is freed by the next
                                   // expansion's txn or by drop (see docs/cuckoo.md)
  // ---- writer lock, alone on its line (readers touch it only when stuck on an odd version).
  alignas(64) uint64_t lock_owner;  // owner token of the writer, 0 = free; CAS acquire / store release
  // ---- intent record of the lock holder.
  alignas(64) Intent intent;        // see Intent
  // ---- counters, written only by the writer-lock holder (relaxed; read by stats() racily).
  alignas(64) uint64_t size;        // items stored (all sub-filters); exact when no writer is mid-step
  uint64_t failures;                // inserts answered kFull; only grows
  uint64_t longest_path;            // most moves one insert needed; only grows
  uint64_t inserts;                 // kInserted answers; only grows
  uint64_t erases;                  // successful erases; only grows
  uint64_t repairs;                 // takeovers of a dead writer's lock; only grows
  uint64_t moves;                   // items moved along cuckoo paths; only grows
  uint64_t expansions;              // sub-filters added after create; only grows
};
static_assert(offsetof(Header, sub_count) == 64, "sub table starts on cache line 1");
static_assert(offsetof(Header, lock_owner) % 64 == 0, "writer lock must own its cache line");
static_assert(offsetof(Header, intent) % 64 == 0, "intent record on its own line");
static_assert(offsetof(Header, size) % 64 == 0, "counters on their own line");
static_assert(sizeof(Header) == 576, "Header is part of the on-disk format: 576 bytes");
static_assert(alignof(Header) == 64, "Header is cache-line aligned");

// ---- atomics on shared words -------------------------------------------------
template <class T>
inline std::atomic_ref<T> A(T& x) noexcept { return std::atomic_ref<T>(x); }
// Relaxed load of a shared word; each call site says why relaxed suffices
// (mostly: the writer-lock holder reading what only it writes, or a statistic).
template <class T>
inline T load_relaxed(const T& x) noexcept {
  return std::atomic_ref<T>(const_cast<T&>(x)).load(std::memory_order_relaxed);
}

using internal::cpu_relax;  // lib/base/cpu_relax.h

// How a waiter asks whether an owner token is alive. The handle binds it to
// Segment::token_alive; plain-memory tests bind it to /proc/<pid>.
struct Liveness {
  uint64_t self = 0;  // this process's owner token (nonzero), or 0: ask self_fn (lazily: readers rarely need it)
  const void* ctx = nullptr;
  bool (*alive)(const void* ctx, uint64_t token) = nullptr;
  uint64_t (*self_fn)(const void* ctx) = nullptr;
  bool is_alive(uint64_t t) const noexcept { return t != 0 && (alive == nullptr || alive(ctx, t)); }
  uint64_t token() const noexcept { return self != 0 ? self : self_fn(ctx); }
};
// Spins a waiter makes before its first liveness check, and between checks.
inline constexpr uint32_t kSpinsBeforeYield = 64;
inline constexpr uint32_t kYieldsBetweenLivenessChecks = 256;

// ---- sizing -------------------------------------------------------------------
inline uint64_t versions_bytes(uint32_t log2_stripes) noexcept {
  return ((uint64_t{8} << log2_stripes) + 63) & ~uint64_t{63};
}
// Version counters for a sub-filter of `buckets` buckets: the largest 2^l <= buckets, l <= 13.
inline uint32_t stripes_for_buckets(uint64_t buckets) noexcept {
  uint32_t l = 0;
  while (l < kMaxStripesLog2 && (uint64_t{2} << l) <= buckets) ++l;
  return l;
}
// A sub-filter's bucket geometry: chunks x 2^log2_chunk buckets.
struct Geometry {
  uint32_t chunks = 1;
  uint32_t log2_chunk = 1;
  uint64_t buckets() const noexcept { return uint64_t{chunks} << log2_chunk; }
};
inline Geometry geometry_of(const SubDesc& d) noexcept {
  return Geometry{static_cast<uint32_t>(sub_chunks(d)), d.log2_buckets};
}
// n buckets as a new filter's geometry: up to 2^16, the next power of two (one
// chunk); above, the next multiple of 2^16 (chunks of 2^16).
inline Geometry geometry_of_buckets(uint64_t n) noexcept {
  if (n <= (uint64_t{1} << kChunkLog2)) {
    uint32_t l = 1;
    while ((uint64_t{1} << l) < n) ++l;
    return Geometry{1, l};
  }
  return Geometry{static_cast<uint32_t>((n + (uint64_t{1} << kChunkLog2) - 1) >> kChunkLog2), kChunkLog2};
}
// The sub-filter an expansion adds after `last`: 2^grow times its buckets, nesting
// in it (nests_in). A power-of-two chunk grows as one chunk up to 2^16 buckets,
// then into chunks of 2^16; chunks of 2^16 multiply. `one_chunk` (a layout-1
// region, which must stay readable by layout-1 builds) grows as one chunk, as
// layout 1 did. buckets() > kMaxBuckets: no such sub-filter (the caller refuses).
inline Geometry expansion_geometry(const SubDesc& last, uint32_t grow, bool one_chunk) noexcept {
  const Geometry g = geometry_of(last);
  constexpr Geometry kTooLarge{1u << 16, kChunkLog2 + 1};
  if (grow > 32) return kTooLarge;
  if (g.chunks == 1 && (one_chunk || g.log2_chunk > kChunkLog2 || g.log2_chunk + grow <= kChunkLog2))
    return g.log2_chunk + grow > 32 ? kTooLarge : Geometry{1, g.log2_chunk + grow};
  if (g.chunks == 1) return Geometry{1u << (g.log2_chunk + grow - kChunkLog2), kChunkLog2};
  if ((uint64_t{g.chunks} << grow) > (uint64_t{1} << 16)) return kTooLarge;
  return Geometry{g.chunks << grow, g.log2_chunk};
}
// A well-formed sub-filter shape: one chunk of 2^1..2^32 buckets, or chunks of
// 2^1..2^16 buckets; <= 2^32 buckets; the stripe count stripes_for_buckets gives.
inline bool sub_shape_ok(const SubDesc& d) noexcept {
  return d.log2_buckets >= 1 && d.log2_buckets <= 32 && (d.chunks_minus_1 == 0 || d.log2_buckets <= kChunkLog2) &&
         sub_buckets(d) <= kMaxBuckets && d.log2_stripes == stripes_for_buckets(sub_buckets(d));
}
// Does `d` nest in `prev` (the sub-filter before it)? Same fingerprint and the same
// bucket pair in `d` imply the same pair in `prev` when d's chunk is no smaller,
// d's chunk count is a multiple of prev's (fastrange nests: floor(x*c*m) / m =
// floor(x*c)), and a multi-chunk prev keeps its chunk size (the XOR stays inside it).
inline bool nests_in(const SubDesc& prev, const SubDesc& d) noexcept {
  const uint64_t cp = sub_chunks(prev), cd = sub_chunks(d);
  return d.log2_buckets >= prev.log2_buckets && cd % cp == 0 && (cp == 1 || d.log2_buckets == prev.log2_buckets);
}
inline uint32_t stripes_for(uint32_t log2_buckets) noexcept { return std::min(log2_buckets, kMaxStripesLog2); }  // one chunk of 2^n
// Bucket bytes: 4 lanes x lane_bits/8; packed 12-bit lanes (48 bits a bucket)
// rounded up to whole 64-bit words, so every word a bucket touches is inside.
inline uint64_t bucket_bytes_of(uint64_t buckets, uint32_t lane_bits) noexcept {
  return lane_bits == 12 ? (buckets * 6 + 7) & ~uint64_t{7} : buckets * (lane_bits / 2);
}
inline uint64_t sub_bytes_of(uint64_t buckets, uint32_t log2_stripes, uint32_t lane_bits) noexcept {
  return versions_bytes(log2_stripes) + bucket_bytes_of(buckets, lane_bits);
}
// Lane width of a NEW filter with f-bit fingerprints (create, advise): packed 12-bit
// lanes for f = 12 (layout 3), else 8 or 16 (layout 2). The window's tables keep 8/16.
inline uint32_t lane_bits_for(uint32_t fp_bits) noexcept { return fp_bits <= 8 ? 8 : fp_bits == 12 ? 12 : 16; }
inline uint32_t layout_for_lane(uint32_t lane_bits) noexcept {
  return lane_bits == 12 ? kLayoutVersionPacked : kLayoutVersion;
}
inline uint64_t sub_bytes(const SubDesc& d, uint32_t lane_bits) noexcept {
  return sub_bytes_of(sub_buckets(d), d.log2_stripes, lane_bits);
}
// One chunk of 2^log2_buckets buckets (the window's tables).
inline uint64_t sub_bytes(uint32_t log2_buckets, uint32_t log2_stripes, uint32_t lane_bits) noexcept {
  return sub_bytes_of(uint64_t{1} << log2_buckets, log2_stripes, lane_bits);
}
inline SubDesc sub_desc(uint64_t offset, Geometry g) noexcept {
  return SubDesc{offset, g.log2_chunk, static_cast<uint16_t>(stripes_for_buckets(g.buckets())),
                 static_cast<uint16_t>(g.chunks - 1)};
}
// A region: the header and sub-filter 0.
inline uint64_t region_bytes_for(Geometry g, uint32_t lane_bits) noexcept {
  return sizeof(Header) + sub_bytes_of(g.buckets(), stripes_for_buckets(g.buckets()), lane_bits);
}
inline uint64_t region_bytes_for(uint32_t log2_buckets, uint32_t lane_bits) noexcept {  // one chunk (the window)
  return region_bytes_for(Geometry{1, log2_buckets}, lane_bits);
}
// f = ceil(log2(2b/p)) (Fan et al. CoNEXT'14, eq. for semi-sorted-free cuckoo filters), rounded up to 8/12/16.
inline uint32_t fp_bits_for_error(double p) noexcept {
  double f = std::ceil(std::log2(2.0 * kSlots / p));
  if (f <= 8) return 8;
  if (f <= 12) return 12;
  return 16;
}
// Buckets for `capacity` items at <= 95% load: ceil(capacity / (4 * 0.95)),
// rounded up to a power of two below 2^16 buckets and to a multiple of 2^16
// above (at most 2^16 - 1 buckets, 512 KiB at 16-bit lanes, more than asked).
// buckets() > kMaxBuckets: too large (the caller refuses it).
inline Geometry geometry_for(uint64_t capacity) noexcept {
  double need = std::ceil(static_cast<double>(capacity) / (kSlots * 0.95));
  if (need > static_cast<double>(kMaxBuckets)) return Geometry{1u << 16, kChunkLog2 + 1};  // > 2^32: refused
  return geometry_of_buckets(std::max<uint64_t>(2, static_cast<uint64_t>(need)));
}
// Power-of-two sizing (the window's tables, one chunk): next power of two of capacity / (4 * 0.95).
inline uint32_t log2_buckets_for(uint64_t capacity) noexcept {
  double need = std::ceil(static_cast<double>(capacity) / (kSlots * 0.95));
  uint32_t l = 1;
  while (l < 33 && static_cast<double>(uint64_t{1} << l) < need) ++l;
  return l;
}

// ---- hashing ------------------------------------------------------------------
struct KeyHash {
  uint64_t h;
  uint32_t fp;  // in [1, 2^f - 1]
};
inline KeyHash split_hash(uint64_t h, uint32_t fp_bits) noexcept {
  // fp from the high 32 bits (multiply-shift into [0, 2^f - 1), then + 1);
  // bucket index from the low bits, so the two are independent for <= 2^32 buckets.
  uint64_t range = (uint64_t{1} << fp_bits) - 1;
  uint32_t fp = static_cast<uint32_t>(((h >> 32) * range) >> 32) + 1;
  return {h, fp};
}
// Partial-key cuckoo hashing inside a chunk: i2 = i1 XOR (H(fp) & chunk_mask)
// (Fan et al. 2014; Vacuum filters' chunks). H is a Fibonacci multiply; its
// high 32 bits are well mixed for small fp. An involution; i and i2 share a chunk.
inline uint64_t fp_hash(uint32_t fp) noexcept { return (uint64_t{fp} * 0x9e3779b97f4a7c15ull) >> 32; }
inline uint64_t alt_bucket(uint64_t i, uint32_t fp, uint64_t chunk_mask) noexcept { return i ^ (fp_hash(fp) & chunk_mask); }
// Primary bucket: chunk = fastrange(bits 16..47 of h, chunks), offset = h mod 2^log2_chunk.
// chunks = 1 gives layout 1's h & (2^n - 1). The chunk's bits lie above the offset's
// (log2_chunk <= 16 when chunks > 1) and below the top bits the fingerprint is taken from.
inline uint64_t primary_bucket(uint64_t h, uint64_t chunks, uint32_t log2_chunk) noexcept {
  const uint64_t chunk = ((h >> 16) & 0xffffffffull) * chunks >> 32;
  return (chunk << log2_chunk) | (h & ((uint64_t{1} << log2_chunk) - 1));
}

// ---- lanes ----------------------------------------------------------------------
// kSlots lanes of L bits in the low kSlots * L bits of a W (f = 8: a uint32_t;
// f = 16: a uint64_t; f = 12, layout 3: the low 48 bits of a uint64_t, the
// bucket as bucket_load assembles it, bits 48..63 zero). The borrow trick of
// has() holds for any contiguous equal-width fields.
template <class W, unsigned L>
struct Lanes {
  using Word = W;
  static constexpr unsigned kLaneBits = L;
  static constexpr W kLaneMask = static_cast<W>((W{1} << L) - 1);
  static constexpr W kLo = [] {
    W lo = 0;
    for (unsigned i = 0; i < kSlots; ++i) lo = static_cast<W>(lo | (W{1} << (i * L)));
    return lo;
  }();
  static constexpr W kHi = static_cast<W>(kLo << (L - 1));
  static constexpr W kBucketMask = static_cast<W>(kLo * kLaneMask);  // the kSlots * L bucket bits
  static uint32_t lane(W w, unsigned i) noexcept { return static_cast<uint32_t>((w >> (i * L)) & kLaneMask); }
  static W with(W w, unsigned i, uint32_t fp) noexcept {
    return static_cast<W>((w & ~static_cast<W>(kLaneMask << (i * L))) | (static_cast<W>(fp) << (i * L)));
  }
  // Exact "some lane equals fp" (the borrow trick only ever over-marks lanes above a true zero).
  static bool has(W w, uint32_t fp) noexcept {
    W x = static_cast<W>(w ^ static_cast<W>(kLo * fp));
    return static_cast<W>((x - kLo) & ~x & kHi) != 0;
  }
  static int find(W w, uint32_t fp) noexcept {
    for (unsigned i = 0; i < kSlots; ++i)
      if (lane(w, i) == fp) return static_cast<int>(i);
    return -1;
  }
  static int empty_lane(W w) noexcept { return find(w, 0); }
  // The fingerprint a lane's alternate bucket is derived from: the whole lane here; the stamped
  // window's lanes (structures/window/stamped_impl.h) carry a bucket stamp below it.
  static uint32_t key_of(uint32_t lane) noexcept { return lane; }
  static uint32_t count(W w, uint32_t fp) noexcept {
    uint32_t n = 0;
    for (unsigned i = 0; i < kSlots; ++i) n += lane(w, i) == fp;
    return n;
  }
};
using Lanes8 = Lanes<uint32_t, 8>;
using Lanes16 = Lanes<uint64_t, 16>;

using Lanes12 = Lanes<uint64_t, 12>;  // layout 3 (packed: see bucket_load)
static_assert(Lanes12::kLo == 0x001001001001ull && Lanes12::kBucketMask == (uint64_t{1} << 48) - 1);
static_assert(Lanes16::kLo == 0x0001000100010001ull && Lanes16::kBucketMask == ~uint64_t{0});
static_assert(Lanes8::kLo == 0x01010101u && Lanes8::kBucketMask == 0xffffffffu);

template <class LT>
inline constexpr bool kPackedLanes = false;
template <>
inline constexpr bool kPackedLanes<Lanes12> = true;

// A sub-filter as seen by this process.
struct Sub {
  uint64_t* versions;
  void* buckets;
  uint64_t n;            // bucket count (chunks << log2_chunk)
  uint64_t chunks;       // chunk count (1 for a power-of-two table)
  uint64_t chunk_mask;   // 2^log2_chunk - 1
  uint64_t stripe_mask;  // stripes - 1
  uint32_t log2_chunk;
};
inline Sub sub_view(std::byte* base, const SubDesc& d) noexcept {
  std::byte* p = base + d.offset;
  return Sub{reinterpret_cast<uint64_t*>(p), p + versions_bytes(d.log2_stripes), sub_buckets(d), sub_chunks(d),
             (uint64_t{1} << d.log2_buckets) - 1, (uint64_t{1} << d.log2_stripes) - 1, d.log2_buckets};
}
// Published sub-filter count; acquire pairs with the release store that
// published the last SubDesc, so its fields are visible.
inline uint32_t sub_count_acquire(const Header* h) noexcept {
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(h->sub_count)).load(std::memory_order_acquire);
}

template <class LT>
inline typename LT::Word& bucket_ref(const Sub& s, uint64_t i) noexcept {
  static_assert(!kPackedLanes<LT>, "packed buckets are no word of their own: bucket_load/bucket_store/bucket_addr");
  return static_cast<typename LT::Word*>(s.buckets)[i];
}
// Packed bucket i: the 64-bit word holding its first bit, and that bit's position
// in it (0, 16, 32 or 48: 48i mod 64). Positions 32 and 48 continue into word + 1.
struct PackedAt {
  uint64_t word;
  unsigned shift;
};
inline PackedAt packed_at(uint64_t i) noexcept { return PackedAt{(i * 48) >> 6, static_cast<unsigned>((i * 48) & 63)}; }
// The first byte of bucket i (prefetch).
template <class LT>
inline const void* bucket_addr(const Sub& s, uint64_t i) noexcept {
  if constexpr (kPackedLanes<LT>)
    return static_cast<const std::byte*>(s.buckets) + i * 6;
  else
    return &bucket_ref<LT>(s, i);
}
template <class LT>
inline typename LT::Word bucket_load(const Sub& s, uint64_t i) noexcept {
  // relaxed: inside a seqlock read section (the fence + version re-check orders it),
  // or by the writer-lock holder, who is the only writer.
  if constexpr (kPackedLanes<LT>) {
    // Two loads for a straddling bucket: each is atomic, the pair is not; a reader
    // validates it by its stripe version like its two buckets (see the file head).
    // Branch-free (half the buckets straddle, at random: a branch here mispredicted
    // on every other bucket, 2.5x layout 2's in-cache lookup): a bucket inside one
    // word loads that word twice, and its "high" part lands above bit 47, masked.
    // So no word outside the bucket is touched (no extra line out of cache).
    auto* w = static_cast<uint64_t*>(s.buckets);
    const PackedAt at = packed_at(i);
    const uint64_t lo = A(w[at.word]).load(std::memory_order_relaxed);
    const uint64_t hi = A(w[at.word + (at.shift > 16)]).load(std::memory_order_relaxed);
    return ((lo >> at.shift) | ((hi << 1) << (63 - at.shift))) & LT::kBucketMask;
  } else {
    return A(bucket_ref<LT>(s, i)).load(std::memory_order_relaxed);
  }
}
// Moves store relaxed after the release fence that follows their odd version
// (fence-fence synchronisation with the reader's acquire fence); every other
// bucket store (place, erase, repair) is a release store. Either way a reader
// that observes a stored word also observes, at its version re-check, every
// earlier writer step (writers form one chain through the lock): the proof in
// docs/cuckoo.md needs exactly this. Both compile to a plain MOV on x86-64.
//
// Packed buckets: the writer rewrites only the words whose bits change, low word
// first, each with `mo`. The other lanes in those words are written back as they
// were (only the lock holder writes buckets), so a concurrent reader of another
// key never sees its own lanes change. A lane that straddles two words is half
// written between the two stores: a reader may then see a value that is neither
// old nor new in THAT lane only: a spurious match there is one more false
// positive of a filter, and the lane's own key is being placed or erased (its
// answer may be either while that runs) or moved (under its stripe's odd
// version: the reader retries, and the source lane holds it until the copy is
// whole, as in layout 2), so no present key is missed. A writer killed
// between them leaves the half-written lane for repair_locked, which completes or
// undoes it from the intent record (cuckoo_impl.h).
template <class LT>
inline void bucket_store(const Sub& s, uint64_t i, typename LT::Word w,
                         std::memory_order mo = std::memory_order_release) noexcept {
  if constexpr (kPackedLanes<LT>) {
    auto* words = static_cast<uint64_t*>(s.buckets);
    const PackedAt at = packed_at(i);
    w &= LT::kBucketMask;
    const uint64_t lo = load_relaxed(words[at.word]);  // relaxed: lock holder, the only writer
    if (at.shift <= 16) {
      const uint64_t nlo = (lo & ~(LT::kBucketMask << at.shift)) | (w << at.shift);
      if (nlo != lo) A(words[at.word]).store(nlo, mo);
      return;
    }
    const uint64_t hi = load_relaxed(words[at.word + 1]);  // relaxed: as above
    const uint64_t hi_mask = (uint64_t{1} << (at.shift - 16)) - 1;  // bits of word + 1 that are this bucket's
    const uint64_t nlo = (lo & ((uint64_t{1} << at.shift) - 1)) | (w << at.shift);
    const uint64_t nhi = (hi & ~hi_mask) | (w >> (64 - at.shift));
    if (nlo != lo) A(words[at.word]).store(nlo, mo);
    if (nlo != lo && nhi != hi) SHMF_KILL_POINT("cuckoo.packed.between_words");
    if (nhi != hi) A(words[at.word + 1]).store(nhi, mo);
  } else {
    A(bucket_ref<LT>(s, i)).store(w, mo);
  }
}

}  // namespace shmfilter::internal::cuckoo
