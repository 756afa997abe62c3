// shmtool/cli/report.cpp: the text and JSON views of a report object.
#include "cli/report.h"

#include <algorithm>
#include <cstdio>

namespace shmtool {
namespace {

// How a member reads in text: its text form, else its JSON without the quotes
// of a string when that loses nothing (no escapes; with `one_word`, no spaces).
std::string plain(const Json::Member& m, bool one_word) {
  if (!m.text.empty()) return one_word && m.text.find(' ') != std::string::npos ? Json::quote(m.text) : m.text;
  const std::string& v = m.json;
  if (v.size() < 2 || v.front() != '"' || v.find('\\') != std::string::npos) return v;
  if (one_word && v.find(' ') != std::string::npos) return v;
  return v.substr(1, v.size() - 2);
}

}  // namespace

void print_report(const Json& obj, bool json) {
  if (json) {
    std::printf("%s\n", obj.str().c_str());
    return;
  }
  size_t width = 0;
  for (const auto& m : obj.members()) width = std::max(width, m.key.size());
  for (const auto& m : obj.members())
    std::printf("%-*s  %s\n", static_cast<int>(width), m.key.c_str(), plain(m, false).c_str());
}

std::string one_line(const Json& obj) {
  std::string out;
  for (const auto& m : obj.members()) {
    if (m.key == "name" || m.key == "kind") continue;  // the list/dump row shows them already
    if (!out.empty()) out += ' ';
    out += m.key;
    out += '=';
    out += plain(m, true);
  }
  return out;
}

}  // namespace shmtool
