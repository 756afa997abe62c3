// tests/shmtool/test_shmtool_uv.cpp: `shmtool uv ...` end to end (docs/uv.md): create with
// options and bad options (exit 2 / 1, nothing created), add (pairs and stdin), count over a
// window (the union), --all, --json, info, and a refused add's exit code.
#include <gtest/gtest.h>

#include <string>

#include "shmfilter/uv.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::run_shmtool;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

TEST(UvShmtool, CreateAddCountInfo) {
  SegmentGuard g(unique_name("uvtool"));
  Segment seg = Segment::create(g.name, shmf_test::small_options(32 << 20));
  auto r = run_shmtool({"uv", "create", g.name, "uv", "--retention", "0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("retention"), std::string::npos) << r.err;
  EXPECT_FALSE(seg.find("uv").has_value());
  r = run_shmtool({"uv", "create", g.name, "uv", "--retention", "3", "--max-spaces", "2", "--chunk-bytes", "1MiB", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"retention\":3"), std::string::npos) << r.out;
  const std::string d0 = "1764547200", d1 = "1764633600";  // 2025-12-01 and -02, 00:00 UTC
  r = run_shmtool({"uv", "add", g.name, "uv", "42", "a", "42", "b", "42", "a", "--now", d0});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "42 a changed\n42 b changed\n42 a unchanged\n");
  r = run_shmtool({"uv", "add", g.name, "uv", "--now", d1}, "42 b\n42 c\n7 x\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "lines: 3\nchanged: 3\nrefused: 0\n");
  r = run_shmtool({"uv", "count", g.name, "uv", "42", "--now", d1});
  EXPECT_EQ(r.out, "42\t2\n") << r.err;
  r = run_shmtool({"uv", "count", g.name, "uv", "42", "--window", "2", "--now", d1});
  EXPECT_EQ(r.out, "42\t3\n") << r.err;  // {a, b} u {b, c}
  r = run_shmtool({"uv", "count", g.name, "uv", "--window", "2", "--now", d1, "--json"});
  EXPECT_EQ(r.out, "{\"counts\":[{\"space\":\"7\",\"window\":2,\"count\":1},{\"space\":\"42\",\"window\":2,\"count\":3}]}\n")
      << r.err;
  r = run_shmtool({"uv", "count", g.name, "uv", "--all", "--window", "2", "--now", d1});
  EXPECT_EQ(r.out, "all\t4\n") << r.err;
  r = run_shmtool({"uv", "count", g.name, "uv", "42", "--window", "4", "--now", d1});
  EXPECT_EQ(r.exit_code, 2) << r.out;  // outside 1..retention: a usage error
  // max_spaces 2: a third space in one bucket is refused, and the tool exits 1 saying so.
  r = run_shmtool({"uv", "add", g.name, "uv", "9", "y", "--now", d1});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("9 y spaces_full"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
  r = run_shmtool({"uv", "info", g.name, "uv", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"refused_spaces_full\":1"), std::string::npos) << r.out;
  r = run_shmtool({"check", g.name});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}
