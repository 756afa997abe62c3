// shmtool/commands/set.cpp: `shmtool set create|add|check|del|info SEG NAME ...` (ExactSet).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/describe.h"
#include "cli/input.h"
#include "cli/json.h"
#include "cli/numbers.h"
#include "cli/segment.h"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

using shmfilter::ExactSet;
using shmfilter::InsertResult;
using shmfilter::Segment;

constexpr size_t kBatch = 4096;  // stdin keys per insert_many/contains_many call

// How text keys become uint64 keys: --keys string (XXH3, default), hex (16 hex
// chars parsed exactly: device IDs), or u64 (decimal).
enum class KeyFormat { kString, kHex, kU64 };

KeyFormat key_format(const Args& a) {
  std::string f = a.get("--keys", "string");
  if (f == "string") return KeyFormat::kString;
  if (f == "hex") return KeyFormat::kHex;
  if (f == "u64") return KeyFormat::kU64;
  throw UsageError("--keys must be string, hex or u64, not '" + f + "'");
}

uint64_t to_key(const ExactSet& s, KeyFormat f, std::string_view text, uint64_t line) {
  if (f == KeyFormat::kString) return s.key_of(text);
  uint64_t v = 0;
  int base = f == KeyFormat::kHex ? 16 : 10;
  if (text.empty() || text.size() > (base == 16 ? 16u : 20u))
    throw UsageError("key '" + clip_input(text) + "'" + (line ? " on line " + std::to_string(line) : "") +
                     " is not a " + (base == 16 ? "hex" : "decimal") + " uint64");
  for (char c : text) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 99;
    if (d >= base)
      throw UsageError("key '" + clip_input(text) + "'" + (line ? " on line " + std::to_string(line) : "") +
                       " is not a " + (base == 16 ? "hex" : "decimal") + " uint64 (see --keys)");
    uint64_t next = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    if (base == 10 && next / 10 != v) throw UsageError("key '" + std::string(text) + "' overflows uint64");
    v = next;
  }
  return v;
}

Json describe_fields(Segment& seg, const shmfilter::RegionInfo& info) {
  const shmfilter::ExactSetStats st = ExactSet::open(seg, info.name).stats();
  Json j;
  j.add("size", st.size).add("capacity", st.capacity).add("slots", st.slots).add("load", st.load);
  j.add("max_load", st.max_load).add("used_slots", st.used_slots).add("stripes", st.stripes).add_size("bytes", st.bytes);
  j.add("bytes_per_key_at_capacity", st.bytes_per_key_at_capacity);
  return j;
}

// Runs op over the keys given as arguments (per-key lines) or stdin (counts).
template <class PerKey, class Batch>
int run_keys(const Args& a, const ExactSet& s, PerKey per_key, Batch batch) {
  KeyFormat f = key_format(a);
  const auto& pos = a.positionals();
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i) per_key(pos[i], to_key(s, f, pos[i], 0));
    return 0;
  }
  std::vector<uint64_t> keys;
  keys.reserve(kBatch);
  for_each_stdin_line([&](std::string_view line, uint64_t no) {
    keys.push_back(to_key(s, f, line, no));
    if (keys.size() == kBatch) {
      batch(keys);
      keys.clear();
    }
  });
  if (!keys.empty()) batch(keys);
  return -1;  // caller prints totals
}

int run_create(const Args& a) {
  if (!a.has("--capacity")) throw UsageError("missing --capacity N");
  shmfilter::ExactSetOptions o;
  o.capacity = parse_count("--capacity", a.get("--capacity"));
  o.max_load = real_option(a, "--max-load", o.max_load);
  return create_and_show(a, shmfilter::Kind::kExactSet, [&](Segment& seg, const std::string& name) {
    ExactSet::create(seg, name, o);
  });
}

int run_add(const Args& a) {
  ExactSet s = open_structure<ExactSet>(a);
  uint64_t counts[6] = {0, 0, 0, 0, 0, 0};  // one per InsertResult
  std::vector<InsertResult> out(kBatch);
  int rc = run_keys(
      a, s,
      [&](const std::string& text, uint64_t k) {
        InsertResult r = s.insert(k);
        ++counts[static_cast<int>(r)];
        printf("%s\t%s\n", shmfilter::escape_text(text).c_str(), std::string(shmfilter::insert_result_name(r)).c_str());
      },
      [&](const std::vector<uint64_t>& keys) {
        s.insert_many(keys, std::span<InsertResult>(out.data(), keys.size()));
        for (size_t i = 0; i < keys.size(); ++i) ++counts[static_cast<int>(out[i])];
      });
  if (rc < 0)
    printf("inserted: %llu\nexisted: %llu\nfull: %llu\nsize: %llu\n", static_cast<unsigned long long>(counts[0]),
           static_cast<unsigned long long>(counts[1]), static_cast<unsigned long long>(counts[2]),
           static_cast<unsigned long long>(s.size()));
  if (counts[3] != 0) throw shmfilter::Error(shmfilter::ErrorCode::kDropped, "the set was dropped while adding");
  if (counts[5] != 0) throw shmfilter::Error(shmfilter::ErrorCode::kReadOnly, "the segment was opened read-only");
  if (counts[2] != 0) {
    fprintf(stderr, "shmtool: %llu keys did not fit: set '%s' is full (capacity %llu); create a larger set\n",
            static_cast<unsigned long long>(counts[2]), s.name().c_str(), static_cast<unsigned long long>(s.capacity()));
    return 1;
  }
  return 0;
}

int run_check(const Args& a) {
  ExactSet s = open_structure<ExactSet>(a);
  uint64_t present = 0, total = 0;
  std::vector<uint8_t> out(kBatch);
  int rc = run_keys(
      a, s,
      [&](const std::string& text, uint64_t k) {
        printf("%s\t%d\n", shmfilter::escape_text(text).c_str(), s.contains(k) ? 1 : 0);
      },
      [&](const std::vector<uint64_t>& keys) {
        s.contains_many(keys, std::span<uint8_t>(out.data(), keys.size()));
        for (size_t i = 0; i < keys.size(); ++i) present += out[i];
        total += keys.size();
      });
  if (!s.valid()) throw shmfilter::Error(shmfilter::ErrorCode::kDropped, "the set was dropped while checking");
  if (rc < 0)
    printf("present: %llu\nabsent: %llu\n", static_cast<unsigned long long>(present),
           static_cast<unsigned long long>(total - present));
  return 0;
}

int run_del(const Args& a) {
  ExactSet s = open_structure<ExactSet>(a);
  uint64_t deleted = 0, total = 0;
  int rc = run_keys(
      a, s,
      [&](const std::string& text, uint64_t k) {
        printf("%s\t%s\n", shmfilter::escape_text(text).c_str(), s.erase(k) ? "deleted" : "absent");
      },
      [&](const std::vector<uint64_t>& keys) {
        for (uint64_t k : keys) deleted += s.erase(k);
        total += keys.size();
      });
  if (!s.valid()) throw shmfilter::Error(shmfilter::ErrorCode::kDropped, "the set was dropped while deleting");
  if (rc < 0)
    printf("deleted: %llu\nabsent: %llu\nsize: %llu\n", static_cast<unsigned long long>(deleted),
           static_cast<unsigned long long>(total - deleted), static_cast<unsigned long long>(s.size()));
  return 0;
}

SHMTOOL_COMMAND("set create", run_create, R"(create an exact set of up to N keys (~10 bytes/key)
Usage: shmtool set create SEG NAME --capacity N [--max-load F] [--json]

Creates NAME: an exact set (Redis SET's job) of at most N keys, fixed at
creation, and prints what it made (as 'set info' does). Memory: 8 bytes per
slot, slots = N / max-load (default 0.8, so 10 bytes per key at capacity).
Inserting beyond N answers 'full'.

Options:
  --capacity N     most keys (counts accept k/M/G: 150M)
  --max-load F     capacity/slots in [0.1, 0.95] (default 0.8)
  --json           print the new set as one JSON object
Example:
  shmtool set create ads small:plan7 --capacity 2M
)");

SHMTOOL_COMMAND("set add", run_add, R"(insert keys; per key: inserted / exists / full
Usage: shmtool set add SEG NAME [KEY...] [--keys string|hex|u64]

Inserts each KEY (arguments: one 'KEY<TAB>inserted|exists|full' line each;
stdin: one key per line, totals printed). Exit 1 if any key did not fit.

Options:
  --keys FORMAT    how keys are read: string (default; hashed to 64 bits with
                   XXH3, collisions ~n/2^64), hex (16 hex chars, exact: device
                   IDs), u64 (decimal, exact)
Example:
  shmtool set add ads small:plan7 00ab34cd56ef7890 --keys hex
)");

SHMTOOL_COMMAND("set check", run_check, R"(membership: per key 1 (present) or 0
Usage: shmtool set check SEG NAME [KEY...] [--keys string|hex|u64]

Prints 'KEY<TAB>1|0' per argument, or for stdin the present/absent totals.

Options:
  --keys FORMAT    string (default), hex or u64, as for 'set add'
Example:
  shmtool set check ads small:plan7 00ab34cd56ef7890 --keys hex
)");

SHMTOOL_COMMAND("set del", run_del, R"(erase keys; per key: deleted / absent
Usage: shmtool set del SEG NAME [KEY...] [--keys string|hex|u64]

Erases each KEY (one 'KEY<TAB>deleted|absent' line per argument; stdin totals).

Options:
  --keys FORMAT    string (default), hex or u64, as for 'set add'
Example:
  shmtool set del ads small:plan7 00ab34cd56ef7890 --keys hex
)");

SHMTOOL_STRUCTURE(shmfilter::Kind::kExactSet, describe_fields, "size, capacity, load, bytes per key",
                  "Prints size, capacity, slots and load (against the maximum), stripes, bytes and\n"
                  "bytes per key at capacity.",
                  "ads small:plan7");

}  // namespace
}  // namespace shmtool
