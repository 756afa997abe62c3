// shmtool/commands/bloom.cpp: shmtool bloom create|add|check|info, and the Bloom describer.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/segment_util.h"
#include "shmfilter/bloom.hpp"

namespace shmtool {
namespace {

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

Json& describe(Json& j, const BloomStats& st) {
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
  j.add("memory_bytes", st.memory_bytes);
  j.add("memory", shmfilter::format_size(st.memory_bytes));
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

// Batches stdin lines into add_many/contains_many; returns (hits, total).
template <class Fn>
std::pair<uint64_t, uint64_t> stream_stdin(Fn&& batch_fn) {
  constexpr size_t kLines = 8192;
  std::string arena;
  std::vector<size_t> ends;
  std::vector<std::string_view> views;
  std::vector<uint8_t> out(kLines);
  arena.reserve(kLines * 24);
  ends.reserve(kLines);
  views.reserve(kLines);
  uint64_t hits = 0, total = 0;
  auto flush = [&] {
    views.clear();
    size_t start = 0;
    for (size_t e : ends) {
      views.emplace_back(arena.data() + start, e - start);
      start = e;
    }
    hits += batch_fn(std::span<const std::string_view>(views), std::span<uint8_t>(out.data(), views.size()));
    total += views.size();
    arena.clear();
    ends.clear();
  };
  for_each_stdin_line([&](std::string_view line, uint64_t) {
    arena.append(line);
    ends.push_back(arena.size());
    if (ends.size() == kLines) flush();
  });
  if (!ends.empty()) flush();
  return {hits, total};
}

int cmd_create(const Args& a) {
  a.allow({"--capacity", "--error", "--layout", "--growth", "--tightening", "--max-layers", "--seed"});
  const std::string& seg_name = a.at(0, "SEG");
  const std::string& name = a.at(1, "NAME");
  if (a.positionals().size() > 2) throw UsageError("unexpected argument '" + a.positionals()[2] + "'");
  if (!a.has("--capacity")) throw UsageError("missing --capacity (keys the filter must hold, e.g. 150M)");
  BloomOptions o;
  o.capacity = parse_count("--capacity", a.get("--capacity"));
  o.error = parse_real("--error", a.get("--error", "0.01"));
  std::string layout = a.get("--layout", "blocked");
  if (layout == "blocked")
    o.layout = BloomLayout::kBlocked;
  else if (layout == "classic")
    o.layout = BloomLayout::kClassic;
  else
    throw UsageError("unknown layout '" + layout + "': use blocked or classic");
  if (a.has("--growth")) o.growth = parse_real("--growth", a.get("--growth"));
  if (a.has("--tightening")) o.tightening = parse_real("--tightening", a.get("--tightening"));
  if (a.has("--max-layers")) o.max_layers = static_cast<uint32_t>(parse_count("--max-layers", a.get("--max-layers")));
  if (a.has("--seed")) o.seed = parse_count("--seed", a.get("--seed"));
  Bloom::plan(o);  // parameter errors before touching the segment
  Segment seg = open_segment(seg_name, a);
  Bloom b = Bloom::create(seg, name, o);
  BloomStats st = b.stats();
  std::printf("created bloom '%s' in %s: %s, capacity %llu, error %s, %llu bits (%s), k=%u, %.2f bits/key%s\n",
              name.c_str(), seg_name.c_str(), std::string(shmfilter::bloom_layout_name(st.layout)).c_str(),
              static_cast<unsigned long long>(st.capacity), fmt(st.error).c_str(),
              static_cast<unsigned long long>(st.bits), shmfilter::format_size(st.memory_bytes).c_str(), st.k,
              static_cast<double>(st.layer[0].bits) / static_cast<double>(st.capacity),
              st.growth != 0 ? (", scaling x" + fmt(st.growth) + " r=" + fmt(st.tightening) +
                                " (bound " + fmt(st.fp_bound) + ")").c_str()
                             : "");
  return 0;
}

int cmd_add_or_check(const Args& a, bool add) {
  a.allow({});
  const std::string& seg_name = a.at(0, "SEG");
  const std::string& name = a.at(1, "NAME");
  Segment seg = open_segment(seg_name, a);
  Bloom b = Bloom::open(seg, name);
  const auto& pos = a.positionals();
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i) {
      bool r = add ? b.add(std::string_view(pos[i])) : b.contains(std::string_view(pos[i]));
      std::printf("%s\t%s\n", pos[i].c_str(), add ? (r ? "added" : "already present") : (r ? "present" : "absent"));
    }
  } else {
    auto [hits, total] = add ? stream_stdin([&](std::span<const std::string_view> k, std::span<uint8_t> o) {
      return b.add_many(k, o);
    })
                             : stream_stdin([&](std::span<const std::string_view> k, std::span<uint8_t> o) {
                                 return b.contains_many(k, o);
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

int cmd_info(const Args& a) {
  a.allow({"--json"});
  const std::string& seg_name = a.at(0, "SEG");
  const std::string& name = a.at(1, "NAME");
  Segment seg = open_segment(seg_name, a);
  Bloom b = Bloom::open(seg, name);
  BloomStats st = b.stats();
  Json j;
  j.add("name", name).add("kind", "bloom");
  print_object(describe(j, st), a.has("--json"));
  warn_if_over(name, st);
  return 0;
}

const CommandRegistrar create_cmd(Command{
    "bloom", "create", "shmtool bloom create SEG NAME --capacity N [--error P] [--layout blocked|classic] [--growth G] [--tightening R]",
    "create a Bloom filter",
    "Creates a Bloom filter NAME in segment SEG sized for N keys at false-positive rate P.\n"
    "  --capacity N     keys at the target rate (150M, 1.2e8, 64k); required\n"
    "  --error P        target false-positive rate in (0,1); default 0.01\n"
    "  --layout L       blocked (default: one cache line per key, ~10 bits/key at 1%)\n"
    "                   or classic (k independent probes, 9.59 bits/key at 1%)\n"
    "  --growth G       scale: add a layer of capacity x G when full (G in [1,16]); default: fixed size\n"
    "  --tightening R   layer i gets error P x R^i (default 0.5); total bound P/(1-R)\n"
    "  --max-layers M   layers at most with --growth (default 32)\n"
    "  --seed S         fixed hash seed (tests); default random\n"
    "Example: shmtool bloom create freq plan42 --capacity 150M --error 0.01",
    {},
    cmd_create});

const CommandRegistrar add_cmd(Command{
    "bloom", "add", "shmtool bloom add SEG NAME [KEY...]", "add keys to a Bloom filter",
    "Adds each KEY (prints 'KEY<TAB>added' or 'KEY<TAB>already present'), or, with no KEY,\n"
    "every line of stdin in batches (prints 'added N, already present M').\n"
    "Warns on stderr when the filter is over capacity.\n"
    "Example: cut -d' ' -f2 ids.txt | shmtool bloom add freq plan42",
    {},
    [](const Args& a) { return cmd_add_or_check(a, true); }});

const CommandRegistrar check_cmd(Command{
    "bloom", "check", "shmtool bloom check SEG NAME [KEY...]", "test keys against a Bloom filter",
    "Tests each KEY (prints 'KEY<TAB>present' or 'KEY<TAB>absent'), or, with no KEY, every\n"
    "line of stdin in batches (prints 'present N, absent M'). 'present' may be a false positive\n"
    "at the filter's rate; 'absent' is always exact.\n"
    "Example: shmtool bloom check freq plan42 0123456789abcdef",
    {},
    [](const Args& a) { return cmd_add_or_check(a, false); }});

const CommandRegistrar info_cmd(Command{
    "bloom", "info", "shmtool bloom info SEG NAME [--json]", "show a Bloom filter's parameters and fill",
    "Prints layout, capacity, layers, bits, k, inserted estimate, fill ratio, the false-positive\n"
    "rate estimated from the fill right now, memory, bits per element and the over-capacity flag.\n"
    "  --json   one JSON object\n"
    "Example: shmtool bloom info freq plan42 --json",
    {"--json"},
    cmd_info});

const DescriberRegistrar describer(Describer{
    shmfilter::Kind::kBloom, [](Segment& seg, const shmfilter::RegionInfo& r) {
      Json j;
      return describe(j, Bloom::open(seg, r.name).stats());
    }});

}  // namespace
}  // namespace shmtool
