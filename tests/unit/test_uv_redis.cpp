// tests/unit/test_uv_redis.cpp: the UV family against a real redis-server (docs/uv.md "Redis").
//
// Uses SHMF_REDIS_HOST / SHMF_REDIS_PORT when set (scripts/test.sh starts one), else starts
// its own `redis-server --port <free> --bind 127.0.0.1 --save '' --appendonly no`. If
// redis-server is missing the test FAILS (never skips): scripts/install-deps.sh installs it.
// Checked: (1) every space's exported sketch SET into Redis counts there (PFCOUNT) exactly as
// count_hll() here; (2) `shmtool uv push` from two hosts (two segments, overlapping items)
// leaves per space and day a Redis key whose PFCOUNT is the count of the union of both
// hosts' registers, within the HLL's bound of the true union (exact spaces: their export's).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "shmfilter/hll.hpp"
#include "shmfilter/uv.hpp"
#include "structures/hll/hll_impl.h"
#include "test_util.h"

using namespace shmfilter;
using namespace shmf_test;

namespace {

constexpr int64_t kDay0 = 1764547200;  // 2025-12-01 00:00 UTC

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

struct Redis {
  std::string host = "127.0.0.1";
  int port = 0;
  bool own = false;
  Redis() {
    const char* h = std::getenv("SHMF_REDIS_HOST");
    const char* p = std::getenv("SHMF_REDIS_PORT");
    if (h && p) {
      host = h;
      port = std::atoi(p);
      return;
    }
    port = free_port();
    own = true;
    run("redis-server --bind 127.0.0.1 --port " + std::to_string(port) +
        " --save '' --appendonly no --daemonize yes --loglevel warning --dir /tmp 2>&1");
    for (int i = 0; i < 100 && cli("PING") != "PONG"; ++i) usleep(50000);
  }
  ~Redis() {
    if (own) run("redis-cli -p " + std::to_string(port) + " shutdown nosave 2>/dev/null");
  }
  std::string cli(const std::string& args) const {
    return run("redis-cli -h " + host + " -p " + std::to_string(port) + " " + args + " 2>&1");
  }
  std::string addr() const { return host + ":" + std::to_string(port); }
};

uint64_t union_count(const std::vector<std::string>& exports) {
  uint8_t acc[16384] = {0}, regs[16384];
  for (const std::string& e : exports) {
    EXPECT_TRUE(internal::hll::hll_redis_decode(e, regs).empty());
    for (int i = 0; i < 16384; ++i) acc[i] = std::max(acc[i], regs[i]);
  }
  return internal::hll::hll_estimate(acc);
}

}  // namespace

TEST(UvRedis, ExportedSketchesCountInRedisAsHere) {
  Redis r;
  ASSERT_EQ(r.cli("PING"), "PONG") << "redis-server did not start: install it (scripts/install-deps.sh)";
  SegmentGuard g(unique_name("uvredis"));
  Segment seg = Segment::create(g.name, small_options(32 << 20));
  UvOptions o;
  o.max_spaces = 64;
  o.chunk_bytes = 1 << 20;
  UvFamily f = UvFamily::create(seg, "uv", o);
  f.set_now(kDay0 + 10);
  std::mt19937_64 rng(99);
  const std::vector<uint64_t> sizes = {1, 50, 999, 1001, 20000, 200000};
  for (size_t s = 0; s < sizes.size(); ++s)
    for (uint64_t i = 0; i < sizes[s]; ++i) f.add(s, "dev-" + std::to_string(rng()));
  for (size_t s = 0; s < sizes.size(); ++s) {
    const std::string path = "/tmp/" + g.name + "-" + std::to_string(s);
    FILE* fp = fopen(path.c_str(), "wb");
    const std::string e = f.export_redis(s, 1);
    fwrite(e.data(), 1, e.size(), fp);
    fclose(fp);
    const std::string key = g.name + ":" + std::to_string(s);
    ASSERT_EQ(run("redis-cli -h " + r.host + " -p " + std::to_string(r.port) + " -x SET " + key + " < " + path), "OK");
    unlink(path.c_str());
    EXPECT_EQ(r.cli("PFCOUNT " + key), std::to_string(f.count_hll(s, 1))) << "space " << s;
    r.cli("DEL " + key);
  }
}

TEST(UvRedis, PushFromTwoHostsMergesEverySpaceAndDay) {
  Redis r;
  ASSERT_EQ(r.cli("PING"), "PONG") << "redis-server did not start: install it (scripts/install-deps.sh)";
  SegmentGuard ga(unique_name("uvpushA")), gb(unique_name("uvpushB"));
  Segment a = Segment::create(ga.name, small_options(64 << 20));
  Segment b = Segment::create(gb.name, small_options(64 << 20));
  UvOptions o;
  o.max_spaces = 128;
  o.retention = 3;
  o.chunk_bytes = 1 << 20;
  UvFamily fa = UvFamily::create(a, "uv", o), fb = UvFamily::create(b, "uv", o);
  // 40 spaces over 2 days; space s has 30 s^2 devices a day, host A sees the first 2/3 and
  // host B the last 2/3 (1/3 overlap).
  std::vector<std::vector<std::set<uint64_t>>> truth(2, std::vector<std::set<uint64_t>>(40));
  for (int d = 0; d < 2; ++d) {
    fa.set_now(kDay0 + d * 86400 + 60);
    fb.set_now(kDay0 + d * 86400 + 60);
    for (uint64_t s = 0; s < 40; ++s) {
      const uint64_t n = 30 * s * s + 1;
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t dev = (s << 32) | (i + 1000 * uint64_t(d));
        if (i < 2 * n / 3 + 1) fa.add(s, dev);
        if (i >= n / 3) fb.add(s, dev);
        truth[d][s].insert(dev);
      }
    }
  }
  const std::string prefix = "uvt" + std::to_string(getpid());
  const std::string now = std::to_string(kDay0 + 86400 + 120);
  for (auto& [seg, tag] : {std::pair{ga.name, "A"}, std::pair{gb.name, "B"}}) {
    ToolResult t = run_shmtool({"uv", "push", seg, "uv", "--redis", r.addr(), "--prefix", prefix, "--days", "2",
                                "--host-tag", tag, "--now", now, "--json"});
    ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
    EXPECT_NE(t.out.find("\"keys\":80"), std::string::npos) << t.out;
  }
  const char* dates[2] = {"2025-12-01", "2025-12-02"};
  for (int d = 0; d < 2; ++d) {
    for (uint64_t s = 0; s < 40; ++s) {
      const uint32_t age = static_cast<uint32_t>(1 - d);
      const uint64_t expect = union_count({fa.export_redis_at(s, age), fb.export_redis_at(s, age)});
      const std::string got = r.cli("PFCOUNT " + prefix + ":" + std::to_string(s) + ":" + dates[d]);
      EXPECT_EQ(got, std::to_string(expect)) << "space " << s << " day " << d;
      // And the union is the true union within 4 sigma (3.25%) or 2 for tiny spaces.
      const double n = static_cast<double>(truth[d][s].size());
      EXPECT_LE(std::fabs(static_cast<double>(expect) - n), std::max(2.0, 0.0325 * n)) << "space " << s;
    }
  }
  EXPECT_EQ(r.cli("EXISTS " + prefix + ":5:2025-12-02:push:A"), "0");  // host-private keys are gone
  r.cli("EVAL \"for _,k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end\" 0 " + prefix + ":*");
}
