// shmtool/cli/json.h: a minimal ordered JSON object writer for --json output;
// cli/report.h prints the same object as aligned lines for people.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace shmtool {

class Json {
 public:
  // Strings: escaped JSON (valid UTF-8 always); the text view shows them as
  // shmfilter::escape_text does (control bytes and invalid UTF-8 as \xNN).
  Json& add(const std::string& key, const std::string& v) { return add(key, std::string_view(v)); }
  Json& add(const std::string& key, const char* v) { return add(key, std::string_view(v)); }
  Json& add(const std::string& key, std::string_view v);
  Json& add(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  Json& add(const std::string& key, double v);
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Json& add(const std::string& key, T v) {
    return raw(key, std::to_string(v));
  }
  Json& add(const std::string& key, const Json& v) { return raw(key, v.str()); }
  // A byte count: a number in JSON, "8.00 MiB" in the text view.
  Json& add_size(const std::string& key, uint64_t bytes);
  Json& add_array(const std::string& key, const std::vector<Json>& items);
  // A rate in [0, 1]: a number in JSON, "0.334%" in the text view.
  Json& add_rate(const std::string& key, double v);
  // Seconds: a number in JSON, "86400 s" in the text view.
  template <class T>
  Json& add_seconds(const std::string& key, T v) {
    return raw(key, std::to_string(v), std::to_string(v) + " s");
  }
  // Appends other's members after this object's.
  Json& append(const Json& other) {
    members_.insert(members_.end(), other.members_.begin(), other.members_.end());
    return *this;
  }
  Json& raw(const std::string& key, std::string json_value, std::string text = "") {
    members_.push_back({key, std::move(json_value), std::move(text)});
    return *this;
  }

  struct Member {
    std::string key;
    std::string json;  // the value as JSON text
    std::string text;  // how the text view shows it; empty: derived from json
    bool array = false;      // add_array: the text view shows `rows` as a table
    std::vector<Json> rows;  // add_array's items
  };
  // The top-level members in order.
  const std::vector<Member>& members() const { return members_; }
  std::string str() const;
  // A JSON string of S (shmfilter::escape_json: valid UTF-8, no control character).
  static std::string quote(std::string_view s);

 private:
  std::vector<Member> members_;
};

}  // namespace shmtool
