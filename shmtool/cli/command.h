// shmtool/cli/command.h: how a subcommand plugs into shmtool.
//
// Every command is a named function `int run_x(const Args&)` plus one
// SHMTOOL_COMMAND("group name", run_x, R"(help)") in its commands/ file. The
// help text is the command's whole spec, in this shape:
//
//   one-line summary
//   Usage: shmtool bloom create SEG NAME --capacity N [...]
//   <blank>
//   what it does (any number of lines)
//   Options:
//     --capacity N     what N is          <- "--name METAVAR": takes a value
//     --json           one JSON object    <- "--name" alone: a flag
//   Example:
//     shmtool bloom create freq plan42 --capacity 150M
//
// The option table parsed from "Options:" is what the command accepts (plus
// --file PATH, which every command takes and whose help is added), so help and
// parser cannot drift. main.cpp dispatches on argv[1] (and, for structure groups
// such as "bloom", argv[2]). Commands call only the public API in include/shmfilter/.
//
// Exit codes: 0 success; 1 the segment or structure is missing or bad, or
// `check` found problems; 2 bad command-line arguments (UsageError).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"

namespace shmtool {

// A command file passes its named `int run_x(const Args&)`.
using RunFn = std::function<int(const Args&)>;

struct Command {
  std::string group;            // "" for segment commands (create, list...), else "bloom", "cuckoo", ...
  std::string name;             // "create", "add", ...
  std::string summary;          // one line for the command list
  std::string usage;            // "shmtool bloom create SEG NAME --capacity N [...]"
  std::string help;             // the full help as printed, from "Usage:" to the example
  std::vector<Option> options;  // what the command accepts, --file included
  size_t max_positionals = 0;   // from the Usage: line (SIZE_MAX after a "..."); main rejects more
  RunFn run = nullptr;
};

// Every registered command, in registration order (link order of commands/, then file order).
const std::vector<Command>& commands();

struct CommandRegistrar {
  CommandRegistrar(std::string_view path, RunFn run, std::string_view spec);
};

#define SHMTOOL_COMMAND_CAT2(a, b) a##b
#define SHMTOOL_COMMAND_CAT(a, b) SHMTOOL_COMMAND_CAT2(a, b)
// Registers command PATH ("create" or "bloom create") running RUN, specified by SPEC (see above).
#define SHMTOOL_COMMAND(PATH, RUN, SPEC) \
  const ::shmtool::CommandRegistrar SHMTOOL_COMMAND_CAT(shmtool_command_, __LINE__)(PATH, RUN, SPEC)

}  // namespace shmtool
