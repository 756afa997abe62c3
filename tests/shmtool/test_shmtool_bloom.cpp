// tests/shmtool/test_shmtool_bloom.cpp: shmtool bloom create|add|check|info through the real binary.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "shmfilter/bloom.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::run_shmtool;

namespace {
struct ToolFixture {
  shmf_test::SegmentGuard guard;
  Segment seg;
  ToolFixture() : guard(shmf_test::unique_name("bl-tool")) {
    CreateOptions o;
    o.size = 16ull << 20;
    o.max_size = 1ull << 30;
    seg = Segment::create(guard.name, o);
  }
};
bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }
}  // namespace

TEST(BloomTool, CreateAddCheckInfo) {
  ToolFixture fx;
  const std::string& S = fx.guard.name;
  auto r = run_shmtool({"bloom", "create", S, "plan42", "--capacity", "100k", "--error", "0.01"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "blocked")) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\nk +6\n"))) << "an aligned 'k  6' line: " << r.out;
  r = run_shmtool({"bloom", "add", S, "plan42", "aaaa", "bbbb", "aaaa"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "aaaa\tadded\nbbbb\tadded\naaaa\talready present\n");
  r = run_shmtool({"bloom", "check", S, "plan42", "aaaa", "zzzz"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "aaaa\tpresent\nzzzz\tabsent\n");
  // stdin fast path: counts.
  std::string in;
  for (int i = 0; i < 20000; ++i) in += "dev" + std::to_string(i % 15000) + "\n";
  r = run_shmtool({"bloom", "add", S, "plan42"}, in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 15000 distinct (+ FPs may turn a few new keys into "already present": 1% at most)
  EXPECT_TRUE(has(r.out, "added 14") || has(r.out, "added 15000,")) << r.out;
  r = run_shmtool({"bloom", "check", S, "plan42"}, "dev1\ndev2\r\nnot-there-1\n\ndev14999\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "present 3, absent ") || has(r.out, "present 4, absent 0")) << r.out;
  r = run_shmtool({"bloom", "info", S, "plan42", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* field : {"\"layout\":\"blocked\"", "\"capacity\":100000", "\"layers\":1", "\"k\":6", "\"inserted_estimate\":",
                            "\"fill_ratio\":", "\"fp_rate_now\":", "\"memory_bytes\":", "\"bits_per_element\":",
                            "\"over_capacity\":false", "\"bits\":"})
    EXPECT_TRUE(has(r.out, field)) << field << " in " << r.out;
  r = run_shmtool({"bloom", "info", S, "plan42"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\nover_capacity +false\n"))) << "aligned text view: " << r.out;
}

TEST(BloomTool, OverCapacityShown) {
  ToolFixture fx;
  const std::string& S = fx.guard.name;
  ASSERT_EQ(run_shmtool({"bloom", "create", S, "small", "--capacity", "1000", "--layout", "classic"}).exit_code, 0);
  std::string in;
  for (int i = 0; i < 2000; ++i) in += "k" + std::to_string(i) + "\n";
  auto r = run_shmtool({"bloom", "add", S, "small"}, in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "over capacity")) << r.err;
  r = run_shmtool({"bloom", "info", S, "small", "--json"});
  EXPECT_TRUE(has(r.out, "\"over_capacity\":true")) << r.out;
  EXPECT_TRUE(has(r.err, "false-positive rate now")) << r.err;
}

TEST(BloomTool, BadInputOneLineErrorSegmentUnchanged) {
  ToolFixture fx;
  const std::string& S = fx.guard.name;
  ASSERT_EQ(run_shmtool({"bloom", "create", S, "taken", "--capacity", "1000"}).exit_code, 0);
  fx.seg.create_region("blob", Kind::kBlob, 64, [](std::byte*, uint64_t, ControlTxn&) {});
  SegmentStats before = fx.seg.stats();
  struct Case {
    std::vector<std::string> args;
    int code;
  };
  const Case cases[] = {
      {{"--capacity", "0"}, 2},
      {{"--capacity", "1000000000000000"}, 2},
      {{"--capacity", "abc"}, 2},
      {{"--capacity", "1000", "--error", "0"}, 2},
      {{"--capacity", "1000", "--error", "1.5"}, 2},
      {{"--capacity", "1000", "--layout", "quantum"}, 2},
      {{"--capacity", "1000", "--growth", "0.3"}, 2},
      {{}, 2},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"bloom", "create", S, "fresh"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = run_shmtool(args);
    EXPECT_EQ(r.exit_code, c.code) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  auto r = run_shmtool({"bloom", "create", S, std::string(64, 'x'), "--capacity", "1000"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_shmtool({"bloom", "create", S, "taken", "--capacity", "1000"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "already exists")) << r.err;
  r = run_shmtool({"bloom", "create", S, "blob", "--capacity", "1000"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "blob")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = run_shmtool({"bloom", "add", S, "missing", "k"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  r = run_shmtool({"bloom", "add", "no-such-segment-xyz", "taken", "k"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  SegmentStats after = fx.seg.stats();
  EXPECT_EQ(after.structures, before.structures);
  EXPECT_EQ(after.used_bytes, before.used_bytes);
}
