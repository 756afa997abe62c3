// lib/structures/roaring/roaring_impl.h: shared layout and stateless kernels of RoaringSet.
//
// A RoaringSet lives in four kinds of extents of the segment:
//   * the region (directory entry): RoaringHeader + the reader table;
//   * snapshot extents (layout 4): SnapHeader (64 B) + its pack directory +
//     a dropped-pack area + a CONTAINER TABLE (roaring_containers.h: one
//     8-byte word per 16-bit chunk naming an immutable container), immutable
//     once published except the dropped area, which the retire transaction
//     writes (readers never read it);
//   * pack extents: the containers one compaction built (CRoaring's array,
//     bitset and run formats), shared by every later snapshot that still
//     names them, freed with the snapshot that dropped them from its
//     successor's directory;
//   * delta extents: DeltaHeader (64 B) + an open-addressing table of u64 words,
//     sized per version: each compaction sizes the next active delta from the
//     set's cardinality (next_delta_capacity), from 64 slots up to the header's
//     maximum, so an empty set costs < 4 KiB and the delta grows with use.
//     A delta that fills between compactions gets a newer, twice larger table
//     linked after it (DeltaHeader::next): a version's active deltas are a
//     chain of at most kMaxChain tables, newest last, so a writer never waits
//     for a snapshot rebuild unless the whole chain is full.
// The header's `current` word holds the offset of the published snapshot
// extent; that extent's SnapHeader names the two delta chains readers consult
// (active, then previous) before the container table. A compaction rebuilds
// only the containers its deltas touched (c4::build_incremental) into one new
// pack: its cost is O(touched containers + the table), not O(set). See
// docs/roaring.md.
//
// Everything here is a kernel over raw memory: no Segment, no allocation.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "shmfilter/segment.hpp"  // Segment, RegionInfo, CheckReport: the checker's signature
#include "structures/roaring/roaring_containers.h"

namespace shmfilter::internal::snapshot {
struct In;  // structures/snapshot_io.h
}

namespace shmfilter::internal::roaring {

inline constexpr uint32_t kMagic = 0x53524f41;  // "AORS": RoaringSet region
inline constexpr uint32_t kSnapMagic = 0x534e4150;    // "PANS": snapshot extent
inline constexpr uint32_t kDeltaMagic = 0x444c5441;   // "ATLD": delta extent
// 2: per-delta capacity (the header's delta_capacity is the maximum; deltas
// start at kInitialDeltaCapacity and grow at compaction).
// 3: delta chains: DeltaHeader::next (byte 16) links a newer table after a
// full one; RoaringHeader::staged_link/staged_link_onto/links (bytes 160..183)
// stage that link. A version 2 build would ignore `next` and lose the linked
// tables' writes, so versions 1 and 2 are refused with
// ErrorCode::kVersionMismatch (export them with the old build and import
// them into a new set), and a version 3 region is refused by older builds.
// 4: per-container snapshots (SnapHeader below): a container table and pack
// directory instead of one CRoaring frozen blob. Version 3 regions are
// refused with kVersionMismatch like 1 and 2 (a build reading both would
// carry two lookup paths in every view): export them with the old build
// (`shmtool roaring export`) and import them into a new set.
inline constexpr uint32_t kLayoutVersion = 4;
inline constexpr uint32_t kPendingSlots = 32;  // retired snapshots awaiting reclamation
inline constexpr uint32_t kFlagNoAutoCompact = 1;
inline constexpr uint32_t kMinDeltaCapacity = 64;
inline constexpr uint32_t kMaxDeltaCapacity = 1u << 24;
inline constexpr uint32_t kInitialDeltaCapacity = 64;  // an empty set's delta: 64 + 512 bytes
// Tables in one version's active chain (the head sized at compaction, then up
// to three links of 2x, 4x, 8x its capacity, each at most the maximum): a
// lookup probes at most 2 x kMaxChain tables (the active chain and the
// previous version's), and the chain holds 15x the head's capacity before a
// writer has to wait for (or, with auto_compact, run) a compaction.
inline constexpr uint32_t kMaxChain = 4;

// Capacity of the next active delta for a snapshot of `card` values in
// `containers` containers whose build cost `build_cpu_ns` of thread CPU: the
// smallest power of two >= both the floor and build_cpu_ns * 10 /
// compact_permille (i.e. >= cost / (100 ns x compact_at)), at most the power
// of two >= card / 4, clamped to [64, max_capacity]. The floor is card / 16,
// but at most 64 slots a container (and never below 65,536 for that
// reason). Why: a compaction rebuilds every container its deltas touched
// (once the writes outnumber the containers, all of them) and runs every
// capacity * compact_at writes, so a delta sized from its cost keeps the
// amortised compaction cost per write near 100 ns whatever the set's size
// and shape (layout 3's whole rewrite cost ~3 ns per value at the mission's
// density, ~50 ns per value when 2^32-wide random ids leave ~15 values per
// container: a fixed delta or a pure card-proportional one made writes cost
// 1-2 us there, issue 16). card / 16 is the floor that makes growth
// deterministic for a growing set; 64 slots a container bound it where a
// rebuild of each touched container (1-4 us) is already cheap per write: a
// dense 0..1e8 set (1,526 run containers) carried a 64 MiB delta for
// nothing, and now carries 1 MiB. Memory: the delta costs 8 B a slot, at
// most one slot per 4 values per table (2-4 B per value; a sparse snapshot
// costs 2-7 B per value); once max_capacity binds, the cost grows with the set again.
inline uint32_t next_delta_capacity(uint64_t card, uint32_t max_capacity, uint64_t build_cpu_ns = 0,
                                    uint32_t compact_permille = 500, uint64_t containers = UINT64_MAX) noexcept {
  uint64_t want = card / 16;
  if (containers != UINT64_MAX) want = std::min(want, std::max<uint64_t>(containers * 64, 65536));
  if (compact_permille != 0) {
    uint64_t by_cost = build_cpu_ns / compact_permille * 10;
    uint64_t ceiling = 1;
    while (ceiling < card / 4) ceiling <<= 1;
    want = std::max(want, std::min(by_cost, ceiling));
  }
  uint64_t cap = kInitialDeltaCapacity;
  while (cap < want && cap < max_capacity) cap <<= 1;
  return static_cast<uint32_t>(cap < max_capacity ? cap : max_capacity);
}

// One slot of the reader table (LMDB's MDB_reader, one per process and set).
struct alignas(64) ReaderSlot {
  // Owner token of the attachment holding the slot; 0 = free. Claimed by CAS
  // 0 -> token (or dead token -> token, after token_alive() says dead) when a
  // process first opens the set; cleared by that process on release.
  std::atomic<uint64_t> token;
  // The snapshot generations this process may still read are the nonzero
  // entries of gens[] plus, when lo != 0, every generation in [lo, hi].
  // Written only by the owner: to make a view it first widens (hi = max, then
  // lo = a bound <= the generation it will load), loads `current`, records the
  // exact generation in gens[] and clears lo; with more than kExactPins live
  // generations it keeps [lo, hi] = [oldest, newest]. All seq_cst, pairing
  // Dekker-style with the compactor's publish-then-scan; scanners read lo/hi
  // before gens[] (gens[] is complete before lo is cleared).
  std::atomic<uint64_t> lo;
  std::atomic<uint64_t> hi;
  std::atomic<uint64_t> gens[5];
};
inline constexpr uint32_t kExactPins = 5;
static_assert(sizeof(ReaderSlot) == 64, "a reader slot is one cache line: no false sharing between processes");

// The owner's private record of which gens[] entry holds which generation
// (0 = free). A live generation keeps its entry for as long as it lives: a
// scanner reads gens[] one entry at a time, so a list that was rewritten
// compacted (shifted down as generations died) could be read torn and miss a
// generation that was live throughout -- its snapshot and delta were then
// freed under a writer (issue 16's ThreadsShareOneHandle loss).
struct PinMirror {
  uint64_t at[kExactPins] = {};
};

// Publishes the sorted, distinct generations `live` (n of them) in slot s.
// Owner only, serialised by the caller. Precondition: every generation in
// live that is not yet in the mirror is covered by [lo, hi] (the owner
// widened before making its view). n <= kExactPins: exact mode (dead
// entries cleared, new ones put in free entries, no live entry moves, then
// lo = hi = 0); otherwise range mode [live[0], live[n-1]] (gens[] left as
// is). Every store is seq_cst (see ReaderSlot).
void pins_publish(ReaderSlot& s, PinMirror& m, const uint64_t* live, size_t n) noexcept;

// True when slot s (read lo, hi, then gens[] one by one) holds a generation
// in [lo_gen, hi_gen]. Any thread of any process; concurrent with the owner.
bool pins_meet(const ReaderSlot& s, uint64_t lo_gen, uint64_t hi_gen) noexcept;

// A retired snapshot extent of generation g and the delta that left the chain
// with it (the active delta of g-1, the previous delta of g): freeable once no
// live reader slot's [lo, hi] meets [g-1, g].
struct PendingFree {
  uint64_t snap_off;    // snapshot extent to free (0 = entry empty); written under the segment lock (logged)
  uint64_t delta_off;   // delta extent to free with it (0 = none); same
  uint64_t generation;  // g, the retired snapshot's generation; same
};
static_assert(sizeof(PendingFree) == 24, "PendingFree is three u64 words");

// The region's header. Region bytes = sizeof(RoaringHeader) + reader_slots * 64.
struct RoaringHeader {
  uint32_t magic;             // kMagic; written once by init (under the segment lock)
  uint32_t version;           // kLayoutVersion; written once by init
  uint32_t delta_capacity;    // MAXIMUM slots of a delta table (power of two); written once by init.
                              // Each delta's own capacity is in its DeltaHeader (64 .. this).
  uint32_t reader_slots;      // entries in the reader table; written once by init
  uint32_t compact_permille;  // delta fill (per mille of capacity) that triggers compaction; once by init
  uint32_t flags;             // kFlagNoAutoCompact; written once by init
  uint64_t created_unix_ns;   // informational; once by init
  uint8_t pad0_[32];
  // Offset of the published snapshot extent. Swapped by the compaction
  // claimer with one CAS (seq_cst: the publish must be ordered before its
  // reader-table scan, and readers pin before loading it). Never 0 after init.
  alignas(64) std::atomic<uint64_t> current;
  // Generation of the newest published snapshot; stored by the claimer right
  // after `current` (seq_cst), so a reader that loads gen_counter = g then
  // `current` gets a snapshot of generation >= g. Only grows.
  std::atomic<uint64_t> gen_counter;
  uint8_t pad1_[48];
  // Compaction claim: owner token of the process compacting, 0 = none.
  // CAS 0 -> token to claim; a dead owner's token (token_alive false) is
  // replaced by CAS old -> token (takeover). Released by store 0.
  alignas(64) std::atomic<uint64_t> claim;
  // Snapshot extent built and allocated but not yet retired-from: written
  // under the segment lock (logged) by the claimer. 0 = no compaction in flight.
  uint64_t staged_snap;
  // The `current` the staged snapshot was built on; same writer/protocol.
  uint64_t staged_from;
  uint64_t compactions;       // completed compactions; logged store by the claimer; only grows
  // A delta table allocated to be linked after `staged_link_onto` (the tail
  // of the current version's active chain), 0 = none: written by the
  // link_claim holder under the segment lock (logged) before the link
  // (tail->next) is stored, cleared after it. A linker that takes a dead
  // link_claim over frees it when the tail's next does not name it, else
  // just clears both.
  uint64_t staged_link;
  uint64_t staged_link_onto;
  uint64_t links;             // delta tables ever linked; logged store by the link_claim holder; only grows
  // Link claim: owner token of the process linking a table, 0 = none. Apart
  // from `claim` so a writer can link while a compaction builds (links are
  // what keep writers from waiting for it). CAS 0 -> token; a dead owner's
  // token (token_alive false) is replaced by CAS (takeover); released by CAS token -> 0.
  std::atomic<uint64_t> link_claim;
  // Retired extents; every write under the segment lock (logged).
  PendingFree pending[kPendingSlots];
};
static_assert(offsetof(RoaringHeader, current) == 64, "current on its own cache line (read on every call)");
static_assert(offsetof(RoaringHeader, claim) == 128, "claim on its own cache line (compactors write it)");
static_assert(offsetof(RoaringHeader, staged_link) == 160 && offsetof(RoaringHeader, links) == 176 &&
                  offsetof(RoaringHeader, link_claim) == 184,
              "layout 3 golden bytes: staged link at 160, links counter at 176, link claim at 184");
static_assert(offsetof(RoaringHeader, pending) == 192, "layout 3 golden bytes: the retired list at 192");
static_assert(sizeof(RoaringHeader) % 64 == 0, "the reader table after the header starts on a cache line");
static_assert(alignof(RoaringHeader) == 64, "the header is cache-line aligned");
static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "shared atomics must be plain lock-free 8-byte words");

inline ReaderSlot* reader_table(RoaringHeader* h) noexcept {
  return reinterpret_cast<ReaderSlot*>(reinterpret_cast<std::byte*>(h) + sizeof(RoaringHeader));
}
inline uint64_t region_bytes(uint32_t reader_slots) noexcept {
  return sizeof(RoaringHeader) + uint64_t{reader_slots} * sizeof(ReaderSlot);
}

// Head of a snapshot extent (layout 4). The extent is
//   SnapHeader | PackRef dir[npacks] | PackRef dropped[npacks] | table
// (the table starts 64-byte aligned: 64 + 64 x npacks). Every field but
// `ndropped` and the dropped area is written once before the extent is
// published (inside the allocating transaction) and immutable afterwards.
// `ndropped` and dropped[] are written by the compaction claimer's retire
// transaction (logged stores) when this snapshot is retired: the packs of
// this directory that the successor's directory no longer names, freed with
// this snapshot (readers never read them; reclaim and drop do, under the
// segment lock).
struct alignas(64) SnapHeader {
  uint32_t magic;          // kSnapMagic
  uint32_t shape;          // 1 = INDEXED table (16 KiB rank index, then words), 0 = SORTED (keys, then words): c4::Table
  uint64_t generation;     // 1 for the first snapshot; +1 per compaction
  uint64_t table_bytes;    // c4::table_bytes(shape, containers)
  uint64_t cardinality;    // of the container table alone
  uint64_t delta_off;      // the active delta extent of this version (writers go here)
  uint64_t prev_delta_off; // the previous version's active delta, still consulted (0 = none)
  uint32_t containers;     // containers in the table (<= 65,536)
  uint32_t npacks;         // pack directory entries (<= c4::kMaxPacks)
  uint64_t ndropped;       // dropped[] entries (<= npacks); 0 until retired (see above)
};
static_assert(sizeof(SnapHeader) == 64, "the pack directory starts 64 bytes in");
static_assert(offsetof(SnapHeader, delta_off) == 32 && offsetof(SnapHeader, containers) == 48 &&
                  offsetof(SnapHeader, ndropped) == 56,
              "layout 4 golden bytes: delta_off at 32, containers/npacks at 48/52, ndropped at 56");
static_assert(sizeof(c4::PackRef) == 32, "two PackRefs are one cache line: the table stays 64-byte aligned");

inline uint64_t snap_extent_bytes(uint32_t npacks, uint64_t table_bytes) noexcept {
  return sizeof(SnapHeader) + uint64_t{npacks} * 2 * sizeof(c4::PackRef) + table_bytes;
}
inline const c4::PackRef* snap_dir(const SnapHeader* s) noexcept {
  return reinterpret_cast<const c4::PackRef*>(reinterpret_cast<const std::byte*>(s) + sizeof(SnapHeader));
}
inline c4::PackRef* snap_dropped(SnapHeader* s) noexcept {
  return reinterpret_cast<c4::PackRef*>(reinterpret_cast<std::byte*>(s) + sizeof(SnapHeader)) + s->npacks;
}
inline const c4::PackRef* snap_dropped(const SnapHeader* s) noexcept {
  return snap_dir(s) + s->npacks;
}
inline c4::Table snap_table(const SnapHeader* s) noexcept {
  return c4::table_at(reinterpret_cast<const std::byte*>(s) + sizeof(SnapHeader) + uint64_t{s->npacks} * 2 * sizeof(c4::PackRef),
                      s->shape == 1, s->containers);
}
// The header's own fields are consistent and the extent lies inside
// [off, size): magic, shape, containers <= 65,536, npacks <= kMaxPacks,
// ndropped <= npacks, table_bytes what the shape and count need. The
// containers and packs themselves are checked by c4::table_validate.
inline bool snap_header_ok(const std::byte* base, uint64_t size, uint64_t off) noexcept {
  if (off == 0 || off % 64 != 0 || off > size || size - off < sizeof(SnapHeader)) return false;
  auto* s = reinterpret_cast<const SnapHeader*>(base + off);
  if (s->magic != kSnapMagic || s->shape > 1 || s->containers > c4::kChunks || s->npacks > c4::kMaxPacks ||
      s->ndropped > s->npacks)
    return false;
  if (s->table_bytes != c4::table_bytes(s->shape == 1, s->containers)) return false;
  return snap_extent_bytes(s->npacks, s->table_bytes) <= size - off;
}

// Head of a delta extent. Followed by `capacity` u64 slot words.
struct alignas(64) DeltaHeader {
  uint32_t magic;     // kDeltaMagic; written once before publication
  uint32_t capacity;  // power of two in [64, RoaringHeader::delta_capacity]; written once before publication
  // Slots claimed or being claimed: a writer adds 1 (seq_cst) BEFORE its
  // claim CAS and gives it back only if it then claims nothing, so
  // fill >= claimed slots at every instant and fill == 0 proves the table
  // empty (readers skip it). A writer killed in between leaves it one high.
  std::atomic<uint64_t> fill;
  // Offset of the newer delta table linked after this one, 0 = none (this is
  // the tail writers write into). Stored once, 0 -> offset, by the
  // link_claim holder (seq_cst, after the linked table's header is written
  // and its allocation committed: RoaringHeader::staged_link); never changes
  // again while this table lives. On the same line as `fill`, which every
  // lookup loads anyway, so watching for a new link costs no extra miss.
  std::atomic<uint64_t> next;
  uint8_t pad_[40];
};
static_assert(sizeof(DeltaHeader) == 64, "delta slots start on a cache line");
static_assert(offsetof(DeltaHeader, next) == 16, "layout 3 golden bytes: next at byte 16");

inline std::atomic<uint64_t>* delta_slots(DeltaHeader* d) noexcept {
  return reinterpret_cast<std::atomic<uint64_t>*>(reinterpret_cast<std::byte*>(d) + sizeof(DeltaHeader));
}
inline uint64_t delta_bytes(uint32_t capacity) noexcept { return sizeof(DeltaHeader) + uint64_t{capacity} * 8; }

// ---- delta slot words ---------------------------------------------------------
// A slot word is 0 (empty) or  value | kClaimed | op << 33. The key of a
// claimed slot never changes while the table lives, so one word carries the
// whole entry: claim and commit are the same CAS, later writes to the same
// value are plain stores of a new op, and the last store in the word's
// modification order wins.
enum class Op : uint32_t { kNone = 0, kAdd = 1, kRemove = 2 };
inline constexpr uint64_t kClaimed = 1ull << 32;
inline constexpr uint64_t make_word(uint32_t v, Op op) noexcept {
  return uint64_t{v} | kClaimed | (uint64_t{static_cast<uint32_t>(op)} << 33);
}
inline constexpr uint32_t word_value(uint64_t w) noexcept { return static_cast<uint32_t>(w); }
inline constexpr Op word_op(uint64_t w) noexcept { return static_cast<Op>((w >> 33) & 3); }
inline constexpr bool word_valid(uint64_t w) noexcept {
  return w == 0 || ((w & kClaimed) && (w >> 35) == 0 && (word_op(w) == Op::kAdd || word_op(w) == Op::kRemove));
}

// Home slot of a value: a 32-bit mix (Murmur3 finalizer) so sequential ids spread.
inline uint32_t delta_home(uint32_t v, uint32_t capacity) noexcept {
  v ^= v >> 16;
  v *= 0x85ebca6bu;
  v ^= v >> 13;
  v *= 0xc2b2ae35u;
  v ^= v >> 16;
  return v & (capacity - 1);
}

// The op recorded for v, or kNone. Lock-free. Loads are seq_cst (a plain MOV
// on x86): a lookup that starts after a write returned must see it.
inline Op delta_lookup(DeltaHeader* d, uint32_t v) noexcept {
  if (d->fill.load() == 0) return Op::kNone;  // seq_cst: see DeltaHeader::fill (no claimed slot exists)
  const uint32_t cap = d->capacity;
  std::atomic<uint64_t>* slots = delta_slots(d);
  uint32_t i = delta_home(v, cap);
  for (uint32_t probes = 0; probes < cap; ++probes, i = (i + 1) & (cap - 1)) {
    uint64_t w = slots[i].load();
    if (w == 0) return Op::kNone;
    if (word_value(w) == v) return word_op(w);
  }
  return Op::kNone;
}

enum class WriteResult { kOk, kFull };

// Records op for v. Lock-free; any process. kFull when v is not yet in the
// table and the table holds `limit` claimed slots (the writer must compact).
inline WriteResult delta_write(DeltaHeader* d, uint32_t v, Op op, uint64_t limit) noexcept {
  const uint32_t cap = d->capacity;
  std::atomic<uint64_t>* slots = delta_slots(d);
  const uint64_t word = make_word(v, op);
  bool reserved = false;  // we hold one unit of `fill` for the slot we are about to claim
  auto unreserve = [&] {
    if (reserved) d->fill.fetch_sub(1);  // seq_cst: we claimed nothing after all
  };
  uint32_t i = delta_home(v, cap);
  for (uint32_t probes = 0; probes < cap; ++probes, i = (i + 1) & (cap - 1)) {
    uint64_t w = slots[i].load(std::memory_order_acquire);  // acquire: compare against a whole entry
    if (w == 0) {
      if (!reserved) {
        if (d->fill.load(std::memory_order_relaxed) >= limit) return WriteResult::kFull;  // relaxed: a bound, not a fence
        d->fill.fetch_add(1);  // seq_cst: reserve before the claim (fill >= claimed slots, always)
        reserved = true;
      }
      if (slots[i].compare_exchange_strong(w, word)) return WriteResult::kOk;  // seq_cst: claim+commit of the entry
      // Lost the race for this slot: w now holds the winner; fall through.
    }
    if (word_value(w) == v) {
      unreserve();
      slots[i].store(word);  // seq_cst: the write's linearisation point
      return WriteResult::kOk;
    }
  }
  unreserve();
  return WriteResult::kFull;
}

// Calls fn(value, op) for every committed entry. Lock-free; concurrent writes
// may or may not be seen.
template <class Fn>
inline void delta_for_each(DeltaHeader* d, Fn&& fn) {
  if (d->fill.load() == 0) return;  // seq_cst: fill == 0 proves no claimed slot (see DeltaHeader::fill)
  const uint32_t cap = d->capacity;
  std::atomic<uint64_t>* slots = delta_slots(d);
  for (uint32_t i = 0; i < cap; ++i) {
    uint64_t w = slots[i].load(std::memory_order_acquire);  // acquire: entries are read whole
    if (w != 0) fn(word_value(w), word_op(w));
  }
}

// How many entries tables[0..n) can hold, for sizing a fold's buffers: each
// table's fill (segment bytes: untrusted, and one high per writer killed
// mid-claim) bounded by its capacity (validated before the table is followed).
// A corrupt fill of 2^35 made the fold reserve 256 GiB (fuzz_segment, CI).
inline uint64_t delta_entries_bound(DeltaHeader* const* tables, uint32_t n) noexcept {
  uint64_t hint = 0;
  for (uint32_t k = 0; k < n; ++k)
    hint += std::min<uint64_t>(tables[k]->fill.load(std::memory_order_relaxed), tables[k]->capacity);  // relaxed: a size hint
  return hint;
}

inline void delta_init(DeltaHeader* d, uint32_t capacity) noexcept {
  d->magic = kDeltaMagic;
  d->capacity = capacity;
  d->fill.store(0, std::memory_order_relaxed);  // relaxed: published later by the snapshot swap or the link store
  d->next.store(0, std::memory_order_relaxed);  // relaxed: same
}

// Fill at which a write of a new value gets kFull (90%: linear probing's
// probe lengths grow without bound as the load nears 1), and fill at which a
// writer asks for a newer table (compact_permille of the capacity).
inline uint64_t delta_limit(uint32_t capacity) noexcept { return uint64_t{capacity} * 9 / 10; }
inline uint64_t delta_trigger(uint32_t capacity, uint32_t compact_permille) noexcept {
  return std::max<uint64_t>(1, uint64_t{capacity} * compact_permille / 1000);
}
// Capacity of the table linked after a tail of `tail_capacity` slots: twice it, at most the maximum.
inline uint32_t link_capacity(uint32_t tail_capacity, uint32_t max_capacity) noexcept {
  return tail_capacity >= max_capacity / 2 ? max_capacity : tail_capacity * 2;
}

// A delta extent at `off` that may be followed: 64-byte aligned, its header
// inside the segment, its magic, its capacity a power of two in
// [kMinDeltaCapacity, max_capacity] and all its slots inside the segment.
// Every delta offset read from the segment passes this before it is used.
inline bool delta_ok(const std::byte* base, uint64_t size, uint64_t off, uint32_t max_capacity) noexcept {
  if (off == 0 || off % 64 != 0 || off > size || size - off < sizeof(DeltaHeader)) return false;
  auto* d = reinterpret_cast<const DeltaHeader*>(base + off);
  const uint32_t cap = d->capacity;
  if (d->magic != kDeltaMagic || cap < kMinDeltaCapacity || cap > max_capacity || (cap & (cap - 1)) != 0) return false;
  return delta_bytes(cap) <= size - off;
}

// The chain of delta tables starting at `head`: out[0] = head, out[i+1] =
// out[i]->next, each passing delta_ok; at most kMaxChain. Returns how many
// (0 when the head is not a delta table). *bad (if given) is set when a
// link fails delta_ok or the chain is longer than kMaxChain (corruption:
// the rest is not followed).
inline uint32_t delta_chain(std::byte* base, uint64_t size, uint64_t head, uint32_t max_capacity,
                            DeltaHeader** out, uint64_t* offs = nullptr, bool* bad = nullptr) noexcept {
  if (bad) *bad = false;
  uint32_t n = 0;
  uint64_t off = head;
  while (off != 0) {
    if (n == kMaxChain || !delta_ok(base, size, off, max_capacity)) {
      if (bad) *bad = true;
      break;
    }
    auto* d = reinterpret_cast<DeltaHeader*>(base + off);
    if (offs) offs[n] = off;
    out[n++] = d;
    off = d->next.load();  // seq_cst: pairs with the link store (the linked header is complete)
  }
  return n;
}

// Validates a delta table: magic, capacity (a power of two from 64 to
// max_capacity), every word well-formed and every key reachable from its
// home slot with no empty slot in between, no value twice. Returns "" or the
// first problem. Safe concurrently with writers (they only fill empty slots
// or rewrite ops).
std::string delta_validate(DeltaHeader* d, uint32_t max_capacity, uint64_t* claimed_out);

// ---- CRoaring portable format ----------------------------------------------------
// Validates bytes as one CRoaring/Java/Go portable serialization before
// CRoaring parses them (0.2.66's deserializers print to stderr on bad input
// and trust container contents): cookie, container count, key order, every
// length inside the buffer, array/run contents sorted, bitset popcounts.
// Returns "" when valid (and *consumed = bytes it spans), else the problem.
std::string portable_validate(const char* buf, size_t len, size_t* consumed);

// The integrity checker of this kind (roaring.cpp), what Segment::check runs for every
// region of Kind::kRoaring; its row in the kinds table (roaring_kind.cpp) names it.
void check_roaring(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);

// Its save/restore (roaring_snapshot.cpp); roaring_kind.cpp puts them in the kinds table.
std::string save(Segment& seg, const RegionInfo& r);
void restore(Segment& seg, const std::string& name, snapshot::In in);

}  // namespace shmfilter::internal::roaring
