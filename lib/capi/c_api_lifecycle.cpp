// lib/capi/c_api_lifecycle.cpp: the C API of a segment's life beside its data:
// whether its name still refers to the mapping a process holds
// (shmf_segment_linked), and save/restore (shmfilter/snapshot.hpp) for C
// callers: the nginx module's rescue of a segment whose file was removed under
// its workers (docs/nginx.md, "A removed segment").
#include <sys/stat.h>

#include "capi/c_api_internal.h"
#include "segment/segment_impl.h"
#include "shmfilter/snapshot.hpp"

using namespace shmfilter;
using namespace shmfilter::capi;

extern "C" {

int shmf_segment_linked(shmf_segment* seg) {
  return guard([&] {
    need(seg, "shmf_segment_linked", "seg");
    const internal::SegmentImpl* im = seg->seg.impl();
    if (im == nullptr || im->fd < 0)
      return fail(SHMF_EINVAL, "shmf_segment_linked: the handle holds no attachment: open the segment");
    struct stat mine {}, named {};
    if (::fstat(im->fd, &mine) != 0)
      return fail(SHMF_EIO, "shmf_segment_linked: fstat of the segment's descriptor failed");
    if (mine.st_nlink == 0) return 0;  // unlinked: only the mappings keep it
    if (::stat(im->path.c_str(), &named) != 0) return 0;  // the name is gone (or unreachable)
    return (named.st_dev == mine.st_dev && named.st_ino == mine.st_ino) ? 1 : 0;
  });
}

int shmf_segment_save(shmf_segment* seg, const char* path) {
  return guard([&] {
    need(seg, "shmf_segment_save", "seg");
    need(path, "shmf_segment_save", "path");
    (void)save(seg->seg, path);
    return 0;
  });
}

int shmf_segment_restore(const char* path, const char* name, const shmf_segment_options* opts) {
  return guard([&] {
    need(path, "shmf_segment_restore", "path");
    need(name, "shmf_segment_restore", "name");
    RestoreOptions ro;
    if (opts != nullptr) {  // size, max_size and the directory come from the save
      if (opts->file != nullptr) ro.create.file = opts->file;
      ro.create.mode = opts->mode;
      ro.create.group = opts->group;
    }
    (void)restore(path, name, ro);
    return 0;
  });
}

}  // extern "C"
