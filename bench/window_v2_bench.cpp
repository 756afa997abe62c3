// bench/window_v2_bench.cpp: every window variant in one run, for issue 24's "Done means":
// for each variant the w = 1 and w = 7 costs of seen and mark_if_unseen (single calls and
// batched, out of cache), memory for the mission's week (plan(): 1.2e8 new pairs a day, 7
// buckets, 1% over w = 7, spare tables and metadata included; stats() measured at this run's
// size), measured FP at 1x and 8x load, beside the machine's floor (bench/floor.h) and a plain
// blocked Bloom `contains` of the same size. Ends with one markdown table (rows: measures;
// columns: variants), the targets as ratios of p50s measured in this run.
//
//   window_v2_bench [--scale S (pairs a day = S x 1.2e8; default 1: the mission)] [--queries N (default 2e5)]
//                   [--fp-queries N (default 1e6)] [--overload-expected N (default 1e6)]
//                   [--variant NAME]... [--block N (default: none)]
//
// Variants: every WindowVariant value Window::plan accepts (bench/window_common.h), named by
// window_variant_name; --variant NAME (repeatable) keeps only those.
//
// For each variant, in its own segment (dropped before the next):
//   1. a window of N = S x 1.2e8 expected pairs a bucket, 1% over w = 7, retention 7, filled
//      with 7 days of N distinct (plan, device) pairs (8,000 Zipf plans, tests/support/
//      workload.h), maintain() at each day's start; today gets N minus the fresh pairs the
//      write rows below add, so it ends the run at exactly N (no overflow during the rows);
//   2. the floor over a /dev/shm buffer of the window's bytes (stats().memory_bytes): one
//      dependent random line, two lines at once (a cuckoo lookup's buckets), 7 lines at once
//      (a ring query over w = 7), independent reads (the batched floor);
//   3. (once, before the first variant, in a segment of their own) two plain blocked Bloom
//      filters at the window's one-bucket error, filled to capacity: one holding the week's
//      7 N pairs (what the window holds: "the same size"), one holding one bucket's N (the
//      bits of one kBloom bucket table);
//   4. single calls, out of cache (the week is >= ~1 GiB at S >= 0.5, the LLC far less):
//      plain contains (both), seen w=1, seen w=7 of absent pairs; then mark_if_unseen w=1 and
//      w=7 of fresh pairs (answer kNew); each row its own phase of --queries calls after a
//      sweep of 2x the LLC, as the floor is measured (--block N: the rows take turns every N
//      calls instead, one sweep at the start; see phases());
//   5. batched, calls of 256 pairs, the same way: contains_many, seen_many w=1 / w=7, then
//      mark_if_unseen_many w=1 / w=7 (fresh): the median call's ns per pair;
//   6. FP at 1x: --fp-queries absent pairs, w = 1 and w = 7, beside stats()' bound;
//   7. FP at 8x: a window of its own of --overload-expected pairs a bucket (the rate does not
//      depend on the size), 7 days at 1x, FP; then today driven to 8x its expected pairs
//      (mark_many), FP again, kFull answers, today's bytes.
// Every sample is kept (bench/timed.h: fenced rdtsc, the clock's own cost subtracted); the
// table reports p50s, and each ratio is of two p50s of this run. The load average is printed
// at the start and the end of every variant: the machine may be shared.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "shmfilter/bloom.hpp"
#include "shmfilter/window.hpp"
#include "floor.h"
#include "timed.h"
#include "window_common.h"
#include "workload.h"

using namespace shmfilter;
using shmf_bench::kWinDay;
using shmf_bench::kWinPlans;
using shmf_bench::kWinT0;
using shmf_bench::WinPair;

namespace {

struct Opts {
  double scale = 1.0;
  uint64_t queries = 200000;
  uint64_t fp_queries = 1000000;
  uint64_t overload_expected = 1000000;
  uint64_t block = UINT64_MAX;  // >= queries: each row its own phase
  std::vector<std::string> only;
};

double mib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

const uint64_t g_start_ns = shmf_bench::mono_ns();
// "[  12 s]": seconds since the start, at the head of every progress line.
std::string stamp() {
  char b[32];
  std::snprintf(b, sizeof b, "[%4.0f s]", static_cast<double>(shmf_bench::mono_ns() - g_start_ns) / 1e9);
  return b;
}

std::string loadavg() {
  double l[3] = {0, 0, 0};
  if (getloadavg(l, 3) < 3) return "?";
  char b[64];
  std::snprintf(b, sizeof b, "%.2f %.2f %.2f", l[0], l[1], l[2]);
  return b;
}

// p50 / p99 of one row.
struct Cost {
  double p50 = 0, p99 = 0;
};

// What one variant measured.
struct Result {
  std::string name;
  uint64_t n = 0;                // pairs a bucket in this run
  uint64_t week_mission = 0;     // plan(): 1.2e8 a bucket, 1% over w = 7, 7 buckets, all tables + spare + region
  uint64_t day_mission = 0;      // plan(): 1.2e8, 1%, retention 1
  uint64_t week_plan_run = 0;    // plan() at this run's N
  uint64_t week_measured = 0;    // stats().memory_bytes after the fill (this run's N)
  double bits_per_pair = 0;      // plan() at the mission's week: table bits / capacity
  double fill_ns = 0;            // mark_many, ns a pair (wall, the 7 days)
  shmf_bench::Floor floor;
  uint64_t plain_bytes = 0;       // plain Bloom of the window's bytes
  uint64_t day_bytes = 0;         // plain Bloom of one bucket's pairs
  Cost plain, day, seen1, seen7, mi1, mi7;           // single calls
  double b_plain = 0, b_seen1 = 0, b_seen7 = 0, b_mi1 = 0, b_mi7 = 0;  // batched, ns a pair (median call)
  double fp1_w1 = 0, fp1_w7 = 0, bound_w1 = 0, bound_w7 = 0;
  double ov_fp1_w1 = 0, ov_fp1_w7 = 0, ov_fp8_w1 = 0, ov_fp8_w7 = 0, ov_bound8_w7 = 0;
  uint64_t ov_full = 0, ov_bytes1 = 0, ov_bytes101 = 0, ov_bytes2 = 0, ov_bytes8 = 0;  // stats().memory_bytes: the whole window, 1x and 8x
  uint32_t ov_layers = 0;
  bool ov_over_capacity = false;
  std::string load_start, load_end;
};

WindowOptions week_options(WindowVariant v, uint64_t n) {
  WindowOptions o;
  o.variant = v;
  o.expected_per_bucket = n;
  o.error = 0.01;
  o.error_window = 7;
  o.retention = 7;
  o.max_spaces = kWinPlans + 192;
  o.seed = 42;
  o.now = kWinT0;
  return o;
}

Segment fresh_segment(const std::string& name) {
  CreateOptions co;
  co.size = 64ull << 20;
  co.max_size = 48ull << 30;
  Segment::remove(name);
  return Segment::create(name, co);
}

// K operations over queries 0 .. n - 1 in calls of `unit` queries (1: single calls; kRound:
// batched), each call timed on its own; a sample is the call's ns per query. fn(j, i, unit)
// runs operation j on queries i .. i + unit - 1. block >= n (the default): operation 0 runs all
// its calls, then operation 1, ..., each after a cache sweep, as bench/floor.h measures the
// floor; block < n: the operations take turns every `block` queries (one sweep at the start),
// so a load that drifts during the run weighs on all of them alike, but each block then starts
// with its own lines (page-table lines included) pushed out by the others' blocks: at --scale
// 0.3 a 541 MiB plain Bloom's contains measured 410 ns p50 with --block 1000, 260 ns without.
constexpr size_t kRound = 256;
template <size_t K, class Fn>
std::array<shmf_bench::Samples, K> phases(const shmf_bench::Clock& clk, uint64_t n, uint64_t block, uint64_t unit,
                                          shmf_bench::CacheSweep& sweep, Fn&& fn) {
  std::array<shmf_bench::Samples, K> s;
  for (auto& x : s) x.reserve(n / unit + 1);
  const bool sequential = block >= n;
  if (!sequential) sweep.run();
  block = std::max(unit, block / unit * unit);
  uint64_t sink = 0;
  for (uint64_t b = 0; b < n; b += block) {
    const uint64_t e = std::min(n, b + block);
    for (size_t j = 0; j < K; ++j) {
      if (sequential) sweep.run();
      for (uint64_t i = b; i + unit <= e; i += unit) {
        const uint64_t t0 = clk.now();
        sink += fn(j, i, unit);
        const uint64_t t1 = clk.now();
        s[j].add(clk.ns_of(t0, t1) / static_cast<double>(unit));
      }
    }
  }
  shmf_bench::keep(sink);
  return s;
}

Cost cost_of(shmf_bench::Samples& s) { return Cost{s.pct(0.5), s.pct(0.99)}; }

// Fraction of `n` absent pairs (never marked: their items come from a domain of their own)
// that a query over w answers seen.
double measured_fp(const Window& w, uint64_t n, uint32_t wdw, uint64_t salt) {
  std::vector<uint64_t> sp(n), it(n);
  shmf_bench::Rng r(salt);
  for (uint64_t i = 0; i < n; ++i) {
    sp[i] = r.below(kWinPlans);
    it[i] = shmf_bench::mix64((salt << 48) + i);
  }
  return static_cast<double>(w.seen_many(sp, it, wdw)) / static_cast<double>(n);
}

// The week at 1x then today at 8x, in a segment of its own (step 7).
void overload(WindowVariant v, const Opts& o, Result& r) {
  const std::string name = "shmf-bench-winv2-ovl-" + std::to_string(getpid());
  Segment seg = fresh_segment(name);
  const uint64_t m = o.overload_expected;
  Window w = Window::create(seg, "w", week_options(v, m));
  shmf_bench::WorkloadOptions wlo;
  wlo.scale = static_cast<double>(m) / 1.2e8;
  wlo.plans = kWinPlans;
  wlo.seed = 7;
  shmf_bench::Workload wl(wlo);
  for (int d = 0; d < 7; ++d) {
    w.set_now(kWinT0 + d * kWinDay + 3600);
    w.maintain();
    shmf_bench::mark_pairs(w, wl, static_cast<uint64_t>(d) * m, m);
  }
  r.ov_fp1_w1 = measured_fp(w, o.fp_queries, 1, 21);
  r.ov_fp1_w7 = measured_fp(w, o.fp_queries, 7, 22);
  r.ov_bytes1 = w.stats().memory_bytes;
  // Today from 1x to 8x: 7 m more distinct pairs, counting the answers that stored nothing; the
  // window's bytes are also taken at 1.01x and 2x (the first pairs past what the sizing holds).
  std::vector<uint64_t> sp(1 << 16), it(1 << 16);
  std::vector<WindowStatus> st(1 << 16);
  const uint64_t one_pct = std::max<uint64_t>(1, m / 100);
  for (uint64_t at = 0; at < 7 * m;) {
    const uint64_t stop = at < one_pct ? one_pct : at < m ? m : 7 * m;  // calls end at each checkpoint
    const size_t k = static_cast<size_t>(std::min<uint64_t>(sp.size(), stop - at));
    for (size_t j = 0; j < k; ++j) {
      const WinPair p = shmf_bench::win_pair(wl, 7 * m + at + j);
      sp[j] = p.space;
      it[j] = p.item;
    }
    w.mark_many(std::span<const uint64_t>(sp.data(), k), std::span<const uint64_t>(it.data(), k),
                std::span<WindowStatus>(st.data(), k));
    for (size_t j = 0; j < k; ++j) r.ov_full += st[j] != WindowStatus::kNew && st[j] != WindowStatus::kSeen;
    at += k;
    if (at == one_pct) r.ov_bytes101 = w.stats().memory_bytes;
    if (at == m) r.ov_bytes2 = w.stats().memory_bytes;
  }
  r.ov_fp8_w1 = measured_fp(w, o.fp_queries, 1, 23);
  r.ov_fp8_w7 = measured_fp(w, o.fp_queries, 7, 24);
  const WindowStats s = w.stats();
  r.ov_bound8_w7 = s.window_fp_bound(7);
  r.ov_bytes8 = s.memory_bytes;
  r.ov_layers = s.buckets[0].layers;
  r.ov_over_capacity = s.buckets[0].over_capacity;
  std::printf("%s 8x: expected %llu a bucket; 1x FP w=1 %.4f%% w=7 %.4f%%; today at 8x (%llu distinct, %u layers, "
              "window %.1f MiB at 1x, %.1f at 1.01x, %.1f at 2x, %.1f at 8x, over capacity %s, %llu answers neither kNew nor kSeen): FP w=1 %.4f%% w=7 %.4f%% "
              "(stats bound w=7 %.4f%%, now %.4f%%)\n",
              stamp().c_str(), (unsigned long long)m, 100 * r.ov_fp1_w1, 100 * r.ov_fp1_w7, (unsigned long long)s.buckets[0].distinct,
              r.ov_layers, mib(r.ov_bytes1), mib(r.ov_bytes101), mib(r.ov_bytes2), mib(r.ov_bytes8), r.ov_over_capacity ? "yes" : "no",
              (unsigned long long)r.ov_full, 100 * r.ov_fp8_w1, 100 * r.ov_fp8_w7, 100 * r.ov_bound8_w7,
              100 * s.window_fp_now(7));
  std::fflush(stdout);
  seg = Segment{};
  Segment::remove(name);
}

// Step 3: two plain blocked Bloom filters at the window's one-bucket error, filled to their
// capacities, in a segment of their own that every variant's rows use: one holding the week's
// 7 N pairs (what a window holds; about the bytes of a variant's week), one holding one bucket's
// N (the bits of one kBloom bucket table).
struct Plains {
  std::string name;
  Segment seg;
  Bloom week, day;
  uint64_t week_bytes = 0, day_bytes = 0;
};

void make_plains(Plains& p, uint64_t n, double error) {
  p.name = "shmf-bench-winv2-plain-" + std::to_string(getpid());
  p.seg = fresh_segment(p.name);
  auto make = [&](const char* name, uint64_t keys, uint64_t seed) {
    BloomOptions bo;
    bo.error = error;
    bo.seed = seed;
    bo.capacity = keys;
    Bloom b = Bloom::create(p.seg, name, bo);
    std::vector<uint64_t> k(1 << 16);
    for (uint64_t at = 0; at < keys; at += k.size()) {
      const size_t m = static_cast<size_t>(std::min<uint64_t>(k.size(), keys - at));
      for (size_t j = 0; j < m; ++j) k[j] = shmf_bench::mix64((seed << 50) + at + j);
      b.add_many(std::span<const uint64_t>(k.data(), m));
    }
    return b;
  };
  p.week = make("week", 7 * n, 3);
  p.day = make("day", n, 4);
  p.week_bytes = p.week.stats().memory_bytes;
  p.day_bytes = p.day.stats().memory_bytes;
  std::printf("%s plain Blooms at %.4f%%, k=%u: %.1f MiB (%llu keys: the week's pairs), %.1f MiB (%llu keys: one "
              "bucket's)\n",
              stamp().c_str(), 100 * error, p.week.stats().k, mib(p.week_bytes), (unsigned long long)(7 * n),
              mib(p.day_bytes), (unsigned long long)n);
  std::fflush(stdout);
}

Result run_variant(WindowVariant v, const Opts& o, const shmf_bench::Clock& clk, shmf_bench::CacheSweep& sweep,
                   Plains& plains) {
  Result r;
  r.name = std::string(window_variant_name(v));
  r.load_start = loadavg();
  const uint64_t n = static_cast<uint64_t>(o.scale * 1.2e8);
  r.n = n;
  {
    WindowSizing week = Window::plan(week_options(v, 120000000));
    r.week_mission = week.full_window_bytes;
    r.bits_per_pair = week.bits_per_pair;
    WindowOptions day = week_options(v, 120000000);
    day.retention = 1;
    day.error_window = 1;
    r.day_mission = Window::plan(day).full_window_bytes;
    r.week_plan_run = Window::plan(week_options(v, n)).full_window_bytes;
  }
  // Queries a row: fresh pairs of the write rows go into today, which must stay within N.
  const uint64_t q = std::max<uint64_t>(kRound, std::min<uint64_t>(o.queries, n / 16));
  const uint64_t writes = 4 * q;  // mark_if_unseen w=1, w=7, then the batched pair of rows
  std::printf("\n## %s: %.3g pairs a bucket x 7 days, %llu queries a row (load %s) %s\n", r.name.c_str(),
              static_cast<double>(n), (unsigned long long)q, r.load_start.c_str(), stamp().c_str());
  std::fflush(stdout);

  const std::string seg_name = "shmf-bench-winv2-" + std::to_string(getpid());
  Segment seg = fresh_segment(seg_name);
  struct Cleanup {
    std::string n;
    ~Cleanup() { Segment::remove(n); }
  } cleanup{seg_name};
  Window win = Window::create(seg, "week", week_options(v, n));
  shmf_bench::WorkloadOptions wlo;
  wlo.scale = o.scale;
  wlo.plans = kWinPlans;
  shmf_bench::Workload wl(wlo);
  // 1. the week.
  const uint64_t t0 = shmf_bench::mono_ns();
  for (int d = 0; d < 7; ++d) {
    win.set_now(kWinT0 + d * kWinDay + 3600);
    win.maintain();
    shmf_bench::mark_pairs(win, wl, static_cast<uint64_t>(d) * n, d == 6 ? n - writes : n);
  }
  r.fill_ns = static_cast<double>(shmf_bench::mono_ns() - t0) / static_cast<double>(7 * n - writes);
  WindowStats st = win.stats();
  r.week_measured = st.memory_bytes;
  std::printf("%s fill: mark_many %.1f ns/pair (wall); window %.1f MiB measured (plan at this N: %.1f MiB); "
              "today: capacity %llu, distinct %llu",
              stamp().c_str(), r.fill_ns, mib(r.week_measured), mib(r.week_plan_run), (unsigned long long)st.buckets[0].capacity,
              (unsigned long long)st.buckets[0].distinct);
  if (const uint64_t shared = Window::plan(week_options(v, n)).shared_bytes; shared > 0)  // a shared table of 16-bit lanes
    std::printf("; shared table %.1f MiB holding %llu lanes (%.1f%% of its %llu)", mib(shared),
                (unsigned long long)st.lanes, 100.0 * static_cast<double>(st.lanes) / static_cast<double>(shared / 2),
                (unsigned long long)(shared / 2));
  std::printf("\n");
  std::fflush(stdout);
  // 2. the floor over the window's bytes.
  r.floor = shmf_bench::measure_floor(clk, r.week_measured, q, 31, false, 7);
  std::printf("%s floor over %.1f MiB: one dependent line %.1f ns, two at once %.1f ns, 7 at once %.1f ns, "
              "independent %.1f ns/read\n",
              stamp().c_str(), mib(r.floor.bytes), r.floor.dep_p50, r.floor.pair_p50, r.floor.group_p50, r.floor.indep_ns);
  std::fflush(stdout);
  Bloom& plain = plains.week;  // 3. made once, before the first variant (main)
  Bloom& day = plains.day;
  r.plain_bytes = plains.week_bytes;
  r.day_bytes = plains.day_bytes;

  // Queries: absent pairs (reads), fresh pairs (writes: four sets), absent plain keys.
  win.set_now(kWinT0 + 6 * kWinDay + 3600);
  shmf_bench::Rng rng(5);
  std::vector<uint64_t> as(q), ai(q), pk(q);
  std::array<std::vector<uint64_t>, 4> fs, fi;
  for (uint64_t i = 0; i < q; ++i) {
    as[i] = rng.below(kWinPlans);
    ai[i] = shmf_bench::mix64((uint64_t{7} << 50) + i);
    pk[i] = shmf_bench::mix64((uint64_t{9} << 50) + i);
  }
  for (uint64_t f = 0; f < 4; ++f) {
    fs[f].resize(q);
    fi[f].resize(q);
    for (uint64_t i = 0; i < q; ++i) {
      fs[f][i] = rng.below(kWinPlans);
      fi[f][i] = shmf_bench::mix64(((uint64_t{16} + f) << 50) + i);
    }
  }
  auto sub = [](const std::vector<uint64_t>& x, uint64_t at, uint64_t m) {
    return std::span<const uint64_t>(x.data() + at, static_cast<size_t>(m));
  };

  // 4. single calls: reads, then writes (fresh pairs: kNew).
  {
    auto s = phases<4>(clk, q, o.block, 1, sweep, [&](size_t j, uint64_t i, uint64_t) -> uint64_t {
      switch (j) {
        case 0: return plain.contains(pk[i]);
        case 1: return day.contains(pk[i]);
        case 2: return win.seen(as[i], ai[i], 1);
        default: return win.seen(as[i], ai[i], 7);
      }
    });
    r.plain = cost_of(s[0]);
    r.day = cost_of(s[1]);
    r.seen1 = cost_of(s[2]);
    r.seen7 = cost_of(s[3]);
  }
  {
    auto s = phases<2>(clk, q, o.block, 1, sweep, [&](size_t j, uint64_t i, uint64_t) -> uint64_t {
      return win.mark_if_unseen(fs[j][i], fi[j][i], j == 0 ? 1 : 7) == WindowStatus::kNew;
    });
    r.mi1 = cost_of(s[0]);
    r.mi7 = cost_of(s[1]);
  }
  std::printf("%s single (p50 / p99 ns): plain contains %.1f / %.1f (one bucket's: %.1f / %.1f); seen w=1 %.1f / %.1f, "
              "w=7 %.1f / %.1f; mark_if_unseen (new) w=1 %.1f / %.1f, w=7 %.1f / %.1f\n",
              stamp().c_str(), r.plain.p50, r.plain.p99, r.day.p50, r.day.p99, r.seen1.p50, r.seen1.p99, r.seen7.p50, r.seen7.p99,
              r.mi1.p50, r.mi1.p99, r.mi7.p50, r.mi7.p99);
  std::fflush(stdout);
  // 5. batched: the median call's ns a pair.
  {
    std::vector<uint8_t> out(kRound);
    auto s = phases<3>(clk, q, o.block, kRound, sweep, [&](size_t j, uint64_t at, uint64_t m) -> uint64_t {
      const std::span<uint8_t> res(out.data(), static_cast<size_t>(m));
      switch (j) {
        case 0: return plain.contains_many(sub(pk, at, m), res);
        case 1: return win.seen_many(sub(as, at, m), sub(ai, at, m), 1, res);
        default: return win.seen_many(sub(as, at, m), sub(ai, at, m), 7, res);
      }
    });
    r.b_plain = s[0].pct(0.5);
    r.b_seen1 = s[1].pct(0.5);
    r.b_seen7 = s[2].pct(0.5);
  }
  {
    auto s = phases<2>(clk, q, o.block, kRound, sweep, [&](size_t j, uint64_t at, uint64_t m) -> uint64_t {
      return win.mark_if_unseen_many(sub(fs[2 + j], at, m), sub(fi[2 + j], at, m), j == 0 ? 1 : 7);
    });
    r.b_mi1 = s[0].pct(0.5);
    r.b_mi7 = s[1].pct(0.5);
  }
  std::printf("%s batched (ns/pair, median call of %zu): plain contains_many %.1f; seen_many w=1 %.1f, w=7 %.1f; "
              "mark_if_unseen_many (new) w=1 %.1f, w=7 %.1f\n",
              stamp().c_str(), kRound, r.b_plain, r.b_seen1, r.b_seen7, r.b_mi1, r.b_mi7);
  std::fflush(stdout);
  // 6. FP at 1x (today now holds its N).
  r.fp1_w1 = measured_fp(win, o.fp_queries, 1, 11);
  r.fp1_w7 = measured_fp(win, o.fp_queries, 7, 12);
  st = win.stats();
  r.bound_w1 = st.window_fp_bound(1);
  r.bound_w7 = st.window_fp_bound(7);
  std::printf("%s 1x: today %llu distinct (capacity %llu, %u layers); FP w=1 %.4f%% (bound %.4f%%), w=7 %.4f%% "
              "(bound %.4f%%); window %.1f MiB\n",
              stamp().c_str(), (unsigned long long)st.buckets[0].distinct, (unsigned long long)st.buckets[0].capacity,
              st.buckets[0].layers,
              100 * r.fp1_w1, 100 * r.bound_w1, 100 * r.fp1_w7, 100 * r.bound_w7, mib(st.memory_bytes));
  std::fflush(stdout);
  win = Window{};
  seg = Segment{};
  Segment::remove(seg_name);
  // 7. FP at 8x.
  overload(v, o, r);
  r.load_end = loadavg();
  std::printf("%s (load at the end: %s)\n", stamp().c_str(), r.load_end.c_str());
  return r;
}

void print_table(std::vector<Result>& rs, const Opts& o, const shmf_bench::Clock& clk, const std::string& load0,
                 const std::string& load1, double minutes) {
  std::printf("\n## The table (one run: scale %.3g, %.3g pairs a bucket; load average %s at the start, %s at the end; "
              "%.1f min)\n\n",
              o.scale, o.scale * 1.2e8, load0.c_str(), load1.c_str(), minutes);
  std::printf("| measure |");
  for (auto& r : rs) std::printf(" %s |", r.name.c_str());
  std::printf(" target |\n|---|");
  for (size_t i = 0; i < rs.size(); ++i) std::printf("---|");
  std::printf("---|\n");
  auto row = [&](const char* what, auto&& cell, const char* target = "") {
    std::printf("| %s |", what);
    for (auto& r : rs) std::printf(" %s |", cell(r).c_str());
    std::printf(" %s |\n", target);
  };
  auto f = [](const char* fmt, double x) {
    char b[64];
    std::snprintf(b, sizeof b, fmt, x);
    return std::string(b);
  };
  auto ratio = [&](double a, double b) { return f("**%.2f**", b > 0 ? a / b : 0); };
  row("memory, the mission's week (plan: 1.2e8 a bucket, 7 buckets, 1% over w=7; all tables, spare, metadata)",
      [&](Result& r) { return f("%.1f MiB", mib(r.week_mission)); });
  row("memory, the mission's day (plan: retention 1, 1%)", [&](Result& r) { return f("%.1f MiB", mib(r.day_mission)); },
      "<= 160 MiB");
  row("memory, this run's week (stats() after the fill; plan in brackets)",
      [&](Result& r) { return f("%.1f MiB", mib(r.week_measured)) + f(" (%.1f)", mib(r.week_plan_run)); });
  row("`seen` w=1, p50 ns (absent pair)", [&](Result& r) { return f("%.1f", r.seen1.p50); });
  row("`seen` w=7, p50 ns", [&](Result& r) { return f("%.1f", r.seen7.p50); });
  row("  ratio w=7 / w=1", [&](Result& r) { return ratio(r.seen7.p50, r.seen1.p50); }, "<= 1.15");
  row("`mark_if_unseen` w=1, p50 ns (fresh pair: kNew)", [&](Result& r) { return f("%.1f", r.mi1.p50); });
  row("`mark_if_unseen` w=7, p50 ns (fresh pair: kNew)", [&](Result& r) { return f("%.1f", r.mi7.p50); });
  row("  ratio w=7 / w=1", [&](Result& r) { return ratio(r.mi7.p50, r.mi1.p50); }, "<= 1.15");
  row("`seen_many` w=1, ns/pair (median call of 256)", [&](Result& r) { return f("%.1f", r.b_seen1); });
  row("`seen_many` w=7, ns/pair", [&](Result& r) { return f("%.1f", r.b_seen7); });
  row("  ratio w=7 / w=1", [&](Result& r) { return ratio(r.b_seen7, r.b_seen1); }, "<= 1.15");
  row("`mark_if_unseen_many` w=1, ns/pair (fresh)", [&](Result& r) { return f("%.1f", r.b_mi1); });
  row("`mark_if_unseen_many` w=7, ns/pair (fresh)", [&](Result& r) { return f("%.1f", r.b_mi7); });
  row("  ratio w=7 / w=1", [&](Result& r) { return ratio(r.b_mi7, r.b_mi1); }, "<= 1.15");
  row("plain blocked Bloom of the week's pairs (7 N at the one-bucket rate): `contains` p50 ns (absent)", [&](Result& r) {
    return f("%.1f", r.plain.p50) + f(" (%.0f MiB)", mib(r.plain_bytes));
  });
  row("  ratio `seen` w=1 / plain `contains`", [&](Result& r) { return ratio(r.seen1.p50, r.plain.p50); }, "<= 1.3");
  row("plain blocked Bloom of one bucket's pairs: `contains` p50 ns", [&](Result& r) {
    return f("%.1f", r.day.p50) + f(" (%.0f MiB)", mib(r.day_bytes));
  });
  row("  ratio `seen` w=1 / it", [&](Result& r) { return ratio(r.seen1.p50, r.day.p50); });
  row("plain `contains_many`, ns/key", [&](Result& r) { return f("%.1f", r.b_plain); });
  row("floor over the window's bytes: one dependent line, p50 ns", [&](Result& r) { return f("%.1f", r.floor.dep_p50); });
  row("floor: 2 lines at once, p50 ns", [&](Result& r) { return f("%.1f", r.floor.pair_p50); });
  row("floor: 7 lines at once, p50 ns", [&](Result& r) { return f("%.1f", r.floor.group_p50); });
  row("floor: independent reads (batched floor), ns/read", [&](Result& r) { return f("%.1f", r.floor.indep_ns); });
  row("  `seen` w=1 / one line; w=7 / one line",
      [&](Result& r) { return f("%.2f", r.seen1.p50 / r.floor.dep_p50) + f("; %.2f", r.seen7.p50 / r.floor.dep_p50); });
  row("FP at 1x (this run's week), w=1 / w=7",
      [&](Result& r) { return f("%.3f%%", 100 * r.fp1_w1) + f(" / %.3f%%", 100 * r.fp1_w7); }, "w=7 <= 1%");
  row("  stats() bound, w=1 / w=7",
      [&](Result& r) { return f("%.3f%%", 100 * r.bound_w1) + f(" / %.3f%%", 100 * r.bound_w7); });
  row("FP at 1x, the overload window (--overload-expected), w=1 / w=7",
      [&](Result& r) { return f("%.3f%%", 100 * r.ov_fp1_w1) + f(" / %.3f%%", 100 * r.ov_fp1_w7); });
  row("FP with today at 8x, w=1 / w=7",
      [&](Result& r) { return f("%.3f%%", 100 * r.ov_fp8_w1) + f(" / %.3f%%", 100 * r.ov_fp8_w7); }, "w=7 <= 1%");
  row("  today at 8x: answers neither kNew nor kSeen", [&](Result& r) { return std::to_string(r.ov_full); }, "0");
  row("  the window's bytes (stats), today at 1x / 1.01x / 2x / 8x", [&](Result& r) {
    return f("%.1f", mib(r.ov_bytes1)) + f(" / %.1f", mib(r.ov_bytes101)) + f(" / %.1f", mib(r.ov_bytes2)) +
           f(" / %.1f MiB", mib(r.ov_bytes8));
  });
  row("fill: `mark_many` ns/pair (wall)", [&](Result& r) { return f("%.1f", r.fill_ns); });
  row("load average, variant start / end", [&](Result& r) { return r.load_start + " / " + r.load_end; });
  std::printf("\nclock: %s, cost %.1f ns subtracted, samples in steps of %.1f ns; LLC %s (each section starts "
              "after a sweep of 2x it)\n",
              clk.source(), clk.cost_ns(), clk.resolution_ns(),
              shmf_bench::fmt_bytes(static_cast<double>(shmf_bench::llc_bytes())).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--scale") o.scale = std::atof(next().c_str());
    else if (a == "--queries") o.queries = static_cast<uint64_t>(std::atof(next().c_str()));
    else if (a == "--fp-queries") o.fp_queries = static_cast<uint64_t>(std::atof(next().c_str()));
    else if (a == "--overload-expected") o.overload_expected = static_cast<uint64_t>(std::atof(next().c_str()));
    else if (a == "--block") o.block = static_cast<uint64_t>(std::atof(next().c_str()));
    else if (a == "--variant") o.only.push_back(next());
    else {
      std::fprintf(stderr,
                   "usage: window_v2_bench [--scale S (pairs a day = S x 1.2e8; default 1)] [--queries N (2e5)] "
                   "[--fp-queries N (1e6)] [--overload-expected N (1e6)] [--variant NAME]... [--block N]\n");
      return 2;
    }
  }
  if (!(o.scale > 0 && o.scale <= 4) || o.queries < kRound || o.fp_queries == 0 || o.overload_expected < 1000 || o.block == 0) {
    std::fprintf(stderr, "window_v2_bench: --scale in (0, 4], --queries >= %zu, --fp-queries >= 1, "
                         "--overload-expected >= 1000, --block >= 1\n", kRound);
    return 2;
  }
  std::vector<WindowVariant> vs;
  std::string names;
  for (WindowVariant v : shmf_bench::window_variants()) {
    const std::string nm(window_variant_name(v));
    names += (names.empty() ? "" : ", ") + nm;
    if (o.only.empty() || std::find(o.only.begin(), o.only.end(), nm) != o.only.end()) vs.push_back(v);
  }
  if (vs.empty()) {
    std::fprintf(stderr, "window_v2_bench: no variant matches --variant (this build has: %s)\n", names.c_str());
    return 2;
  }
  const shmf_bench::Clock clk;
  const std::string load0 = loadavg();
  std::printf("# window_v2_bench: variants of this build: %s; scale %.3g (%.3g pairs a bucket); load average %s\n",
              names.c_str(), o.scale, o.scale * 1.2e8, load0.c_str());
  std::fflush(stdout);
  shmf_bench::CacheSweep sweep;
  const uint64_t t0 = shmf_bench::mono_ns();
  Plains plains;
  make_plains(plains, static_cast<uint64_t>(o.scale * 1.2e8),
              Window::plan(week_options(vs[0], static_cast<uint64_t>(o.scale * 1.2e8))).one_bucket_error);
  struct Cleanup {
    std::string n;
    ~Cleanup() { Segment::remove(n); }
  } cleanup{plains.name};
  std::vector<Result> rs;
  for (WindowVariant v : vs) rs.push_back(run_variant(v, o, clk, sweep, plains));
  print_table(rs, o, clk, load0, loadavg(), static_cast<double>(shmf_bench::mono_ns() - t0) / 6e10);
  return 0;
}
