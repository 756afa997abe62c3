// lib/structures/window/window_rotation.cpp: rotation and the tables of a Window: the
// bucket claim, spare preparation (maintain() or an inline preparer), retiring
// expired buckets, table allocation and overflow growth under the segment lock.
//
// Protocol summary (docs/CONCURRENCY.md "Window" has the table):
//  - rotation to bucket E: CAS slot[E % S].tag 0 -> E + 1 (the spare's fresh table;
//    one winner, nobody waits), then a CAS-max of header.epoch to E + 1 by anyone who
//    sees the tag claimed. A winner killed between the two leaves the tag claimed;
//    the next caller raises the epoch.
//  - no spare ready (maintain() did not run): the caller prepares the slot under the
//    segment lock (free the expired table, allocate a fresh one; undo-logged), then claims.
//  - expiry: maintain() retires slots whose bucket left every window (tag -> kRetired,
//    table -> 0, extents freed: quarantined until the calls in flight at the free returned,
//    so a reader still inside a query of that table stays safe; docs/CONCURRENCY.md
//    "Reader announcements"). Every data-plane call is also a quiescent point of its
//    process at its start (one call in 256, see kQuiesceEvery) for builds without them.
//  - overflow layers (docs/window.md "Overload"): each allocated under the segment lock when
//    the table needs it, published by a release store after the commit (pending_overflow, or
//    a kBloom dir's pending, keeps a committed, unpublished extent owned).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "structures/window/window_ops.h"

namespace shmfilter::internal::window_ops {

// Main-table bytes and geometry for `capacity`.
uint64_t main_bytes_for(const WindowHeader* h, uint64_t capacity, uint64_t* geometry) {
  if (h->variant == wi::kVariantStamped) {  // a bucket's table is its counters: the pairs are in the shared table
    *geometry = 0;
    return 0;
  }
  if (h->variant == wi::kVariantBloom) {
    bl::Sizing z;
    if (!bl::size_blocked(capacity, h->main_error, z)) throw Error(ErrorCode::kInvalidArgument, "bucket capacity too large");
    *geometry = z.bits / bl::kBlockBits;
    return wi::bloom_main_bytes(*geometry);
  }
  uint32_t l2 = ck::log2_buckets_for(capacity);
  if (l2 > 32) throw Error(ErrorCode::kInvalidArgument, "bucket capacity too large");
  *geometry = l2;
  return wi::cuckoo_main_bytes(l2, h->k_main <= 8 ? 8 : 16);
}
uint64_t table_bytes_for(const WindowHeader* h, uint64_t capacity) {
  uint64_t g;
  return wi::main_offset_in_table(h->space_table) + main_bytes_for(h, capacity, &g);
}

uint64_t main_bytes_of(const WindowHeader* h, const TableHead* t) {
  if (h->variant == wi::kVariantStamped) return 0;
  return h->variant == wi::kVariantBloom ? wi::bloom_main_bytes(t->geometry)
                                         : wi::cuckoo_main_bytes(static_cast<uint32_t>(t->geometry), h->k_main <= 8 ? 8 : 16);
}

// kCuckoo: the sub-filter header at the start of the (zeroed) main table.
void init_cuckoo_main(std::byte* base, const WindowHeader* h, uint64_t off) {
  auto* head = reinterpret_cast<TableHead*>(base + off);
  const uint64_t moff = wi::main_offset_in_table(h->space_table);
  // A layered table (every table this build makes): up to kLayeredMaxSubs sub-filters and a short
  // BFS (a full sub-filter sends the insert to the next one instead of a long kick chain).
  const bool layered = (head->flags.load(std::memory_order_relaxed) & wi::kTableLayered) != 0;  // relaxed: unpublished
  ck::init_header(reinterpret_cast<ck::Header*>(base + off + moff), h->k_main, layered ? wi::kLayeredMaxPath : kMaxPath,
                  /*expansion=*/2, /*max_subs=*/layered ? wi::kLayeredMaxSubs : 2,
                  h->seed, head->capacity, h->p1, main_bytes_of(h, head), static_cast<uint32_t>(head->geometry),
                  off + moff + sizeof(ck::Header));
}

// Allocates and initialises one table (fresh zeroed memory, unreachable until a slot names it).
uint64_t alloc_table(ControlTxn& txn, WindowHeader* h, uint64_t capacity) {
  uint64_t geom = 0;
  uint64_t mb = main_bytes_for(h, capacity, &geom);
  const uint64_t moff = wi::main_offset_in_table(h->space_table);
  uint64_t off = txn.allocate(moff + mb);
  SHMF_KILL_POINT("window.table.after_allocate");
  std::byte* t = txn.base() + off;
  auto* head = reinterpret_cast<TableHead*>(t);
  head->capacity = capacity;
  head->geometry = geom;
  head->check_shift = wi::check_shift_for(capacity);
  head->flags.store(wi::kTableAllChecked | wi::kTableLayered, std::memory_order_relaxed);  // relaxed: unreachable until a slot names it
  if (h->variant == wi::kVariantCuckoo) init_cuckoo_main(txn.base(), h, off);
  return off;
}

// kStamped: the one table every bucket shares (TableHead for the overflow bookkeeping, the
// counters row it does not use, the cuckoo header and sub-filter 0 of 16-bit stamped lanes in
// 2^16-bucket chunks). geometry = its bucket count.
uint64_t shared_main_bytes(uint64_t capacity, uint64_t* buckets) {
  const ck::Geometry g = internal::stamped::table_geometry(capacity);
  if (g.buckets() > ck::kMaxBuckets) throw Error(ErrorCode::kInvalidArgument, "window capacity too large for one table");
  *buckets = g.buckets();
  return ck::region_bytes_for(g, internal::stamped::kLaneBits);
}
uint64_t alloc_shared(ControlTxn& txn, WindowHeader* h, uint64_t capacity) {
  uint64_t buckets = 0;
  const uint64_t mb = shared_main_bytes(capacity, &buckets);
  const uint64_t moff = wi::main_offset_in_table(h->space_table);
  const uint64_t off = txn.allocate(moff + mb);
  auto* head = reinterpret_cast<TableHead*>(txn.base() + off);
  head->capacity = capacity;
  head->geometry = buckets;
  head->check_shift = wi::check_shift_for(capacity);
  head->flags.store(wi::kTableLayered, std::memory_order_relaxed);  // relaxed: unreachable until create publishes
  ck::init_header(reinterpret_cast<ck::Header*>(txn.base() + off + moff), internal::stamped::kFpBits, wi::kStampedMaxPath,
                  /*expansion=*/2, wi::kStampedMaxSubs, h->seed, capacity, h->p1, mb, ck::geometry_of_buckets(buckets),
                  off + moff + sizeof(ck::Header), internal::stamped::kLaneBits);
  return off;
}
// Sub-filter j >= 1 of the shared table: sub 1 a quarter of sub 0 (a window just past its
// capacity grows by a quarter, not by a second table), each later one twice the last: 1/4, 1/2,
// 1, 2, 4 x sub 0 (7.75x past it: a one-day window at 8x its expected day still has room).
ck::Geometry stamped_sub_geometry(const ck::SubDesc& prev, uint32_t j) {
  if (j == 1) return ck::geometry_of_buckets(std::max<uint64_t>(2, ck::sub_buckets(prev) / 4));
  return ck::expansion_geometry(prev, 1, /*one_chunk=*/false);
}

// Allocates a table whose body is zeroed later, in chunks (prep_cursor > 0): only the
// TableHead is written here. Unreachable until the transaction commits its slot store.
uint64_t start_table(ControlTxn& txn, WindowHeader* h, uint64_t capacity) {
  uint64_t geom = 0;
  uint64_t mb = main_bytes_for(h, capacity, &geom);
  const uint64_t moff = wi::main_offset_in_table(h->space_table);
  uint64_t off = txn.allocate_unzeroed(moff + mb);
  SHMF_KILL_POINT("window.table.after_allocate");
  std::byte* t = txn.base() + off;
  std::memset(t, 0, sizeof(TableHead));  // memory of this transaction: unlogged
  auto* head = reinterpret_cast<TableHead*>(t);
  head->capacity = capacity;
  head->geometry = geom;
  head->check_shift = wi::check_shift_for(capacity);
  head->flags.store(wi::kTableAllChecked | wi::kTableLayered, std::memory_order_relaxed);  // relaxed: unreachable until commit
  head->prep_cursor.store(sizeof(TableHead), std::memory_order_relaxed);  // relaxed: unreachable until commit
  return off;
}

// Pre-faults [p, p + n) writable in this process (one madvise instead of a fault per
// page; Linux >= 5.14). Advice only: on an older kernel the memset that follows faults.
void populate_write(std::byte* p, uint64_t n) noexcept {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t a = reinterpret_cast<uint64_t>(p) & ~(page - 1);
  uint64_t b = (reinterpret_cast<uint64_t>(p) + n + page - 1) & ~(page - 1);
  if (b > a) (void)madvise(reinterpret_cast<void*>(a), b - a, MADV_POPULATE_WRITE);
}

// Frees a table and every overflow layer it owns (published or pending): exactly the extents
// table_problem validates and lists (kBloom: layer 1 and, in a layered table, the dir's layers and
// its pending one; kCuckoo: sub-filters 1.. and the pending one), each once. A table that does not
// validate frees nothing: what nothing vouches for is left to check --repair (the trust rule).
void free_table(ControlTxn& txn, const WindowExtents& x, const WindowHeader* h, uint64_t off, bool in_preparation) {
  std::vector<uint64_t> layers;
  if (!table_problem(x, h, off, in_preparation, &layers).empty()) return;
  for (const uint64_t o : layers) txn.free(o);
  txn.free(off);
}

uint64_t layer_bytes_of(std::byte* base, const WindowHeader* h, const TableHead* t, uint32_t* layers) noexcept {
  uint64_t bytes = 0;
  uint32_t n = 0;
  if (h->variant == wi::kVariantCuckoo) {
    auto* ch = reinterpret_cast<const ck::Header*>(reinterpret_cast<const std::byte*>(t) + wi::main_offset_in_table(h->space_table));
    const uint32_t subs = std::min<uint32_t>(ck::sub_count_acquire(ch), ck::kMaxSubs);  // acquire: the subs it publishes
    for (uint32_t j = 1; j < subs; ++j, ++n)
      bytes += ck::sub_bytes(ch->subs[j].log2_buckets, ch->subs[j].log2_stripes, ch->lane_bits);
  } else {
    const uint64_t ovf = t->overflow.load(std::memory_order_acquire);  // acquire: its geometry
    if (ovf != 0) {
      const bool layered = (t->flags.load(std::memory_order_relaxed) & wi::kTableLayered) != 0;  // relaxed: immutable
      bytes += t->overflow_geometry * 64 + (layered ? sizeof(wi::BloomLayerDir) : 0);
      ++n;
      if (layered) {
        const wi::BloomLayerDir* d = bloom_dir(base, t, ovf);
        const uint64_t c = std::min<uint64_t>(d->count.load(std::memory_order_acquire), wi::kBloomMaxExtra);  // acquire
        for (uint64_t j = 0; j < c; ++j, ++n) bytes += d->layer[j].blocks * 64;
      }
    }
  }
  if (layers) *layers = n;
  return bytes;
}

}  // namespace shmfilter::internal::window_ops

namespace shmfilter {

// ---------------------------------------------------------------------------
// Rotation and spare preparation.

// Capacity of the next bucket's table (see window_ops.h and docs/window.md).
uint64_t WindowOps::desired_capacity(const Window& w, int64_t e) noexcept {
  WindowHeader* h = hdr(w);
  const wi::Geometry& G = geo(w);
  uint64_t want = G.expected;
  for (uint32_t age = 0; age < G.retention; ++age) {
    TableHead* t = table_for(w.base_, G, h, e - static_cast<int64_t>(age));
    if (t == nullptr) continue;
    const uint64_t d = table_distinct(t);
    if (d <= G.expected) continue;  // a day within `expected` asks for nothing more
    // What was measured: 1.5 x the count; a bucket that fit its table asks for no more than that
    // table (so the size follows the measured days down once the big ones left the window,
    // instead of every day keeping the grown size: the ratchet of an earlier build).
    // min(): the counters are segment bytes; a double >= 2^64 converted to uint64_t is undefined.
    uint64_t ask =
        static_cast<uint64_t>(std::min(std::ceil(static_cast<double>(d) * wi::kHeadroom), 0x1p63));
    if (d <= t->capacity) ask = std::min(ask, t->capacity);
    want = std::max(want, ask);
  }
  return want;
}

// Under the lock: start a spare in slot s (tag kRetired, a table in chunked preparation),
// freeing what it held. Only for slots whose tag is retired or expired data (never a live
// bucket). A slot already holding a spare in preparation keeps it (prepare_chunk finishes
// it). The caller commits this transaction before prepare_chunk publishes the slot, so a
// rollback can never take back a tag that lock-free rotators may already have claimed.
void WindowOps::prepare_locked(const Window& w, ControlTxn& txn, BucketSlot& s, uint64_t capacity) {
  WindowHeader* h = hdr(w);
  txn.charge_to(w.identity());  // check() reports the tables as leaked if the window is dropped without them
  if (s.tag.load(std::memory_order_relaxed) != wi::kRetired) {  // relaxed: we hold the lock; only rotators CAS 0
    txn.store_u64(as_u64(&s.tag), wi::kRetired);
    std::atomic_thread_fence(std::memory_order_release);  // the retired tag is visible before the table changes
  } else if (s.table != 0) {
    return;  // a spare in preparation (or prepared, not yet published): prepare_chunk continues it
  }
  uint64_t old = s.table;
  if (old != 0) {
    txn.store_u64(&s.table, 0);
    free_table(txn, extents(w), h, old, /*in_preparation=*/false);  // expired data (a retired slot's spare returned above)
  }
  SHMF_KILL_POINT("window.prepare.after_free");
  uint64_t off = start_table(txn, h, capacity);
  txn.store_u64(&s.table, off);
}

// Under the lock: zeroes and pre-faults up to max_bytes more of slot s's spare (tag kRetired,
// prep_cursor > 0); once all of it is, initialises it (kCuckoo header) and publishes it
// (prep_cursor 0, then tag 0). Every store here is unlogged (the extent was committed
// earlier): a rollback of this transaction undoes nothing, and a chunk killed half-way
// is redone from the cursor. Returns the bytes zeroed.
uint64_t WindowOps::prepare_chunk(const Window& w, BucketSlot& s, uint64_t max_bytes) {
  WindowHeader* h = hdr(w);
  // relaxed: under the lock, only rotators touch tags, and only a tag 0.
  if (s.tag.load(std::memory_order_relaxed) != wi::kRetired || s.table == 0) return 0;
  const uint64_t off = s.table;
  auto* t = reinterpret_cast<TableHead*>(w.base_ + off);
  uint64_t cur = t->prep_cursor.load(std::memory_order_relaxed);  // relaxed: only lock holders write it
  uint64_t done = 0;
  if (cur != 0) {
    const uint64_t total = wi::main_offset_in_table(h->space_table) + main_bytes_of(h, t);
    if (cur < sizeof(TableHead) || cur > total) cur = sizeof(TableHead);  // untrusted bytes: redo it all
    const uint64_t end = total - cur > max_bytes ? cur + max_bytes : total;
    populate_write(w.base_ + off + cur, end - cur);
    std::memset(w.base_ + off + cur, 0, end - cur);
    SHMF_KILL_POINT("window.prepare.mid_chunk");
    done = end - cur;
    if (end < total) {
      t->prep_cursor.store(end, std::memory_order_release);  // release: orders the zeroes first (for a checker)
      return done;
    }
    if (h->variant == wi::kVariantCuckoo) init_cuckoo_main(w.base_, h, off);
    t->prep_cursor.store(0, std::memory_order_release);  // release: the table is complete
  }
  SHMF_KILL_POINT("window.prepare.before_ready");
  // release: the zeroed, initialised table is visible to whoever acquires the tag (rotators).
  // Unlogged on purpose: a claimed tag must never be rolled back.
  s.tag.store(0, std::memory_order_release);
  return done;
}

// Makes bucket e claimable and claims it. False: no table could be had.
bool WindowOps::advance(const Window& w, int64_t e, WindowStatus* why) noexcept {
  WindowHeader* h = hdr(w);
  BucketSlot& s = wi::slot_table(h)[static_cast<uint64_t>(e) % geo(w).slots];
  const uint64_t want = static_cast<uint64_t>(e) + 1;
  uint64_t t = s.tag.load(std::memory_order_acquire);  // acquire: pairs with the preparer's commit
  if (t == want) {
    raise_epoch(h, want);
    return true;
  }
  if (t == 0) {
    // seq_cst (includes acq_rel: acquire the fresh table; release our claim to whoever reads the
    // tag): the rotation order (window_ops.h raise_epoch).
    if (s.tag.compare_exchange_strong(t, want, std::memory_order_seq_cst, std::memory_order_seq_cst)) {
      h->rotations.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
      SHMF_KILL_POINT("window.rotate.after_claim");
      raise_epoch(h, want);
      return true;
    }
    if (t == want) {
      raise_epoch(h, want);
      return true;
    }
  }
  if (t != wi::kRetired && t != 0 && t > want) {  // the slot holds a newer bucket: our clock is behind
    if (why) *why = WindowStatus::kBusy;
    return false;
  }
  // No fresh table here: expired data or retired. Prepare it ourselves (rare: maintain() did not run).
  uint64_t cap = desired_capacity(w, e - 1);
  bool claimed = false;
  try {
    // 1. (committed on its own) free the expired table and start a spare, unless one is in preparation.
    const_cast<Segment&>(w.seg_).transact([&](ControlTxn& txn) {
      uint64_t t2 = s.tag.load(std::memory_order_relaxed);  // relaxed: under the lock (rotators only CAS 0)
      if (t2 == want || t2 == 0 || (t2 != wi::kRetired && t2 > want)) return;
      require_sound(w);  // under the lock, before a table is freed or started: kCorrupt
      prepare_locked(w, txn, s, cap);
      h->inline_allocations.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
    });
    // 2. finish it (all of what is left: this caller needs the bucket now), publish, claim.
    const_cast<Segment&>(w.seg_).transact([&](ControlTxn&) {
      uint64_t t2 = s.tag.load(std::memory_order_relaxed);  // relaxed: under the lock (rotators only CAS 0)
      if (t2 == want || (t2 != 0 && t2 != wi::kRetired && t2 > want)) return;
      if (t2 == wi::kRetired) {
        require_sound(w);  // under the lock, before the spare is zeroed: kCorrupt
        prepare_chunk(w, s, ~uint64_t{0});
      }
      // Claim under the lock, so that maintain() (which may take back a fresh spare, also
      // under the lock) cannot take it between our preparation and our claim. A CAS, not
      // a logged store: lock-free rotators may claim too, and a claim is never undone.
      uint64_t zero = 0;
      // seq_cst: as the lock-free claim above (the rotation order).
      if (s.tag.compare_exchange_strong(zero, want, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        h->rotations.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
        claimed = true;
      }
    });
  } catch (const Error& err) {
    // A Segment inherited across fork() refuses the lock (its token is the parent's).
    if (why)
      *why = w.seg_.owner_token() == 0           ? WindowStatus::kForked
             : err.code() == ErrorCode::kDropped ? WindowStatus::kDropped
             : err.code() == ErrorCode::kCorrupt ? WindowStatus::kCorrupt
                                                 : WindowStatus::kNoSpace;
    return false;
  } catch (...) {
    if (why) *why = WindowStatus::kNoSpace;  // std::bad_alloc
    return false;
  }
  if (claimed) {
    SHMF_KILL_POINT("window.rotate.after_claim");
    raise_epoch(h, want);
  }
  return true;  // the caller (re)reads the slot
}

void WindowOps::map_spare_ahead(const Window& w) noexcept {
  WindowHeader* h = hdr(w);
  const wi::Geometry& G = geo(w);
  const int64_t e = read_epoch(w);
  const BucketSlot& s = wi::slot_table(h)[static_cast<uint64_t>(e + 1) % G.slots];
  if (s.tag.load(std::memory_order_acquire) != 0) return;  // acquire: the ready table (not yet claimed)
  const uint64_t off = std::atomic_ref<const uint64_t>(s.table).load(std::memory_order_relaxed);  // relaxed: a hint
  if (off < G.data_lo || off % 64 != 0 || off > G.map_limit || G.map_limit - off < G.main_offset + 64 ||
      off + sizeof(TableHead) > w.seg_.size())
    return;
  if (off != w.prefault_table_) {
    w.prefault_table_ = off;
    w.prefault_done_ = 0;
  }
  const auto* t = reinterpret_cast<const TableHead*>(w.base_ + off);
  if (t->geometry > (G.variant == wi::kVariantBloom ? bl::kMaxLayerBlocks : 32)) return;  // a hint: bytes checked later
  const uint64_t total = G.main_offset + (G.variant == wi::kVariantBloom
                                              ? wi::bloom_main_bytes(t->geometry)
                                              : wi::cuckoo_main_bytes(static_cast<uint32_t>(t->geometry), G.k_main <= 8 ? 8 : 16));
  if (w.prefault_done_ >= total || total > w.seg_.size() - off) return;
  const uint64_t n = std::min(kMapAhead, total - w.prefault_done_);
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t a = reinterpret_cast<uint64_t>(w.base_ + off + w.prefault_done_) & ~(page - 1);
  uint64_t b = (reinterpret_cast<uint64_t>(w.base_ + off + w.prefault_done_ + n) + page - 1) & ~(page - 1);
  (void)madvise(reinterpret_cast<void*>(a), b - a, MADV_POPULATE_READ);  // advice: a failure leaves faults to do it
  w.prefault_done_ += n;
}

// ---- overflow layers (both variants) ------------------------------------------
template <class Done, class Published, class Make>
uint64_t WindowOps::commit_layer(const Window& w, TableHead* t, uint64_t* pending, Done&& done, Published&& published,
                                 Make&& make) noexcept {
  uint64_t got = 0;
  try {
    const_cast<Segment&>(w.seg_).transact([&](ControlTxn& txn) {
      if (done()) {
        got = kLayerDone;
        return;
      }
      got = *pending;
      if (got != 0 && !published(got)) return;  // committed by an allocator that died before publishing (never used)
      txn.charge_to(w.identity());
      got = make(txn);
      SHMF_KILL_POINT("window.overflow.after_allocate");
      txn.store_u64(pending, got);
    });
  } catch (...) {
    t->flags.fetch_or(wi::kTableOverflowFailed, std::memory_order_relaxed);  // relaxed: sticky diagnostic
    hdr(w)->overflow_failures.fetch_add(1, std::memory_order_relaxed);        // relaxed: statistic
    return 0;
  }
  return got;
}

// ---- kBloom ------------------------------------------------------------------
uint32_t WindowOps::bloom_layers(const Window& w, TableHead* t, uint32_t want, BloomLayerView* out) noexcept {
  WindowHeader* h = hdr(w);
  uint32_t n = bloom_layer_views(w.base_, geo(w), t, out);
  const uint32_t flags = t->flags.load(std::memory_order_relaxed);  // relaxed: kTableLayered immutable; the failed bit sticky
  const uint32_t most = (flags & wi::kTableLayered) ? wi::kBloomMaxLayers : 1;
  if (n >= want || n >= most || (flags & wi::kTableOverflowFailed)) return n;
  const bool layered = (flags & wi::kTableLayered) != 0;
  if (n == 0) {
    // Layer 1: the overflow extent (its lines, then a layered table's BloomLayerDir).
    const uint64_t got = commit_layer(
        w, t, &t->pending_overflow, [&] { return t->overflow.load(std::memory_order_acquire) != 0; },  // acquire: publisher
        [](uint64_t) { return false; },  // overflow 0 (not done): a pending extent is unpublished
        [&](ControlTxn& txn) -> uint64_t {
          bl::Sizing z;
          const double err = layered ? wi::bloom_layer_error(h->p1, 1) : h->overflow_error;
          if (!bl::size_blocked(t->capacity, err, z)) throw Error(ErrorCode::kInvalidArgument, "overflow size");
          const uint64_t lines = z.bits / 8;
          const uint64_t off = txn.allocate(lines + (layered ? sizeof(wi::BloomLayerDir) : 0));
          txn.store_u64(&t->overflow_geometry, z.bits / bl::kBlockBits);
          if (layered) {
            auto* d = reinterpret_cast<wi::BloomLayerDir*>(txn.base() + off + lines);  // fresh zeroed memory: plain store
            d->k1 = z.k;
          }
          return off;
        });
    SHMF_KILL_POINT("window.overflow.after_commit");
    if (got > kLayerDone) {
      uint64_t expect = 0;
      // release: the geometry (committed), the zeroed lines and the dir's k1 are visible with the offset. Never logged.
      t->overflow.compare_exchange_strong(expect, got, std::memory_order_release, std::memory_order_relaxed);
    }
    return bloom_layer_views(w.base_, geo(w), t, out);
  }
  // Layer n + 1 >= 2: named by the dir at the end of layer 1's extent.
  const uint64_t ovf = t->overflow.load(std::memory_order_acquire);  // acquire: its geometry (n > 0: published)
  wi::BloomLayerDir* d = bloom_dir(w.base_, t, ovf);
  const uint64_t c = n - 1;  // layers of d->layer[] this view holds
  const uint64_t got = commit_layer(
      w, t, &d->pending, [&] { return d->count.load(std::memory_order_acquire) > c; },  // acquire: publisher
      [&](uint64_t x) { return c > 0 && d->layer[c - 1].offset == x; },
      [&](ControlTxn& txn) -> uint64_t {
        bl::Sizing z;
        const uint32_t i = n + 1;
        if (!bl::size_blocked(wi::bloom_layer_capacity(t->capacity, i), wi::bloom_layer_error(h->p1, i), z) ||
            z.bits / bl::kBlockBits > bl::kMaxLayerBlocks)
          throw Error(ErrorCode::kInvalidArgument, "overflow layer size");
        const uint64_t off = txn.allocate(z.bits / 8);
        txn.store_u64(&d->layer[c].offset, off);
        txn.store_u64(&d->layer[c].blocks, z.bits / bl::kBlockBits);
        txn.store_u64(&d->layer[c].k, z.k);
        return off;
      });
  SHMF_KILL_POINT("window.layer.after_commit");
  if (got > kLayerDone) {
    uint64_t expect = c;
    // release: the layer's entry (committed) and its zeroed lines are visible with the count. Never logged.
    d->count.compare_exchange_strong(expect, c + 1, std::memory_order_release, std::memory_order_relaxed);
  }
  return bloom_layer_views(w.base_, geo(w), t, out);
}

// kCuckoo: the next sub-filter, under the table's cuckoo writer lock (so no other expansion
// runs): sub 1 has the main table's geometry, sub j >= 2 2^(j-1) x its buckets (a layered table;
// an older build's table stops at sub 1). Not after a failed allocation (kTableOverflowFailed):
// the insert then answers kFull at once instead of retrying the segment per call.
bool WindowOps::cuckoo_expand(void* ctx, ck::Header* ch) {
  auto* c = static_cast<ExpandCtx*>(ctx);
  const Window& w = *c->w;
  TableHead* t = c->t;
  const uint32_t n = ck::sub_count_acquire(ch);
  if (n >= std::min<uint32_t>(ck::load_relaxed(ch->max_subs), ck::kMaxSubs)) return false;
  if (t->flags.load(std::memory_order_relaxed) & wi::kTableOverflowFailed) return false;  // relaxed: sticky
  const ck::SubDesc d0 = ch->subs[0];
  const uint32_t l2 = n == 1 ? d0.log2_buckets : wi::cuckoo_sub_log2(d0.log2_buckets, n);
  const uint32_t ls = n == 1 ? d0.log2_stripes : ck::stripes_for(l2);
  const uint64_t bytes = ck::sub_bytes(l2, ls, ch->lane_bits);
  const uint64_t got = commit_layer(
      w, t, &t->pending_overflow, [] { return false; },  // we hold the writer lock: nobody else expands
      [&](uint64_t x) {
        for (uint32_t j = 1; j < n; ++j)
          if (ch->subs[j].offset == x) return true;
        return false;
      },
      [&](ControlTxn& txn) { return txn.allocate(bytes); });
  if (got <= kLayerDone) return false;
  if (n == 1) {
    SHMF_KILL_POINT("window.overflow.after_commit");
  } else {
    SHMF_KILL_POINT("window.layer.after_commit");
  }
  ch->subs[n] = ck::SubDesc{got, l2, static_cast<uint16_t>(ls), 0};  // invisible until sub_count is n + 1
  ck::A(ch->sub_count).store(n + 1, std::memory_order_release);   // release: subs[n] complete first
  if (n == 1) t->overflow.store(got, std::memory_order_release);   // release: stats/drop see it
  return true;
}

bool WindowOps::stamped_expand(void* ctx, ck::Header* ch) {
  auto* c = static_cast<ExpandCtx*>(ctx);
  const Window& w = *c->w;
  TableHead* t = c->t;
  const uint32_t n = ck::sub_count_acquire(ch);
  if (n >= std::min<uint32_t>(ck::load_relaxed(ch->max_subs), wi::kStampedMaxSubs)) return false;
  if (t->flags.load(std::memory_order_relaxed) & wi::kTableOverflowFailed) return false;  // relaxed: sticky
  const ck::Geometry g = stamped_sub_geometry(ch->subs[n - 1], n);
  if (g.buckets() > ck::kMaxBuckets) return false;
  const uint64_t bytes = ck::sub_bytes_of(g.buckets(), ck::stripes_for_buckets(g.buckets()), internal::stamped::kLaneBits);
  const uint64_t got = commit_layer(
      w, t, &t->pending_overflow, [] { return false; },  // we hold the writer lock: nobody else expands
      [&](uint64_t x) {
        for (uint32_t j = 1; j < n; ++j)
          if (ch->subs[j].offset == x) return true;
        return false;
      },
      [&](ControlTxn& txn) { return txn.allocate(bytes); });
  if (got <= kLayerDone) return false;
  SHMF_KILL_POINT("window.stamped.layer.after_commit");
  ch->subs[n] = ck::sub_desc(got, g);                            // invisible until sub_count is n + 1
  ck::A(ch->sub_count).store(n + 1, std::memory_order_release);  // release: subs[n] complete first
  if (n == 1) t->overflow.store(got, std::memory_order_release);  // release: stats/drop see it
  return true;
}

// ---------------------------------------------------------------------------
// maintain(): retire, prepare (control plane).

bool Window::maintain_step(uint64_t max_bytes) {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  seg_.quiesce();
  // Every table offset maintain follows is re-validated (segment bytes may have changed since
  // open): here, before the lock-free reads of the buckets' counters, and again under the
  // lock in each transaction below, before anything is freed, started or zeroed. kCorrupt.
  WindowOps::require_sound(*this);
  WindowHeader* h = WindowOps::hdr(*this);
  const int64_t e = WindowOps::read_epoch(*this);
  const uint64_t cap = WindowOps::desired_capacity(*this, e);
  BucketSlot* s = wi::slot_table(h);
  seg_.transact([&](ControlTxn& txn) {
    WindowOps::require_sound(*this);
    // 1. Retire every slot whose bucket left every window (bucket <= e - retention). A slot
    //    tagged kRetired that still names a table holds a spare in preparation: kept.
    for (uint32_t i = 0; i < g_.slots; ++i) {
      uint64_t t = s[i].tag.load(std::memory_order_relaxed);  // relaxed: under the lock; rotators only CAS 0
      bool expired = t != 0 && t != wi::kRetired && static_cast<int64_t>(t - 1) <= e - static_cast<int64_t>(g_.retention);
      if (!expired) continue;
      txn.store_u64(as_u64(&s[i].tag), wi::kRetired);
      std::atomic_thread_fence(std::memory_order_release);  // retired before the table changes
      uint64_t old = s[i].table;
      txn.store_u64(&s[i].table, 0);
      free_table(txn, WindowOps::extents(*this), h, old, /*in_preparation=*/false);
      SHMF_KILL_POINT("window.maintain.after_retire");
    }
    // 2. The current and the next bucket have a table (tag 0 = fresh, or already claimed) or a
    //    spare in preparation (started here, zeroed by the chunks below).
    for (int64_t x = e; x <= e + 1; ++x) {
      BucketSlot& b = s[static_cast<uint64_t>(x) % g_.slots];
      uint64_t t = b.tag.load(std::memory_order_relaxed);  // relaxed: under the lock
      if (t == wi::kRetired) {
        WindowOps::prepare_locked(*this, txn, b, cap);
        continue;
      }
      // A fresh spare sized far (> 1/3) from what the buckets measured: take it back (CAS: a
      // lock-free rotator may claim it right now) and start one of the right size. While a
      // bad day's count still grows this happens once per 1/3 of growth, not per call.
      if (t == 0 && x == e + 1 && b.table != 0 && g_.variant != wi::kVariantStamped) {  // kStamped: counters only
        uint64_t have = reinterpret_cast<TableHead*>(base_ + b.table)->capacity;
        if (have * 4 < cap * 3 || have * 3 > cap * 4) {
          uint64_t expect = 0;
          // acq_rel: we own the slot from here (no rotator can claim kRetired).
          if (b.tag.compare_exchange_strong(expect, wi::kRetired, std::memory_order_acq_rel, std::memory_order_relaxed)) {
            const uint64_t old = b.table;
            txn.store_u64(&b.table, 0);
            free_table(txn, WindowOps::extents(*this), h, old, /*in_preparation=*/false);
            WindowOps::prepare_locked(*this, txn, b, cap);
          }
        }
      }
    }
  });
  // 3. Zero and pre-fault the spares in chunks of at most kPrepareChunk, each chunk its own
  //    lock hold (a data-plane caller that needs the lock waits for one chunk at most), the
  //    current bucket's first; at most max_bytes in all.
  uint64_t budget = std::max<uint64_t>(max_bytes, 1);
  bool ready = true;
  for (int64_t x = e; x <= e + 1; ++x) {
    BucketSlot& b = s[static_cast<uint64_t>(x) % g_.slots];
    while (budget > 0 && b.tag.load(std::memory_order_acquire) == wi::kRetired) {  // acquire: pairs with the publisher
      uint64_t n = 0;
      seg_.transact([&](ControlTxn&) {
        WindowOps::require_sound(*this);
        n = WindowOps::prepare_chunk(*this, b, std::min(budget, kPrepareChunk));
      });
      budget -= std::min(budget, std::max<uint64_t>(n, 1));
    }
    if (b.tag.load(std::memory_order_acquire) == wi::kRetired) ready = false;  // acquire: as above
  }
  // 4. Rotate if due, when that is one CAS (a spare still in preparation is finished by a
  //    later step, or by the first writer that needs it).
  const BucketSlot& cur = s[static_cast<uint64_t>(e) % g_.slots];
  if (cur.tag.load(std::memory_order_acquire) != wi::kRetired) {  // acquire: pairs with the publisher
    int64_t ignored;
    WindowOps::current(*this, ignored);
  }
  // 5. kStamped: once per bucket, clear the lanes that left every window (off the data plane;
  //    a writer sweeps only when nobody did for 15 - R buckets).
  const uint64_t sw = g_.variant == wi::kVariantStamped ? h->swept.load(std::memory_order_acquire) : 0;  // acquire: as stamped_clock
  if (sw != 0 && sw < static_cast<uint64_t>(e))  // 0: nothing written yet, nothing to sweep
    WindowOps::stamped_sweep(*this, e);
  return ready;
}

void Window::maintain() {
  // Each step finishes both spares (its budget is unlimited); a second one only if the
  // clock moved on meanwhile. Bounded: at most 4 steps. No ReadGuard here: each step is
  // its own call, so what one step retired the next may reuse.
  for (int i = 0; i < 4 && !maintain_step(~uint64_t{0}); ++i) {
  }
}

}  // namespace shmfilter
