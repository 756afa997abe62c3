// lib/base/text.cpp: parse_size / format_size (see text.h).
#include "base/text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "shmfilter/error.hpp"

namespace shmfilter {
namespace {

[[noreturn]] void fail(ErrorCode code, const std::string& msg) { throw Error(code, msg); }

}  // namespace

uint64_t parse_size(std::string_view text) {
  auto bad = [&](const std::string& why) {
    fail(ErrorCode::kInvalidArgument, "size '" + std::string(text) + "' " + why +
                                          ": write a number with an optional unit, e.g. 4096, 64k, 64m, 512MiB, 2GiB, 1.5G");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string num(text.substr(0, i));
  std::string unit(text.substr(i));
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  if (num.empty() || num == "." || std::count(num.begin(), num.end(), '.') > 1) bad("is not a number");
  long double value = std::strtold(num.c_str(), nullptr);
  long double mult = 1;
  static const std::pair<const char*, long double> units[] = {
      {"", 1},         {"B", 1},
      {"k", 1024.0L},  {"K", 1024.0L},  {"KiB", 1024.0L},  {"KB", 1e3L},  {"kB", 1e3L},
      {"m", 1048576.0L}, {"M", 1048576.0L}, {"MiB", 1048576.0L}, {"MB", 1e6L},
      {"g", 1073741824.0L}, {"G", 1073741824.0L}, {"GiB", 1073741824.0L}, {"GB", 1e9L},
      {"t", 1099511627776.0L}, {"T", 1099511627776.0L}, {"TiB", 1099511627776.0L}, {"TB", 1e12L}};
  bool found = false;
  for (const auto& [u, m] : units)
    if (unit == u) {
      mult = m;
      found = true;
    }
  if (!found) bad("has an unknown unit '" + unit + "'");
  long double bytes = value * mult;
  if (bytes > 18446744073709549568.0L) bad("is too large");
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string format_size(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace shmfilter

// ---- output encoding (text.h) ------------------------------------------------------

namespace shmfilter {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_x(std::string& out, unsigned char c) {
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 15];
}

// The code point of a valid sequence of LEN bytes at P.
uint32_t decode(const unsigned char* p, size_t len) noexcept {
  switch (len) {
    case 1: return p[0];
    case 2: return (uint32_t{p[0]} & 0x1f) << 6 | (p[1] & 0x3f);
    case 3: return (uint32_t{p[0]} & 0x0f) << 12 | (uint32_t{p[1]} & 0x3f) << 6 | (p[2] & 0x3f);
    default:
      return (uint32_t{p[0]} & 0x07) << 18 | (uint32_t{p[1]} & 0x3f) << 12 | (uint32_t{p[2]} & 0x3f) << 6 |
             (p[3] & 0x3f);
  }
}

// Code points a terminal acts on or that reorder what is shown (Trojan Source).
bool unsafe_code_point(uint32_t cp) noexcept {
  return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

size_t utf8_sequence(std::string_view s, size_t i) noexcept {
  if (i >= s.size()) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  const size_t left = s.size() - i;
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  auto cont = [&](size_t j) { return j < left && (p[j] & 0xc0) == 0x80; };
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xe0 && p[1] < 0xa0) return 0;   // overlong
    if (c == 0xed && p[1] >= 0xa0) return 0;  // surrogates U+D800..U+DFFF
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xf0 && p[1] < 0x90) return 0;   // overlong
    if (c == 0xf4 && p[1] >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;  // 80..C1 (continuation, overlong 2-byte lead), F5..FF
}

bool valid_utf8(std::string_view s) noexcept {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Walks s sequence by sequence: invalid(i) for a byte that starts no valid UTF-8 sequence,
// code_point(i, n, cp) for each valid one. Every escaper below is this walk plus its policy.
template <class Invalid, class CodePoint>
void walk_utf8(std::string_view s, Invalid&& invalid, CodePoint&& code_point) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      invalid(p[i]);
      ++i;
      continue;
    }
    code_point(i, n, decode(p + i, n));
    i += n;
  }
}

std::string escape_text(std::string_view s, bool keep_newlines) {
  std::string out;
  out.reserve(s.size());
  walk_utf8(
      s, [&](unsigned char byte) { append_x(out, byte); },
      [&](size_t i, size_t n, uint32_t cp) {
        if (cp == '\\') {
          out += "\\\\";
        } else if (keep_newlines && (cp == '\n' || cp == '\t')) {
          out += static_cast<char>(cp);
        } else if (unsafe_code_point(cp)) {
          for (size_t j = 0; j < n; ++j) append_x(out, static_cast<unsigned char>(s[i + j]));
        } else {
          out.append(s.substr(i, n));
        }
      });
  return out;
}

std::string escape_json(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  walk_utf8(
      s, [&](unsigned char) { out += "\xef\xbf\xbd"; },  // U+FFFD
      [&](size_t i, size_t n, uint32_t cp) {
        if (cp == '"' || cp == '\\') {
          out += '\\';
          out += static_cast<char>(cp);
        } else if (unsafe_code_point(cp)) {
          char buf[16];  // "\\u" and 4 hex digits (unsafe code points are below U+10000); room the compiler can see
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
          out += buf;
        } else {
          out.append(s.substr(i, n));
        }
      });
  return out;
}

std::string escape_label(std::string_view s) {
  const std::string shown = escape_text(s);  // valid UTF-8, no control character
  std::string out;
  out.reserve(shown.size());
  for (char c : shown) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

std::string hex_bytes(std::string_view s) {
  std::string out;
  out.reserve(2 * s.size());
  for (unsigned char c : s) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace shmfilter
