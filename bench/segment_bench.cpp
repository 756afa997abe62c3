// bench/segment_bench.cpp: costs of the segment's own operations.
//   find / region_live: the lock-free lookups every handle makes;
//   create_region + drop: one control-plane round trip (two transactions);
//   transact (empty), token_alive (an fcntl), open (attach + detach).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "shmfilter/segment.hpp"

using namespace shmfilter;

namespace {

struct Fixture {
  std::string name = "shmf-bench-" + std::to_string(getpid());
  Segment seg;
  std::vector<std::string> names;
  Fixture() {
    Segment::remove(name);
    CreateOptions o;
    o.size = 64ull << 20;
    o.directory_capacity = 65536;
    seg = Segment::create(name, o);
    for (int i = 0; i < 8000; ++i) {
      names.push_back("freq:" + std::to_string(i) + ":2026-11-30");
      seg.create_region(names.back(), Kind::kBlob, 64, {});
    }
  }
  ~Fixture() { Segment::remove(name); }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_Find(benchmark::State& state) {
  Fixture& f = fixture();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.seg.find(f.names[i++ % f.names.size()]));
  }
}
BENCHMARK(BM_Find);

void BM_RegionLive(benchmark::State& state) {
  Fixture& f = fixture();
  RegionInfo r = *f.seg.find(f.names[17]);
  for (auto _ : state) benchmark::DoNotOptimize(f.seg.region_live(r.slot, r.generation));
}
BENCHMARK(BM_RegionLive);

void BM_CreateDrop(benchmark::State& state) {
  Fixture& f = fixture();
  for (auto _ : state) {
    f.seg.create_region("bench-tmp", Kind::kBlob, static_cast<uint64_t>(state.range(0)), {});
    f.seg.drop("bench-tmp");
    f.seg.quiesce();
  }
}
BENCHMARK(BM_CreateDrop)->Arg(4096)->Arg(1 << 20);

void BM_EmptyTransaction(benchmark::State& state) {
  Fixture& f = fixture();
  for (auto _ : state) f.seg.transact([](ControlTxn&) {});
}
BENCHMARK(BM_EmptyTransaction);

void BM_TokenAliveOther(benchmark::State& state) {
  Fixture& f = fixture();
  Segment other = Segment::open(f.name);
  uint64_t t = other.owner_token();
  for (auto _ : state) benchmark::DoNotOptimize(f.seg.token_alive(t));
}
BENCHMARK(BM_TokenAliveOther);

void BM_OpenClose(benchmark::State& state) {
  Fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(Segment::open(f.name));
}
BENCHMARK(BM_OpenClose);

}  // namespace

BENCHMARK_MAIN();
