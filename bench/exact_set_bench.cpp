// bench/exact_set_bench.cpp: ExactSet insert / contains / erase latency at 50%
// and 90% slot load, and bytes per key.
//   build/bench/exact_set_bench --benchmark_min_time=0.3
// The set has 4M slots (32 MiB: beyond the caches of a small VM), created with
// max_load 0.9 so it can be filled to 90% of its slots; Arg = load in percent.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "shmfilter/exact_set.hpp"
#include "workload.h"

using namespace shmfilter;

namespace {

constexpr uint64_t kSlots = 4u << 20;
constexpr uint64_t kPool = 20000;  // keys inserted/erased per timed round

struct Fixture {
  std::string name = "shmf-bench-set-" + std::to_string(getpid());
  Segment seg;
  std::map<int, ExactSet> sets;
  std::map<int, std::vector<uint64_t>> present;
  Fixture() {
    Segment::remove(name);
    CreateOptions o;
    o.size = 256ull << 20;
    seg = Segment::create(name, o);
  }
  ~Fixture() { Segment::remove(name); }
  // A set filled to `load` percent of kSlots (minus the pool used by insert rounds).
  ExactSet& at(int load) {
    auto it = sets.find(load);
    if (it != sets.end()) return it->second;
    ExactSet s = ExactSet::create(seg, "load" + std::to_string(load),
                                  {.capacity = static_cast<uint64_t>(kSlots * 0.9), .max_load = 0.9});
    uint64_t n = kSlots * static_cast<uint64_t>(load) / 100 - kPool;
    present[load] = shmf_bench::distinct_keys(n, static_cast<uint64_t>(load));
    for (uint64_t k : present[load]) s.insert(k);
    return sets.emplace(load, s).first->second;
  }
};
Fixture& fx() {
  static Fixture f;
  return f;
}

void BM_ContainsHit(benchmark::State& state) {
  int load = static_cast<int>(state.range(0));
  ExactSet& s = fx().at(load);
  const auto& keys = fx().present[load];
  shmf_bench::Rng rng(1);
  for (auto _ : state) benchmark::DoNotOptimize(s.contains(keys[rng.below(keys.size())]));
  state.counters["load"] = static_cast<double>(s.size()) / kSlots;
}
BENCHMARK(BM_ContainsHit)->Arg(50)->Arg(90);

void BM_ContainsMiss(benchmark::State& state) {
  int load = static_cast<int>(state.range(0));
  ExactSet& s = fx().at(load);
  auto absent = shmf_bench::absent_keys(1 << 20, static_cast<uint64_t>(load));
  uint64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(s.contains(absent[i++ & ((1 << 20) - 1)]));
}
BENCHMARK(BM_ContainsMiss)->Arg(50)->Arg(90);

void BM_ContainsMany(benchmark::State& state) {
  int load = static_cast<int>(state.range(0));
  ExactSet& s = fx().at(load);
  const auto& keys = fx().present[load];
  std::vector<uint64_t> batch(4096);
  shmf_bench::Rng rng(2);
  for (auto& k : batch) k = rng.below(2) ? keys[rng.below(keys.size())] : rng.next();
  std::vector<uint8_t> out(batch.size());
  for (auto _ : state) s.contains_many(batch, out);
  state.SetItemsProcessed(state.iterations() * 4096);
}
BENCHMARK(BM_ContainsMany)->Arg(50)->Arg(90);

// Insert of new keys (per-stripe lock, CAS), then untimed erase of the round.
void BM_InsertNew(benchmark::State& state) {
  int load = static_cast<int>(state.range(0));
  ExactSet& s = fx().at(load);
  auto pool = shmf_bench::absent_keys(kPool, 1000 + static_cast<uint64_t>(load));
  uint64_t i = 0;
  for (auto _ : state) {
    if (i == kPool) {
      state.PauseTiming();
      for (uint64_t k : pool) s.erase(k);
      i = 0;
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(s.insert(pool[i++]));
  }
  for (uint64_t k : pool) s.erase(k);  // after the timed loop: not measured
}
BENCHMARK(BM_InsertNew)->Arg(50)->Arg(90);

// Insert of a key already present (the lock-free "seen before" answer).
void BM_InsertExisting(benchmark::State& state) {
  int load = static_cast<int>(state.range(0));
  ExactSet& s = fx().at(load);
  const auto& keys = fx().present[load];
  shmf_bench::Rng rng(3);
  for (auto _ : state) benchmark::DoNotOptimize(s.insert(keys[rng.below(keys.size())]));
}
BENCHMARK(BM_InsertExisting)->Arg(50)->Arg(90);

void BM_Erase(benchmark::State& state) {
  int load = static_cast<int>(state.range(0));
  ExactSet& s = fx().at(load);
  auto pool = shmf_bench::absent_keys(kPool, 2000 + static_cast<uint64_t>(load));
  uint64_t i = kPool;
  for (auto _ : state) {
    if (i == kPool) {
      state.PauseTiming();
      for (uint64_t k : pool) s.insert(k);
      i = 0;
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(s.erase(pool[i++]));
  }
  for (uint64_t k : pool) s.erase(k);  // after the timed loop: not measured
}
BENCHMARK(BM_Erase)->Arg(50)->Arg(90);

// Bytes per key in the segment at full load, default max_load 0.8 and 0.9.
void BM_BytesPerKey(benchmark::State& state) {
  double max_load = static_cast<double>(state.range(0)) / 100;
  std::string n = "bpk" + std::to_string(state.range(0));
  ExactSet s = ExactSet::create(fx().seg, n, {.capacity = 10000000, .max_load = max_load});
  for (auto _ : state) benchmark::DoNotOptimize(s.stats());
  ExactSetStats st = s.stats();
  state.counters["bytes_per_key_at_capacity"] = st.bytes_per_key_at_capacity;
  state.counters["region_MiB"] = static_cast<double>(st.bytes) / (1 << 20);
  ExactSet::drop(fx().seg, n);
}
BENCHMARK(BM_BytesPerKey)->Arg(80)->Arg(90)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
