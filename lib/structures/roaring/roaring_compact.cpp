// lib/structures/roaring/roaring_compact.cpp: RoaringSet's compaction (rebuild the
// containers the deltas touched into a new pack and container table, publish
// it with one offset swap), the recovery
// of a compaction a dead process left staged, and the reclamation of retired
// snapshots no reader can still see. Protocol: docs/roaring.md.
#include <roaring/roaring.h>

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <memory>
#include <thread>
#include <vector>

#include "base/wait_stats.h"
#include "base/kill_point.h"
#include "structures/roaring/roaring_local.h"

namespace shmfilter::internal::roaring {

namespace {
// Maps the pages of a fresh (large) delta in this process now, inside the
// compaction, instead of one page fault per page in the first writes after
// the publish (a 2^24-slot delta is 32,768 pages: the latency bench saw the
// out-of-cache add p50 at 3.7 us from those faults). A hint: errors (kernels
// before 5.14, a full /dev/shm is already excluded by posix_fallocate) ignored.
void prefault(std::byte* p, uint64_t len) noexcept {
  if (len < (uint64_t{1} << 16)) return;
  const uintptr_t page = 4096;
  uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  uintptr_t e = reinterpret_cast<uintptr_t>(p) + len;
#ifdef MADV_POPULATE_WRITE
  (void)madvise(reinterpret_cast<void*>(a), e - a, MADV_POPULATE_WRITE);
#else
  (void)a;
  (void)e;
#endif
}

uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

uint64_t allocate_version(ControlTxn& txn, c4::Built& b, uint64_t gen, uint64_t prev_delta, uint32_t capacity,
                          bool grows, uint64_t* delta_out) {
  std::byte* base = txn.base();
  if (!b.pack.empty()) {
    const uint64_t pack_bytes = b.pack.size() * 8;
    const uint64_t pack = txn.allocate_unzeroed(pack_bytes);
    std::memcpy(base + pack, b.pack.data(), pack_bytes);
    c4::relocate(b, pack);
  }
  SHMF_KILL_POINT("roaring.compact.after_pack");  // inside the transaction: the recovery frees the pack
  const uint32_t n = static_cast<uint32_t>(b.keys.size());
  const bool indexed = c4::table_indexed_for(n);
  const uint64_t tb = c4::table_bytes(indexed, n);
  const uint32_t np = static_cast<uint32_t>(b.packs.size());
  const uint64_t snap = txn.allocate(snap_extent_bytes(np, tb));
  if (grows) SHMF_KILL_POINT("roaring.delta.grow");  // inside the transaction: the recovery rolls every allocation back
  const uint64_t delta = txn.allocate(delta_bytes(capacity));
  auto* sh = reinterpret_cast<SnapHeader*>(base + snap);
  sh->magic = kSnapMagic;
  sh->shape = indexed ? 1 : 0;
  sh->generation = gen;
  sh->table_bytes = tb;
  sh->cardinality = b.cardinality;
  sh->delta_off = delta;
  sh->prev_delta_off = prev_delta;
  sh->containers = n;
  sh->npacks = np;
  sh->ndropped = 0;
  if (np != 0) std::memcpy(base + snap + sizeof(SnapHeader), b.packs.data(), uint64_t{np} * sizeof(c4::PackRef));
  // The dropped area stays zero (allocate zeroes) until the retire transaction.
  c4::table_image(b, base + snap + snap_extent_bytes(np, 0));
  delta_init(reinterpret_cast<DeltaHeader*>(base + delta), capacity);
  *delta_out = delta;
  return snap;
}

void build_from_bitmap(c4::Built& b, roaring_bitmap_t* bm, uint64_t gen) {
  roaring_bitmap_run_optimize(bm);
  std::string bytes(roaring_bitmap_portable_size_in_bytes(bm), '\0');
  roaring_bitmap_portable_serialize(bm, bytes.data());
  if (!c4::build_from_portable(b, bytes.data(), bytes.size(), gen))
    throw Error(ErrorCode::kCorrupt, "CRoaring's serialization did not parse as containers (a library mismatch)");
}

namespace {
// Sorts keys whose top 16 bits are a value's container: two counting
// passes of 8 bits each (the top byte into a scratch array, then the next
// byte back, bucket by bucket), then each container's keys (~2,000 at the
// mission's density, in cache) by std::sort. For tens of millions of keys a
// plain std::sort costs ~100 ns a key in cache misses, and one 16-bit pass
// scatters into 65,536 streams at once (a TLB and cache miss per key); 256
// streams a pass stay in cache. The scratch array is not zeroed (a 450 MB
// memset was 6% of a 3e7-id load).
void sort_by_container(std::vector<uint64_t>& keys) {
  const size_t n = keys.size();
  if (n < (size_t{1} << 16)) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  std::unique_ptr<uint64_t[]> tmp(new uint64_t[n]);
  size_t top[257] = {};
  for (uint64_t k : keys) ++top[(k >> 56) + 1];
  for (size_t i = 1; i <= 256; ++i) top[i] += top[i - 1];
  {
    size_t at[256];
    std::copy(top, top + 256, at);
    for (uint64_t k : keys) tmp[at[k >> 56]++] = k;
  }
  for (size_t b = 0; b < 256; ++b) {
    const size_t s = top[b], e = top[b + 1];
    if (s == e) continue;
    size_t sub[257] = {};
    for (size_t i = s; i < e; ++i) ++sub[((tmp[i] >> 48) & 255) + 1];
    for (size_t i = 1; i <= 256; ++i) sub[i] += sub[i - 1];
    size_t at[256];
    for (size_t i = 0; i < 256; ++i) at[i] = s + sub[i];
    for (size_t i = s; i < e; ++i) keys[at[(tmp[i] >> 48) & 255]++] = tmp[i];
    for (size_t c = 0; c < 256; ++c)
      std::sort(keys.begin() + static_cast<ptrdiff_t>(s + sub[c]), keys.begin() + static_cast<ptrdiff_t>(s + sub[c + 1]));
  }
}
}  // namespace

void final_ops(View& v, std::vector<uint64_t>& ops) {
  DeltaHeader* tables[2 * kMaxChain];
  uint32_t nt = 0;
  v.for_each_table([&](DeltaHeader* d) { tables[nt++] = d; });
  // One key per entry: value << 32 | table rank (oldest 0) << 2 | op; sorted,
  // the last key of a value is its newest table's entry. The ops are written
  // over the keys they come from (op i never passes key i).
  ops.clear();
  ops.reserve(delta_entries_bound(tables, nt) + 64);
  for (uint32_t k = 0; k < nt; ++k)
    delta_for_each(tables[k], [&](uint32_t x, Op op) {
      ops.push_back(uint64_t{x} << 32 | uint64_t{k} << 2 | static_cast<uint64_t>(op));
    });
  sort_by_container(ops);
  size_t out = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i + 1 < ops.size() && (ops[i + 1] >> 32) == (ops[i] >> 32)) continue;  // a newer table decides
    ops[out++] = (ops[i] >> 32) << 1 | (static_cast<Op>(ops[i] & 3) == Op::kRemove ? 1 : 0);
  }
  ops.resize(out);
}

roaring_bitmap_t* fold_view(View& v, const roaring_bitmap_t* extra) {
  std::vector<uint64_t> ops;
  final_ops(v, ops);
  std::vector<uint32_t> adds, removes;
  adds.reserve(ops.size());
  for (uint64_t op : ops) (op & 1 ? removes : adds).push_back(static_cast<uint32_t>(op >> 1));
  const std::string snap = c4::table_portable(v.base, v.table);
  roaring_bitmap_t* r = roaring_bitmap_portable_deserialize_safe(snap.data(), snap.size());
  if (!r) return nullptr;
  BitmapPtr keep(r);
  // Sorted input: roaring_bitmap_add_many appends to the last container (O(1) a value).
  BitmapPtr a(roaring_bitmap_of_ptr(adds.size(), adds.data()));
  if (!a.p) return nullptr;
  roaring_bitmap_or_inplace(r, a.p);
  if (!removes.empty()) {
    BitmapPtr rm(roaring_bitmap_of_ptr(removes.size(), removes.data()));
    if (rm.p) roaring_bitmap_andnot_inplace(r, rm.p);
  }
  if (extra) roaring_bitmap_or_inplace(r, extra);
  return keep.release();
}

// Offsets of the chain of delta tables at `head` (validated links only).
uint32_t chain_offsets(const RoaringLocal& L, uint64_t head, uint64_t* offs) {
  DeltaHeader* t[kMaxChain];
  return head ? delta_chain(L.base, L.seg.size(), head, L.max_capacity, t, offs) : 0;
}

// ---- compaction (caller holds the claim) ------------------------------------------

bool try_claim(RoaringLocal& L) {
  uint64_t c = 0;
  if (L.hdr->claim.compare_exchange_strong(c, L.token)) return true;
  if (c != L.token && !L.seg.token_alive(c)) return L.hdr->claim.compare_exchange_strong(c, L.token);  // takeover
  return false;
}
void release_claim(RoaringLocal& L) noexcept {
  uint64_t mine = L.token;
  L.hdr->claim.compare_exchange_strong(mine, 0);
}
bool try_link_claim(RoaringLocal& L) {
  uint64_t c = 0;
  if (L.hdr->link_claim.compare_exchange_strong(c, L.token)) return true;
  if (c != L.token && !L.seg.token_alive(c)) return L.hdr->link_claim.compare_exchange_strong(c, L.token);  // takeover
  return false;
}
void release_link_claim(RoaringLocal& L) noexcept {
  uint64_t mine = L.token;
  L.hdr->link_claim.compare_exchange_strong(mine, 0);
}

namespace {

// True if no live reader slot holds a generation in [lo_gen, hi_gen].
bool unread(RoaringLocal& L, uint64_t lo_gen, uint64_t hi_gen) {
  ReaderSlot* slots = reader_table(L.hdr);
  for (uint32_t i = 0; i < L.hdr->reader_slots; ++i) {
    uint64_t t = slots[i].token.load();
    if (t == 0) continue;
    const bool blocked = pins_meet(slots[i], lo_gen, hi_gen);
    if (blocked && L.seg.token_alive(t)) return false;
  }
  return true;
}

}  // namespace

uint32_t reclaim_locked(RoaringLocal& L) {
  uint32_t freed = 0;
  for (uint32_t i = 0; i < kPendingSlots; ++i) {
    PendingFree p = L.hdr->pending[i];
    if (p.snap_off == 0) continue;
    if (!pending_ok(L.base, L.seg.size(), p)) continue;  // corrupt entry: never freed; check --repair clears it
    // The snapshot and delta are read by generations g-1 and g; a pack g
    // dropped was named by every generation from its birth to g.
    uint64_t packs[c4::kMaxPacks], min_birth = 0;
    const uint32_t np = pending_packs(L.base, p, packs, &min_birth);
    const uint64_t lo = std::min(p.generation == 0 ? 0 : p.generation - 1, min_birth);
    if (!unread(L, lo, p.generation)) continue;
    L.seg.transact([&](ControlTxn& txn) {
      require_live(L);
      PendingFree& e = L.hdr->pending[i];
      if (e.snap_off != p.snap_off) return;
      uint64_t offs[kMaxChain];
      const uint32_t n = chain_offsets(L, e.delta_off, offs);  // read before any of them is freed
      for (uint32_t k = 0; k < np; ++k) txn.free(packs[k]);
      txn.free(e.snap_off);
      for (uint32_t k = 0; k < n; ++k) txn.free(offs[k]);
      txn.store_u64(&e.snap_off, 0);
      txn.store_u64(&e.delta_off, 0);
      txn.store_u64(&e.generation, 0);
    });
    ++freed;
  }
  return freed;
}

namespace {

// Moves the just-published staged version's predecessor `from` to the pending list.
void retire_locked(RoaringLocal& L, uint64_t from) {
  auto* old = reinterpret_cast<SnapHeader*>(L.base + from);
  // The packs of the retired directory that the published one (built on it)
  // no longer names: freed with the retired snapshot. Both snapshots are
  // alive until this transaction commits, so a recovery after a kill at
  // roaring.compact.after_publish computes the same list.
  std::vector<c4::PackRef> dropped;
  const uint64_t cur = L.hdr->current.load();
  if (version_ok(L.base, L.seg.size(), cur, L.max_capacity)) {
    const auto* ch = reinterpret_cast<const SnapHeader*>(L.base + cur);
    const c4::PackRef *od = snap_dir(old), *cd = snap_dir(ch);
    for (uint32_t i = 0; i < old->npacks; ++i)
      if (std::none_of(cd, cd + ch->npacks, [&](const c4::PackRef& p) { return p.off == od[i].off; }))
        dropped.push_back(od[i]);
  }
  L.seg.transact([&](ControlTxn& txn) {
    require_live(L);
    c4::PackRef* area = snap_dropped(old);
    for (size_t k = 0; k < dropped.size(); ++k) {
      txn.store_u64(&area[k].off, dropped[k].off);
      txn.store_u64(&area[k].bytes, dropped[k].bytes);
      txn.store_u64(&area[k].live_bytes, dropped[k].live_bytes);
      txn.store_u64(&area[k].birth, dropped[k].birth);
    }
    txn.store_u64(&old->ndropped, dropped.size());
    for (uint32_t i = 0; i < kPendingSlots; ++i) {
      PendingFree& e = L.hdr->pending[i];
      if (e.snap_off != 0) continue;
      txn.store_u64(&e.snap_off, from);
      txn.store_u64(&e.delta_off, old->prev_delta_off);
      txn.store_u64(&e.generation, old->generation);
      break;  // compact() made sure a slot is free before building
    }
    txn.store_u64(&L.hdr->staged_snap, 0);
    txn.store_u64(&L.hdr->staged_from, 0);
    txn.store_u64(&L.hdr->compactions, L.hdr->compactions + 1);
  });
}

void publish_locked(RoaringLocal& L, uint64_t from, uint64_t staged) {
  uint64_t expect = from;
  if (L.hdr->current.compare_exchange_strong(expect, staged)) {  // seq_cst: THE publish
    auto* sh = reinterpret_cast<const SnapHeader*>(L.base + staged);
    L.hdr->gen_counter.store(sh->generation);  // seq_cst: after current (see RoaringHeader::gen_counter)
  }
}

}  // namespace

// Finishes or discards a link a dead linker left staged: linked (the tail's
// next names it) -> forget the staging; not linked -> free it (nobody could
// have written into it: writers only follow `next`). Caller holds link_claim.
void recover_link_locked(RoaringLocal& L) {
  const uint64_t staged = L.hdr->staged_link, onto = L.hdr->staged_link_onto;
  if (staged == 0 && onto == 0) return;
  const uint64_t size = L.seg.size();
  const bool onto_ok = delta_ok(L.base, size, onto, L.max_capacity);
  const bool linked = onto_ok && reinterpret_cast<DeltaHeader*>(L.base + onto)->next.load() == staged;
  L.seg.transact([&](ControlTxn& txn) {
    require_live(L);
    // A staged table that fails delta_ok is garbage in the staging word (corrupt
    // segment): forgotten, never freed blindly (check reports the space).
    if (!linked && staged != 0 && delta_ok(L.base, size, staged, L.max_capacity)) txn.free(staged);
    txn.store_u64(&L.hdr->staged_link, 0);
    txn.store_u64(&L.hdr->staged_link_onto, 0);
    if (linked) txn.store_u64(&L.hdr->links, L.hdr->links + 1);
  });
}

namespace {

// Finishes or discards a compaction a dead claimer left staged.
void recover_locked(RoaringLocal& L) {
  uint64_t staged = L.hdr->staged_snap, from = L.hdr->staged_from;
  if (staged == 0) return;
  const uint64_t size = L.seg.size();
  if (!version_ok(L.base, size, staged, L.max_capacity) || !version_ok(L.base, size, from, L.max_capacity)) {
    // Garbage in the staging words (a corrupt segment): never publish or free
    // what they name; forget them (check reports the space as leaked).
    L.seg.transact([&](ControlTxn& txn) {
      require_live(L);
      txn.store_u64(&L.hdr->staged_snap, 0);
      txn.store_u64(&L.hdr->staged_from, 0);
    });
    return;
  }
  uint64_t cur = L.hdr->current.load();
  if (cur == from) {  // built and allocated, not published: finish it (it is built on `current`)
    publish_locked(L, from, staged);
    cur = L.hdr->current.load();
  }
  if (cur == staged) {  // published, predecessor not yet retired
    retire_locked(L, from);
    return;
  }
  // Stale (should not happen under the claim): discard. A staged version was
  // never current, so nothing was linked to its fresh head.
  auto* sh = reinterpret_cast<const SnapHeader*>(L.base + staged);
  L.seg.transact([&](ControlTxn& txn) {
    require_live(L);
    if (L.in_segment(sh->delta_off, 64)) txn.free(sh->delta_off);
    // Its own pack (born with it); the others are still named by `current`.
    for (uint32_t i = 0; i < sh->npacks; ++i)
      if (snap_dir(sh)[i].birth == sh->generation) txn.free(snap_dir(sh)[i].off);
    txn.free(staged);
    txn.store_u64(&L.hdr->staged_snap, 0);
    txn.store_u64(&L.hdr->staged_from, 0);
  });
}

// The current version's view with its active chain followed to the end
// (links may still be added after: the view follows them as they come).
std::shared_ptr<View> claimed_view(RoaringLocal& L) {
  std::shared_ptr<View> view = L.make_view();  // pins the version
  if (!view) throw Error(ErrorCode::kCorrupt, "Roaring set " + quoted(L.region.name) + ": published snapshot is unreadable; run 'shmtool check'");
  view->extend();
  return view;
}

bool compact_locked(const std::shared_ptr<RoaringLocal>& Lp, const roaring_bitmap_t* extra) {
  RoaringLocal& L = *Lp;
  recover_locked(L);
  reclaim_locked(L);
  bool have_slot = false;
  for (uint32_t i = 0; i < kPendingSlots; ++i) have_slot |= L.hdr->pending[i].snap_off == 0;
  if (!have_slot)
    throw Error(ErrorCode::kBusy, "Roaring set " + quoted(L.region.name) + ": " + std::to_string(kPendingSlots) +
                                      " retired snapshots are still read by live processes; compaction must wait "
                                      "(long-idle processes keep their last view: have them call the set again)");
  const uint64_t cpu0 = thread_cpu_ns();
  std::shared_ptr<View> view = claimed_view(L);
  if (extra) {
    // Removes in the active chain would override the merged values: turn the
    // ones we merge into adds (a CAS on the exact word: a newer write wins).
    // Before the fold, so the fold sees the adds.
    const uint32_t na = view->chain();
    for (uint32_t k = 0; k < na; ++k) {
      std::atomic<uint64_t>* slots = delta_slots(view->act[k]);
      for (uint32_t i = 0; i < view->act[k]->capacity; ++i) {
        uint64_t w = slots[i].load();
        if (w != 0 && word_op(w) == Op::kRemove && roaring_bitmap_contains(extra, word_value(w)))
          slots[i].compare_exchange_strong(w, make_word(word_value(w), Op::kAdd));
      }
    }
  }
  // Only the chunks the deltas touched are rebuilt (into one new pack); every
  // other container word is shared with the old table. A merge of a whole
  // bitmap (EXTRA: merge, import, add_range) rebuilds the snapshot from the
  // folded bitmap's containers instead (its values may be 2^32 wide).
  c4::Built b;
  const uint64_t gen = view->gen + 1;
  if (extra) {
    BitmapPtr folded(fold_view(*view, extra));
    if (!folded.p) throw Error(ErrorCode::kNoSpace, "out of process memory folding the snapshot");
    build_from_bitmap(b, folded.p, gen);
  } else {
    std::vector<uint64_t> ops;
    final_ops(*view, ops);
    c4::build_incremental(b, L.base, view->table, view->packs, view->npacks, view->snap->cardinality, ops.data(),
                          ops.size(), gen);
  }
  uint64_t from = view->snap_off;
  // The next active delta grows (or shrinks) with the set and with what a
  // compaction of it costs: next_delta_capacity (roaring_impl.h). A merge's
  // whole rebuild is a one-off (a bulk load), not what the deltas' next
  // compaction will cost: it does not size the delta (a merge of 1.76e7 ids
  // bought a 64 MiB delta, and the writes after it paid a first-touch page
  // fault each on this host).
  const uint64_t build_ns = extra ? 0 : thread_cpu_ns() - cpu0;
  const uint32_t cap = next_delta_capacity(b.cardinality, L.max_capacity, build_ns, L.compact_permille, b.keys.size());
  const bool grows = cap > view->act[0]->capacity;
  uint64_t new_delta = 0;
  L.seg.transact([&](ControlTxn& txn) {
    require_live(L);
    txn.charge_to(L.region);  // check() reports these extents as leaked if the set is dropped without them
    // prev = the head of the whole active chain we folded (its links follow).
    uint64_t snap = allocate_version(txn, b, gen, view->snap->delta_off, cap, grows, &new_delta);
    txn.store_u64(&L.hdr->staged_from, from);
    txn.store_u64(&L.hdr->staged_snap, snap);
  });
  prefault(L.base + new_delta, delta_bytes(cap));
  SHMF_KILL_POINT("roaring.compact.after_build");
  uint64_t staged = L.hdr->staged_snap;
  publish_locked(L, from, staged);
  SHMF_KILL_POINT("roaring.compact.after_publish");
  retire_locked(L, from);
  view.reset();
  current_view(Lp);  // move this thread's cached view to the new version: we no longer pin the old one
  SHMF_KILL_POINT("roaring.compact.before_free");
  reclaim_locked(L);
  return true;
}

enum class LinkResult { kLinked, kNotNeeded, kChainFull };

// Links a newer table (twice the tail's capacity, at most the maximum) after
// the tail of the current version's active chain. O(the new table): one
// allocation of zeroed memory, no rebuild. Caller holds link_claim (not the
// compaction claim: a compaction may be building meanwhile; a link stored
// after it published lands in the chain the new version reads as previous,
// and whoever wrote into it re-checks `current` and writes again).
LinkResult link_locked(RoaringLocal& L) {
  recover_link_locked(L);
  std::shared_ptr<View> view = claimed_view(L);
  const uint32_t n = view->chain();
  DeltaHeader* tail = view->act[n - 1];
  if (tail->fill.load() < delta_trigger(tail->capacity, L.compact_permille)) return LinkResult::kNotNeeded;  // seq_cst: someone linked or compacted first
  if (n >= kMaxChain) return LinkResult::kChainFull;
  const uint64_t tail_off = static_cast<uint64_t>(reinterpret_cast<std::byte*>(tail) - L.base);
  const uint32_t cap = link_capacity(tail->capacity, L.max_capacity);
  uint64_t d = 0;
  L.seg.transact([&](ControlTxn& txn) {
    require_live(L);
    txn.charge_to(L.region);
    d = txn.allocate(delta_bytes(cap));
    delta_init(reinterpret_cast<DeltaHeader*>(L.base + d), cap);
    txn.store_u64(&L.hdr->staged_link_onto, tail_off);
    txn.store_u64(&L.hdr->staged_link, d);
  });
  prefault(L.base + d, delta_bytes(cap));
  SHMF_KILL_POINT("roaring.link.after_alloc");  // committed, not linked: the next claimer frees it
  tail->next.store(d);  // seq_cst: THE link (after the header and the commit; pairs with writers' re-check)
  SHMF_KILL_POINT("roaring.link.after_link");   // linked, staging not cleared: the next claimer clears it
  L.seg.transact([&](ControlTxn& txn) {
    require_live(L);
    txn.store_u64(&L.hdr->staged_link, 0);
    txn.store_u64(&L.hdr->staged_link_onto, 0);
    txn.store_u64(&L.hdr->links, L.hdr->links + 1);
  });
  return LinkResult::kLinked;
}

void check_usable(const std::shared_ptr<RoaringLocal>& L) {
  if (!L->live_region()) throw Error(ErrorCode::kDropped, "Roaring set " + quoted(L->region.name) + " was dropped");
  if (L->fork_epoch != g_fork_epoch.load(std::memory_order_relaxed))  // relaxed: process-local
    throw Error(ErrorCode::kForked, "Roaring set " + quoted(L->region.name) +
                                        ": handle inherited across fork(); call Segment::open and RoaringSet::open in the child");
}

// Link if the chain has room (under link_claim), else (when may_compact)
// compact (under the compaction claim). True when the caller should retry
// its write (a table was linked, or someone else's link or publish made room).
bool grow(const std::shared_ptr<RoaringLocal>& L, bool may_compact) {
  check_usable(L);
  if (!try_link_claim(*L)) return false;
  LinkResult r;
  {
    LinkGuard guard{*L};
    r = link_locked(*L);
  }
  if (r != LinkResult::kChainFull) return true;
  if (!may_compact || !try_claim(*L)) return false;
  ClaimGuard guard{*L};
  return compact_locked(L, nullptr);
}

}  // namespace

namespace {
// A table a dead linker left staged: take its link claim over and free or keep the table now.
void recover_dead_link(RoaringLocal& L) {
  if (L.hdr->staged_link == 0 || !try_link_claim(L)) return;
  LinkGuard guard{L};
  recover_link_locked(L);
}
}  // namespace

bool compact_impl(const std::shared_ptr<RoaringLocal>& L, const roaring_bitmap_t* extra) {
  check_usable(L);
  recover_dead_link(*L);
  if (!try_claim(*L)) return false;
  ClaimGuard guard{*L};
  return compact_locked(L, extra);
}

bool maintain_impl(const std::shared_ptr<RoaringLocal>& L) {
  check_usable(L);
  recover_dead_link(*L);
  View* v = current_view(L);
  if (!v) throw Error(ErrorCode::kCorrupt, "Roaring set " + quoted(L->region.name) + ": published snapshot is unreadable; run 'shmtool check'");
  const uint32_t n = v->chain();
  const bool due = n > 1 || v->act[0]->fill.load() >= delta_trigger(v->act[0]->capacity, L->compact_permille) ||
                   L->hdr->staged_snap != 0 || L->hdr->staged_link != 0;  // a dead claimer's work to finish
  if (!try_claim(*L)) return false;
  ClaimGuard guard{*L};
  if (due) return compact_locked(L, nullptr);
  reclaim_locked(*L);
  return false;
}

bool grow_chain(const std::shared_ptr<RoaringLocal>& L) noexcept {
  try {
    return grow(L, L->auto_compact);
  } catch (...) {
    return false;  // the write is already durable in the delta; the next one retries
  }
}

// A writer found the tail full: link or compact, or wait (bounded) for the
// live claimer to link or publish. True when the caller should retry.
RoaringStatus make_room(const std::shared_ptr<RoaringLocal>& L, uint64_t seen_snap, const DeltaHeader* seen_tail) noexcept {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  SlowWait wait("Roaring delta full, waiting for the compaction claim");
  while (std::chrono::steady_clock::now() < deadline) {
    if (L->hdr->current.load() != seen_snap || seen_tail->next.load() != 0)  // seq_cst: a publish or a link
      return RoaringStatus::kOk;
    try {
      // The last resort, in either mode: the whole chain is full (15x the
      // head's capacity since the last compaction) and nobody compacted.
      if (grow(L, true)) return RoaringStatus::kOk;
    } catch (const Error& e) {
      // kBusy: every retired-snapshot slot is pinned by a view some thread or
      // process still holds (one descheduled thread keeps its process's whole
      // [lo, hi] pinned). Views move on with their holders' next call: wait
      // for that within the deadline, as for a live claimer, instead of
      // answering kFull at once (CI's ThreadsShareOneHandle: 440 adds
      // answered kFull in one burst on a loaded machine).
      switch (e.code()) {
        case ErrorCode::kBusy: break;
        case ErrorCode::kNoSpace: return RoaringStatus::kNoSpace;
        case ErrorCode::kDropped: return RoaringStatus::kDropped;
        case ErrorCode::kForked: return RoaringStatus::kForked;
        default: return RoaringStatus::kFull;
      }
    } catch (...) {
      return RoaringStatus::kNoSpace;  // std::bad_alloc
    }
    wait.start();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  note_wait_expired("Roaring delta full, waiting for the compaction claim");
  return RoaringStatus::kBusy;
}

}  // namespace shmfilter::internal::roaring
