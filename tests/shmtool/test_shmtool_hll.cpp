// tests/shmtool/test_shmtool_hll.cpp: `shmtool hll ...` end to end (segment made through the API).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "shmfilter/hll.hpp"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter;
using shmf_test::run_shmtool;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

TEST(HllShmtool, CreateAddCountMergeExportImport) {
  SegmentGuard g(unique_name("hlltool"));
  Segment seg = Segment::create(g.name);
  ASSERT_EQ(run_shmtool({"hll", "create", g.name, "d1"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"hll", "create", g.name, "d2"}).exit_code, 0);
  auto r = run_shmtool({"hll", "add", g.name, "d1", "aa", "bb", "aa"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "aa\t1\nbb\t1\naa\t0\n");
  std::string lines;
  for (int i = 0; i < 20000; ++i) lines += shmf_bench::hex16(shmf_bench::mix64(i)) + "\n";
  r = run_shmtool({"hll", "add", g.name, "d2"}, lines + lines);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("lines: 40000"), std::string::npos) << r.out;
  Hll d2 = Hll::open(seg, "d2");
  EXPECT_EQ(r.out.find("count: " + std::to_string(d2.count())) != std::string::npos, true) << r.out;

  r = run_shmtool({"hll", "count", g.name, "d1", "d2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<Hll> both{Hll::open(seg, "d1"), d2};
  EXPECT_EQ(r.out, std::to_string(Hll::count_union(both)) + "\n");

  r = run_shmtool({"hll", "merge", g.name, "week", "d1", "d2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Hll::open(seg, "week").registers(), [&] {
    Hll tmp = Hll::create(seg, "tmp");
    tmp.merge_from(both);
    return tmp.registers();
  }());

  std::string path = "/tmp/" + unique_name("hll") + ".hyll";
  r = run_shmtool({"hll", "export", g.name, "week", "--output", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_shmtool({"hll", "export", g.name, "week"});  // stdout is a file here: allowed
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.size(), 12304u);
  const std::string exported = r.out;
  // Import from a file, and from stdin with redis-cli's trailing newline.
  r = run_shmtool({"hll", "import", g.name, "fromfile", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Hll::open(seg, "fromfile").registers(), Hll::open(seg, "week").registers());
  r = run_shmtool({"hll", "import", g.name, "fromstdin"}, exported + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Hll::open(seg, "fromstdin").registers(), Hll::open(seg, "week").registers());
  std::remove(path.c_str());

  r = run_shmtool({"hll", "import", g.name, "junk"}, "not an hll at all");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("HYLL"), std::string::npos) << r.err;
  EXPECT_FALSE(seg.find("junk").has_value()) << "bad input creates nothing";

  r = run_shmtool({"hll", "info", g.name, "week", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"kind\":\"hll\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not a membership test"), std::string::npos) << r.out;

  r = run_shmtool({"hll", "clear", g.name, "d1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Hll::open(seg, "d1").count(), 0u);

  EXPECT_EQ(run_shmtool({"hll", "count", g.name, "nosuch"}).exit_code, 1);
  EXPECT_EQ(run_shmtool({"hll", "count", g.name}).exit_code, 2);
  EXPECT_EQ(run_shmtool({"hll", "merge", g.name, "x"}).exit_code, 2);
}
