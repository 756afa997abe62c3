// shmtool/cli/json.cpp: the JSON writer.
#include "cli/json.h"

#include <cstdio>

#include "shmfilter/segment.hpp"  // format_size
#include "shmfilter/text.hpp"

namespace shmtool {

Json& Json::add(const std::string& key, std::string_view v) {
  std::string shown = shmfilter::escape_text(v);
  return raw(key, quote(v), shown == v ? std::string() : std::move(shown));
}

Json& Json::add(const std::string& key, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return raw(key, buf);
}

Json& Json::add_size(const std::string& key, uint64_t bytes) {
  return raw(key, std::to_string(bytes), shmfilter::format_size(bytes));
}

Json& Json::add_rate(const std::string& key, double v) {
  char json[64], text[64];
  std::snprintf(json, sizeof json, "%.10g", v);
  std::snprintf(text, sizeof text, "%.3g%%", 100 * v);
  return raw(key, json, text);
}

Json& Json::add_array(const std::string& key, const std::vector<Json>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += ',';
    s += items[i].str();
  }
  s += ']';
  raw(key, s);
  members_.back().array = true;
  members_.back().rows = items;
  return *this;
}

std::string Json::str() const {
  // Appended piecewise: `const char* + std::string&&` trips GCC 12's -Wrestrict false positive at -O3.
  std::string s = "{";
  for (size_t i = 0; i < members_.size(); ++i) {
    if (i) s += ',';
    s += quote(members_[i].key);
    s += ':';
    s += members_[i].json;
  }
  s += '}';
  return s;
}

std::string Json::quote(std::string_view s) { return "\"" + shmfilter::escape_json(s) + "\""; }

}  // namespace shmtool
