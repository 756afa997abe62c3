// shmtool/commands/window.cpp: shmtool window create|mark|seen|forget|count|rotate|info
// (mark --cap N: the stamped variant's frequency cap, Window::mark_if_under).
// Pairs are "SPACE ITEM" (a decimal space id, e.g. the plan, and an item, e.g. the
// 16-hex-char device id): as arguments after SEG NAME, or one pair per stdin line.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/describe.h"
#include "cli/input.h"
#include "cli/json.h"
#include "cli/numbers.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "cli/segment.h"
#include "shmfilter/error.hpp"
#include "shmfilter/window.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

using shmfilter::Window;
using shmfilter::WindowStatus;


Json bucket_json(const shmfilter::WindowBucketStats& b) {
  Json j;
  j.add("bucket", b.bucket).add("age", b.age).add("distinct", b.distinct).add("capacity", b.capacity);
  j.add("overflow", b.overflow).add_rate("fp_rate_now", b.fp_rate_now).add_rate("fp_bound", b.fp_bound);
  j.add("over_capacity", b.over_capacity).add_size("bytes", b.bytes);
  return j;
}

Json describe_fields(shmfilter::Segment& seg, const shmfilter::RegionInfo& r) {
  const shmfilter::WindowStats s = Window::open(seg, r.name).stats();
  Json j;
  j.add("variant", std::string(shmfilter::window_variant_name(s.variant)));
  j.add("retention", s.retention).add_seconds("bucket_seconds", s.bucket_seconds).add_seconds("utc_offset", s.utc_offset);
  j.add("expected_per_bucket", s.expected_per_bucket).add_rate("error", s.error).add("error_window", s.error_window);
  j.add_rate("one_bucket_error", s.one_bucket_error).add("current_bucket", s.current_bucket);
  j.add_rate("fp_bound_w1", s.window_fp_bound(1)).add_rate("fp_now_w1", s.window_fp_now(1));
  j.add_rate("fp_bound_full", s.window_fp_bound(s.retention)).add_rate("fp_now_full", s.window_fp_now(s.retention));
  j.add("spaces", s.spaces).add("max_spaces", s.max_spaces).add("other_marks", s.other_marks);
  j.add("rotations", s.rotations).add("racing_marks", s.racing_marks).add("rotation_races", s.rotation_races);
  j.add("inline_allocations", s.inline_allocations).add("overflow_failures", s.overflow_failures);
  if (s.variant == shmfilter::WindowVariant::kCuckoo) j.add("forget_ambiguous", s.forget_ambiguous);
  if (s.variant == shmfilter::WindowVariant::kStamped) {
    // The one table every bucket shares, its sub-filters included (also in memory_bytes).
    j.add("lanes", s.lanes).add("swept_bucket", s.swept_bucket);
    j.add_size("shared_table_bytes", s.shared_bytes);
  }
  j.add_size("memory_bytes", s.memory_bytes);
  std::vector<Json> buckets;
  for (const auto& b : s.buckets)
    if (b.capacity != 0) buckets.push_back(bucket_json(b));
  j.add_array("buckets", buckets);
  return j;
}

// --now UNIX (seconds) for this run's clock; absent: the system clock.
void apply_clock(Window& w, const Args& a) {
  if (!a.has("--now")) return;
  const std::string t = a.get("--now");
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError("--now '" + t + "' is not a Unix time in seconds (e.g. 1764547200)");
  w.set_now(v);
}

uint32_t window_of(const Args& a, const Window& w, uint32_t fallback) {
  const uint32_t r = w.stats().retention;
  return static_cast<uint32_t>(uint_option(a, "--window", fallback == 0 ? r : fallback, 1, r));
}

// "SPACE ITEM": false (and why) when the line is not a pair.
bool parse_pair(std::string_view line, uint64_t& space, std::string_view& item, std::string& why) {
  size_t sp = line.find_first_of(" \t");
  if (sp == std::string_view::npos) {
    why = "expected 'SPACE ITEM' (a decimal space id, a blank, the item)";
    return false;
  }
  std::string_view s = line.substr(0, sp);
  item = line.substr(sp + 1);
  while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
  while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
  if (s.empty() || item.empty()) {
    why = "expected 'SPACE ITEM' (a decimal space id, a blank, the item)";
    return false;
  }
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9' || v > (UINT64_MAX - 9) / 10) {
      why = "space '" + std::string(s) + "' is not a decimal number below 2^64";
      return false;
    }
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  space = v;
  return true;
}

uint64_t stdin_bytes() {
  struct stat st {};
  if (fstat(0, &st) == 0 && S_ISREG(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  return 0;  // a pipe: no total, no bar
}

enum class Mode { kMark, kMarkIfUnseen, kSeen, kForget, kMarkIfUnder };

const char* answer_word(Mode m, WindowStatus s, bool hit) {
  if (m == Mode::kSeen) return hit ? "seen" : "unseen";
  if (m == Mode::kMarkIfUnder && s == WindowStatus::kNew) return "allowed";
  switch (s) {
    case WindowStatus::kNew: return "new";
    case WindowStatus::kSeen: return "seen";
    case WindowStatus::kRemoved: return "forgotten";
    case WindowStatus::kAbsent: return "absent";
    case WindowStatus::kFull: return "FAILED: bucket table full";
    case WindowStatus::kUnsupported: return "FAILED: forget needs --variant cuckoo or stamped";
    case WindowStatus::kDropped: return "FAILED: window dropped";
    case WindowStatus::kNoSpace: return "FAILED: no space for a bucket table (shmtool resize)";
    case WindowStatus::kBusy: return "FAILED: buckets rotated faster than the call (retry)";
    case WindowStatus::kForked: return "FAILED: handle inherited across fork";
    case WindowStatus::kInvalidArgument: return "FAILED: --window outside 1..retention";
    case WindowStatus::kCorrupt: return "FAILED: window corrupt (shmtool check)";
    case WindowStatus::kCapped: return "capped";
  }
  return "?";
}

// An answer after which no later pair can succeed either: stop reading.
bool stops(WindowStatus s) {
  return s == WindowStatus::kDropped || s == WindowStatus::kNoSpace || s == WindowStatus::kForked ||
         s == WindowStatus::kInvalidArgument || s == WindowStatus::kCorrupt;
}

// mark / mark --if-unseen / seen / forget share this: pairs from arguments
// (one line each) or stdin (counts, --json one object).
int run_pairs(const Args& a, Mode mode) {
  Window w = open_structure<Window>(a);
  apply_clock(w, a);
  const bool json = a.has("--json");
  uint32_t win = 1;
  if (mode == Mode::kSeen) win = window_of(a, w, 1);
  if (mode == Mode::kMarkIfUnseen || mode == Mode::kMarkIfUnder) win = window_of(a, w, 0);
  const uint32_t cap = mode == Mode::kMarkIfUnder ? static_cast<uint32_t>(uint_option(a, "--cap", 1, 1, 15)) : 0;
  if (mode == Mode::kMarkIfUnder) {
    const shmfilter::WindowVariant v = w.stats().variant;
    if (v != shmfilter::WindowVariant::kStamped)
      throw shmfilter::Error(shmfilter::ErrorCode::kWrongKind,
                             "window '" + std::string(w.name()) + "' is of variant " +
                                 std::string(shmfilter::window_variant_name(v)) +
                                 ": --cap counts marks only in a window of variant stamped (window create "
                                 "--variant stamped); nothing marked");
  }
  uint64_t yes = 0, no = 0, failed = 0;
  auto one = [&](uint64_t space, std::string_view item, bool print) {
    WindowStatus st = WindowStatus::kSeen;
    bool hit = false;
    switch (mode) {
      case Mode::kMark: st = w.mark(space, item); break;
      case Mode::kMarkIfUnseen: st = w.mark_if_unseen(space, item, win); break;
      case Mode::kSeen: hit = w.seen(space, item, win); break;
      case Mode::kForget: st = w.forget(space, item); break;
      case Mode::kMarkIfUnder: st = w.mark_if_under(space, item, cap, win); break;
    }
    bool ok = mode == Mode::kSeen || st == WindowStatus::kNew || st == WindowStatus::kSeen ||
              st == WindowStatus::kRemoved || st == WindowStatus::kAbsent || st == WindowStatus::kCapped;
    if (!ok) ++failed;
    else if (mode == Mode::kSeen ? hit : (st == WindowStatus::kNew || st == WindowStatus::kRemoved)) ++yes;
    else ++no;
    if (print) {
      if (json)
        printf("%s\n", Json().add("space", space).add("item", std::string(item)).add("answer", answer_word(mode, st, hit)).str().c_str());
      else
        printf("%llu %.*s %s\n", static_cast<unsigned long long>(space), static_cast<int>(item.size()), item.data(),
               answer_word(mode, st, hit));
    }
    return st;
  };
  const auto& pos = a.positionals();
  if (pos.size() > 2) {
    if ((pos.size() - 2) % 2 != 0) throw UsageError("pairs come as SPACE ITEM: an ITEM is missing after the last SPACE");
    std::vector<std::pair<uint64_t, std::string>> pairs;
    for (size_t i = 2; i < pos.size(); i += 2) {
      uint64_t space = 0;
      std::string_view item;
      std::string why;
      std::string line = pos[i] + " " + pos[i + 1];
      if (!parse_pair(line, space, item, why)) throw UsageError(why);
      pairs.emplace_back(space, std::string(item));
    }
    for (const auto& [space, item] : pairs)
      if (stops(one(space, item, true))) return 1;
    return failed ? 1 : 0;
  }
  Rejects rej;
  Progress prog("window " + std::string(mode == Mode::kSeen ? "seen" : mode == Mode::kForget ? "forget" : "mark"),
                stdin_bytes());
  uint64_t bytes = 0;
  bool dropped = false;
  for_each_stdin_line([&](std::string_view line, uint64_t no_) {
    bytes += line.size() + 1;
    if ((no_ & 4095) == 0) prog.update(bytes);
    if (dropped) return;
    uint64_t space = 0;
    std::string_view item;
    std::string why;
    if (!parse_pair(line, space, item, why)) {
      rej.add(no_, why);
      return;
    }
    if (stops(one(space, item, false))) dropped = true;
  });
  prog.finish();
  rej.report();
  Json j;
  switch (mode) {
    case Mode::kMark:
    case Mode::kMarkIfUnseen: j.add("new", yes).add("seen", no); break;
    case Mode::kSeen: j.add("seen", yes).add("unseen", no); break;
    case Mode::kForget: j.add("forgotten", yes).add("absent", no); break;
    case Mode::kMarkIfUnder: j.add("allowed", yes).add("capped", no).add("cap", cap); break;
  }
  j.add("failed", failed).add("rejected", rej.count);
  if (mode != Mode::kMark) j.add("window", win);
  print_report(j, json);
  if (dropped)
    fprintf(stderr, "shmtool: window '%s' was dropped (or out of space) while working\n",
            shmfilter::escape_text(w.name()).c_str());
  return failed || dropped || (rej.count && a.has("--strict")) ? 1 : 0;
}

int run_create(const Args& a) {
  shmfilter::WindowOptions o;
  if (!a.has("--expected")) throw UsageError("missing --expected N (distinct pairs one bucket must hold)");
  o.expected_per_bucket = parse_count("--expected", a.get("--expected"));
  const std::string v = a.get("--variant", "stamped");
  if (v == "bloom")
    o.variant = shmfilter::WindowVariant::kBloom;
  else if (v == "cuckoo")
    o.variant = shmfilter::WindowVariant::kCuckoo;
  else if (v == "stamped")
    o.variant = shmfilter::WindowVariant::kStamped;
  else
    throw UsageError("--variant must be bloom (insert-only, least memory), cuckoo (deletable) or stamped "
                     "(deletable, every bucket in one table, frequency caps: window mark --cap)");
  if (a.has("--error")) o.error = parse_rate("--error", a.get("--error"));
  o.error_window = static_cast<uint32_t>(uint_option(a, "--error-window", 0, 0, UINT32_MAX));
  o.bucket_seconds = count_option(a, "--bucket-seconds", o.bucket_seconds);
  if (a.has("--utc-offset")) {
    const std::string t = a.get("--utc-offset");
    char* end = nullptr;
    long long off = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0') throw UsageError("--utc-offset '" + t + "' is not seconds east of UTC (e.g. 28800)");
    o.utc_offset = off;
  }
  o.retention = static_cast<uint32_t>(uint_option(a, "--retention", o.retention, 0, UINT32_MAX));
  o.max_spaces = static_cast<uint32_t>(uint_option(a, "--max-spaces", o.max_spaces, 0, UINT32_MAX));
  if (a.has("--seed")) o.seed = count_option(a, "--seed", 0);
  return create_and_show(a, shmfilter::Kind::kWindow,
                         [&](shmfilter::Segment& seg, const std::string& name) { Window::create(seg, name, o); });
}

int run_mark(const Args& a) {
  if (a.has("--cap") && a.has("--if-unseen"))
    throw UsageError("--cap and --if-unseen are two kinds of mark: --cap N allows N marks per pair in the window "
                     "(--cap 1 is mark-if-unseen on a stamped window)");
  return run_pairs(a, a.has("--cap") ? Mode::kMarkIfUnder : a.has("--if-unseen") ? Mode::kMarkIfUnseen : Mode::kMark);
}
int run_seen(const Args& a) { return run_pairs(a, Mode::kSeen); }
int run_forget(const Args& a) { return run_pairs(a, Mode::kForget); }

int run_count(const Args& a) {
  a.no_more_than(3);
  Window w = open_structure<Window>(a);
  apply_clock(w, a);
  const std::string& s = a.at(2, "SPACE");
  uint64_t space = 0;
  std::string_view item;
  std::string why;
  if (!parse_pair(s + " x", space, item, why)) throw UsageError(why);
  const uint32_t r = w.stats().retention;
  const uint32_t age = static_cast<uint32_t>(uint_option(a, "--age", 0, 0, r - 1));
  Json j;
  j.add("space", space).add("age", age).add("bucket", w.bucket_of(w.now()) - static_cast<int64_t>(age));
  j.add("new", w.new_count(space, age));
  print_report(j, a.has("--json"));
  return 0;
}

int run_rotate(const Args& a) {
  a.no_more_than(2);
  Window w = open_structure<Window>(a);
  apply_clock(w, a);
  const uint64_t before = w.stats().rotations;
  w.maintain();
  const shmfilter::WindowStats st = w.stats();
  Json j;
  j.add("current_bucket", st.current_bucket).add("rotated", st.rotations > before);
  j.add("rotations", st.rotations).add_size("memory_bytes", st.memory_bytes);
  if (!st.buckets.empty()) j.add("current_capacity", st.buckets[0].capacity);
  print_report(j, a.has("--json"));
  return 0;
}

SHMTOOL_COMMAND("window create", run_create, R"(create a window: (space, item) pairs over time buckets
Usage: shmtool window create SEG NAME --expected N [--variant bloom|cuckoo|stamped] [--error P] [--error-window W] [--retention R] [--bucket-seconds S] [--utc-offset SECONDS] [--max-spaces M] [--seed N] [--json]

Creates window NAME in segment SEG: one structure for every space (plan) and every
bucket (day). A query over the last W buckets has false positives <= P for W up to
--error-window; one bucket then gets 1 - (1 - P)^(1/W) (about P/W). A bucket that
receives more than N stays within its bound up to 2N (an overflow table); the next
bucket is sized from the measured ones. Prints what it made (as 'window info').
--variant stamped keeps every bucket in ONE table (a pair's lane carries the bucket
it was last marked in): a query over W buckets costs what W = 1 costs, a pair marked
on several days holds one lane, forget works, and 'window mark --cap N' counts up
to N marks per pair in a sliding window (frequency caps); retention 1..12.

Options:
  --expected N          distinct pairs one bucket must hold (1.2e8, 150M)
  --variant V           stamped (default: deletable, one table for every bucket, a w = 7 query at
                        the cost of w = 1, frequency caps: mark --cap; retention 1..12, error >= 0.2%),
                        bloom (insert-only, a table per bucket; the least memory for one day alone,
                        any retention) or cuckoo (deletable, a table per bucket; any retention)
  --error P             false-positive rate of a query over W buckets (default 0.01)
  --error-window W      the W the rate is for (default: the retention)
  --retention R         buckets kept, 1..64 (default 7)
  --bucket-seconds S    bucket length (default 86400: days)
  --utc-offset SECONDS  where a bucket starts: local midnight at UTC+8 is 28800 (default 0)
  --max-spaces M        spaces with their own counters; past it one shared row (default 8192)
  --seed N              hash seed (default random)
  --json                print the new window as one JSON object
Example:
  shmtool window create ads freq --expected 1.2e8 --utc-offset 28800 --error 0.01 --error-window 1
  shmtool window create ads caps --expected 1.2e8 --variant stamped --utc-offset 28800
)");

SHMTOOL_COMMAND("window mark", run_mark, R"(mark pairs in the current bucket
Usage: shmtool window mark SEG NAME [SPACE ITEM]... [--if-unseen | --cap N] [--window W] [--now UNIX] [--strict] [--json]

Marks each SPACE ITEM pair (or one 'SPACE ITEM' pair per stdin line) in the current
bucket; rotates to a new bucket first when the clock has passed its start. With
--if-unseen a pair already seen in the last W buckets is left alone ("served in
the window? if not, it is now"). With --cap N (a window of --variant stamped) a pair
is marked only while it has fewer than N such marks in the last W buckets, a sliding
window: 'SPACE ITEM allowed' (counted) or 'capped' (nothing stored); racing processes
never together get more than N allowed. Prints 'SPACE ITEM new|seen' per argument
pair, or counts for stdin (progress on a terminal when stdin is a file). Exit 1 if a
mark failed; with --strict also if a stdin line was not a pair.

Options:
  --if-unseen           mark only pairs not seen in the last W buckets (one atomic call)
  --cap N               allow at most N marks per pair in the last W buckets, 1..15 (stamped variant)
  --window W            with --if-unseen or --cap: buckets to look back, 1..retention (default: retention)
  --now UNIX            the clock, in Unix seconds (default: the system clock)
  --strict              exit 1 when some stdin line is not a 'SPACE ITEM' pair
  --json                counts as one JSON object (one object per argument pair)
Example:
  printf '42 3f9a0c1b2d4e5f60\n42 0011223344556677\n' | shmtool window mark ads freq --if-unseen --window 1
  shmtool window mark ads caps 42 3f9a0c1b2d4e5f60 --cap 3 --window 7
)");

SHMTOOL_COMMAND("window seen", run_seen, R"(test pairs over the last W buckets
Usage: shmtool window seen SEG NAME [SPACE ITEM]... [--window W] [--now UNIX] [--strict] [--json]

Prints 'SPACE ITEM seen|unseen' per argument pair, or counts for stdin pairs.
seen may be a false positive (see 'window info' for the bound); unseen is exact.

Options:
  --window W            buckets to look back, 1 (the current one, default) .. retention
  --now UNIX            the clock, in Unix seconds (default: the system clock)
  --strict              exit 1 when some stdin line is not a 'SPACE ITEM' pair
  --json                counts as one JSON object (one object per argument pair)
Example:
  shmtool window seen ads freq 42 3f9a0c1b2d4e5f60 --window 7
)");

SHMTOOL_COMMAND("window forget", run_forget, R"(remove pairs from the window (cuckoo variant)
Usage: shmtool window forget SEG NAME [SPACE ITEM]... [--now UNIX] [--strict] [--json]

Removes each pair's own copies from the buckets of the window while other processes
keep working ("un-serve this device"): no rebuild, no moment without dedup. A bucket
whose marks all checked the whole window keeps a colliding pair's copy (the other
pair stays served); after plain marks, `window info` counts forget_ambiguous (docs/window.md
"forget"). Forget only pairs that were marked (a never-marked pair can match another
pair's fingerprint).
The insert-only bloom variant answers 'FAILED: forget needs --variant cuckoo or stamped'
(exit 1). On a stamped window forget clears the pair's own lane (its cap count stays).

Options:
  --now UNIX            the clock, in Unix seconds (default: the system clock)
  --strict              exit 1 when some stdin line is not a 'SPACE ITEM' pair
  --json                counts as one JSON object (one object per argument pair)
Example:
  shmtool window forget ads freq 42 3f9a0c1b2d4e5f60
)");

SHMTOOL_COMMAND("window count", run_count, R"(new pairs of one space in one bucket
Usage: shmtool window count SEG NAME SPACE [--age A] [--now UNIX] [--json]

Prints how many marks of SPACE answered "new" in the bucket A buckets ago (0: the
current one): "distinct devices served by plan P today". Spaces past --max-spaces
share one row and report it.

Options:
  --age A               0 (default: the current bucket) .. retention - 1
  --now UNIX            the clock, in Unix seconds (default: the system clock)
  --json                one JSON object
Example:
  shmtool window count ads freq 42 --age 1
)");

SHMTOOL_COMMAND("window rotate", run_rotate, R"(housekeeping: rotate if due, free expired buckets, prepare the next
Usage: shmtool window rotate SEG NAME [--now UNIX] [--json]

Runs the control-plane maintenance (takes the segment lock): rotates to the clock's
bucket if no call did yet, frees the tables of buckets that left the window, and
prepares the next bucket's table sized from the measured ones, so that no request
pays for it. Run it from cron or a housekeeping process well within each bucket.

Options:
  --now UNIX            the clock, in Unix seconds (default: the system clock)
  --json                one JSON object
Example:
  shmtool window rotate ads freq
)");

SHMTOOL_STRUCTURE(shmfilter::Kind::kWindow, describe_fields, "buckets, distinct pairs, capacity, FP bound, rotations",
                  "Prints the variant, bucket length and offset, retention, the one-bucket and\n"
                  "full-window FP (bound and now), spaces, rotations, race counters, memory, and per\n"
                  "bucket: distinct pairs, capacity, overflow, FP now/bound and over-capacity. A stamped\n"
                  "window also shows lanes (its one table's, one per pair and one per cap mark),\n"
                  "swept_bucket (where the last sweep of dead lanes began) and shared_table_bytes.",
                  "ads freq");

}  // namespace
}  // namespace shmtool
