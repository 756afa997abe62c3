// shmtool/commands/resize.cpp: `shmtool resize NAME --size SIZE`: grows or shrinks the backing object.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/numbers.h"
#include "cli/segment.h"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

int run_resize(const Args& args) {
  const std::string& name = segment_name(args);
  if (!args.has("--size")) throw UsageError("missing --size SIZE (the new backing size)");
  const uint64_t size = size_option(args, "--size", 0);
  if (size == 0) throw UsageError("--size 0 is invalid: pass the new size, such as 4GiB");
  shmfilter::Segment seg = open_segment(name, args);
  const uint64_t before = seg.size(), max_size = seg.stats().max_size;
  if (size > max_size)
    throw UsageError("--size " + shmfilter::format_size(size) + " is above the segment's maximum size " +
                     shmfilter::format_size(max_size) + " (set at creation with --max-size)");
  try {
    seg.resize(size);
  } catch (const shmfilter::Error& e) {
    rethrow_naming(e, name);
  }
  const uint64_t after = seg.size();
  printf("resized segment '%s': %s -> %s (may grow to %s)\n", shmfilter::escape_text(name).c_str(),
         shmfilter::format_size(before).c_str(), shmfilter::format_size(after).c_str(),
         shmfilter::format_size(seg.stats().max_size).c_str());
  return 0;
}

SHMTOOL_COMMAND("resize", run_resize, R"(grow the segment online, or shrink it when its tail is free
Usage: shmtool resize NAME --size SIZE

Sets the backing size of segment NAME. Growing works while other processes
are attached and working: the mapping was reserved up to the maximum size at
creation, so nothing moves; the new space is claimed for real
(posix_fallocate), so a full /dev/shm or disk is an error now, not a crash
later. Shrinking succeeds only when everything past the new size is free.
Segments also grow by themselves when a structure needs space; resize is for
claiming space ahead of time or giving an unused tail back.

Options:
  --size SIZE      the new size (bytes, KiB/MiB/GiB/TiB or k/M/G/T); at most
                   the --max-size given at creation
Example:
  $ shmtool resize freqcap --size 4GiB
  resized segment 'freqcap': 2.00 GiB -> 4.00 GiB (may grow to 64.00 GiB)
)");

}  // namespace
}  // namespace shmtool
