// shmtool/commands/roaring.cpp: `shmtool roaring ...`, exact sets of 32-bit ids on CRoaring.
#include <roaring/roaring.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/safe_file.h"
#include "segment/backing_file.h"
#include "cli/command.h"
#include "cli/describe.h"
#include "cli/input.h"
#include "cli/json.h"
#include "cli/numbers.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "cli/segment.h"
#include "shmfilter/roaring_set.hpp"

namespace shmtool {
namespace {

using shmfilter::Error;
using shmfilter::ErrorCode;
using shmfilter::RoaringOptions;
using shmfilter::RoaringSet;
using shmfilter::RoaringStatus;
using shmfilter::Segment;
using shmfilter::SetOp;

constexpr size_t kBatch = 1 << 16;

uint32_t parse_id_arg(const std::string& s) {
  try {
    return RoaringSet::parse_value(s);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

void check_status(RoaringStatus st, const std::string& name) {
  if (st == RoaringStatus::kOk) return;
  if (st == RoaringStatus::kDropped) throw Error(ErrorCode::kDropped, "Roaring set '" + name + "' was dropped meanwhile");
  if (st == RoaringStatus::kNoSpace)
    throw Error(ErrorCode::kNoSpace, "Roaring set '" + name + "': delta full and the segment has no space to compact "
                                     "it: grow it with 'shmtool resize'");
  if (st == RoaringStatus::kBusy)
    throw Error(ErrorCode::kBusy, "Roaring set '" + name + "': delta full and another process held the compaction "
                                  "claim past the wait bound: retry");
  throw Error(ErrorCode::kFull, "Roaring set '" + name + "': delta full and compaction could not run (" +
                                    std::string(shmfilter::roaring_status_name(st)) +
                                    "); check free space with 'shmtool roaring info' and retry");
}

// Collects rejected input lines: a count and the first few line numbers.
enum Mode { kAdd, kRemove, kCheck };

// add/remove/check share this: ids from arguments (per-id lines) or stdin (counts).
int write_or_query(const Args& a, Mode mode) {
  RoaringSet rs = open_structure<RoaringSet>(a);
  const std::string& name = a.at(1, "NAME");
  const auto& pos = a.positionals();
  bool json = a.has("--json");
  if (pos.size() > 2) {
    std::vector<uint32_t> ids;
    for (size_t i = 2; i < pos.size(); ++i) ids.push_back(parse_id_arg(pos[i]));  // all checked before any write
    int present = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (mode == kCheck) {
        bool in = rs.contains(ids[i]);
        present += in;
        if (json)
          printf("%s\n", Json().add("id", ids[i]).add("present", in).str().c_str());
        else
          printf("%u %s\n", ids[i], in ? "present" : "absent");
      } else {
        check_status(mode == kAdd ? rs.add(ids[i]) : rs.remove(ids[i]), name);
        if (json)
          printf("%s\n", Json().add("id", ids[i]).add(mode == kAdd ? "added" : "removed", true).str().c_str());
        else
          printf("%u %s\n", ids[i], mode == kAdd ? "added" : "removed");
      }
    }
    return 0;
  }
  // stdin: batches, counts. Adds are collected into one process-local bitmap
  // and merged in a single compaction at the end (1e8 lines would otherwise
  // cost thousands of compactions); removes and checks go in batches.
  roaring_bitmap_t* bulk = mode == kAdd ? roaring_bitmap_create() : nullptr;
  struct Free {
    roaring_bitmap_t*& b;
    ~Free() {
      if (b) roaring_bitmap_free(b);
    }
  } free_bulk{bulk};
  std::vector<uint32_t> batch;
  std::vector<uint8_t> out;
  batch.reserve(kBatch);
  uint64_t done = 0, present = 0;
  Rejects rej;
  auto flush = [&] {
    if (mode == kAdd) {
      roaring_bitmap_add_many(bulk, batch.size(), batch.data());
    } else if (mode == kCheck) {
      out.resize(batch.size());
      rs.contains_many(std::span<const uint32_t>(batch), out);
      for (uint8_t o : out) present += o;
    } else {
      check_status(rs.remove_many(batch), name);
    }
    done += batch.size();
    batch.clear();
  };
  for_each_stdin_line([&](std::string_view line, uint64_t no) {
    try {
      batch.push_back(RoaringSet::parse_value(line));
    } catch (const Error& e) {
      rej.add(no, e.what());
      return;
    }
    if (batch.size() == kBatch) flush();
  });
  flush();
  if (mode == kAdd) rs.merge(bulk);
  rej.report();
  Json j;
  if (mode == kCheck)
    j.add("checked", done).add("present", present).add("absent", done - present);
  else
    j.add(mode == kAdd ? "added" : "removed", done);
  j.add("rejected", rej.count);
  print_report(j, json);
  return (rej.count && a.has("--strict")) ? 1 : 0;
}

Json describe_fields(Segment& seg, const shmfilter::RegionInfo& info) {
  RoaringSet rs = RoaringSet::open(seg, info.name);
  auto st = rs.stats();
  Json j;
  j.add("cardinality", st.cardinality).add("snapshot_cardinality", st.snapshot_cardinality);
  j.add("snapshot_bytes", st.snapshot_bytes).add("snapshot_generation", st.snapshot_generation);
  j.add("bytes_per_value", st.cardinality ? static_cast<double>(st.snapshot_bytes) / static_cast<double>(st.cardinality) : 0.0);
  j.add("delta_fill", st.delta_fill).add("delta_capacity", st.delta_capacity);
  j.add("delta_fill_pct", st.delta_chain_capacity ? 100.0 * static_cast<double>(st.delta_fill) / static_cast<double>(st.delta_chain_capacity) : 0.0);
  j.add("delta_tables", st.delta_tables).add("delta_chain_capacity", st.delta_chain_capacity).add("delta_links", st.delta_links);
  j.add("prev_delta_fill", st.prev_delta_fill);
  j.add("containers", st.containers).add("array_containers", st.array_containers);
  j.add("bitmap_containers", st.bitmap_containers).add("run_containers", st.run_containers);
  j.add_size("bytes", st.total_bytes).add("pending_free", st.pending_free);
  j.add("compactions", st.compactions).add("readers", st.readers).add("compaction_claim", st.claim_owner);
  j.add("link_claim", st.link_claim_owner);
  return j;
}

bool looks_portable(std::string_view b) {
  if (b.size() < 4) return false;
  uint32_t cookie;
  memcpy(&cookie, b.data(), 4);
  return cookie == 12346 || (cookie & 0xFFFF) == 12347;  // text ids never start with ':' or ';'
}

int run_import(const Args& a) {
  Segment seg = open_segment(a.at(0, "SEG"), a);
  const std::string& name = a.at(1, "NAME");
  const std::string& path = a.at(2, "FILE");
  std::string fmt = a.get("--format", "auto");
  if (fmt != "auto" && fmt != "text" && fmt != "portable")
    throw UsageError("--format '" + fmt + "' is not one of auto, text, portable");
  RoaringSet rs = seg.find(name) ? RoaringSet::open(seg, name) : RoaringSet::create(seg, name);
  std::string bytes = read_input(path);
  bool portable = fmt == "portable" || (fmt == "auto" && looks_portable(bytes));
  Json j;
  if (portable) {
    roaring_bitmap_t* b = RoaringSet::parse_portable(bytes);  // throws kBadInput with the reason
    uint64_t n = roaring_bitmap_get_cardinality(b);
    try {
      rs.merge(b);
    } catch (...) {
      roaring_bitmap_free(b);
      throw;
    }
    roaring_bitmap_free(b);
    j.add("format", "portable").add("imported", n).add("rejected", 0);
  } else {
    Progress prog("import " + name, bytes.size());
    roaring_bitmap_t* b = roaring_bitmap_create();
    std::vector<uint32_t> batch;
    batch.reserve(kBatch);
    Rejects rej;
    uint64_t lines = 0, ids = 0;
    size_t pos = 0;
    while (pos < bytes.size()) {
      size_t nl = bytes.find('\n', pos);
      if (nl == std::string::npos) nl = bytes.size();
      std::string_view line(bytes.data() + pos, nl - pos);
      ++lines;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty()) {
        try {
          batch.push_back(RoaringSet::parse_value(line));
        } catch (const Error& e) {
          rej.add(lines, e.what());
        }
        if (batch.size() == kBatch) {
          roaring_bitmap_add_many(b, batch.size(), batch.data());
          ids += batch.size();
          batch.clear();
          prog.update(nl, lines);
        }
      }
      pos = nl + 1;
    }
    roaring_bitmap_add_many(b, batch.size(), batch.data());
    ids += batch.size();
    prog.finish();
    try {
      rs.merge(b);
    } catch (...) {
      roaring_bitmap_free(b);
      throw;
    }
    uint64_t distinct = roaring_bitmap_get_cardinality(b);
    roaring_bitmap_free(b);
    rej.report();
    j.add("format", "text").add("lines", lines).add("imported", ids).add("distinct", distinct).add("rejected", rej.count);
    if (rej.count && a.has("--strict")) {
      print_report(j, a.has("--json"));
      return 1;
    }
  }
  j.add("cardinality", rs.cardinality());
  print_report(j, a.has("--json"));
  return 0;
}

int run_export(const Args& a) {
  RoaringSet rs = open_structure<RoaringSet>(a);
  const std::string& path = a.at(2, "FILE");
  std::string bytes;
  if (a.has("--text")) {
    roaring_bitmap_t* b = rs.to_bitmap();
    roaring_iterate(
        b,
        [](uint32_t v, void* p) {
          char line[16];
          int n = snprintf(line, sizeof line, "%u\n", v);
          static_cast<std::string*>(p)->append(line, static_cast<size_t>(n));
          return true;
        },
        &bytes);
    roaring_bitmap_free(b);
  } else {
    bytes = rs.export_portable();
  }
  if (path != "-") {  // an O_EXCL|O_NOFOLLOW temporary with the segment's mode, renamed into place
    Segment seg = open_segment(a.at(0, "SEG"), a);
    shmfilter::internal::write_file_atomically(path, bytes, shmfilter::internal::segment_file_mode(seg));
    return 0;
  }
  bool ok = fwrite(bytes.data(), 1, bytes.size(), stdout) == bytes.size();
  ok = (fflush(stdout) == 0) && ok;
  if (!ok) throw Error(ErrorCode::kIo, "writing standard output failed: " + std::string(strerror(errno)));
  return 0;
}

SetOp parse_op(const std::string& s) {
  if (s == "union" || s == "or") return SetOp::kUnion;
  if (s == "and" || s == "intersection") return SetOp::kIntersection;
  if (s == "andnot" || s == "difference") return SetOp::kDifference;
  if (s == "xor") return SetOp::kXor;
  throw UsageError("operation '" + s + "' is not one of union, and, andnot, xor");
}

RoaringOptions create_options(const Args& a) {
  RoaringOptions o;
  if (a.has("--delta-capacity")) {
    uint64_t v = parse_count("--delta-capacity", a.get("--delta-capacity"));
    if (v > UINT32_MAX) throw UsageError("--delta-capacity must be at most 16777216");
    o.delta_capacity = static_cast<uint32_t>(v);
  }
  if (a.has("--readers")) {
    uint64_t v = parse_count("--readers", a.get("--readers"));
    if (v > 65536) throw UsageError("--readers must be at most 65536");
    o.reader_slots = static_cast<uint32_t>(v);
  }
  if (a.has("--compact-at")) {
    try {
      o.compact_at = std::stod(a.get("--compact-at"));
    } catch (...) {
      throw UsageError("--compact-at '" + a.get("--compact-at") + "' is not a number");
    }
  }
  o.auto_compact = !a.has("--no-auto-compact");
  return o;
}

int run_create(const Args& a) {
  const RoaringOptions o = create_options(a);
  return create_and_show(a, shmfilter::Kind::kRoaring, [&](Segment& seg, const std::string& name) {
    RoaringSet::create(seg, name, o);
  });
}

int run_add(const Args& a) { return write_or_query(a, kAdd); }
int run_remove(const Args& a) { return write_or_query(a, kRemove); }
int run_check(const Args& a) { return write_or_query(a, kCheck); }

int run_card(const Args& a) {
  printf("%llu\n", static_cast<unsigned long long>(open_structure<RoaringSet>(a).cardinality()));
  return 0;
}

int run_op(const Args& a) {
  Segment seg = open_segment(a.at(0, "SEG"), a);
  SetOp op = parse_op(a.at(1, "OPERATION"));
  const std::string& dest = a.at(2, "DEST");
  a.at(3, "SRC");
  std::vector<std::string> srcs(a.positionals().begin() + 3, a.positionals().end());
  Json j;
  if (dest == "-") {
    j.add("cardinality", RoaringSet::compute_cardinality(seg, op, srcs));
  } else {
    RoaringSet r = RoaringSet::store(seg, dest, op, srcs);
    j.add("dest", dest).add("cardinality", r.cardinality());
  }
  print_report(j, a.has("--json"));
  return 0;
}

int run_any(const Args& a) {
  Segment seg = open_segment(a.at(0, "SEG"), a);
  uint32_t id = parse_id_arg(a.at(1, "ID"));
  a.at(2, "SET");
  std::vector<RoaringSet> sets;
  for (size_t i = 2; i < a.positionals().size(); ++i) sets.push_back(RoaringSet::open(seg, a.positionals()[i]));
  print_report(Json().add("id", id).add("present", RoaringSet::contains_any(sets, id)), a.has("--json"));
  return 0;
}

int run_compact(const Args& a) {
  bool done = open_structure<RoaringSet>(a).compact();
  printf("%s\n", done ? "compacted" : "another process is compacting; try again");
  return done ? 0 : 1;
}

SHMTOOL_COMMAND("roaring create", run_create, R"(create an empty exact set of 32-bit ids
Usage: shmtool roaring create SEG NAME [--delta-capacity N] [--readers N] [--compact-at F] [--no-auto-compact] [--json]

Creates an empty Roaring set (container-table snapshot + shared delta) and
prints what it made (as 'roaring info' does).

Options:
  --delta-capacity N  maximum delta slots, a power of two 64..16777216 (default
                      16777216; 8 B each): the delta starts at 64 and grows with the set
  --readers N         processes that may open it at once (default 32; 64 B each)
  --compact-at F      delta fill fraction that triggers compaction (default 0.5, max 0.9)
  --no-auto-compact   compact only on 'shmtool roaring compact'
  --json              print the new set as one JSON object
Example:
  shmtool roaring create ads freq:17:2026-11-30
)");

SHMTOOL_COMMAND("roaring add", run_add, R"(add ids (arguments, or one per line on stdin)
Usage: shmtool roaring add SEG NAME [ID...] [--strict] [--json]

Adds decimal ids 0..4294967295. With ids as arguments prints one line per id;
without, reads stdin (one id per line), adds them all in one compaction at the
end (fast on 1e8 lines) and prints counts. Lines that are not a
32-bit decimal id are rejected (counted, first line numbers on stderr), never
truncated.

Options:
  --strict         exit 1 when any line was rejected (the valid ids are added
                   all the same)
  --json           {"id":N,"added":true} per id, or one object for the counts
Example:
  seq 1 1000000 | shmtool roaring add ads orders
)");

SHMTOOL_COMMAND("roaring remove", run_remove, R"(remove ids (arguments, or one per line on stdin)
Usage: shmtool roaring remove SEG NAME [ID...] [--strict] [--json]

Removes decimal ids; input rules as for 'roaring add'. Removing an id the set
does not hold is not an error.

Options:
  --strict         exit 1 when any line was rejected
  --json           {"id":N,"removed":true} per id, or one object for the counts
Example:
  shmtool roaring remove ads freq:17:2026-11-30 123456
)");

SHMTOOL_COMMAND("roaring check", run_check, R"(is each id in the set? (arguments, or stdin)
Usage: shmtool roaring check SEG NAME [ID...] [--strict] [--json]

Membership test. With ids as arguments prints 'ID present|absent' per id;
without, reads stdin and prints checked/present/absent counts.
(Integrity of the structure: 'shmtool check SEG'.)

Options:
  --json           {"id":N,"present":true|false} per id, or one object for the
                   counts: checked, present, absent, rejected
  --strict         exit 1 when any line was rejected
Example:
  shmtool roaring check ads freq:17:2026-11-30 123456
)");

SHMTOOL_COMMAND("roaring card", run_card, R"(number of ids in the set
Usage: shmtool roaring card SEG NAME

Prints the cardinality (snapshot plus pending delta).

Example:
  shmtool roaring card ads orders
)");

SHMTOOL_COMMAND("roaring op", run_op, R"(set algebra across named sets into DEST (or '-' for the cardinality only)
Usage: shmtool roaring op SEG union|and|andnot|xor DEST SRC... [--json]

Computes SRC1 op SRC2 op ... (left to right) in this process's memory and stores
it as the new set DEST; DEST '-' prints only the result's cardinality.

Options:
  --json           one JSON object
Example:
  shmtool roaring op ads union week d1 d2 d3 d4 d5 d6 d7
)");

SHMTOOL_COMMAND("roaring any", run_any, R"(is ID in any of the sets? (the 7-day question, no union built)
Usage: shmtool roaring any SEG ID SET... [--json]

Checks each set in turn and stops at the first that holds ID.

Options:
  --json           one JSON object
Example:
  shmtool roaring any ads 123456 d1 d2 d3 d4 d5 d6 d7
)");

SHMTOOL_COMMAND("roaring import", run_import, R"(bulk-add ids from a file: one decimal id per line, or Roaring portable bytes
Usage: shmtool roaring import SEG NAME FILE [--format auto|text|portable] [--strict] [--json]

Reads FILE ('-' = stdin): Roaring's portable serialization (as written by
CRoaring, Java, Go or Python Roaring; detected by its cookie) or text, one
decimal id per line. Creates NAME if absent. All ids go into the next snapshot
in one compaction. Shows a progress bar on a terminal; rejected text lines are
counted with their first line numbers. Corrupt or truncated portable input is
refused as a whole, leaving the set unchanged.

Options:
  --format F       auto (default: portable when FILE starts with its cookie), text or portable
  --strict         exit 1 when any line was rejected
  --json           one JSON object
Example:
  shmtool roaring import ads orders ids.txt
)");

SHMTOOL_COMMAND("roaring export", run_export, R"(write the set in Roaring portable format (or --text: one id per line)
Usage: shmtool roaring export SEG NAME FILE [--text]

Writes FILE ('-' = stdout) in CRoaring's portable serialization, readable by
Java, Go and Python Roaring.

Options:
  --text           write decimal ids, one per line
Example:
  shmtool roaring export ads orders orders.roaring
)");

SHMTOOL_STRUCTURE(shmfilter::Kind::kRoaring, describe_fields, "snapshot bytes, delta fill, container counts by kind",
                  "Prints cardinality, snapshot bytes and generation, delta fill, container counts\n"
                  "(array/bitmap/run), retired snapshots not yet freed, readers, compaction claim.",
                  "ads orders");

SHMTOOL_COMMAND("roaring compact", run_compact, R"(fold the delta into a new snapshot now
Usage: shmtool roaring compact SEG NAME

Runs a compaction (unless another live process is running one) and frees
retired snapshots no process still reads.

Example:
  shmtool roaring compact ads orders
)");

}  // namespace
}  // namespace shmtool
