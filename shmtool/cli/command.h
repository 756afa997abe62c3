// shmtool/cli/command.h: how a subcommand plugs into shmtool.
//
// Each shmtool/<cmd>.cpp defines its commands and registers them with a
// static CommandRegistrar; main.cpp dispatches on argv[1] (and, for
// structure groups such as "bloom", on argv[2]). Front ends only call the
// public API in include/shmfilter/.
//
// Exit codes: 0 success; 1 the segment or structure is missing or bad, or
// `check` found problems; 2 bad command-line arguments (UsageError).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "shmfilter/segment.hpp"

namespace shmtool {

// Thrown for bad arguments: main prints "shmtool: <msg>" plus a hint to --help and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parsed arguments of one command: positionals in order, options by name.
// Options are "--name value" or "--name=value"; flags are declared in `flags`.
class Args {
 public:
  Args(std::vector<std::string> argv, const std::vector<std::string>& flags) {
    for (size_t i = 0; i < argv.size(); ++i) {
      const std::string& a = argv[i];
      if (a.size() > 2 && a.rfind("--", 0) == 0) {
        std::string name = a, value;
        if (auto eq = a.find('='); eq != std::string::npos) {
          name = a.substr(0, eq);
          value = a.substr(eq + 1);
          options_[name] = value;
          continue;
        }
        bool is_flag = false;
        for (const auto& f : flags) is_flag |= (f == name);
        if (is_flag) {
          options_[name] = "";
        } else {
          if (i + 1 >= argv.size()) throw UsageError("option " + name + " needs a value");
          options_[name] = argv[++i];
        }
      } else if (a == "-") {
        positionals_.push_back(a);
      } else if (a.size() > 1 && a[0] == '-' && !(a[1] >= '0' && a[1] <= '9')) {
        throw UsageError("unknown option '" + a + "'");
      } else {
        positionals_.push_back(a);
      }
    }
  }
  // Rejects options not in `allowed` (call once after construction).
  // --file PATH (a file-backed segment) is accepted by every command.
  void allow(const std::vector<std::string>& allowed) const {
    for (const auto& [k, v] : options_) {
      bool ok = (k == "--file");
      for (const auto& a : allowed) ok |= (a == k);
      if (!ok) throw UsageError("unknown option '" + k + "'");
    }
  }
  bool has(const std::string& name) const { return options_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const {
    auto it = options_.find(name);
    return it == options_.end() ? fallback : it->second;
  }
  const std::vector<std::string>& positionals() const { return positionals_; }
  // The i-th positional, or UsageError "missing <what>".
  const std::string& at(size_t i, const char* what) const {
    if (i >= positionals_.size()) throw UsageError(std::string("missing ") + what);
    return positionals_[i];
  }

 private:
  std::vector<std::string> positionals_;
  std::map<std::string, std::string> options_;
};

struct Command {
  std::string group;    // "" for top-level commands (create, list...), else "bloom", "cuckoo", ...
  std::string name;     // "create", "add", ...
  std::string usage;    // "shmtool bloom create SEG NAME --capacity N --error P [...]"
  std::string summary;  // one line for the command list
  std::string help;     // full help: what it does, every option, an example
  std::vector<std::string> flags;  // options that take no value, e.g. "--json"
  std::function<int(const Args&)> run;
};

std::vector<Command>& registry();

struct CommandRegistrar {
  explicit CommandRegistrar(Command c) { registry().push_back(std::move(c)); }
};

// Minimal ordered JSON object writer for --json output.
class Json {
 public:
  Json& add(const std::string& key, const std::string& v) { return raw(key, quote(v)); }
  Json& add(const std::string& key, const char* v) { return raw(key, quote(v)); }
  Json& add(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  Json& add(const std::string& key, double v) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.10g", v);
    return raw(key, buf);
  }
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Json& add(const std::string& key, T v) { return raw(key, std::to_string(v)); }
  Json& add(const std::string& key, const Json& v) { return raw(key, v.str()); }
  Json& add_array(const std::string& key, const std::vector<Json>& items) {
    std::string s = "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) s += ',';
      s += items[i].str();
    }
    s += ']';
    return raw(key, s);
  }
  Json& raw(const std::string& key, const std::string& json_value) {
    // Appended piecewise: `const char* + std::string&&` trips GCC 12's -Wrestrict false positive at -O3.
    if (!body_.empty()) body_ += ',';
    body_ += quote(key);
    body_ += ':';
    body_ += json_value;
    return *this;
  }
  std::string str() const { return "{" + body_ + "}"; }
  static std::string quote(std::string_view s) {
    std::string o = "\"";
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        o += '\\';
        o += static_cast<char>(c);
      } else if (c < 0x20) {
        char buf[8];
        snprintf(buf, sizeof buf, "\\u%04x", c);
        o += buf;
      } else {
        o += static_cast<char>(c);
      }
    }
    return o + "\"";
  }

 private:
  std::string body_;
};

// Per-kind description of a structure for `shmtool dump` and `list`: each
// structure's file registers one (static DescriberRegistrar) built only on
// the public API. `info` of every structure group prints the same object.
struct Describer {
  shmfilter::Kind kind;
  std::function<Json(shmfilter::Segment&, const shmfilter::RegionInfo&)> describe;
};
std::vector<Describer>& describers();
struct DescriberRegistrar {
  explicit DescriberRegistrar(Describer d) { describers().push_back(std::move(d)); }
};

// Prints a Json object as text: "key: value" lines (one level), or as JSON when json is true.
void print_object(const Json& obj, bool json);

// Reads stdin line by line (fast: a 1 MiB buffer, no per-line allocation
// beyond the string_view), strips a trailing '\r', skips empty lines. fn gets
// (line, line_number).
void for_each_stdin_line(const std::function<void(std::string_view line, uint64_t line_no)>& fn);

// A progress bar on stderr for long inputs, shown only when stderr is a TTY.
class Progress {
 public:
  Progress(std::string label, uint64_t total_bytes);
  void update(uint64_t done_bytes);
  void finish();
  ~Progress();

 private:
  std::string label_;
  uint64_t total_ = 0;
  uint64_t last_shown_ = 0;
  bool tty_ = false;
  bool finished_ = false;
};

}  // namespace shmtool
