// tests/multiprocess/test_hardening_segment.cpp: the segment layer's half of
// issue 12 (undo log, control mutex, registry tokens, directory). The helpers
// are the same as tests/multiprocess/test_hardening.cpp's. Each test builds a real file-backed
// segment, closes it, writes the corruption into the file's bytes the way a
// flipped disk block, a `cp` of a live segment or a hostile local user would,
// and then runs the operation that used to crash or hang IN A FORKED CHILD
// with a wall bound: the child must end normally (a named shmfilter::Error is
// the right answer), never by a signal, never by the bound. The bound is a
// hang detector, not a speed test: every operation here returns in
// milliseconds once fixed.
#include <fcntl.h>
#include <sys/file.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "base/wait_stats.h"
#include "segment/layout.h"
#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/error.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"
#include "structures/bloom/bloom_impl.h"
#include "structures/cuckoo/cuckoo_impl.h"
#include "structures/exact_set/exact_set_impl.h"
#include "structures/roaring/roaring_impl.h"
#include "corrupt_image.h"
#include "test_util.h"

using namespace shmfilter;
namespace bl = shmfilter::internal::bloom;
namespace ck = shmfilter::internal::cuckoo;
namespace rs = shmfilter::internal::roaring;
namespace es = shmfilter::internal::exact_set;

using namespace shmf_test;

namespace {

// ---- undo-log replay ---------------------------------------------------------------------

TEST(HardeningUndo, ReplayOfAnEntryPastTheFileIsRefusedNotFollowed) {
  ImageFile img;
  { Segment s = Segment::create("img", img.options(4ull << 30)); }
  seg_layout::Header h = img.peek<seg_layout::Header>(0);
  seg_layout::UndoEntry e{};
  e.offset = 1ull << 30;  // inside max_size (4 GiB), far past the file (~700 KiB)
  e.width = 8;
  e.old = 0x1234;
  img.poke(h.undo_offset, e);
  img.poke<uint64_t>(offsetof(seg_layout::Header, undo_count), 1);
  img.fake_reboot();
  Outcome o = in_child([&] {
    Segment s = img.open();
    (void)s.list();
    (void)s.check(false);
    return 0;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

TEST(HardeningUndo, ReplayCannotRewriteTheValidatedHeaderSize) {
  ImageFile img;
  { Segment s = Segment::create("img", img.options(4ull << 30)); }
  seg_layout::Header h = img.peek<seg_layout::Header>(0);
  seg_layout::UndoEntry e{};
  e.offset = offsetof(seg_layout::Header, size);
  e.width = 8;
  e.old = 4ull << 30;  // "restores" size to max_size: 4 GiB of a ~700 KiB file
  img.poke(h.undo_offset, e);
  img.poke<uint64_t>(offsetof(seg_layout::Header, undo_count), 1);
  img.fake_reboot();
  const uint64_t file = img.file_size();
  Outcome o = in_child([&] {
    Segment s = img.open();
    if (s.size() > file) return 3;  // the header now claims bytes the file does not have
    Bloom::create(s, "b", BloomOptions{.capacity = 1000});
    (void)s.check(true);
    return 0;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

void build_cuckoo(const ImageFile& img) {
  Segment s = Segment::create("img", img.options());
  CuckooOptions o;
  o.capacity = 1000;
  o.fingerprint_bits = 12;
  o.seed = 5;
  Cuckoo c = Cuckoo::create(s, "c", o);
  for (uint64_t k = 0; k < 200; ++k) c.add(k);
}

TEST(HardeningAllocator, AMisalignedTopIsCorruptNotAllocatedFrom) {
  // Found by fuzz_segment: top + 8 passed open(); the next allocation then
  // wrote a misaligned extent header (UBSan) and handed out misaligned memory.
  ImageFile img;
  { Segment s = Segment::create("img", img.options()); }
  uint64_t top = img.peek<uint64_t>(offsetof(seg_layout::Header, top));
  img.poke<uint64_t>(offsetof(seg_layout::Header, top), top + 8);
  Outcome o = in_child([&] {
    Segment s = img.open();  // refused with kCorrupt (a named error ends the child cleanly)
    Bloom::create(s, "b", BloomOptions{.capacity = 100});
    return 16;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
  EXPECT_EQ(shmf_test::code_of([&] { img.open(); }), ErrorCode::kCorrupt);
}

// ---- lock words holding the next attachment's token --------------------------------------

TEST(HardeningCuckoo, ALockWordEqualToTheNextTokenDoesNotHangWriters) {
  ImageFile img;
  build_cuckoo(img);
  uint64_t off = region_offset(img, "c");
  // The token the next attachment would get: slot 0, incarnation + 1.
  seg_layout::Header sh = img.peek<seg_layout::Header>(0);
  uint64_t inc = img.peek<uint64_t>(sh.registry_offset + offsetof(seg_layout::RegistrySlot, incarnation));
  img.poke<uint64_t>(off + offsetof(ck::Header, lock_owner), ((inc + 1) << 16) | 0);
  Outcome o = in_child([&] {
    Segment s = img.open();
    Cuckoo c = Cuckoo::open(s, "c");
    return c.add(uint64_t{987654321}) == CuckooStatus::kInserted ? 0 : 12;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

TEST(HardeningExactSet, ALockWordEqualToTheNextTokenDoesNotHangWriters) {
  ImageFile img;
  {
    Segment s = Segment::create("img", img.options());
    ExactSet e = ExactSet::create(s, "e", ExactSetOptions{.capacity = 1000});
    for (uint64_t k = 1; k < 100; ++k) e.insert(k);
  }
  uint64_t off = region_offset(img, "e");
  es::ExactSetHeader eh = img.peek<es::ExactSetHeader>(off);
  seg_layout::Header sh = img.peek<seg_layout::Header>(0);
  uint64_t inc = img.peek<uint64_t>(sh.registry_offset + offsetof(seg_layout::RegistrySlot, incarnation));
  for (uint32_t i = 0; i < eh.stripes; ++i)
    img.poke<uint64_t>(off + eh.stripes_offset + i * sizeof(es::ExactSetStripe), ((inc + 1) << 16) | 0);
  Outcome o = in_child([&] {
    Segment s = img.open();
    ExactSet e = ExactSet::open(s, "e");
    return e.insert(uint64_t{424242}) == InsertResult::kInserted ? 0 : 14;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

// ---- the control mutex's bytes ------------------------------------------------------------------

// glibc x86-64 pthread_mutex_t: __lock @0, __count @4, __owner @8, __nusers @12, __kind @16.
constexpr uint64_t kMutexLock = 0, kMutexOwner = 8, kMutexKind = 16;
constexpr int kPrioInheritBit = 32;  // PTHREAD_MUTEX_PRIO_INHERIT_NP

TEST(HardeningMutex, APriorityInheritanceKindBitIsNotTrusted) {
  ImageFile img;
  { Segment s = Segment::create("img", img.options()); }
  uint64_t m = offsetof(seg_layout::Header, mutex);
  img.poke<int>(m + kMutexKind, img.peek<int>(m + kMutexKind) | kPrioInheritBit);
  // Nobody attached: the first opener re-initialises the lock.
  Outcome o = in_child([&] {
    Segment s = img.open();
    Bloom::create(s, "b", BloomOptions{.capacity = 100});  // takes the control lock
    return 0;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
  // Someone attached (this process): the lock is not re-initialised under a
  // possible holder; control-plane calls fail with a named error, never abort.
  Segment keep = img.open();
  img.poke<int>(m + kMutexKind, img.peek<int>(m + kMutexKind) | kPrioInheritBit);
  Outcome o2 = in_child([&] {
    Segment s = img.open();
    Bloom::create(s, "b2", BloomOptions{.capacity = 100});
    return 0;
  });
  EXPECT_TRUE(o2.ok()) << o2.describe();
  EXPECT_EQ(shmf_test::code_of([&] { Bloom::create(keep, "b3", BloomOptions{.capacity = 100}); }), ErrorCode::kCorrupt);
}

TEST(HardeningMutex, AStaleOwnerThreadWithNobodyAttachedIsReinitialised) {
  ImageFile img;
  { Segment s = Segment::create("img", img.options()); }
  // A dead thread id, as a `cp` of a segment taken mid-transaction leaves it.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  shmf_test::wait_status(dead);
  uint64_t m = offsetof(seg_layout::Header, mutex);
  img.poke<int>(m + kMutexLock, static_cast<int>(dead));
  img.poke<int>(m + kMutexOwner, static_cast<int>(dead));
  Outcome o = in_child([&] {
    Segment s = img.open();
    // Must not sit out the control lock's 30 s bound: that ends in kBusy (exit 12 here, not
    // a clean refusal) and counts an expired wait (exit 13). No wall-clock bound needed.
    const uint64_t expired = shmfilter::internal::wait_snapshot().expired;
    try {
      Bloom::create(s, "b", BloomOptions{.capacity = 100});
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kBusy) return 12;
      throw;
    }
    return shmfilter::internal::wait_snapshot().expired == expired ? 0 : 13;
  });
  EXPECT_TRUE(o.ok()) << o.describe();
}

// ---- directory entries ---------------------------------------------------------------------------

TEST(HardeningDirectory, CheckReportsEntriesOfUnknownKind) {
  ImageFile img;
  {
    Segment s = Segment::create("img", img.options());
    Bloom::create(s, "b", BloomOptions{.capacity = 100});
  }
  uint32_t slot = img.open().find("b")->slot;
  seg_layout::Header h = img.peek<seg_layout::Header>(0);
  img.poke<uint32_t>(h.directory_offset + slot * sizeof(seg_layout::DirEntry) + offsetof(seg_layout::DirEntry, kind), 99);
  Segment s = img.open();
  EXPECT_FALSE(s.check(false).consistent());
}

// ---- leftovers of a creator killed before it linked its segment ----------------------------

TEST(HardeningCreate, LeftoverCreatingFilesOfDeadCreatorsAreRemovedOnTheNextCreate) {
  ImageFile img;
  const std::string dead = img.path + ".creating.dead01";
  const std::string live = img.path + ".creating.live01";
  for (const auto& p : {dead, live}) {
    int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "partial", 7), 7);
    ::close(fd);
  }
  // A creator that is still alive holds flock on its file.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t holder = fork();
  if (holder == 0) {
    int fd = ::open(live.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) _exit(1);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  { Segment s = Segment::create("img", img.options()); }
  EXPECT_NE(access(dead.c_str(), F_OK), 0) << "a dead creator's leftover survived the next create";
  EXPECT_EQ(access(live.c_str(), F_OK), 0) << "a live creator's file was removed";
  kill(holder, SIGKILL);
  wait_status(holder);
  ::unlink(live.c_str());
  ::unlink(dead.c_str());
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace

// ---- leftovers of dead creators and restores (check, check --repair) -------------------------

namespace {
bool has_finding(const CheckReport& r, const std::string& path, bool repaired) {
  for (const auto& f : r.findings)
    if (f.where == "leftover " + path && f.repaired == repaired) return true;
  return false;
}
bool exists_path(const std::string& p) {
  struct stat st{};
  return ::lstat(p.c_str(), &st) == 0;
}
}  // namespace

// NAME.creating.* (a creator killed before linking), NAME.restoring-PID (a
// restore killed before its rename) and lock files of no segment: check
// reports them, --repair removes them, and a live creator's files stay.
TEST(HardeningLeftovers, CheckFindsAndRepairRemovesOnlyDeadCreatorsLeftovers) {
  ImageFile img;
  Segment seg = Segment::create("img", img.options());
  // Dead: nobody holds flock / no lock in the lock file.
  const std::string creating_dead = img.path + ".creating.dead01";
  int fd = ::open(creating_dead.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string restoring_dead = img.path + ".restoring-99999999";
  { CreateOptions o = img.options(); o.file = restoring_dead; Segment::create("img", o); }
  const std::string orphan_lock = img.path + ".lock-0123456789abcdef";
  fd = ::open(orphan_lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  // Live: a creator holding flock, a restorer still attached.
  const std::string creating_live = img.path + ".creating.live01";
  int live_fd = ::open(creating_live.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(live_fd, 0);
  ASSERT_EQ(flock(live_fd, LOCK_EX | LOCK_NB), 0);
  const std::string restoring_live = img.path + ".restoring-" + std::to_string(getpid());
  CreateOptions lo = img.options();
  lo.file = restoring_live;
  Segment live_restore = Segment::create("img", lo);

  CheckReport r = seg.check(false);
  EXPECT_TRUE(has_finding(r, creating_dead, false));
  EXPECT_TRUE(has_finding(r, restoring_dead, false));
  EXPECT_TRUE(has_finding(r, orphan_lock, false));
  EXPECT_FALSE(has_finding(r, creating_live, false)) << "a live creator's file was reported";
  EXPECT_FALSE(has_finding(r, restoring_live, false)) << "a live restore was reported";
  EXPECT_FALSE(r.consistent());
  EXPECT_TRUE(exists_path(creating_dead)) << "check without --repair removed a file";

  r = seg.check(true);
  EXPECT_TRUE(has_finding(r, creating_dead, true));
  EXPECT_TRUE(has_finding(r, restoring_dead, true));
  EXPECT_TRUE(r.consistent());
  EXPECT_FALSE(exists_path(creating_dead));
  EXPECT_FALSE(exists_path(restoring_dead));
  EXPECT_EQ(remove_lock_files(restoring_dead), 0) << "the dead restore's lock file was left";
  EXPECT_FALSE(exists_path(orphan_lock));
  EXPECT_TRUE(exists_path(creating_live));
  EXPECT_TRUE(exists_path(restoring_live));
  EXPECT_TRUE(seg.check(false).consistent());  // the segment's own lock file is not a leftover
  ::close(live_fd);
  ::unlink(creating_live.c_str());
  live_restore = Segment();
  ::unlink(restoring_live.c_str());
  remove_lock_files(restoring_live);
}
