// shmtool/commands/remove.cpp: `shmtool remove NAME`: removes a segment's name.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/segment.h"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

int run_remove(const Args& args) {
  const std::string& name = segment_name(args);
  bool removed = false;
  try {
    removed = shmfilter::Segment::remove(name, open_options(args));
  } catch (const shmfilter::Error& e) {
    rethrow_naming(e, name);
  }
  if (!removed) {
    throw shmfilter::Error(shmfilter::ErrorCode::kNotFound, "no segment '" + name + "' (" + backing_path(name, args) +
                                                                "): check the name with 'ls /dev/shm'");
  }
  printf("removed segment '%s'\n", shmfilter::escape_text(name).c_str());
  return 0;
}

SHMTOOL_COMMAND("remove", run_remove, R"(remove a segment (attached processes keep their mapping)
Usage: shmtool remove NAME

Removes segment NAME: unlinks /dev/shm/NAME (or the --file) and its companion
lock file. Like unlinking a file, processes still attached keep working on
their mapping until they detach; the memory is returned when the last one
does. A new segment of the same name is a different segment. Exit 1 if there
is no such segment.

Example:
  $ shmtool remove freqcap
  removed segment 'freqcap'
)");

}  // namespace
}  // namespace shmtool
