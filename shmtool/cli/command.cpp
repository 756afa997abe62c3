// shmtool/cli/command.cpp: the command table and the parser of command specs.
#include "cli/command.h"

#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <utility>

namespace shmtool {
namespace {

std::vector<Command>& table() {
  static std::vector<Command> t;
  return t;
}

// Every command takes --file; its help is the same everywhere. (constexpr:
// registrars in other files run during static initialisation.)
constexpr const char* kFileOption = "--file";
constexpr const char* kReadOnlyOption = "--read-only";
constexpr const char* kTrustOwnerOption = "--trust-owner";
constexpr const char* kFileOptionLines =
    "  --file PATH      the segment is backed by this regular file (persistent across\n"
    "                   restarts) instead of /dev/shm/NAME; pass the same PATH to every command\n"
    "  --read-only      open the segment for inspection only (no registry slot, no lock,\n"
    "                   PROT_READ); chosen by itself when you may read but not write it;\n"
    "                   anything that writes then fails with a read-only error\n"
    "  --trust-owner UID\n"
    "                   attach a segment owned by UID (by default only your own or root's\n"
    "                   segments are attached: docs/SECURITY.md)\n";

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= s.size()) {
    size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) nl = s.size();
    lines.emplace_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

[[noreturn]] void bad_spec(std::string_view path, const char* why) {
  // A programming error in a commands/ file: caught by every test run of shmtool.
  std::fprintf(stderr, "shmtool: internal error: spec of command '%.*s' %s\n", static_cast<int>(path.size()),
               path.data(), why);
  std::abort();
}

// Positionals the Usage: line allows after the command words: each token
// that is neither an option ("--x", "[--x") nor an option's metavar nor a
// "|" separator counts; one spelled with "..." allows any number more.
// "shmtool hll export SEG NAME [--output FILE]" -> 2.
size_t max_positionals(const Command& c) {
  std::vector<std::string> tokens;
  size_t start = 0;
  while (start < c.usage.size()) {
    size_t sp = c.usage.find(' ', start);
    if (sp == std::string::npos) sp = c.usage.size();
    if (sp > start) tokens.push_back(c.usage.substr(start, sp - start));
    start = sp + 1;
  }
  size_t skip = 1 + (c.group.empty() ? 1 : 2);  // "shmtool", [group], name
  size_t n = 0;
  for (size_t i = skip; i < tokens.size(); ++i) {
    std::string t = tokens[i];
    if (t == "|") continue;
    std::string bare = t;
    while (!bare.empty() && bare.front() == '[') bare.erase(bare.begin());
    if (bare.rfind("--", 0) == 0) {
      while (!bare.empty() && bare.back() == ']') bare.pop_back();
      for (const auto& o : c.options)
        if (o.name == bare && !o.metavar.empty() && t.back() != ']') ++i;  // its metavar
      continue;
    }
    if (t.find("...") != std::string::npos) return SIZE_MAX;
    ++n;
  }
  return n;
}

}  // namespace

const std::vector<Command>& commands() { return table(); }

CommandRegistrar::CommandRegistrar(std::string_view path, RunFn run, std::string_view spec) {
  Command c;
  c.run = std::move(run);
  if (auto sp = path.find(' '); sp != std::string_view::npos) {
    c.group = std::string(path.substr(0, sp));
    c.name = std::string(path.substr(sp + 1));
  } else {
    c.name = std::string(path);
  }
  const std::vector<std::string> lines = split_lines(spec);
  if (lines.size() < 2 || lines[1].rfind("Usage: ", 0) != 0) bad_spec(path, "needs a summary and a Usage: line");
  c.summary = lines[0];
  c.usage = lines[1].substr(7);

  std::string description, options, example;
  enum { kDescription, kOptions, kExample } section = kDescription;
  for (size_t i = 2; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l == "Options:") {
      section = kOptions;
    } else if (l == "Example:") {
      section = kExample;
    } else if (section == kDescription) {
      if (!(description.empty() && l.empty())) description += l + "\n";
    } else if (section == kExample) {
      example += l + "\n";
    } else {
      options += l + "\n";
      if (l.rfind("  --", 0) == 0) {
        // "  --name METAVAR   help": the spelling ends at the first double space.
        const std::string spelling = l.substr(2, l.find("  ", 2) - 2);
        const size_t sp = spelling.find(' ');
        c.options.push_back({spelling.substr(0, sp), sp == std::string::npos ? "" : spelling.substr(sp + 1)});
      } else if (c.options.empty() || l.rfind("    ", 0) != 0) {
        bad_spec(path, "has an Options: line that is neither '  --name ...' nor an indented continuation");
      }
    }
  }
  while (description.size() >= 2 && description.substr(description.size() - 2) == "\n\n") description.pop_back();
  if (example.empty()) bad_spec(path, "needs an Example: section");
  c.options.push_back({kFileOption, "PATH"});
  c.options.push_back({kReadOnlyOption, ""});
  c.options.push_back({kTrustOwnerOption, "UID"});
  c.max_positionals = max_positionals(c);
  c.help = "Usage: " + c.usage + "\n\n" + description + "\nOptions:\n" + options + kFileOptionLines +
           "\nExample:\n" + example;
  table().push_back(std::move(c));
}

}  // namespace shmtool
