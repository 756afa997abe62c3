// shmtool/cli/numbers.cpp: number parsing for options.
#include "cli/numbers.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"

namespace shmtool {

uint64_t parse_count(const std::string& opt, const std::string& text) {
  if (text.empty()) throw UsageError(opt + " needs a number");
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  std::string suffix(end);
  double mul = 1;
  if (suffix == "k" || suffix == "K") mul = 1e3;
  else if (suffix == "M" || suffix == "m") mul = 1e6;
  else if (suffix == "G" || suffix == "g") mul = 1e9;
  else if (suffix == "T" || suffix == "t") mul = 1e12;
  else if (!suffix.empty()) throw UsageError(opt + " '" + text + "' is not a count (e.g. 150M, 1e8, 2000000)");
  v *= mul;
  // Every range is checked on the double, before it is converted (an out-of-range double
  // converted to an integer is undefined behaviour).
  if (end == text.c_str() || std::isnan(v))
    throw UsageError(opt + " '" + text + "' is not a number: pass a whole count (e.g. 150M, 1e8, 2000000)");
  if (v < 0) throw UsageError(opt + " '" + text + "' is negative: pass a whole count (e.g. 150M, 1e8, 2000000)");
  if (std::isinf(v) || (errno == ERANGE && v > 1) || v >= 18446744073709551616.0)
    throw UsageError(opt + " '" + text + "' is too large: a count is below 2^64 (1.8e19)");
  if (v != std::floor(v)) throw UsageError(opt + " '" + text + "' is not a whole count (e.g. 150M, 1e8, 2000000)");
  return static_cast<uint64_t>(v);
}

double parse_real(const std::string& opt, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v))
    throw UsageError(opt + " '" + text + "' is not a number");
  return v;
}

double parse_rate(const std::string& opt, const std::string& text) {
  double v = parse_real(opt, text);
  if (!(v > 0.0 && v < 1.0)) throw UsageError(opt + " '" + text + "' must be a number in (0, 1), e.g. 0.002");
  return v;
}

uint64_t count_option(const Args& args, const std::string& opt, uint64_t fallback) {
  return args.has(opt) ? parse_count(opt, args.get(opt)) : fallback;
}

double real_option(const Args& args, const std::string& opt, double fallback) {
  return args.has(opt) ? parse_real(opt, args.get(opt)) : fallback;
}

uint64_t size_option(const Args& args, const std::string& opt, uint64_t fallback) {
  if (!args.has(opt)) return fallback;
  try {
    return shmfilter::parse_size(args.get(opt));
  } catch (const shmfilter::Error& e) {
    throw UsageError(opt + ": " + e.what());
  }
}

uint64_t uint_option(const Args& args, const std::string& opt, uint64_t fallback, uint64_t lo, uint64_t hi,
                     int base) {
  if (!args.has(opt)) return fallback;
  const std::string text = args.get(opt);
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, base);
  if (text.empty() || text[0] == '-' || text[0] == '+' || *end != '\0' || errno != 0 || v < lo || v > hi) {
    char range[96];
    if (base == 8)
      std::snprintf(range, sizeof range, "an octal number from 0%llo to 0%llo", static_cast<unsigned long long>(lo),
                    static_cast<unsigned long long>(hi));
    else
      std::snprintf(range, sizeof range, "an integer from %llu to %llu", static_cast<unsigned long long>(lo),
                    static_cast<unsigned long long>(hi));
    throw UsageError(opt + " '" + text + "' is invalid: pass " + range);
  }
  return v;
}

}  // namespace shmtool
