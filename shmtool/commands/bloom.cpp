// shmtool/commands/bloom.cpp: shmtool bloom create|add|check|info, and the Bloom describer.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/describe.h"
#include "cli/input.h"
#include "cli/json.h"
#include "cli/numbers.h"
#include "cli/segment.h"
#include "shmfilter/bloom.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

constexpr size_t kBatch = 8192;  // stdin keys per add_many/contains_many call

using shmfilter::Bloom;
using shmfilter::BloomLayout;
using shmfilter::BloomOptions;
using shmfilter::BloomStats;
using shmfilter::Segment;

std::string fmt(double v, const char* f = "%.6g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

Json describe(const BloomStats& st) {
  Json j;
  j.add("layout", std::string(shmfilter::bloom_layout_name(st.layout)));
  j.add("capacity", st.capacity);
  j.add("error", st.error);
  j.add("scaling", st.growth != 0);
  if (st.growth != 0) {
    j.add("growth", st.growth);
    j.add("tightening", st.tightening);
    j.add("total_capacity", st.total_capacity);
  }
  j.add("fp_bound", st.fp_bound);
  j.add("layers", st.layers);
  j.add("max_layers", st.max_layers);
  j.add("bits", st.bits);
  j.add("k", st.k);
  j.add("inserted_estimate", static_cast<uint64_t>(std::llround(st.inserted_estimate)));
  j.add("fill_ratio", st.fill_ratio);
  j.add("fp_rate_now", st.fp_rate_now);
  j.add_size("bytes", st.memory_bytes);  // every describer: "bytes", the structure's whole footprint
  j.add("bits_per_element", st.bits_per_element);
  j.add("over_capacity", st.over_capacity);
  j.add("racing_adds", st.racing_adds);
  if (st.layers > 1) {
    std::vector<Json> layers;
    for (const auto& l : st.layer) {
      Json x;
      x.add("capacity", l.capacity).add("error", l.error).add("bits", l.bits).add("k", l.k);
      x.add("inserted_estimate", static_cast<uint64_t>(std::llround(l.inserted_estimate)));
      x.add("fill_ratio", l.fill_ratio).add("fp_rate_now", l.fp_rate_now);
      layers.push_back(x);
    }
    j.add_array("layer", layers);
  }
  return j;
}

void warn_if_over(const std::string& name, const BloomStats& st) {
  if (!st.over_capacity) return;
  std::fprintf(stderr,
               "shmtool: warning: bloom '%s' is over capacity: ~%.0f keys in a filter sized for %llu; "
               "false-positive rate now ~%s (asked %s). Create a larger filter or use --growth.\n",
               name.c_str(), st.inserted_estimate, static_cast<unsigned long long>(st.total_capacity),
               fmt(100 * st.fp_rate_now, "%.3g%%").c_str(), fmt(100 * st.error, "%.3g%%").c_str());
}

Json describe_fields(Segment& seg, const shmfilter::RegionInfo& r) { return describe(Bloom::open(seg, r.name).stats()); }

int run_create(const Args& a) {
  if (!a.has("--capacity")) throw UsageError("missing --capacity (keys the filter must hold, e.g. 150M)");
  BloomOptions o;
  o.capacity = parse_count("--capacity", a.get("--capacity"));
  o.error = real_option(a, "--error", 0.01);
  std::string layout = a.get("--layout", "blocked");
  if (layout == "blocked")
    o.layout = BloomLayout::kBlocked;
  else if (layout == "classic")
    o.layout = BloomLayout::kClassic;
  else
    throw UsageError("unknown layout '" + layout + "': use blocked or classic");
  o.growth = real_option(a, "--growth", o.growth);
  o.tightening = real_option(a, "--tightening", o.tightening);
  o.max_layers = static_cast<uint32_t>(uint_option(a, "--max-layers", o.max_layers, 1, UINT32_MAX));
  if (a.has("--seed")) o.seed = count_option(a, "--seed", 0);
  Bloom::plan(o);  // parameter errors before touching the segment
  return create_and_show(a, shmfilter::Kind::kBloom, [&](Segment& seg, const std::string& name) {
    Bloom::create(seg, name, o);
  });
}

// KEY arguments: one line each; stdin: batches of 8192 lines and the totals.
int add_or_check(const Args& a, bool add) {
  Bloom b = open_structure<Bloom>(a);
  const std::string& name = b.name();
  const auto& pos = a.positionals();
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i) {
      bool r = add ? b.add(std::string_view(pos[i])) : b.contains(std::string_view(pos[i]));
      std::printf("%s\t%s\n", shmfilter::escape_text(pos[i]).c_str(),
                  add ? (r ? "added" : "already present") : (r ? "present" : "absent"));
    }
  } else {
    uint64_t hits = 0, total = 0;
    std::vector<uint8_t> out(kBatch);
    for_each_stdin_batch(kBatch, [&](std::span<const std::string_view> keys) {
      std::span<uint8_t> o(out.data(), keys.size());
      hits += add ? b.add_many(keys, o) : b.contains_many(keys, o);
      total += keys.size();
    });
    if (add)
      std::printf("added %llu, already present %llu\n", static_cast<unsigned long long>(hits),
                  static_cast<unsigned long long>(total - hits));
    else
      std::printf("present %llu, absent %llu\n", static_cast<unsigned long long>(hits),
                  static_cast<unsigned long long>(total - hits));
  }
  if (!b.valid()) throw shmfilter::Error(shmfilter::ErrorCode::kDropped, "bloom '" + name + "' was dropped meanwhile");
  warn_if_over(name, b.stats());
  return 0;
}

int run_add(const Args& a) { return add_or_check(a, true); }
int run_check(const Args& a) { return add_or_check(a, false); }

int run_info(const Args& a) {
  show_info(a, shmfilter::Kind::kBloom);
  warn_if_over(a.at(1, "NAME"), open_structure<Bloom>(a).stats());
  return 0;
}

SHMTOOL_COMMAND("bloom create", run_create, R"(create a Bloom filter
Usage: shmtool bloom create SEG NAME --capacity N [--error P] [--layout blocked|classic] [--growth G] [--tightening R] [--json]

Creates a Bloom filter NAME in segment SEG sized for N keys at false-positive
rate P and prints what it made (as 'bloom info' does).

Options:
  --capacity N     keys at the target rate (150M, 1.2e8, 64k); required
  --error P        target false-positive rate in (0,1); default 0.01
  --layout L       blocked (default: one cache line per key, ~10 bits/key at 1%)
                   or classic (k independent probes, 9.59 bits/key at 1%)
  --growth G       scale: add a layer of capacity x G when full (G in [1,16]); default: fixed size
  --tightening R   layer i gets error P x R^i (default 0.5); total bound P/(1-R)
  --max-layers M   layers at most with --growth (default 32)
  --seed S         fixed hash seed (tests); default random
  --json           print the new filter as one JSON object
Example:
  shmtool bloom create freq plan42 --capacity 150M --error 0.01
)");

SHMTOOL_COMMAND("bloom add", run_add, R"(add keys to a Bloom filter
Usage: shmtool bloom add SEG NAME [KEY...]

Adds each KEY (prints 'KEY<TAB>added' or 'KEY<TAB>already present'), or, with no KEY,
every line of stdin in batches (prints 'added N, already present M').
Warns on stderr when the filter is over capacity.

Example:
  cut -d' ' -f2 ids.txt | shmtool bloom add freq plan42
)");

SHMTOOL_COMMAND("bloom check", run_check, R"(test keys against a Bloom filter
Usage: shmtool bloom check SEG NAME [KEY...]

Tests each KEY (prints 'KEY<TAB>present' or 'KEY<TAB>absent'), or, with no KEY, every
line of stdin in batches (prints 'present N, absent M'). 'present' may be a false positive
at the filter's rate; 'absent' is always exact.

Example:
  shmtool bloom check freq plan42 0123456789abcdef
)");

SHMTOOL_STRUCTURE(shmfilter::Kind::kBloom, describe_fields, "show a Bloom filter's parameters and fill",
                  "Prints layout, capacity, layers, bits, k, inserted estimate, fill ratio, the false-positive\n"
                  "rate estimated from the fill right now, memory, bits per element and the over-capacity\n"
                  "flag, and warns on stderr when the filter is over capacity.",
                  "freq plan42", run_info);

}  // namespace
}  // namespace shmtool
