// lib/structures/window/stamped_impl.h: the stamped window's kernels (variant kStamped):
// every bucket of a window answered from one place.
//
// One cuckoo filter (structures/cuckoo/cuckoo_impl.h: 4-lane buckets, partial-key cuckoo
// hashing inside 2^16-bucket chunks, one writer lock with an owner token and intent repair,
// seqlock readers, overflow sub-filters) holds every pair of the window once. A lane is
//
//     lane = fp (12 bits, != 0) << 4 | stamp (4 bits) ;  stamp = bucket number mod 16
//
// the bucket the pair was last marked in. A query over w buckets reads the pair's two buckets
// (one seqlock read, both lines prefetched together) and answers present when a lane has the
// pair's fp and an age < w, so w = 7 costs what w = 1 costs. A pair marked on several days
// holds one lane: marking restamps it.
//
// Stamps wrap every 16 buckets, so a stamp is decoded against a base: every lane in the table
// has a true stamp in [base, base + 15], base = swept - R + 1, where `swept` (WindowHeader) is
// the bucket at which the last complete sweep began: a sweep clears every lane whose age is
// >= R (dead), so afterwards no lane is older than swept - R + 1. Writers never stamp a
// bucket past base + 15: a writer that would (nobody ran maintain() for 15 - R buckets) sweeps
// first (window.cpp, stamped_writer_clock). Dead lanes are otherwise reclaimed lazily: an
// insert clears the dead lanes of the two buckets it goes to.
//
// Frequency caps: impression j (1..N) of a pair is a tally key derived from the pair's hash,
// stored like a pair with its own stamp; mark_if_under counts the tallies alive in the window
// and adds the smallest missing one, all under the writer lock (exact up to false positives,
// sliding, and racing callers never exceed N). docs/window.md "The stamped variant".
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/hash.h"
#include "base/kill_point.h"
#include "structures/bloom/bloom_impl.h"  // fmix64
#include "structures/cuckoo/cuckoo_impl.h"

namespace shmfilter::internal::stamped {

namespace ck = cuckoo;

inline constexpr uint32_t kStampBits = 4;
inline constexpr uint32_t kStampMask = (1u << kStampBits) - 1;
inline constexpr uint32_t kFpBits = 12;         // lane = 16 bits
inline constexpr uint32_t kLaneBits = 16;
inline constexpr uint32_t kMaxRetention = 12;   // 15 - R >= 3 buckets for maintain() to sweep in
inline constexpr uint32_t kMaxCap = 15;         // tallies per pair (mark_if_under's N)
inline constexpr int64_t kAbsent = INT64_MAX;   // age of a key with no lane
// The shared table is sized for its capacity at 90% of its lanes: the bounded cuckoo insert
// (paths of <= 5 moves) fails from about 93%, so a window at exactly its capacity (the mission's
// week) still takes every pair in its own table, and a fresh insert finds a free lane in a few
// moves. (Sized at 95%, the demo's week at 1.2e8 a day opened a sub-filter on its last day:
// 2.06 GiB against 1.65 GiB, and bench/results/window.md measured 1.7-2.0 us a fresh mark.)
inline constexpr double kTableLoad = 0.90;
inline ck::Geometry table_geometry(uint64_t capacity) noexcept {
  const double need = std::ceil(static_cast<double>(capacity) / (ck::kSlots * kTableLoad));
  if (need > static_cast<double>(ck::kMaxBuckets)) return ck::Geometry{1u << 16, ck::kChunkLog2 + 1};  // refused
  return ck::geometry_of_buckets(std::max<uint64_t>(2, static_cast<uint64_t>(need)));
}

// 16-bit lanes whose alternate bucket comes from the fingerprint above the stamp.
struct Lanes : ck::Lanes16 {
  static uint32_t key_of(uint32_t lane) noexcept { return lane >> kStampBits; }
};
using Word = Lanes::Word;

// The clock of one call. E: its bucket; base: the oldest true stamp a lane may carry.
struct Clock {
  int64_t e;
  int64_t base;
  uint32_t retention;
};
inline Clock clock_of(int64_t e, uint64_t swept, uint32_t retention) noexcept {
  return Clock{e, static_cast<int64_t>(swept) - static_cast<int64_t>(retention) + 1, retention};
}
// Largest bucket a writer may stamp before a sweep (base + 15).
inline int64_t stamp_limit(uint64_t swept, uint32_t retention) noexcept {
  return static_cast<int64_t>(swept) - static_cast<int64_t>(retention) + 1 + static_cast<int64_t>(kStampMask);
}
inline uint32_t lane_of(uint32_t fp, int64_t e) noexcept {
  return fp << kStampBits | (static_cast<uint32_t>(static_cast<uint64_t>(e)) & kStampMask);
}
// Age of a lane in buckets (its true stamp decoded against the base). A lane stamped after E
// (by a caller whose clock is ahead) has age 0.
inline int64_t age(const Clock& c, uint32_t lane) noexcept {
  const int64_t s = c.base + static_cast<int64_t>((static_cast<uint64_t>(lane) - static_cast<uint64_t>(c.base)) & kStampMask);
  const int64_t a = c.e - s;
  return a < 0 ? 0 : a;
}
inline bool dead(const Clock& c, uint32_t lane) noexcept {
  return lane != 0 && age(c, lane) >= static_cast<int64_t>(c.retention);
}

inline ck::KeyHash key(uint64_t hv) noexcept { return ck::split_hash(hv, kFpBits); }
// Tally j (1..kMaxCap) of the pair whose hash is HV: an independent key.
inline ck::KeyHash tally(uint64_t hv, uint32_t j) noexcept {
  return key(bloom::fmix64(hv ^ (0x9e3779b97f4a7c15ull * (uint64_t{j} + 0x51))));
}

inline int64_t youngest_in(Word w, uint32_t fp, const Clock& c) noexcept {
  int64_t best = kAbsent;
  for (unsigned l = 0; l < ck::kSlots; ++l) {
    const uint32_t lane = Lanes::lane(w, l);
    if (lane != 0 && (lane >> kStampBits) == fp) best = std::min(best, age(c, lane));
  }
  return best;
}

// ---- lookups (lock-free) ----------------------------------------------------------
inline void prefetch(std::byte* base, ck::Header* h, const ck::KeyHash& k) noexcept {
  ck::Sub s = ck::sub_view(base, h->subs[0]);
  ck::Probe p = ck::probe(s, k);
  bloom::prefetch_line(ck::bucket_addr<Lanes>(s, p.i1));
  bloom::prefetch_line(ck::bucket_addr<Lanes>(s, p.i2));
  bloom::prefetch_line(&s.versions[p.stripe]);
}
// The youngest age of the key's lanes in every sub-filter, kAbsent when it has none.
inline int64_t youngest(std::byte* base, ck::Header* h, const ck::KeyHash& k, const Clock& c,
                        const ck::Liveness& lv) noexcept {
  int64_t best = kAbsent;
  const uint32_t n = ck::sub_count_acquire(h);
  for (uint32_t j = 0; j < n; ++j) {
    ck::Sub s = ck::sub_view(base, h->subs[j]);
    ck::Probe p = ck::probe(s, k);
    Word w1, w2;
    ck::read_pair<Lanes>(base, h, s, p, lv, w1, w2);
    best = std::min(best, youngest_in(w1, k.fp, c));
    if (p.i2 != p.i1) best = std::min(best, youngest_in(w2, k.fp, c));
  }
  return best;
}

// ---- under the writer lock ------------------------------------------------------------
struct Found {
  uint32_t sub = 0;
  uint64_t bucket = 0;
  unsigned lane = 0;
  uint32_t value = 0;
  int64_t age = kAbsent;  // kAbsent: no live lane
};
// The key's youngest live lane (age < R).
inline Found find_locked(std::byte* base, ck::Header* h, const ck::KeyHash& k, const Clock& c) noexcept {
  Found f;
  const uint32_t n = ck::sub_count_acquire(h);
  for (uint32_t j = 0; j < n; ++j) {
    ck::Sub s = ck::sub_view(base, h->subs[j]);
    ck::Probe p = ck::probe(s, k);
    for (int which = 0; which < 2; ++which) {
      const uint64_t b = which == 0 ? p.i1 : p.i2;
      if (which == 1 && p.i2 == p.i1) break;
      const Word w = ck::bucket_load<Lanes>(s, b);
      for (unsigned l = 0; l < ck::kSlots; ++l) {
        const uint32_t lane = Lanes::lane(w, l);
        if (lane == 0 || (lane >> kStampBits) != k.fp) continue;
        const int64_t a = age(c, lane);
        if (a < static_cast<int64_t>(c.retention) && a < f.age) f = Found{j, b, l, lane, a};
      }
    }
  }
  return f;
}
// One word store: the live lane F now carries bucket E. No intent: a lane is never half a
// word, and the size does not change; a holder killed before the store leaves the old stamp
// (the call was not acknowledged).
inline void restamp_locked(std::byte* base, ck::Header* h, const Found& f, int64_t e) noexcept {
  ck::Sub s = ck::sub_view(base, h->subs[f.sub]);
  const Word w = ck::bucket_load<Lanes>(s, f.bucket);
  SHMF_KILL_POINT("window.stamped.before_restamp");
  ck::bucket_store<Lanes>(s, f.bucket, Lanes::with(w, f.lane, lane_of(f.value >> kStampBits, e)));
}
// Clears lane L of bucket B of sub J, which holds VALUE (the erase step of cuckoo_impl.h:
// its intent record lets a repairer fix the size counter).
inline void clear_lane_locked(ck::Header* h, uint32_t j, const ck::Sub& s, uint64_t b, unsigned l, uint32_t value) noexcept {
  ck::Intent& in = h->intent;
  in.sub = j;
  in.bucket = b;
  in.lane = l;
  in.fp = value;
  in.size_before = h->size;
  ck::A(in.op).store(ck::kOpErase, std::memory_order_release);  // release: fields complete before op
  SHMF_KILL_POINT("window.stamped.clear.before_store");
  ck::bucket_store<Lanes>(s, b, Lanes::with(ck::bucket_load<Lanes>(s, b), l, 0));
  ck::A(h->size).store(in.size_before - 1, std::memory_order_relaxed);  // relaxed: lock holder only
  ck::A(in.op).store(ck::kOpNone, std::memory_order_release);           // release: step complete first
}
// Clears the dead lanes of bucket B of sub J; returns how many.
inline uint32_t reclaim_bucket_locked(ck::Header* h, uint32_t j, const ck::Sub& s, uint64_t b, const Clock& c) noexcept {
  uint32_t n = 0;
  const Word w = ck::bucket_load<Lanes>(s, b);
  for (unsigned l = 0; l < ck::kSlots; ++l) {
    const uint32_t lane = Lanes::lane(w, l);
    if (!dead(c, lane)) continue;
    clear_lane_locked(h, j, s, b, l, lane);
    ++n;
  }
  return n;
}
// A new lane for K stamped E: the dead lanes of its buckets are reclaimed first, then the
// newest sub-filter, the older ones, then an expansion. False: full (nothing stored).
inline bool insert_locked(std::byte* base, ck::Header* h, const ck::KeyHash& k, const Clock& c, ck::ExpandFn expand,
                          void* expand_ctx, uint64_t* reclaimed) noexcept {
  const uint32_t n = ck::sub_count_acquire(h);
  for (uint32_t j = 0; j < n; ++j) {
    ck::Sub s = ck::sub_view(base, h->subs[j]);
    ck::Probe p = ck::probe(s, k);
    *reclaimed += reclaim_bucket_locked(h, j, s, p.i1, c);
    if (p.i2 != p.i1) *reclaimed += reclaim_bucket_locked(h, j, s, p.i2, c);
  }
  const uint32_t value = lane_of(k.fp, c.e);
  int moves = ck::insert_into_sub<Lanes>(base, h, n - 1, k, value);
  for (uint32_t j = n - 1; moves < 0 && j-- > 0;) moves = ck::insert_into_sub<Lanes>(base, h, j, k, value);
  if (moves < 0 && expand != nullptr && ck::load_relaxed(h->expansion) >= 2 && n < ck::load_relaxed(h->max_subs)) {
    ck::A(h->intent.op).store(ck::kOpExpand, std::memory_order_release);  // release: diagnostic only (as ck::insert)
    const bool grown = expand(expand_ctx, h);
    ck::A(h->intent.op).store(ck::kOpNone, std::memory_order_release);
    if (grown) {
      ck::A(h->expansions).store(ck::load_relaxed(h->expansions) + 1, std::memory_order_relaxed);  // relaxed: lock holder
      moves = ck::insert_into_sub<Lanes>(base, h, ck::sub_count_acquire(h) - 1, k, value);
    }
  }
  if (moves < 0) {
    ck::A(h->failures).store(ck::load_relaxed(h->failures) + 1, std::memory_order_relaxed);  // relaxed: lock holder
    return false;
  }
  ck::A(h->inserts).store(ck::load_relaxed(h->inserts) + 1, std::memory_order_relaxed);  // relaxed: lock holder
  if (static_cast<uint64_t>(moves) > ck::load_relaxed(h->longest_path))
    ck::A(h->longest_path).store(static_cast<uint64_t>(moves), std::memory_order_relaxed);  // relaxed: lock holder
  return true;
}

enum class Answer : uint8_t { kSeen, kNew, kFull, kCapped };

// mark_if_unseen over w (mark is w = 1): seen when a lane of the pair is younger than w; else
// its live lane is restamped E or a new lane inserted (kNew). *NEW_TODAY: the pair had no lane
// of bucket E before (the per-bucket distinct count).
inline Answer mark_locked(std::byte* base, ck::Header* h, const ck::KeyHash& k, const Clock& c, uint32_t w,
                          ck::ExpandFn expand, void* expand_ctx, uint64_t* reclaimed) noexcept {
  const Found f = find_locked(base, h, k, c);
  if (f.age < static_cast<int64_t>(w)) return Answer::kSeen;
  if (f.age != kAbsent) {
    restamp_locked(base, h, f, c.e);
    return Answer::kNew;
  }
  return insert_locked(base, h, k, c, expand, expand_ctx, reclaimed) ? Answer::kNew : Answer::kFull;
}

// mark_if_under: the tallies 1..cap of the pair alive within w; capped when all are; else the
// smallest missing one is restamped / inserted (kNew) and *TALLY says which.
inline Answer cap_locked(std::byte* base, ck::Header* h, uint64_t hv, uint32_t cap, const Clock& c, uint32_t w,
                         ck::ExpandFn expand, void* expand_ctx, uint64_t* reclaimed, uint32_t* tally_out) noexcept {
  uint32_t live = 0, first_missing = 0;
  Found missing;
  for (uint32_t j = 1; j <= cap; ++j) {
    const Found f = find_locked(base, h, tally(hv, j), c);
    if (f.age < static_cast<int64_t>(w)) {
      ++live;
    } else if (first_missing == 0) {
      first_missing = j;
      missing = f;
    }
  }
  if (live >= cap || first_missing == 0) return Answer::kCapped;
  *tally_out = first_missing;
  if (missing.age != kAbsent) {
    restamp_locked(base, h, missing, c.e);
    return Answer::kNew;
  }
  return insert_locked(base, h, tally(hv, first_missing), c, expand, expand_ctx, reclaimed) ? Answer::kNew
                                                                                              : Answer::kFull;
}

// The live lanes with K's fingerprint in K's buckets of every sub-filter (at most 2).
inline uint32_t matches_locked(std::byte* base, ck::Header* h, const ck::KeyHash& k, const Clock& c) noexcept {
  uint32_t n = 0;
  const uint32_t subs = ck::sub_count_acquire(h);
  for (uint32_t j = 0; j < subs && n < 2; ++j) {
    ck::Sub s = ck::sub_view(base, h->subs[j]);
    ck::Probe p = ck::probe(s, k);
    for (int which = 0; which < 2; ++which) {
      if (which == 1 && p.i2 == p.i1) break;
      const Word w = ck::bucket_load<Lanes>(s, which == 0 ? p.i1 : p.i2);
      for (unsigned l = 0; l < ck::kSlots; ++l) {
        const uint32_t lane = Lanes::lane(w, l);
        n += lane != 0 && (lane >> kStampBits) == k.fp && age(c, lane) < static_cast<int64_t>(c.retention);
      }
    }
  }
  return n;
}
enum class Forgot : uint8_t { kNone, kCleared, kAmbiguous };
// Clears K's lane when it is the only live lane with K's fingerprint in K's buckets (a mark never
// gives a key a second lane, so then it is K's own). Two or more: another key's lane has the
// same fingerprint there (a collider; with sub-filters of different sizes a collider need not
// share every bucket) and no lane can be told to be K's: both stay (kAmbiguous), so K keeps
// answering present as a false positive would, and no other key's acknowledged mark is lost.
inline Forgot forget_locked(std::byte* base, ck::Header* h, const ck::KeyHash& k, const Clock& c) noexcept {
  const Found f = find_locked(base, h, k, c);
  if (f.age == kAbsent) return Forgot::kNone;
  if (matches_locked(base, h, k, c) > 1) return Forgot::kAmbiguous;
  ck::Sub s = ck::sub_view(base, h->subs[f.sub]);
  clear_lane_locked(h, f.sub, s, f.bucket, f.lane, f.value);
  return Forgot::kCleared;
}

// Clears the dead lanes of buckets [from, to) of sub J (lock held by the caller, per chunk).
inline uint64_t sweep_range_locked(std::byte* base, ck::Header* h, uint32_t j, uint64_t from, uint64_t to,
                                   const Clock& c) noexcept {
  ck::Sub s = ck::sub_view(base, h->subs[j]);
  uint64_t n = 0;
  to = std::min(to, s.n);
  for (uint64_t b = from; b < to; ++b) {
    const Word w = ck::bucket_load<Lanes>(s, b);
    if (w == 0) continue;
    n += reclaim_bucket_locked(h, j, s, b, c);
  }
  return n;
}

// Lanes by age (check, stats): live (age < R), dead (swept later), and lanes whose fingerprint
// is 0 (impossible for a lane this code writes: damage).
struct Census {
  uint64_t live = 0, dead = 0, bad = 0;
};
inline Census census(std::byte* base, const ck::Header* h, const Clock& c) noexcept {
  Census r;
  const uint32_t n = ck::sub_count_acquire(h);
  for (uint32_t j = 0; j < n; ++j) {
    ck::Sub s = ck::sub_view(base, h->subs[j]);
    for (uint64_t b = 0; b < s.n; ++b) {
      const Word w = ck::bucket_load<Lanes>(s, b);
      if (w == 0) continue;
      for (unsigned l = 0; l < ck::kSlots; ++l) {
        const uint32_t lane = Lanes::lane(w, l);
        if (lane == 0) continue;
        if ((lane >> kStampBits) == 0)
          ++r.bad;
        else if (dead(c, lane))
          ++r.dead;
        else
          ++r.live;
      }
    }
  }
  return r;
}

}  // namespace shmfilter::internal::stamped
