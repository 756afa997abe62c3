// shmfilter/cuckoo.hpp: a cuckoo filter in a shared segment: membership with
// deletion, lock-free readers, crash-safe writers.
//
// Buckets of 4 fingerprints (8, 12 or 16 bits), partial-key cuckoo hashing
// (Fan et al., CoNEXT 2014), breadth-first path search of <= 5 moves
// (libcuckoo) so inserts do not fail below ~95% load. Readers never lock
// (per-stripe seqlock, MemC3); writers serialise on one writer lock per filter
// that stores an owner token; a writer killed anywhere is repaired by whoever
// waits for it. See docs/cuckoo.md.
//
// False positives: about 2b/2^f at full load (b = 4): 3.1% for f = 8,
// 0.20% for f = 12, 0.012% for f = 16. Erasing a key that was never inserted
// may remove another key's matching fingerprint (a false-positive match) and
// so create a false negative for that key: erase only what you inserted.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "shmfilter/region_handle.hpp"
#include "shmfilter/segment.hpp"

namespace shmfilter {

namespace internal::cuckoo {
struct Header;
}

struct CuckooOptions {
  uint64_t capacity = 0;          // items the filter must hold at <= 95% load (>= 1)
  uint32_t fingerprint_bits = 0;  // 8, 12 or 16; 0: derive from `error`
  double error = 0.0;             // target FP rate in (0, 1): f = ceil(log2(8/p)) rounded up to 8/12/16
  uint32_t expansion = 0;         // 0: no growth, a full add returns kFull; k >= 2: add a sub-filter k x larger
  uint32_t max_subfilters = 8;    // sub-filters allowed with expansion (1..16)
  uint32_t max_path = 5;          // longest cuckoo path (moves) an insert may use (1..6)
  uint64_t seed = 0;              // hash seed; 0: random (tests pass one for reproducible FP counts)
};

enum class CuckooStatus : uint8_t {
  kInserted = 0,  // stored (acknowledged: survives the death of any process)
  kExists = 1,    // insert_unique: already present (or a false-positive match), nothing stored
  kFull = 2,      // no path of <= max_path moves and no expansion left; nothing stored
  kDropped = 3,   // the filter was dropped by some process; nothing touched
  kForked = 4,    // this handle was inherited across fork(): open the segment and the filter in the child; nothing touched
  kNoSpace = 5,   // no path of <= max_path moves, and the next sub-filter could not be allocated (segment out
                  // of space); nothing stored
  kReadOnly = 6,  // the segment was opened read-only (OpenOptions::read_only); nothing touched
};
std::string_view cuckoo_status_name(CuckooStatus s) noexcept;

struct CuckooStats {
  uint64_t capacity = 0;          // as created
  uint32_t fingerprint_bits = 0;
  uint32_t lane_bits = 0;         // bits a slot occupies (8 or 16; 12: packed, layout 3)
  double target_error = 0.0;      // as created (0 if bits were given)
  uint64_t slots = 0;             // all sub-filters
  uint64_t size = 0;              // items stored
  double load_factor = 0.0;       // size / slots
  double bits_per_item = 0.0;     // bucket bits / size (0 when empty)
  double bits_per_item_at_95 = 0.0;  // lane_bits / 0.95: the cost per item of a filter filled to 95%
  double fp_rate_bound = 0.0;     // 2b/2^f x sub-filters: the rate when every sub-filter is full
  double fp_rate_estimate = 0.0;  // sum over sub-filters of 1 - (1 - 1/(2^f-1))^(2b x load)
  uint64_t failures = 0;          // inserts answered kFull
  uint64_t longest_path = 0;      // most moves one insert used
  uint64_t moves = 0;
  uint64_t inserts = 0;
  uint64_t erases = 0;
  uint64_t repairs = 0;           // dead writers' locks taken over
  uint64_t expansions = 0;
  uint32_t subfilters = 0;
  uint32_t max_path = 0;
  uint32_t expansion = 0;
  uint64_t bytes = 0;             // region + sub-filter extents
};

// Thin copyable handle. Data-plane calls are noexcept and safe from any
// thread of any attached process.
class Cuckoo : public internal::RegionHandle {
 public:
  // Control plane, takes the segment lock. Throws Error (kInvalidArgument, kExists, kNoSpace...).
  static Cuckoo create(Segment& seg, std::string_view name, const CuckooOptions& opts);
  // Lock-free directory lookup + header validation. Throws kNotFound / kWrongKind / kCorrupt.
  static Cuckoo open(Segment& seg, std::string_view name);
  // Control plane: unpublishes the filter and frees its sub-filter extents. False if absent.
  static bool drop(Segment& seg, std::string_view name);

  Cuckoo() = default;

  // Writer: takes the filter's writer lock (dead holders are taken over). Duplicates allowed (CF.ADD).
  // The C API's shmf_cuckoo_add; every structure names this operation add (docs/NAMING.md).
  CuckooStatus add(std::string_view key) noexcept;
  CuckooStatus add(uint64_t key) noexcept;
  // The former name of add(), kept for existing callers.
  [[deprecated("use Cuckoo::add (docs/NAMING.md)")]] CuckooStatus insert(std::string_view key) noexcept {
    return add(key);
  }
  [[deprecated("use Cuckoo::add (docs/NAMING.md)")]] CuckooStatus insert(uint64_t key) noexcept { return add(key); }
  // Writer: atomic test-and-insert under the writer lock: of racing callers with one key exactly one gets kInserted.
  CuckooStatus insert_unique(std::string_view key) noexcept;
  CuckooStatus insert_unique(uint64_t key) noexcept;
  // Writer: inserts each key (add or insert_unique); out (if not empty) gets each status. Returns kInserted count.
  uint64_t add_many(std::span<const uint64_t> keys, std::span<CuckooStatus> out = {}, bool unique = false) noexcept;
  uint64_t add_many(std::span<const std::string_view> keys, std::span<CuckooStatus> out = {},
                    bool unique = false) noexcept;
  // Lock-free reader (seqlock; retries while a move is in flight). False once dropped.
  bool contains(std::string_view key) const noexcept;
  bool contains(uint64_t key) const noexcept;
  // Lock-free reader, batched with prefetch: out[i] = contains(keys[i]) for i < min(keys, out) sizes.
  // Returns how many are present (0, and out all 0, once dropped).
  uint64_t contains_many(std::span<const uint64_t> keys, std::span<uint8_t> out) const noexcept;
  uint64_t contains_many(std::span<const std::string_view> keys, std::span<uint8_t> out) const noexcept;
  // Writer: removes ONE copy. Never-inserted keys may remove another key's fingerprint (see top).
  bool erase(std::string_view key) noexcept;
  bool erase(uint64_t key) noexcept;
  // Lock-free reader: copies of the key's fingerprint in its buckets (duplicates and FP matches included).
  uint32_t count(std::string_view key) const noexcept;
  uint32_t count(uint64_t key) const noexcept;
  // Lock-free, racy snapshot of the size counter (exact when no writer is mid-insert).
  uint64_t size() const noexcept;
  double load_factor() const noexcept;
  // Lock-free, racy snapshot of the header counters.
  CuckooStats stats() const;
  // valid(), name(): from RegionHandle (lock-free; false once some process dropped it).

 private:
  template <class LT>
  friend struct CuckooOps;
  std::byte* base_ = nullptr;                 // seg_.base(): the kernels address sub-filters from it
  internal::cuckoo::Header* hdr_ = nullptr;   // region_ as the filter's header
  uint32_t lane_bits_ = 16;                   // hdr_->lane_bits, validated at open: 8, 12 or 16
};

}  // namespace shmfilter
