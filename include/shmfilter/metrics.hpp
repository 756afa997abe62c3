// shmfilter/metrics.hpp: a segment's numbers as Prometheus text, for any process to serve.
//
// prometheus_text(seg) is what `shmtool stats SEG --prometheus` prints and what
// an nginx module or sidecar returns on /metrics: the segment's size, use,
// quarantine, processes alive and dead attachments, then every structure's
// bytes, capacity, fill, FP estimate, over-capacity flag and the kind's own
// counters, each family with HELP and TYPE lines (text exposition format
// 0.0.4). Metric names and labels are stable: docs/metrics.md lists them.
//
// Concurrency: lock-free reads of the directory and of each structure's
// stats() (numbers may be slightly stale); takes no segment lock, so a
// scrape never waits for a control-plane operation. A structure that fails
// to open (dropped meanwhile, corrupt) is reported by
// shmfilter_structure_error{...} 1 instead of its numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shmfilter/segment.hpp"

namespace shmfilter {

// What a scrape shows, so that it stays small and fast at any number of structures or
// plans (docs/metrics.md, "Bounded scrapes"). The segment's families and the per-kind
// aggregates (shmfilter_kind_*: every structure, counted from the directory without
// opening any) are always there. Per-structure series (shmfilter_structure_* and the
// kind's own families) go to `max_structures` structures: the kinds present take turns,
// each giving its largest next (directory region bytes, ties: directory order), so every
// kind shows its largest beside 8,000 of another; as long as the text stays within
// `max_bytes`; every other structure is counted in its kind's "other" row
// (shmfilter_other_structures / shmfilter_other_region_bytes). Per-space (per-plan)
// series of keyed kinds are opt-in: `max_spaces` spaces at most per structure.
// With the defaults a segment of 8,000 structures scrapes to under 100 KB.
struct MetricsOptions {
  uint32_t max_structures = 64;  // structures with their own series (0: none, only the aggregates)
  uint32_t max_spaces = 0;       // per-space series per keyed structure (0: none; opt-in)
  uint64_t max_bytes = 96000;    // the text's size bound (the aggregates are always printed; >= 16384)
};
inline constexpr uint64_t kMetricsMinBytes = 16384;

// The whole exposition text for one segment (ends with a newline), with the defaults.
std::string prometheus_text(Segment& seg);
// The same, bounded as OPTS says (throws kInvalidArgument for max_bytes < kMetricsMinBytes).
std::string prometheus_text(Segment& seg, const MetricsOptions& opts);

// The shared numbers of one structure, as the shmfilter_structure_* families show them.
struct StructureMetrics {
  RegionInfo region;
  uint64_t bytes = 0;             // region + extents
  uint64_t capacity = 0;          // items sized for; 0 when unbounded (roaring, hll)
  double items = 0;               // exact, or estimated (bloom from its fill, hll)
  double fill_ratio = 0;          // bloom set bits/bits; cuckoo, set: load; roaring: delta fill; hll: registers touched
  double fp_rate_estimate = 0;    // from the fill right now; 0 for exact kinds
  bool over_capacity = false;
  std::string error;              // non-empty: the structure could not be read (the numbers are 0)
};
// One entry per directory entry, in directory order. Lock-free, like prometheus_text.
std::vector<StructureMetrics> structure_metrics(Segment& seg);

}  // namespace shmfilter
