// bench/scrape_bench.cpp: what a /metrics scrape costs at the mission's 8,000 plans (#22
// "Scrapes are cheap at any number of plans"): the size and time of prometheus_text()
// (= `shmtool stats --prometheus`, the nginx module's shmfilter_status, Python's
// Segment.prometheus_text()) on a segment holding one 7-day window with 8,000 spaces and
// 8,000 per-plan HLLs ("uv:plan-N", the documented per-name pattern, 200 IDs each), with
// the default bounds and with every structure's series (what every scrape printed before
// the bounds: MetricsOptions{max_structures = all, max_bytes = unbounded}).
//   scrape_bench [STRUCTURES (default 8000)] [REPEATS (default 21)] [--defaults-only] [--keep]
// --keep leaves the segment (shmf-bench-scrape) for `time shmtool stats shmf-bench-scrape --prometheus`.
// Prints one line per mode: bytes, lines, and the median and max of each scrape's wall
// time and of its CPU time (CLOCK_THREAD_CPUTIME_ID: what the scrape itself costs, apart
// from time spent waiting for a core on a loaded machine).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "shmfilter/hll.hpp"
#include "shmfilter/metrics.hpp"
#include "shmfilter/window.hpp"

using namespace shmfilter;

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 8000;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 21;
  bool defaults_only = false, keep = false;  // --defaults-only: for a profiler; --keep: leave the segment for shmtool
  for (int i = 3; i < argc; ++i) {
    defaults_only = defaults_only || std::string(argv[i]) == "--defaults-only";
    keep = keep || std::string(argv[i]) == "--keep";
  }
  const char* name = "shmf-bench-scrape";
  CreateOptions co;
  co.size = 256ull << 20;
  co.max_size = 4ull << 30;
  co.directory_capacity = static_cast<uint32_t>(n + 64);
  Segment::remove(name);
  Segment seg = Segment::create(name, co);
  WindowOptions wo;
  wo.expected_per_bucket = 1000000;
  wo.retention = 7;
  wo.max_spaces = 8192;
  wo.seed = 1;
  Window w = Window::create(seg, "freqcap", wo);
  for (uint64_t i = 0; i < 80000; ++i) w.mark_if_unseen(i % 8000, i);
  for (int p = 0; p < n; ++p) {
    Hll h = Hll::create(seg, "uv:plan-" + std::to_string(p));
    for (uint64_t i = 0; i < 200; ++i) h.add(i * 7919 + static_cast<uint64_t>(p) * 1000003);
  }
  struct Mode {
    const char* what;
    MetricsOptions o;
  };
  MetricsOptions all;
  all.max_structures = UINT32_MAX;
  all.max_bytes = UINT64_MAX;
  MetricsOptions kinds_only;
  kinds_only.max_structures = 0;
  const Mode modes[] = {{"defaults (64 structures, kinds taking turns; per-kind rows)", MetricsOptions{}},
                        {"max_structures 0 (the segment's and per-kind rows only)", kinds_only},
                        {"every structure (the unbounded text, as before the bounds)", all}};
  int reps_all = reps;
  std::printf("segment: 1 window (8,000 spaces) + %d HLLs\n", n);
  for (const Mode& m : modes) {
    if (defaults_only && &m != &modes[0]) break;
    if (&m == &modes[2] && reps > 5) reps_all = 5;  // the unbounded text: a few scrapes suffice
    std::vector<double> ms, cpu;
    size_t bytes = 0, lines = 0;
    for (int r = 0; r < (&m == &modes[2] ? reps_all : reps); ++r) {
      timespec c0{}, c1{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
      const auto a = std::chrono::steady_clock::now();
      const std::string t = prometheus_text(seg, m.o);
      const auto b = std::chrono::steady_clock::now();
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
      ms.push_back(std::chrono::duration<double, std::milli>(b - a).count());
      cpu.push_back(static_cast<double>(c1.tv_sec - c0.tv_sec) * 1e3 +
                    static_cast<double>(c1.tv_nsec - c0.tv_nsec) / 1e6);
      bytes = t.size();
      lines = static_cast<size_t>(std::count(t.begin(), t.end(), '\n'));
    }
    std::sort(ms.begin(), ms.end());
    std::sort(cpu.begin(), cpu.end());
    std::printf(
        "%s:\n  %zu bytes, %zu lines; wall median %.2f ms, max %.2f ms; CPU median %.2f ms, max %.2f ms (%d scrapes)\n",
        m.what, bytes, lines, ms[ms.size() / 2], ms.back(), cpu[cpu.size() / 2], cpu.back(),
        static_cast<int>(ms.size()));
  }
  if (!keep) Segment::remove(name);  // the name only: this process's mapping stays until exit
  return 0;
}
