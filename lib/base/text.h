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

}  // namespace shmfilter
