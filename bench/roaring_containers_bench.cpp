// bench/roaring_containers_bench.cpp: layout 4's container kernels
// (lib/structures/roaring/roaring_containers.h) against layout 3's whole-snapshot
// rewrite, process-locally (no segment: the kernels are what a compaction
// and a lookup run; the segment adds its transaction and allocation).
//   BM_L3_CompactFull/N/touch_permille: layout 3's compaction of a set of N
//     random 32-bit ids when the delta touches touch_permille of its
//     containers (one add each): fold into the frozen view (roaring_bitmap_or,
//     run_optimize, shrink_to_fit) and frozen_serialize the whole snapshot.
//   BM_L4_CompactIncremental/N/touch_permille: layout 4's: build_incremental
//     (rebuild the touched containers, share the rest), relocate, copy the new
//     pack and write the 512 KiB table image.
//   BM_*_ContainsOutOfCache/N: dependent random lookups (each query depends
//     on the previous answer, so misses do not overlap) over a set of N ids:
//     CRoaring's frozen view (layout 3's snapshot) and layout 4's table.
//     (Layout 3's per-view index left with layout 3: its numbers are in
//     bench/results/roaring.md.)
//   BM_*_ContainsBatched16OutOfCache/N: blocks of 16 independent lookups with
//     two prefetch stages (contains_many's shape), per query.
#include <benchmark/benchmark.h>
#include <roaring/roaring.h>

#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <vector>

#include "structures/roaring/roaring_containers.h"

namespace c4 = shmfilter::internal::roaring::c4;

namespace {

struct Aligned {
  std::byte* p = nullptr;
  explicit Aligned(size_t n) : p(new (std::align_val_t(64)) std::byte[n]()) {}
  ~Aligned() { ::operator delete[](p, std::align_val_t(64)); }
};

std::vector<uint32_t> random_ids(uint64_t n, uint64_t seed) {
  roaring_bitmap_t* b = roaring_bitmap_create();
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> batch;
  for (uint64_t have = 0; have < n; have = roaring_bitmap_get_cardinality(b)) {
    batch.clear();
    const uint64_t want = std::min<uint64_t>(1 << 16, n - have);
    for (uint64_t i = 0; i < want; ++i) batch.push_back(static_cast<uint32_t>(rng()));
    roaring_bitmap_add_many(b, batch.size(), batch.data());
  }
  std::vector<uint32_t> v(roaring_bitmap_get_cardinality(b));
  roaring_bitmap_to_uint32_array(b, v.data());
  roaring_bitmap_free(b);
  return v;
}

// One add in touch_permille of the 65,536 chunks (random ids fill every chunk).
std::vector<uint32_t> touching(uint32_t touch_permille, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> adds;
  const uint32_t step = std::max<uint32_t>(1, 1000 / std::max<uint32_t>(1, touch_permille));
  for (uint32_t k = 0; k < 65536; k += step) adds.push_back(k << 16 | static_cast<uint32_t>(rng() & 0xffff));
  return adds;
}

struct L3Snap {
  std::unique_ptr<Aligned> buf;
  const roaring_bitmap_t* view = nullptr;
  size_t bytes = 0;
};
L3Snap l3_snapshot(const std::vector<uint32_t>& ids) {
  roaring_bitmap_t* b = roaring_bitmap_of_ptr(ids.size(), ids.data());
  roaring_bitmap_run_optimize(b);
  roaring_bitmap_shrink_to_fit(b);
  L3Snap s;
  s.bytes = roaring_bitmap_frozen_size_in_bytes(b);
  s.buf = std::make_unique<Aligned>(s.bytes);
  roaring_bitmap_frozen_serialize(b, reinterpret_cast<char*>(s.buf->p));
  s.view = roaring_bitmap_frozen_view(reinterpret_cast<const char*>(s.buf->p), s.bytes);
  roaring_bitmap_free(b);
  return s;
}

struct L4Snap {
  std::unique_ptr<Aligned> seg;
  uint64_t size = 0;
  c4::Table t;
  std::vector<c4::PackRef> packs;
  uint64_t card = 0;
};
L4Snap l4_snapshot(const std::vector<uint32_t>& ids) {
  c4::Built b;
  c4::build_full(b, ids.data(), ids.size(), 1);
  L4Snap s;
  const uint64_t pack = b.pack.size() * 8;
  s.size = 64 + pack + 64 + c4::table_bytes(true, c4::kChunks) + 64;
  s.seg = std::make_unique<Aligned>(s.size);
  c4::relocate(b, 64);
  std::memcpy(s.seg->p + 64, b.pack.data(), pack);
  const uint64_t toff = (64 + pack + 64 + 63) / 64 * 64;
  c4::table_image(b, s.seg->p + toff);
  s.t = c4::table_at(s.seg->p + toff, c4::table_indexed_for(static_cast<uint32_t>(b.keys.size())),
                     static_cast<uint32_t>(b.keys.size()));
  s.packs = b.packs;
  s.card = b.cardinality;
  return s;
}

void BM_L3_CompactFull(benchmark::State& st) {
  auto ids = random_ids(static_cast<uint64_t>(st.range(0)), 1);
  L3Snap s = l3_snapshot(ids);
  auto adds = touching(static_cast<uint32_t>(st.range(1)), 2);
  Aligned out(s.bytes + (1 << 20));
  for (auto _ : st) {
    roaring_bitmap_t* a = roaring_bitmap_of_ptr(adds.size(), adds.data());
    roaring_bitmap_t* r = roaring_bitmap_or(s.view, a);
    roaring_bitmap_run_optimize(r);
    roaring_bitmap_shrink_to_fit(r);
    size_t n = roaring_bitmap_frozen_size_in_bytes(r);
    if (n <= s.bytes + (1 << 20)) roaring_bitmap_frozen_serialize(r, reinterpret_cast<char*>(out.p));
    benchmark::DoNotOptimize(out.p[0]);
    roaring_bitmap_free(r);
    roaring_bitmap_free(a);
  }
  st.counters["snapshot_MB"] = static_cast<double>(s.bytes) / 1e6;
  st.counters["touched"] = static_cast<double>(adds.size());
  roaring_bitmap_free(s.view);
}
BENCHMARK(BM_L3_CompactFull)->Args({10000000, 10})->Args({30000000, 10})->Args({30000000, 100})->Unit(benchmark::kMillisecond);

void BM_L4_CompactIncremental(benchmark::State& st) {
  auto ids = random_ids(static_cast<uint64_t>(st.range(0)), 1);
  L4Snap s = l4_snapshot(ids);
  auto adds = touching(static_cast<uint32_t>(st.range(1)), 2);
  std::vector<uint64_t> ops;
  for (uint32_t v : adds) ops.push_back(uint64_t{v} << 1);
  Aligned out(c4::table_bytes(true, c4::kChunks) + (16 << 20));
  uint64_t rebuilt = 0, shared = 0;
  c4::Built b;
  for (auto _ : st) {
    c4::build_incremental(b, s.seg->p, s.t, s.packs.data(), static_cast<uint32_t>(s.packs.size()), s.card, ops.data(),
                          ops.size(), 2);
    c4::relocate(b, 1 << 30);  // where the transaction would have put the new pack
    if (b.pack.size() * 8 <= (16u << 20)) std::memcpy(out.p + c4::table_bytes(true, c4::kChunks), b.pack.data(), b.pack.size() * 8);
    c4::table_image(b, out.p);
    benchmark::DoNotOptimize(out.p[0]);
    rebuilt = b.rebuilt;
    shared = b.shared;
  }
  st.counters["rebuilt"] = static_cast<double>(rebuilt);
  st.counters["shared"] = static_cast<double>(shared);
}
BENCHMARK(BM_L4_CompactIncremental)->Args({10000000, 10})->Args({30000000, 10})->Args({30000000, 100})->Args({30000000, 1000})->Unit(benchmark::kMillisecond);

// Dependent lookups: the next query is a hash of the previous one and its answer.
inline uint32_t next_query(uint32_t q, bool hit) noexcept {
  uint64_t x = (uint64_t{q} + hit + 1) * 0x9E3779B97F4A7C15ull;
  return static_cast<uint32_t>(x >> 32);
}

void BM_L3_FrozenViewContainsOutOfCache(benchmark::State& st) {
  auto ids = random_ids(static_cast<uint64_t>(st.range(0)), 3);
  L3Snap s = l3_snapshot(ids);
  uint32_t q = 1;
  for (auto _ : st) q = next_query(q, roaring_bitmap_contains(s.view, q));
  benchmark::DoNotOptimize(q);
  roaring_bitmap_free(s.view);
}
BENCHMARK(BM_L3_FrozenViewContainsOutOfCache)->Arg(30000000);

void BM_L4_TableContainsOutOfCache(benchmark::State& st) {
  auto ids = random_ids(static_cast<uint64_t>(st.range(0)), 3);
  L4Snap s = l4_snapshot(ids);
  uint32_t q = 1;
  for (auto _ : st) {
    const uint64_t w = c4::table_word(s.t, static_cast<uint16_t>(q >> 16));
    q = next_query(q, w != 0 && c4::container_contains(s.seg->p, w, static_cast<uint16_t>(q)));
  }
  benchmark::DoNotOptimize(q);
}
BENCHMARK(BM_L4_TableContainsOutOfCache)->Arg(30000000)->Arg(120000000);

// Batched lookups in blocks of 16 independent random queries (contains_many's
// shape): prefetch the 16 rank entries, then the 16 words, then the 16
// container lines, then answer. Time per query.
void BM_L4_TableContainsBatched16OutOfCache(benchmark::State& st) {
  auto ids = random_ids(static_cast<uint64_t>(st.range(0)), 3);
  L4Snap s = l4_snapshot(ids);
  uint32_t q[16];
  uint32_t seed = 1, hits = 0;
  for (auto _ : st) {
    for (int i = 0; i < 16; ++i) {
      seed = next_query(seed, false);
      q[i] = seed;
      __builtin_prefetch(c4::table_probe_address(s.t, static_cast<uint16_t>(q[i] >> 16)));
    }
    const uint64_t* wp[16];
    uint64_t w[16];
    for (int i = 0; i < 16; ++i)
      if ((wp[i] = c4::table_word_ptr(s.t, static_cast<uint16_t>(q[i] >> 16)))) __builtin_prefetch(wp[i]);
    for (int i = 0; i < 16; ++i)
      if ((w[i] = wp[i] ? *wp[i] : 0)) __builtin_prefetch(c4::container_probe_address(s.seg->p, w[i], static_cast<uint16_t>(q[i])));
    for (int i = 0; i < 16; ++i) hits += w[i] != 0 && c4::container_contains(s.seg->p, w[i], static_cast<uint16_t>(q[i]));
  }
  benchmark::DoNotOptimize(hits);
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations()) * 16);
}
BENCHMARK(BM_L4_TableContainsBatched16OutOfCache)->Arg(30000000);

}  // namespace

BENCHMARK_MAIN();
