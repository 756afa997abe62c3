// tests/shmtool/test_shmtool_output.cpp: every text output is safe (#23). Structures
// named with a surrogate (ED A0 80), an overlong form, an F5 lead byte and terminal
// escapes (ESC]0; ESC[2J, C1 CSI, DEL): every shmtool command that shows names prints
// them escaped (human forms: \xNN; JSON: valid UTF-8 that json.load reads, with
// name_hex for the exact bytes), and the Prometheus text passes promtool. And #22: a
// scrape of 8,000 structures is bounded.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "shmfilter/exact_set.hpp"
#include "shmfilter/segment.hpp"
#include "shmfilter/text.hpp"
#include "test_util.h"

using shmf_test::run_shmtool;
using shmf_test::SegmentGuard;
using shmf_test::ToolResult;
using shmf_test::unique_name;

namespace {

int sh(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) s.append(buf, n);
  int rc = pclose(p);
  if (out) *out = s;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void spit(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary | std::ios::trunc) << b; }

// Valid UTF-8 and no control character but newlines (and tabs, which tab-separated
// answers use): nothing a terminal acts on, nothing a UTF-8 parser rejects.
::testing::AssertionResult safe_output(const std::string& what, const std::string& s) {
  if (!shmfilter::valid_utf8(s))
    return ::testing::AssertionFailure() << what << " is not valid UTF-8: " << shmfilter::escape_text(s);
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool c1 = c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0;
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f || c1)
      return ::testing::AssertionFailure()
             << what << " holds control byte " << int(c) << " at " << i << ": " << shmfilter::escape_text(s);
  }
  return ::testing::AssertionSuccess();
}

const std::vector<std::string> kHostile = {
    "uv:\xed\xa0\x80",      // a surrogate: the review's scrape breaker
    "uv:\xc0\xaf",          // overlong '/'
    "uv:\xf5\x80\x80\x80",  // F5 lead byte
    "t:\x1b]0;owned\x07",   // OSC: sets the terminal title
    "t:\x1b[2J\x1b[H",      // clears the screen
    "t:\xc2\x9b"
    "31m\x7f",          // C1 CSI, DEL
    "t:line\nbreak\r",  // a newline in a name
};

void make_hostile(const std::string& seg) {
  ASSERT_EQ(run_shmtool({"create", seg, "--size", "8MiB", "--max-size", "64MiB", "--directory", "64"}).exit_code, 0);
  for (const std::string& n : kHostile)
    ASSERT_EQ(run_shmtool({"hll", "create", seg, n}).exit_code, 0) << shmfilter::escape_text(n);
  ASSERT_EQ(run_shmtool({"set", "create", seg, "s:\x1b[2J", "--capacity", "10"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"bloom", "create", seg, "b:\xed\xa0\x80", "--capacity", "100"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"cuckoo", "create", seg, "c:\xff\x1b", "--capacity", "100"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"roaring", "create", seg, "r:\x9b"}).exit_code, 0);
}

}  // namespace

TEST(ShmtoolOutput, EveryCommandShowsHostileNamesEscaped) {
  SegmentGuard g(unique_name("out-hostile"));
  make_hostile(g.name);
  const std::vector<std::vector<std::string>> human = {{"list", g.name},
                                                       {"stats", g.name},
                                                       {"dump", g.name},
                                                       {"check", g.name},
                                                       {"hll", "info", g.name, kHostile[3]},
                                                       {"set", "info", g.name, "s:\x1b[2J"},
                                                       {"bloom", "info", g.name, "b:\xed\xa0\x80"},
                                                       {"cuckoo", "info", g.name, "c:\xff\x1b"},
                                                       {"roaring", "info", g.name, "r:\x9b"}};
  for (const auto& cmd : human) {
    ToolResult r = run_shmtool(cmd);
    EXPECT_EQ(r.exit_code, 0) << cmd[0] << ": " << r.err;
    EXPECT_TRUE(safe_output(cmd[0] + " " + cmd[1] + " stdout", r.out));
    EXPECT_TRUE(safe_output(cmd[0] + " " + cmd[1] + " stderr", r.err));
  }
  // Shown as escape_text shows them: reversible \xNN.
  ToolResult list = run_shmtool({"list", g.name});
  EXPECT_NE(list.out.find("uv:\\xed\\xa0\\x80"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("t:\\x1b]0;owned\\x07"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("t:line\\x0abreak\\x0d"), std::string::npos) << list.out;

  for (const auto& cmd : std::vector<std::vector<std::string>>{{"list", g.name, "--json"},
                                                               {"stats", g.name, "--json"},
                                                               {"dump", g.name, "--json"},
                                                               {"check", g.name, "--json"},
                                                               {"hll", "info", g.name, kHostile[0], "--json"}}) {
    ToolResult r = run_shmtool(cmd);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(safe_output(cmd[0] + " --json", r.out));
    const std::string file = "/tmp/" + unique_name("out-json") + ".json";
    spit(file, r.out);
    std::string err;
    EXPECT_EQ(sh("python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding=\"utf-8\"))' " + file, &err), 0)
        << cmd[0] << ": " << err;
    std::remove(file.c_str());
  }
  // The exact bytes of a name that is not UTF-8 are in name_hex.
  ToolResult j = run_shmtool({"list", g.name, "--json"});
  EXPECT_NE(j.out.find("\"name_hex\":\"" + shmfilter::hex_bytes(kHostile[0]) + "\""), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\\u001b]0;owned\\u0007"), std::string::npos) << j.out;

  // Errors quoting a name (here: the kind is wrong) are escaped too.
  ToolResult wrong = run_shmtool({"bloom", "info", g.name, kHostile[3]});
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_TRUE(safe_output("error", wrong.err));
  // Keys echoed back are escaped.
  ToolResult add = run_shmtool({"hll", "add", g.name, kHostile[0], "k\x1b[2J"});
  EXPECT_EQ(add.exit_code, 0) << add.err;
  EXPECT_TRUE(safe_output("hll add", add.out));
  // drop prints the name it dropped.
  ToolResult drop = run_shmtool({"drop", g.name, kHostile[4]});
  EXPECT_EQ(drop.exit_code, 0) << drop.err;
  EXPECT_TRUE(safe_output("drop", drop.out));
}

TEST(ShmtoolOutput, PrometheusTextWithHostileNamesPassesPromtool) {
  ASSERT_EQ(sh("command -v promtool >/dev/null"), 0)
      << "promtool (Debian package prometheus): run scripts/install-deps.sh";
  SegmentGuard g(unique_name("out-prom"));
  make_hostile(g.name);
  ToolResult r = run_shmtool({"stats", g.name, "--prometheus"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(safe_output("--prometheus", r.out));
  const std::string file = "/tmp/" + unique_name("out-prom") + ".prom";
  spit(file, r.out);
  std::string out;
  EXPECT_EQ(sh("promtool check metrics < " + file, &out), 0) << out;
  EXPECT_EQ(out, "") << out;
  std::remove(file.c_str());
  EXPECT_NE(r.out.find("name=\"uv:\\\\xed\\\\xa0\\\\x80\",kind=\"hll\""), std::string::npos) << r.out;
}

// #22: per-structure series are bounded (top N by region bytes + per-kind rows), so a
// scrape of 8,000 structures stays under 100 KB; the flags reach the library's options.
TEST(ShmtoolOutput, PrometheusScrapeOfEightThousandStructuresIsBounded) {
  SegmentGuard g(unique_name("out-8k"));
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "64MiB", "--max-size", "1GiB", "--directory", "8192"}).exit_code,
            0);
  {
    shmfilter::Segment seg = shmfilter::Segment::open(g.name);
    shmfilter::ExactSetOptions eo;
    eo.capacity = 1;
    for (int i = 0; i < 8000; ++i) shmfilter::ExactSet::create(seg, "uv:plan-" + std::to_string(i) + ":2026-12-04", eo);
  }
  ToolResult r = run_shmtool({"stats", g.name, "--prometheus"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LE(r.out.size(), 100000u);
  EXPECT_NE(r.out.find("shmfilter_kind_structures{segment=\"" + g.name + "\",kind=\"set\"} 8000"), std::string::npos);
  const std::string file = "/tmp/" + unique_name("out-8k") + ".prom";
  spit(file, r.out);
  std::string out;
  EXPECT_EQ(sh("promtool check metrics < " + file, &out), 0) << out;
  std::remove(file.c_str());

  r = run_shmtool({"stats", g.name, "--prometheus", "--max-structures", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("name=\""), std::string::npos);
  r = run_shmtool({"stats", g.name, "--prometheus", "--max-structures", "9000", "--max-bytes", "32k"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LE(r.out.size(), 32768u);
  EXPECT_EQ(run_shmtool({"stats", g.name, "--prometheus", "--max-bytes", "1k"}).exit_code, 2);
  EXPECT_EQ(run_shmtool({"stats", g.name, "--max-structures", "5"}).exit_code, 2);
}

// #23: `advise --daily 1.8e19` converted an out-of-range double to an integer (undefined
// behaviour) and answered; NaN, inf and negative numbers now get one clear error (exit 2).
TEST(ShmtoolOutput, AdviseRejectsOutOfRangeNumbersBeforeConverting) {
  const std::string ids = "1\n2\n3\n";
  const std::pair<const char*, const char*> cases[] = {
      {"1.8e19", "daily volume"}, {"2e12", "daily volume"}, {"2e19", "too large"},  {"inf", "too large"},
      {"nan", "not a number"},    {"-5", "negative"},       {"1e400", "too large"}, {"1.5", "whole"}};
  for (const auto& [daily, why] : cases) {
    ToolResult r = run_shmtool({"advise", "--daily", daily}, ids);
    EXPECT_EQ(r.exit_code, 2) << daily << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << daily << ": " << r.err;
  }
  for (const char* h : {"nan", "inf", "-1"}) {
    ToolResult r = run_shmtool({"advise", "--headroom", h}, ids);
    EXPECT_EQ(r.exit_code, 2) << h << ": " << r.out << r.err;
  }
  EXPECT_EQ(run_shmtool({"advise", "--daily", "120M"}, ids).exit_code, 0);
}
