// shmtool/cli/segment_util.h: helpers shared by shmtool's commands: opening the
// segment named on the command line (with --file), parsing sizes and counts
// into UsageErrors, and rendering a describer's object on one line.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cli/command.h"
#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"

namespace shmtool {

// The text every segment command's help shares about --file.
inline constexpr const char* kFileOptionHelp =
    "  --file PATH      the segment is backed by this regular file (persistent across\n"
    "                   restarts) instead of /dev/shm/NAME; pass the same PATH to every command\n";

// Counts: "150M", "1.2e8", "64k", "2000000" (k/M/G/T are powers of 1000); a
// whole, non-negative number, else a UsageError naming the option.
inline uint64_t parse_count(const std::string& opt, const std::string& text) {
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
  if (end == text.c_str() || errno != 0 || !(v >= 0) || v > 1.8e19 || v != std::floor(v))
    throw UsageError(opt + " '" + text + "' is not a whole count (e.g. 150M, 1e8, 2000000)");
  return static_cast<uint64_t>(v);
}

// Any finite number, else a UsageError naming the option (range checks are the library's).
inline double parse_real(const std::string& opt, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v))
    throw UsageError(opt + " '" + text + "' is not a number");
  return v;
}

// A rate in (0, 1), e.g. a false-positive target.
inline double parse_rate(const std::string& opt, const std::string& text) {
  double v = parse_real(opt, text);
  if (!(v > 0.0 && v < 1.0)) throw UsageError(opt + " '" + text + "' must be a number in (0, 1), e.g. 0.002");
  return v;
}

inline shmfilter::OpenOptions open_options(const Args& args) {
  shmfilter::OpenOptions o;
  o.file = args.get("--file");
  return o;
}

// Rethrows e with the segment's name in front unless the message names it already.
[[noreturn]] inline void rethrow_naming(const shmfilter::Error& e, const std::string& name) {
  std::string msg = e.what();
  if (msg.find(name) != std::string::npos) throw e;
  throw shmfilter::Error(e.code(), "segment '" + name + "': " + msg);
}

// Opens NAME (honouring --file); every error names the segment.
inline shmfilter::Segment open_segment(const std::string& name, const Args& args) {
  try {
    return shmfilter::Segment::open(name, open_options(args));
  } catch (const shmfilter::Error& e) {
    rethrow_naming(e, name);
  }
}

// Rejects positionals past the first `expected`.
inline void no_extra_positionals(const Args& args, size_t expected) {
  if (args.positionals().size() > expected)
    throw UsageError("unexpected argument '" + args.positionals()[expected] + "'");
}

// --opt SIZE parsed with shmfilter::parse_size; bad text is a UsageError naming the option.
inline uint64_t size_option(const Args& args, const std::string& opt, uint64_t fallback) {
  if (!args.has(opt)) return fallback;
  try {
    return shmfilter::parse_size(args.get(opt));
  } catch (const shmfilter::Error& e) {
    throw UsageError(opt + ": " + e.what());
  }
}

// --opt N: an integer in [lo, hi] (decimal; octal with base 8), else a UsageError naming the option.
inline uint64_t uint_option(const Args& args, const std::string& opt, uint64_t fallback, uint64_t lo,
                            uint64_t hi, int base = 10) {
  if (!args.has(opt)) return fallback;
  const std::string text = args.get(opt);
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, base);
  if (text.empty() || text[0] == '-' || text[0] == '+' || *end != '\0' || errno != 0 || v < lo || v > hi) {
    char range[96];
    if (base == 8)
      snprintf(range, sizeof range, "an octal number from 0%llo to 0%llo", static_cast<unsigned long long>(lo),
               static_cast<unsigned long long>(hi));
    else
      snprintf(range, sizeof range, "an integer from %llu to %llu", static_cast<unsigned long long>(lo),
               static_cast<unsigned long long>(hi));
    throw UsageError(opt + " '" + text + "' is invalid: pass " + range);
  }
  return v;
}

inline const Describer* describer_for(shmfilter::Kind kind) {
  for (const auto& d : describers())
    if (d.kind == kind) return &d;
  return nullptr;
}

// {"a":1,"b":"x","c":{...}} -> a=1 b=x c={...} (top level only; strings unquoted
// when they hold no space).
inline std::string one_line(const Json& obj) {
  std::string s = obj.str(), out, item;
  int depth = 0;
  bool in_str = false;
  auto flush = [&] {
    // item is "key":value
    size_t colon = std::string::npos;
    bool q = false;
    for (size_t i = 0; i < item.size(); ++i) {
      if (item[i] == '\\' && q) { ++i; continue; }
      if (item[i] == '"') q = !q;
      if (item[i] == ':' && !q) { colon = i; break; }
    }
    if (colon == std::string::npos) return;
    std::string key = item.substr(1, colon - 2), val = item.substr(colon + 1);
    if (val.size() >= 2 && val.front() == '"' && val.find(' ') == std::string::npos &&
        val.find('\\') == std::string::npos)
      val = val.substr(1, val.size() - 2);
    out += (out.empty() ? "" : " ") + key + "=" + val;
    item.clear();
  };
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    char c = s[i];
    if (in_str) {
      item += c;
      if (c == '\\') item += s[++i];
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      flush();
      continue;
    }
    item += c;
  }
  if (!item.empty()) flush();
  return out;
}

// Describes one structure with its kind's describer; errors become {"error": "..."}.
// `shmtool KIND info SEG NAME [--json]`: the object the kind's describer makes
// (the same one `dump` shows). Errors propagate: a missing or wrong-kind name exits 1.
inline int run_info(const Args& args, shmfilter::Kind kind) {
  args.allow({"--json"});
  shmfilter::Segment seg = open_segment(args.at(0, "SEG"), args);
  const shmfilter::RegionInfo info = seg.open_region(args.at(1, "NAME"), kind);
  const Describer* d = describer_for(kind);
  if (d == nullptr) throw shmfilter::Error(shmfilter::ErrorCode::kInvalidArgument, "no describer for this kind");
  print_object(d->describe(seg, info), args.has("--json"));
  return 0;
}

inline Json describe_region(shmfilter::Segment& seg, const shmfilter::RegionInfo& r) {
  const Describer* d = describer_for(r.kind);
  if (d == nullptr) return Json();
  try {
    return d->describe(seg, r);
  } catch (const std::exception& e) {
    return Json().add("error", e.what());
  }
}

}  // namespace shmtool
