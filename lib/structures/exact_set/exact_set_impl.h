// lib/structures/exact_set/exact_set_impl.h: the exact hash set's kernels over its region:
// open addressing (linear probing) over 8-byte slot words, lock-free reads,
// slot changes by single-word CAS, and per-stripe owner-token locks that
// serialise the placement and removal of keys of the same stripe.
// The handle is lib/structures/exact_set/exact_set.cpp; the argument is in docs/exact_set.md.
//
// Slot word: 0 = EMPTY, ~0 = TOMBSTONE, anything else = that key. Keys 0 and
// ~0 live in header->special[] instead. A slot never returns to EMPTY, so
// every key stays reachable from its home slot before the first EMPTY.
//
// Slot state machine (every transition one CAS, so a kill at any instruction
// leaves a valid word):
//   EMPTY -> key       insert, holding the key's stripe lock
//   key   -> TOMBSTONE erase, holding the key's stripe lock
//   TOMBSTONE -> key   insert reusing the FIRST tombstone of the key's probe
//                      chain, holding the key's stripe lock
// All placements and removals of key k happen under lock(stripe(k)), after a
// rescan of k's chain up to the first EMPTY made under that lock, so two
// copies of k can never exist (no tombstone-reuse race), and "inserted" is
// answered exactly once. Keys of other stripes race for the same EMPTY or
// TOMBSTONE slot only through the CAS; the loser rescans.
//
// Intent record: before its CAS the lock holder writes {op, slot, key,
// count_before} into the stripe (op last); after it, the stripe count, then
// op = 0, then unlock. A process that takes over the lock of a dead holder
// (token_alive false) replays the intent from the slot word: the slot holds
// k exactly when the dead holder's CAS happened (only the lock holder moves
// k). So per-stripe counts, and size() = their sum, stay exact across SIGKILL.
#pragma once

#include "base/cpu_relax.h"
#include <string>

#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/wait_stats.h"
#include "base/hash.h"
#include "base/kill_point.h"

#include "shmfilter/segment.hpp"  // Segment, RegionInfo, CheckReport: the checker's signature

namespace shmfilter::internal::snapshot {
struct In;  // structures/snapshot_io.h
}

namespace shmfilter::internal::exact_set {

inline constexpr uint32_t kMagic = 0x31535845;  // "EXS1" little-endian
inline constexpr uint32_t kLayoutVersion = 1;
inline constexpr uint64_t kSlotEmpty = 0;
inline constexpr uint64_t kSlotTomb = ~0ull;
inline constexpr uint64_t kSpecialSlotBase = ~0ull - 2;  // intent_slot for key 0: base, for key ~0: base+1
inline constexpr uint64_t kNoSlot = ~0ull;

enum : uint64_t { kIntentNone = 0, kIntentInsert = 1, kIntentErase = 2 };

struct alignas(64) ExactSetHeader {
  // ---- line 0: parameters, written once by create() under the segment lock before publication; read-only after
  uint32_t magic;           // kMagic
  uint32_t version;         // kLayoutVersion
  uint64_t seed;            // XXH3 seed: home slot, stripe, and string keys -> uint64
  uint64_t capacity;        // most live keys; insert of a new key beyond it returns kFull
  uint64_t slots;           // slot words (capacity / max_load, >= 8)
  uint32_t stripes;         // stripe locks, a power of two
  uint32_t max_load_ppm;    // capacity / slots, parts per million (informational)
  uint64_t used_limit;      // most non-EMPTY slots (keys + tombstones); < slots so an EMPTY always remains
  uint64_t stripes_offset;  // from the region start
  uint64_t slots_offset;    // from the region start
  // ---- line 1
  alignas(64) uint64_t live_hint;  // approximate live keys (fetch_add after insert/erase; any process);
                                   // may drift by one per process killed mid-operation; only a fast "near full?" test
  // ---- line 2
  alignas(64) uint64_t used_hint;  // non-EMPTY slots reserved: fetch_add BEFORE claiming an EMPTY, fetch_sub on a
                                   // lost CAS; never below the true count (a kill can only leave it higher)
  // ---- line 3
  alignas(64) uint64_t special[2];  // presence (0/1) of key 0 and key ~0; written under the key's stripe lock
  uint64_t reserved[6];             // zero
};
static_assert(sizeof(ExactSetHeader) == 256, "ExactSetHeader: 4 cache lines, part of the on-segment format");
static_assert(offsetof(ExactSetHeader, live_hint) == 64, "hot counters on their own cache lines");
static_assert(offsetof(ExactSetHeader, used_hint) == 128, "hot counters on their own cache lines");
static_assert(offsetof(ExactSetHeader, special) == 192, "special-key flags on their own line");

struct alignas(64) ExactSetStripe {
  uint64_t lock;           // owner token of the holder, 0 free. CAS 0->token to take; store 0 to release; a
                           // waiter CASes a dead holder's token (token_alive false) to its own to take over
  uint64_t count;          // live keys of this stripe; written only by the lock holder
  uint64_t intent_op;      // kIntentNone/Insert/Erase; lock holder; stored after the other intent fields
  uint64_t intent_slot;    // slot index (or kSpecialSlotBase + i); lock holder
  uint64_t intent_key;     // the key; lock holder
  uint64_t intent_count;   // count before the operation; lock holder
  uint64_t reserved[2];    // zero
};
static_assert(sizeof(ExactSetStripe) == 64, "one stripe per cache line: no false sharing between stripes");
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free, "slot words need lock-free 64-bit CAS across processes");

enum class SetInsert : uint8_t { kInserted = 0, kExists = 1, kFull = 2 };

// A view of one set's region plus the caller's identity for lock ownership.
struct SetView {
  ExactSetHeader* h = nullptr;
  ExactSetStripe* stripes = nullptr;
  uint64_t* slots = nullptr;
  uint64_t token = 0;                               // this attachment's owner token (nonzero)
  bool (*alive)(const void* ctx, uint64_t token) = nullptr;  // kernel-backed liveness
  const void* ctx = nullptr;
};

inline std::atomic_ref<uint64_t> aref(uint64_t& w) noexcept { return std::atomic_ref<uint64_t>(w); }

inline uint64_t set_hash(const ExactSetHeader* h, uint64_t key) noexcept { return hash_key(key, h->seed); }
inline uint64_t set_home(const ExactSetHeader* h, uint64_t hash) noexcept {
  return static_cast<uint64_t>((static_cast<__uint128_t>(hash) * h->slots) >> 64);  // Lemire's fastrange
}
inline uint32_t set_stripe(const ExactSetHeader* h, uint64_t hash) noexcept {
  return static_cast<uint32_t>(hash & (h->stripes - 1));
}
inline bool is_special(uint64_t key) noexcept { return key == kSlotEmpty || key == kSlotTomb; }
inline uint32_t special_index(uint64_t key) noexcept { return key == kSlotEmpty ? 0 : 1; }

// Lock-free: slot index holding key, or kNoSlot. Stops at the first EMPTY
// (or after one full wrap, which the used limit makes impossible).
inline uint64_t set_find(const SetView& v, uint64_t key, uint64_t home) noexcept {
  const uint64_t n = v.h->slots;
  uint64_t i = home;
  for (uint64_t probes = 0; probes < n; ++probes) {
    uint64_t w = aref(v.slots[i]).load();  // seq_cst load: a plain mov on x86, ldar on ARM
    if (w == key) return i;
    if (w == kSlotEmpty) return kNoSlot;
    if (++i == n) i = 0;
  }
  return kNoSlot;
}

inline bool set_contains(const SetView& v, uint64_t key) noexcept {
  if (is_special(key)) return aref(v.h->special[special_index(key)]).load() != 0;
  uint64_t hash = set_hash(v.h, key);
  return set_find(v, key, set_home(v.h, hash)) != kNoSlot;
}

// The count a stripe has once its intent (if any) is applied: the slot word
// says whether the holder's CAS happened (only the holder moves its keys).
// Read-only; exact when the stripe is quiescent or its holder is dead.
inline uint64_t set_effective_count(const SetView& v, ExactSetStripe& s) noexcept {
  uint64_t count = aref(s.count).load();
  uint64_t op = aref(s.intent_op).load();
  if (op == kIntentNone) return count;
  uint64_t slot = aref(s.intent_slot).load(), key = aref(s.intent_key).load();
  uint64_t before = aref(s.intent_count).load();
  bool holds;
  if (slot >= kSpecialSlotBase)
    holds = aref(v.h->special[slot - kSpecialSlotBase]).load() != 0;
  else
    holds = slot < v.h->slots && aref(v.slots[slot]).load() == key;
  if (op == kIntentInsert) return holds ? before + 1 : before;
  return holds ? before : before - 1;
}

// Replays a dead holder's intent. Caller holds the stripe lock.
inline void set_recover_stripe(const SetView& v, ExactSetStripe& s) noexcept {
  if (aref(s.intent_op).load() == kIntentNone) return;
  aref(s.count).store(set_effective_count(v, s));
  aref(s.intent_op).store(kIntentNone);
}

inline void set_pause(uint64_t spins) noexcept {
  if (spins < 64) {
    cpu_relax();
  } else if (spins < 256) {
    sched_yield();
  } else {
    timespec ts{0, 20000};  // 20 us: a preempted holder on a 2-core box needs the CPU
    nanosleep(&ts, nullptr);
  }
}

// Takes the stripe lock; takes it over (and replays the intent) from a dead holder.
inline void set_lock(const SetView& v, ExactSetStripe& s) noexcept {
  SlowWait wait("exact-set stripe lock");
  for (uint64_t spins = 0;; ++spins) {
    uint64_t cur = 0;
    if (aref(s.lock).compare_exchange_strong(cur, v.token)) break;
    // cur == v.token: another thread of this process holds it; it is alive, wait.
    if (cur != v.token && (spins & 15) == 15 && !v.alive(v.ctx, cur)) {
      if (aref(s.lock).compare_exchange_strong(cur, v.token)) break;
    }
    if (spins >= 64) wait.start();  // yielding from here on: the slow path
    set_pause(spins);
  }
  set_recover_stripe(v, s);  // no-op unless a dead holder left an intent
}
inline void set_unlock(ExactSetStripe& s) noexcept { aref(s.lock).store(0); }

inline uint64_t set_size(const SetView& v) noexcept {
  uint64_t n = 0;
  for (uint32_t i = 0; i < v.h->stripes; ++i) n += set_effective_count(v, v.stripes[i]);
  return n;
}

inline bool set_full(const SetView& v) noexcept {
  if (aref(v.h->live_hint).load(std::memory_order_relaxed) < v.h->capacity) return false;  // relaxed: a hint
  return set_size(v) >= v.h->capacity;
}

inline void set_begin_intent(ExactSetStripe& s, uint64_t op, uint64_t slot, uint64_t key) noexcept {
  aref(s.intent_slot).store(slot);
  aref(s.intent_key).store(key);
  aref(s.intent_count).store(aref(s.count).load());
  aref(s.intent_op).store(op);  // seq_cst, last: the intent is complete when op is visible
}
inline void set_finish_intent(ExactSetStripe& s, int64_t delta) noexcept {
  aref(s.count).store(aref(s.intent_count).load() + static_cast<uint64_t>(delta));
}

inline SetInsert set_insert_special(const SetView& v, uint64_t key) noexcept {
  uint32_t si = special_index(key);
  if (aref(v.h->special[si]).load() != 0) return SetInsert::kExists;
  ExactSetStripe& s = v.stripes[set_stripe(v.h, set_hash(v.h, key))];
  set_lock(v, s);
  SetInsert r = SetInsert::kExists;
  if (aref(v.h->special[si]).load() == 0) {
    if (set_full(v)) {
      r = SetInsert::kFull;
    } else {
      set_begin_intent(s, kIntentInsert, kSpecialSlotBase + si, key);
      SHMF_KILL_POINT("exact_set.insert.after_intent");
      aref(v.h->special[si]).store(1);
      SHMF_KILL_POINT("exact_set.insert.after_cas");
      set_finish_intent(s, +1);
      SHMF_KILL_POINT("exact_set.insert.after_count");
      aref(s.intent_op).store(kIntentNone);
      aref(v.h->live_hint).fetch_add(1, std::memory_order_relaxed);  // relaxed: a hint
      r = SetInsert::kInserted;
    }
  }
  set_unlock(s);
  return r;
}

// Online tombstone clean-up, with EVERY stripe lock held (so no insert runs):
// a tombstone directly followed (in probe order) by an EMPTY slot lies on no
// present key's probe chain (a chain from a home to its key has no EMPTY in
// it), so turning it into EMPTY changes no lookup, lock-free readers'
// included; cascading backwards clears whole runs. Each step is one CAS, safe
// to kill anywhere. Then used_hint is recounted exactly (every increment
// happens under a stripe lock, all of which we hold). Returns slots freed.
inline uint64_t set_clean_tombstones_all_locked(const SetView& v) noexcept {
  const uint64_t n = v.h->slots;
  uint64_t freed = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (aref(v.slots[i]).load() != kSlotEmpty) continue;
    uint64_t j = i;
    for (uint64_t steps = 0; steps + 1 < n; ++steps) {
      j = j == 0 ? n - 1 : j - 1;
      uint64_t expect = kSlotTomb;
      if (!aref(v.slots[j]).compare_exchange_strong(expect, kSlotEmpty)) break;
      ++freed;
    }
  }
  uint64_t used = 0;
  for (uint64_t i = 0; i < n; ++i) used += aref(v.slots[i]).load() != kSlotEmpty;
  aref(v.h->used_hint).store(used);
  return freed;
}

// Takes every stripe lock in index order (no deadlock between two cleaners),
// cleans, releases. The caller holds no stripe lock.
inline uint64_t set_clean_tombstones(const SetView& v) noexcept {
  for (uint32_t i = 0; i < v.h->stripes; ++i) set_lock(v, v.stripes[i]);
  SHMF_KILL_POINT("exact_set.clean.locked");
  uint64_t freed = set_clean_tombstones_all_locked(v);
  for (uint32_t i = v.h->stripes; i-- > 0;) set_unlock(v.stripes[i]);
  return freed;
}

// Inserts key; kInserted exactly once per key across all processes.
inline SetInsert set_insert(const SetView& v, uint64_t key) noexcept {
  if (is_special(key)) return set_insert_special(v, key);
  const uint64_t hash = set_hash(v.h, key), home = set_home(v.h, hash), n = v.h->slots;
  if (set_find(v, key, home) != kNoSlot) return SetInsert::kExists;  // lock-free fast path
  ExactSetStripe& s = v.stripes[set_stripe(v.h, hash)];
  set_lock(v, s);
  SHMF_KILL_POINT("exact_set.insert.locked");
  SetInsert result;
  bool cleaned = false;
  while (true) {
    // Rescan under the lock: nobody else can place or remove this key now.
    uint64_t tomb = kNoSlot, empty = kNoSlot, i = home;
    bool found = false;
    for (uint64_t probes = 0; probes < n; ++probes) {
      uint64_t w = aref(v.slots[i]).load();
      if (w == key) {
        found = true;
        break;
      }
      if (w == kSlotTomb && tomb == kNoSlot) tomb = i;
      if (w == kSlotEmpty) {
        empty = i;
        break;
      }
      if (++i == n) i = 0;
    }
    if (found) {
      result = SetInsert::kExists;
      break;
    }
    if (set_full(v)) {
      result = SetInsert::kFull;
      break;
    }
    uint64_t target = tomb != kNoSlot ? tomb : empty;
    uint64_t expected = tomb != kNoSlot ? kSlotTomb : kSlotEmpty;
    if (target == kNoSlot) {
      result = SetInsert::kFull;
      break;
    }
    if (expected == kSlotEmpty) {
      // The used limit is soft: past it an insert first cleans tombstones up;
      // if keys plus the tombstones inside key runs still reach it, the
      // insert may use every slot but one (an EMPTY always remains, so every
      // probe ends), since live keys are below capacity (set_full said so).
      const uint64_t limit = cleaned ? v.h->slots - 1 : v.h->used_limit;
      if (aref(v.h->used_hint).fetch_add(1) >= limit) {
        aref(v.h->used_hint).fetch_sub(1);
        if (!cleaned) {
          // Keys + tombstones reached the used limit while live keys are below
          // capacity: clean the tombstones up (needs every stripe lock, so give
          // ours back first), then retry once.
          cleaned = true;
          set_unlock(s);
          set_clean_tombstones(v);
          set_lock(v, s);
          continue;
        }
        result = SetInsert::kFull;  // still no room after a clean-up: documented in exact_set.hpp
        break;
      }
    }
    set_begin_intent(s, kIntentInsert, target, key);
    SHMF_KILL_POINT("exact_set.insert.after_intent");
    if (!aref(v.slots[target]).compare_exchange_strong(expected, key)) {
      // A key of another stripe took the slot first: forget the intent, retry.
      aref(s.intent_op).store(kIntentNone);
      if (tomb == kNoSlot) aref(v.h->used_hint).fetch_sub(1);
      continue;
    }
    SHMF_KILL_POINT("exact_set.insert.after_cas");
    set_finish_intent(s, +1);
    SHMF_KILL_POINT("exact_set.insert.after_count");
    aref(s.intent_op).store(kIntentNone);
    aref(v.h->live_hint).fetch_add(1, std::memory_order_relaxed);  // relaxed: a hint
    result = SetInsert::kInserted;
    break;
  }
  set_unlock(s);
  return result;
}

// Erases key; true exactly once per present key across all processes.
inline bool set_erase(const SetView& v, uint64_t key) noexcept {
  const uint64_t hash = set_hash(v.h, key);
  ExactSetStripe& s = v.stripes[set_stripe(v.h, hash)];
  if (is_special(key)) {
    uint32_t si = special_index(key);
    if (aref(v.h->special[si]).load() == 0) return false;
    set_lock(v, s);
    bool done = false;
    if (aref(v.h->special[si]).load() != 0) {
      set_begin_intent(s, kIntentErase, kSpecialSlotBase + si, key);
      SHMF_KILL_POINT("exact_set.erase.after_intent");
      aref(v.h->special[si]).store(0);
      SHMF_KILL_POINT("exact_set.erase.after_cas");
      set_finish_intent(s, -1);
      aref(s.intent_op).store(kIntentNone);
      aref(v.h->live_hint).fetch_sub(1, std::memory_order_relaxed);  // relaxed: a hint
      done = true;
    }
    set_unlock(s);
    return done;
  }
  const uint64_t home = set_home(v.h, hash);
  if (set_find(v, key, home) == kNoSlot) return false;  // lock-free fast path
  set_lock(v, s);
  bool done = false;
  uint64_t at = set_find(v, key, home);
  if (at != kNoSlot) {
    set_begin_intent(s, kIntentErase, at, key);
    SHMF_KILL_POINT("exact_set.erase.after_intent");
    uint64_t expected = key;
    // Cannot fail: only this stripe's lock holder moves a slot away from `key`.
    aref(v.slots[at]).compare_exchange_strong(expected, kSlotTomb);
    SHMF_KILL_POINT("exact_set.erase.after_cas");
    set_finish_intent(s, -1);
    SHMF_KILL_POINT("exact_set.erase.after_count");
    aref(s.intent_op).store(kIntentNone);
    aref(v.h->live_hint).fetch_sub(1, std::memory_order_relaxed);  // relaxed: a hint
    done = true;
  }
  set_unlock(s);
  return done;
}

// Region layout for given parameters.
struct SetLayout {
  uint64_t slots, stripes, used_limit, stripes_offset, slots_offset, bytes;
};
inline SetLayout set_layout(uint64_t capacity, double max_load) noexcept {
  SetLayout l{};
  uint64_t slots = static_cast<uint64_t>(static_cast<double>(capacity) / max_load);
  while (static_cast<double>(slots) * max_load < static_cast<double>(capacity)) ++slots;
  if (slots < 8) slots = 8;
  uint64_t stripes = 8;
  while (stripes < 1024 && stripes * 512 < capacity) stripes <<= 1;
  double limit_load = max_load + 0.1 < 0.97 ? max_load + 0.1 : 0.97;
  uint64_t limit = static_cast<uint64_t>(static_cast<double>(slots) * limit_load);
  if (limit < capacity) limit = capacity;
  if (limit > slots - 1) limit = slots - 1;
  l.slots = slots;
  l.stripes = stripes;
  l.used_limit = limit;
  l.stripes_offset = sizeof(ExactSetHeader);
  l.slots_offset = l.stripes_offset + stripes * sizeof(ExactSetStripe);
  l.bytes = l.slots_offset + slots * sizeof(uint64_t);
  return l;
}

// The integrity checker of this kind (exact_set.cpp), what Segment::check runs for every
// region of Kind::kExactSet; its row in the kinds table (exact_set_kind.cpp) names it.
void check_exact_set(Segment& seg, const RegionInfo& region, bool repair, CheckReport& report);

// Its save/restore (exact_set_snapshot.cpp); exact_set_kind.cpp puts them in the kinds table.
std::string save(Segment& seg, const RegionInfo& r);
void restore(Segment& seg, const std::string& name, snapshot::In in);

}  // namespace shmfilter::internal::exact_set
