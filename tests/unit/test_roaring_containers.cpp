// tests/unit/test_roaring_containers.cpp: layout 4's container kernels
// (lib/structures/roaring/roaring_containers.h) over a process-local stand-in for a
// segment: full and incremental builds against a CRoaring oracle, sharing of
// untouched containers, pack accounting and repacking, the portable
// serialization, and validation of corrupt words and directories.
#include <gtest/gtest.h>
#include <roaring/roaring.h>

#include <map>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "structures/roaring/roaring_containers.h"
#include "structures/roaring/roaring_impl.h"

using namespace shmfilter::internal::roaring::c4;

namespace {

// A bump allocator over 64-aligned memory standing in for the segment.
struct FakeSeg {
  uint64_t size;
  std::unique_ptr<std::byte[]> mem;
  uint64_t top = 64;
  explicit FakeSeg(uint64_t bytes) : size(bytes), mem(new (std::align_val_t(64)) std::byte[bytes]()) {}
  ~FakeSeg() { ::operator delete[](mem.release(), std::align_val_t(64)); }
  std::byte* base() const { return mem.get(); }
  uint64_t alloc(uint64_t bytes) {
    uint64_t at = top;
    top += (bytes + 63) / 64 * 64 + 64;  // a 64 B gap, as the segment's extent header
    if (top > size) throw std::runtime_error("FakeSeg full");
    return at;
  }
};

struct Snap {
  Table t;
  std::vector<PackRef> packs;
  uint64_t card = 0;
  uint64_t gen = 0;
};

// What a compaction's transaction will do: allocate the pack and the table, copy them in.
Snap publish(FakeSeg& s, Built& b, uint64_t gen) {
  Snap out;
  if (!b.pack.empty()) {
    uint64_t off = s.alloc(b.pack.size() * 8);
    relocate(b, off);
    std::memcpy(s.base() + off, b.pack.data(), b.pack.size() * 8);
  }
  const uint32_t n = static_cast<uint32_t>(b.keys.size());
  const bool indexed = table_indexed_for(n);
  uint64_t toff = s.alloc(std::max<uint64_t>(8, table_bytes(indexed, n)));
  table_image(b, s.base() + toff);
  out.t = table_at(s.base() + toff, indexed, n);
  out.packs = b.packs;
  out.card = b.cardinality;
  out.gen = gen;
  return out;
}

// Mixed shapes: a dense range (runs), a few crowded chunks (bitmaps), sparse ids (arrays).
roaring_bitmap_t* mixed(std::mt19937_64& rng, uint32_t sparse) {
  roaring_bitmap_t* b = roaring_bitmap_create();
  roaring_bitmap_add_range(b, 5u << 16, (7u << 16) + 123);
  for (uint32_t k : {20u, 21u, 4000u})
    for (int i = 0; i < 9000; ++i) roaring_bitmap_add(b, k << 16 | static_cast<uint32_t>(rng() & 0xffff));
  for (uint32_t i = 0; i < sparse; ++i) roaring_bitmap_add(b, static_cast<uint32_t>(rng()));
  return b;
}

std::vector<uint32_t> values_of(const roaring_bitmap_t* b) {
  std::vector<uint32_t> v(roaring_bitmap_get_cardinality(b));
  roaring_bitmap_to_uint32_array(b, v.data());
  return v;
}

bool snap_contains(const FakeSeg& s, const Snap& sn, uint32_t v) {
  uint64_t w = table_word(sn.t, static_cast<uint16_t>(v >> 16));
  return w != 0 && container_contains(s.base(), w, static_cast<uint16_t>(v));
}

void expect_equal(const FakeSeg& s, const Snap& sn, const roaring_bitmap_t* oracle, std::mt19937_64& rng,
                  bool every_value = true) {
  uint64_t card = 0;
  ASSERT_EQ(table_validate(s.base(), s.size, sn.t, sn.packs.data(), static_cast<uint32_t>(sn.packs.size()), true, &card), "");
  ASSERT_EQ(card, roaring_bitmap_get_cardinality(oracle));
  ASSERT_EQ(sn.card, card);
  if (every_value) {
    for (uint32_t v : values_of(oracle)) ASSERT_TRUE(snap_contains(s, sn, v)) << v;
  }
  for (int i = 0; i < 20000; ++i) {
    uint32_t v = static_cast<uint32_t>(rng());
    ASSERT_EQ(snap_contains(s, sn, v), roaring_bitmap_contains(oracle, v)) << v;
  }
  std::string bytes = table_portable(s.base(), sn.t);
  size_t consumed = 0;
  ASSERT_EQ(shmfilter::internal::roaring::portable_validate(bytes.data(), bytes.size(), &consumed), "");
  EXPECT_EQ(consumed, bytes.size());
  roaring_bitmap_t* back = roaring_bitmap_portable_deserialize_safe(bytes.data(), bytes.size());
  ASSERT_NE(back, nullptr);
  EXPECT_TRUE(roaring_bitmap_equals(back, oracle));
  roaring_bitmap_free(back);
}

}  // namespace

TEST(RoaringContainers, WordFieldsRoundTripAndBounds) {
  for (uint32_t type : {kArray, kBitmap, kRun})
    for (uint32_t count : {1u, 4096u, 4097u, 32768u, 65536u})
      for (uint64_t off : {uint64_t{64}, uint64_t{8} << 30, kMaxOffset & ~uint64_t{63}}) {
        uint64_t w = cw_make(type, count, off);
        EXPECT_EQ(cw_type(w), type);
        EXPECT_EQ(cw_count(w), count);
        EXPECT_EQ(cw_off(w), off);
      }
  EXPECT_EQ(cw_bytes(cw_make(kArray, 4097, 64)), 0u);   // an array holds <= 4096 values
  EXPECT_EQ(cw_bytes(cw_make(kBitmap, 4096, 64)), 0u);  // a bitmap holds > 4096
  EXPECT_EQ(cw_bytes(cw_make(kRun, 32769, 64)), 0u);    // a chunk has <= 32768 runs
  EXPECT_EQ(cw_bytes(cw_make(kNone, 1, 64)), 0u);
  EXPECT_TRUE(cw_ok(cw_make(kArray, 10, 64), 84));
  EXPECT_FALSE(cw_ok(cw_make(kArray, 10, 64), 83));      // one byte short
  EXPECT_FALSE(cw_ok(cw_make(kBitmap, 5000, 72), 1 << 20));  // a bitmap is 64-aligned
  EXPECT_FALSE(cw_ok(cw_make(kArray, 1, 0), 1 << 20));   // offset 0 is the segment header
}

TEST(RoaringContainers, EncodeChoosesTheSmallestContainer) {
  Built b;
  std::vector<uint16_t> v(100);
  for (int i = 0; i < 100; ++i) v[i] = static_cast<uint16_t>(i * 3);
  EXPECT_EQ(cw_type(encode_chunk(b, v.data(), 100)), kArray);  // 200 B < 400 B of runs
  for (int i = 0; i < 100; ++i) v[i] = static_cast<uint16_t>(1000 + i);
  uint64_t w = encode_chunk(b, v.data(), 100);
  EXPECT_EQ(cw_type(w), kRun);  // one run: 4 B
  EXPECT_EQ(cw_count(w), 1u);
  std::vector<uint16_t> big(5000);
  for (int i = 0; i < 5000; ++i) big[i] = static_cast<uint16_t>(i * 13);
  w = encode_chunk(b, big.data(), 5000);
  EXPECT_EQ(cw_type(w), kBitmap);
  EXPECT_EQ(cw_off(w) % 64, 0u);
  EXPECT_EQ(encode_chunk(b, nullptr, 0), 0u);
}

TEST(RoaringContainers, FullBuildMatchesCRoaring) {
  std::mt19937_64 rng(41);
  roaring_bitmap_t* o = mixed(rng, 30000);
  std::vector<uint32_t> vals = values_of(o);
  FakeSeg s(64 << 20);
  Built b;
  build_full(b, vals.data(), vals.size(), 1);
  EXPECT_EQ(b.rebuilt, roaring_bitmap_get_cardinality(o) ? b.keys.size() : 0);
  Snap sn = publish(s, b, 1);
  EXPECT_TRUE(sn.t.indexed);  // >= 512 containers
  expect_equal(s, sn, o, rng);
  roaring_bitmap_free(o);
}

TEST(RoaringContainers, SmallSetsUseASortedTableOfAFewBytes) {
  FakeSeg s(1 << 20);
  Built b;
  build_full(b, nullptr, 0, 1);
  EXPECT_TRUE(b.pack.empty());
  EXPECT_TRUE(b.packs.empty());
  EXPECT_EQ(table_bytes(table_indexed_for(0), 0), 0u);  // an empty set: no table, no pack
  std::vector<uint32_t> vals = {7, 70000, 1u << 31, 0xFFFFFFFFu};
  build_full(b, vals.data(), vals.size(), 1);
  EXPECT_EQ(b.keys.size(), 4u);
  EXPECT_FALSE(table_indexed_for(4));
  EXPECT_EQ(table_bytes(false, 4), 8u + 32u);  // 4 keys, 4 words
  EXPECT_EQ(b.pack.size() * 8, 32u);           // four one-value arrays, 8 B each
  Snap sn = publish(s, b, 1);
  roaring_bitmap_t* o = roaring_bitmap_of_ptr(vals.size(), vals.data());
  std::mt19937_64 rng(3);
  expect_equal(s, sn, o, rng);
  EXPECT_FALSE(snap_contains(s, sn, 8));
  roaring_bitmap_free(o);
}

// Generations of compactions, each touching a few chunks (adds and removes,
// also emptying chunks and creating new ones): every generation equals the
// CRoaring oracle, untouched containers keep their exact words (shared
// bytes), dropped packs are referenced by no word of the new table, kept old
// packs stay at least half live, and the directory stays within kMaxPacks.
TEST(RoaringContainers, IncrementalBuildsShareUntouchedContainers) {
  std::mt19937_64 rng(7);
  roaring_bitmap_t* o = mixed(rng, 60000);
  FakeSeg s(512 << 20);
  Built b;
  std::vector<uint32_t> vals = values_of(o);
  build_full(b, vals.data(), vals.size(), 1);
  Snap sn = publish(s, b, 1);
  uint64_t drops = 0;  // packs dropped (repacked or emptied): the directory bound binds after 63 compactions
  for (uint64_t gen = 2; gen <= 120; ++gen) {
    // Touch 1..40 chunks: a few ops each, sometimes clearing a whole chunk.
    std::map<uint32_t, bool> ops;  // value -> remove
    const uint32_t chunks = 1 + static_cast<uint32_t>(rng() % 40);
    std::set<uint16_t> touched;
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint16_t key = static_cast<uint16_t>(rng() % 8 == 0 ? 20 : rng());
      touched.insert(key);
      if (rng() % 16 == 0) {
        roaring_bitmap_t* r = roaring_bitmap_from_range(uint64_t{key} << 16, (uint64_t{key} + 1) << 16, 1);
        roaring_bitmap_t* in = roaring_bitmap_and(o, r);
        for (uint32_t v : values_of(in)) ops[v] = true;
        roaring_bitmap_free(in);
        roaring_bitmap_free(r);
      }
      const int n = 1 + static_cast<int>(rng() % 300);
      for (int i = 0; i < n; ++i) ops[uint32_t{key} << 16 | static_cast<uint32_t>(rng() & 0xffff)] = rng() % 3 == 0;
    }
    std::vector<uint64_t> enc;
    for (auto [v, rm] : ops) {
      enc.push_back(uint64_t{v} << 1 | (rm ? 1 : 0));
      if (rm)
        roaring_bitmap_remove(o, v);
      else
        roaring_bitmap_add(o, v);
    }
    std::map<uint16_t, uint64_t> before;
    table_for_each(sn.t, [&](uint16_t k, uint64_t w) { before[k] = w; });
    build_incremental(b, s.base(), sn.t, sn.packs.data(), static_cast<uint32_t>(sn.packs.size()), sn.card, enc.data(),
                      enc.size(), gen);
    std::vector<PackRef> dropped = b.dropped;
    const uint32_t rebuilt = b.rebuilt, shared = b.shared;
    Snap nx = publish(s, b, gen);
    ASSERT_NO_FATAL_FAILURE(expect_equal(s, nx, o, rng, gen % 16 == 0)) << "generation " << gen;
    drops += dropped.size();
    ASSERT_LE(nx.packs.size(), kMaxPacks);
    ASSERT_EQ(rebuilt + shared, nx.t.n);
    uint32_t same_word = 0;
    table_for_each(nx.t, [&](uint16_t k, uint64_t w) {
      for (const PackRef& d : dropped) ASSERT_FALSE(cw_off(w) >= d.off && cw_off(w) < d.off + d.bytes) << "word into a dropped pack";
      if (before.count(k) && before[k] == w) ++same_word;
      if (touched.count(k)) {
        ASSERT_NE(before[k], w) << "a touched chunk keeps its old container";
      }
    });
    EXPECT_EQ(same_word, shared);  // shared = the old word, bytes and all
    for (size_t i = 0; i + 1 < nx.packs.size(); ++i) EXPECT_GE(nx.packs[i].live_bytes * 2, nx.packs[i].bytes);
    for (const PackRef& d : dropped) EXPECT_LT(d.birth, gen);
    sn = nx;
  }
  EXPECT_GT(drops, 0u);
  roaring_bitmap_free(o);
}

// One compaction touching 1% of 4,000 containers rebuilds about 40 of
// them; the rest keep their words.
TEST(RoaringContainers, OnePercentTouchedRebuildsOnePercent) {
  std::mt19937_64 rng(11);
  std::vector<uint32_t> vals;
  for (uint32_t k = 0; k < 4000; ++k)
    for (uint32_t i = 0; i < 200; ++i) vals.push_back(k << 16 | (i * 300 + static_cast<uint32_t>(rng() % 300)));
  FakeSeg s(64 << 20);
  Built b;
  build_full(b, vals.data(), vals.size(), 1);
  Snap sn = publish(s, b, 1);
  std::vector<uint64_t> enc;
  for (uint32_t k = 0; k < 4000; k += 100) enc.push_back(uint64_t{k << 16 | 299} << 1);  // 40 chunks
  build_incremental(b, s.base(), sn.t, sn.packs.data(), static_cast<uint32_t>(sn.packs.size()), sn.card, enc.data(),
                    enc.size(), 2);
  EXPECT_EQ(b.rebuilt, 40u);
  EXPECT_EQ(b.shared, 3960u);
  EXPECT_TRUE(b.dropped.empty());  // the first pack is 99% live
  EXPECT_EQ(b.packs.size(), 2u);
}

// A compaction that replaces more than half of a pack's bytes drops the
// pack and repacks the rest of its containers (so the containers' segment
// bytes stay within 2x their live bytes); the result is still exact.
TEST(RoaringContainers, AHalfDeadPackIsRepackedAndDropped) {
  std::vector<uint32_t> vals;
  for (uint32_t k = 0; k < 100; ++k)
    for (uint32_t i = 0; i < 100; ++i) vals.push_back(k << 16 | (i * 7));
  FakeSeg s(16 << 20);
  Built b;
  build_full(b, vals.data(), vals.size(), 1);
  Snap sn = publish(s, b, 1);
  const PackRef first = sn.packs.at(0);
  std::vector<uint64_t> enc;
  for (uint32_t k = 0; k < 60; ++k) enc.push_back(uint64_t{k << 16 | 1} << 1);  // 60 of 100 chunks
  build_incremental(b, s.base(), sn.t, sn.packs.data(), 1, sn.card, enc.data(), enc.size(), 2);
  EXPECT_EQ(b.rebuilt, 100u);  // 60 touched + 40 repacked
  EXPECT_EQ(b.shared, 0u);
  ASSERT_EQ(b.dropped.size(), 1u);
  EXPECT_EQ(b.dropped[0].off, first.off);
  EXPECT_EQ(b.dropped[0].birth, 1u);
  Snap nx = publish(s, b, 2);
  ASSERT_EQ(nx.packs.size(), 1u);
  EXPECT_EQ(nx.packs[0].birth, 2u);
  roaring_bitmap_t* o = roaring_bitmap_of_ptr(vals.size(), vals.data());
  for (uint32_t k = 0; k < 60; ++k) roaring_bitmap_add(o, k << 16 | 1);
  std::mt19937_64 rng(9);
  expect_equal(s, nx, o, rng);
  roaring_bitmap_free(o);
}

// Bit flips in the table and the containers: table_validate names a problem
// or accepts (a flip inside a container's values that stays well-formed),
// and lookups through cw_ok words never read outside the segment (ASan).
TEST(RoaringContainers, CorruptTablesAreNamedNeverFollowed) {
  std::mt19937_64 rng(5);
  roaring_bitmap_t* o = mixed(rng, 2000);
  std::vector<uint32_t> vals = values_of(o);
  FakeSeg s(16 << 20);
  Built b;
  build_full(b, vals.data(), vals.size(), 1);
  Snap sn = publish(s, b, 1);
  const uint64_t used = s.top;
  std::vector<std::byte> pristine(s.base(), s.base() + used);
  uint32_t named = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::memcpy(s.base(), pristine.data(), used);
    for (int f = 0; f < 4; ++f) {
      uint64_t at = 64 + rng() % (used - 64);
      s.base()[at] ^= static_cast<std::byte>(1u << (rng() % 8));
    }
    std::vector<PackRef> packs = sn.packs;
    if (trial % 7 == 0) packs[0].live_bytes ^= 1u << (rng() % 20);
    if (trial % 11 == 0) packs[0].off = s.size - 8;
    uint64_t card = 0;
    std::string e = table_validate(s.base(), s.size, sn.t, packs.data(), static_cast<uint32_t>(packs.size()), true, &card);
    if (!e.empty()) {
      ++named;
      continue;
    }
    for (int i = 0; i < 2000; ++i) (void)snap_contains(s, sn, static_cast<uint32_t>(rng()));
    (void)table_portable(s.base(), sn.t);
  }
  EXPECT_GT(named, 100u);  // flips in words and directories are caught
  roaring_bitmap_free(o);
}
