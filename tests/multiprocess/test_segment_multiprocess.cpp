// tests/multiprocess/test_segment_multiprocess.cpp: several real processes on one segment:
// growth under load, liveness that pid reuse cannot fool, quarantine of freed
// memory, fork rules, death inside recovery, and a full /dev/shm.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "base/kill_point.h"
#include "base/wait_stats.h"
#include "segment/layout.h"
#include "shmfilter/segment.hpp"
#include "shmfilter/window.hpp"
#include "load_clock.h"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::exited_ok;
using shmf_test::fork_child;
using shmf_test::killed_by;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;
using shmf_test::wait_status;

namespace {

CreateOptions small_options() { return shmf_test::small_options(4ull << 20, 1ull << 30, 256); }

// A pipe used to pass small values between parent and child.
struct Channel {
  int fd[2] = {-1, -1};
  Channel() {
    if (pipe(fd) != 0) abort();
  }
  ~Channel() {
    close(fd[0]);
    close(fd[1]);
  }
  void send(uint64_t v) const {
    if (write(fd[1], &v, sizeof v) != static_cast<ssize_t>(sizeof v)) abort();
  }
  uint64_t recv() const {
    uint64_t v = 0;
    if (read(fd[0], &v, sizeof v) != static_cast<ssize_t>(sizeof v)) abort();
    return v;
  }
};

void expect_clean_after_repair(Segment& s) {
  s.check(true);  // releases registry slots of the processes the test killed
  CheckReport r = s.check(false);
  for (const auto& f : r.findings) ADD_FAILURE() << f.where << ": " << f.problem;
}

uint8_t pattern(uint32_t who, uint32_t k, uint64_t i) { return static_cast<uint8_t>(who * 131 + k * 7 + i % 251); }

}  // namespace

// Processes keep creating regions (which grows the backing) and writing into
// them while the parent grows the segment too; nobody remaps, every byte written
// is still there, and no process gets SIGBUS.
TEST(SegmentMultiProcess, GrowthWhileOthersAttachedAndWriting) {
  SegmentGuard g(unique_name("grow"));
  Segment s = Segment::create(g.name, small_options());
  const uint64_t start_size = s.size();
  constexpr int kWorkers = 3, kRegions = 12;
  constexpr uint64_t kBytes = 1ull << 20;
  std::vector<pid_t> kids;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    kids.push_back(fork_child([&, w] {
      Segment c = Segment::open(g.name);
      std::byte* base_before = c.base();
      for (uint32_t k = 0; k < kRegions; ++k) {
        RegionInfo r = c.create_region("w" + std::to_string(w) + "-" + std::to_string(k), Kind::kBlob, kBytes, {});
        auto* p = reinterpret_cast<uint8_t*>(c.base() + r.offset);
        for (uint64_t i = 0; i < kBytes; ++i) p[i] = pattern(w, k, i);
      }
      if (c.base() != base_before) return 2;  // never remapped
      for (uint32_t k = 0; k < kRegions; ++k) {
        RegionInfo r = c.open_region("w" + std::to_string(w) + "-" + std::to_string(k), Kind::kBlob);
        auto* p = reinterpret_cast<uint8_t*>(c.base() + r.offset);
        for (uint64_t i = 0; i < kBytes; i += 4093)
          if (p[i] != pattern(w, k, i)) return 3;
      }
      return 0;
    }));
  }
  // Online growth by the parent meanwhile (sizes above anything the workers' own
  // growth reaches: ~1 MiB of tables + 36 MiB of regions + 1/8 slack).
  for (uint64_t mib : {48, 56, 64, 72}) s.resize(mib << 20);
  for (pid_t k : kids) EXPECT_TRUE(exited_ok(wait_status(k)));
  EXPECT_GT(s.size(), start_size + kWorkers * kRegions * kBytes / 2);
  for (uint32_t w = 0; w < kWorkers; ++w)
    for (uint32_t k = 0; k < kRegions; ++k) {
      RegionInfo r = s.open_region("w" + std::to_string(w) + "-" + std::to_string(k), Kind::kBlob);
      auto* p = reinterpret_cast<uint8_t*>(s.base() + r.offset);
      for (uint64_t i = 0; i < kBytes; i += 997) ASSERT_EQ(p[i], pattern(w, k, i)) << w << "/" << k << "@" << i;
    }
  expect_clean_after_repair(s);
}

// A dead attachment's pid is planted into its registry slot while a live
// process owns that pid: liveness still reads dead, because it comes from the
// kernel's OFD lock on the slot, not from kill(pid, 0).
TEST(SegmentMultiProcess, PidReuseCannotFoolLiveness) {
  SegmentGuard g(unique_name("pid"));
  Segment s = Segment::create(g.name, small_options());
  Channel ch;
  pid_t dead = fork_child([&] {
    Segment c = Segment::open(g.name);
    ch.send(c.owner_token());
    pause();
    return 0;
  });
  uint64_t token = ch.recv();
  ASSERT_TRUE(s.token_alive(token));
  kill(dead, SIGKILL);
  ASSERT_TRUE(killed_by(wait_status(dead), SIGKILL));
  pid_t live = fork_child([] {
    pause();
    return 0;
  });
  // The dead owner's slot now names a live pid (as after pid reuse).
  auto* h = reinterpret_cast<internal::Header*>(s.base());
  auto* slots = reinterpret_cast<internal::RegistrySlot*>(s.base() + h->registry_offset);
  uint32_t slot = static_cast<uint32_t>(token & 0xffff);
  for (pid_t planted : {live, getpid()}) {
    slots[slot].pid = planted;
    ASSERT_EQ(kill(planted, 0), 0) << "the planted pid must belong to a live process";
    EXPECT_FALSE(s.token_alive(token)) << "pid " << planted;
    bool listed = false;
    for (const auto& p : s.processes())
      if (p.slot == slot) {
        listed = true;
        EXPECT_EQ(p.pid, planted);
        EXPECT_FALSE(p.alive);
      }
    EXPECT_TRUE(listed);
    EXPECT_EQ(s.stats().processes_alive, 1u);
  }
  kill(live, SIGKILL);
  wait_status(live);
  // A new attachment may take the slot: the old token stays dead (new incarnation).
  Segment again = Segment::open(g.name);
  EXPECT_TRUE(s.token_alive(again.owner_token()));
  EXPECT_FALSE(s.token_alive(token));
}

// A futex wake of the control lock can be lost: the waiter it woke is SIGKILLed before it
// takes the lock while a third process takes the free lock first (an uncontended CAS drops
// FUTEX_WAITERS, so that process's unlock wakes nobody). The torture found workers asleep
// 19-31 s on a free lock. The holder here makes the same state by hand: it frees the word
// without a wake while a waiter sleeps, and exits. The waiter must take the lock (its
// create_region succeeds); a single sleep to the 30 s bound failed it with kBusy.
TEST(SegmentMultiProcess, ALostWakeOfTheControlLockDoesNotStrandItsWaiters) {
  SegmentGuard g(unique_name("wake"));
  Segment s = Segment::create(g.name, small_options());
  auto* mutex = &reinterpret_cast<internal::Header*>(s.base())->mutex;
  Channel holding;
  pid_t holder = fork_child([&] {
    Segment c = Segment::open(g.name);
    c.transact([&](ControlTxn&) {
      holding.send(1);
      // Until the waiter sleeps on the futex (it sets FUTEX_WAITERS first); bounded.
      for (int i = 0; i < 20000 && (__atomic_load_n(&mutex->__data.__lock, __ATOMIC_ACQUIRE) & 0x80000000u) == 0; ++i)
        usleep(1000);
      // The unlock whose wake went to a waiter that then died: the word freed, nobody woken.
      __atomic_store_n(&mutex->__data.__owner, 0, __ATOMIC_RELAXED);
      __atomic_exchange_n(&mutex->__data.__lock, 0, __ATOMIC_RELEASE);
      _exit(0);
    });
    return 1;
  });
  ASSERT_EQ(holding.recv(), 1u);
  pid_t waiter = fork_child([&] {
    Segment c = Segment::open(g.name);
    try {
      c.create_region("after", Kind::kBlob, 4096, {});
    } catch (const Error& e) {
      std::fprintf(stderr, "waiter: %s\n", e.what());
      return 1;
    }
    return 0;
  });
  int st = 0;
  ASSERT_TRUE(shmf_test::wait_child_bounded(holder, 20, st)) << "the holder never saw the waiter sleep";
  EXPECT_TRUE(exited_ok(st));
  ASSERT_TRUE(shmf_test::wait_child_bounded(waiter, 60, st));
  EXPECT_TRUE(exited_ok(st)) << "the waiter did not get the free lock within the control lock's bound";
  EXPECT_TRUE(s.find("after").has_value());
  expect_clean_after_repair(s);
}

// Reader announcements (docs/CONCURRENCY.md): freed memory is not reused while a live
// process is inside a call that began before the free; a process that is attached but
// outside any call (idle: it never calls, never quiesces) does not hold it back, nor does
// one SIGKILLed inside a call. Its handle sees the drop.
TEST(SegmentMultiProcess, OnlyCallsInFlightHoldReclamationBack) {
  SegmentGuard g(unique_name("quar"));
  Segment s = Segment::create(g.name, small_options());
  Channel to_child, to_parent;
  auto reused = [&](const RegionInfo& r) {
    uint64_t off = 0;
    s.transact([&](ControlTxn& txn) {
      off = txn.allocate(r.size);
      txn.free(off);  // back to quarantine: the next probe starts from the same state
    });
    return off == r.offset;
  };

  // 1. Idle: attached, holds a region's offset, never calls again. (The old rule kept the
  // extent quarantined until this process passed a quiescent point, i.e. forever.)
  RegionInfo r = s.create_region("doomed", Kind::kBlob, 1 << 16, {});
  pid_t idle = fork_child([&] {
    Segment c = Segment::open(g.name);
    RegionInfo mine = c.open_region("doomed", Kind::kBlob);
    to_parent.send(c.region_live(mine.slot, mine.generation) ? 1 : 0);
    to_child.recv();  // the parent dropped it
    to_parent.send(c.region_live(mine.slot, mine.generation) ? 1 : 0);
    to_child.recv();
    return 0;
  });
  ASSERT_EQ(to_parent.recv(), 1u);
  ASSERT_TRUE(s.drop("doomed"));
  to_child.send(1);
  EXPECT_EQ(to_parent.recv(), 0u) << "the other process's handle must see the drop";
  EXPECT_EQ(s.stats().processes_alive, 2u);
  EXPECT_TRUE(reused(r)) << "an idle attached process held a freed extent back";
  to_child.send(1);
  EXPECT_TRUE(exited_ok(wait_status(idle)));

  // 2. Safety: a reader inside a call (a ReadGuard, as every data-plane call holds one)
  // that found the region before the drop keeps it intact until the call ends.
  RegionInfo r2 = s.create_region("read", Kind::kBlob, 1 << 16, [](std::byte* p, uint64_t len, ControlTxn&) {
    std::memset(p, 0x3c, len);
  });
  pid_t reader = fork_child([&] {
    Segment c = Segment::open(g.name);
    int rc = 0;
    {
      const ReadGuard in_call(c);
      RegionInfo mine = c.open_region("read", Kind::kBlob);
      to_parent.send(1);
      to_child.recv();  // dropped, and the parent tried to reuse it
      for (uint64_t o = 0; o < mine.size; ++o)
        if (static_cast<uint8_t>(c.base()[mine.offset + o]) != 0x3c) rc = 2;  // reused under us
      to_parent.send(static_cast<uint64_t>(rc));
      to_child.recv();
    }
    to_parent.send(1);  // the call has ended
    to_child.recv();
    return rc;
  });
  ASSERT_EQ(to_parent.recv(), 1u);
  ASSERT_TRUE(s.drop("read"));
  uint64_t off = 0;
  s.transact([&](ControlTxn& txn) {
    off = txn.allocate(r2.size);
    std::memset(txn.base() + off, 0x11, r2.size);  // what a new owner would write
    txn.free(off);
  });
  EXPECT_NE(off, r2.offset) << "reused while a reader was inside a call";
  to_child.send(1);
  EXPECT_EQ(to_parent.recv(), 0u) << "the reader saw the region's bytes change inside its call";
  EXPECT_FALSE(reused(r2)) << "reused while a reader was inside a call";
  to_child.send(1);
  ASSERT_EQ(to_parent.recv(), 1u);
  EXPECT_TRUE(reused(r2)) << "not reused once the reader's call had ended";
  to_child.send(1);
  EXPECT_TRUE(exited_ok(wait_status(reader)));

  // 3. A process SIGKILLed inside a call does not hold the extent back forever: its
  // slot's calls word stays raised, but the kernel dropped its registry lock.
  RegionInfo r3 = s.create_region("doomed3", Kind::kBlob, 1 << 12, {});
  pid_t stuck = fork_child([&] {
    Segment c = Segment::open(g.name);
    const ReadGuard in_call(c);
    to_parent.send(c.owner_token());
    pause();
    return 0;
  });
  const uint64_t token = to_parent.recv();
  ASSERT_TRUE(s.drop("doomed3"));
  EXPECT_FALSE(reused(r3)) << "reused while a live reader was inside a call";
  kill(stuck, SIGKILL);
  ASSERT_TRUE(killed_by(wait_status(stuck), SIGKILL));
  auto* h = reinterpret_cast<internal::Header*>(s.base());
  auto* slots = reinterpret_cast<internal::RegistrySlot*>(s.base() + h->registry_offset);
  EXPECT_EQ(slots[token & 0xffff].calls & internal::kCallCountMask, 1u) << "the dead reader's call is still counted";
  EXPECT_TRUE(reused(r3)) << "a reader killed inside a call held the extent back";
  expect_clean_after_repair(s);
}

// The same death inside a real data-plane call: a child SIGKILLed by a kill point in the
// middle of Window::mark (its ReadGuard raised, never lowered) blocks nothing once dead.
TEST(SegmentMultiProcess, DeathInsideAWindowCallDoesNotBlockReclamation) {
  SegmentGuard g(unique_name("qkill"));
  Segment s = Segment::create(g.name, small_options());
  WindowOptions wo;
  wo.expected_per_bucket = 1000;
  Window::create(s, "w", wo);
  Channel to_parent;
  pid_t victim = fork_child([&] {
    Segment c = Segment::open(g.name);
    Window w = Window::open(c, "w");
    to_parent.send(c.owner_token());
    internal::arm_kill_point("window.space.after_claim");  // inside mark: the first kNew of a space
    w.mark(7, uint64_t{42});
    return 3;  // not reached
  });
  const uint64_t token = to_parent.recv();
  ASSERT_TRUE(killed_by(wait_status(victim), SIGKILL)) << "kill point not reached inside mark";
  auto* h = reinterpret_cast<internal::Header*>(s.base());
  auto* slots = reinterpret_cast<internal::RegistrySlot*>(s.base() + h->registry_offset);
  EXPECT_EQ(slots[token & 0xffff].calls & internal::kCallCountMask, 1u) << "the victim died outside its call";
  RegionInfo r = s.create_region("after", Kind::kBlob, 1 << 12, {});
  ASSERT_TRUE(s.drop("after"));
  uint64_t off = 0;
  s.transact([&](ControlTxn& txn) { off = txn.allocate(r.size); });
  EXPECT_EQ(off, r.offset) << "a process killed inside Window::mark held reclamation back";
  expect_clean_after_repair(s);
}

// An attachment belongs to its process: an inherited Segment refuses control-
// plane work in the child, and the child does not keep the parent's registry
// lock alive after the parent dies.
TEST(SegmentMultiProcess, ForkRules) {
  SegmentGuard g(unique_name("fork"));
  Segment s = Segment::create(g.name, small_options());
  const uint64_t parent_token = s.owner_token();
  pid_t child = fork_child([&] {
    if (s.owner_token() != 0) return 5;  // an inherited attachment has no token in the child
    try {
      s.create_region("from-child", Kind::kBlob, 64, {});
      return 2;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kForked || std::string(e.what()).find("Segment::open") == std::string::npos) return 3;
    }
    Segment own = Segment::open(g.name);
    own.create_region("from-child", Kind::kBlob, 64, {});
    return own.token_alive(parent_token) ? 0 : 4;
  });
  EXPECT_TRUE(exited_ok(wait_status(child)));
  EXPECT_TRUE(s.find("from-child").has_value());

  Channel ch;
  pid_t middle = fork_child([&] {
    Segment m = Segment::open(g.name);
    ch.send(m.owner_token());
    pid_t grandchild = fork();  // inherits m (and its fd, which the library closes in the child)
    if (grandchild == 0) {
      ch.send(static_cast<uint64_t>(getpid()));  // after fork's child handlers ran
      pause();
      _exit(0);
    }
    pause();
    return 0;
  });
  uint64_t token = ch.recv();
  auto grandchild = static_cast<pid_t>(ch.recv());
  EXPECT_TRUE(s.token_alive(token));
  kill(middle, SIGKILL);
  wait_status(middle);
  EXPECT_EQ(kill(grandchild, 0), 0) << "grandchild should still run";
  EXPECT_FALSE(s.token_alive(token)) << "a forked child kept its dead parent's attachment alive";
  kill(grandchild, SIGKILL);
}

// A holder dies mid-transaction; the next locker dies in the middle of rolling
// it back; the third locker rolls back again (recovery is idempotent).
TEST(SegmentMultiProcess, DeathDuringRecoveryIsRecovered) {
  SegmentGuard g(unique_name("rec"));
  Segment s = Segment::create(g.name, small_options());
  RegionInfo meta = s.create_region("meta", Kind::kBlob, 64, {});
  auto* words = reinterpret_cast<uint64_t*>(s.base() + meta.offset);
  s.create_region("victim", Kind::kBlob, 4096, {});
  s.quiesce();
  SegmentStats before = s.stats();
  pid_t a = fork_child([&] {
    Segment c = Segment::open(g.name);
    internal::arm_kill_point("segment.drop.after_free");
    c.transact([&](ControlTxn& txn) {
      for (int i = 0; i < 8; ++i) txn.store_u64(reinterpret_cast<uint64_t*>(c.base() + meta.offset) + i, 1000 + i);
      txn.allocate(5000);
      c.drop("victim");
    });
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(a), SIGKILL));
  pid_t b = fork_child([&] {
    Segment c = Segment::open(g.name);
    internal::arm_kill_point("segment.recovery.mid_undo");
    c.transact([](ControlTxn&) {});
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(b), SIGKILL)) << "recovery kill point not reached";
  // Half rolled back: the third locker must finish it.
  // At once: waiting on the dead recoverer would sit out the lock's 30 s bound, count an
  // expired wait and throw kBusy (checked without a wall clock).
  const uint64_t expired = internal::wait_snapshot().expired;
  ASSERT_NO_THROW(s.transact([](ControlTxn&) {}));
  EXPECT_EQ(internal::wait_snapshot().expired, expired) << "the third locker waited on a dead holder";
  for (int i = 0; i < 8; ++i) EXPECT_EQ(words[i], 0u) << i;
  EXPECT_TRUE(s.find("victim").has_value());
  SegmentStats after = s.stats();
  EXPECT_EQ(after.used_bytes, before.used_bytes);
  EXPECT_EQ(after.quarantined_bytes, before.quarantined_bytes);
  EXPECT_EQ(after.structures, before.structures);
  expect_clean_after_repair(s);
}

// Workers create and drop regions in a loop; the parent SIGKILLs them at
// random moments. The survivors carry on and the segment stays consistent
// (every committed region is intact, nothing leaked).
TEST(SegmentMultiProcess, RandomKillsDuringCreateDrop) {
  SegmentGuard g(unique_name("rk"));
  Segment s = Segment::create(g.name, small_options());
  std::mt19937 rng(7);
  for (int round = 0; round < 12; ++round) {
    // The parent detaches while the workers run: an attached process that never
    // quiesces would (rightly) keep every freed extent in quarantine.
    s = Segment();
    std::vector<pid_t> kids;
    for (int w = 0; w < 3; ++w) {
      kids.push_back(fork_child([&, w, round] {
        Segment c = Segment::open(g.name);
        for (int i = 0;; ++i) {
          std::string n = "r" + std::to_string(round) + "w" + std::to_string(w) + "-" + std::to_string(i % 5);
          // Each region owns an extra extent whose offset it keeps in its first word.
          bool dropped = c.drop(n, [](std::byte* p, uint64_t, ControlTxn& txn) {
            uint64_t extra;
            std::memcpy(&extra, p, 8);
            txn.free(extra);
          });
          if (!dropped)
            c.create_region(n, Kind::kBlob, 1000 + 4096 * (i % 7), [&](std::byte* p, uint64_t len, ControlTxn& txn) {
              std::memset(p, 0x5a, len);
              uint64_t extra = txn.allocate(64);
              std::memcpy(p, &extra, 8);
            });
          c.quiesce();
        }
        return 0;
      }));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 20000));
    for (pid_t k : kids) {
      kill(k, SIGKILL);
      ASSERT_TRUE(killed_by(wait_status(k), SIGKILL)) << "a worker failed before it was killed";
    }
    s = Segment::open(g.name);
    s.transact([](ControlTxn&) {});
    for (const RegionInfo& r : s.list()) {
      auto* p = reinterpret_cast<uint8_t*>(s.base() + r.offset);
      ASSERT_EQ(p[8], 0x5a) << r.name;
      ASSERT_EQ(p[r.size - 1], 0x5a) << r.name;
    }
    CheckReport rep = s.check(true);
    for (const auto& f : rep.findings)
      if (f.where.rfind("registry", 0) != 0 && f.where != "control lock")
        ADD_FAILURE() << "round " << round << ": " << f.where << ": " << f.problem;
  }
  expect_clean_after_repair(s);
}

// A full /dev/shm (here a 4 MiB tmpfs, or a file size limit where mounting is
// not allowed): allocation fails with kNoSpace at the moment space is asked for,
// and every byte handed out before is writable (no SIGBUS).
void full_filesystem_case(bool try_tmpfs) {
  pid_t child = fork_child([try_tmpfs] {
    std::string dir = "/tmp/" + unique_name("tmpfs");
    if (mkdir(dir.c_str(), 0700) != 0) return 10;
    bool tmpfs = try_tmpfs && unshare(CLONE_NEWNS) == 0 &&
                 mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                 mount("shmf-test", dir.c_str(), "tmpfs", 0, "size=4m") == 0;
    if (!tmpfs) {
      rlimit lim{4u << 20, 4u << 20};
      if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 11;  // SIGXFSZ stays at its default (terminate)
    }
    fprintf(stderr, "full-filesystem test uses %s\n", tmpfs ? "a 4 MiB tmpfs" : "RLIMIT_FSIZE = 4 MiB");
    std::string path = dir + "/seg";
    CreateOptions o;
    o.size = 1 << 20;
    o.max_size = 256ull << 20;
    o.directory_capacity = 16;
    o.file = path;
    // Too big to create at all: a clean error and nothing left behind.
    CreateOptions big = o;
    big.size = 64ull << 20;
    try {
      Segment::create("full", big);
      return 12;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kNoSpace) return 13;
    }
    struct stat st{};
    if (stat(path.c_str(), &st) == 0) return 14;
    Segment s = Segment::create("full", o);
    int made = 0;
    bool no_space = false;
    for (int i = 0; i < 64 && !no_space; ++i) {
      try {
        RegionInfo r = s.create_region("r" + std::to_string(i), Kind::kBlob, 256 << 10, {});
        std::memset(s.base() + r.offset, 0x77, r.size);  // SIGBUS here would kill the child
        ++made;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kNoSpace) return 15;
        no_space = true;
      }
    }
    if (!no_space || made < 2) return 16;
    if (!s.check().consistent()) return 17;
    // Dropping makes room again (after quiescence) without growth.
    s.drop("r0");
    s.quiesce();
    RegionInfo again = s.create_region("again", Kind::kBlob, 128 << 10, {});
    std::memset(s.base() + again.offset, 1, again.size);
    if (!s.check().consistent()) return 18;
    OpenOptions oo;
    oo.file = path;
    Segment::remove("full", oo);
    if (tmpfs) umount(dir.c_str());
    rmdir(dir.c_str());
    return 0;
  });
  int st = wait_status(child);
  EXPECT_TRUE(exited_ok(st)) << "child status " << st << " (exit " << (WIFEXITED(st) ? WEXITSTATUS(st) : -1)
                             << ", signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0) << ")";
}

TEST(SegmentMultiProcess, FullFilesystemGivesNoSpaceNotSigbus) { full_filesystem_case(true); }

// The same with a file-size limit: SIGXFSZ (default action: terminate) must not
// kill the process; the library reports kNoSpace instead.
TEST(SegmentMultiProcess, FileSizeLimitGivesNoSpaceNotSigxfsz) { full_filesystem_case(false); }

// Lock-free lookups in one process while another creates and drops: a region
// found is always fully initialised (init runs before the publishing release
// store), and its bytes stay intact until the reader's call ends (its ReadGuard),
// even if it is dropped meanwhile (quarantine), although the writer keeps allocating.
TEST(SegmentMultiProcess, ReadersSeeInitialisedRegionsWhileInACall) {
  SegmentGuard g(unique_name("pub"));
  Segment s = Segment::create(g.name, small_options());
  RegionInfo ctl = s.create_region("ctl", Kind::kBlob, 64, {});  // word 0: the reader says stop
  auto marker = [](const std::string& n) { return std::hash<std::string>{}(n) | 1; };
  pid_t writer = fork_child([&] {
    Segment c = Segment::open(g.name);
    auto* stop = reinterpret_cast<uint64_t*>(c.base() + ctl.offset);
    for (int i = 0; __atomic_load_n(stop, __ATOMIC_ACQUIRE) == 0 && i < 2000000; ++i) {
      std::string n = "n" + std::to_string(i % 8);
      if (!c.drop(n))
        c.create_region(n, Kind::kBlob, 256 + 64 * (i % 5), [&](std::byte* p, uint64_t len, ControlTxn&) {
          uint64_t m = marker(n);
          for (uint64_t o = 0; o + 8 <= len; o += 8) std::memcpy(p + o, &m, 8);
        });
      c.quiesce();
    }
    return 0;
  });
  pid_t reader = fork_child([&] {
    Segment c = Segment::open(g.name);
    auto* stop = reinterpret_cast<uint64_t*>(c.base() + ctl.offset);
    uint64_t seen = 0;
    // Bounded in uncontended seconds (tests/support/load_clock.h): on a loaded machine the
    // reader and the writer both wait for a CPU, which is not "finding too few".
    shmf_test::LoadClock clock;
    const uint64_t limit = uint64_t(30 * shmf_test::time_scale() * 1e9);
    int rc = 3;
    for (uint64_t round = 0;; ++round) {
      std::string n = "n" + std::to_string(round % 8);
      const ReadGuard in_call(c);  // what a data-plane call holds; the old rule: no quiesce() in between
      auto r = c.find(n);
      if (r) {
        uint64_t m = marker(n);
        // Keep reading it for a while (tens of microseconds), as a slow data-plane
        // batch would: the writer drops and re-creates meanwhile.
        for (int pass = 0; pass < 64 && rc != 2; ++pass)
          for (uint64_t o = 0; o + 8 <= r->size; o += 8) {
            uint64_t v;
            std::memcpy(&v, c.base() + r->offset + o, 8);
            if (v != m) {
              rc = 2;  // uninitialised, or reused under us
              break;
            }
          }
        if (rc == 2) break;
        if (++seen == 5000) {
          rc = 0;
          break;
        }
      }
      if (round % 64 == 63 && clock.now() > limit) break;
    }
    __atomic_store_n(stop, 1, __ATOMIC_RELEASE);
    return rc;
  });
  int rs = wait_status(reader);
  EXPECT_TRUE(exited_ok(rs)) << "reader exit " << (WIFEXITED(rs) ? WEXITSTATUS(rs) : -WTERMSIG(rs))
                             << " (2: a found region was not (or no longer) initialised;"
                                " 3: found fewer than 5000 in 30 uncontended s)";
  EXPECT_TRUE(exited_ok(wait_status(writer)));
  expect_clean_after_repair(s);
}
