// bench/roaring_bench.cpp: RoaringSet latencies, compaction, 7-day queries and
// memory at the mission's sizes. Results: bench/results/roaring.md.
//
//   build/bench/roaring_bench --benchmark_filter=. --benchmark_min_time=0.2
//
// The mission-size memory benchmarks (1e8 dense, 1.2e8 sparse) take about a
// minute together; filter them out with --benchmark_filter=-Mission.
#include <benchmark/benchmark.h>
#include <roaring/roaring.h>

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"
#include "floor.h"
#include "workload.h"

using namespace shmfilter;

namespace {

struct Seg {
  std::string name;
  Segment seg;
  explicit Seg(uint64_t size = 256ull << 20) {
    name = "shmf-bench-roaring-" + std::to_string(getpid());
    Segment::remove(name);
    CreateOptions o;
    o.size = size;
    o.max_size = 8ull << 30;
    o.directory_capacity = 64;
    seg = Segment::create(name, o);
  }
  ~Seg() { Segment::remove(name); }
};

// One shared fixture for the latency benchmarks: "lat" holds 0..1e7 (dense,
// snapshot) and 30,000 delta entries at 2e7 + 3k (every third id above 2e7).
struct LatencyFixture {
  Seg s;
  RoaringSet set;
  roaring_bitmap_t* plain = nullptr;  // the same ids as a process-local CRoaring bitmap
  LatencyFixture() {
    RoaringOptions o;
    o.auto_compact = false;
    set = RoaringSet::create(s.seg, "lat", o);
    set.add_range(0, 10000000);
    for (uint32_t i = 0; i < 30000; ++i) set.add(20000000 + 3 * i);
    plain = set.to_bitmap();
  }
  ~LatencyFixture() { roaring_bitmap_free(plain); }
};
LatencyFixture& lat() {
  static LatencyFixture f;
  return f;
}

void BM_ContainsSnapshotHit(benchmark::State& st) {
  auto& f = lat();
  shmf_bench::Rng r(shmf_bench::mix64(1));
  uint64_t hits = 0;
  for (auto _ : st) hits += f.set.contains(static_cast<uint32_t>(r.below(10000000)));
  st.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(st.iterations());
}
BENCHMARK(BM_ContainsSnapshotHit);

void BM_ContainsDeltaHit(benchmark::State& st) {
  auto& f = lat();
  shmf_bench::Rng r(shmf_bench::mix64(2));
  uint64_t hits = 0;
  for (auto _ : st) hits += f.set.contains(20000000 + 3 * static_cast<uint32_t>(r.below(30000)));
  st.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(st.iterations());
}
BENCHMARK(BM_ContainsDeltaHit);

void BM_ContainsMiss(benchmark::State& st) {
  auto& f = lat();
  shmf_bench::Rng r(shmf_bench::mix64(3));
  uint64_t hits = 0;
  for (auto _ : st) hits += f.set.contains(30000000 + static_cast<uint32_t>(r.below(1000000000)));
  st.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(st.iterations());
}
BENCHMARK(BM_ContainsMiss);

// Baseline: the same ids in a process-local (non-shared) CRoaring bitmap.
void BM_CRoaringLocalContains(benchmark::State& st) {
  auto& f = lat();
  shmf_bench::Rng r(shmf_bench::mix64(1));
  uint64_t hits = 0;
  for (auto _ : st) hits += roaring_bitmap_contains(f.plain, static_cast<uint32_t>(r.below(10000000)));
  benchmark::DoNotOptimize(hits);
}
BENCHMARK(BM_CRoaringLocalContains);

void BM_ContainsManyBatch(benchmark::State& st) {
  auto& f = lat();
  shmf_bench::Rng r(shmf_bench::mix64(4));
  std::vector<uint32_t> q(1024);
  std::vector<uint8_t> out(q.size());
  for (auto& v : q) v = static_cast<uint32_t>(r.below(40000000));
  for (auto _ : st) f.set.contains_many(std::span<const uint32_t>(q), out);
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * q.size()));
}
BENCHMARK(BM_ContainsManyBatch);

// Adds of random ids with auto-compaction on (64K-slot delta, compaction at
// 50%): the time includes the amortised compactions.
void BM_AddRandomWithCompaction(benchmark::State& st) {
  Seg s;
  RoaringSet set = RoaringSet::create(s.seg, "add", {});
  shmf_bench::Rng r(shmf_bench::mix64(5));
  for (auto _ : st) set.add(static_cast<uint32_t>(r.next() >> 32));
  st.counters["compactions"] = static_cast<double>(set.stats().compactions);
  st.counters["card"] = static_cast<double>(set.cardinality());
}
BENCHMARK(BM_AddRandomWithCompaction);

// Add and remove without compaction (delta writes only): bounded by the delta size.
void BM_AddRemoveDeltaOnly(benchmark::State& st) {
  Seg s;
  RoaringOptions o;
  o.delta_capacity = 1u << 20;
  o.auto_compact = false;
  RoaringSet set = RoaringSet::create(s.seg, "ar", o);
  shmf_bench::Rng r(shmf_bench::mix64(6));
  bool add = true;
  for (auto _ : st) {
    uint32_t v = static_cast<uint32_t>(r.below(400000));  // <= 400K distinct: fits the 90% bound
    if (add) set.add(v); else set.remove(v);
    add = !add;
  }
}
BENCHMARK(BM_AddRemoveDeltaOnly);

// One compaction folding 32,768 random delta entries into a snapshot of
// `range(0)` ids (dense 0..n, or sparse at the mission's density).
void BM_Compaction(benchmark::State& st) {
  const uint64_t n = static_cast<uint64_t>(st.range(0));
  const bool sparse = st.range(1) != 0;
  Seg s(1ull << 30);
  RoaringOptions o;
  o.auto_compact = false;
  RoaringSet set = RoaringSet::create(s.seg, "c", o);
  shmf_bench::Rng r(shmf_bench::mix64(7));
  if (sparse) {
    const uint64_t span = (uint64_t{1} << 32) * n / 120000000;
    roaring_bitmap_t* b = roaring_bitmap_create();
    for (uint64_t i = 0; i < n; ++i) roaring_bitmap_add(b, static_cast<uint32_t>(r.below(span)));
    set.merge(b);
    roaring_bitmap_free(b);
  } else {
    set.add_range(0, n);
  }
  for (auto _ : st) {
    st.PauseTiming();
    for (int i = 0; i < 32768; ++i) set.add(static_cast<uint32_t>(r.below(n + n / 10)));
    st.ResumeTiming();
    set.compact();
  }
  auto stats = set.stats();
  st.counters["snapshot_MB"] = static_cast<double>(stats.snapshot_bytes) / 1e6;
  st.counters["card"] = static_cast<double>(stats.cardinality);
}
BENCHMARK(BM_Compaction)->Args({10000000, 0})->Args({100000000, 0})->Args({1000000, 1})->Args({10000000, 1})
    ->Unit(benchmark::kMillisecond)->Iterations(5);

// contains() latency while another thread compacts back to back (32,768
// fresh delta entries per compaction) vs the same reader with no compaction.
void BM_ContainsDuringCompactions(benchmark::State& st) {
  const bool compacting = st.range(0) != 0;
  Seg s(1ull << 30);
  RoaringOptions o;
  o.auto_compact = false;
  RoaringSet set = RoaringSet::create(s.seg, "rc", o);
  set.add_range(0, 10000000);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> compactions{0};
  std::thread bg;
  if (compacting)
    bg = std::thread([&] {
      shmf_bench::Rng r(shmf_bench::mix64(8));
      while (!stop) {
        for (int i = 0; i < 32768; ++i) set.add(static_cast<uint32_t>(r.below(12000000)));
        if (set.compact()) ++compactions;
      }
    });
  shmf_bench::Rng r(shmf_bench::mix64(9));
  uint64_t hits = 0;
  for (auto _ : st) hits += set.contains(static_cast<uint32_t>(r.below(10000000)));
  stop = true;
  if (bg.joinable()) bg.join();
  benchmark::DoNotOptimize(hits);
  st.counters["compactions"] = static_cast<double>(compactions.load());
}
BENCHMARK(BM_ContainsDuringCompactions)->Arg(0)->Arg(1)->MinTime(1.0);

// The 7-day question over 7 daily sets of 1e6 ids each (mission density).
struct WeekFixture {
  Seg s{512ull << 20};
  std::vector<RoaringSet> days;
  roaring_bitmap_t* uni = nullptr;
  WeekFixture() {
    const uint64_t span = (uint64_t{1} << 32) * 1000000 / 120000000;
    for (int d = 0; d < 7; ++d) {
      shmf_bench::Rng r(shmf_bench::mix64(100 + static_cast<uint64_t>(d)));
      roaring_bitmap_t* b = roaring_bitmap_create();
      for (int i = 0; i < 1000000; ++i) roaring_bitmap_add(b, static_cast<uint32_t>(r.below(span)));
      days.push_back(RoaringSet::create(s.seg, "day" + std::to_string(d), {}));
      days.back().merge(b);
      roaring_bitmap_free(b);
    }
    std::vector<const roaring_bitmap_t*> bs;
    for (auto& d : days) bs.push_back(d.to_bitmap());
    uni = roaring_bitmap_or_many(bs.size(), bs.data());
    for (auto* b : bs) roaring_bitmap_free(b);
  }
};
WeekFixture& week() {
  static WeekFixture f;
  return f;
}
// Queries: half drawn from the id span (where ~18% of ids are in some day),
// half beyond it (absent). Seeds go through mix64: workload.h's Rng streams
// of adjacent seeds are shifted copies of each other.
uint32_t week_query(shmf_bench::Rng& r) {
  const uint64_t span = (uint64_t{1} << 32) * 1000000 / 120000000;
  return static_cast<uint32_t>(r.below(2) ? r.below(span) : span + r.below(span));
}

void BM_Week_ContainsAny(benchmark::State& st) {
  auto& w = week();
  shmf_bench::Rng r(shmf_bench::mix64(11));
  uint64_t hits = 0;
  for (auto _ : st) hits += RoaringSet::contains_any(w.days, week_query(r));
  st.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(st.iterations());
}
BENCHMARK(BM_Week_ContainsAny);

// One of the 7 sets alone, same queries: the yardstick of contains_any (issue 16: within 2x).
void BM_Week_OneSetContains(benchmark::State& st) {
  auto& w = week();
  shmf_bench::Rng r(shmf_bench::mix64(11));
  uint64_t hits = 0;
  for (auto _ : st) hits += w.days[0].contains(week_query(r));
  st.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(st.iterations());
}
BENCHMARK(BM_Week_OneSetContains);

void BM_Week_SevenContains(benchmark::State& st) {
  auto& w = week();
  shmf_bench::Rng r(shmf_bench::mix64(11));
  uint64_t hits = 0;
  for (auto _ : st) {
    uint32_t x = week_query(r);
    bool any = false;
    for (auto& d : w.days) any |= d.contains(x);  // all 7, no early exit
    hits += any;
  }
  st.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(st.iterations());
}
BENCHMARK(BM_Week_SevenContains);

void BM_Week_MaterialisedUnionContains(benchmark::State& st) {
  auto& w = week();
  shmf_bench::Rng r(shmf_bench::mix64(11));
  uint64_t hits = 0;
  for (auto _ : st) hits += roaring_bitmap_contains(w.uni, week_query(r));
  st.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(st.iterations());
}
BENCHMARK(BM_Week_MaterialisedUnionContains);

void BM_Week_BuildUnion(benchmark::State& st) {
  auto& w = week();
  std::vector<std::string> names;
  for (int d = 0; d < 7; ++d) names.push_back("day" + std::to_string(d));
  for (auto _ : st) {
    roaring_bitmap_t* u = RoaringSet::compute(w.s.seg, SetOp::kUnion, names);
    benchmark::DoNotOptimize(u);
    roaring_bitmap_free(u);
  }
}
BENCHMARK(BM_Week_BuildUnion)->Unit(benchmark::kMillisecond);

// The 7-day question OUT of cache (issue 16: contains_any over 7 sets within
// 2x one set): 7 daily sets of 2e7 random ids over all of 2^32 each (65,536
// array containers of ~305 values, an INDEXED table: ~57 MB a set with its
// delta, ~400 MB in all), built with create_from. Each query depends on the previous
// answer (no overlap between queries: a latency, like the floor's
// dependent read); uniform over 2^32, so ~0.5% hit a given set and
// contains_any asks all 7 almost always. BM_WeekOut_Floor measures the
// machine's floor over a /dev/shm buffer of the 7 sets' size in the same
// run: one dependent random line (dep_p50_ns) and 7 unrelated lines issued
// together (group7_p50_ns, bench/floor.h): a lookup is 2 dependent misses
// (table word, container), so one set costs ~2 x dep and 7 sets ~2 x group7.
struct WeekOutFixture {
  Seg s{1ull << 30};
  std::vector<RoaringSet> days;
  uint64_t bytes = 0;
  WeekOutFixture() {
    for (int d = 0; d < 7; ++d) {
      shmf_bench::Rng r(shmf_bench::mix64(700 + static_cast<uint64_t>(d)));
      std::vector<uint32_t> ids(20000000);
      for (auto& v : ids) v = static_cast<uint32_t>(r.next() >> 32);
      roaring_bitmap_t* b = roaring_bitmap_of_ptr(ids.size(), ids.data());
      days.push_back(RoaringSet::create_from(s.seg, "wday" + std::to_string(d), b, {}));
      roaring_bitmap_free(b);
      bytes += days.back().stats().total_bytes;
    }
  }
};
WeekOutFixture& week_out() {
  static WeekOutFixture f;
  return f;
}
inline uint32_t next_week_query(uint32_t q, bool hit) noexcept {
  return static_cast<uint32_t>(((uint64_t{q} + hit + 1) * 0x9E3779B97F4A7C15ull) >> 32);
}
void BM_WeekOut_ContainsAny(benchmark::State& st) {
  auto& w = week_out();
  uint32_t q = 1;
  uint64_t hits = 0;
  for (auto _ : st) {
    const bool h = RoaringSet::contains_any(w.days, q);
    hits += h;
    q = next_week_query(q, h);
  }
  st.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(st.iterations());
  st.counters["sets_MB"] = static_cast<double>(w.bytes) / 1e6;
}
BENCHMARK(BM_WeekOut_ContainsAny)->MinTime(2.0);
// One set per query, the next day's set each time: the same ~400 MB out of
// cache as contains_any (a single 57 MB set stays in this host's L3).
void BM_WeekOut_OneSetContains(benchmark::State& st) {
  auto& w = week_out();
  uint32_t q = 1;
  uint64_t hits = 0, i = 0;
  for (auto _ : st) {
    const bool h = w.days[i++ % 7].contains(q);
    hits += h;
    q = next_week_query(q, h);
  }
  st.counters["hit_rate"] = static_cast<double>(hits) / static_cast<double>(st.iterations());
}
BENCHMARK(BM_WeekOut_OneSetContains)->MinTime(2.0);
void BM_WeekOut_Floor(benchmark::State& st) {
  const uint64_t bytes = week_out().bytes;
  shmf_bench::Clock clk;
  shmf_bench::Floor f;
  for (auto _ : st) f = shmf_bench::measure_floor(clk, bytes, 200000, 77, false, 7);
  st.counters["dep_p50_ns"] = f.dep_p50;
  st.counters["group7_p50_ns"] = f.group_p50;
  st.counters["group7_over_dep"] = f.group_p50 / f.dep_p50;
}
BENCHMARK(BM_WeekOut_Floor)->Iterations(1)->Unit(benchmark::kMillisecond);

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// add_many of n random 32-bit ids (uniform over 2^32: Roaring's worst case,
// as issue 16 measured it) into an empty set with default options, in
// batches of 1e4; ns per id includes every compaction. Issue 16's numbers
// before the growing delta: 1.06 us/id at 1e6, 1.5 us/id at 4e6.
void add_many_random(benchmark::State& st, uint64_t n, bool mission_ids) {
  Seg s(1ull << 30);
  for (auto _ : st) {
    std::vector<uint32_t> ids;
    if (mission_ids) {
      ids = shmf_bench::sparse_ids(n, 42);
    } else {
      shmf_bench::Rng r(shmf_bench::mix64(16));
      ids.resize(n);
      for (auto& v : ids) v = static_cast<uint32_t>(r.next() >> 32);
    }
    RoaringSet set = RoaringSet::create(s.seg, "addmany", {});
    double worst_batch_ms = 0;
    const double cpu0 = thread_cpu_s();
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < n; i += 10000) {
      auto b0 = std::chrono::steady_clock::now();
      auto m = std::min<uint64_t>(10000, n - i);
      if (set.add_many(std::span<const uint32_t>(ids.data() + i, m)) != RoaringStatus::kOk) st.SkipWithError("add_many failed");
      worst_batch_ms = std::max(worst_batch_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0).count());
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = thread_cpu_s() - cpu0;  // the add loop alone, in this thread (compactions included: they run inline)
    auto stats = set.stats();
    st.counters["wall_s"] = secs;
    st.counters["cpu_s"] = cpu;
    st.counters["ns_per_id_cpu"] = cpu * 1e9 / static_cast<double>(n);
    st.counters["ns_per_id_wall"] = secs * 1e9 / static_cast<double>(n);
    st.counters["worst_batch_ms"] = worst_batch_ms;
    st.counters["compactions"] = static_cast<double>(stats.compactions);
    st.counters["delta_capacity"] = static_cast<double>(stats.delta_capacity);
    st.counters["links"] = static_cast<double>(stats.delta_links);
    st.counters["card"] = static_cast<double>(stats.cardinality);
    st.counters["total_MB"] = static_cast<double>(stats.total_bytes) / 1e6;
    st.counters["segment_MB"] = static_cast<double>(s.seg.stats().used_bytes) / 1e6;
    set = RoaringSet();
    RoaringSet::drop(s.seg, "addmany");
  }
}
void BM_AddManyRandom(benchmark::State& st) { add_many_random(st, static_cast<uint64_t>(st.range(0)), false); }
BENCHMARK(BM_AddManyRandom)->Arg(1000000)->Arg(4000000)->Arg(16000000)->Iterations(1)->Unit(benchmark::kMillisecond);
void BM_Mission_AddManySparse(benchmark::State& st) { add_many_random(st, static_cast<uint64_t>(st.range(0)), true); }
BENCHMARK(BM_Mission_AddManySparse)->Arg(30000000)->Arg(120000000)->Iterations(1)->Unit(benchmark::kMillisecond);

// Issue 16 "bound the work a writer does inline": the latency of each add in a
// stream of n ids at the mission's density into an empty set (defaults).
// range(1) = 1: a second thread calls maintain() every millisecond (the
// housekeeping docs/roaring.md recommends), so no writer compacts; 0: nobody
// does, and the writer compacts itself only when its chain of 4 delta tables
// is full. Every add is timed with two steady_clock reads (their ~25-50 ns
// are included in each sample). mean_ns includes everything the writer did.
void BM_AddStreamLatency(benchmark::State& st) {
  const uint64_t n = static_cast<uint64_t>(st.range(0));
  const bool maintained = st.range(1) != 0;
  Seg s(1ull << 30);
  for (auto _ : st) {
    std::vector<uint32_t> ids = shmf_bench::sparse_ids(n, 43);
    RoaringSet set = RoaringSet::create(s.seg, "stream", {});
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> maintains{0};
    std::thread m;
    if (maintained)
      m = std::thread([&] {
        while (!stop.load()) {
          try {
            if (set.maintain()) maintains.fetch_add(1);
          } catch (const Error&) {
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
    std::vector<uint32_t> lat(n);
    const double cpu0 = thread_cpu_s();
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < n; ++i) {
      auto a = std::chrono::steady_clock::now();
      if (set.add(ids[i]) != RoaringStatus::kOk) st.SkipWithError("add failed");
      auto b = std::chrono::steady_clock::now();
      lat[i] = static_cast<uint32_t>(std::min<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count(), UINT32_MAX));
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = thread_cpu_s() - cpu0;  // the writer thread only (the maintainer's compactions are not in it)
    stop = true;
    if (m.joinable()) m.join();
    double sum = 0;
    for (uint32_t x : lat) sum += x;
    std::sort(lat.begin(), lat.end());
    auto pct = [&](double q) { return static_cast<double>(lat[std::min<uint64_t>(n - 1, static_cast<uint64_t>(q * static_cast<double>(n)))]); };
    auto stats = set.stats();
    st.counters["mean_ns"] = sum / static_cast<double>(n);
    st.counters["p50_ns"] = pct(0.5);
    st.counters["p99_ns"] = pct(0.99);
    st.counters["p999_ns"] = pct(0.999);
    st.counters["p9999_ns"] = pct(0.9999);
    st.counters["max_us"] = static_cast<double>(lat[n - 1]) / 1e3;
    st.counters["wall_s"] = secs;
    st.counters["writer_cpu_ns_per_add"] = cpu * 1e9 / static_cast<double>(n);
    st.counters["compactions"] = static_cast<double>(stats.compactions);
    st.counters["by_maintain"] = static_cast<double>(maintains.load());
    st.counters["links"] = static_cast<double>(stats.delta_links);
    st.counters["card"] = static_cast<double>(stats.cardinality);
    st.counters["total_MB"] = static_cast<double>(stats.total_bytes) / 1e6;
    set = RoaringSet();
    RoaringSet::drop(s.seg, "stream");
  }
}
// The "mean add <= 200 ns at 1.2e8 values": the mission's day, one id at a time.
BENCHMARK(BM_AddStreamLatency)->Args({10000000, 0})->Args({10000000, 1})->Args({120000000, 0})->Args({120000000, 1})
    ->Iterations(1)->Unit(benchmark::kMillisecond);

// Memory per element at the mission's sizes (one iteration each).
void BM_Mission_MemoryDense1e8(benchmark::State& st) {
  Seg s(64ull << 20);
  for (auto _ : st) {
    RoaringSet set = RoaringSet::create(s.seg, "dense", {});
    set.add_range(0, 100000000);
    auto stats = set.stats();
    roaring_bitmap_t* plain = roaring_bitmap_from_range(0, 100000000, 1);
    roaring_bitmap_remove_run_compression(plain);
    st.counters["bitmap_MB"] = static_cast<double>(roaring_bitmap_frozen_size_in_bytes(plain)) / 1e6;
    roaring_bitmap_free(plain);
    st.counters["snapshot_MB_runopt"] = static_cast<double>(stats.snapshot_bytes) / 1e6;
    st.counters["segment_MB_total"] = static_cast<double>(stats.total_bytes) / 1e6;
    st.counters["card"] = static_cast<double>(stats.cardinality);
    RoaringSet::drop(s.seg, "dense");
  }
}
BENCHMARK(BM_Mission_MemoryDense1e8)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_Mission_MemorySparse1_2e8(benchmark::State& st) {
  Seg s(1ull << 30);
  for (auto _ : st) {
    auto ids = shmf_bench::sparse_ids(120000000, 42);
    std::sort(ids.begin(), ids.end());  // sorted input appends to containers (unsorted: ~1.8 KB memmove each)
    roaring_bitmap_t* b = roaring_bitmap_of_ptr(ids.size(), ids.data());
    ids = {};
    RoaringSet set = RoaringSet::create(s.seg, "sparse", {});
    set.merge(b);
    roaring_bitmap_free(b);
    auto stats = set.stats();
    st.counters["snapshot_MB"] = static_cast<double>(stats.snapshot_bytes) / 1e6;
    st.counters["bytes_per_value"] = static_cast<double>(stats.snapshot_bytes) / static_cast<double>(stats.cardinality);
    st.counters["card"] = static_cast<double>(stats.cardinality);
    st.counters["array_containers"] = stats.array_containers;
    RoaringSet::drop(s.seg, "sparse");
  }
}
BENCHMARK(BM_Mission_MemorySparse1_2e8)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
