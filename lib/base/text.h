// lib/base/text.h: sizes as people write them ("2GiB", "64k") and read them ("1.50 GiB").
//
// Public through include/shmfilter/segment.hpp (the same declarations); used
// by the library's error messages and by shmtool's arguments and tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shmfilter {

// Parses "2GiB", "512MiB", "64k", "1.5G", "4096" into bytes. Throws kInvalidArgument.
uint64_t parse_size(std::string_view text);
// Formats bytes as "1.50 GiB".
std::string format_size(uint64_t bytes);

namespace internal {
// Input text as an error message quotes it: at most `max` bytes, then
// "... (N bytes)", so a rejected 3 MB line never floods stderr.
inline std::string clip(std::string_view text, size_t max = 64) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "... (" + std::to_string(text.size()) + " bytes)";
}
}  // namespace internal

}  // namespace shmfilter
