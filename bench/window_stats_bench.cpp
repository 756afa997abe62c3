// bench/window_stats_bench.cpp: what Window::stats() costs (every metrics scrape calls it,
// shmf_segment_prometheus_text / lib/ops/metrics.cpp): both variants, 8 tables (7 buckets
// and the spare), 50 calls; beside it the work the first version did on top (re-sizing each
// table from its capacity, 15 blocked-sizing searches per call).
//   window_stats_bench [PAIRS_PER_BUCKET (default 1e6)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "shmfilter/window.hpp"
#include "structures/window/window_ops.h"
using namespace shmfilter;
int main(int argc, char** argv) {
  const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  CreateOptions co; co.size = 64ull << 20; co.max_size = 4ull << 30;
  Segment::remove("shmf-bench-window-stats");
  Segment seg = Segment::create("shmf-bench-window-stats", co);
  for (int v = 0; v < 2; ++v) {
    WindowOptions o; o.variant = v ? WindowVariant::kCuckoo : WindowVariant::kBloom; o.expected_per_bucket = n; o.error = 0.01;
    o.error_window = 1; o.seed = 1;
    std::string name = v ? "c" : "b";
    Window w = Window::create(seg, name, o);
    const int64_t t0 = 1764547200;
    for (int d = 0; d < 8; ++d) { w.set_now(t0 + d * 86400); w.maintain(); for (uint64_t i = 0; i < 1000; ++i) w.mark(i % 7, i + d * 100000); }
    std::vector<double> ts;
    for (int r = 0; r < 50; ++r) {
      auto a = std::chrono::steady_clock::now();
      WindowStats st = w.stats();
      auto b = std::chrono::steady_clock::now();
      ts.push_back(std::chrono::duration<double, std::micro>(b - a).count());
      if (st.buckets.size() != 7) return 1;
    }
    std::sort(ts.begin(), ts.end());
    // The old per-table cost: re-sizing a table from its capacity (what stats() did per slot and per bucket).
    auto* h = reinterpret_cast<const internal::window::WindowHeader*>(seg.base() + seg.find(name)->offset);
    auto a = std::chrono::steady_clock::now();
    uint64_t sink = 0;
    for (int r = 0; r < 15; ++r) sink += internal::window_ops::table_bytes_for(h, n);
    auto b = std::chrono::steady_clock::now();
    std::printf("%s n=%llu: stats() p50 %.1f us, min %.1f us, max %.1f us; 15 x table_bytes_for(capacity) (the old extra work) %.1f us (%llu)\n",
                v ? "cuckoo" : "bloom", (unsigned long long)n, ts[ts.size() / 2], ts.front(), ts.back(),
                std::chrono::duration<double, std::micro>(b - a).count(), (unsigned long long)(sink & 1));
  }
  Segment::remove("shmf-bench-window-stats");
}
