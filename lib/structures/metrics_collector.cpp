// lib/structures/metrics_collector.cpp: value formatting of the Prometheus text format
// (metrics_collector.h; label values are escaped by base/text.h's escape_label).
#include "structures/metrics_collector.h"

#include <cmath>
#include <cstdio>

namespace shmfilter::internal {

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
