// shmtool/commands/cuckoo.cpp: shmtool cuckoo create|add|add-unique|check|del|info.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/segment_util.h"
#include "shmfilter/cuckoo.hpp"

namespace shmtool {
namespace {

using shmfilter::Cuckoo;
using shmfilter::CuckooStatus;

// "150M", "1e8", "2000000", "64k": counts use powers of 1000.

Json describe(const Cuckoo& c) {
  shmfilter::CuckooStats s = c.stats();
  Json j;
  j.add("name", c.name())
      .add("kind", "cuckoo")
      .add("capacity", s.capacity)
      .add("slots", s.slots)
      .add("items", s.size)
      .add("load", s.load_factor)
      .add("fingerprint_bits", s.fingerprint_bits)
      .add("slot_bits", s.lane_bits)
      .add("bits_per_item", s.bits_per_item)
      .add("bits_per_item_at_95pct_load", s.bits_per_item_at_95)
      .add("target_error", s.target_error)
      .add("fp_rate_estimate", s.fp_rate_estimate)
      .add("fp_rate_when_full", s.fp_rate_bound)
      .add("failures", s.failures)
      .add("longest_path", s.longest_path)
      .add("max_path", s.max_path)
      .add("moves", s.moves)
      .add("inserts", s.inserts)
      .add("erases", s.erases)
      .add("repairs", s.repairs)
      .add("subfilters", s.subfilters)
      .add("expansion", s.expansion)
      .add("bytes", s.bytes);
  return j;
}

DescriberRegistrar describer_reg(Describer{shmfilter::Kind::kCuckoo,
                                           [](shmfilter::Segment& seg, const shmfilter::RegionInfo& r) {
                                             return describe(Cuckoo::open(seg, r.name));
                                           }});

int cmd_create(const Args& a) {
  a.allow({"--capacity", "--fingerprint-bits", "--error", "--expansion", "--max-path", "--max-subfilters"});
  const std::string& seg_name = a.at(0, "SEG");
  const std::string& name = a.at(1, "NAME");
  if (a.positionals().size() > 2) throw UsageError("unexpected argument '" + a.positionals()[2] + "'");
  if (!a.has("--capacity")) throw UsageError("missing --capacity N");
  shmfilter::CuckooOptions o;
  o.capacity = parse_count("--capacity", a.get("--capacity"));
  if (o.capacity == 0) throw UsageError("--capacity must be >= 1");
  if (a.has("--fingerprint-bits") && a.has("--error"))
    throw UsageError("pass only one of --fingerprint-bits and --error");
  if (a.has("--fingerprint-bits")) {
    std::string b = a.get("--fingerprint-bits");
    if (b != "8" && b != "12" && b != "16") throw UsageError("--fingerprint-bits must be 8, 12 or 16");
    o.fingerprint_bits = static_cast<uint32_t>(std::stoul(b));
  }
  if (a.has("--error")) o.error = parse_rate("--error", a.get("--error"));
  if (a.has("--expansion")) o.expansion = static_cast<uint32_t>(parse_count("--expansion", a.get("--expansion")));
  if (a.has("--max-path")) o.max_path = static_cast<uint32_t>(parse_count("--max-path", a.get("--max-path")));
  if (a.has("--max-subfilters"))
    o.max_subfilters = static_cast<uint32_t>(parse_count("--max-subfilters", a.get("--max-subfilters")));
  auto seg = open_segment(seg_name, a);
  Cuckoo c = Cuckoo::create(seg, name, o);
  auto s = c.stats();
  printf("created cuckoo filter '%s': %llu slots, %u-bit fingerprints (%u-bit slots), ~%.4g%% false positives when "
         "full, %s\n",
         name.c_str(), static_cast<unsigned long long>(s.slots), s.fingerprint_bits, s.lane_bits,
         100.0 * s.fp_rate_bound, shmfilter::format_size(s.bytes).c_str());
  return 0;
}

struct Target {
  shmfilter::Segment seg;
  Cuckoo c;
};
Target open_target(const Args& a) {
  const std::string& seg_name = a.at(0, "SEG");
  const std::string& name = a.at(1, "NAME");
  Target t;
  t.seg = open_segment(seg_name, a);
  t.c = Cuckoo::open(t.seg, name);
  return t;
}

int cmd_add(const Args& a, bool unique) {
  a.allow({});
  Target t = open_target(a);
  const auto& pos = a.positionals();
  uint64_t inserted = 0, present = 0, failed = 0;
  auto one = [&](std::string_view key, bool print) {
    CuckooStatus s;
    if (unique) {
      s = t.c.insert_unique(key);
    } else {
      bool was = t.c.contains(key);  // informational: add stores a duplicate copy anyway (CF.ADD)
      s = t.c.insert(key);
      if (s == CuckooStatus::kInserted && was) {
        ++present;
        if (print) printf("%.*s inserted (already present: duplicate copy stored)\n", static_cast<int>(key.size()), key.data());
        return s;
      }
    }
    if (s == CuckooStatus::kInserted) ++inserted;
    else if (s == CuckooStatus::kExists) ++present;
    else ++failed;
    if (print) {
      const char* what = s == CuckooStatus::kInserted ? "inserted"
                         : s == CuckooStatus::kExists ? "already present"
                         : s == CuckooStatus::kFull   ? "FAILED: filter full (create it with --expansion 2 or larger)"
                                                      : "FAILED: filter dropped";
      printf("%.*s %s\n", static_cast<int>(key.size()), key.data(), what);
    }
    return s;
  };
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i)
      if (one(pos[i], true) == CuckooStatus::kDropped) return 1;
    return failed ? 1 : 0;
  }
  bool dropped = false;
  for_each_stdin_line([&](std::string_view line, uint64_t) {
    if (!dropped && one(line, false) == CuckooStatus::kDropped) dropped = true;
  });
  if (unique)
    printf("inserted %llu\nalready present %llu\nfailed %llu\n", static_cast<unsigned long long>(inserted),
           static_cast<unsigned long long>(present), static_cast<unsigned long long>(failed));
  else
    printf("inserted %llu\nalready present %llu (stored again: add keeps duplicates, add-unique does not)\nfailed %llu\n",
           static_cast<unsigned long long>(inserted + present), static_cast<unsigned long long>(present),
           static_cast<unsigned long long>(failed));
  if (dropped) fprintf(stderr, "shmtool: cuckoo filter '%s' was dropped while adding\n", t.c.name().c_str());
  return failed || dropped ? 1 : 0;
}

int cmd_check(const Args& a) {
  a.allow({});
  Target t = open_target(a);
  const auto& pos = a.positionals();
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i) printf("%s %s\n", pos[i].c_str(), t.c.contains(pos[i]) ? "present" : "absent");
    return 0;
  }
  // Stdin: batches of 4096 keys into contains_many (prefetching).
  std::string arena;
  std::vector<size_t> ends;
  std::vector<std::string_view> views;
  std::vector<uint8_t> out;
  uint64_t present = 0, absent = 0;
  auto flush = [&] {
    views.clear();
    size_t b = 0;
    for (size_t e : ends) {
      views.emplace_back(arena.data() + b, e - b);
      b = e;
    }
    out.assign(views.size(), 0);
    t.c.contains_many(std::span<const std::string_view>(views), std::span<uint8_t>(out));
    for (uint8_t o : out) (o ? present : absent)++;
    arena.clear();
    ends.clear();
  };
  for_each_stdin_line([&](std::string_view line, uint64_t) {
    arena.append(line);
    ends.push_back(arena.size());
    if (ends.size() == 4096) flush();
  });
  flush();
  printf("present %llu\nabsent %llu\n", static_cast<unsigned long long>(present), static_cast<unsigned long long>(absent));
  return 0;
}

int cmd_del(const Args& a) {
  a.allow({});
  Target t = open_target(a);
  const auto& pos = a.positionals();
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i) printf("%s %s\n", pos[i].c_str(), t.c.erase(pos[i]) ? "deleted" : "not found");
    return t.c.valid() ? 0 : 1;
  }
  uint64_t deleted = 0, missing = 0;
  for_each_stdin_line([&](std::string_view line, uint64_t) { (t.c.erase(line) ? deleted : missing)++; });
  printf("deleted %llu\nnot found %llu\n", static_cast<unsigned long long>(deleted), static_cast<unsigned long long>(missing));
  return t.c.valid() ? 0 : 1;
}

int cmd_info(const Args& a) {
  a.allow({"--json"});
  if (a.positionals().size() > 2) throw UsageError("unexpected argument '" + a.positionals()[2] + "'");
  Target t = open_target(a);
  print_object(describe(t.c), a.has("--json"));
  return 0;
}

CommandRegistrar reg_create(Command{
    "cuckoo", "create",
    "shmtool cuckoo create SEG NAME --capacity N [--fingerprint-bits 8|12|16 | --error P] [--expansion K] "
    "[--max-path 1..6] [--max-subfilters 1..16]",
    "create a cuckoo filter (membership with deletion)",
    "Creates a cuckoo filter NAME in segment SEG holding N items at <= 95% load.\n"
    "  --capacity N          items (150M, 1e8, 2000000)\n"
    "  --fingerprint-bits F  8, 12 (default) or 16: false positives ~ 8/2^F when full\n"
    "  --error P             or: the target false-positive rate; F = ceil(log2(8/P)) rounded up to 8/12/16\n"
    "  --expansion K         when full, add a sub-filter K times larger (default 0: report 'full')\n"
    "  --max-path M          longest cuckoo path an insert may use (default 5)\n"
    "  --max-subfilters S    sub-filters allowed with --expansion (default 8)\n"
    "Example: shmtool cuckoo create ads freq:42:2026-11-30 --capacity 150M --error 0.002",
    {},
    [](const Args& a) { return cmd_create(a); }});
CommandRegistrar reg_add(Command{
    "cuckoo", "add", "shmtool cuckoo add SEG NAME [KEY...]", "insert keys (duplicates kept, like CF.ADD)",
    "Inserts each KEY, or one key per stdin line when no KEY is given (prints counts:\n"
    "inserted, already present (a duplicate copy is still stored), failed).\n"
    "Exit 1 if any insert failed (filter full).\n"
    "Example: printf 'a\\nb\\n' | shmtool cuckoo add ads today",
    {},
    [](const Args& a) { return cmd_add(a, false); }});
CommandRegistrar reg_add_unique(Command{
    "cuckoo", "add-unique", "shmtool cuckoo add-unique SEG NAME [KEY...]",
    "insert keys not yet present (atomic, like CF.ADDNX)",
    "Atomic test-and-insert of each KEY (or stdin lines): of processes adding one key at once,\n"
    "exactly one is told 'inserted'. Prints counts: inserted, already present, failed.\n"
    "Example: shmtool cuckoo add-unique ads today 3f9a0c1b2d4e5f60",
    {},
    [](const Args& a) { return cmd_add(a, true); }});
CommandRegistrar reg_check(Command{
    "cuckoo", "check", "shmtool cuckoo check SEG NAME [KEY...]", "test membership",
    "Prints 'KEY present|absent' per KEY, or counts for stdin lines (batched lookups).\n"
    "present may be a false positive (see 'info' for the rate); absent is exact.\n"
    "Example: shmtool cuckoo check ads today 3f9a0c1b2d4e5f60",
    {},
    [](const Args& a) { return cmd_check(a); }});
CommandRegistrar reg_del(Command{
    "cuckoo", "del", "shmtool cuckoo del SEG NAME [KEY...]", "remove one copy of each key",
    "Removes one copy of each KEY (or stdin lines) while other processes keep working.\n"
    "Delete only keys you inserted: deleting a never-inserted key can remove another key's\n"
    "matching fingerprint (a false-positive match) and so make that key absent.\n"
    "Example: shmtool cuckoo del ads today 3f9a0c1b2d4e5f60",
    {},
    [](const Args& a) { return cmd_del(a); }});
CommandRegistrar reg_info(Command{
    "cuckoo", "info", "shmtool cuckoo info SEG NAME [--json]", "slots, load, bits/item, FP estimate, failures",
    "Prints slots, items, load, fingerprint and slot bits, bits per item, false-positive\n"
    "estimate, failed inserts, longest cuckoo path and sub-filters.\n"
    "Example: shmtool cuckoo info ads today --json",
    {"--json"},
    [](const Args& a) { return cmd_info(a); }});

}  // namespace
}  // namespace shmtool
