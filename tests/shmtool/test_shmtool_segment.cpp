// tests/shmtool/test_shmtool_segment.cpp: shmtool's segment commands (create, list,
// dump, resize, remove, check) run as a real program: output, --json
// validity, exit codes 0/1/2, and that failed commands leave nothing behind.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"
#include "test_util.h"

using shmf_test::run_shmtool;
using shmf_test::SegmentGuard;
using shmf_test::ToolResult;
using shmf_test::unique_name;

namespace {

// ---- a minimal JSON validator (RFC 8259 grammar, no semantic checks) ----
class JsonChecker {
 public:
  explicit JsonChecker(const std::string& s) : s_(s) {}
  bool valid() {
    ws();
    if (!value()) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  bool value() {
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return string();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    return literal("true") || literal("false") || literal("null");
  }
  bool object() {
    ++i_;
    ws();
    if (peek('}')) return ++i_, true;
    while (true) {
      ws();
      if (!string()) return false;
      ws();
      if (!peek(':')) return false;
      ++i_;
      ws();
      if (!value()) return false;
      ws();
      if (peek('}')) return ++i_, true;
      if (!peek(',')) return false;
      ++i_;
    }
  }
  bool array() {
    ++i_;
    ws();
    if (peek(']')) return ++i_, true;
    while (true) {
      ws();
      if (!value()) return false;
      ws();
      if (peek(']')) return ++i_, true;
      if (!peek(',')) return false;
      ++i_;
    }
  }
  bool string() {
    if (!peek('"')) return false;
    for (++i_; i_ < s_.size(); ++i_) {
      unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') return ++i_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++i_ >= s_.size()) return false;
        char e = s_[i_];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k)
            if (++i_ >= s_.size() || !isxdigit(static_cast<unsigned char>(s_[i_]))) return false;
        } else if (!strchr("\"\\/bfnrt", e)) {
          return false;
        }
      }
    }
    return false;
  }
  bool number() {
    size_t start = i_;
    if (peek('-')) ++i_;
    if (!digits()) return false;
    if (peek('.')) {
      ++i_;
      if (!digits()) return false;
    }
    if (peek('e') || peek('E')) {
      ++i_;
      if (peek('+') || peek('-')) ++i_;
      if (!digits()) return false;
    }
    return i_ > start;
  }
  bool digits() {
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > start;
  }
  bool literal(const char* w) {
    size_t n = strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  bool peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  const std::string& s_;
  size_t i_ = 0;
};

bool valid_json(const std::string& s) { return JsonChecker(s).valid(); }

TEST(JsonCheckerSelfTest, AcceptsValidRejectsInvalid) {
  EXPECT_TRUE(valid_json(R"({"a":1,"b":[true,false,null,-1.5e3,"x\"y"],"c":{}})"));
  EXPECT_TRUE(valid_json("{}\n"));
  EXPECT_FALSE(valid_json(R"({"a":1,})"));
  EXPECT_FALSE(valid_json(R"({"a" 1})"));
  EXPECT_FALSE(valid_json(R"({"a":01x})"));
  EXPECT_FALSE(valid_json("a: 1"));
}

size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (c == '\n');
  return n;
}

// A failed command prints exactly one line on stderr, naming `what`.
void expect_one_line_error(const ToolResult& r, int code, const std::string& what) {
  EXPECT_EQ(r.exit_code, code) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << "stderr should name '" << what << "': " << r.err;
}

bool shm_exists(const std::string& name) {
  struct stat st;
  return stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

const std::vector<std::string> kCommands = {"create", "list", "dump", "resize", "remove", "check"};

// ---- help -------------------------------------------------------------------

TEST(ShmtoolSegment, OverviewListsEverySegmentCommand) {
  auto r = run_shmtool({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const auto& c : kCommands) EXPECT_NE(r.out.find("  " + c + " "), std::string::npos) << c << "\n" << r.out;
  auto none = run_shmtool({});
  EXPECT_EQ(none.exit_code, 2);
}

TEST(ShmtoolSegment, EveryCommandHelpTeachesWhatOptionsAndExample) {
  for (const auto& c : kCommands) {
    auto r = run_shmtool({c, "--help"});
    EXPECT_EQ(r.exit_code, 0) << c;
    EXPECT_EQ(r.out.rfind("Usage: shmtool " + c + " NAME", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("--file PATH"), std::string::npos) << c;
    EXPECT_NE(r.out.find("Example:\n  "), std::string::npos) << c;
    EXPECT_NE(r.out.find("shmtool " + c + " ", r.out.find("Example:")), std::string::npos) << "example uses it: " << c;
    EXPECT_GT(count_lines(r.out), 8u) << c;
    auto h = run_shmtool({"help", c});
    EXPECT_EQ(h.exit_code, 0) << c;
    EXPECT_EQ(h.out, r.out) << c;
  }
  auto create = run_shmtool({"create", "--help"}).out;
  for (const char* opt : {"--size", "--max-size", "--directory", "--mode", "--group"})
    EXPECT_NE(create.find(opt), std::string::npos) << opt;
}

// Every command in the overview (segment and structure commands) is written the
// same way: its help has Usage, Options (with --file) and an example of itself,
// and an option that is not in its Options table is refused (exit 2, naming it).
TEST(ShmtoolSegment, EveryCommandHasOneHelpShapeAndRefusesUnlistedOptions) {
  auto overview = run_shmtool({"--help"}).out;
  std::vector<std::vector<std::string>> commands;
  std::regex row("\n  ([a-z]+)( [a-z-]+)? +[^\n]*");
  for (auto it = std::sregex_iterator(overview.begin(), overview.end(), row); it != std::sregex_iterator(); ++it) {
    std::vector<std::string> words{(*it)[1].str()};
    if ((*it)[2].matched) words.push_back((*it)[2].str().substr(1));
    commands.push_back(words);
  }
  EXPECT_GE(commands.size(), 35u) << overview;
  for (const auto& words : commands) {
    std::string full = words[0] + (words.size() > 1 ? " " + words[1] : "");
    SCOPED_TRACE(full);
    auto args = words;
    args.push_back("--help");
    auto h = run_shmtool(args);
    EXPECT_EQ(h.exit_code, 0);
    EXPECT_EQ(h.out.rfind("Usage: shmtool " + full + " ", 0), 0u) << h.out;
    EXPECT_NE(h.out.find("\nOptions:\n"), std::string::npos) << h.out;
    EXPECT_NE(h.out.find("  --file PATH  "), std::string::npos) << h.out;
    EXPECT_NE(h.out.find("shmtool " + full + " ", h.out.find("\nExample:\n  ")), std::string::npos) << h.out;
    args.back() = "--not-an-option";
    expect_one_line_error(run_shmtool(args), 2, "--not-an-option");
  }
}

// ---- create / list / dump / remove ------------------------------------------------

TEST(ShmtoolSegment, CreateListDumpRemove) {
  const std::string name = unique_name("tool");
  SegmentGuard guard(name);
  auto c = run_shmtool({"create", name, "--size", "8MiB", "--max-size", "1GiB", "--directory", "128"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  // A report: aligned "label  value" lines, sizes for people.
  EXPECT_EQ(c.out.rfind("segment             " + name + "\n", 0), 0u) << c.out;
  EXPECT_TRUE(std::regex_search(c.out, std::regex("\nsize +8\\.00 MiB\nmax_size +1\\.00 GiB\n"))) << c.out;
  EXPECT_NE(c.out.find("\ndirectory_capacity  128\n"), std::string::npos) << c.out;
  EXPECT_TRUE(shm_exists(name));
  {
    struct stat st;
    ASSERT_EQ(stat(("/dev/shm/" + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u) << "segments are private by default";
  }
  {
    auto seg = shmfilter::Segment::open(name);
    EXPECT_EQ(seg.stats().directory_capacity, 128u);
    EXPECT_GE(seg.size(), 8u << 20);
    EXPECT_EQ(seg.stats().max_size, 1ull << 30);
    seg.create_region("blob-one", shmfilter::Kind::kBlob, 10000, [](std::byte*, uint64_t, shmfilter::ControlTxn&) {});
  }

  auto l = run_shmtool({"list", name});
  ASSERT_EQ(l.exit_code, 0) << l.err;
  EXPECT_NE(l.out.find("blob-one"), std::string::npos) << l.out;
  EXPECT_NE(l.out.find("blob"), std::string::npos) << l.out;
  EXPECT_NE(l.out.find("1 of 128 structures"), std::string::npos) << l.out;

  auto lj = run_shmtool({"list", name, "--json"});
  ASSERT_EQ(lj.exit_code, 0) << lj.err;
  EXPECT_TRUE(valid_json(lj.out)) << lj.out;
  EXPECT_NE(lj.out.find(R"("name":"blob-one","kind":"blob")"), std::string::npos) << lj.out;
  EXPECT_NE(lj.out.find(R"("structures":1)"), std::string::npos) << lj.out;

  auto d = run_shmtool({"dump", name});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  for (const char* part : {"format version", "allocator", "fragmentation", "processes", "(this shmtool)",
                           "directory (1 structures)", "'blob-one' blob"})
    EXPECT_NE(d.out.find(part), std::string::npos) << part << "\n" << d.out;

  auto dj = run_shmtool({"dump", name, "--json"});
  ASSERT_EQ(dj.exit_code, 0) << dj.err;
  EXPECT_TRUE(valid_json(dj.out)) << dj.out;
  for (const char* part : {R"("header":{)", R"("allocator":{)", R"("directory":[{)", R"("processes":[{)",
                           R"("self":true)", R"("max_size":1073741824)"})
    EXPECT_NE(dj.out.find(part), std::string::npos) << part << "\n" << dj.out;

  auto rm = run_shmtool({"remove", name});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_FALSE(shm_exists(name));
  EXPECT_FALSE(shmfilter::Segment::exists(name));
  expect_one_line_error(run_shmtool({"remove", name}), 1, name);
}

TEST(ShmtoolSegment, EmptySegmentListsNoStructures) {
  const std::string name = unique_name("empty");
  SegmentGuard guard(name);
  auto c = run_shmtool({"create", name, "--size", "4M", "--json"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_TRUE(valid_json(c.out)) << c.out;
  EXPECT_NE(c.out.find(R"("size":4194304,)"), std::string::npos) << "--json sizes are bytes: " << c.out;
  EXPECT_NE(c.out.find(R"("mode":"0600")"), std::string::npos) << c.out;
  auto l = run_shmtool({"list", name});
  EXPECT_EQ(l.exit_code, 0);
  EXPECT_NE(l.out.find("(no structures)"), std::string::npos) << l.out;
  auto lj = run_shmtool({"list", name, "--json"});
  EXPECT_TRUE(valid_json(lj.out)) << lj.out;
  EXPECT_NE(lj.out.find(R"("items":[])"), std::string::npos) << lj.out;
}

TEST(ShmtoolSegment, ModeAndGroup) {
  const std::string name = unique_name("mode");
  SegmentGuard guard(name);
  ASSERT_EQ(run_shmtool({"create", name, "--size", "4MiB", "--mode", "0640", "--group", std::to_string(getgid())})
                .exit_code,
            0);
  struct stat st;
  ASSERT_EQ(stat(("/dev/shm/" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_gid, getgid());
}

TEST(ShmtoolSegment, CreateExistingFailsAndKeepsTheOriginal) {
  const std::string name = unique_name("dup");
  SegmentGuard guard(name);
  ASSERT_EQ(run_shmtool({"create", name, "--size", "4MiB"}).exit_code, 0);
  {
    auto seg = shmfilter::Segment::open(name);
    seg.create_region("keep-me", shmfilter::Kind::kBlob, 64, [](std::byte*, uint64_t, shmfilter::ControlTxn&) {});
  }
  expect_one_line_error(run_shmtool({"create", name, "--size", "8MiB"}), 1, name);
  auto seg = shmfilter::Segment::open(name);
  EXPECT_TRUE(seg.find("keep-me").has_value()) << "a failed create must not touch the existing segment";
}

// ---- exit codes --------------------------------------------------------------------

TEST(ShmtoolSegment, BadArgumentsExit2WithOneLineAndCreateNothing) {
  const std::string name = unique_name("bad");
  SegmentGuard guard(name);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"create"}, "missing segment NAME"},
      {{"create", name, "--size", "banana"}, "--size"},
      {{"create", name, "--size", "0"}, "--size"},
      {{"create", name, "--size", "1GiB", "--max-size", "1MiB"}, "--max-size"},
      {{"create", name, "--directory", "0"}, "--directory"},
      {{"create", name, "--directory", "12x"}, "--directory"},
      {{"create", name, "--mode", "0999"}, "--mode"},
      {{"create", name, "--group", "no-such-group-shmf"}, "--group"},
      {{"create", name, "--bogus", "1"}, "--bogus"},
      {{"create", name, "extra"}, "extra"},
      {{"create", name, "--size"}, "--size"},
      {{"create", std::string(300, 'n')}, "name"},
      {{"list"}, "missing segment NAME"},
      {{"list", name, "--size", "1"}, "--size"},
      {{"dump"}, "missing segment NAME"},
      {{"dump", name, "--repair"}, "--repair"},
      {{"resize", name}, "--size"},
      {{"resize", name, "--size", "lots"}, "--size"},
      {{"remove"}, "missing segment NAME"},
      {{"check"}, "missing segment NAME"},
      {{"check", name, "--wat"}, "--wat"},
      {{"no-such-command"}, "no-such-command"},
  };
  for (const auto& [args, what] : cases) {
    SCOPED_TRACE(testing::PrintToString(args));
    expect_one_line_error(run_shmtool(args), 2, what);
    EXPECT_FALSE(shm_exists(name)) << "a rejected command must create nothing";
  }
}

TEST(ShmtoolSegment, MissingSegmentExit1NamingIt) {
  const std::string name = unique_name("missing");
  SegmentGuard guard(name);
  for (const auto& c : kCommands) {
    if (c == "create") continue;
    std::vector<std::string> args = {c, name};
    if (c == "resize") args.insert(args.end(), {"--size", "8MiB"});
    SCOPED_TRACE(c);
    expect_one_line_error(run_shmtool(args), 1, name);
    EXPECT_FALSE(shm_exists(name)) << "looking at a missing segment must not create it";
  }
}

TEST(ShmtoolSegment, BadSegmentsExit1NamingThem) {
  // Random bytes, an empty object and a truncated header: each is refused with
  // a one-line error naming the segment, never a crash.
  const std::string name = unique_name("garbage");
  SegmentGuard guard(name);
  auto write_shm = [&](const std::string& bytes) {
    int fd = open(("/dev/shm/" + name).c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    close(fd);
  };
  std::string random(65536, '\0');
  uint64_t x = 12345;
  for (auto& ch : random) ch = static_cast<char>((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 56);
  for (const std::string& content : {random, std::string(), std::string(40, 'S')}) {
    write_shm(content);
    for (const auto& c : {"list", "dump", "check"}) {
      SCOPED_TRACE(std::string(c) + " on " + std::to_string(content.size()) + " bytes");
      auto r = run_shmtool({c, name});
      expect_one_line_error(r, 1, name);
    }
  }
  unlink(("/dev/shm/" + name).c_str());  // not a segment: Segment::remove may rightly refuse it
}

// ---- resize --------------------------------------------------------------------------

TEST(ShmtoolSegment, ResizeGrowsShrinksAndRefusesPastMax) {
  const std::string name = unique_name("resize");
  SegmentGuard guard(name);
  ASSERT_EQ(run_shmtool({"create", name, "--size", "8MiB", "--max-size", "256MiB"}).exit_code, 0);
  auto g = run_shmtool({"resize", name, "--size", "32MiB"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("-> 32.00 MiB"), std::string::npos) << g.out;
  struct stat st;
  ASSERT_EQ(stat(("/dev/shm/" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 32 << 20);
  EXPECT_EQ(shmfilter::Segment::open(name).size(), 32u << 20);

  auto s = run_shmtool({"resize", name, "--size", "16MiB"});
  ASSERT_EQ(s.exit_code, 0) << "shrinking a free tail: " << s.err;
  EXPECT_EQ(shmfilter::Segment::open(name).size(), 16u << 20);

  expect_one_line_error(run_shmtool({"resize", name, "--size", "1GiB"}), 2, "--max-size");
  EXPECT_EQ(shmfilter::Segment::open(name).size(), 16u << 20);
}

// ---- check -----------------------------------------------------------------------------

TEST(ShmtoolSegment, CheckFreshSegmentIsConsistent) {
  const std::string name = unique_name("check");
  SegmentGuard guard(name);
  ASSERT_EQ(run_shmtool({"create", name, "--size", "4MiB"}).exit_code, 0);
  {
    auto seg = shmfilter::Segment::open(name);
    seg.create_region("a", shmfilter::Kind::kBlob, 4096, [](std::byte*, uint64_t, shmfilter::ControlTxn&) {});
    seg.create_region("b", shmfilter::Kind::kBlob, 4096, [](std::byte*, uint64_t, shmfilter::ControlTxn&) {});
    seg.drop("a");
  }
  auto r = run_shmtool({"check", name});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("is consistent"), std::string::npos) << r.out;
  auto j = run_shmtool({"check", name, "--repair", "--json"});
  EXPECT_EQ(j.exit_code, 0) << j.out << j.err;
  EXPECT_TRUE(valid_json(j.out)) << j.out;
  EXPECT_NE(j.out.find(R"("consistent":true)"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find(R"("problems":0)"), std::string::npos) << j.out;
}

TEST(ShmtoolSegment, CheckFindsDeadAttachmentsExit1AndRepairFixesThem) {
  // Processes SIGKILLed while attached leave their registry slots behind: check
  // reports them (exit 1), check --repair reclaims them and says so (exit 0).
  // A new attachment (each shmtool run) may itself take over the first dead
  // slot, so three are killed: every later run reuses the slot the previous
  // run freed, and at least two stay dead until --repair.
  const std::string name = unique_name("dead");
  SegmentGuard guard(name);
  ASSERT_EQ(run_shmtool({"create", name, "--size", "4MiB"}).exit_code, 0);
  constexpr int kDead = 3;
  std::vector<pid_t> children;
  for (int i = 0; i < kDead; ++i) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t child = shmf_test::fork_child([&] {
      auto seg = shmfilter::Segment::open(name);
      char c = 1;
      if (write(ready[1], &c, 1) != 1) return 1;
      pause();
      return 0;
    });
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    close(ready[0]);
    close(ready[1]);
    children.push_back(child);
  }
  for (pid_t child : children) {
    kill(child, SIGKILL);
    ASSERT_TRUE(shmf_test::killed_by(shmf_test::wait_status(child), SIGKILL));
  }

  auto d = run_shmtool({"dump", name, "--json"});
  EXPECT_TRUE(valid_json(d.out)) << d.out;
  EXPECT_NE(d.out.find(R"("alive":false)"), std::string::npos) << "killed processes show as dead: " << d.out;

  auto r = run_shmtool({"check", name});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("PROBLEM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("died without detaching"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--repair"), std::string::npos) << "says how to fix it: " << r.out;
  auto rj = run_shmtool({"check", name, "--json"});
  EXPECT_EQ(rj.exit_code, 1);
  EXPECT_TRUE(valid_json(rj.out)) << rj.out;
  EXPECT_NE(rj.out.find(R"("consistent":false)"), std::string::npos) << rj.out;

  auto fix = run_shmtool({"check", name, "--repair"});
  EXPECT_EQ(fix.exit_code, 0) << fix.out << fix.err;
  EXPECT_NE(fix.out.find("repaired registry["), std::string::npos) << fix.out;
  auto again = run_shmtool({"check", name});
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(again.out.find("PROBLEM"), std::string::npos) << again.out;
}

// ---- failed creates leave nothing --------------------------------------------------------

TEST(ShmtoolSegment, FailedCreateLeavesNothingBehind) {
  const std::string name = unique_name("nospace");
  SegmentGuard guard(name);
  // 16 TiB of backing cannot be claimed on this machine's /dev/shm: a clean
  // kNoSpace (or a refused reservation) at create time, and no object left.
  // (tmpfs checks the whole fallocate range against its limit up front.)
  auto r = run_shmtool({"create", name, "--size", "16384GiB", "--max-size", "16384GiB"});
  expect_one_line_error(r, 1, name);
  EXPECT_FALSE(shm_exists(name));
  EXPECT_FALSE(shmfilter::Segment::exists(name));
  // The name is free again: a sane create succeeds.
  EXPECT_EQ(run_shmtool({"create", name, "--size", "4MiB"}).exit_code, 0);

  // A file-backed segment whose directory does not exist.
  const std::string bad_file = "/tmp/shmf-no-such-dir-" + std::to_string(getpid()) + "/x.seg";
  auto f = run_shmtool({"create", name + "-f", "--file", bad_file});
  EXPECT_EQ(f.exit_code, 1) << f.err;
  EXPECT_EQ(count_lines(f.err), 1u) << f.err;
  struct stat st;
  EXPECT_NE(stat(bad_file.c_str(), &st), 0);
}

// ---- file-backed segments ------------------------------------------------------------------

TEST(ShmtoolSegment, FileBackedSegmentsThroughEveryCommand) {
  const std::string name = unique_name("file");
  char dir_tmpl[] = "/tmp/shmf-tool-file-XXXXXX";
  ASSERT_NE(mkdtemp(dir_tmpl), nullptr);
  const std::string file = std::string(dir_tmpl) + "/seg.shmf";
  shmfilter::OpenOptions oo;
  oo.file = file;

  auto c = run_shmtool({"create", name, "--file", file, "--size", "4MiB", "--max-size", "64MiB"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find(file), std::string::npos) << c.out;
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_GE(st.st_size, 4 << 20);
  EXPECT_FALSE(shm_exists(name)) << "--file must not create /dev/shm/NAME";

  for (const char* cmd : {"list", "dump", "check"}) {
    auto r = run_shmtool({cmd, name, "--file", file, "--json"});
    EXPECT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
    EXPECT_TRUE(valid_json(r.out)) << cmd << ": " << r.out;
  }
  auto g = run_shmtool({"resize", name, "--file", file, "--size", "8MiB"});
  EXPECT_EQ(g.exit_code, 0) << g.err;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8 << 20);

  auto rm = run_shmtool({"remove", name, "--file", file});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_NE(stat(file.c_str(), &st), 0) << "remove --file deletes the file";
  expect_one_line_error(run_shmtool({"list", name, "--file", file}), 1, name);
  try {
    shmfilter::Segment::remove(name, oo);
  } catch (...) {
  }
  std::string cleanup = std::string("rm -rf ") + dir_tmpl;
  EXPECT_EQ(system(cleanup.c_str()), 0);
}

}  // namespace

// Every structure command takes --file, so a file-backed (persistent) segment
// is as usable from the shell as a /dev/shm one.
TEST(ShmtoolSegment, StructureCommandsTakeFile) {
  const std::string name = unique_name("fileseg");
  const std::string path = "/tmp/" + name + ".seg";
  unlink(path.c_str());
  ASSERT_EQ(run_shmtool({"create", name, "--file", path, "--size", "8MiB"}).exit_code, 0);
  const std::vector<std::vector<std::string>> creates = {
      {"bloom", "create", name, "b", "--capacity", "10k", "--error", "0.01"},
      {"cuckoo", "create", name, "c", "--capacity", "1k"},
      {"roaring", "create", name, "r"},
      {"hll", "create", name, "h"},
      {"set", "create", name, "s", "--capacity", "1k"},
  };
  for (auto args : creates) {
    args.insert(args.end(), {"--file", path});
    auto r = run_shmtool(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
  }
  EXPECT_EQ(run_shmtool({"bloom", "add", name, "b", "k1", "--file", path}).exit_code, 0);
  auto check = run_shmtool({"bloom", "check", name, "b", "k1", "--file", path});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("present"), std::string::npos) << check.out;
  auto list = run_shmtool({"list", name, "--file", path});
  EXPECT_EQ(list.exit_code, 0);
  for (const char* n : {"b ", "c ", "r ", "h ", "s "}) EXPECT_NE(list.out.find(n), std::string::npos) << list.out;
  EXPECT_EQ(run_shmtool({"check", name, "--file", path}).exit_code, 0);
  // Without --file the name means /dev/shm/NAME, which does not exist.
  EXPECT_EQ(run_shmtool({"bloom", "check", name, "b", "k1"}).exit_code, 1);
  EXPECT_EQ(run_shmtool({"remove", name, "--file", path}).exit_code, 0);
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}
