// lib/structures/window/window_ops.h: what the parts of the Window share (internal; only
// lib/structures/window/window*.cpp include it): the slot-ring helpers over the layout of
// window_impl.h and the declaration of WindowOps, the friend of Window that holds
// the implementation. The parts:
//   window.cpp           the data plane: mark / seen / mark_if_unseen / forget and
//                        their batched forms, the writer's current table, the clock
//   window_rotation.cpp  rotation and tables: bucket claim, spare preparation,
//                        retire (maintain), table allocation, overflow growth
//   window_control.cpp   create / open / drop / plan / stats / validation / check_window
// The protocol summary is at the top of window_rotation.cpp; docs/window.md has the
// design and docs/CONCURRENCY.md "Window" the table of who writes what.
#pragma once

#include <time.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/hash.h"
#include "base/kill_point.h"
#include "segment/extents.h"
#include "segment/layout.h"
#include "shmfilter/window.hpp"
#include "structures/region_handle.h"
#include "structures/window/stamped_impl.h"
#include "structures/window/window_impl.h"

namespace shmfilter {

namespace wi = internal::window;
namespace ck = internal::cuckoo;
namespace bl = internal::bloom;
using wi::BucketSlot;
using wi::TableHead;
using wi::WindowHeader;

namespace internal::window_ops {


// Data-plane calls between quiescent points (getpid() is a syscall). This build's reclaimer reads
// the calls' announcements instead (docs/CONCURRENCY.md); the quiescent points serve a reclaimer
// of an older build sharing the segment, and pace map_spare_ahead.
constexpr uint32_t kQuiesceEvery = 256;
constexpr size_t kBatch = 16;            // pairs in flight per prefetch round
constexpr uint32_t kMaxPath = 5;
constexpr uint64_t kPrepareChunk = 4ull << 20;  // bytes a spare's preparation zeroes per lock hold (~1 ms)
constexpr uint64_t kMapAhead = 1ull << 20;       // bytes of the next spare a process maps per quiescent point
// kCuckoo: an insert refused because its bucket is sealed (a newer bucket exists) is redone in
// the newer bucket; each refusal means a rotation happened during the call, so this bound is
// reached only if kMaxSealRetries buckets rotate in during one call (the call answers kBusy).
constexpr int kMaxSealRetries = 16;
// Internal answer of mark_in (never returned to a caller): refused, redo at the current bucket.
constexpr WindowStatus kRetryNewer = static_cast<WindowStatus>(0xff);

inline int64_t system_now() noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);  // vDSO, ~10 ns; a bucket is seconds long
  return ts.tv_sec;
}

inline WindowHeader* header_at(std::byte* base, uint64_t off) { return reinterpret_cast<WindowHeader*>(base + off); }
inline uint64_t* as_u64(std::atomic<uint64_t>* a) {
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t), "atomic<u64> must be a plain u64 in memory");
  return reinterpret_cast<uint64_t*>(a);
}


// One kBloom overflow layer as a query reads it.
struct BloomLayerView {
  const uint64_t* words;
  uint64_t blocks;
  uint32_t k;
};
inline wi::BloomLayerDir* bloom_dir(std::byte* base, const TableHead* t, uint64_t ovf) noexcept {
  return reinterpret_cast<wi::BloomLayerDir*>(base + ovf + t->overflow_geometry * 64);
}
// The published overflow layers 1..n of a kBloom table (0: none, the common case: one relaxed-
// then-acquire load of TableHead.overflow). acquire: the overflow's geometry and the dir's k1
// (written before its publication), then the layer count (pairs with the allocator's release).
// Published offsets are bounds-checked against the mapping first (G.map_limit: a compare each); a
// layer that fails names no lines (the trust rule: open and check validated them, this keeps
// bytes damaged since from turning into a wild read). Probe counts above bl::kMaxK are clamped.
inline bool lines_in_map(const wi::Geometry& g, uint64_t off, uint64_t blocks) noexcept {
  return off >= g.data_lo && off % 64 == 0 && off <= g.map_limit && blocks >= 1 && blocks <= bl::kMaxLayerBlocks &&
         blocks * 64 <= g.map_limit - off;
}
inline uint32_t bloom_layer_views(std::byte* base, const wi::Geometry& g, const TableHead* t, BloomLayerView* out) noexcept {
  const uint64_t off = t->overflow.load(std::memory_order_acquire);
  if (off == 0) return 0;
  const uint64_t ob = t->overflow_geometry;
  // relaxed: kTableLayered is written before the table is reachable and never changes.
  const bool layered = (t->flags.load(std::memory_order_relaxed) & wi::kTableLayered) != 0;
  if (!lines_in_map(g, off, ob) || (layered && g.map_limit - off - ob * 64 < sizeof(wi::BloomLayerDir))) return 0;
  if (!layered) {
    out[0] = BloomLayerView{reinterpret_cast<const uint64_t*>(base + off), ob, g.k_overflow};
    return 1;
  }
  const wi::BloomLayerDir* d = bloom_dir(base, t, off);
  out[0] = BloomLayerView{reinterpret_cast<const uint64_t*>(base + off), ob,
                          static_cast<uint32_t>(std::min<uint64_t>(d->k1, bl::kMaxK))};
  const uint64_t c = std::min<uint64_t>(d->count.load(std::memory_order_acquire), wi::kBloomMaxExtra);
  uint32_t n = 1;
  for (uint64_t j = 0; j < c; ++j)
    if (lines_in_map(g, d->layer[j].offset, d->layer[j].blocks))
      out[n++] = BloomLayerView{reinterpret_cast<const uint64_t*>(base + d->layer[j].offset), d->layer[j].blocks,
                                static_cast<uint32_t>(std::min<uint64_t>(d->layer[j].k, bl::kMaxK))};
  return n;
}
// Bytes of every extent a table owns beyond its main extent (its overflow layers / sub-filters),
// and their number; for stats() (every byte counted) and the tests.
uint64_t layer_bytes_of(std::byte* base, const WindowHeader* h, const TableHead* t, uint32_t* layers = nullptr) noexcept;

// Main-table bytes and geometry for `capacity` (window_rotation.cpp).
uint64_t main_bytes_for(const WindowHeader* h, uint64_t capacity, uint64_t* geometry);
uint64_t table_bytes_for(const WindowHeader* h, uint64_t capacity);
// Main-table bytes of an existing table, from its geometry (cheap: no sizing search).
uint64_t main_bytes_of(const WindowHeader* h, const TableHead* t);
// Allocates and initialises one table (fresh zeroed memory, unreachable until a slot names it).
uint64_t alloc_table(ControlTxn& txn, WindowHeader* h, uint64_t capacity);
// kStamped: the shared table's bytes past its TableHead + counters (cuckoo header and sub-filter
// 0) for `capacity` lanes, and its bucket count; allocation and initialisation (create).
uint64_t shared_main_bytes(uint64_t capacity, uint64_t* buckets);
uint64_t alloc_shared(ControlTxn& txn, WindowHeader* h, uint64_t capacity);
ck::Geometry stamped_sub_geometry(const ck::SubDesc& prev, uint32_t j);
// Allocates a table whose body a chunked preparation zeroes later (prep_cursor > 0).
uint64_t start_table(ControlTxn& txn, WindowHeader* h, uint64_t capacity);
struct WindowExtents;
// Under the lock: frees a table and every overflow layer it owns (published or pending), as
// table_problem lists them, each once; a table that does not validate frees nothing (its
// extents are left to check --repair). IN_PREPARATION: as table_problem's (a retired slot's spare).
void free_table(ControlTxn& txn, const WindowExtents& x, const WindowHeader* h, uint64_t off, bool in_preparation);

// ---- the trust rule (window_control.cpp; docs/window.md "Validation") ----------
// What a window may own, read per slot (validate_window: after the slot, so top covers its table): the segment's data area [data_lo, top),
// the owner word of the window's extents (its directory slot and generation), and its own
// region's extent, which no table may overlap.
struct WindowExtents {
  const Segment* seg = nullptr;  // whose allocator walk must reach every extent (lib/segment/extents.h)
  const std::byte* base = nullptr;
  uint64_t data_lo = 0, top = 0, owner = 0, region_lo = 0, region_hi = 0;
};
WindowExtents extents_of(const Segment& seg, const RegionInfo& r);
// The end of the extent whose payload starts at OFF when it holds BYTES, lies in the data
// area, is allocated, is owned by this window and is not its region; 0 otherwise.
uint64_t owned_extent_end(const WindowExtents& x, uint64_t off, uint64_t bytes);
// "" when the table at OFF is sound: its extent (as above) holds its head, counters and main
// table by its geometry; geometry, capacity and check shift in range; every overflow layer it
// names (kBloom: layer 1 = overflow or pending overflow, a layered table's BloomLayerDir with its
// layers 2.. and its pending one; kCuckoo: every sub-filter descriptor, sub-filters 1.. and the
// pending one) an owned extent of its size, none overlapping another of the table. IN_PREPARATION
// (a spare of a retired slot): a table still being zeroed is allowed (head and geometry only).
// LAYERS (when sound): every such extent beyond the table's own, each once; what free_table
// and drop free and validate_window checks for overlaps with the other tables.
// SHARED: the kStamped window's one shared table (h->shared), validated with its sub-filters.
std::string table_problem(const WindowExtents& x, const WindowHeader* h, uint64_t off, bool in_preparation,
                          std::vector<uint64_t>* layers = nullptr, bool shared = false);
// Every problem of window region R, one line each: the header's parameters, every slot of the
// ring in every state and every table any path follows, and no two of its extents overlap.
// Safe on any bytes. Open, check, stats, maintain, the inline preparer and drop all use it.
void validate_window(const Segment& seg, const RegionInfo& r, std::vector<std::string>& problems);
// validate_window, thrown: kCorrupt naming the first problem.
void require_sound(const Segment& seg, const RegionInfo& r);


inline uint64_t table_distinct(const TableHead* t) noexcept {
  uint64_t s = 0;
  // relaxed: statistics and the sizing input; slightly stale is fine.
  for (uint32_t i = 0; i < wi::kStripes; ++i) s += t->stripes[i].distinct.load(std::memory_order_relaxed);
  return s;
}

// The geometry of a header validated just now (the control plane, under the segment lock or in
// a checker that validated first): what a Window handle captures at open.
wi::Geometry geometry_of(const WindowHeader* h, uint64_t data_lo, uint64_t map_limit) noexcept;
// "" when G holds validate_window's ranges for a region of REGION_BYTES (checked on the copy).
std::string geometry_problem(const wi::Geometry& g, uint64_t region_bytes);

// The table of bucket e, or null (reader protocol, see BucketSlot). The slot comes from G (the
// geometry validated at open); the table offset is a word rotation publishes, so it is
// bounds-checked against the mapping before use (compares only): a claimed slot whose offset
// (or a kBloom table's block count) would reach outside it sets *BAD and answers null.
// The ring slot of bucket e >= 0 (the handle's slots: never 0).
inline uint32_t slot_of(const wi::Geometry& g, int64_t e) noexcept {
  return static_cast<uint32_t>(static_cast<uint64_t>(e) % g.slots);
}
// table_for with the slot given (the slot of e, e >= 0): for a run of buckets, whose slots step
// down by one (WindowOps::tables), one slot_of serves them all.
inline TableHead* table_in(std::byte* base, const wi::Geometry& g, WindowHeader* h, uint32_t slot, int64_t e,
                           bool* bad = nullptr) noexcept {
  BucketSlot& s = wi::slot_table(h)[slot];
  const uint64_t want = static_cast<uint64_t>(e) + 1;
  // seq_cst (includes acquire): the claimed tag makes the table (initialised before the slot
  // named it) visible; and the rotation order (see raise_epoch).
  if (s.tag.load(std::memory_order_seq_cst) != want) return nullptr;
  uint64_t off = std::atomic_ref<uint64_t>(s.table).load(std::memory_order_relaxed);  // relaxed: re-checked below
  std::atomic_thread_fence(std::memory_order_acquire);  // orders the table load before the tag re-check
  if (s.tag.load(std::memory_order_relaxed) != want || off == 0) return nullptr;  // relaxed: after the fence
  // One compare for range and alignment: rotating the low 6 bits to the top makes a misaligned
  // offset huge; one below the data area wraps. Aligned, rel64 = (off - data_lo) / 64.
  const uint64_t rel64 = std::rotr(off - g.data_lo, 6);
  if (rel64 > g.table_span >> 6) [[unlikely]] {
    if (bad) *bad = true;
    return nullptr;
  }
  auto* t = reinterpret_cast<TableHead*>(base + off);
  // kBloom: 1 <= blocks <= the lines the mapping holds past the table's head (the line every
  // kBloom query reads next anyway); blocks - 1 wraps for 0.
  if (g.variant == wi::kVariantBloom && t->geometry - 1 >= (g.table_span >> 6) - rel64) [[unlikely]] {
    if (bad) *bad = true;
    return nullptr;
  }
  return t;
}
inline TableHead* table_for(std::byte* base, const wi::Geometry& g, WindowHeader* h, int64_t e,
                            bool* bad = nullptr) noexcept {
  if (e < 0) return nullptr;
  return table_in(base, g, h, slot_of(g, e), e, bad);
}

// seq_cst (here, in table_for's tag load, in read_epoch / current()'s epoch loads, in the tag
// claims of window_rotation.cpp and in the kCuckoo insert gate's epoch load): the "rotation
// order". A mark_if_unseen of bucket E' that read or raised the epoch to E' + 1 and then found
// an older bucket E's slot unclaimed, and an insert into E whose gate (under E's lock) then
// loads the epoch, cannot both miss each other: the insert sees the epoch past E and retries in
// a newer bucket (docs/window.md "Answers and race bounds"). Free on x86 (plain loads; the RMWs
// are locked instructions either way).
inline void raise_epoch(WindowHeader* h, uint64_t v) noexcept {
  uint64_t cur = h->epoch.load(std::memory_order_seq_cst);  // seq_cst: the rotation order (the CAS decides)
  // seq_cst: the rotation order; it includes release: the claimed slot (tag stored before) is
  // visible to whoever acquires the epoch.
  while (cur < v && !h->epoch.compare_exchange_weak(cur, v, std::memory_order_seq_cst, std::memory_order_seq_cst)) {
  }
}

// Space row: index in [0, T) for a claimed space, T for "other", UINT32_MAX for "not claimed" (claim == false).
inline uint32_t space_row(WindowHeader* h, const wi::Geometry& g, uint64_t space, bool claim) noexcept {
  const uint32_t T = g.space_table;
  if (space == ~uint64_t{0}) return T;  // reserved: key space + 1 would be 0
  const uint64_t key = space + 1;
  uint64_t* keys = reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(h) + g.keys_offset);
  uint64_t i = bl::fmix64(key) & (T - 1);
  for (uint32_t probe = 0; probe < T; ++probe, i = (i + 1) & (T - 1)) {
    std::atomic_ref<uint64_t> slot(keys[i]);
    uint64_t k = slot.load(std::memory_order_relaxed);  // relaxed: a key carries no other data
    if (k == key) return static_cast<uint32_t>(i);
    if (k != 0) continue;
    if (!claim) break;
    if (h->spaces_claimed.load(std::memory_order_relaxed) >= g.max_spaces) return T;  // relaxed: a soft limit
    uint64_t expect = 0;
    // relaxed: the key alone is the claim; counters are indexed by the row, zero until incremented.
    if (slot.compare_exchange_strong(expect, key, std::memory_order_relaxed)) {
      SHMF_KILL_POINT("window.space.after_claim");
      h->spaces_claimed.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic / soft limit
      return static_cast<uint32_t>(i);
    }
    if (expect == key) return static_cast<uint32_t>(i);
  }
  if (claim) return T;
  return h->spaces_claimed.load(std::memory_order_relaxed) >= g.max_spaces ? T : UINT32_MAX;  // relaxed: statistic
}

inline uint64_t* counters_of(TableHead* t) noexcept {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(t) + sizeof(TableHead));
}
inline uint64_t* bloom_words(TableHead* t, const wi::Geometry& g) noexcept {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(t) + g.main_offset);
}
inline ck::Header* cuckoo_of(TableHead* t, const wi::Geometry& g) noexcept {
  return reinterpret_cast<ck::Header*>(reinterpret_cast<std::byte*>(t) + g.main_offset);
}

inline bool seg_token_alive(const void* ctx, uint64_t token) { return static_cast<const Segment*>(ctx)->token_alive(token); }
inline uint64_t seg_owner_token(const void* ctx) { return static_cast<const Segment*>(ctx)->owner_token(); }
inline ck::Liveness liveness_of(const Segment& seg) noexcept { return ck::Liveness{0, &seg, &seg_token_alive, &seg_owner_token}; }

}  // namespace internal::window_ops

using namespace internal::window_ops;  // the window*.cpp parts call these unqualified

// ---------------------------------------------------------------------------
// The implementation (a friend of Window); members are defined in the part named above.
struct WindowOps {
  static WindowHeader* hdr(const Window& w) noexcept { return header_at(w.base_, w.offset_); }
  // The geometry validated at open: every divisor, modulus, shift and index bound of the data
  // plane and rotation comes from here, never from a header word re-read (docs/window.md "Validation").
  static const wi::Geometry& geo(const Window& w) noexcept { return w.g_; }
  // The directory's entry of the bound window (lock-free lookup); kDropped when it is gone.
  static RegionInfo region(const Window& w);
  // require_sound on the bound window: the paths that follow table offsets outside the data
  // plane (stats, maintain, the inline preparer) re-validate, as segment bytes may have
  // changed since open.
  // Also kCorrupt when the header no longer holds the geometry the handle captured at open.
  static void require_sound(const Window& w);
  // What w may own (extents_of its region), for free_table under the lock.
  static internal::window_ops::WindowExtents extents(const Window& w) {
    return internal::window_ops::extents_of(w.seg_, region(w));
  }

  static void tick(const Window& w) noexcept {
    if (++w.ops_ % kQuiesceEvery == 0) {
      const_cast<Segment&>(w.seg_).quiesce();
      map_spare_ahead(w);
    }
  }
  // At a quiescent point: maps (MADV_POPULATE_READ) up to kMapAhead more bytes of the next
  // bucket's ready spare into this process's page tables, so that after the rotation its
  // queries do not take a first-touch page fault per 16 pages of the new table (page tables
  // are per process: the housekeeper's pre-faulting cannot do this for the others). Reads
  // only the slot ring; never blocks; one madvise per call at most.
  static void map_spare_ahead(const Window& w) noexcept;

  // Bucket a reader uses: the newer of the clock's and the header's.
  static int64_t read_epoch(const Window& w) noexcept {
    WindowHeader* h = hdr(w);
    int64_t e = wi::bucket_number(w.now(), w.g_.utc_offset, w.g_.bucket_seconds);
    uint64_t g = h->epoch.load(std::memory_order_seq_cst);  // seq_cst: pairs with raise_epoch; the rotation order
    if (g > 0 && static_cast<int64_t>(g - 1) > e) e = static_cast<int64_t>(g - 1);
    return e;
  }

  // Capacity of the next bucket's table, from the buckets in the window (docs/window.md):
  // every bucket above `expected` asks for 1.5 x its distinct count (the mission's headroom),
  // one that fit its table for no more than that table (steady traffic keeps its size: no
  // oscillation); the largest ask, else `expected`. So a normal day costs one table of
  // `expected`, and the size follows the measured days down once the big days left the window.
  static uint64_t desired_capacity(const Window& w, int64_t e) noexcept;

  // Under the lock: make slot s hold a fresh table (tag 0), freeing what it held.
  // Only for slots whose tag is retired or expired data (never a live bucket).
  static void prepare_locked(const Window& w, ControlTxn& txn, BucketSlot& s, uint64_t capacity);
  // Under the lock: zeroes and pre-faults up to max_bytes more of a spare in preparation,
  // publishes it (tag 0) once complete. Returns the bytes zeroed.
  static uint64_t prepare_chunk(const Window& w, BucketSlot& s, uint64_t max_bytes);

  // Makes bucket e claimable and claims it. False: no table could be had; *why (if given)
  // gets the answer for the caller: kNoSpace, kForked, kDropped or kBusy (our clock is behind).
  static bool advance(const Window& w, int64_t e, WindowStatus* why = nullptr) noexcept;

  // The current bucket's table for a writer (rotating if the clock says so); null: *why (if
  // given) says why, as advance().
  static TableHead* current(const Window& w, int64_t& e_out, WindowStatus* why = nullptr) noexcept;

  static void count_new(const Window& w, TableHead* t, uint64_t space) noexcept;

  // The extent of a table's next overflow layer (both variants), under the segment lock: none
  // if done() (another caller published that layer meanwhile: returns kLayerDone); the one a dead
  // allocator committed (*pending, when published(*pending) is false); else make(txn) (allocates,
  // initialises the fresh extent, logs the layer's shape), logged into *pending. 0 on failure,
  // recorded once (kTableOverflowFailed, overflow_failures): the caller stays where it is. The
  // caller publishes the offset (one release store, never logged).
  static constexpr uint64_t kLayerDone = 1;
  template <class Done, class Published, class Make>
  static uint64_t commit_layer(const Window& w, TableHead* t, uint64_t* pending, Done&& done, Published&& published,
                               Make&& make) noexcept;

  // ---- kBloom ------------------------------------------------------------------
  // The table's published layers (as bloom_layer_views), first adding the next one when `want`
  // (main_full: the layers its count asks for) is more than it has. Returns n.
  static uint32_t bloom_layers(const Window& w, TableHead* t, uint32_t want, BloomLayerView* out) noexcept;

  static bool bloom_has(const Window& w, TableHead* t, uint64_t hv, const wi::Masks& mm) noexcept;
  static void bloom_prefetch(const Window& w, TableHead* t, uint64_t hv) noexcept;

  static WindowStatus bloom_mark_in(const Window& w, TableHead* t, uint64_t space, uint64_t hv, const wi::Masks& mm) noexcept;

  // ---- kCuckoo -----------------------------------------------------------------
  struct ExpandCtx {
    const Window* w;
    TableHead* t;
  };
  static bool cuckoo_expand(void* ctx, ck::Header* ch);

  // checked: the caller found the pair in none of the retention - 1 older buckets (mark_if_unseen
  // over the whole window); otherwise the table loses kTableAllChecked before the insert.
  // t is the table of bucket e.
  template <class LT>
  static WindowStatus cuckoo_mark_in(const Window& w, TableHead* t, int64_t e, bool checked, uint64_t space,
                                     uint64_t hv) noexcept;
  // The gate of every kCuckoo insert into the table of bucket e (called under its writer lock):
  // refuses (and seals the table) once the header epoch is past e; see kTableSealed.
  struct GateCtx {
    WindowHeader* h;
    TableHead* t;
    int64_t e;
  };
  static bool insert_gate(void* ctx, ck::Header* ch) noexcept;
  // Before a mark_if_unseen of bucket e trusts its lock-free checks of the older tables
  // ts[1..win): each is sealed (acquire load of its flags; else this caller seals it under its
  // writer lock). A bucket found empty needs nothing: an insert that claims it later finds the
  // epoch past it in its gate (the rotation order, see raise_epoch) and retries.
  // False: this process has no owner token (a handle inherited across fork) and cannot seal.
  static bool seal_older(const Window& w, TableHead* const* ts, uint32_t win) noexcept;
  template <class LT>
  static bool seal(const Window& w, TableHead* t) noexcept;
  template <class LT>
  static bool cuckoo_has(const Window& w, TableHead* t, uint64_t hv) noexcept;
  template <class LT>
  static void cuckoo_prefetch(const Window& w, TableHead* t, uint64_t hv) noexcept;

  // ---- kStamped (stamped_impl.h; docs/window.md "The stamped variant") -----------
  // The one table every bucket shares: its TableHead (overflow bookkeeping) and cuckoo header.
  static TableHead* shared_head(const Window& w) noexcept { return reinterpret_cast<TableHead*>(w.base_ + w.g_.shared); }
  static ck::Header* shared_ck(const Window& w) noexcept {
    return reinterpret_cast<ck::Header*>(w.base_ + w.g_.shared + w.g_.main_offset);
  }
  // The stamp decoder of a call at bucket e (one acquire load of `swept`, on the epoch's line).
  static internal::stamped::Clock stamped_clock(const Window& w, int64_t e) noexcept {
    // acquire: pairs with the sweeper's release CAS: the lanes it cleared are gone for us.
    const uint64_t swept = hdr(w)->swept.load(std::memory_order_acquire);
    // 0: nothing written yet (the first writer sets it under the writer lock): any base decodes.
    return internal::stamped::clock_of(e, swept != 0 ? swept : static_cast<uint64_t>(std::max<int64_t>(e, 1)), w.g_.retention);
  }
  static bool stamped_seen(const Window& w, uint64_t hv, uint32_t win) noexcept;
  // mark (win 1), mark_if_unseen (win) or, cap > 0, mark_if_under: t is the current bucket's
  // (counter) table of bucket e.
  static WindowStatus stamped_write(const Window& w, TableHead* t, int64_t e, uint64_t space, uint64_t hv, uint32_t win,
                                    uint32_t cap) noexcept;
  static WindowStatus stamped_forget(const Window& w, uint64_t hv) noexcept;
  static WindowStatus mark_if_under_h(const Window& w, uint64_t space, uint64_t hv, uint32_t cap, uint32_t win) noexcept;
  // Clears every dead lane (age >= retention at bucket e), one chunk of buckets per writer-lock
  // hold, then raises `swept` to e. False: this process cannot lock (inherited across fork).
  static bool stamped_sweep(const Window& w, int64_t e) noexcept;
  // The shared table's next sub-filter (under its writer lock): sub 1 the size of sub 0, each
  // later one twice the one before; at most kStampedMaxSubs.
  static bool stamped_expand(void* ctx, ck::Header* ch);

  // ---- dispatch ----------------------------------------------------------------
  static bool has(const Window& w, TableHead* t, uint64_t hv, const wi::Masks& mm) noexcept;
  static void prefetch(const Window& w, TableHead* t, uint64_t hv) noexcept;
  static WindowStatus mark_in(const Window& w, TableHead* t, int64_t e, bool checked, uint64_t space, uint64_t hv,
                              const wi::Masks& mm) noexcept;

  // Tables of the last w buckets ending at e (null where a bucket is empty).
  // *BAD (if given): some claimed slot's table offset failed its bounds check (its entry is null).
  static uint32_t tables(const Window& w, int64_t e, uint32_t n, TableHead** out, bool* bad = nullptr) noexcept;
  // The number of buckets a query's w names: kWholeWindow -> retention, 1..retention as is,
  // 0 for w > retention (rejected: the caller answers kInvalidArgument; never clamped).
  static uint32_t resolve_w(const Window& w, uint32_t win) noexcept;

  // Answers over resolved tables ts[0..win) (ts[0] the newest bucket; null = empty bucket).
  static bool seen_in(const Window& w, TableHead* const* ts, uint32_t win, uint64_t hv, bool prefetched) noexcept;
  static bool seen_h(const Window& w, uint64_t hv, uint32_t win) noexcept;

  static WindowStatus mark_h(const Window& w, uint64_t space, uint64_t hv) noexcept;

  // ts[0] is the writer's current table of bucket e.
  static WindowStatus mark_if_unseen_in(const Window& w, TableHead* const* ts, int64_t e, uint32_t win, uint64_t space,
                                        uint64_t hv, bool prefetched) noexcept;
  static bool writer_tables(const Window& w, uint32_t win, TableHead** ts, int64_t& e,
                            WindowStatus* why = nullptr) noexcept;
  static WindowStatus mark_if_unseen_h(const Window& w, uint64_t space, uint64_t hv, uint32_t win) noexcept;

  static WindowStatus forget_h(const Window& w, uint64_t hv) noexcept;
  static uint32_t table_flags(const TableHead* t) noexcept {
    return t->flags.load(std::memory_order_relaxed);  // relaxed: only ever cleared; see kTableAllChecked
  }

  // Batched forms: per round of kBatch pairs, resolve the tables once, hash and
  // prefetch every line of the round, then answer. writer: ts[0] is the current
  // bucket by the writer's rules (rotating if due). answer(i, hv, ts, e) -> counted; ts null:
  // the writer's tables could not be had and hv carries the WindowStatus that says why.
  // Item: uint64_t or std::string_view.
  template <class Item, class Fn>
  static uint64_t batch(const Window& w, std::span<const uint64_t> spaces, std::span<const Item> items, uint32_t win,
                      bool writer, Fn&& answer) noexcept;
};

}  // namespace shmfilter
