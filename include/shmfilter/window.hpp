// shmfilter/window.hpp: membership of (space, item) pairs over time buckets,
// in ONE structure: frequency capping for thousands of plans and a sliding
// window of day buckets (docs/window.md).
//
// A key is a pair: `space` (a plan id) and `item` (a device id, string or
// uint64). Memory follows the total number of distinct pairs: there is no
// per-space reservation. Time is cut into buckets of `bucket_seconds`
// starting at local midnight (`utc_offset`); the window keeps `retention`
// buckets. A query names its window: the last w buckets, w = 1 (the current
// bucket only) ... retention.
//
// Rotation happens by the clock on whichever call first sees the new bucket:
// one compare-and-swap on a bucket tag (one process wins, the others carry
// on without waiting), into a spare table that maintain() prepared ahead (a
// freshly allocated, zeroed extent). The expired bucket's memory is freed by
// the next maintain(); no data-plane call clears a table. Without any
// maintain() call the first caller to need a table allocates it itself
// (docs/window.md says what that costs).
//
// Variants: kBloom (insert-only, least memory: one blocked-Bloom table per
// bucket), kCuckoo (deletable: one cuckoo table per bucket; forget()) and
// kStamped (deletable, every bucket in one place: ONE cuckoo table whose 16-bit
// lanes carry the pair's fingerprint and the bucket it was last marked in, so
// a query over w buckets reads the pair's two bucket words whatever w is; a
// pair marked on several days holds one lane; frequency caps with
// mark_if_under; retention <= 12; docs/window.md "The stamped variant").
// Sizing: expected distinct pairs per bucket and an error rate for the window
// `error_window` (default: retention). The one-bucket rate is then
// p1 = 1 - (1 - p)^(1/w) (about p / w). A bucket that receives more than its
// capacity grows overflow layers (p1 is split 2/3 main, 1/3 all the layers
// together; docs/window.md "Overload"), so the FP of one bucket stays <= p1 up
// to at least 8x its capacity and the bucket keeps accepting past that (kCuckoo
// answers kFull only when the segment cannot give another layer); stats()
// shows, per bucket, distinct pairs, capacity, layers, bytes, FP now and
// over-capacity beyond what the sizing holds. maintain() sizes the next bucket
// from the measured distinct counts of the buckets in the window: 1.5 x the
// count of each bucket above expected (no more than its table if it fit), else
// expected, so the size falls back once the big days left the window.
//
// mark_if_unseen answers kNew or kSeen in one call. kCuckoo: exactly one of
// racing callers with the same pair gets kNew (insert_unique under the
// bucket table's writer lock), also when a rotation falls between them and
// their windows overlap: an older bucket's table is sealed (takes no more
// inserts; an insert there is redone in the newer bucket) before a caller of
// a newer bucket trusts its check of it (docs/window.md "Answers and race
// bounds"; stats().rotation_races stays 0). kBloom: kNew iff this call set at
// least one bit; two callers racing on one new pair may BOTH get kNew;
// stats().racing_marks counts such answers (an upper bound on the double
// counts). Per-space "new" counters count kNew answers exactly.
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

enum class WindowVariant : uint32_t { kBloom = 0, kCuckoo = 1, kStamped = 2 };
std::string_view window_variant_name(WindowVariant v) noexcept;  // "bloom" / "cuckoo" / "stamped"

inline constexpr uint32_t kWindowMaxRetention = 64;       // buckets a window can keep
inline constexpr uint32_t kWindowMaxSpaces = 1u << 20;    // per-space counter rows at most

struct WindowOptions {
  // The default, kStamped, keeps at most 12 buckets at >= 0.2% false positives; longer windows
  // or lower rates: kBloom (insert-only) or kCuckoo (deletable), a table per bucket.
  WindowVariant variant = WindowVariant::kStamped;
  uint64_t expected_per_bucket = 0;  // distinct pairs a bucket must hold at `error` (>= 1)
  double error = 0.01;               // false-positive rate of a query over `error_window` buckets, in (0, 1)
  uint32_t error_window = 0;         // the w the error is for; 0 = retention (the widest window)
  uint64_t bucket_seconds = 86400;   // bucket length (>= 1)
  int64_t utc_offset = 0;            // seconds east of UTC where a bucket starts at local midnight (UTC+8: 28800)
  uint32_t retention = 7;            // buckets kept (1..kWindowMaxRetention)
  uint32_t max_spaces = 8192;        // spaces with their own counters (1..kWindowMaxSpaces); past it: one "other" row
  std::optional<uint64_t> seed;      // XXH3 seed; default random (tests pin it)
  std::optional<int64_t> now;        // Unix time create prepares the first two buckets for (the current one and
                                     // its spare); default the system clock. Pass the clock you will inject.
};

// What a window of these options costs (no segment needed).
struct WindowSizing {
  double one_bucket_error = 0;    // p1 = 1 - (1 - p)^(1 / error_window)
  double main_error = 0;          // p1 * 2/3: the main table's rate at capacity
  double overflow_error = 0;      // p1 * 1/3: the overflow layers' rates together (layer i: p1/3 x 2^-i)
  uint64_t table_bytes = 0;       // one bucket's main table (with its counters)
  double bits_per_pair = 0;       // main table bits / capacity
  uint32_t k = 0;                 // kBloom: probes; kCuckoo: fingerprint bits
  uint64_t region_bytes = 0;      // header + slot table + space keys
  uint64_t full_window_bytes = 0; // region + (retention + 1) tables: all buckets and the spare (kStamped: + the shared table)
  uint64_t shared_bytes = 0;      // kStamped: the one table every bucket shares (tables above: counters only)
};

enum class WindowStatus : uint8_t {
  kNew = 0,          // mark / mark_if_unseen: the pair was not in the window; it is now (acknowledged)
  kSeen = 1,         // already there (or a false positive); nothing stored by mark_if_unseen
  kRemoved = 2,      // forget: removed from at least one bucket
  kAbsent = 3,       // forget: in no bucket of the window
  kFull = 4,         // kCuckoo: the bucket table and its overflow sub-filters are full and the segment could
                     // not give another (out of space); nothing stored
  kUnsupported = 5,  // forget on the insert-only kBloom variant
  kDropped = 6,      // the window was dropped by some process: open the new one of that name, if any
  kNoSpace = 7,      // a bucket table could not be allocated (the segment is out of space): nothing stored
  kBusy = 8,         // the buckets rotated in faster than the call could write (kCuckoo: 16 rotations during
                     // one call, each refusing its insert; or the clock kept naming newer buckets): retry
  kForked = 9,       // (writes that take a lock or allocate) a handle inherited across fork(): open the segment
                     // and the window again in the child; nothing stored
  kInvalidArgument = 10,  // w outside 0..retention (never clamped): nothing read or stored
  kCorrupt = 11,     // (a write that had to prepare a bucket table) the window's bytes fail validation: nothing
                     // stored; run `shmtool check`, then drop and recreate the window
  kCapped = 12,      // mark_if_under: the pair already has `cap` marks in the window; nothing stored
};
// The w of a query that means "every bucket kept" (retention); any other w must be 1..retention.
inline constexpr uint32_t kWholeWindow = 0;
std::string_view window_status_name(WindowStatus s) noexcept;

struct WindowBucketStats {
  int64_t bucket = 0;           // bucket number: floor((unix + utc_offset) / bucket_seconds)
  uint32_t age = 0;             // 0 = current
  uint64_t distinct = 0;        // kNew answers in this bucket (exact for kCuckoo; kBloom: see top)
  uint64_t capacity = 0;        // main table's capacity
  bool overflow = false;        // the overflow table is in use
  double fp_rate_now = 0;       // model FP of this bucket at its load now
  double fp_bound = 0;          // what the sizing guarantees at this load (p1 up to 2x capacity)
  bool over_capacity = false;   // beyond the load the sizing holds its bound to (8x capacity in a layered table, 2x
                                // in an older build's), or a layer could not be allocated: fp_rate_now is the rate
  uint64_t bytes = 0;           // every extent of this bucket: its table and all its overflow layers
  uint32_t layers = 0;          // overflow layers / sub-filters in use beyond the main table (0: none)
};

struct WindowStats {
  WindowVariant variant = WindowVariant::kBloom;
  uint32_t retention = 0;
  uint64_t bucket_seconds = 0;
  int64_t utc_offset = 0;
  uint64_t expected_per_bucket = 0;
  double error = 0;
  uint32_t error_window = 0;
  double one_bucket_error = 0;
  int64_t current_bucket = 0;    // -1 before the first call
  uint32_t max_spaces = 0;
  uint32_t spaces = 0;           // spaces with their own row
  uint64_t other_marks = 0;      // kNew answers counted in the "other" row (spaces past max_spaces), all buckets
  uint64_t rotations = 0;
  uint64_t racing_marks = 0;     // kBloom: kNew answers that lost a race on one of their bits
  uint64_t rotation_races = 0;   // kept for compatibility: 0 (kCuckoo tables are sealed, so no two racing callers
                                 // get kNew across a rotation; a segment written by an older build may hold its count)
  uint64_t inline_allocations = 0;  // tables the data plane had to allocate (no maintain() in time)
  uint64_t overflow_failures = 0;   // overflow tables that could not be allocated
  uint64_t forget_ambiguous = 0;    // kCuckoo: copies forget removed that may belong to another pair (an upper
                                    // bound on the other pairs' marks lost to forgets; 0 on the mark_if_unseen path)
  uint64_t memory_bytes = 0;     // region + every live table extent
  uint64_t lanes = 0;            // kStamped: lanes the shared table holds (one per pair, one per cap tally;
                                 // dead ones until a sweep or an insert reclaims them)
  int64_t swept_bucket = 0;      // kStamped: the bucket the last complete sweep of dead lanes began at (0: none)
  uint64_t shared_bytes = 0;     // kStamped: the shared table's bytes, its sub-filters included (in memory_bytes)
  uint64_t seed = 0;
  std::vector<WindowBucketStats> buckets;  // current first, retention entries (empty buckets have distinct 0)
  // FP of a query over w buckets from the buckets' rates now: 1 - prod(1 - fp_i), i < w.
  double window_fp_now(uint32_t w) const noexcept;
  double window_fp_bound(uint32_t w) const noexcept;
};

namespace internal::window {
// The immutable geometry of a window region, range-checked and copied into the handle at open
// (lib/structures/window/window_control.cpp). The data plane and rotation divide, take moduli,
// index arrays and bound loops by these copies, never by header words re-read from the segment,
// so bytes changed after open cannot turn into a division by zero or an index past an array
// (docs/window.md "Validation").
struct Geometry {
  uint64_t bucket_seconds = 1;  // >= 1, <= 2^40
  int64_t utc_offset = 0;       // |utc_offset| < 2^40
  uint64_t seed = 0;
  uint64_t expected = 1;        // >= 1
  uint64_t main_offset = 0;     // bytes of a table before its main part (TableHead + counters)
  uint64_t keys_offset = 0;     // bytes from the header to the space keys (header + slot ring)
  uint64_t data_lo = 0;         // a table offset is >= this (the segment's data area + an extent header)
  uint64_t map_limit = 0;       // ... and its bytes end below this (this attachment's mapping)
  uint64_t table_span = 0;      // a table offset o is usable when o - data_lo <= table_span (its head, counters
                                // and, kCuckoo, its cuckoo header end inside the mapping) and 64-aligned
  uint64_t shared = 0;          // kStamped: offset of the one table every bucket shares (validated at open)
  uint32_t variant = 0;         // kVariantBloom / kVariantCuckoo / kVariantStamped
  uint32_t retention = 1;       // 1..kMaxRetention
  uint32_t slots = 2;           // retention + 1
  uint32_t max_spaces = 1;      // 1..kMaxSpaces
  uint32_t space_table = 2;     // power of two >= 2 x max_spaces
  uint32_t k_main = 1;          // kBloom: 1..kMaxK probes; kCuckoo: 8 / 12 / 16 fingerprint bits
  uint32_t k_overflow = 1;      // kBloom: 1..kMaxK
  uint32_t reserved = 0;
};
}  // namespace internal::window

class Window : public internal::RegionHandle {
 public:
  // Control plane (throws Error): validates options, sizes, creates the region
  // and the first bucket's table. Bad options throw kInvalidArgument and leave
  // the segment unchanged.
  static Window create(Segment& seg, std::string_view name, const WindowOptions& opts);
  // The same with an injected clock: the first buckets are those of clock(ctx) (not the system
  // clock's), and the handle returned reads that clock (set_clock).
  static Window create(Segment& seg, std::string_view name, const WindowOptions& opts, int64_t (*clock)(void* ctx),
                       void* ctx);
  // Control plane (throws kNotFound, kWrongKind, kCorrupt).
  static Window open(Segment& seg, std::string_view name);
  // Control plane, takes the segment lock: frees every table; false if absent.
  static bool drop(Segment& seg, std::string_view name);
  // Pure: sizing for these options (throws kInvalidArgument).
  static WindowSizing plan(const WindowOptions& opts);

  Window() = default;

  // Clock (this handle only; default: the system clock). Tests and shmtool
  // --now inject one. fn returns Unix seconds.
  void set_clock(int64_t (*fn)(void* ctx), void* ctx) noexcept;
  void set_now(int64_t unix_seconds) noexcept;  // a fixed clock
  void use_system_clock() noexcept;
  int64_t now() const noexcept;
  // The bucket number `unix_seconds` falls in.
  int64_t bucket_of(int64_t unix_seconds) const noexcept;

  // Data plane, any process/thread. Rotation happens inside whichever call first
  // sees a new bucket. mark: adds the pair to the current bucket (kNew / kSeen).
  WindowStatus mark(uint64_t space, std::string_view item) noexcept;
  WindowStatus mark(uint64_t space, uint64_t item) noexcept;
  // Lock-free reads: is the pair in any of the last w buckets (1 <= w <= retention, or
  // kWholeWindow)? False when dropped, and for w > retention: such a w is rejected, never
  // clamped (mark_if_unseen answers it kInvalidArgument; the C API -SHMF_EINVAL).
  bool seen(uint64_t space, std::string_view item, uint32_t w = 1) const noexcept;
  bool seen(uint64_t space, uint64_t item, uint32_t w = 1) const noexcept;
  // kSeen if the pair is in the last w buckets, else marks it and answers kNew.
  // w > retention: kInvalidArgument.
  WindowStatus mark_if_unseen(uint64_t space, std::string_view item, uint32_t w = kWholeWindow) noexcept;
  WindowStatus mark_if_unseen(uint64_t space, uint64_t item, uint32_t w = kWholeWindow) noexcept;
  // kCuckoo: removes the pair's own copies from the window (kRemoved / kAbsent); afterwards
  // the pair answers unseen except for a false positive. A cuckoo table cannot tell a pair's
  // copy from a collider's (another pair with the same fingerprint in the same two buckets),
  // so forget erases in the oldest bucket where the pair is present and in newer buckets
  // only where some insert skipped the older buckets (mark, mark_if_unseen with w <
  // retention); a newer bucket all of whose inserts were mark_if_unseen over the whole
  // window cannot hold a second copy of the pair, so a present answer there is another
  // pair's mark and is left alone. Other pairs' acknowledged marks therefore survive a
  // forget on the mark_if_unseen(w = retention) path; elsewhere stats().forget_ambiguous
  // counts the erasures that may have removed another pair's copy (an upper bound on such
  // losses). Either way forget only pairs that were marked with a kNew answer: forgetting a
  // pair that never got one removes the colliding pair's copy (probability <= the FP rate).
  // kStamped: clears the pair's lane when no other live lane has its fingerprint in its buckets;
  // else it leaves them (the pair keeps answering seen, as a false positive; forget_ambiguous
  // counts it): another pair's acknowledged mark is never removed. Cap tallies stay counted.
  // kBloom: kUnsupported. docs/window.md "forget" has the argument.
  WindowStatus forget(uint64_t space, std::string_view item) noexcept;
  WindowStatus forget(uint64_t space, uint64_t item) noexcept;

  // Frequency cap (kStamped): kNew when the pair has fewer than `cap` marks of this call in the
  // last w buckets (w = 0: retention), and counts this one; kCapped when it has `cap` (nothing
  // stored). Exact up to the table's false-positive rate, over a sliding window of w buckets:
  // each allowed call is a tally with its own bucket stamp, and the count, the decision and the
  // store happen under the table's writer lock, so racing callers in any processes never
  // together get more than `cap` kNew answers in a window. The pair is marked (seen() answers
  // true) by an allowed call. cap 1..15; kInvalidArgument outside it or for w > retention;
  // kUnsupported on kBloom / kCuckoo. A space should use one w for its caps (a tally counts in
  // every window it lies in).
  WindowStatus mark_if_under(uint64_t space, std::string_view item, uint32_t cap, uint32_t w = 1) noexcept;
  WindowStatus mark_if_under(uint64_t space, uint64_t item, uint32_t cap, uint32_t w = 1) noexcept;

  // Batches with software prefetch (spaces and items of equal length; out, if
  // not empty, gets one answer per pair). Return: pairs answered kNew / seen / kRemoved.
  // A w > retention: every answer kInvalidArgument (seen_many: 0), nothing read or stored.
  // Items are uint64 or strings (std::string_view, e.g. 16-hex device ids): pair i answers
  // what the single-key call with spaces[i], items[i] of the same type answers (a string
  // item and a uint64 item are different items). Unequal lengths: the first
  // min(spaces.size(), items.size()) pairs are answered; out must hold at least that many.
  uint64_t mark_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items,
                     std::span<WindowStatus> out = {}) noexcept;
  uint64_t mark_many(std::span<const uint64_t> spaces, std::span<const std::string_view> items,
                     std::span<WindowStatus> out = {}) noexcept;
  uint64_t mark_if_unseen_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items, uint32_t w,
                               std::span<WindowStatus> out = {}) noexcept;
  uint64_t mark_if_unseen_many(std::span<const uint64_t> spaces, std::span<const std::string_view> items, uint32_t w,
                               std::span<WindowStatus> out = {}) noexcept;
  uint64_t seen_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items, uint32_t w,
                     std::span<uint8_t> out = {}) const noexcept;
  uint64_t seen_many(std::span<const uint64_t> spaces, std::span<const std::string_view> items, uint32_t w,
                     std::span<uint8_t> out = {}) const noexcept;
  uint64_t forget_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items,
                       std::span<WindowStatus> out = {}) noexcept;
  uint64_t forget_many(std::span<const uint64_t> spaces, std::span<const std::string_view> items,
                       std::span<WindowStatus> out = {}) noexcept;

  // Lock-free: kNew answers for `space` in the bucket `age` buckets ago (0 = current):
  // "distinct devices served by plan P today". Spaces past max_spaces share one row.
  uint64_t new_count(uint64_t space, uint32_t age = 0) const noexcept;

  // Control plane, takes the segment lock: rotates by the clock if due, frees the
  // tables of expired buckets, and prepares the next bucket's table sized from the
  // measured distinct counts (see the top). Call it from a housekeeping thread (any period
  // well under bucket_seconds). Throws Error (kNoSpace, kDropped, kForked).
  void maintain();
  // Control plane, a bounded part of maintain(): retires expired buckets, starts the
  // current and next bucket's spare tables, then zeroes and pre-faults at most max_bytes
  // of them (in chunks of 4 MiB, each its own hold of the segment lock), and rotates if
  // that is one CAS. Returns true when both tables are ready. A housekeeper calls it
  // often with a small budget so the next bucket's spare is ready well before the
  // boundary and no call does unbounded work; maintain() = steps until ready. A step
  // killed anywhere leaves a spare that the next step or the first writer to need it
  // finishes. Throws Error (kNoSpace, kDropped, kForked).
  bool maintain_step(uint64_t max_bytes);
  // Lock-free snapshot. Throws kDropped.
  WindowStats stats() const;
  // valid(), name(): from RegionHandle (lock-free; false once some process dropped it).

 private:
  friend struct WindowOps;
  // The batched calls' one body for both item types (Item: uint64_t or std::string_view;
  // defined and instantiated in lib/structures/window/window.cpp only).
  template <class Item>
  uint64_t mark_many_of(std::span<const uint64_t> spaces, std::span<const Item> items,
                        std::span<WindowStatus> out) noexcept;
  template <class Item>
  uint64_t mark_if_unseen_many_of(std::span<const uint64_t> spaces, std::span<const Item> items, uint32_t w,
                                  std::span<WindowStatus> out) noexcept;
  template <class Item>
  uint64_t seen_many_of(std::span<const uint64_t> spaces, std::span<const Item> items, uint32_t w,
                        std::span<uint8_t> out) const noexcept;
  template <class Item>
  uint64_t forget_many_of(std::span<const uint64_t> spaces, std::span<const Item> items,
                          std::span<WindowStatus> out) noexcept;
  std::byte* base_ = nullptr;  // seg_.base(): tables are addressed from it
  uint64_t offset_ = 0;        // the region's offset (region_ == base_ + offset_)
  int64_t (*clock_)(void*) = nullptr;  // set_clock()'s function (nullptr: the system clock)
  void* clock_ctx_ = nullptr;          // its ctx
  int64_t fixed_now_ = 0;              // set_now()'s time, every call's "now" while fixed_
  bool fixed_ = false;                 // set_now() pinned the clock to fixed_now_
  internal::window::Geometry g_;  // validated at open: what every path divides and indexes by
  mutable uint32_t ops_ = 0;  // handle-local op counter (periodic quiescent points)
  mutable uint64_t prefault_table_ = 0;  // the ready spare this process is mapping ahead (its offset)
  mutable uint64_t prefault_done_ = 0;   // bytes of it mapped so far
};

}  // namespace shmfilter
