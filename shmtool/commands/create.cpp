// shmtool/commands/create.cpp: `shmtool create NAME`: makes a new, empty segment.
#include <grp.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/command.h"
#include "cli/json.h"
#include "cli/numbers.h"
#include "cli/report.h"
#include "cli/segment.h"

namespace shmtool {
namespace {

int64_t parse_group(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    errno = 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (errno != 0 || v > 0x7fffffffull) throw UsageError("--group '" + text + "' is out of range: pass a group id or name");
    return static_cast<int64_t>(v);
  }
  if (struct group* g = getgrnam(text.c_str())) return static_cast<int64_t>(g->gr_gid);
  throw UsageError("--group '" + text + "' is not a known group: pass a group id or an existing group name");
}

int run_create(const Args& args) {
  const std::string& name = segment_name(args);

  shmfilter::CreateOptions o;
  o.size = size_option(args, "--size", o.size);
  o.max_size = size_option(args, "--max-size", o.max_size);
  if (o.size == 0) throw UsageError("--size 0 is invalid: pass a size such as 64MiB");
  if (o.max_size < o.size)
    throw UsageError("--max-size " + shmfilter::format_size(o.max_size) + " is below --size " +
                     shmfilter::format_size(o.size) + ": pass --max-size >= --size");
  o.directory_capacity = static_cast<uint32_t>(uint_option(args, "--directory", o.directory_capacity, 1, 1u << 22));
  o.file = args.get("--file");
  if (args.has("--file") && o.file.empty()) throw UsageError("--file needs a path");
  if (args.has("--group")) {
    o.group = parse_group(args.get("--group"));
    o.mode = 0660;  // a group is given to be shared with: let it read and write
  }
  o.mode = static_cast<uint32_t>(uint_option(args, "--mode", o.mode, 0, 0777, 8));

  shmfilter::Segment seg;
  try {
    seg = shmfilter::Segment::create(name, o);
  } catch (const shmfilter::Error& e) {
    rethrow_naming(e, name);
  }
  const auto st = seg.stats();
  char mode[16];
  snprintf(mode, sizeof mode, "0%o", o.mode);
  Json report;
  report.add("segment", name).add("backing", backing_path(name, args)).add_size("size", st.size);
  report.add_size("max_size", st.max_size).add("directory_capacity", st.directory_capacity).add("mode", mode);
  if (o.group >= 0) report.add("group", o.group);
  print_report(report, args.has("--json"));
  return 0;
}

SHMTOOL_COMMAND("create", run_create, R"(create a new, empty segment
Usage: shmtool create NAME [--size SIZE] [--max-size SIZE] [--directory N] [--mode MODE] [--group GID] [--json]

Creates the segment NAME: a POSIX shared-memory object /dev/shm/NAME (or the
file given with --file) holding a header, the process registry, a directory
of named structures and the region allocator. Fails if NAME exists already;
a failed create leaves nothing behind. Prints what it made: backing, size,
maximum size, directory capacity, mode (and group).

The segment reserves --max-size of address space once, in every process, and
its backing object grows on demand up to it (offsets never move). Space is
claimed for real (posix_fallocate), so a full /dev/shm is an error when space
is requested, never a crash later.
Sizes: bytes, or KiB/MiB/GiB/TiB, or k/M/G/T (powers of 1024).

Options:
  --size SIZE      initial backing size (default 64MiB); grows automatically
  --max-size SIZE  largest size it may ever grow to (default 64GiB; address
                   space only, costs no memory until used)
  --directory N    how many named structures it can hold, 1..4194304 (default
                   4096; 8,000 plans x 7 days needs 65536)
  --mode MODE      permission bits, octal 0..0777 (default 0600: only this
                   user; 0660 with --group)
  --group GID      group id or name that owns it (every process of that group
                   may then attach; implies --mode 0660 unless --mode is given)
  --json           print what was made as one JSON object
Example:
  shmtool create freqcap --size 2GiB --max-size 64GiB --directory 65536
  shmtool create freqcap-disk --file /var/lib/freqcap.seg --size 1GiB
)");

}  // namespace
}  // namespace shmtool
