// shmfilter/roaring_set.hpp: an exact, deletable set of 32-bit IDs shared by
// every process, built on CRoaring.
//
// The settled part is a snapshot in the segment (layout 4): a container
// table of 8-byte words, one per non-empty 16-bit chunk (below 512
// containers behind sorted keys, from 512 on behind a 16 KiB rank index: a
// lookup is the index entry, the word, the container), naming immutable
// containers (CRoaring's array, bitset and run formats) in packs shared between
// snapshot generations; every process reads it in place, zero-copy. Recent
// adds/removes live in a bounded lock-free delta table in the segment and
// are visible to every process as soon as the call returns. When the delta
// passes a threshold a writer links a newer, twice larger table after it
// (bounded work: no rebuild); compact() or maintain() (or, once the chain of
// tables is full, a writer of a set with auto_compact) rebuilds only the
// containers the deltas touched, into one new pack, and publishes the new
// table with one atomic offset swap; old snapshots and the packs no newer
// snapshot names are freed only when the reader table says no process can
// still read them. Design and protocol: docs/roaring.md.
//
// Values are uint32. The uint64 entry points (add_u64, contains_many over
// uint64, parse_value) reject values >= 2^32 instead of truncating them.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/region_handle.hpp"
#include "shmfilter/segment.hpp"

typedef struct roaring_bitmap_s roaring_bitmap_t;  // CRoaring's roaring.h

namespace shmfilter {

namespace internal::roaring {
struct RoaringLocal;  // process-local cache: reader slot + snapshot views (lib/structures/roaring/roaring_local.h)
}

struct RoaringOptions {
  // MAXIMUM delta table slots (power of two, 64 .. 2^24; 8 bytes each). A delta
  // starts at 64 slots and each compaction sizes the next one from the set's
  // cardinality (about cardinality / 16, up to this): memory follows use.
  uint32_t delta_capacity = 1u << 24;
  double compact_at = 0.5;             // delta fill fraction (0 < f <= 0.9) that triggers compaction
  // Processes that may have the set open at once (1 .. 65536); 64 bytes each.
  // 32 keeps an empty set under 4 KiB; raise it for larger worker pools.
  uint32_t reader_slots = 32;
  // A writer whose delta crosses compact_at links a newer table (never a
  // rebuild). When the chain of kMaxChain (4) tables is full, with
  // auto_compact the writer compacts itself; without it, writers wait (5 s,
  // then kBusy) for a compact()/maintain() caller.
  bool auto_compact = true;
};

// Result of a data-plane write.
enum class RoaringStatus : int32_t {
  kOk = 0,
  kOutOfRange = 1,  // a uint64 value >= 2^32 (nothing was written)
  kDropped = 2,     // the set was dropped by some process
  kFull = 3,        // the delta is full and could not be made room in for another reason (a chain
                    // that cannot be followed: check reports it)
  kNoSpace = 4,     // the delta is full and the segment has no space for the compaction: grow it
  kBusy = 5,        // the delta is full and another process held the compaction claim (or kept
                    // every retired snapshot pinned) past the wait bound: retry later
  kForked = 6,      // this handle was inherited across fork(): open the segment and the set in the child
};
std::string_view roaring_status_name(RoaringStatus s) noexcept;

enum class SetOp : uint32_t { kUnion = 0, kIntersection = 1, kDifference = 2, kXor = 3 };

struct RoaringStats {
  uint64_t cardinality = 0;         // snapshot + delta
  uint64_t snapshot_cardinality = 0;
  uint64_t snapshot_bytes = 0;      // published snapshot: pack directory + container table + every pack it names
  uint64_t snapshot_generation = 0;
  uint64_t delta_capacity = 0;      // slots of the active chain's head (sized at compaction: grows with the set)
  uint64_t delta_max_capacity = 0;  // the set's maximum (RoaringOptions::delta_capacity)
  uint64_t delta_tables = 0;        // tables in the active chain (1 + links since the last compaction)
  uint64_t delta_chain_capacity = 0;  // slots of every table of the active chain
  uint64_t delta_links = 0;         // tables ever linked to a full one (instead of an inline compaction)
  uint64_t delta_fill = 0;          // claimed slots of the active chain
  uint64_t prev_delta_fill = 0;     // claimed slots of the previous version's chain, still consulted
  uint64_t delta_bytes = 0;         // every delta table consulted
  uint64_t total_bytes = 0;         // region + snapshot + deltas (+ retired not yet freed)
  uint64_t pending_free = 0;        // retired snapshots waiting for readers
  uint64_t compactions = 0;
  uint32_t containers = 0, array_containers = 0, bitmap_containers = 0, run_containers = 0;
  uint32_t readers = 0;             // live reader-table slots
  uint64_t claim_owner = 0;         // token of the compacting process, 0 = none
  uint64_t link_claim_owner = 0;    // token of the process linking a delta table, 0 = none
};

class RoaringSet : public internal::RegionHandle {
 public:
  // Control plane: creates an empty set. Throws Error (kInvalidArgument for
  // bad options, kExists, kNoSpace...). Takes the segment lock.
  static RoaringSet create(Segment& seg, std::string_view name, const RoaringOptions& opts = {});
  // Control plane: creates a set holding `initial` (copied). Takes the segment lock.
  static RoaringSet create_from(Segment& seg, std::string_view name, const roaring_bitmap_t* initial,
                                const RoaringOptions& opts = {});
  // Control plane: opens an existing set (validates the header; kCorrupt,
  // kNotFound, kWrongKind, kFull when the reader table has no free slot).
  static RoaringSet open(Segment& seg, std::string_view name);
  // Control plane: drops the set and frees its snapshots and deltas. False if absent.
  static bool drop(Segment& seg, std::string_view name);

  RoaringSet() = default;
  explicit operator bool() const noexcept { return local_ != nullptr; }

  // ---- data plane: lock-free for readers; writers never wait for readers --------
  // Any thread/process. Visible to every process when it returns.
  RoaringStatus add(uint32_t value) noexcept;
  RoaringStatus remove(uint32_t value) noexcept;
  // Any thread/process; kOutOfRange for value >= 2^32 (nothing written).
  RoaringStatus add_u64(uint64_t value) noexcept;
  RoaringStatus remove_u64(uint64_t value) noexcept;
  // Lock-free, any thread/process: delta answer if the value is in a delta, else the snapshot.
  bool contains(uint32_t value) const noexcept;
  // Lock-free; false for value >= 2^32.
  bool contains_u64(uint64_t value) const noexcept;
  // Any thread/process. The uint64 overload checks every value first and writes
  // nothing (kOutOfRange) if one is >= 2^32.
  RoaringStatus add_many(std::span<const uint32_t> values) noexcept;
  RoaringStatus add_many(std::span<const uint64_t> values) noexcept;
  RoaringStatus remove_many(std::span<const uint32_t> values) noexcept;
  // Lock-free; out[i] = contains(values[i]) (0 for uint64 values >= 2^32), for i < min(values, out)
  // sizes. Returns how many are present (0, and out all 0, once dropped).
  uint64_t contains_many(std::span<const uint32_t> values, std::span<uint8_t> out) const noexcept;
  uint64_t contains_many(std::span<const uint64_t> values, std::span<uint8_t> out) const noexcept;
  // Any thread/process: adds [lo, hi), hi <= 2^32 (kOutOfRange otherwise).
  // Large ranges go straight into a new snapshot (a compaction), small ones via the delta.
  RoaringStatus add_range(uint64_t lo, uint64_t hi) noexcept;
  // Lock-free; O(delta entries) on top of the snapshot's stored cardinality.
  uint64_t cardinality() const noexcept;

  // ---- compaction and bulk (control plane: allocate under the segment lock) -----
  // Folds the deltas into a new snapshot if this process gets the claim.
  // Returns false if another live process is compacting. Throws kNoSpace, kDropped, kForked.
  bool compact();
  // Housekeeping step for a maintenance thread or process (as Window::maintain):
  // compacts when writers linked a newer delta table (or the head is past
  // compact_at), so lookups stay at one or two tables and no writer ever runs a
  // compaction; then frees what readers released. True if it compacted. Control
  // plane; the same throws as compact().
  bool maintain();
  // Adds every value of b (bulk: one compaction). Throws kNoSpace, kDropped, kBusy.
  void merge(const roaring_bitmap_t* b);
  // Frees retired snapshots no process can read any more; returns how many.
  uint32_t reclaim();

  // ---- process-local copies, import/export ------------------------------------
  // A process-local CRoaring copy (snapshot + delta); caller frees it with
  // roaring_bitmap_free. Throws kDropped.
  roaring_bitmap_t* to_bitmap() const;
  // CRoaring portable serialization (what Java, Go and Python Roaring read).
  std::string export_portable() const;
  // Adds every value of a portable serialization. Throws kBadInput (message says what is wrong).
  void import_portable(std::string_view bytes);
  // The same through a file (kIo if it cannot be read/written).
  void import_portable_file(const std::string& path);
  void export_portable_file(const std::string& path) const;

  RoaringStats stats() const;         // lock-free snapshot of the numbers (throws kDropped)
  const RegionInfo& region() const noexcept;
  // valid(), name(): from RegionHandle (lock-free; false once some process dropped it).

  // ---- set algebra across named sets (lock-free reads of each source) ------------
  // Result as a process-local bitmap (caller frees with roaring_bitmap_free).
  // kIntersection/kDifference/kXor fold left to right: ((s0 op s1) op s2)...
  static roaring_bitmap_t* compute(Segment& seg, SetOp op, std::span<const std::string> sources);
  static uint64_t compute_cardinality(Segment& seg, SetOp op, std::span<const std::string> sources);
  // Stores the result as a new named set (kExists if dest exists). Control plane.
  static RoaringSet store(Segment& seg, std::string_view dest, SetOp op, std::span<const std::string> sources,
                          const RoaringOptions& opts = {});
  // Lock-free: is x in any of the sets? (the 7-day question), without a union.
  static bool contains_any(std::span<const RoaringSet> sets, uint32_t x) noexcept;

  // Parses a decimal value; throws kBadInput "value 4294967296 does not fit in 32 bits...".
  static uint32_t parse_value(std::string_view text);
  // Validates and parses a portable serialization (throws kBadInput). Caller frees.
  static roaring_bitmap_t* parse_portable(std::string_view bytes);

 private:
  friend struct RoaringSetOps;  // every private operation (lib/structures/roaring/roaring.cpp)
  // This process's state of the set, shared by every handle to it: its reader slot, the
  // snapshot views, the validated header; null for a default-constructed handle.
  std::shared_ptr<internal::roaring::RoaringLocal> local_;
};

}  // namespace shmfilter
