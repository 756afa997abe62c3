// tests/unit/test_roaring_kernels.cpp: the Segment-free kernels of lib/structures/roaring/roaring_impl.h:
// the delta table across forked processes over an anonymous MAP_SHARED
// mapping, frozen-snapshot alignment, and portable-format validation.
#include <gtest/gtest.h>
#include <roaring/roaring.h>
#include <sys/mman.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "structures/roaring/roaring_impl.h"
#include "structures/roaring/roaring_containers.h"
#include "shmfilter/error.hpp"
#include "shmfilter/roaring_set.hpp"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter::internal::roaring;

namespace {

struct SharedMem {
  void* p = nullptr;
  size_t n = 0;
  explicit SharedMem(size_t bytes) : n(bytes) {
    p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = nullptr;
  }
  ~SharedMem() {
    if (p) munmap(p, n);
  }
};

std::string portable_of(const roaring_bitmap_t* b) {
  std::string s(roaring_bitmap_portable_size_in_bytes(b), '\0');
  roaring_bitmap_portable_serialize(b, s.data());
  return s;
}

}  // namespace

TEST(RoaringKernels, SlotWordRoundTrip) {
  for (uint32_t v : {0u, 1u, 65535u, 0xFFFFFFFFu}) {
    for (Op op : {Op::kAdd, Op::kRemove}) {
      uint64_t w = make_word(v, op);
      EXPECT_NE(w, 0u);
      EXPECT_TRUE(word_valid(w));
      EXPECT_EQ(word_value(w), v);
      EXPECT_EQ(word_op(w), op);
    }
  }
  EXPECT_FALSE(word_valid(uint64_t{5}));              // value without the claimed bit
  EXPECT_FALSE(word_valid(make_word(5, Op::kNone)));  // claimed without an op
}

TEST(RoaringKernels, DeltaLastWriterWinsAndFullBound) {
  const uint32_t cap = 256;
  std::vector<uint64_t> mem(delta_bytes(cap) / 8 + 8);
  auto* d = reinterpret_cast<DeltaHeader*>(mem.data());
  delta_init(d, cap);
  const uint64_t limit = cap * 9 / 10;
  EXPECT_EQ(delta_lookup(d, 7), Op::kNone);
  ASSERT_EQ(delta_write(d, 7, Op::kAdd, limit), WriteResult::kOk);
  EXPECT_EQ(delta_lookup(d, 7), Op::kAdd);
  ASSERT_EQ(delta_write(d, 7, Op::kRemove, limit), WriteResult::kOk);
  EXPECT_EQ(delta_lookup(d, 7), Op::kRemove);
  EXPECT_EQ(d->fill.load(), 1u);  // rewriting a value claims no new slot
  uint32_t v = 1000;
  while (d->fill.load() < limit) ASSERT_EQ(delta_write(d, v++, Op::kAdd, limit), WriteResult::kOk);
  EXPECT_EQ(delta_write(d, v, Op::kAdd, limit), WriteResult::kFull);  // new value past the bound
  EXPECT_EQ(delta_write(d, 7, Op::kAdd, limit), WriteResult::kOk);    // existing value still writable
  uint64_t claimed = 0;
  EXPECT_EQ(delta_validate(d, cap, &claimed), "");
  EXPECT_EQ(claimed, limit);
}

// Four processes write random adds/removes over a small value range into one
// delta table; each keeps its own log with the order it wrote. Values are
// partitioned by process so the final op of each value is known exactly.
TEST(RoaringKernels, DeltaAcrossProcessesExact) {
  const uint32_t cap = 1u << 14;
  SharedMem mem(delta_bytes(cap));
  ASSERT_NE(mem.p, nullptr);
  auto* d = static_cast<DeltaHeader*>(mem.p);
  delta_init(d, cap);
  const int kProcs = 4, kOps = 20000;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    pids.push_back(shmf_test::fork_child([&, p] {
      shmf_bench::Rng r(100 + p);
      for (int i = 0; i < kOps; ++i) {
        uint32_t v = static_cast<uint32_t>(r.below(2000)) * kProcs + p;
        if (delta_write(d, v, r.below(3) ? Op::kAdd : Op::kRemove, cap * 9 / 10) != WriteResult::kOk) return 3;
      }
      return 0;
    }));
  }
  for (pid_t pid : pids) ASSERT_TRUE(shmf_test::exited_ok(shmf_test::wait_status(pid)));
  // Oracle: replay each process's sequence.
  std::map<uint32_t, Op> want;
  for (int p = 0; p < kProcs; ++p) {
    shmf_bench::Rng r(100 + p);
    for (int i = 0; i < kOps; ++i) {
      uint32_t v = static_cast<uint32_t>(r.below(2000)) * kProcs + p;
      want[v] = r.below(3) ? Op::kAdd : Op::kRemove;
    }
  }
  for (const auto& [v, op] : want) ASSERT_EQ(delta_lookup(d, v), op) << "value " << v;
  uint64_t claimed = 0;
  EXPECT_EQ(delta_validate(d, cap, &claimed), "");
  EXPECT_EQ(claimed, want.size());
  EXPECT_EQ(d->fill.load(), want.size());
}

// Racing processes writing the SAME values: no value may be claimed twice.
TEST(RoaringKernels, DeltaConcurrentClaimsOfSameValue) {
  const uint32_t cap = 1u << 12;
  SharedMem mem(delta_bytes(cap));
  auto* d = static_cast<DeltaHeader*>(mem.p);
  delta_init(d, cap);
  std::vector<pid_t> pids;
  for (int p = 0; p < 4; ++p)
    pids.push_back(shmf_test::fork_child([&] {
      for (uint32_t v = 0; v < 3000; ++v)
        if (delta_write(d, v * 7919u, Op::kAdd, cap * 9 / 10) != WriteResult::kOk) return 3;
      return 0;
    }));
  for (pid_t pid : pids) ASSERT_TRUE(shmf_test::exited_ok(shmf_test::wait_status(pid)));
  uint64_t claimed = 0;
  EXPECT_EQ(delta_validate(d, cap, &claimed), "");
  EXPECT_EQ(claimed, 3000u);
}

TEST(RoaringKernels, DeltaValidateFindsDamage) {
  const uint32_t cap = 64;
  std::vector<uint64_t> mem(delta_bytes(cap) / 8);
  auto* d = reinterpret_cast<DeltaHeader*>(mem.data());
  delta_init(d, cap);
  delta_slots(d)[3].store(0xdeadull);  // no claimed bit
  EXPECT_NE(delta_validate(d, cap, nullptr).find("malformed"), std::string::npos);
  delta_slots(d)[3].store(0);
  uint32_t v = 12345;
  delta_slots(d)[(delta_home(v, cap) + 5) & (cap - 1)].store(make_word(v, Op::kAdd));  // off its probe path
  EXPECT_NE(delta_validate(d, cap, nullptr).find("unreachable"), std::string::npos);
  EXPECT_NE(delta_validate(d, 32, nullptr).find("capacity"), std::string::npos);  // 64 slots above a maximum of 32
}

TEST(RoaringKernels, PortableValidateAcceptsCRoaringOutput) {
  // Array, bitmap and run containers, with and without run-optimisation.
  roaring_bitmap_t* b = roaring_bitmap_create();
  roaring_bitmap_add_range(b, 0, 300000);
  for (uint32_t i = 0; i < 5000; ++i) roaring_bitmap_add(b, 1000000 + i * 3);  // bitmap container
  for (uint32_t i = 0; i < 100; ++i) roaring_bitmap_add(b, 4000000000u + i * 977);
  for (bool runs : {false, true}) {
    if (runs) roaring_bitmap_run_optimize(b);
    std::string s = portable_of(b);
    size_t used = 0;
    EXPECT_EQ(portable_validate(s.data(), s.size(), &used), "");
    EXPECT_EQ(used, s.size());
    roaring_bitmap_t* back = shmfilter::RoaringSet::parse_portable(s);
    EXPECT_TRUE(roaring_bitmap_equals(back, b));
    roaring_bitmap_free(back);
  }
  roaring_bitmap_free(b);
  roaring_bitmap_t* e = roaring_bitmap_create();
  std::string s = portable_of(e);
  EXPECT_EQ(portable_validate(s.data(), s.size(), nullptr), "");
  roaring_bitmap_free(e);
}

TEST(RoaringKernels, PortableRejectsTruncatedAndForeignInput) {
  roaring_bitmap_t* b = roaring_bitmap_create();
  roaring_bitmap_add_range(b, 0, 100000);
  for (uint32_t i = 0; i < 3000; ++i) roaring_bitmap_add(b, 7000000 + i * 11);
  roaring_bitmap_run_optimize(b);
  std::string s = portable_of(b);
  roaring_bitmap_free(b);
  // Every truncation is rejected with "truncated" (or "too short"), never parsed.
  for (size_t len = 0; len < s.size(); len += (len < 64 ? 1 : 97)) {
    try {
      roaring_bitmap_t* r = shmfilter::RoaringSet::parse_portable(std::string_view(s.data(), len));
      roaring_bitmap_free(r);
      ADD_FAILURE() << "accepted a truncation to " << len << " bytes";
    } catch (const shmfilter::Error& e) {
      EXPECT_EQ(e.code(), shmfilter::ErrorCode::kBadInput);
      std::string m = e.what();
      EXPECT_TRUE(m.find("truncated") != std::string::npos || m.find("too short") != std::string::npos) << m;
    }
  }
  auto expect_bad = [](std::string_view bytes, const char* needle) {
    try {
      roaring_bitmap_t* r = shmfilter::RoaringSet::parse_portable(bytes);
      roaring_bitmap_free(r);
      ADD_FAILURE() << "accepted bad input, wanted: " << needle;
    } catch (const shmfilter::Error& e) {
      EXPECT_EQ(e.code(), shmfilter::ErrorCode::kBadInput);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_bad("1\n2\n3\n", "not a Roaring portable serialization");
  expect_bad(s + "xx", "trailing bytes");
  // Unsorted keys: swap the first two key/cardinality records of a no-run serialization.
  roaring_bitmap_t* two = roaring_bitmap_create();
  roaring_bitmap_add(two, 5);
  roaring_bitmap_add(two, 70000);
  std::string t = portable_of(two);
  roaring_bitmap_free(two);
  ASSERT_EQ(t[0], static_cast<char>(12346 & 0xFF));
  std::swap(t[8], t[12]);
  std::swap(t[9], t[13]);
  expect_bad(t, "keys not increasing");
  // Random garbage behind a valid cookie: rejected, never a crash (fixed seed).
  shmf_bench::Rng r(7);
  int accepted = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string g(8 + r.below(3000), '\0');
    for (auto& c : g) c = static_cast<char>(r.next());
    uint32_t cookie = (i & 1) ? 12346u : (12347u | (static_cast<uint32_t>(r.below(8)) << 16));
    memcpy(g.data(), &cookie, 4);
    size_t used = 0;
    if (portable_validate(g.data(), g.size(), &used).empty() && used == g.size()) ++accepted;
  }
  EXPECT_EQ(accepted, 0);  // bound: random bytes essentially never form a complete valid bitmap
}

TEST(RoaringKernels, ParseValueRejectsWideIds) {
  EXPECT_EQ(shmfilter::RoaringSet::parse_value("4294967295"), 4294967295u);
  EXPECT_EQ(shmfilter::RoaringSet::parse_value("0"), 0u);
  for (const char* bad : {"4294967296", "18446744073709551616", "-1", "12x", "", "0x10"}) {
    try {
      shmfilter::RoaringSet::parse_value(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const shmfilter::Error& e) {
      EXPECT_EQ(e.code(), shmfilter::ErrorCode::kBadInput);
    }
  }
  try {
    shmfilter::RoaringSet::parse_value("4294967296");
  } catch (const shmfilter::Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit in 32 bits"), std::string::npos);
  }
}

// The delta sizing rule (layout version 2): cardinality / 16 rounded up to a
// power of two, from 64 to the set's maximum. Pinned: it decides memory and
// the amortised cost of a write (roaring_impl.h, next_delta_capacity).
TEST(RoaringKernels, NextDeltaCapacityFollowsTheSet) {
  EXPECT_EQ(next_delta_capacity(0, 1u << 24), 64u);
  EXPECT_EQ(next_delta_capacity(1024, 1u << 24), 64u);
  EXPECT_EQ(next_delta_capacity(1025 + 15, 1u << 24), 128u);
  EXPECT_EQ(next_delta_capacity(1000000, 1u << 24), 65536u);
  EXPECT_EQ(next_delta_capacity(120000000, 1u << 24), 1u << 23);
  EXPECT_EQ(next_delta_capacity(4000000000ull, 1u << 24), 1u << 24);
  EXPECT_EQ(next_delta_capacity(1000000, 1024), 1024u);
  EXPECT_EQ(next_delta_capacity(0, 64), 64u);
  // By cost: a 20 ms build at compact_at 0.5 wants 400,000 slots (100 ns per write amortised) ...
  EXPECT_EQ(next_delta_capacity(4000000, 1u << 24, 20000000, 500), 1u << 19);
  EXPECT_EQ(next_delta_capacity(1000000, 1u << 24, 20000000, 500), 1u << 18) << "capped at card / 4";
  // ... but never more than the set's own size, nor the maximum.
  EXPECT_EQ(next_delta_capacity(4000, 1u << 24, 20000000, 500), 1024u);
  EXPECT_EQ(next_delta_capacity(1000000, 1u << 16, 20000000, 500), 1u << 16);
  EXPECT_EQ(next_delta_capacity(1000000, 1u << 24, 1000, 500), 65536u) << "a cheap build keeps the card / 16 floor";
  // The floor is at most 64 slots a container (never below 65,536 for that):
  // dense 0..1e8 is 1,526 run containers, the mission's sparse 1.2e8 65,536 arrays.
  EXPECT_EQ(next_delta_capacity(100000000, 1u << 24, 0, 500, 1526), 1u << 17);
  EXPECT_EQ(next_delta_capacity(120000000, 1u << 24, 0, 500, 65536), 1u << 22);
  EXPECT_EQ(next_delta_capacity(1000000, 1u << 24, 0, 500, 16), 65536u) << "card / 16 = 62,500: below the 65,536 bound";
  EXPECT_EQ(next_delta_capacity(100000000, 1u << 24, 200000000, 500, 1526), 1u << 22) << "an expensive build still buys a larger delta";
}

// build_from_portable (what create_from and a merge build a snapshot with)
// copies CRoaring's containers as they are: the table answers exactly what
// CRoaring answers, for every container kind and for arrays whose values
// are far from uniform; the deep validation passes and sums the same
// cardinality; truncated bytes are refused, never read past.
TEST(RoaringKernels, BuildFromPortableAgreesWithCRoaring) {
  roaring_bitmap_t* b = roaring_bitmap_create();
  shmf_bench::Rng r(1616);
  for (uint32_t chunk = 0; chunk < 600; ++chunk) {
    const uint32_t base = chunk << 16;
    switch (chunk % 6) {
      case 0:  // uniform array, the mission's density
        for (int i = 0; i < 1830; ++i) roaring_bitmap_add(b, base + static_cast<uint32_t>(r.below(65536)));
        break;
      case 1:  // clustered array: all values in the top 1/64 of the chunk
        for (int i = 0; i < 900; ++i) roaring_bitmap_add(b, base + 64512 + static_cast<uint32_t>(r.below(1024)));
        break;
      case 2:  // bitmap
        for (int i = 0; i < 20000; ++i) roaring_bitmap_add(b, base + static_cast<uint32_t>(r.below(65536)));
        break;
      case 3:  // runs
        roaring_bitmap_add_range(b, base + 100, base + 5000);
        roaring_bitmap_add_range(b, base + 30000, base + 30001);
        roaring_bitmap_add_range(b, base + 65000, base + 65536);
        break;
      case 4:  // one value at each end
        roaring_bitmap_add(b, base);
        roaring_bitmap_add(b, base + 65535);
        break;
      default: break;  // absent chunk
    }
  }
  roaring_bitmap_run_optimize(b);
  std::string bytes(roaring_bitmap_portable_size_in_bytes(b), '\0');
  roaring_bitmap_portable_serialize(b, bytes.data());
  c4::Built built;
  ASSERT_TRUE(c4::build_from_portable(built, bytes.data(), bytes.size(), 7));
  ASSERT_EQ(built.packs.size(), 1u);
  EXPECT_EQ(built.packs[0].birth, 7u);
  EXPECT_EQ(built.cardinality, roaring_bitmap_get_cardinality(b));
  // Lay the pack and the table out as a segment would: [64 B | pack | table]
  // (offsets are what is aligned; lookups read through memcpy).
  const uint32_t nc = static_cast<uint32_t>(built.keys.size());
  const bool indexed = c4::table_indexed_for(nc);
  const uint64_t pack_bytes = built.pack.size() * 8, tb = c4::table_bytes(indexed, nc);
  std::vector<uint64_t> seg((64 + pack_bytes + tb) / 8 + 8);
  auto* base = reinterpret_cast<std::byte*>(seg.data());
  ASSERT_EQ(reinterpret_cast<uintptr_t>(base) % 8, 0u);
  const uint64_t at = 64;  // the pack's offset from the "segment" base: 64-aligned, as txn.allocate's
  std::memcpy(base + at, built.pack.data(), pack_bytes);
  c4::relocate(built, at);
  const uint64_t table_at = (at + pack_bytes + 7) & ~uint64_t{7};
  c4::table_image(built, base + table_at);
  const c4::Table t = c4::table_at(base + table_at, indexed, nc);
  uint64_t card = 0;
  ASSERT_EQ(c4::table_validate(base, seg.size() * 8, t, built.packs.data(), 1, true, &card), "");
  EXPECT_EQ(card, roaring_bitmap_get_cardinality(b));
  uint64_t checked = 0, present = 0;
  for (uint32_t chunk = 0; chunk < 602; ++chunk)
    for (uint32_t low = 0; low < 65536; low += (chunk % 6 == 2 ? 7 : 1)) {
      const uint32_t x = (chunk << 16) | low;
      const bool want = roaring_bitmap_contains(b, x);
      const uint64_t w = c4::table_word(t, static_cast<uint16_t>(chunk));
      ASSERT_EQ(w != 0 && c4::container_contains(base, w, static_cast<uint16_t>(low)), want)
          << "chunk " << chunk << " low " << low;
      ++checked;
      present += want;
    }
  EXPECT_GT(present, 1000000u);
  EXPECT_GT(checked, 30000000u);
  // The round trip: the table's portable bytes are CRoaring's bitmap again.
  const std::string back = c4::table_portable(base, t);
  roaring_bitmap_t* rb = roaring_bitmap_portable_deserialize_safe(back.data(), back.size());
  ASSERT_NE(rb, nullptr);
  EXPECT_TRUE(roaring_bitmap_equals(rb, b));
  roaring_bitmap_free(rb);
  // Every truncation is refused (never a read past the buffer: ASan would say).
  for (size_t cut : {size_t{0}, size_t{3}, size_t{9}, bytes.size() / 3, bytes.size() - 1}) {
    c4::Built partial;
    EXPECT_FALSE(c4::build_from_portable(partial, bytes.data(), cut, 1)) << cut;
  }
  roaring_bitmap_free(b);
}

// A scanner (reclaim's pins_meet) reads lo, hi, then gens[0..4], one word at
// a time, while the owner republishes. For every transition of a random
// sequence of live-generation sets, and every point at which the owner's
// whole publication can fall between two of the scanner's seven reads, every
// generation live before AND after must be seen. The old publication rewrote
// gens[] as a compacted list: when generation 3 of {3, 5, 7} died, a scanner
// that had read gens[0] = 3 went on to read {7, 0, 0, 0} and missed 5, whose
// snapshot and delta reclaim then freed under a live writer.
TEST(RoaringKernels, PinsNeverHideALiveGenerationFromAScan) {
  ReaderSlot slot{};
  PinMirror mirror;
  std::set<uint64_t> live;
  shmf_bench::Rng rng(16);
  uint64_t newest = 0;
  auto words = [&] {
    std::vector<uint64_t> w{slot.lo.load(), slot.hi.load()};
    for (auto& g : slot.gens) w.push_back(g.load());
    return w;
  };
  auto covers = [](const std::vector<uint64_t>& w, uint64_t g) {
    if (w[0] != 0 && w[0] <= g && g <= w[1]) return true;
    for (size_t k = 2; k < w.size(); ++k)
      if (w[k] == g) return true;
    return false;
  };
  auto publish = [&] {
    std::vector<uint64_t> v(live.begin(), live.end());
    pins_publish(slot, mirror, v.data(), v.size());
  };
  int transitions = 0, range_mode = 0;
  for (int step = 0; step < 20000; ++step) {
    const std::set<uint64_t> before_live = live;
    if (live.empty() || (live.size() < 9 && rng.below(2) == 0)) {
      // The owner's make_view: widen, then the new (newest) generation becomes live.
      uint64_t g = ++newest;
      uint64_t old_lo = slot.lo.load();
      slot.hi.store(UINT64_MAX);
      slot.lo.store(old_lo == 0 ? g : std::min(old_lo, g));
      live.insert(g);
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng.below(live.size())));
      live.erase(it);  // a View died (any generation, any order)
    }
    const std::vector<uint64_t> before = words();
    publish();
    const std::vector<uint64_t> after = words();
    range_mode += after[0] != 0;
    for (uint64_t g : before_live) {
      if (!live.count(g)) continue;
      ASSERT_TRUE(covers(after, g)) << "generation " << g << " live but not published";
      for (size_t split = 0; split <= before.size(); ++split) {
        std::vector<uint64_t> seen(before.begin(), before.begin() + static_cast<long>(split));
        seen.insert(seen.end(), after.begin() + static_cast<long>(split), after.end());
        ASSERT_TRUE(covers(seen, g)) << "a scan torn at word " << split << " missed live generation " << g
                                     << " (step " << step << ")";
      }
      ++transitions;
    }
  }
  EXPECT_GT(transitions, 10000);
  EXPECT_GT(range_mode, 100) << "the sequence must exercise range mode too";
  EXPECT_LT(range_mode, 19000) << "and exact mode";
}

// A fold sizes its buffers from the tables' fill counters, which are segment
// bytes: never more than the tables' validated capacities (a corrupt fill of
// 2^35 made a fold reserve 256 GiB: fuzz_segment found it in CI).
TEST(RoaringKernels, DeltaEntriesBoundTrustsOnlyTheCapacity) {
  std::vector<uint64_t> mem(2 * (delta_bytes(64) + delta_bytes(128)) / 8 + 16, 0);
  auto* a = reinterpret_cast<DeltaHeader*>(mem.data());
  auto* b = reinterpret_cast<DeltaHeader*>(reinterpret_cast<std::byte*>(mem.data()) + delta_bytes(64));
  delta_init(a, 64);
  delta_init(b, 128);
  for (uint32_t v = 0; v < 10; ++v) ASSERT_EQ(delta_write(a, v, Op::kAdd, 57), WriteResult::kOk);
  DeltaHeader* t[2] = {a, b};
  EXPECT_EQ(delta_entries_bound(t, 2), 10u);
  a->fill.store(uint64_t{1} << 35);
  b->fill.store(~uint64_t{0});
  EXPECT_EQ(delta_entries_bound(t, 2), 64u + 128u);
  EXPECT_EQ(delta_entries_bound(t, 0), 0u);
}
