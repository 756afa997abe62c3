// lib/structures/metrics_collector.h: the Prometheus sample collector the kinds' metrics
// hooks write into (lib/ops/metrics.cpp prints it). A family is declared once (name, type,
// help): the segment's and the shared structure families in metrics.cpp, each kind's own
// in its row (kind.h). Samples are kept per family and printed grouped, as the text
// format requires (all samples of a family together, after its HELP and TYPE lines).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace shmfilter::internal {

struct MetricFamily {
  const char* name;
  const char* type;  // "gauge" or "counter"
  const char* help;
};

// Label values: shmfilter::escape_label (base/text.h), the library's one escaping policy.
std::string format_value(double v);

class MetricsCollector {
 public:
  // labels: already formatted, e.g. segment="s",name="n",kind="bloom"
  void add(const char* family, const std::string& labels, double value) {
    std::string line = std::string(family) + "{" + labels + "} " + format_value(value) + "\n";
    bytes_ += line.size();
    samples_[family].push_back(std::move(line));
  }
  void merge(const MetricsCollector& other) {
    for (const auto& [family, lines] : other.samples_)
      samples_[family].insert(samples_[family].end(), lines.begin(), lines.end());
    bytes_ += other.bytes_;
  }
  // Bytes of the sample lines added so far (HELP and TYPE lines not counted).
  size_t bytes() const { return bytes_; }
  // Per-space (per-plan) series a keyed kind's hook may add per structure: 0 (the
  // default) adds none. Bounded scrapes: shmfilter::MetricsOptions::max_spaces.
  uint32_t max_spaces = 0;
  // The samples of each family in ORDER, with its HELP and TYPE lines; families without samples are left out.
  template <class Families>
  void print(const Families& order, std::string& out) const {
    for (const MetricFamily& f : order) {
      auto it = samples_.find(f.name);
      if (it == samples_.end()) continue;
      out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n");
      out.append("# TYPE ").append(f.name).append(" ").append(f.type).append("\n");
      for (const auto& line : it->second) out += line;
    }
  }

 private:
  std::map<std::string, std::vector<std::string>> samples_;
  size_t bytes_ = 0;
};

}  // namespace shmfilter::internal
