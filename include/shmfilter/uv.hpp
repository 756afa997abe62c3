// shmfilter/uv.hpp: distinct counts (UV) for every space and every day bucket, in ONE
// structure: "how many distinct devices did plan P reach today / over the last 7 days?"
// for thousands of plans, with no directory entry per plan (docs/uv.md).
//
// A family keeps `retention` day buckets (bucket_seconds long, starting at local midnight
// `utc_offset`, rotated by the clock like a Window). In each bucket every space has its
// own sketch, whose representation follows its size:
//   exact   the low 48 bits of its items' hashes, up to `exact_max` distinct items (default
//           1,000): count() is exact (up to 48-bit hash collisions, ~n^2/2^49: 1.8e-9 at 1,000);
//   sparse  the same registers as dense, Rice-coded (mid-size spaces: 1.5-6 KiB);
//   dense   Redis-compatible HyperLogLog registers (p = 14, 16,384 registers) in 4 bits
//           each with a per-word base: 35 pages of 256 bytes, standard error 1.04/sqrt(16384) = 0.81%.
// Every sketch lives in 256-byte pages of its bucket, so a page a sketch leaves serves any
// other sketch: memory follows the live sketches (docs/uv.md "Memory").
// Hashes and registers are Redis's (MurmurHash64A, seed 0xadc83b19, p = 14), so a space's
// sketch exports as a Redis HLL string (export_redis) whose PFCOUNT equals count_hll().
// count(space, w) is the count of the UNION of the space's last w buckets (not a sum);
// count_all(w) counts every item of every space over the last w buckets.
//
// Concurrency: a dense or sparse add is lock-free (a CAS on one register word or buffer
// entry); an exact add, a space's first add of a day, each promotion and each sparse merge
// take that space's own lock word (owner token; a dead owner's lock is taken over), never the
// segment's lock (which only a new chunk or a new bucket takes). A process killed anywhere
// leaves every sketch valid: a promotion is published by one atomic store and the old pages
// are handed out again only once no process can still read them (the segment's reader
// announcements, ReadGuard). Reads never lock and never write.
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

inline constexpr uint32_t kUvMaxRetention = 64;
inline constexpr uint32_t kUvMaxSpaces = 1u << 20;

struct UvOptions {
  uint32_t retention = 7;            // day buckets kept (1..kUvMaxRetention)
  uint64_t bucket_seconds = 86400;   // bucket length (>= 1)
  int64_t utc_offset = 0;            // seconds east of UTC where a bucket starts (UTC+8: 28800)
  uint32_t max_spaces = 16384;       // spaces one bucket can hold (1..kUvMaxSpaces); past it adds answer kSpacesFull
  uint32_t exact_max = 1000;         // a space's sketch stays exact up to this many distinct items (1..2048)
  uint64_t chunk_bytes = 1ull << 20; // sketch pages come from chunks of this size (64 KiB..256 MiB, a multiple of 256; <= 1,024 a bucket)
};

enum class UvStatus : uint8_t {
  kChanged = 0,     // the space's sketch changed (a new item, or a register grew)
  kUnchanged = 1,   // nothing changed (item already counted, or its register held the rank)
  kSpacesFull = 2,  // the bucket's space table is full (max_spaces spaces): nothing stored
  kNoSpace = 3,     // no storage could be allocated in the segment: nothing stored
  kDropped = 4,     // the family was dropped by some process
  kBusy = 5,        // other processes kept the call from finishing within its bound: retry
  kForked = 6,      // a handle inherited across fork(): open the segment again in the child
  kReadOnly = 7,    // a read-only attachment: nothing stored
  kStale = 8,       // the clock names a bucket older than those kept (another process's clock is ahead)
  kCorrupt = 9,     // the family's bytes failed validation on this path: run 'shmtool check'
};
std::string_view uv_status_name(UvStatus s) noexcept;

struct UvSpaceStats {
  uint64_t space = 0;
  uint64_t count = 0;      // count(space, 1) in this bucket
  bool dense = false;      // representation in this bucket
  uint64_t bytes = 0;      // its live block
};

struct UvBucketStats {
  int64_t bucket = 0;       // bucket number
  uint32_t age = 0;         // 0 = current
  uint64_t spaces = 0;      // spaces with a sketch
  uint64_t exact_spaces = 0;
  uint64_t dense_spaces = 0;
  uint64_t sparse_spaces = 0;  // sparse registers (Rice-coded, with an append buffer): mid-size spaces
  uint64_t block_bytes = 0;   // pages of live sketches (head + data pages) x 256
  uint64_t retired_bytes = 0; // pages of replaced sketches not yet handed out again (x 256)
  uint64_t reused = 0;        // retired pages handed out again (no process could still read them)
  uint64_t chunk_bytes = 0;   // chunks allocated
  uint64_t table_bytes = 0;   // the bucket's own extent (space table, all-spaces HLL)
  uint64_t adds = 0;
};

struct UvStats {
  uint32_t retention = 0;
  uint64_t bucket_seconds = 0;
  int64_t utc_offset = 0;
  uint32_t max_spaces = 0;
  uint32_t exact_max = 0;
  uint64_t chunk_bytes = 0;
  int64_t current_bucket = 0;   // bucket_of(now())
  uint64_t rotations = 0, promotions = 0, spaces_full = 0, no_space = 0, stale = 0;
  uint64_t memory_bytes = 0;    // region + every bucket's extent + chunks
  std::vector<UvBucketStats> buckets;  // kept buckets, current first
};

class UvFamily : public internal::RegionHandle {
 public:
  // Control plane (throws Error): bad options throw kInvalidArgument, segment unchanged.
  static UvFamily create(Segment& seg, std::string_view name, const UvOptions& opts = {});
  // Throws kNotFound, kWrongKind, kCorrupt.
  static UvFamily open(Segment& seg, std::string_view name);
  static UvFamily open_or_create(Segment& seg, std::string_view name, const UvOptions& opts = {});
  // Control plane: frees every bucket and chunk; false if absent.
  static bool drop(Segment& seg, std::string_view name);

  UvFamily() = default;

  // Clock of this handle (default: the system clock), as Window's.
  void set_clock(int64_t (*fn)(void* ctx), void* ctx) noexcept;
  void set_now(int64_t unix_seconds) noexcept;
  void use_system_clock() noexcept;
  int64_t now() const noexcept;
  int64_t bucket_of(int64_t unix_seconds) const noexcept;

  // Data plane, any process/thread: counts ITEM for SPACE in the current bucket.
  UvStatus add(uint64_t space, std::string_view item) noexcept;
  UvStatus add(uint64_t space, uint64_t item) noexcept;  // hashed as its 8 little-endian bytes (Hll::add's rule)
  // Items of equal length; returns how many answered kChanged (out, if not empty, gets each answer).
  uint64_t add_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items,
                    std::span<UvStatus> out = {}) noexcept;

  // Lock-free reads over the last w buckets (1..retention; the current bucket is 1).
  // count: distinct items of SPACE in the union of the w buckets: exact while every bucket's
  // sketch of it is exact, else the HLL estimate of the union (= count_hll). Throws
  // kInvalidArgument (w out of range, never clamped) / kDropped.
  uint64_t count(uint64_t space, uint32_t w = 1) const;
  // The HLL estimate of the union, always: what Redis's PFCOUNT answers for export_redis().
  uint64_t count_hll(uint64_t space, uint32_t w = 1) const;
  // Distinct items over every space in the last w buckets (an HLL per bucket: estimate).
  uint64_t count_all(uint32_t w = 1) const;
  // The union's registers as Redis's dense HLL string (SET it; PFCOUNT/PFMERGE it).
  std::string export_redis(uint64_t space, uint32_t w = 1) const;
  std::string export_redis_all(uint32_t w = 1) const;
  // One bucket, `age` buckets ago (0..retention-1; 0 = current): its count and Redis string
  // (what `shmtool uv push` sends per space and day). Throws kInvalidArgument / kDropped.
  uint64_t count_at(uint64_t space, uint32_t age) const;
  std::string export_redis_at(uint64_t space, uint32_t age) const;
  // Spaces with a sketch in any of the last w buckets (sorted).
  std::vector<uint64_t> spaces(uint32_t w = 1) const;
  // The bucket `age` buckets ago (0 = current) by the clock.
  int64_t bucket_at(uint32_t age) const noexcept;

  UvStats stats() const;  // lock-free snapshot; throws kDropped
  uint32_t retention() const noexcept { return retention_; }

 private:
  friend struct UvOps;
  std::byte* base_ = nullptr;      // seg_.base()
  uint64_t offset_ = 0;            // the region's offset
  uint32_t retention_ = 0;         // validated copy of the header's
  uint64_t bucket_seconds_ = 0;    // idem
  int64_t utc_offset_ = 0;         // idem
  int64_t (*clock_)(void*) = nullptr;  // set_clock()'s function (nullptr: the system clock)
  void* clock_ctx_ = nullptr;          // its ctx
  int64_t fixed_now_ = 0;              // set_now()'s time
  bool fixed_ = false;                 // set_now() pinned the clock
};

}  // namespace shmfilter
