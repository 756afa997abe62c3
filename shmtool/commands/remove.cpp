// shmtool/commands/remove.cpp: `shmtool remove NAME`: removes a segment's name.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/segment_util.h"

namespace shmtool {
namespace {

int run_remove(const Args& args) {
  args.allow({"--file"});
  const std::string name = args.at(0, "segment NAME");
  no_extra_positionals(args, 1);
  bool removed = false;
  try {
    removed = shmfilter::Segment::remove(name, open_options(args));
  } catch (const shmfilter::Error& e) {
    rethrow_naming(e, name);
  }
  if (!removed) {
    const std::string where = args.get("--file").empty() ? "/dev/shm/" + name : args.get("--file");
    throw shmfilter::Error(shmfilter::ErrorCode::kNotFound,
                           "no segment '" + name + "' (" + where + "): check the name with 'ls /dev/shm'");
  }
  printf("removed segment '%s'\n", name.c_str());
  return 0;
}

const CommandRegistrar reg_remove(Command{
    "", "remove", "shmtool remove NAME [--file PATH]",
    "remove a segment (attached processes keep their mapping)",
    "Removes segment NAME: unlinks /dev/shm/NAME (or the --file) and its companion\n"
    "lock file. Like unlinking a file, processes still attached keep working on\n"
    "their mapping until they detach; the memory is returned when the last one\n"
    "does. A new segment of the same name is a different segment. Exit 1 if there\n"
    "is no such segment.\n"
    "\n"
    "Options:\n" +
        std::string(kFileOptionHelp) +
        "\n"
        "Example:\n"
        "  $ shmtool remove freqcap\n"
        "  removed segment 'freqcap'\n",
    {},
    run_remove});

}  // namespace
}  // namespace shmtool
