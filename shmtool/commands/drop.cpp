// shmtool/commands/drop.cpp: `shmtool drop SEG NAME`: drops one named structure.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/segment.h"
#include "shmfilter/kinds.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

int run_drop(const Args& args) {
  const std::string& seg_name = args.at(0, "SEG");
  const std::string& name = args.at(1, "NAME");
  shmfilter::Segment seg = open_segment(seg_name, args);
  auto info = seg.find(name);
  if (!info)
    throw shmfilter::Error(shmfilter::ErrorCode::kNotFound, "segment '" + seg_name + "' has no structure '" + name +
                                                                "': list them with 'shmtool list " + seg_name + "'");
  // The kind's own drop (the kinds table) frees its extra extents (layers, sub-filters,
  // snapshots and packs, a window's bucket tables) with the region.
  const bool dropped = shmfilter::drop_structure(seg, name);
  if (!dropped)
    throw shmfilter::Error(shmfilter::ErrorCode::kNotFound,
                           "structure '" + name + "' of segment '" + seg_name + "' was dropped by another process");
  printf("dropped %s '%s' from segment '%s'\n", std::string(shmfilter::kind_name(info->kind)).c_str(),
         shmfilter::escape_text(name).c_str(), shmfilter::escape_text(seg_name).c_str());
  return 0;
}

SHMTOOL_COMMAND("drop", run_drop, R"(drop one structure of a segment (its memory is reused once no process reads it)
Usage: shmtool drop SEG NAME

Drops structure NAME of segment SEG, whatever its kind, with the memory it
owns (Bloom layers, Cuckoo sub-filters, Roaring snapshots, a window's
bucket tables). Processes that
have it open see it as dropped (kDropped) at their next call; the memory is
reused once every call in flight at the drop has returned. Exit 1 if
SEG has no structure NAME.

Example:
  $ shmtool drop freqcap old-plan
  dropped bloom 'old-plan' from segment 'freqcap'
)");

}  // namespace
}  // namespace shmtool
