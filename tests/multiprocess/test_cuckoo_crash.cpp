// tests/multiprocess/test_cuckoo_crash.cpp: a writer SIGKILLed at every named kill point of
// insert, move, erase, expansion and repair. After each death: another
// process's reads and writes finish within a bound (uncontended seconds), every key
// acknowledged before the death is still present, every acknowledged erase
// stays erased, and Segment::check(repair) leaves the filter consistent.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "base/kill_point.h"
#include "shmfilter/cuckoo.hpp"
#include "load_clock.h"
#include "test_util.h"
#include "workload.h"

using shmfilter::Cuckoo;
using shmfilter::CuckooStatus;
using shmfilter::Segment;

namespace {

enum class Op { kInsert, kErase, kExpand };

struct Shared {  // oracle outside the segment: what the doomed child was told
  std::atomic<uint64_t> inserted;  // extra[0, inserted) acknowledged kInserted
  std::atomic<uint64_t> erased;    // base[0, erased) acknowledged erased
};

struct Case {
  const char* point;
  Op op;
  uint64_t nth;
  const char* repair_point;  // non-null: a second process is killed while repairing
  uint32_t fp_bits = 16;     // 12: layout 3's packed lanes (stores that straddle two words)
};

void run_case(const Case& k) {
  SCOPED_TRACE(std::string(k.point) + " #" + std::to_string(k.nth) + ", f = " + std::to_string(k.fp_bits));
  shmf_test::SegmentGuard guard(shmf_test::unique_name("ckcrash"));
  Segment seg = Segment::create(guard.name);
  shmfilter::CuckooOptions o;
  o.capacity = 3800;  // 2^10 buckets, 4096 slots
  o.fingerprint_bits = k.fp_bits;
  o.seed = 77;
  if (k.op == Op::kExpand) o.expansion = 2;
  Cuckoo c = Cuckoo::create(seg, "f", o);
  // Acknowledged base set: 88% load (inserts near it need cuckoo moves), 95% for expansion.
  uint64_t nbase = k.op == Op::kExpand ? 3880 : 3600;
  auto base = shmf_bench::distinct_keys(nbase, 1);
  auto extra = shmf_bench::absent_keys(3000, 1);
  for (uint64_t key : base) ASSERT_EQ(c.add(key), CuckooStatus::kInserted);
  auto* sh = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(sh, MAP_FAILED);
  new (sh) Shared{};
  std::string name = guard.name;

  pid_t doomed = shmf_test::fork_child([&] {
    Segment s = Segment::open(name);
    Cuckoo cc = Cuckoo::open(s, "f");
    shmfilter::internal::arm_kill_point(k.point, k.nth);
    if (k.op == Op::kErase) {
      for (uint64_t i = 0; i < 200; ++i) {
        if (!cc.erase(base[i])) return 4;
        sh->erased.store(i + 1);
      }
    } else {
      for (uint64_t i = 0; i < extra.size(); ++i) {
        if (cc.add(extra[i]) != CuckooStatus::kInserted) return 5;
        sh->inserted.store(i + 1);
      }
    }
    return 3;  // the kill point was never reached
  });
  int st = shmf_test::wait_status(doomed);
  ASSERT_TRUE(shmf_test::killed_by(st, SIGKILL)) << "status " << st << " (exit " << WEXITSTATUS(st) << ")";

  if (k.repair_point) {
    // A second process takes over the dead writer's lock and is itself killed mid-repair.
    pid_t rep = shmf_test::fork_child([&] {
      Segment s = Segment::open(name);
      Cuckoo cc = Cuckoo::open(s, "f");
      shmfilter::internal::arm_kill_point(k.repair_point);
      cc.add(uint64_t{0xdead});
      return 3;
    });
    ASSERT_TRUE(shmf_test::killed_by(shmf_test::wait_status(rep), SIGKILL));
  }

  uint64_t ins = sh->inserted.load(), era = sh->erased.load();
  // Another process must not wedge: readers and a writer finish within 10 uncontended
  // seconds (tests/support/load_clock.h: a loaded machine's CPU wait is not counted).
  pid_t waiter = shmf_test::fork_child([&] {
    Segment s = Segment::open(name);
    Cuckoo cc = Cuckoo::open(s, "f");
    for (uint64_t i = era + 1; i < base.size(); ++i)
      if (!cc.contains(base[i])) return 20;
    for (uint64_t i = 0; i < ins; ++i)
      if (!cc.contains(extra[i])) return 21;
    if (cc.add(uint64_t{0xbeef}) != CuckooStatus::kInserted) return 22;
    if (!cc.erase(uint64_t{0xbeef})) return 23;
    return 0;
  });
  int ws = 0;
  ASSERT_TRUE(shmf_test::wait_child_bounded(waiter, 10, ws))
      << "the waiter wedged: still running after " << 10 * shmf_test::time_scale() << " s uncontended";
  ASSERT_TRUE(shmf_test::exited_ok(ws)) << "waiter: " << (WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));

  // Every point above lies inside the writer lock: someone must have taken it over.
  EXPECT_GE(c.stats().repairs, k.repair_point ? 2u : 1u);
  auto rep = seg.check(true);
  for (const auto& f : rep.findings) EXPECT_TRUE(f.repaired) << f.where << ": " << f.problem;
  auto clean = seg.check(false);
  for (const auto& f : clean.findings) ADD_FAILURE() << "after repair: " << f.where << ": " << f.problem;
  // Nothing acknowledged lost; acknowledged erases stay erased (seed fixed: no FP among these, f = 16 or 12).
  for (uint64_t i = era + 1; i < base.size(); ++i) ASSERT_TRUE(c.contains(base[i])) << i;
  for (uint64_t i = 0; i < ins; ++i) ASSERT_TRUE(c.contains(extra[i])) << i;
  for (uint64_t i = 0; i < era; ++i) EXPECT_FALSE(c.contains(base[i])) << i;
  // Writers carry on.
  for (uint64_t i = ins + 1; i < ins + 60; ++i) ASSERT_NE(c.add(extra[i]), CuckooStatus::kDropped);
  EXPECT_TRUE(seg.check(false).consistent());
  munmap(sh, sizeof(Shared));
}

}  // namespace

TEST(CuckooCrash, InsertPoints) {
  for (const char* p : {"cuckoo.insert.locked", "cuckoo.insert.before_store", "cuckoo.insert.after_store",
                        "cuckoo.insert.after_size", "cuckoo.insert.before_unlock"})
    run_case({p, Op::kInsert, 5, nullptr});
}

TEST(CuckooCrash, MovePoints) {
  for (const char* p : {"cuckoo.move.begin", "cuckoo.move.version_odd", "cuckoo.move.after_copy",
                        "cuckoo.move.after_clear"})
    for (uint64_t nth : {1, 7}) run_case({p, Op::kInsert, nth, nullptr});
}

TEST(CuckooCrash, ErasePoints) {
  for (const char* p : {"cuckoo.erase.before_store", "cuckoo.erase.after_store"}) run_case({p, Op::kErase, 3, nullptr});
}

TEST(CuckooCrash, ExpansionPoints) {
  for (const char* p : {"cuckoo.expand.inside_txn", "cuckoo.expand.after_commit", "cuckoo.expand.after_publish"})
    run_case({p, Op::kExpand, 1, nullptr});
}

TEST(CuckooCrash, RepairerKilledMidRepairIsRepairedByTheNext) {
  for (const char* rp : {"cuckoo.repair.begin", "cuckoo.repair.after_data"})
    run_case({"cuckoo.move.after_copy", Op::kInsert, 1, rp});
}

// Layout 3 (f = 12, packed 12-bit lanes): a writer killed between the two word
// stores of a lane that straddles two words, in a place, a move or an erase
// (the nth hit of cuckoo.packed.between_words), and the one-word points on the
// packed path; a repairer killed mid-repair of a half-written lane.
TEST(CuckooCrash, PackedLanePoints) {
  for (uint64_t nth : {1, 4, 15}) run_case({"cuckoo.packed.between_words", Op::kInsert, nth, nullptr, 12});
  for (uint64_t nth : {1, 6}) run_case({"cuckoo.packed.between_words", Op::kErase, nth, nullptr, 12});
  for (const char* p : {"cuckoo.insert.before_store", "cuckoo.move.after_copy", "cuckoo.move.after_clear"})
    run_case({p, Op::kInsert, 7, nullptr, 12});
  run_case({"cuckoo.erase.after_store", Op::kErase, 3, nullptr, 12});
  run_case({"cuckoo.expand.after_publish", Op::kExpand, 1, nullptr, 12});
  for (const char* rp : {"cuckoo.repair.begin", "cuckoo.repair.after_data"})
    run_case({"cuckoo.packed.between_words", Op::kInsert, 2, rp, 12});
}
