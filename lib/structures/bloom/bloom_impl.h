// lib/structures/bloom/bloom_impl.h: Bloom filter kernels and the shared layout of a Bloom region.
//
// Kernels are stateless functions over one layer's bit array (base, length),
// in the manner of RocksDB's util/bloom_impl.h (FastLocalBloomImpl); the
// handle (lib/structures/bloom/bloom.cpp) only finds layers and calls them. Nothing here knows
// about the Segment except the field comments.
//
// ---------------------------------------------------------------------------
// Hash use (part of the format; pinned by tests/unit/test_bloom_kernel.cpp GoldenBits)
//   h = XXH3-64(key bytes, seed)                      (lib/base/hash.h; uint64 keys as 8 LE bytes)
//   blocked: block = FastRange32(h >> 32, blocks)     (Lemire: (x * n) >> 32)
//            probes: h2 = uint32(h); for i < k: bit = h2 >> 23 (top 9 bits: 0..511);
//                    h2 *= 0x9e3779b9                  (RocksDB FastLocalBloomImpl::AddHashPrepared)
//   classic: Kirsch-Mitzenmacher double hashing of one 64-bit hash:
//            h1 = h, h2 = fmix(h) | 1, g_i = h1 + i*h2 (mod 2^64),
//            bit_i = FastRange64(g_i, m) = (g_i * m) >> 64
//            (Kirsch & Mitzenmacher, "Less hashing, same performance", ESA 2006;
//             RedisBloom also derives all k probes from two 64-bit values)
//
// ---------------------------------------------------------------------------
// Sizing maths
// classic: m = -n ln p / (ln 2)^2, k = round((m/n) ln 2) (Bloom 1970; Broder &
//   Mitzenmacher 2004). FP after n keys: (1 - e^{-kn/m})^k. The mission's test
//   vector: n = 1.2e8, p = 0.01 -> m = 1.1502e9 bits = 137.1 MiB, 9.585 bits/key,
//   k = round(6.64) = 7 (tests/unit/test_bloom.cpp pins it).
// blocked (one 512-bit line per key): a block receives L ~ Poisson(lambda) keys,
//   lambda = 512 / bits_per_key; given L, a bit is still clear with probability
//   (1-1/512)^{kL} (k probes with replacement), so
//     FP(b, k) = sum_L Poisson(L; 512/b) * (1 - (1-1/512)^{kL})^k
//   (Putze, Sanders, Singler, "Cache-, hash- and space-efficient Bloom filters",
//   JEA 2009, blocked Bloom filters; RocksDB's BloomMath::CacheLocalFpRate in
//   util/bloom_impl.h approximates the same mixture more crudely). Values of this
//   formula (computed by blocked_fp() below, B = 512):
//       bits/key   k=5       k=6       k=7       k=8       k=9
//         8        2.312%    2.342%    2.526%    2.842%    3.286%
//         9.585    1.213%    1.141%    1.158%    1.242%    1.385%   (classic k=7 here: 1.004%)
//         9.90     1.078%    0.998%    1.002%    1.064%    1.177%   <- 1%: 9.90 bits/key, k=6
//        10        1.038%    0.958%    0.957%    1.014%    1.118%
//        12        0.523%    0.441%    0.409%    0.407%    0.426%
//        15.49      -         -         -         -        0.0999%  <- 0.1%: 15.49 bits/key, k=9
//        16        0.169%    0.122%    0.099%    0.087%    0.083%
//   Measured (tests/unit/test_bloom_kernel.cpp, 1e6 keys, 4e6 negatives): see docs/bloom.md.
//   classic at 9.585 bits/key gives 1.00%; blocked pays ~0.3 bits/key for the
//   single cache miss. Where the model stops holding: at very small blocks
//   counts (< ~100 blocks) the Poisson approximation of the binomial load and,
//   for k >= 12, correlation of the multiplicative probe sequence add a few %.
//   size_blocked() picks, for the requested p, the smallest bits/key (in steps
//   of 0.01) and its best k with FP(b,k) <= 0.96 p (kBlockedCalibration: the
//   measured excess of this probe scheme over the model, see below), so the
//   MEASURED rate meets p: 1% -> 10.00 bits/key, k=6 (measured 0.966%);
//   0.1% -> 15.60 bits/key, k=9 (measured 0.0965%); tests/unit/test_bloom_kernel.cpp.
// Inserted-count estimate from the fill (Swamidass & Baldi 2007, generalised
//   to blocks of B bits; B = m for classic): expected fill after n keys is
//   f = 1 - exp(-(n B / m) (1 - (1-1/B)^k)), hence
//     n_est = -ln(1 - f) * (m / B) / (1 - (1-1/B)^k).
//   FP "now" is the same mixture evaluated at n_est (blocked) or f^k (classic).
#pragma once

#include <string>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/hash.h"
#include "shmfilter/segment.hpp"

namespace shmfilter::internal::snapshot {
struct In;  // structures/snapshot_io.h
}

namespace shmfilter::internal::bloom {

inline constexpr uint32_t kMagic = 0x4d4c4253;   // "SBLM" little-endian
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr uint32_t kBlockBits = 512;      // one 64-byte cache line
inline constexpr uint32_t kMaxK = 32;            // sanity bound on probes
inline constexpr uint32_t kMaxLayersLimit = 64;  // sanity bound on the slot table
inline constexpr uint32_t kDefaultMaxLayers = 32;
inline constexpr uint32_t kStripes = 8;          // bits-set counters per layer
inline constexpr uint64_t kMaxLayerBlocks = 1ull << 32;  // FastRange32 addresses 2^32 blocks

enum : uint32_t { kLayoutBlocked = 0, kLayoutClassic = 1 };
enum : uint32_t { kSlotEmpty = 0, kSlotReady = 1 };
enum : uint32_t { kFlagGrowthFailed = 1u, kFlagMaxLayersFull = 2u };

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared counters must be lock-free across processes");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared flags must be lock-free across processes");

// Region header, at the region's offset 0. Written once by create (under the
// segment lock, before the directory entry is published) except the fields
// marked otherwise.
struct BloomHeader {
  uint32_t magic;        // kMagic; create only
  uint32_t version;      // kLayoutVersion; create only
  uint32_t layout;       // kLayoutBlocked / kLayoutClassic; create only
  uint32_t max_layers;   // slots in the table below (1 without scaling); create only
  uint64_t seed;         // XXH3 seed of every layer; create only
  uint64_t capacity;     // n of layer 0 as asked; create only
  double error;          // p of layer 0 as asked; create only
  double growth;         // g (0: no scaling); create only
  double tightening;     // r; create only
  uint64_t region_offset;  // this header's own offset from the segment base (validation); create only
  // --- line 1: read by every data-plane op, written only when a layer is published.
  alignas(64) std::atomic<uint64_t> layer_count;  // published layers, 1..max_layers. Only grows.
      // Written by a grower with compare_exchange(release) AFTER the control
      // transaction that filled the slot committed (never an undo-logged write:
      // a rollback must not hide a layer others already use). Read with acquire.
  uint8_t pad1[56];  // zero; keeps layer_count alone on its line
  // --- line 2: rare writes.
  alignas(64) std::atomic<uint64_t> racing_adds;  // adds that returned true although another writer
      // set some of the same missing bits between this add's load and its fetch_or:
      // an upper bound on same-instant double counts. fetch_add relaxed, any process. Only grows (clear resets).
  std::atomic<uint32_t> flags;  // kFlag*: sticky over-capacity causes; fetch_or relaxed, any process; clear resets
  uint32_t reserved0;           // zero
  uint8_t pad2[48];  // zero
};
static_assert(sizeof(BloomHeader) == 192, "BloomHeader is part of the format: 3 cache lines");
static_assert(offsetof(BloomHeader, layer_count) == 64, "layer_count sits alone on its own cache line");
static_assert(offsetof(BloomHeader, racing_adds) == 128, "rarely written counters on the third line");
static_assert(alignof(BloomHeader) == 64, "header lines must be cache-line aligned");

// One layer descriptor; the table of max_layers follows the header.
// Slot i < layer_count is immutable (write-once): its fields are written under
// the segment lock inside the transaction that allocated the layer, before
// layer_count is raised past i (release), and never change afterwards.
// Slot i >= layer_count is private to the control lock holder.
struct BloomLayer {
  uint64_t offset;        // segment offset of the layer extent: kStripes counter lines, then the bits
  uint64_t bits;          // m; blocked: a multiple of 512
  uint64_t capacity;      // n of this layer (n * g^i)
  double error;           // p of this layer (p * r^i)
  double bits_per_key;    // m / n as sized
  uint64_t grow_at_bits;  // expected set bits at n = capacity: the "full" mark
  uint32_t k;             // probes
  uint32_t state;         // kSlotEmpty / kSlotReady; written with an undo-logged store (txn.store_u32)
  uint32_t check_shift;   // a stripe sums all stripes each time it crosses a multiple of 2^check_shift
  uint32_t reserved;      // zero
};
static_assert(sizeof(BloomLayer) == 64, "one layer descriptor per cache line");
static_assert(offsetof(BloomLayer, k) == 48, "BloomLayer is part of the format");

// Counter line at the start of every layer extent, kStripes of them.
struct alignas(64) BloomStripe {
  std::atomic<uint64_t> bits_set;  // bits this stripe's writers turned 0->1; fetch_add relaxed. Only grows (clear resets).
  uint8_t pad[56];  // zero; one stripe per line
};
static_assert(sizeof(BloomStripe) == 64, "stripes are one cache line each (no false sharing)");

inline constexpr uint64_t kStripeBytes = kStripes * sizeof(BloomStripe);

inline uint64_t header_bytes(uint32_t max_layers) {
  uint64_t b = sizeof(BloomHeader) + uint64_t{max_layers} * sizeof(BloomLayer);
  return (b + 63) & ~uint64_t{63};
}
inline uint64_t layer_extent_bytes(uint64_t bits) { return kStripeBytes + ((bits + 511) / 512) * 64; }
inline BloomLayer* slots(BloomHeader* h) { return reinterpret_cast<BloomLayer*>(h + 1); }
inline const BloomLayer* slots(const BloomHeader* h) { return reinterpret_cast<const BloomLayer*>(h + 1); }

// ---------------------------------------------------------------------------
// Sizing.
struct Sizing {
  uint64_t bits = 0;
  uint32_t k = 0;
  double bits_per_key = 0;
  double model_fp = 0;  // FP of the model at n = capacity
};

// Poisson-mixture FP of a blocked filter with B-bit blocks (see top).
// Bounded work on any input (stats() passes counts read from a segment): above
// kMaxPoissonLambda keys per block (>= 20 per bit: every block is saturated, the mixture's
// spread is below 1%) the point value at lambda stands in for the sum, and a NaN / infinite /
// negative load (a corrupt count) answers 1.
inline constexpr double kMaxPoissonLambda = 10000;
inline double blocked_fp(double bits_per_key, double k, double B = kBlockBits) {
  double lambda = B / bits_per_key;
  if (!(lambda >= 0) || !(k >= 0)) return 1.0;
  if (lambda > kMaxPoissonLambda) {
    const double v = std::pow(-std::expm1(k * lambda * std::log1p(-1.0 / B)), k);
    return std::isfinite(v) ? std::min(1.0, v) : 1.0;
  }
  double lo = std::max(0.0, std::floor(lambda - 12 * std::sqrt(lambda) - 5));
  double hi = std::ceil(lambda + 12 * std::sqrt(lambda) + 30);
  double q = std::log1p(-1.0 / B);
  double sum = 0;
  for (double L = lo; L <= hi; L += 1) {
    double logp = -lambda + L * std::log(lambda) - std::lgamma(L + 1);
    double s = -std::expm1(k * L * q);  // fraction of the block set by L keys
    sum += std::exp(logp + k * std::log(s > 0 ? s : 1e-300));
  }
  return sum;
}

inline double classic_fp(double bits_per_key, double k) { return std::pow(-std::expm1(-k / bits_per_key), k); }

// Textbook sizing; false when p or n is out of range or k would exceed kMaxK.
inline bool size_classic(uint64_t n, double p, Sizing& out) {
  if (n == 0 || !(p > 0 && p < 1)) return false;
  double ln2 = std::log(2.0);
  double m = std::ceil(-static_cast<double>(n) * std::log(p) / (ln2 * ln2));
  double k = std::max(1.0, std::round(m / static_cast<double>(n) * ln2));
  if (k > kMaxK || !(m < 9.2e18)) return false;
  out.bits = std::max<uint64_t>(64, static_cast<uint64_t>(m));
  out.k = static_cast<uint32_t>(k);
  out.bits_per_key = static_cast<double>(out.bits) / static_cast<double>(n);
  out.model_fp = classic_fp(out.bits_per_key, k);
  return true;
}

// The measured FP of this implementation exceeds the Poisson model slightly
// (the multiplicative probe sequence is not fully independent): 1e6 keys,
// 1e7 negatives, three seeds each: at 9.90 bits/key k=6 model 0.998%,
// measured 1.006/1.008/1.010% (+0.9%); at 15.49 bits/key k=9 model 0.0999%,
// measured 0.1025/0.1020/0.1035% (+2.7%). Sizing therefore targets
// model <= p * kBlockedCalibration so that the MEASURED rate meets p.
inline constexpr double kBlockedCalibration = 0.96;

// Smallest bits/key (0.01 steps) with blocked_fp(b, k) <= p * kBlockedCalibration
// for some k <= 24, and that k.
inline bool size_blocked(uint64_t n, double p_asked, Sizing& out) {
  if (n == 0 || !(p_asked > 0 && p_asked < 1)) return false;
  const double p = p_asked * kBlockedCalibration;
  double best_b = 0, best_fp = 0;
  uint32_t best_k = 0;
  for (uint32_t k = 1; k <= 24; ++k) {
    if (blocked_fp(200.0, k) > p) continue;  // unreachable with this k
    double lo = 0.5, hi = 200.0;             // fp(lo) > p >= fp(hi)
    while (hi - lo > 0.005) {
      double mid = (lo + hi) / 2;
      (blocked_fp(mid, k) <= p ? hi : lo) = mid;
    }
    double b = std::ceil(hi * 100 - 1e-9) / 100;
    if (blocked_fp(b, k) > p) b += 0.01;
    if (best_k == 0 || b < best_b) {
      best_b = b;
      best_k = k;
      best_fp = blocked_fp(b, k);
    }
  }
  if (best_k == 0) return false;
  double blocks = std::ceil(static_cast<double>(n) * best_b / kBlockBits);
  if (!(blocks >= 1 && blocks <= static_cast<double>(kMaxLayerBlocks))) return false;
  out.bits = static_cast<uint64_t>(blocks) * kBlockBits;
  out.k = best_k;
  out.bits_per_key = static_cast<double>(out.bits) / static_cast<double>(n);
  out.model_fp = best_fp;
  return true;
}

inline bool size_layer(uint32_t layout, uint64_t n, double p, Sizing& out) {
  return layout == kLayoutClassic ? size_classic(n, p, out) : size_blocked(n, p, out);
}

inline double block_bits_of(uint32_t layout, uint64_t m) {
  return layout == kLayoutClassic ? static_cast<double>(m) : static_cast<double>(kBlockBits);
}

// Expected set bits after n keys (inverse of estimate_inserted).
inline double expected_set_bits(uint32_t layout, uint64_t m, uint32_t k, double n) {
  double B = block_bits_of(layout, m);
  double per_key = -std::expm1(k * std::log1p(-1.0 / B));  // 1 - (1-1/B)^k
  return static_cast<double>(m) * -std::expm1(-n * B / static_cast<double>(m) * per_key);
}

// n_est from set bits (see top). Saturates at a full array.
inline double estimate_inserted(uint32_t layout, uint64_t m, uint32_t k, uint64_t set_bits) {
  if (m == 0 || k == 0) return 0;
  double B = block_bits_of(layout, m);
  double f = std::min(static_cast<double>(set_bits) / static_cast<double>(m), 1.0 - 1e-12);
  double per_key = -std::expm1(k * std::log1p(-1.0 / B));
  return -std::log1p(-f) * (static_cast<double>(m) / B) / per_key;
}

// FP rate of one layer right now, from its set bits.
inline double fp_now(uint32_t layout, uint64_t m, uint32_t k, uint64_t set_bits) {
  if (set_bits == 0) return 0;
  if (layout == kLayoutClassic) return std::pow(static_cast<double>(set_bits) / static_cast<double>(m), k);
  double n = estimate_inserted(layout, m, k, set_bits);
  if (n <= 0) return 0;
  return blocked_fp(static_cast<double>(m) / n, k);
}

// ---------------------------------------------------------------------------
// Kernels over one layer. `words` is the 64-byte aligned bit array, m bits.
// Concurrency: any number of processes run add/contains on the same words at
// once. Bits only go 0 -> 1 (except clear()), so:
//  - loads are relaxed: a bit carries no payload that must be published with
//    it; visibility of an acknowledged add to a reader that synchronised with
//    the adder by any other means follows from coherence + happens-before.
//  - fetch_or is relaxed: the RMW makes concurrent setters of one word never
//    lose each other's bits; no other memory is ordered by it.
struct AddResult {
  uint32_t newly_set = 0;  // bits this call turned 0 -> 1
  bool raced = false;      // a bit seen missing at the load was set by someone else before our fetch_or
};

inline uint64_t load_word(const uint64_t* w) noexcept {
  // relaxed: see the kernel comment above (bits carry no payload).
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(w)).load(std::memory_order_relaxed);
}

// Sets `mask` in *w, touching the line for writing only when bits are missing.
inline void or_word(uint64_t* w, uint64_t mask, AddResult& r) noexcept {
  uint64_t old = load_word(w);
  uint64_t miss = mask & ~old;
  if (miss == 0) return;  // present already: no RMW, no cache-line ownership transfer
  // relaxed: the RMW alone guarantees no lost bits; nothing else is published.
  uint64_t prev = std::atomic_ref<uint64_t>(*w).fetch_or(miss, std::memory_order_relaxed);
  uint64_t mine = miss & ~prev;
  r.newly_set += static_cast<uint32_t>(std::popcount(mine));
  r.raced |= (mine != miss);
}

inline uint64_t fmix64(uint64_t h) noexcept {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

// ---- blocked ----
inline uint64_t blocked_block(uint64_t h, uint64_t blocks) noexcept {
  return ((h >> 32) * blocks) >> 32;  // FastRange32 (blocks <= 2^32)
}
inline const uint64_t* blocked_line(const uint64_t* words, uint64_t m, uint64_t h) noexcept {
  return words + blocked_block(h, m / kBlockBits) * 8;
}
inline void blocked_masks(uint64_t h, uint32_t k, uint64_t masks[8]) noexcept {
  for (int i = 0; i < 8; ++i) masks[i] = 0;
  uint32_t h2 = static_cast<uint32_t>(h);
  for (uint32_t i = 0; i < k; ++i) {
    uint32_t bit = h2 >> 23;  // top 9 bits: 0..511
    masks[bit >> 6] |= uint64_t{1} << (bit & 63);
    h2 *= 0x9e3779b9u;
  }
}
inline bool blocked_contains(const uint64_t* words, uint64_t m, uint32_t k, uint64_t h) noexcept {
  const uint64_t* line = blocked_line(words, m, h);
  uint64_t masks[8];
  blocked_masks(h, k, masks);
  uint64_t missing = 0;
  for (int i = 0; i < 8; ++i) missing |= masks[i] & ~load_word(line + i);
  return missing == 0;
}
inline AddResult blocked_add(uint64_t* words, uint64_t m, uint32_t k, uint64_t h) noexcept {
  uint64_t* line = const_cast<uint64_t*>(blocked_line(words, m, h));
  uint64_t masks[8];
  blocked_masks(h, k, masks);
  AddResult r;
  for (int i = 0; i < 8; ++i)
    if (masks[i] != 0) or_word(line + i, masks[i], r);
  return r;
}

// ---- classic ----
__extension__ typedef unsigned __int128 u128;
inline uint64_t classic_bit(uint64_t g, uint64_t m) noexcept {
  return static_cast<uint64_t>((static_cast<u128>(g) * m) >> 64);  // FastRange64
}
inline uint64_t classic_delta(uint64_t h) noexcept { return fmix64(h) | 1; }
inline bool classic_contains(const uint64_t* words, uint64_t m, uint32_t k, uint64_t h) noexcept {
  uint64_t g = h, d = classic_delta(h);
  for (uint32_t i = 0; i < k; ++i, g += d) {
    uint64_t b = classic_bit(g, m);
    if ((load_word(words + (b >> 6)) & (uint64_t{1} << (b & 63))) == 0) return false;
  }
  return true;
}
inline AddResult classic_add(uint64_t* words, uint64_t m, uint32_t k, uint64_t h) noexcept {
  uint64_t g = h, d = classic_delta(h);
  AddResult r;
  for (uint32_t i = 0; i < k; ++i, g += d) {
    uint64_t b = classic_bit(g, m);
    or_word(words + (b >> 6), uint64_t{1} << (b & 63), r);
  }
  return r;
}

// One software prefetch into all cache levels. GCC 12 (-O2) deleted
// __builtin_prefetch here: the batch loop of prefetches over LayerView
// compiled to nothing (objdump showed no prefetcht0 in bloom.cpp.o); an
// asm volatile cannot be removed. prefetcht0 for reads and for writes (the
// RMW then finds the line in L1; prefetchw would also save the S->M upgrade
// but needs PRFCHW).
inline void prefetch_line(const void* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

// Prefetch every line a key touches (one for blocked, k for classic).
inline void prefetch(uint32_t layout, const uint64_t* words, uint64_t m, uint32_t k, uint64_t h) noexcept {
  if (layout == kLayoutBlocked) {
    prefetch_line(blocked_line(words, m, h));
    return;
  }
  uint64_t g = h, d = classic_delta(h);
  for (uint32_t i = 0; i < k; ++i, g += d) prefetch_line(words + (classic_bit(g, m) >> 6));
}

// A resolved layer: what the handle passes to the kernels.
struct LayerView {
  uint64_t* words = nullptr;
  BloomStripe* stripes = nullptr;
  uint64_t m = 0;
  uint32_t k = 0;
  uint32_t layout = kLayoutBlocked;

  bool contains(uint64_t h) const noexcept {
    return layout == kLayoutBlocked ? blocked_contains(words, m, k, h) : classic_contains(words, m, k, h);
  }
  AddResult add(uint64_t h) const noexcept {
    return layout == kLayoutBlocked ? blocked_add(words, m, k, h) : classic_add(words, m, k, h);
  }
  void prefetch(uint64_t h) const noexcept { bloom::prefetch(layout, words, m, k, h); }
  uint64_t set_bits() const noexcept {
    uint64_t s = 0;
    // relaxed: statistics; a slightly stale sum only delays growth by one check interval.
    for (uint32_t i = 0; i < kStripes; ++i) s += stripes[i].bits_set.load(std::memory_order_relaxed);
    return s;
  }
  uint64_t popcount() const noexcept {
    uint64_t s = 0;
    for (uint64_t i = 0; i < m / 64; ++i) s += static_cast<uint64_t>(std::popcount(load_word(words + i)));
    if (m % 64) s += static_cast<uint64_t>(std::popcount(load_word(words + m / 64)));
    return s;
  }
};

// Layer view over an extent at `extent` (stripes first, then bits).
inline LayerView view_of(std::byte* extent, const BloomLayer& s, uint32_t layout) {
  LayerView v;
  v.stripes = reinterpret_cast<BloomStripe*>(extent);
  v.words = reinterpret_cast<uint64_t*>(extent + kStripeBytes);
  v.m = s.bits;
  v.k = s.k;
  v.layout = layout;
  return v;
}

// The integrity checker of this kind (bloom.cpp), what Segment::check runs for every
// region of Kind::kBloom; its row in the kinds table (bloom_kind.cpp) names it.
void check_bloom(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);

// Its save/restore (bloom_snapshot.cpp); bloom_kind.cpp puts them in the kinds table.
std::string save(Segment& seg, const RegionInfo& r);
void restore(Segment& seg, const std::string& name, snapshot::In in);

}  // namespace shmfilter::internal::bloom
