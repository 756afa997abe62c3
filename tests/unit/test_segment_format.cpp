// tests/unit/test_segment_format.cpp: opening bad segments gives a specific error
// naming the file, never a crash or a misread. The bad files are generated
// here from a good segment (no binary test data in the repository).
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <random>

#include "base/hash.h"
#include "base/wait_stats.h"
#include "segment/layout.h"
#include "shmfilter/segment.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

CreateOptions small_options() { return shmf_test::small_options(2ull << 20, 64ull << 20, 16); }

std::string shm_path(const std::string& name) { return "/dev/shm/" + name; }

void write_file(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
}

// Patches `len` bytes at `offset` of the named segment's file.
void patch(const std::string& name, size_t offset, const void* bytes, size_t len) {
  int fd = ::open(shm_path(name).c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, bytes, len, static_cast<off_t>(offset)), static_cast<ssize_t>(len));
  close(fd);
}

// Opens and returns the error (kOk if it opened), checking that the message
// names the segment.
ErrorCode open_error(const std::string& name, std::string* message = nullptr) {
  try {
    Segment::open(name);
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(name), std::string::npos) << "message must name the segment: " << m;
    if (message) *message = m;
    return e.code();
  }
  return ErrorCode::kOk;
}

void make_good(const std::string& name) {
  Segment s = Segment::create(name, small_options());
  s.create_region("x", Kind::kBlob, 1000, {});
}

}  // namespace

TEST(SegmentFormat, RandomBytesAreNotASegment) {
  SegmentGuard g(unique_name("rand"));
  std::mt19937_64 rng(42);
  std::string bytes(64 << 10, '\0');
  for (auto& c : bytes) c = static_cast<char>(rng());
  write_file(shm_path(g.name), bytes);
  std::string msg;
  EXPECT_EQ(open_error(g.name, &msg), ErrorCode::kNotASegment);
  EXPECT_NE(msg.find("not a shmfilter segment"), std::string::npos) << msg;
}

TEST(SegmentFormat, ShortGarbageIsNotASegment) {
  SegmentGuard g(unique_name("short"));
  write_file(shm_path(g.name), "abc");
  EXPECT_EQ(open_error(g.name), ErrorCode::kNotASegment);
}

TEST(SegmentFormat, EmptyFileIsNotASegment) {
  SegmentGuard g(unique_name("empty"));
  write_file(shm_path(g.name), "");
  std::string msg;
  EXPECT_EQ(open_error(g.name, &msg), ErrorCode::kNotASegment);
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
}

TEST(SegmentFormat, TruncatedSegment) {
  SegmentGuard g(unique_name("trunc"));
  make_good(g.name);
  ASSERT_EQ(truncate(shm_path(g.name).c_str(), 1 << 20), 0);  // header says 2 MiB
  std::string msg;
  EXPECT_EQ(open_error(g.name, &msg), ErrorCode::kTruncated);
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  // Cut inside the header too.
  ASSERT_EQ(truncate(shm_path(g.name).c_str(), 100), 0);
  EXPECT_EQ(open_error(g.name), ErrorCode::kTruncated);
}

TEST(SegmentFormat, OtherVersion) {
  SegmentGuard g(unique_name("ver"));
  make_good(g.name);
  uint32_t v = 99;
  patch(g.name, offsetof(internal::Header, version), &v, sizeof v);
  std::string msg;
  EXPECT_EQ(open_error(g.name, &msg), ErrorCode::kVersionMismatch);
  EXPECT_NE(msg.find("99"), std::string::npos) << msg;
}

TEST(SegmentFormat, OtherAbi) {
  SegmentGuard g(unique_name("abi"));
  make_good(g.name);
  uint32_t dir_entry_size = 96;  // as if another build had a smaller DirEntry
  patch(g.name, offsetof(internal::Header, abi) + offsetof(internal::AbiDescriptor, dir_entry_size), &dir_entry_size,
        sizeof dir_entry_size);
  std::string msg;
  EXPECT_EQ(open_error(g.name, &msg), ErrorCode::kAbiMismatch);
  EXPECT_NE(msg.find("dir_entry_size"), std::string::npos) << msg;
}

TEST(SegmentFormat, ForeignByteOrder) {
  SegmentGuard g(unique_name("bswap"));
  make_good(g.name);
  uint64_t m = __builtin_bswap64(internal::kMagic);
  patch(g.name, 0, &m, sizeof m);
  EXPECT_EQ(open_error(g.name), ErrorCode::kForeignByteOrder);
}

TEST(SegmentFormat, CorruptOffsetsAndSizes) {
  struct Case {
    size_t offset;
    uint64_t value;
    int width;
  };
  const Case cases[] = {
      {offsetof(internal::Header, directory_offset), 1ull << 50, 8},
      {offsetof(internal::Header, data_offset), 12345, 8},
      {offsetof(internal::Header, directory_capacity), 1000, 4},  // not a power of two
      {offsetof(internal::Header, max_size), 1ull << 60, 8},
      {offsetof(internal::Header, size), 1ull << 40, 8},           // beyond max_size
      {offsetof(internal::Header, top), 1ull << 33, 8},            // beyond size
      {offsetof(internal::Header, free_count), 1u << 30, 4},
  };
  for (const Case& c : cases) {
    SegmentGuard g(unique_name("corrupt"));
    make_good(g.name);
    patch(g.name, c.offset, &c.value, c.width);
    EXPECT_EQ(open_error(g.name), ErrorCode::kCorrupt) << "field at " << c.offset;
  }
}

// Open descriptors of this process (/proc/self/fd, less opendir's own).
static int open_fds() {
  int n = -3;  // ".", ".." and the directory's own descriptor
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

// A refused open closes what it opened: before, every refusal after the open(2) (a corrupt
// header, a foreign segment) leaked the segment's descriptor, so a long-lived process that
// probes segments (a sidecar, shmtool in a loop, the fuzzer) ran out of descriptors.
TEST(SegmentFormat, RefusedOpensCloseTheirDescriptors) {
  SegmentGuard corrupt(unique_name("fdcorrupt")), foreign(unique_name("fdbswap")), garbage(unique_name("fdrand"));
  make_good(corrupt.name);
  const uint64_t bad = 1ull << 50;
  patch(corrupt.name, offsetof(internal::Header, directory_offset), &bad, 8);
  make_good(foreign.name);
  const uint64_t m = __builtin_bswap64(internal::kMagic);
  patch(foreign.name, 0, &m, sizeof m);
  write_file(shm_path(garbage.name), std::string(8192, 'x'));
  const int before = open_fds();
  ASSERT_GE(before, 0);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(open_error(corrupt.name), ErrorCode::kCorrupt);
    EXPECT_EQ(open_error(foreign.name), ErrorCode::kForeignByteOrder);
    EXPECT_EQ(open_error(garbage.name), ErrorCode::kNotASegment);
  }
  EXPECT_EQ(open_fds(), before) << "descriptors leaked by 150 refused opens";
}

TEST(SegmentFormat, NotARegularFileAndMissing) {
  std::string dir = "/tmp/" + unique_name("dir");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  OpenOptions oo;
  oo.file = dir;
  try {
    Segment::open("d", oo);
    ADD_FAILURE() << "opened a directory";
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == ErrorCode::kNotASegment || e.code() == ErrorCode::kIo) << e.what();
  }
  rmdir(dir.c_str());
  EXPECT_EQ(open_error(unique_name("missing")), ErrorCode::kNotFound);
}

// A live entry whose offset points outside the segment is never followed.
TEST(SegmentFormat, DirectoryEntryOutsideIsNotFollowed) {
  SegmentGuard g(unique_name("dirbad"));
  make_good(g.name);
  Segment s = Segment::open(g.name);
  RegionInfo r = *s.find("x");
  auto* e = reinterpret_cast<internal::DirEntry*>(s.base() + reinterpret_cast<internal::Header*>(s.base())->directory_offset) + r.slot;
  e->offset = 1ull << 45;
  EXPECT_FALSE(s.find("x").has_value());
  EXPECT_TRUE(s.list().empty());
  EXPECT_FALSE(s.check().consistent());
}

// The layout is the on-disk format: pin it (changing any of these bumps the version).
TEST(SegmentFormat, LayoutIsPinned) {
  using namespace internal;
  EXPECT_EQ(kMagic, 0x31544c49464d4853ull);
  char bytes[8];
  std::memcpy(bytes, &kMagic, 8);
  EXPECT_EQ(std::string(bytes, 8), "SHMFILT1");
  EXPECT_EQ(sizeof(DirEntry), 128u);
  EXPECT_EQ(sizeof(RegistrySlot), 64u);
  EXPECT_EQ(sizeof(ExtentHeader), 64u);
  EXPECT_EQ(sizeof(UndoEntry), 32u);
  EXPECT_EQ(sizeof(Header), 576u);
  EXPECT_EQ(offsetof(Header, global_epoch), 512u);
  EXPECT_EQ(offsetof(Header, version), 8u);
  EXPECT_EQ(offsetof(Header, abi), 16u);
  EXPECT_EQ(offsetof(Header, size), 256u);
  EXPECT_EQ(offsetof(Header, mutex), 320u);
  EXPECT_EQ(kFormatVersion, 2u);  // 2: the lock file (Header::lock_id); 1 is still read
  EXPECT_EQ(kFormatVersionLegacyLocks, 1u);
  EXPECT_EQ(offsetof(Header, lock_id), 200u);
  EXPECT_EQ(offsetof(Header, lock_id_check), 208u);
}

// File-backed segment from a previous boot: its mutex may be "held" by a
// thread that no longer exists. The first attacher of the new boot
// re-initialises it (and rolls back any leftover undo log).
TEST(SegmentFormat, StaleMutexFromPreviousBootIsReinitialised) {
  std::string path = "/tmp/" + unique_name("boot") + ".seg";
  CreateOptions o = small_options();
  o.file = path;
  OpenOptions oo;
  oo.file = path;
  {
    Segment s = Segment::create("boot", o);
    s.create_region("kept", Kind::kBlob, 64, {});
  }
  {
    // Forge the state a reboot leaves: the mutex owned by a thread id of the
    // old boot (glibc: __data.__lock holds the owner tid) and another boot id.
    int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    internal::Header h;
    ASSERT_EQ(pread(fd, &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
    h.mutex.__data.__lock = 999999;
    h.mutex.__data.__owner = 999999;
    std::memset(h.boot_id, 0, sizeof h.boot_id);
    std::strcpy(h.boot_id, "00000000-0000-0000-0000-000000000000");
    ASSERT_EQ(pwrite(fd, &h, sizeof h, 0), static_cast<ssize_t>(sizeof h));
    close(fd);
  }
  // The old boot's owner is no thread of this boot: the open re-initialises the lock. Waiting
  // on it instead would sit out the lock's 30 s bound, count an expired wait and throw kBusy
  // (checked without a wall clock).
  const uint64_t expired = internal::wait_snapshot().expired;
  Segment s = Segment::open("boot", oo);
  EXPECT_NO_THROW(s.create_region("after-reboot", Kind::kBlob, 64, {}));
  EXPECT_EQ(internal::wait_snapshot().expired, expired) << "the open waited on the old boot's lock owner";
  EXPECT_TRUE(s.find("kept").has_value());
  EXPECT_TRUE(s.check().consistent());
  Segment::remove("boot", oo);
}

// The directory hash is part of the format: a name lands in the same slot in
// every build.
TEST(SegmentFormat, DirectoryHashIsPinned) {
  EXPECT_EQ(internal::hash_key(std::string_view("freq:1:2026-11-30"), internal::kDirectorySeed), 0x24a2d23f3f07eb94ull);
  SegmentGuard g(unique_name("dirhash"));
  Segment s = Segment::create(g.name, small_options());
  RegionInfo r = s.create_region("freq:1:2026-11-30", Kind::kBlob, 8, {});
  EXPECT_EQ(r.slot, 0x24a2d23f3f07eb94ull & 15u);  // 16-entry directory, empty: the home slot
}

// A corrupted allocator table entry is never followed: allocation skips it,
// check reports it, --repair removes it, the second run is clean.
TEST(SegmentFormat, CorruptFreeTableEntryIsSkippedAndRepaired) {
  SegmentGuard g(unique_name("ftab"));
  Segment s = Segment::create(g.name, small_options());
  auto* h = reinterpret_cast<internal::Header*>(s.base());
  auto* f = reinterpret_cast<internal::FreeExtent*>(s.base() + h->free_offset);
  f[0].offset = 1ull << 45;
  f[0].size = 1ull << 20;
  h->free_count = 1;
  uint64_t off = 0;
  s.transact([&](ControlTxn& txn) { off = txn.allocate(4096); });
  EXPECT_LT(off, s.size());
  std::memset(s.base() + off, 1, 4096);
  EXPECT_FALSE(s.check(false).consistent());
  EXPECT_TRUE(s.check(true).consistent());
  EXPECT_TRUE(s.check(false).findings.empty());
}

// check() re-validates the header of a segment already open.
TEST(SegmentFormat, CheckSeesHeaderDamageAfterOpen) {
  SegmentGuard g(unique_name("hdmg"));
  make_good(g.name);
  Segment s = Segment::open(g.name);
  EXPECT_TRUE(s.check().findings.empty());
  auto* h = reinterpret_cast<internal::Header*>(s.base());
  h->free_offset += 64;
  CheckReport r = s.check(true);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].where, "header");
  EXPECT_FALSE(r.consistent());
  h->free_offset -= 64;
  EXPECT_TRUE(s.check().findings.empty());
}
