// shmtool/cli/args.cpp: argument parsing against a command's option table.
#include "cli/args.h"

namespace shmtool {
namespace {

const Option* find_option(const std::vector<Option>& table, const std::string& name) {
  for (const auto& o : table)
    if (o.name == name) return &o;
  return nullptr;
}

}  // namespace

Args::Args(const std::vector<std::string>& argv, const std::vector<Option>& table) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      const auto eq = a.find('=');
      const std::string name = a.substr(0, eq);
      const Option* opt = find_option(table, name);
      if (opt == nullptr) throw UsageError("unknown option '" + name + "'");
      if (eq != std::string::npos) {
        options_[name] = a.substr(eq + 1);
      } else if (opt->metavar.empty()) {
        options_[name] = "";
      } else {
        if (i + 1 >= argv.size()) throw UsageError("option " + name + " needs a value");
        options_[name] = argv[++i];
      }
    } else if (a.size() > 1 && a[0] == '-' && !(a[1] >= '0' && a[1] <= '9')) {
      throw UsageError("unknown option '" + a + "'");
    } else {
      positionals_.push_back(a);  // includes "-" (stdin/stdout) and negative numbers
    }
  }
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = options_.find(name);
  return it == options_.end() ? fallback : it->second;
}

const std::string& Args::at(size_t i, const char* what) const {
  if (i >= positionals_.size()) throw UsageError(std::string("missing ") + what);
  return positionals_[i];
}

void Args::no_more_than(size_t expected) const {
  if (positionals_.size() > expected) throw UsageError("unexpected argument '" + positionals_[expected] + "'");
}

}  // namespace shmtool
