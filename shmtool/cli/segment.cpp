// shmtool/cli/segment.cpp: opening the named segment.
#include "cli/segment.h"

namespace shmtool {

const std::string& segment_name(const Args& args) {
  args.no_more_than(1);
  return args.at(0, "segment NAME");
}

shmfilter::OpenOptions open_options(const Args& args) {
  shmfilter::OpenOptions o;
  o.file = args.get("--file");
  return o;
}

std::string backing_path(const std::string& name, const Args& args) {
  return args.get("--file").empty() ? "/dev/shm/" + name : args.get("--file");
}

void rethrow_naming(const shmfilter::Error& e, const std::string& name) {
  std::string msg = e.what();
  if (msg.find(name) != std::string::npos) throw e;
  throw shmfilter::Error(e.code(), "segment '" + name + "': " + msg);
}

shmfilter::Segment open_segment(const std::string& name, const Args& args) {
  try {
    return shmfilter::Segment::open(name, open_options(args));
  } catch (const shmfilter::Error& e) {
    rethrow_naming(e, name);
  }
}

}  // namespace shmtool
