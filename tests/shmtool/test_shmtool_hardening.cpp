// tests/shmtool/test_shmtool_hardening.cpp: shmtool's smaller defects of
// issue 12, run as the real program: remove refuses what is not a segment,
// `drop` exists, extra arguments are errors, output that cannot be written is
// exit 1, a directory is not an input file, a rejected line is quoted cut,
// --directory and --mode ranges are the library's, and a capacity beyond the
// segment's maximum size is one exit code (1) for every kind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "shmfilter/segment.hpp"
#include "test_util.h"

using shmf_test::run_shmtool;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs shmtool with its stdout on /dev/full (every write fails with ENOSPC); returns the exit code.
int exit_code_with_stdout_full(const std::vector<std::string>& args) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int full = ::open("/dev/full", O_WRONLY);
    int null = ::open("/dev/null", O_WRONLY);
    if (full < 0 || null < 0) _exit(125);
    dup2(full, 1);
    dup2(null, 2);
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    std::string tool = SHMTOOL_PATH;
    argv.push_back(tool.data());
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(tool.c_str(), argv.data());
    _exit(127);
  }
  int status = shmf_test::wait_status(pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ShmtoolHardening, RemoveRefusesAFileThatIsNotASegment) {
  std::string path = "/tmp/" + unique_name("notes") + ".txt";
  {
    FILE* f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("my notes, not a segment\n", f);
    fclose(f);
  }
  auto r = run_shmtool({"remove", "x", "--file", path});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "not a shmfilter segment")) << r.err;
  EXPECT_EQ(access(path.c_str(), F_OK), 0) << "shmtool remove deleted a text file";
  ::unlink(path.c_str());
}

TEST(ShmtoolHardening, DropCommandExistsAndDropsEveryKind) {
  SegmentGuard g(unique_name("drop"));
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "8MiB"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"bloom", "create", g.name, "b", "--capacity", "1000"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"roaring", "create", g.name, "r"}).exit_code, 0);
  auto r = run_shmtool({"drop", g.name, "b"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_shmtool({"drop", g.name, "r"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_shmtool({"drop", g.name, "b"});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // gone
  r = run_shmtool({"check", g.name});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;  // nothing leaked
}

TEST(ShmtoolHardening, ExtraPositionalArgumentsAreRejected) {
  SegmentGuard g(unique_name("extra"));
  ASSERT_EQ(run_shmtool({"create", g.name}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"hll", "create", g.name, "h1"}).exit_code, 0);
  auto r = run_shmtool({"hll", "export", g.name, "h1", "OUT", "extra"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "unexpected argument")) << r.err;
  r = run_shmtool({"list", g.name, "extra"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_shmtool({"hll", "count", g.name, "h1", "h1"});  // NAME... takes any number
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(ShmtoolHardening, OutputThatCannotBeWrittenExits1) {
  SegmentGuard g(unique_name("full"));
  ASSERT_EQ(run_shmtool({"create", g.name}).exit_code, 0);
  EXPECT_EQ(exit_code_with_stdout_full({"list", g.name}), 1);
  EXPECT_EQ(exit_code_with_stdout_full({"dump", g.name, "--json"}), 1);
}

TEST(ShmtoolHardening, RoaringImportOfADirectoryIsAnError) {
  SegmentGuard g(unique_name("imp"));
  ASSERT_EQ(run_shmtool({"create", g.name}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"roaring", "create", g.name, "r"}).exit_code, 0);
  auto r = run_shmtool({"roaring", "import", g.name, "r", "/tmp"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.err, "directory")) << r.err;
}

TEST(ShmtoolHardening, ARejectedInputLineIsQuotedCut) {
  SegmentGuard g(unique_name("cut"));
  ASSERT_EQ(run_shmtool({"create", g.name}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"roaring", "create", g.name, "r"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"set", "create", g.name, "s", "--capacity", "100"}).exit_code, 0);
  const std::string huge(3u << 20, '9');  // a 3 MB "id"
  auto r = run_shmtool({"roaring", "add", g.name, "r", "-", "--strict"}, huge + "\n");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.err.size(), 1000u) << "the rejected line was echoed in full (" << r.err.size() << " bytes)";
  r = run_shmtool({"set", "add", g.name, "s", "--keys", "hex"}, std::string(3u << 20, 'f') + "\n");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.err.size(), 1000u) << "the rejected key was echoed in full (" << r.err.size() << " bytes)";
}

TEST(ShmtoolHardening, DirectoryAndModeRangesAreTheLibrarys) {
  SegmentGuard g(unique_name("rng"));
  auto r = run_shmtool({"create", g.name, "--directory", "4194305"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "4194304")) << r.err;
  r = run_shmtool({"create", "--help"});
  EXPECT_TRUE(has(r.out, "4194304")) << r.out;
  EXPECT_FALSE(has(r.out, "16777216")) << r.out;
  r = run_shmtool({"create", g.name, "--mode", "01777"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "0777")) << r.err;
  EXPECT_FALSE(shmfilter::Segment::exists(g.name));
}

TEST(ShmtoolHardening, ACapacityBeyondTheMaximumSizeIsExit1ForEveryKind) {
  SegmentGuard g(unique_name("cap"));
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "1MiB", "--max-size", "16MiB"}).exit_code, 0);
  for (const char* kind : {"bloom", "cuckoo", "set"}) {
    auto r = run_shmtool({kind, "create", g.name, std::string("big-") + kind, "--capacity", "100M"});
    EXPECT_EQ(r.exit_code, 1) << kind << ": " << r.err;
  }
}

}  // namespace
