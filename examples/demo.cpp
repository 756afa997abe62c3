// examples/demo.cpp: the README's demo. N worker processes attach to ONE
// shared segment and work on it together; the parent shows the registry of
// attached processes (liveness from the kernel, not from pids) and a summary.
//
//   demo [--workers 4] [--scale 0.01] [--seed 42] [--segment NAME] [--keep]
//
// The demo is a list of stages (kStages below). Each stage has
//   setup(ctx)  in the parent, before the workers start (create structures),
//   worker(ctx) in every worker process, each attached on its own,
//   report(ctx) in the parent, after every worker has finished.
// Workers pass a barrier between stages, so a stage may rely on the previous
// one being complete in every worker. Per-worker results go to a counters
// region of the stage (kind kBlob) in the segment itself: counters_of().
// Structure stages (Bloom, Cuckoo, HLL, ExactSet) are added to kStages as
// functions of the same shape; keys come from tests/support/workload.h.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/error.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/window.hpp"
#include "workload.h"

namespace {

using shmfilter::Error;
using shmfilter::ErrorCode;
using shmfilter::Kind;
using shmfilter::ReadGuard;
using shmfilter::Segment;

// ---- options and context ----------------------------------------------------

struct Options {
  int workers = 4;
  double scale = 0.01;  // 1.0 = the mission's 1.2e8 distinct (plan, device) pairs a day
  uint64_t seed = 42;
  std::string segment;  // default: shmf-demo-<pid>
  bool keep = false;
  std::string shmtool = "shmtool";  // how to spell shmtool in hints
};

constexpr int kMaxWorkers = 64;
constexpr int kCountersPerWorker = 16;  // 128 bytes: two cache lines per worker, no false sharing between workers

struct Ctx {
  const Options& opt;
  Segment seg;
  int worker = -1;  // -1 in the parent
  shmf_bench::WorkloadOptions workload() const {
    shmf_bench::WorkloadOptions w;
    w.scale = opt.scale;
    w.seed = opt.seed;
    return w;
  }
};

// Atomic view of a u64 in the segment (std::atomic_ref: lock-free on 64-bit targets).
inline std::atomic_ref<uint64_t> at(uint64_t& word) { return std::atomic_ref<uint64_t>(word); }

// A stage's counters region: kCountersPerWorker u64 per worker. Created in setup.
void make_counters(Ctx& ctx, const std::string& stage) {
  const uint64_t bytes = static_cast<uint64_t>(ctx.opt.workers) * kCountersPerWorker * 8;
  ctx.seg.create_region("demo:" + stage + ":counters", Kind::kBlob, bytes,
                        [](std::byte*, uint64_t, shmfilter::ControlTxn&) {});
}
// Row of `worker` in the stage's counters region. Each row has one writer (its worker, plain
// stores); the parent reads it only after waitpid(), which orders everything before it.
uint64_t* counters_of(Ctx& ctx, const std::string& stage, int worker) {
  auto r = ctx.seg.open_region("demo:" + stage + ":counters", Kind::kBlob);
  return reinterpret_cast<uint64_t*>(ctx.seg.base() + r.offset) + static_cast<size_t>(worker) * kCountersPerWorker;
}
uint64_t total(Ctx& ctx, const std::string& stage, int counter) {
  uint64_t s = 0;
  for (int w = 0; w < ctx.opt.workers; ++w) s += at(counters_of(ctx, stage, w)[counter]).load(std::memory_order_relaxed);
  return s;
}
uint64_t max_of(Ctx& ctx, const std::string& stage, int counter) {
  uint64_t m = 0;
  for (int w = 0; w < ctx.opt.workers; ++w)
    m = std::max(m, at(counters_of(ctx, stage, w)[counter]).load(std::memory_order_relaxed));
  return m;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ---- stage 1: named regions ---------------------------------------------------
// Every worker creates, finds (and verifies the bytes of) and drops regions
// drawn from one pool of 64 names, so they race on the same names: exactly one
// creator wins each name, readers never see another region's bytes, and a
// region dropped under a reader is detected by its generation.

namespace regions {

constexpr uint64_t kMagic = 0x4f4d4544464d4853ull;  // "SHMFDEMO" little-endian
constexpr int kPool = 64;
enum Counter { kCreated, kCreateLost, kFound, kMissing, kDropped, kDropMissing, kDroppedWhileReading, kCorrupt,
               kOps, kNs, kNoSpace };

std::string name_of(uint64_t k) {
  char buf[32];
  snprintf(buf, sizeof buf, "demo:blob:%02" PRIu64, k);
  return buf;
}

// Region bytes: [magic, bytes, seed, creator pid, mix64(seed + i) for i >= 4 ...].
void fill(std::byte* p, uint64_t bytes, uint64_t seed) {
  auto* w = reinterpret_cast<uint64_t*>(p);
  w[0] = kMagic;
  w[1] = bytes;
  w[2] = seed;
  w[3] = static_cast<uint64_t>(getpid());
  for (uint64_t i = 4; i < bytes / 8; ++i) w[i] = shmf_bench::mix64(seed + i);
}
bool verify(const std::byte* p, uint64_t bytes) {
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  if (w[0] != kMagic || w[1] > bytes) return false;
  for (uint64_t i = 4; i < w[1] / 8; ++i)
    if (w[i] != shmf_bench::mix64(w[2] + i)) return false;
  return true;
}

uint64_t ops_per_worker(const Options& o) {
  return std::clamp<uint64_t>(static_cast<uint64_t>(o.scale * 200000), 100, 1000000);
}

void setup(Ctx& ctx) { make_counters(ctx, "regions"); }

void worker(Ctx& ctx) {
  uint64_t* c = counters_of(ctx, "regions", ctx.worker);
  shmf_bench::Rng rng(ctx.opt.seed * 1000003u + static_cast<uint64_t>(ctx.worker));
  const uint64_t ops = ops_per_worker(ctx.opt);
  const uint64_t t0 = now_ns();
  for (uint64_t i = 0; i < ops; ++i) {
    const std::string name = name_of(rng.below(kPool));
    const uint64_t dice = rng.below(100);
    if (dice < 45) {
      const uint64_t bytes = 4096 * (1 + rng.below(64)), seed = rng.next();
      try {
        ctx.seg.create_region(name, Kind::kBlob, bytes,
                              [&](std::byte* p, uint64_t n, shmfilter::ControlTxn&) { fill(p, n, seed); });
        ++c[kCreated];
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kExists) ++c[kCreateLost];
        else if (e.code() == ErrorCode::kNoSpace) ++c[kNoSpace];
        else throw;
      }
    } else if (dice < 85) {
      // A raw read of a region's bytes outside any library call: announce it, so a drop
      // meanwhile cannot hand the bytes to someone else until we are done.
      const ReadGuard in_call(ctx.seg);
      auto info = ctx.seg.find(name);
      if (!info) {
        ++c[kMissing];
      } else if (verify(ctx.seg.base() + info->offset, info->size)) {
        ++c[kFound];
      } else if (!ctx.seg.region_live(info->slot, info->generation)) {
        ++c[kDroppedWhileReading];  // dropped by another worker while we read: its generation says so
      } else {
        ++c[kCorrupt];
        fprintf(stderr, "worker %d: region '%s' holds bytes it was not given\n", ctx.worker, name.c_str());
      }
    } else {
      ++c[ctx.seg.drop(name) ? kDropped : kDropMissing];
    }
    if ((i & 15) == 15) ctx.seg.quiesce();
  }
  c[kOps] = ops;
  c[kNs] = now_ns() - t0;
}

void report(Ctx& ctx) {
  const char* s = "regions";
  uint64_t live = 0;
  for (const auto& r : ctx.seg.list())
    if (r.name.rfind("demo:blob:", 0) == 0) ++live;
  const double secs = static_cast<double>(max_of(ctx, s, kNs)) / 1e9;
  printf("  %" PRIu64 " operations on a pool of %d names in %.2f s (%.0f ops/s over all workers)\n",
         total(ctx, s, kOps), kPool, secs, secs > 0 ? static_cast<double>(total(ctx, s, kOps)) / secs : 0.0);
  printf("  created %" PRIu64 " (lost the race for a name %" PRIu64 " times: exactly one creator wins)\n",
         total(ctx, s, kCreated), total(ctx, s, kCreateLost));
  printf("  found and verified %" PRIu64 ", not there %" PRIu64 ", dropped under the reader %" PRIu64
         " (detected by generation)\n",
         total(ctx, s, kFound), total(ctx, s, kMissing), total(ctx, s, kDroppedWhileReading));
  printf("  dropped %" PRIu64 " (already gone %" PRIu64 "); %" PRIu64 " regions live now\n", total(ctx, s, kDropped),
         total(ctx, s, kDropMissing), live);
  if (total(ctx, s, kNoSpace)) printf("  out of space %" PRIu64 " times\n", total(ctx, s, kNoSpace));
  const uint64_t created = total(ctx, s, kCreated), dropped = total(ctx, s, kDropped);
  const bool ok = total(ctx, s, kCorrupt) == 0 && created == dropped + live;
  printf("  %s: corrupt reads %" PRIu64 ", created - dropped = %" PRIu64 " = live %" PRIu64 "\n",
         ok ? "OK" : "FAILED", total(ctx, s, kCorrupt), created - dropped, live);
  if (!ok) throw std::runtime_error("regions stage: the directory does not add up");
}

}  // namespace regions

// ---- the mission: frequency capping (stages 2-4) -----------------------------------
// "Has device D already been served by plan P today?" One generated stream of
// "plan:device" events (tests/support/workload.h: Zipf plan sizes, 30% repeats) is
// made once by the parent before the fork; worker w takes every N-th event
// (positions w, w+N, ...). Oracles live OUTSIDE the segment, in anonymous
// shared mappings inherited by fork: per distinct pair, how many workers were
// told "new" (so double counts and false-positive skips are counted, not
// guessed).

namespace mission {

// Process-shared scratch outside the segment (MAP_SHARED | MAP_ANONYMOUS: inherited by fork).
template <class T>
T* shared_array(uint64_t n) {
  void* p = mmap(nullptr, std::max<uint64_t>(1, n) * sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error(std::string("mmap of the demo's oracle failed: ") + strerror(errno));
  return static_cast<T*>(p);
}
template <class T>
std::atomic_ref<T> aref(T& x) {
  return std::atomic_ref<T>(x);
}

struct Flags {
  uint64_t phase_a_done;    // workers done with the cuckoo stream (fetch_add by each)
  uint64_t removed_count;   // operator: removed pairs published in removed_list (release)
  uint64_t operator_done;   // operator: all removals made
  uint64_t erased_ok;       // operator: erase() calls that returned true
  uint64_t erase_ns;        // operator: time from first to last erase
  uint64_t lookups_during;  // workers: lookups made while the operator was removing
};

struct Shared {
  shmf_bench::WorkloadOptions wo;
  uint64_t distinct = 0, events = 0;
  uint32_t* stream = nullptr;      // pair number of each event
  uint8_t* claim_bloom = nullptr;  // per pair: workers the Bloom filter told "new"
  uint8_t* claim_a = nullptr;      // per pair: workers that inserted it into the cuckoo filter (stream pass)
  uint8_t* claim_b = nullptr;      // per pair: workers that served it again after the operator's undo
  uint8_t* removed = nullptr;      // per pair: 1 once the operator removed it
  uint32_t* removed_list = nullptr;
  uint64_t removals = 0;           // how many pairs the operator removes
  Flags* flags = nullptr;
  std::vector<uint64_t> true_uv;   // per plan: distinct devices (= distinct pairs of that plan)
  std::vector<uint32_t> top;       // HLL plans: the largest
  std::vector<uint32_t> small;     // ExactSet plans: small ones
  std::vector<int32_t> exact_idx;  // per plan: index into small, or -1
};
Shared* g = nullptr;

const shmf_bench::Workload& wl() {
  static shmf_bench::Workload w(g->wo);
  return w;
}
std::string key_of(uint64_t pair) { return wl().key_of(pair); }

// Makes the stream and the oracles (parent, before the fork). Idempotent.
void prepare(Ctx& ctx) {
  if (g) return;
  g = new Shared;
  g->wo = ctx.workload();
  shmf_bench::Workload w(g->wo);
  g->distinct = w.target_distinct();
  if (g->distinct < 1000)
    throw std::runtime_error("scale " + std::to_string(g->wo.scale) +
                             " gives fewer than 1,000 distinct pairs: pass --scale >= 0.00001");
  std::vector<uint32_t> s;
  s.reserve(static_cast<size_t>(static_cast<double>(g->distinct) / (1 - g->wo.repeat_rate) * 1.05));
  while (w.distinct_so_far() < g->distinct) s.push_back(static_cast<uint32_t>(w.next().pair));
  g->events = s.size();
  g->stream = shared_array<uint32_t>(g->events);
  std::copy(s.begin(), s.end(), g->stream);
  g->claim_bloom = shared_array<uint8_t>(g->distinct);
  g->claim_a = shared_array<uint8_t>(g->distinct);
  g->claim_b = shared_array<uint8_t>(g->distinct);
  g->removed = shared_array<uint8_t>(g->distinct);
  g->removals = std::clamp<uint64_t>(g->distinct / 1000, 50, 100000);  // distinct >= 1000: at most 5%
  g->removed_list = shared_array<uint32_t>(g->removals);
  g->flags = shared_array<Flags>(1);
  g->true_uv.assign(g->wo.plans, 0);
  for (uint64_t i = 0; i < g->distinct; ++i) ++g->true_uv[w.plan_of(i)];
  std::vector<uint32_t> order(g->wo.plans);
  for (uint32_t p = 0; p < g->wo.plans; ++p) order[p] = p;
  std::sort(order.begin(), order.end(), [](uint32_t a, uint32_t b) { return g->true_uv[a] > g->true_uv[b]; });
  g->top.assign(order.begin(), order.begin() + std::min<size_t>(8, order.size()));
  g->exact_idx.assign(g->wo.plans, -1);
  // Small plans: a few around the median size and a few of the smallest non-empty ones.
  std::vector<uint32_t> nonempty;
  for (uint32_t p : order)
    if (g->true_uv[p] > 0) nonempty.push_back(p);
  for (size_t k = 0; k < 4 && nonempty.size() / 2 + k < nonempty.size(); ++k) g->small.push_back(nonempty[nonempty.size() / 2 + k]);
  for (size_t k = 0; k < 4 && k < nonempty.size(); ++k) {
    uint32_t p = nonempty[nonempty.size() - 1 - k];
    if (std::find(g->small.begin(), g->small.end(), p) == g->small.end()) g->small.push_back(p);
  }
  for (size_t k = 0; k < g->small.size(); ++k) g->exact_idx[g->small[k]] = static_cast<int32_t>(k);
}

// Positions of worker w: w, w + N, w + 2N, ... handed out in batches of up to 64.
template <class F>
void for_my_batches(const Ctx& ctx, F&& fn) {
  std::vector<std::string> keys;
  std::vector<uint32_t> pairs;
  keys.reserve(64);
  pairs.reserve(64);
  for (uint64_t pos = static_cast<uint64_t>(ctx.worker); pos < g->events; pos += static_cast<uint64_t>(ctx.opt.workers)) {
    pairs.push_back(g->stream[pos]);
    keys.push_back(key_of(g->stream[pos]));
    if (keys.size() == 64) {
      fn(pairs, keys);
      keys.clear();
      pairs.clear();
    }
  }
  if (!keys.empty()) fn(pairs, keys);
}
std::vector<std::string_view> views(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

std::string big(double x) {
  char b[32];
  if (x >= 1e6) snprintf(b, sizeof b, "%.2fM", x / 1e6);
  else if (x >= 1e4) snprintf(b, sizeof b, "%.1fk", x / 1e3);
  else snprintf(b, sizeof b, "%.0f", x);
  return b;
}

// ---- stage 2: Bloom dedup -------------------------------------------------------------

namespace bloom {
enum Counter { kEvents, kNew, kNs };
const char* kName = "today:bloom";

void setup(Ctx& ctx) {
  prepare(ctx);
  make_counters(ctx, "bloom");
  shmfilter::BloomOptions o;
  o.capacity = g->distinct + g->distinct / 2;  // the mission's lesson: reserve >= 1.5x the day's peak
  o.error = 0.01;
  o.seed = ctx.opt.seed;
  shmfilter::Bloom::create(ctx.seg, kName, o);
}

void worker(Ctx& ctx) {
  uint64_t* c = counters_of(ctx, "bloom", ctx.worker);
  auto b = shmfilter::Bloom::open(ctx.seg, kName);
  std::vector<uint8_t> out(64);
  const uint64_t t0 = now_ns();
  for_my_batches(ctx, [&](const std::vector<uint32_t>& pairs, const std::vector<std::string>& keys) {
    auto v = views(keys);
    b.add_many(v, std::span(out.data(), v.size()));
    for (size_t i = 0; i < v.size(); ++i)
      if (out[i]) {
        aref(g->claim_bloom[pairs[i]]).fetch_add(1, std::memory_order_relaxed);  // relaxed: read after waitpid
        ++c[kNew];
      }
    c[kEvents] += v.size();
  });
  c[kNs] = now_ns() - t0;
}

void report(Ctx& ctx) {
  auto b = shmfilter::Bloom::open(ctx.seg, kName);
  const auto st = b.stats();
  uint64_t counted = 0, skipped = 0, doubles = 0;
  for (uint64_t i = 0; i < g->distinct; ++i) {
    const uint64_t k = g->claim_bloom[i];
    counted += k;
    if (k == 0) ++skipped;
    if (k > 1) doubles += k - 1;
  }
  // Measured FP at the end of the day: 100k "plan:device" keys that were never in the stream.
  const uint64_t probes = 100000;
  uint64_t fp = 0;
  for (uint64_t i = 0; i < probes; ++i)
    fp += b.contains(std::to_string(i % g->wo.plans) + ":" + shmf_bench::hex16(shmf_bench::mix64(~i))) ? 1 : 0;
  const double p_end = static_cast<double>(fp) / probes;
  // Expected skips: a new pair meets the FP rate of the filter as full as it is then.
  // Shape from the classic model (1 - e^{-kj/m})^k, scaled to the measured end rate.
  const double m = static_cast<double>(st.bits), k = st.k, n = static_cast<double>(g->distinct);
  auto shape = [&](double j) { return std::pow(1 - std::exp(-k * j / m), k); };
  double sum = 0;
  const int steps = 1000;
  for (int s = 0; s < steps; ++s) sum += shape(n * (s + 0.5) / steps);
  const double expected = shape(n) > 0 ? p_end / shape(n) * sum / steps * n : 0;
  const double secs = static_cast<double>(max_of(ctx, "bloom", kNs)) / 1e9;
  const double redis = 90.0 * n;
  printf("  stream: %" PRIu64 " events (%.0f%% repeats) of %" PRIu64
         " distinct (plan, device) pairs over %u plans (known to the generator)\n",
         g->events, 100.0 * (1 - n / static_cast<double>(g->events)), g->distinct, g->wo.plans);
  printf("  counted new %" PRIu64 " = distinct %" PRIu64 " - skipped as false positives %" PRIu64
         " + same-instant double counts %" PRIu64 "\n",
         counted, g->distinct, skipped, doubles);
  printf("  false-positive skips: %.3f%% of new pairs; expected ~%.3f%% (the filter's FP while it fills; %.3f%% measured\n"
         "    at the end of the day on %" PRIu64 " never-seen keys, %.2f%% asked at capacity %s)\n",
         100.0 * static_cast<double>(skipped) / n, 100.0 * expected / n, 100 * p_end, probes, 100 * st.error,
         big(static_cast<double>(st.capacity)).c_str());
  printf("  same-instant double counts: %" PRIu64 " (two workers both told \"new\" for one pair; oracle count);\n"
         "    the filter's own bound (adds that returned true after losing a race on a bit): %" PRIu64 "\n",
         doubles, st.racing_adds);
  printf("  throughput: %s events in %.2f s = %s events/s over %d workers (add_many, batches of 64)\n",
         big(static_cast<double>(g->events)).c_str(), secs, big(secs > 0 ? static_cast<double>(g->events) / secs : 0).c_str(),
         ctx.opt.workers);
  printf("  memory: Bloom %s for capacity %s (1.5x the day's peak: %.1f bits per reserved key, %.1f per pair seen)\n"
         "    vs a Redis SET at ~90 B/member: %s (%.0fx more)\n",
         shmfilter::format_size(st.memory_bytes).c_str(), big(static_cast<double>(st.capacity)).c_str(),
         static_cast<double>(st.memory_bytes) * 8 / static_cast<double>(st.capacity),
         static_cast<double>(st.memory_bytes) * 8 / n, shmfilter::format_size(static_cast<uint64_t>(redis)).c_str(),
         redis / static_cast<double>(st.memory_bytes));
  if (counted + skipped != g->distinct + doubles || total(ctx, "bloom", kEvents) != g->events)
    throw std::runtime_error("bloom stage: the counts do not add up");
}
}  // namespace bloom

// ---- stage 3: Cuckoo dedup and the operator's undo -------------------------------------

namespace cuckoo {
enum Counter { kEvents, kInserted, kFull, kNsA, kOpsB, kServedB, kNsB };
const char* kName = "today:cuckoo";

void setup(Ctx& ctx) {
  prepare(ctx);
  make_counters(ctx, "cuckoo");
  shmfilter::CuckooOptions o;
  o.capacity = g->distinct + g->distinct / 10;
  o.error = 0.01;  // 12-bit fingerprints
  o.seed = ctx.opt.seed + 1;
  shmfilter::Cuckoo::create(ctx.seg, kName, o);
}

// The operator: once every worker has passed the stream, removes `removals`
// served pairs (ones it knows were inserted: erase only what you inserted),
// publishing each in removed_list after its erase returned.
[[noreturn]] void operator_main(const Options& opt) {
  int rc = 1;
  try {
    Segment seg = Segment::open(opt.segment);
    auto c = shmfilter::Cuckoo::open(seg, kName);
    while (aref(g->flags->phase_a_done).load() < static_cast<uint64_t>(opt.workers)) {
      if (getppid() == 1) _exit(3);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    shmf_bench::Rng rng(opt.seed * 7 + 3);
    const uint64_t t0 = now_ns();
    uint64_t done = 0, ok = 0;
    while (done < g->removals) {
      const uint64_t p = rng.below(g->distinct);
      // Only pairs it served, and whose fingerprint no other pair shares in their buckets
      // (count 1): erasing a shared fingerprint would leave the pair answered by the other copy.
      if (g->claim_a[p] != 1 || g->removed[p] || c.count(key_of(p)) != 1) continue;
      if (c.erase(key_of(p))) ++ok;
      g->removed[p] = 1;
      g->removed_list[done] = static_cast<uint32_t>(p);
      aref(g->flags->removed_count).store(++done, std::memory_order_release);  // release: publishes the list entry
      if (done % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));  // an operator's pace
    }
    aref(g->flags->erase_ns).store(now_ns() - t0);
    aref(g->flags->erased_ok).store(ok);
    aref(g->flags->operator_done).store(1);
    rc = 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "operator: %s\n", e.what());
  }
  _exit(rc);
}

// Serve `pair` if today's filter does not hold it: lock-free check, then an atomic test-and-insert.
bool serve(shmfilter::Cuckoo& c, uint32_t pair) {
  const std::string k = key_of(pair);
  if (c.contains(k)) return false;
  if (c.insert_unique(k) != shmfilter::CuckooStatus::kInserted) return false;
  aref(g->claim_b[pair]).fetch_add(1, std::memory_order_relaxed);  // relaxed: read after waitpid
  return true;
}

void worker(Ctx& ctx) {
  uint64_t* c = counters_of(ctx, "cuckoo", ctx.worker);
  auto cf = shmfilter::Cuckoo::open(ctx.seg, kName);
  pid_t op = -1;
  if (ctx.worker == 0) {
    fflush(nullptr);
    op = fork();
    if (op == 0) operator_main(ctx.opt);
    if (op < 0) throw std::runtime_error("fork of the operator failed");
  }
  // Pass 1: the stream, deduplicated by test-and-insert (exactly one worker gets kInserted per key).
  std::vector<shmfilter::CuckooStatus> st(64);
  uint64_t t0 = now_ns();
  for_my_batches(ctx, [&](const std::vector<uint32_t>& pairs, const std::vector<std::string>& keys) {
    auto v = views(keys);
    cf.add_many(v, std::span(st.data(), v.size()), /*unique=*/true);
    for (size_t i = 0; i < v.size(); ++i) {
      if (st[i] == shmfilter::CuckooStatus::kInserted) {
        aref(g->claim_a[pairs[i]]).fetch_add(1, std::memory_order_relaxed);  // relaxed: read after waitpid
        ++c[kInserted];
      } else if (st[i] == shmfilter::CuckooStatus::kFull) {
        ++c[kFull];
      }
    }
    c[kEvents] += v.size();
  });
  c[kNsA] = now_ns() - t0;
  aref(g->flags->phase_a_done).fetch_add(1);
  // Pass 2 starts when every worker has passed the stream (else it would serve pairs a
  // slower worker has not reached yet, and pass 1's counts would be off).
  while (aref(g->flags->phase_a_done).load() < static_cast<uint64_t>(ctx.opt.workers)) {
    if (getppid() == 1) _exit(3);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Pass 2: traffic goes on while the operator removes pairs: half of it asks for pairs
  // already removed (they must be served again, once), half for random pairs (all served
  // already: none may be served again). Then one sweep over every removed pair.
  shmf_bench::Rng rng(ctx.opt.seed * 131 + static_cast<uint64_t>(ctx.worker));
  t0 = now_ns();
  while (aref(g->flags->operator_done).load() == 0) {
    for (int k = 0; k < 64; ++k) {
      const uint64_t published = aref(g->flags->removed_count).load(std::memory_order_acquire);  // acquire: pairs with the operator's release
      const uint32_t pair = (published > 0 && (rng.next() & 1))
                                ? g->removed_list[rng.below(published)]
                                : static_cast<uint32_t>(rng.below(g->distinct));
      if (serve(cf, pair)) ++c[kServedB];
      ++c[kOpsB];
    }
    if (aref(g->flags->removed_count).load() > 0) aref(g->flags->lookups_during).fetch_add(64, std::memory_order_relaxed);
    if (getppid() == 1) _exit(3);
  }
  for (uint64_t i = 0; i < g->removals; ++i) {
    if (serve(cf, g->removed_list[i])) ++c[kServedB];
    ++c[kOpsB];
  }
  c[kNsB] = now_ns() - t0;
  if (op > 0) {
    int status = 0;
    waitpid(op, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("the operator process failed");
  }
}

void report(Ctx& ctx) {
  auto cf = shmfilter::Cuckoo::open(ctx.seg, kName);
  const auto st = cf.stats();
  uint64_t inserted = 0, skipped = 0, twice_a = 0, again_once = 0, again_more = 0, again_none = 0, leaked = 0,
           first_time = 0, matched_again = 0;
  for (uint64_t i = 0; i < g->distinct; ++i) {
    const unsigned a = g->claim_a[i], b = g->claim_b[i];
    inserted += a;
    if (a == 0) ++skipped;
    if (a > 1) ++twice_a;
    if (g->removed[i]) {
      if (b == 1) ++again_once;
      else if (b == 0 && cf.contains(key_of(i))) ++matched_again;  // a pair served since shares its fingerprint: an FP
      else if (b == 0) ++again_none;
      else ++again_more;
    } else if (b > 0) {
      if (a == 0) ++first_time;  // its pass-1 skip was a false positive of a removed pair's fingerprint
      else leaked += b;          // a served pair served again without being removed: a dedup window
    }
  }
  const Flags& f = *g->flags;
  printf("  pass 1: %" PRIu64 " events, %" PRIu64 " pairs inserted (%" PRIu64 " told kInserted twice: test-and-insert is atomic),\n"
         "    %" PRIu64 " skipped as false positives (%.3f%%; bound %.2f%% at full load), %" PRIu64 " kFull; %s events/s\n",
         total(ctx, "cuckoo", kEvents), inserted, twice_a, skipped, 100.0 * static_cast<double>(skipped) / static_cast<double>(g->distinct),
         100 * st.fp_rate_bound, total(ctx, "cuckoo", kFull),
         big(static_cast<double>(g->events) / (static_cast<double>(max_of(ctx, "cuckoo", kNsA)) / 1e9)).c_str());
  printf("  undo: the operator removed %" PRIu64 " served pairs (erase true for %" PRIu64 ") in %.1f ms while the workers\n"
         "    made %" PRIu64 " lookups; no rebuild, no second key, no window without deduplication\n",
         g->removals, f.erased_ok, static_cast<double>(f.erase_ns) / 1e6, f.lookups_during);
  printf("  served again: exactly once %" PRIu64 " of %" PRIu64 " removed pairs; twice or more %" PRIu64 "; never %" PRIu64
         "\n    (plus %" PRIu64 " answered present by a fingerprint another pair stored since: a false positive)\n",
         again_once, g->removals, again_more, again_none, matched_again);
  printf("  pairs not removed but served again (a dedup window): %" PRIu64 "; first served now (pass-1 false positive\n"
         "    of a removed pair's fingerprint): %" PRIu64 "\n",
         leaked, first_time);
  printf("  memory: Cuckoo %s, %.1f bits per pair at load %.1f%%, FP bound %.2f%%; writer-lock takeovers %" PRIu64 "\n",
         shmfilter::format_size(st.bytes).c_str(), static_cast<double>(st.bytes) * 8 / static_cast<double>(g->distinct),
         100 * st.load_factor, 100 * st.fp_rate_bound, st.repairs);
  if (twice_a || again_more || again_none || leaked || f.erased_ok != g->removals)
    throw std::runtime_error("cuckoo stage: a pair was served twice or a removed pair was not served again");
}
}  // namespace cuckoo

// ---- stage 4: distinct devices per plan: HLL for big plans, ExactSet for small ones -------

namespace uv {
enum Counter { kEvents, kExactInserted, kNs };

std::string hll_name(uint32_t plan) { return "uv:hll:" + std::to_string(plan); }
std::string exact_name(uint32_t plan) { return "uv:exact:" + std::to_string(plan); }

void setup(Ctx& ctx) {
  prepare(ctx);
  make_counters(ctx, "uv");
  shmfilter::Hll::create(ctx.seg, "uv:hll:all");
  for (uint32_t p : g->top) shmfilter::Hll::create(ctx.seg, hll_name(p));
  for (uint32_t p : g->small) {
    shmfilter::ExactSetOptions o;
    o.capacity = g->true_uv[p] * 2 + 16;  // a small plan's budgeted reach, with room
    shmfilter::ExactSet::create(ctx.seg, exact_name(p), o);
  }
}

void worker(Ctx& ctx) {
  uint64_t* c = counters_of(ctx, "uv", ctx.worker);
  auto all = shmfilter::Hll::open(ctx.seg, "uv:hll:all");
  std::vector<shmfilter::Hll> hll(g->wo.plans);
  for (uint32_t p : g->top) hll[p] = shmfilter::Hll::open(ctx.seg, hll_name(p));
  std::vector<shmfilter::ExactSet> ex;
  for (uint32_t p : g->small) ex.push_back(shmfilter::ExactSet::open(ctx.seg, exact_name(p)));
  const uint64_t t0 = now_ns();
  for (uint64_t pos = static_cast<uint64_t>(ctx.worker); pos < g->events; pos += static_cast<uint64_t>(ctx.opt.workers)) {
    const uint64_t pair = g->stream[pos];
    const uint32_t plan = wl().plan_of(pair);
    const uint64_t device = wl().device_of(pair);
    all.add(device);
    if (hll[plan].valid()) hll[plan].add(device);
    if (g->exact_idx[plan] >= 0 &&
        ex[static_cast<size_t>(g->exact_idx[plan])].insert(device) == shmfilter::InsertResult::kInserted)
      ++c[kExactInserted];
    ++c[kEvents];
  }
  c[kNs] = now_ns() - t0;
}

void report(Ctx& ctx) {
  auto row = [](const char* what, uint64_t truth, uint64_t est) {
    printf("    %-16s %10" PRIu64 " %10" PRIu64 " %+8.2f%%\n", what, truth, est,
           truth ? 100.0 * (static_cast<double>(est) - static_cast<double>(truth)) / static_cast<double>(truth) : 0.0);
  };
  printf("  HLL (13 KB each, Redis PFCOUNT-compatible; sigma 0.81%%): distinct devices, true vs estimated\n");
  printf("    %-16s %10s %10s %9s\n", "plan", "true", "HLL", "error");
  for (uint32_t p : g->top) row(("plan " + std::to_string(p)).c_str(), g->true_uv[p], shmfilter::Hll::open(ctx.seg, hll_name(p)).count());
  std::vector<shmfilter::Hll> top;
  for (uint32_t p : g->top) top.push_back(shmfilter::Hll::open(ctx.seg, hll_name(p)));
  uint64_t top_true = 0;
  for (uint32_t p : g->top) top_true += g->true_uv[p];  // devices are distinct across pairs: the union's size
  row("union of these", top_true, shmfilter::Hll::count_union(top));
  row("all plans", g->distinct, shmfilter::Hll::open(ctx.seg, "uv:hll:all").count());
  printf("  ExactSet for small plans (exact counts; each device inserted by exactly one worker):\n");
  printf("    %-16s %10s %10s %9s\n", "plan", "true", "ExactSet", "bytes");
  uint64_t sizes = 0;
  bool exact_ok = true;
  for (uint32_t p : g->small) {
    auto s = shmfilter::ExactSet::open(ctx.seg, exact_name(p));
    printf("    %-16s %10" PRIu64 " %10" PRIu64 " %9" PRIu64 "\n", ("plan " + std::to_string(p)).c_str(), g->true_uv[p], s.size(),
           s.stats().bytes);
    sizes += s.size();
    exact_ok = exact_ok && s.size() == g->true_uv[p];
  }
  const double secs = static_cast<double>(max_of(ctx, "uv", kNs)) / 1e9;
  printf("  kInserted answers over all workers %" PRIu64 " = sum of set sizes %" PRIu64 "; %s events/s\n",
         total(ctx, "uv", kExactInserted), sizes, big(static_cast<double>(g->events) / secs).c_str());
  printf("  (an HLL only counts: it cannot answer \"was device D served?\"; that is the filters' job)\n");
  if (!exact_ok || sizes != total(ctx, "uv", kExactInserted))
    throw std::runtime_error("uv stage: an ExactSet count is not exact");
}
}  // namespace uv

}  // namespace mission

// ---- the mission's week: one Window for every plan and every day -----------------
// The frequency-capping week through ONE structure (include/shmfilter/window.hpp):
// 8 simulated days at local midnight UTC+8 (the injectable clock: a week in
// seconds), retention 7. Every day is a fresh stream of the generator (a seed per
// day: Zipf plan sizes, 30% repeats); worker w answers every N-th event with
// mark_if_unseen(plan, device, w=1) ("served by this plan today? if not, it is
// now"). The window is the default variant, kStamped: ONE table whose lanes carry
// each pair's last day, so a pair served on several days holds one lane and a
// 7-day question reads what a 1-day one reads. Worker 0 is also the housekeeper
// (maintain() after its share of a day: the next day's counter rows are prepared,
// expired days are freed, and lanes that left every window are swept) and, on
// day 4, the operator who forgets day 3's first pairs while the other workers keep
// serving. On the last day every worker also caps a slice of its devices at 3
// impressions a week (mark_if_under: allowed / capped). Per-plan served counts
// (new_count) are checked against the generator's truth.
namespace week {

constexpr int kDays = 8;
constexpr int64_t kDay = 86400;
constexpr int64_t kMonday = 1764518400;  // 2025-12-01 00:00 at UTC+8 (16:00 UTC the day before)
constexpr int kForgetDay = 4;            // the operator's day; it forgets pairs of the day before
enum Counter { kEvents, kNew, kSeen, kOther, kNs, kForgot, kForgetNs, kLookupsDuring, kNewDay0, kCapCalls, kCapAllowed,
               kCapOver };
const char* kName = "week:window";

struct Day {
  uint64_t done;         // workers done with the day (fetch_add)
  uint64_t ready;        // the housekeeper's maintain for the day is done (release)
  uint64_t forgetting;   // 1 while the operator forgets (other workers count lookups)
  uint64_t forgot_ok;    // forget() answers kRemoved
  uint64_t renewed;      // forgotten pairs that answered kNew again afterwards
};
struct Week {
  Day day[kDays];
  uint64_t forgets;  // how many pairs the operator forgets
};
Week* g_week = nullptr;
shmf_bench::WorkloadOptions day_options(const Options& o, int d) {
  shmf_bench::WorkloadOptions w;
  w.scale = o.scale;
  w.seed = o.seed * 1000 + static_cast<uint64_t>(d);
  return w;
}

void setup(Ctx& ctx) {
  make_counters(ctx, "week");
  g_week = mission::shared_array<Week>(1);
  shmfilter::WindowOptions o;  // the default variant: kStamped (deletable: the operator's forget; caps)
  o.expected_per_bucket = static_cast<uint64_t>(ctx.opt.scale * 1.2e8);
  o.error = 0.01;
  o.error_window = 1;  // "served today?" at 1%
  o.utc_offset = 8 * 3600;
  o.retention = 7;
  o.max_spaces = 8192;
  o.seed = ctx.opt.seed;
  shmfilter::Window::create(ctx.seg, kName, o);
  g_week->forgets = std::clamp<uint64_t>(o.expected_per_bucket / 1000, 50, 100000);
}

void wait_for(uint64_t& word, uint64_t target) {
  while (mission::aref(word).load(std::memory_order_acquire) < target) {
    if (getppid() == 1) _exit(3);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void worker(Ctx& ctx) {
  uint64_t* c = counters_of(ctx, "week", ctx.worker);
  auto win = shmfilter::Window::open(ctx.seg, kName);
  const uint64_t n = static_cast<uint64_t>(ctx.opt.workers);
  const uint64_t t0 = now_ns();
  for (int d = 0; d < kDays; ++d) {
    Day& day = g_week->day[d];
    win.set_now(kMonday + d * kDay + 9 * 3600);  // 09:00 local on day d
    if (ctx.worker != 0) wait_for(day.ready, 1);
    if (ctx.worker == 0) {
      if (d == 0) win.maintain();  // the housekeeper prepares the first simulated day (and its spare)
      mission::aref(day.ready).store(1, std::memory_order_release);
    }
    shmf_bench::Workload wl(day_options(ctx.opt, d));
    const uint64_t distinct = wl.target_distinct();
    shmf_bench::Workload prev(day_options(ctx.opt, d - 1));
    uint64_t pos = 0, next_forget = 0;
    const uint64_t forget_from = distinct / 4;  // the operator starts a quarter into its day
    while (wl.distinct_so_far() < distinct) {
      const auto e = wl.next();
      if (pos++ % n != static_cast<uint64_t>(ctx.worker)) continue;
      const auto st = win.mark_if_unseen(e.plan, e.device, 1);
      ++c[kEvents];
      if (st == shmfilter::WindowStatus::kNew) {
        ++c[kNew];
        if (d == 0) ++c[kNewDay0];
      }
      else if (st == shmfilter::WindowStatus::kSeen) ++c[kSeen];
      else ++c[kOther];
      if (d == kForgetDay && ctx.worker != 0 && mission::aref(day.forgetting).load(std::memory_order_relaxed))
        ++c[kLookupsDuring];
      // The operator: forgets the previous day's first pairs, one by one, while the others serve.
      if (d == kForgetDay && ctx.worker == 0 && wl.distinct_so_far() >= forget_from && next_forget < g_week->forgets) {
        if (next_forget == 0) {
          mission::aref(day.forgetting).store(1, std::memory_order_relaxed);
          c[kForgetNs] = now_ns();
        }
        for (int k = 0; k < 1 && next_forget < g_week->forgets; ++k, ++next_forget) {
          if (win.forget(prev.plan_of(next_forget), prev.device_of(next_forget)) == shmfilter::WindowStatus::kRemoved)
            mission::aref(day.forgot_ok).fetch_add(1, std::memory_order_relaxed);
          ++c[kForgot];
        }
        if (next_forget == g_week->forgets) {
          c[kForgetNs] = now_ns() - c[kForgetNs];
          mission::aref(day.forgetting).store(0, std::memory_order_relaxed);
          // Un-served: the next request for such a pair is served again (and counted again).
          for (uint64_t i = 0; i < g_week->forgets; ++i)
            if (!win.seen(prev.plan_of(i), prev.device_of(i), 7) &&
                win.mark_if_unseen(prev.plan_of(i), prev.device_of(i), 7) == shmfilter::WindowStatus::kNew) {
              mission::aref(day.renewed).fetch_add(1, std::memory_order_relaxed);
              ++c[kNew];
            }
        }
      }
    }
    if (d == kDays - 1) {
      // Frequency caps: the last day's first pairs of this worker, each asked 5 times for an
      // impression under a cap of 3 a week (space = the plan + 1,000,000: the caps' own counts).
      const uint64_t slice = std::clamp<uint64_t>(distinct / 200, 10, 50000);
      for (uint64_t i = ctx.worker; i < slice; i += n) {
        uint32_t allowed = 0;
        for (int k = 0; k < 5; ++k) {
          const auto a = win.mark_if_under(wl.plan_of(i) + 1000000, wl.device_of(i), 3, 7);
          ++c[kCapCalls];
          if (a == shmfilter::WindowStatus::kNew) ++allowed;
          else if (a != shmfilter::WindowStatus::kCapped) ++c[kOther];
        }
        c[kCapAllowed] += allowed;
        if (allowed > 3) ++c[kCapOver];
      }
    }
    if (ctx.worker == 0) win.maintain();  // housekeeping: tomorrow's counter rows; expired days freed; the sweep
    mission::aref(day.done).fetch_add(1, std::memory_order_acq_rel);
    wait_for(day.done, n);
  }
  c[kNs] = now_ns() - t0;
}

void report(Ctx& ctx) {
  auto win = shmfilter::Window::open(ctx.seg, kName);
  win.set_now(kMonday + (kDays - 1) * kDay + 23 * 3600);
  const auto st = win.stats();
  // Truth per plan per day (the generator knows every day's distinct pairs).
  std::vector<std::vector<uint64_t>> truth(kDays, std::vector<uint64_t>(8000, 0));
  uint64_t week_pairs = 0;
  for (int d = 0; d < kDays; ++d) {
    shmf_bench::Workload wl(day_options(ctx.opt, d));
    for (uint64_t i = 0; i < wl.target_distinct(); ++i) ++truth[d][wl.plan_of(i)];
    week_pairs += wl.target_distinct();
  }
  printf("  %d days x %s distinct (plan, device) pairs over 8,000 Zipf plans, %s events; retention 7 buckets of one day\n",
         kDays, mission::big(static_cast<double>(st.expected_per_bucket)).c_str(), mission::big(static_cast<double>(total(ctx, "week", kEvents))).c_str());
  printf("  variant %s; one query over w = 1 or w = 7 reads the pair's two bucket words; FP bound over w = 7: %.3f%%\n",
         std::string(shmfilter::window_variant_name(st.variant)).c_str(), 100 * st.window_fp_bound(7));
  printf("  day  distinct  served (kNew)  capacity  overflow  FP bound  per-plan counts exact\n");
  uint64_t served_total = 0, exact_plans = 0, plans_total = 0, undercount = 0, overcount = 0, offered = 0;
  for (uint32_t age = 0; age < st.retention; ++age) {
    const int d = kDays - 1 - static_cast<int>(age);
    const auto& b = st.buckets[age];
    uint64_t served = 0, exact = 0, nonempty = 0;
    for (uint32_t p = 0; p < 8000; ++p) {
      const uint64_t got = win.new_count(p, age), want = truth[d][p];
      served += got;
      offered += want;
      if (want == 0 && got == 0) continue;
      ++nonempty;
      if (got == want) ++exact;
      if (got < want) undercount += want - got;
      if (got > want) overcount += got - want;
    }
    served_total += served;
    exact_plans += exact;
    plans_total += nonempty;
    printf("  %3d  %8s  %13s  %8s  %8s  %7.3f%%  %" PRIu64 " of %" PRIu64 " plans\n", d, mission::big(static_cast<double>(b.distinct)).c_str(),
           mission::big(static_cast<double>(served)).c_str(), mission::big(static_cast<double>(b.capacity)).c_str(), b.overflow ? "yes" : "no",
           100 * b.fp_bound, exact, nonempty);
  }
  printf("  day 0 left the window: %s (its table was freed by maintain)\n",
         st.buckets.size() == 7 && st.buckets[6].bucket == win.bucket_of(kMonday + 1 * kDay) ? "yes" : "NO");
  printf("  per-plan served counts against the truth: %" PRIu64 " of %" PRIu64
         " (plan, day) counts exact; %" PRIu64 " pairs not served (false positives: \"seen\" on first sight, <= 1%%),\n"
         "    %" PRIu64 " served twice (the operator's forgotten pairs, served again)\n",
         exact_plans, plans_total, undercount, overcount);
  const Day& fday = g_week->day[kForgetDay];
  printf("  operator: forgot %" PRIu64 " of day %d's pairs during day %d's traffic in %.1f ms (%" PRIu64
         " removed; %" PRIu64 " lookups by the other workers meanwhile: dedup never stopped);\n"
         "    %" PRIu64 " of them answered \"new\" again afterwards\n",
         g_week->forgets, kForgetDay - 1, kForgetDay, static_cast<double>(max_of(ctx, "week", kForgetNs)) / 1e6, fday.forgot_ok,
         total(ctx, "week", kLookupsDuring), fday.renewed);
  const double secs = static_cast<double>(max_of(ctx, "week", kNs)) / 1e9;
  printf("  throughput: %s mark_if_unseen calls in %.2f s = %s/s over %d workers; rotations %" PRIu64
         " (one CAS each), inline allocations %" PRIu64 "\n",
         mission::big(static_cast<double>(total(ctx, "week", kEvents))).c_str(), secs,
         mission::big(secs > 0 ? static_cast<double>(total(ctx, "week", kEvents)) / secs : 0).c_str(), ctx.opt.workers, st.rotations,
         st.inline_allocations);
  // Memory: this window, and what the same week costs elsewhere.
  const double n = static_cast<double>(st.expected_per_bucket);
  shmfilter::WindowOptions bo;
  bo.variant = shmfilter::WindowVariant::kBloom;  // the insert-only table, for the daily question alone
  bo.expected_per_bucket = st.expected_per_bucket;
  bo.error = 0.01;
  bo.error_window = 1;
  const auto bloom_plan = shmfilter::Window::plan(bo);
  bo.expected_per_bucket = 120000000;
  const auto mission_plan = shmfilter::Window::plan(bo);
  // The same week in the ring variants (7 tables + the spare), as plan() sizes them.
  shmfilter::WindowOptions ro;
  ro.expected_per_bucket = st.expected_per_bucket;
  ro.error = 0.01;
  ro.retention = 7;
  ro.variant = shmfilter::WindowVariant::kBloom;
  const auto ring_bloom = shmfilter::Window::plan(ro);
  ro.variant = shmfilter::WindowVariant::kCuckoo;
  const auto ring_cuckoo = shmfilter::Window::plan(ro);
  printf("  memory: this window %s in all (%s lanes now: one per pair whatever its days, and every cap tally);\n"
         "    the same week, 1%% over w = 7: the insert-only ring %s, the per-day cuckoo ring %s (7 tables + the spare each);\n"
         "    the daily question alone (1%% over w = 1): an insert-only table %s per bucket (%.2f bits/pair); at the mission's 1.2e8 pairs a day: %s per bucket\n"
         "    vs per day: 8,000 per-plan filters %s (the deployed 380 MB x scale), one ideal filter %s (137 MiB x scale),\n"
         "    a Redis SET %s (~90 B/member)\n",
         shmfilter::format_size(st.memory_bytes).c_str(), mission::big(static_cast<double>(st.lanes)).c_str(),
         shmfilter::format_size(ring_bloom.full_window_bytes).c_str(), shmfilter::format_size(ring_cuckoo.full_window_bytes).c_str(),
         shmfilter::format_size(bloom_plan.table_bytes).c_str(), bloom_plan.bits_per_pair,
         shmfilter::format_size(mission_plan.table_bytes).c_str(),
         shmfilter::format_size(static_cast<uint64_t>(380e6 * ctx.opt.scale)).c_str(),
         shmfilter::format_size(static_cast<uint64_t>(137.0 * 1048576 * ctx.opt.scale)).c_str(),
         shmfilter::format_size(static_cast<uint64_t>(90 * n)).c_str());
  // This variant's numbers in one place: memory (everything the window holds: buckets, the spare,
  // overflow, metadata; and what plan() says the mission's week costs), FP (first sights answered
  // "seen" over the pairs the window's 7 days offered, against the bound stats() states) and costs
  // (single lookups timed here, absent pairs, out of cache at --scale 1; the workers' marks).
  {
    const std::string vname(shmfilter::window_variant_name(st.variant));
    shmfilter::WindowOptions mo;
    mo.variant = st.variant;
    mo.expected_per_bucket = 120000000;
    mo.error = st.error;
    mo.error_window = st.error_window;
    mo.retention = st.retention;
    mo.max_spaces = st.max_spaces;
    const auto mp = shmfilter::Window::plan(mo);
    mo.expected_per_bucket = st.expected_per_bucket;
    const auto here = shmfilter::Window::plan(mo);  // this week's sizing: past it, overflow
    auto p50_of = [&](uint32_t w) {
      constexpr uint64_t kCalls = 100000;
      std::vector<uint64_t> ns(kCalls), clk(kCalls);
      uint64_t hits = 0;
      for (uint64_t i = 0; i < kCalls; ++i) {  // the clock's own cost, to subtract
        const uint64_t a = now_ns();
        clk[i] = now_ns() - a;
      }
      for (uint64_t i = 0; i < kCalls; ++i) {
        const uint64_t item = shmf_bench::mix64((uint64_t{0x5eed} << 40) + i), plan = item % 8000;
        const uint64_t a = now_ns();
        hits += win.seen(plan, item, w);
        ns[i] = now_ns() - a;
      }
      std::nth_element(clk.begin(), clk.begin() + kCalls / 2, clk.end());
      std::nth_element(ns.begin(), ns.begin() + kCalls / 2, ns.end());
      return std::make_pair(static_cast<double>(ns[kCalls / 2]) - static_cast<double>(clk[kCalls / 2]),
                            static_cast<double>(hits) / kCalls);
    };
    const auto s1 = p50_of(1), s7 = p50_of(7);
    const double calls = static_cast<double>(total(ctx, "week", kEvents));
    printf("  the %s variant%s: memory %s for the week (plan(): %s; at the mission's 1.2e8 a day: %s); FP measured %.3f%%\n"
           "    of first sights answered \"seen\" (%" PRIu64 " of %s; stated bound at w = 1: %.3f%%; absent pairs asked at\n"
           "    w = 1 / w = 7: %.3f%% / %.3f%%); costs: seen p50 %.0f ns at w = 1, %.0f ns at w = 7 (single calls, clock\n"
           "    cost subtracted); mark_if_unseen %.0f ns a call in each worker (wall, workload generation included)\n",
           vname.c_str(), st.variant == shmfilter::WindowOptions{}.variant ? " (the default)" : "",
           shmfilter::format_size(st.memory_bytes).c_str(), shmfilter::format_size(here.full_window_bytes).c_str(),
           shmfilter::format_size(mp.full_window_bytes).c_str(), offered ? 100.0 * static_cast<double>(undercount) / static_cast<double>(offered) : 0.0, undercount,
           mission::big(static_cast<double>(offered)).c_str(), 100 * st.window_fp_bound(1), 100 * s1.second,
           100 * s7.second, s1.first, s7.first, calls > 0 ? secs * 1e9 * ctx.opt.workers / calls : 0.0);
  }
  const uint64_t served_answers = total(ctx, "week", kNew) - total(ctx, "week", kNewDay0);
  // A forgotten pair that still answers "seen" is a false positive of the other pairs in the
  // 7 buckets (a matching fingerprint): allowed up to the window's stated bound over w = 7
  // (at scale 0.01, 300 forgets, the allowance rounds to 0-4; at 0.25, 30,000 forgets: ~400).
  const uint64_t renew_allow = static_cast<uint64_t>(std::ceil(static_cast<double>(g_week->forgets) * st.window_fp_bound(7)));
  if (fday.renewed != g_week->forgets)
    printf("  %" PRIu64 " forgotten pairs still answered \"seen\": false positives of other pairs (allowed by the w=7 bound "
           "%.3f%%: %" PRIu64 ")\n",
           g_week->forgets - fday.renewed, 100 * st.window_fp_bound(7), renew_allow);
  printf("  caps: %s mark_if_under calls (cap 3 a week, 5 asks per device): %s allowed, %" PRIu64
         " devices allowed more than 3 (must be 0)\n",
         mission::big(static_cast<double>(total(ctx, "week", kCapCalls))).c_str(),
         mission::big(static_cast<double>(total(ctx, "week", kCapAllowed))).c_str(), total(ctx, "week", kCapOver));
  const bool ok = total(ctx, "week", kOther) == 0 && fday.forgot_ok == g_week->forgets && total(ctx, "week", kCapOver) == 0 &&
                  fday.renewed + renew_allow >= g_week->forgets && fday.renewed <= g_week->forgets &&
                  undercount <= static_cast<uint64_t>(0.01 * static_cast<double>(week_pairs)) + 10 &&
                  overcount <= g_week->forgets && st.inline_allocations == 0 && served_answers == served_total;
  printf("  %s: kNew answers of the last 7 days %" PRIu64 " = sum of per-plan counts %" PRIu64
         "; no kFull/kDropped answers (%" PRIu64 ")\n",
         ok ? "OK" : "FAILED", served_answers, served_total, total(ctx, "week", kOther));
  if (!ok) throw std::runtime_error("week stage: the window's answers do not add up");
}

}  // namespace week

// ---- the stage list --------------------------------------------------------------

struct Stage {
  const char* name;
  const char* what;
  void (*setup)(Ctx&);
  void (*worker)(Ctx&);
  void (*report)(Ctx&);
};

const Stage kStages[] = {
    {"regions", "workers create, find and drop named regions from one pool of names", regions::setup,
     regions::worker, regions::report},
    {"week", "the mission's week: frequency capping for 8,000 plans over 7-day buckets in ONE Window "
             "(day rollover, an operator's forget during traffic, per-plan served counts)",
     week::setup, week::worker, week::report},
    {"bloom", "frequency capping: N workers deduplicate one stream of \"plan:device\" keys through one Bloom filter",
     mission::bloom::setup, mission::bloom::worker, mission::bloom::report},
    {"cuckoo", "the same stream through today's Cuckoo filter; then an operator removes served pairs while traffic goes on",
     mission::cuckoo::setup, mission::cuckoo::worker, mission::cuckoo::report},
    {"uv", "distinct devices per plan: HLLs for the big plans and overall, ExactSets for small plans",
     mission::uv::setup, mission::uv::worker, mission::uv::report},
};

// ---- control block: barrier and release between parent and workers --------------

struct Control {
  uint64_t barrier;  // arrivals, all generations: stage g is passed when it reaches workers * (g + 1)
  uint64_t finished; // workers done with every stage, still attached
  uint64_t release;  // set by the parent once it has shown the registry
  uint64_t victim_token;
};

Control* control(Ctx& ctx) {
  auto r = ctx.seg.open_region("demo:control", Kind::kBlob);
  return reinterpret_cast<Control*>(ctx.seg.base() + r.offset);
}

void wait_until(const std::function<bool()>& pred) {
  while (!pred()) {
    if (getppid() == 1) _exit(3);  // the parent is gone: stop
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

int worker_main(const Options& opt, int w) {
  Ctx ctx{opt, Segment::open(opt.segment), w};  // an attachment is per process: open our own
  Control* cb = control(ctx);
  uint64_t gen = 0;
  for (const Stage& s : kStages) {
    s.worker(ctx);
    ctx.seg.quiesce();
    const uint64_t target = static_cast<uint64_t>(opt.workers) * ++gen;
    at(cb->barrier).fetch_add(1);
    wait_until([&] { return at(cb->barrier).load() >= target; });
  }
  at(cb->finished).fetch_add(1);
  wait_until([&] { return at(cb->release).load() != 0; });
  return 0;
}

void print_registry(Ctx& ctx, const std::vector<pid_t>& workers, pid_t victim) {
  const uint64_t me = ctx.seg.owner_token();
  printf("  %-5s %-8s %-6s %-18s %s\n", "SLOT", "PID", "ALIVE", "TOKEN", "WHO");
  for (const auto& p : ctx.seg.processes()) {
    std::string who = "?";
    if (p.token == me) who = "demo parent";
    for (size_t i = 0; i < workers.size(); ++i)
      if (p.pid == workers[i]) who = "worker " + std::to_string(i);
    if (victim != 0 && p.pid == victim) who = "victim (SIGKILLed)";
    printf("  %-5u %-8d %-6s %016" PRIx64 "   %s\n", p.slot, p.pid, p.alive ? "yes" : "no", p.token, who.c_str());
  }
}

[[noreturn]] void usage(int rc) {
  fprintf(rc ? stderr : stdout,
          "Usage: demo [--workers N] [--scale S] [--seed N] [--segment NAME] [--keep]\n"
          "\n"
          "N worker processes attach to one shmfilter segment and work on it together.\n"
          "  --workers N      worker processes (default 4, at most %d)\n"
          "  --scale S        workload size; 1.0 = the mission's 1.2e8 distinct device ids\n"
          "                   a day (default 0.01)\n"
          "  --seed N         workload seed (default 42)\n"
          "  --segment NAME   segment name (default shmf-demo-<pid>); must not exist\n"
          "  --keep           keep the segment afterwards (inspect it with shmtool dump NAME)\n"
          "  --shmtool PATH   how the hints spell shmtool (scripts/demo.sh passes its build's)\n",
          kMaxWorkers);
  exit(rc);
}

Options parse(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) {
      fprintf(stderr, "demo: option %s needs a value\n", argv[i]);
      usage(2);
    }
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    char* end = nullptr;
    if (a == "--help" || a == "-h") {
      usage(0);
    } else if (a == "--workers") {
      std::string v = value(i);
      long n = strtol(v.c_str(), &end, 10);
      if (*end || n < 1 || n > kMaxWorkers) {
        fprintf(stderr, "demo: --workers '%s' is invalid: pass 1 to %d\n", v.c_str(), kMaxWorkers);
        exit(2);
      }
      o.workers = static_cast<int>(n);
    } else if (a == "--scale") {
      std::string v = value(i);
      o.scale = strtod(v.c_str(), &end);
      if (*end || !(o.scale > 0) || o.scale > 10) {
        fprintf(stderr, "demo: --scale '%s' is invalid: pass a number in (0, 10]\n", v.c_str());
        exit(2);
      }
    } else if (a == "--seed") {
      std::string v = value(i);
      o.seed = strtoull(v.c_str(), &end, 10);
      if (*end || v.empty()) {
        fprintf(stderr, "demo: --seed '%s' is invalid: pass a non-negative integer\n", v.c_str());
        exit(2);
      }
    } else if (a == "--segment") {
      o.segment = value(i);
    } else if (a == "--keep") {
      o.keep = true;
    } else if (a == "--shmtool") {
      o.shmtool = value(i);
    } else {
      fprintf(stderr, "demo: unknown argument '%s'\n", a.c_str());
      usage(2);
    }
  }
  if (o.segment.empty()) o.segment = "shmf-demo-" + std::to_string(getpid());
  return o;
}

// Kills and reaps every worker still running (on failure).
void kill_all(const std::vector<pid_t>& pids) {
  for (pid_t p : pids)
    if (p > 0) kill(p, SIGKILL);
  for (pid_t p : pids)
    if (p > 0) waitpid(p, nullptr, 0);
}

int run(const Options& opt) {
  const uint64_t t_start = now_ns();
  shmfilter::CreateOptions co;
  Ctx ctx{opt, Segment::create(opt.segment, co), -1};
  printf("shmfilter demo: %d worker processes, one segment '%s' (/dev/shm/%s), scale %g, seed %" PRIu64 "\n\n",
         opt.workers, opt.segment.c_str(), opt.segment.c_str(), opt.scale, opt.seed);
  ctx.seg.create_region("demo:control", Kind::kBlob, sizeof(Control), [](std::byte*, uint64_t, shmfilter::ControlTxn&) {});
  for (const Stage& s : kStages) s.setup(ctx);

  std::vector<pid_t> pids;
  for (int w = 0; w < opt.workers; ++w) {
    fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
      kill_all(pids);
      throw std::runtime_error(std::string("fork failed: ") + strerror(errno));
    }
    if (pid == 0) {
      int rc = 1;
      try {
        rc = worker_main(opt, w);
      } catch (const std::exception& e) {
        fprintf(stderr, "worker %d (pid %d): %s\n", w, getpid(), e.what());
      }
      _exit(rc);
    }
    pids.push_back(pid);
  }

  // Wait for every worker to finish all stages while still attached; a worker
  // that dies early fails the demo.
  Control* cb = control(ctx);
  while (at(cb->finished).load() < static_cast<uint64_t>(opt.workers)) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int st = 0;
      if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        pids[i] = -pids[i];
        kill_all(pids);
        throw std::runtime_error("worker " + std::to_string(i) + " exited early (status " + std::to_string(st) + ")");
      }
    }
    ctx.seg.quiesce();  // the parent holds no pointer into freed regions: let them be reused
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  printf("attached processes while the workers work (from the segment's registry):\n");
  print_registry(ctx, pids, 0);
  at(cb->release).store(1);
  int failed = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    int st = 0;
    waitpid(pids[i], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "demo: worker %zu failed (status %d)\n", i, st);
      ++failed;
    }
  }
  if (failed) throw std::runtime_error(std::to_string(failed) + " workers failed");

  int n = 0;
  for (const Stage& s : kStages) {
    printf("\nstage %d: %s: %s\n", ++n, s.name, s.what);
    s.report(ctx);
  }

  // Integrity check while every worker has detached cleanly: must be consistent.
  auto report = ctx.seg.check(false);
  printf("\nintegrity check after the stages: %s (%zu findings)\n", report.consistent() ? "consistent" : "PROBLEMS",
         report.findings.size());
  for (const auto& f : report.findings) printf("    %s: %s\n", f.where.c_str(), f.problem.c_str());
  if (!report.consistent()) throw std::runtime_error("the segment is not consistent after the stages");

  // A process that is SIGKILLed while attached: the kernel drops its lock, so the
  // registry reports it dead even though nothing ran in it to say goodbye.
  int ready[2];
  if (pipe(ready) != 0) throw std::runtime_error("pipe failed");
  fflush(nullptr);
  pid_t victim = fork();
  if (victim == 0) {
    close(ready[0]);
    try {
      Segment s = Segment::open(opt.segment);
      Ctx vctx{opt, s, 0};
      at(control(vctx)->victim_token).store(s.owner_token());
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(1);
      pause();
    } catch (...) {
    }
    _exit(1);
  }
  close(ready[1]);
  char c = 0;
  if (read(ready[0], &c, 1) != 1) throw std::runtime_error("the victim process could not attach");
  close(ready[0]);
  const uint64_t victim_token = at(cb->victim_token).load();
  const bool alive_before = ctx.seg.token_alive(victim_token);
  kill(victim, SIGKILL);
  waitpid(victim, nullptr, 0);
  const bool alive_after = ctx.seg.token_alive(victim_token);
  printf("\nafter the workers detached and one more process (pid %d) was SIGKILLed while attached:\n", victim);
  print_registry(ctx, {}, victim);
  printf("  victim token %016" PRIx64 ": alive before kill %s, after kill %s (kernel lock, not the pid)\n",
         victim_token, alive_before ? "yes" : "no", alive_after ? "yes" : "no");
  if (!alive_before || alive_after) throw std::runtime_error("process registry did not track the victim's death");

  // check() sees the dead attachment; --repair (shmtool check --repair) reclaims its slot.
  auto repaired = ctx.seg.check(true);
  for (const auto& f : repaired.findings)
    printf("  check --repair: %s: %s%s\n", f.where.c_str(), f.problem.c_str(), f.repaired ? " (repaired)" : "");
  auto after = ctx.seg.check(false);
  printf("  integrity check after repair: %s\n", after.consistent() ? "consistent" : "PROBLEMS");

  auto st = ctx.seg.stats();
  printf("\nsummary\n");
  printf("  segment: %s in use by %u structures, size %s, %u free extents, %s quarantined\n",
         shmfilter::format_size(st.used_bytes).c_str(), st.structures, shmfilter::format_size(st.size).c_str(),
         st.free_extents, shmfilter::format_size(st.quarantined_bytes).c_str());
  printf("  total time %.2f s\n", static_cast<double>(now_ns() - t_start) / 1e9);
  if (opt.keep)
    printf("  kept segment '%s': inspect it with '%s dump %s', remove it with '%s remove %s'\n", opt.segment.c_str(),
           opt.shmtool.c_str(), opt.segment.c_str(), opt.shmtool.c_str(), opt.segment.c_str());
  return after.consistent() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  int rc = 1;
  try {
    rc = run(opt);
  } catch (const Error& e) {
    fprintf(stderr, "demo: %s\n", e.what());
    if (e.code() == ErrorCode::kExists) {
      fprintf(stderr, "demo: pick another --segment, or remove it: shmtool remove %s\n", opt.segment.c_str());
      return 1;  // not ours: leave it alone
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "demo: %s\n", e.what());
  }
  if (!opt.keep) {
    try {
      Segment::remove(opt.segment);
    } catch (...) {
    }
  }
  printf(rc == 0 ? "demo: OK\n" : "demo: FAILED\n");
  return rc;
}
