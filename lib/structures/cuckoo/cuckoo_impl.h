// lib/structures/cuckoo/cuckoo_impl.h: cuckoo filter kernels over shared memory (the
// layout they work on is cuckoo_layout.h).
//
// Stateless functions over (segment base, region header). No pointer is
// stored in shared memory; sub-filters are addressed by offset from the
// segment base. The handle (lib/structures/cuckoo/cuckoo.cpp) supplies liveness of owner tokens
// and the expansion allocator; the tests drive these kernels over plain
// anonymous MAP_SHARED memory as well.
//
// Concurrency (proof sketch in docs/cuckoo.md):
//  * Readers never write and never lock. Per-stripe seqlock (Boehm 2012,
//    "Can seqlocks get along with programming language memory models?"):
//    version acquire-load, bucket words relaxed loads, acquire fence, version
//    relaxed re-load; retry on odd or changed. The stripe of a key is
//    min(i1, i2) mod stripes (MemC3, Fan et al. NSDI'13), so moving an item
//    between its two buckets happens under the one counter its readers check.
//  * Writers (insert, insert_unique, erase, expansion) hold ONE writer lock
//    per filter: a word holding the owner token (0 = free). Measured and
//    argued in docs/cuckoo.md (per-stripe locks buy nothing on this workload
//    with <= 2 writer CPUs, and cost lock ordering over BFS paths).
//  * Before each multi-store step the writer fills the intent record; a waiter
//    (reader or writer) that finds the lock held by a dead token past a bound
//    takes the lock over with a CAS and repairs from the intent record
//    (completes a half-done move, fixes the size counter, makes odd versions
//    even), then carries on.
#pragma once

#include <string>
#include <vector>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/wait_stats.h"
#include "base/hash.h"
#include "base/kill_point.h"
#include "structures/cuckoo/cuckoo_layout.h"

#include "shmfilter/segment.hpp"  // Segment, RegionInfo, CheckReport: the checker's signature

namespace shmfilter::internal::snapshot {
struct In;  // structures/snapshot_io.h
}
namespace shmfilter::internal {
struct FuzzField;  // structures/kind.h
}

namespace shmfilter::internal::cuckoo {

// The fields of the cuckoo Header at HEADER (a segment offset; the region or a window
// table's main filter, ending at END) and of every sub-filter descriptor it holds, for
// the structure-aware fuzzers (cuckoo_kind.cpp; KindRow::fuzz_fields).
void fuzz_header_fields(const Segment& seg, uint64_t header, uint64_t end, std::vector<FuzzField>& out);

// ---- writer lock, takeover and repair ---------------------------------------------
template <class LT>
void repair_locked(std::byte* base, Header* h) noexcept;

// Tries to take the lock from a dead owner `seen`; on success repairs and returns true (lock held).
template <class LT>
inline bool try_takeover(std::byte* base, Header* h, uint64_t seen, const Liveness& lv) noexcept {
  if (seen == 0 || lv.is_alive(seen)) return false;
  const uint64_t self = lv.token();
  if (self == 0) return false;  // no token of our own (a handle inherited across fork): never take a lock
  uint64_t expect = seen;
  // acquire: the dead owner's intent and data stores must be visible to the repair.
  if (!A(h->lock_owner).compare_exchange_strong(expect, self, std::memory_order_acquire,
                                                std::memory_order_relaxed))
    return false;
  A(h->repairs).store(load_relaxed(h->repairs) + 1, std::memory_order_relaxed);  // relaxed: lock holder only
  repair_locked<LT>(base, h);
  return true;
}

// Blocks until this process holds the writer lock. Never waits on a dead owner
// for long: past a bound it checks liveness and takes the lock over.
template <class LT>
inline void lock(std::byte* base, Header* h, const Liveness& lv) noexcept {
  uint32_t spins = 0, yields = 0;
  SlowWait wait("cuckoo writer lock");
  const uint64_t self = lv.token();
  for (;;) {
    uint64_t expect = 0;
    // acquire: pairs with the release in unlock(), so the previous holder's stores are visible.
    if (A(h->lock_owner).compare_exchange_weak(expect, self, std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
      // A previous holder died and a repairer has not run yet only if intent
      // is set here, which cannot happen (repair clears it before unlock), but
      // a crashed repairer may leave versions odd: repair is idempotent and cheap.
      if (load_relaxed(h->intent.op) != kOpNone) repair_locked<LT>(base, h);
      return;
    }
    if (++spins < kSpinsBeforeYield) {
      cpu_relax();
      continue;
    }
    wait.start();
    sched_yield();
    if (++yields % kYieldsBetweenLivenessChecks == 0 && expect != 0 && try_takeover<LT>(base, h, expect, lv)) return;
  }
}
inline void unlock(Header* h) noexcept {
  // release: every store made under the lock happens-before the next holder's acquire.
  A(h->lock_owner).store(0, std::memory_order_release);
}

// The lock holder finishes or undoes a dead writer's step, fixes the size
// counter and makes every odd version even. Idempotent: a repairer killed
// mid-repair leaves the intent set, and the next one redoes it.
template <class LT>
void repair_locked(std::byte* base, Header* h) noexcept {
  const Intent in = h->intent;  // plain copy: we hold the lock; the dead writer stopped writing
  uint32_t subs = sub_count_acquire(h);
  SHMF_KILL_POINT("cuckoo.repair.begin");
  if (in.op != kOpNone && in.op != kOpExpand && in.sub < subs) {
    Sub s = sub_view(base, h->subs[in.sub]);
    // A lane is old, new, or (packed layout 3 only: a lane straddling two words,
    // killed between the two stores) half-written; a half-written lane is
    // completed (place, erase: the step was never acknowledged, either end is
    // allowed) or, for a move's copy, undone. One-word lanes are never half-written.
    if (in.op == kOpPlace || in.op == kOpErase) {
      if (in.bucket < s.n && in.lane < kSlots) {
        const auto w = bucket_load<LT>(s, in.bucket);
        const uint32_t now = LT::lane(w, in.lane);
        // Place began at an empty lane, erase at fp: anything else means a store landed.
        bool applied = in.op == kOpPlace ? now != 0 : now != in.fp;
        const uint32_t want = in.op == kOpPlace ? in.fp : 0;
        if (applied && now != want) bucket_store<LT>(s, in.bucket, LT::with(w, in.lane, want));  // half-written
        uint64_t size = in.size_before;
        if (applied) size = in.op == kOpPlace ? size + 1 : size - 1;
        A(h->size).store(size, std::memory_order_relaxed);  // relaxed: lock holder only
      }
    } else if (in.op == kOpMove && in.bucket < s.n && in.dst_bucket < s.n && in.lane < kSlots &&
               in.dst_lane < kSlots && !(in.bucket == in.dst_bucket && in.lane == in.dst_lane)) {
      const auto src = bucket_load<LT>(s, in.bucket);
      const uint32_t src_now = LT::lane(src, in.lane);
      const uint32_t dst_now = LT::lane(bucket_load<LT>(s, in.dst_bucket), in.dst_lane);
      if (dst_now == in.fp && src_now != 0) {
        // The copy landed, the clear did not (or half did): finish the move.
        bucket_store<LT>(s, in.bucket, LT::with(src, in.lane, 0));
      } else if (dst_now != in.fp && dst_now != 0 && src_now == in.fp) {
        // A half-written copy (packed lanes): the item is whole at the source; undo the copy.
        bucket_store<LT>(s, in.dst_bucket, LT::with(bucket_load<LT>(s, in.dst_bucket), in.dst_lane, 0));
      }
      // Otherwise the copy did not land (item still at the source) or the move completed.
    }
  }
  SHMF_KILL_POINT("cuckoo.repair.after_data");
  // Make every odd version even (one stripe normally; scanning all is cheap: <= 8192 words).
  for (uint32_t k = 0; k < subs; ++k) {
    Sub s = sub_view(base, h->subs[k]);
    for (uint64_t i = 0; i <= s.stripe_mask; ++i) {
      uint64_t v = load_relaxed(s.versions[i]);
      // release: the repaired bucket words are visible to a reader that sees the even version.
      if (v & 1) A(s.versions[i]).store(v + 1, std::memory_order_release);
    }
  }
  A(h->intent.op).store(kOpNone, std::memory_order_release);  // release: repairs above precede "no intent"
}

// A reader that found stripe version odd for a while: if the writer is dead,
// take its lock, repair, release. Returns after at most one liveness check.
// True when the reader may read the buckets as they are: it cannot repair (no
// token of its own: a handle inherited across fork, or a read-only attachment
// whose mapping cannot be written) and no live writer holds the lock, so
// nothing changes them; a dead writer's move leaves the item in at least one
// of its buckets (copy before clear), so such a read misses nothing.
template <class LT>
inline bool reader_help(std::byte* base, Header* h, const Liveness& lv) noexcept {
  const uint64_t self = lv.token();
  if (self == 0) {
    uint64_t owner = A(h->lock_owner).load(std::memory_order_acquire);  // acquire: the dead writer's last stores
    return owner == 0 || !lv.is_alive(owner);
  }
  uint64_t owner = A(h->lock_owner).load(std::memory_order_relaxed);  // relaxed: only a hint for the CAS
  if (owner == 0) {
    // An odd version with the lock free: left by a writer whose repairer never
    // ran (or written into the segment's bytes). Take the free lock and repair:
    // versions change only under the lock, so none of them is a live move.
    uint64_t expect = 0;
    // acquire: as in lock().
    if (A(h->lock_owner).compare_exchange_strong(expect, self, std::memory_order_acquire, std::memory_order_relaxed)) {
      repair_locked<LT>(base, h);
      unlock(h);
    }
    return false;
  }
  if (try_takeover<LT>(base, h, owner, lv)) unlock(h);
  return false;
}

// ---- lookups (lock-free) ----------------------------------------------------------
struct Probe {
  uint64_t i1, i2, stripe;
  uint32_t fp;
};
inline Probe probe(const Sub& s, const KeyHash& k) noexcept {
  uint64_t i1 = primary_bucket(k.h, s.chunks, s.log2_chunk);
  uint64_t i2 = alt_bucket(i1, k.fp, s.chunk_mask);
  return Probe{i1, i2, std::min(i1, i2) & s.stripe_mask, k.fp};
}

// Reads both buckets of a probe consistently (seqlock). Returns the two words.
template <class LT>
inline void read_pair(std::byte* base, Header* h, const Sub& s, const Probe& p, const Liveness& lv,
                      typename LT::Word& w1, typename LT::Word& w2) noexcept {
  uint32_t spins = 0, yields = 0;
  SlowWait wait("cuckoo read of an odd stripe version");
  for (;;) {
    // acquire: if we see the even version a writer released, we see its bucket stores.
    uint64_t v1 = A(s.versions[p.stripe]).load(std::memory_order_acquire);
    if ((v1 & 1) == 0) {
      w1 = bucket_load<LT>(s, p.i1);
      w2 = bucket_load<LT>(s, p.i2);
      // acquire fence: the relaxed bucket loads above are ordered before the version re-read (Boehm 2012, fig. 6).
      std::atomic_thread_fence(std::memory_order_acquire);
      // relaxed: ordered by the fence above.
      if (A(s.versions[p.stripe]).load(std::memory_order_relaxed) == v1) return;
    }
    if (++spins < kSpinsBeforeYield) {
      cpu_relax();
      continue;
    }
    wait.start();
    sched_yield();
    if (++yields % kYieldsBetweenLivenessChecks == 0 && reader_help<LT>(base, h, lv)) {
      w1 = bucket_load<LT>(s, p.i1);  // static: no live writer (see reader_help)
      w2 = bucket_load<LT>(s, p.i2);
      return;
    }
  }
}

template <class LT>
inline uint32_t count_in(std::byte* base, Header* h, const KeyHash& k, const Liveness& lv, bool stop_at_one) noexcept {
  uint32_t n = sub_count_acquire(h), found = 0;
  for (uint32_t j = 0; j < n; ++j) {
    Sub s = sub_view(base, h->subs[j]);
    Probe p = probe(s, k);
    typename LT::Word w1, w2;
    read_pair<LT>(base, h, s, p, lv, w1, w2);
    if (stop_at_one) {
      if (LT::has(w1, p.fp) || LT::has(w2, p.fp)) return 1;
    } else {
      found += LT::count(w1, p.fp) + (p.i2 != p.i1 ? LT::count(w2, p.fp) : 0);
    }
  }
  return found;
}
template <class LT>
inline bool contains(std::byte* base, Header* h, const KeyHash& k, const Liveness& lv) noexcept {
  return count_in<LT>(base, h, k, lv, true) != 0;
}

// Batched lookup: hashes a group, prefetches every bucket and version of the
// group, then probes. out[i] = 0/1.
template <class LT>
inline void contains_batch(std::byte* base, Header* h, const KeyHash* ks, size_t n, uint8_t* out,
                           const Liveness& lv) noexcept {
  uint32_t subs = sub_count_acquire(h);
  constexpr size_t kGroup = 16;
  Probe pr[kGroup];
  for (size_t g = 0; g < n; g += kGroup) {
    size_t m = std::min(kGroup, n - g);
    for (size_t i = 0; i < m; ++i) out[g + i] = 0;
    for (uint32_t j = 0; j < subs; ++j) {
      Sub s = sub_view(base, h->subs[j]);
      for (size_t i = 0; i < m; ++i) {
        pr[i] = probe(s, ks[g + i]);
        __builtin_prefetch(bucket_addr<LT>(s, pr[i].i1));
        __builtin_prefetch(bucket_addr<LT>(s, pr[i].i2));
        __builtin_prefetch(&s.versions[pr[i].stripe]);
      }
      for (size_t i = 0; i < m; ++i) {
        if (out[g + i]) continue;
        typename LT::Word w1, w2;
        read_pair<LT>(base, h, s, pr[i], lv, w1, w2);
        out[g + i] = LT::has(w1, pr[i].fp) || LT::has(w2, pr[i].fp);
      }
    }
  }
}

// ---- writes (writer lock held) ----------------------------------------------------

// Places fp into an empty lane (single word store) under the intent record.
template <class LT>
inline void place_locked(Header* h, uint32_t sub, const Sub& s, uint64_t b, unsigned lane, uint32_t fp) noexcept {
  Intent& in = h->intent;
  in.sub = sub;
  in.bucket = b;
  in.lane = lane;
  in.fp = fp;
  in.size_before = h->size;
  // release: the intent fields are complete before op says they are valid (a repairer acquires the lock).
  A(in.op).store(kOpPlace, std::memory_order_release);
  SHMF_KILL_POINT("cuckoo.insert.before_store");
  bucket_store<LT>(s, b, LT::with(bucket_load<LT>(s, b), lane, fp));
  SHMF_KILL_POINT("cuckoo.insert.after_store");
  A(h->size).store(in.size_before + 1, std::memory_order_relaxed);  // relaxed: lock holder only
  SHMF_KILL_POINT("cuckoo.insert.after_size");
  A(in.op).store(kOpNone, std::memory_order_release);  // release: the step is complete before "no intent"
}

// Moves the fingerprint at (src, sl) to the empty lane (dst, dl): copy first,
// then clear, with the stripe of min(src, dst) odd in between.
template <class LT>
inline void move_locked(Header* h, uint32_t sub, const Sub& s, uint64_t src, unsigned sl, uint64_t dst, unsigned dl,
                        uint32_t fp) noexcept {
  Intent& in = h->intent;
  uint64_t stripe = std::min(src, dst) & s.stripe_mask;
  in.sub = sub;
  in.bucket = src;
  in.lane = sl;
  in.fp = fp;
  in.dst_bucket = dst;
  in.dst_lane = dl;
  in.stripe = static_cast<uint32_t>(stripe);
  A(in.op).store(kOpMove, std::memory_order_release);  // release: fields complete before op (see place_locked)
  SHMF_KILL_POINT("cuckoo.move.begin");
  uint64_t v = load_relaxed(s.versions[stripe]);
  // relaxed store + release fence: the odd version is ordered before the bucket stores (Boehm's writer).
  A(s.versions[stripe]).store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  SHMF_KILL_POINT("cuckoo.move.version_odd");
  // relaxed: both after the release fence above (see bucket_store).
  bucket_store<LT>(s, dst, LT::with(bucket_load<LT>(s, dst), dl, fp), std::memory_order_relaxed);
  SHMF_KILL_POINT("cuckoo.move.after_copy");
  bucket_store<LT>(s, src, LT::with(bucket_load<LT>(s, src), sl, 0), std::memory_order_relaxed);
  SHMF_KILL_POINT("cuckoo.move.after_clear");
  // release: both bucket stores are visible to a reader that acquires the even version.
  A(s.versions[stripe]).store(v + 2, std::memory_order_release);
  A(in.op).store(kOpNone, std::memory_order_release);  // release: step complete before "no intent"
  A(h->moves).store(load_relaxed(h->moves) + 1, std::memory_order_relaxed);  // relaxed: lock holder only
}

// Breadth-first search for a path of <= max_path moves from {i1, i2} to a
// bucket with an empty lane. Changes nothing. Nodes live on the caller's
// stack: 2 x (4^(max_path+1) - 1) / 3 of 8 bytes (22 KiB for 5 moves, 87 KiB for 6).
struct BfsNode {
  uint32_t bucket;  // bucket index (filters have <= 2^32 buckets)
  uint16_t parent;  // index of the parent node, 0xffff for a root
  uint8_t slot;     // lane in the parent bucket whose item moves into this bucket
  uint8_t depth;    // moves needed to free a lane here
};
static_assert(sizeof(BfsNode) == 8, "BFS nodes are 8 bytes");
inline constexpr size_t bfs_nodes_for(uint32_t max_path) noexcept {
  return 2 * ((size_t{1} << (2 * (max_path + 1))) - 1) / 3;
}
static_assert(bfs_nodes_for(kMaxPathLimit) < 0xffff, "parent indices fit 16 bits");

struct PathStep {
  uint64_t bucket;
  uint8_t lane;
};

// Returns the number of moves (0..max_path) and fills path[0..moves] (path[0] is
// where the new fp goes once every move is done), or -1 when none was found.
template <class LT>
inline int bfs(const Sub& s, uint64_t i1, uint64_t i2, uint32_t max_path, PathStep* path, BfsNode* q) noexcept {
  const size_t cap = bfs_nodes_for(max_path);
  size_t head = 0, tail = 0;
  q[tail++] = BfsNode{static_cast<uint32_t>(i1), 0xffff, 0, 0};
  if (i2 != i1) q[tail++] = BfsNode{static_cast<uint32_t>(i2), 0xffff, 0, 0};
  while (head < tail) {
    BfsNode nd = q[head];
    auto w = bucket_load<LT>(s, nd.bucket);
    int e = LT::empty_lane(w);
    if (e >= 0) {
      // Walk back to the root: path[d] = (bucket at depth d, lane to free / fill).
      int d = nd.depth;
      path[d] = PathStep{nd.bucket, static_cast<uint8_t>(e)};
      size_t at = head;
      while (q[at].parent != 0xffff) {
        const BfsNode& c = q[at];
        path[c.depth - 1] = PathStep{q[c.parent].bucket, c.slot};
        at = c.parent;
      }
      return d;
    }
    if (nd.depth < max_path && tail + kSlots <= cap) {
      for (unsigned l = 0; l < kSlots; ++l) {
        uint32_t fp = LT::key_of(LT::lane(w, l));
        q[tail++] = BfsNode{static_cast<uint32_t>(alt_bucket(nd.bucket, fp, s.chunk_mask)), static_cast<uint16_t>(head),
                            static_cast<uint8_t>(l), static_cast<uint8_t>(nd.depth + 1)};
      }
    }
    ++head;
  }
  return -1;
}

// Inserts fp into sub `j` (lock held). Returns moves used, or -1 if no path. VALUE: the lane
// stored (0: k.fp; the stamped window stores k.fp with a stamp below it, LT::key_of(value) == k.fp).
template <class LT>
inline int insert_into_sub(std::byte* base, Header* h, uint32_t j, const KeyHash& k, uint32_t value = 0) noexcept {
  Sub s = sub_view(base, h->subs[j]);
  Probe p = probe(s, k);
  uint32_t max_path = std::min(load_relaxed(h->max_path), kMaxPathLimit);
  PathStep path[kMaxPathLimit + 1];
  auto* q = static_cast<BfsNode*>(__builtin_alloca(bfs_nodes_for(max_path) * sizeof(BfsNode)));
  for (int attempt = 0; attempt < 3; ++attempt) {
    int d = bfs<LT>(s, p.i1, p.i2, max_path, path, q);
    if (d < 0) return -1;
    // Execute from the free end backwards. Each step re-validates (a path may
    // visit one bucket twice); a failed check just means: search again.
    bool ok = true;
    for (int m = d - 1; m >= 0 && ok; --m) {
      auto ws = bucket_load<LT>(s, path[m].bucket);
      auto wd = bucket_load<LT>(s, path[m + 1].bucket);
      uint32_t fp = LT::lane(ws, path[m].lane);
      if (fp == 0 || LT::lane(wd, path[m + 1].lane) != 0 ||
          alt_bucket(path[m].bucket, LT::key_of(fp), s.chunk_mask) != path[m + 1].bucket) {
        ok = false;
        break;
      }
      move_locked<LT>(h, j, s, path[m].bucket, path[m].lane, path[m + 1].bucket, path[m + 1].lane, fp);
    }
    if (!ok) continue;
    auto w0 = bucket_load<LT>(s, path[0].bucket);
    if (LT::lane(w0, path[0].lane) != 0) continue;
    place_locked<LT>(h, j, s, path[0].bucket, path[0].lane, value != 0 ? value : k.fp);
    return d;
  }
  return -1;
}

// Erases one copy of fp (lock held), newest sub-filter first. True if found.
template <class LT>
inline bool erase_locked(std::byte* base, Header* h, const KeyHash& k) noexcept {
  uint32_t n = sub_count_acquire(h);
  for (uint32_t j = n; j-- > 0;) {
    Sub s = sub_view(base, h->subs[j]);
    Probe p = probe(s, k);
    for (uint64_t b : {p.i1, p.i2}) {
      auto w = bucket_load<LT>(s, b);
      int l = LT::find(w, k.fp);
      if (l < 0) continue;
      Intent& in = h->intent;
      in.sub = j;
      in.bucket = b;
      in.lane = static_cast<uint32_t>(l);
      in.fp = k.fp;
      in.size_before = h->size;
      A(in.op).store(kOpErase, std::memory_order_release);  // release: fields complete before op
      SHMF_KILL_POINT("cuckoo.erase.before_store");
      bucket_store<LT>(s, b, LT::with(w, static_cast<unsigned>(l), 0));
      SHMF_KILL_POINT("cuckoo.erase.after_store");
      A(h->size).store(in.size_before - 1, std::memory_order_relaxed);  // relaxed: lock holder only
      A(in.op).store(kOpNone, std::memory_order_release);               // release: step complete first
      A(h->erases).store(load_relaxed(h->erases) + 1, std::memory_order_relaxed);  // relaxed: lock holder only
      return true;
    }
  }
  return false;
}

// Present in any sub-filter (lock held: plain consistent reads, no seqlock needed).
template <class LT>
inline bool contains_locked(std::byte* base, Header* h, const KeyHash& k) noexcept {
  uint32_t n = sub_count_acquire(h);
  for (uint32_t j = 0; j < n; ++j) {
    Sub s = sub_view(base, h->subs[j]);
    Probe p = probe(s, k);
    if (LT::has(bucket_load<LT>(s, p.i1), p.fp) || LT::has(bucket_load<LT>(s, p.i2), p.fp)) return true;
  }
  return false;
}

// kRefused: the caller's gate (see insert) said no under the lock; nothing was stored. Only
// callers that pass a gate see it (the Window's day tables); the Cuckoo handle passes none.
enum class Status : uint8_t { kInserted = 0, kExists = 1, kFull = 2, kDropped = 3, kRefused = 4 };

// Adds a sub-filter (lock held). Returns false if not allowed or out of space.
using ExpandFn = bool (*)(void* ctx, Header* h);
// Decides, with the writer lock held and before anything is read or stored, whether this insert
// may go ahead (false: insert answers kRefused). It may store what its owner protects with this
// lock (the Window seals a day table from here). Must not take the lock again.
using GateFn = bool (*)(void* ctx, Header* h);

// The whole insert: lock, (gate), (unique test), newest sub-filter, expansion, unlock.
// try_older false (the Window's layered tables): a full newest sub-filter goes straight to the
// expansion (the next, larger sub-filter) instead of a BFS in each older one, so an insert's cost
// does not grow with the number of sub-filters or how full they are.
template <class LT>
inline Status insert(std::byte* base, Header* h, const KeyHash& k, bool unique, const Liveness& lv,
                     ExpandFn expand, void* expand_ctx, GateFn gate = nullptr, void* gate_ctx = nullptr,
                     bool try_older = true) noexcept {
  lock<LT>(base, h, lv);
  SHMF_KILL_POINT("cuckoo.insert.locked");
  if (gate != nullptr && !gate(gate_ctx, h)) {
    unlock(h);
    return Status::kRefused;
  }
  if (unique && contains_locked<LT>(base, h, k)) {
    unlock(h);
    return Status::kExists;
  }
  uint32_t n = sub_count_acquire(h);
  int moves = insert_into_sub<LT>(base, h, n - 1, k);
  if (moves < 0 && try_older) {
    // Older sub-filters may have room again after erases.
    for (uint32_t j = n - 1; j-- > 0 && moves < 0;) moves = insert_into_sub<LT>(base, h, j, k);
  }
  if (moves < 0 && expand != nullptr && load_relaxed(h->expansion) >= 2 && n < load_relaxed(h->max_subs)) {
    A(h->intent.op).store(kOpExpand, std::memory_order_release);  // release: diagnostic only; repair has nothing to undo
    bool grown = expand(expand_ctx, h);
    A(h->intent.op).store(kOpNone, std::memory_order_release);  // release: as for every intent clear
    if (grown) {
      A(h->expansions).store(load_relaxed(h->expansions) + 1, std::memory_order_relaxed);  // relaxed: lock holder
      moves = insert_into_sub<LT>(base, h, sub_count_acquire(h) - 1, k);
    }
  }
  Status st;
  if (moves < 0) {
    A(h->failures).store(load_relaxed(h->failures) + 1, std::memory_order_relaxed);  // relaxed: lock holder only
    st = Status::kFull;
  } else {
    A(h->inserts).store(load_relaxed(h->inserts) + 1, std::memory_order_relaxed);  // relaxed: lock holder only
    if (static_cast<uint64_t>(moves) > load_relaxed(h->longest_path))
      A(h->longest_path).store(static_cast<uint64_t>(moves), std::memory_order_relaxed);  // relaxed: lock holder
    st = Status::kInserted;
  }
  SHMF_KILL_POINT("cuckoo.insert.before_unlock");
  unlock(h);
  return st;
}

template <class LT>
inline bool erase(std::byte* base, Header* h, const KeyHash& k, const Liveness& lv) noexcept {
  lock<LT>(base, h, lv);
  bool r = erase_locked<LT>(base, h, k);
  unlock(h);
  return r;
}

// Fills a fresh header + sub-filter 0 (memory zeroed by the caller).
// `sub0_offset` is sub-filter 0's offset from the segment base.
// `lane_bits` 12 (packed, f = 12 only) writes layout 3, 8 or 16 layout 2.
inline void init_header(Header* h, uint32_t fp_bits, uint32_t max_path, uint32_t expansion, uint32_t max_subs,
                        uint64_t seed, uint64_t capacity, double target_error, uint64_t region_bytes,
                        Geometry g, uint64_t sub0_offset, uint32_t lane_bits) noexcept {
  h->magic = kMagic;
  h->layout_version = layout_for_lane(lane_bits);
  h->fp_bits = fp_bits;
  h->lane_bits = lane_bits;
  h->max_path = max_path;
  h->expansion = expansion;
  h->max_subs = max_subs;
  h->seed = seed;
  h->capacity = capacity;
  h->target_error = target_error;
  h->region_bytes = region_bytes;
  h->subs[0] = sub_desc(sub0_offset, g);
  A(h->sub_count).store(1, std::memory_order_release);  // release: publishes subs[0]
}
// One chunk of 2^log2_buckets buckets (the window's tables; layout 1's geometry).
inline void init_header(Header* h, uint32_t fp_bits, uint32_t max_path, uint32_t expansion, uint32_t max_subs,
                        uint64_t seed, uint64_t capacity, double target_error, uint64_t region_bytes,
                        uint32_t log2_buckets, uint64_t sub0_offset) noexcept {
  init_header(h, fp_bits, max_path, expansion, max_subs, seed, capacity, target_error, region_bytes,
              Geometry{1, log2_buckets}, sub0_offset, fp_bits <= 8 ? 8 : 16);
}

// Counts occupied lanes of every sub-filter (check, stats); lanes with bits above f set go to `bad_lanes`.
template <class LT>
inline uint64_t count_occupied(std::byte* base, const Header* h, uint32_t fp_bits, uint64_t* bad_lanes) noexcept {
  uint64_t n = 0, bad = 0;
  uint32_t subs = sub_count_acquire(h);
  for (uint32_t j = 0; j < subs; ++j) {
    Sub s = sub_view(base, h->subs[j]);
    for (uint64_t b = 0; b < s.n; ++b) {
      auto w = bucket_load<LT>(s, b);
      for (unsigned l = 0; l < kSlots; ++l) {
        uint32_t fp = LT::lane(w, l);
        n += fp != 0;
        bad += (fp >> fp_bits) != 0;
      }
    }
  }
  if (bad_lanes) *bad_lanes = bad;
  return n;
}

// The integrity checker of this kind (cuckoo.cpp), what Segment::check runs for every
// region of Kind::kCuckoo; its row in the kinds table (cuckoo_kind.cpp) names it.
void check_cuckoo(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);

// Its save/restore (cuckoo_snapshot.cpp); cuckoo_kind.cpp puts them in the kinds table.
std::string save(Segment& seg, const RegionInfo& r);
void restore(Segment& seg, const std::string& name, snapshot::In in);

}  // namespace shmfilter::internal::cuckoo
