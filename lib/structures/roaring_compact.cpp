// lib/structures/roaring_compact.cpp: RoaringSet's compaction (fold the deltas
// into a new frozen snapshot, publish it with one offset swap), the recovery
// of a compaction a dead process left staged, and the reclamation of retired
// snapshots no reader can still see. Protocol: docs/roaring.md.
#include <roaring/roaring.h>

#include <sys/mman.h>
#include <time.h>

#include <chrono>
#include <thread>

#include "base/wait_stats.h"
#include "base/kill_point.h"
#include "structures/roaring_local.h"

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

// Fills a fresh snapshot extent at `snap` (64 + frozen bytes) and a delta extent.
void write_version(std::byte* base, uint64_t snap, const roaring_bitmap_t* bm, size_t frozen, uint64_t gen,
                   uint64_t delta, uint64_t prev_delta, uint32_t capacity) {
  auto* sh = reinterpret_cast<SnapHeader*>(base + snap);
  sh->magic = kSnapMagic;
  sh->generation = gen;
  sh->frozen_bytes = frozen;
  sh->cardinality = roaring_bitmap_get_cardinality(bm);
  sh->delta_off = delta;
  sh->prev_delta_off = prev_delta;
  roaring_bitmap_frozen_serialize(bm, reinterpret_cast<char*>(base + snap + sizeof(SnapHeader)));
  delta_init(reinterpret_cast<DeltaHeader*>(base + delta), capacity);
}

void apply_delta(roaring_bitmap_t* b, DeltaHeader* d) {
  delta_for_each(d, [&](uint32_t v, Op op) {
    if (op == Op::kAdd)
      roaring_bitmap_add(b, v);
    else if (op == Op::kRemove)
      roaring_bitmap_remove(b, v);
  });
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
    if (!unread(L, p.generation == 0 ? 0 : p.generation - 1, p.generation)) continue;
    L.seg.transact([&](ControlTxn& txn) {
      require_live(L);
      PendingFree& e = L.hdr->pending[i];
      if (e.snap_off != p.snap_off) return;
      txn.free(e.snap_off);
      if (e.delta_off) txn.free(e.delta_off);
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
  auto* old = reinterpret_cast<const SnapHeader*>(L.base + from);
  L.seg.transact([&](ControlTxn& txn) {
    require_live(L);
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
  // Stale (should not happen under the claim): discard.
  auto* sh = reinterpret_cast<const SnapHeader*>(L.base + staged);
  L.seg.transact([&](ControlTxn& txn) {
    require_live(L);
    if (L.in_segment(sh->delta_off, 64)) txn.free(sh->delta_off);
    txn.free(staged);
    txn.store_u64(&L.hdr->staged_snap, 0);
    txn.store_u64(&L.hdr->staged_from, 0);
  });
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
  std::shared_ptr<View> view = L.make_view();  // pins the version we build on
  if (!view) throw Error(ErrorCode::kCorrupt, "Roaring set " + quoted(L.region.name) + ": published snapshot is unreadable; run 'shmtool check'");
  BitmapPtr b(roaring_bitmap_copy(view->bm));
  if (!b.p) throw Error(ErrorCode::kNoSpace, "out of process memory copying the snapshot");
  if (view->prev) apply_delta(b.p, view->prev);
  apply_delta(b.p, view->delta);
  if (extra) {
    roaring_bitmap_or_inplace(b.p, extra);
    // Removes in the active delta would override the merged values: turn the
    // ones we merged into adds (a CAS on the exact word: a newer write wins).
    std::atomic<uint64_t>* slots = delta_slots(view->delta);
    for (uint32_t i = 0; i < view->delta->capacity; ++i) {
      uint64_t w = slots[i].load();
      if (w != 0 && word_op(w) == Op::kRemove && roaring_bitmap_contains(extra, word_value(w)))
        slots[i].compare_exchange_strong(w, make_word(word_value(w), Op::kAdd));
    }
  }
  roaring_bitmap_run_optimize(b.p);
  roaring_bitmap_shrink_to_fit(b.p);
  size_t frozen = roaring_bitmap_frozen_size_in_bytes(b.p);
  uint64_t from = view->snap_off;
  // The next active delta grows (or shrinks) with the set and with what a
  // compaction of it costs: next_delta_capacity (roaring_impl.h).
  const uint64_t card = roaring_bitmap_get_cardinality(b.p);
  const uint32_t cap = next_delta_capacity(card, L.max_capacity, thread_cpu_ns() - cpu0, L.compact_permille);
  const bool grows = cap > view->delta->capacity;
  uint64_t new_delta = 0;
  L.seg.transact([&](ControlTxn& txn) {
    require_live(L);
    txn.charge_to(L.region);  // check() reports these extents as leaked if the set is dropped without them
    uint64_t snap = txn.allocate(sizeof(SnapHeader) + frozen);
    if (grows) SHMF_KILL_POINT("roaring.delta.grow");  // inside the transaction: the recovery rolls both allocations back
    uint64_t delta = txn.allocate(delta_bytes(cap));
    new_delta = delta;
    write_version(L.base, snap, b.p, frozen, view->gen + 1, delta, view->snap->delta_off, cap);
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

}  // namespace

bool compact_impl(const std::shared_ptr<RoaringLocal>& L, const roaring_bitmap_t* extra) {
  if (!L->live_region()) throw Error(ErrorCode::kDropped, "Roaring set " + quoted(L->region.name) + " was dropped");
  if (L->fork_epoch != g_fork_epoch.load(std::memory_order_relaxed))  // relaxed: process-local
    throw Error(ErrorCode::kBusy, "Roaring set " + quoted(L->region.name) +
                                      ": handle inherited across fork(); call Segment::open and RoaringSet::open in the child");
  if (!try_claim(*L)) return false;
  ClaimGuard guard{*L};
  return compact_locked(L, extra);
}

// A writer found the delta full: compact, or wait (bounded: 5 s) for the
// live claimer to publish or for pinned retired snapshots to be released.
// True when the caller should retry.
bool make_room(const std::shared_ptr<RoaringLocal>& L, uint64_t seen) noexcept {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  SlowWait wait("Roaring delta full, waiting for the compaction claim");
  while (std::chrono::steady_clock::now() < deadline) {
    if (L->hdr->current.load() != seen) return true;
    try {
      if (compact_impl(L, nullptr)) return true;
    } catch (const Error& e) {
      // kBusy: every retired-snapshot slot is pinned by a view some thread or
      // process still holds (one descheduled thread keeps its process's whole
      // [lo, hi] pinned). Views move on with their holders' next call: wait
      // for that within the deadline, as for a live claimer, instead of
      // answering kFull at once (CI's ThreadsShareOneHandle: 440 adds
      // answered kFull in one burst on a loaded machine).
      if (e.code() != ErrorCode::kBusy) return false;
    } catch (...) {
      return false;
    }
    wait.start();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  note_wait_expired("Roaring delta full, waiting for the compaction claim");
  return false;
}

}  // namespace shmfilter::internal::roaring
