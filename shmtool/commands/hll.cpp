// shmtool/commands/hll.cpp: `shmtool hll create|add|count|merge|export|import|clear|info`.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/safe_file.h"
#include "segment/backing_file.h"
#include "cli/command.h"
#include "cli/describe.h"
#include "cli/input.h"
#include "cli/json.h"
#include "cli/segment.h"
#include "shmfilter/hll.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

using shmfilter::Hll;
using shmfilter::Segment;

Json describe_fields(Segment& seg, const shmfilter::RegionInfo& info) {
  shmfilter::HllStats s = Hll::open(seg, info.name).stats();
  Json j;
  j.add("estimate", s.estimate).add("registers", s.registers).add("nonzero_registers", s.nonzero_registers);
  j.add("max_register", s.max_register).add("standard_error", s.standard_error).add_size("bytes", s.bytes);
  j.add("hash", "MurmurHash64A seed 0xadc83b19 (Redis-compatible)");
  j.add("note", "distinct count only: an HLL is not a membership test");
  return j;
}

// Positionals from `first` on, each the name of an existing HLL.
std::vector<Hll> open_all(Segment& seg, const Args& a, size_t first) {
  std::vector<Hll> hs;
  for (size_t i = first; i < a.positionals().size(); ++i) hs.push_back(Hll::open(seg, a.positionals()[i]));
  return hs;
}

void print_count(uint64_t n) { printf("%llu\n", static_cast<unsigned long long>(n)); }

int run_create(const Args& a) {
  return create_and_show(a, shmfilter::Kind::kHll, [](Segment& seg, const std::string& name) { Hll::create(seg, name); });
}

int run_add(const Args& a) {
  Hll h = open_structure<Hll>(a);
  const auto& pos = a.positionals();
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i)
      printf("%s\t%d\n", shmfilter::escape_text(pos[i]).c_str(), h.add(std::string_view(pos[i])) ? 1 : 0);
    return 0;
  }
  uint64_t lines = 0;
  for_each_stdin_line([&](std::string_view line, uint64_t) {
    h.add(line);
    ++lines;
  });
  if (!h.valid()) throw shmfilter::Error(shmfilter::ErrorCode::kDropped, "the HLL was dropped while adding");
  printf("lines: %llu\ncount: %llu\n", static_cast<unsigned long long>(lines),
         static_cast<unsigned long long>(h.count()));
  return 0;
}

int run_count(const Args& a) {
  Segment seg = open_segment(a.at(0, "SEG"), a);
  a.at(1, "NAME");
  print_count(Hll::count_union(open_all(seg, a, 1)));
  return 0;
}

int run_merge(const Args& a) {
  Segment seg = open_segment(a.at(0, "SEG"), a);
  const std::string& dest = a.at(1, "DEST");
  a.at(2, "SRC");
  std::vector<Hll> src = open_all(seg, a, 2);
  Hll d = Hll::open_or_create(seg, dest);
  d.merge_from(src);
  print_count(d.count());
  return 0;
}

int run_export(const Args& a) {
  std::string bytes = open_structure<Hll>(a).export_redis();
  std::string out = a.get("--output");
  if (out.empty() && isatty(1))
    throw UsageError("refusing to write binary HLL bytes to a terminal: pipe it or pass --output FILE");
  if (!out.empty()) {  // an O_EXCL|O_NOFOLLOW temporary with the segment's mode, renamed into place
    Segment seg = open_segment(a.at(0, "SEG"), a);
    shmfilter::internal::write_file_atomically(out, bytes, shmfilter::internal::segment_file_mode(seg));
    return 0;
  }
  bool ok = fwrite(bytes.data(), 1, bytes.size(), stdout) == bytes.size();
  ok = fflush(stdout) == 0 && ok;
  if (!ok) throw shmfilter::Error(shmfilter::ErrorCode::kIo, "writing stdout failed");
  return 0;
}

int run_import(const Args& a) {
  Segment seg = open_segment(a.at(0, "SEG"), a);
  const std::string& name = a.at(1, "NAME");
  std::string bytes = read_input(a.positionals().size() > 2 ? a.positionals()[2] : "-");
  // Validate before creating anything; forgive the newline redis-cli appends.
  try {
    Hll::count_redis(bytes);
  } catch (const shmfilter::Error&) {
    if (bytes.empty() || bytes.back() != '\n') throw;
    bytes.pop_back();
    Hll::count_redis(bytes);
  }
  Hll h = Hll::open_or_create(seg, name);
  h.import_redis(bytes);
  print_count(h.count());
  return 0;
}

int run_clear(const Args& a) {
  open_structure<Hll>(a).clear();
  return 0;
}

SHMTOOL_COMMAND("hll create", run_create, R"(create a HyperLogLog (distinct counter, 13 KB, 0.81% error)
Usage: shmtool hll create SEG NAME [--json]

Creates NAME in SEG: 2^14 registers, Redis-compatible hash and estimator, and
prints what it made (as 'hll info' does). An HLL counts distinct keys; it
cannot tell whether a key was added.

Options:
  --json           print the new HLL as one JSON object
Example:
  shmtool hll create ads uv:plan42:2026-11-30
)");

SHMTOOL_COMMAND("hll add", run_add, R"(add keys (arguments, or stdin one per line)
Usage: shmtool hll add SEG NAME [KEY...]

Adds each KEY (bytes, as Redis PFADD would). With keys as arguments prints
'KEY<TAB>1' when a register changed (PFADD's 1) else 0. Without keys reads
stdin, one key per line, and prints the number of lines and the new count.

Example:
  cut -d' ' -f2 events.txt | shmtool hll add ads uv:plan42:2026-11-30
)");

SHMTOOL_COMMAND("hll count", run_count, R"(estimated distinct count (of the union when several)
Usage: shmtool hll count SEG NAME [NAME...]

Prints the estimate for NAME, or for the union of several HLLs without
writing anything (e.g. a 7-day UV from 7 daily HLLs). Same number as
Redis PFCOUNT on the same keys.

Example:
  shmtool hll count ads uv:p42:d1 uv:p42:d2 uv:p42:d3
)");

SHMTOOL_COMMAND("hll merge", run_merge, R"(register-max of SRCs into DEST (created if absent)
Usage: shmtool hll merge SEG DEST SRC [SRC...]

DEST becomes the union of itself and every SRC (Redis PFMERGE). Idempotent:
if interrupted, run it again. Prints DEST's new count.

Example:
  shmtool hll merge ads uv:p42:week uv:p42:d1 uv:p42:d2
)");

SHMTOOL_COMMAND("hll export", run_export, R"(write Redis's dense HLL bytes (for SET + PFCOUNT in Redis)
Usage: shmtool hll export SEG NAME [--output FILE]

Writes the 12,304-byte Redis dense encoding to stdout or FILE.

Options:
  --output FILE    write to FILE instead of stdout
Example:
  shmtool hll export ads uv:p42 | redis-cli -x SET uv:p42
)");

SHMTOOL_COMMAND("hll import", run_import, R"(load a Redis HLL (GET bytes, dense or sparse) into NAME
Usage: shmtool hll import SEG NAME [FILE|-]

Reads Redis HLL bytes from FILE or stdin and merges them (register max) into
NAME, creating it if absent; prints NAME's count. Both of Redis's encodings
(dense and sparse) are read. redis-cli GET into a pipe appends one newline;
when the bytes do not parse with it, it is dropped.

Example:
  redis-cli GET uv:p42 | shmtool hll import ads uv:p42
)");

SHMTOOL_COMMAND("hll clear", run_clear, R"(zero every register
Usage: shmtool hll clear SEG NAME

Zeroes NAME's registers (adds racing with it may survive).

Example:
  shmtool hll clear ads uv:p42
)");

SHMTOOL_STRUCTURE(shmfilter::Kind::kHll, describe_fields, "estimate, registers used, bytes",
                  "Prints the estimate, registers in use, the largest register, the standard error\n"
                  "(0.81%) and the bytes used.",
                  "ads uv:p42");

}  // namespace
}  // namespace shmtool
