// bench/latency_bench.cpp: per-operation latency percentiles (p50, p99,
// p99.9) of add and contains for every structure, single key and batched, at
// an in-cache size and an out-of-cache size (>= 10x the last-level cache).
//
//   latency_bench [--out-factor 10] [--singles 100000] [--batches 5000] [--only NAMES] [--huge-pages] [--quick]
//
// Method (bench/timed.h): every single operation is bracketed by two fenced
// clock reads; the median cost of an empty bracket, measured at start, is
// subtracted from each sample. Batched: one bracket around add_many /
// contains_many of 64 keys; the sample is that time / 64, the per-key cost
// of a batch, so its percentiles are over batches (a batch's slow key is
// averaged with 63 others: batch p99 is not comparable to single-key p99).
// Keys are random (uniform over the filled keys for hits, over a disjoint
// domain for misses) and prepared before timing. Adds are measured while
// the structure goes from 70% to at most 90% of its capacity (small sizes:
// several rounds of recreate + refill). A plain program (not Google
// Benchmark): it needs every sample, not a mean.
//
// The floor (bench/floor.h): after each out-of-cache structure is dropped,
// the same run measures one dependent random read of a 64-byte line (pointer
// chase) and independent-read throughput over a /dev/shm buffer of that
// structure's size. Every out-of-cache row then carries "x floor": a
// single-key row's p50 over the dependent read's p50 (same bracket), a
// batched row's p50 over the independent read's per-read time. 1.0x is one
// miss per key; a single-key lookup that takes two dependent misses is ~2x.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shmfilter/hll.hpp"
#include "floor.h"
#include "subjects.h"
#include "timed.h"

namespace {

using namespace shmf_bench;
using shmfilter::Segment;

struct Opts {
  double out_factor = 10;
  uint64_t singles = 100000;
  uint64_t batches = 5000;
  uint64_t in_cache_n = 50000;
  std::string only;
  bool huge_pages = false;
};

struct Row {
  std::string structure, size, op;
  double p50, p99, p999, mean;
  size_t samples;
  double vs_floor;  // p50 / the floor that applies (0: in cache, no floor)
};

std::vector<Row> g_rows;
std::vector<std::pair<std::string, Floor>> g_floors;  // (structure, floor at its size)
Clock* g_clk;

// Floor the row is compared with: batched rows against independent reads, the rest against one dependent read.
double floor_ratio(const std::string& op, double p50, const Floor* f) {
  if (f == nullptr) return 0;
  const bool batched = op.find("batch") != std::string::npos;
  const double base = batched ? f->indep_ns : f->dep_p50;
  return base > 0 ? p50 / base : 0;
}

void add_row(const std::string& st, const std::string& size, const std::string& op, Samples& s, const Floor* f = nullptr) {
  g_rows.push_back({st, size, op, s.pct(0.5), s.pct(0.99), s.pct(0.999), s.mean(), s.size(), floor_ratio(op, s.pct(0.5), f)});
  fprintf(stderr, "  %-18s %-26s %-28s p50 %-10s p99 %-10s p99.9 %s\n", st.c_str(), size.c_str(), op.c_str(),
          fmt_ns(s.pct(0.5)).c_str(), fmt_ns(s.pct(0.99)).c_str(), fmt_ns(s.pct(0.999)).c_str());
}

std::string size_label(uint64_t n, uint64_t bytes, uint64_t llc) {
  char b[96];
  snprintf(b, sizeof b, "%.3g keys, %s (%.2fx LLC)", static_cast<double>(n), fmt_bytes(static_cast<double>(bytes)).c_str(),
           static_cast<double>(bytes) / static_cast<double>(llc));
  return b;
}

template <class S>
void run_subject(Segment& seg, const Opts& o, uint64_t n, uint64_t llc, bool out_of_cache) {
  const Clock& clk = *g_clk;
  const std::string name = "lat:" + std::string(S::kName);
  Samples add1, add64, hit1, miss1, hit64, miss64;
  add1.reserve(o.singles);
  add64.reserve(o.batches);
  Rng rng(n);
  std::vector<uint64_t> keys;
  std::vector<uint8_t> out(64);
  uint64_t filled = 0, bytes = 0;
  S s;
  // Adds: rounds of (create, fill to 70%, time adds up to 10% of n singly and 10% in batches).
  while (add1.size() < o.singles || add64.size() < o.batches) {
    if (filled != 0) {
      S::drop(seg, name);
      seg.quiesce();
    }
    S::create(seg, name, n);
    s = S::open(seg, name);
    filled = n * 7 / 10;
    fill(s, 0, filled);
    const uint64_t m1 = std::min<uint64_t>(o.singles - add1.size(), n / 10);
    keys.resize(m1);
    for (uint64_t j = 0; j < m1; ++j) keys[j] = S::present(filled + j);
    for (uint64_t j = 0; j < m1; ++j) {
      const uint64_t t0 = clk.now();
      keep(s.add(keys[j]));
      const uint64_t t1 = clk.now();
      add1.add(clk.ns_of(t0, t1));
    }
    filled += m1;
    const uint64_t mb = std::min<uint64_t>(o.batches - add64.size(), n / 10 / 64);
    keys.resize(mb * 64);
    for (uint64_t j = 0; j < mb * 64; ++j) keys[j] = S::present(filled + j);
    for (uint64_t b = 0; b < mb; ++b) {
      const uint64_t t0 = clk.now();
      s.add_many(std::span<const uint64_t>(keys.data() + b * 64, 64), out);
      const uint64_t t1 = clk.now();
      add64.add(clk.ns_of(t0, t1) / 64);
    }
    filled += mb * 64;
  }
  bytes = s.bytes();
  // Contains on the structure as the last round left it: hits uniform over the filled keys.
  keys.resize(o.singles);
  for (auto& k : keys) k = S::present(rng.below(filled));
  for (uint64_t k : keys) {
    const uint64_t t0 = clk.now();
    keep(s.contains(k));
    const uint64_t t1 = clk.now();
    hit1.add(clk.ns_of(t0, t1));
  }
  for (auto& k : keys) k = S::absent(rng.below(filled));
  for (uint64_t k : keys) {
    const uint64_t t0 = clk.now();
    keep(s.contains(k));
    const uint64_t t1 = clk.now();
    miss1.add(clk.ns_of(t0, t1));
  }
  keys.resize(o.batches * 64);
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& k : keys) k = pass == 0 ? S::present(rng.below(filled)) : S::absent(rng.below(filled));
    Samples& dst = pass == 0 ? hit64 : miss64;
    for (uint64_t b = 0; b < o.batches; ++b) {
      const uint64_t t0 = clk.now();
      s.contains_many(std::span<const uint64_t>(keys.data() + b * 64, 64), out);
      const uint64_t t1 = clk.now();
      dst.add(clk.ns_of(t0, t1) / 64);
    }
  }
  S::drop(seg, name);
  seg.quiesce();
  const Floor* f = nullptr;
  if (out_of_cache) {
    g_floors.emplace_back(S::kName, measure_floor(clk, bytes, o.singles, n, o.huge_pages));
    f = &g_floors.back().second;
  }
  const std::string sz = size_label(n, bytes, llc);
  add_row(S::kName, sz, "add, single key", add1, f);
  add_row(S::kName, sz, "add, batch of 64 (per key)", add64, f);
  add_row(S::kName, sz, "contains hit, single key", hit1, f);
  add_row(S::kName, sz, "contains miss, single key", miss1, f);
  add_row(S::kName, sz, "contains hit, batch of 64", hit64, f);
  add_row(S::kName, sz, "contains miss, batch of 64", miss64, f);
}

// HLL: 12 KB is always cache-resident, so "out of cache" is many HLLs (one
// per plan and day, as the mission keeps them), each op on a random one.
void run_hll(Segment& seg, const Opts& o, uint32_t count, uint64_t llc, bool out_of_cache) {
  const Clock& clk = *g_clk;
  std::vector<shmfilter::Hll> h;
  h.reserve(count);
  for (uint32_t i = 0; i < count; ++i) h.push_back(shmfilter::Hll::create(seg, "lat:hll:" + std::to_string(i)));
  const uint64_t bytes = h[0].stats().bytes * count;
  Rng rng(count);
  Samples add1, add64, cnt, cnt_changed, cnt2;
  std::vector<uint64_t> keys(o.singles);
  std::vector<uint32_t> which(o.singles);
  // Warm: 2,000 keys per HLL so registers are not all zero.
  {
    std::vector<uint64_t> w(2000);
    for (uint32_t i = 0; i < count; ++i) {
      for (auto& k : w) k = rng.next();
      h[i].add_many(w);
    }
  }
  for (uint64_t j = 0; j < o.singles; ++j) {
    keys[j] = rng.next();
    which[j] = static_cast<uint32_t>(rng.below(count));
  }
  for (uint64_t j = 0; j < o.singles; ++j) {
    shmfilter::Hll& x = h[which[j]];
    const uint64_t t0 = clk.now();
    keep(x.add(keys[j]));
    const uint64_t t1 = clk.now();
    add1.add(clk.ns_of(t0, t1));
  }
  keys.resize(o.batches * 64);
  for (auto& k : keys) k = rng.next();
  for (uint64_t b = 0; b < o.batches; ++b) {
    shmfilter::Hll& x = h[rng.below(count)];
    const uint64_t t0 = clk.now();
    keep(x.add_many(std::span<const uint64_t>(keys.data() + b * 64, 64)));
    const uint64_t t1 = clk.now();
    add64.add(clk.ns_of(t0, t1) / 64);
  }
  const uint64_t reps = std::min<uint64_t>(o.singles / 20, 5000);
  // count of an unchanged HLL (the count cache answers): every HLL counted once first.
  for (auto& x : h) keep(x.count());
  for (uint64_t j = 0; j < reps; ++j) {
    shmfilter::Hll& x = h[rng.below(count)];
    const uint64_t t0 = clk.now();
    keep(x.count());
    const uint64_t t1 = clk.now();
    cnt.add(clk.ns_of(t0, t1));
  }
  // count right after a register grew (the full recompute), then count_union of 2.
  for (uint64_t j = 0; j < reps; ++j) {
    shmfilter::Hll& x = h[rng.below(count)];
    while (!x.add(rng.next())) {
    }
    const uint64_t t0 = clk.now();
    keep(x.count());
    const uint64_t t1 = clk.now();
    cnt_changed.add(clk.ns_of(t0, t1));
    shmfilter::Hll two[2] = {h[rng.below(count)], h[rng.below(count)]};
    const uint64_t t2 = clk.now();
    keep(shmfilter::Hll::count_union(two));
    const uint64_t t3 = clk.now();
    cnt2.add(clk.ns_of(t2, t3));
  }
  for (uint32_t i = 0; i < count; ++i) shmfilter::Hll::drop(seg, "lat:hll:" + std::to_string(i));
  seg.quiesce();
  const Floor* f = nullptr;
  if (out_of_cache) {
    g_floors.emplace_back("HLL", measure_floor(clk, bytes, o.singles, count, o.huge_pages));
    f = &g_floors.back().second;
  }
  char sz[96];
  snprintf(sz, sizeof sz, "%u HLL%s, %s (%.2fx LLC)", count, count > 1 ? "s" : "", fmt_bytes(static_cast<double>(bytes)).c_str(),
           static_cast<double>(bytes) / static_cast<double>(llc));
  add_row("HLL", sz, "add, single key", add1, f);
  add_row("HLL", sz, "add, batch of 64 (per key)", add64, f);
  add_row("HLL", sz, "count, unchanged HLL (cached)", cnt, f);
  add_row("HLL", sz, "count after a register grew", cnt_changed, f);
  add_row("HLL", sz, "count_union of 2 (PFCOUNT k1 k2)", cnt2, f);
}

[[noreturn]] void usage(int rc) {
  fprintf(rc ? stderr : stdout,
          "Usage: latency_bench [--out-factor F] [--singles N] [--batches N] [--in-cache-n N] [--only NAMES] [--huge-pages] [--quick]\n"
          "  --out-factor F   out-of-cache structures are >= F x the last-level cache (default 10)\n"
          "  --singles N      single-key samples per row (default 100000)\n"
          "  --batches N      batches of 64 per row (default 5000)\n"
          "  --in-cache-n N   keys of the in-cache structures (default 50000)\n"
          "  --only NAMES     comma-separated: bloom, cuckoo, exact, roaring, hll\n"
          "  --huge-pages     segment and floor buffers advised MADV_HUGEPAGE (docs/huge-pages.md)\n"
          "  --quick          --out-factor 1 --singles 20000 --batches 1000\n");
  exit(rc);
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    if (a == "--out-factor") o.out_factor = atof(val().c_str());
    else if (a == "--singles") o.singles = strtoull(val().c_str(), nullptr, 10);
    else if (a == "--batches") o.batches = strtoull(val().c_str(), nullptr, 10);
    else if (a == "--in-cache-n") o.in_cache_n = strtoull(val().c_str(), nullptr, 10);
    else if (a == "--only") o.only = val();
    else if (a == "--huge-pages") o.huge_pages = true;
    else if (a == "--quick") {
      o.out_factor = 1;
      o.singles = 20000;
      o.batches = 1000;
    } else if (a == "--help" || a == "-h") usage(0);
    else {
      fprintf(stderr, "latency_bench: unknown argument '%s'\n", a.c_str());
      usage(2);
    }
  }
  if (o.out_factor <= 0 || o.singles < 100 || o.batches < 10 || o.in_cache_n < 1000) {
    fprintf(stderr, "latency_bench: need --out-factor > 0, --singles >= 100, --batches >= 10, --in-cache-n >= 1000\n");
    return 2;
  }
  Clock clk;
  g_clk = &clk;
  uint64_t llc = llc_bytes();
  if (llc == 0) llc = 32ull << 20;
  const uint64_t target = static_cast<uint64_t>(o.out_factor * static_cast<double>(llc));

  const std::string segname = "shmf-bench-latency-" + std::to_string(getpid());
  shmfilter::CreateOptions co;
  co.directory_capacity = 32768;
  co.huge_pages = o.huge_pages;
  Segment seg = Segment::create(segname, co);
  int rc = 0;
  try {
    auto want = [&](const char* k) { return o.only.empty() || ("," + o.only + ",").find(std::string(",") + k + ",") != std::string::npos; };
    if (want("bloom")) {
      run_subject<BloomSubject>(seg, o, o.in_cache_n, llc, false);
      run_subject<BloomSubject>(seg, o, BloomSubject::n_for_bytes(target), llc, true);
    }
    if (want("cuckoo")) {
      run_subject<CuckooSubject>(seg, o, o.in_cache_n, llc, false);
      run_subject<CuckooSubject>(seg, o, CuckooSubject::n_for_bytes(target), llc, true);
    }
    if (want("exact")) {
      run_subject<ExactSubject>(seg, o, o.in_cache_n, llc, false);
      run_subject<ExactSubject>(seg, o, ExactSubject::n_for_bytes(target), llc, true);
    }
    if (want("roaring")) {
      run_subject<RoaringSubject>(seg, o, o.in_cache_n, llc, false);
      run_subject<RoaringSubject>(seg, o, RoaringSubject::n_for_bytes(target), llc, true);
      RoaringSubject::ids = {};
    }
    if (want("hll")) {
      run_hll(seg, o, 1, llc, false);
      run_hll(seg, o, static_cast<uint32_t>(std::min<uint64_t>(30000, target / 13240 + 1)), llc, true);
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "latency_bench: %s\n", e.what());
    rc = 1;
  }
  const shmfilter::HugePageStats hp = seg.huge_page_stats();
  Segment::remove(segname);

  printf("Clock: %s; one empty bracket costs %.1f ns (median, subtracted from every sample); "
         "clock_gettime costs %.1f ns;\nreads advance in steps of %.1f ns here, so single-key samples are multiples of that.\n",
         clk.source(), clk.cost_ns(), clk.gettime_cost_ns(), clk.resolution_ns());
  printf("Last-level cache %s; out-of-cache structures are >= %.3gx that. Batched rows: time of one add_many /\n"
         "contains_many of 64 keys divided by 64; percentiles over %" PRIu64 " batches. Single rows: %" PRIu64
         " samples.\n\n",
         fmt_bytes(static_cast<double>(llc)).c_str(), o.out_factor, o.batches, o.singles);
  if (o.huge_pages)
    printf("--huge-pages: the segment and the floor buffers were advised MADV_HUGEPAGE; shmem_enabled is '%s' here%s.\n\n",
           hp.shmem_enabled.c_str(), hp.huge_bytes > 0 ? "" : " (nothing was on huge pages at the end: see docs/huge-pages.md)");
  printf("The machine's floor, measured in this run over a /dev/shm buffer of each out-of-cache structure's size\n"
         "(bench/floor.h): one dependent random read of a 64-byte line (pointer chase, bracketed like a single-key\n"
         "operation; also as a long chase timed in 512-read chunks, median chunk); \"two lines at once\": that read plus\n"
         "one more random line issued with it (a cuckoo lookup's two buckets); independent random reads (addresses known\n"
         "up front, many in flight; median 512-read chunk). \"x floor\" below: single-key p50 / dependent-read p50;\n"
         "batched p50 / independent-read time.\n\n");
  printf("| floor for | buffer | dependent read p50 | p99 | two lines at once p50 | long chase (ns/read) | independent reads (ns/read) |\n"
         "|---|---|---|---|---|---|---|\n");
  for (auto& [st, f] : g_floors)
    printf("| %s | %s | %s | %s | %s | %s | %s |\n", st.c_str(), fmt_bytes(static_cast<double>(f.bytes)).c_str(),
           fmt_ns(f.dep_p50).c_str(), fmt_ns(f.dep_p99).c_str(), fmt_ns(f.pair_p50).c_str(), fmt_ns(f.chase_ns).c_str(),
           fmt_ns(f.indep_ns).c_str());
  printf("\n| structure | size | operation | p50 | p99 | p99.9 | mean | x floor |\n|---|---|---|---|---|---|---|---|\n");
  for (auto& r : g_rows) {
    char ratio[32] = "-";
    if (r.vs_floor > 0) snprintf(ratio, sizeof ratio, "%.2fx", r.vs_floor);
    printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.structure.c_str(), r.size.c_str(), r.op.c_str(),
           fmt_ns(r.p50).c_str(), fmt_ns(r.p99).c_str(), fmt_ns(r.p999).c_str(), fmt_ns(r.mean).c_str(), ratio);
  }
  return rc;
}
