// shmfilter/exact_set.hpp: an exact set of 64-bit keys in the shared segment.
//
// Redis SET's job (SADD / SISMEMBER / SREM) for one set, at about 10 bytes per
// key at full load (default max load 0.8) instead of Redis's 72-84: open
// addressing with linear probing over 8-byte slots holding the keys
// themselves. Exact for uint64 keys. Byte-string keys are first hashed to 64
// bits with XXH3 (seeded per set), so two different strings collide with
// probability about n/2^64 per lookup (n = keys in the set): exact for every
// practical purpose, but not in principle. Use uint64 keys when IDs are
// already 64-bit (a 16-hex-char device ID parsed as hex is one).
//
// Capacity is fixed at creation: insert of a new key returns kFull once size()
// reaches capacity (never a silent loss). When keys plus tombstones fill the
// table's used limit (max load + 0.1 of the slots), the insert first cleans
// tombstones up online (under every stripe lock; readers stay lock-free), so
// insert/erase churn never answers kFull below capacity; kFull then means the
// live keys really leave no room on that key's chain: recreate it larger.
//
// Concurrency: contains/contains_many/size are lock-free. insert/erase of a
// key take a short per-stripe lock (owner token + liveness takeover) only
// when they change the table; a lookup that finds the key present is
// lock-free. A process killed at any instruction leaves the set consistent:
// every acknowledged insert present, every acknowledged erase gone, size exact.
// docs/exact_set.md has the slot state machine and the argument.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "shmfilter/region_handle.hpp"
#include "shmfilter/segment.hpp"

namespace shmfilter {

struct ExactSetOptions {
  uint64_t capacity = 0;  // most live keys (>= 1)
  double max_load = 0.8;  // capacity / slots, in [0.1, 0.95]: bytes per key = 8 / max_load
};

enum class InsertResult : uint8_t {
  kInserted = 0,  // the key was absent and is now present (exactly one caller per key sees this)
  kExists = 1,    // the key was already present
  kFull = 2,      // the key is absent and there is no room: capacity reached (see header comment)
  kDropped = 3,   // the set was dropped by some process (valid() is false)
  kForked = 4,    // this handle was inherited across fork(): writers refuse; open the segment and the set in
                  // the child
  kReadOnly = 5,  // the segment was opened read-only (OpenOptions::read_only): nothing stored
};
// "inserted", "exists", "full", "dropped", "forked", "read-only"
std::string_view insert_result_name(InsertResult r) noexcept;

struct ExactSetStats {
  uint64_t capacity = 0;
  uint64_t slots = 0;
  uint64_t size = 0;              // live keys (exact)
  uint64_t used_slots = 0;        // non-empty slots (keys + tombstones), an upper bound
  uint32_t stripes = 0;
  double max_load = 0;
  double load = 0;                // size / slots
  uint64_t bytes = 0;             // region size in the segment
  double bytes_per_key_at_capacity = 0;  // bytes / capacity
  uint64_t seed = 0;
};

class ExactSet : public internal::RegionHandle {
 public:
  // Control plane, takes the segment lock. Throws kInvalidArgument (capacity 0,
  // max_load out of range), kExists, kNameTooLong, kNoSpace.
  static ExactSet create(Segment& seg, std::string_view name, const ExactSetOptions& opts);
  // Lock-free lookup. Throws kNotFound/kWrongKind/kCorrupt.
  static ExactSet open(Segment& seg, std::string_view name);
  // Control plane. False when absent.
  static bool drop(Segment& seg, std::string_view name);

  ExactSet() = default;

  // Any process; lock-free when the key is present, else a per-stripe lock.
  InsertResult insert(uint64_t key) noexcept;
  InsertResult insert(std::string_view key) noexcept;  // insert(key_of(key))
  // The name of this operation in C (shmf_set_insert_unique), Python and Cuckoo (docs/NAMING.md):
  // an exact set's insert is always unique, so both names are the one operation.
  InsertResult insert_unique(uint64_t key) noexcept { return insert(key); }
  InsertResult insert_unique(std::string_view key) noexcept { return insert(key); }
  // Inserts each key; out[i] = InsertResult of keys[i]. Returns how many were inserted.
  uint64_t insert_many(std::span<const uint64_t> keys, std::span<InsertResult> out) noexcept;
  uint64_t insert_many(std::span<const std::string_view> keys, std::span<InsertResult> out) noexcept;
  // Lock-free, any process. False when dropped.
  bool contains(uint64_t key) const noexcept;
  bool contains(std::string_view key) const noexcept;
  // Lock-free; out[i] = 1 when keys[i] is present, for i < min(keys, out) sizes.
  // Returns how many are present (0, and out all 0, when dropped).
  uint64_t contains_many(std::span<const uint64_t> keys, std::span<uint8_t> out) const noexcept;
  uint64_t contains_many(std::span<const std::string_view> keys, std::span<uint8_t> out) const noexcept;
  // Any process; true exactly once per present key. False when absent or dropped.
  bool erase(uint64_t key) noexcept;
  bool erase(std::string_view key) noexcept;
  // Lock-free: exact when no insert/erase is in flight. 0 when dropped.
  uint64_t size() const noexcept;
  uint64_t capacity() const noexcept;  // immutable after create
  // Pure: the uint64 key a string key maps to in this set (XXH3 with the set's seed).
  uint64_t key_of(std::string_view key) const noexcept;

  ExactSetStats stats() const;  // lock-free snapshot; throws kDropped
  // valid(), name(): from RegionHandle (lock-free; false once some process dropped it).

 private:
  friend struct ExactSetOps;  // every private operation (lib/structures/exact_set/exact_set.cpp)
  uint64_t stripes_offset_ = 0, slots_offset_ = 0;  // from region_, validated by open()
  uint64_t token_ = 0;                              // seg_.owner_token(), the stripe-lock owner id
};

}  // namespace shmfilter
