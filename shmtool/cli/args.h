// shmtool/cli/args.h: one command's parsed arguments, checked against its option table.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace shmtool {

// Thrown for bad arguments: main prints "shmtool: <msg>" plus a hint to --help and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One entry of a command's option table: "--json" (a flag) or "--size SIZE" (takes a value).
struct Option {
  std::string name;     // "--size"
  std::string metavar;  // "SIZE"; empty for a flag
};

// Positionals in order, options by name. Options are "--name value" or
// "--name=value"; a name not in the table is a UsageError.
class Args {
 public:
  Args(const std::vector<std::string>& argv, const std::vector<Option>& table);

  bool has(const std::string& name) const { return options_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  // The i-th positional, or UsageError "missing <what>".
  const std::string& at(size_t i, const char* what) const;
  // Rejects positionals past the first `expected`.
  void no_more_than(size_t expected) const;

 private:
  std::vector<std::string> positionals_;
  std::map<std::string, std::string> options_;
};

}  // namespace shmtool
