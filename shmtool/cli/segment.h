// shmtool/cli/segment.h: the segment a command names (SEG, honouring --file),
// opened the one way every command does, with errors that name it.
#pragma once

#include <string>

#include "cli/args.h"
#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"

namespace shmtool {

// A segment command's one positional, NAME (create, list, dump, resize, remove, check).
const std::string& segment_name(const Args& args);

// --file PATH as OpenOptions (empty: /dev/shm/NAME).
shmfilter::OpenOptions open_options(const Args& args);
// main: the command about to run ("list", "bloom add"). A command that may
// write refuses a read-only attachment (--read-only, or a segment the caller
// may only read) with kReadOnly before it opens anything; the inspectors
// (list, dump, stats, check, save, X info, X check, hll count/export, ...)
// run read-only.
void set_current_command(const std::string& path);

// Where the segment lives: the --file path, else /dev/shm/NAME.
std::string backing_path(const std::string& name, const Args& args);

// Rethrows e with the segment's name in front unless the message names it already.
[[noreturn]] void rethrow_naming(const shmfilter::Error& e, const std::string& name);

// Opens segment NAME (honouring --file); every error names the segment.
shmfilter::Segment open_segment(const std::string& name, const Args& args);

// A structure command's "SEG NAME ...": opens the segment and the structure.
// (Handles keep their segment alive.)
template <class Handle>
Handle open_structure(const Args& args) {
  shmfilter::Segment seg = open_segment(args.at(0, "SEG"), args);
  return Handle::open(seg, args.at(1, "NAME"));
}

}  // namespace shmtool
