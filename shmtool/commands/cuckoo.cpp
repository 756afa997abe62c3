// shmtool/commands/cuckoo.cpp: shmtool cuckoo create|add|add-unique|check|del|info.
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/describe.h"
#include "cli/input.h"
#include "cli/json.h"
#include "cli/numbers.h"
#include "cli/segment.h"
#include "shmfilter/cuckoo.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

using shmfilter::Cuckoo;
using shmfilter::CuckooStatus;

constexpr size_t kBatch = 4096;  // stdin keys per contains_many call

Json describe_fields(shmfilter::Segment& seg, const shmfilter::RegionInfo& r) {
  const shmfilter::CuckooStats s = Cuckoo::open(seg, r.name).stats();
  Json j;
  j.add("capacity", s.capacity).add("slots", s.slots).add("items", s.size).add("load", s.load_factor);
  j.add("fingerprint_bits", s.fingerprint_bits).add("slot_bits", s.lane_bits).add("bits_per_item", s.bits_per_item);
  j.add("bits_per_item_at_95pct_load", s.bits_per_item_at_95).add("target_error", s.target_error);
  j.add("fp_rate_estimate", s.fp_rate_estimate).add("fp_rate_when_full", s.fp_rate_bound);
  j.add("failures", s.failures).add("longest_path", s.longest_path).add("max_path", s.max_path);
  j.add("moves", s.moves).add("inserts", s.inserts).add("erases", s.erases).add("repairs", s.repairs);
  j.add("subfilters", s.subfilters).add("expansion", s.expansion).add_size("bytes", s.bytes);
  return j;
}

int run_create(const Args& a) {
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
  o.expansion = static_cast<uint32_t>(uint_option(a, "--expansion", o.expansion, 0, UINT32_MAX));
  o.max_path = static_cast<uint32_t>(uint_option(a, "--max-path", o.max_path, 0, UINT32_MAX));
  o.max_subfilters = static_cast<uint32_t>(uint_option(a, "--max-subfilters", o.max_subfilters, 0, UINT32_MAX));
  return create_and_show(a, shmfilter::Kind::kCuckoo, [&](shmfilter::Segment& seg, const std::string& name) {
    Cuckoo::create(seg, name, o);
  });
}

int add(const Args& a, bool unique) {
  Cuckoo c = open_structure<Cuckoo>(a);
  const auto& pos = a.positionals();
  uint64_t inserted = 0, present = 0, failed = 0;
  auto one = [&](std::string_view key, bool print) {
    CuckooStatus s;
    if (unique) {
      s = c.insert_unique(key);
    } else {
      bool was = c.contains(key);  // informational: add stores a duplicate copy anyway (CF.ADD)
      s = c.add(key);
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
                         : s == CuckooStatus::kNoSpace ? "FAILED: no space for the next sub-filter (shmtool resize)"
                                                       : "FAILED: filter dropped";
      printf("%s %s\n", shmfilter::escape_text(key).c_str(), what);
    }
    return s;
  };
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i)
      if (const CuckooStatus s = one(pos[i], true); s == CuckooStatus::kDropped || s == CuckooStatus::kNoSpace) return 1;
    return failed ? 1 : 0;
  }
  bool dropped = false;
  for_each_stdin_line([&](std::string_view line, uint64_t) {
    if (dropped) return;
    const CuckooStatus s = one(line, false);
    if (s == CuckooStatus::kDropped || s == CuckooStatus::kNoSpace) dropped = true;
  });
  if (unique)
    printf("inserted %llu\nalready present %llu\nfailed %llu\n", static_cast<unsigned long long>(inserted),
           static_cast<unsigned long long>(present), static_cast<unsigned long long>(failed));
  else
    printf("inserted %llu\nalready present %llu (stored again: add keeps duplicates, add-unique does not)\nfailed %llu\n",
           static_cast<unsigned long long>(inserted + present), static_cast<unsigned long long>(present),
           static_cast<unsigned long long>(failed));
  if (dropped)
    fprintf(stderr, "shmtool: cuckoo filter '%s' was dropped, or the segment ran out of space, while adding\n",
            c.name().c_str());
  return failed || dropped ? 1 : 0;
}

int run_add(const Args& a) { return add(a, false); }
int run_add_unique(const Args& a) { return add(a, true); }

int run_check(const Args& a) {
  Cuckoo c = open_structure<Cuckoo>(a);
  const auto& pos = a.positionals();
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i)
      printf("%s %s\n", shmfilter::escape_text(pos[i]).c_str(), c.contains(pos[i]) ? "present" : "absent");
    return 0;
  }
  uint64_t present = 0, absent = 0;
  std::vector<uint8_t> out(kBatch);
  for_each_stdin_batch(kBatch, [&](std::span<const std::string_view> keys) {
    std::span<uint8_t> o(out.data(), keys.size());
    c.contains_many(keys, o);  // batched: prefetches the buckets
    for (uint8_t hit : o) (hit ? present : absent)++;
  });
  printf("present %llu\nabsent %llu\n", static_cast<unsigned long long>(present), static_cast<unsigned long long>(absent));
  return 0;
}

int run_del(const Args& a) {
  Cuckoo c = open_structure<Cuckoo>(a);
  const auto& pos = a.positionals();
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i)
      printf("%s %s\n", shmfilter::escape_text(pos[i]).c_str(), c.erase(pos[i]) ? "deleted" : "not found");
    return c.valid() ? 0 : 1;
  }
  uint64_t deleted = 0, missing = 0;
  for_each_stdin_line([&](std::string_view line, uint64_t) { (c.erase(line) ? deleted : missing)++; });
  printf("deleted %llu\nnot found %llu\n", static_cast<unsigned long long>(deleted), static_cast<unsigned long long>(missing));
  return c.valid() ? 0 : 1;
}

SHMTOOL_COMMAND("cuckoo create", run_create, R"(create a cuckoo filter (membership with deletion)
Usage: shmtool cuckoo create SEG NAME --capacity N [--fingerprint-bits 8|12|16 | --error P] [--expansion K] [--max-path 1..6] [--max-subfilters 1..16] [--json]

Creates a cuckoo filter NAME in segment SEG holding N items at <= 95% load and
prints what it made (as 'cuckoo info' does).

Options:
  --capacity N          items (150M, 1e8, 2000000)
  --fingerprint-bits F  8, 12 (default) or 16: false positives ~ 8/2^F when full
  --error P             or: the target false-positive rate; F = ceil(log2(8/P)) rounded up to 8/12/16
  --expansion K         when full, add a sub-filter K times larger (default 0: report 'full')
  --max-path M          longest cuckoo path an insert may use (default 5)
  --max-subfilters S    sub-filters allowed with --expansion (default 8)
  --json                print the new filter as one JSON object
Example:
  shmtool cuckoo create ads freq:42:2026-11-30 --capacity 150M --error 0.002
)");

SHMTOOL_COMMAND("cuckoo add", run_add, R"(insert keys (duplicates kept, like CF.ADD)
Usage: shmtool cuckoo add SEG NAME [KEY...]

Inserts each KEY, or one key per stdin line when no KEY is given (prints counts:
inserted, already present (a duplicate copy is still stored), failed).
Exit 1 if any insert failed (filter full).

Example:
  printf 'a\nb\n' | shmtool cuckoo add ads today
)");

SHMTOOL_COMMAND("cuckoo add-unique", run_add_unique, R"(insert keys not yet present (atomic, like CF.ADDNX)
Usage: shmtool cuckoo add-unique SEG NAME [KEY...]

Atomic test-and-insert of each KEY (or stdin lines): of processes adding one key at once,
exactly one is told 'inserted'. Prints counts: inserted, already present, failed.

Example:
  shmtool cuckoo add-unique ads today 3f9a0c1b2d4e5f60
)");

SHMTOOL_COMMAND("cuckoo check", run_check, R"(test membership
Usage: shmtool cuckoo check SEG NAME [KEY...]

Prints 'KEY present|absent' per KEY, or counts for stdin lines (batched lookups).
present may be a false positive (see 'info' for the rate); absent is exact.

Example:
  shmtool cuckoo check ads today 3f9a0c1b2d4e5f60
)");

SHMTOOL_COMMAND("cuckoo del", run_del, R"(remove one copy of each key
Usage: shmtool cuckoo del SEG NAME [KEY...]

Removes one copy of each KEY (or stdin lines) while other processes keep working.
Delete only keys you inserted: deleting a never-inserted key can remove another key's
matching fingerprint (a false-positive match) and so make that key absent.

Example:
  shmtool cuckoo del ads today 3f9a0c1b2d4e5f60
)");

SHMTOOL_STRUCTURE(shmfilter::Kind::kCuckoo, describe_fields, "slots, load, bits/item, FP estimate, failures",
                  "Prints slots, items, load, fingerprint and slot bits, bits per item, false-positive\n"
                  "estimate, failed inserts, longest cuckoo path and sub-filters.",
                  "ads today");

}  // namespace
}  // namespace shmtool
