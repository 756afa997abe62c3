// shmtool/cli/input.cpp: stdin and file input.
#include "cli/input.h"

#include "base/safe_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cli/progress.h"
#include "shmfilter/error.hpp"

namespace shmtool {

void for_each_stdin_line(const std::function<void(std::string_view, uint64_t)>& fn) {
  static char buf[1 << 20];
  std::string carry;
  uint64_t line_no = 0, bytes = 0;
  // Rate and ETA on a terminal; the total is known when stdin is a regular file.
  struct stat st{};
  uint64_t total = 0;
  if (fstat(0, &st) == 0 && S_ISREG(st.st_mode)) {
    off_t at = lseek(0, 0, SEEK_CUR);
    total = static_cast<uint64_t>(st.st_size) - static_cast<uint64_t>(at > 0 ? at : 0);
  }
  Progress progress(progress_label(), total);
  auto emit = [&](std::string_view line) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) fn(line, line_no);
  };
  ssize_t n;
  while ((n = read(0, buf, sizeof buf)) > 0) {
    bytes += static_cast<uint64_t>(n);
    std::string_view chunk(buf, static_cast<size_t>(n));
    size_t start = 0;
    while (true) {
      size_t nl = chunk.find('\n', start);
      if (nl == std::string_view::npos) {
        carry.append(chunk.substr(start));
        break;
      }
      if (!carry.empty()) {
        carry.append(chunk.substr(start, nl - start));
        emit(carry);
        carry.clear();
      } else {
        emit(chunk.substr(start, nl - start));
      }
      start = nl + 1;
    }
    progress.update(bytes, line_no);
  }
  if (!carry.empty()) emit(carry);
  progress.update(bytes, line_no);
  progress.finish();
}

void for_each_stdin_batch(size_t batch, const std::function<void(std::span<const std::string_view>)>& fn) {
  std::string arena;  // the batch's lines back to back; views are made once it is complete
  std::vector<size_t> ends;
  std::vector<std::string_view> views;
  arena.reserve(batch * 24);
  ends.reserve(batch);
  views.reserve(batch);
  auto flush = [&] {
    views.clear();
    size_t start = 0;
    for (size_t e : ends) {
      views.emplace_back(arena.data() + start, e - start);
      start = e;
    }
    fn(std::span<const std::string_view>(views));
    arena.clear();
    ends.clear();
  };
  for_each_stdin_line([&](std::string_view line, uint64_t) {
    arena.append(line);
    ends.push_back(arena.size());
    if (ends.size() == batch) flush();
  });
  if (!ends.empty()) flush();
}

std::string read_input(const std::string& path) {
  if (path != "-") {
    try {  // regular files only: a FIFO would make the open wait forever (lib/base/safe_file.h)
      return shmfilter::internal::read_regular_file(path, "input file");
    } catch (const shmfilter::Error& e) {
      if (e.code() != shmfilter::ErrorCode::kBadInput) throw;
      throw shmfilter::Error(e.code(), std::string(e.what()) + " (or pipe it to standard input and pass '-')");
    }
  }
  FILE* f = stdin;
  std::string s;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  if (std::ferror(f) != 0)
    throw shmfilter::Error(shmfilter::ErrorCode::kIo, std::string("cannot read standard input: ") + std::strerror(errno));
  return s;
}

void Rejects::add(uint64_t line_no, const std::string& why) {
  if (count++ == 0) first_reason = why;
  if (first.size() < kShow) first.push_back(line_no);
}

void Rejects::report() const {
  if (count == 0) return;
  std::string lines;
  for (size_t i = 0; i < first.size(); ++i) lines += (i ? ", " : "") + std::to_string(first[i]);
  fprintf(stderr, "shmtool: rejected %llu line%s (first at line%s %s%s): %s\n", static_cast<unsigned long long>(count),
          count == 1 ? "" : "s", first.size() == 1 ? "" : "s", lines.c_str(), count > first.size() ? ", ..." : "",
          first_reason.c_str());
}

}  // namespace shmtool
