// bench/window_overload_bench.cpp: one window bucket driven from 1x to 8x its expected pairs
// (docs/window.md "Overload"), both variants: the latency of every mark_if_unseen (p50 / p99 /
// p99.9 / max per 1x step of load), the FP measured at each load over absent pairs (w = 1), the
// rate stats() reports and the bucket's layers and bytes; then the common case (a bucket at 1x)
// for seen w = 1 / w = 7 and mark_if_unseen answering seen, to compare builds.
//
//   window_overload_bench [--expected N (default 1e6)] [--absent N (default 200000)]
//                         [--error P (default 0.01)] [--error-window W (default 7)]
//
// Uses the public API only, so the same file builds against an older tree for a before/after.
// A plain program: it keeps every sample (bench/timed.h).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "shmfilter/window.hpp"
#include "timed.h"
#include "workload.h"

using namespace shmfilter;

namespace {
constexpr int64_t kDay = 86400;
constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00 UTC

double pct(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(i), v.end());
  return v[i];
}

// One segment of its own per run (removed first), and the window both runs measure.
Segment fresh_segment(const std::string& name) {
  CreateOptions co;
  co.size = 64ull << 20;
  co.max_size = 32ull << 30;
  Segment::remove(name);
  return Segment::create(name, co);
}

WindowOptions bench_options(WindowVariant variant, uint64_t n, double error, uint32_t error_window) {
  WindowOptions o;
  o.variant = variant;
  o.expected_per_bucket = n;
  o.error = error;
  o.error_window = error_window;
  o.retention = 7;
  o.max_spaces = 8192;
  o.seed = 5;
  return o;
}

void run(WindowVariant variant, uint64_t n, uint64_t n_absent, double error, uint32_t error_window) {
  const std::string name = "shmf_ovlbench_" + std::to_string(getpid());
  Segment seg = fresh_segment(name);
  Window w = Window::create(seg, "w", bench_options(variant, n, error, error_window));
  w.set_now(kT0);
  w.maintain();
  const double p1 = w.stats().one_bucket_error;
  auto keys = shmf_bench::distinct_keys(8 * n, 31);
  auto absent = shmf_bench::absent_keys(n_absent, 1234);
  std::vector<uint64_t> asp(absent.size());
  for (size_t i = 0; i < absent.size(); ++i) asp[i] = absent[i] % 8000;
  std::printf("\n### %s, expected %llu pairs, error %g over w = %u (one bucket p1 = %.4f%%)\n\n",
              std::string(window_variant_name(variant)).c_str(), static_cast<unsigned long long>(n), error,
              error_window, 100 * p1);
  std::printf("| load | mark_if_unseen p50 ns | p99 ns | p99.9 ns | max ns | calls > 50 us | kFull | FP measured (w=1) | FP reported now | over capacity | bucket MiB |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<double> all;
  all.reserve(8 * n);
  for (uint32_t load = 1; load <= 8; ++load) {
    std::vector<double> ns;
    ns.reserve(n);
    uint64_t full = 0;
    for (uint64_t i = (load - 1) * n; i < load * n; ++i) {
      const uint64_t space = keys[i] % 8000;
      const uint64_t t0 = shmf_bench::mono_ns();
      const WindowStatus st = w.mark_if_unseen(space, keys[i]);
      const uint64_t t1 = shmf_bench::mono_ns();
      ns.push_back(static_cast<double>(t1 - t0));
      full += st == WindowStatus::kFull;
    }
    all.insert(all.end(), ns.begin(), ns.end());
    std::vector<uint8_t> res(absent.size());
    const double fp = static_cast<double>(w.seen_many(asp, absent, 1, res)) / static_cast<double>(absent.size());
    const WindowStats st = w.stats();
    const double mx = *std::max_element(ns.begin(), ns.end());
    const auto slow = std::count_if(ns.begin(), ns.end(), [](double v) { return v > 50000; });
    const double p50 = pct(ns, 0.5), p99 = pct(ns, 0.99), p999 = pct(ns, 0.999);
    std::printf("| %ux | %.0f | %.0f | %.0f | %.0f | %lld | %llu | %.4f%% | %.4f%% | %s | %.1f |\n", load, p50, p99, p999, mx,
                static_cast<long long>(slow), static_cast<unsigned long long>(full), 100 * fp, 100 * st.buckets[0].fp_rate_now,
                st.buckets[0].over_capacity ? "yes" : "no", static_cast<double>(st.buckets[0].bytes) / (1 << 20));
    std::fflush(stdout);
  }
  const double mx = *std::max_element(all.begin(), all.end());
  const auto slow = std::count_if(all.begin(), all.end(), [](double v) { return v > 50000; });
  std::printf("| 1x-8x | %.0f | %.0f | %.0f | %.0f | %lld | | | | | |\n", pct(all, 0.5), pct(all, 0.99), pct(all, 0.999), mx,
              static_cast<long long>(slow));
  Window::drop(seg, "w");
  seg = Segment{};
  Segment::remove(name);
}

// The common case: a bucket at its expected load, 7 such days; single calls out of cache.
void common(WindowVariant variant, uint64_t n, uint64_t q, double error, uint32_t error_window) {
  const std::string name = "shmf_ovlbench_c_" + std::to_string(getpid());
  Segment seg = fresh_segment(name);
  Window w = Window::create(seg, "w", bench_options(variant, n, error, error_window));
  std::vector<uint64_t> last;
  for (int d = 0; d < 7; ++d) {
    w.set_now(kT0 + d * kDay);
    w.maintain();
    auto keys = shmf_bench::distinct_keys(n, 100 + static_cast<uint64_t>(d));
    std::vector<uint64_t> sp(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) sp[i] = keys[i] % 8000;
    w.mark_many(sp, keys, {});
    if (d == 6) last = keys;
  }
  auto absent = shmf_bench::absent_keys(q, 999);
  auto time = [&](auto&& fn) {
    std::vector<double> ns;
    ns.reserve(q);
    for (uint64_t i = 0; i < q; ++i) {
      const uint64_t t0 = shmf_bench::mono_ns();
      fn(i);
      const uint64_t t1 = shmf_bench::mono_ns();
      ns.push_back(static_cast<double>(t1 - t0));
    }
    return std::pair<double, double>(pct(ns, 0.5), pct(ns, 0.99));
  };
  volatile bool sink = false;
  auto s1 = time([&](uint64_t i) { sink = w.seen(absent[i] % 8000, absent[i], 1); });
  auto s7 = time([&](uint64_t i) { sink = w.seen(absent[i] % 8000, absent[i], 7); });
  auto ms = time([&](uint64_t i) { (void)w.mark_if_unseen(last[i] % 8000, last[i], 7); });
  (void)sink;
  std::printf("| %s common case (7 days at 1x, N = %llu) | seen w=1 p50 %.0f / p99 %.0f ns | seen w=7 %.0f / %.0f ns | "
              "mark_if_unseen w=7 (seen) %.0f / %.0f ns |\n",
              std::string(window_variant_name(variant)).c_str(), static_cast<unsigned long long>(n), s1.first, s1.second,
              s7.first, s7.second, ms.first, ms.second);
  Window::drop(seg, "w");
  seg = Segment{};
  Segment::remove(name);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 1000000, n_absent = 200000;
  double error = 0.01;
  uint32_t ew = 7;
  bool only_common = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--expected" && i + 1 < argc) n = static_cast<uint64_t>(std::atof(argv[++i]));
    else if (a == "--absent" && i + 1 < argc) n_absent = static_cast<uint64_t>(std::atof(argv[++i]));
    else if (a == "--error" && i + 1 < argc) error = std::atof(argv[++i]);
    else if (a == "--error-window" && i + 1 < argc) ew = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (a == "--common-only") only_common = true;
    else {
      std::fprintf(stderr, "usage: %s [--expected N] [--absent N] [--error P] [--error-window W] [--common-only]\n", argv[0]);
      return 2;
    }
  }
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) > 0) std::printf("load average at start: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  if (!only_common) {
    run(WindowVariant::kBloom, n, n_absent, error, ew);
    run(WindowVariant::kCuckoo, n, n_absent, error, ew);
  }
  std::printf("\n");
  common(WindowVariant::kBloom, n, n_absent, error, ew);
  common(WindowVariant::kCuckoo, n, n_absent, error, ew);
  if (getloadavg(load, 3) > 0) std::printf("load average at end: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
  return 0;
}
