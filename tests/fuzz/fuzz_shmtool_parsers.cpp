// tests/fuzz/fuzz_shmtool_parsers.cpp: libFuzzer target for shmtool's argument
// and input-line parsers, compiled from the shmtool sources (shmtool/main.cpp
// with its main() renamed, shmtool/cli/, and every command file so the real
// command table and flags are registered).
//
// Input: byte 0 picks a command of the command table, the rest up to the first
// "\n\n" is its argument vector (NUL-separated), the rest is stdin. The target
// parses the arguments the way main() does (Args with the command's option table),
// then runs every option parser of cli/ over every option value, and reads the
// stdin part with for_each_stdin_line, parsing each line as shmtool's commands
// do (RoaringSet::parse_value, parse_size, counts). Commands are not run: they
// would create and remove real segments. UsageError / shmfilter::Error are the
// expected rejections; anything else (a crash, a sanitizer report, another
// exception) is a bug.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/input.h"
#include "cli/json.h"
#include "cli/numbers.h"
#include "cli/report.h"
#include "shmfilter/error.hpp"
#include "shmfilter/roaring_set.hpp"
#include "shmfilter/segment.hpp"

using namespace shmtool;

namespace {

template <class Fn>
void expect_clean(Fn&& fn) {
  try {
    fn();
  } catch (const UsageError&) {
  } catch (const shmfilter::Error& e) {
    if (e.code() != shmfilter::ErrorCode::kInvalidArgument && e.code() != shmfilter::ErrorCode::kBadInput) abort();
  }
}

int g_stdin_fd = -1;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_stdin_fd = memfd_create("shmf-fuzz-stdin", MFD_CLOEXEC);
  if (g_stdin_fd < 0) abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || commands().empty()) return 0;
  const Command& cmd = commands()[data[0] % commands().size()];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t split = rest.find("\n\n");
  std::string_view argtext = rest.substr(0, split);
  std::string_view input = split == std::string_view::npos ? std::string_view{} : rest.substr(split + 2);
  std::vector<std::string> argv;
  size_t start = 0;
  while (start <= argtext.size() && argv.size() < 32) {
    size_t nul = argtext.find('\0', start);
    if (nul == std::string_view::npos) nul = argtext.size();
    argv.emplace_back(argtext.substr(start, nul - start));
    start = nul + 1;
  }
  expect_clean([&] {
    Args args(argv, cmd.options);
    (void)args.positionals();
    for (size_t i = 0; i < 4; ++i) expect_clean([&] { (void)args.at(i, "ARG"); });
    expect_clean([&] { args.no_more_than(2); });
    for (const char* opt : {"--capacity", "--error", "--size", "--max-size", "--directory", "--mode", "--seed",
                            "--growth", "--expansion", "--delta-capacity", "--readers", "--max-layers"}) {
      if (!args.has(opt)) continue;
      std::string v = args.get(opt);
      expect_clean([&] { (void)parse_count(opt, v); });
      expect_clean([&] { (void)parse_real(opt, v); });
      expect_clean([&] { (void)parse_rate(opt, v); });
      expect_clean([&] { (void)size_option(args, opt, 0); });
      expect_clean([&] { (void)count_option(args, opt, 0); });
      expect_clean([&] { (void)real_option(args, opt, 0); });
      expect_clean([&] { (void)uint_option(args, opt, 0, 1, 1u << 22); });
      expect_clean([&] { (void)uint_option(args, opt, 0600, 0, 0777, 8); });
    }
    for (const auto& p : args.positionals()) {
      expect_clean([&] { (void)shmfilter::RoaringSet::parse_value(p); });
      expect_clean([&] { (void)shmfilter::parse_size(p); });
      (void)Json::quote(p);
    }
  });
  // stdin lines, as `shmtool roaring add SEG NAME -` and the key-reading commands see them.
  if (ftruncate(g_stdin_fd, 0) != 0 || pwrite(g_stdin_fd, input.data(), input.size(), 0) != static_cast<ssize_t>(input.size()))
    abort();
  lseek(g_stdin_fd, 0, SEEK_SET);
  int saved = dup(0);
  dup2(g_stdin_fd, 0);
  uint64_t last_no = 0;
  for_each_stdin_line([&](std::string_view line, uint64_t no) {
    if (line.empty() || no <= last_no || line.find('\n') != std::string_view::npos) abort();
    last_no = no;
    expect_clean([&] { (void)shmfilter::RoaringSet::parse_value(line); });
    expect_clean([&] { (void)parse_count("line", std::string(line)); });
  });
  dup2(saved, 0);
  ::close(saved);
  Json j;
  j.add("k", std::string(argtext));
  (void)one_line(j);
  return 0;
}
