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

// The stamped variant (issue 24): create --variant stamped, mark --cap N (Window::mark_if_under),
// forget, and info showing the one shared table (lanes, swept bucket, its bytes), text and --json.
TEST(WindowTool, StampedVariantCapsAndInfo) {
  ToolFixture fx;
  const std::string& S = fx.guard.name;
  auto r = run_shmtool({"window", "create", S, "caps", "--expected", "10k", "--variant", "stamped", "--seed", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "stamped") && has(r.out, "shared_table_bytes")) << r.out;
  // --cap 3 over the whole retention (the default W): 3 allowed, then capped; pairs apart.
  r = run_shmtool({"window", "mark", S, "caps", "42", "dev-a", "42", "dev-a", "42", "dev-a", "42", "dev-a", "43",
                   "dev-a", "--cap", "3", "--now", at(kT0)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "42 dev-a allowed\n42 dev-a allowed\n42 dev-a allowed\n42 dev-a capped\n43 dev-a allowed\n");
  r = run_shmtool({"window", "seen", S, "caps", "42", "dev-a", "--now", at(kT0)});
  EXPECT_EQ(r.out, "42 dev-a seen\n") << "an allowed mark marks the pair: " << r.err;
  // Six buckets later still capped over 7; a daily cap (--window 1) of the same pair counts apart
  // only what lies in today's bucket: none yet.
  r = run_shmtool({"window", "mark", S, "caps", "42", "dev-a", "--cap", "3", "--now", at(kT0 + 6 * 86400)});
  EXPECT_EQ(r.out, "42 dev-a capped\n") << r.err;
  r = run_shmtool({"window", "mark", S, "caps", "42", "dev-a", "--cap", "3", "--window", "1", "--now",
                   at(kT0 + 6 * 86400)});
  EXPECT_EQ(r.out, "42 dev-a allowed\n") << r.err;
  // stdin: 10 lines of one pair and 5 of another under --cap 4: counts, --json.
  std::string in;
  for (int i = 0; i < 10; ++i) in += "7 d1\n";
  for (int i = 0; i < 5; ++i) in += "7 d2\n";
  r = run_shmtool({"window", "mark", S, "caps", "--cap", "4", "--window", "2", "--now", at(kT0), "--json"}, in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "\"allowed\":8") && has(r.out, "\"capped\":7") && has(r.out, "\"cap\":4") &&
              has(r.out, "\"window\":2") && has(r.out, "\"failed\":0"))
      << r.out;
  // forget clears the pair's own lane (not its cap marks).
  r = run_shmtool({"window", "forget", S, "caps", "43", "dev-a", "--now", at(kT0)});
  EXPECT_EQ(r.out, "43 dev-a forgotten\n") << r.err;
  // Bad caps: usage errors, nothing marked.
  for (const char* bad : {"0", "16", "x"}) {
    r = run_shmtool({"window", "mark", S, "caps", "44", "dev-z", "--cap", bad, "--now", at(kT0)});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out << r.err;
    EXPECT_TRUE(has(r.err, "--cap '" + std::string(bad) + "' is invalid: pass an integer from 1 to 15")) << r.err;
  }
  r = run_shmtool({"window", "mark", S, "caps", "44", "dev-z", "--cap", "2", "--if-unseen", "--now", at(kT0)});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  r = run_shmtool({"window", "mark", S, "caps", "44", "dev-z", "--cap", "2", "--window", "8", "--now", at(kT0)});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  r = run_shmtool({"window", "seen", S, "caps", "44", "dev-z", "--window", "7", "--now", at(kT0)});
  EXPECT_EQ(r.out, "44 dev-z unseen\n") << r.err;
  // info: lanes (3 + 1 + 1 + 8 cap marks; the forgotten pair's own lane cleared), the shared table.
  r = run_shmtool({"window", "info", S, "caps", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f : {"\"variant\":\"stamped\"", "\"lanes\":", "\"swept_bucket\":", "\"shared_table_bytes\":"})
    EXPECT_TRUE(has(r.out, f)) << f << " in " << r.out;
  Segment seg = Segment::open(S);
  Window w = Window::open(seg, "caps");
  const WindowStats st = w.stats();
  EXPECT_EQ(st.variant, WindowVariant::kStamped);
  EXPECT_TRUE(has(r.out, "\"lanes\":" + std::to_string(st.lanes) + ",")) << st.lanes << " in " << r.out;
  EXPECT_GE(st.lanes, 13u);
  WindowOptions o;
  o.variant = WindowVariant::kStamped;
  o.expected_per_bucket = 10000;
  EXPECT_TRUE(has(r.out, "\"shared_table_bytes\":" + std::to_string(Window::plan(o).shared_bytes) + ","))
      << Window::plan(o).shared_bytes << " in " << r.out;
  r = run_shmtool({"window", "info", S, "caps"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "lanes") && has(r.out, "swept_bucket") && has(r.out, "shared_table_bytes") &&
              has(r.out, "MiB"))
      << r.out;
  r = run_shmtool({"check", S});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(WindowTool, CapNeedsTheStampedVariant) {
  ToolFixture fx;
  const std::string& S = fx.guard.name;
  auto r = run_shmtool({"window", "create", S, "w", "--expected", "1000", "--variant", "cuckoo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shmtool({"window", "mark", S, "w", "1", "a", "--cap", "3", "--now", at(kT0)});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.err, "window 'w' is of variant cuckoo: --cap counts marks only in a window of variant stamped"))
      << r.err;
  EXPECT_EQ(r.out, "");
  r = run_shmtool({"window", "seen", S, "w", "1", "a", "--window", "7", "--now", at(kT0)});
  EXPECT_EQ(r.out, "1 a unseen\n") << "nothing marked: " << r.err;
  // A stamped window keeps at most 12 buckets; create says so (exit 2), the segment unchanged.
  r = run_shmtool({"window", "create", S, "s", "--expected", "1000", "--variant", "stamped", "--retention", "13"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  r = run_shmtool({"window", "create", S, "s", "--expected", "1000", "--variant", "tree"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "stamped")) << r.err;
  r = run_shmtool({"window", "create", "--help"});
  EXPECT_TRUE(has(r.out, "--variant stamped") && has(r.out, "mark --cap")) << r.out;
  r = run_shmtool({"window", "mark", "--help"});
  EXPECT_TRUE(has(r.out, "--cap N") && has(r.out, "capped")) << r.out;
}
