// shmtool/cli/segment.cpp: opening the named segment.
#include "cli/segment.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace shmtool {

const std::string& segment_name(const Args& args) {
  args.no_more_than(1);
  return args.at(0, "segment NAME");
}

namespace {
std::string g_command;      // "list", "bloom add", ...
bool g_command_writes = true;
bool inspector(const std::string& path) {
  static const char* const kInspectors[] = {
      "list", "dump", "stats", "check", "save", "bloom check", "bloom info", "cuckoo check", "cuckoo info",
      "hll count", "hll export", "hll info", "set check", "set info", "roaring check", "roaring card",
      "roaring any", "roaring export", "roaring info", "window seen", "window count", "window info"};
  for (const char* c : kInspectors)
    if (path == c) return true;
  return false;
}
}  // namespace

void set_current_command(const std::string& path) {
  g_command = path;
  g_command_writes = !inspector(path);
}

shmfilter::OpenOptions open_options(const Args& args) {
  shmfilter::OpenOptions o;
  o.file = args.get("--file");
  o.read_only = args.has("--read-only");
  if (args.has("--trust-owner")) {
    const std::string v = args.get("--trust-owner");
    char* end = nullptr;
    errno = 0;
    unsigned long long uid = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || v[0] == '-' || *end != '\0' || errno != 0 || uid > 0xfffffffeull)
      throw shmfilter::Error(shmfilter::ErrorCode::kInvalidArgument,
                             "--trust-owner '" + v.substr(0, 32) + "' is not a uid: pass a number such as 1000 (id -u USER)");
    o.trusted_owner = static_cast<int64_t>(uid);
  }
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
    shmfilter::OpenOptions o = open_options(args);
    // Inspection by a user who may read but not write the segment: read-only
    // by itself (a command that writes then fails with kReadOnly, named).
    const std::string path = backing_path(name, args);
    if (!o.read_only && ::access(path.c_str(), R_OK) == 0 && ::access(path.c_str(), W_OK) != 0 && errno == EACCES)
      o.read_only = true;
    if (o.read_only && g_command_writes)
      throw shmfilter::Error(shmfilter::ErrorCode::kReadOnly,
                             "segment '" + name + "': 'shmtool " + g_command + "' writes, and the segment is opened " +
                             (args.has("--read-only") ? "read-only (--read-only)" : "read-only: you may read " + path +
                             " but not write it") + ": run it as a user who may write the segment");
    return shmfilter::Segment::open(name, o);
  } catch (const shmfilter::Error& e) {
    rethrow_naming(e, name);
  }
}

}  // namespace shmtool
