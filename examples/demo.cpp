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
// functions of the same shape; keys come from bench/workload.h.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"
#include "workload.h"

namespace {

using shmfilter::Error;
using shmfilter::ErrorCode;
using shmfilter::Kind;
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
          "  --keep           keep the segment afterwards (inspect it with shmtool dump NAME)\n",
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
