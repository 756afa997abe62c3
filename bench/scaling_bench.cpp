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
// Each run starts from a freshly built structure of --n keys, filled to 50%.
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
  char pad[48];
};
struct Control {
  std::atomic<int> ready;
  std::atomic<int> go;
  std::atomic<int> stop;
  Slot slot[kMaxProcs];
};
Control* ctl;

enum class Role { kMixed, kReader, kWriter };

std::string segname;
uint64_t g_n = 10000000;
double g_seconds = 1.0;

template <class S>
void child(int c, int procs, Role role, const std::string& sname) {
  Segment seg = Segment::open(segname);
  S s = S::open(seg, sname);
  Rng rng(1000 + static_cast<uint64_t>(c));
  const uint64_t half = g_n / 2;
  uint64_t next_add = half + static_cast<uint64_t>(c), ops = 0, writes = 0;
  const uint64_t stride = static_cast<uint64_t>(procs);
  std::vector<uint64_t> recent(1000);
  ctl->ready.fetch_add(1);
  while (ctl->go.load(std::memory_order_acquire) == 0) {  // acquire: pairs with the parent's release
  }
  while (ctl->stop.load(std::memory_order_relaxed) == 0) {  // relaxed: a flag polled every 256 ops, no data
    for (int k = 0; k < 256; ++k) {
      if (role == Role::kWriter || (role == Role::kMixed && rng.below(10) == 0)) {
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
  ctl->slot[c].ops.store(ops);
  ctl->slot[c].writes.store(writes);
}

// Runs `roles` as forked processes for g_seconds; returns per-process ops/s.
template <class S>
std::vector<double> run(Segment& seg, const std::vector<Role>& roles) {
  const std::string sname = std::string("scale:") + S::kName;
  S::create(seg, sname, g_n);
  {
    S s = S::open(seg, sname);
    fill(s, 0, g_n / 2);
  }
  ctl->ready.store(0);
  ctl->go.store(0);
  ctl->stop.store(0);
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
  S::drop(seg, sname);
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
std::vector<WriterRow> writer_rows;

template <class S>
void bench(Segment& seg, int max_procs) {
  double one = 0;
  for (int p = 1; p <= max_procs; ++p) {
    auto r = run<S>(seg, std::vector<Role>(static_cast<size_t>(p), Role::kMixed));
    double total = 0;
    for (double x : r) total += x;
    if (p == 1) one = total;
    mixed_rows.push_back({S::kName, p, total, total / one});
    fprintf(stderr, "  %-18s %d procs mixed: %s ops/s (x%.2f)\n", S::kName, p, mops(total).c_str(), total / one);
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
              "  --n KEYS       structure capacity, filled to 50%% before each run (default 1e7)\n",
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

  printf("%ld online CPUs; %.3g s per run; structures of %.3g keys filled to 50%% before each run; single-key ops.\n\n",
         sysconf(_SC_NPROCESSORS_ONLN), g_seconds, static_cast<double>(g_n));
  printf("Mixed: 90%% lookups (half hits, half misses) + 10%% inserts, P processes on one structure\n\n"
         "| structure | processes | ops/s (all processes) | per process | scaling vs 1 process |\n|---|---|---|---|---|\n");
  for (auto& r : mixed_rows)
    printf("| %s | %d | %s | %s | %.2fx |\n", r.s.c_str(), r.procs, mops(r.total).c_str(),
           mops(r.total / r.procs).c_str(), r.factor);
  printf("\nOne writer-heavy process beside readers (100%% lookups): per-reader rate with and without the writer\n\n"
         "| structure | processes | per reader, all readers | per reader, 1 writer + %s readers | readers kept | writer ops/s |\n"
         "|---|---|---|---|---|---|\n",
         "W-1");
  for (auto& r : writer_rows)
    printf("| %s | %d | %s | %s | %.0f%% | %s |\n", r.s.c_str(), r.w, mops(r.reader_alone).c_str(),
           mops(r.reader_with_writer).c_str(), 100 * r.reader_with_writer / r.reader_alone, mops(r.writer).c_str());
  return rc;
}
