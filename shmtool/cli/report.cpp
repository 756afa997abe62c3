// shmtool/cli/report.cpp: the text and JSON views of a report object.
#include "cli/report.h"

#include <algorithm>
#include <cstdio>

namespace shmtool {
namespace {

// A JSON string value without its quotes when that loses nothing (no escapes).
std::string plain(const std::string& value, bool keep_if_space) {
  if (value.size() < 2 || value.front() != '"' || value.find('\\') != std::string::npos) return value;
  if (keep_if_space && value.find(' ') != std::string::npos) return value;
  return value.substr(1, value.size() - 2);
}

}  // namespace

void print_report(const Json& obj, bool json) {
  if (json) {
    std::printf("%s\n", obj.str().c_str());
    return;
  }
  size_t width = 0;
  for (const auto& [key, value] : obj.members()) width = std::max(width, key.size());
  for (const auto& [key, value] : obj.members())
    std::printf("%-*s  %s\n", static_cast<int>(width), key.c_str(), plain(value, false).c_str());
}

std::string one_line(const Json& obj) {
  std::string out;
  for (const auto& [key, value] : obj.members()) {
    if (key == "name" || key == "kind") continue;  // the list/dump row shows them already
    if (!out.empty()) out += ' ';
    out += key;
    out += '=';
    out += plain(value, true);
  }
  return out;
}

}  // namespace shmtool
