// bench/bloom_bench.cpp: Bloom contains/add, one at a time and batched,
// blocked vs classic (k = 7 at 1%), for a filter that fits in L2 and one of
// 512 MiB (>= 10x the last-level cache of the reference machine: 32 MiB L3),
// all in one run. Keys are 64-bit device ids (tests/support/workload.h).
//
//   build/bench/bloom_bench [--benchmark_filter=...] [--benchmark_min_time=0.5]
//
// Filters live in one segment in /dev/shm, created at start and removed at
// exit. The big filters are filled to 90% of capacity before the first
// benchmark that uses them (a few seconds, batched adds, not timed).
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "structures/bloom/bloom_impl.h"
#include "shmfilter/bloom.hpp"
#include "workload.h"

using namespace shmfilter;

namespace {

constexpr uint64_t kSmallCapacity = 400000;  // ~0.48 MiB: inside one core's 2 MiB L2
constexpr uint64_t kBigBytes = 512ull << 20;  // 16x the 32 MiB L3
constexpr size_t kQueryKeys = 1 << 20;
constexpr size_t kBatch = 1024;

Segment g_seg;
std::string g_seg_name;

struct Filter {
  Bloom bloom;
  uint64_t capacity = 0;
  uint64_t filled = 0;          // keys added so far (distinct_keys(.., seed 1) prefix)
  std::vector<uint64_t> present;  // sample of added keys
};
std::map<std::string, Filter> g_filters;
std::vector<uint64_t> g_absent;

uint64_t capacity_for_bytes(BloomLayout l, uint64_t bytes) {
  // bits/key: blocked 10.00 at 1%, classic 9.585 (1.2e8 -> 137 MiB)
  double bpk = l == BloomLayout::kBlocked ? 10.0 : 9.5851;
  return static_cast<uint64_t>(static_cast<double>(bytes) * 8 / bpk);
}

Filter& filter(BloomLayout l, bool big) {
  std::string name = std::string(bloom_layout_name(l)) + (big ? "-big" : "-small");
  auto it = g_filters.find(name);
  if (it != g_filters.end()) return it->second;
  Filter f;
  BloomOptions o;
  o.layout = l;
  o.error = 0.01;
  o.capacity = big ? capacity_for_bytes(l, kBigBytes) : kSmallCapacity;
  o.seed = 42;
  f.bloom = Bloom::create(g_seg, name, o);
  f.capacity = o.capacity;
  // Fill to 90% of capacity in chunks (keys of seed 1, domain disjoint from g_absent).
  uint64_t target = o.capacity * 9 / 10;
  std::vector<uint64_t> chunk(1 << 20);
  for (uint64_t at = 0; at < target; at += chunk.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), target - at));
    for (size_t i = 0; i < n; ++i) chunk[i] = shmf_bench::mix64((uint64_t{1} << 40) + at + i);
    f.bloom.add_many(std::span<const uint64_t>(chunk.data(), n));
  }
  f.filled = target;
  shmf_bench::Rng r(7);
  f.present.resize(kQueryKeys);
  for (auto& k : f.present) k = shmf_bench::mix64((uint64_t{1} << 40) + r.below(target));
  BloomStats st = f.bloom.stats();
  std::fprintf(stderr, "# %s: %s, %llu keys, k=%u, fill %.3f, FP now %.3f%%\n", name.c_str(),
               format_size(st.memory_bytes).c_str(), (unsigned long long)target, st.k, st.fill_ratio, 100 * st.fp_rate_now);
  return g_filters.emplace(name, std::move(f)).first->second;
}

BloomLayout layout_arg(const benchmark::State& s) { return s.range(0) == 0 ? BloomLayout::kBlocked : BloomLayout::kClassic; }

void label(benchmark::State& s, const char* what) {
  s.SetLabel(std::string(bloom_layout_name(layout_arg(s))) + (s.range(1) ? "/512MiB" : "/in-L2") + "/" + what);
  s.SetItemsProcessed(static_cast<int64_t>(s.iterations()) * (s.range(2) ? static_cast<int64_t>(kBatch) : 1));
}

// range(0): 0 blocked, 1 classic; range(1): 0 in-L2, 1 512 MiB; range(2): 0 single, 1 batched.
void BM_ContainsAbsent(benchmark::State& s) {
  Filter& f = filter(layout_arg(s), s.range(1) != 0);
  size_t i = 0;
  if (s.range(2) == 0) {
    for (auto _ : s) {
      benchmark::DoNotOptimize(f.bloom.contains(g_absent[i]));
      i = (i + 1) & (kQueryKeys - 1);
    }
  } else {
    std::vector<uint8_t> out(kBatch);
    for (auto _ : s) {
      benchmark::DoNotOptimize(f.bloom.contains_many(std::span<const uint64_t>(g_absent.data() + i, kBatch), out));
      i = (i + kBatch) & (kQueryKeys - 1);
    }
  }
  label(s, "absent");
}

void BM_ContainsPresent(benchmark::State& s) {
  Filter& f = filter(layout_arg(s), s.range(1) != 0);
  size_t i = 0;
  if (s.range(2) == 0) {
    for (auto _ : s) {
      benchmark::DoNotOptimize(f.bloom.contains(f.present[i]));
      i = (i + 1) & (kQueryKeys - 1);
    }
  } else {
    std::vector<uint8_t> out(kBatch);
    for (auto _ : s) {
      benchmark::DoNotOptimize(f.bloom.contains_many(std::span<const uint64_t>(f.present.data() + i, kBatch), out));
      i = (i + kBatch) & (kQueryKeys - 1);
    }
  }
  label(s, "present");
}

// Adds fresh keys (never added before). The small filter is cleared (untimed)
// whenever it reaches capacity, so every add is a real insert at 0-100% fill.
void BM_Add(benchmark::State& s) {
  Filter& f = filter(layout_arg(s), s.range(1) != 0);
  const bool batched = s.range(2) != 0;
  std::vector<uint64_t> keys(kBatch);
  auto refill = [&] {
    if (f.filled + kBatch > f.capacity) {
      f.bloom.clear();
      f.filled = 0;
    }
    for (size_t i = 0; i < kBatch; ++i) keys[i] = shmf_bench::mix64((uint64_t{1} << 40) + f.filled + i);
    f.filled += kBatch;
  };
  for (auto _ : s) {
    s.PauseTiming();
    refill();
    s.ResumeTiming();
    if (batched) {
      benchmark::DoNotOptimize(f.bloom.add_many(keys));
    } else {
      size_t n = 0;
      for (uint64_t k : keys) n += f.bloom.add(k);
      benchmark::DoNotOptimize(n);
    }
  }
  s.SetLabel(std::string(bloom_layout_name(layout_arg(s))) + (s.range(1) ? "/512MiB" : "/in-L2") + "/add");
  s.SetItemsProcessed(static_cast<int64_t>(s.iterations()) * static_cast<int64_t>(kBatch));
}

namespace bi = shmfilter::internal::bloom;

// The kernels alone over 512 MiB of private anonymous memory, once with
// MADV_HUGEPAGE (THP is "madvise" for anonymous memory on the reference
// machine, "never" for /dev/shm) and once with MADV_NOHUGEPAGE: how much of
// the out-of-cache cost is the 4 KiB-page TLB miss (a two-dimensional page
// walk under KVM). Same keys, seed, sizing and 90% fill as the filters above.
struct KernelArrays {
  bi::LayerView huge, small_pages;
};
std::map<int, KernelArrays> g_kernel;

std::byte* map_aligned(size_t bytes, int advice) {
  const size_t two_mib = size_t{2} << 20;
  size_t map_bytes = (bytes + two_mib - 1) & ~(two_mib - 1);
  void* mem = mmap(nullptr, map_bytes + two_mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) std::abort();
  auto* aligned = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(mem) + two_mib - 1) & ~uintptr_t{two_mib - 1});
  madvise(aligned, map_bytes, advice);
  return aligned;
}

KernelArrays& kernel_arrays(BloomLayout l) {
  int key = static_cast<int>(l);
  auto it = g_kernel.find(key);
  if (it != g_kernel.end()) return it->second;
  const uint32_t code = l == BloomLayout::kClassic ? bi::kLayoutClassic : bi::kLayoutBlocked;
  const uint64_t cap = capacity_for_bytes(l, kBigBytes);
  bi::Sizing z;
  bi::size_layer(code, cap, 0.01, z);
  bi::BloomLayer s{};
  s.bits = z.bits;
  s.k = z.k;
  const uint64_t bytes = bi::layer_extent_bytes(z.bits);
  KernelArrays a;
  a.huge = bi::view_of(map_aligned(bytes, MADV_HUGEPAGE), s, code);
  const uint64_t target = cap * 9 / 10;
  uint64_t hs[16];
  for (uint64_t at = 0; at < target; at += 16) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(16, target - at));
    for (size_t j = 0; j < n; ++j) {
      hs[j] = shmfilter::internal::hash_key(shmf_bench::mix64((uint64_t{1} << 40) + at + j), 42);
      a.huge.prefetch(hs[j]);
    }
    for (size_t j = 0; j < n; ++j) a.huge.add(hs[j]);
  }
  std::byte* small = map_aligned(bytes, MADV_NOHUGEPAGE);
  std::memcpy(small, reinterpret_cast<std::byte*>(a.huge.stripes), bytes);
  a.small_pages = bi::view_of(small, s, code);
  if (FILE* sm = std::fopen("/proc/self/smaps_rollup", "r")) {  // did THP back it?
    char line[256];
    while (std::fgets(line, sizeof line, sm))
      if (std::strncmp(line, "AnonHugePages", 13) == 0) std::fprintf(stderr, "# after %s kernel arrays: %s", bloom_layout_name(l).data(), line);
    std::fclose(sm);
  }
  return g_kernel.emplace(key, a).first->second;
}

// range(0): layout; range(1): 0 single, 1 batched (16 in flight, as Bloom::contains_many);
// range(2): 1 huge pages, 0 4 KiB pages.
void BM_KernelAbsent(benchmark::State& s) {
  BloomLayout l = s.range(0) == 0 ? BloomLayout::kBlocked : BloomLayout::kClassic;
  KernelArrays& a = kernel_arrays(l);
  const bi::LayerView& v = s.range(2) ? a.huge : a.small_pages;
  size_t i = 0;
  uint64_t hs[16];
  for (auto _ : s) {
    if (s.range(1) == 0) {
      for (size_t j = 0; j < 16; ++j) benchmark::DoNotOptimize(v.contains(shmfilter::internal::hash_key(g_absent[i + j], 42)));
    } else {
      for (size_t j = 0; j < 16; ++j) {
        hs[j] = shmfilter::internal::hash_key(g_absent[i + j], 42);
        v.prefetch(hs[j]);
      }
      for (size_t j = 0; j < 16; ++j) benchmark::DoNotOptimize(v.contains(hs[j]));
    }
    i = (i + 16) & (kQueryKeys - 1);
  }
  s.SetLabel(std::string(bloom_layout_name(l)) + (s.range(2) ? "/512MiB-2MiB-pages" : "/512MiB-4KiB-pages") +
             (s.range(1) ? "/batched" : "/single") + "/absent");
  s.SetItemsProcessed(static_cast<int64_t>(s.iterations()) * 16);
}
BENCHMARK(BM_KernelAbsent)->ArgsProduct({{0, 1}, {0, 1}, {1, 0}});

void args(benchmark::internal::Benchmark* b) {
  for (int big : {0, 1})
    for (int batched : {0, 1})
      for (int layout : {0, 1}) b->Args({layout, big, batched});
}
BENCHMARK(BM_ContainsAbsent)->Apply(args);
BENCHMARK(BM_ContainsPresent)->Apply(args);
BENCHMARK(BM_Add)->Apply(args);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  g_seg_name = "shmf-bench-bloom-" + std::to_string(getpid());
  CreateOptions o;
  o.size = 64ull << 20;
  o.max_size = 4ull << 30;
  g_seg = Segment::create(g_seg_name, o);
  g_absent = shmf_bench::absent_keys(kQueryKeys, 1);  // seed-1 domain, never added
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  g_filters.clear();
  Segment::remove(g_seg_name);
  return 0;
}
