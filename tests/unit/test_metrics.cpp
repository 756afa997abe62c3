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
#include "shmfilter/text.hpp"
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
  // The label reads as `shmtool list` shows the name (a\"b\\c\x0ad\xff<U+65E5>), escaped for the format.
  EXPECT_NE(t.find("name=\"a\\\"b\\\\\\\\c\\\\x0ad\\\\xff\xe6\x97\xa5\""), std::string::npos) << t;
}

// #23: a surrogate (ED A0 80), an overlong form, an F5 lead byte or a control byte in a
// name made the scrape invalid UTF-8 (promtool rejects it). Every label is valid now, and
// the whole text holds no control byte but newlines.
TEST(Metrics, HostileNamesKeepTheWholeTextValidUtf8) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("metrics-hostile"));
  Segment seg = Segment::create(g.name, shmf_test::small_options());
  const std::string names[] = {"uv:\xed\xa0\x80",     "uv:\xc0\xaf", "uv:\xf5\x80\x80\x80",
                               "uv:\x1b]0;owned\x07", "uv:\x1b[2J",  "uv:\xc2\x9b"};
  for (const std::string& n : names) Hll::create(seg, n);
  const std::string t = prometheus_text(seg);
  EXPECT_TRUE(valid_utf8(t));
  for (char ch : t) EXPECT_TRUE(ch == '\n' || (static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f)) << int(ch);
  EXPECT_NE(t.find("name=\"uv:\\\\xed\\\\xa0\\\\x80\""), std::string::npos) << t;
}

namespace {
size_t count_lines_with(const std::string& text, const std::string& needle) {
  size_t n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
  return n;
}
}  // namespace

// #22: 8,000 structures used to scrape to 64k lines (5.27 MB with HLL names). The
// per-kind rows count every structure; only the largest max_structures get their own
// series, and the text stays within max_bytes whatever the names.
TEST(Metrics, ScrapesAreBoundedAtEightThousandStructures) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("metrics-8k"));
  Segment seg = Segment::create(g.name, shmf_test::small_options(64ull << 20, 1ull << 30, 8200));
  BloomOptions bo;
  bo.capacity = 100000;  // the largest region: ranked first
  bo.seed = 3;
  Bloom::create(seg, "big", bo).add(uint64_t{1});
  ExactSetOptions eo;
  eo.capacity = 1;
  for (int i = 0; i < 8000; ++i) ExactSet::create(seg, "plan:" + std::to_string(i) + ":2026-12-04", eo);
  const std::string sl = "segment=\"" + g.name + "\"";

  const std::string t = prometheus_text(seg);
  EXPECT_LE(t.size(), 100000u);
  EXPECT_EQ(sample(t, "shmfilter_kind_structures{" + sl + ",kind=\"set\"}"), 8000);
  EXPECT_EQ(sample(t, "shmfilter_kind_structures{" + sl + ",kind=\"bloom\"}"), 1);
  const MetricsOptions d;
  EXPECT_EQ(count_lines_with(t, "shmfilter_structure_error{"), d.max_structures);
  EXPECT_EQ(sample(t, "shmfilter_other_structures{" + sl + ",kind=\"set\"}"), 8000 - (d.max_structures - 1));
  EXPECT_EQ(sample(t, "shmfilter_other_structures{" + sl + ",kind=\"bloom\"}"), 0);
  EXPECT_EQ(sample(t, "shmfilter_structure_items{" + sl + ",name=\"big\",kind=\"bloom\"}"), 1);
  // Region bytes add up: the shown and the other rows cover every structure.
  double regions = 0;
  for (const RegionInfo& r : seg.list()) regions += static_cast<double>(r.size);
  EXPECT_EQ(sample(t, "shmfilter_kind_region_bytes{" + sl + ",kind=\"set\"}") +
                sample(t, "shmfilter_kind_region_bytes{" + sl + ",kind=\"bloom\"}"),
            regions);

  MetricsOptions none;
  none.max_structures = 0;
  const std::string agg = prometheus_text(seg, none);
  EXPECT_EQ(count_lines_with(agg, "name=\""), 0u);
  EXPECT_EQ(sample(agg, "shmfilter_other_structures{" + sl + ",kind=\"set\"}"), 8000);

  MetricsOptions all;  // opt in to every structure, bounded by bytes
  all.max_structures = 100000;
  all.max_bytes = 20000;
  const std::string small = prometheus_text(seg, all);
  EXPECT_LE(small.size(), 20000u);
  EXPECT_GT(count_lines_with(small, "shmfilter_structure_error{"), 0u);
  all.max_bytes = 100ull << 20;
  EXPECT_EQ(count_lines_with(prometheus_text(seg, all), "shmfilter_structure_error{"), 8001u);

  MetricsOptions bad;
  bad.max_bytes = kMetricsMinBytes - 1;
  EXPECT_THROW(prometheus_text(seg, bad), Error);
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

// Per-space (per-plan) series are opt-in and bounded: max_spaces spaces with the most new
// answers today, then one "other" row with the rest.
TEST(Metrics, WindowPerSpaceSeriesAreOptInTopNPlusOther) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("metrics-spaces"));
  Segment seg = Segment::create(g.name, shmf_test::small_options());
  WindowOptions wo;
  wo.expected_per_bucket = 10000;
  wo.retention = 2;
  wo.max_spaces = 16;
  wo.seed = 5;
  wo.bucket_seconds = 10ull * 365 * 86400;  // the scrape's own handle reads the system clock
  Window w = Window::create(seg, "fc", wo);
  // Space s gets s + 1 new pairs: 20 spaces, the last 4 past max_spaces (the window's "other" row).
  uint64_t total = 0;
  for (uint64_t s = 0; s < 20; ++s)
    for (uint64_t i = 0; i <= s; ++i, ++total) ASSERT_EQ(w.mark_if_unseen(s, i), WindowStatus::kNew);
  const std::string l = "shmfilter_window_space_new{segment=\"" + g.name + "\",name=\"fc\",kind=\"window\"";
  EXPECT_EQ(prometheus_text(seg).find(l), std::string::npos);  // off by default
  MetricsOptions o;
  o.max_spaces = 3;
  const std::string t = prometheus_text(seg, o);
  EXPECT_EQ(count_lines_with(t, l), 4u) << t;
  // The 16 claimed spaces are 0..15 (first come): the top three are 15, 14, 13.
  EXPECT_EQ(sample(t, l + ",space=\"15\"}"), 16);
  EXPECT_EQ(sample(t, l + ",space=\"14\"}"), 15);
  EXPECT_EQ(sample(t, l + ",space=\"13\"}"), 14);
  EXPECT_EQ(sample(t, l + ",space=\"other\"}"), static_cast<double>(total - 16 - 15 - 14));
}

// The kinds take turns: a window (whose region is small: its tables are extents) keeps its
// series beside many larger-region structures of another kind.
TEST(Metrics, EveryKindShowsItsLargestBesideManyOfAnotherKind) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("metrics-turns"));
  Segment seg = Segment::create(g.name, shmf_test::small_options(16ull << 20, 256ull << 20, 128));
  WindowOptions wo;
  wo.expected_per_bucket = 1000;
  wo.max_spaces = 1;  // the smallest region a window has
  Window::create(seg, "fc", wo);
  for (int i = 0; i < 40; ++i) Hll::create(seg, "uv:" + std::to_string(i));
  ASSERT_LT(seg.find("fc")->size, seg.find("uv:0")->size);
  MetricsOptions o;
  o.max_structures = 4;
  const std::string t = prometheus_text(seg, o);
  const std::string sl = "segment=\"" + g.name + "\"";
  EXPECT_EQ(sample(t, "shmfilter_structure_error{" + sl + ",name=\"fc\",kind=\"window\"}"), 0) << t;
  EXPECT_EQ(count_lines_with(t, "shmfilter_structure_error{"), 4u);
  EXPECT_EQ(sample(t, "shmfilter_other_structures{" + sl + ",kind=\"hll\"}"), 37);
  EXPECT_EQ(sample(t, "shmfilter_other_structures{" + sl + ",kind=\"window\"}"), 0);
}
