// shmtool/commands/hll.cpp: `shmtool hll create|add|count|merge|export|import|clear|info`.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/segment_util.h"
#include "shmfilter/hll.hpp"

namespace shmtool {
namespace {

using shmfilter::Hll;
using shmfilter::Segment;

Segment open_segment(const Args& a) { return shmtool::open_segment(a.at(0, "SEG"), a); }

Json describe_hll(Segment& seg, const shmfilter::RegionInfo& info) {
  Hll h = Hll::open(seg, info.name);
  shmfilter::HllStats s = h.stats();
  Json j;
  j.add("name", info.name)
      .add("kind", "hll")
      .add("estimate", s.estimate)
      .add("registers", s.registers)
      .add("nonzero_registers", s.nonzero_registers)
      .add("max_register", s.max_register)
      .add("standard_error", s.standard_error)
      .add("bytes", s.bytes)
      .add("hash", "MurmurHash64A seed 0xadc83b19 (Redis-compatible)")
      .add("note", "distinct count only: an HLL is not a membership test");
  return j;
}

DescriberRegistrar describer({shmfilter::Kind::kHll, describe_hll});

std::string read_all(FILE* f) {
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

CommandRegistrar create_cmd({"hll", "create", "shmtool hll create SEG NAME [--file PATH]",
                             "create a HyperLogLog (distinct counter, 13 KB, 0.81% error)",
                             "Creates NAME in SEG: 2^14 registers, Redis-compatible hash and estimator.\n"
                             "An HLL counts distinct keys; it cannot tell whether a key was added.\n"
                             "Example: shmtool hll create ads uv:plan42:2026-11-30",
                             {},
                             [](const Args& a) {
                               a.allow({"--file"});
                               Segment seg = open_segment(a);
                               Hll::create(seg, a.at(1, "NAME"));
                               return 0;
                             }});

CommandRegistrar add_cmd(
    {"hll", "add", "shmtool hll add SEG NAME [KEY...] [--file PATH]",
     "add keys (arguments, or stdin one per line)",
     "Adds each KEY (bytes, as Redis PFADD would). With keys as arguments prints\n"
     "'KEY<TAB>1' when a register changed (PFADD's 1) else 0. Without keys reads\n"
     "stdin, one key per line, and prints the number of lines and the new count.\n"
     "Example: cut -d' ' -f2 events.txt | shmtool hll add ads uv:plan42:2026-11-30",
     {},
     [](const Args& a) {
       a.allow({"--file"});
       Segment seg = open_segment(a);
       Hll h = Hll::open(seg, a.at(1, "NAME"));
       const auto& pos = a.positionals();
       if (pos.size() > 2) {
         for (size_t i = 2; i < pos.size(); ++i) printf("%s\t%d\n", pos[i].c_str(), h.add(std::string_view(pos[i])) ? 1 : 0);
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
     }});

CommandRegistrar count_cmd({"hll", "count", "shmtool hll count SEG NAME [NAME...] [--file PATH]",
                            "estimated distinct count (of the union when several)",
                            "Prints the estimate for NAME, or for the union of several HLLs without\n"
                            "writing anything (e.g. a 7-day UV from 7 daily HLLs). Same number as\n"
                            "Redis PFCOUNT on the same keys.\n"
                            "Example: shmtool hll count ads uv:p42:d1 uv:p42:d2 uv:p42:d3",
                            {},
                            [](const Args& a) {
                              a.allow({"--file"});
                              Segment seg = open_segment(a);
                              a.at(1, "NAME");
                              std::vector<Hll> hs;
                              for (size_t i = 1; i < a.positionals().size(); ++i)
                                hs.push_back(Hll::open(seg, a.positionals()[i]));
                              printf("%llu\n", static_cast<unsigned long long>(Hll::count_union(hs)));
                              return 0;
                            }});

CommandRegistrar merge_cmd({"hll", "merge", "shmtool hll merge SEG DEST SRC [SRC...] [--file PATH]",
                            "register-max of SRCs into DEST (created if absent)",
                            "DEST becomes the union of itself and every SRC (Redis PFMERGE). Idempotent:\n"
                            "if interrupted, run it again. Prints DEST's new count.\n"
                            "Example: shmtool hll merge ads uv:p42:week uv:p42:d1 uv:p42:d2",
                            {},
                            [](const Args& a) {
                              a.allow({"--file"});
                              Segment seg = open_segment(a);
                              const std::string& dest = a.at(1, "DEST");
                              a.at(2, "SRC");
                              std::vector<Hll> src;
                              for (size_t i = 2; i < a.positionals().size(); ++i)
                                src.push_back(Hll::open(seg, a.positionals()[i]));
                              Hll d = Hll::open_or_create(seg, dest);
                              d.merge_from(src);
                              printf("%llu\n", static_cast<unsigned long long>(d.count()));
                              return 0;
                            }});

CommandRegistrar export_cmd({"hll", "export", "shmtool hll export SEG NAME [--output FILE] [--file PATH]",
                             "write Redis's dense HLL bytes (for SET + PFCOUNT in Redis)",
                             "Writes the 12,304-byte Redis dense encoding to stdout or FILE.\n"
                             "Example: shmtool hll export ads uv:p42 | redis-cli -x SET uv:p42",
                             {},
                             [](const Args& a) {
                               a.allow({"--file", "--output"});
                               Segment seg = open_segment(a);
                               std::string bytes = Hll::open(seg, a.at(1, "NAME")).export_redis();
                               std::string out = a.get("--output");
                               if (out.empty() && isatty(1))
                                 throw UsageError("refusing to write binary HLL bytes to a terminal: pipe it or pass --output FILE");
                               FILE* f = out.empty() ? stdout : fopen(out.c_str(), "wb");
                               if (!f)
                                 throw shmfilter::Error(shmfilter::ErrorCode::kIo, "cannot write " + out + ": check the path");
                               fwrite(bytes.data(), 1, bytes.size(), f);
                               if (f != stdout) fclose(f);
                               return 0;
                             }});

CommandRegistrar import_cmd(
    {"hll", "import", "shmtool hll import SEG NAME [FILE|-] [--file PATH]",
     "load a Redis HLL (GET bytes, dense or sparse) into NAME",
     "Reads Redis HLL bytes from FILE or stdin and merges them (register max) into\n"
     "NAME, creating it if absent; prints NAME's count. Both of Redis's encodings\n"
     "(dense and sparse) are read. redis-cli GET into a pipe appends one newline;\n"
     "when the bytes do not parse with it, it is dropped.\n"
     "Example: redis-cli GET uv:p42 | shmtool hll import ads uv:p42",
     {},
     [](const Args& a) {
       a.allow({"--file"});
       Segment seg = open_segment(a);
       const std::string& name = a.at(1, "NAME");
       std::string path = a.positionals().size() > 2 ? a.positionals()[2] : "-";
       std::string bytes;
       if (path == "-") {
         bytes = read_all(stdin);
       } else {
         FILE* f = fopen(path.c_str(), "rb");
         if (!f) throw shmfilter::Error(shmfilter::ErrorCode::kIo, "cannot read " + path + ": check the path");
         bytes = read_all(f);
         fclose(f);
       }
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
       printf("%llu\n", static_cast<unsigned long long>(h.count()));
       return 0;
     }});

CommandRegistrar clear_cmd({"hll", "clear", "shmtool hll clear SEG NAME [--file PATH]", "zero every register",
                            "Zeroes NAME's registers (adds racing with it may survive).\n"
                            "Example: shmtool hll clear ads uv:p42",
                            {},
                            [](const Args& a) {
                              a.allow({"--file"});
                              Segment seg = open_segment(a);
                              Hll::open(seg, a.at(1, "NAME")).clear();
                              return 0;
                            }});

CommandRegistrar info_cmd({"hll", "info", "shmtool hll info SEG NAME [--json] [--file PATH]",
                           "estimate, registers used, bytes",
                           "Prints the HLL's description (as `shmtool dump` does).\n"
                           "Example: shmtool hll info ads uv:p42 --json",
                           {"--json"},
                           [](const Args& a) { return run_info(a, shmfilter::Kind::kHll); }});

}  // namespace
}  // namespace shmtool
