// tests/shmtool/test_shmtool_exact_set.cpp: `shmtool set ...` end to end.
#include <gtest/gtest.h>

#include <string>

#include "shmfilter/exact_set.hpp"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter;
using shmf_test::run_shmtool;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

TEST(ExactSetShmtool, CreateAddCheckDelInfo) {
  SegmentGuard g(unique_name("settool"));
  Segment seg = Segment::create(g.name);
  auto r = run_shmtool({"set", "create", g.name, "s", "--capacity", "5k"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ExactSet::open(seg, "s").capacity(), 5000u);
  EXPECT_EQ(run_shmtool({"set", "create", g.name, "bad", "--capacity", "0"}).exit_code, 2);
  EXPECT_EQ(run_shmtool({"set", "create", g.name, "bad"}).exit_code, 2);

  r = run_shmtool({"set", "add", g.name, "s", "00ab34cd56ef7890", "00ab34cd56ef7890", "--keys", "hex"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "00ab34cd56ef7890\tinserted\n00ab34cd56ef7890\texists\n");
  EXPECT_TRUE(ExactSet::open(seg, "s").contains(uint64_t{0x00ab34cd56ef7890}));
  EXPECT_EQ(run_shmtool({"set", "add", g.name, "s", "xyz", "--keys", "hex"}).exit_code, 2);

  std::string lines;
  for (int i = 0; i < 3000; ++i) lines += "7:" + shmf_bench::hex16(shmf_bench::mix64(i)) + "\n";
  r = run_shmtool({"set", "add", g.name, "s"}, lines + lines);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "inserted: 3000\nexisted: 3000\nfull: 0\nsize: 3001\n");
  r = run_shmtool({"set", "check", g.name, "s"}, lines + "7:nothere\n");
  EXPECT_EQ(r.out, "present: 3000\nabsent: 1\n");
  r = run_shmtool({"set", "check", g.name, "s", "7:" + shmf_bench::hex16(shmf_bench::mix64(5)), "nope"});
  EXPECT_EQ(r.out, "7:" + shmf_bench::hex16(shmf_bench::mix64(5)) + "\t1\nnope\t0\n");
  r = run_shmtool({"set", "del", g.name, "s", "7:" + shmf_bench::hex16(shmf_bench::mix64(5)), "nope"});
  EXPECT_EQ(r.out, "7:" + shmf_bench::hex16(shmf_bench::mix64(5)) + "\tdeleted\nnope\tabsent\n");
  r = run_shmtool({"set", "del", g.name, "s"}, lines);
  EXPECT_EQ(r.out, "deleted: 2999\nabsent: 1\nsize: 1\n");

  // Full: a clear answer and exit 1, never a silent loss.
  ASSERT_EQ(run_shmtool({"set", "create", g.name, "tiny", "--capacity", "2"}).exit_code, 0);
  r = run_shmtool({"set", "add", g.name, "tiny", "1", "2", "3", "--keys", "u64"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "1\tinserted\n2\tinserted\n3\tfull\n");
  EXPECT_NE(r.err.find("full"), std::string::npos);

  r = run_shmtool({"set", "info", g.name, "s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"size\":1,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"capacity\":5000"), std::string::npos) << r.out;
  EXPECT_EQ(run_shmtool({"set", "info", g.name, "nosuch"}).exit_code, 1);
}
