// lib/base/error.cpp: names of error codes and kinds.
#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"

namespace shmfilter {

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid-argument";
    case ErrorCode::kNameTooLong: return "name-too-long";
    case ErrorCode::kNotFound: return "not-found";
    case ErrorCode::kExists: return "exists";
    case ErrorCode::kWrongKind: return "wrong-kind";
    case ErrorCode::kNotASegment: return "not-a-segment";
    case ErrorCode::kForeignByteOrder: return "foreign-byte-order";
    case ErrorCode::kVersionMismatch: return "version-mismatch";
    case ErrorCode::kAbiMismatch: return "abi-mismatch";
    case ErrorCode::kTruncated: return "truncated";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kNoSpace: return "no-space";
    case ErrorCode::kFull: return "full";
    case ErrorCode::kDropped: return "dropped";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kPermission: return "permission";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kBadInput: return "bad-input";
  }
  return "unknown";
}

std::string_view kind_name(Kind kind) noexcept {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kBloom: return "bloom";
    case Kind::kCuckoo: return "cuckoo";
    case Kind::kRoaring: return "roaring";
    case Kind::kHll: return "hll";
    case Kind::kExactSet: return "set";
    case Kind::kBlob: return "blob";
    case Kind::kWindow: return "window";
  }
  return "unknown";
}

}  // namespace shmfilter
