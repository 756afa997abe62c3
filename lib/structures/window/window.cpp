// lib/structures/window/window.cpp: the Window's data plane: mark / seen /
// mark_if_unseen / forget and their batched forms with prefetch, the writer's
// current table (rotating through window_rotation.cpp when due), per-space
// counters, new_count and the clock. Kernels over one table are in
// window_impl.h; what the parts share is in window_ops.h.
#include <algorithm>
#include <string>

#include "structures/window/window_ops.h"

namespace shmfilter {

namespace {

// The kBloom tables of one query (or one batch round), resolved once: no per-pair branch on
// the variant, no per-pair re-read of a TableHead; then every line of a pair is prefetched
// before the first is probed (the w misses overlap), and one hash and one set of masks serve
// every table.
struct BloomView {
  const uint64_t* words;
  uint64_t blocks;
  uint32_t nl;  // overflow layers published when the view was taken (0: none, the common case)
  BloomLayerView l[wi::kBloomMaxLayers];
};
inline uint32_t bloom_views(std::byte* base, const wi::Geometry& g, TableHead* const* ts, uint32_t win, BloomView* v) noexcept {
  uint32_t n = 0;
  for (uint32_t i = 0; i < win; ++i) {
    TableHead* t = ts[i];
    if (t == nullptr) continue;
    // A pair acknowledged before this call started is in the main table or in a layer published
    // before that (bloom_layer_views: acquire loads of the overflow and the layer count).
    v[n].words = bloom_words(t, g);
    v[n].blocks = t->geometry;  // bounds-checked by table_for
    v[n].nl = bloom_layer_views(base, g, t, v[n].l);
    ++n;
  }
  return n;
}
inline void bloom_prefetch_views(const BloomView* v, uint32_t n, uint64_t hv) noexcept {
  for (uint32_t i = 0; i < n; ++i) bl::prefetch_line(wi::line_of(v[i].words, v[i].blocks, hv));
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < v[i].nl; ++j) bl::prefetch_line(wi::line_of(v[i].l[j].words, v[i].l[j].blocks, hv));
}
inline bool bloom_seen_views(const BloomView* v, uint32_t n, uint64_t hv, const wi::Masks& mm) noexcept {
  for (uint32_t i = 0; i < n; ++i)
    if (wi::line_has(wi::line_of(v[i].words, v[i].blocks, hv), mm)) return true;
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < v[i].nl; ++j)
      if (wi::line_has(wi::line_of(v[i].l[j].words, v[i].l[j].blocks, hv), wi::masks_of(hv, v[i].l[j].k))) return true;
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------
// Implementation over the kernels (declared in window_ops.h).

// The current bucket's table for a writer (rotating if the clock says so).
TableHead* WindowOps::current(const Window& w, int64_t& e_out, WindowStatus* why) noexcept {
  WindowHeader* h = hdr(w);
  const wi::Geometry& G = geo(w);
  for (int attempt = 0; attempt < 8; ++attempt) {
    int64_t e = read_epoch(w);
    bool bad = false;
    TableHead* t = table_for(w.base_, G, h, e, &bad);
    if (bad) {  // the slot's table offset fails its bounds check: bytes changed since open
      if (why) *why = WindowStatus::kCorrupt;
      return nullptr;
    }
    if (t != nullptr) {
      // A claimer killed before its epoch CAS left the tag claimed: raise it for it, so
      // handles whose clocks are behind still find what we mark here.
      if (h->epoch.load(std::memory_order_seq_cst) < static_cast<uint64_t>(e) + 1)  // seq_cst: the rotation order
        raise_epoch(h, static_cast<uint64_t>(e) + 1);
      e_out = e;
      return t;
    }
    if (!advance(w, e, why)) return nullptr;
  }
  if (why) *why = WindowStatus::kBusy;  // 8 newer buckets came and went under us
  return nullptr;
}

void WindowOps::count_new(const Window& w, TableHead* t, uint64_t space) noexcept {
  WindowHeader* h = hdr(w);
  const wi::Geometry& G = geo(w);
  uint32_t stripe = static_cast<uint32_t>(w.slot_ ^ (w.seg_.owner_token() * 0x9e3779b9u)) % wi::kStripes;
  // relaxed: a statistic and the main-full trigger.
  uint64_t old = t->stripes[stripe].distinct.fetch_add(1, std::memory_order_relaxed);
  if ((old >> t->check_shift) != ((old + 1) >> t->check_shift)) {
    // main_full: the overflow layers the table's count asks for (0: the main table has room; n:
    // main and layers 1..n-1 hold C x 2^(n-1) pairs). Only grows (CAS-max); relaxed: a routing hint.
    const uint64_t d = table_distinct(t);
    uint32_t want = 0;
    const uint64_t cap = std::max<uint64_t>(t->capacity, 1);  // validated >= 1 at open; never divide by a damaged 0
    if (d >= cap) want = 1 + static_cast<uint32_t>(std::min<uint64_t>(63, std::bit_width(d / cap) - 1));
    uint32_t cur = t->main_full.load(std::memory_order_relaxed);
    while (cur < want && !t->main_full.compare_exchange_weak(cur, want, std::memory_order_relaxed)) {
    }
  }
  uint32_t row = space_row(h, G, space, true);
  // relaxed: exact count, no other data published with it.
  std::atomic_ref<uint64_t>(counters_of(t)[row]).fetch_add(1, std::memory_order_relaxed);
}

bool WindowOps::bloom_has(const Window& w, TableHead* t, uint64_t hv, const wi::Masks& mm) noexcept {
  const wi::Geometry& G = geo(w);
  if (wi::line_has(wi::line_of(bloom_words(t, G), t->geometry, hv), mm)) return true;
  if (t->overflow.load(std::memory_order_relaxed) == 0) return false;  // relaxed: the common case; re-read below
  BloomLayerView l[wi::kBloomMaxLayers];
  const uint32_t n = bloom_layer_views(w.base_, G, t, l);
  for (uint32_t j = 0; j < n; ++j)
    if (wi::line_has(wi::line_of(l[j].words, l[j].blocks, hv), wi::masks_of(hv, l[j].k))) return true;
  return false;
}
void WindowOps::bloom_prefetch(const Window& w, TableHead* t, uint64_t hv) noexcept {
  const wi::Geometry& G = geo(w);
  bl::prefetch_line(wi::line_of(bloom_words(t, G), t->geometry, hv));
  uint64_t off = t->overflow.load(std::memory_order_relaxed);  // relaxed: a prefetch hint only
  if (off != 0) bl::prefetch_line(wi::line_of(reinterpret_cast<const uint64_t*>(w.base_ + off), t->overflow_geometry, hv));
}

// A full main table: the pair goes to the newest overflow layer, after the main table and every
// older layer answered absent (a layer is added once the table's count asks for it: main_full,
// see count_new). No layer (none could be allocated): the main table takes it, stats() reports
// the rate that gives.
WindowStatus WindowOps::bloom_mark_in(const Window& w, TableHead* t, uint64_t space, uint64_t hv, const wi::Masks& mm) noexcept {
  WindowHeader* h = hdr(w);
  const wi::Geometry& G = geo(w);
  uint64_t* line = const_cast<uint64_t*>(wi::line_of(bloom_words(t, G), t->geometry, hv));
  bl::AddResult r;
  const uint32_t want = t->main_full.load(std::memory_order_relaxed);  // relaxed: routing hint (see count_new)
  if (want == 0) {
    r = wi::line_add(line, mm);
  } else {
    if (wi::line_has(line, mm)) return WindowStatus::kSeen;
    BloomLayerView l[wi::kBloomMaxLayers];
    const uint32_t n = bloom_layers(w, t, want, l);
    if (n == 0) {
      r = wi::line_add(line, mm);  // no overflow: stay in main, stats() reports over capacity
    } else {
      for (uint32_t j = 0; j + 1 < n; ++j)
        if (wi::line_has(wi::line_of(l[j].words, l[j].blocks, hv), wi::masks_of(hv, l[j].k))) return WindowStatus::kSeen;
      r = wi::line_add(const_cast<uint64_t*>(wi::line_of(l[n - 1].words, l[n - 1].blocks, hv)), wi::masks_of(hv, l[n - 1].k));
    }
  }
  if (r.newly_set == 0) return WindowStatus::kSeen;
  if (r.raced) h->racing_marks.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
  count_new(w, t, space);
  return WindowStatus::kNew;
}

template <class LT>
WindowStatus WindowOps::cuckoo_mark_in(const Window& w, TableHead* t, int64_t e, bool checked, uint64_t space,
                                       uint64_t hv) noexcept {
  WindowHeader* h = hdr(w);
  const wi::Geometry& G = geo(w);
  // A handle inherited across fork(): its token is the parent's (0 here), so the table's writer
  // lock would be taken with no owner of our own (a CAS of 0 to 0: not held at all, and insert
  // exactly-once would be gone). The Cuckoo handle answers kForked there too; reopen the segment.
  if (w.seg_.owner_token() == 0) return WindowStatus::kForked;
  // Before the insert (a caller killed after it leaves the flag clear: the safe side for forget).
  if (!checked && (table_flags(t) & wi::kTableAllChecked))
    t->flags.fetch_and(~wi::kTableAllChecked, std::memory_order_relaxed);  // relaxed: forget reads it after our ack
  ck::Header* ch = cuckoo_of(t, G);
  ExpandCtx ctx{&w, t};
  GateCtx gate{h, t, e};
  auto st = ck::insert<LT>(w.base_, ch, ck::split_hash(hv, G.k_main), /*unique=*/true, liveness_of(w.seg_),
                           &WindowOps::cuckoo_expand, &ctx, &WindowOps::insert_gate, &gate,
                           /*try_older=*/ck::load_relaxed(ch->max_subs) <= 2);  // a layered table: the next sub-filter
  if (st == ck::Status::kRefused) return kRetryNewer;  // sealed: a newer bucket exists
  if (st == ck::Status::kExists) return WindowStatus::kSeen;
  if (st != ck::Status::kInserted) return WindowStatus::kFull;
  count_new(w, t, space);
  return WindowStatus::kNew;
}
// Under the table's writer lock, before the insert reads or stores anything. The epoch past e
// means a newer bucket was claimed: a mark_if_unseen there may already have checked this table
// lock-free, or found it unclaimed, so an insert here could be invisible to it. Refuse and seal
// (every later locker refuses too; a caller of a newer bucket that acquires the bit sees every
// insert accepted before it). seq_cst: the rotation order (raise_epoch), for the case where the
// newer caller found this bucket's slot unclaimed and never locks this table.
bool WindowOps::insert_gate(void* ctx, ck::Header*) noexcept {
  auto* g = static_cast<GateCtx*>(ctx);
  if (g->h->epoch.load(std::memory_order_seq_cst) <= static_cast<uint64_t>(g->e) + 1) return true;
  if ((g->t->flags.load(std::memory_order_relaxed) & wi::kTableSealed) == 0)  // relaxed: we hold the writer lock
    g->t->flags.fetch_or(wi::kTableSealed, std::memory_order_release);       // release: see kTableSealed
  return false;
}
template <class LT>
bool WindowOps::seal(const Window& w, TableHead* t) noexcept {
  const ck::Liveness lv = liveness_of(w.seg_);
  if (lv.token() == 0) return false;  // a handle inherited across fork(): no token to lock with
  ck::Header* ch = cuckoo_of(t, geo(w));
  ck::lock<LT>(w.base_, ch, lv);  // the bounded wait with liveness takeover of every cuckoo writer
  SHMF_KILL_POINT("window.seal.locked");
  // release: every insert accepted before (by an earlier holder of this lock, acquired above)
  // happens-before whatever a caller that acquires the bit reads next; every later holder sees it.
  t->flags.fetch_or(wi::kTableSealed, std::memory_order_release);
  ck::unlock(ch);
  return true;
}
bool WindowOps::seal_older(const Window& w, TableHead* const* ts, uint32_t win) noexcept {
  const bool lanes8 = geo(w).k_main <= 8;
  for (uint32_t i = 1; i < win; ++i) {
    TableHead* t = ts[i];
    // acquire: pairs with the sealer's release fetch_or (the fast path: one load of a read-mostly line).
    if (t == nullptr || (t->flags.load(std::memory_order_acquire) & wi::kTableSealed) != 0) continue;
    if (!(lanes8 ? seal<ck::Lanes8>(w, t) : seal<ck::Lanes16>(w, t))) return false;
  }
  return true;
}
template <class LT>
bool WindowOps::cuckoo_has(const Window& w, TableHead* t, uint64_t hv) noexcept {
  const wi::Geometry& G = geo(w);
  return ck::contains<LT>(w.base_, cuckoo_of(t, G), ck::split_hash(hv, G.k_main), liveness_of(w.seg_));
}
template <class LT>
void WindowOps::cuckoo_prefetch(const Window& w, TableHead* t, uint64_t hv) noexcept {
  const wi::Geometry& G = geo(w);
  ck::Header* ch = cuckoo_of(t, G);
  ck::Sub s = ck::sub_view(w.base_, ch->subs[0]);
  ck::Probe p = ck::probe(s, ck::split_hash(hv, G.k_main));
  bl::prefetch_line(&ck::bucket_ref<LT>(s, p.i1));
  bl::prefetch_line(&ck::bucket_ref<LT>(s, p.i2));
  bl::prefetch_line(&s.versions[p.stripe]);
}


// ---- kStamped -------------------------------------------------------------------
namespace st = internal::stamped;

bool WindowOps::stamped_seen(const Window& w, uint64_t hv, uint32_t win) noexcept {
  const st::Clock c = stamped_clock(w, read_epoch(w));
  return st::youngest(w.base_, shared_ck(w), st::key(hv), c, liveness_of(w.seg_)) < static_cast<int64_t>(win);
}

WindowStatus WindowOps::stamped_write(const Window& w, TableHead* t, int64_t e, uint64_t space, uint64_t hv, uint32_t win,
                                      uint32_t cap) noexcept {
  WindowHeader* h = hdr(w);
  const wi::Geometry& G = geo(w);
  // A handle inherited across fork(): no owner token of its own to lock with (as cuckoo_mark_in).
  if (w.seg_.owner_token() == 0) return WindowStatus::kForked;
  ck::Header* ch = shared_ck(w);
  const ck::Liveness lv = liveness_of(w.seg_);
  ExpandCtx ctx{&w, shared_head(w)};
  for (int attempt = 0; attempt < 3; ++attempt) {
    // Nobody swept for 15 - R buckets (no maintain() ran): stamps would wrap. Sweep first
    // (the fallback; maintain() sweeps once per bucket off the data plane).
    // acquire: as stamped_clock.
    const uint64_t sw = h->swept.load(std::memory_order_acquire);
    if (sw != 0 && e > st::stamp_limit(sw, G.retention) && !stamped_sweep(w, e)) return WindowStatus::kForked;
    ck::lock<st::Lanes>(w.base_, ch, lv);
    SHMF_KILL_POINT("window.stamped.locked");
    // Under the lock the bucket is at least the newest any caller rotated to: a sweep raises the
    // epoch before it locks, so every lane stored after its first chunk is stamped no older than
    // the bucket it sweeps at (stamped_sweep).
    // seq_cst: the rotation order (raise_epoch).
    const uint64_t g = h->epoch.load(std::memory_order_seq_cst);
    const int64_t ee = std::max<int64_t>(g > 0 && static_cast<int64_t>(g - 1) > e ? static_cast<int64_t>(g - 1) : e, 1);
    uint64_t sw0 = h->swept.load(std::memory_order_relaxed);  // relaxed: we hold the lock; the first write sets it here
    if (sw0 == 0) {
      // The table's first lane: stamps decode from this bucket on (nothing older exists). A CAS:
      // a sweeper does not hold the lock when it publishes.
      // release: pairs with stamped_clock's acquire (the base before the lanes decoded by it).
      h->swept.compare_exchange_strong(sw0, static_cast<uint64_t>(ee), std::memory_order_release, std::memory_order_relaxed);
    }
    const st::Clock c = stamped_clock(w, ee);
    if (ee > st::stamp_limit(static_cast<uint64_t>(c.base + G.retention - 1), G.retention)) {
      ck::unlock(ch);
      e = ee;
      continue;  // sweep first
    }
    uint64_t reclaimed = 0;
    st::Answer a;
    bool new_today;
    if (cap == 0) {
      a = st::mark_locked(w.base_, ch, st::key(hv), c, win, &WindowOps::stamped_expand, &ctx, &reclaimed);
      new_today = a == st::Answer::kNew;
    } else {
      uint32_t tally = 0;
      a = st::cap_locked(w.base_, ch, hv, cap, c, win, &WindowOps::stamped_expand, &ctx, &reclaimed, &tally);
      SHMF_KILL_POINT("window.stamped.cap.after_tally");
      // An allowed impression marks the pair too (seen() answers true; the per-space count).
      new_today = a == st::Answer::kNew &&
                  st::mark_locked(w.base_, ch, st::key(hv), c, 1, &WindowOps::stamped_expand, &ctx, &reclaimed) ==
                      st::Answer::kNew;
    }
    SHMF_KILL_POINT("window.stamped.before_unlock");
    ck::unlock(ch);
    switch (a) {
      case st::Answer::kSeen: return WindowStatus::kSeen;
      case st::Answer::kCapped: return WindowStatus::kCapped;
      case st::Answer::kFull: return WindowStatus::kFull;
      case st::Answer::kNew: break;
    }
    if (new_today) count_new(w, t, space);
    return WindowStatus::kNew;
  }
  return WindowStatus::kBusy;  // the buckets moved 15 - R past every sweep three times during this call
}

WindowStatus WindowOps::stamped_forget(const Window& w, uint64_t hv) noexcept {
  if (w.seg_.owner_token() == 0) return WindowStatus::kForked;  // as stamped_write
  ck::Header* ch = shared_ck(w);
  const ck::Liveness lv = liveness_of(w.seg_);
  ck::lock<st::Lanes>(w.base_, ch, lv);
  const st::Clock c = stamped_clock(w, read_epoch(w));
  // The pair's own lane only. Its cap tallies stay (an impression served is still counted: a
  // cap is "at most N served", and forget does not un-serve). Removing them would mean probing
  // up to 15 keys the pair may never have had, and each probe of an absent key may remove a
  // collider's lane (another key with the same fingerprint in the same buckets, as forget on
  // kCuckoo can): the pair's own key is probed once, as there.
  const st::Forgot r = st::forget_locked(w.base_, ch, st::key(hv), c);
  SHMF_KILL_POINT("window.stamped.forget.after_clear");
  ck::unlock(ch);
  // relaxed: a statistic (the forgets that left the pair answering present, see forget_locked).
  if (r == st::Forgot::kAmbiguous) hdr(w)->forget_ambiguous.fetch_add(1, std::memory_order_relaxed);
  return r == st::Forgot::kNone ? WindowStatus::kAbsent : WindowStatus::kRemoved;
}

bool WindowOps::stamped_sweep(const Window& w, int64_t e) noexcept {
  WindowHeader* h = hdr(w);
  const ck::Liveness lv = liveness_of(w.seg_);
  if (lv.token() == 0) return false;
  // Every writer after this stamps no bucket older than e (stamped_write reads the epoch under
  // the writer lock, which every chunk below takes after this raise).
  raise_epoch(h, static_cast<uint64_t>(e) + 1);
  ck::Header* ch = shared_ck(w);
  const uint32_t subs = std::min<uint32_t>(ck::sub_count_acquire(ch), wi::kStampedMaxSubs);
  uint64_t cleared = 0;
  for (uint32_t j = 0; j < subs; ++j) {
    const uint64_t n = ck::sub_view(w.base_, ch->subs[j]).n;
    for (uint64_t from = 0; from < n; from += wi::kSweepChunk) {
      ck::lock<st::Lanes>(w.base_, ch, lv);
      // The base is read under each chunk's lock, never once before the first: a concurrent
      // sweep may have raised it meanwhile, and writers may since have stamped buckets past the
      // old base + 15, which the old base decodes 16 buckets too old (dead): a sweeper that
      // cleared them lost acknowledged marks (WindowStampedMP.ASweeperWithAStaleBase...).
      const st::Clock c = stamped_clock(w, e);
      cleared += st::sweep_range_locked(w.base_, ch, j, from, from + wi::kSweepChunk, c);
      SHMF_KILL_POINT("window.stamped.sweep.chunk");
      ck::unlock(ch);
    }
  }
  uint64_t cur = h->swept.load(std::memory_order_relaxed);  // relaxed: the CAS decides
  // release: the clears above happen-before a reader that decodes with the new base.
  while (cur < static_cast<uint64_t>(e) &&
         !h->swept.compare_exchange_weak(cur, static_cast<uint64_t>(e), std::memory_order_release, std::memory_order_relaxed)) {
  }
  (void)cleared;
  return true;
}

// ---- dispatch ----------------------------------------------------------------
bool WindowOps::has(const Window& w, TableHead* t, uint64_t hv, const wi::Masks& mm) noexcept {
  const wi::Geometry& G = geo(w);
  if (G.variant == wi::kVariantBloom) return bloom_has(w, t, hv, mm);
  return G.k_main <= 8 ? cuckoo_has<ck::Lanes8>(w, t, hv) : cuckoo_has<ck::Lanes16>(w, t, hv);
}
void WindowOps::prefetch(const Window& w, TableHead* t, uint64_t hv) noexcept {
  const wi::Geometry& G = geo(w);
  if (G.variant == wi::kVariantBloom)
    bloom_prefetch(w, t, hv);
  else if (G.k_main <= 8)
    cuckoo_prefetch<ck::Lanes8>(w, t, hv);
  else
    cuckoo_prefetch<ck::Lanes16>(w, t, hv);
}
WindowStatus WindowOps::mark_in(const Window& w, TableHead* t, int64_t e, bool checked, uint64_t space, uint64_t hv,
                                const wi::Masks& mm) noexcept {
  const wi::Geometry& G = geo(w);
  if (G.variant == wi::kVariantBloom) return bloom_mark_in(w, t, space, hv, mm);
  if (G.variant == wi::kVariantStamped) return stamped_write(w, t, e, space, hv, 1, 0);
  checked = checked || G.retention == 1;  // no older bucket to check
  return G.k_main <= 8 ? cuckoo_mark_in<ck::Lanes8>(w, t, e, checked, space, hv)
                        : cuckoo_mark_in<ck::Lanes16>(w, t, e, checked, space, hv);
}

// Tables of the last w buckets ending at e (null where a bucket is empty).
uint32_t WindowOps::tables(const Window& w, int64_t e, uint32_t n, TableHead** out, bool* bad) noexcept {
  WindowHeader* h = hdr(w);
  const wi::Geometry& G = geo(w);
  if (e < 0) {
    for (uint32_t i = 0; i < n; ++i) out[i] = nullptr;
    return n;
  }
  uint32_t slot = slot_of(G, e);  // one multiply for the run; older buckets step down the ring
  for (uint32_t i = 0; i < n; ++i) {
    const int64_t b = e - static_cast<int64_t>(i);
    out[i] = b < 0 ? nullptr : table_in(w.base_, G, h, slot, b, bad);
    slot = slot == 0 ? G.slots - 1 : slot - 1;
  }
  return n;
}
uint32_t WindowOps::resolve_w(const Window& w, uint32_t win) noexcept {
  const wi::Geometry& G = geo(w);
  if (win == kWholeWindow) return G.retention;
  return win <= G.retention ? win : 0;
}

// Answers over resolved tables ts[0..win) (ts[0] the newest bucket; null = empty bucket).
bool WindowOps::seen_in(const Window& w, TableHead* const* ts, uint32_t win, uint64_t hv, bool prefetched) noexcept {
  const wi::Geometry& G = geo(w);
  if (G.variant == wi::kVariantStamped) return stamped_seen(w, hv, win);
  if (!prefetched)
    for (uint32_t i = 0; i < win; ++i)
      if (ts[i]) prefetch(w, ts[i], hv);  // the w lines are fetched in parallel (memory-level parallelism)
  wi::Masks mm = wi::masks_of(hv, G.k_main);
  for (uint32_t i = 0; i < win; ++i)
    if (ts[i] && has(w, ts[i], hv, mm)) return true;
  return false;
}
bool WindowOps::seen_h(const Window& w, uint64_t hv, uint32_t win) noexcept {
  TableHead* ts[wi::kMaxRetention];
  win = resolve_w(w, win);
  if (win == 0) return false;  // w > retention: rejected
  if (geo(w).variant == wi::kVariantStamped) return stamped_seen(w, hv, win);
  tables(w, read_epoch(w), win, ts);
  const wi::Geometry& G = geo(w);
  if (G.variant == wi::kVariantBloom) {
    BloomView v[wi::kMaxRetention];
    const uint32_t n = bloom_views(w.base_, G, ts, win, v);
    bloom_prefetch_views(v, n, hv);
    return bloom_seen_views(v, n, hv, wi::masks_of(hv, G.k_main));
  }
  return seen_in(w, ts, win, hv, false);
}

WindowStatus WindowOps::mark_h(const Window& w, uint64_t space, uint64_t hv) noexcept {
  const wi::Masks mm = wi::masks_of(hv, geo(w).k_main);
  for (int attempt = 0; attempt < kMaxSealRetries; ++attempt) {
    int64_t e;
    WindowStatus why = WindowStatus::kBusy;
    TableHead* t = current(w, e, &why);
    if (t == nullptr) return why;
    const WindowStatus st = mark_in(w, t, e, /*checked=*/false, space, hv, mm);
    if (st != kRetryNewer) return st;  // refused: a newer bucket exists, redo there
  }
  return WindowStatus::kBusy;  // kMaxSealRetries buckets rotated in during this call
}

// ts[0] is the writer's current table of bucket e.
WindowStatus WindowOps::mark_if_unseen_in(const Window& w, TableHead* const* ts, int64_t e, uint32_t win, uint64_t space,
                                      uint64_t hv, bool prefetched) noexcept {
  const wi::Geometry& G = geo(w);
  if (G.variant == wi::kVariantStamped) return stamped_write(w, ts[0], e, space, hv, win, 0);
  if (!prefetched)
    for (uint32_t i = 0; i < win; ++i)
      if (ts[i]) prefetch(w, ts[i], hv);
  wi::Masks mm = wi::masks_of(hv, G.k_main);
  // kCuckoo: the older tables take no more inserts before we trust our lock-free checks of them
  // (exactly one of racing callers answers kNew, across rotations too: docs/window.md).
  if (G.variant == wi::kVariantCuckoo && win > 1 && !seal_older(w, ts, win)) return WindowStatus::kForked;
  for (uint32_t i = 1; i < win; ++i)
    if (ts[i] && has(w, ts[i], hv, mm)) return WindowStatus::kSeen;
  return mark_in(w, ts[0], e, /*checked=*/win == G.retention, space, hv, mm);  // kRetryNewer: the caller redoes it
}
bool WindowOps::writer_tables(const Window& w, uint32_t win, TableHead** ts, int64_t& e, WindowStatus* why) noexcept {
  TableHead* cur = current(w, e, why);
  if (cur == nullptr) return false;
  ts[0] = cur;
  bool bad = false;
  if (win > 1 && geo(w).variant != wi::kVariantStamped) tables(w, e - 1, win - 1, ts + 1, &bad);  // kStamped: one table
  if (bad) {  // an older bucket's table offset fails its bounds check: bytes changed since open
    if (why) *why = WindowStatus::kCorrupt;
    return false;
  }
  return true;
}
WindowStatus WindowOps::mark_if_unseen_h(const Window& w, uint64_t space, uint64_t hv, uint32_t win) noexcept {
  win = resolve_w(w, win);
  if (win == 0) return WindowStatus::kInvalidArgument;  // w > retention
  TableHead* ts[wi::kMaxRetention];
  for (int attempt = 0; attempt < kMaxSealRetries; ++attempt) {
    int64_t e;
    WindowStatus why = WindowStatus::kBusy;
    if (!writer_tables(w, win, ts, e, &why)) return why;
    const WindowStatus st = mark_if_unseen_in(w, ts, e, win, space, hv, false);
    if (st != kRetryNewer) return st;  // refused: a newer bucket exists, redo the whole question there
  }
  return WindowStatus::kBusy;  // kMaxSealRetries buckets rotated in during this call
}

WindowStatus WindowOps::mark_if_under_h(const Window& w, uint64_t space, uint64_t hv, uint32_t cap, uint32_t win) noexcept {
  if (geo(w).variant != wi::kVariantStamped) return WindowStatus::kUnsupported;
  win = resolve_w(w, win);
  if (win == 0 || cap == 0 || cap > st::kMaxCap) return WindowStatus::kInvalidArgument;
  st::prefetch(w.base_, shared_ck(w), st::key(hv));
  for (uint32_t j = 1; j <= cap; ++j) st::prefetch(w.base_, shared_ck(w), st::tally(hv, j));  // the cap tallies together
  int64_t e;
  WindowStatus why = WindowStatus::kBusy;
  TableHead* t = current(w, e, &why);
  if (t == nullptr) return why;
  return stamped_write(w, t, e, space, hv, win, cap);
}

// forget (docs/window.md "forget"): a cuckoo table cannot tell the pair's own copy from a
// collider's (another pair with the same fingerprint in the same two buckets), so erasing
// wherever the pair answers present would remove other pairs' acknowledged marks from the
// tables the pair was never marked in. Instead: the OLDEST bucket where the pair is present
// holds its own copy, unless a newer one does and that newer one was written without
// checking the older buckets (kTableAllChecked clear). So: erase in the oldest; in each newer
// bucket only if it is unchecked, and count those erasures (forget_ambiguous: at most one of
// them is not the pair's own, so the count bounds the other pairs' copies removed); a newer
// all-checked bucket where the pair answers present holds another pair's copy: left alone
// (the pair's answer there is a false positive).
WindowStatus WindowOps::forget_h(const Window& w, uint64_t hv) noexcept {
  WindowHeader* h = hdr(w);
  const wi::Geometry& G = geo(w);
  if (G.variant == wi::kVariantStamped) return stamped_forget(w, hv);
  if (G.variant != wi::kVariantCuckoo) return WindowStatus::kUnsupported;
  if (w.seg_.owner_token() == 0) return WindowStatus::kForked;  // inherited across fork(): as cuckoo_mark_in
  const int64_t e = read_epoch(w);
  const ck::Liveness lv = liveness_of(w.seg_);
  const ck::KeyHash kh = ck::split_hash(hv, G.k_main);
  const bool lanes8 = G.k_main <= 8;
  bool removed = false, first = true;
  uint64_t ambiguous = 0;
  for (uint32_t i = G.retention; i-- > 0;) {  // oldest bucket first
    TableHead* t = table_for(w.base_, G, h, e - static_cast<int64_t>(i));
    if (t == nullptr) continue;
    ck::Header* ch = cuckoo_of(t, G);
    if (!first && (table_flags(t) & wi::kTableAllChecked)) continue;  // a present answer here is a collider's
    const bool r = lanes8 ? ck::erase<ck::Lanes8>(w.base_, ch, kh, lv) : ck::erase<ck::Lanes16>(w.base_, ch, kh, lv);
    if (!r) continue;
    if (!first) ++ambiguous;
    first = false;
    removed = true;
    SHMF_KILL_POINT("window.forget.between_buckets");
  }
  // relaxed: a statistic. Counted after the erasures: a forget killed half-way is unacknowledged.
  if (ambiguous) h->forget_ambiguous.fetch_add(ambiguous, std::memory_order_relaxed);
  return removed ? WindowStatus::kRemoved : WindowStatus::kAbsent;
}

// Batched forms: per round of kBatch pairs, resolve the tables once, hash and
// prefetch every line of the round, then answer. writer: ts[0] is the current
// bucket by the writer's rules (rotating if due). answer(i, hv, ts, e) -> counted.
// Item: uint64_t or std::string_view (wi::pair_hash has both).
template <class Item, class Fn>
uint64_t WindowOps::batch(const Window& w, std::span<const uint64_t> spaces, std::span<const Item> items,
                          uint32_t win, bool writer, Fn&& answer) noexcept {
  const wi::Geometry& G = geo(w);
  const size_t n = std::min(spaces.size(), items.size());
  uint64_t count = 0;
  uint64_t hs[kBatch];
  TableHead* ts[wi::kMaxRetention];
  for (size_t at = 0; at < n; at += kBatch) {
    const size_t m = std::min(kBatch, n - at);
    int64_t e = 0;
    if (writer) {
      WindowStatus why = WindowStatus::kBusy;
      if (!writer_tables(w, win, ts, e, &why)) {
        for (size_t j = 0; j < m; ++j) answer(at + j, static_cast<uint64_t>(why), nullptr, e);
        continue;
      }
    } else {
      e = read_epoch(w);
      if (G.variant != wi::kVariantStamped) tables(w, e, win, ts);  // kStamped: one table
    }
    if (G.variant == wi::kVariantStamped) {
      ck::Header* ch = shared_ck(w);
      for (size_t j = 0; j < m; ++j) {
        hs[j] = wi::pair_hash(G.seed, spaces[at + j], items[at + j]);
        st::prefetch(w.base_, ch, st::key(hs[j]));  // the pair's two bucket words, whatever w is
      }
    } else if (G.variant == wi::kVariantBloom) {
      BloomView v[wi::kMaxRetention];
      const uint32_t nv = bloom_views(w.base_, G, ts, win, v);
      for (size_t j = 0; j < m; ++j) {
        hs[j] = wi::pair_hash(G.seed, spaces[at + j], items[at + j]);
        bloom_prefetch_views(v, nv, hs[j]);
      }
    } else {
      for (size_t j = 0; j < m; ++j) {
        hs[j] = wi::pair_hash(G.seed, spaces[at + j], items[at + j]);
        for (uint32_t i = 0; i < win; ++i)
          if (ts[i]) prefetch(w, ts[i], hs[j]);
      }
    }
    for (size_t j = 0; j < m; ++j) count += answer(at + j, hs[j], ts, e);
  }
  return count;
}

// ---------------------------------------------------------------------------
// Clock.

void Window::set_clock(int64_t (*fn)(void*), void* ctx) noexcept {
  clock_ = fn;
  clock_ctx_ = ctx;
  fixed_ = false;
}
void Window::set_now(int64_t unix_seconds) noexcept {
  fixed_now_ = unix_seconds;
  fixed_ = true;
}
void Window::use_system_clock() noexcept {
  clock_ = nullptr;
  fixed_ = false;
}
int64_t Window::now() const noexcept {
  if (fixed_) return fixed_now_;
  if (clock_) return clock_(clock_ctx_);
  return system_now();
}
int64_t Window::bucket_of(int64_t unix_seconds) const noexcept {
  if (base_ == nullptr) return 0;
  // The geometry captured at open, never the header's words (a damaged bucket_seconds of 0 was
  // a division by zero here: fuzz_segment, issue 23).
  return wi::bucket_number(unix_seconds, g_.utc_offset, g_.bucket_seconds);
}

// ---------------------------------------------------------------------------
// Data plane.

#define SHMF_WINDOW_ENTER(fail)                                                   \
  const ReadGuard in_call(seg_); /* docs/CONCURRENCY.md "Reader announcements" */ \
  if (!valid()) return fail;                                                      \
  WindowOps::tick(*this);                                                         \
  (void)0

WindowStatus Window::mark(uint64_t space, std::string_view item) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::mark_h(*this, space, wi::pair_hash(g_.seed, space, item));
}
WindowStatus Window::mark(uint64_t space, uint64_t item) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::mark_h(*this, space, wi::pair_hash(g_.seed, space, item));
}
bool Window::seen(uint64_t space, std::string_view item, uint32_t w) const noexcept {
  SHMF_WINDOW_ENTER(false);
  return WindowOps::seen_h(*this, wi::pair_hash(g_.seed, space, item), w);
}
bool Window::seen(uint64_t space, uint64_t item, uint32_t w) const noexcept {
  SHMF_WINDOW_ENTER(false);
  return WindowOps::seen_h(*this, wi::pair_hash(g_.seed, space, item), w);
}
WindowStatus Window::mark_if_unseen(uint64_t space, std::string_view item, uint32_t w) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::mark_if_unseen_h(*this, space, wi::pair_hash(g_.seed, space, item), w);
}
WindowStatus Window::mark_if_unseen(uint64_t space, uint64_t item, uint32_t w) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::mark_if_unseen_h(*this, space, wi::pair_hash(g_.seed, space, item), w);
}
WindowStatus Window::forget(uint64_t space, std::string_view item) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::forget_h(*this, wi::pair_hash(g_.seed, space, item));
}
WindowStatus Window::forget(uint64_t space, uint64_t item) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::forget_h(*this, wi::pair_hash(g_.seed, space, item));
}

WindowStatus Window::mark_if_under(uint64_t space, std::string_view item, uint32_t cap, uint32_t w) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::mark_if_under_h(*this, space, wi::pair_hash(g_.seed, space, item), cap, w);
}
WindowStatus Window::mark_if_under(uint64_t space, uint64_t item, uint32_t cap, uint32_t w) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::mark_if_under_h(*this, space, wi::pair_hash(g_.seed, space, item), cap, w);
}

// The batched calls: one body per call for both item types (uint64_t, std::string_view;
// the public overloads after these instantiate them): the same rounds, hashing and prefetch.
template <class Item>
uint64_t Window::mark_many_of(std::span<const uint64_t> spaces, std::span<const Item> items,
                              std::span<WindowStatus> out) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  const size_t n = std::min(spaces.size(), items.size());
  const bool want = out.size() >= n;
  if (!valid()) {
    if (want) std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(n), WindowStatus::kDropped);
    return 0;
  }
  WindowOps::tick(*this);
  return WindowOps::batch(*this, spaces, items, 1, true, [&](size_t i, uint64_t hv, TableHead* const* ts, int64_t e) -> size_t {
    WindowStatus st = ts ? WindowOps::mark_in(*this, ts[0], e, /*checked=*/false, spaces[i], hv,
                                              wi::masks_of(hv, g_.k_main))
                         : static_cast<WindowStatus>(hv);
    if (st == kRetryNewer) st = WindowOps::mark_h(*this, spaces[i], hv);  // the round's bucket was sealed
    if (want) out[i] = st;
    return st == WindowStatus::kNew;
  });
}
template <class Item>
uint64_t Window::mark_if_unseen_many_of(std::span<const uint64_t> spaces, std::span<const Item> items, uint32_t w,
                                        std::span<WindowStatus> out) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  const size_t n = std::min(spaces.size(), items.size());
  const bool want = out.size() >= n;
  if (!valid()) {
    if (want) std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(n), WindowStatus::kDropped);
    return 0;
  }
  const uint32_t win = WindowOps::resolve_w(*this, w);
  if (win == 0) {  // w > retention: rejected
    if (want) std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(n), WindowStatus::kInvalidArgument);
    return 0;
  }
  WindowOps::tick(*this);
  return WindowOps::batch(*this, spaces, items, win, true, [&](size_t i, uint64_t hv, TableHead* const* ts, int64_t e) -> size_t {
    WindowStatus st = ts ? WindowOps::mark_if_unseen_in(*this, ts, e, win, spaces[i], hv, true)
                         : static_cast<WindowStatus>(hv);
    if (st == kRetryNewer) st = WindowOps::mark_if_unseen_h(*this, spaces[i], hv, win);  // the round's bucket was sealed
    if (want) out[i] = st;
    return st == WindowStatus::kNew;
  });
}
template <class Item>
uint64_t Window::seen_many_of(std::span<const uint64_t> spaces, std::span<const Item> items, uint32_t w,
                              std::span<uint8_t> out) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  const size_t n = std::min(spaces.size(), items.size());
  const bool want = out.size() >= n;
  if (!valid()) {
    if (want) std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(n), uint8_t{0});
    return 0;
  }
  const uint32_t win = WindowOps::resolve_w(*this, w);
  if (win == 0) {  // w > retention: rejected
    if (want) std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(n), uint8_t{0});
    return 0;
  }
  WindowOps::tick(*this);
  const WindowHeader* h = WindowOps::hdr(*this);
  const wi::Geometry& G = g_;
  if (G.variant == wi::kVariantBloom) {
    // Per round of kBatch pairs: hash each pair once and prefetch all of its w lines, then
    // probe (the round's kBatch x w misses overlap). The tables are resolved once per call
    // and again only when the header epoch moved (one acquire load per round): the call
    // answers as of its start for the buckets its clock names, like a single seen() would,
    // and a rotation by any process during the call is picked up at the next round. The
    // views stay mapped for the whole call: this process passes no quiescent point inside it.
    // Parameters in locals: the stores to out[] (uint8_t) may alias anything.
    const uint64_t seed = G.seed;
    const uint32_t k_main = G.k_main;
    const int64_t e_clock = bucket_of(now());
    size_t count = 0;
    uint64_t hs[kBatch];
    TableHead* ts[wi::kMaxRetention];
    BloomView v[wi::kMaxRetention];
    uint32_t nv = 0;
    uint64_t g_seen = ~uint64_t{0};
    for (size_t at = 0; at < n; at += kBatch) {
      const size_t m = std::min(kBatch, n - at);
      const uint64_t g = h->epoch.load(std::memory_order_acquire);  // acquire: pairs with raise_epoch
      if (g != g_seen) {
        g_seen = g;
        const int64_t e = g > 0 && static_cast<int64_t>(g - 1) > e_clock ? static_cast<int64_t>(g - 1) : e_clock;
        WindowOps::tables(*this, e, win, ts);
        nv = bloom_views(base_, G, ts, win, v);
      }
      if (nv == 1 && v[0].nl == 0) {  // one table, no overflow (w = 1 on a normal day): the plain filter's loop
        const uint64_t* words = v[0].words;
        const uint64_t blocks = v[0].blocks;
        for (size_t j = 0; j < m; ++j) {
          hs[j] = wi::pair_hash(seed, spaces[at + j], items[at + j]);
          bl::prefetch_line(wi::line_of(words, blocks, hs[j]));
        }
        for (size_t j = 0; j < m; ++j) {
          const bool hit = wi::line_has(wi::line_of(words, blocks, hs[j]), wi::masks_of(hs[j], k_main));
          if (want) out[at + j] = hit;
          count += hit;
        }
        continue;
      }
      for (size_t j = 0; j < m; ++j) {
        hs[j] = wi::pair_hash(seed, spaces[at + j], items[at + j]);
        bloom_prefetch_views(v, nv, hs[j]);
      }
      for (size_t j = 0; j < m; ++j) {
        const bool hit = bloom_seen_views(v, nv, hs[j], wi::masks_of(hs[j], k_main));
        if (want) out[at + j] = hit;
        count += hit;
      }
    }
    return count;
  }
  return WindowOps::batch(*this, spaces, items, win, false, [&](size_t i, uint64_t hv, TableHead* const* ts, int64_t) -> size_t {
    bool s = WindowOps::seen_in(*this, ts, win, hv, true);
    if (want) out[i] = s;
    return s;
  });
}
template <class Item>
uint64_t Window::forget_many_of(std::span<const uint64_t> spaces, std::span<const Item> items,
                                std::span<WindowStatus> out) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  const size_t n = std::min(spaces.size(), items.size());
  const bool want = out.size() >= n;
  uint64_t removed = 0;
  for (size_t i = 0; i < n; ++i) {
    WindowStatus st = forget(spaces[i], items[i]);
    if (want) out[i] = st;
    removed += st == WindowStatus::kRemoved;
  }
  return removed;
}

uint64_t Window::mark_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items,
                           std::span<WindowStatus> out) noexcept {
  return mark_many_of(spaces, items, out);
}
uint64_t Window::mark_many(std::span<const uint64_t> spaces, std::span<const std::string_view> items,
                           std::span<WindowStatus> out) noexcept {
  return mark_many_of(spaces, items, out);
}
uint64_t Window::mark_if_unseen_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items, uint32_t w,
                                     std::span<WindowStatus> out) noexcept {
  return mark_if_unseen_many_of(spaces, items, w, out);
}
uint64_t Window::mark_if_unseen_many(std::span<const uint64_t> spaces, std::span<const std::string_view> items,
                                     uint32_t w, std::span<WindowStatus> out) noexcept {
  return mark_if_unseen_many_of(spaces, items, w, out);
}
uint64_t Window::seen_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items, uint32_t w,
                           std::span<uint8_t> out) const noexcept {
  return seen_many_of(spaces, items, w, out);
}
uint64_t Window::seen_many(std::span<const uint64_t> spaces, std::span<const std::string_view> items, uint32_t w,
                           std::span<uint8_t> out) const noexcept {
  return seen_many_of(spaces, items, w, out);
}
uint64_t Window::forget_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items,
                             std::span<WindowStatus> out) noexcept {
  return forget_many_of(spaces, items, out);
}
uint64_t Window::forget_many(std::span<const uint64_t> spaces, std::span<const std::string_view> items,
                             std::span<WindowStatus> out) noexcept {
  return forget_many_of(spaces, items, out);
}

uint64_t Window::new_count(uint64_t space, uint32_t age) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return 0;
  WindowHeader* h = WindowOps::hdr(*this);
  if (age >= g_.retention) return 0;
  TableHead* t = table_for(base_, g_, h, WindowOps::read_epoch(*this) - static_cast<int64_t>(age));
  if (t == nullptr) return 0;
  uint32_t row = space_row(h, g_, space, false);
  if (row == UINT32_MAX) return 0;
  return std::atomic_ref<uint64_t>(counters_of(t)[row]).load(std::memory_order_relaxed);  // relaxed: a count
}

}  // namespace shmfilter
