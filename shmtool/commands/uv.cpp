// shmtool/commands/uv.cpp: `shmtool uv create|add|count|push|info` (docs/uv.md).
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/describe.h"
#include "cli/input.h"
#include "cli/json.h"
#include "cli/numbers.h"
#include "cli/segment.h"
#include "shmfilter/uv.hpp"

namespace shmtool {
namespace {

using shmfilter::Segment;
using shmfilter::UvFamily;
using shmfilter::UvStatus;

Json describe_fields(Segment& seg, const shmfilter::RegionInfo& info) {
  shmfilter::UvStats s = UvFamily::open(seg, info.name).stats();
  Json j;
  j.add("retention", s.retention).add_seconds("bucket_seconds", s.bucket_seconds).add("utc_offset", s.utc_offset);
  j.add("max_spaces", s.max_spaces).add("exact_max", s.exact_max).add_size("chunk_bytes", s.chunk_bytes);
  j.add("current_bucket", s.current_bucket).add("rotations", s.rotations).add("promotions", s.promotions);
  j.add("refused_spaces_full", s.spaces_full).add("refused_no_space", s.no_space).add("refused_stale", s.stale);
  j.add_size("memory", s.memory_bytes);
  std::vector<Json> bs;
  for (const shmfilter::UvBucketStats& b : s.buckets) {
    Json k;
    k.add("bucket", b.bucket).add("age", b.age).add("spaces", b.spaces).add("exact_spaces", b.exact_spaces);
    k.add("dense_spaces", b.dense_spaces).add("adds", b.adds).add_size("block_bytes", b.block_bytes);
    k.add_size("retired_bytes", b.retired_bytes).add_size("chunk_bytes", b.chunk_bytes).add_size("table_bytes", b.table_bytes);
    bs.push_back(k);
  }
  j.add_array("buckets", bs);
  j.add("hash", "MurmurHash64A seed 0xadc83b19, p=14 (Redis-compatible registers)");
  return j;
}

void apply_clock(UvFamily& f, const Args& a) {
  if (!a.has("--now")) return;
  const std::string t = a.get("--now");
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || *end != '\0' || errno == ERANGE)
    throw UsageError("--now '" + t + "' is not a Unix time in seconds (e.g. 1764547200)");
  f.set_now(v);
}

uint64_t parse_space(const std::string& t) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(t.c_str(), &end, 10);
  if (t.empty() || t[0] == '-' || *end != '\0' || errno == ERANGE)
    throw UsageError("SPACE '" + t + "' is not an unsigned 64-bit integer (a plan id)");
  return v;
}

uint32_t window_of(const Args& a, const UvFamily& f) {
  return static_cast<uint32_t>(uint_option(a, "--window", 1, 1, f.retention()));
}

int run_create(const Args& a) {
  shmfilter::UvOptions o;
  o.retention = static_cast<uint32_t>(uint_option(a, "--retention", o.retention, 0, UINT32_MAX));
  o.bucket_seconds = count_option(a, "--bucket-seconds", o.bucket_seconds);
  if (a.has("--utc-offset")) {
    const std::string t = a.get("--utc-offset");
    char* end = nullptr;
    long long off = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0') throw UsageError("--utc-offset '" + t + "' is not seconds east of UTC (e.g. 28800)");
    o.utc_offset = off;
  }
  o.max_spaces = static_cast<uint32_t>(uint_option(a, "--max-spaces", o.max_spaces, 0, UINT32_MAX));
  o.exact_max = static_cast<uint32_t>(uint_option(a, "--exact-max", o.exact_max, 0, UINT32_MAX));
  if (a.has("--chunk-bytes")) o.chunk_bytes = shmfilter::parse_size(a.get("--chunk-bytes"));
  return create_and_show(a, shmfilter::Kind::kUv,
                         [&](Segment& seg, const std::string& name) { UvFamily::create(seg, name, o); });
}

int run_add(const Args& a) {
  UvFamily f = open_structure<UvFamily>(a);
  apply_clock(f, a);
  const auto& pos = a.positionals();
  uint64_t changed = 0, refused = 0, lines = 0;
  UvStatus last_refusal = UvStatus::kChanged;
  auto one = [&](const std::string& sp, std::string_view item) {
    const UvStatus s = f.add(parse_space(sp), item);
    changed += s == UvStatus::kChanged;
    if (s != UvStatus::kChanged && s != UvStatus::kUnchanged) {
      ++refused;
      last_refusal = s;
    }
    return s;
  };
  if (pos.size() > 2) {
    if ((pos.size() - 2) % 2 != 0) throw UsageError("arguments come in pairs: SPACE ITEM [SPACE ITEM]...");
    for (size_t i = 2; i + 1 < pos.size(); i += 2) {
      const UvStatus s = one(pos[i], pos[i + 1]);
      printf("%s %s %s\n", pos[i].c_str(), pos[i + 1].c_str(), std::string(shmfilter::uv_status_name(s)).c_str());
    }
  } else {
    for_each_stdin_line([&](std::string_view line, uint64_t no) {
      const size_t sp = line.find_first_of(" \t");
      if (sp == std::string_view::npos)
        throw UsageError("stdin line " + std::to_string(no) + " is not 'SPACE ITEM'");
      ++lines;
      one(std::string(line.substr(0, sp)), line.substr(sp + 1));
    });
    if (a.has("--json")) {
      Json j;
      j.add("lines", lines).add("changed", changed).add("refused", refused);
      printf("%s\n", j.str().c_str());
    } else {
      printf("lines: %llu\nchanged: %llu\nrefused: %llu\n", static_cast<unsigned long long>(lines),
             static_cast<unsigned long long>(changed), static_cast<unsigned long long>(refused));
    }
  }
  if (refused != 0)
    throw shmfilter::Error(last_refusal == UvStatus::kDropped ? shmfilter::ErrorCode::kDropped
                                                               : shmfilter::ErrorCode::kNoSpace,
                           std::to_string(refused) + " adds were refused (last: " +
                               std::string(shmfilter::uv_status_name(last_refusal)) +
                               "): see 'shmtool uv info' for the cause counters");
  return 0;
}

int run_count(const Args& a) {
  UvFamily f = open_structure<UvFamily>(a);
  apply_clock(f, a);
  const uint32_t w = window_of(a, f);
  const auto& pos = a.positionals();
  std::vector<Json> rows;
  auto emit = [&](const std::string& label, uint64_t n) {
    if (a.has("--json")) {
      Json j;
      j.add("space", label).add("window", w).add("count", n);
      rows.push_back(j);
    } else {
      printf("%s\t%llu\n", label.c_str(), static_cast<unsigned long long>(n));
    }
  };
  if (pos.size() > 2) {
    for (size_t i = 2; i < pos.size(); ++i) emit(pos[i], f.count(parse_space(pos[i]), w));
  } else if (a.has("--all")) {
    emit("all", f.count_all(w));
  } else {
    for (uint64_t s : f.spaces(w)) emit(std::to_string(s), f.count(s, w));
  }
  if (a.has("--json")) {
    Json j;
    j.add_array("counts", rows);
    printf("%s\n", j.str().c_str());
  }
  return 0;
}

// ---- Redis push: one pipeline per host -------------------------------------------------

std::string resp_command(const std::vector<std::string_view>& parts) {
  std::string out = "*" + std::to_string(parts.size()) + "\r\n";
  for (std::string_view p : parts) {
    out += "$" + std::to_string(p.size()) + "\r\n";
    out.append(p.data(), p.size());
    out += "\r\n";
  }
  return out;
}

class RespConn {
 public:
  ~RespConn() {
    if (fd_ >= 0) close(fd_);
  }
  void connect_to(const std::string& host, const std::string& port) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr)
      throw shmfilter::Error(shmfilter::ErrorCode::kIo, "cannot resolve Redis host '" + host + "': check --redis");
    for (addrinfo* r = res; r; r = r->ai_next) {
      fd_ = socket(r->ai_family, r->ai_socktype, r->ai_protocol);
      if (fd_ >= 0 && connect(fd_, r->ai_addr, r->ai_addrlen) == 0) break;
      if (fd_ >= 0) close(fd_);
      fd_ = -1;
    }
    freeaddrinfo(res);
    if (fd_ < 0)
      throw shmfilter::Error(shmfilter::ErrorCode::kIo, "cannot connect to Redis at " + host + ":" + port +
                                                            ": is redis-server running? (--redis HOST:PORT)");
  }
  void send_all(const std::string& b) {
    size_t off = 0;
    while (off < b.size()) {
      ssize_t n = ::send(fd_, b.data() + off, b.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw shmfilter::Error(shmfilter::ErrorCode::kIo, "writing to Redis failed: " + std::string(strerror(errno)));
      off += static_cast<size_t>(n);
    }
  }
  // Reads one reply; returns its first line ("+OK", ":1", "-ERR ...", "$N" consumed whole).
  std::string reply() {
    std::string line = read_line();
    if (!line.empty() && line[0] == '$') {
      long n = std::strtol(line.c_str() + 1, nullptr, 10);
      if (n >= 0) read_bytes(static_cast<size_t>(n) + 2);
    }
    return line;
  }

 private:
  bool fill() {
    char tmp[65536];
    for (;;) {
      ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf_.append(tmp, static_cast<size_t>(n));
      return true;
    }
  }
  std::string read_line() {
    for (;;) {
      size_t e = buf_.find("\r\n", pos_);
      if (e != std::string::npos) {
        std::string l = buf_.substr(pos_, e - pos_);
        pos_ = e + 2;
        compact();
        return l;
      }
      if (!fill()) throw shmfilter::Error(shmfilter::ErrorCode::kIo, "Redis closed the connection mid-reply");
    }
  }
  void read_bytes(size_t n) {
    while (buf_.size() - pos_ < n)
      if (!fill()) throw shmfilter::Error(shmfilter::ErrorCode::kIo, "Redis closed the connection mid-reply");
    pos_ += n;
    compact();
  }
  void compact() {
    if (pos_ > (1u << 20)) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
  }
  int fd_ = -1;
  std::string buf_;
  size_t pos_ = 0;
};

// The bucket's label in a key: its local date for day buckets, else "b<number>".
std::string bucket_label(int64_t bucket, uint64_t bucket_seconds) {
  if (bucket_seconds != 86400) return "b" + std::to_string(bucket);
  const time_t t = static_cast<time_t>(bucket * 86400);
  struct tm tm;
  gmtime_r(&t, &tm);
  char out[16];
  strftime(out, sizeof out, "%Y-%m-%d", &tm);
  return out;
}

int run_push(const Args& a) {
  UvFamily f = open_structure<UvFamily>(a);
  apply_clock(f, a);
  const uint32_t days = static_cast<uint32_t>(uint_option(a, "--days", 1, 1, f.retention()));
  std::string target = a.get("--redis", "");
  if (target.empty()) {
    const char* h = std::getenv("SHMF_REDIS_HOST");
    const char* p = std::getenv("SHMF_REDIS_PORT");
    target = std::string(h ? h : "127.0.0.1") + ":" + (p ? p : "6379");
  }
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == target.size())
    throw UsageError("--redis '" + target + "' is not HOST:PORT");
  const std::string prefix = a.get("--prefix", "uv");
  std::string tag = a.get("--host-tag", "");
  if (tag.empty()) {
    char hn[256] = {0};
    gethostname(hn, sizeof hn - 1);
    tag = hn;
  }
  const uint64_t expire = count_option(a, "--expire", 0);
  const uint64_t bucket_seconds = f.stats().bucket_seconds;
  const auto t0 = std::chrono::steady_clock::now();
  RespConn c;
  c.connect_to(target.substr(0, colon), target.substr(colon + 1));
  // Per space and day: SET a host-private key, PFMERGE it into the shared key, DEL it.
  // Batches of 256 spaces keep the socket buffers bounded; replies are read per batch.
  uint64_t keys = 0, errors = 0, bytes = 0;
  std::string first_error;
  std::string batch;
  size_t pending = 0;
  auto flush = [&] {
    c.send_all(batch);
    bytes += batch.size();
    batch.clear();
    for (; pending > 0; --pending) {
      const std::string r = c.reply();
      if (!r.empty() && r[0] == '-') {
        if (errors++ == 0) first_error = r;
      }
    }
  };
  for (uint32_t age = 0; age < days; ++age) {
    const std::string label = bucket_label(f.bucket_at(age), bucket_seconds);
    for (uint64_t space : f.spaces(age + 1)) {
      if (age > 0 && f.count_at(space, age) == 0) continue;
      const std::string dest = prefix + ":" + std::to_string(space) + ":" + label;
      const std::string tmp = dest + ":push:" + tag;
      const std::string hll = f.export_redis_at(space, age);
      batch += resp_command({"SET", tmp, hll});
      batch += resp_command({"PFMERGE", dest, tmp});
      batch += resp_command({"DEL", tmp});
      pending += 3;
      if (expire != 0) {
        batch += resp_command({"EXPIRE", dest, std::to_string(expire)});
        ++pending;
      }
      ++keys;
      if (keys % 256 == 0) flush();
    }
  }
  flush();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.has("--json")) {
    Json j;
    j.add("keys", keys).add("errors", errors).add_size("sent", bytes).add("seconds", secs).add("redis", target);
    printf("%s\n", j.str().c_str());
  } else {
    printf("keys: %llu\nerrors: %llu\nsent: %llu bytes\nseconds: %.3f\n", static_cast<unsigned long long>(keys),
           static_cast<unsigned long long>(errors), static_cast<unsigned long long>(bytes), secs);
  }
  if (errors != 0)
    throw shmfilter::Error(shmfilter::ErrorCode::kIo, std::to_string(errors) + " Redis commands failed (first: " +
                                                          first_error + ")");
  return 0;
}

SHMTOOL_COMMAND("uv create", run_create, R"(create a UV family (distinct counts per space and day bucket)
Usage: shmtool uv create SEG NAME [--retention R] [--bucket-seconds S] [--utc-offset SECONDS] [--max-spaces M] [--exact-max N] [--chunk-bytes SIZE] [--json]

Creates NAME in SEG: one structure holding, for every space (plan id) and day
bucket, a distinct-count sketch that is exact up to --exact-max items and a
Redis-compatible HLL (p=14, 0.81% standard error) beyond. Memory follows each
space's size; no directory entry per space (docs/uv.md).

Options:
  --retention R         buckets kept, 1..64 (default 7)
  --bucket-seconds S    bucket length (default 86400: days)
  --utc-offset SECONDS  where a bucket starts: local midnight at UTC+8 is 28800 (default 0)
  --max-spaces M        spaces one bucket can hold (default 16384)
  --exact-max N         exact counts up to N distinct items per space and bucket (default 1000)
  --chunk-bytes SIZE    storage chunk size, 64KiB..256MiB (default 4MiB)
  --json                print the new family as one JSON object
Example:
  shmtool uv create ads uv --utc-offset 28800
)");

SHMTOOL_COMMAND("uv add", run_add, R"(count items for spaces (pairs as arguments, or stdin 'SPACE ITEM' lines)
Usage: shmtool uv add SEG NAME [SPACE ITEM]... [--now UNIX] [--json]

Adds each ITEM (bytes) to SPACE's sketch in the current bucket. With pairs as
arguments prints 'SPACE ITEM changed|unchanged|<refusal>' per pair; without,
reads stdin lines 'SPACE ITEM' and prints lines, changed and refused. Exit 1
when any add was refused (spaces_full, no_space, stale, ...).

Options:
  --now UNIX            this run's clock (Unix seconds; default the system clock)
  --json                one JSON object (stdin mode)
Example:
  shmtool uv add ads uv 42 device-1 42 device-2
)");

SHMTOOL_COMMAND("uv count", run_count, R"(distinct items per space over the last W buckets (a union)
Usage: shmtool uv count SEG NAME [SPACE...] [--window W] [--all] [--now UNIX] [--json]

Prints 'SPACE<TAB>COUNT' for each SPACE (default: every space with a sketch in
the window), counting the union of the last W buckets: exact while every
bucket's sketch of the space is exact, else the HLL estimate. --all prints
the distinct items over every space.

Options:
  --window W            buckets, 1..retention (default 1: the current bucket)
  --all                 one count over every space
  --now UNIX            this run's clock (Unix seconds)
  --json                one JSON object
Example:
  shmtool uv count ads uv 42 --window 7
)");

SHMTOOL_COMMAND("uv push", run_push, R"(push every space's sketch to Redis in one pipeline (fleet merge)
Usage: shmtool uv push SEG NAME [--redis HOST:PORT] [--prefix P] [--days D] [--host-tag TAG] [--expire SECONDS] [--now UNIX] [--json]

For every space and each of the last D buckets, merges this host's sketch into
the Redis HLL key P:SPACE:DATE (SET a host-private key with Redis's dense
encoding, PFMERGE it into the shared key, DEL it), pipelined over one
connection. Every host of a fleet runs it; PFCOUNT P:SPACE:DATE then counts
the fleet's union, and PFCOUNT over 7 dates (or PFMERGE) the 7-day UV.

Options:
  --redis HOST:PORT     Redis (default SHMF_REDIS_HOST:SHMF_REDIS_PORT, else 127.0.0.1:6379)
  --prefix P            key prefix (default uv)
  --days D              buckets to push, 1..retention (default 1: today)
  --host-tag TAG        names the host-private key (default the host name)
  --expire SECONDS      EXPIRE the shared keys (default none)
  --now UNIX            this run's clock (Unix seconds)
  --json                one JSON object
Example:
  shmtool uv push ads uv --redis 10.0.0.5:6379 --days 2 --expire 691200
)");

SHMTOOL_STRUCTURE(shmfilter::Kind::kUv, describe_fields, "buckets, spaces (exact/dense), memory",
                  "Prints the parameters, the refusal counters, the memory and, per kept bucket,\n"
                  "spaces (exact and dense), adds and bytes (live blocks, retired, chunks).",
                  "ads uv");

}  // namespace
}  // namespace shmtool
