// shmtool/cli/numbers.h: sizes, counts and rates from the command line; bad
// text is a UsageError naming the option.
#pragma once

#include <cstdint>
#include <string>

#include "cli/args.h"

namespace shmtool {

// Counts: "150M", "1.2e8", "64k", "2000000" (k/M/G/T are powers of 1000); a whole, non-negative number.
uint64_t parse_count(const std::string& opt, const std::string& text);

// Any finite number (range checks are the library's).
double parse_real(const std::string& opt, const std::string& text);

// A rate in (0, 1), e.g. a false-positive target.
double parse_rate(const std::string& opt, const std::string& text);

// --opt SIZE parsed with shmfilter::parse_size (bytes, KiB/MiB/GiB/TiB, k/M/G/T: powers of 1024).
uint64_t size_option(const Args& args, const std::string& opt, uint64_t fallback);

// --opt N as parse_count / parse_real would read it, or fallback when absent.
uint64_t count_option(const Args& args, const std::string& opt, uint64_t fallback);
double real_option(const Args& args, const std::string& opt, double fallback);

// --opt N: an integer in [lo, hi] (decimal; octal with base 8).
uint64_t uint_option(const Args& args, const std::string& opt, uint64_t fallback, uint64_t lo, uint64_t hi,
                     int base = 10);

}  // namespace shmtool
