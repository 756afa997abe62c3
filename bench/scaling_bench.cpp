// bench/scaling_bench.cpp: multi-process scaling on ONE segment.
//
//   scaling_bench [--max-procs N] [--seconds S] [--n KEYS] [--only NAME]
//
// Part 1, mixed: for P = 1..N (N = nproc by default; --max-procs to go higher
// on a bigger machine) P forked processes, each attached to the segment on its
// own, run 90% lookups (half hits, half misses, random keys) and 10% inserts
// of new keys on one shared structure for S seconds. Reported: total ops/s and
// the scaling factor against P = 1.
// Part 2, one writer beside readers: W = max(N, 2) processes; first all W are
// readers (100% lookups), then one of them is a writer-heavy process (100%
// writes: insert a new key, and for structures that delete, also erase the
// key inserted 1,000 writes earlier so the load stays level) beside W-1
// readers. If writers blocked readers, the per-reader rate would fall well
// below the all-readers run; the ratio is printed.
// Part 1 runs twice: single-key calls, and batches of 64 (add_many / contains_many).
// Each run starts from a fresh structure of capacity --n filled to 40%.
// HLL: every op is an add (a lookup is not an HLL operation).
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "shmfilter/hll.hpp"
#include "subjects.h"
#include "timed.h"

namespace {

using namespace shmf_bench;
using shmfilter::Segment;

constexpr int kMaxProcs = 256;

// In an anonymous MAP_SHARED mapping (inherited by fork), outside the segment under test.
struct alignas(64) Slot {
  std::atomic<uint64_t> ops;
  std::atomic<uint64_t> writes;
  std::atomic<uint64_t> quota_hit;  // 1: this process used up its share of new keys (see kFillPercent)
  char pad[40];
};
struct Control {
  std::atomic<int> ready;
  std::atomic<int> go;
  std::atomic<int> stop;
  Slot slot[kMaxProcs];
};
Control* ctl;

enum class Role { kMixed, kMixedBatch, kReader, kWriter };

std::string segname;
// Each run starts from a fresh structure of capacity --n filled to 40%; in the mixed
// runs the new keys a Cuckoo filter, ExactSet or Roaring set may get are capped at 90%
// of n (shared out among the run's processes), so a fast run never drives a table into
// its full regime. A process past its share turns its inserts into lookups (reported).
constexpr uint64_t kFillPercent = 40;
uint64_t g_quota_hit = 0;
uint64_t g_n = 10000000;
double g_seconds = 1.0;

bool g_independent = false;  // control run: process c works on its own structure "<name>#c"

template <class S>
void child(int c, int procs, Role role, const std::string& sname_shared) {
  const std::string sname = g_independent ? sname_shared + "#" + std::to_string(c) : sname_shared;
  Segment seg = Segment::open(segname);
  S s = S::open(seg, sname);
  Rng rng(1000 + static_cast<uint64_t>(c));
  const uint64_t half = g_n * kFillPercent / 100;
  // Only fixed-capacity structures that hold every key (Cuckoo, ExactSet; Roaring alike) get a
  // cap; a Bloom filter past capacity only answers with more false positives, an HLL has none.
  const uint64_t quota = S::kErases && role != Role::kWriter ? (g_n * 9 / 10 - half) / static_cast<uint64_t>(procs) : ~0ull / 2;
  uint64_t next_add = half + static_cast<uint64_t>(c), ops = 0, writes = 0;
  const uint64_t stride = static_cast<uint64_t>(procs);
  std::vector<uint64_t> recent(1000);
  ctl->ready.fetch_add(1);
  while (ctl->go.load(std::memory_order_acquire) == 0) {  // acquire: pairs with the parent's release
  }
  std::vector<uint64_t> batch(64);
  std::vector<uint8_t> out(64);
  while (ctl->stop.load(std::memory_order_relaxed) == 0) {  // relaxed: a flag polled every 256 ops, no data
    if (role == Role::kMixedBatch) {  // 4 batches of 64: add_many of new keys 10% of the time, else contains_many
      for (int k = 0; k < 4; ++k) {
        if (rng.below(10) == 0 && writes + 64 <= quota) {
          for (auto& x : batch) {
            x = S::present(next_add);
            next_add += stride;
          }
          s.add_many(batch, out);
          writes += 64;
        } else {
          for (auto& x : batch) {
            const uint64_t i = rng.below(half);
            x = (i & 1) ? S::present(i) : S::absent(i);
          }
          s.contains_many(batch, out);
        }
      }
      ops += 256;
      continue;
    }
    for (int k = 0; k < 256; ++k) {
      const bool write = role == Role::kWriter || (role == Role::kMixed && rng.below(10) == 0);
      if (write && writes < quota) {
        const uint64_t key = S::present(next_add);
        next_add += stride;
        keep(s.add(key));
        if (role == Role::kWriter && S::kErases) {
          uint64_t& old = recent[writes % recent.size()];
          if (writes >= recent.size()) keep(s.erase(old));
          old = key;
        }
        ++writes;
      } else {
        const uint64_t i = rng.below(half);
        keep(s.contains((i & 1) ? S::present(i) : S::absent(i)));
      }
    }
    ops += 256;
  }
  if (role == Role::kMixed || role == Role::kMixedBatch)
    if (writes + 64 > quota) ctl->slot[c].quota_hit.store(1);
  ctl->slot[c].ops.store(ops);
  ctl->slot[c].writes.store(writes);
}

// Runs `roles` as forked processes for g_seconds; returns per-process ops/s.
template <class S>
std::vector<double> run(Segment& seg, const std::vector<Role>& roles) {
  const std::string sname = std::string("scale:") + S::kName;
  std::vector<std::string> names;
  if (g_independent)
    for (size_t c = 0; c < roles.size(); ++c) names.push_back(sname + "#" + std::to_string(c));
  else
    names.push_back(sname);
  for (const auto& nm : names) {
    S::create(seg, nm, g_n);
    S s = S::open(seg, nm);
    fill(s, 0, g_n * kFillPercent / 100);
  }
  ctl->ready.store(0);
  ctl->go.store(0);
  ctl->stop.store(0);
  for (auto& sl : ctl->slot) sl.quota_hit.store(0);
  const int procs = static_cast<int>(roles.size());
  std::vector<pid_t> pids;
  for (int c = 0; c < procs; ++c) {
    fflush(nullptr);
    pid_t p = fork();
    if (p == 0) {
      int rc = 0;
      try {
        child<S>(c, procs, roles[static_cast<size_t>(c)], sname);
      } catch (const std::exception& e) {
        fprintf(stderr, "scaling_bench child: %s\n", e.what());
        rc = 1;
      }
      _exit(rc);
    }
    pids.push_back(p);
  }
  while (ctl->ready.load() < procs) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const uint64_t t0 = mono_ns();
  ctl->go.store(1, std::memory_order_release);  // release: children start after every field above is reset
  std::this_thread::sleep_for(std::chrono::duration<double>(g_seconds));
  ctl->stop.store(1);
  int failed = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failed;
  }
  const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
  if (failed) throw std::runtime_error(std::to_string(failed) + " child processes failed");
  std::vector<double> rate;
  for (int c = 0; c < procs; ++c) rate.push_back(static_cast<double>(ctl->slot[c].ops.load()) / secs);
  for (int c = 0; c < procs; ++c) g_quota_hit += ctl->slot[c].quota_hit.load();
  for (const auto& nm : names) S::drop(seg, nm);
  seg.quiesce();
  return rate;
}

std::string mops(double x) {
  char b[32];
  snprintf(b, sizeof b, "%.2f M", x / 1e6);
  return b;
}

struct MixedRow {
  std::string s;
  int procs;
  double total, factor;
};
struct WriterRow {
  std::string s;
  int w;
  double reader_alone, reader_with_writer, writer;
};
std::vector<MixedRow> mixed_rows;
struct ControlRow {
  std::string s;
  int procs;
  double one, shared, independent;
};
std::vector<ControlRow> control_rows;
std::vector<WriterRow> writer_rows;

template <class S>
void bench(Segment& seg, int max_procs) {
  for (Role mode : {Role::kMixed, Role::kMixedBatch}) {
    if (mode == Role::kMixedBatch && !S::kBatches) continue;
    double one = 0;
    for (int p = 1; p <= max_procs; ++p) {
      auto r = run<S>(seg, std::vector<Role>(static_cast<size_t>(p), mode));
      double total = 0;
      for (double x : r) total += x;
      if (p == 1) one = total;
      const std::string label = std::string(S::kName) + (mode == Role::kMixedBatch ? ", batches of 64" : ", single key");
      mixed_rows.push_back({label, p, total, total / one});
      fprintf(stderr, "  %-34s %d procs: %s ops/s (x%.2f)\n", label.c_str(), p, mops(total).c_str(), total / one);
    }
  }
  // Control: the same P = max processes, each on a structure of its own (nothing shared).
  // Shared / independent is the cost of sharing; independent / (P x one) is what this
  // machine's cores give to P processes at all.
  if (max_procs > 1) {
    g_independent = true;
    auto r = run<S>(seg, std::vector<Role>(static_cast<size_t>(max_procs), Role::kMixed));
    g_independent = false;
    double total = 0;
    for (double x : r) total += x;
    double shared = 0, one = 0;
    for (auto& m : mixed_rows)
      if (m.s == std::string(S::kName) + ", single key") {
        if (m.procs == 1) one = m.total;
        if (m.procs == max_procs) shared = m.total;
      }
    control_rows.push_back({S::kName, max_procs, one, shared, total});
    fprintf(stderr, "  %-18s %d procs on own structures: %s ops/s\n", S::kName, max_procs, mops(total).c_str());
  }
  const int w = std::max(2, max_procs);
  auto alone = run<S>(seg, std::vector<Role>(static_cast<size_t>(w), Role::kReader));
  std::vector<Role> roles(static_cast<size_t>(w), Role::kReader);
  roles[0] = Role::kWriter;
  auto with = run<S>(seg, roles);
  double a = 0, b = 0;
  for (double x : alone) a += x;
  for (size_t i = 1; i < with.size(); ++i) b += with[i];
  a /= static_cast<double>(alone.size());
  b /= static_cast<double>(with.size() - 1);
  writer_rows.push_back({S::kName, w, a, b, with[0]});
  fprintf(stderr, "  %-18s %d readers: %s ops/s each; 1 writer + %d readers: %s ops/s each, writer %s ops/s\n", S::kName,
          w, mops(a).c_str(), w - 1, mops(b).c_str(), mops(with[0]).c_str());
}

// HLL: adds only, random keys, one HLL.
struct HllSubject {
  static constexpr const char* kName = "HLL (adds only)";
  shmfilter::Hll h;
  static constexpr bool kErases = false;
  static void create(Segment& s, const std::string& name, uint64_t) { shmfilter::Hll::create(s, name); }
  static HllSubject open(Segment& s, const std::string& name) { return {shmfilter::Hll::open(s, name)}; }
  static void drop(Segment& s, const std::string& name) { shmfilter::Hll::drop(s, name); }
  static uint64_t present(uint64_t i) noexcept { return present_key(i); }
  static uint64_t absent(uint64_t i) noexcept { return absent_key(i); }
  bool add(uint64_t k) noexcept { return h.add(k); }
  bool contains(uint64_t k) noexcept { return h.add(k); }  // "lookup" slot: also an add (see top)
  bool erase(uint64_t) noexcept { return false; }
  void add_many(std::span<const uint64_t> k, std::span<uint8_t>) noexcept { h.add_many(k); }
  void contains_many(std::span<const uint64_t> k, std::span<uint8_t>) noexcept { h.add_many(k); }
  static constexpr bool kBatches = true;
};

}  // namespace

int main(int argc, char** argv) {
  int max_procs = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "scaling_bench: %s needs a value\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--max-procs") max_procs = atoi(val().c_str());
    else if (a == "--seconds") g_seconds = atof(val().c_str());
    else if (a == "--n") g_n = static_cast<uint64_t>(atof(val().c_str()));
    else if (a == "--only") only = val();
    else {
      fprintf(stderr,
              "Usage: scaling_bench [--max-procs N] [--seconds S] [--n KEYS] [--only bloom|cuckoo|exact|roaring|hll]\n"
              "  --max-procs N  processes 1..N (default: nproc = %ld)\n"
              "  --seconds S    per run (default 1)\n"
              "  --n KEYS       structure capacity, filled to 40%% before each run (default 1e7)\n",
              sysconf(_SC_NPROCESSORS_ONLN));
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (max_procs < 1 || max_procs > kMaxProcs || !(g_seconds > 0) || g_n < 1000) {
    fprintf(stderr, "scaling_bench: need 1 <= --max-procs <= %d, --seconds > 0, --n >= 1000\n", kMaxProcs);
    return 2;
  }
  void* m = mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  ctl = new (m) Control{};
  segname = "shmf-bench-scaling-" + std::to_string(getpid());
  Segment seg = Segment::create(segname);
  int rc = 0;
  auto want = [&](const char* k) { return only.empty() || only == k; };
  try {
    if (want("bloom")) bench<BloomSubject>(seg, max_procs);
    if (want("cuckoo")) bench<CuckooSubject>(seg, max_procs);
    if (want("exact")) bench<ExactSubject>(seg, max_procs);
    if (want("roaring")) bench<RoaringSubject>(seg, max_procs);
    if (want("hll")) bench<HllSubject>(seg, max_procs);
  } catch (const std::exception& e) {
    fprintf(stderr, "scaling_bench: %s\n", e.what());
    rc = 1;
  }
  Segment::remove(segname);

  printf("%ld online CPUs; %.3g s per run; each run on a fresh structure of capacity %.3g filled to 40%%.\n\n",
         sysconf(_SC_NPROCESSORS_ONLN), g_seconds, static_cast<double>(g_n));
  printf("Mixed: 90%% lookups (half hits, half misses) + 10%% inserts, P processes on one structure; an op is one key\n"
         "(batches: 64 keys per call, 10%% of the calls add_many, 90%% contains_many)\n\n"
         "| structure | processes | ops/s (all processes) | per process | scaling vs 1 process |\n|---|---|---|---|---|\n");
  for (auto& r : mixed_rows)
    printf("| %s | %d | %s | %s | %.2fx |\n", r.s.c_str(), r.procs, mops(r.total).c_str(),
           mops(r.total / r.procs).c_str(), r.factor);
  if (!control_rows.empty()) {
    printf("\nControl: the same P processes, single keys, each on a structure of its own (nothing shared)\n\n"
           "| structure | processes | 1 process | P on one shared structure | P on own structures | shared / own | own / (P x 1 process) |\n"
           "|---|---|---|---|---|---|---|\n");
    for (auto& r : control_rows)
      printf("| %s | %d | %s | %s | %s | %.2f | %.2f |\n", r.s.c_str(), r.procs, mops(r.one).c_str(), mops(r.shared).c_str(),
             mops(r.independent).c_str(), r.shared / r.independent, r.independent / (r.procs * r.one));
    printf("\nshared / own near 1: sharing one structure costs nothing beyond what P processes cost anyway;\n"
           "own / (P x 1 process) is the speedup the machine itself allows P processes (1/P: none).\n");
  }
  if (g_quota_hit)
    printf("\n%" PRIu64 " process runs used up their share of new keys (90%% of capacity) and turned later inserts into lookups.\n",
           g_quota_hit);
  printf("\nOne writer-heavy process beside readers (100%% lookups): per-reader rate with and without the writer\n\n"
         "| structure | processes | per reader, all readers | per reader, 1 writer + %s readers | readers kept | writer ops/s |\n"
         "|---|---|---|---|---|---|\n",
         "W-1");
  for (auto& r : writer_rows)
    printf("| %s | %d | %s | %s | %.0f%% | %s |\n", r.s.c_str(), r.w, mops(r.reader_alone).c_str(),
           mops(r.reader_with_writer).c_str(), 100 * r.reader_with_writer / r.reader_alone, mops(r.writer).c_str());
  return rc;
}
