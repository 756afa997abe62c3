// shmtool/main.cpp: dispatch, help, exit codes. Commands live one file each in
// commands/, registered with SHMTOOL_COMMAND (cli/command.h).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/progress.h"
#include "cli/segment.h"
#include "shmfilter/error.hpp"
#include "shmfilter/text.hpp"

namespace shmtool {
namespace {

const char* kOverview =
    "shmtool: create, inspect, check and use shmfilter segments.\n"
    "\n"
    "A segment is one shared-memory object (/dev/shm/NAME, or a file with --file)\n"
    "holding named deduplication structures that every process on the host uses.\n"
    "\n"
    "Usage: shmtool COMMAND [ARGS...]      shmtool help COMMAND   shmtool COMMAND --help\n"
    "Sizes accept bytes or KiB/MiB/GiB/TiB and k/M/G/T (powers of 1024 for sizes,\n"
    "of 1000 for counts such as --capacity 150M).\n"
    "Every command takes --file PATH for a segment backed by a regular file\n"
    "(persistent across restarts) instead of /dev/shm/NAME.\n"
    "Exit codes: 0 ok; 1 missing or bad segment/structure, or check found problems;\n"
    "2 bad arguments.\n"
    "shmtool help --commands lists every command, one per line (bash completion).\n";

void print_overview(FILE* out) {
  fputs(kOverview, out);
  std::vector<std::string> groups;
  for (const auto& c : commands())
    if (std::find(groups.begin(), groups.end(), c.group) == groups.end()) groups.push_back(c.group);
  std::sort(groups.begin(), groups.end());
  for (const auto& g : groups) {
    fprintf(out, "\n%s\n", g.empty() ? "Segment commands:" : ("Structure commands (" + g + "):").c_str());
    for (const auto& c : commands()) {
      if (c.group != g) continue;
      std::string full = g.empty() ? c.name : g + " " + c.name;
      fprintf(out, "  %-22s %s\n", full.c_str(), c.summary.c_str());
    }
  }
}

const Command* lookup(const std::string& group, const std::string& name) {
  for (const auto& c : commands())
    if (c.group == group && c.name == name) return &c;
  return nullptr;
}

bool is_group(const std::string& g) {
  if (g.empty()) return false;
  for (const auto& c : commands())
    if (c.group == g) return true;
  return false;
}

void print_group(FILE* out, const std::string& g) {
  fprintf(out, "Usage: shmtool %s SUBCOMMAND ...\n\n", g.c_str());
  for (const auto& c : commands())
    if (c.group == g) fprintf(out, "  %-14s %s\n", c.name.c_str(), c.summary.c_str());
  fprintf(out, "\nshmtool %s SUBCOMMAND --help shows each one in full.\n", g.c_str());
}

void print_command(FILE* out, const Command& c) { fputs(c.help.c_str(), out); }

std::string full_name(const Command& c) { return c.group.empty() ? c.name : c.group + " " + c.name; }

// `shmtool help --commands`: one command per line (bash completion reads it).
void print_command_names(FILE* out) {
  for (const auto& c : commands()) fprintf(out, "%s\n", full_name(c).c_str());
}

// `shmtool help --man`: every command's help as a help2man include file
// ([COMMANDS] section, one .SS per command, the help text kept as is), so the
// man page is generated from the same text as --help (shmtool/man.cmake).
void print_man_include(FILE* out) {
  fputs("[COMMANDS]\n", out);
  for (const auto& c : commands()) {
    fprintf(out, ".SS \"shmtool %s\"\n%s\n.nf\n", full_name(c).c_str(), c.summary.c_str());
    size_t start = 0;
    while (start < c.help.size()) {
      size_t nl = c.help.find('\n', start);
      std::string line = c.help.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      std::string esc;
      for (char ch : line) esc += ch == '\\' ? std::string("\\e") : std::string(1, ch);
      if (!esc.empty() && (esc[0] == '.' || esc[0] == '\'')) esc = "\\&" + esc;
      fprintf(out, "%s\n", esc.c_str());
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    fputs(".fi\n", out);
  }
  fputs("[SEE ALSO]\nThe documents under docs/ of the source: shmtool.md, metrics.md, save-restore.md, advise.md.\n", out);
}

}  // namespace
}  // namespace shmtool

int main(int argc, char** argv) {
  using namespace shmtool;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_overview(stderr);
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (args.size() == 2 && args[1] == "--commands") {
      print_command_names(stdout);
      return 0;
    }
    if (args.size() == 2 && args[1] == "--man") {
      print_man_include(stdout);
      return 0;
    }
    if (args.size() >= 2) {
      std::string g = is_group(args[1]) ? args[1] : "";
      std::string n = g.empty() ? args[1] : (args.size() >= 3 ? args[2] : "");
      if (!g.empty() && n.empty()) {
        print_group(stdout, g);
        return 0;
      }
      if (const Command* c = lookup(g, n)) {
        print_command(stdout, *c);
        return 0;
      }
      fprintf(stderr, "shmtool: no command '%s'; run 'shmtool --help' for the list\n",
              shmfilter::escape_text(args[1]).c_str());
      return 2;
    }
    print_overview(stdout);
    return 0;
  }
  if (args[0] == "--version") {
    printf("shmtool 0.1.0\n");
    return 0;
  }
  std::string group, name = args[0];
  size_t first = 1;
  if (is_group(args[0])) {
    group = args[0];
    if (args.size() < 2 || args[1] == "--help" || args[1] == "-h") {
      print_group(args.size() < 2 ? stderr : stdout, group);
      return args.size() < 2 ? 2 : 0;
    }
    name = args[1];
    first = 2;
  }
  const Command* cmd = lookup(group, name);
  if (cmd == nullptr) {
    std::string full = group.empty() ? name : group + " " + name;
    fprintf(stderr, "shmtool: unknown command '%s'; run 'shmtool --help' for the list\n",
            shmfilter::escape_text(full).c_str());
    return 2;
  }
  std::vector<std::string> rest(args.begin() + static_cast<long>(first), args.end());
  for (const auto& a : rest) {
    if (a == "--help" || a == "-h") {
      print_command(stdout, *cmd);
      return 0;
    }
  }
  set_progress_label(group.empty() ? name : group + " " + name);
  set_current_command(group.empty() ? name : group + " " + name);
  int rc = 0;
  try {
    Args parsed(rest, cmd->options);
    parsed.no_more_than(cmd->max_positionals);  // extra arguments are an error, never ignored
    rc = cmd->run(parsed);
  } catch (const UsageError& e) {
    fprintf(stderr, "shmtool: %s (usage: %s; see 'shmtool %s%s --help')\n",
            shmfilter::escape_text(e.what(), true).c_str(), cmd->usage.c_str(),
            group.empty() ? "" : (group + " ").c_str(), cmd->name.c_str());
    return 2;
  } catch (const shmfilter::Error& e) {
    if (e.code() == shmfilter::ErrorCode::kInvalidArgument || e.code() == shmfilter::ErrorCode::kNameTooLong) {
      fprintf(stderr, "shmtool: %s\n", shmfilter::escape_text(e.what(), true).c_str());
      return 2;
    }
    fprintf(stderr, "shmtool: %s\n", shmfilter::escape_text(e.what(), true).c_str());
    return 1;
  } catch (const std::exception& e) {
    fprintf(stderr, "shmtool: %s\n", shmfilter::escape_text(e.what(), true).c_str());
    return 1;
  }
  // Output that never arrived is a failure (a full disk, a closed pipe): exit 1, never 0.
  if (fflush(stdout) != 0 || ferror(stdout)) {
    fprintf(stderr, "shmtool: cannot write the output: %s\n", strerror(errno));
    return rc == 0 ? 1 : rc;
  }
  return rc;
}
