// tests/shmtool/test_shmtool_window.cpp: shmtool window create|mark|seen|forget|count|rotate|info
// through the real binary, with the injected clock (--now).
#include <gtest/gtest.h>

#include <string>

#include "shmfilter/window.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::run_shmtool;

namespace {
constexpr long long kT0 = 1764547200;  // 2025-12-01 00:00:00 UTC
struct ToolFixture {
  shmf_test::SegmentGuard guard;
  Segment seg;
  ToolFixture() : guard(shmf_test::unique_name("win-tool")) {
    CreateOptions o;
    o.size = 16ull << 20;
    o.max_size = 1ull << 30;
    seg = Segment::create(guard.name, o);
  }
};
bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }
std::string at(long long t) { return std::to_string(t); }
}  // namespace

TEST(WindowTool, CreateMarkSeenForgetCountRotateInfo) {
  ToolFixture fx;
  const std::string& S = fx.guard.name;
  auto r = run_shmtool({"window", "create", S, "freq", "--expected", "10k", "--variant", "cuckoo", "--utc-offset", "28800",
                        "--error", "0.01", "--error-window", "1", "--seed", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "cuckoo")) << r.out;
  r = run_shmtool({"window", "mark", S, "freq", "42", "dev-a", "42", "dev-b", "42", "dev-a", "--now", at(kT0)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "42 dev-a new\n42 dev-b new\n42 dev-a seen\n");
  r = run_shmtool({"window", "seen", S, "freq", "42", "dev-a", "43", "dev-a", "--now", at(kT0)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "42 dev-a seen\n43 dev-a unseen\n");
  // stdin: SPACE ITEM per line; a bad line is rejected and reported; the next day.
  std::string in;
  for (int i = 0; i < 3000; ++i) in += std::to_string(i % 7) + " d" + std::to_string(i) + "\n";
  in += "not-a-pair\n";
  r = run_shmtool({"window", "mark", S, "freq", "--if-unseen", "--window", "7", "--now", at(kT0 + 86400), "--json"}, in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "\"new\":") && has(r.out, "\"rejected\":1")) << r.out;
  EXPECT_TRUE(has(r.err, "rejected 1 line")) << r.err;
  r = run_shmtool({"window", "mark", S, "freq", "--strict", "--now", at(kT0 + 86400)}, "x\n");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  // Yesterday's pair: seen over 2 buckets, not over 1.
  r = run_shmtool({"window", "seen", S, "freq", "42", "dev-a", "--window", "2", "--now", at(kT0 + 86400)});
  EXPECT_EQ(r.out, "42 dev-a seen\n") << r.err;
  r = run_shmtool({"window", "seen", S, "freq", "42", "dev-a", "--now", at(kT0 + 86400)});
  EXPECT_EQ(r.out, "42 dev-a unseen\n") << r.err;
  r = run_shmtool({"window", "count", S, "freq", "42", "--age", "1", "--now", at(kT0 + 86400), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "\"new\":2")) << r.out;
  r = run_shmtool({"window", "forget", S, "freq", "42", "dev-a", "42", "dev-a", "--now", at(kT0 + 86400)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "42 dev-a forgotten\n42 dev-a absent\n");
  r = run_shmtool({"window", "seen", S, "freq", "42", "dev-a", "--window", "7", "--now", at(kT0 + 86400)});
  EXPECT_EQ(r.out, "42 dev-a unseen\n");
  r = run_shmtool({"window", "rotate", S, "freq", "--now", at(kT0 + 2 * 86400), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "\"rotated\":true")) << r.out;
  // info reads at the system clock (today: past the simulated days, so no bucket is live).
  r = run_shmtool({"window", "info", S, "freq", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f : {"\"variant\":\"cuckoo\"", "\"retention\":7", "\"utc_offset\":28800", "\"one_bucket_error\":0.01",
                        "\"buckets\":[", "\"fp_bound_w1\":", "\"rotations\":3"})
    EXPECT_TRUE(has(r.out, f)) << f << " in " << r.out;
  // Window beyond the retention: a usage error.
  r = run_shmtool({"window", "seen", S, "freq", "1", "x", "--window", "8"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
}

TEST(WindowTool, BadOptionsAndForgetOnBloom) {
  ToolFixture fx;
  const std::string& S = fx.guard.name;
  // Invalid options are the library's kInvalidArgument: exit 2 with its message.
  auto r = run_shmtool({"window", "create", S, "w", "--expected", "1000", "--bucket-seconds", "0"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(has(r.err, "bucket_seconds 0 is invalid")) << r.err;
  r = run_shmtool({"window", "create", S, "w", "--expected", "1000", "--retention", "65"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_shmtool({"window", "create", S, "w", "--expected", "1000", "--variant", "tree"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(fx.seg.list().empty());
  r = run_shmtool({"window", "create", S, "w", "--expected", "1000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shmtool({"window", "mark", S, "w", "1", "a", "--now", "1764547200"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shmtool({"window", "forget", S, "w", "1", "a", "--now", "1764547200"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.out, "forget needs --variant cuckoo")) << r.out;
  r = run_shmtool({"check", S});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}
