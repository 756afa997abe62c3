// shmtool/cli/json.h: a minimal ordered JSON object writer for --json output.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace shmtool {

class Json {
 public:
  Json& add(const std::string& key, const std::string& v) { return raw(key, quote(v)); }
  Json& add(const std::string& key, const char* v) { return raw(key, quote(v)); }
  Json& add(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  Json& add(const std::string& key, double v);
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Json& add(const std::string& key, T v) {
    return raw(key, std::to_string(v));
  }
  Json& add(const std::string& key, const Json& v) { return raw(key, v.str()); }
  Json& add_array(const std::string& key, const std::vector<Json>& items);
  // Appends other's members after this object's.
  Json& append(const Json& other) {
    members_.insert(members_.end(), other.members_.begin(), other.members_.end());
    return *this;
  }
  Json& raw(const std::string& key, std::string json_value) {
    members_.emplace_back(key, std::move(json_value));
    return *this;
  }

  // The top-level members in order: (key, value as JSON text).
  const std::vector<std::pair<std::string, std::string>>& members() const { return members_; }
  std::string str() const;
  static std::string quote(std::string_view s);

 private:
  std::vector<std::pair<std::string, std::string>> members_;
};

}  // namespace shmtool
