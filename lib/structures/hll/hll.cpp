// lib/structures/hll/hll.cpp: the Hll handle over lib/structures/hll/hll_impl.h kernels. See hll.hpp.
#include "shmfilter/hll.hpp"

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstring>

#include "structures/hll/hll_impl.h"
#include "structures/region_handle.h"
#include "base/kill_point.h"

static_assert(offsetof(shmfilter::internal::hll::HllHeader, magic) == 0 && offsetof(shmfilter::internal::hll::HllHeader, version) == 4,
              "check_prefix (region_handle.h) reads the magic at byte 0 and the layout version at byte 4");

namespace shmfilter {

using namespace internal::hll;

namespace {

HllHeader* header_of(std::byte* region) { return reinterpret_cast<HllHeader*>(region); }
HllCountSync* sync_of(std::byte* region) { return &header_of(region)->sync; }

// Validates a region's header; throws kCorrupt naming what is wrong.
void validate(const RegionInfo& info, std::byte* region, uint64_t segment_size) {
  internal::validate_prefix(info, region, kHllRegionBytes, segment_size, kMagic, kLayoutVersion);
  const HllHeader* h = header_of(region);
  if (h->precision != kHllP || h->register_bits != kHllBits || h->registers_per_word != kHllPerWord ||
      h->words != kHllWords || h->registers_offset != sizeof(HllHeader) || h->hash_seed != kRedisHllSeed)
    throw internal::corrupt_error(info.kind, info.name, "parameters are not p=14, 6-bit, 10 per word");
}

void init_header(std::byte* region) {
  HllHeader* h = header_of(region);
  h->magic = kMagic;
  h->version = kLayoutVersion;
  h->precision = kHllP;
  h->register_bits = kHllBits;
  h->registers_per_word = kHllPerWord;
  h->words = kHllWords;
  h->hash_seed = kRedisHllSeed;
  h->registers_offset = sizeof(HllHeader);
  h->clear_token = 0;
  h->reserved[0] = h->reserved[1] = 0;
  h->sync = HllCountSync{};
}

void zero_words(uint64_t* words) {
  for (uint32_t i = 0; i < kHllWords; ++i)
    std::atomic_ref<uint64_t>(words[i]).store(0, std::memory_order_relaxed);  // relaxed: clear_token (seq_cst) brackets it
}

}  // namespace

Hll Hll::create(Segment& seg, std::string_view name, const HllOptions&) {
  seg.create_region(name, Kind::kHll, kHllRegionBytes,
                    [](std::byte* region, uint64_t, ControlTxn&) { init_header(region); });
  return open(seg, name);
}

Hll Hll::open(Segment& seg, std::string_view name) {
  const ReadGuard in_call(seg);  // docs/CONCURRENCY.md "Reader announcements"
  Hll h;
  RegionInfo info = h.bind(seg, name, Kind::kHll);
  validate(info, h.region_, seg.size());
  h.words_ = reinterpret_cast<uint64_t*>(h.region_ + sizeof(HllHeader));
  return h;
}

Hll Hll::open_or_create(Segment& seg, std::string_view name) {
  for (int attempt = 0;; ++attempt) {
    try {
      return open(seg, name);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kNotFound || attempt > 3) throw;
    }
    try {
      return create(seg, name);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kExists) throw;
    }
  }
}

bool Hll::drop(Segment& seg, std::string_view name) { return drop_region(seg, name, Kind::kHll); }

bool Hll::add(std::string_view key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (read_only_ || !valid()) return false;  // read-only attachment: nothing changed
  uint32_t idx;
  uint8_t rank;
  hll_index_rank(murmur64a(key.data(), key.size(), kRedisHllSeed), idx, rank);
  return hll_update(words_, idx, rank, sync_of(region_));
}

bool Hll::add(uint64_t key) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (read_only_ || !valid()) return false;
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(key >> (8 * i));
  uint32_t idx;
  uint8_t rank;
  hll_index_rank(murmur64a(le, 8, kRedisHllSeed), idx, rank);
  return hll_update(words_, idx, rank, sync_of(region_));
}

uint64_t Hll::add_many(std::span<const uint64_t> keys) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (read_only_ || !valid()) return 0;
  HllCountSync* sync = sync_of(region_);
  uint64_t grew = 0;
  for (uint64_t k : keys) {
    uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(k >> (8 * i));
    uint32_t idx;
    uint8_t rank;
    hll_index_rank(murmur64a(le, 8, kRedisHllSeed), idx, rank);
    grew += hll_update(words_, idx, rank, sync);
  }
  return grew;
}

uint64_t Hll::add_many(std::span<const std::string_view> keys) noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (read_only_ || !valid()) return 0;
  HllCountSync* sync = sync_of(region_);
  uint64_t grew = 0;
  for (auto k : keys) {
    uint32_t idx;
    uint8_t rank;
    hll_index_rank(murmur64a(k.data(), k.size(), kRedisHllSeed), idx, rank);
    grew += hll_update(words_, idx, rank, sync);
  }
  return grew;
}

uint64_t Hll::count() const noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (!valid()) return 0;
  if (read_only_) return hll_estimate_words(words_);  // the cache is a write: compute it
  return hll_count_cached(sync_of(region_), words_);
}

void Hll::clear() noexcept {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  if (read_only_ || !valid()) return;  // read-only attachment: nothing changed
  auto* h = header_of(region_);
  std::atomic_ref<uint64_t>(h->clear_token).store(seg_.owner_token());  // seq_cst: before any zeroing
  hll_change_begin(&h->sync);  // the zeroing is a register change: the count cache's bracket
  SHMF_KILL_POINT("hll.clear.after_token");
  zero_words(words_);
  SHMF_KILL_POINT("hll.clear.after_zero");
  std::atomic_ref<uint64_t>(h->sync.count_cache).store(0);  // seq_cst: no pre-clear estimate survives
  hll_change_end(&h->sync);
  std::atomic_ref<uint64_t>(h->clear_token).store(0);  // seq_cst: after all zeroing
}

void Hll::merge_from(std::span<const Hll> sources) {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  if (read_only_) internal::throw_read_only(kind_, name_, "changing it");
  for (const Hll& s : sources) {
    const ReadGuard source_in_call(s.seg_);  // it may be another attachment's
    s.require_valid();
    for (uint32_t wi = 0; wi < kHllWords; ++wi) {
      uint64_t w = std::atomic_ref<uint64_t>(s.words_[wi]).load(std::memory_order_relaxed);  // relaxed: see hll_update
      hll_max_word(words_, wi, w, sync_of(region_));
      if (wi == kHllWords / 2) SHMF_KILL_POINT("hll.merge.midway");
    }
  }
}

uint64_t Hll::count_union(std::span<const Hll> hlls) {
  if (hlls.empty()) throw Error(ErrorCode::kInvalidArgument, "count_union of no HLLs: pass at least one");
  uint8_t acc[kHllRegisters] = {0}, regs[kHllRegisters];
  for (const Hll& h : hlls) {
    const ReadGuard in_call(h.seg_);  // docs/CONCURRENCY.md "Reader announcements"
    h.require_valid();
    hll_read_registers(h.words_, regs);
    for (uint32_t i = 0; i < kHllRegisters; ++i) acc[i] = std::max(acc[i], regs[i]);
  }
  return hll_estimate(acc);
}

std::vector<uint8_t> Hll::registers() const {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  std::vector<uint8_t> out(kHllRegisters);
  hll_read_registers(words_, out.data());
  return out;
}

std::string Hll::export_redis() const {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  uint8_t regs[kHllRegisters];
  hll_read_registers(words_, regs);
  return hll_redis_encode_dense(regs);
}

void Hll::import_redis(std::string_view bytes) {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  if (read_only_) internal::throw_read_only(kind_, name_, "changing it");
  uint8_t regs[kHllRegisters];
  std::string err = hll_redis_decode(bytes, regs);
  if (!err.empty()) throw Error(ErrorCode::kBadInput, err);
  for (uint32_t wi = 0; wi < kHllWords; ++wi) hll_max_word(words_, wi, hll_pack_word(regs, wi), sync_of(region_));
}

uint64_t Hll::count_redis(std::string_view bytes) {
  uint8_t regs[kHllRegisters];
  std::string err = hll_redis_decode(bytes, regs);
  if (!err.empty()) throw Error(ErrorCode::kBadInput, err);
  return hll_estimate(regs);
}

HllStats Hll::stats() const {
  const ReadGuard in_call(seg_);  // docs/CONCURRENCY.md "Reader announcements"
  require_valid();
  uint8_t regs[kHllRegisters];
  hll_read_registers(words_, regs);
  HllStats s;
  s.estimate = hll_estimate(regs);
  s.registers = kHllRegisters;
  for (uint32_t i = 0; i < kHllRegisters; ++i) {
    s.nonzero_registers += regs[i] != 0;
    s.max_register = std::max<uint32_t>(s.max_register, regs[i]);
  }
  s.bytes = kHllRegionBytes;
  const HllCountSync* sync = sync_of(region_);
  const uint64_t e = std::atomic_ref<const uint64_t>(sync->ends).load(std::memory_order_acquire);
  const uint64_t b = std::atomic_ref<const uint64_t>(sync->begins).load(std::memory_order_acquire);
  s.changes_in_flight = b >= e ? b - e : 0;
  s.count_cached = hll_cache_current(sync);
  s.standard_error = 1.04 / std::sqrt(static_cast<double>(kHllRegisters));
  return s;
}

namespace internal::hll {

// Registers <= 51, the 4 spare bits of every word zero, no clear left half done.
void check_hll(Segment& seg, const RegionInfo& info, bool repair, CheckReport& report) {
  CheckScope scope = check_scope(info, report);
  std::byte* region = seg.base() + info.offset;
  if (!scope.validated([&] { validate(info, region, seg.size()); })) return;
  auto* h = header_of(region);
  auto* words = reinterpret_cast<uint64_t*>(region + sizeof(HllHeader));
  uint64_t bad = 0;
  for (uint32_t wi = 0; wi < kHllWords; ++wi) {
    std::atomic_ref<uint64_t> w(words[wi]);
    uint64_t v = w.load(std::memory_order_relaxed);  // relaxed: see hll_update
    bool wrong = (v & ~kHllWordMask) != 0;
    for (uint32_t s = 0; s < kHllPerWord; ++s) wrong |= hll_field(v, s) > kHllMaxRank;
    if (wi == kHllWords - 1) wrong |= (v >> ((kHllRegisters - wi * kHllPerWord) * kHllBits)) != 0;
    if (!wrong) continue;
    ++bad;
    if (repair) {
      // Clamp each field to 51 and clear the spare bits: keeps every rank that could be real.
      uint64_t fixed = 0;
      for (uint32_t s = 0; s < kHllPerWord && wi * kHllPerWord + s < kHllRegisters; ++s)
        fixed |= static_cast<uint64_t>(std::min<uint8_t>(hll_field(v, s), kHllMaxRank)) << (s * kHllBits);
      w.compare_exchange_strong(v, fixed, std::memory_order_relaxed);  // relaxed: see hll_update; a lost race is left for the next check
    }
  }
  if (bad != 0) scope.add(std::to_string(bad) + " register words hold a register > 51 or stray bits", repair);
  // Count-cache counters: unequal while an add runs, or forever after a writer died
  // inside its bracket (the cache is then off; counts stay exact). Not a finding
  // without --repair (a running add looks the same); --repair resynchronises them,
  // meant for a quiet HLL: a change still running then leaves them unequal again
  // (cache off, never wrong) until the next repair. docs/hll.md "Count cache".
  {
    std::atomic_ref<uint64_t> begins(h->sync.begins), ends(h->sync.ends);
    const uint64_t e = ends.load(), b = begins.load();
    if (repair && e != b) {
      ends.store(b);
      std::atomic_ref<uint64_t>(h->sync.count_cache).store(0);
      scope.add("count cache off (change counters " + std::to_string(b) + " begun, " + std::to_string(e) +
                    " ended: a process died inside an add, or one was running): counters resynchronised",
                true);
    }
  }
  uint64_t token = std::atomic_ref<uint64_t>(h->clear_token).load();
  if (token != 0 && !seg.token_alive(token)) {
    // Repair only forgets the token: zeroing now could wipe adds acknowledged
    // since the crash. The HLL is valid either way; rerun clear() if wanted.
    if (repair) std::atomic_ref<uint64_t>(h->clear_token).store(0);
    scope.add("a clear() was interrupted by the death of its process (registers partly cleared): run "
              "'shmtool hll clear' again if the clear is still wanted",
              repair);
  }
}

}  // namespace internal::hll
}  // namespace shmfilter
