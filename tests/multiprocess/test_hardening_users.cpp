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
#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/metrics.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/snapshot.hpp"
#include "shmfilter/window.hpp"
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

// The lock file of the segment at PATH (version 2: PATH.lock-<16 hex of Header::lock_id>).
std::string lock_file_of(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  internal::Header h{};
  if (fd < 0 || pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) h.lock_id = 0;
  if (fd >= 0) ::close(fd);
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.lock_id));
  return path + ".lock-" + hex;
}

// A read-only user read-locks every registry byte it can of a 0644 segment,
// on the segment file and, if it can open it, on the lock file too.
struct ReadLocker {
  pid_t pid = -1;
  bool opened_lock_file = false;  // the attack's way in: must stay false for a version 2 segment
  explicit ReadLocker(const std::string& path) {
    const std::string lock_path = lock_file_of(path);
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
      int lfd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (lfd >= 0) {
        c = 2;
        for (uint32_t b = 0; b < internal::kRegistrySlots; ++b) {
          struct flock fl{};
          fl.l_type = F_RDLCK;
          fl.l_whence = SEEK_SET;
          fl.l_start = static_cast<off_t>(internal::kLockBase + b);
          fl.l_len = 1;
          (void)fcntl(lfd, F_OFD_SETLK, &fl);
        }
      }
      if (write(ready[1], &c, 1) != 1) _exit(33);
      pause();
      _exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    if (read(ready[0], &c, 1) != 1) pid = -1;
    opened_lock_file = c == 2;
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

// The attack of issue 12: read-locking every registry byte blocked new
// attaches. The registry's locks now live on the lock file, which a user who
// cannot write the segment cannot open: attaching still works, and a process
// that is then SIGKILLed leaves a slot the next attacher reclaims.
TEST(HardeningReadOnlyUser, ReadLocksCannotBlockAttachOnAVersion2Segment) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to run a second user): run it as root, as CI does";
  ImageFile img;
  CreateOptions co = img.options();
  co.mode = 0644;  // others may read it
  { Segment s = Segment::create("img", co); }
  struct stat lst{};
  ASSERT_EQ(::stat(lock_file_of(img.path).c_str(), &lst), 0) << "no lock file next to " << img.path;
  EXPECT_EQ(lst.st_mode & 0777, 0600u) << "the lock file grants access to a class that cannot write the segment";
  ReadLocker locker(img.path);
  ASSERT_GT(locker.pid, 0) << "the read-only child could not take its read locks on the segment file";
  EXPECT_FALSE(locker.opened_lock_file) << "a user with read access only opened the lock file";
  Segment a = img.open();  // kBusy before: every registry byte was read-locked
  EXPECT_TRUE(a.token_alive(a.owner_token()));
  // Liveness still comes from the kernel: a SIGKILLed attacher's slot is dead and reclaimed.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    ::close(ready[0]);
    uint64_t tok = 0;
    Segment mine;
    try {
      mine = img.open();
      tok = mine.owner_token();
    } catch (...) {
      _exit(40);
    }
    if (write(ready[1], &tok, sizeof tok) != static_cast<ssize_t>(sizeof tok)) _exit(41);
    pause();
    _exit(0);
  }
  ::close(ready[1]);
  uint64_t child_token = 0;
  ASSERT_EQ(read(ready[0], &child_token, sizeof child_token), static_cast<ssize_t>(sizeof child_token))
      << "the attaching child failed (exit " << wait_status(child) << ")";
  ::close(ready[0]);
  EXPECT_TRUE(a.token_alive(child_token));
  kill(child, SIGKILL);
  wait_status(child);
  EXPECT_FALSE(a.token_alive(child_token)) << "a SIGKILLed process still looks alive";
  a.check(true);  // frees its slot
  Segment b = img.open();
  EXPECT_TRUE(b.token_alive(b.owner_token()));
}

// A segment of format version 1 (before the lock file) still opens; its
// locks are on the segment file, so the read-lock attack still gets the
// named kBusy of before (docs/SECURITY.md: recreate such segments).
TEST(HardeningReadOnlyUser, AVersion1SegmentStillOpensAndReadLocksGetANamedError) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to run a second user): run it as root, as CI does";
  ImageFile img;
  CreateOptions co = img.options();
  co.mode = 0644;
  { Segment s = Segment::create("img", co); }
  const std::string lock_path = lock_file_of(img.path);
  img.poke<uint32_t>(offsetof(seg_layout::Header, version), seg_layout::kFormatVersionLegacyLocks);
  img.poke<uint64_t>(offsetof(seg_layout::Header, lock_id), 0);
  img.poke<uint64_t>(offsetof(seg_layout::Header, lock_id_check), 0);
  ASSERT_EQ(::unlink(lock_path.c_str()), 0);
  { Segment s = img.open(); EXPECT_TRUE(s.token_alive(s.owner_token())); }
  struct stat st{};
  EXPECT_NE(::stat(lock_path.c_str(), &st), 0) << "a version 1 segment got a lock file";
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

// The lock file is validated like the segment.
TEST(HardeningTrust, TheLockFileIsValidatedLikeTheSegment) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to give a file to another user): run it as root, as CI does";
  ImageFile img;
  CreateOptions co = img.options();
  co.mode = 0644;
  { Segment s = Segment::create("img", co); }
  const std::string lock_path = lock_file_of(img.path);
  // Missing (a copied segment, a restore renamed into place): the first writer creates it, 0600.
  ASSERT_EQ(::unlink(lock_path.c_str()), 0);
  { Segment s = img.open(); }
  struct stat st{};
  ASSERT_EQ(::stat(lock_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Too open and ours: narrowed. Too open and another user's: refused.
  ASSERT_EQ(chmod(lock_path.c_str(), 0644), 0);
  { Segment s = img.open(); }
  ASSERT_EQ(::stat(lock_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "a lock file readable by non-writers was left so";
  ASSERT_EQ(chown(lock_path.c_str(), kNobody, kNogroup), 0);
  EXPECT_EQ(code_of([&] { img.open(); }), ErrorCode::kPermission) << "a lock file of another owner was used";
  // A symlink planted in its place.
  ASSERT_EQ(::unlink(lock_path.c_str()), 0);
  ASSERT_EQ(symlink(img.path.c_str(), lock_path.c_str()), 0);
  EXPECT_EQ(code_of([&] { img.open(); }), ErrorCode::kPermission) << "a symlinked lock file was followed";
  ::unlink(lock_path.c_str());
  // A damaged lock_id never leads to another lock file.
  img.poke<uint64_t>(offsetof(seg_layout::Header, lock_id), 12345);
  EXPECT_EQ(code_of([&] { img.open(); }), ErrorCode::kCorrupt);
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
  ASSERT_EQ(c.add(uint64_t{1}), CuckooStatus::kInserted);
  ASSERT_EQ(e.insert(uint64_t{1}), InsertResult::kInserted);
  // The child's writes would take the writer locks with the PARENT's token: if
  // the child died holding one, nobody could ever take it over (the parent lives).
  Outcome o = in_child([&] {
    if (c.add(uint64_t{2}) != CuckooStatus::kForked) return 40;
    if (c.erase(uint64_t{1})) return 41;
    if (e.insert(uint64_t{2}) != InsertResult::kForked) return 42;
    if (e.erase(uint64_t{1})) return 43;
    if (!c.contains(uint64_t{1}) || !e.contains(uint64_t{1})) return 44;  // reads need no token
    // The child's own attachment works.
    Segment mine = img.open();
    if (Cuckoo::open(mine, "c").add(uint64_t{3}) != CuckooStatus::kInserted) return 45;
    if (ExactSet::open(mine, "e").insert(uint64_t{3}) != InsertResult::kInserted) return 46;
    return 0;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
  EXPECT_FALSE(c.contains(uint64_t{2}));
  EXPECT_TRUE(c.contains(uint64_t{3}));
  EXPECT_EQ(c.add(uint64_t{4}), CuckooStatus::kInserted);  // the parent's handles are unaffected
}

TEST(HardeningFork, DeletableWindowWritersRefuseThroughHandlesInheritedAcrossFork) {
  ImageFile img;
  Segment seg = Segment::create("img", img.options());
  WindowOptions wo;
  wo.variant = WindowVariant::kCuckoo;
  wo.expected_per_bucket = 1000;
  wo.seed = 9;
  Window w = Window::create(seg, "w", wo);
  w.set_now(1764547200);
  ASSERT_EQ(w.mark_if_unseen(7, uint64_t{1}, 7), WindowStatus::kNew);
  // The child's marks would take a day table's writer lock with no token of its own: two
  // racing children could then both answer kNew for one pair.
  Outcome o = in_child([&] {
    if (w.mark_if_unseen(7, uint64_t{2}, 7) != WindowStatus::kForked) return 40;
    if (w.mark(7, uint64_t{3}) != WindowStatus::kForked) return 41;
    if (w.forget(7, uint64_t{1}) != WindowStatus::kForked) return 42;
    if (!w.seen(7, uint64_t{1}, 7)) return 43;  // reads need no token
    Segment mine = img.open();
    Window own = Window::open(mine, "w");
    own.set_now(1764547200);
    if (own.mark_if_unseen(7, uint64_t{4}, 7) != WindowStatus::kNew) return 44;
    return 0;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
  EXPECT_FALSE(w.seen(7, uint64_t{2}, 7));
  EXPECT_FALSE(w.seen(7, uint64_t{3}, 7));
  EXPECT_TRUE(w.seen(7, uint64_t{1}, 7));  // the child's forget removed nothing
  EXPECT_TRUE(w.seen(7, uint64_t{4}, 7));
  EXPECT_EQ(w.mark_if_unseen(7, uint64_t{5}, 7), WindowStatus::kNew);  // the parent's handle is unaffected
}

}  // namespace

// Sharing with a group after creation (chgrp + chmod 0660, docs/nginx.md): the
// owner's next open re-syncs the lock file, and a group member then attaches
// read-write; before that re-sync it gets a named error, never a silent one.
TEST(HardeningTrust, AGroupWriterAttachesOnceTheOwnerResyncsTheLockFile) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to run a second user): run it as root, as CI does";
  ImageFile img;
  { Segment s = Segment::create("img", img.options()); }  // 0600, root's group
  ASSERT_EQ(chown(img.path.c_str(), static_cast<uid_t>(-1), kNogroup), 0);
  ASSERT_EQ(chmod(img.path.c_str(), 0660), 0);
  auto member_attaches = [&] {
    Outcome o = in_child([&]() -> int {
      if (!drop_to_nobody()) return 30;  // uid nobody, gid nogroup: a member of the segment's group
      try {
        Segment s = img.open();
        return s.token_alive(s.owner_token()) ? 0 : 31;
      } catch (const Error& e) {
        return e.code() == ErrorCode::kPermission ? 40 : 41;
      }
    });
    return o.hung ? -1 : WIFEXITED(o.status) ? WEXITSTATUS(o.status) : -2;
  };
  EXPECT_EQ(member_attaches(), 40) << "before the re-sync: a named kPermission on the lock file";
  { Segment s = img.open(); }  // the owner (root) re-syncs it
  struct stat st{};
  ASSERT_EQ(::stat(lock_file_of(img.path).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, kNogroup);
  EXPECT_EQ(member_attaches(), 0) << "a member of the segment's group could not attach read-write";
}

// ---- read-only inspection (OpenOptions::read_only) -------------------------------------------

// A user with read permission only inspects a root segment: lookups, stats,
// list and check work; every write is refused by name (kReadOnly, or the
// handle's "not done" status); nothing the user does changes the segment.
TEST(HardeningReadOnlyUser, AReaderInspectsThroughAReadOnlyAttachmentAndCannotWrite) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to run a second user): run it as root, as CI does";
  ImageFile img;
  CreateOptions co = img.options();
  co.mode = 0644;
  Segment root = Segment::create("img", co);
  ExactSetOptions eo;
  eo.capacity = 1000;
  ExactSet set = ExactSet::create(root, "set", eo);
  ASSERT_EQ(set.insert(uint64_t{7}), InsertResult::kInserted);
  CuckooOptions cko;
  cko.capacity = 1000;
  Cuckoo ck = Cuckoo::create(root, "ck", cko);
  ASSERT_EQ(ck.add(uint64_t{7}), CuckooStatus::kInserted);
  BloomOptions bo;
  bo.capacity = 1000;
  Bloom bloom = Bloom::create(root, "bloom", bo);
  ASSERT_TRUE(bloom.add(uint64_t{7}));
  Hll hll = Hll::create(root, "hll");
  hll.add(uint64_t{7});
  const uint64_t serial_before = img.peek<uint64_t>(offsetof(seg_layout::Header, txn_serial));
  Outcome o = in_child([&]() -> int {
   try {
    if (!drop_to_nobody()) return 30;
    if (code_of([&] { img.open(); }) != ErrorCode::kPermission) return 31;  // read-write: refused by the kernel
    OpenOptions ro = img.open_options();
    ro.read_only = true;
    Segment s = Segment::open("img", ro);
    if (!s.read_only() || s.owner_token() != 0) return 32;
    if (s.list().size() != 4 || s.stats().structures != 4) return 33;
    Bloom rb = Bloom::open(s, "bloom");
    if (!rb.contains(uint64_t{7}) || rb.add(uint64_t{8}) || code_of([&] { rb.clear(); }) != ErrorCode::kReadOnly) return 42;
    Hll rh = Hll::open(s, "hll");
    if (rh.count() != 1 || rh.add(uint64_t{8}) || rh.add_many(std::vector<uint64_t>{9, 10}) != 0) return 43;
    ExactSet rs = ExactSet::open(s, "set");
    if (!rs.contains(uint64_t{7}) || rs.contains(uint64_t{8}) || rs.size() != 1) return 34;
    if (rs.insert(uint64_t{8}) != InsertResult::kReadOnly || rs.erase(uint64_t{7})) return 35;
    Cuckoo rc = Cuckoo::open(s, "ck");
    if (!rc.contains(uint64_t{7}) || rc.add(uint64_t{9}) != CuckooStatus::kReadOnly || rc.erase(uint64_t{7})) return 36;
    if (code_of([&] { s.create_region("x", Kind::kBlob, 64, [](std::byte*, uint64_t, ControlTxn&) {}); }) !=
        ErrorCode::kReadOnly)
      return 37;
    if (code_of([&] { ExactSet::drop(s, "set"); }) != ErrorCode::kReadOnly) return 38;
    if (code_of([&] { s.resize(8ull << 20); }) != ErrorCode::kReadOnly) return 39;
    CheckReport r = s.check(false);
    if (!r.consistent()) return 40;
    if (code_of([&] { s.check(true); }) != ErrorCode::kReadOnly) return 41;
    return 0;
   } catch (const Error& e) {
    fprintf(stderr, "read-only child: %s\n", e.what());
    return 50;
   }
  });
  EXPECT_TRUE(o.ok()) << o.describe() << " (exit codes: see the child's returns above)";
  EXPECT_TRUE(set.contains(uint64_t{7}));
  EXPECT_FALSE(set.contains(uint64_t{8})) << "a read-only attachment inserted a key";
  EXPECT_TRUE(ck.contains(uint64_t{7}));
  EXPECT_FALSE(bloom.contains(uint64_t{8})) << "a read-only attachment set bits";
  EXPECT_EQ(hll.count(), 1u);
  EXPECT_EQ(img.peek<uint64_t>(offsetof(seg_layout::Header, txn_serial)), serial_before)
      << "a read-only attachment ran a control-plane transaction";
  for (const ProcessInfo& p : root.processes()) EXPECT_EQ(p.pid, getpid()) << "the reader took a registry slot";
}

// Roaring and window reads write the segment (a pinned snapshot, a rotation),
// and a save takes writer locks: through a read-only attachment each is one
// named kReadOnly, and listing a segment that holds them still works (the
// entry carries the error). This crashed (a PROT_READ store) before.
TEST(HardeningReadOnlyUser, KindsWhoseReadsWriteAndSaveAreRefusedByNameNotByACrash) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to run a second user): run it as root, as CI does";
  ImageFile img;
  CreateOptions co = img.options();
  co.mode = 0644;
  Segment root = Segment::create("img", co);
  RoaringSet rs = RoaringSet::create(root, "r");
  ASSERT_EQ(rs.add(uint32_t{5}), RoaringStatus::kOk);
  WindowOptions wo;
  wo.expected_per_bucket = 1000;
  wo.seed = 3;
  Window::create(root, "w", wo);
  CuckooOptions cko;
  cko.capacity = 1000;
  Cuckoo ck = Cuckoo::create(root, "ck", cko);
  ASSERT_EQ(ck.add(uint64_t{7}), CuckooStatus::kInserted);
  const uint64_t serial_before = img.peek<uint64_t>(offsetof(seg_layout::Header, txn_serial));
  Outcome o = in_child([&]() -> int {
   try {
    if (!drop_to_nobody()) return 30;
    OpenOptions ro = img.open_options();
    ro.read_only = true;
    Segment s = Segment::open("img", ro);
    if (code_of([&] { RoaringSet::open(s, "r"); }) != ErrorCode::kReadOnly) return 31;
    if (code_of([&] { Window::open(s, "w"); }) != ErrorCode::kReadOnly) return 32;
    if (code_of([&] { save(s, "/tmp/shmf-test-ro-save-" + std::to_string(getpid())); }) != ErrorCode::kReadOnly)
      return 33;
    std::vector<StructureMetrics> m = structure_metrics(s);
    if (m.size() != 3) return 34;
    for (const StructureMetrics& e : m) {
      const bool refused = e.region.kind == Kind::kRoaring || e.region.kind == Kind::kWindow;
      if (refused != (e.error.find("read-only") != std::string::npos)) return 35;
    }
    if (prometheus_text(s).find("shmfilter_structure_error") == std::string::npos) return 36;
    if (!Cuckoo::open(s, "ck").contains(uint64_t{7})) return 37;
    return 0;
   } catch (const Error& e) {
    fprintf(stderr, "read-only child: %s\n", e.what());
    return 50;
   }
  });
  EXPECT_TRUE(o.ok()) << o.describe() << " (exit codes: see the child's returns above)";
  EXPECT_TRUE(rs.contains(uint32_t{5}));
  EXPECT_EQ(img.peek<uint64_t>(offsetof(seg_layout::Header, txn_serial)), serial_before)
      << "a read-only attachment ran a control-plane transaction";
}
