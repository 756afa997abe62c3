// lib/base/error.cpp: names and messages of error codes (from the table in
// shmfilter/error.hpp) and names of kinds.
#include "shmfilter/error.hpp"
#include "shmfilter/segment.hpp"

namespace shmfilter {

// The table's values are 0, 1, 2, ... in row order (shmf_strerror indexes by value).
constexpr bool error_codes_in_order() {
  int32_t next = 0;
  bool ok = true;
#define SHMFILTER_X_ORDER(e, v, name, c, msg) ok = ok && (v) == next++;
  SHMFILTER_ERROR_CODES(SHMFILTER_X_ORDER)
#undef SHMFILTER_X_ORDER
  return ok && next == kErrorCodeCount;
}
static_assert(error_codes_in_order(), "SHMFILTER_ERROR_CODES rows must have values 0, 1, 2, ... in order");

// Both derived from SHMFILTER_ERROR_CODES: one row per code, indexed by value.
namespace {
struct ErrorRow {
  std::string_view name, message;
};
constexpr ErrorRow kErrorRows[] = {
#define SHMFILTER_X_ROW(e, v, name, c, msg) {name, msg},
    SHMFILTER_ERROR_CODES(SHMFILTER_X_ROW)
#undef SHMFILTER_X_ROW
};
const ErrorRow* row_of(ErrorCode code) noexcept {
  auto i = static_cast<int32_t>(code);
  return i >= 0 && i < kErrorCodeCount ? &kErrorRows[i] : nullptr;
}
}  // namespace

std::string_view error_code_name(ErrorCode code) noexcept {
  const ErrorRow* r = row_of(code);
  return r ? r->name : "unknown";
}

std::string_view error_code_message(ErrorCode code) noexcept {
  const ErrorRow* r = row_of(code);
  return r ? r->message : "unknown error code";
}

}  // namespace shmfilter
