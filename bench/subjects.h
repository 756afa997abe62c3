// bench/subjects.h: one uniform face per membership structure for the
// cross-structure benches (latency, scaling). Static dispatch: every bench
// loop is a template over the subject, so no virtual call is timed.
//
// A subject S offers
//   S::create(seg, name, n)   a structure sized for n keys (its own sizing rule)
//   S::open(seg, name)        the per-process handle
//   S::drop(seg, name)
//   present(i) / absent(i)    key number i of the "present" domain / a key never added
//   add, contains, erase, add_many, contains_many over uint64_t keys
//   bytes()                   region + extents in the segment
//   fill(lo, hi)              adds present(lo..hi-1) in batches
// Keys are the workload's 64-bit device ids (tests/support/workload.h distinct_keys /
// absent_keys domains). Roaring takes 32-bit ids: its present(i) is the i-th
// id of a sorted sparse sequence with gaps >= 2 over 2^32, absent(i) = present(i) + 1,
// so hits and misses are exact there too.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <roaring/roaring.h>

#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"
#include "workload.h"

namespace shmf_bench {

constexpr uint64_t kKeySeed = 7;
inline uint64_t present_key(uint64_t i) noexcept { return mix64((kKeySeed << 40) + i); }
inline uint64_t absent_key(uint64_t i) noexcept { return mix64((kKeySeed << 40) + (1ull << 39) + i); }

template <class Self>
struct U64Keys {
  static uint64_t present(uint64_t i) noexcept { return present_key(i); }
  static uint64_t absent(uint64_t i) noexcept { return absent_key(i); }
};

// Bloom, blocked layout (one cache line per key), 1% false positives, fixed size.
struct BloomSubject : U64Keys<BloomSubject> {
  static constexpr const char* kName = "Bloom blocked 1%";
  shmfilter::Bloom h;
  static uint64_t n_for_bytes(uint64_t b) { return static_cast<uint64_t>(static_cast<double>(b) / 1.2); }  // blocked 1%: 9.9 bits/key
  static void create(shmfilter::Segment& s, const std::string& name, uint64_t n) {
    shmfilter::BloomOptions o;
    o.capacity = n;
    o.error = 0.01;
    o.seed = 1;
    shmfilter::Bloom::create(s, name, o);
  }
  static BloomSubject open(shmfilter::Segment& s, const std::string& name) { return {{}, shmfilter::Bloom::open(s, name)}; }
  static void drop(shmfilter::Segment& s, const std::string& name) { shmfilter::Bloom::drop(s, name); }
  bool add(uint64_t k) noexcept { return h.add(k); }
  bool contains(uint64_t k) const noexcept { return h.contains(k); }
  bool erase(uint64_t) noexcept { return false; }  // a Bloom filter cannot delete
  static constexpr bool kErases = false;
  static constexpr bool kBatches = true;
  void add_many(std::span<const uint64_t> k, std::span<uint8_t> out) noexcept { h.add_many(k, out); }
  void contains_many(std::span<const uint64_t> k, std::span<uint8_t> out) const noexcept { h.contains_many(k, out); }
  uint64_t bytes() const { return h.stats().memory_bytes; }
};

// Cuckoo, 12-bit fingerprints (packed 12-bit lanes, layout 3), bucket 4, no expansion.
struct CuckooSubject : U64Keys<CuckooSubject> {
  static constexpr const char* kName = "Cuckoo f=12";
  shmfilter::Cuckoo h;
  // Buckets of 6 bytes (f = 12: layout 3's packed 12-bit lanes) in chunks of 2^16: ~b bytes at 95%.
  static uint64_t n_for_bytes(uint64_t b) { return static_cast<uint64_t>(static_cast<double>(b / 6) * 4 * 0.95); }
  static void create(shmfilter::Segment& s, const std::string& name, uint64_t n) {
    shmfilter::CuckooOptions o;
    o.capacity = n;
    o.fingerprint_bits = 12;
    o.seed = 1;
    shmfilter::Cuckoo::create(s, name, o);
  }
  static CuckooSubject open(shmfilter::Segment& s, const std::string& name) { return {{}, shmfilter::Cuckoo::open(s, name)}; }
  static void drop(shmfilter::Segment& s, const std::string& name) { shmfilter::Cuckoo::drop(s, name); }
  bool add(uint64_t k) noexcept { return h.add(k) == shmfilter::CuckooStatus::kInserted; }
  bool contains(uint64_t k) const noexcept { return h.contains(k); }
  bool erase(uint64_t k) noexcept { return h.erase(k); }
  static constexpr bool kErases = true;
  static constexpr bool kBatches = true;
  void add_many(std::span<const uint64_t> k, std::span<uint8_t>) noexcept { h.add_many(k); }
  void contains_many(std::span<const uint64_t> k, std::span<uint8_t> out) const noexcept { h.contains_many(k, out); }
  uint64_t bytes() const { return h.stats().bytes; }
};

// Exact set of 64-bit keys, max load 0.8.
struct ExactSubject : U64Keys<ExactSubject> {
  static constexpr const char* kName = "ExactSet";
  shmfilter::ExactSet h;
  static uint64_t n_for_bytes(uint64_t b) { return b / 10 + 1; }  // 8 bytes / max load 0.8
  static void create(shmfilter::Segment& s, const std::string& name, uint64_t n) {
    shmfilter::ExactSetOptions o;
    o.capacity = n;
    shmfilter::ExactSet::create(s, name, o);
  }
  static ExactSubject open(shmfilter::Segment& s, const std::string& name) { return {{}, shmfilter::ExactSet::open(s, name)}; }
  static void drop(shmfilter::Segment& s, const std::string& name) { shmfilter::ExactSet::drop(s, name); }
  bool add(uint64_t k) noexcept { return h.insert(k) == shmfilter::InsertResult::kInserted; }
  bool contains(uint64_t k) const noexcept { return h.contains(k); }
  bool erase(uint64_t k) noexcept { return h.erase(k); }
  static constexpr bool kErases = true;
  static constexpr bool kBatches = true;
  void add_many(std::span<const uint64_t> k, std::span<uint8_t>) noexcept {
    std::array<shmfilter::InsertResult, 64> r;
    for (size_t i = 0; i < k.size(); i += 64) {
      const size_t m = std::min<size_t>(64, k.size() - i);
      h.insert_many(k.subspan(i, m), std::span(r.data(), m));
    }
  }
  void contains_many(std::span<const uint64_t> k, std::span<uint8_t> out) const noexcept { h.contains_many(k, out); }
  uint64_t bytes() const { return h.stats().bytes; }
};

// Roaring set of 32-bit ids (CRoaring frozen snapshot + lock-free delta), default options.
// present(i): sorted sparse ids, gaps in [2, 2 * mean_gap]; absent(i) = present(i) + 1.
struct RoaringSubject {
  static constexpr const char* kName = "Roaring sparse";
  shmfilter::RoaringSet h;
  // Array containers: 2 bytes per id, and the set's size grows with its ids: the benches
  // fill 70% of n, so n is sized for b bytes at 70% (plus 5% for container headers).
  static uint64_t n_for_bytes(uint64_t b) { return static_cast<uint64_t>(static_cast<double>(b) / 2 / 0.7 * 1.05) + 1; }
  static inline std::vector<uint32_t> ids;  // present(i) = ids[i]; made by create() (forked children inherit it)
  static uint64_t present(uint64_t i) noexcept { return ids[i % ids.size()]; }
  static uint64_t absent(uint64_t i) noexcept { return ids[i % ids.size()] + 1u; }
  static void make_ids(uint64_t n) {
    ids.resize(n);
    const uint64_t gap = std::max<uint64_t>(4, (1ull << 32) / (n + 1));  // mean gap ~ 2^32 / n
    Rng r(99);
    uint64_t v = 0;
    for (uint64_t i = 0; i < n; ++i) {
      v += 2 + r.below(2 * gap - 3);
      ids[i] = static_cast<uint32_t>(std::min<uint64_t>(v, 0xfffffffeull));
    }
  }
  // The set starts empty; fill() adds. Ids are an index into `ids`, so n is also their number.
  static void create(shmfilter::Segment& s, const std::string& name, uint64_t n) {
    if (ids.size() != n) make_ids(n);
    shmfilter::RoaringSet::create(s, name);
  }
  static RoaringSubject open(shmfilter::Segment& s, const std::string& name) {
    return {shmfilter::RoaringSet::open(s, name)};
  }
  static void drop(shmfilter::Segment& s, const std::string& name) { shmfilter::RoaringSet::drop(s, name); }
  bool add(uint64_t k) noexcept { return h.add(static_cast<uint32_t>(k)) == shmfilter::RoaringStatus::kOk; }
  bool contains(uint64_t k) const noexcept { return h.contains(static_cast<uint32_t>(k)); }
  bool erase(uint64_t k) noexcept { return h.remove(static_cast<uint32_t>(k)) == shmfilter::RoaringStatus::kOk; }
  static constexpr bool kErases = true;
  static constexpr bool kBatches = true;
  void add_many(std::span<const uint64_t> k, std::span<uint8_t>) noexcept { h.add_many(k); }
  void contains_many(std::span<const uint64_t> k, std::span<uint8_t> out) const noexcept { h.contains_many(k, out); }
  uint64_t bytes() const { return h.stats().total_bytes; }
};

// Adds present(lo..hi-1). Roaring: a bulk merge of a process-local bitmap (one
// compaction), as a loader would; the others: add_many in chunks.
template <class S>
void fill(S& s, uint64_t lo, uint64_t hi) {
  if constexpr (std::is_same_v<S, RoaringSubject>) {
    roaring_bitmap_t* b = roaring_bitmap_create();
    roaring_bitmap_add_many(b, hi - lo, RoaringSubject::ids.data() + lo);  // sorted: appends
    s.h.merge(b);
    roaring_bitmap_free(b);
    return;
  }
  std::vector<uint64_t> k(4096);
  std::vector<uint8_t> out(4096);
  for (uint64_t i = lo; i < hi;) {
    const uint64_t m = std::min<uint64_t>(k.size(), hi - i);
    for (uint64_t j = 0; j < m; ++j) k[j] = S::present(i + j);
    s.add_many(std::span<const uint64_t>(k.data(), m), std::span<uint8_t>(out.data(), m));
    i += m;
  }
}

}  // namespace shmf_bench
