// lib/structures/window.cpp: the Window handle: the slot ring, rotation by the
// clock, table preparation and overflow under the segment lock, per-space
// counters, the data-plane operations over the kernels of window_impl.h
// (blocked Bloom lines / cuckoo tables), stats and check_window.
//
// Protocol summary (docs/CONCURRENCY.md "Window" has the table):
//  - rotation to bucket E: CAS slot[E % S].tag 0 -> E + 1 (the spare's fresh table;
//    one winner, nobody waits), then a CAS-max of header.epoch to E + 1 by anyone who
//    sees the tag claimed. A winner killed between the two leaves the tag claimed;
//    the next caller raises the epoch.
//  - no spare ready (maintain() did not run): the caller prepares the slot under the
//    segment lock (free the expired table, allocate a fresh one; undo-logged), then claims.
//  - expiry: maintain() retires slots whose bucket left every window (tag -> kRetired,
//    table -> 0, extents freed: quarantined until every process passed a quiescent point,
//    so a reader still inside a query of that table stays safe). Every data-plane call
//    is a quiescent point of its process at its start (one call in 256, see kQuiesceEvery).
//  - overflow: allocated under the segment lock when the main table is full, published
//    by a release store after the commit (pending_overflow keeps a committed, unpublished
//    extent owned).
#include "shmfilter/window.hpp"

#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <string>

#include "base/hash.h"
#include "base/kill_point.h"
#include "segment/layout.h"
#include "structures/region_handle.h"
#include "structures/window_impl.h"

namespace shmfilter {

namespace wi = internal::window;
namespace ck = internal::cuckoo;
namespace bl = internal::bloom;
using wi::BucketSlot;
using wi::TableHead;
using wi::WindowHeader;

std::string_view window_variant_name(WindowVariant v) noexcept { return v == WindowVariant::kCuckoo ? "cuckoo" : "bloom"; }

std::string_view window_status_name(WindowStatus s) noexcept {
  switch (s) {
    case WindowStatus::kNew: return "new";
    case WindowStatus::kSeen: return "seen";
    case WindowStatus::kRemoved: return "removed";
    case WindowStatus::kAbsent: return "absent";
    case WindowStatus::kFull: return "full";
    case WindowStatus::kUnsupported: return "unsupported";
    case WindowStatus::kDropped: return "dropped";
  }
  return "?";
}

double WindowStats::window_fp_now(uint32_t w) const noexcept {
  double keep = 1;
  for (size_t i = 0; i < buckets.size() && i < w; ++i) keep *= 1 - buckets[i].fp_rate_now;
  return 1 - keep;
}
double WindowStats::window_fp_bound(uint32_t w) const noexcept {
  double keep = 1;
  for (size_t i = 0; i < buckets.size() && i < w; ++i) keep *= 1 - buckets[i].fp_bound;
  return 1 - keep;
}

namespace {

constexpr uint32_t kQuiesceEvery = 256;  // data-plane calls between quiescent points (getpid() is a syscall)
constexpr size_t kBatch = 16;            // pairs in flight per prefetch round
constexpr uint32_t kMaxPath = 5;

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

int64_t system_now() noexcept {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);  // vDSO, ~10 ns; a bucket is seconds long
  return ts.tv_sec;
}

void validate_options(const WindowOptions& o) {
  auto bad = [](const std::string& m) { throw Error(ErrorCode::kInvalidArgument, m); };
  if (o.variant != WindowVariant::kBloom && o.variant != WindowVariant::kCuckoo)
    bad("unknown window variant: use bloom (insert-only) or cuckoo (deletable)");
  if (o.expected_per_bucket == 0)
    bad("expected_per_bucket 0 is invalid: pass the distinct (space, item) pairs one bucket must hold, >= 1");
  if (!(o.error > 0 && o.error < 1))
    bad("error rate " + fmt_double(o.error) + " is outside (0, 1): pass e.g. 0.01 for 1% false positives");
  if (o.bucket_seconds == 0) bad("bucket_seconds 0 is invalid: pass the bucket length in seconds, e.g. 86400 for days");
  if (o.bucket_seconds > (uint64_t{1} << 40)) bad("bucket_seconds " + std::to_string(o.bucket_seconds) + " is too large: pass <= 2^40");
  if (o.utc_offset <= -(int64_t{1} << 40) || o.utc_offset >= (int64_t{1} << 40))
    bad("utc_offset " + std::to_string(o.utc_offset) + " is out of range: pass seconds east of UTC, e.g. 28800 for UTC+8");
  if (o.retention == 0 || o.retention > kWindowMaxRetention)
    bad("retention " + std::to_string(o.retention) + " is outside [1, " + std::to_string(kWindowMaxRetention) +
        "]: pass the number of buckets a window keeps, e.g. 7");
  if (o.error_window > o.retention)
    bad("error_window " + std::to_string(o.error_window) + " is larger than retention " + std::to_string(o.retention) +
        ": pass a window w <= retention (0 means retention)");
  if (o.max_spaces == 0 || o.max_spaces > kWindowMaxSpaces)
    bad("max_spaces " + std::to_string(o.max_spaces) + " is outside [1, " + std::to_string(kWindowMaxSpaces) + "]");
}

struct Plan {
  uint32_t variant, slots, space_table, error_window;
  double p1, pm, po;
  uint32_t k_main = 0, k_ovf = 0;
  uint64_t region = 0;
};

Plan make_plan(const WindowOptions& o) {
  validate_options(o);
  Plan p;
  p.variant = o.variant == WindowVariant::kCuckoo ? wi::kVariantCuckoo : wi::kVariantBloom;
  p.slots = o.retention + 1;
  p.space_table = wi::space_table_for(o.max_spaces);
  p.error_window = o.error_window == 0 ? o.retention : o.error_window;
  p.p1 = wi::one_bucket_error(o.error, p.error_window);
  p.pm = p.p1 * wi::kMainShare;
  p.po = p.p1 * (1 - wi::kMainShare);
  if (p.variant == wi::kVariantBloom) {
    bl::Sizing a, b;
    if (!bl::size_blocked(o.expected_per_bucket, p.pm, a) || !bl::size_blocked(o.expected_per_bucket, p.po, b))
      throw Error(ErrorCode::kInvalidArgument, "expected_per_bucket " + std::to_string(o.expected_per_bucket) +
                                                   " at error " + fmt_double(o.error) +
                                                   " cannot be sized: lower the count or raise the error rate");
    p.k_main = a.k;
    p.k_ovf = b.k;
  } else {
    if (p.p1 / 2 < 2.0 * ck::kSlots / 65536.0)
      throw Error(ErrorCode::kInvalidArgument, "error " + fmt_double(o.error) + " over " + std::to_string(p.error_window) +
                                                   " buckets needs more than 16 fingerprint bits per bucket: raise the "
                                                   "error rate or lower error_window (the cuckoo variant reaches 2.4e-4 per bucket)");
    p.k_main = p.k_ovf = wi::cuckoo_fp_bits(p.p1);
    if (ck::log2_buckets_for(o.expected_per_bucket) > 32)
      throw Error(ErrorCode::kInvalidArgument, "expected_per_bucket " + std::to_string(o.expected_per_bucket) +
                                                   " needs more than 2^32 cuckoo buckets: lower it");
  }
  p.region = wi::region_bytes(p.slots, p.space_table);
  return p;
}

inline WindowHeader* header_at(std::byte* base, uint64_t off) { return reinterpret_cast<WindowHeader*>(base + off); }
inline uint64_t* as_u64(std::atomic<uint64_t>* a) {
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t), "atomic<u64> must be a plain u64 in memory");
  return reinterpret_cast<uint64_t*>(a);
}

// Main-table bytes and geometry for `capacity`.
uint64_t main_bytes_for(const WindowHeader* h, uint64_t capacity, uint64_t* geometry) {
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
  if (h->variant == wi::kVariantCuckoo) {
    uint32_t l2 = static_cast<uint32_t>(geom);
    ck::init_header(reinterpret_cast<ck::Header*>(t + moff), h->k_main, kMaxPath, /*expansion=*/2, /*max_subs=*/2,
                    h->seed, capacity, h->p1, mb, l2, off + moff + sizeof(ck::Header));
  }
  return off;
}

void free_table(ControlTxn& txn, std::byte* base, uint64_t off) {
  auto* head = reinterpret_cast<TableHead*>(base + off);
  uint64_t ovf = head->overflow.load(std::memory_order_acquire);  // acquire: pairs with the publisher
  if (ovf == 0) ovf = head->pending_overflow;
  if (ovf != 0) txn.free(ovf);
  txn.free(off);
}

uint64_t table_distinct(const TableHead* t) noexcept {
  uint64_t s = 0;
  // relaxed: statistics and the sizing input; slightly stale is fine.
  for (uint32_t i = 0; i < wi::kStripes; ++i) s += t->stripes[i].distinct.load(std::memory_order_relaxed);
  return s;
}

// The table of bucket e, or null (reader protocol, see BucketSlot).
inline TableHead* table_for(std::byte* base, WindowHeader* h, int64_t e) noexcept {
  if (e < 0) return nullptr;
  BucketSlot& s = wi::slot_table(h)[static_cast<uint64_t>(e) % h->slots];
  const uint64_t want = static_cast<uint64_t>(e) + 1;
  // acquire: the claimed tag makes the table (initialised before the slot named it) visible.
  if (s.tag.load(std::memory_order_acquire) != want) return nullptr;
  uint64_t off = std::atomic_ref<uint64_t>(s.table).load(std::memory_order_relaxed);  // relaxed: re-checked below
  std::atomic_thread_fence(std::memory_order_acquire);  // orders the table load before the tag re-check
  if (s.tag.load(std::memory_order_relaxed) != want || off == 0) return nullptr;  // relaxed: after the fence
  return reinterpret_cast<TableHead*>(base + off);
}

inline void raise_epoch(WindowHeader* h, uint64_t v) noexcept {
  uint64_t cur = h->epoch.load(std::memory_order_relaxed);  // relaxed: the CAS below decides
  // release: the claimed slot (tag stored before) is visible to whoever acquires the epoch.
  while (cur < v && !h->epoch.compare_exchange_weak(cur, v, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

// Space row: index in [0, T) for a claimed space, T for "other", UINT32_MAX for "not claimed" (claim == false).
uint32_t space_row(WindowHeader* h, uint64_t space, bool claim) noexcept {
  const uint32_t T = h->space_table;
  if (space == ~uint64_t{0}) return T;  // reserved: key space + 1 would be 0
  const uint64_t key = space + 1;
  uint64_t* keys = wi::space_keys(h);
  uint64_t i = bl::fmix64(key) & (T - 1);
  for (uint32_t probe = 0; probe < T; ++probe, i = (i + 1) & (T - 1)) {
    std::atomic_ref<uint64_t> slot(keys[i]);
    uint64_t k = slot.load(std::memory_order_relaxed);  // relaxed: a key carries no other data
    if (k == key) return static_cast<uint32_t>(i);
    if (k != 0) continue;
    if (!claim) break;
    if (h->spaces_claimed.load(std::memory_order_relaxed) >= h->max_spaces) return T;  // relaxed: a soft limit
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
  return h->spaces_claimed.load(std::memory_order_relaxed) >= h->max_spaces ? T : UINT32_MAX;  // relaxed: statistic
}

inline uint64_t* counters_of(TableHead* t) noexcept {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(t) + sizeof(TableHead));
}
inline uint64_t* bloom_words(TableHead* t, const WindowHeader* h) noexcept {
  return reinterpret_cast<uint64_t*>(reinterpret_cast<std::byte*>(t) + wi::main_offset_in_table(h->space_table));
}
inline ck::Header* cuckoo_of(TableHead* t, const WindowHeader* h) noexcept {
  return reinterpret_cast<ck::Header*>(reinterpret_cast<std::byte*>(t) + wi::main_offset_in_table(h->space_table));
}

bool seg_token_alive(const void* ctx, uint64_t token) { return static_cast<const Segment*>(ctx)->token_alive(token); }
uint64_t seg_owner_token(const void* ctx) { return static_cast<const Segment*>(ctx)->owner_token(); }
ck::Liveness liveness_of(const Segment& seg) noexcept { return ck::Liveness{0, &seg, &seg_token_alive, &seg_owner_token}; }

// Per-bucket FP model now and the bound the sizing guarantees at this load.
void bucket_fp(const WindowHeader* h, TableHead* t, uint64_t distinct, double& now, double& bound, bool& over) {
  const uint64_t cap = t->capacity;
  over = false;
  if (h->variant == wi::kVariantBloom) {
    double main_load = static_cast<double>(std::min(distinct, cap));
    double ovf_load = static_cast<double>(distinct > cap ? distinct - cap : 0);
    double m_bits = static_cast<double>(t->geometry) * bl::kBlockBits;
    double a = main_load > 0 ? bl::blocked_fp(m_bits / main_load, h->k_main) : 0;
    double b = 0;
    uint64_t ovf = t->overflow.load(std::memory_order_acquire);  // acquire: pairs with the publisher
    if (ovf_load > 0) {
      if (ovf != 0) {
        double o_bits = static_cast<double>(t->overflow_geometry) * bl::kBlockBits;
        b = bl::blocked_fp(o_bits / ovf_load, h->k_overflow);
      } else {
        a = bl::blocked_fp(m_bits / static_cast<double>(distinct), h->k_main);  // no overflow: all in main
        over = true;
      }
    }
    now = 1 - (1 - a) * (1 - b);
    if (distinct > 2 * cap) over = true;
    bound = over ? std::max(now, h->p1) : h->p1;
    return;
  }
  ck::Header* ch = cuckoo_of(t, h);
  uint32_t subs = ck::sub_count_acquire(ch);
  double lanes = 4.0 * static_cast<double>(uint64_t{1} << t->geometry);
  double f = std::ldexp(1.0, static_cast<int>(h->k_main)) - 1;
  double n = static_cast<double>(ck::load_relaxed(ch->size));  // relaxed: statistic
  now = std::min(1.0, 2.0 * ck::kSlots * (n / lanes) / f);
  bound = std::min(1.0, 2.0 * ck::kSlots / (f + 1) * subs);
  over = ck::load_relaxed(ch->failures) != 0;  // relaxed: statistic
}

}  // namespace

// ---------------------------------------------------------------------------
// Data-plane implementation (a friend of Window).
struct WindowOps {
  static WindowHeader* hdr(const Window& w) noexcept { return header_at(w.base_, w.offset_); }

  static void tick(const Window& w) noexcept {
    if (++w.ops_ % kQuiesceEvery == 0) const_cast<Segment&>(w.seg_).quiesce();
  }

  // Bucket a reader uses: the newer of the clock's and the header's.
  static int64_t read_epoch(const Window& w) noexcept {
    WindowHeader* h = hdr(w);
    int64_t e = w.bucket_of(w.now());
    uint64_t g = h->epoch.load(std::memory_order_acquire);  // acquire: pairs with raise_epoch
    if (g > 0 && static_cast<int64_t>(g - 1) > e) e = static_cast<int64_t>(g - 1);
    return e;
  }

  // Capacity of the next bucket's table, from the buckets in the window (docs/window.md):
  // a bucket that outgrew its table (its overflow carried it) asks for 1.5 x its distinct
  // count (the mission's headroom); a bucket above `expected` that fit its grown table asks
  // to keep that size (no oscillation while traffic stays high); otherwise `expected`. So a
  // normal day costs one table of `expected`, and the table shrinks back once 7 quiet days passed.
  static uint64_t desired_capacity(const Window& w, int64_t e) noexcept {
    WindowHeader* h = hdr(w);
    uint64_t want = h->expected;
    for (uint32_t age = 0; age < h->retention; ++age) {
      TableHead* t = table_for(w.base_, h, e - static_cast<int64_t>(age));
      if (t == nullptr) continue;
      const uint64_t d = table_distinct(t);
      if (d > t->capacity)
        want = std::max(want, static_cast<uint64_t>(std::ceil(static_cast<double>(d) * wi::kHeadroom)));
      else if (d > h->expected)
        want = std::max(want, t->capacity);
    }
    return want;
  }

  // Under the lock: make slot s hold a fresh table (tag 0), freeing what it held.
  // Only for slots whose tag is retired or expired data (never a live bucket).
  static void prepare_locked(const Window& w, ControlTxn& txn, BucketSlot& s, uint64_t capacity) {
    WindowHeader* h = hdr(w);
    txn.charge_to(w.identity());  // check() reports the tables as leaked if the window is dropped without them
    if (s.tag.load(std::memory_order_relaxed) != wi::kRetired) {  // relaxed: we hold the lock; only rotators CAS 0
      txn.store_u64(as_u64(&s.tag), wi::kRetired);
      std::atomic_thread_fence(std::memory_order_release);  // the retired tag is visible before the table changes
    }
    uint64_t old = s.table;
    if (old != 0) {
      txn.store_u64(&s.table, 0);
      free_table(txn, w.base_, old);
    }
    SHMF_KILL_POINT("window.prepare.after_free");
    uint64_t off = alloc_table(txn, h, capacity);
    txn.store_u64(&s.table, off);
    SHMF_KILL_POINT("window.prepare.before_ready");
    txn.store_u64(as_u64(&s.tag), 0);
  }

  // Makes bucket e claimable and claims it. False: no table could be had.
  static bool advance(const Window& w, int64_t e) noexcept {
    WindowHeader* h = hdr(w);
    BucketSlot& s = wi::slot_table(h)[static_cast<uint64_t>(e) % h->slots];
    const uint64_t want = static_cast<uint64_t>(e) + 1;
    uint64_t t = s.tag.load(std::memory_order_acquire);  // acquire: pairs with the preparer's commit
    if (t == want) {
      raise_epoch(h, want);
      return true;
    }
    if (t == 0) {
      // acq_rel: acquire the fresh table; release our claim to whoever reads the tag.
      if (s.tag.compare_exchange_strong(t, want, std::memory_order_acq_rel, std::memory_order_acquire)) {
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
    if (t != wi::kRetired && t != 0 && t > want) return false;  // the slot holds a newer bucket: our clock is behind
    // No fresh table here: expired data or retired. Prepare it ourselves (rare: maintain() did not run).
    uint64_t cap = desired_capacity(w, e - 1);
    bool claimed = false;
    try {
      const_cast<Segment&>(w.seg_).transact([&](ControlTxn& txn) {
        uint64_t t2 = s.tag.load(std::memory_order_relaxed);  // relaxed: under the lock (rotators only CAS 0)
        if (t2 == want || (t2 != 0 && t2 != wi::kRetired && t2 > want)) return;
        if (t2 != 0) {
          prepare_locked(w, txn, s, cap);
          h->inline_allocations.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
        }
        // Claim under the lock, so that maintain() (which may take back a fresh spare, also
        // under the lock) cannot take it between our preparation and our claim. A CAS, not
        // a logged store: lock-free rotators may claim too, and a claim is never undone.
        uint64_t zero = 0;
        if (s.tag.compare_exchange_strong(zero, want, std::memory_order_acq_rel, std::memory_order_relaxed)) {
          h->rotations.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
          claimed = true;
        }
      });
    } catch (...) {
      return false;  // kNoSpace or a dead segment
    }
    if (claimed) {
      SHMF_KILL_POINT("window.rotate.after_claim");
      raise_epoch(h, want);
    }
    return true;  // the caller (re)reads the slot
  }

  // The current bucket's table for a writer (rotating if the clock says so).
  static TableHead* current(const Window& w, int64_t& e_out) noexcept {
    WindowHeader* h = hdr(w);
    for (int attempt = 0; attempt < 8; ++attempt) {
      int64_t e = read_epoch(w);
      if (TableHead* t = table_for(w.base_, h, e)) {
        // A claimer killed before its epoch CAS left the tag claimed: raise it for it, so
        // handles whose clocks are behind still find what we mark here.
        if (h->epoch.load(std::memory_order_relaxed) < static_cast<uint64_t>(e) + 1)  // relaxed: raise_epoch decides
          raise_epoch(h, static_cast<uint64_t>(e) + 1);
        e_out = e;
        return t;
      }
      if (!advance(w, e)) return nullptr;
    }
    return nullptr;
  }

  static void count_new(const Window& w, TableHead* t, uint64_t space) noexcept {
    WindowHeader* h = hdr(w);
    uint32_t stripe = static_cast<uint32_t>(w.slot_ ^ (w.seg_.owner_token() * 0x9e3779b9u)) % wi::kStripes;
    // relaxed: a statistic and the main-full trigger.
    uint64_t old = t->stripes[stripe].distinct.fetch_add(1, std::memory_order_relaxed);
    if ((old >> t->check_shift) != ((old + 1) >> t->check_shift) && table_distinct(t) >= t->capacity)
      t->main_full.store(1, std::memory_order_relaxed);  // relaxed: sticky hint, routing only
    uint32_t row = space_row(h, space, true);
    // relaxed: exact count, no other data published with it.
    std::atomic_ref<uint64_t>(counters_of(t)[row]).fetch_add(1, std::memory_order_relaxed);
  }

  // ---- kBloom ------------------------------------------------------------------
  static const uint64_t* bloom_overflow(const Window& w, TableHead* t, bool allocate) noexcept {
    uint64_t off = t->overflow.load(std::memory_order_acquire);  // acquire: its geometry and zeroed lines
    if (off != 0 || !allocate) return off ? reinterpret_cast<const uint64_t*>(w.base_ + off) : nullptr;
    if (t->flags.load(std::memory_order_relaxed) & wi::kTableOverflowFailed) return nullptr;  // relaxed: sticky flag
    WindowHeader* h = hdr(w);
    uint64_t got = 0;
    try {
      const_cast<Segment&>(w.seg_).transact([&](ControlTxn& txn) {
        if (t->overflow.load(std::memory_order_acquire) != 0) return;
        got = t->pending_overflow;
        if (got != 0) return;  // committed by an allocator that died before publishing
        bl::Sizing z;
        if (!bl::size_blocked(t->capacity, h->overflow_error, z)) throw Error(ErrorCode::kInvalidArgument, "overflow size");
        txn.charge_to(w.identity());
        got = txn.allocate(z.bits / 8);
        SHMF_KILL_POINT("window.overflow.after_allocate");
        txn.store_u64(&t->overflow_geometry, z.bits / bl::kBlockBits);
        txn.store_u64(&t->pending_overflow, got);
      });
    } catch (...) {
      t->flags.fetch_or(wi::kTableOverflowFailed, std::memory_order_relaxed);  // relaxed: sticky diagnostic
      h->overflow_failures.fetch_add(1, std::memory_order_relaxed);             // relaxed: statistic
      return nullptr;
    }
    SHMF_KILL_POINT("window.overflow.after_commit");
    if (got != 0) {
      uint64_t expect = 0;
      // release: the geometry (committed) and the zeroed extent are visible with the offset. Never logged.
      t->overflow.compare_exchange_strong(expect, got, std::memory_order_release, std::memory_order_relaxed);
    }
    off = t->overflow.load(std::memory_order_acquire);
    return off ? reinterpret_cast<const uint64_t*>(w.base_ + off) : nullptr;
  }

  static bool bloom_has(const Window& w, TableHead* t, uint64_t hv, const wi::Masks& mm) noexcept {
    WindowHeader* h = hdr(w);
    if (wi::line_has(wi::line_of(bloom_words(t, h), t->geometry, hv), mm)) return true;
    uint64_t off = t->overflow.load(std::memory_order_acquire);  // acquire: pairs with the publisher
    if (off == 0) return false;
    return wi::line_has(wi::line_of(reinterpret_cast<const uint64_t*>(w.base_ + off), t->overflow_geometry, hv),
                        wi::masks_of(hv, h->k_overflow));
  }
  static void bloom_prefetch(const Window& w, TableHead* t, uint64_t hv) noexcept {
    WindowHeader* h = hdr(w);
    bl::prefetch_line(wi::line_of(bloom_words(t, h), t->geometry, hv));
    uint64_t off = t->overflow.load(std::memory_order_relaxed);  // relaxed: a prefetch hint only
    if (off != 0) bl::prefetch_line(wi::line_of(reinterpret_cast<const uint64_t*>(w.base_ + off), t->overflow_geometry, hv));
  }

  static WindowStatus bloom_mark_in(const Window& w, TableHead* t, uint64_t space, uint64_t hv, const wi::Masks& mm) noexcept {
    WindowHeader* h = hdr(w);
    uint64_t* line = const_cast<uint64_t*>(wi::line_of(bloom_words(t, h), t->geometry, hv));
    bl::AddResult r;
    if (t->main_full.load(std::memory_order_relaxed) == 0) {  // relaxed: routing hint (see count_new)
      r = wi::line_add(line, mm);
    } else {
      if (wi::line_has(line, mm)) return WindowStatus::kSeen;
      const uint64_t* ovf = bloom_overflow(w, t, true);
      if (ovf == nullptr) {
        r = wi::line_add(line, mm);  // no overflow: stay in main, stats() reports over capacity
      } else {
        r = wi::line_add(const_cast<uint64_t*>(wi::line_of(ovf, t->overflow_geometry, hv)), wi::masks_of(hv, h->k_overflow));
      }
    }
    if (r.newly_set == 0) return WindowStatus::kSeen;
    if (r.raced) h->racing_marks.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
    count_new(w, t, space);
    return WindowStatus::kNew;
  }

  // ---- kCuckoo -----------------------------------------------------------------
  struct ExpandCtx {
    const Window* w;
    TableHead* t;
  };
  static bool cuckoo_expand(void* ctx, ck::Header* ch) {
    auto* c = static_cast<ExpandCtx*>(ctx);
    const Window& w = *c->w;
    TableHead* t = c->t;
    WindowHeader* h = hdr(w);
    uint32_t n = ck::sub_count_acquire(ch);
    if (n >= 2) return false;
    const ck::SubDesc d0 = ch->subs[0];
    uint64_t bytes = ck::sub_bytes(d0.log2_buckets, d0.log2_stripes, ch->lane_bits);
    uint64_t got = 0;
    try {
      const_cast<Segment&>(w.seg_).transact([&](ControlTxn& txn) {
        got = t->pending_overflow;
        if (got != 0) return;  // committed by an expander that died before publishing (never used: fresh)
        txn.charge_to(w.identity());
        got = txn.allocate(bytes);
        SHMF_KILL_POINT("window.overflow.after_allocate");
        txn.store_u64(&t->pending_overflow, got);
      });
    } catch (...) {
      t->flags.fetch_or(wi::kTableOverflowFailed, std::memory_order_relaxed);  // relaxed: sticky diagnostic
      h->overflow_failures.fetch_add(1, std::memory_order_relaxed);             // relaxed: statistic
      return false;
    }
    SHMF_KILL_POINT("window.overflow.after_commit");
    ch->subs[1] = ck::SubDesc{got, d0.log2_buckets, d0.log2_stripes};  // invisible until sub_count is 2
    ck::A(ch->sub_count).store(2, std::memory_order_release);           // release: subs[1] complete first
    t->overflow.store(got, std::memory_order_release);                   // release: stats/drop see it
    return true;
  }

  template <class LT>
  static WindowStatus cuckoo_mark_in(const Window& w, TableHead* t, uint64_t space, uint64_t hv) noexcept {
    WindowHeader* h = hdr(w);
    ck::Header* ch = cuckoo_of(t, h);
    ExpandCtx ctx{&w, t};
    auto st = ck::insert<LT>(w.base_, ch, ck::split_hash(hv, h->k_main), /*unique=*/true, liveness_of(w.seg_),
                             &WindowOps::cuckoo_expand, &ctx);
    if (st == ck::Status::kExists) return WindowStatus::kSeen;
    if (st != ck::Status::kInserted) return WindowStatus::kFull;
    count_new(w, t, space);
    return WindowStatus::kNew;
  }
  template <class LT>
  static bool cuckoo_has(const Window& w, TableHead* t, uint64_t hv) noexcept {
    WindowHeader* h = hdr(w);
    return ck::contains<LT>(w.base_, cuckoo_of(t, h), ck::split_hash(hv, h->k_main), liveness_of(w.seg_));
  }
  template <class LT>
  static void cuckoo_prefetch(const Window& w, TableHead* t, uint64_t hv) noexcept {
    WindowHeader* h = hdr(w);
    ck::Header* ch = cuckoo_of(t, h);
    ck::Sub s = ck::sub_view(w.base_, ch->subs[0]);
    ck::Probe p = ck::probe(s, ck::split_hash(hv, h->k_main));
    bl::prefetch_line(&ck::bucket_ref<LT>(s, p.i1));
    bl::prefetch_line(&ck::bucket_ref<LT>(s, p.i2));
    bl::prefetch_line(&s.versions[p.stripe]);
  }

  // ---- dispatch ----------------------------------------------------------------
  static bool has(const Window& w, TableHead* t, uint64_t hv, const wi::Masks& mm) noexcept {
    WindowHeader* h = hdr(w);
    if (h->variant == wi::kVariantBloom) return bloom_has(w, t, hv, mm);
    return h->k_main <= 8 ? cuckoo_has<ck::Lanes8>(w, t, hv) : cuckoo_has<ck::Lanes16>(w, t, hv);
  }
  static void prefetch(const Window& w, TableHead* t, uint64_t hv) noexcept {
    WindowHeader* h = hdr(w);
    if (h->variant == wi::kVariantBloom)
      bloom_prefetch(w, t, hv);
    else if (h->k_main <= 8)
      cuckoo_prefetch<ck::Lanes8>(w, t, hv);
    else
      cuckoo_prefetch<ck::Lanes16>(w, t, hv);
  }
  static WindowStatus mark_in(const Window& w, TableHead* t, uint64_t space, uint64_t hv, const wi::Masks& mm) noexcept {
    WindowHeader* h = hdr(w);
    if (h->variant == wi::kVariantBloom) return bloom_mark_in(w, t, space, hv, mm);
    return h->k_main <= 8 ? cuckoo_mark_in<ck::Lanes8>(w, t, space, hv) : cuckoo_mark_in<ck::Lanes16>(w, t, space, hv);
  }

  // Tables of the last w buckets ending at e (null where a bucket is empty).
  static uint32_t tables(const Window& w, int64_t e, uint32_t n, TableHead** out) noexcept {
    WindowHeader* h = hdr(w);
    for (uint32_t i = 0; i < n; ++i) out[i] = table_for(w.base_, h, e - static_cast<int64_t>(i));
    return n;
  }
  static uint32_t clamp_w(const Window& w, uint32_t win) noexcept {
    WindowHeader* h = hdr(w);
    if (win == 0 || win > h->retention) return h->retention;
    return win;
  }

  // Answers over resolved tables ts[0..win) (ts[0] the newest bucket; null = empty bucket).
  static bool seen_in(const Window& w, TableHead* const* ts, uint32_t win, uint64_t hv, bool prefetched) noexcept {
    WindowHeader* h = hdr(w);
    if (!prefetched)
      for (uint32_t i = 0; i < win; ++i)
        if (ts[i]) prefetch(w, ts[i], hv);  // the w lines are fetched in parallel (memory-level parallelism)
    wi::Masks mm = wi::masks_of(hv, h->k_main);
    for (uint32_t i = 0; i < win; ++i)
      if (ts[i] && has(w, ts[i], hv, mm)) return true;
    return false;
  }
  static bool seen_h(const Window& w, uint64_t hv, uint32_t win) noexcept {
    TableHead* ts[wi::kMaxRetention];
    win = clamp_w(w, win);
    tables(w, read_epoch(w), win, ts);
    return seen_in(w, ts, win, hv, false);
  }

  static WindowStatus mark_h(const Window& w, uint64_t space, uint64_t hv) noexcept {
    int64_t e;
    TableHead* t = current(w, e);
    if (t == nullptr) return WindowStatus::kDropped;
    return mark_in(w, t, space, hv, wi::masks_of(hv, hdr(w)->k_main));
  }

  // ts[0] is the writer's current table of bucket e.
  static WindowStatus mark_if_unseen_in(const Window& w, TableHead* const* ts, int64_t e, uint32_t win, uint64_t space,
                                        uint64_t hv, bool prefetched) noexcept {
    WindowHeader* h = hdr(w);
    if (!prefetched)
      for (uint32_t i = 0; i < win; ++i)
        if (ts[i]) prefetch(w, ts[i], hv);
    wi::Masks mm = wi::masks_of(hv, h->k_main);
    for (uint32_t i = 1; i < win; ++i)
      if (ts[i] && has(w, ts[i], hv, mm)) return WindowStatus::kSeen;
    WindowStatus st = mark_in(w, ts[0], space, hv, mm);
    if (st == WindowStatus::kNew && h->variant == wi::kVariantCuckoo) {
      // A caller that saw the next bucket checked ours before we inserted: it may have answered kNew too.
      uint64_t g = h->epoch.load(std::memory_order_acquire);  // acquire: pairs with raise_epoch
      if (g > static_cast<uint64_t>(e) + 1) {
        TableHead* next = table_for(w.base_, h, static_cast<int64_t>(g - 1));
        if (next && has(w, next, hv, mm)) h->rotation_races.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
      }
    }
    return st;
  }
  static bool writer_tables(const Window& w, uint32_t win, TableHead** ts, int64_t& e) noexcept {
    TableHead* cur = current(w, e);
    if (cur == nullptr) return false;
    ts[0] = cur;
    for (uint32_t i = 1; i < win; ++i) ts[i] = table_for(w.base_, hdr(w), e - static_cast<int64_t>(i));
    return true;
  }
  static WindowStatus mark_if_unseen_h(const Window& w, uint64_t space, uint64_t hv, uint32_t win) noexcept {
    win = clamp_w(w, win);
    TableHead* ts[wi::kMaxRetention];
    int64_t e;
    if (!writer_tables(w, win, ts, e)) return WindowStatus::kDropped;
    return mark_if_unseen_in(w, ts, e, win, space, hv, false);
  }

  static WindowStatus forget_h(const Window& w, uint64_t hv) noexcept {
    WindowHeader* h = hdr(w);
    if (h->variant != wi::kVariantCuckoo) return WindowStatus::kUnsupported;
    int64_t e = read_epoch(w);
    bool removed = false;
    ck::Liveness lv = liveness_of(w.seg_);
    for (uint32_t i = 0; i < h->retention; ++i) {
      TableHead* t = table_for(w.base_, h, e - static_cast<int64_t>(i));
      if (t == nullptr) continue;
      ck::KeyHash kh = ck::split_hash(hv, h->k_main);
      bool r = h->k_main <= 8 ? ck::erase<ck::Lanes8>(w.base_, cuckoo_of(t, h), kh, lv)
                              : ck::erase<ck::Lanes16>(w.base_, cuckoo_of(t, h), kh, lv);
      removed |= r;
      SHMF_KILL_POINT("window.forget.between_buckets");
    }
    return removed ? WindowStatus::kRemoved : WindowStatus::kAbsent;
  }

  // Batched forms: per round of kBatch pairs, resolve the tables once, hash and
  // prefetch every line of the round, then answer. writer: ts[0] is the current
  // bucket by the writer's rules (rotating if due). answer(i, hv, ts, e) -> counted.
  template <class Fn>
  static size_t batch(const Window& w, std::span<const uint64_t> spaces, std::span<const uint64_t> items, uint32_t win,
                      bool writer, Fn&& answer) noexcept {
    WindowHeader* h = hdr(w);
    const size_t n = std::min(spaces.size(), items.size());
    win = clamp_w(w, win);
    size_t count = 0;
    uint64_t hs[kBatch];
    TableHead* ts[wi::kMaxRetention];
    for (size_t at = 0; at < n; at += kBatch) {
      const size_t m = std::min(kBatch, n - at);
      int64_t e = 0;
      if (writer) {
        if (!writer_tables(w, win, ts, e)) {
          for (size_t j = 0; j < m; ++j) answer(at + j, 0, nullptr, e);
          continue;
        }
      } else {
        e = read_epoch(w);
        tables(w, e, win, ts);
      }
      for (size_t j = 0; j < m; ++j) {
        hs[j] = wi::pair_hash(h->seed, spaces[at + j], items[at + j]);
        for (uint32_t i = 0; i < win; ++i)
          if (ts[i]) prefetch(w, ts[i], hs[j]);
      }
      for (size_t j = 0; j < m; ++j) count += answer(at + j, hs[j], ts, e);
    }
    return count;
  }
};

// ---------------------------------------------------------------------------
// Control plane.

WindowSizing Window::plan(const WindowOptions& o) {
  Plan p = make_plan(o);
  WindowSizing s;
  s.one_bucket_error = p.p1;
  s.main_error = p.pm;
  s.overflow_error = p.po;
  s.k = p.k_main;
  WindowHeader tmp{};
  tmp.variant = p.variant;
  tmp.space_table = p.space_table;
  tmp.main_error = p.pm;
  tmp.k_main = p.k_main;
  uint64_t geom = 0;
  uint64_t mb = main_bytes_for(&tmp, o.expected_per_bucket, &geom);
  s.table_bytes = wi::main_offset_in_table(p.space_table) + mb;
  s.bits_per_pair = static_cast<double>(mb) * 8 / static_cast<double>(o.expected_per_bucket);
  s.region_bytes = p.region;
  s.full_window_bytes = p.region + uint64_t{p.slots} * s.table_bytes;
  return s;
}

Window Window::create(Segment& seg, std::string_view name, const WindowOptions& opts) {
  if (name.empty()) throw Error(ErrorCode::kInvalidArgument, "empty structure name: pass a NAME of 1..63 bytes");
  if (name.size() > kMaxStructureNameLength)
    throw Error(ErrorCode::kNameTooLong, "structure name of " + std::to_string(name.size()) + " bytes is longer than " +
                                             std::to_string(kMaxStructureNameLength) + ": use a shorter name");
  Plan p = make_plan(opts);
  WindowSizing sz = plan(opts);
  uint64_t max = seg.stats().max_size;
  if (sz.region_bytes + 2 * sz.table_bytes > max)
    throw Error(ErrorCode::kInvalidArgument,
                "expected_per_bucket " + std::to_string(opts.expected_per_bucket) + " needs " +
                    format_size(sz.region_bytes + 2 * sz.table_bytes) + " for the first two buckets, more than segment '" +
                    seg.name() + "' can ever hold (" + format_size(max) +
                    "): lower the count, raise the error rate, or create the segment with a larger max size");
  if (auto existing = seg.find(name))
    throw Error(ErrorCode::kExists, "'" + std::string(name) + "' already exists in segment '" + seg.name() + "' as a " +
                                        std::string(kind_name(existing->kind)) + ": choose another name, or drop it first");
  const uint64_t seed = opts.seed ? *opts.seed : internal::random_seed();
  seg.create_region(name, Kind::kWindow, p.region, [&](std::byte* region, uint64_t got, ControlTxn& txn) {
    // Fresh zeroed region, unpublished until init returns: plain stores.
    auto* h = new (region) WindowHeader{};
    h->magic = wi::kMagic;
    h->version = wi::kVersion;
    h->variant = p.variant;
    h->retention = opts.retention;
    h->slots = p.slots;
    h->max_spaces = opts.max_spaces;
    h->space_table = p.space_table;
    h->error_window = p.error_window;
    h->bucket_seconds = opts.bucket_seconds;
    h->utc_offset = opts.utc_offset;
    h->seed = seed;
    h->expected = opts.expected_per_bucket;
    h->error = opts.error;
    h->p1 = p.p1;
    h->main_error = p.pm;
    h->overflow_error = p.po;
    h->k_main = p.k_main;
    h->k_overflow = p.k_ovf;
    h->region_offset = static_cast<uint64_t>(region - txn.base());
    h->region_bytes = got;
    BucketSlot* s = wi::slot_table(h);
    for (uint32_t i = 0; i < p.slots; ++i) s[i].tag.store(wi::kRetired, std::memory_order_relaxed);  // relaxed: unpublished
    // The first two buckets' tables (the current one by the system clock and its spare); a clock
    // injected later lands wherever it lands and prepares its own slot if needed.
    int64_t e = wi::bucket_number(system_now(), opts.utc_offset, opts.bucket_seconds);
    for (int64_t x = e; x <= e + 1; ++x) {
      BucketSlot& b = s[static_cast<uint64_t>(x) % p.slots];
      b.table = alloc_table(txn, h, opts.expected_per_bucket);
      b.tag.store(0, std::memory_order_relaxed);  // relaxed: unpublished
    }
  });
  return open(seg, name);
}

namespace {
// Validates a region; one line per problem. Safe on any bytes.
void validate(const std::byte* base, uint64_t seg_size, const RegionInfo& r, std::vector<std::string>& problems) {
  if (r.size < sizeof(WindowHeader) || r.offset % 64 != 0) {
    problems.push_back("region of " + std::to_string(r.size) + " bytes is too small for a window header");
    return;
  }
  auto* h = reinterpret_cast<const WindowHeader*>(base + r.offset);
  if (h->magic != wi::kMagic) {
    problems.push_back("bad magic (not a window region)");
    return;
  }
  if (h->version != wi::kVersion) {
    problems.push_back("layout version " + std::to_string(h->version) + ", this build reads " + std::to_string(wi::kVersion));
    return;
  }
  if (h->variant > wi::kVariantCuckoo) problems.push_back("unknown variant " + std::to_string(h->variant));
  if (h->retention < 1 || h->retention > wi::kMaxRetention || h->slots != h->retention + 1) {
    problems.push_back("retention " + std::to_string(h->retention) + " / slots " + std::to_string(h->slots) + " invalid");
    return;
  }
  if (h->max_spaces < 1 || h->max_spaces > wi::kMaxSpaces || h->space_table != wi::space_table_for(h->max_spaces)) {
    problems.push_back("max_spaces / space table size invalid");
    return;
  }
  if (wi::region_bytes(h->slots, h->space_table) > r.size) {
    problems.push_back("slot and key tables run past the region");
    return;
  }
  if (h->region_offset != r.offset) problems.push_back("header's own offset disagrees with the directory");
  if (h->bucket_seconds == 0 || h->expected == 0 || !(h->error > 0 && h->error < 1) || !(h->p1 > 0 && h->p1 < 1) ||
      h->error_window < 1 || h->error_window > h->retention)
    problems.push_back("parameters out of range (bucket_seconds, expected, error)");
  if (h->variant == wi::kVariantBloom && (h->k_main < 1 || h->k_main > bl::kMaxK || h->k_overflow < 1 || h->k_overflow > bl::kMaxK))
    problems.push_back("probe counts out of range");
  if (h->variant == wi::kVariantCuckoo && h->k_main != 8 && h->k_main != 12 && h->k_main != 16)
    problems.push_back("fingerprint bits " + std::to_string(h->k_main));
  if (!problems.empty()) return;
  const BucketSlot* s = reinterpret_cast<const BucketSlot*>(h + 1);
  const uint64_t moff = wi::main_offset_in_table(h->space_table);
  auto extent_ok = [&](uint64_t off, uint64_t bytes) {
    if (off % 64 != 0 || off < sizeof(internal::ExtentHeader) || off > seg_size || bytes > seg_size - off) return false;
    auto* eh = reinterpret_cast<const internal::ExtentHeader*>(base + off - sizeof(internal::ExtentHeader));
    return eh->magic == internal::kExtentMagic && eh->state == internal::kExtentAllocated &&
           eh->size >= bytes + sizeof(internal::ExtentHeader);
  };
  for (uint32_t i = 0; i < h->slots; ++i) {
    std::string at = "slot " + std::to_string(i) + ": ";
    uint64_t tag = s[i].tag.load(std::memory_order_acquire);  // acquire: the table it names
    uint64_t off = std::atomic_ref<const uint64_t>(s[i].table).load(std::memory_order_relaxed);  // relaxed: checker snapshot
    if (tag == wi::kRetired) continue;  // may still own a table (a preparer died): freed by the next maintain()
    if (tag != 0 && (tag - 1) % h->slots != i) problems.push_back(at + "holds bucket " + std::to_string(tag - 1) + " in the wrong slot");
    if (off == 0) {
      problems.push_back(at + "tag " + std::to_string(tag) + " but no table");
      continue;
    }
    if (!extent_ok(off, moff)) {
      problems.push_back(at + "table at " + std::to_string(off) + " is not an allocated extent inside the segment");
      continue;
    }
    auto* t = reinterpret_cast<const TableHead*>(base + off);
    uint64_t mb = 0;
    if (h->variant == wi::kVariantBloom) {
      if (t->geometry == 0 || t->geometry > bl::kMaxLayerBlocks) {
        problems.push_back(at + "table has " + std::to_string(t->geometry) + " blocks");
        continue;
      }
      mb = wi::bloom_main_bytes(t->geometry);
    } else {
      if (t->geometry < 1 || t->geometry > 32) {
        problems.push_back(at + "table has 2^" + std::to_string(t->geometry) + " buckets");
        continue;
      }
      mb = wi::cuckoo_main_bytes(static_cast<uint32_t>(t->geometry), h->k_main <= 8 ? 8 : 16);
    }
    if (t->capacity == 0) problems.push_back(at + "table capacity 0");
    if (!extent_ok(off, moff + mb)) {
      problems.push_back(at + "table extent is smaller than its geometry");
      continue;
    }
    if (h->variant == wi::kVariantCuckoo) {
      auto* ch = reinterpret_cast<const ck::Header*>(base + off + moff);
      uint32_t n = ck::sub_count_acquire(ch);
      if (ch->magic != ck::kMagic || ch->fp_bits != h->k_main || n < 1 || n > 2 ||
          ch->subs[0].offset != off + moff + sizeof(ck::Header) || ch->subs[0].log2_buckets != t->geometry)
        problems.push_back(at + "cuckoo table header is corrupt");
    }
    uint64_t ovf = t->overflow.load(std::memory_order_acquire);  // acquire: its geometry
    if (ovf != 0) {
      uint64_t ob = h->variant == wi::kVariantBloom
                        ? t->overflow_geometry * 64
                        : ck::sub_bytes(static_cast<uint32_t>(t->geometry), ck::stripes_for(static_cast<uint32_t>(t->geometry)),
                                        h->k_main <= 8 ? 8 : 16);
      if (ob == 0 || !extent_ok(ovf, ob)) problems.push_back(at + "overflow at " + std::to_string(ovf) + " is not a valid extent");
    }
  }
}
}  // namespace

Window Window::open(Segment& seg, std::string_view name) {
  Window w;
  RegionInfo r = w.bind(seg, name, Kind::kWindow);
  internal::validate_prefix(r, seg.base() + r.offset, sizeof(WindowHeader), seg.size(), wi::kMagic, wi::kVersion);
  std::vector<std::string> problems;
  validate(seg.base(), seg.size(), r, problems);
  if (!problems.empty()) throw internal::corrupt_error(Kind::kWindow, name, problems.front());
  w.base_ = seg.base();
  w.offset_ = r.offset;
  return w;
}

bool Window::drop(Segment& seg, std::string_view name) {
  return drop_region(seg, name, Kind::kWindow, [&](std::byte* region, uint64_t bytes, ControlTxn& txn) {
    auto* h = reinterpret_cast<WindowHeader*>(region);
    if (bytes < sizeof(WindowHeader) || h->magic != wi::kMagic || h->slots < 2 || h->slots > wi::kMaxRetention + 1) return;
    if (wi::region_bytes(h->slots, h->space_table) > bytes) return;
    BucketSlot* s = wi::slot_table(h);
    for (uint32_t i = 0; i < h->slots; ++i) {
      if (s[i].table == 0) continue;
      free_table(txn, txn.base(), s[i].table);
      txn.store_u64(&s[i].table, 0);
    }
  });
}

void Window::maintain() {
  require_valid();
  seg_.quiesce();
  WindowHeader* h = WindowOps::hdr(*this);
  const int64_t e = WindowOps::read_epoch(*this);
  const uint64_t cap = WindowOps::desired_capacity(*this, e);
  BucketSlot* s = wi::slot_table(h);
  seg_.transact([&](ControlTxn& txn) {
    // 1. Retire every slot whose bucket left every window (bucket <= e - retention).
    for (uint32_t i = 0; i < h->slots; ++i) {
      uint64_t t = s[i].tag.load(std::memory_order_relaxed);  // relaxed: under the lock; rotators only CAS 0
      bool expired = t != 0 && t != wi::kRetired && static_cast<int64_t>(t - 1) <= e - static_cast<int64_t>(h->retention);
      bool orphan = t == wi::kRetired && s[i].table != 0;  // a preparer died between free and ready
      if (!expired && !orphan) continue;
      if (expired) {
        txn.store_u64(as_u64(&s[i].tag), wi::kRetired);
        std::atomic_thread_fence(std::memory_order_release);  // retired before the table changes
      }
      uint64_t old = s[i].table;
      txn.store_u64(&s[i].table, 0);
      free_table(txn, base_, old);
      SHMF_KILL_POINT("window.maintain.after_retire");
    }
    // 2. The current and the next bucket have a table (tag 0 = fresh, or already claimed).
    for (int64_t x = e; x <= e + 1; ++x) {
      BucketSlot& b = s[static_cast<uint64_t>(x) % h->slots];
      uint64_t t = b.tag.load(std::memory_order_relaxed);  // relaxed: under the lock
      if (t == wi::kRetired) {
        WindowOps::prepare_locked(*this, txn, b, cap);
        continue;
      }
      // A fresh spare sized far (> 1/3) from what the buckets measured: take it back (CAS: a
      // lock-free rotator may claim it right now) and allocate one of the right size. While a
      // bad day's count still grows this happens once per 1/3 of growth, not per call.
      if (t == 0 && x == e + 1 && b.table != 0) {
        uint64_t have = reinterpret_cast<TableHead*>(base_ + b.table)->capacity;
        if (have * 4 < cap * 3 || have * 3 > cap * 4) {
          uint64_t expect = 0;
          // acq_rel: we own the slot from here (no rotator can claim kRetired).
          if (b.tag.compare_exchange_strong(expect, wi::kRetired, std::memory_order_acq_rel, std::memory_order_relaxed))
            WindowOps::prepare_locked(*this, txn, b, cap);
        }
      }
    }
  });
  int64_t ignored;
  WindowOps::current(*this, ignored);  // rotates if due
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
  const WindowHeader* h = header_at(base_, offset_);
  return wi::bucket_number(unix_seconds, h->utc_offset, h->bucket_seconds);
}

// ---------------------------------------------------------------------------
// Data plane.

#define SHMF_WINDOW_ENTER(fail)           \
  if (!valid()) return fail;              \
  WindowOps::tick(*this);                 \
  const WindowHeader* h_ = WindowOps::hdr(*this)

WindowStatus Window::mark(uint64_t space, std::string_view item) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::mark_h(*this, space, wi::pair_hash(h_->seed, space, item));
}
WindowStatus Window::mark(uint64_t space, uint64_t item) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::mark_h(*this, space, wi::pair_hash(h_->seed, space, item));
}
bool Window::seen(uint64_t space, std::string_view item, uint32_t w) const noexcept {
  SHMF_WINDOW_ENTER(false);
  return WindowOps::seen_h(*this, wi::pair_hash(h_->seed, space, item), w);
}
bool Window::seen(uint64_t space, uint64_t item, uint32_t w) const noexcept {
  SHMF_WINDOW_ENTER(false);
  return WindowOps::seen_h(*this, wi::pair_hash(h_->seed, space, item), w);
}
WindowStatus Window::mark_if_unseen(uint64_t space, std::string_view item, uint32_t w) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::mark_if_unseen_h(*this, space, wi::pair_hash(h_->seed, space, item), w);
}
WindowStatus Window::mark_if_unseen(uint64_t space, uint64_t item, uint32_t w) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::mark_if_unseen_h(*this, space, wi::pair_hash(h_->seed, space, item), w);
}
WindowStatus Window::forget(uint64_t space, std::string_view item) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::forget_h(*this, wi::pair_hash(h_->seed, space, item));
}
WindowStatus Window::forget(uint64_t space, uint64_t item) noexcept {
  SHMF_WINDOW_ENTER(WindowStatus::kDropped);
  return WindowOps::forget_h(*this, wi::pair_hash(h_->seed, space, item));
}

size_t Window::mark_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items,
                         std::span<WindowStatus> out) noexcept {
  const size_t n = std::min(spaces.size(), items.size());
  const bool want = out.size() >= n;
  if (!valid()) {
    if (want) std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(n), WindowStatus::kDropped);
    return 0;
  }
  WindowOps::tick(*this);
  return WindowOps::batch(*this, spaces, items, 1, true, [&](size_t i, uint64_t hv, TableHead* const* ts, int64_t) -> size_t {
    WindowStatus st = ts ? WindowOps::mark_in(*this, ts[0], spaces[i], hv, wi::masks_of(hv, WindowOps::hdr(*this)->k_main))
                         : WindowStatus::kDropped;
    if (want) out[i] = st;
    return st == WindowStatus::kNew;
  });
}
size_t Window::mark_if_unseen_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items, uint32_t w,
                                   std::span<WindowStatus> out) noexcept {
  const size_t n = std::min(spaces.size(), items.size());
  const bool want = out.size() >= n;
  if (!valid()) {
    if (want) std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(n), WindowStatus::kDropped);
    return 0;
  }
  WindowOps::tick(*this);
  const uint32_t win = WindowOps::clamp_w(*this, w);
  return WindowOps::batch(*this, spaces, items, win, true, [&](size_t i, uint64_t hv, TableHead* const* ts, int64_t e) -> size_t {
    WindowStatus st = ts ? WindowOps::mark_if_unseen_in(*this, ts, e, win, spaces[i], hv, true) : WindowStatus::kDropped;
    if (want) out[i] = st;
    return st == WindowStatus::kNew;
  });
}
size_t Window::seen_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items, uint32_t w,
                         std::span<uint8_t> out) const noexcept {
  const size_t n = std::min(spaces.size(), items.size());
  const bool want = out.size() >= n;
  if (!valid()) {
    if (want) std::fill(out.begin(), out.begin() + static_cast<ptrdiff_t>(n), uint8_t{0});
    return 0;
  }
  WindowOps::tick(*this);
  const uint32_t win = WindowOps::clamp_w(*this, w);
  return WindowOps::batch(*this, spaces, items, win, false, [&](size_t i, uint64_t hv, TableHead* const* ts, int64_t) -> size_t {
    bool s = WindowOps::seen_in(*this, ts, win, hv, true);
    if (want) out[i] = s;
    return s;
  });
}
size_t Window::forget_many(std::span<const uint64_t> spaces, std::span<const uint64_t> items,
                           std::span<WindowStatus> out) noexcept {
  const size_t n = std::min(spaces.size(), items.size());
  const bool want = out.size() >= n;
  size_t removed = 0;
  for (size_t i = 0; i < n; ++i) {
    WindowStatus st = forget(spaces[i], items[i]);
    if (want) out[i] = st;
    removed += st == WindowStatus::kRemoved;
  }
  return removed;
}

uint64_t Window::new_count(uint64_t space, uint32_t age) const noexcept {
  if (!valid()) return 0;
  WindowHeader* h = WindowOps::hdr(*this);
  if (age >= h->retention) return 0;
  TableHead* t = table_for(base_, h, WindowOps::read_epoch(*this) - static_cast<int64_t>(age));
  if (t == nullptr) return 0;
  uint32_t row = space_row(h, space, false);
  if (row == UINT32_MAX) return 0;
  return std::atomic_ref<uint64_t>(counters_of(t)[row]).load(std::memory_order_relaxed);  // relaxed: a count
}

WindowStats Window::stats() const {
  require_valid();
  WindowHeader* h = WindowOps::hdr(*this);
  WindowStats st;
  st.variant = h->variant == wi::kVariantCuckoo ? WindowVariant::kCuckoo : WindowVariant::kBloom;
  st.retention = h->retention;
  st.bucket_seconds = h->bucket_seconds;
  st.utc_offset = h->utc_offset;
  st.expected_per_bucket = h->expected;
  st.error = h->error;
  st.error_window = h->error_window;
  st.one_bucket_error = h->p1;
  st.max_spaces = h->max_spaces;
  st.spaces = h->spaces_claimed.load(std::memory_order_relaxed);  // relaxed: statistics below
  st.rotations = h->rotations.load(std::memory_order_relaxed);
  st.racing_marks = h->racing_marks.load(std::memory_order_relaxed);
  st.rotation_races = h->rotation_races.load(std::memory_order_relaxed);
  st.inline_allocations = h->inline_allocations.load(std::memory_order_relaxed);
  st.overflow_failures = h->overflow_failures.load(std::memory_order_relaxed);
  st.seed = h->seed;
  uint64_t g = h->epoch.load(std::memory_order_acquire);  // acquire: pairs with raise_epoch
  const int64_t e = WindowOps::read_epoch(*this);
  st.current_bucket = g == 0 ? -1 : e;
  st.memory_bytes = h->region_bytes;
  const uint32_t T = h->space_table;
  const BucketSlot* s = wi::slot_table(h);
  for (uint32_t i = 0; i < h->slots; ++i) {
    uint64_t off = std::atomic_ref<const uint64_t>(s[i].table).load(std::memory_order_relaxed);  // relaxed: statistic
    if (off == 0) continue;
    auto* t = reinterpret_cast<TableHead*>(base_ + off);
    st.memory_bytes += table_bytes_for(h, t->capacity);
    uint64_t ovf = t->overflow.load(std::memory_order_acquire);  // acquire: its geometry
    if (ovf != 0)
      st.memory_bytes += h->variant == wi::kVariantBloom
                             ? t->overflow_geometry * 64
                             : ck::sub_bytes(static_cast<uint32_t>(t->geometry),
                                             ck::stripes_for(static_cast<uint32_t>(t->geometry)), h->k_main <= 8 ? 8 : 16);
  }
  for (uint32_t age = 0; age < h->retention; ++age) {
    WindowBucketStats b;
    b.bucket = e - static_cast<int64_t>(age);
    b.age = age;
    TableHead* t = table_for(base_, h, b.bucket);
    if (t != nullptr) {
      b.distinct = table_distinct(t);
      b.capacity = t->capacity;
      b.overflow = t->overflow.load(std::memory_order_acquire) != 0;  // acquire: pairs with the publisher
      bucket_fp(h, t, b.distinct, b.fp_rate_now, b.fp_bound, b.over_capacity);
      b.bytes = table_bytes_for(h, t->capacity);
      st.other_marks += std::atomic_ref<uint64_t>(counters_of(t)[T]).load(std::memory_order_relaxed);  // relaxed
    }
    st.buckets.push_back(b);
  }
  return st;
}

// ---------------------------------------------------------------------------
// Integrity.

namespace internal::window {

void check_window(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report) {
  CheckScope scope = check_scope(region, report);
  if (!scope.validated([&] {
        validate_prefix(region, seg.base() + region.offset, sizeof(WindowHeader), seg.size(), kMagic, kVersion);
      }))
    return;
  std::vector<std::string> problems;
  validate(seg.base(), seg.size(), region, problems);
  for (auto& p : problems) scope.add(p);
  if (!problems.empty()) return;
  // The claimed-space counter against the key table (a claimer killed between its CAS
  // and its increment leaves it one short; only the soft limit depends on it).
  auto* h = reinterpret_cast<WindowHeader*>(seg.base() + region.offset);
  uint64_t* keys = wi::space_keys(h);
  uint32_t claimed = 0;
  for (uint32_t i = 0; i < h->space_table; ++i)
    claimed += std::atomic_ref<uint64_t>(keys[i]).load(std::memory_order_relaxed) != 0;  // relaxed: snapshot
  uint32_t counted = h->spaces_claimed.load(std::memory_order_relaxed);                  // relaxed: snapshot
  if (claimed > h->space_table / 2 + 64)
    scope.add("space table holds " + std::to_string(claimed) + " keys, more than half its " +
              std::to_string(h->space_table) + " rows");
  if (counted != claimed) {
    if (repair) h->spaces_claimed.store(claimed, std::memory_order_relaxed);  // relaxed: statistic / soft limit
    scope.add("spaces counter says " + std::to_string(counted) + ", the key table holds " + std::to_string(claimed), repair);
  }
}

}  // namespace internal::window

}  // namespace shmfilter
