// lib/base/safe_file.h: files the library and shmtool write or read by path
// (docs/SECURITY.md, "Save, restore and files"):
//  - written through a temporary created with O_CREAT|O_EXCL|O_NOFOLLOW in the
//    target's own folder (a planted file or symbolic link there is never
//    opened), with the mode (and, for root, the owner) asked for, then
//    fsync, rename over the target, fsync of the folder;
//  - read only when regular: opened with O_NONBLOCK (a FIFO cannot make the
//    open wait) and refused after fstat when it is not a regular file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shmfilter::internal {

struct FileMode {
  uint32_t mode = 0644;  // permission bits of the new file (the umask does not apply)
  int64_t uid = -1;      // >= 0 and running as root: the new file's owner
  int64_t gid = -1;      // >= 0 and running as root: the new file's group
};

// The mode and owner of the open file FD (a segment's backing file): what its copies get.
FileMode file_mode_of(int fd) noexcept;

// 0666 less this process's umask: a plain new file's mode (outputs not copied from a segment).
FileMode default_file_mode() noexcept;

// Writes BYTES to PATH atomically (see above). Throws kIo naming PATH; nothing is left behind.
void write_file_atomically(const std::string& path, std::string_view bytes, const FileMode& mode);

// Opens PATH for reading; kIo when it cannot be opened, kBadInput when it is not a regular file
// (a FIFO, device, socket or directory), naming WHAT (e.g. "save file"). Returns a blocking fd.
int open_regular_file(const std::string& path, const std::string& what);

// The whole of a regular file (open_regular_file's rules).
std::string read_regular_file(const std::string& path, const std::string& what);

}  // namespace shmfilter::internal
