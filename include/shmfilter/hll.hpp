// shmfilter/hll.hpp: HyperLogLog distinct counters in the shared segment.
//
// An HLL answers ONE question: about how many distinct keys were added
// (2^14 registers, relative standard error 1.04/sqrt(16384) = 0.81%). It is
// NOT a membership test: it cannot say whether a given key was added, and
// code that uses it that way passes tests on duplicate-free data and fails in
// production. For "has device D been served?" use Bloom, Cuckoo or ExactSet.
//
// Redis compatible: the same hash (MurmurHash64A, seed 0xadc83b19), register
// rules and estimator as Redis's PFADD/PFCOUNT, so counts agree with Redis on
// the same input; export_redis() writes Redis's dense string encoding (SET it
// and PFCOUNT/PFMERGE it in Redis) and import_redis() reads Redis's dense or
// sparse encoding (GET a Redis HLL key and load it here). docs/hll.md.
//
// Concurrency: add is lock-free across processes (a CAS-max on one 64-bit
// word of 10 registers); count/merge read a snapshot word by word. A process
// killed at any instruction leaves every register a valid value.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/region_handle.hpp"
#include "shmfilter/segment.hpp"

namespace shmfilter {

struct HllOptions {
  // Nothing to choose: precision is fixed at 14 (Redis's), 13,240 bytes per HLL.
};

struct HllStats {
  uint64_t estimate = 0;            // count()
  uint32_t registers = 0;           // 16384
  uint32_t nonzero_registers = 0;   // registers touched at least once
  uint32_t max_register = 0;        // highest rank seen (<= 51)
  uint64_t bytes = 0;               // region size in the segment
  double standard_error = 0;        // 1.04/sqrt(16384)
  bool count_cached = false;        // count() would answer from the cache now (no change since it was computed)
  uint64_t changes_in_flight = 0;   // register changes begun and not ended (adds running, or a writer that died
                                    // inside one: the cache stays off until check --repair; counts stay exact)
};

class Hll : public internal::RegionHandle {
 public:
  static constexpr uint32_t kPrecision = 14;
  static constexpr uint32_t kRegisters = 1u << kPrecision;

  // Control plane, takes the segment lock. Throws kExists/kNameTooLong/kNoSpace.
  static Hll create(Segment& seg, std::string_view name, const HllOptions& opts = {});
  // Lock-free lookup. Throws kNotFound/kWrongKind/kCorrupt.
  static Hll open(Segment& seg, std::string_view name);
  // open(), or create() when absent (racing creators: one creates, all open it).
  static Hll open_or_create(Segment& seg, std::string_view name);
  // Control plane. False when absent.
  static bool drop(Segment& seg, std::string_view name);

  Hll() = default;

  // Lock-free, any process. True when a register grew (Redis PFADD's 1);
  // false when nothing changed or the HLL was dropped (then valid() is false).
  bool add(std::string_view key) noexcept;
  bool add(uint64_t key) noexcept;  // hashed as its 8 little-endian bytes
  // Lock-free. Returns how many registers grew.
  uint64_t add_many(std::span<const uint64_t> keys) noexcept;
  uint64_t add_many(std::span<const std::string_view> keys) noexcept;

  // Lock-free snapshot read; the same number Redis's PFCOUNT gives for these
  // registers. 0 when dropped. Cached across processes: an HLL unchanged since
  // the last count answers from one cache line (docs/hll.md "Count cache").
  uint64_t count() const noexcept;
  // Lock-free, not atomic as a whole: adds racing with clear may survive it.
  // A clear killed midway leaves valid, partly cleared registers: run it again.
  void clear() noexcept;

  // Lock-free register max of every source into this HLL (idempotent: a
  // merge killed midway is completed by running it again). Throws kDropped.
  void merge_from(std::span<const Hll> sources);
  // Count of the union of `hlls` without writing anything (the 7-day UV).
  // Throws kDropped / kInvalidArgument (empty list).
  static uint64_t count_union(std::span<const Hll> hlls);

  // Lock-free snapshot of the 16384 registers, one byte each. Throws kDropped.
  std::vector<uint8_t> registers() const;
  // Lock-free snapshot as a Redis dense string (12,304 bytes, cardinality
  // cache marked invalid). Throws kDropped.
  std::string export_redis() const;
  // Lock-free register max of a Redis HLL string (dense or sparse) into this HLL.
  // Throws kBadInput (message says what is wrong) / kDropped.
  void import_redis(std::string_view bytes);
  // Pure function: count of a Redis HLL string, no segment. Throws kBadInput.
  static uint64_t count_redis(std::string_view bytes);

  HllStats stats() const;  // lock-free snapshot; throws kDropped
  // valid(), name(): from RegionHandle (lock-free; false once some process dropped it).

 private:
  uint64_t* words_ = nullptr;  // the register words, after the header
};

}  // namespace shmfilter
