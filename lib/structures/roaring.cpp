// lib/structures/roaring.cpp: RoaringSet, the handle over lib/roaring_impl.h.
// Protocol (who writes what, and why nothing acknowledged is lost): docs/roaring.md.
#include "shmfilter/roaring_set.hpp"

#include <roaring/roaring.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <unordered_set>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "check/checkers.h"
#include "base/kill_point.h"
#include "base/text.h"
#include "structures/roaring_impl.h"

// ---- kernels of roaring_impl.h (no Segment, no CRoaring) ---------------------------
namespace shmfilter::internal::roaring {

std::string delta_validate(DeltaHeader* d, uint32_t expected_capacity, uint64_t* claimed_out) {
  char buf[192];
  if (d->magic != kDeltaMagic) {
    snprintf(buf, sizeof buf, "delta table magic is 0x%08x, expected 0x%08x", d->magic, kDeltaMagic);
    return buf;
  }
  const uint32_t cap = d->capacity;
  if (cap != expected_capacity || !std::has_single_bit(cap)) {
    snprintf(buf, sizeof buf, "delta table capacity %u, header says %u", cap, expected_capacity);
    return buf;
  }
  std::atomic<uint64_t>* slots = delta_slots(d);
  std::unordered_set<uint32_t> seen;
  uint64_t claimed = 0;
  for (uint32_t i = 0; i < cap; ++i) {
    uint64_t w = slots[i].load(std::memory_order_acquire);  // acquire: entries are read whole
    if (w == 0) continue;
    if (!word_valid(w)) {
      snprintf(buf, sizeof buf, "delta slot %u holds malformed word 0x%016" PRIx64, i, w);
      return buf;
    }
    ++claimed;
    uint32_t v = word_value(w);
    if (!seen.insert(v).second) {
      snprintf(buf, sizeof buf, "value %u appears twice in the delta table (slot %u)", v, i);
      return buf;
    }
    // Every slot from the value's home up to i must be claimed, or lookups miss it.
    for (uint32_t j = delta_home(v, cap); j != i; j = (j + 1) & (cap - 1)) {
      if (slots[j].load(std::memory_order_relaxed) == 0) {  // relaxed: slots are never cleared
        snprintf(buf, sizeof buf, "value %u in slot %u is unreachable: empty slot %u on its probe path", v, i, j);
        return buf;
      }
    }
  }
  uint64_t fill = d->fill.load();
  if (fill < claimed) {
    snprintf(buf, sizeof buf, "delta fill counter %" PRIu64 " is below the %" PRIu64 " claimed slots", fill, claimed);
    return buf;
  }
  if (claimed_out) *claimed_out = claimed;
  return "";
}

namespace {
inline uint16_t rd16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t rd32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
}  // namespace

std::string portable_validate(const char* buf, size_t len, size_t* consumed) {
  // Format: https://github.com/RoaringBitmap/RoaringFormatSpec (little-endian).
  constexpr uint32_t kCookieNoRun = 12346, kCookieRun = 12347, kNoOffsetThreshold = 4;
  char msg[256];
  auto need = [&](size_t pos, size_t n, const char* what) -> std::string {
    if (pos + n > len) {
      snprintf(msg, sizeof msg,
               "truncated Roaring serialization: %s needs bytes %zu..%zu but the input has %zu bytes", what, pos,
               pos + n, len);
      return msg;
    }
    return "";
  };
  if (len < 4) {
    snprintf(msg, sizeof msg, "input of %zu bytes is too short for a Roaring serialization (at least 4)", len);
    return msg;
  }
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "portable format reader assumes little-endian");
  uint32_t cookie = rd32(buf);
  uint32_t size = 0;
  bool has_run = false;
  size_t pos = 0;
  const char* run_bitmap = nullptr;
  if ((cookie & 0xFFFF) == kCookieRun) {
    has_run = true;
    size = (cookie >> 16) + 1;
    pos = 4;
    size_t rb = (size + 7) / 8;
    if (auto e = need(pos, rb, "the run-container bitmap"); !e.empty()) return e;
    run_bitmap = buf + pos;
    pos += rb;
  } else if (cookie == kCookieNoRun) {
    if (auto e = need(4, 4, "the container count"); !e.empty()) return e;
    size = rd32(buf + 4);
    pos = 8;
  } else {
    snprintf(msg, sizeof msg,
             "not a Roaring portable serialization: the first 4 bytes are 0x%08x, expected cookie 12346 or 12347 "
             "(pass a file written by Roaring's serialize(), or one decimal id per line)",
             cookie);
    return msg;
  }
  if (size > 65536) {
    snprintf(msg, sizeof msg, "corrupt Roaring serialization: %u containers (at most 65536)", size);
    return msg;
  }
  const char* keycards = buf + pos;
  if (auto e = need(pos, size_t{size} * 4, "the key/cardinality table"); !e.empty()) return e;
  pos += size_t{size} * 4;
  if (!has_run || size >= kNoOffsetThreshold) {
    if (auto e = need(pos, size_t{size} * 4, "the offset table"); !e.empty()) return e;
    pos += size_t{size} * 4;
  }
  int64_t prev_key = -1;
  for (uint32_t i = 0; i < size; ++i) {
    uint32_t key = rd16(keycards + 4 * i);
    uint32_t card = uint32_t{rd16(keycards + 4 * i + 2)} + 1;
    if (static_cast<int64_t>(key) <= prev_key) {
      snprintf(msg, sizeof msg, "corrupt Roaring serialization: container keys not increasing at container %u", i);
      return msg;
    }
    prev_key = key;
    bool is_run = has_run && (static_cast<unsigned char>(run_bitmap[i / 8]) >> (i % 8)) & 1;
    if (is_run) {
      if (auto e = need(pos, 2, "a run count"); !e.empty()) return e;
      uint32_t nruns = rd16(buf + pos);
      pos += 2;
      if (auto e = need(pos, size_t{nruns} * 4, "a run container"); !e.empty()) return e;
      int64_t prev_end = -1;
      for (uint32_t r = 0; r < nruns; ++r) {
        uint32_t start = rd16(buf + pos + 4 * r), length = rd16(buf + pos + 4 * r + 2);
        if (static_cast<int64_t>(start) <= prev_end || start + length > 65535) {
          snprintf(msg, sizeof msg, "corrupt Roaring serialization: run %u of container %u overlaps or overflows", r, i);
          return msg;
        }
        prev_end = start + length;
      }
      pos += size_t{nruns} * 4;
    } else if (card > 4096) {
      if (auto e = need(pos, 8192, "a bitmap container"); !e.empty()) return e;
      uint64_t pop = 0;
      for (size_t w = 0; w < 1024; ++w) {
        uint64_t word;
        std::memcpy(&word, buf + pos + 8 * w, 8);
        pop += static_cast<uint64_t>(std::popcount(word));
      }
      if (pop != card) {
        snprintf(msg, sizeof msg, "corrupt Roaring serialization: bitmap container %u has %" PRIu64
                 " bits set, header says %u", i, pop, card);
        return msg;
      }
      pos += 8192;
    } else {
      if (auto e = need(pos, size_t{card} * 2, "an array container"); !e.empty()) return e;
      int32_t prev = -1;
      for (uint32_t k = 0; k < card; ++k) {
        int32_t v = rd16(buf + pos + 2 * k);
        if (v <= prev) {
          snprintf(msg, sizeof msg, "corrupt Roaring serialization: array container %u is not sorted", i);
          return msg;
        }
        prev = v;
      }
      pos += size_t{card} * 2;
    }
  }
  if (consumed) *consumed = pos;
  return "";
}

}  // namespace shmfilter::internal::roaring

namespace shmfilter {
namespace internal {

using namespace roaring;

struct View;

// Process-local state of one open set, shared by every handle copy (and
// every RoaringSet::open of the same set in this process).
// Bumped in the child after fork(): a handle inherited across fork has no
// reader slot of its own, so its data-plane calls answer kDropped / false
// (the child must Segment::open and RoaringSet::open itself).
std::atomic<uint64_t> g_fork_epoch{0};

// Inside every transaction on the set's memory: the set is still published.
// Checked under the segment lock (drop takes it too), so the region cannot be
// freed while the transaction runs. Needed because a transaction quiesces this
// process at its start: without the check, the set dropped by another process
// before we got the lock could be reclaimed by our own allocation, and our
// stores through `hdr` would land in someone else's memory.
void require_live(const RoaringLocal& L);

// A snapshot extent that may be followed: 64-byte aligned, its header and
// frozen bytes inside the segment's `size`, its magic, and its delta tables
// (when named) 64-byte aligned and inside. Every offset read from the set's
// header (current, staged_*, pending[]) passes this before it is dereferenced.
bool version_ok(const std::byte* base, uint64_t size, uint64_t off, uint32_t capacity) noexcept {
  auto inside = [&](uint64_t o, uint64_t len) { return o != 0 && o % 64 == 0 && o <= size && len <= size - o; };
  if (!inside(off, sizeof(SnapHeader))) return false;
  auto* sh = reinterpret_cast<const SnapHeader*>(base + off);
  if (sh->magic != kSnapMagic || sh->frozen_bytes > size - off - sizeof(SnapHeader)) return false;
  if (!inside(sh->delta_off, delta_bytes(capacity))) return false;
  return sh->prev_delta_off == 0 || inside(sh->prev_delta_off, delta_bytes(capacity));
}

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
  uint32_t capacity = 0;
  uint64_t limit = 0;     // delta fill at which writes of new values get kFull (90%)
  uint64_t trigger = 0;   // delta fill at which auto-compaction starts
  bool auto_compact = true;

  std::mutex mu;                       // guards live, latest, the slot's lo/hi stores
  std::map<uint64_t, uint32_t> live;   // generation -> View objects alive in this process
  std::shared_ptr<View> latest;        // newest view made here (keeps a warm view for new threads)

  ~RoaringLocal();
  std::shared_ptr<View> make_view();   // slow path: pin, load current, build the frozen view
  void view_died(uint64_t gen) noexcept;
  void publish_pins_locked() noexcept;
  bool live_region() const noexcept { return seg.region_live(region.slot, region.generation); }
  bool in_segment(uint64_t off, uint64_t len) const noexcept {
    uint64_t size = seg.size();
    return off != 0 && off <= size && len <= size - off;
  }
};

// A process-local frozen view of one published snapshot version.
struct View {
  std::weak_ptr<RoaringLocal> local;  // weak: RoaringLocal::latest holds views (no cycle)
  uint64_t snap_off = 0;
  uint64_t gen = 0;
  const SnapHeader* snap = nullptr;
  DeltaHeader* delta = nullptr;
  DeltaHeader* prev = nullptr;  // may be null
  const roaring_bitmap_t* bm = nullptr;
  ~View() {
    if (bm) roaring_bitmap_free(bm);  // frees only the process-local view struct, never the frozen bytes
    if (auto l = local.lock()) l->view_died(gen);
  }
  bool contains(uint32_t v) const noexcept {
    Op op = delta_lookup(delta, v);
    if (op == Op::kNone && prev) op = delta_lookup(prev, v);
    if (op != Op::kNone) return op == Op::kAdd;
    return roaring_bitmap_contains(bm, v);
  }
};

void require_live(const RoaringLocal& L) {
  if (!L.live_region())
    throw Error(ErrorCode::kDropped, "Roaring set '" + L.region.name + "' was dropped by another process");
}

RoaringLocal::~RoaringLocal() {
  latest.reset();
  if (pid != getpid() || slot == nullptr || !live_region()) return;  // forked copy, or set dropped
  slot->lo.store(0);
  slot->hi.store(0);
  for (auto& gk : slot->gens) gk.store(0);
  uint64_t mine = token;
  slot->token.compare_exchange_strong(mine, 0);
}

void RoaringLocal::publish_pins_locked() noexcept {
  if (pid != getpid()) return;  // a forked child's inherited copy: the slot is the parent's
  if (live.size() <= kExactPins) {
    uint32_t i = 0;
    for (const auto& [gen, count] : live) slot->gens[i++].store(gen);
    for (; i < kExactPins; ++i) slot->gens[i].store(0);
    slot->lo.store(0);  // after gens[] is complete: a scanner reads lo/hi first, then gens[]
    slot->hi.store(0);
  } else {
    slot->hi.store(live.rbegin()->first);  // never narrower than the views alive
    slot->lo.store(live.begin()->first);
  }
}

void RoaringLocal::view_died(uint64_t gen) noexcept {
  std::lock_guard<std::mutex> g(mu);
  auto it = live.find(gen);
  if (it != live.end() && --it->second == 0) live.erase(it);
  publish_pins_locked();
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
  if (!version_ok(base, seg.size(), cur, capacity)) return fail();
  auto* sh = reinterpret_cast<const SnapHeader*>(base + cur);
  auto v = std::make_shared<View>();
  v->snap_off = cur;
  v->gen = sh->generation;
  v->snap = sh;
  v->delta = reinterpret_cast<DeltaHeader*>(base + sh->delta_off);
  v->prev = sh->prev_delta_off ? reinterpret_cast<DeltaHeader*>(base + sh->prev_delta_off) : nullptr;
  if (v->delta->magic != kDeltaMagic || v->delta->capacity != capacity ||
      (v->prev && (v->prev->magic != kDeltaMagic || v->prev->capacity != capacity)))
    return fail();
  v->bm = roaring_bitmap_frozen_view(frozen_bytes(sh), sh->frozen_bytes);
  if (v->bm == nullptr) return fail();
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

// The view for the published snapshot, or nullptr (dropped / corrupt).
// The returned pointer stays valid until this thread's next call on a set.
View* current_view(const std::shared_ptr<RoaringLocal>& L) noexcept {
  if (L->fork_epoch != g_fork_epoch.load(std::memory_order_relaxed)) return nullptr;  // relaxed: set before the child runs
  uint64_t cur = L->hdr->current.load();  // seq_cst: a call after a publish sees it (real-time order)
  for (auto& e : t_views)
    if (e.owner == L->serial && e.view->snap_off == cur) return e.view.get();
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

// Registry of open sets in this process: one RoaringLocal (one reader slot) per set.
std::mutex g_reg_mu;
std::map<std::tuple<pid_t, const std::byte*, uint32_t, uint32_t>, std::weak_ptr<RoaringLocal>> g_reg;

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

void validate_options(const RoaringOptions& o) {
  if (o.delta_capacity < kMinDeltaCapacity || o.delta_capacity > kMaxDeltaCapacity ||
      (o.delta_capacity & (o.delta_capacity - 1)) != 0)
    throw Error(ErrorCode::kInvalidArgument,
                "delta capacity " + std::to_string(o.delta_capacity) +
                    " is invalid: pass a power of two from 64 to 16777216 (--delta-capacity)");
  if (!(o.compact_at > 0.0 && o.compact_at <= 0.9))
    throw Error(ErrorCode::kInvalidArgument, "compact_at " + std::to_string(o.compact_at) +
                                                 " is invalid: pass a fraction in (0, 0.9] (--compact-at)");
  if (o.reader_slots < 1 || o.reader_slots > 65536)
    throw Error(ErrorCode::kInvalidArgument, "reader slots " + std::to_string(o.reader_slots) +
                                                 " is invalid: pass 1 to 65536 (--readers)");
}

// Validates the region header; throws kCorrupt naming the field.
RoaringHeader* checked_header(Segment& seg, const RegionInfo& info) {
  auto corrupt = [&](const std::string& what) {
    return Error(ErrorCode::kCorrupt, "Roaring set " + quoted(info.name) + " is corrupt: " + what +
                                          " (run 'shmtool check' on the segment; drop and re-import the set)");
  };
  if (info.size < sizeof(RoaringHeader)) throw corrupt("region of " + std::to_string(info.size) + " bytes is too small");
  if (info.offset % 64 != 0) throw corrupt("region offset " + std::to_string(info.offset) + " is not 64-byte aligned");
  auto* h = reinterpret_cast<RoaringHeader*>(seg.base() + info.offset);
  if (h->magic != kRegionMagic) throw corrupt("bad magic");
  if (h->version != kLayoutVersion)
    throw Error(ErrorCode::kVersionMismatch, "Roaring set " + quoted(info.name) + " has layout version " +
                                                 std::to_string(h->version) + ", this build reads " +
                                                 std::to_string(kLayoutVersion) + ": use a matching shmfilter");
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
  L->capacity = h->delta_capacity;
  L->limit = uint64_t{h->delta_capacity} * 9 / 10;
  L->trigger = std::max<uint64_t>(1, uint64_t{h->delta_capacity} * h->compact_permille / 1000);
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
struct ClaimGuard {
  RoaringLocal& L;
  ~ClaimGuard() { release_claim(L); }
};

// A retired-snapshot entry whose offsets may be freed: aligned, inside, a snapshot header.
bool pending_ok(const std::byte* base, uint64_t size, const PendingFree& p) noexcept {
  auto inside = [&](uint64_t o, uint64_t len) { return o != 0 && o % 64 == 0 && o <= size && len <= size - o; };
  if (!inside(p.snap_off, sizeof(SnapHeader))) return false;
  auto* sh = reinterpret_cast<const SnapHeader*>(base + p.snap_off);
  if (sh->magic != kSnapMagic || sh->frozen_bytes > size - p.snap_off - sizeof(SnapHeader)) return false;
  return p.delta_off == 0 || inside(p.delta_off, sizeof(DeltaHeader));
}

// True if no live reader slot holds a generation in [lo_gen, hi_gen].
bool unread(RoaringLocal& L, uint64_t lo_gen, uint64_t hi_gen) {
  ReaderSlot* slots = reader_table(L.hdr);
  for (uint32_t i = 0; i < L.hdr->reader_slots; ++i) {
    uint64_t t = slots[i].token.load();
    if (t == 0) continue;
    bool blocked = false;
    uint64_t lo = slots[i].lo.load(), hi = slots[i].hi.load();  // before gens[]: see ReaderSlot
    if (lo != 0 && lo <= hi_gen && lo_gen <= hi) blocked = true;
    for (uint32_t k = 0; k < kExactPins && !blocked; ++k) {
      uint64_t gk = slots[i].gens[k].load();
      blocked = gk != 0 && gk >= lo_gen && gk <= hi_gen;
    }
    if (blocked && L.seg.token_alive(t)) return false;
  }
  return true;
}

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
  if (!version_ok(L.base, size, staged, L.capacity) || !version_ok(L.base, size, from, L.capacity)) {
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
  L.seg.transact([&](ControlTxn& txn) {
    require_live(L);
    txn.charge_to(L.region);  // check() reports these extents as leaked if the set is dropped without them
    uint64_t snap = txn.allocate(sizeof(SnapHeader) + frozen);
    uint64_t delta = txn.allocate(delta_bytes(L.capacity));
    write_version(L.base, snap, b.p, frozen, view->gen + 1, delta, view->snap->delta_off, L.capacity);
    txn.store_u64(&L.hdr->staged_from, from);
    txn.store_u64(&L.hdr->staged_snap, snap);
  });
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

bool compact_impl(const std::shared_ptr<RoaringLocal>& L, const roaring_bitmap_t* extra) {
  if (!L->live_region()) throw Error(ErrorCode::kDropped, "Roaring set " + quoted(L->region.name) + " was dropped");
  if (L->fork_epoch != g_fork_epoch.load(std::memory_order_relaxed))  // relaxed: process-local
    throw Error(ErrorCode::kBusy, "Roaring set " + quoted(L->region.name) +
                                      ": handle inherited across fork(); call Segment::open and RoaringSet::open in the child");
  if (!try_claim(*L)) return false;
  ClaimGuard guard{*L};
  return compact_locked(L, extra);
}

// A writer found the delta full: compact, or wait (bounded) for the live
// claimer to publish. True when the caller should retry.
bool make_room(const std::shared_ptr<RoaringLocal>& L, uint64_t seen) noexcept {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (L->hdr->current.load() != seen) return true;
    try {
      if (compact_impl(L, nullptr)) return true;
    } catch (...) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

}  // namespace
}  // namespace internal

using internal::RoaringLocal;
using internal::View;
using namespace internal::roaring;

std::string_view roaring_status_name(RoaringStatus s) noexcept {
  switch (s) {
    case RoaringStatus::kOk: return "ok";
    case RoaringStatus::kOutOfRange: return "out-of-range";
    case RoaringStatus::kDropped: return "dropped";
    case RoaringStatus::kFull: return "full";
  }
  return "unknown";
}

RoaringSet RoaringSet::create(Segment& seg, std::string_view name, const RoaringOptions& opts) {
  return create_from(seg, name, nullptr, opts);
}

RoaringSet RoaringSet::create_from(Segment& seg, std::string_view name, const roaring_bitmap_t* initial,
                                   const RoaringOptions& opts) {
  internal::validate_options(opts);
  internal::BitmapPtr b(initial ? roaring_bitmap_copy(initial) : roaring_bitmap_create());
  roaring_bitmap_run_optimize(b.p);
  roaring_bitmap_shrink_to_fit(b.p);
  size_t frozen = roaring_bitmap_frozen_size_in_bytes(b.p);
  RegionInfo info = seg.create_region(
      name, Kind::kRoaring, region_bytes(opts.reader_slots), [&](std::byte* region, uint64_t, ControlTxn& txn) {
        auto* h = reinterpret_cast<RoaringHeader*>(region);
        h->magic = kRegionMagic;
        h->version = kLayoutVersion;
        h->delta_capacity = opts.delta_capacity;
        h->reader_slots = opts.reader_slots;
        h->compact_permille = std::clamp<uint32_t>(static_cast<uint32_t>(opts.compact_at * 1000 + 0.5), 1, 900);
        h->flags = opts.auto_compact ? 0 : kFlagNoAutoCompact;
        h->created_unix_ns = static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count());
        uint64_t snap = txn.allocate(sizeof(SnapHeader) + frozen);
        uint64_t delta = txn.allocate(delta_bytes(opts.delta_capacity));
        internal::write_version(txn.base(), snap, b.p, frozen, 1, delta, 0, opts.delta_capacity);
        h->current.store(snap);
        h->gen_counter.store(1);
      });
  return RoaringSet(internal::attach(seg, info));
}

RoaringSet RoaringSet::open(Segment& seg, std::string_view name) {
  RegionInfo info = seg.open_region(name, Kind::kRoaring);
  return RoaringSet(internal::attach(seg, info));
}

bool RoaringSet::drop(Segment& seg, std::string_view name) {
  auto info = seg.find(name);
  if (!info) return false;
  if (info->kind != Kind::kRoaring) seg.open_region(name, Kind::kRoaring);  // throws kWrongKind
  return seg.drop(name, [](std::byte* region, uint64_t bytes, ControlTxn& txn) {
    if (bytes < sizeof(RoaringHeader)) return;
    auto* h = reinterpret_cast<RoaringHeader*>(region);
    if (h->magic != kRegionMagic) return;
    std::byte* base = txn.base();
    uint64_t size = txn.segment().size();
    std::vector<uint64_t> offs;
    // A snapshot header at o, or nullptr when o is not an aligned offset with room for one.
    auto snap_at = [&](uint64_t o) -> const SnapHeader* {
      if (o == 0 || o % 64 != 0 || o >= size || size - o < sizeof(SnapHeader)) return nullptr;
      auto* sh = reinterpret_cast<const SnapHeader*>(base + o);
      return sh->magic == kSnapMagic ? sh : nullptr;
    };
    auto add_version = [&](uint64_t snap) {
      offs.push_back(snap);
      if (const SnapHeader* sh = snap_at(snap)) {
        offs.push_back(sh->delta_off);
        offs.push_back(sh->prev_delta_off);
      }
    };
    add_version(h->current.load());
    if (h->staged_snap != h->current.load()) {
      // A staged, unpublished version owns its snapshot and active delta only.
      if (h->staged_snap != 0) {
        offs.push_back(h->staged_snap);
        if (const SnapHeader* sh = snap_at(h->staged_snap)) offs.push_back(sh->delta_off);
      }
    } else if (h->staged_from != 0) {
      // Published but its predecessor not yet retired: the predecessor is garbage too.
      offs.push_back(h->staged_from);
      if (const SnapHeader* sh = snap_at(h->staged_from)) offs.push_back(sh->prev_delta_off);
    }
    for (const auto& p : h->pending) {
      offs.push_back(p.snap_off);
      offs.push_back(p.delta_off);
    }
    std::sort(offs.begin(), offs.end());
    offs.erase(std::unique(offs.begin(), offs.end()), offs.end());
    for (uint64_t o : offs) {
      if (o == 0 || o >= size || o % 64 != 0) continue;
      try {
        txn.free(o);  // validates the extent header before any store: a corrupt offset is skipped, not followed
      } catch (const Error&) {
      }
    }
  });
}

bool RoaringSet::valid() const noexcept { return local_ && local_->live_region(); }
const RegionInfo& RoaringSet::region() const noexcept { return local_->region; }

RoaringStatus RoaringSet::write(uint32_t value, int op_int) noexcept {
  if (!local_ || !local_->live_region()) return RoaringStatus::kDropped;
  const Op op = static_cast<Op>(op_int);
  View* view = internal::current_view(local_);
  if (!view) return RoaringStatus::kDropped;
  uint64_t fill = 0;
  for (;;) {
    if (delta_write(view->delta, value, op, local_->limit) == WriteResult::kFull) {
      if (!internal::make_room(local_, view->snap_off)) return RoaringStatus::kFull;
      view = internal::current_view(local_);
      if (!view) return RoaringStatus::kDropped;
      continue;
    }
    if (op == Op::kAdd)
      SHMF_KILL_POINT("roaring.add.after_commit");
    else
      SHMF_KILL_POINT("roaring.remove.after_commit");
    // If a compaction published meanwhile, our delta may be out of the chain
    // (or hidden under a newer delta): write again into the newest one.
    if (local_->hdr->current.load() == view->snap_off) break;  // seq_cst: pairs with the publish CAS
    view = internal::current_view(local_);
    if (!view) return RoaringStatus::kDropped;
  }
  fill = view->delta->fill.load(std::memory_order_relaxed);  // relaxed: a trigger heuristic
  if (local_->auto_compact && fill >= local_->trigger && local_->hdr->claim.load(std::memory_order_relaxed) == 0) {
    try {
      internal::compact_impl(local_, nullptr);
    } catch (...) {
      // The write is already durable in the delta; compaction retries on the next write.
    }
  }
  return RoaringStatus::kOk;
}

RoaringStatus RoaringSet::add(uint32_t value) noexcept { return write(value, static_cast<int>(Op::kAdd)); }
RoaringStatus RoaringSet::remove(uint32_t value) noexcept { return write(value, static_cast<int>(Op::kRemove)); }
RoaringStatus RoaringSet::add_u64(uint64_t value) noexcept {
  return value > UINT32_MAX ? RoaringStatus::kOutOfRange : add(static_cast<uint32_t>(value));
}
RoaringStatus RoaringSet::remove_u64(uint64_t value) noexcept {
  return value > UINT32_MAX ? RoaringStatus::kOutOfRange : remove(static_cast<uint32_t>(value));
}

bool RoaringSet::contains(uint32_t value) const noexcept {
  if (!local_ || !local_->live_region()) return false;
  View* view = internal::current_view(local_);
  return view && view->contains(value);
}
bool RoaringSet::contains_u64(uint64_t value) const noexcept {
  return value <= UINT32_MAX && contains(static_cast<uint32_t>(value));
}

RoaringStatus RoaringSet::add_many(std::span<const uint32_t> values) noexcept {
  for (uint32_t v : values)
    if (auto s = add(v); s != RoaringStatus::kOk) return s;
  return RoaringStatus::kOk;
}
RoaringStatus RoaringSet::add_many(std::span<const uint64_t> values) noexcept {
  for (uint64_t v : values)
    if (v > UINT32_MAX) return RoaringStatus::kOutOfRange;
  for (uint64_t v : values)
    if (auto s = add(static_cast<uint32_t>(v)); s != RoaringStatus::kOk) return s;
  return RoaringStatus::kOk;
}
RoaringStatus RoaringSet::remove_many(std::span<const uint32_t> values) noexcept {
  for (uint32_t v : values)
    if (auto s = remove(v); s != RoaringStatus::kOk) return s;
  return RoaringStatus::kOk;
}

void RoaringSet::contains_many(std::span<const uint32_t> values, std::span<uint8_t> out) const noexcept {
  size_t n = std::min(values.size(), out.size());
  if (!local_ || !local_->live_region()) {
    std::fill(out.begin(), out.begin() + static_cast<long>(n), 0);
    return;
  }
  View* view = internal::current_view(local_);
  for (size_t i = 0; i < n; ++i) out[i] = view && view->contains(values[i]);
}
void RoaringSet::contains_many(std::span<const uint64_t> values, std::span<uint8_t> out) const noexcept {
  size_t n = std::min(values.size(), out.size());
  if (!local_ || !local_->live_region()) {
    std::fill(out.begin(), out.begin() + static_cast<long>(n), 0);
    return;
  }
  View* view = internal::current_view(local_);
  for (size_t i = 0; i < n; ++i)
    out[i] = view && values[i] <= UINT32_MAX && view->contains(static_cast<uint32_t>(values[i]));
}

RoaringStatus RoaringSet::add_range(uint64_t lo, uint64_t hi) noexcept {
  if (hi > (uint64_t{1} << 32) || lo > hi) return RoaringStatus::kOutOfRange;
  if (!local_ || !local_->live_region()) return RoaringStatus::kDropped;
  if (hi - lo <= 1024) {
    for (uint64_t v = lo; v < hi; ++v)
      if (auto s = add(static_cast<uint32_t>(v)); s != RoaringStatus::kOk) return s;
    return RoaringStatus::kOk;
  }
  try {
    internal::BitmapPtr b(roaring_bitmap_from_range(lo, hi, 1));
    merge(b.p);
    return RoaringStatus::kOk;
  } catch (const Error& e) {
    return e.code() == ErrorCode::kDropped ? RoaringStatus::kDropped : RoaringStatus::kFull;
  } catch (...) {
    return RoaringStatus::kFull;
  }
}

uint64_t RoaringSet::cardinality() const noexcept {
  if (!local_ || !local_->live_region()) return 0;
  View* view = internal::current_view(local_);
  if (!view) return 0;
  int64_t card = static_cast<int64_t>(view->snap->cardinality);
  auto adjust = [&](uint32_t v, Op op) {
    bool in_snap = roaring_bitmap_contains(view->bm, v);
    if (op == Op::kAdd && !in_snap) ++card;
    if (op == Op::kRemove && in_snap) --card;
  };
  delta_for_each(view->delta, adjust);
  if (view->prev)
    delta_for_each(view->prev, [&](uint32_t v, Op op) {
      if (delta_lookup(view->delta, v) == Op::kNone) adjust(v, op);
    });
  return static_cast<uint64_t>(std::max<int64_t>(card, 0));
}

bool RoaringSet::compact() {
  if (!local_) throw Error(ErrorCode::kInvalidArgument, "compact() on an empty RoaringSet handle");
  return internal::compact_impl(local_, nullptr);
}

void RoaringSet::merge(const roaring_bitmap_t* b) {
  if (!local_) throw Error(ErrorCode::kInvalidArgument, "merge() on an empty RoaringSet handle");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!internal::compact_impl(local_, b)) {
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(ErrorCode::kBusy, "Roaring set " + internal::quoted(local_->region.name) +
                                        ": another process has been compacting for 30 s; retry later");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

uint32_t RoaringSet::reclaim() {
  if (!local_ || !local_->live_region()) return 0;
  internal::current_view(local_);  // this thread's cached view moves to the newest version
  if (!internal::try_claim(*local_)) return 0;
  internal::ClaimGuard guard{*local_};
  return internal::reclaim_locked(*local_);
}

roaring_bitmap_t* RoaringSet::to_bitmap() const {
  if (!local_ || !local_->live_region())
    throw Error(ErrorCode::kDropped, "Roaring set was dropped: open it again or recreate it");
  View* view = internal::current_view(local_);
  if (!view) throw Error(ErrorCode::kCorrupt, "Roaring set " + internal::quoted(local_->region.name) + ": snapshot unreadable; run 'shmtool check'");
  internal::BitmapPtr b(roaring_bitmap_copy(view->bm));
  if (view->prev) internal::apply_delta(b.p, view->prev);
  internal::apply_delta(b.p, view->delta);
  return b.release();
}

std::string RoaringSet::export_portable() const {
  internal::BitmapPtr b(to_bitmap());
  roaring_bitmap_run_optimize(b.p);
  std::string out(roaring_bitmap_portable_size_in_bytes(b.p), '\0');
  roaring_bitmap_portable_serialize(b.p, out.data());
  return out;
}

roaring_bitmap_t* RoaringSet::parse_portable(std::string_view bytes) {
  size_t consumed = 0;
  std::string err = portable_validate(bytes.data(), bytes.size(), &consumed);
  if (!err.empty()) throw Error(ErrorCode::kBadInput, err);
  if (consumed != bytes.size())
    throw Error(ErrorCode::kBadInput, "Roaring serialization of " + std::to_string(consumed) + " bytes is followed by " +
                                          std::to_string(bytes.size() - consumed) +
                                          " trailing bytes: pass exactly one serialized bitmap");
  roaring_bitmap_t* b = roaring_bitmap_portable_deserialize_safe(bytes.data(), bytes.size());
  if (!b) throw Error(ErrorCode::kBadInput, "CRoaring rejected the serialization (corrupt container data)");
  return b;
}

void RoaringSet::import_portable(std::string_view bytes) {
  internal::BitmapPtr b(parse_portable(bytes));
  merge(b.p);
}

void RoaringSet::import_portable_file(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) throw Error(ErrorCode::kIo, "cannot open '" + path + "': " + strerror(errno) + ": check the path and permissions");
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  bool err = ferror(f) != 0;
  fclose(f);
  if (err) throw Error(ErrorCode::kIo, "reading '" + path + "' failed");
  try {
    import_portable(bytes);
  } catch (const Error& e) {
    throw Error(e.code(), "'" + path + "': " + e.what());
  }
}

void RoaringSet::export_portable_file(const std::string& path) const {
  std::string bytes = export_portable();
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) throw Error(ErrorCode::kIo, "cannot create '" + path + "': " + strerror(errno) + ": check the path and permissions");
  bool ok = fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = (fclose(f) == 0) && ok;
  if (!ok) throw Error(ErrorCode::kIo, "writing '" + path + "' failed (disk full?)");
}

uint32_t RoaringSet::parse_value(std::string_view text) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && p == text.data() + text.size() && v > UINT32_MAX))
    throw Error(ErrorCode::kBadInput, "value " + internal::clip(text) +
                                          " does not fit in 32 bits: Roaring sets hold 0..4294967295 (map wider ids "
                                          "to 32 bits first, or use an exact set)");
  if (ec != std::errc() || p != text.data() + text.size() || text.empty())
    throw Error(ErrorCode::kBadInput, "'" + internal::clip(text) + "' is not a decimal id: pass 0..4294967295");
  return static_cast<uint32_t>(v);
}

RoaringStats RoaringSet::stats() const {
  if (!local_ || !local_->live_region()) throw Error(ErrorCode::kDropped, "Roaring set was dropped");
  View* view = internal::current_view(local_);
  if (!view) throw Error(ErrorCode::kCorrupt, "Roaring set " + internal::quoted(local_->region.name) + ": snapshot unreadable; run 'shmtool check'");
  RoaringStats s;
  s.snapshot_cardinality = view->snap->cardinality;
  s.snapshot_bytes = view->snap->frozen_bytes;
  s.snapshot_generation = view->gen;
  s.delta_capacity = local_->capacity;
  s.delta_fill = view->delta->fill.load(std::memory_order_relaxed);  // relaxed: statistics
  s.prev_delta_fill = view->prev ? view->prev->fill.load(std::memory_order_relaxed) : 0;
  s.delta_bytes = delta_bytes(local_->capacity) * (view->prev ? 2 : 1);
  s.compactions = local_->hdr->compactions;
  s.claim_owner = local_->hdr->claim.load();
  uint64_t pending_bytes = 0;
  for (const auto& p : local_->hdr->pending)
    if (p.snap_off) {
      ++s.pending_free;
      if (!internal::pending_ok(local_->base, local_->seg.size(), p)) continue;  // corrupt: check reports it
      auto* sh = reinterpret_cast<const SnapHeader*>(local_->base + p.snap_off);
      pending_bytes += sizeof(SnapHeader) + sh->frozen_bytes + (p.delta_off ? delta_bytes(local_->capacity) : 0);
    }
  s.total_bytes = local_->region.size + sizeof(SnapHeader) + s.snapshot_bytes + s.delta_bytes + pending_bytes;
  roaring_statistics_t st;
  roaring_bitmap_statistics(view->bm, &st);
  s.containers = st.n_containers;
  s.array_containers = st.n_array_containers;
  s.bitmap_containers = st.n_bitset_containers;
  s.run_containers = st.n_run_containers;
  ReaderSlot* slots = reader_table(local_->hdr);
  for (uint32_t i = 0; i < local_->hdr->reader_slots; ++i) {
    uint64_t t = slots[i].token.load();
    if (t && local_->seg.token_alive(t)) ++s.readers;
  }
  s.cardinality = cardinality();
  return s;
}

// ---- set algebra --------------------------------------------------------------------

roaring_bitmap_t* RoaringSet::compute(Segment& seg, SetOp op, std::span<const std::string> sources) {
  if (sources.empty()) throw Error(ErrorCode::kInvalidArgument, "set operation needs at least one source set");
  internal::BitmapPtr acc(open(seg, sources[0]).to_bitmap());
  for (size_t i = 1; i < sources.size(); ++i) {
    internal::BitmapPtr b(open(seg, sources[i]).to_bitmap());
    switch (op) {
      case SetOp::kUnion: roaring_bitmap_or_inplace(acc.p, b.p); break;
      case SetOp::kIntersection: roaring_bitmap_and_inplace(acc.p, b.p); break;
      case SetOp::kDifference: roaring_bitmap_andnot_inplace(acc.p, b.p); break;
      case SetOp::kXor: roaring_bitmap_xor_inplace(acc.p, b.p); break;
    }
  }
  return acc.release();
}

uint64_t RoaringSet::compute_cardinality(Segment& seg, SetOp op, std::span<const std::string> sources) {
  if (sources.size() == 2) {
    internal::BitmapPtr a(open(seg, sources[0]).to_bitmap()), b(open(seg, sources[1]).to_bitmap());
    switch (op) {
      case SetOp::kUnion: return roaring_bitmap_or_cardinality(a.p, b.p);
      case SetOp::kIntersection: return roaring_bitmap_and_cardinality(a.p, b.p);
      case SetOp::kDifference: return roaring_bitmap_andnot_cardinality(a.p, b.p);
      case SetOp::kXor: return roaring_bitmap_xor_cardinality(a.p, b.p);
    }
  }
  internal::BitmapPtr r(compute(seg, op, sources));
  return roaring_bitmap_get_cardinality(r.p);
}

RoaringSet RoaringSet::store(Segment& seg, std::string_view dest, SetOp op, std::span<const std::string> sources,
                             const RoaringOptions& opts) {
  internal::BitmapPtr r(compute(seg, op, sources));
  return create_from(seg, dest, r.p, opts);
}

bool RoaringSet::contains_any(std::span<const RoaringSet> sets, uint32_t x) noexcept {
  for (const auto& s : sets)
    if (s.contains(x)) return true;
  return false;
}

// ---- integrity -------------------------------------------------------------------------

namespace internal {

void check_roaring(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report) {
  std::string where = "roaring '" + region.name + "'";
  auto finding = [&](const std::string& problem, bool repaired = false) {
    report.findings.push_back(CheckFinding{where, problem, repaired});
  };
  RoaringHeader* h = nullptr;
  try {
    h = checked_header(seg, region);
  } catch (const Error& e) {
    finding(e.what());
    return;
  }
  std::byte* base = seg.base();
  uint64_t size = seg.size();
  auto inside = [&](uint64_t off, uint64_t len) { return off != 0 && off <= size && len <= size - off; };
  uint64_t cur = h->current.load();
  if (!version_ok(base, size, cur, h->delta_capacity))
    return finding("published snapshot offset " + std::to_string(cur) +
                   " is misaligned, outside the segment, or not a snapshot (bad magic or delta offsets)");
  auto* sh = reinterpret_cast<const SnapHeader*>(base + cur);
  if (!inside(cur + sizeof(SnapHeader), sh->frozen_bytes)) return finding("snapshot bytes run past the segment");
  if (((cur + sizeof(SnapHeader)) & 31) != 0) return finding("snapshot bytes are not 32-byte aligned");
  const roaring_bitmap_t* v = roaring_bitmap_frozen_view(frozen_bytes(sh), sh->frozen_bytes);
  if (!v) {
    finding("CRoaring cannot view the published frozen snapshot");
  } else {
    uint64_t card = roaring_bitmap_get_cardinality(v);
    if (card != sh->cardinality)
      finding("snapshot cardinality " + std::to_string(card) + " differs from the header's " +
              std::to_string(sh->cardinality));
    roaring_bitmap_free(v);
  }
  for (int which = 0; which < 2; ++which) {
    uint64_t d = which == 0 ? sh->delta_off : sh->prev_delta_off;
    if (which == 1 && d == 0) continue;
    if (!inside(d, delta_bytes(h->delta_capacity))) {
      finding("delta table offset " + std::to_string(d) + " out of bounds");
      continue;
    }
    uint64_t claimed = 0;
    std::string err = delta_validate(reinterpret_cast<DeltaHeader*>(base + d), h->delta_capacity, &claimed);
    if (!err.empty()) finding(err);
  }
  for (auto& p : h->pending) {
    if (p.snap_off == 0 || pending_ok(base, size, p)) continue;
    bool fixed = false;
    if (repair) {
      seg.transact([&](ControlTxn& txn) {  // forget it: the space it named shows up as a leak, never freed blindly
        if (!seg.region_live(region.slot, region.generation)) return;
        txn.store_u64(&p.snap_off, 0);
        txn.store_u64(&p.delta_off, 0);
        txn.store_u64(&p.generation, 0);
      });
      fixed = true;
    }
    finding("retired-snapshot list holds a malformed offset " + std::to_string(p.snap_off), fixed);
  }
  uint64_t st = h->staged_snap, sf = h->staged_from;
  if (st != 0 && (!version_ok(base, size, st, h->delta_capacity) || !version_ok(base, size, sf, h->delta_capacity))) {
    bool fixed = false;
    if (repair) {
      seg.transact([&](ControlTxn& txn) {
        if (!seg.region_live(region.slot, region.generation)) return;
        txn.store_u64(&h->staged_snap, 0);
        txn.store_u64(&h->staged_from, 0);
      });
      fixed = true;
    }
    finding("staged compaction names a malformed snapshot (" + std::to_string(st) + " from " + std::to_string(sf) + ")",
            fixed);
  }
  uint64_t c = h->claim.load();
  if (c != 0 && !seg.token_alive(c)) {
    bool fixed = repair && h->claim.compare_exchange_strong(c, 0);
    finding("compaction claim held by a dead process (token " + std::to_string(c) +
                "); the next compaction takes it over and finishes or discards its work",
            fixed);
  }
}

}  // namespace internal
}  // namespace shmfilter
