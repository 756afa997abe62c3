// tests/unit/test_text.cpp: the one escaping policy (include/shmfilter/text.hpp): strict
// UTF-8, the terminal escape, the JSON escape and the Prometheus label escape, each on
// every class of hostile input (#23 "Every text output is safe").
#include <cstdint>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "shmfilter/text.hpp"

using namespace shmfilter;

namespace {

// No control character (C0, DEL, C1) in S, and S is strict UTF-8 (with allow_newline,
// newlines and tabs pass, as escape_text(s, true) keeps them).
bool safe(const std::string& s, bool allow_newline = false) {
  if (!valid_utf8(s)) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && !(allow_newline && (c == '\n' || c == '\t'))) || c == 0x7f) return false;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xa0) return false;  // C1
  }
  return true;
}

// Each class the review named, and the edges of every UTF-8 rule.
const std::string kInvalid[] = {
    "\xed\xa0\x80",          // surrogate U+D800
    "\xed\xbf\xbf",          // surrogate U+DFFF
    "\xc0\xaf",              // overlong '/'
    "\xc1\xbf",              // overlong
    "\xe0\x80\xaf",          // overlong 3-byte
    "\xe0\x9f\xbf",          // overlong 3-byte (U+07FF)
    "\xf0\x80\x80\xaf",      // overlong 4-byte
    "\xf0\x8f\xbf\xbf",      // overlong 4-byte (U+FFFF)
    "\xf4\x90\x80\x80",      // U+110000
    "\xf5\x80\x80\x80",      // F5 lead
    "\xf8\x88\x80\x80\x80",  // 5-byte form
    "\xff",                  // FF
    "\xfe",                  // FE
    "\x80",                  // stray continuation
    "\xe6\x97",              // truncated
    "\xc3",                  // truncated at the end
};
const std::string kValid[] = {"",
                              "plan:17",
                              "\xe6\x97\xa5",
                              "\xc3\xa9",
                              "\xf0\x9f\x98\x80",
                              "\xef\xbf\xbd",
                              "\xed\x9f\xbf" /* U+D7FF */,
                              "\xee\x80\x80" /* U+E000 */,
                              "\xf4\x8f\xbf\xbf" /* U+10FFFF */,
                              "\xe0\xa0\x80" /* U+0800 */,
                              "\xc2\xa0"};

}  // namespace

TEST(Text, StrictUtf8RejectsSurrogatesOverlongsAndOutOfRangeLeads) {
  for (const std::string& s : kInvalid) EXPECT_FALSE(valid_utf8(s)) << hex_bytes(s);
  for (const std::string& s : kValid) EXPECT_TRUE(valid_utf8(s)) << hex_bytes(s);
  EXPECT_EQ(utf8_sequence("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(utf8_sequence("\xed\xa0\x80", 0), 0u);
}

TEST(Text, TerminalEscapeShowsControlBytesAndInvalidSequencesAsHex) {
  EXPECT_EQ(escape_text("plan:17"), "plan:17");
  EXPECT_EQ(escape_text("\xe6\x97\xa5"), "\xe6\x97\xa5");
  EXPECT_EQ(escape_text("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
  EXPECT_EQ(escape_text("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(escape_text("a\xed\xa0\x80z"), "a\\xed\\xa0\\x80z");
  EXPECT_EQ(escape_text("\xc2\x9b"
                        "31m"),
            "\\xc2\\x9b31m");  // C1 CSI
  EXPECT_EQ(escape_text("\xe2\x80\xae"
                        "gnp.exe"),
            "\\xe2\\x80\\xaegnp.exe");           // RLO
  EXPECT_EQ(escape_text("a\\x41"), "a\\\\x41");  // reversible: a literal backslash doubles
  EXPECT_EQ(escape_text("a\nb\tc"), "a\\x0ab\\x09c");
  EXPECT_EQ(escape_text("a\nb\tc", true), "a\nb\tc");
  EXPECT_EQ(escape_text(std::string("a\0b", 3)), "a\\x00b");
  for (const std::string& s : kInvalid) EXPECT_TRUE(safe(escape_text(s))) << hex_bytes(s);
}

TEST(Text, JsonEscapeIsValidUtf8AndLosslessForValidText) {
  EXPECT_EQ(escape_json("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(escape_json("\x1b[2J\x7f"), "\\u001b[2J\\u007f");
  EXPECT_EQ(escape_json("\xc2\x9b"), "\\u009b");
  EXPECT_EQ(escape_json("\xe2\x80\xae"), "\\u202e");
  EXPECT_EQ(escape_json("\xe6\x97\xa5"), "\xe6\x97\xa5");
  EXPECT_EQ(escape_json("x\xed\xa0\x80y"), "x\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdy");
  for (const std::string& s : kInvalid) EXPECT_TRUE(safe(escape_json(s))) << hex_bytes(s);
}

TEST(Text, PrometheusLabelReadsAsTheTerminalEscapeAndIsAlwaysValid) {
  EXPECT_EQ(escape_label("plan:17"), "plan:17");
  EXPECT_EQ(escape_label("a\"b"), "a\\\"b");
  // The scraper unescapes \\ to \: the label then reads "\xed\xa0\x80" as shmtool list shows it.
  EXPECT_EQ(escape_label("\xed\xa0\x80"), "\\\\xed\\\\xa0\\\\x80");
  EXPECT_EQ(escape_label("a\nb"), "a\\\\x0ab");
  EXPECT_EQ(escape_label("a\\b"), "a\\\\\\\\b");
  for (const std::string& s : kInvalid) EXPECT_TRUE(safe(escape_label(s))) << hex_bytes(s);
}

// Fixed-seed random bytes: every escape's output is safe, and the terminal escape is
// injective (two different inputs never show the same).
TEST(Text, RandomBytesAlwaysComeOutSafe) {
  std::mt19937_64 rng(20261204);
  std::string prev, prev_shown;
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 12, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 0x20 : 0x80 + rng() % 0x80);
    const std::string shown = escape_text(s);
    ASSERT_TRUE(safe(shown)) << hex_bytes(s);
    ASSERT_TRUE(safe(escape_json(s))) << hex_bytes(s);
    ASSERT_TRUE(safe(escape_label(s))) << hex_bytes(s);
    ASSERT_TRUE(safe(escape_text(s, true), true)) << hex_bytes(s);
    if (s != prev) {
      ASSERT_NE(shown, prev_shown) << hex_bytes(s) << " vs " << hex_bytes(prev);
    }
    prev = s;
    prev_shown = shown;
  }
}
