// tests/unit/test_metrics.cpp: shmfilter::prometheus_text and structure_metrics.
// (promtool's verdict on the same text is tests/shmtool/test_shmtool_ops.cpp.)
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "shmfilter/bloom.hpp"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "shmfilter/metrics.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/window.hpp"
#include "test_util.h"

using namespace shmfilter;

namespace {

// value of the sample "family{labels}" or -1
double sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

}  // namespace

TEST(Metrics, EveryKindReportsAndEachFamilyIsDeclaredOnceBeforeItsSamples) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("metrics"));
  Segment seg = Segment::create(g.name, shmf_test::small_options());
  BloomOptions bo;
  bo.capacity = 100;
  bo.seed = 1;
  Bloom b = Bloom::create(seg, "b", bo);
  for (uint64_t i = 0; i < 1000; ++i) b.add(i);  // 10x over capacity
  CuckooOptions co;
  co.capacity = 100;
  Cuckoo::create(seg, "c", co).add(uint64_t{1});
  RoaringSet::create(seg, "r").add(7);
  Hll::create(seg, "h").add(uint64_t{1});
  ExactSetOptions eo;
  eo.capacity = 2;
  ExactSet s = ExactSet::create(seg, "s", eo);
  s.insert(uint64_t{1});
  s.insert(uint64_t{2});

  const std::string t = prometheus_text(seg);
  const std::string sl = "segment=\"" + g.name + "\"";
  EXPECT_EQ(sample(t, "shmfilter_segment_structures{" + sl + "}"), 5);
  EXPECT_EQ(sample(t, "shmfilter_segment_processes_alive{" + sl + "}"), 1);
  EXPECT_EQ(sample(t, "shmfilter_segment_dead_attachments{" + sl + "}"), 0);
  EXPECT_EQ(sample(t, "shmfilter_structure_over_capacity{" + sl + ",name=\"b\",kind=\"bloom\"}"), 1);
  EXPECT_GT(sample(t, "shmfilter_structure_fp_rate_estimate{" + sl + ",name=\"b\",kind=\"bloom\"}"), 0.1);
  EXPECT_EQ(sample(t, "shmfilter_structure_items{" + sl + ",name=\"c\",kind=\"cuckoo\"}"), 1);
  EXPECT_EQ(sample(t, "shmfilter_structure_items{" + sl + ",name=\"r\",kind=\"roaring\"}"), 1);
  EXPECT_EQ(sample(t, "shmfilter_roaring_delta_fill{" + sl + ",name=\"r\",kind=\"roaring\"}"), 1);
  EXPECT_EQ(sample(t, "shmfilter_structure_items{" + sl + ",name=\"h\",kind=\"hll\"}"), 1);
  EXPECT_EQ(sample(t, "shmfilter_structure_over_capacity{" + sl + ",name=\"s\",kind=\"set\"}"), 1);
  EXPECT_EQ(sample(t, "shmfilter_structure_error{" + sl + ",name=\"s\",kind=\"set\"}"), 0);

  // HELP then TYPE exactly once per family, and every sample after its family's TYPE.
  std::map<std::string, int> help, type;
  std::string current;
  std::istringstream in(t);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      current = line.substr(7, line.find(' ', 7) - 7);
      help[current]++;
    } else if (line.rfind("# TYPE ", 0) == 0) {
      type[line.substr(7, line.find(' ', 7) - 7)]++;
    } else {
      ASSERT_EQ(line.substr(0, line.find('{')), current) << line;
    }
  }
  for (const auto& [name, n] : help) {
    EXPECT_EQ(n, 1) << name;
    EXPECT_EQ(type[name], 1) << name;
  }
  // structure_metrics gives the same shared numbers.
  auto ms = structure_metrics(seg);
  ASSERT_EQ(ms.size(), 5u);
  EXPECT_EQ(ms[0].region.name, "b");
  EXPECT_TRUE(ms[0].over_capacity);
  EXPECT_EQ(ms[4].items, 2);
  EXPECT_EQ(ms[4].capacity, 2u);
}

TEST(Metrics, LabelValuesAreEscapedAndValidUtf8) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("metrics-esc"));
  Segment seg = Segment::create(g.name, shmf_test::small_options());
  Hll::create(seg, std::string("a\"b\\c\nd\xff") + "\xe6\x97\xa5");
  const std::string t = prometheus_text(seg);
  EXPECT_NE(t.find("name=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\xe6\x97\xa5\""), std::string::npos) << t;
}

// The window kind has its row in the per-kind table: the current bucket's numbers in the
// shared families, the whole window's FP and its counters in shmfilter_window_*.
TEST(Metrics, WindowReportsItsCurrentBucketAndTheWholeWindow) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("metricswin"));
  Segment seg = Segment::create(g.name, shmf_test::small_options());
  WindowOptions wo;
  wo.expected_per_bucket = 1000;
  wo.retention = 3;
  wo.max_spaces = 16;
  wo.seed = 5;
  // prometheus_text opens its own handle on the system clock: ten-year buckets keep
  // this test's marks in the bucket that handle calls current.
  wo.bucket_seconds = 10ull * 365 * 86400;
  Window w = Window::create(seg, "fc", wo);
  for (uint64_t i = 0; i < 200; ++i) ASSERT_EQ(w.mark_if_unseen(i % 4, std::to_string(i)), WindowStatus::kNew);
  const std::string t = prometheus_text(seg);
  const std::string l = "{segment=\"" + g.name + "\",name=\"fc\",kind=\"window\"}";
  // Bloom variant: distinct counts kNew answers, so exactly the 200 distinct pairs.
  EXPECT_EQ(sample(t, "shmfilter_structure_items" + l), 200);
  EXPECT_EQ(sample(t, "shmfilter_structure_capacity" + l), static_cast<double>(w.stats().buckets.front().capacity));
  EXPECT_EQ(sample(t, "shmfilter_structure_over_capacity" + l), 0);
  EXPECT_EQ(sample(t, "shmfilter_window_spaces" + l), 4);
  const double fp = sample(t, "shmfilter_window_fp_rate_window" + l);
  EXPECT_GE(fp, 0);
  EXPECT_LE(fp, sample(t, "shmfilter_window_fp_bound_window" + l));
  EXPECT_EQ(sample(t, "shmfilter_structure_error" + l), 0);
}
