// shmfilter/error.hpp: the one error type of the C++ API.
//
// Control-plane calls (create, open, find, drop, resize, structure creation)
// throw shmfilter::Error. Data-plane calls (add, contains, insert, erase...)
// are noexcept and return values or a status enum. Every message names what
// was wrong and what to do about it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace shmfilter {

enum class ErrorCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,   // a parameter is out of range (capacity 0, p outside (0,1), ...)
  kNameTooLong = 2,       // structure or segment name longer than the documented limit
  kNotFound = 3,          // no segment / no structure of that name
  kExists = 4,            // a segment / structure of that name already exists
  kWrongKind = 5,         // the name exists but holds another kind of structure
  kNotASegment = 6,       // the object is not a shmfilter segment (bad magic)
  kForeignByteOrder = 7,  // a segment written on a machine of the other byte order
  kVersionMismatch = 8,   // a segment of another format version
  kAbiMismatch = 9,       // a segment written by a build with other struct layouts
  kTruncated = 10,        // the backing object is shorter than its header says
  kCorrupt = 11,          // an offset, size or field fails validation
  kNoSpace = 12,          // the backing store (/dev/shm, disk) or the reservation is full
  kFull = 13,             // a fixed-capacity structure or table is full
  kDropped = 14,          // the structure behind a handle was dropped by some process
  kIo = 15,               // a system call failed (errno in the message)
  kPermission = 16,       // EACCES/EPERM on the backing object
  kBusy = 17,             // the operation needs an exclusive state it could not get
  kBadInput = 18,         // malformed external input (serialized bytes, an input line)
};

// Short stable identifier, e.g. "not-a-segment"; used by shmtool --json and the C API.
std::string_view error_code_name(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace shmfilter
