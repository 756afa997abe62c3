// shmtool/commands/advise.cpp: `shmtool advise [FILE]`: measure a sample of
// IDs, draw its histogram (terminal and --svg), size every candidate and
// recommend one (shmfilter::advise, the seed's selection table).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/safe_file.h"
#include "cli/command.h"
#include "cli/input.h"
#include "cli/json.h"
#include "cli/numbers.h"
#include "cli/report.h"
#include "shmfilter/advise.hpp"
#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"

namespace shmtool {
namespace {

using shmfilter::Advice;
using shmfilter::IdProfile;

enum class Format { kAuto, kDecimal, kHex, kString };

bool parse_decimal(std::string_view s, uint64_t& v) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (x > (UINT64_MAX - d) / 10) return false;  // would pass 2^64 - 1
    x = x * 10 + d;
  }
  v = x;
  return true;
}

bool parse_hex(std::string_view s, uint64_t& v) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty() || s.size() > 16) return false;
  uint64_t x = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return false;
    x = x << 4 | static_cast<uint64_t>(d);
  }
  v = x;
  return true;
}

std::string shown(std::string_view line) {
  std::string s(line.substr(0, 40));
  return line.size() > 40 ? s + "..." : s;
}

// Reads the sample: every non-empty line one ID. --format auto: decimal when
// every line is decimal, else hex when every line is hex (16-hex-char device
// IDs), else strings (hashed) unless most lines are numbers, which means a
// bad line: that is an error naming it.
std::vector<uint64_t> read_ids(const Args& a, Format fmt, bool& hashed) {
  std::vector<std::string> lines;
  auto keep = [&](std::string_view line, uint64_t) { lines.emplace_back(line); };
  const auto& pos = a.positionals();
  if (pos.empty() || pos[0] == "-") {
    for_each_stdin_line(keep);
  } else {
    std::string all = read_input(pos[0]);
    size_t start = 0;
    while (start < all.size()) {
      size_t nl = all.find('\n', start);
      std::string_view line(all.data() + start, (nl == std::string::npos ? all.size() : nl) - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty()) keep(line, 0);
      start = nl == std::string::npos ? all.size() : nl + 1;
    }
  }
  const std::string where = pos.empty() || pos[0] == "-" ? "stdin" : "'" + pos[0] + "'";
  if (lines.empty())
    throw shmfilter::Error(shmfilter::ErrorCode::kBadInput,
                           "no IDs in " + where + ": pass a sample with one ID per line (decimal, hex or any string)");
  std::vector<uint64_t> ids(lines.size());
  if (fmt == Format::kAuto) {
    size_t dec = 0, hex = 0;
    uint64_t v;
    for (const auto& l : lines) {
      dec += parse_decimal(l, v);
      hex += parse_hex(l, v);
    }
    if (dec == lines.size())
      fmt = Format::kDecimal;
    else if (hex == lines.size())
      fmt = Format::kHex;
    else if (hex * 10 >= lines.size() * 9)
      fmt = Format::kHex;  // nearly all numbers: the others are bad lines, reported below
    else
      fmt = Format::kString;
  }
  hashed = fmt == Format::kString;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    bool ok = true;
    if (fmt == Format::kDecimal)
      ok = parse_decimal(l, ids[i]);
    else if (fmt == Format::kHex)
      ok = parse_hex(l, ids[i]);
    else
      ids[i] = std::hash<std::string_view>()(l);  // 64-bit string hash: distinct counts only
    if (!ok)
      throw shmfilter::Error(shmfilter::ErrorCode::kBadInput,
                             where + ": ID " + std::to_string(i + 1) + " '" + shown(l) + "' is not a " +
                                 (fmt == Format::kDecimal ? "decimal integer below 2^64" : "hex number of 1-16 digits") +
                                 " like the others: fix or drop that line, or pass --format string to treat "
                                 "every line as an opaque string");
  }
  return ids;
}

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == 0 ? "exact" : "%.3g%%", 100 * v);
  return buf;
}

// 3 significant digits with k/M/G (powers of 1000), never an exponent: 999999 -> "1M".
std::string human_count(double v) {
  static const char* kUnits[] = {"", "k", "M", "G", "T", "P", "E"};
  int u = 0;
  while (u < 6 && std::fabs(v) >= 999.5) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  int decimals = u == 0 || v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {  // 1.50 -> 1.5, 2.00 -> 2
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s + kUnits[u];
}

std::string human_value(uint64_t v, bool hex) {
  char buf[32];
  if (hex)
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  else
    return human_count(static_cast<double>(v));
  return buf;
}

// The command that creates the chosen structure, at the advised capacity.
std::string create_command(const Advice& a, const std::string& name, double error, uint32_t days, bool deletes) {
  const std::string cap = std::to_string(a.capacity);
  char err[32];
  std::snprintf(err, sizeof err, "%g", error);
  if (a.choice == "roaring") return "shmtool roaring create SEG " + name;
  if (a.choice == "bloom") return "shmtool bloom create SEG " + name + " --capacity " + cap + " --error " + err;
  if (a.choice == "cuckoo") return "shmtool cuckoo create SEG " + name + " --capacity " + cap + " --error " + err;
  if (a.choice == "set") return "shmtool set create SEG " + name + " --capacity " + cap;
  if (a.choice == "hll") return "shmtool hll create SEG " + name;
  // The window structure: `capacity` pairs a day, error P over all DAYS days; the default variant
  // (stamped) where the advice sized it, else the ring of day tables (cuckoo when it deletes).
  bool stamped = false;
  for (const auto& c : a.candidates)
    if (c.structure == "window") stamped = c.note.rfind("variant stamped", 0) == 0;
  return "shmtool window create SEG " + name + " --expected " + cap + " --retention " + std::to_string(days) +
         " --error " + err + (stamped ? "" : deletes ? " --variant cuckoo" : " --variant bloom");
}

// ---- the pictures --------------------------------------------------------

// The chosen candidate's memory at capacity (the window: all days + the spare, from Window::plan).
std::string chosen_memory(const Advice& a) {
  for (const auto& c : a.candidates)
    if (c.structure == a.choice) return shmfilter::format_size(c.bytes);
  return "?";
}

std::string bars(const std::vector<uint64_t>& h) {
  static const char* kBlocks[] = {" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
  uint64_t top = 1;
  for (uint64_t x : h) top = std::max(top, x);
  std::string s;
  for (uint64_t x : h) s += kBlocks[x == 0 ? 0 : 1 + (x * 7 + top - 1) / top];
  return s;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

// One bar chart panel: title, y axis with ticks, x labels under chosen bars.
void svg_panel(std::string& s, double x0, double y0, double w, double h, const std::string& title,
               const std::vector<uint64_t>& bins, const std::vector<std::string>& xlabels, const std::string& xtitle,
               const std::string& ytitle, int marker_bin, const std::string& marker_text) {
  char buf[512];
  uint64_t most = 1;
  for (uint64_t b : bins) most = std::max(most, b);
  // The y axis ends at 4 x a round step (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 x 10^k) so tick labels are exact.
  double step = 1;
  for (double decade = 1; step * 4 < static_cast<double>(most); decade *= 10)
    for (double m : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0}) {
      if (decade == 1 && m != static_cast<int>(m)) continue;  // whole counts: no 1.5 or 2.5 steps
      step = m * decade;
      if (step * 4 >= static_cast<double>(most)) break;
    }
  const uint64_t top = static_cast<uint64_t>(step * 4);
  std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" class=\"title\">%s</text>\n", x0, y0 - 14,
                xml_escape(title).c_str());
  s += buf;
  std::snprintf(buf, sizeof buf, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"frame\"/>\n", x0,
                y0, w, h);
  s += buf;
  for (int t = 0; t <= 4; ++t) {  // y ticks at 0, 25, 50, 75, 100% of the tallest bar
    double y = y0 + h - h * t / 4.0;
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" class=\"ytick\">%s</text>\n",
                  x0, y, x0 + w, y, x0 - 6, y + 4, xml_escape(human_count(static_cast<double>(top) * t / 4.0)).c_str());
    s += buf;
  }
  const double bw = w / static_cast<double>(bins.size());
  for (size_t i = 0; i < bins.size(); ++i) {
    double bh = h * static_cast<double>(bins[i]) / static_cast<double>(top);
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"bar\"><title>%s: %llu</title></rect>\n",
                  x0 + bw * static_cast<double>(i) + 0.5, y0 + h - bh, std::max(bw - 1, 0.5), bh,
                  xml_escape(xlabels[i]).c_str(), static_cast<unsigned long long>(bins[i]));
    s += buf;
  }
  const size_t label_every = bins.size() > 20 ? bins.size() / 8 : 1;  // at most ~9 x labels
  for (size_t i = 0; i < bins.size(); i += label_every) {
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" class=\"xtick\">%s</text>\n",
                  x0 + bw * (static_cast<double>(i) + 0.5), y0 + h + 16, xml_escape(xlabels[i]).c_str());
    s += buf;
  }
  if (marker_bin >= 0) {
    double x = x0 + bw * marker_bin;
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"marker\"/>\n"
                  "<text x=\"%.1f\" y=\"%.1f\" class=\"marker-text\" text-anchor=\"end\">%s</text>\n",
                  x, y0, x, y0 + h, x - 5, y0 + 14, xml_escape(marker_text).c_str());
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.1f\" y=\"%.1f\" class=\"axis\">%s</text>\n"
                "<text x=\"%.1f\" y=\"%.1f\" class=\"axis\" transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
                x0 + w / 2, y0 + h + 38, xml_escape(xtitle).c_str(), x0 - 58, y0 + h / 2, x0 - 58, y0 + h / 2,
                xml_escape(ytitle).c_str());
  s += buf;
}

std::string svg(const Advice& a, bool hex) {
  const IdProfile& p = a.profile;
  std::string s =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"720\" viewBox=\"0 0 900 720\">\n"
      "<style>\n"
      "  text { font-family: sans-serif; font-size: 12px; fill: #222; }\n"
      "  .title { font-size: 16px; font-weight: bold; }\n"
      "  .subtitle { font-size: 13px; fill: #444; }\n"
      "  .frame { fill: #fafafa; stroke: #999; }\n"
      "  .grid { stroke: #ddd; }\n"
      "  .bar { fill: #3b75af; }\n"
      "  .ytick { text-anchor: end; font-size: 11px; }\n"
      "  .xtick { text-anchor: middle; font-size: 11px; }\n"
      "  .axis { text-anchor: middle; font-size: 13px; }\n"
      "  .marker { stroke: #c0392b; stroke-width: 2; stroke-dasharray: 6 3; }\n"
      "  .marker-text { fill: #c0392b; font-size: 12px; }\n"
      "</style>\n<rect width=\"900\" height=\"720\" fill=\"white\"/>\n";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<text x=\"450\" y=\"30\" class=\"title\" text-anchor=\"middle\">shmtool advise: %s IDs, %s distinct "
                "(%.1f%% duplicates) &#8594; %s (%s)</text>\n",
                human_count(static_cast<double>(p.lines)).c_str(), human_count(static_cast<double>(p.distinct)).c_str(),
                100 * p.duplicates_ratio, a.choice.c_str(), chosen_memory(a).c_str());
  s += buf;
  std::snprintf(buf, sizeof buf,
                "<text x=\"450\" y=\"50\" class=\"subtitle\" text-anchor=\"middle\">values %s .. %s%s; %llu chunks of "
                "2^16 values, %.0f values per chunk on average</text>\n",
                human_value(p.min, hex).c_str(), human_value(p.max, hex).c_str(),
                p.fits_32 ? " (fit 32 bits)" : " (exceed 32 bits)", static_cast<unsigned long long>(p.chunks),
                p.values_per_chunk);
  s += buf;
  std::vector<std::string> xl;
  const long double span = static_cast<long double>(p.max - p.min) + 1;
  for (size_t i = 0; i < p.value_histogram.size(); ++i)
    xl.push_back(human_value(p.min + static_cast<uint64_t>(span * i / p.value_histogram.size()), hex));
  svg_panel(s, 110, 100, 740, 220, "ID value distribution (64 equal-width bins over min..max)", p.value_histogram, xl,
            "ID value (bin start)", "distinct IDs", -1, "");
  std::vector<std::string> cl;
  for (int i = 0; i <= 16; ++i) cl.push_back(human_count(std::ldexp(1.0, i)));
  svg_panel(s, 110, 420, 740, 220,
            "Per-chunk density: chunks (2^16-value ranges) by how many IDs they hold", p.chunk_histogram, cl,
            "IDs in the chunk (bin from, powers of 2; 65536 = full)", "chunks", 12,
            "4096: array | bitmap container");
  s += "</svg>\n";
  return s;
}

// ---- the command -----------------------------------------------------------

int run_advise(const Args& a) {
  a.no_more_than(1);
  shmfilter::AdviseOptions o;
  o.daily = count_option(a, "--daily", 0);
  if (a.has("--error")) o.error = parse_rate("--error", a.get("--error"));
  o.deletes = a.has("--deletes");
  o.count_only = a.has("--count-only");
  o.window_days = static_cast<uint32_t>(uint_option(a, "--window", 0, 1, 366));
  o.headroom = real_option(a, "--headroom", 1.5);
  std::string f = a.get("--format", "auto");
  Format fmt = f == "auto" ? Format::kAuto : f == "decimal" ? Format::kDecimal : f == "hex" ? Format::kHex
             : f == "string" ? Format::kString : throw UsageError("unknown --format '" + f + "': use auto, decimal, hex or string");
  bool hashed = false;
  std::vector<uint64_t> ids = read_ids(a, fmt, hashed);
  o.hashed_strings = hashed;
  Advice adv = shmfilter::advise(ids, o);
  const IdProfile& p = adv.profile;
  const bool hex = fmt == Format::kHex || (fmt == Format::kAuto && !hashed && p.max >= (uint64_t{1} << 32));
  const std::string name = a.get("--name", "NAME");
  const std::string cmd = create_command(adv, name, o.error, o.window_days, o.deletes);

  if (a.has("--svg")) {
    const std::string path = a.get("--svg");
    // An O_EXCL|O_NOFOLLOW temporary renamed into place (lib/base/safe_file.h): never through a planted link.
    shmfilter::internal::write_file_atomically(path, svg(adv, hex), shmfilter::internal::default_file_mode());
  }

  Json prof;
  prof.add("ids", p.lines).add("distinct", p.distinct).add("duplicates_ratio", p.duplicates_ratio);
  prof.add("min", p.min).add("max", p.max).add("fits_32_bits", p.fits_32).add("hashed_strings", hashed);
  prof.add("chunks", p.chunks).add("values_per_chunk", p.values_per_chunk);
  prof.add("array_containers", p.array_containers).add("bitmap_containers", p.bitmap_containers);
  prof.add("run_containers", p.run_containers).add("sample_roaring_bytes", p.sample_roaring_bytes);
  std::vector<Json> cands;
  for (const auto& c : adv.candidates) {
    Json j;
    j.add("structure", c.structure).add("applicable", c.applicable).add("bytes", c.bytes);
    j.add("fp_rate", c.fp_rate).add("deletes", c.deletes).add("membership", c.membership).add("note", c.note);
    cands.push_back(j);
  }
  if (a.has("--json")) {
    Json j;
    j.add("profile", prof).add("daily", adv.daily).add("capacity", adv.capacity);
    j.add("roaring_bytes_without_runs", adv.roaring_bytes_without_runs);
    j.add_array("candidates", cands).add("choice", adv.choice).add("reason", adv.reason).add("command", cmd);
    print_report(j, true);
    return 0;
  }

  // Text: the profile, the two histograms, the candidates, the choice.
  Json t;
  t.add("IDs", p.lines).add("distinct", p.distinct);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * p.duplicates_ratio);
  t.raw("duplicates", "", buf);
  t.raw("range", "", hashed ? "(string IDs, hashed: no meaningful range)"
                            : human_value(p.min, hex) + " .. " + human_value(p.max, hex) +
                                  (p.fits_32 ? "  (fits 32 bits)" : "  (exceeds 32 bits)"));
  std::snprintf(buf, sizeof buf, "%llu of 2^16 values, %.0f IDs per chunk", static_cast<unsigned long long>(p.chunks),
                p.values_per_chunk);
  t.raw("chunks", "", buf);
  if (p.fits_32) {
    std::snprintf(buf, sizeof buf, "%u array, %u bitmap, %u run (sample: %s)", p.array_containers,
                  p.bitmap_containers, p.run_containers, shmfilter::format_size(p.sample_roaring_bytes).c_str());
    t.raw("containers", "", buf);
  }
  print_report(t, false);
  std::printf("\nvalues   |%s|\n", bars(p.value_histogram).c_str());
  std::printf("         %-32s%32s\n", human_value(p.min, hex).c_str(), human_value(p.max, hex).c_str());
  std::printf("per chunk|%s|  chunks by IDs held: 1 2 4 ... 4096(array|bitmap) ... 65536\n",
              bars(p.chunk_histogram).c_str());
  std::printf("\nat %s IDs a day, capacity %s (x%.2g headroom), error %g:\n", human_count(static_cast<double>(adv.daily)).c_str(),
              human_count(static_cast<double>(adv.capacity)).c_str(), o.headroom, o.error);
  std::printf("  %-14s %12s  %-8s %-7s  %s\n", "STRUCTURE", "MEMORY", "FP", "DELETES", "NOTE");
  for (const auto& c : adv.candidates) {
    std::string mem = c.applicable ? shmfilter::format_size(c.bytes) : "-";
    std::printf("%s %-14s %12s  %-8s %-7s  %s\n", c.structure == adv.choice ? "*" : " ", c.structure.c_str(),
                mem.c_str(), c.applicable ? pct(c.fp_rate).c_str() : "-", c.deletes ? "yes" : "no", c.note.c_str());
  }
  if (adv.roaring_bytes_without_runs)
    std::printf("  (roaring without run containers: %s)\n", shmfilter::format_size(adv.roaring_bytes_without_runs).c_str());
  std::printf("\nrecommended: %s\n  why: %s\n  create: %s\n", adv.choice.c_str(), adv.reason.c_str(), cmd.c_str());
  if (a.has("--svg")) std::printf("  histogram: %s\n", a.get("--svg").c_str());
  return 0;
}

SHMTOOL_COMMAND("advise", run_advise, R"(measure a sample of IDs, draw its histogram, recommend a structure
Usage: shmtool advise [FILE] [--daily N] [--error P] [--deletes] [--window DAYS] [--svg OUT.svg] [--json]

Reads a sample of IDs (FILE, or stdin when FILE is absent or -), one per line:
decimal integers, hex strings (16-hex-char device IDs) or any strings. Measures
what decides the choice: distinct IDs, duplicates, value range, whether they fit
32 bits and how densely they fill 2^16-value chunks (Roaring's array vs bitmap vs
run containers). Draws the value distribution and per-chunk density (a terminal
view; --svg writes a picture), sizes every candidate at the daily volume with the
library's own sizing (Roaring: the sample's bitmap extrapolated) and recommends one
by the selection table in docs/advise.md, with the command that creates it.

Options:
  --daily N        expected distinct IDs per day (default: the sample's distinct count)
  --error P        false-positive target for Bloom/Cuckoo/window (default 0.01)
  --deletes        the workload must delete IDs (undo, refunds)
  --window DAYS    the question spans a sliding window of DAYS days
  --count-only     only the number of distinct IDs is needed (HyperLogLog)
  --headroom H     capacity = daily x H (default 1.5: reserve 1.5x the peak)
  --format F       auto (default), decimal, hex or string
  --name NAME      structure name in the suggested command (default NAME)
  --svg OUT.svg    write the histograms as an SVG picture
  --json           one JSON object: profile, candidates, choice, command
Example:
  shmtool advise device-ids.txt --daily 120M --svg ids.svg
)");

}  // namespace
}  // namespace shmtool
