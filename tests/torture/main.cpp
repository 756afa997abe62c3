// tests/torture/main.cpp: shmfilter_torture, the crash-recovery torture program.
//
// N worker processes share one segment and run a mixed workload on every
// structure kind compiled in (tests/torture/targets.cpp) plus control-plane
// work (scratch structures created and dropped, segment growth). A killer in
// this parent process SIGKILLs random workers at random moments (and SIGSTOPs
// some, SIGCONT later) and restarts them. Every operation is bracketed by
// pending/ack records in an oracle file per worker (tests/torture/oracle.h).
// After each round the parent stops the workers and verifies: nothing
// acknowledged lost, nothing acknowledged-erased back, HLL within 5 sigma,
// Segment::check clean (or clean after one repair), `shmtool check` exit 0,
// and no live running worker stalled past the bound.
//
// --sweep then kills a child at every named kill point of the library
// (the list is generated from lib/ at build time), recovery points included
// (a precursor child dies first so the recovery code has work), and verifies
// recovery after each. Points not reached are reported, never passed silently.
//
//   shmfilter_torture [--workers 8] [--rounds 3] [--kills 60] [--seed 1]
//                     [--soak SECONDS] [--segment NAME] [--keep] [--sweep] [--json]
// Exit 0 when every check passed, 1 on any loss, hang or inconsistency, 2 on bad arguments.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/kill_point.h"
#include "base/wait_stats.h"
#include "load_clock.h"  // tests/support: bounds in uncontended seconds (a loaded CI machine is not a hang)
#include "torture.h"

namespace torture {
namespace {

const char* const kKillPoints[] = {
#include "torture_kill_points.inc"  // generated from lib/ by tests/torture/scan_kill_points.cmake
};

// Recovery code only runs when something died first: the precursor leaves it work.
const std::map<std::string, std::string> kPrecursor = {
    {"cuckoo.repair.begin", "cuckoo.move.after_copy"},
    {"cuckoo.repair.after_data", "cuckoo.move.after_copy"},
    {"segment.recovery.mid_undo", "segment.create_region.before_publish"},
};

std::string area_of(const std::string& point) { return point.substr(0, point.find('.')); }

// ---- the worker process ----------------------------------------------------------

// Waits that gave up (wait_snapshot().expired) already added to this worker's Beat.
uint64_t g_published_expired = 0;

// Copies this process's bounded-wait record (lib/base/wait_stats.h) into its Beat.
void publish_waits(Beat& b) noexcept {
  const shmfilter::internal::WaitSnapshot ws = shmfilter::internal::wait_snapshot();
  if (ws.longest_ns > b.longest_wait_ns.load(std::memory_order_relaxed)) {  // relaxed: only this worker writes it
    std::snprintf(b.longest_site, sizeof b.longest_site, "%s", ws.longest_site);
    b.longest_wait_ns.store(ws.longest_ns, std::memory_order_release);  // release: the site above first
  }
  if (ws.expired > g_published_expired) {
    std::snprintf(b.expired_site, sizeof b.expired_site, "%s", ws.expired_site);
    b.waits_expired.fetch_add(ws.expired - g_published_expired, std::memory_order_release);  // release: the site
    g_published_expired = ws.expired;
  }
}

int worker_main(const Config& cfg, const WorkerPlan& plan, SharedState* sh) {
  Oracle oracle(cfg.dir, plan.wid);
  Anomalies seen_by_parent_later;  // the parent replays the same log and reports these
  WorkerModel model = oracle.load(seen_by_parent_later, /*truncate_torn=*/true);
  oracle.open_for_append(plan.incarnation);
  shmfilter::Segment seg = shmfilter::Segment::open(cfg.segment);
  Worker w(cfg, plan, seg, oracle, model, sh);
  if (!plan.arm.empty()) shmfilter::internal::arm_kill_point(plan.arm.c_str(), plan.nth);

  const auto& defs = targets();
  std::vector<uint64_t> cumulative;
  uint64_t total = 0;
  for (const auto& d : defs) {
    uint64_t weight = d.weight;
    if (!plan.area.empty() && d.area == plan.area) weight *= 20;           // the sweep's area first
    if (!plan.area.empty() && d.id == Target::kScratch) weight *= 10;      // scratch of the area's kind
    if (plan.main_only && (d.id == Target::kScratch || d.id == Target::kResize)) weight = 0;
    cumulative.push_back(total += weight);
  }
  shmfilter::internal::reset_wait_stats();  // the parent's own waits are not this worker's
  g_published_expired = 0;
  for (const auto& d : defs) d.attach(w);
  sh->beat[plan.wid].progress_ns.store(now_ns());
  for (uint64_t ops = 0; sh->stop.load() == 0 && (plan.max_ops == 0 || ops < plan.max_ops); ++ops) {
    uint64_t r = w.rng.below(total);
    size_t i = std::upper_bound(cumulative.begin(), cumulative.end(), r) - cumulative.begin();
    defs[i].step(w);
    if (ops % 64 == 0) seg.quiesce();
  }
  return 0;
}

// Forks a worker; the child never returns.
pid_t spawn(const Config& cfg, const WorkerPlan& plan, SharedState* sh) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("torture: fork");
    std::exit(1);
  }
  if (pid == 0) {
    int rc = 97;
    try {
      rc = worker_main(cfg, plan, sh);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "torture: worker %d (incarnation %u): %s\n", plan.wid, plan.incarnation, e.what());
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  return pid;
}

// ---- results ------------------------------------------------------------------

struct Totals {
  uint64_t kills = 0, stops = 0, rounds = 0, ops_acked = 0, ops_unacked = 0, keys_verified = 0;
  uint64_t lost = 0, resurrected = 0, inconsistent = 0, hangs = 0, crashes = 0, check_failures = 0;
  uint64_t repairs_needed = 0, shmtool_checks = 0, cuckoo_erased_fp = 0;
  uint64_t size_lags = 0;                         // size counters behind until a repair (see Verdict)
  std::map<std::string, uint64_t> repair_findings;  // what check(true) found, by place
  double max_stall_s = 0;     // uncontended seconds (shmf_test::LoadClock)
  double max_contention = 1;  // runnable tasks per CPU, the most any round saw
  std::vector<std::string> repaired;  // what check(true) fixed (first few)
  std::vector<std::string> failures;  // every failure, for the report
  uint64_t sweep_points = 0, sweep_reached = 0;
  std::vector<std::string> unreached;
  void fail(const std::string& what) {
    if (failures.size() < 50) failures.push_back(what);
  }
  bool ok() const { return failures.empty() && lost == 0 && resurrected == 0 && inconsistent == 0 && hangs == 0; }
};

std::string describe_status(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("signal ") + strsignal(WTERMSIG(st));
  return "status " + std::to_string(st);
}

// Waits for pid; it is hung after bound_s uncontended seconds (tests/support/load_clock.h:
// wall time divided by the CPU contention, times 3 under ASan) without progress: without
// `beat`, in all; with it, since the last operation it completed. A hung child is SIGKILLed
// and the answer is false. A loaded machine makes a healthy child slow, never "hung".
bool wait_bounded(pid_t pid, double bound_s, int& status, const Beat* beat = nullptr,
                  const std::function<void()>& on_hang = nullptr) {
  if (beat == nullptr) return shmf_test::wait_child_bounded(pid, bound_s, status, nullptr, on_hang);
  return shmf_test::wait_child_bounded(
      pid, bound_s, status, [beat] { return beat->ops.load(std::memory_order_relaxed); },  // relaxed: a counter
      on_hang);
}

// ---- verification -------------------------------------------------------------

int run_shmtool_check(const Config& cfg) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execl(cfg.shmtool.c_str(), cfg.shmtool.c_str(), "check", cfg.segment.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  if (!wait_bounded(pid, 60, st)) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Replays every oracle, checks the segment against it, folds the logs.
void verify_all(const Config& cfg, Totals& tot, const std::string& when) {
  std::vector<WorkerModel> models;
  std::vector<Anomalies> replay(cfg.workers + 1);
  for (int wid = 0; wid <= cfg.workers; ++wid) {
    Oracle o(cfg.dir, wid);
    models.push_back(o.load(replay[wid], /*truncate_torn=*/true));
  }
  Verdict v;
  for (const auto& a : replay) v.anomalies.merge(a);
  {
    shmfilter::Segment seg = shmfilter::Segment::open(cfg.segment);
    // Pass 1, before any repair: what every process sees right after the deaths.
    for (const auto& d : targets()) d.verify(seg, cfg, models, v);

    shmfilter::CheckReport first = seg.check(false);
    if (first.consistent()) {
      for (const auto& s : v.size_issues) v.anomalies.note(v.anomalies.inconsistent, s);
    } else {
      ++tot.repairs_needed;
      shmfilter::CheckReport fix = seg.check(true);
      for (const auto& f : fix.findings) {
        ++tot.repair_findings[f.where.substr(0, f.where.find_first_of("[ "))];
        const bool routine = f.where.rfind("registry", 0) == 0;  // a dead process's slot: expected after kills
        if (tot.repaired.size() < (routine ? 8u : 60u))
          tot.repaired.push_back(when + ": " + f.where + ": " + f.problem + (f.repaired ? " (repaired)" : " (NOT repaired)"));
      }
      shmfilter::CheckReport again = seg.check(false);
      if (!again.consistent()) {
        ++tot.check_failures;
        for (const auto& f : again.findings) tot.fail(when + ": check after repair: " + f.where + ": " + f.problem);
      }
      // Pass 2, after the repair: counters must be exact now, nothing may have gone.
      tot.size_lags += v.size_issues.size();
      Verdict after;
      for (const auto& d : targets()) d.verify(seg, cfg, models, after);
      for (const auto& s : after.size_issues) after.anomalies.note(after.anomalies.inconsistent, "after repair: " + s);
      v.anomalies.merge(after.anomalies);
    }
  }
  if (!cfg.shmtool.empty() && access(cfg.shmtool.c_str(), X_OK) == 0) {
    ++tot.shmtool_checks;
    int rc = run_shmtool_check(cfg);
    if (rc != 0) {
      ++tot.check_failures;
      tot.fail(when + ": shmtool check " + cfg.segment + " exited " + std::to_string(rc));
    }
  }
  for (int wid = 0; wid <= cfg.workers; ++wid) Oracle(cfg.dir, wid).checkpoint(models[wid]);

  tot.lost += v.anomalies.lost;
  tot.resurrected += v.anomalies.resurrected;
  tot.inconsistent += v.anomalies.inconsistent;
  for (const auto& s : v.anomalies.samples) tot.fail(when + ": " + s);
  tot.keys_verified += v.keys_verified;
  tot.cuckoo_erased_fp = v.cuckoo_erased_fp;
  tot.ops_acked = tot.ops_unacked = 0;
  for (const auto& m : models) tot.ops_acked += m.acked, tot.ops_unacked += m.unacked;
  if (cfg.verbose) {
    std::fprintf(stderr, "torture: %s verified: %llu keys probed\n", when.c_str(),
                 static_cast<unsigned long long>(v.keys_verified));
    for (const auto& n : v.notes) std::fprintf(stderr, "  %s\n", n.c_str());
  }
}

// ---- one round: workers under the killer -------------------------------------------

struct Proc {
  pid_t pid = 0;
  uint32_t incarnation = 0;
  bool stopped = false;
  uint64_t cont_at = 0;     // when to SIGCONT
  uint64_t resumed_at = 0;  // spawn or SIGCONT time: the stall clock starts here
};

void run_round(const Config& cfg, SharedState* sh, uint64_t kill_quota, double deadline_s, shmf_bench::Rng& rng,
               std::vector<uint32_t>& incarnations, Totals& tot) {
  std::vector<Proc> procs(cfg.workers);
  auto start = [&](int wid) {
    WorkerPlan plan;
    plan.wid = wid;
    plan.incarnation = ++incarnations[wid];
    procs[wid].pid = spawn(cfg, plan, sh);
    procs[wid].incarnation = plan.incarnation;
    procs[wid].stopped = false;
    procs[wid].resumed_at = now_ns();
  };
  for (int wid = 0; wid < cfg.workers; ++wid) start(wid);

  // The stall bound is in uncontended seconds (tests/support/load_clock.h): a worker that
  // waits for a CPU on a loaded machine is slow, not stalled; a stuck one still never
  // progresses, and any finite bound expires.
  shmf_test::LoadClock clock;
  const double scale = shmf_test::time_scale();
  const uint64_t bound_ns = uint64_t(cfg.stall_bound_s * scale * 1e9);
  const std::string bound_text = std::to_string(cfg.stall_bound_s * scale) + " s uncontended";
  // The uncontended length of a wall interval of len_ns that ends now.
  auto fair_len = [&](uint64_t len_ns) {
    const uint64_t w = now_ns();
    const uint64_t f = clock.now();
    return len_ns >= w ? f : f - clock.at(w - len_ns);
  };
  // The library's bounded waits, as the workers publish them: a wait longer
  // than the stall bound, or one that gave up at its own bound, fails.
  std::vector<uint64_t> expired_seen(cfg.workers), longest_seen(cfg.workers);
  for (int wid = 0; wid < cfg.workers; ++wid) {
    expired_seen[wid] = sh->beat[wid].waits_expired.load(std::memory_order_acquire);
    longest_seen[wid] = sh->beat[wid].longest_wait_ns.load(std::memory_order_acquire);
  }
  auto check_waits = [&](int wid) {
    Beat& b = sh->beat[wid];
    const uint64_t ex = b.waits_expired.load(std::memory_order_acquire);  // acquire: expired_site is written
    if (ex > expired_seen[wid]) {
      ++tot.hangs;
      tot.fail("worker " + std::to_string(wid) + ": a bounded wait gave up at its bound (" +
               std::string(b.expired_site, strnlen(b.expired_site, sizeof b.expired_site)) + "), " +
               std::to_string(ex - expired_seen[wid]) + " time(s)");
      expired_seen[wid] = ex;
    }
    const uint64_t lw = b.longest_wait_ns.load(std::memory_order_acquire);  // acquire: longest_site is written
    if (lw > longest_seen[wid]) {
      // A new longest wait, which ended moments ago: its uncontended length (the holder it
      // waited for may itself have waited for a CPU).
      const uint64_t flw = fair_len(lw);
      tot.max_stall_s = std::max(tot.max_stall_s, double(flw) / 1e9);
      if (flw > bound_ns) {
        ++tot.hangs;
        tot.fail("worker " + std::to_string(wid) + " waited " + std::to_string(double(lw) / 1e9) + " s (" +
                 std::to_string(double(flw) / 1e9) + " s uncontended) in " +
                 std::string(b.longest_site, strnlen(b.longest_site, sizeof b.longest_site)) + " (bound " +
                 bound_text + ")");
      }
      longest_seen[wid] = lw;
    }
  };
  const uint64_t t0 = now_ns();
  uint64_t kills = 0;
  uint64_t next_action = now_ns() + 1000000ull * (cfg.kill_min_ms + rng.below(cfg.kill_max_ms - cfg.kill_min_ms + 1));
  while (kills < kill_quota && (deadline_s <= 0 || double(now_ns() - t0) / 1e9 < deadline_s)) {
    usleep(1000);
    const uint64_t now = now_ns();
    for (int wid = 0; wid < cfg.workers; ++wid) {
      Proc& p = procs[wid];
      int st = 0;
      if (waitpid(p.pid, &st, WNOHANG) == p.pid) {  // died without being killed: a crash
        ++tot.crashes;
        tot.fail("worker " + std::to_string(wid) + " incarnation " + std::to_string(p.incarnation) + " died: " +
                 describe_status(st));
        start(wid);
        continue;
      }
      if (p.stopped && now >= p.cont_at) {
        kill(p.pid, SIGCONT);
        p.stopped = false;
        p.resumed_at = now;
      }
      check_waits(wid);
      if (p.stopped) continue;
      const uint64_t last = std::max(sh->beat[wid].progress_ns.load(), p.resumed_at);
      const uint64_t fgap = now > last ? fair_len(now - last) : 0;
      tot.max_stall_s = std::max(tot.max_stall_s, double(fgap) / 1e9);
      if (fgap > bound_ns) {
        ++tot.hangs;
        tot.fail("worker " + std::to_string(wid) + " made no progress for " + std::to_string(double(now - last) / 1e9) +
                 " s (" + std::to_string(double(fgap) / 1e9) + " s uncontended; bound " + bound_text + ")");
        shmf_test::dump_hung_child(p.pid);
        for (int o = 0; o < cfg.workers; ++o)
          if (o != wid) shmf_test::dump_hung_child(procs[o].pid);
        kill(p.pid, SIGKILL);
        waitpid(p.pid, &st, 0);
        start(wid);
      }
    }
    if (now < next_action) continue;
    next_action = now + 1000000ull * (cfg.kill_min_ms + rng.below(cfg.kill_max_ms - cfg.kill_min_ms + 1));
    const int wid = static_cast<int>(rng.below(cfg.workers));
    Proc& p = procs[wid];
    if (!p.stopped && rng.unit() < cfg.stop_share) {
      kill(p.pid, SIGSTOP);
      p.stopped = true;
      p.cont_at = now + 1000000ull * (10 + rng.below(290));
      ++tot.stops;
      continue;
    }
    kill(p.pid, SIGKILL);
    int st = 0;
    waitpid(p.pid, &st, 0);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
      ++tot.crashes;
      tot.fail("worker " + std::to_string(wid) + " had ended before the kill: " + describe_status(st));
    }
    ++kills;
    ++tot.kills;
    start(wid);
  }
  // Stop: resume the stopped, ask everyone to finish, wait within the bound.
  for (auto& p : procs)
    if (p.stopped) kill(p.pid, SIGCONT);
  sh->stop.store(1);
  tot.max_contention = std::max(tot.max_contention, clock.max_factor());
  for (int wid = 0; wid < cfg.workers; ++wid) {
    int st = 0;
    // It finishes the operation it is in (or its start-up: a worker spawned just now
    // replays its oracle log first) and exits; hung when no operation ends for the bound.
    // A hung worker usually waits for another one (a lock it holds): print theirs too.
    auto dump_others = [&] {
      for (int o = wid + 1; o < cfg.workers; ++o) shmf_test::dump_hung_child(procs[o].pid);
    };
    if (!wait_bounded(procs[wid].pid, cfg.stall_bound_s + 2, st, &sh->beat[wid], dump_others)) {
      ++tot.hangs;
      tot.fail("worker " + std::to_string(wid) + " did not stop: no operation ended for " +
               std::to_string((cfg.stall_bound_s + 2) * scale) + " s uncontended");
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      ++tot.crashes;
      tot.fail("worker " + std::to_string(wid) + " ended the round with " + describe_status(st));
    }
    check_waits(wid);  // what the last operations published
  }
  sh->stop.store(0);
}

// ---- the sweep ----------------------------------------------------------------

// Runs one sweep child to completion. Returns its status; false on a hang.
bool run_child(const Config& cfg, SharedState* sh, WorkerPlan plan, std::vector<uint32_t>& inc, int& status) {
  plan.wid = cfg.workers;
  plan.incarnation = ++inc[plan.wid];
  pid_t pid = spawn(cfg, plan, sh);
  // Hung: 60 uncontended seconds without completing an operation (an armed child may run
  // 30,000 operations in all when its point is rare: slow under ASan on a loaded machine).
  return wait_bounded(pid, 60, status, &sh->beat[plan.wid]);
}

// Right after a death, before any other process works: the control plane is
// transactional, so the header, directory and allocator must already be
// consistent (check rolls back a dead holder's transaction as any locker
// would). Structure findings (a dead writer's lock) wait for the recovery child.
void control_plane_check(const Config& cfg, Totals& tot, const std::string& when) {
  shmfilter::Segment seg = shmfilter::Segment::open(cfg.segment);
  for (const auto& f : seg.check(false).findings) {
    const bool control = f.where.rfind("allocator", 0) == 0 || f.where.rfind("header", 0) == 0 ||
                         f.where.rfind("directory", 0) == 0;
    if (control && !f.repaired) {
      ++tot.check_failures;
      tot.fail(when + ": " + f.where + ": " + f.problem);
    }
  }
}

// Kill points on paths the torture's workers never take (restore, the UV family): each is
// killed by its own crash test instead, named here. The sweep skips them rather than spend
// three armed children on a point no worker can reach (under ASan that was most of its time).
struct CoveredElsewhere {
  const char* prefix;
  const char* test;
};
constexpr CoveredElsewhere kCoveredElsewhere[] = {
    {"restore.", "tests/multiprocess/test_snapshot_crash.cpp"},
    {"segment.publish.", "tests/multiprocess/test_snapshot_crash.cpp"},
    {"segment.drop_staged.", "tests/multiprocess/test_snapshot_crash.cpp"},
    {"uv.", "tests/unit/test_uv.cpp"},
};

const char* covered_elsewhere(const std::string& point) {
  for (const CoveredElsewhere& c : kCoveredElsewhere)
    if (point.rfind(c.prefix, 0) == 0) return c.test;
  return nullptr;
}

void sweep(const Config& cfg, SharedState* sh, shmf_bench::Rng& rng, std::vector<uint32_t>& inc, Totals& tot) {
  for (const char* point_c : kKillPoints) {
    const std::string point = point_c;
    if (!cfg.points.empty() && point.find(cfg.points) == std::string::npos) continue;
    if (const char* test = covered_elsewhere(point)) {
      if (cfg.verbose) std::fprintf(stderr, "torture: sweep %-42s killed by %s instead\n", point.c_str(), test);
      continue;
    }
    ++tot.sweep_points;
    bool reached = false;
    std::string how;
    for (int attempt = 0; attempt < 3 && !reached; ++attempt) {
      int st = 0;
      if (auto pre = kPrecursor.find(point); pre != kPrecursor.end()) {
        WorkerPlan p{.area = area_of(pre->second), .max_ops = 20000, .arm = pre->second, .nth = 1,
                     .main_only = area_of(pre->second) != "segment"};
        if (!run_child(cfg, sh, p, inc, st)) ++tot.hangs, tot.fail("sweep " + point + ": precursor hung");
        if (cfg.verbose)
          std::fprintf(stderr, "torture: sweep %s: precursor %s: %s\n", point.c_str(), pre->second.c_str(),
                       describe_status(st).c_str());
      }
      WorkerPlan p{.area = area_of(point), .max_ops = attempt < 2 ? 3000u : 30000u, .arm = point,
                   .nth = attempt == 0 ? 1 + rng.below(4) : 1};
      if (!run_child(cfg, sh, p, inc, st)) {
        ++tot.hangs;
        tot.fail("sweep " + point + ": armed child hung");
        break;
      }
      if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
        reached = true;
        how = "hit " + std::to_string(p.nth);
        ++tot.kills;
      } else if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        ++tot.crashes;
        tot.fail("sweep " + point + ": armed child ended with " + describe_status(st));
        break;
      }
    }
    if (reached) {
      ++tot.sweep_reached;
      control_plane_check(cfg, tot, "sweep " + point + ", right after the kill");
    } else {
      tot.unreached.push_back(point);
    }
    // Recovery: the same area's work, unarmed, must finish (and repair what the death left).
    int st = 0;
    WorkerPlan rec{.area = area_of(point), .max_ops = 500};
    if (!run_child(cfg, sh, rec, inc, st)) {
      ++tot.hangs;
      tot.fail("sweep " + point + ": recovery child hung");
    } else if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      ++tot.crashes;
      tot.fail("sweep " + point + ": recovery child ended with " + describe_status(st));
    }
    if (point.rfind("segment.create.", 0) == 0) {  // the scratch segment: gone, or whole
      const std::string name = cfg.segment + "-x";
      try {
        if (shmfilter::Segment::exists(name)) {
          shmfilter::Segment s = shmfilter::Segment::open(name);
          if (!s.check(false).consistent()) tot.fail("sweep " + point + ": scratch segment inconsistent");
        }
      } catch (const shmfilter::Error& e) {
        tot.fail("sweep " + point + ": scratch segment left unopenable: " + e.what());
      }
      shmfilter::Segment::remove(name);
    }
    verify_all(cfg, tot, "sweep " + point);
    if (cfg.verbose)
      std::fprintf(stderr, "torture: sweep %-42s %s\n", point.c_str(), reached ? how.c_str() : "NOT REACHED");
  }
}

// ---- setup, options, summary --------------------------------------------------------

void setup(const Config& cfg) {
  shmfilter::Segment::remove(cfg.segment);
  shmfilter::CreateOptions o;
  o.size = 8ull << 20;      // small: allocations grow it during the run (segment.grow.*)
  o.max_size = 1ull << 30;
  shmfilter::Segment seg = shmfilter::Segment::create(cfg.segment, o);
  for (const auto& d : targets()) d.create(seg, cfg);
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "shmfilter_torture: %s\n"
               "usage: shmfilter_torture [--workers N (1..%d, default 8)] [--rounds N (default 3)]\n"
               "         [--kills N (SIGKILLs in all, default 60)] [--seed N] [--soak SECONDS]\n"
               "         [--segment NAME] [--keep] [--sweep] [--json] [--verbose]\n"
               "         [--stall-bound SECONDS (default 5)] [--keys N (default 4096)]\n"
               "         [--points SUBSTRING (sweep only the kill points containing it)]\n",
               why.c_str(), kMaxWorkers);
  std::exit(2);
}

uint64_t parse_u64(const char* opt, const char* v) {
  char* end = nullptr;
  errno = 0;
  unsigned long long x = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0') usage(std::string(opt) + " needs a non-negative integer, got '" + v + "'");
  return x;
}

Config parse(int argc, char** argv) {
  Config c;
  c.segment = "shmf-torture-" + std::to_string(getpid());
#ifdef SHMTOOL_PATH
  c.shmtool = SHMTOOL_PATH;
#endif
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--workers") c.workers = static_cast<int>(parse_u64("--workers", val()));
    else if (a == "--rounds") c.rounds = static_cast<int>(parse_u64("--rounds", val()));
    else if (a == "--kills") c.kills = parse_u64("--kills", val());
    else if (a == "--seed") c.seed = parse_u64("--seed", val());
    else if (a == "--soak") c.soak_s = static_cast<double>(parse_u64("--soak", val()));
    else if (a == "--segment") c.segment = val();
    else if (a == "--stall-bound") c.stall_bound_s = static_cast<double>(parse_u64("--stall-bound", val()));
    else if (a == "--points") c.points = val();
    else if (a == "--keys") c.keys = static_cast<uint32_t>(parse_u64("--keys", val()));
    else if (a == "--keep") c.keep = true;
    else if (a == "--sweep") c.sweep = true;
    else if (a == "--json") c.json = true;
    else if (a == "--verbose") c.verbose = true;
    else if (a == "--help" || a == "-h") usage("crash-recovery torture of a shmfilter segment");
    else usage("unknown option '" + a + "'");
  }
  if (c.workers < 1 || c.workers > kMaxWorkers) usage("--workers must be in 1.." + std::to_string(kMaxWorkers));
  if (c.keys < 16 || c.keys > (1u << 20)) usage("--keys must be in 16..1048576");
  if (c.stall_bound_s < 1) usage("--stall-bound must be >= 1");
  return c;
}

void print_summary(const Config& cfg, const Totals& t, double wall_s) {
  if (cfg.json) {
    std::printf("{\"ok\":%s,\"segment\":\"%s\",\"seed\":%llu,\"workers\":%d,\"rounds\":%llu,\"wall_s\":%.1f,"
                "\"kills\":%llu,\"stops\":%llu,\"ops_acknowledged\":%llu,\"ops_unacknowledged\":%llu,"
                "\"keys_verified\":%llu,\"lost\":%llu,\"resurrected\":%llu,\"inconsistent\":%llu,\"hangs\":%llu,"
                "\"crashes\":%llu,\"max_stall_s\":%.3f,\"stall_bound_s\":%.1f,\"time_scale\":%.1f,"
                "\"max_contention\":%.1f,\"repairs_needed\":%llu,"
                "\"check_failures\":%llu,\"shmtool_checks\":%llu,\"sweep_points\":%llu,\"sweep_reached\":%llu,"
                "\"unreached\":[",
                t.ok() ? "true" : "false", cfg.segment.c_str(), (unsigned long long)cfg.seed, cfg.workers,
                (unsigned long long)t.rounds, wall_s, (unsigned long long)t.kills, (unsigned long long)t.stops,
                (unsigned long long)t.ops_acked, (unsigned long long)t.ops_unacked,
                (unsigned long long)t.keys_verified, (unsigned long long)t.lost, (unsigned long long)t.resurrected,
                (unsigned long long)t.inconsistent, (unsigned long long)t.hangs, (unsigned long long)t.crashes,
                t.max_stall_s, cfg.stall_bound_s, shmf_test::time_scale(), t.max_contention,
                (unsigned long long)t.repairs_needed,
                (unsigned long long)t.check_failures, (unsigned long long)t.shmtool_checks,
                (unsigned long long)t.sweep_points, (unsigned long long)t.sweep_reached);
    for (size_t i = 0; i < t.unreached.size(); ++i) std::printf("%s\"%s\"", i ? "," : "", t.unreached[i].c_str());
    std::printf("],\"size_lags\":%llu,\"repair_findings\":{", (unsigned long long)t.size_lags);
    size_t i = 0;
    for (const auto& [where, n] : t.repair_findings)
      std::printf("%s\"%s\":%llu", i++ ? "," : "", where.c_str(), (unsigned long long)n);
    std::printf("}}\n");
  } else {
    std::printf("shmfilter_torture: %s (seed %llu, %d workers, %llu rounds, %.1f s)\n", t.ok() ? "PASS" : "FAIL",
                (unsigned long long)cfg.seed, cfg.workers, (unsigned long long)t.rounds, wall_s);
    std::printf("  kills %llu, stops %llu\n", (unsigned long long)t.kills, (unsigned long long)t.stops);
    std::printf("  operations checked %llu acknowledged (+%llu killed mid-operation), %llu final-state probes\n",
                (unsigned long long)t.ops_acked, (unsigned long long)t.ops_unacked,
                (unsigned long long)t.keys_verified);
    std::printf("  acknowledged ops lost %llu, erases undone %llu, inconsistent %llu\n", (unsigned long long)t.lost,
                (unsigned long long)t.resurrected, (unsigned long long)t.inconsistent);
    std::printf("  hangs %llu, crashes %llu, max stall %.3f s uncontended (bound %.1f s x time scale %.1f;"
                " contention up to %.1f runnable tasks per CPU)\n",
                (unsigned long long)t.hangs, (unsigned long long)t.crashes, t.max_stall_s, cfg.stall_bound_s,
                shmf_test::time_scale(), t.max_contention);
    std::printf("  repairs needed %llu of %llu verifications, checks failing after repair %llu, shmtool checks %llu\n",
                (unsigned long long)t.repairs_needed, (unsigned long long)(t.rounds + t.sweep_points),
                (unsigned long long)t.check_failures, (unsigned long long)t.shmtool_checks);
    std::string found;
    for (const auto& [where, n] : t.repair_findings) found += " " + where + " " + std::to_string(n);
    if (!found.empty()) std::printf("  repair findings by place:%s\n", found.c_str());
    if (t.size_lags)
      std::printf("  size counters behind the oracle until repair: %llu times\n", (unsigned long long)t.size_lags);
    if (cfg.sweep)
      std::printf("  sweep: %llu of %llu kill points reached\n", (unsigned long long)t.sweep_reached,
                  (unsigned long long)t.sweep_points);
  }
  for (const auto& u : t.unreached) std::fprintf(stderr, "  kill point not reached: %s\n", u.c_str());
  for (const auto& r : t.repaired) std::fprintf(stderr, "  repair: %s\n", r.c_str());
  for (const auto& f : t.failures) std::fprintf(stderr, "  FAILURE: %s\n", f.c_str());
}

}  // namespace

uint64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

Outcome Worker::logged(Target t, Op op, uint64_t key, uint32_t aux, const std::function<Outcome()>& fn) {
  Record r;
  r.seq = model.next_seq;
  r.key = key;
  r.aux = aux;
  r.phase = kPending;
  r.target = static_cast<uint8_t>(t);
  r.op = static_cast<uint8_t>(op);
  oracle.append(r);
  replay.feed(r);
  r.outcome = static_cast<uint8_t>(fn());
  r.phase = kAck;
  oracle.append(r);
  replay.feed(r);
  Beat& b = shared->beat[plan.wid];
  b.ops.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
  publish_waits(b);
  b.progress_ns.store(now_ns());
  return static_cast<Outcome>(r.outcome);
}

int main(int argc, char** argv) {
  Config cfg = parse(argc, argv);
  char tmpl[] = "/tmp/shmf-torture-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("torture: mkdtemp");
    return 1;
  }
  cfg.dir = tmpl;
  signal(SIGPIPE, SIG_IGN);
  auto* sh = static_cast<SharedState*>(
      mmap(nullptr, sizeof(SharedState), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED) {
    std::perror("torture: mmap");
    return 1;
  }
  new (sh) SharedState();

  const uint64_t t0 = now_ns();
  Totals tot;
  try {
    setup(cfg);
    shmf_bench::Rng rng(cfg.seed);
    std::vector<uint32_t> incarnations(cfg.workers + 1, 0);
    if (cfg.soak_s > 0) {
      // Rounds of ~20 s until the time is up; each round verifies.
      while (double(now_ns() - t0) / 1e9 < cfg.soak_s) {
        double left = cfg.soak_s - double(now_ns() - t0) / 1e9;
        run_round(cfg, sh, UINT64_MAX, std::min(20.0, std::max(1.0, left)), rng, incarnations, tot);
        ++tot.rounds;
        verify_all(cfg, tot, "round " + std::to_string(tot.rounds));
      }
    } else {
      for (int r = 0; r < cfg.rounds; ++r) {
        uint64_t quota = cfg.kills / cfg.rounds + (uint64_t(r) < cfg.kills % cfg.rounds ? 1 : 0);
        run_round(cfg, sh, quota, 0, rng, incarnations, tot);
        ++tot.rounds;
        verify_all(cfg, tot, "round " + std::to_string(r + 1));
      }
    }
    if (cfg.sweep) sweep(cfg, sh, rng, incarnations, tot);
  } catch (const std::exception& e) {
    tot.fail(std::string("parent: ") + e.what());
  }
  print_summary(cfg, tot, double(now_ns() - t0) / 1e9);
  if (!cfg.keep) {
    shmfilter::Segment::remove(cfg.segment);
    for (int wid = 0; wid <= cfg.workers; ++wid) Oracle(cfg.dir, wid).remove_files();
    ::rmdir(cfg.dir.c_str());
  } else {
    std::fprintf(stderr, "torture: kept segment '%s' and oracle files in %s\n", cfg.segment.c_str(), cfg.dir.c_str());
  }
  return tot.ok() ? 0 : 1;
}

}  // namespace torture

int main(int argc, char** argv) { return torture::main(argc, argv); }
