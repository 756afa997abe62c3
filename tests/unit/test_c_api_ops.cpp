// tests/unit/test_c_api_ops.cpp: shmf_segment_prometheus_text, the C entry to
// lib/ops's metrics (what a C /metrics endpoint such as the nginx module serves).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "shmfilter/metrics.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/shmfilter.h"
#include "shmfilter/text.hpp"
#include "test_util.h"

TEST(CApiOps, PrometheusTextAsksItsSizeThenFillsTheBuffer) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("capi-ops"));
  shmf_segment_options o;
  shmf_segment_options_init(&o);
  o.size = 8u << 20;
  o.max_size = 64u << 20;
  shmf_segment* seg = nullptr;
  ASSERT_EQ(shmf_segment_create(g.name.c_str(), &o, &seg), 0) << shmf_last_error_message();
  shmf_hll* h = nullptr;
  ASSERT_EQ(shmf_hll_create(seg, "uv", &h), 0) << shmf_last_error_message();
  shmfilter::Segment cpp = shmfilter::Segment::open(g.name);  // attached first: processes_alive counts it
  size_t need = 0;
  EXPECT_EQ(shmf_segment_prometheus_text(seg, nullptr, 0, &need), -SHMF_EFULL);
  EXPECT_NE(std::string(shmf_last_error_message()).find("call again"), std::string::npos);
  ASSERT_GT(need, 100u);
  std::vector<char> small(need - 1);
  EXPECT_EQ(shmf_segment_prometheus_text(seg, small.data(), small.size(), &need), -SHMF_EFULL);
  std::vector<char> buf(need);
  ASSERT_EQ(shmf_segment_prometheus_text(seg, buf.data(), buf.size(), &need), 0) << shmf_last_error_message();
  std::string text(buf.data());
  EXPECT_EQ(text.size() + 1, need);
  EXPECT_EQ(text, shmfilter::prometheus_text(cpp));
  EXPECT_NE(text.find("name=\"uv\",kind=\"hll\""), std::string::npos) << text;
  EXPECT_EQ(shmf_segment_prometheus_text(nullptr, buf.data(), buf.size(), &need), -SHMF_EINVAL);
  EXPECT_EQ(shmf_segment_prometheus_text(seg, buf.data(), buf.size(), nullptr), -SHMF_EINVAL);
  shmf_hll_close(h);
  shmf_segment_close(seg);
}

// #22: the bounds of a scrape reach C callers (the nginx module, sidecars) through
// shmf_segment_prometheus_text_ex and shmf_metrics_options.
TEST(CApiOps, PrometheusTextExTakesTheScrapeBounds) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("capi-ops-ex"));
  shmf_segment_options o;
  shmf_segment_options_init(&o);
  o.size = 8u << 20;
  o.max_size = 64u << 20;
  shmf_segment* seg = nullptr;
  ASSERT_EQ(shmf_segment_create(g.name.c_str(), &o, &seg), 0) << shmf_last_error_message();
  for (const char* n : {"uv:1", "uv:2", "uv:3"}) {
    shmf_hll* h = nullptr;
    ASSERT_EQ(shmf_hll_create(seg, n, &h), 0) << shmf_last_error_message();
    shmf_hll_close(h);
  }
  shmf_metrics_options mo;
  shmf_metrics_options_init(&mo);
  const shmfilter::MetricsOptions d;
  EXPECT_EQ(mo.max_structures, d.max_structures);
  EXPECT_EQ(mo.max_spaces, d.max_spaces);
  EXPECT_EQ(mo.max_bytes, d.max_bytes);
  mo.max_structures = 1;
  std::vector<char> buf(1 << 20);
  size_t need = 0;
  ASSERT_EQ(shmf_segment_prometheus_text_ex(seg, &mo, buf.data(), buf.size(), &need), 0) << shmf_last_error_message();
  std::string text(buf.data());
  EXPECT_EQ(text.size() + 1, need);
  EXPECT_NE(text.find("shmfilter_other_structures{segment=\"" + g.name + "\",kind=\"hll\"} 2"), std::string::npos)
      << text;
  ASSERT_EQ(shmf_segment_prometheus_text_ex(seg, nullptr, buf.data(), buf.size(), &need), 0);
  EXPECT_NE(std::string(buf.data()).find("shmfilter_other_structures{segment=\"" + g.name + "\",kind=\"hll\"} 0"),
            std::string::npos);
  mo.max_bytes = 100;
  EXPECT_EQ(shmf_segment_prometheus_text_ex(seg, &mo, buf.data(), buf.size(), &need), -SHMF_EINVAL);
  shmf_metrics_options_init(&mo);
  mo.reserved[1] = 1;
  EXPECT_EQ(shmf_segment_prometheus_text_ex(seg, &mo, buf.data(), buf.size(), &need), -SHMF_EINVAL);
  shmf_segment_close(seg);
}

// #23: a C front end (nginx's own families, its logs) escapes names as the library does.
TEST(CApiOps, EscapeIsTheLibrarysOnePolicy) {
  const std::string name = "uv:\xed\xa0\x80\x1b[2J\"\\";
  size_t need = 0;
  EXPECT_EQ(shmf_escape(SHMF_ESCAPE_LABEL, name.data(), name.size(), nullptr, 0, &need), -SHMF_EFULL);
  std::vector<char> buf(need);
  ASSERT_EQ(shmf_escape(SHMF_ESCAPE_LABEL, name.data(), name.size(), buf.data(), buf.size(), &need), 0);
  EXPECT_EQ(std::string(buf.data()), shmfilter::escape_label(name));
  EXPECT_EQ(std::string(buf.data()), "uv:\\\\xed\\\\xa0\\\\x80\\\\x1b[2J\\\"\\\\\\\\");
  buf.assign(256, 0);
  ASSERT_EQ(shmf_escape(SHMF_ESCAPE_TEXT, name.data(), name.size(), buf.data(), buf.size(), &need), 0);
  EXPECT_EQ(std::string(buf.data()), shmfilter::escape_text(name));
  ASSERT_EQ(shmf_escape(SHMF_ESCAPE_JSON, name.data(), name.size(), buf.data(), buf.size(), &need), 0);
  EXPECT_EQ(std::string(buf.data()), shmfilter::escape_json(name));
  ASSERT_EQ(shmf_escape(SHMF_ESCAPE_TEXT, nullptr, 0, buf.data(), buf.size(), &need), 0);
  EXPECT_EQ(need, 1u);
  EXPECT_EQ(shmf_escape(7, name.data(), name.size(), buf.data(), buf.size(), &need), -SHMF_EINVAL);
}

// #23: shmf_last_error_message() quotes names; C front ends log it (nginx's error.log), so
// a name's terminal escapes and invalid UTF-8 arrive escaped.
TEST(CApiOps, LastErrorMessageQuotesNamesEscaped) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("capi-ops-err"));
  shmf_segment_options o;
  shmf_segment_options_init(&o);
  o.size = 8u << 20;
  o.max_size = 64u << 20;
  shmf_segment* seg = nullptr;
  ASSERT_EQ(shmf_segment_create(g.name.c_str(), &o, &seg), 0) << shmf_last_error_message();
  shmf_hll* h = nullptr;
  EXPECT_EQ(shmf_hll_open(seg, "uv:\x1b]0;owned\x07\xed\xa0\x80", &h), -SHMF_ENOTFOUND);
  const std::string msg = shmf_last_error_message();
  EXPECT_NE(msg.find("uv:\\x1b]0;owned\\x07\\xed\\xa0\\x80"), std::string::npos) << msg;
  EXPECT_TRUE(shmfilter::valid_utf8(msg));
  EXPECT_EQ(msg.find('\x1b'), std::string::npos);
  shmf_segment_close(seg);
}
