// tests/torture/torture.h: shared types of shmfilter_torture (see tests/torture/main.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "oracle.h"
#include "shmfilter/segment.hpp"
#include "workload.h"  // tests/support/workload.h: Rng, mix64

namespace torture {

inline constexpr int kMaxWorkers = 64;

struct Config {
  std::string segment;            // segment name
  std::string dir;                // oracle directory
  int workers = 8;
  int rounds = 3;
  uint64_t kills = 60;            // SIGKILLs in all (spread over the rounds)
  uint64_t seed = 1;
  double soak_s = 0;              // > 0: run rounds until this many seconds passed
  bool keep = false, sweep = false, json = false, verbose = false;
  double stall_bound_s = 5.0;     // no live, running worker may go this long without progress
  uint32_t keys = 4096;           // key indices per worker per exact structure
  uint32_t kill_min_ms = 5, kill_max_ms = 40;  // interval between killer actions
  double stop_share = 0.15;       // share of killer actions that are SIGSTOP (SIGCONT 10..300 ms later)
  std::string shmtool;            // path of the built shmtool, "" if none
  std::string points;             // --points: sweep only kill points containing this
};

// One worker's heartbeat, in an anonymous MAP_SHARED mapping made before fork.
struct alignas(64) Beat {
  std::atomic<uint64_t> progress_ns{0};  // CLOCK_MONOTONIC of its last completed operation
  std::atomic<uint64_t> ops{0};          // operations completed by this worker id (all incarnations)
  // The library's bounded waits (lib/base/wait_stats.h), published after each
  // operation: the stall bound covers a wait inside an operation too, and a
  // wait that gave up at its own bound fails the round.
  std::atomic<uint64_t> longest_wait_ns{0};  // worker: the longest wait of any incarnation
  std::atomic<uint64_t> waits_expired{0};    // worker: waits that gave up at their bound, all incarnations
  char longest_site[64] = {};                // worker, before the release store of longest_wait_ns
  char expired_site[64] = {};                // worker, before the release add to waits_expired
};
struct SharedState {
  std::atomic<uint32_t> stop{0};  // parent sets 1: finish the current operation and exit 0
  Beat beat[kMaxWorkers + 1];     // + 1: the sweep's worker id
};

uint64_t now_ns() noexcept;

// What one worker process does.
struct WorkerPlan {
  int wid = 0;
  uint32_t incarnation = 0;
  std::string area;       // "" = the mixed workload; else weights favour this kill-point area
  uint64_t max_ops = 0;   // 0 = until told to stop
  std::string arm;        // kill point to arm ("" = none)
  uint64_t nth = 1;
  bool main_only = false; // only the main structures (no scratch, no resize): a precursor
                          // must die where the next child will find its mess
};

// The running worker: its attachment, oracle and model.
struct Worker {
  const Config& cfg;
  const WorkerPlan& plan;
  shmfilter::Segment seg;
  Oracle& oracle;
  WorkerModel& model;
  Anomalies anomalies;  // seen while running (the parent finds them again from the log)
  Replayer replay;
  shmf_bench::Rng rng;
  SharedState* shared;

  Worker(const Config& c, const WorkerPlan& p, shmfilter::Segment s, Oracle& o, WorkerModel& m, SharedState* sh)
      : cfg(c), plan(p), seg(std::move(s)), oracle(o), model(m), replay(m, anomalies, p.wid),
        rng(c.seed * 0x9e3779b97f4a7c15ull ^ (uint64_t(p.wid) << 32) ^ p.incarnation), shared(sh) {}

  // Runs fn between a pending and an ack record; the model follows.
  Outcome logged(Target t, Op op, uint64_t key, uint32_t aux, const std::function<Outcome()>& fn);
  int wid() const { return plan.wid; }
};

// Everything the parent found in one verification.
struct Verdict {
  Anomalies anomalies;
  uint64_t keys_verified = 0;      // final-state probes against the oracle
  uint64_t cuckoo_erased_fp = 0;   // erased cuckoo keys still answering yes (false positives, bounded)
  std::vector<std::string> notes;  // informational lines
  // Size counters outside the oracle's range. A process killed inside an
  // insert/erase leaves its counter step to whoever repairs the lock (or
  // check --repair), so these count only when no repair was pending.
  std::vector<std::string> size_issues;
};

// One structure kind under torture: its workload step and its verifier.
struct TargetDef {
  Target id;
  const char* area;   // kill-point area it exercises ("bloom", "cuckoo", ...)
  unsigned weight;    // share of the mixed workload
  void (*create)(shmfilter::Segment& seg, const Config& cfg);  // parent, once
  void (*attach)(Worker& w);                                   // worker, once per incarnation
  void (*step)(Worker& w);                                     // one operation
  void (*verify)(shmfilter::Segment& seg, const Config& cfg, const std::vector<WorkerModel>& models, Verdict& v);
};
// The targets compiled in (a structure kind is tortured when its header exists).
const std::vector<TargetDef>& targets();
// Kinds available for scratch structures (create/exercise/drop).
std::vector<shmfilter::Kind> scratch_kinds();

// Key of index `idx` in worker `wid`'s domain of target t (distinct for distinct inputs).
inline uint64_t key64(Target t, int wid, uint64_t idx) {
  return shmf_bench::mix64((uint64_t(t) << 56) | (uint64_t(wid) << 40) | idx);
}
std::string scratch_name(int wid, uint64_t n);

}  // namespace torture
