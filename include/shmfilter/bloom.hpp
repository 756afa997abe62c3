// shmfilter/bloom.hpp: a Bloom filter in a shared segment, lock-free across processes.
//
// Two layouts: kBlocked (default: all k bits of a key in one 64-byte line, one
// cache miss per query; bits/key and k chosen so the measured FP meets p) and
// kClassic (k independent probes, textbook/RedisBloom sizing). Optional
// scaling: when a layer is full (inserted estimate >= its capacity) a new
// layer of capacity x growth and error x tightening is added; the first layer
// gets exactly the p asked for, so the total FP stays below p / (1 - r).
// Without scaling an over-full filter keeps answering and says so in stats().
//
// add() returns true iff this call set at least one bit. Two processes adding
// the same new key at the same instant: AT LEAST ONE returns true, and BOTH may
// (each may set a different one of the key's words first). stats().racing_adds
// counts adds that returned true after losing a race on one of their bits: an
// upper bound on such double counts (except across a concurrent layer growth).
// See docs/bloom.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/region_handle.hpp"
#include "shmfilter/segment.hpp"

namespace shmfilter {

enum class BloomLayout : uint32_t { kBlocked = 0, kClassic = 1 };
std::string_view bloom_layout_name(BloomLayout layout) noexcept;  // "blocked" / "classic"

struct BloomOptions {
  uint64_t capacity = 0;                      // n: keys the first layer holds at `error` (>= 1)
  double error = 0.01;                        // p: target false-positive rate, in (0, 1)
  BloomLayout layout = BloomLayout::kBlocked;
  double growth = 0;                          // g: 0 = fixed size (no scaling); else in [1, 16]
  double tightening = 0.5;                    // r: layer i has error p * r^i, r in (0, 1)
  uint32_t max_layers = 32;                   // with scaling: layers at most (1..64)
  std::optional<uint64_t> seed;               // XXH3 seed; default: random (tests pin it)
};

// What a filter of these options costs (no segment needed).
struct BloomSizing {
  uint64_t bits = 0;          // first layer's bit array
  uint32_t k = 0;             // probes
  double bits_per_key = 0;
  double model_fp = 0;        // the model's FP at capacity
  uint64_t region_bytes = 0;  // header + first layer
};

struct BloomLayerStats {
  uint64_t capacity = 0;
  double error = 0;           // this layer's target p_i
  uint64_t bits = 0;
  uint32_t k = 0;
  uint64_t set_bits = 0;      // from the layer's counters
  double fill_ratio = 0;
  double inserted_estimate = 0;
  double fp_rate_now = 0;
};

struct BloomStats {
  BloomLayout layout = BloomLayout::kBlocked;
  uint64_t capacity = 0;          // first layer, as asked
  uint64_t total_capacity = 0;    // sum over layers
  double error = 0;               // as asked
  double growth = 0;
  double tightening = 0;
  double fp_bound = 0;            // p without scaling, p / (1 - r) with
  uint32_t layers = 0;
  uint32_t max_layers = 0;
  uint64_t bits = 0;              // all layers
  uint32_t k = 0;                 // first layer's
  double inserted_estimate = 0;   // sum of the layers' estimates from their fill
  double fill_ratio = 0;          // set bits / bits, all layers
  double fp_rate_now = 0;         // 1 - prod(1 - fp_i) from the fill right now
  uint64_t memory_bytes = 0;      // header + every layer extent
  double bits_per_element = 0;    // memory bits / inserted estimate (0 when empty)
  bool over_capacity = false;     // beyond capacity with no more layers possible
  uint64_t racing_adds = 0;       // see the top comment
  uint64_t seed = 0;
  std::vector<BloomLayerStats> layer;
};

class Bloom : public internal::RegionHandle {
 public:
  // Control plane (throws Error): validates options, sizes, creates the region.
  // Bad options throw kInvalidArgument and leave the segment unchanged.
  static Bloom create(Segment& seg, std::string_view name, const BloomOptions& opts);
  // Control plane (throws Error: kNotFound, kWrongKind, kCorrupt).
  static Bloom open(Segment& seg, std::string_view name);
  // Control plane, takes the segment lock: frees every layer; false if absent.
  static bool drop(Segment& seg, std::string_view name);
  // Pure: sizing of the first layer for these options (throws kInvalidArgument).
  static BloomSizing plan(const BloomOptions& opts);

  Bloom() = default;

  // Data plane: lock-free, any process/thread; false when dropped. May add a
  // layer (segment lock) when scaling and the newest layer is full.
  bool add(std::string_view key) noexcept;
  bool add(uint64_t key) noexcept;
  // Data plane: lock-free, wait-free reads; false when dropped.
  bool contains(std::string_view key) const noexcept;
  bool contains(uint64_t key) const noexcept;
  // Batches with software prefetching. out (optional for add, sized like keys)
  // gets 1/0 per key. Return: keys newly added / keys present. Lock-free.
  uint64_t add_many(std::span<const uint64_t> keys, std::span<uint8_t> out = {}) noexcept;
  uint64_t add_many(std::span<const std::string_view> keys, std::span<uint8_t> out = {}) noexcept;
  uint64_t contains_many(std::span<const uint64_t> keys, std::span<uint8_t> out) const noexcept;
  uint64_t contains_many(std::span<const std::string_view> keys, std::span<uint8_t> out) const noexcept;

  // Zeroes every layer and the counters (layers stay allocated). Lock-free but
  // not atomic: adds running concurrently may survive partially. Throws kDropped.
  void clear();
  // Lock-free snapshot (counters may be slightly stale). Throws kDropped.
  BloomStats stats() const;
  // valid(), name(): from RegionHandle (lock-free; false once some process dropped it).

 private:
  friend struct BloomOps;  // every private operation (lib/structures/bloom/bloom.cpp)
  std::byte* base_ = nullptr;  // seg_.base(): layers are addressed from it
  uint64_t offset_ = 0;        // the region's offset (region_ == base_ + offset_)
  uint32_t stripe_ = 0;        // this attachment's counter stripe
};

}  // namespace shmfilter
