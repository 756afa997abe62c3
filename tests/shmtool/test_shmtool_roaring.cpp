// tests/shmtool/test_shmtool_roaring.cpp: `shmtool roaring ...` end to end (exit codes,
// messages, stdin counts, rejected lines, import/export, info).
#include <gtest/gtest.h>
#include <roaring/roaring.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::run_shmtool;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

Segment make_segment(const std::string& name) {
  CreateOptions o;
  o.size = 16ull << 20;
  o.max_size = 1ull << 30;
  o.directory_capacity = 64;
  return Segment::create(name, o);
}

std::string tmp_path(const std::string& tag) { return "/tmp/" + unique_name(tag); }

}  // namespace

TEST(RoaringTool, CreateAddCheckRemoveCard) {
  SegmentGuard g(unique_name("rt"));
  Segment seg = make_segment(g.name);
  auto r = run_shmtool({"roaring", "create", g.name, "ids", "--delta-capacity", "256"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shmtool({"roaring", "add", g.name, "ids", "1", "2", "4294967295"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1 added\n2 added\n4294967295 added\n");
  r = run_shmtool({"roaring", "check", g.name, "ids", "2", "3"});
  EXPECT_EQ(r.out, "2 present\n3 absent\n");
  r = run_shmtool({"roaring", "remove", g.name, "ids", "2"});
  EXPECT_EQ(r.exit_code, 0);
  r = run_shmtool({"roaring", "card", g.name, "ids"});
  EXPECT_EQ(r.out, "2\n");
  // A value past 32 bits is a usage error naming the problem; nothing is written.
  r = run_shmtool({"roaring", "add", g.name, "ids", "5", "4294967296"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("does not fit in 32 bits"), std::string::npos) << r.err;
  EXPECT_EQ(run_shmtool({"roaring", "card", g.name, "ids"}).out, "2\n");
  // Missing structure: exit 1.
  r = run_shmtool({"roaring", "card", g.name, "nope"});
  EXPECT_EQ(r.exit_code, 1);
  // Bad option value: exit 2 with the fix in the message.
  r = run_shmtool({"roaring", "create", g.name, "bad", "--delta-capacity", "1000"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("power of two"), std::string::npos) << r.err;
}

TEST(RoaringTool, StdinCountsAndRejectedLines) {
  SegmentGuard g(unique_name("rts"));
  Segment seg = make_segment(g.name);
  ASSERT_EQ(run_shmtool({"roaring", "create", g.name, "s"}).exit_code, 0);
  std::string in;
  for (int i = 0; i < 1000; ++i) in += std::to_string(i * 2) + "\n";
  in += "abc\n99999999999\n-4\n";
  auto r = run_shmtool({"roaring", "add", g.name, "s", "--json"}, in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"added\":1000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"rejected\":3"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("rejected 3 lines (first at lines 1001, 1002, 1003)"), std::string::npos) << r.err;
  r = run_shmtool({"roaring", "add", g.name, "s", "--strict"}, "1\nx\n");
  EXPECT_EQ(r.exit_code, 1);
  r = run_shmtool({"roaring", "check", g.name, "s", "--json"}, "0\n1\n2\n3\n");
  EXPECT_NE(r.out.find("\"present\":3"), std::string::npos) << r.out;  // 0, 2 and the 1 added above
}

TEST(RoaringTool, ImportExportOpInfo) {
  SegmentGuard g(unique_name("rti"));
  Segment seg = make_segment(g.name);
  std::string text = tmp_path("ids.txt"), bin = tmp_path("ids.roaring"), bad = tmp_path("bad.roaring");
  {
    std::ofstream f(text);
    for (int i = 0; i < 100000; ++i) f << i << "\n";
    f << "oops\n";
  }
  auto r = run_shmtool({"roaring", "import", g.name, "a", text, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"imported\":100000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"rejected\":1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("line 100001"), std::string::npos) << r.err;
  r = run_shmtool({"roaring", "export", g.name, "a", bin});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shmtool({"roaring", "import", g.name, "b", bin, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"format\":\"portable\""), std::string::npos) << r.out;
  EXPECT_EQ(run_shmtool({"roaring", "card", g.name, "b"}).out, "100000\n");
  // Truncated portable file: exit 1, clear message, set unchanged.
  {
    std::ifstream in(bin, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream out(bad, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  r = run_shmtool({"roaring", "import", g.name, "b", bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("truncated Roaring serialization"), std::string::npos) << r.err;
  EXPECT_EQ(run_shmtool({"roaring", "card", g.name, "b"}).out, "100000\n");
  ASSERT_EQ(run_shmtool({"roaring", "add", g.name, "b", "200000"}).exit_code, 0);
  r = run_shmtool({"roaring", "op", g.name, "xor", "-", "a", "b", "--json"});
  EXPECT_EQ(r.out, "{\"cardinality\":1}\n") << r.err;
  r = run_shmtool({"roaring", "op", g.name, "union", "u", "a", "b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "dest         u\ncardinality  100001\n") << "aligned label/value lines";
  r = run_shmtool({"roaring", "any", g.name, "200000", "a", "b", "--json"});
  EXPECT_NE(r.out.find("\"present\":true"), std::string::npos) << r.out;
  r = run_shmtool({"roaring", "info", g.name, "u", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"run_containers\":"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"delta_fill\":"), std::string::npos) << r.out;
  r = run_shmtool({"roaring", "export", g.name, "u", "-", "--text"});
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 100001);
  std::remove(text.c_str());
  std::remove(bin.c_str());
  std::remove(bad.c_str());
}
