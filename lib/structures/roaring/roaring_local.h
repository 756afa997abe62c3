// lib/structures/roaring/roaring_local.h: RoaringSet's process-local side, shared by
// roaring.cpp (the handle), roaring_local.cpp (reader slot, views, attach) and
// roaring_compact.cpp (compaction, recovery, reclamation). The shared layout
// and the kernels over raw memory are in roaring_impl.h. docs/roaring.md.
#pragma once

#include <roaring/roaring.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/roaring_set.hpp"
#include "structures/roaring/roaring_impl.h"

namespace shmfilter::internal::roaring {

// Bumped in the child after fork(): a handle inherited across fork has no
// reader slot of its own, so its data-plane calls answer kForked / false
// (the child must Segment::open and RoaringSet::open itself).
extern std::atomic<uint64_t> g_fork_epoch;

struct View;

// Process-local state of one open set, shared by every handle copy (and
// every RoaringSet::open of the same set in this process).
struct RoaringLocal : std::enable_shared_from_this<RoaringLocal> {
  uint64_t serial = 0;         // unique per RoaringLocal in this process (keys the thread caches)
  uint64_t fork_epoch = 0;     // g_fork_epoch when made
  Segment seg;
  RegionInfo region;
  std::byte* base = nullptr;
  RoaringHeader* hdr = nullptr;
  ReaderSlot* slot = nullptr;  // this process's reader-table slot
  uint64_t token = 0;
  pid_t pid = 0;
  uint32_t max_capacity = 0;   // the header's delta_capacity: no delta is larger
  uint32_t compact_permille = 500;
  bool auto_compact = true;

  std::mutex mu;                       // guards live, latest, the slot's lo/hi stores
  std::map<uint64_t, uint32_t> live;   // generation -> View objects alive in this process
  std::shared_ptr<View> latest;        // newest view made here (keeps a warm view for new threads)
  PinMirror pins;                      // which slot->gens[] entry holds which generation (guarded by mu)

  ~RoaringLocal();
  std::shared_ptr<View> make_view();   // slow path: pin, load current, validate the container table
  void view_died(uint64_t gen) noexcept;
  void publish_pins_locked() noexcept;
  bool live_region() const noexcept { return seg.region_live(region.slot, region.generation); }
  bool in_segment(uint64_t off, uint64_t len) const noexcept {
    uint64_t size = seg.size();
    return off != 0 && off <= size && len <= size - off;
  }
};

// A process-local view of one published snapshot version (its container table in the segment).
struct View {
  std::weak_ptr<RoaringLocal> local;  // weak: RoaringLocal::latest holds views (no cycle)
  uint64_t snap_off = 0;
  uint64_t gen = 0;
  const SnapHeader* snap = nullptr;
  // The version's active chain, head (act[0], the snapshot's delta_off)
  // first, newest last. Links are added by the claimer while the version is
  // current, so the view follows them lazily: act[0..nact) are fixed once
  // stored, nact only grows (release; extend() under ext_mu), and every
  // lookup checks the tail's `next` (the line it loads for `fill` anyway).
  DeltaHeader* act[kMaxChain] = {};
  std::atomic<uint32_t> nact{0};
  // The previous version's active chain (the snapshot's prev_delta_off), fixed:
  // nothing is linked to it once this version is published (links and publishes
  // both need the compaction claim).
  DeltaHeader* prv[kMaxChain] = {};
  uint32_t nprv = 0;
  std::mutex ext_mu;
  std::byte* base = nullptr;
  uint64_t seg_size = 0;  // the segment's size when last checked (guarded by ext_mu after construction)
  uint32_t max_capacity = 0;
  // The snapshot's container table and pack directory (in the segment,
  // immutable while the view pins the generation; validated shallowly by
  // make_view: every word names a container inside the segment, so a lookup
  // stays inside it whatever the container's bytes hold).
  c4::Table table;
  const c4::PackRef* packs = nullptr;
  uint32_t npacks = 0;
  ~View() {
    if (auto l = local.lock()) l->view_died(gen);
  }
  // Follows links stored after the cached tail; returns the new count.
  uint32_t extend() noexcept {
    std::lock_guard<std::mutex> g(ext_mu);
    uint32_t n = nact.load(std::memory_order_relaxed);  // relaxed: written only under ext_mu
    while (n < kMaxChain) {
      uint64_t nx = act[n - 1]->next.load();  // seq_cst: pairs with the link store
      if (nx == 0) break;
      if (auto l = local.lock()) seg_size = l->seg.size();  // the link may sit in space allocated after the view
      if (!delta_ok(base, seg_size, nx, max_capacity)) break;  // a bad link is not followed (check reports it)
      act[n] = reinterpret_cast<DeltaHeader*>(base + nx);
      nact.store(++n, std::memory_order_release);  // release: act[n-1] is stored before readers may index it
    }
    return n;
  }
  // The active chain's table count, after following any new link.
  uint32_t chain() noexcept {
    uint32_t n = nact.load(std::memory_order_acquire);  // acquire: pairs with extend()'s release
    if (act[n - 1]->next.load() != 0 && n < kMaxChain) n = extend();  // seq_cst: a link stored before a write we must see
    return n;
  }
  // The table writers write into: the newest of the active chain.
  DeltaHeader* tail() noexcept { return act[chain() - 1]; }
  // Membership in the snapshot: the chunk's table word (indexed: a rank
  // entry of the cached 16 KiB index, then the word; sorted: a binary search
  // over <= 511 cached keys), then the container.
  bool snap_contains(uint32_t v) const noexcept {
    const uint64_t w = c4::table_word(table, static_cast<uint16_t>(v >> 16));
    return w != 0 && c4::container_contains(base, w, static_cast<uint16_t>(v));
  }
  // The op of v in the deltas, newest table first; kNone when no table has it.
  Op delta_op(uint32_t v) noexcept {
    for (uint32_t i = chain(); i-- > 0;)
      if (Op op = delta_lookup(act[i], v); op != Op::kNone) return op;
    for (uint32_t i = nprv; i-- > 0;)
      if (Op op = delta_lookup(prv[i], v); op != Op::kNone) return op;
    return Op::kNone;
  }
  // Membership given the chunk's table word w (0: no container), for callers
  // that fetched the word ahead (contains_alone, the batched lookups).
  bool contains_word(uint32_t v, uint64_t w) noexcept {
    Op op = delta_op(v);
    if (op != Op::kNone) return op == Op::kAdd;
    return w != 0 && c4::container_contains(base, w, static_cast<uint16_t>(v));
  }
  // One lookup alone (RoaringSet::contains): the delta probes and the table
  // word do not depend on each other, so both are issued before either is
  // awaited; out of cache that is max(delta slot, word) then the container,
  // not delta, then word, then container. The word's place is found once.
  bool contains_alone(uint32_t v) noexcept {
    prefetch1(v);
    const uint64_t* wp = prefetch2(v);
    Op op = delta_op(v);
    if (op != Op::kNone) return op == Op::kAdd;
    return wp != nullptr && c4::container_contains(base, *wp, static_cast<uint16_t>(v));
  }
  // Calls fn(table) for every delta table, oldest first (prv, then act).
  template <class Fn>
  void for_each_table(Fn&& fn) {
    for (uint32_t i = 0; i < nprv; ++i) fn(prv[i]);
    const uint32_t n = chain();
    for (uint32_t i = 0; i < n; ++i) fn(act[i]);
  }
  // Batched lookups (contains_many, contains_any), three stages over a block
  // of values before any answer: prefetch1 issues the independent first
  // loads (delta home slots, the table's rank entry), prefetch2 the word the
  // entry names (and returns where it is), prefetch3 the container line the
  // word names (and returns the word); then contains_word() finds them
  // cached (one miss's latency for the block, not two or three per value),
  // and each value's word is located once.
  void prefetch1(uint32_t v) noexcept {
    const uint32_t n = nact.load(std::memory_order_acquire);  // acquire: pairs with extend(); a hint only
    for (uint32_t i = 0; i < n; ++i)
      if (act[i]->fill.load(std::memory_order_relaxed) != 0)  // relaxed: a hint only
        __builtin_prefetch(delta_slots(act[i]) + delta_home(v, act[i]->capacity));
    for (uint32_t i = 0; i < nprv; ++i)
      if (prv[i]->fill.load(std::memory_order_relaxed) != 0)  // relaxed: a hint only
        __builtin_prefetch(delta_slots(prv[i]) + delta_home(v, prv[i]->capacity));
    if (table.n != 0) __builtin_prefetch(c4::table_probe_address(table, static_cast<uint16_t>(v >> 16)));
  }
  // Finds where v's table word is (nullptr: no container) and prefetches it.
  const uint64_t* prefetch2(uint32_t v) const noexcept {
    const uint64_t* wp = c4::table_word_ptr(table, static_cast<uint16_t>(v >> 16));
    if (wp) __builtin_prefetch(wp);
    return wp;
  }
  // Reads the word prefetch2 found (0: none) and prefetches the container line it names.
  uint64_t prefetch3(uint32_t v, const uint64_t* wp) const noexcept {
    const uint64_t w = wp ? *wp : 0;
    if (w == 0) return 0;
    const char* p = static_cast<const char*>(c4::container_probe_address(base, w, static_cast<uint16_t>(v)));
    __builtin_prefetch(p);
    if (c4::cw_type(w) == c4::kArray) {  // the interpolation window spans up to 3 lines
      const char* lo = reinterpret_cast<const char*>(base + c4::cw_off(w));
      const char* hi = lo + c4::cw_bytes(w);
      if (p - 64 >= lo) __builtin_prefetch(p - 64);
      if (p + 64 < hi) __builtin_prefetch(p + 64);
    }
    return w;
  }
};

struct BitmapPtr {
  roaring_bitmap_t* p = nullptr;
  explicit BitmapPtr(roaring_bitmap_t* b) : p(b) {}
  ~BitmapPtr() {
    if (p) roaring_bitmap_free(p);
  }
  roaring_bitmap_t* release() {
    auto* r = p;
    p = nullptr;
    return r;
  }
  BitmapPtr(const BitmapPtr&) = delete;
  BitmapPtr& operator=(const BitmapPtr&) = delete;
};

// The attachment a handle's calls announce on (docs/CONCURRENCY.md "Reader
// announcements"): none for a default-constructed handle.
inline const Segment& seg_of(const std::shared_ptr<RoaringLocal>& L) noexcept {
  static const Segment kNone;
  return L ? L->seg : kNone;
}

// The view for the published snapshot, or nullptr (dropped / corrupt).
// The returned pointer stays valid until this thread's next call on a set.
View* current_view(const std::shared_ptr<RoaringLocal>& L) noexcept;
// The same; *made is set true when the call had to make a view (and so may
// have evicted another set's view from this thread's cache).
View* current_view(const std::shared_ptr<RoaringLocal>& L, bool* made) noexcept;

// Lock-free lookup done: validates the header and takes (or shares) this process's reader slot.
std::shared_ptr<RoaringLocal> attach(Segment& seg, const RegionInfo& info);

// Validates the region header; throws kCorrupt naming the field.
RoaringHeader* checked_header(Segment& seg, const RegionInfo& info);

// A snapshot extent that may be followed: snap_header_ok (64-byte aligned,
// magic, header fields consistent, directory and table inside the segment's
// `size`; the container words are checked by c4::table_validate), and its delta tables
// (when named) passing delta_ok (aligned, magic, capacity a power of two
// <= max_capacity, every slot inside). Every offset read from the set's
// header (current, staged_*) passes this before it is dereferenced.
bool version_ok(const std::byte* base, uint64_t size, uint64_t off, uint32_t max_capacity) noexcept;
// The packs a retired entry frees with its snapshot (its dropped area; each
// inside the segment and 64-aligned, else the entry is not pending_ok).
// Returns the count; fills out[0..count) and *min_birth (UINT64_MAX: none).
uint32_t pending_packs(const std::byte* base, const PendingFree& p, uint64_t* out, uint64_t* min_birth) noexcept;
// A retired-snapshot entry whose offsets may be followed or freed: aligned, inside, a snapshot header.
bool pending_ok(const std::byte* base, uint64_t size, const PendingFree& p) noexcept;
// Inside every transaction on the set's memory: the set is still published.
// Checked under the segment lock (drop takes it too), so the region cannot be
// freed while the transaction runs. Needed because a transaction quiesces this
// process at its start: without the check, a set dropped by another process
// before we got the lock could be reclaimed by our own allocation, and our
// stores through `hdr` would land in someone else's memory. Throws kDropped.
void require_live(const RoaringLocal& L);

// "'name'" for messages.
std::string quoted(std::string_view s);

// ---- compaction (roaring_compact.cpp) ------------------------------------------------
// Allocates and fills a new version inside `txn`: the pack of b's new
// containers (when it has any; b is relocated to it), the snapshot extent
// (header, directory, an empty dropped area, the table) and a fresh active
// delta of `capacity` slots, every extent charged to the caller's region.
// Returns the snapshot's offset (*delta_out: the delta's). Kill point
// roaring.compact.after_pack sits between the pack and the snapshot, and
// roaring.delta.grow (when `grows`) before the delta: the undo log frees
// what was allocated.
uint64_t allocate_version(ControlTxn& txn, c4::Built& b, uint64_t gen, uint64_t prev_delta, uint32_t capacity,
                          bool grows, uint64_t* delta_out);
// A whole snapshot of `bm` (create_from, merge): run-optimised in place,
// then its portable bytes copied container by container.
void build_from_bitmap(c4::Built& b, roaring_bitmap_t* bm, uint64_t gen);

// The view's snapshot as a process-local CRoaring bitmap (its containers'
// portable bytes, deserialized), with every delta table folded in (newest
// table wins per value), then EXTRA OR'd in. For to_bitmap, export, set
// algebra and merges; a compaction without EXTRA uses build_incremental.
roaring_bitmap_t* fold_view(View& v, const roaring_bitmap_t* extra);
// Each value's newest delta entry as one sorted op list, value << 1 | is_remove
// (what c4::build_incremental takes; process-local; may throw bad_alloc).
void final_ops(View& v, std::vector<uint64_t>& ops);

// Offsets of the chain of delta tables at `head` into offs[kMaxChain] (validated links only); the count.
uint32_t chain_offsets(const RoaringLocal& L, uint64_t head, uint64_t* offs);

// The compaction claim (one compactor per set; a dead holder's claim is taken over).
bool try_claim(RoaringLocal& L);
void release_claim(RoaringLocal& L) noexcept;
struct ClaimGuard {
  RoaringLocal& L;
  ~ClaimGuard() { release_claim(L); }
};
// The link claim (one linker per set; a dead holder's claim is taken over).
bool try_link_claim(RoaringLocal& L);
void release_link_claim(RoaringLocal& L) noexcept;
struct LinkGuard {
  RoaringLocal& L;
  ~LinkGuard() { release_link_claim(L); }
};
// Frees or keeps the table a dead linker staged. Caller holds the link claim.
void recover_link_locked(RoaringLocal& L);

// Frees retired snapshots no live reader can still read; returns how many.
uint32_t reclaim_locked(RoaringLocal& L);

// Folds the deltas (and EXTRA) into a new published snapshot if this process gets the claim.
// Throws kDropped / kBusy / kNoSpace / kCorrupt.
bool compact_impl(const std::shared_ptr<RoaringLocal>& L, const roaring_bitmap_t* extra);


// A writer found the tail of the active chain past its trigger: if this
// process gets the claim, link a newer table (O(its capacity), never a
// rebuild), or, when the chain is full and auto_compact is on, compact.
// Never waits. Returns true when the tail changed or a new version exists.
bool grow_chain(const std::shared_ptr<RoaringLocal>& L) noexcept;

// A writer found the tail full (kFull): grow the chain, or wait (bounded) for
// the live claimer to link or publish. True when the caller should retry.
RoaringStatus make_room(const std::shared_ptr<RoaringLocal>& L, uint64_t seen_snap, const DeltaHeader* seen_tail) noexcept;

// maintain(): compacts when the active chain has a link (writers filled the
// head past compact_at) or the head is past its trigger; then reclaims.
bool maintain_impl(const std::shared_ptr<RoaringLocal>& L);

}  // namespace shmfilter::internal::roaring
