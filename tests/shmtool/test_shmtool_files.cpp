// tests/shmtool/test_shmtool_files.cpp: the files shmtool reads and writes (issue #23,
// docs/SECURITY.md "Save, restore and files"): a save of a 0600 segment is not readable
// by user nobody; a FIFO given as a file is refused at once (restore, advise); a bad save
// file exits 1 (bad data), never 2 (bad arguments); advise --svg is not written through a
// planted link. The library's side: tests/unit/test_snapshot_safety.cpp.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/hash.h"
#include "test_util.h"

using shmf_test::run_shmtool;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

struct TempDir {
  std::string path = "/tmp/shmf-test-toolfiles-" + std::to_string(getpid()) + "-" + unique_name("d").substr(10);
  explicit TempDir(mode_t mode = 0700) {
    ::mkdir(path.c_str(), 0700);
    ::chmod(path.c_str(), mode);
  }
  ~TempDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
};

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary | std::ios::trunc) << b; }

// Re-seals a save file's checksums after an edit (docs/save-restore.md, file format).
void reseal(std::string& b) {
  auto rd32 = [&](size_t at) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(b[at + i]);
    return v;
  };
  auto rd64 = [&](size_t at) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(b[at + i]);
    return v;
  };
  auto wr64 = [&](size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
  };
  wr64(56, shmfilter::internal::hash_bytes(b.data(), 56, 0));
  size_t p = 64 + rd32(28);
  for (uint32_t i = 0, n = rd32(24); i < n; ++i) {
    const size_t start = p;
    p += 24 + rd32(p + 12) + rd64(p + 16);
    wr64(p, shmfilter::internal::hash_bytes(b.data() + start, p - start, 0));
    p += 8;
  }
  wr64(b.size() - 8, shmfilter::internal::hash_bytes(b.data(), b.size() - 24, 0));
}

}  // namespace

TEST(ShmtoolFiles, ASaveOfA0600SegmentIsNotReadableByOthers) {
  ASSERT_EQ(geteuid(), 0u) << "runs as root (CI does): nobody must not read root's save";
  SegmentGuard src(unique_name("tf-src")), dst(unique_name("tf-dst"));
  TempDir d(0755);
  ASSERT_EQ(run_shmtool({"create", src.name}).exit_code, 0);  // mode 0600
  ASSERT_EQ(run_shmtool({"set", "create", src.name, "ids", "--capacity", "1000"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"set", "add", src.name, "ids"}, "4242\n").exit_code, 0);
  const std::string f = d.path + "/ids.save";
  auto r = run_shmtool({"save", src.name, f});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st{};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // User nobody cannot restore it (and so read its ids): the open fails.
  r = run_shmtool({"restore", f, dst.name}, "", 65534);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
  EXPECT_FALSE(shmfilter::Segment::exists(dst.name));
}

TEST(ShmtoolFiles, AFifoGivenAsAFileIsRefusedAtOnce) {
  TempDir d;
  const std::string fifo = d.path + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  SegmentGuard dst(unique_name("tf-fifo"));
  for (std::vector<std::string> args : {std::vector<std::string>{"restore", fifo, dst.name},
                                        std::vector<std::string>{"advise", fifo}}) {
    auto pending = std::async(std::launch::async, [&] { return run_shmtool(args); });
    // A hang guard only (the old code waited in open() for a writer forever): if it has not
    // returned, a writer opens and closes the FIFO so the test ends, failing.
    const bool returned = pending.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    if (!returned) ::close(::open(fifo.c_str(), O_WRONLY));
    auto r = pending.get();
    EXPECT_TRUE(returned) << args[0] << " FIFO waited for a writer";
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
  }
}

TEST(ShmtoolFiles, ABadSaveFileExitsOneNotTwo) {
  SegmentGuard src(unique_name("tf-src")), dst(unique_name("tf-bad"));
  TempDir d;
  ASSERT_EQ(run_shmtool({"create", src.name}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"hll", "create", src.name, "ab"}).exit_code, 0);
  const std::string f = d.path + "/a.save";
  ASSERT_EQ(run_shmtool({"save", src.name, f}).exit_code, 0);
  std::string b = slurp(f);
  const size_t name_at = 64 + src.name.size() + 24;
  ASSERT_EQ(b.substr(name_at, 2), "ab");
  b[name_at + 1] = '\0';  // a structure name the library refuses as an argument (kInvalidArgument)
  reseal(b);
  spit(f, b);
  auto r = run_shmtool({"restore", f, dst.name});
  EXPECT_EQ(r.exit_code, 1) << "bad data in the file is exit 1 (docs/shmtool.md): " << r.err;
  EXPECT_NE(r.err.find(f), std::string::npos) << r.err;
  EXPECT_FALSE(shmfilter::Segment::exists(dst.name));
}

TEST(ShmtoolFiles, AdviseSvgIsNotWrittenThroughAPlantedLink) {
  TempDir d;
  const std::string victim = d.path + "/victim", svg = d.path + "/out.svg";
  spit(victim, "precious");
  ASSERT_EQ(::symlink(victim.c_str(), svg.c_str()), 0);
  std::string ids;
  for (int i = 0; i < 200; ++i) ids += std::to_string(i * 7919) + "\n";
  auto r = run_shmtool({"advise", "--svg", svg}, ids);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(slurp(victim) == "precious") << "written through the link";
  struct stat st{};
  ASSERT_EQ(::lstat(svg.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_NE(slurp(svg).find("<svg"), std::string::npos);
}
