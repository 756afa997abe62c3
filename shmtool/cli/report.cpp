// shmtool/cli/report.cpp: the text and JSON views of a report object.
#include "cli/report.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

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

// An array of objects as a table under its label: one header row of the first
// object's keys, one row per object, columns aligned (cells as the text view shows
// them: sizes with units, strings unquoted). An empty array reads "(none)".
void print_table(const Json::Member& m, size_t width) {
  if (m.rows.empty()) {
    std::printf("%-*s  (none)\n", static_cast<int>(width), m.key.c_str());
    return;
  }
  const auto& head = m.rows.front().members();
  std::vector<std::vector<std::string>> cells(m.rows.size() + 1);
  for (const auto& c : head) cells[0].push_back(c.key);
  for (size_t r = 0; r < m.rows.size(); ++r)
    for (const auto& c : m.rows[r].members()) cells[r + 1].push_back(plain(c, false));
  std::vector<size_t> w;
  for (const auto& row : cells)
    for (size_t i = 0; i < row.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], row[i].size());
    }
  std::printf("%s\n", m.key.c_str());
  for (const auto& row : cells) {
    std::string line = " ";
    for (size_t i = 0; i < row.size(); ++i) {
      line += ' ';
      line += row[i];
      if (i + 1 < row.size()) line.append(w[i] - row[i].size() + 1, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace

void print_report(const Json& obj, bool json) {
  if (json) {
    std::printf("%s\n", obj.str().c_str());
    return;
  }
  size_t width = 0;
  for (const auto& m : obj.members()) width = std::max(width, m.key.size());
  for (const auto& m : obj.members()) {
    if (m.array) {
      print_table(m, width);
      continue;
    }
    std::printf("%-*s  %s\n", static_cast<int>(width), m.key.c_str(), plain(m, false).c_str());
  }
}

std::string one_line(const Json& obj) {
  std::string out;
  for (const auto& m : obj.members()) {
    if (m.key == "name" || m.key == "name_hex" || m.key == "kind") continue;  // the list/dump row shows them already
    if (!out.empty()) out += ' ';
    out += m.key;
    out += '=';
    out += plain(m, true);
  }
  return out;
}

}  // namespace shmtool
