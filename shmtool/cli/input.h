// shmtool/cli/input.h: reading keys from stdin line by line or in batches, and whole input files.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace shmtool {

// Reads stdin line by line (a 1 MiB buffer, no per-line allocation beyond the
// string_view), strips a trailing '\r', skips empty lines. fn gets (line, line number).
void for_each_stdin_line(const std::function<void(std::string_view line, uint64_t line_no)>& fn);

// The same lines handed over `batch` at a time (for add_many/contains_many).
void for_each_stdin_batch(size_t batch, const std::function<void(std::span<const std::string_view> lines)>& fn);

// Input text as an error message quotes it: at most 64 bytes, then
// "... (N bytes)", so a rejected 3 MB line never floods stderr.
inline std::string clip_input(std::string_view text) {
  if (text.size() <= 64) return std::string(text);
  return std::string(text.substr(0, 64)) + "... (" + std::to_string(text.size()) + " bytes)";
}

// Rejected input lines of one command: counted, the first few line numbers and
// the first reason kept, reported as one line on stderr (never one line each).
struct Rejects {
  static constexpr size_t kShow = 5;
  uint64_t count = 0;
  std::vector<uint64_t> first;
  std::string first_reason;
  void add(uint64_t line_no, const std::string& why);
  void report() const;  // nothing when count is 0
};

// The whole of FILE, or of stdin for "-"; an unreadable file is a kIo error naming it.
std::string read_input(const std::string& path);

}  // namespace shmtool
