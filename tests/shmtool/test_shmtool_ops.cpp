// tests/shmtool/test_shmtool_ops.cpp: shmtool advise, stats, save and restore as
// a real program: normal use, bad input (no IDs, unparsable lines, a file
// that is not a save, truncated, a future version), golden text views
// (tests/shmtool/golden/), `promtool check metrics` on --prometheus, and the
// SVG parsed as XML and rendered by headless chromium.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

using shmf_test::run_shmtool;
using shmf_test::SegmentGuard;
using shmf_test::ToolResult;
using shmf_test::unique_name;

namespace {

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const std::string& p, const std::string& b) { std::ofstream(p, std::ios::binary | std::ios::trunc) << b; }

std::string tmp_path(const std::string& tag) { return "/tmp/" + unique_name(tag); }

// Runs a shell command; returns its exit status and output (stdout+stderr).
int sh(const std::string& cmd, std::string* out = nullptr) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) s.append(buf, n);
  int rc = pclose(p);
  if (out) *out = s;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool have(const std::string& tool) { return sh("command -v " + tool + " >/dev/null") == 0; }

std::string dense_ids(uint64_t n) {
  std::string s;
  for (uint64_t i = 0; i < n; ++i) s += std::to_string(i) + "\n";
  return s;
}

std::string hex_ids(size_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::string s;
  char buf[32];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%016llx\n", static_cast<unsigned long long>(rng()));
    s += buf;
  }
  return s;
}

// The text with every occurrence of `name` replaced by "SEG" (goldens are name-independent).
std::string anonymise(std::string s, const std::string& name) {
  for (size_t at; (at = s.find(name)) != std::string::npos;) s.replace(at, name.size(), "SEG");
  return s;
}

void expect_golden(const std::string& got, const std::string& file) {
  const std::string path = std::string(SHMF_SOURCE_DIR) + "/tests/shmtool/golden/" + file;
  const std::string want = slurp(path);
  EXPECT_EQ(got, want) << "golden " << path << " differs; if the change is intended, regenerate it with "
                       << "SHMF_UPDATE_GOLDEN=1";
  if (std::getenv("SHMF_UPDATE_GOLDEN")) spit(path, got);
}

}  // namespace

// ---- advise ----------------------------------------------------------------------

TEST(ShmtoolAdvise, DenseSequentialIsRoaringAndTheTextViewIsGolden) {
  const std::string in = tmp_path("advise-dense");
  spit(in, dense_ids(100'000));
  ToolResult r = run_shmtool({"advise", in, "--daily", "1e8", "--headroom", "1", "--name", "orders"});
  std::remove(in.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("recommended: roaring"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("create: shmtool roaring create SEG orders"), std::string::npos) << r.out;
  expect_golden(anonymise(r.out, in), "advise_dense.txt");
}

TEST(ShmtoolAdvise, HexDeviceIdsAreBloomWindowWithWindowCuckooWithDeletesSetWhenSmall) {
  const std::string ids = hex_ids(20'000, 7);
  auto choice = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"advise", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    ToolResult r = run_shmtool(args, ids);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    std::regex re("\"choice\":\"([a-z-]+)\"");
    return std::regex_search(r.out, m, re) ? m[1].str() : "none: " + r.out;
  };
  EXPECT_EQ(choice({"--daily", "120M"}), "bloom");
  EXPECT_EQ(choice({"--daily", "120M", "--window", "7"}), "window");
  EXPECT_EQ(choice({"--daily", "30M", "--deletes"}), "cuckoo");
  EXPECT_EQ(choice({"--daily", "2M"}), "set");
  EXPECT_EQ(choice({"--daily", "120M", "--count-only"}), "hll");
  ToolResult r = run_shmtool({"advise", "--daily", "120M", "--headroom", "1"}, ids);
  EXPECT_NE(r.out.find("137.12 MiB"), std::string::npos) << r.out;  // the seed's Bloom at 1.2e8 and 1%
  EXPECT_NE(r.out.find("exceeds 32 bits"), std::string::npos) << r.out;
}

// --window: the window structure sized by Window::plan (7 day tables + the spare at p1 a day),
// the command that creates it (--variant cuckoo with --deletes), in the golden text view,
// in --json and in the SVG's title.
TEST(ShmtoolAdvise, WindowIsSizedByTheWindowsOwnPlanAndTheTextViewIsGolden) {
  const std::string ids = hex_ids(20'000, 7);
  ToolResult r = run_shmtool({"advise", "--daily", "120M", "--window", "7", "--headroom", "1", "--name", "freq"}, ids);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("* window             1.74 GiB  1%"), std::string::npos) << r.out;  // stamped, the default
  EXPECT_NE(r.out.find("create: shmtool window create SEG freq --expected 120000000 --retention 7 --error 0.01\n"),
            std::string::npos)
      << r.out;
  expect_golden(r.out, "advise_window.txt");
  r = run_shmtool({"advise", "--daily", "120M", "--window", "7", "--deletes", "--json"}, ids);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"choice\":\"window\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--retention 7 --error 0.01\""), std::string::npos) << r.out;  // stamped deletes: no --variant
  EXPECT_NE(r.out.find("\"bytes\":2801605184"), std::string::npos) << "one stamped table of 7 x 180M lanes: " << r.out;
  // Past what stamped keeps (12 buckets): the cuckoo ring, and its flag.
  r = run_shmtool({"advise", "--daily", "120M", "--window", "14", "--deletes", "--json"}, ids);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--retention 14 --error 0.01 --variant cuckoo\""), std::string::npos) << r.out;
  // The printed command works: it creates the window it advised (small numbers, same flags).
  SegmentGuard g(unique_name("advise-window"));
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "8MiB"}).exit_code, 0);
  r = run_shmtool({"window", "create", g.name, "freq", "--expected", "1000", "--retention", "7", "--error", "0.01"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string svg = tmp_path("advise-window") + ".svg";
  r = run_shmtool({"advise", "--daily", "120M", "--window", "7", "--headroom", "1", "--svg", svg}, ids);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(slurp(svg).find("&#8594; window (1.74 GiB)"), std::string::npos);
  std::remove(svg.c_str());
}

TEST(ShmtoolAdvise, NoIdsAndUnparsableLinesAreOneClearError) {
  ToolResult r = run_shmtool({"advise"}, "");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no IDs in stdin"), std::string::npos) << r.err;
  r = run_shmtool({"advise"}, "\n\n\r\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no IDs"), std::string::npos) << r.err;
  // Nearly all hex device IDs, one line of something else: named by its position.
  std::string ids = hex_ids(50, 1);
  ids.insert(17 * 3, "not-an-id!\n");
  r = run_shmtool({"advise"}, ids);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ID 4 'not-an-id!' is not a hex number"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--format string"), std::string::npos) << r.err;
  r = run_shmtool({"advise", "--format", "decimal"}, "12\n0x1f\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ID 2 '0x1f' is not a decimal integer"), std::string::npos) << r.err;
  r = run_shmtool({"advise", "--format", "decimal"}, "18446744073709551616\n");  // 2^64
  EXPECT_EQ(r.exit_code, 1);
  r = run_shmtool({"advise", "--format", "nope"}, "1\n");
  EXPECT_EQ(r.exit_code, 2);
  r = run_shmtool({"advise", "/nonexistent/ids.txt"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/ids.txt"), std::string::npos) << r.err;
  // Arbitrary strings are fine: hashed, and Roaring does not apply.
  r = run_shmtool({"advise", "--json"}, "alice\nbob\ncarol\nbob\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"hashed_strings\":true"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"distinct\":3"), std::string::npos) << r.out;
}

TEST(ShmtoolAdvise, SvgIsValidXmlAndRendersInHeadlessChromium) {
  const std::string svg = tmp_path("advise") + ".svg", png = tmp_path("advise") + ".png";
  ToolResult r = run_shmtool({"advise", "--svg", svg, "--daily", "1e8"}, dense_ids(70'000) + hex_ids(0, 0));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st{};
  ASSERT_EQ(stat(svg.c_str(), &st), 0);
  EXPECT_GT(st.st_size, 5000);
  ASSERT_TRUE(have("python3")) << "python3 is needed to parse the SVG: run scripts/install-deps.sh";
  std::string out;
  EXPECT_EQ(sh("python3 -c \"import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
               "ns = '{http://www.w3.org/2000/svg}'; assert r.tag == ns + 'svg', r.tag; "
               "t = [x.text or '' for x in r.iter(ns + 'text')]; "
               "assert any('ID value distribution' in s for s in t), t; "
               "assert any('Per-chunk density' in s for s in t), t; "
               "assert sum(1 for _ in r.iter(ns + 'rect')) > 64; print('ok')\" " + svg, &out),
            0)
      << out;
  ASSERT_TRUE(have("chromium")) << "chromium (Debian package chromium) renders the SVG in this test: run "
                                   "scripts/install-deps.sh";
  EXPECT_EQ(sh("chromium --headless --no-sandbox --disable-gpu --window-size=900,720 --screenshot=" + png +
                   " file://" + svg, &out),
            0)
      << out;
  const std::string img = slurp(png);
  EXPECT_EQ(img.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << out;
  EXPECT_GT(img.size(), 20'000u) << "a blank page is a few KB; the rendered charts are larger";
  std::remove(svg.c_str());
  std::remove(png.c_str());
}

// ---- stats -------------------------------------------------------------------------

namespace {
void make_fixture(const std::string& seg) {
  ASSERT_EQ(run_shmtool({"create", seg, "--size", "8MiB", "--max-size", "64MiB", "--directory", "64"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"bloom", "create", seg, "plan:17", "--capacity", "1000", "--seed", "3"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"bloom", "add", seg, "plan:17"}, dense_ids(1500)).exit_code, 0);  // over capacity
  ASSERT_EQ(run_shmtool({"set", "create", seg, "undo", "--capacity", "100"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"set", "add", seg, "undo"}, dense_ids(40)).exit_code, 0);
  ASSERT_EQ(run_shmtool({"hll", "create", seg, "uv"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"hll", "add", seg, "uv"}, dense_ids(500)).exit_code, 0);
  ASSERT_EQ(run_shmtool({"roaring", "create", seg, "orders"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"roaring", "add", seg, "orders"}, dense_ids(300)).exit_code, 0);
  ASSERT_EQ(run_shmtool({"cuckoo", "create", seg, "refunds", "--capacity", "100"}).exit_code, 0);
}
}  // namespace

TEST(ShmtoolStats, TextViewIsGoldenAndJsonHasEveryStructure) {
  SegmentGuard g(unique_name("stats"));
  make_fixture(g.name);
  ToolResult r = run_shmtool({"stats", g.name});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden(anonymise(r.out, g.name), "stats.txt");
  r = run_shmtool({"stats", g.name, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* n : {"plan:17", "undo", "uv", "orders", "refunds"})
    EXPECT_NE(r.out.find(std::string("\"name\":\"") + n + "\""), std::string::npos) << n << " in " << r.out;
  EXPECT_EQ(sh("echo '" + r.out + "' | python3 -c 'import json,sys; json.load(sys.stdin)'"), 0) << r.out;
  EXPECT_EQ(run_shmtool({"stats", g.name, "--json", "--prometheus"}).exit_code, 2);
  EXPECT_EQ(run_shmtool({"stats", unique_name("absent")}).exit_code, 1);
}

TEST(ShmtoolStats, PrometheusTextPassesPromtool) {
  ASSERT_TRUE(have("promtool")) << "promtool (Debian package prometheus) checks the metrics text: run "
                                   "scripts/install-deps.sh";
  SegmentGuard g(unique_name("prom"));
  make_fixture(g.name);
  ToolResult r = run_shmtool({"stats", g.name, "--prometheus"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string file = tmp_path("prom") + ".prom";
  spit(file, r.out);
  std::string out;
  int rc = sh("promtool check metrics < " + file, &out);
  std::remove(file.c_str());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "") << "promtool found problems (lint):\n" << out;
  EXPECT_NE(r.out.find("shmfilter_structure_over_capacity{segment=\"" + g.name + "\",name=\"plan:17\",kind=\"bloom\"} 1"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("shmfilter_cuckoo_insert_failures_total{"), std::string::npos);
  // The check above can fail: promtool rejects a family declared twice.
  spit(file, r.out + "# HELP shmfilter_segment_size_bytes again\n# TYPE shmfilter_segment_size_bytes gauge\n");
  EXPECT_NE(sh("promtool check metrics < " + file, &out), 0) << out;
  std::remove(file.c_str());
}

// ---- save / restore ------------------------------------------------------------------

TEST(ShmtoolSaveRestore, RoundTripAndEveryBadFileIsOneError) {
  SegmentGuard src(unique_name("save")), dst(unique_name("restore"));
  make_fixture(src.name);
  const std::string file = tmp_path("save") + ".save", bad = tmp_path("bad") + ".save";
  ToolResult r = run_shmtool({"save", src.name, file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("saved 5 structures"), std::string::npos) << r.out;
  r = run_shmtool({"restore", file, dst.name});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("restored 5 structures"), std::string::npos) << r.out;
  r = run_shmtool({"set", "check", dst.name, "undo", "39", "40"});
  EXPECT_EQ(r.out, "39\t1\n40\t0\n");
  r = run_shmtool({"roaring", "check", dst.name, "orders", "299", "300"});
  EXPECT_EQ(r.out, "299 present\n300 absent\n");
  EXPECT_EQ(run_shmtool({"check", dst.name}).exit_code, 0);
  // Name clashes.
  r = run_shmtool({"restore", file, dst.name});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("exists"), std::string::npos) << r.err;
  r = run_shmtool({"restore", file, dst.name, "--into"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already has a structure"), std::string::npos) << r.err;

  const std::string good = slurp(file);
  SegmentGuard none(unique_name("never"));
  auto refused = [&](const std::string& bytes, const std::string& says) {
    spit(bad, bytes);
    ToolResult x = run_shmtool({"restore", bad, none.name});
    EXPECT_EQ(x.exit_code, 1) << says;
    EXPECT_NE(x.err.find(says), std::string::npos) << x.err;
    struct stat st{};
    EXPECT_NE(stat(("/dev/shm/" + none.name).c_str(), &st), 0) << "a refused restore left a segment";
  };
  refused("id\n12\n", "is not a shmfilter save");
  refused(good.substr(0, good.size() / 2), "is truncated");
  std::string flipped = good;
  flipped[good.size() / 2] ^= 1;
  refused(flipped, "checksum mismatch");
  std::string future = good;
  future[8] = 9;
  refused(future, "format version 9");
  r = run_shmtool({"save", src.name, file, "--structures", "uv,"});
  EXPECT_EQ(r.exit_code, 2);
  r = run_shmtool({"save", src.name, file, "--structures", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  std::remove(file.c_str());
  std::remove(bad.c_str());
}

// ---- progress ------------------------------------------------------------------------

// `script` (util-linux) runs the command on a pseudo-terminal, so stderr is a tty;
// SHMTOOL_PROGRESS_AFTER_MS=0 shows the line at once instead of after 0.5 s.
TEST(ShmtoolProgress, RateAndEtaOnATerminalAndSilentOtherwise) {
  ASSERT_TRUE(have("script")) << "script (util-linux) gives the command a terminal: run scripts/install-deps.sh";
  SegmentGuard g(unique_name("progress"));
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "8MiB"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"bloom", "create", g.name, "b", "--capacity", "1M"}).exit_code, 0);
  const std::string ids = tmp_path("progress-ids");
  spit(ids, dense_ids(300'000));  // 1.9 MB: two reads of the 1 MiB buffer
  const std::string tool = SHMTOOL_PATH;
  std::string out;
  ASSERT_EQ(sh("SHMTOOL_PROGRESS_AFTER_MS=0 script -qec '" + tool + " bloom add " + g.name + " b < " + ids +
                   "' /dev/null",
               &out),
            0)
      << out;
  EXPECT_NE(out.find("bloom add: "), std::string::npos) << out;
  EXPECT_NE(out.find("lines/s"), std::string::npos) << out;
  EXPECT_NE(out.find("ETA "), std::string::npos) << out;  // a file: the total is known
  EXPECT_NE(out.find("300k lines"), std::string::npos) << out;
  EXPECT_NE(out.find("100%"), std::string::npos) << out;
  // A pipe: no total, so a rate and no percentage.
  ASSERT_EQ(sh("SHMTOOL_PROGRESS_AFTER_MS=0 script -qec 'cat " + ids + " | " + tool + " bloom check " + g.name +
                   " b' /dev/null",
               &out),
            0)
      << out;
  EXPECT_NE(out.find("bloom check: 300k lines"), std::string::npos) << out;
  EXPECT_EQ(out.find('%'), std::string::npos) << out;
  // Not a terminal: nothing on stderr.
  ToolResult r = run_shmtool({"bloom", "add", g.name, "b"}, slurp(ids));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  std::remove(ids.c_str());
}

// A segment with a window of each variant (two days of marks, a forget, the day ring
// rotated by --now): save lists them (nothing skipped), restore answers seen/count
// exactly as the source over every window w, and check is clean.
TEST(ShmtoolSaveRestore, WindowsRoundTripWithTheirDayRing) {
  SegmentGuard src(unique_name("savew")), dst(unique_name("restorew"));
  const std::string file = tmp_path("savew") + ".save";
  const std::string day0 = "1764550800", day1 = "1764637200", day2 = "1764723600";  // 2025-12-01/02/03 01:00 UTC
  ASSERT_EQ(run_shmtool({"create", src.name, "--size", "8MiB", "--max-size", "256MiB"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"window", "create", src.name, "ads", "--expected", "2000", "--retention", "3", "--max-spaces",
                         "64", "--seed", "4"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"window", "create", src.name, "undo", "--variant", "cuckoo", "--expected", "2000",
                         "--retention", "3", "--max-spaces", "64", "--seed", "5"}).exit_code, 0);
  std::string pairs0, pairs1;
  for (int i = 0; i < 600; ++i) pairs0 += std::to_string(i % 7) + " dev-" + std::to_string(i) + "\n";
  for (int i = 300; i < 900; ++i) pairs1 += std::to_string(i % 7) + " dev-" + std::to_string(i) + "\n";
  for (const char* w : {"ads", "undo"}) {
    ASSERT_EQ(run_shmtool({"window", "mark", src.name, w, "--now", day0}, pairs0).exit_code, 0);
    ASSERT_EQ(run_shmtool({"window", "mark", src.name, w, "--if-unseen", "--now", day1}, pairs1).exit_code, 0);
  }
  ASSERT_EQ(run_shmtool({"window", "forget", src.name, "undo", "3", "dev-304", "--now", day1}).exit_code, 0);
  ToolResult r = run_shmtool({"save", src.name, file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("saved 2 structures"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("skipped"), std::string::npos) << r.out;
  r = run_shmtool({"restore", file, dst.name});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("restored 2 structures"), std::string::npos) << r.out;
  EXPECT_EQ(run_shmtool({"check", dst.name}).exit_code, 0);
  std::string query;
  for (int i = 0; i < 1000; i += 7) query += std::to_string(i % 7) + " dev-" + std::to_string(i) + "\n";
  for (const char* w : {"ads", "undo"})
    for (const std::string& now : {day1, day2})
      for (const char* win : {"1", "2", "3"}) {
        SCOPED_TRACE(std::string(w) + " now " + now + " window " + win);
        ToolResult a = run_shmtool({"window", "seen", src.name, w, "--window", win, "--now", now}, query);
        ToolResult b = run_shmtool({"window", "seen", dst.name, w, "--window", win, "--now", now}, query);
        ASSERT_EQ(a.exit_code, 0) << a.err;
        EXPECT_EQ(a.out, b.out);  // the summary: how many of the query pairs were seen
      }
  for (const char* w : {"ads", "undo"})
    for (const char* age : {"0", "1"}) {
      ToolResult a = run_shmtool({"window", "count", src.name, w, "3", "--age", age, "--now", day1, "--json"});
      ToolResult b = run_shmtool({"window", "count", dst.name, w, "3", "--age", age, "--now", day1, "--json"});
      ASSERT_EQ(a.exit_code, 0) << a.err;
      EXPECT_EQ(a.out, b.out);
    }
  r = run_shmtool({"window", "seen", dst.name, "undo", "3", "dev-304", "--window", "3", "--now", day1});
  EXPECT_EQ(r.out, "3 dev-304 unseen\n") << "the forget came along";
  r = run_shmtool({"window", "seen", dst.name, "ads", "0", "dev-0", "1", "dev-897", "--window", "2", "--now", day1});
  EXPECT_EQ(r.out, "0 dev-0 seen\n1 dev-897 seen\n");
  r = run_shmtool({"window", "seen", dst.name, "ads", "0", "dev-0", "--window", "1", "--now", day1});
  EXPECT_EQ(r.out, "0 dev-0 unseen\n") << "day 0's pair is not in day 1's bucket";
  // The restored ring rotates on: day 2 is a new bucket in both.
  for (const SegmentGuard* g : {&src, &dst}) {
    r = run_shmtool({"window", "mark", g->name, "ads", "1", "fresh-device", "--now", day2});
    EXPECT_EQ(r.out, "1 fresh-device new\n") << g->name;
  }
  std::remove(file.c_str());
}

// ---- windows in stats and info -------------------------------------------------------

// Windows of both variants in the Prometheus text: promtool clean, the window families present.
TEST(ShmtoolStats, PrometheusTextWithWindowsPassesPromtool) {
  ASSERT_TRUE(have("promtool")) << "promtool (Debian package prometheus) checks the metrics text: run "
                                   "scripts/install-deps.sh";
  SegmentGuard g(unique_name("promw"));
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "8MiB"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"window", "create", g.name, "ads", "--expected", "1000", "--max-spaces", "16"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"window", "create", g.name, "undo", "--variant", "cuckoo", "--expected", "1000",
                         "--max-spaces", "16"}).exit_code, 0);
  std::string pairs;
  for (int i = 0; i < 300; ++i) pairs += std::to_string(i % 5) + " d" + std::to_string(i) + "\n";
  ASSERT_EQ(run_shmtool({"window", "mark", g.name, "ads"}, pairs).exit_code, 0);
  ASSERT_EQ(run_shmtool({"window", "mark", g.name, "undo"}, pairs).exit_code, 0);
  ToolResult r = run_shmtool({"stats", g.name, "--prometheus"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string file = tmp_path("promw") + ".prom";
  spit(file, r.out);
  std::string out;
  EXPECT_EQ(sh("promtool check metrics < " + file, &out), 0) << out;
  EXPECT_EQ(out, "") << "promtool found problems (lint):\n" << out;
  std::remove(file.c_str());
  for (const char* n : {"ads", "undo"})
    EXPECT_NE(r.out.find("shmfilter_window_spaces{segment=\"" + g.name + "\",name=\"" + n + "\",kind=\"window\"} 5"),
              std::string::npos)
        << n << " in " << r.out;
}

// `window info` reads as the other info views: aligned labels, rates in %, seconds with
// their unit, sizes with units, and the buckets as a table (--json keeps the numbers).
TEST(ShmtoolInfo, WindowInfoShowsUnitsAndTheBucketsAsATable) {
  SegmentGuard g(unique_name("infow"));
  ASSERT_EQ(run_shmtool({"create", g.name, "--size", "8MiB"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"window", "create", g.name, "ads", "--expected", "1000", "--retention", "3"}).exit_code, 0);
  ASSERT_EQ(run_shmtool({"window", "mark", g.name, "ads", "1", "a", "2", "b"}).exit_code, 0);
  ToolResult r = run_shmtool({"window", "info", g.name, "ads"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nbucket_seconds       86400 s\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nerror                1%\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\none_bucket_error     0.334%\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nbuckets\n  bucket  age  distinct  capacity  overflow  fp_rate_now"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[{"), std::string::npos) << "no raw JSON in the text view: " << r.out;
  r = run_shmtool({"window", "info", g.name, "ads", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"error\":0.01,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"bucket_seconds\":86400,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"buckets\":[{\"bucket\":"), std::string::npos) << r.out;
}
