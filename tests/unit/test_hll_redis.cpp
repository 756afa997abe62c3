// tests/unit/test_hll_redis.cpp: interoperability with a real redis-server.
//
// The test starts its own `redis-server --port <free> --bind 127.0.0.1
// --save '' --appendonly no`, talks RESP over a plain socket, and checks that
// (1) our registers equal Redis's for the same PFADDs (dense and sparse GET),
// (2) our count equals PFCOUNT, (3) an exported HLL SET into Redis counts the
// same there, (4) PFMERGE of ours and Redis's equals our merge. If
// redis-server is missing the test FAILS (never skips): install it with
// scripts/install-deps.sh (Debian package redis-server).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "structures/hll/hll_impl.h"
#include "shmfilter/hll.hpp"
#include "load_clock.h"
#include "test_util.h"
#include "workload.h"

using namespace shmfilter::internal::hll;

namespace {

std::string find_redis_server() {
  if (const char* path = std::getenv("PATH")) {
    std::string p(path);
    size_t start = 0;
    while (start <= p.size()) {
      size_t end = p.find(':', start);
      if (end == std::string::npos) end = p.size();
      std::string cand = p.substr(start, end - start) + "/redis-server";
      if (access(cand.c_str(), X_OK) == 0) return cand;
      start = end + 1;
    }
  }
  for (const char* c : {"/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server"})
    if (access(c, X_OK) == 0) return c;
  return "";
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// A RESP reply: type '+', '-', ':', '$' (nil when is_nil).
struct Reply {
  char type = 0;
  std::string str;
  long long num = 0;
  bool is_nil = false;
};

class Resp {
 public:
  bool connect_to(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd_);
      fd_ = -1;
      return false;
    }
    return true;
  }
  ~Resp() {
    if (fd_ >= 0) close(fd_);
  }
  Reply cmd(const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    size_t off = 0;
    while (off < out.size()) {
      ssize_t n = send(fd_, out.data() + off, out.size() - off, 0);
      if (n <= 0) return Reply{'-', "send failed"};
      off += static_cast<size_t>(n);
    }
    return read_reply();
  }

 private:
  int fd_ = -1;
  std::string buf_;
  bool fill() {
    char tmp[65536];
    ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  std::string line() {
    size_t p;
    while ((p = buf_.find("\r\n")) == std::string::npos)
      if (!fill()) return "";
    std::string l = buf_.substr(0, p);
    buf_.erase(0, p + 2);
    return l;
  }
  Reply read_reply() {
    Reply r;
    std::string l = line();
    if (l.empty()) return Reply{'-', "connection closed"};
    r.type = l[0];
    std::string rest = l.substr(1);
    if (r.type == '+' || r.type == '-') {
      r.str = rest;
    } else if (r.type == ':') {
      r.num = std::stoll(rest);
    } else if (r.type == '$') {
      long long len = std::stoll(rest);
      if (len < 0) {
        r.is_nil = true;
        return r;
      }
      while (buf_.size() < static_cast<size_t>(len) + 2)
        if (!fill()) return Reply{'-', "connection closed"};
      r.str = buf_.substr(0, static_cast<size_t>(len));
      buf_.erase(0, static_cast<size_t>(len) + 2);
    }
    return r;
  }
};

class RedisServer : public ::testing::Test {
 protected:
  static pid_t pid_;
  static int port_;
  static std::string error_;

  static void SetUpTestSuite() {
    std::string bin = find_redis_server();
    if (bin.empty()) {
      error_ = "redis-server not found in PATH or /usr/bin: run scripts/install-deps.sh (installs Debian's redis-server)";
      return;
    }
    // A free port can be taken between our probe and redis's bind: try 3 ports.
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = free_port();
      pid_ = fork();
      if (pid_ == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        std::string port = std::to_string(port_);
        execl(bin.c_str(), bin.c_str(), "--port", port.c_str(), "--bind", "127.0.0.1", "--save", "", "--appendonly",
              "no", "--daemonize", "no", static_cast<char*>(nullptr));
        _exit(127);
      }
      // Up to 30 uncontended seconds (tests/support/load_clock.h): redis-server starts in
      // milliseconds, but a loaded CI machine may not run it for seconds.
      shmf_test::LoadClock clock;
      const uint64_t limit = uint64_t(30 * shmf_test::time_scale() * 1e9);
      while (clock.now() < limit) {
        Resp probe;
        if (probe.connect_to(port_) && probe.cmd({"PING"}).str == "PONG") return;
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) break;  // it exited (port taken?): next port
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    error_ = "redis-server " + bin + " did not answer PING on 127.0.0.1 (3 ports tried, 30 uncontended s each)";
  }
  static void TearDownTestSuite() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      shmf_test::wait_status(pid_);
      pid_ = -1;
    }
  }
  void SetUp() override {
    ASSERT_TRUE(error_.empty()) << error_;
    ASSERT_TRUE(redis_.connect_to(port_));
  }

  // PFADD keys in batches; mirror them into our registers.
  void pfadd_both(const std::string& key, const std::vector<std::string>& elems, std::vector<uint64_t>& words) {
    for (size_t i = 0; i < elems.size(); i += 1000) {
      std::vector<std::string> args{"PFADD", key};
      for (size_t j = i; j < std::min(elems.size(), i + 1000); ++j) args.push_back(elems[j]);
      Reply r = redis_.cmd(args);
      ASSERT_EQ(r.type, ':') << r.str;
    }
    for (const auto& e : elems) {
      uint32_t idx;
      uint8_t rank;
      hll_index_rank(murmur64a(e.data(), e.size(), kRedisHllSeed), idx, rank);
      hll_update(words.data(), idx, rank);
    }
  }
  static std::vector<uint8_t> regs_of(const std::vector<uint64_t>& words) {
    std::vector<uint8_t> r(kHllRegisters);
    hll_read_registers(words.data(), r.data());
    return r;
  }
  Resp redis_;
};
pid_t RedisServer::pid_ = -1;
int RedisServer::port_ = 0;
std::string RedisServer::error_;

std::vector<std::string> device_ids(uint64_t n, uint64_t seed) {
  std::vector<std::string> v;
  v.reserve(n);
  for (uint64_t i = 0; i < n; ++i) v.push_back(shmf_bench::hex16(shmf_bench::mix64((seed << 40) + i)));
  return v;
}

}  // namespace

// Same input -> same registers and same count as Redis, at several sizes
// (small ones come back from GET sparse, large ones dense).
TEST_F(RedisServer, CountsAndRegistersAgreeWithPfadd) {
  for (uint64_t n : {1ull, 10ull, 100ull, 1000ull, 20000ull, 200000ull}) {
    std::string key = "uv:" + std::to_string(n);
    std::vector<uint64_t> words(kHllWords, 0);
    pfadd_both(key, device_ids(n, n), words);
    Reply c = redis_.cmd({"PFCOUNT", key});
    ASSERT_EQ(c.type, ':');
    std::vector<uint8_t> ours = regs_of(words);
    EXPECT_EQ(static_cast<uint64_t>(c.num), hll_estimate(ours.data())) << "n=" << n;
    Reply g = redis_.cmd({"GET", key});
    ASSERT_EQ(g.type, '$');
    std::vector<uint8_t> theirs(kHllRegisters);
    ASSERT_EQ(hll_redis_decode(g.str, theirs.data()), "") << "n=" << n;
    EXPECT_EQ(theirs, ours) << "n=" << n << " encoding=" << int(g.str[4]);
    if (n <= 100) {
      EXPECT_EQ(g.str[4], 1) << "small HLLs come back sparse: the sparse decoder is exercised";
    }
    if (n >= 20000) {
      EXPECT_EQ(g.str[4], 0);
    }
  }
}

// Export -> SET -> PFCOUNT equals our count; PFMERGE of our export with a
// Redis HLL equals our register max; the merged GET imports back exactly.
TEST_F(RedisServer, ExportSetPfcountAndPfmerge) {
  shmf_test::SegmentGuard g(shmf_test::unique_name("hllredis"));
  auto seg = shmfilter::Segment::create(g.name);
  auto ours = shmfilter::Hll::create(seg, "ours");
  auto ids = device_ids(150000, 99);
  for (const auto& id : ids) ours.add(std::string_view(id));
  std::string bytes = ours.export_redis();
  ASSERT_EQ(bytes.size(), 12304u);
  ASSERT_EQ(redis_.cmd({"SET", "imported", bytes}).str, "OK");
  Reply c = redis_.cmd({"PFCOUNT", "imported"});
  ASSERT_EQ(c.type, ':') << c.str;
  EXPECT_EQ(static_cast<uint64_t>(c.num), ours.count());

  std::vector<uint64_t> words(kHllWords, 0);
  auto other = device_ids(50000, 7);
  pfadd_both("redis-side", other, words);
  ASSERT_EQ(redis_.cmd({"PFMERGE", "merged", "imported", "redis-side"}).str, "OK");
  auto theirs_side = shmfilter::Hll::create(seg, "theirs");
  Reply gs = redis_.cmd({"GET", "redis-side"});
  theirs_side.import_redis(gs.str);
  std::vector<shmfilter::Hll> both{ours, theirs_side};
  Reply mc = redis_.cmd({"PFCOUNT", "merged"});
  EXPECT_EQ(static_cast<uint64_t>(mc.num), shmfilter::Hll::count_union(both));
  auto into = shmfilter::Hll::create(seg, "merged");
  into.merge_from(both);
  Reply gm = redis_.cmd({"GET", "merged"});
  auto back = shmfilter::Hll::create(seg, "back");
  back.import_redis(gm.str);
  EXPECT_EQ(back.registers(), into.registers());
  EXPECT_EQ(back.count(), into.count());
  // PFCOUNT over two keys (Redis's union) agrees too.
  Reply two = redis_.cmd({"PFCOUNT", "imported", "redis-side"});
  EXPECT_EQ(static_cast<uint64_t>(two.num), into.count());
}

// A Redis key holding something else is rejected with a clear message.
TEST_F(RedisServer, ImportRejectsNonHll) {
  ASSERT_EQ(redis_.cmd({"SET", "plain", "hello world, not an hll"}).str, "OK");
  Reply g = redis_.cmd({"GET", "plain"});
  std::vector<uint8_t> regs(kHllRegisters);
  EXPECT_NE(hll_redis_decode(g.str, regs.data()).find("HYLL"), std::string::npos);
}
