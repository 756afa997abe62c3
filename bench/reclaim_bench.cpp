// bench/reclaim_bench.cpp: does memory come back? (issue 22, "Memory comes back")
//
//   1. A clock-driven run of DAYS days (default 100): one window (kBloom, 7 buckets of
//      one day, expected = PAIRS per day), one process marking PAIRS distinct pairs a
//      day over 8,000 spaces, calling maintain() and quiesce() once a day, with the
//      clock injected (set_now: no waiting). Printed day by day: the segment file's
//      size (fstat of /dev/shm/NAME), the live bytes (SegmentStats::used_bytes: every
//      extent of a live structure), the quarantined and free bytes, and the bound the
//      issue asks for: 1.1 x live + one spare table (Window::plan().table_bytes).
//      Run twice: alone, and beside a second process that attached, opened the window,
//      made one call and then sits idle (a monitoring tool, an idle worker, a master).
//   2. The per-call cost of the reader announcement (docs/CONCURRENCY.md "Reader
//      announcements"): a ReadGuard alone, an in-cache Window::seen / mark (kSeen) per
//      call, and one dependent random read of a 64-byte line out of cache, for scale.
//      Built with -DRECLAIM_BENCH_NO_GUARD against an older libshmfilter it measures the
//      "before" numbers (no ReadGuard there; see bench/RESULTS.md for the command).
//
//   reclaim_bench [--days N (100)] [--pairs N per day (1.2e6)] [--initial-mib N (4)]
//                 [--no-run] [--no-cost] [--quiet]
//
// A plain program, not Google Benchmark: a run of simulated days, not a timed loop.
#include <fcntl.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "shmfilter/segment.hpp"
#include "shmfilter/window.hpp"

using namespace shmfilter;

namespace {

constexpr int64_t kDay = 86400;
constexpr int64_t kT0 = 1764547200;  // 2025-12-01 00:00 UTC
constexpr uint64_t kSpaces = 8000;

double mib(uint64_t b) { return static_cast<double>(b) / (1 << 20); }

uint64_t file_bytes(const std::string& name) {
  struct stat st {};
  if (stat(("/dev/shm/" + name).c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

struct DayRow {
  uint64_t file = 0, live = 0, quarantined = 0, free = 0, tables = 0;
};

struct RunResult {
  std::vector<DayRow> days;
  uint64_t spare = 0;      // one table (the bound's "+ one spare table")
  uint64_t max_file = 0;
  double worst_ratio = 0;  // max over days of file / (1.1 x live + spare)
  double worst_ratio_tables = 0;  // the same with the segment's own tables counted as live
};

RunResult run(int days, uint64_t pairs, uint64_t initial, bool idle_process, bool quiet) {
  const std::string name = "reclaim-bench-" + std::to_string(getpid()) + (idle_process ? "-idle" : "-alone");
  Segment::remove(name);
  CreateOptions co;
  co.size = initial;
  co.max_size = 16ull << 30;
  Segment seg = Segment::create(name, co);
  WindowOptions wo;
  wo.expected_per_bucket = pairs;
  wo.retention = 7;
  wo.seed = 1;
  Window w = Window::create(seg, "pairs", wo);
  RunResult res;
  res.spare = Window::plan(wo).table_bytes;

  pid_t idle = -1;
  int ready[2];
  if (pipe(ready) != 0) std::abort();
  if (idle_process) {
    idle = fork();
    if (idle == 0) {
      Segment s = Segment::open(name);
      Window iw = Window::open(s, "pairs");
      iw.set_now(kT0);
      (void)iw.seen(1, uint64_t{1});  // one call, then nothing: attached and idle
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(2);
      pause();
      _exit(0);
    }
    char c;
    if (read(ready[0], &c, 1) != 1) std::abort();
  }
  close(ready[0]);
  close(ready[1]);

  if (!quiet)
    std::printf("\n### %s: %d days x %.3g pairs/day, window expected %.3g/day, initial file %.0f MiB\n\n"
                "| day | file MiB | live MiB | quarantined MiB | free MiB | segment tables MiB | bound MiB (1.1 x live + spare) | file / bound |\n"
                "|---|---|---|---|---|---|---|---|\n",
                idle_process ? "beside an idle attached process" : "alone", days, static_cast<double>(pairs),
                static_cast<double>(pairs), mib(initial));
  std::vector<uint64_t> sp(4096), it(4096);
  for (int d = 0; d < days; ++d) {
    w.set_now(kT0 + d * kDay + 3600);
    w.maintain();
    for (uint64_t at = 0; at < pairs; at += sp.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(sp.size(), pairs - at));
      for (size_t i = 0; i < n; ++i) {
        const uint64_t k = at + i;
        sp[i] = (k * 0x9e3779b97f4a7c15ull >> 40) % kSpaces;
        it[i] = static_cast<uint64_t>(d) << 32 | k;  // distinct every day
      }
      w.mark_many(std::span<const uint64_t>(sp.data(), n), std::span<const uint64_t>(it.data(), n));
    }
    seg.quiesce();  // as the run did (this build no longer needs it)
    SegmentStats st = seg.stats();
    DayRow r{file_bytes(name), st.used_bytes, st.quarantined_bytes, st.free_bytes, 0};
    // The segment's own header and tables (undo log, free / quarantine tables, registry,
    // directory): fixed, 1.1 MiB with 4,096 directory entries.
    r.tables = st.size - st.used_bytes - st.free_bytes - st.quarantined_bytes;
    res.days.push_back(r);
    res.max_file = std::max(res.max_file, r.file);
    const double bound = 1.1 * static_cast<double>(r.live) + static_cast<double>(res.spare);
    const double ratio = static_cast<double>(r.file) / bound;
    res.worst_ratio = std::max(res.worst_ratio, ratio);
    res.worst_ratio_tables = std::max(
        res.worst_ratio_tables,
        static_cast<double>(r.file) / (1.1 * static_cast<double>(r.live + r.tables) + static_cast<double>(res.spare)));
    if (!quiet)
      std::printf("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |\n", d + 1, mib(r.file), mib(r.live),
                  mib(r.quarantined), mib(r.free), mib(r.tables), bound / (1 << 20), ratio);
  }
  if (idle > 0) {
    kill(idle, SIGKILL);
    waitpid(idle, nullptr, 0);
  }
  const DayRow& last = res.days.back();
  std::printf("\n%s: after %d days file %.1f MiB (max %.1f), live %.1f MiB, quarantined %.1f MiB, segment tables "
              "%.1f MiB, spare table %.1f MiB; worst day file / (1.1 x live + spare) = %.2f, with the segment's "
              "tables counted as live %.2f (target <= 1.00)\n",
              idle_process ? "beside an idle process" : "alone", days, mib(last.file), mib(res.max_file),
              mib(last.live), mib(last.quarantined), mib(last.tables), mib(res.spare), res.worst_ratio,
              res.worst_ratio_tables);
  w = Window();
  seg = Segment();
  Segment::remove(name);
  return res;
}

// ---- the announcement's cost ----------------------------------------------------------

// This thread's CPU time (a shared machine's waiting for a core is not the call's cost).
double cpu_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

template <class F>
double ns_per_op(uint64_t n, F&& f) {
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {  // best of 7: the machine is shared
    const double t0 = cpu_ns();
    f(n);
    best = std::min(best, (cpu_ns() - t0) / static_cast<double>(n));
  }
  return best;
}

void cost() {
  const std::string name = "reclaim-cost-" + std::to_string(getpid());
  Segment::remove(name);
  Segment seg = Segment::create(name, CreateOptions{});
  WindowOptions wo;
  wo.expected_per_bucket = 1000;
  wo.seed = 1;
  Window w = Window::create(seg, "w", wo);
  w.set_now(kT0);
  for (uint64_t i = 0; i < 256; ++i) w.mark(i % 7, i);
  std::printf("\n## Per-call cost of the reader announcement (best of 7 runs, thread CPU ns per call)\n\n");
  std::printf("| what | ns |\n|---|---|\n");
#ifndef RECLAIM_BENCH_NO_GUARD
  std::printf("| ReadGuard alone (enter + exit) | %.1f |\n", ns_per_op(20000000, [&](uint64_t n) {
                for (uint64_t i = 0; i < n; ++i) {
                  const ReadGuard g(seg);
                  asm volatile("" ::: "memory");
                }
              }));
  std::printf("| ReadGuard nested in another (enter + exit) | %.1f |\n", ns_per_op(20000000, [&](uint64_t n) {
                const ReadGuard outer(seg);
                for (uint64_t i = 0; i < n; ++i) {
                  const ReadGuard g(seg);
                  asm volatile("" ::: "memory");
                }
              }));
#endif
  volatile uint64_t sink = 0;
  std::printf("| Window::seen, w=7, in cache (256 pairs) | %.1f |\n", ns_per_op(5000000, [&](uint64_t n) {
                uint64_t hits = 0;
                for (uint64_t i = 0; i < n; ++i) hits += w.seen(i % 7, i & 255, 7);
                sink = hits;
              }));
  std::printf("| Window::mark, kSeen, in cache (256 pairs) | %.1f |\n", ns_per_op(5000000, [&](uint64_t n) {
                uint64_t s = 0;
                for (uint64_t i = 0; i < n; ++i) s += static_cast<uint64_t>(w.mark(i % 7, i & 255));
                sink = s;
              }));
  std::printf("| Window::seen_many, w=7, per pair (batches of 64) | %.1f |\n", ns_per_op(5000000, [&](uint64_t n) {
                uint64_t sp[64], it[64], hits = 0;
                for (uint64_t i = 0; i < n; i += 64) {
                  for (uint64_t j = 0; j < 64; ++j) {
                    sp[j] = (i + j) % 7;
                    it[j] = (i + j) & 255;
                  }
                  hits += w.seen_many(sp, it, 7);
                }
                sink = hits;
              }));
  // One dependent random read out of cache: a pointer chase over 256 MiB.
  const size_t lines = (256u << 20) / 64;
  std::vector<uint64_t> buf(lines * 8);
  std::vector<uint32_t> perm(lines);
  for (size_t i = 0; i < lines; ++i) perm[i] = static_cast<uint32_t>(i);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(7));
  for (size_t i = 0; i < lines; ++i) buf[perm[i] * 8ull] = perm[(i + 1) % lines] * 8ull;
  std::printf("| one dependent random read, 256 MiB buffer | %.1f |\n", ns_per_op(2000000, [&](uint64_t n) {
                uint64_t p = 0;
                for (uint64_t i = 0; i < n; ++i) p = buf[p];
                sink = p;
              }));
  (void)sink;
  w = Window();
  seg = Segment();
  Segment::remove(name);
}

}  // namespace

int main(int argc, char** argv) {
  int days = 100;
  uint64_t pairs = 1200000, initial = 4ull << 20;
  bool do_run = true, do_cost = true, quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string("0"); };
    if (a == "--days") days = std::atoi(next().c_str());
    else if (a == "--pairs") pairs = static_cast<uint64_t>(std::atof(next().c_str()));
    else if (a == "--initial-mib") initial = static_cast<uint64_t>(std::atof(next().c_str()) * (1 << 20));
    else if (a == "--no-run") do_run = false;
    else if (a == "--no-cost") do_cost = false;
    else if (a == "--quiet") quiet = true;
    else {
      std::fprintf(stderr, "usage: reclaim_bench [--days N] [--pairs N] [--initial-mib N] [--no-run] [--no-cost] [--quiet]\n");
      return 2;
    }
  }
  if (days < 1 || pairs < 1) return 2;
  std::printf("# reclaim_bench: %d days, %.3g pairs/day\n", days, static_cast<double>(pairs));
  int rc = 0;
  if (do_run) {
    RunResult alone = run(days, pairs, initial, false, quiet);
    RunResult idle = run(days, pairs, initial, true, quiet);
    std::printf("\nsummary: worst file/bound alone %.2f, beside an idle process %.2f; max file %.1f vs %.1f MiB\n",
                alone.worst_ratio, idle.worst_ratio, mib(alone.max_file), mib(idle.max_file));
    if (idle.worst_ratio > 1.0) rc = 1;
  }
  if (do_cost) cost();
  return rc;
}
