// bench/hll_bench.cpp: HLL add / count / merge of 7 / export, in a segment.
//   build/bench/hll_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "shmfilter/hll.hpp"
#include "workload.h"

using namespace shmfilter;

namespace {

struct Fixture {
  std::string name = "shmf-bench-hll-" + std::to_string(getpid());
  Segment seg;
  std::vector<Hll> days;
  Fixture() {
    Segment::remove(name);
    seg = Segment::create(name);
    for (int d = 0; d < 7; ++d) {
      days.push_back(Hll::create(seg, "uv:day" + std::to_string(d)));
      days.back().add_many(shmf_bench::distinct_keys(1000000, 10 + d));
    }
  }
  ~Fixture() { Segment::remove(name); }
};
Fixture& fx() {
  static Fixture f;
  return f;
}

void BM_HllAddU64(benchmark::State& state) {
  Hll h = Hll::open_or_create(fx().seg, "add");
  uint64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(h.add(shmf_bench::mix64(i++)));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HllAddU64);

// 16-hex-char device IDs, as PFADD gets them.
void BM_HllAddHex16(benchmark::State& state) {
  Hll h = Hll::open_or_create(fx().seg, "addhex");
  std::vector<std::string> ids;
  for (int i = 0; i < 1 << 16; ++i) ids.push_back(shmf_bench::hex16(shmf_bench::mix64(i)));
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(h.add(std::string_view(ids[i++ & 0xffff])));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HllAddHex16);

void BM_HllAddMany(benchmark::State& state) {
  Hll h = Hll::open_or_create(fx().seg, "addmany");
  auto keys = shmf_bench::distinct_keys(4096, 3);
  for (auto _ : state) benchmark::DoNotOptimize(h.add_many(keys));
  state.SetItemsProcessed(state.iterations() * 4096);
}
BENCHMARK(BM_HllAddMany);

// An unchanged HLL: answered from the count cache (three loads on one line).
void BM_HllCount(benchmark::State& state) {
  Hll h = fx().days[0];
  for (auto _ : state) benchmark::DoNotOptimize(h.count());
}
BENCHMARK(BM_HllCount);

// count() right after a register grew: the full recompute (the uncached cost).
// The growing add (a key of never-seen rank 40, found before timing) is inside the loop.
void BM_HllCountAfterChange(benchmark::State& state) {
  Hll h = Hll::create(fx().seg, "uv:changing");
  h.add_many(shmf_bench::distinct_keys(1000000, 99));
  uint64_t k = 0;
  for (auto _ : state) {
    while (!h.add(k++)) {
    }
    benchmark::DoNotOptimize(h.count());
  }
  Hll::drop(fx().seg, "uv:changing");
}
BENCHMARK(BM_HllCountAfterChange);

// The 7-day UV: count of the union of 7 daily HLLs, nothing written.
void BM_HllCountUnion7(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Hll::count_union(fx().days));
}
BENCHMARK(BM_HllCountUnion7);

// Merge of 7 into a named weekly HLL (registers already merged after the first
// iteration: the steady state of a re-run merge), then count it.
void BM_HllMerge7Into(benchmark::State& state) {
  Hll week = Hll::open_or_create(fx().seg, "week");
  for (auto _ : state) {
    week.merge_from(fx().days);
    benchmark::DoNotOptimize(week.count());
  }
}
BENCHMARK(BM_HllMerge7Into);

void BM_HllExportRedis(benchmark::State& state) {
  Hll h = fx().days[0];
  for (auto _ : state) benchmark::DoNotOptimize(h.export_redis());
}
BENCHMARK(BM_HllExportRedis);

}  // namespace

BENCHMARK_MAIN();
