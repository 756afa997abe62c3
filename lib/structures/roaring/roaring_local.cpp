// lib/structures/roaring/roaring_local.cpp: RoaringSet's process-local side: the
// reader slot of this process, the views of published snapshots
// (pinned in the reader table), the per-thread view cache, and attach(),
// which validates a set's header and takes (or shares) its reader slot.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <tuple>

#include "structures/region_handle.h"
#include "structures/roaring/roaring_local.h"

namespace shmfilter::internal::roaring {

std::atomic<uint64_t> g_fork_epoch{0};

RoaringLocal::~RoaringLocal() {
  latest.reset();
  const ReadGuard in_call(seg);  // outside any call (a thread's exit): the slot must stay ours while we write it
  if (pid != getpid() || slot == nullptr || !live_region()) return;  // forked copy, or set dropped
  slot->lo.store(0);
  slot->hi.store(0);
  for (auto& gk : slot->gens) gk.store(0);
  pins = PinMirror{};
  uint64_t mine = token;
  slot->token.compare_exchange_strong(mine, 0);
}

void RoaringLocal::publish_pins_locked() noexcept {
  if (pid != getpid()) return;  // a forked child's inherited copy: the slot is the parent's
  // The live generations, ascending; with more than kExactPins, range mode
  // reads only the first and the last (gens[n-1] is then the newest).
  uint64_t gens[kExactPins + 1];
  size_t n = 0;
  for (const auto& [gen, count] : live) {
    if (n == kExactPins + 1) break;
    gens[n++] = gen;
  }
  if (n == kExactPins + 1) gens[kExactPins] = live.rbegin()->first;
  pins_publish(*slot, pins, gens, n);
}

void RoaringLocal::view_died(uint64_t gen) noexcept {
  // A view may die outside any call (a thread's exit frees its cache): announce, and
  // write the slot only while the set (whose region holds the slot) is still published.
  const ReadGuard in_call(seg);
  std::lock_guard<std::mutex> g(mu);
  auto it = live.find(gen);
  if (it != live.end() && --it->second == 0) live.erase(it);
  if (live_region()) publish_pins_locked();
}

std::shared_ptr<View> RoaringLocal::make_view() {
  std::shared_ptr<View> old;  // destroyed after the lock is released (its destructor locks mu)
  std::unique_lock<std::mutex> lk(mu);
  uint64_t cur = hdr->current.load();
  if (latest && latest->snap_off == cur) return latest;
  // Pin (widen) before loading `current` again: hi = max, lo = a bound <= the
  // generation we will load (existing views stay covered by gens[] or by the
  // old [lo, hi], which only grows here). A compactor publishes, then scans
  // slots; we store, then load current: with seq_cst on both sides one of us
  // sees the other (Dekker).
  uint64_t g = hdr->gen_counter.load();
  uint64_t old_lo = slot->lo.load();
  slot->hi.store(std::numeric_limits<uint64_t>::max());
  slot->lo.store(old_lo == 0 ? g : std::min(old_lo, g));
  cur = hdr->current.load();
  auto fail = [&]() -> std::shared_ptr<View> {
    publish_pins_locked();
    return nullptr;
  };
  if (!version_ok(base, seg.size(), cur, max_capacity)) return fail();
  auto* sh = reinterpret_cast<const SnapHeader*>(base + cur);
  auto v = std::make_shared<View>();
  v->snap_off = cur;
  v->gen = sh->generation;
  v->snap = sh;
  // version_ok validated both heads (magic, capacity <= max, inside); links
  // pass delta_ok as they are followed; a table's capacity never changes
  // after publication, so the bounds hold.
  v->base = base;
  v->seg_size = seg.size();
  v->max_capacity = max_capacity;
  const uint32_t na = delta_chain(base, v->seg_size, sh->delta_off, max_capacity, v->act);
  if (na == 0) return fail();
  v->nact.store(na, std::memory_order_relaxed);  // relaxed: the view is not shared yet
  if (sh->prev_delta_off) {
    v->nprv = delta_chain(base, v->seg_size, sh->prev_delta_off, max_capacity, v->prv);
    if (v->nprv == 0) return fail();
  }
  // version_ok bounded the header, directory and table inside the segment;
  // the words must each name a container inside it and one of the
  // directory's packs before a lookup may follow them: O(containers) once
  // per view per process, as CRoaring's frozen view was.
  v->table = snap_table(sh);
  v->packs = snap_dir(sh);
  v->npacks = sh->npacks;
  if (!c4::table_validate(base, v->seg_size, v->table, v->packs, v->npacks, false, nullptr).empty()) return fail();
  ++live[v->gen];
  publish_pins_locked();  // narrow to the generations really in use
  v->local = weak_from_this();
  old = std::move(latest);
  latest = v;
  lk.unlock();
  return v;
}

namespace {

// Per-thread cache of views: the hot path is one load of `current` and a
// compare. 16 entries: the 7-day question touches 7 sets per call.
constexpr int kThreadViews = 16;
struct TlsEntry {
  uint64_t owner = 0;  // RoaringLocal::serial (never reused, unlike an address)
  std::shared_ptr<View> view;
};
thread_local TlsEntry t_views[kThreadViews];
thread_local unsigned t_next = 0;

// Registry of open sets in this process: one RoaringLocal (one reader slot) per set.
std::mutex g_reg_mu;
std::map<std::tuple<pid_t, const std::byte*, uint32_t, uint32_t>, std::weak_ptr<RoaringLocal>> g_reg;

}  // namespace

// The view for the published snapshot, or nullptr (dropped / corrupt).
// The returned pointer stays valid until this thread's next call on a set.
View* current_view(const std::shared_ptr<RoaringLocal>& L) noexcept {
  bool made = false;
  return current_view(L, &made);
}

View* current_view(const std::shared_ptr<RoaringLocal>& L, bool* made) noexcept {
  if (L->fork_epoch != g_fork_epoch.load(std::memory_order_relaxed)) return nullptr;  // relaxed: set before the child runs
  uint64_t cur = L->hdr->current.load();  // seq_cst: a call after a publish sees it (real-time order)
  for (auto& e : t_views)
    if (e.owner == L->serial && e.view->snap_off == cur) return e.view.get();
  *made = true;
  std::shared_ptr<View> v;
  try {
    v = L->make_view();
  } catch (...) {
    return nullptr;
  }
  if (!v) return nullptr;
  // Victim: this set's stale entry, else an empty one or one of a closed set, else round robin.
  TlsEntry* victim = nullptr;
  for (auto& e : t_views)
    if (e.owner == L->serial) victim = &e;
  for (int i = 0; i < kThreadViews && !victim; ++i)
    if (!t_views[i].view || t_views[i].view->local.expired()) victim = &t_views[i];
  if (!victim) victim = &t_views[t_next++ % kThreadViews];
  victim->owner = L->serial;
  victim->view = std::move(v);
  return victim->view.get();
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool version_ok(const std::byte* base, uint64_t size, uint64_t off, uint32_t max_capacity) noexcept {
  if (!snap_header_ok(base, size, off)) return false;
  auto* sh = reinterpret_cast<const SnapHeader*>(base + off);
  if (!delta_ok(base, size, sh->delta_off, max_capacity)) return false;
  return sh->prev_delta_off == 0 || delta_ok(base, size, sh->prev_delta_off, max_capacity);
}

bool pending_ok(const std::byte* base, uint64_t size, const PendingFree& p) noexcept {
  if (!snap_header_ok(base, size, p.snap_off)) return false;
  if (p.delta_off != 0 && (p.delta_off % 64 != 0 || p.delta_off > size || size - p.delta_off < sizeof(DeltaHeader)))
    return false;
  auto* sh = reinterpret_cast<const SnapHeader*>(base + p.snap_off);
  const c4::PackRef* d = snap_dropped(sh);
  for (uint64_t i = 0; i < sh->ndropped; ++i)
    if (d[i].off == 0 || d[i].off % 64 != 0 || d[i].off > size || d[i].bytes > size - d[i].off) return false;
  return true;
}

uint32_t pending_packs(const std::byte* base, const PendingFree& p, uint64_t* out, uint64_t* min_birth) noexcept {
  auto* sh = reinterpret_cast<const SnapHeader*>(base + p.snap_off);
  const c4::PackRef* d = snap_dropped(sh);
  *min_birth = UINT64_MAX;
  const uint32_t n = static_cast<uint32_t>(sh->ndropped);
  for (uint32_t i = 0; i < n; ++i) {
    out[i] = d[i].off;
    *min_birth = std::min(*min_birth, d[i].birth);
  }
  return n;
}

void require_live(const RoaringLocal& L) {
  if (!L.live_region())
    throw Error(ErrorCode::kDropped, "Roaring set " + quoted(L.region.name) + " was dropped by another process");
}

// Validates the region header; throws kCorrupt naming the field.
RoaringHeader* checked_header(Segment& seg, const RegionInfo& info) {
  auto corrupt = [&](const std::string& what) { return corrupt_error(Kind::kRoaring, info.name, what); };
  validate_prefix(info, seg.base() + info.offset, sizeof(RoaringHeader), seg.size(), kMagic, kLayoutVersion);
  auto* h = reinterpret_cast<RoaringHeader*>(seg.base() + info.offset);
  if (h->delta_capacity < kMinDeltaCapacity || h->delta_capacity > kMaxDeltaCapacity ||
      (h->delta_capacity & (h->delta_capacity - 1)) != 0)
    throw corrupt("delta capacity " + std::to_string(h->delta_capacity));
  if (h->reader_slots == 0 || region_bytes(h->reader_slots) > info.size) throw corrupt("reader table out of bounds");
  if (h->compact_permille == 0 || h->compact_permille > 900) throw corrupt("compaction threshold");
  uint64_t cur = h->current.load();
  if (cur == 0 || cur % 64 != 0 || cur > seg.size() || seg.size() - cur < sizeof(SnapHeader))
    throw corrupt("snapshot offset");
  return h;
}

std::shared_ptr<RoaringLocal> attach(Segment& seg, const RegionInfo& info) {
  RoaringHeader* h = checked_header(seg, info);
  auto key = std::make_tuple(getpid(), static_cast<const std::byte*>(seg.base()), info.slot, info.generation);
  std::lock_guard<std::mutex> g(g_reg_mu);
  if (auto it = g_reg.find(key); it != g_reg.end())
    if (auto l = it->second.lock()) return l;
  static std::atomic<uint64_t> serials{0};
  static std::once_flag atfork_once;
  std::call_once(atfork_once, [] {
    pthread_atfork(nullptr, nullptr, [] { g_fork_epoch.fetch_add(1, std::memory_order_relaxed); });  // relaxed: child is single-threaded here
  });
  auto L = std::make_shared<RoaringLocal>();
  L->serial = ++serials;
  L->fork_epoch = g_fork_epoch.load(std::memory_order_relaxed);  // relaxed: process-local
  L->seg = seg;
  L->region = info;
  L->base = seg.base();
  L->hdr = h;
  L->pid = getpid();
  L->token = seg.owner_token();
  L->max_capacity = h->delta_capacity;
  L->compact_permille = h->compact_permille;
  L->auto_compact = (h->flags & kFlagNoAutoCompact) == 0;
  ReaderSlot* slots = reader_table(h);
  for (uint32_t i = 0; i < h->reader_slots && L->slot == nullptr; ++i) {
    uint64_t t = slots[i].token.load();
    if (t == 0 || !seg.token_alive(t)) {
      if (slots[i].token.compare_exchange_strong(t, L->token)) {
        slots[i].lo.store(0);
        slots[i].hi.store(0);
        for (auto& gk : slots[i].gens) gk.store(0);
        L->slot = &slots[i];
      }
    }
  }
  if (L->slot == nullptr)
    throw Error(ErrorCode::kFull, "reader table of Roaring set " + quoted(info.name) + " is full (" +
                                      std::to_string(h->reader_slots) +
                                      " slots, all held by live processes): recreate it with a larger --readers, "
                                      "or close idle processes");
  g_reg[key] = L;
  return L;
}

}  // namespace shmfilter::internal::roaring
