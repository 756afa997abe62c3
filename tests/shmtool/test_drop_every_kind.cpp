// tests/shmtool/test_drop_every_kind.cpp: a drop frees everything the kind owns, for every
// kind of the kinds table and through every front end that drops: C++ (drop_structure),
// C (shmf_structure_drop), shmtool (`shmtool drop`) and Python (Segment.drop, the ctypes
// binding over libshmfilter.so). The nginx module has no drop (its structures are made by
// its config and dropped with shmtool), so it has no case here.
//
// Each case builds the kind's fuzz image (its row's fuzz_image: every state the kind can be
// in, with the extents it owns beside its region: window bucket and overflow tables, retired
// slots and a spare in preparation; roaring snapshots, packs, deltas and retired snapshots
// pending; cuckoo sub-filters; bloom layers), drops every structure through one front end,
// and then requires: the directory is empty, check() has no finding (no leaked extent), and
// the allocator is back where it was: the same bytes in use, and the free bytes (free or in
// quarantine) as before plus every byte the segment grew by.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "shmfilter/kinds.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/shmfilter.h"
#include "structures/kind.h"
#include "test_util.h"

using namespace shmfilter;
using shmf_test::SegmentGuard;
using shmf_test::unique_name;

namespace {

enum class FrontEnd { kCxx, kC, kShmtool, kPython };

const char* front_end_name(FrontEnd f) {
  switch (f) {
    case FrontEnd::kCxx: return "cxx";
    case FrontEnd::kC: return "c";
    case FrontEnd::kShmtool: return "shmtool";
    case FrontEnd::kPython: return "python";
  }
  return "?";
}

std::string findings_text(const CheckReport& r) {
  std::string s;
  for (const auto& f : r.findings) s += f.where + ": " + f.problem + "\n";
  return s;
}

// Runs python3 on SCRIPT with ARGS, the binding from the source tree and the library this
// build made (under ASan, its runtime preloaded); returns the exit status and output.
int run_python(const std::string& script, const std::vector<std::string>& args, std::string& out) {
  const std::string log = "/tmp/" + unique_name("py") + ".log";
  std::string cmd = "PYTHONPATH='" SHMF_SOURCE_DIR "/python' SHMFILTER_LIBRARY='" SHMF_SHARED_LIB "' ";
#ifdef SHMF_ASAN_RUNTIME
  cmd += "LD_PRELOAD='" SHMF_ASAN_RUNTIME "' ASAN_OPTIONS=detect_leaks=0 ";
#endif
  cmd += "python3 -c '" + script + "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  cmd += " >" + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  out.clear();
  if (FILE* f = std::fopen(log.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  std::remove(log.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

class DropEveryKind : public ::testing::TestWithParam<std::tuple<Kind, FrontEnd>> {};

}  // namespace

TEST_P(DropEveryKind, FreesEverythingItOwns) {
  const auto [kind, fe] = GetParam();
  const internal::KindRow* row = internal::kind_row(kind);
  ASSERT_NE(row, nullptr);
  SegmentGuard g(unique_name(std::string("drop-") + row->name + "-" + front_end_name(fe)));
  Segment seg = Segment::create(g.name, shmf_test::small_options(1ull << 20, 64ull << 20));
  seg.quiesce();
  const SegmentStats before = seg.stats();

  row->fuzz_image(seg, "img-");
  std::vector<std::string> names;
  for (const RegionInfo& r : seg.list()) names.push_back(r.name);
  ASSERT_FALSE(names.empty());
  EXPECT_GT(seg.stats().used_bytes, before.used_bytes);

  switch (fe) {
    case FrontEnd::kCxx:
      for (const std::string& n : names) EXPECT_TRUE(drop_structure(seg, n)) << n;
      break;
    case FrontEnd::kC: {
      shmf_segment* c = nullptr;
      ASSERT_EQ(shmf_segment_open(g.name.c_str(), nullptr, &c), 0);
      for (const std::string& n : names) EXPECT_EQ(shmf_structure_drop(c, n.c_str()), 1) << n;
      EXPECT_EQ(shmf_structure_drop(c, "img-absent"), 0);
      EXPECT_EQ(shmf_segment_close(c), 0);
      break;
    }
    case FrontEnd::kShmtool:
      for (const std::string& n : names) {
        const auto r = shmf_test::run_shmtool({"drop", g.name, n});
        EXPECT_EQ(r.exit_code, 0) << n << ": " << r.err;
      }
      break;
    case FrontEnd::kPython: {
      std::vector<std::string> args{g.name};
      args.insert(args.end(), names.begin(), names.end());
      std::string out;
      const int rc = run_python(
          "import sys, shmfilter\n"
          "with shmfilter.Segment.open(sys.argv[1]) as s:\n"
          "    for n in sys.argv[2:]:\n"
          "        assert s.drop(n) == 1, n\n"
          "    assert s.drop(\"img-absent\") == 0\n",
          args, out);
      EXPECT_EQ(rc, 0) << out;
      break;
    }
  }

  EXPECT_TRUE(seg.list().empty());
  const CheckReport rep = seg.check();
  EXPECT_TRUE(rep.findings.empty()) << row->name << " via " << front_end_name(fe) << ":\n" << findings_text(rep);
  const SegmentStats after = seg.stats();
  EXPECT_EQ(after.used_bytes, before.used_bytes) << row->name << ": its drop left bytes allocated";
  // Freed extents wait in quarantine until every attached process passed a quiescent point
  // (the allocator takes them back lazily: lib/segment/allocator.cpp); free or quarantined,
  // every byte the structures held is back.
  EXPECT_EQ(after.free_bytes + after.quarantined_bytes,
            before.free_bytes + before.quarantined_bytes + (after.size - before.size))
      << row->name << ": free bytes are not back (" << before.free_bytes << " before, the segment grew by "
      << after.size - before.size << ")";
}

INSTANTIATE_TEST_SUITE_P(
    Table, DropEveryKind,
    ::testing::Combine(::testing::ValuesIn(known_kinds()),
                       ::testing::Values(FrontEnd::kCxx, FrontEnd::kC, FrontEnd::kShmtool, FrontEnd::kPython)),
    [](const ::testing::TestParamInfo<std::tuple<Kind, FrontEnd>>& i) {
      return std::string(kind_name(std::get<0>(i.param))) + "_" + front_end_name(std::get<1>(i.param));
    });
