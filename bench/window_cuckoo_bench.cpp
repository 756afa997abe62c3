// bench/window_cuckoo_bench.cpp: single-pair latency of the deletable (kCuckoo) Window,
// out of cache: seen over w = 1 and w = 7, mark_if_unseen over w = 7 answering seen and
// new, mark_if_unseen over w = 1 answering new, forget, and the batched
// mark_if_unseen_many per-pair cost; then the cost of the first mark_if_unseen after a
// rotation (the one that seals the older tables, docs/window.md "Answers and race bounds").
// Written to compare builds (before / after a change of the kCuckoo write path), so it
// prints one table in the format of bench/RESULTS.md.
//
//   window_cuckoo_bench [--pairs N (per day, default 1e7)] [--queries N (default 200000)]
//
// The window holds 7 days of N distinct pairs each (8,000 Zipf plans, the mission's
// generator), 1% over w = 7 (f = 16), so every query touches tables far larger than the
// last-level cache. A plain program: it needs every sample (bench/timed.h).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "shmfilter/window.hpp"
#include "timed.h"
#include "window_common.h"
#include "workload.h"

using namespace shmfilter;

namespace {
constexpr int64_t kDay = shmf_bench::kWinDay;
constexpr int64_t kT0 = shmf_bench::kWinT0;
constexpr uint32_t kPlans = shmf_bench::kWinPlans;
using Pair = shmf_bench::WinPair;
}  // namespace

int main(int argc, char** argv) {
  uint64_t pairs = 10000000, queries = 200000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--pairs" && i + 1 < argc) pairs = static_cast<uint64_t>(std::atof(argv[++i]));
    else if (a == "--queries" && i + 1 < argc) queries = static_cast<uint64_t>(std::atof(argv[++i]));
    else {
      std::fprintf(stderr, "usage: window_cuckoo_bench [--pairs N (per day, default 1e7)] [--queries N (default 2e5)]\n");
      return 2;
    }
  }
  shmf_bench::Clock clock;
  std::printf("# window_cuckoo_bench: %.3g pairs per day x 7 days, %llu queries per row, clock %s (cost %.1f ns)\n",
              static_cast<double>(pairs), (unsigned long long)queries, clock.source(), clock.cost_ns());
  const std::string seg_name = "shmf-bench-wcuckoo-" + std::to_string(getpid());
  CreateOptions co;
  co.size = 64ull << 20;
  co.max_size = 16ull << 30;
  Segment seg = Segment::create(seg_name, co);
  struct Cleanup {
    std::string n;
    ~Cleanup() { Segment::remove(n); }
  } cleanup{seg_name};
  WindowOptions wo;
  wo.variant = WindowVariant::kCuckoo;
  wo.expected_per_bucket = pairs + 4 * queries;  // the new answers below stay inside today's table
  wo.error = 0.01;
  wo.error_window = 7;
  wo.retention = 7;
  wo.max_spaces = kPlans + 192;
  wo.seed = 42;
  Window win = Window::create(seg, "window", wo);
  shmf_bench::WorkloadOptions wlo;
  wlo.scale = static_cast<double>(pairs) / 1.2e8;
  wlo.plans = kPlans;
  shmf_bench::Workload wl(wlo);
  auto pair_of = [&](uint64_t i) { return shmf_bench::win_pair(wl, i); };
  for (int d = 0; d < 7; ++d) {
    win.set_now(kT0 + d * kDay + 3600);
    win.maintain();
    const uint64_t t0 = shmf_bench::mono_ns();
    shmf_bench::mark_pairs(win, wl, uint64_t(d) * pairs, pairs);
    std::printf("day %d: mark_many %.1f ns/pair (wall, incl. pair generation)\n", d,
                static_cast<double>(shmf_bench::mono_ns() - t0) / static_cast<double>(pairs));
  }
  WindowStats st = win.stats();
  std::printf("window: %.1f MiB in all; bucket 0: capacity %llu, distinct %llu, %.1f MiB\n",
              static_cast<double>(st.memory_bytes) / 1048576.0, (unsigned long long)st.buckets[0].capacity,
              (unsigned long long)st.buckets[0].distinct, static_cast<double>(st.buckets[0].bytes) / 1048576.0);

  win.set_now(kT0 + 6 * kDay + 3600);
  shmf_bench::Rng rng(5);
  std::vector<Pair> absent(queries), present(queries), fresh(queries), fresh1(queries), fresh_b(queries);
  for (uint64_t i = 0; i < queries; ++i) {
    absent[i] = Pair{rng.below(kPlans), shmf_bench::mix64((uint64_t{7} << 50) + i)};
    present[i] = pair_of(6 * pairs + rng.below(pairs));  // today's pairs
    fresh[i] = Pair{rng.below(kPlans), shmf_bench::mix64((uint64_t{8} << 50) + i)};
    fresh1[i] = Pair{rng.below(kPlans), shmf_bench::mix64((uint64_t{10} << 50) + i)};
    fresh_b[i] = Pair{rng.below(kPlans), shmf_bench::mix64((uint64_t{11} << 50) + i)};
  }
  std::printf("\n| operation (kCuckoo, f = 16, 7 days) | p50 | p99 | p99.9 | mean |\n|---|---|---|---|---|\n");
  shmf_bench::Samples s;
  s.reserve(queries);
  uint64_t sink = 0;
  auto measure = [&](const char* what, auto&& fn) {
    s.clear();
    for (uint64_t i = 0; i < queries; ++i) {
      const uint64_t t0 = clock.now();
      sink += fn(i);
      const uint64_t t1 = clock.now();
      s.add(clock.ns_of(t0, t1));
    }
    std::printf("| %-44s | %8.1f | %8.1f | %8.1f | %8.1f |\n", what, s.pct(0.5), s.pct(0.99), s.pct(0.999), s.mean());
    std::fflush(stdout);
  };
  measure("seen w=1 (absent)", [&](uint64_t i) { return win.seen(absent[i].space, absent[i].item, 1); });
  measure("seen w=7 (absent)", [&](uint64_t i) { return win.seen(absent[i].space, absent[i].item, 7); });
  measure("mark_if_unseen w=7 (seen: today's pairs)", [&](uint64_t i) {
    return win.mark_if_unseen(present[i].space, present[i].item, 7) == WindowStatus::kSeen;
  });
  measure("mark_if_unseen w=7 (new)", [&](uint64_t i) {
    return win.mark_if_unseen(fresh[i].space, fresh[i].item, 7) == WindowStatus::kNew;
  });
  measure("mark_if_unseen w=1 (new)", [&](uint64_t i) {
    return win.mark_if_unseen(fresh1[i].space, fresh1[i].item, 1) == WindowStatus::kNew;
  });
  measure("forget (the pairs just marked new, w=7)", [&](uint64_t i) {
    return win.forget(fresh[i].space, fresh[i].item) == WindowStatus::kRemoved;
  });
  {
    std::vector<uint64_t> bs(queries), bi(queries);
    for (uint64_t i = 0; i < queries; ++i) {
      bs[i] = fresh_b[i].space;
      bi[i] = fresh_b[i].item;
    }
    const uint64_t t0 = shmf_bench::mono_ns();
    for (uint64_t at = 0; at < queries; at += 256) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(256, queries - at));
      sink += win.mark_if_unseen_many(std::span<const uint64_t>(bs.data() + at, n), std::span<const uint64_t>(bi.data() + at, n), 7);
    }
    std::printf("| %-44s | %8.1f ns/pair (wall, 256-pair calls, new answers) |\n", "mark_if_unseen_many w=7",
                static_cast<double>(shmf_bench::mono_ns() - t0) / static_cast<double>(queries));
  }
  // The first write after a rotation (day 7: the six older tables of the window are sealed by it,
  // or by nobody in a build without sealing), then the second.
  win.set_now(kT0 + 7 * kDay + 3600);
  win.maintain();
  for (int r = 0; r < 2; ++r) {
    const uint64_t t0 = clock.now();
    sink += win.mark_if_unseen(1, shmf_bench::mix64((uint64_t{12} << 50) + r), 7) == WindowStatus::kNew;
    const uint64_t t1 = clock.now();
    std::printf("| %-44s | %8.1f ns (one sample) |\n", r == 0 ? "first mark_if_unseen w=7 after the rotation" : "second one",
                clock.ns_of(t0, t1));
  }
  std::printf("\nrotation_races %llu, sink %llu\n", (unsigned long long)win.stats().rotation_races, (unsigned long long)sink);
  return 0;
}
