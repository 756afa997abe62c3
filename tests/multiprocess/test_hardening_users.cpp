// tests/multiprocess/test_hardening_users.cpp: other users and processes
// (issue 12). A segment is attached only when its file is trusted (a regular
// file, not reached through a symlink, owned by us or root unless the caller
// names the owner); a user who can only READ the segment cannot make a dead
// process look alive with read locks. Tests that need a second user drop a
// forked child to `nobody` (65534) with setresgid/setresuid, which needs root
// (CI runs as root); without root they report SKIPPED, never PASSED.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "corrupt_image.h"
#include "segment/layout.h"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/error.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/segment.hpp"
#include "test_util.h"

using namespace shmfilter;
using namespace shmf_test;

namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

bool drop_to_nobody() {
  return setgroups(0, nullptr) == 0 && setresgid(kNogroup, kNogroup, kNogroup) == 0 &&
         setresuid(kNobody, kNobody, kNobody) == 0;
}

TEST(HardeningTrust, ASegmentOwnedByAnotherUserIsRefusedUnlessTrusted) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to give a file to another user): run it as root, as CI does";
  ImageFile img;
  { Segment s = Segment::create("img", img.options()); }
  ASSERT_EQ(chown(img.path.c_str(), kNobody, kNogroup), 0);
  ASSERT_EQ(chmod(img.path.c_str(), 0666), 0);  // what a hostile user would leave for root to find
  EXPECT_EQ(code_of([&] { img.open(); }), ErrorCode::kPermission);
  OpenOptions trusted = img.open_options();
  trusted.trusted_owner = kNobody;
  EXPECT_EQ(code_of([&] { Segment::open("img", trusted); }), ErrorCode::kOk);
}

TEST(HardeningTrust, ASymlinkIsNeverFollowed) {
  ImageFile img;
  { Segment s = Segment::create("img", img.options()); }
  std::string link = img.path + ".link";
  ASSERT_EQ(symlink(img.path.c_str(), link.c_str()), 0);
  OpenOptions o;
  o.file = link;
  EXPECT_EQ(code_of([&] { Segment::open("img", o); }), ErrorCode::kPermission);
  ::unlink(link.c_str());
}

TEST(HardeningTrust, AFifoOrDirectoryIsNotASegment) {
  ImageFile img;
  ASSERT_EQ(mkfifo(img.path.c_str(), 0600), 0);
  Outcome o = in_child([&] {
    return code_of([&] { img.open(); }) == ErrorCode::kNotASegment ? 0 : 20;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
  ::unlink(img.path.c_str());
  ASSERT_EQ(mkdir(img.path.c_str(), 0700), 0);
  EXPECT_EQ(code_of([&] { img.open(); }), ErrorCode::kNotASegment);
  ::rmdir(img.path.c_str());
}

// A read-only user read-locks every registry byte it can of a 0644 segment.
struct ReadLocker {
  pid_t pid = -1;
  explicit ReadLocker(const std::string& path) {
    int ready[2];
    if (pipe(ready) != 0) return;
    pid = fork();
    if (pid == 0) {
      ::close(ready[0]);
      if (!drop_to_nobody()) _exit(30);
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) _exit(31);
      uint32_t got = 0;  // every byte it can: those of attached processes are write-locked
      for (uint32_t b = 0; b < internal::kRegistrySlots; ++b) {
        struct flock fl{};
        fl.l_type = F_RDLCK;
        fl.l_whence = SEEK_SET;
        fl.l_start = static_cast<off_t>(internal::kLockBase + b);
        fl.l_len = 1;
        got += fcntl(fd, F_OFD_SETLK, &fl) == 0;
      }
      if (got == 0) _exit(32);
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(33);
      pause();
      _exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    if (read(ready[0], &c, 1) != 1) pid = -1;
    ::close(ready[0]);
  }
  ~ReadLocker() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      wait_status(pid);
    }
  }
};

TEST(HardeningReadOnlyUser, ReadLocksDoNotMakeADeadProcessLookAlive) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to run a second user): run it as root, as CI does";
  ImageFile img;
  CreateOptions co = img.options();
  co.mode = 0644;  // others may read it
  { Segment s = Segment::create("img", co); }
  // Registry slot 5 as a process that died left it: attached, incarnation 7, its OFD lock gone.
  seg_layout::Header h = img.peek<seg_layout::Header>(0);
  uint64_t slot5 = h.registry_offset + 5 * sizeof(seg_layout::RegistrySlot);
  img.poke<uint64_t>(slot5 + offsetof(seg_layout::RegistrySlot, incarnation), 7);
  img.poke<uint32_t>(slot5 + offsetof(seg_layout::RegistrySlot, state), seg_layout::kSlotAttached);
  const uint64_t dead = (uint64_t{7} << 16) | 5;
  Segment a = img.open();
  ASSERT_FALSE(a.token_alive(dead));
  ReadLocker locker(img.path);  // read-locks every registry byte, slot 5's included
  ASSERT_GT(locker.pid, 0) << "the read-only child could not take its read locks";
  EXPECT_FALSE(a.token_alive(dead)) << "a read lock by a read-only user made a dead process look alive";
  EXPECT_TRUE(a.token_alive(a.owner_token()));
}

TEST(HardeningReadOnlyUser, ReadLocksOnTheRegistryGetANamedErrorNotAFalseFull) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to run a second user): run it as root, as CI does";
  ImageFile img;
  CreateOptions co = img.options();
  co.mode = 0644;
  { Segment s = Segment::create("img", co); }
  ReadLocker locker(img.path);
  ASSERT_GT(locker.pid, 0);
  try {
    img.open();
    ADD_FAILURE() << "attached although every registry byte is read-locked";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBusy) << e.what();
    EXPECT_NE(std::string(e.what()).find("read-locked"), std::string::npos) << e.what();
  }
}

// ---- handles inherited across fork() -------------------------------------------------------

TEST(HardeningFork, WritersRefuseThroughHandlesInheritedAcrossFork) {
  ImageFile img;
  Segment seg = Segment::create("img", img.options());
  CuckooOptions co;
  co.capacity = 1000;
  co.seed = 9;
  Cuckoo c = Cuckoo::create(seg, "c", co);
  ExactSet e = ExactSet::create(seg, "e", ExactSetOptions{.capacity = 1000});
  ASSERT_EQ(c.insert(uint64_t{1}), CuckooStatus::kInserted);
  ASSERT_EQ(e.insert(uint64_t{1}), InsertResult::kInserted);
  // The child's writes would take the writer locks with the PARENT's token: if
  // the child died holding one, nobody could ever take it over (the parent lives).
  Outcome o = in_child([&] {
    if (c.insert(uint64_t{2}) != CuckooStatus::kDropped) return 40;
    if (c.erase(uint64_t{1})) return 41;
    if (e.insert(uint64_t{2}) != InsertResult::kDropped) return 42;
    if (e.erase(uint64_t{1})) return 43;
    if (!c.contains(uint64_t{1}) || !e.contains(uint64_t{1})) return 44;  // reads need no token
    // The child's own attachment works.
    Segment mine = img.open();
    if (Cuckoo::open(mine, "c").insert(uint64_t{3}) != CuckooStatus::kInserted) return 45;
    if (ExactSet::open(mine, "e").insert(uint64_t{3}) != InsertResult::kInserted) return 46;
    return 0;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
  EXPECT_FALSE(c.contains(uint64_t{2}));
  EXPECT_TRUE(c.contains(uint64_t{3}));
  EXPECT_EQ(c.insert(uint64_t{4}), CuckooStatus::kInserted);  // the parent's handles are unaffected
}

}  // namespace
