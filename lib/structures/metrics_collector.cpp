// lib/structures/metrics_collector.cpp: label escaping and value formatting of the
// Prometheus text format (metrics_collector.h).
#include "structures/metrics_collector.h"

#include <cmath>
#include <cstdio>

namespace shmfilter::internal {

std::string escape_label(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\') { out += "\\\\"; ++i; continue; }
    if (c == '"') { out += "\\\""; ++i; continue; }
    if (c == '\n') { out += "\\n"; ++i; continue; }
    if (c < 0x80) { out += static_cast<char>(c); ++i; continue; }
    size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    bool ok = len != 0 && i + len <= s.size();
    for (size_t j = 1; ok && j < len; ++j) ok = (static_cast<unsigned char>(s[i + j]) & 0xc0) == 0x80;
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace shmfilter::internal
