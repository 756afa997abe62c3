// tests/multiprocess/test_snapshot_crash.cpp: restore is all or nothing under SIGKILL
// (issue #23, docs/save-restore.md "restore --into"). A child restoring into a segment
// is killed at every kill point of the restore (staging each structure, the publish and
// its recovery, the rollback of a failing restore); then none of the file's structures is
// visible or all of them are, check reports at most the dead child's leftovers, and a
// rerun succeeds, leaving a clean segment with exactly the space a clean restore takes.
// Also: a restore into a new segment killed before its rename, and save() through a
// Segment inherited across fork() (kForked, not SIGSEGV).
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/kill_point.h"
#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/snapshot.hpp"
#include "shmfilter/window.hpp"
#include "structures/snapshot_io.h"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::code_of;
using shmf_test::fork_child;
using shmf_test::killed_by;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;
using shmf_test::wait_status;

namespace {

struct TempFile {
  std::string path = "/tmp/shmf-test-snapkill-" + std::to_string(getpid()) + "-" + unique_name("f").substr(10);
  ~TempFile() { std::remove(path.c_str()); }
};

CreateOptions opts() { return shmf_test::small_options(16ull << 20, 256ull << 20, 256); }

// Twenty structures of five kinds, a window of each variant, then "victim" (last in the file).
std::vector<std::string> fill(Segment& seg) {
  std::vector<std::string> names;
  for (int i = 0; i < 20; ++i) {
    std::string nm = "s" + std::to_string(i);
    switch (i % 5) {
      case 0: Hll::create(seg, nm).add(uint64_t(i)); break;
      case 1: ExactSet::create(seg, nm, {.capacity = 100}).insert(uint64_t(i)); break;
      case 2: {
        Bloom b = Bloom::create(seg, nm, {.capacity = 100, .growth = 2});
        for (uint64_t k = 0; k < 500; ++k) b.add(k);  // layers: extents beyond the region
        break;
      }
      case 3: {
        Cuckoo c = Cuckoo::create(seg, nm, {.capacity = 64, .expansion = 2});
        for (uint64_t k = 0; k < 200; ++k) c.add(k);  // sub-filters: extents beyond the region
        break;
      }
      case 4: RoaringSet::create(seg, nm).add(uint32_t(i)); break;
    }
    names.push_back(nm);
  }
  for (WindowVariant v : {WindowVariant::kBloom, WindowVariant::kCuckoo}) {  // a ring of bucket tables each
    WindowOptions o;
    o.variant = v;
    o.expected_per_bucket = 200;
    o.error = 0.01;
    o.retention = 3;
    o.max_spaces = 8;
    o.seed = 7;
    std::string nm = "w" + std::string(window_variant_name(v));
    Window w = Window::create(seg, nm, o);
    for (uint64_t k = 0; k < 50; ++k) w.mark(1, k);
    names.push_back(nm);
  }
  Hll::create(seg, "victim").add(uint64_t{1});
  names.push_back("victim");
  return names;
}

struct Case {
  const char* point;
  uint64_t nth;
  bool failing;  // the child's restore fails (another attachment creates "victim"): its rollback is killed
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.point << ":" << c.nth << (c.failing ? " (failing restore)" : ""); }

void make_victim(size_t index, void* ctx) {
  if (index != 3) return;
  Segment other = Segment::open(*static_cast<std::string*>(ctx));
  Hll::create(other, "victim").add(uint64_t{777});
}

bool allowed_after_kill(const std::string& what) {
  return what.find("unpublished structure of a restore") != std::string::npos ||
         what.find("died without detaching") != std::string::npos || what.find("its holder died") != std::string::npos;
}

std::string findings(const CheckReport& r) {
  std::string s;
  for (const auto& f : r.findings) s += "\n  " + f.where + ": " + f.problem;
  return s;
}

}  // namespace

class RestoreKill : public ::testing::TestWithParam<Case> {};

TEST_P(RestoreKill, NothingOrAllIsVisibleAndARerunSucceeds) {
  const Case c = GetParam();
  SegmentGuard src(unique_name("rk-src")), dst(unique_name("rk-dst")), ref(unique_name("rk-ref"));
  TempFile f;
  std::vector<std::string> names;
  {
    Segment s = Segment::create(src.name, opts());
    names = fill(s);
    save(s, f.path);
  }
  RestoreOptions into;
  into.into_existing = true;
  // The space a clean restore takes: the reference.
  Segment r = Segment::create(ref.name, opts());
  Hll::create(r, "existing");
  restore(f.path, ref.name, into);
  const SegmentStats clean = r.stats();

  Segment out = Segment::create(dst.name, opts());
  Hll::create(out, "existing");
  std::string dst_name = dst.name;
  pid_t pid = fork_child([&] {
    if (c.failing) internal::snapshot::set_restore_hook(make_victim, &dst_name);
    internal::arm_kill_point(c.point, c.nth);
    RestoreOptions o;
    o.into_existing = true;
    restore(f.path, dst_name, o);
    return 3;  // not killed: the point was not reached
  });
  const int st = wait_status(pid);
  ASSERT_TRUE(killed_by(st, SIGKILL)) << c.point << ":" << c.nth << ": the child was not killed (status " << st << ")";

  // Nothing or all: read lock-free, before anyone takes the control lock (and recovers).
  size_t visible = 0;
  for (const auto& n : names) visible += out.find(n) && n != "victim";
  const size_t restorable = names.size() - 1;
  ASSERT_TRUE(visible == 0 || visible == restorable) << c.point << ": " << visible << " of " << restorable << " visible";
  if (c.failing) {
    ASSERT_EQ(visible, 0u);
    ASSERT_TRUE(out.find("victim")) << "the failing restore's rollback removed another attachment's structure";
    EXPECT_EQ(Hll::open(out, "victim").count(), 1u);
  }
  {  // check: only what the dead child leaves (its registry slot, its unpublished structures)
    CheckReport rep = out.check(false);
    size_t staged = 0;
    for (const auto& fd : rep.findings) {
      EXPECT_TRUE(allowed_after_kill(fd.problem)) << c.point << ": " << fd.where << ": " << fd.problem;
      staged += fd.problem.find("unpublished structure of a restore") != std::string::npos;
    }
    // Every case that leaves nothing visible died with something staged: check must say so (not "consistent").
    if (visible == 0) {
      EXPECT_GT(staged, 0u) << c.point << ": the dead restore's staging is not reported";
    } else {
      EXPECT_EQ(staged, 0u) << c.point;
    }
  }
  // The rerun (restoring what is not there yet) succeeds and reclaims the dead child's staging.
  if (c.failing) {
    ASSERT_TRUE(Hll::drop(out, "victim"));
  }
  if (visible == 0) {
    restore(f.path, dst.name, into);
  } else {
    EXPECT_EQ(code_of([&] { restore(f.path, dst.name, into); }), ErrorCode::kExists);  // published: all there
    if (!out.find("victim")) {
      RestoreOptions v = into;
      v.structures = {"victim"};
      restore(f.path, dst.name, v);
    }
  }
  for (const auto& n : names) EXPECT_TRUE(out.find(n)) << c.point << ": " << n << " missing after the rerun";
  {
    CheckReport rep = out.check(false);
    for (const auto& fd : rep.findings)
      EXPECT_TRUE(fd.problem.find("died without detaching") != std::string::npos || fd.problem.find("its holder died") != std::string::npos)
          << c.point << ": " << fd.where << ": " << fd.problem;
  }
  out.check(true);
  CheckReport after = out.check(false);
  EXPECT_TRUE(after.consistent()) << c.point << findings(after);
  const SegmentStats now = out.stats();
  EXPECT_EQ(now.structures, clean.structures) << c.point;
  EXPECT_EQ(now.used_bytes, clean.used_bytes) << c.point << ": the killed restore's space was not reclaimed";
  EXPECT_EQ(Hll::open(out, "s0").count(), 1u);
  EXPECT_TRUE(Cuckoo::open(out, "s3").contains(uint64_t{150}));
  EXPECT_TRUE(RoaringSet::open(out, "s4").contains(4));
}

INSTANTIATE_TEST_SUITE_P(
    EveryRestoreKillPoint, RestoreKill,
    ::testing::Values(Case{"restore.into.after_entry", 1, false}, Case{"restore.into.after_entry", 13, false},
                      Case{"segment.create_region.after_allocate", 4, false},
                      Case{"segment.create_region.before_publish", 7, false},
                      Case{"segment.create_region.after_publish", 9, false},
                      Case{"segment.txn.before_commit", 11, false}, Case{"restore.into.before_publish", 1, false},
                      Case{"segment.publish.before_commit", 1, false}, Case{"segment.publish.after_commit", 1, false},
                      Case{"segment.publish.mid_flip", 1, false}, Case{"restore.into.after_publish", 1, false},
                      Case{"segment.drop_staged.after_free", 1, true}, Case{"segment.drop_staged.after_free", 9, true},
                      Case{"segment.free.after_quarantine", 2, true}),
    [](const ::testing::TestParamInfo<Case>& i) {
      std::string n = std::string(i.param.point) + "_" + std::to_string(i.param.nth) + (i.param.failing ? "_failing" : "");
      for (char& ch : n)
        if (ch == '.') ch = '_';
      return n;
    });

// A death inside the recovery of a publish (the next locker finishing it) is finished by the one after.
TEST(RestoreKillRecovery, DeathWhileFinishingAPublishIsFinishedByTheNextLocker) {
  SegmentGuard src(unique_name("rk-src")), dst(unique_name("rk-dst"));
  TempFile f;
  std::vector<std::string> names;
  {
    Segment s = Segment::create(src.name, opts());
    names = fill(s);
    save(s, f.path);
  }
  Segment out = Segment::create(dst.name, opts());
  std::string dst_name = dst.name;
  pid_t pid = fork_child([&] {
    internal::arm_kill_point("segment.publish.after_commit", 1);
    RestoreOptions o;
    o.into_existing = true;
    restore(f.path, dst_name, o);
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  pid = fork_child([&] {  // the recoverer dies half way through the flips
    Segment s = Segment::open(dst_name);
    internal::arm_kill_point("segment.publish.mid_flip", 1);
    Hll::create(s, "after");
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  for (const auto& n : names) EXPECT_TRUE(out.find(n)) << n;
  Hll::create(out, "after");
  for (const auto& n : names) EXPECT_TRUE(out.find(n)) << n;
  out.check(true);
  CheckReport rep = out.check(false);
  EXPECT_TRUE(rep.consistent()) << findings(rep);
  EXPECT_EQ(out.stats().structures, names.size() + 1);
}

// A restore into a new segment killed before its rename leaves no segment; the rerun succeeds
// and removes the dead restore's temporary.
TEST(RestoreKillRecovery, NewSegmentKilledBeforeTheRenameLeavesNothingAndARerunSucceeds) {
  SegmentGuard src(unique_name("rk-src")), dst(unique_name("rk-new"));
  TempFile f;
  {
    Segment s = Segment::create(src.name, opts());
    fill(s);
    save(s, f.path);
  }
  std::string dst_name = dst.name;
  pid_t pid = fork_child([&] {
    internal::arm_kill_point("restore.new.before_rename", 1);
    restore(f.path, dst_name);
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  EXPECT_FALSE(Segment::exists(dst.name));
  const std::string leftover = "/dev/shm/" + dst.name + ".restoring-" + std::to_string(pid);
  EXPECT_EQ(::access(leftover.c_str(), F_OK), 0) << "the test expects the killed restore's temporary";
  restore(f.path, dst.name);
  EXPECT_NE(::access(leftover.c_str(), F_OK), 0) << "the rerun left the dead restore's temporary";
  Segment out = Segment::open(dst.name);
  EXPECT_TRUE(out.check().consistent());
}

// save() through a Segment this process inherited across fork(): kForked, as every writer of
// lock words (#23: save_cuckoo called a null function for the owner token: SIGSEGV).
TEST(SaveForked, SaveThroughAnInheritedSegmentIsKForked) {
  SegmentGuard src(unique_name("sv-fork"));
  TempFile f;
  Segment seg = Segment::create(src.name, opts());
  fill(seg);
  pid_t pid = fork_child([&] {
    try {
      save(seg, f.path);
    } catch (const Error& e) {
      return e.code() == ErrorCode::kForked ? 0 : 4;
    }
    return 5;  // saved through the parent's attachment
  });
  const int st = wait_status(pid);
  ASSERT_TRUE(WIFEXITED(st)) << "save in a forked child died (status " << st << ")";
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_NE(::access(f.path.c_str(), F_OK), 0);
  pid = fork_child([&] {  // the child's own attachment saves
    Segment mine = Segment::open(src.name);
    return save(mine, f.path).entries.size() == 23 ? 0 : 6;
  });
  EXPECT_TRUE(shmf_test::exited_ok(wait_status(pid)));
}

// check --repair removes a killed restore's staged structures and every byte they held,
// as the next restore would.
TEST(RestoreKillRecovery, CheckRepairRemovesADeadRestoresStaging) {
  SegmentGuard src(unique_name("rk-src")), dst(unique_name("rk-dst"));
  TempFile f;
  {
    Segment s = Segment::create(src.name, opts());
    fill(s);
    save(s, f.path);
  }
  Segment out = Segment::create(dst.name, opts());
  Hll::create(out, "existing");
  const SegmentStats before = out.stats();
  std::string dst_name = dst.name;
  pid_t pid = fork_child([&] {
    internal::arm_kill_point("restore.into.before_publish", 1);
    RestoreOptions o;
    o.into_existing = true;
    restore(f.path, dst_name, o);
    return 3;
  });
  ASSERT_TRUE(killed_by(wait_status(pid), SIGKILL));
  EXPECT_EQ(out.list().size(), 1u);
  EXPECT_GT(out.stats().used_bytes, before.used_bytes);  // the staged structures hold space
  CheckReport rep = out.check(true);
  size_t repaired = 0;
  for (const auto& fd : rep.findings)
    repaired += fd.repaired && fd.problem.find("unpublished structure of a restore") != std::string::npos;
  EXPECT_EQ(repaired, 23u) << findings(rep);
  rep = out.check(false);
  EXPECT_TRUE(rep.consistent()) << findings(rep);
  EXPECT_EQ(out.stats().used_bytes, before.used_bytes);
  EXPECT_EQ(out.stats().structures, before.structures);
}
