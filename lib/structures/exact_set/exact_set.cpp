// lib/structures/exact_set/exact_set.cpp: the ExactSet handle over lib/structures/exact_set/exact_set_impl.h. See exact_set.hpp.
#include "shmfilter/exact_set.hpp"

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <type_traits>
#include <vector>

#include "structures/exact_set/exact_set_impl.h"
#include "structures/region_handle.h"

static_assert(offsetof(shmfilter::internal::exact_set::ExactSetHeader, magic) == 0 && offsetof(shmfilter::internal::exact_set::ExactSetHeader, version) == 4,
              "check_prefix (region_handle.h) reads the magic at byte 0 and the layout version at byte 4");

namespace shmfilter {

using namespace internal::exact_set;
using internal::hash_key;
using internal::random_seed;

std::string_view insert_result_name(InsertResult r) noexcept {
  switch (r) {
    case InsertResult::kInserted: return "inserted";
    case InsertResult::kExists: return "exists";
    case InsertResult::kFull: return "full";
    case InsertResult::kDropped: return "dropped";
    case InsertResult::kForked: return "forked";
    case InsertResult::kReadOnly: return "read-only";
  }
  return "unknown";
}

namespace {

bool segment_alive(const void* ctx, uint64_t token) {
  return static_cast<const Segment*>(ctx)->token_alive(token);
}

ExactSetHeader* header_of(std::byte* region) { return reinterpret_cast<ExactSetHeader*>(region); }

// Validates the header against the region; throws kCorrupt / kVersionMismatch.
void validate(const RegionInfo& info, std::byte* region, uint64_t segment_size) {
  internal::validate_prefix(info, region, sizeof(ExactSetHeader), segment_size, kMagic, kLayoutVersion);
  auto fail = [&](const std::string& what) { throw internal::corrupt_error(info.kind, info.name, what); };
  const ExactSetHeader* h = header_of(region);
  if (h->stripes == 0 || (h->stripes & (h->stripes - 1)) != 0) fail("stripe count is not a power of two");
  if (h->slots < 8 || h->capacity == 0 || h->capacity > h->slots || h->used_limit >= h->slots ||
      h->used_limit < h->capacity)
    fail("capacity/slots/used limit are inconsistent");
  if (h->stripes_offset != sizeof(ExactSetHeader) ||
      h->slots_offset != h->stripes_offset + uint64_t{h->stripes} * sizeof(ExactSetStripe) ||
      h->slots > (info.size - std::min(info.size, h->slots_offset)) / sizeof(uint64_t))
    fail("stripe/slot arrays do not fit the region");
}

}  // namespace

// The private operations of ExactSet (its friend; include/shmfilter/exact_set.hpp keeps
// only data): the kernels' view of a handle and the batched insert.
struct ExactSetOps {
  // The kernels' view of S's table (exact_set_impl.h), from the offsets open() validated.
  static SetView view(const ExactSet& s) noexcept {
    SetView v;
    v.h = header_of(s.region_);
    v.stripes = reinterpret_cast<ExactSetStripe*>(s.region_ + s.stripes_offset_);
    v.slots = reinterpret_cast<uint64_t*>(s.region_ + s.slots_offset_);
    v.token = s.token_;
    v.alive = &segment_alive;
    v.ctx = &s.seg_;
    return v;
  }
  template <class K>
  static uint64_t insert_batch(ExactSet& s, std::span<const K> keys, std::span<InsertResult> out) noexcept;
};

ExactSet ExactSet::create(Segment& seg, std::string_view name, const ExactSetOptions& opts) {
  if (opts.capacity == 0)
    throw Error(ErrorCode::kInvalidArgument, "capacity 0 is invalid: pass a capacity >= 1 (--capacity N)");
  if (!(opts.max_load >= 0.1 && opts.max_load <= 0.95))
    throw Error(ErrorCode::kInvalidArgument, "max load " + std::to_string(opts.max_load) +
                                                 " is out of range: pass a value in [0.1, 0.95] (default 0.8)");
  if (opts.capacity > (1ull << 40))
    throw Error(ErrorCode::kInvalidArgument, "capacity " + std::to_string(opts.capacity) +
                                                 " is too large: pass at most 2^40 keys");
  SetLayout l = set_layout(opts.capacity, opts.max_load);
  uint64_t seed = random_seed();
  seg.create_region(name, Kind::kExactSet, l.bytes, [&](std::byte* region, uint64_t, ControlTxn&) {
    ExactSetHeader* h = header_of(region);
    h->magic = kMagic;
    h->version = kLayoutVersion;
    h->seed = seed;
    h->capacity = opts.capacity;
    h->slots = l.slots;
    h->stripes = static_cast<uint32_t>(l.stripes);
    h->max_load_ppm = static_cast<uint32_t>(std::llround(static_cast<double>(opts.capacity) * 1e6 / l.slots));
    h->used_limit = l.used_limit;
    h->stripes_offset = l.stripes_offset;
    h->slots_offset = l.slots_offset;
  });
  return open(seg, name);
}

ExactSet ExactSet::open(Segment& seg, std::string_view name) {
  const ReadGuard in_call(seg);  // docs/CONCURRENCY.md "Reader announcements"
  ExactSet s;
  RegionInfo info = s.bind(seg, name, Kind::kExactSet);
  validate(info, s.region_, seg.size());
  s.stripes_offset_ = header_of(s.region_)->stripes_offset;
  s.slots_offset_ = header_of(s.region_)->slots_offset;
  s.token_ = seg.owner_token();
  return s;
}

bool ExactSet::drop(Segment& seg, std::string_view name) { return drop_region(seg, name, Kind::kExactSet); }

uint64_t ExactSet::key_of(std::string_view key) const noexcept {
  return region_ ? hash_key(key, header_of(region_)->seed) : 0;
}

// A handle inherited across fork() holds the parent's token: writers refuse
// (kForked / false, as RoaringSet does) instead of taking stripe locks in its name.
// So do writers through a read-only attachment (its mapping is PROT_READ): kReadOnly.
namespace {
InsertResult refusal(bool read_only, bool valid, bool forked) noexcept {
  if (read_only) return InsertResult::kReadOnly;
  if (!valid) return InsertResult::kDropped;
  return forked ? InsertResult::kForked : InsertResult::kInserted;  // kInserted: no refusal
}
}  // namespace
InsertResult ExactSet::insert(uint64_t key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (read_only_ || !valid() || seg_.owner_token() != token_)
    return refusal(read_only_, valid(), seg_.owner_token() != token_);
  SetView v = ExactSetOps::view(*this);
  return static_cast<InsertResult>(set_insert(v, key));
}
InsertResult ExactSet::insert(std::string_view key) noexcept { return insert(key_of(key)); }

template <class K>
uint64_t ExactSetOps::insert_batch(ExactSet& s, std::span<const K> keys, std::span<InsertResult> out) noexcept {
  size_t n = std::min(keys.size(), out.size());
  if (s.read_only_ || !s.valid() || s.seg_.owner_token() != s.token_) {
    std::fill(out.begin(), out.begin() + static_cast<long>(n),
              refusal(s.read_only_, s.valid(), s.seg_.owner_token() != s.token_));
    return 0;
  }
  SetView v = view(s);
  uint64_t inserted = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t key;
    if constexpr (std::is_same_v<K, uint64_t>)
      key = keys[i];
    else
      key = s.key_of(keys[i]);
    out[i] = static_cast<InsertResult>(set_insert(v, key));
    inserted += out[i] == InsertResult::kInserted;
  }
  return inserted;
}

uint64_t ExactSet::insert_many(std::span<const uint64_t> keys, std::span<InsertResult> out) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return ExactSetOps::insert_batch(*this, keys, out);
}
uint64_t ExactSet::insert_many(std::span<const std::string_view> keys, std::span<InsertResult> out) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return ExactSetOps::insert_batch(*this, keys, out);
}

bool ExactSet::contains(uint64_t key) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return false;
  SetView v = ExactSetOps::view(*this);
  return set_contains(v, key);
}
bool ExactSet::contains(std::string_view key) const noexcept { return contains(key_of(key)); }

uint64_t ExactSet::contains_many(std::span<const uint64_t> keys, std::span<uint8_t> out) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  size_t n = std::min(keys.size(), out.size());
  if (!valid()) {
    std::fill(out.begin(), out.begin() + static_cast<long>(n), uint8_t{0});
    return 0;
  }
  SetView v = ExactSetOps::view(*this);
  uint64_t present = 0;
  // Hash a block of keys and prefetch their home slots before probing.
  constexpr size_t kBlock = 16;
  uint64_t homes[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    size_t m = std::min(kBlock, n - base);
    for (size_t j = 0; j < m; ++j) {
      homes[j] = set_home(v.h, set_hash(v.h, keys[base + j]));
      __builtin_prefetch(&v.slots[homes[j]]);
    }
    for (size_t j = 0; j < m; ++j) {
      uint64_t k = keys[base + j];
      out[base + j] = is_special(k) ? set_contains(v, k) : set_find(v, k, homes[j]) != kNoSlot;
      present += out[base + j];
    }
  }
  return present;
}

uint64_t ExactSet::contains_many(std::span<const std::string_view> keys, std::span<uint8_t> out) const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  size_t n = std::min(keys.size(), out.size());
  std::vector<uint64_t> ks(n);
  for (size_t i = 0; i < n; ++i) ks[i] = key_of(keys[i]);
  return contains_many(std::span<const uint64_t>(ks), out.first(n));
}

bool ExactSet::erase(uint64_t key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (read_only_ || !valid() || seg_.owner_token() != token_) return false;
  SetView v = ExactSetOps::view(*this);
  return set_erase(v, key);
}
bool ExactSet::erase(std::string_view key) noexcept { return erase(key_of(key)); }

uint64_t ExactSet::size() const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return 0;
  SetView v = ExactSetOps::view(*this);
  return set_size(v);
}

uint64_t ExactSet::capacity() const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  return region_ ? header_of(region_)->capacity : 0;
}

ExactSetStats ExactSet::stats() const {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  SetView v = ExactSetOps::view(*this);
  ExactSetStats s;
  s.capacity = v.h->capacity;
  s.slots = v.h->slots;
  s.size = set_size(v);
  s.used_slots = std::min(v.h->slots, aref(v.h->used_hint).load(std::memory_order_relaxed));  // relaxed: a statistic
  s.stripes = v.h->stripes;
  s.max_load = v.h->max_load_ppm / 1e6;
  s.load = static_cast<double>(s.size) / static_cast<double>(s.slots);
  s.bytes = v.h->slots_offset + v.h->slots * sizeof(uint64_t);
  s.bytes_per_key_at_capacity = static_cast<double>(s.bytes) / static_cast<double>(s.capacity);
  s.seed = v.h->seed;
  return s;
}

namespace internal::exact_set {
namespace {

// Dead lock holders first: take over (replaying the intent) and release.
void check_dead_holders(Segment& seg, const SetView& v, bool repair, CheckScope& scope) {
  for (uint32_t i = 0; i < v.h->stripes; ++i) {
    ExactSetStripe& s = v.stripes[i];
    uint64_t owner = aref(s.lock).load();
    if (owner == 0 || seg.token_alive(owner)) continue;
    if (repair) {
      set_lock(v, s);  // takes over the dead token, replays the intent
      set_unlock(s);
    }
    scope.add("stripe " + std::to_string(i) + " locked by a dead process" +
                  (aref(s.intent_op).load() != kIntentNone || repair ? " (intent replayed)" : ""),
              repair);
  }
}

// Every key stored (slots, then the two special keys), per stripe counted, and the unreachable ones.
struct KeyScan {
  std::vector<uint64_t> counted;  // per stripe
  std::vector<uint64_t> keys;
  uint64_t unreachable = 0, example = 0;
};

// The n slots, walked circularly from an EMPTY one, then the two special keys.
KeyScan scan_keys(const SetView& v, uint64_t n, CheckScope& scope) {
  KeyScan ks;
  ks.counted.assign(v.h->stripes, 0);
  // Index of the nearest EMPTY at or before each position, walking circularly:
  // a key at i with home h is reachable iff no EMPTY lies in [h, i].
  // Find one EMPTY to start the circular walk from (there always is one).
  uint64_t start = n;
  for (uint64_t i = 0; i < n; ++i)
    if (aref(v.slots[i]).load() == kSlotEmpty) {
      start = i;
      break;
    }
  if (start == n) {
    scope.add("no EMPTY slot left: probe loops cannot terminate early");
    start = 0;
  }
  uint64_t last_empty = start;  // position (unwrapped) of the last EMPTY seen
  for (uint64_t step = 0; step < n; ++step) {
    uint64_t pos = start + step, i = pos % n;
    uint64_t w = aref(v.slots[i]).load();
    if (w == kSlotEmpty) {
      last_empty = pos;
      continue;
    }
    if (w == kSlotTomb) continue;
    uint64_t hash = set_hash(v.h, w), home = set_home(v.h, hash);
    // Unwrapped distance from home to i along the probe direction.
    uint64_t dist = (i + n - home) % n;
    if (pos - last_empty <= dist) {
      // An EMPTY lies in [home, i): the key cannot be found from its home.
      ++ks.unreachable;
      ks.example = w;
    }
    ks.keys.push_back(w);
    ++ks.counted[set_stripe(v.h, hash)];
  }
  for (uint32_t si = 0; si < 2; ++si)
    if (aref(v.h->special[si]).load() != 0) {
      uint64_t k = si == 0 ? kSlotEmpty : kSlotTomb;
      ++ks.counted[set_stripe(v.h, set_hash(v.h, k))];
      ks.keys.push_back(k);
    }
  return ks;
}

// Stripe i's keys, counted under its lock (held by the caller).
uint64_t recount_stripe(const SetView& v, uint64_t n, uint32_t i) {
  uint64_t exact = 0;
  for (uint64_t j = 0; j < n; ++j) {
    uint64_t w = aref(v.slots[j]).load();
    if (w != kSlotEmpty && w != kSlotTomb && set_stripe(v.h, set_hash(v.h, w)) == i) ++exact;
  }
  for (uint32_t si = 0; si < 2; ++si)
    if (aref(v.h->special[si]).load() != 0 && set_stripe(v.h, set_hash(v.h, si == 0 ? kSlotEmpty : kSlotTomb)) == i)
      ++exact;
  return exact;
}

// Per-stripe counts against the keys found; with repair, recounted under the stripe's lock.
void check_stripe_counts(const SetView& v, uint64_t n, const std::vector<uint64_t>& counted, bool repair,
                         CheckScope& scope) {
  uint64_t mismatched = 0;
  for (uint32_t i = 0; i < v.h->stripes; ++i) {
    ExactSetStripe& s = v.stripes[i];
    if (aref(s.lock).load() != 0) continue;  // in flux: a live writer holds it
    if (set_effective_count(v, s) == counted[i]) continue;
    if (!repair) {
      ++mismatched;
      continue;
    }
    // Recount this stripe's keys under its lock: nobody can add or remove
    // them meanwhile, so the stored count is exact even with writers running.
    set_lock(v, s);
    const uint64_t exact = recount_stripe(v, n, i);
    if (aref(s.count).load() != exact) {
      ++mismatched;
      aref(s.count).store(exact);
    }
    set_unlock(s);
  }
  if (mismatched != 0)
    scope.add(std::to_string(mismatched) + " stripes whose count differs from the keys stored (size() wrong)", repair);
}

}  // namespace

// Probe chains intact (every key reachable from its home slot: no EMPTY between
// home and the key), no key stored twice, per-stripe counts equal the keys
// found, no lock or intent left by a dead process. Exact on a quiescent set;
// while writers run, stripes whose lock is held are skipped.
void check_exact_set(Segment& seg, const RegionInfo& info, bool repair, CheckReport& report) {
  CheckScope scope = check_scope(info, report);
  std::byte* region = seg.base() + info.offset;
  if (!scope.validated([&] { validate(info, region, seg.size()); })) return;
  SetView v;
  v.h = header_of(region);
  v.stripes = reinterpret_cast<ExactSetStripe*>(region + v.h->stripes_offset);
  v.slots = reinterpret_cast<uint64_t*>(region + v.h->slots_offset);
  v.token = seg.owner_token();
  v.alive = &segment_alive;
  v.ctx = &seg;
  const uint64_t n = v.h->slots;

  check_dead_holders(seg, v, repair, scope);
  KeyScan ks = scan_keys(v, n, scope);
  if (ks.unreachable != 0)
    scope.add(std::to_string(ks.unreachable) + " keys unreachable from their home slot (e.g. " +
              std::to_string(ks.example) + "): the probe chain is broken");
  std::sort(ks.keys.begin(), ks.keys.end());
  uint64_t dups = 0;
  for (size_t i = 1; i < ks.keys.size(); ++i) dups += ks.keys[i] == ks.keys[i - 1];
  if (dups != 0) scope.add(std::to_string(dups) + " keys stored twice");
  check_stripe_counts(v, n, ks.counted, repair, scope);
  if (ks.keys.size() > v.h->capacity)
    scope.add(std::to_string(ks.keys.size()) + " keys exceed capacity " + std::to_string(v.h->capacity));
}

}  // namespace internal::exact_set
}  // namespace shmfilter
