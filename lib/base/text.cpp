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
