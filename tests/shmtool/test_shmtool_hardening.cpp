// tests/shmtool/test_shmtool_hardening.cpp: shmtool's smaller defects of
// issue 12, run as the real program: remove refuses what is not a segment,
// `drop` exists, extra arguments are errors, output that cannot be written is
// exit 1, a directory is not an input file, a rejected line is quoted cut,
// --directory and --mode ranges are the library's, and a capacity beyond the
// segment's maximum size is one exit code (1) for every kind.
#include <dirent.h>
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
using shmf_test::remove_lock_files;

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

// ---- read-only inspection and --trust-owner (issue 12) ------------------------------------------

// A user who may only read a segment inspects it with shmtool: read-only is
// chosen by itself; anything that writes fails naming "read-only".
TEST(ShmtoolHardening, AReaderInspectsReadOnlyAndEveryWriteSaysReadOnly) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to run a second user): run it as root, as CI does";
  SegmentGuard g(unique_name("ro"));
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "8MiB", "--mode", "0644"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"bloom", "create", g.name, "b", "--capacity", "1000"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"bloom", "add", g.name, "b", "k1"}).exit_code, 0);
  constexpr int kNobody = 65534;
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"list", g.name}, {"dump", g.name}, {"stats", g.name}, {"check", g.name},
        {"bloom", "info", g.name, "b"}}) {
    shmf_test::ToolResult r = run_shmtool(cmd, "", kNobody);
    EXPECT_EQ(r.exit_code, 0) << cmd[0] << " as a reader: " << r.err;
  }
  shmf_test::ToolResult r = run_shmtool({"bloom", "check", g.name, "b", "k1", "k2"}, "", kNobody);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("k1"), std::string::npos) << r.out;
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"bloom", "add", g.name, "b", "k2"}, {"check", g.name, "--repair"},
        {"bloom", "create", g.name, "b2", "--capacity", "10"}, {"drop", g.name, "b"}}) {
    r = run_shmtool(cmd, "", kNobody);
    EXPECT_NE(r.exit_code, 0) << cmd[0] << " " << cmd[1] << " wrote through a read-only attachment";
    EXPECT_NE(r.err.find("read-only"), std::string::npos) << r.err;
  }
  // --read-only by hand, as the owner: the same refusals.
  r = run_shmtool({"list", g.name, "--read-only"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_shmtool({"bloom", "add", g.name, "b", "k3", "--read-only"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("read-only"), std::string::npos) << r.err;
  r = run_shmtool({"bloom", "check", g.name, "b", "k2", "k3"});
  EXPECT_EQ(r.out.find("k2: present"), std::string::npos) << "a read-only shmtool added a key: " << r.out;
}

// Another user's segment is attached only with --trust-owner UID.
TEST(ShmtoolHardening, TrustOwnerAttachesAnotherUsersSegment) {
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (to give a file to another user): run it as root, as CI does";
  SegmentGuard g(unique_name("trust"));
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "8MiB"}).exit_code, 0);
  ASSERT_EQ(chown(("/dev/shm/" + g.name).c_str(), 65534, 65534), 0);
  shmf_test::ToolResult r = run_shmtool({"list", g.name});
  EXPECT_NE(r.exit_code, 0) << "root attached a segment that another user owns";
  EXPECT_NE(r.err.find("--trust-owner 65534"), std::string::npos) << r.err;
  r = run_shmtool({"list", g.name, "--trust-owner", "65534"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_shmtool({"list", g.name, "--trust-owner", "nobody"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not a uid"), std::string::npos) << r.err;
  r = run_shmtool({"list", "--help"});
  EXPECT_NE(r.out.find("--trust-owner UID"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--read-only"), std::string::npos) << r.out;
}

// A restore SIGKILLed midway (kill point segment.create.after_link: its
// NAME.restoring-PID segment is linked, the rename never happens) leaves a
// leftover that `check` reports and `check --repair` removes with its lock file.
TEST(ShmtoolHardening, AKilledRestoreLeavesALeftoverThatCheckRepairRemoves) {
  SegmentGuard g(unique_name("rst"));
  const std::string save = "/tmp/" + g.name + ".save";
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "8MiB"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"bloom", "create", g.name, "b", "--capacity", "1000"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"save", g.name, save}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"remove", g.name}).exit_code, 0);
  setenv("SHMF_KILL_POINT", "segment.create.after_link", 1);
  shmf_test::ToolResult r = run_shmtool({"restore", save, g.name});
  unsetenv("SHMF_KILL_POINT");
  ::unlink(save.c_str());
  ASSERT_EQ(r.exit_code, 128 + SIGKILL) << "the restore was not killed at segment.create.after_link: " << r.err;
  std::string leftover;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind(g.name + ".restoring-", 0) == 0 && n.find(".lock-") == std::string::npos) leftover = "/dev/shm/" + n;
    }
    closedir(d);
  }
  ASSERT_FALSE(leftover.empty()) << "the killed restore left no NAME.restoring-PID";
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "8MiB"}).exit_code, 0);
  r = run_shmtool({"check", g.name});
  EXPECT_EQ(r.exit_code, 1) << "check did not report the leftover: " << r.out;
  EXPECT_NE((r.out + r.err).find(leftover), std::string::npos) << r.out << r.err;
  r = run_shmtool({"check", g.name, "--repair"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(::access(leftover.c_str(), F_OK), 0) << "check --repair left " << leftover;
  EXPECT_EQ(remove_lock_files(leftover), 0) << "check --repair left the leftover's lock file";
  EXPECT_EQ(run_shmtool({"check", g.name}).exit_code, 0);
  ::unlink(leftover.c_str());
}
