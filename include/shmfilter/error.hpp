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

// THE table of error codes: every other list is derived from it or checked
// against it. X(enumerator, value, name, C macro, message):
//  - enumerator/value: shmfilter::ErrorCode (values are ABI: never renumber);
//  - name: error_code_name(), the stable identifier of shmtool --json;
//  - C macro: the SHMF_E* of shmfilter.h with the same value (lib/capi/c_api.cpp
//    static_asserts each one, and the count, so a code added here and not
//    there, or there and not here, fails the build);
//  - message: error_code_message() and shmf_strerror(), static text.
// Add a code: a row here (next value), its #define in shmfilter.h, SHMF_ELAST.
#define SHMFILTER_ERROR_CODES(X)                                                                               \
  X(kOk, 0, "ok", SHMF_OK, "success")                                                                          \
  X(kInvalidArgument, 1, "invalid-argument", SHMF_EINVAL, "invalid argument")                                  \
  X(kNameTooLong, 2, "name-too-long", SHMF_ENAMETOOLONG, "name too long")                                      \
  X(kNotFound, 3, "not-found", SHMF_ENOTFOUND, "no such segment or structure")                                 \
  X(kExists, 4, "exists", SHMF_EEXISTS, "segment or structure already exists")                                 \
  X(kWrongKind, 5, "wrong-kind", SHMF_EWRONGKIND, "the name holds another kind of structure")                  \
  X(kNotASegment, 6, "not-a-segment", SHMF_ENOTSEGMENT, "not a shmfilter segment")                             \
  X(kForeignByteOrder, 7, "foreign-byte-order", SHMF_EBYTEORDER, "segment of the other byte order")            \
  X(kVersionMismatch, 8, "version-mismatch", SHMF_EVERSION, "segment format version mismatch")                 \
  X(kAbiMismatch, 9, "abi-mismatch", SHMF_EABI, "segment written by a build with other struct layouts")        \
  X(kTruncated, 10, "truncated", SHMF_ETRUNCATED, "segment backing object is truncated")                       \
  X(kCorrupt, 11, "corrupt", SHMF_ECORRUPT, "segment or structure is corrupt")                                 \
  X(kNoSpace, 12, "no-space", SHMF_ENOSPACE, "no space left in the backing store or reservation")              \
  X(kFull, 13, "full", SHMF_EFULL, "structure is full")                                                        \
  X(kDropped, 14, "dropped", SHMF_EDROPPED, "structure was dropped")                                           \
  X(kIo, 15, "io", SHMF_EIO, "system call failed")                                                             \
  X(kPermission, 16, "permission", SHMF_EPERM, "permission denied")                                            \
  X(kBusy, 17, "busy", SHMF_EBUSY, "resource busy")                                                            \
  X(kBadInput, 18, "bad-input", SHMF_EBADINPUT, "malformed input")                                            \
  X(kReadOnly, 19, "read-only", SHMF_EREADONLY, "the segment was opened read-only")                          \
  X(kForked, 20, "forked", SHMF_EFORKED, "handle inherited across fork(): reopen it in the child")

// What each code means (the table's rows, in order):
//  kInvalidArgument  a parameter is out of range (capacity 0, p outside (0,1), ...)
//  kNameTooLong      structure or segment name longer than the documented limit
//  kNotFound         no segment / no structure of that name
//  kExists           a segment / structure of that name already exists
//  kWrongKind        the name exists but holds another kind of structure
//  kNotASegment      the object is not a shmfilter segment (bad magic)
//  kForeignByteOrder a segment written on a machine of the other byte order
//  kVersionMismatch  a segment of another format version
//  kAbiMismatch      a segment written by a build with other struct layouts
//  kTruncated        the backing object is shorter than its header says
//  kCorrupt          an offset, size or field fails validation
//  kNoSpace          the backing store (/dev/shm, disk) or the reservation is full
//  kFull             a fixed-capacity structure or table is full
//  kDropped          the structure behind a handle was dropped by some process
//  kIo               a system call failed (errno in the message)
//  kPermission       EACCES/EPERM on the backing object
//  kBusy             the operation needs an exclusive state it could not get, or other
//                    processes kept it from finishing within its bound (retry later)
//  kBadInput         malformed external input (serialized bytes, an input line)
//  kReadOnly         a write (control plane or data plane) through a read-only attachment
//                    (OpenOptions::read_only); reopen without it, with write access
//  kForked           a write through a handle this process inherited across fork(): the
//                    parent's owner token is not the child's; open the segment and the
//                    structure again in the child
enum class ErrorCode : int32_t {
#define SHMFILTER_X_ENUM(e, v, name, c, msg) e = v,
  SHMFILTER_ERROR_CODES(SHMFILTER_X_ENUM)
#undef SHMFILTER_X_ENUM
};

// Number of codes in the table (values are 0 .. kErrorCodeCount - 1).
inline constexpr int32_t kErrorCodeCount = 0
#define SHMFILTER_X_COUNT(e, v, name, c, msg) +1
    SHMFILTER_ERROR_CODES(SHMFILTER_X_COUNT)
#undef SHMFILTER_X_COUNT
    ;

// Short stable identifier, e.g. "not-a-segment"; used by shmtool --json and the C API.
std::string_view error_code_name(ErrorCode code) noexcept;
// Short static text, e.g. "not a shmfilter segment"; what shmf_strerror() returns.
std::string_view error_code_message(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace shmfilter
