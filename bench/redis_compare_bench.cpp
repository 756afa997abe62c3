// bench/redis_compare_bench.cpp: Redis and shmfilter side by side, one run,
// same keys, same machine.
//
//   redis_compare_bench [--n 1e6] [--samples 20000] [--redis-server PATH]
//
// Starts Debian's redis-server on a free loopback port (--save '' --appendonly
// no, nothing written to disk), talks to it through hiredis, and stops it at
// the end. Keys: --n 16-hex-char device ids (the mission's members). Then,
// per operation, latency percentiles of
//   SISMEMBER / SADD         vs ExactSet contains / insert and Bloom contains / add
//   PFADD                    vs Hll add
//   PFCOUNT k1 k2 (union)    vs Hll::count_union of the same two HLLs
// one call at a time, and pipelined in batches of 64 (64 commands sent, then
// 64 replies read; per-key time = batch time / 64) vs add_many/contains_many
// of 64, and as one variadic command of 64 members (SMISMEMBER / SADD / PFADD
// k m1..m64: Redis's cheapest batch). Lookups are half hits, half misses. The ratio column is Redis p50 /
// ours p50, both measured in this run. Redis memory per member comes from
// INFO memory (used_memory before and after loading the SET).
// Without redis-server or hiredis the Redis side is skipped with a message
// and our side still runs (exit 0).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#ifdef SHMF_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#include "shmfilter/bloom.hpp"
#include "shmfilter/exact_set.hpp"
#include "shmfilter/hll.hpp"
#include "subjects.h"
#include "timed.h"

namespace {

using namespace shmf_bench;
using shmfilter::Segment;

Clock* clk;

struct Pct {
  double p50 = -1, p99 = -1, p999 = -1;
};
Pct pct_of(Samples& s) { return {s.pct(0.5), s.pct(0.99), s.pct(0.999)}; }

struct Row {
  std::string op, mode, redis_cmd, ours;
  Pct r, o;
};
std::vector<Row> rows;

std::string cell(double ns) { return ns < 0 ? "-" : fmt_ns(ns); }

// Times fn(i) for i in [0, n): one sample per call, or per key of a batch.
template <class F>
Pct time_each(uint64_t n, F&& fn) {
  Samples s;
  s.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t t0 = clk->now();
    fn(i);
    const uint64_t t1 = clk->now();
    s.add(clk->ns_of(t0, t1));
  }
  return pct_of(s);
}
template <class F>
Pct time_batches(uint64_t batches, F&& fn) {
  Samples s;
  s.reserve(batches);
  for (uint64_t b = 0; b < batches; ++b) {
    const uint64_t t0 = clk->now();
    fn(b);
    const uint64_t t1 = clk->now();
    s.add(clk->ns_of(t0, t1) / 64);
  }
  return pct_of(s);
}

#ifdef SHMF_HAVE_HIREDIS
// ---- a redis-server of our own --------------------------------------------------

struct Redis {
  pid_t pid = -1;
  int port = 0;
  redisContext* c = nullptr;

  ~Redis() { stop(); }
  void stop() {
    if (c) {
      redisFree(c);
      c = nullptr;
    }
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
  static int free_port() {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      close(s);
      return 0;
    }
    close(s);
    return ntohs(a.sin_port);
  }
  bool start(const std::string& exe) {
    port = free_port();
    if (port == 0) return false;
    const std::string p = std::to_string(port);
    fflush(nullptr);
    pid = fork();
    if (pid == 0) {
      int devnull = open("/dev/null", O_RDWR);
      dup2(devnull, 1);
      dup2(devnull, 2);
      execl(exe.c_str(), exe.c_str(), "--port", p.c_str(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--dir", "/tmp", "--logfile", "", static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 500; ++i) {  // up to 5 s
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        return false;
      }
      redisContext* x = redisConnect("127.0.0.1", port);
      if (x && !x->err) {
        auto* r = static_cast<redisReply*>(redisCommand(x, "PING"));
        if (r && r->type == REDIS_REPLY_STATUS) {
          freeReplyObject(r);
          c = x;
          return true;
        }
        if (r) freeReplyObject(r);
      }
      if (x) redisFree(x);
    }
    return false;
  }
  redisReply* cmd(const char* fmt, const std::string& a) {
    return static_cast<redisReply*>(redisCommand(c, fmt, a.data(), a.size()));
  }
  uint64_t used_memory() {
    auto* r = static_cast<redisReply*>(redisCommand(c, "INFO memory"));
    uint64_t v = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
      const char* p = strstr(r->str, "used_memory:");
      if (p) v = strtoull(p + 12, nullptr, 10);
    }
    if (r) freeReplyObject(r);
    return v;
  }
  std::string version() {
    auto* r = static_cast<redisReply*>(redisCommand(c, "INFO server"));
    std::string v = "?";
    if (r && r->type == REDIS_REPLY_STRING) {
      const char* p = strstr(r->str, "redis_version:");
      if (p) v = std::string(p + 14, strcspn(p + 14, "\r\n"));
    }
    if (r) freeReplyObject(r);
    return v;
  }
  // One variadic command: CMD KEY m1 .. mn (SMISMEMBER, SADD, PFADD), reply discarded.
  void variadic(const char* cmd, const char* key, const std::string* m, size_t n) {
    std::vector<const char*> argv{cmd, key};
    std::vector<size_t> lens{strlen(cmd), strlen(key)};
    for (size_t i = 0; i < n; ++i) {
      argv.push_back(m[i].data());
      lens.push_back(m[i].size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!r) throw std::runtime_error(std::string("redis: ") + c->errstr);
    if (r->type == REDIS_REPLY_ERROR) {
      std::string e = r->str;
      freeReplyObject(r);
      throw std::runtime_error("redis " + std::string(cmd) + ": " + e);
    }
    freeReplyObject(r);
  }
  // Sends `n` commands "FMT key" for keys[0..n) pipelined, reads every reply.
  void pipeline(const char* fmt, const std::string* keys, size_t n) {
    for (size_t i = 0; i < n; ++i) redisAppendCommand(c, fmt, keys[i].data(), keys[i].size());
    for (size_t i = 0; i < n; ++i) {
      void* r = nullptr;
      if (redisGetReply(c, &r) != REDIS_OK) throw std::runtime_error(std::string("redis: ") + c->errstr);
      freeReplyObject(r);
    }
  }
};
#endif

std::string find_exe(const std::string& name) {
  const char* path = getenv("PATH");
  std::string all = std::string(path ? path : "") + ":/usr/bin:/usr/sbin:/usr/local/bin";
  size_t b = 0;
  while (b <= all.size()) {
    size_t e = all.find(':', b);
    if (e == std::string::npos) e = all.size();
    std::string p = all.substr(b, e - b) + "/" + name;
    if (!p.empty() && access(p.c_str(), X_OK) == 0) return p;
    b = e + 1;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 1000000, samples = 20000;
  std::string exe;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--n" && i + 1 < argc) n = static_cast<uint64_t>(atof(argv[++i]));
    else if (a == "--samples" && i + 1 < argc) samples = strtoull(argv[++i], nullptr, 10);
    else if (a == "--redis-server" && i + 1 < argc) exe = argv[++i];
    else {
      fprintf(stderr, "Usage: redis_compare_bench [--n KEYS (default 1e6)] [--samples N (default 20000)] [--redis-server PATH]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (n < 1000 || samples < 640) {
    fprintf(stderr, "redis_compare_bench: need --n >= 1000 and --samples >= 640\n");
    return 2;
  }
  Clock c0;
  clk = &c0;
  const uint64_t batches = samples / 64;

  // Keys: present ids 0..n-1 (loaded), new ids n.. (for adds), absent ids (misses).
  auto key = [](uint64_t i) { return hex16(present_key(i)); };
  Rng rng(3);
  std::vector<std::string> look(samples), look64(batches * 64), fresh(samples), fresh64(batches * 64);
  for (uint64_t i = 0; i < samples; ++i) look[i] = (i & 1) ? key(rng.below(n)) : hex16(absent_key(rng.below(n)));
  for (auto& k : look64) k = (rng.next() & 1) ? key(rng.below(n)) : hex16(absent_key(rng.below(n)));
  for (uint64_t i = 0; i < samples; ++i) fresh[i] = key(n + i);
  for (uint64_t i = 0; i < batches * 64; ++i) fresh64[i] = key(n + samples + i);
  auto views = [](const std::vector<std::string>& v) {
    std::vector<std::string_view> o(v.begin(), v.end());
    return o;
  };
  const auto look64v = views(look64), fresh64v = views(fresh64);

  // ---- ours ------------------------------------------------------------------------
  const std::string segname = "shmf-bench-redis-" + std::to_string(getpid());
  Segment seg = Segment::create(segname);
  shmfilter::ExactSetOptions eo;
  eo.capacity = n + 2 * samples + 1000;
  auto es = shmfilter::ExactSet::create(seg, "exact", eo);
  shmfilter::BloomOptions bo;
  bo.capacity = n + 2 * samples + 1000;
  bo.error = 0.01;
  auto bl = shmfilter::Bloom::create(seg, "bloom", bo);
  auto h1 = shmfilter::Hll::create(seg, "hll1"), h2 = shmfilter::Hll::create(seg, "hll2");
  uint64_t t0 = mono_ns();
  {
    std::vector<std::string> ks;
    std::vector<std::string_view> kv;
    std::vector<shmfilter::InsertResult> res;
    for (uint64_t i = 0; i < n; i += 4096) {
      const uint64_t m = std::min<uint64_t>(4096, n - i);
      ks.resize(m);
      for (uint64_t j = 0; j < m; ++j) ks[j] = key(i + j);
      kv.assign(ks.begin(), ks.end());
      res.resize(m);
      es.insert_many(kv, res);
      bl.add_many(kv);
      (i / 4096 % 2 ? h2 : h1).add_many(kv);
    }
  }
  const double our_load_s = static_cast<double>(mono_ns() - t0) / 1e9;
  std::vector<uint8_t> out(64);

  Pct es_has = time_each(samples, [&](uint64_t i) { keep(es.contains(std::string_view(look[i]))); });
  Pct bl_has = time_each(samples, [&](uint64_t i) { keep(bl.contains(std::string_view(look[i]))); });
  Pct es_has64 = time_batches(batches, [&](uint64_t b) { es.contains_many(std::span(look64v).subspan(b * 64, 64), out); });
  Pct bl_has64 = time_batches(batches, [&](uint64_t b) { bl.contains_many(std::span(look64v).subspan(b * 64, 64), out); });
  Pct es_add = time_each(samples, [&](uint64_t i) { keep(es.insert(std::string_view(fresh[i]))); });
  Pct bl_add = time_each(samples, [&](uint64_t i) { keep(bl.add(std::string_view(fresh[i]))); });
  std::vector<shmfilter::InsertResult> res64(64);
  Pct es_add64 = time_batches(batches, [&](uint64_t b) { es.insert_many(std::span(fresh64v).subspan(b * 64, 64), res64); });
  // The Bloom filter sees the same fresh keys again in batches: add_many of keys it holds
  // costs the same probes (bits found set, nothing written), so use a second block of new keys.
  std::vector<std::string> fresh64b(batches * 64);
  for (uint64_t i = 0; i < batches * 64; ++i) fresh64b[i] = hex16(absent_key(n + i));
  const auto fresh64bv = views(fresh64b);
  Pct bl_add64 = time_batches(batches, [&](uint64_t b) { bl.add_many(std::span(fresh64bv).subspan(b * 64, 64)); });
  // PFADD: new keys into hll1.
  Pct hl_add = time_each(samples, [&](uint64_t i) { keep(h1.add(std::string_view(look[i]))); });
  Pct hl_add64 = time_batches(batches, [&](uint64_t b) { keep(h1.add_many(std::span(look64v).subspan(b * 64, 64))); });
  const uint64_t count_reps = std::max<uint64_t>(200, samples / 20);
  shmfilter::Hll pair[2] = {h1, h2};
  Pct hl_cnt2 = time_each(count_reps, [&](uint64_t) { keep(shmfilter::Hll::count_union(pair)); });
  const uint64_t es_bytes = es.stats().bytes;
  const double bloom_bits = static_cast<double>(bl.stats().memory_bytes) * 8;

  // ---- Redis -------------------------------------------------------------------------
  std::string skip;
  Pct r_has, r_has64, r_add, r_add64, r_pfadd, r_pfadd64, r_pfcnt2, r_hasv, r_addv, r_pfaddv;
  double redis_bytes_per_member = -1, redis_load_s = -1;
  uint64_t redis_union = 0;
  std::string redis_version;
#ifndef SHMF_HAVE_HIREDIS
  skip = "hiredis was not found at build time (install libhiredis-dev and rebuild)";
#else
  if (exe.empty()) exe = find_exe("redis-server");
  Redis r;
  if (exe.empty()) skip = "redis-server not found (apt-get install redis-server, or pass --redis-server PATH)";
  else if (!r.start(exe)) skip = "could not start " + exe + " on a loopback port";
  if (skip.empty()) {
    try {
      redis_version = r.version();
      const uint64_t m0 = r.used_memory();
      t0 = mono_ns();
      std::vector<std::string> ks;
      for (uint64_t i = 0; i < n; i += 1000) {
        const uint64_t m = std::min<uint64_t>(1000, n - i);
        ks.resize(m);
        for (uint64_t j = 0; j < m; ++j) ks[j] = key(i + j);
        r.pipeline("SADD set %b", ks.data(), m);
      }
      redis_load_s = static_cast<double>(mono_ns() - t0) / 1e9;
      redis_bytes_per_member = static_cast<double>(r.used_memory() - m0) / static_cast<double>(n);
      // The same two HLLs as ours: blocks of 4096 keys alternate between hll1 and hll2.
      for (uint64_t i = 0; i < n; i += 4096) {
        const uint64_t m = std::min<uint64_t>(4096, n - i);
        ks.resize(m);
        for (uint64_t j = 0; j < m; ++j) ks[j] = key(i + j);
        r.pipeline((i / 4096 % 2) ? "PFADD hll2 %b" : "PFADD hll1 %b", ks.data(), m);
      }
      auto one = [&](const char* fmt, const std::string& k) {
        redisReply* x = r.cmd(fmt, k);
        if (!x) throw std::runtime_error(std::string("redis: ") + r.c->errstr);
        freeReplyObject(x);
      };
      r_has = time_each(samples, [&](uint64_t i) { one("SISMEMBER set %b", look[i]); });
      r_has64 = time_batches(batches, [&](uint64_t b) { r.pipeline("SISMEMBER set %b", look64.data() + b * 64, 64); });
      r_add = time_each(samples, [&](uint64_t i) { one("SADD set %b", fresh[i]); });
      r_add64 = time_batches(batches, [&](uint64_t b) { r.pipeline("SADD set %b", fresh64.data() + b * 64, 64); });
      // Variadic forms: one command carrying 64 members (the cheapest batch Redis offers).
      // SADD/PFADD of members already added by the pipelined rows: a third block of new keys.
      std::vector<std::string> fresh64c(batches * 64);
      for (uint64_t i = 0; i < batches * 64; ++i) fresh64c[i] = hex16(absent_key(2 * n + i));
      r_hasv = time_batches(batches, [&](uint64_t b) { r.variadic("SMISMEMBER", "set", look64.data() + b * 64, 64); });
      r_addv = time_batches(batches, [&](uint64_t b) { r.variadic("SADD", "set", fresh64c.data() + b * 64, 64); });
      r_pfaddv = time_batches(batches, [&](uint64_t b) { r.variadic("PFADD", "hll3", fresh64c.data() + b * 64, 64); });
      r_pfadd = time_each(samples, [&](uint64_t i) { one("PFADD hll1 %b", look[i]); });
      r_pfadd64 = time_batches(batches, [&](uint64_t b) { r.pipeline("PFADD hll1 %b", look64.data() + b * 64, 64); });
      // PFCOUNT of two keys merges them into a temporary every call (Redis caches only single-key counts).
      Samples s;
      for (uint64_t i = 0; i < count_reps; ++i) {
        const uint64_t a = clk->now();
        auto* x = static_cast<redisReply*>(redisCommand(r.c, "PFCOUNT hll1 hll2"));
        const uint64_t b = clk->now();
        if (!x) throw std::runtime_error(std::string("redis: ") + r.c->errstr);
        redis_union = static_cast<uint64_t>(x->integer);
        freeReplyObject(x);
        s.add(clk->ns_of(a, b));
      }
      r_pfcnt2 = pct_of(s);
    } catch (const std::exception& e) {
      skip = std::string("Redis side failed: ") + e.what();
    }
    r.stop();
  }
#endif
  const uint64_t final_union = shmfilter::Hll::count_union(pair);
  Segment::remove(segname);

  auto add = [&](const char* op, const char* mode, const char* rc, const char* ours, Pct rp, Pct op_) {
    rows.push_back({op, mode, rc, ours, rp, op_});
  };
  add("lookup", "one call", "SISMEMBER", "ExactSet contains", r_has, es_has);
  add("lookup", "one call", "SISMEMBER", "Bloom contains", r_has, bl_has);
  add("lookup", "pipelined 64 / batch 64, per key", "SISMEMBER x64", "ExactSet contains_many", r_has64, es_has64);
  add("lookup", "pipelined 64 / batch 64, per key", "SISMEMBER x64", "Bloom contains_many", r_has64, bl_has64);
  add("lookup", "one command of 64 members, per key", "SMISMEMBER k m1..m64", "ExactSet contains_many", r_hasv, es_has64);
  add("insert new", "one call", "SADD", "ExactSet insert", r_add, es_add);
  add("insert new", "one call", "SADD", "Bloom add", r_add, bl_add);
  add("insert new", "pipelined 64 / batch 64, per key", "SADD x64", "ExactSet insert_many", r_add64, es_add64);
  add("insert new", "pipelined 64 / batch 64, per key", "SADD x64", "Bloom add_many", r_add64, bl_add64);
  add("insert new", "one command of 64 members, per key", "SADD k m1..m64", "ExactSet insert_many", r_addv, es_add64);
  add("HLL add", "one call", "PFADD", "Hll add", r_pfadd, hl_add);
  add("HLL add", "pipelined 64 / batch 64, per key", "PFADD x64", "Hll add_many", r_pfadd64, hl_add64);
  add("HLL add", "one command of 64 elements, per key", "PFADD k e1..e64", "Hll add_many", r_pfaddv, hl_add64);
  add("HLL union count", "one call", "PFCOUNT k1 k2", "Hll::count_union of 2", r_pfcnt2, hl_cnt2);

  printf("%" PRIu64 " members (16-hex-char device ids) loaded; %" PRIu64 " single-call samples, %" PRIu64
         " batches of 64; lookups half hits, half misses.\n",
         n, samples, batches);
  printf("Clock: %s, bracket cost %.1f ns subtracted. Ratio = Redis p50 / ours p50, same run.\n", clk->source(),
         clk->cost_ns());
  if (!skip.empty()) printf("Redis side skipped: %s.\n", skip.c_str());
  else printf("Redis %s on 127.0.0.1 (one client, hiredis), started and stopped by this bench.\n", redis_version.c_str());
  printf("\n| operation | mode | Redis | p50 | p99 | p99.9 | shmfilter | p50 | p99 | p99.9 | ratio p50 |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (auto& x : rows) {
    char ratio[32] = "-";
    if (x.r.p50 > 0 && x.o.p50 > 0) snprintf(ratio, sizeof ratio, "%.0fx", x.r.p50 / x.o.p50);
    printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", x.op.c_str(), x.mode.c_str(), x.redis_cmd.c_str(),
           cell(x.r.p50).c_str(), cell(x.r.p99).c_str(), cell(x.r.p999).c_str(), x.ours.c_str(), cell(x.o.p50).c_str(),
           cell(x.o.p99).c_str(), cell(x.o.p999).c_str(), ratio);
  }
  printf("\n| memory and load | Redis | shmfilter |\n|---|---|---|\n");
  if (redis_bytes_per_member > 0)
    printf("| bytes per member of the SET | %.1f B (INFO used_memory delta) | ExactSet %.1f B; Bloom 1%% %.2f bits |\n",
           redis_bytes_per_member, static_cast<double>(es_bytes) / static_cast<double>(eo.capacity),
           bloom_bits / static_cast<double>(bo.capacity));
  else
    printf("| bytes per member of the SET | - | ExactSet %.1f B; Bloom 1%% %.2f bits |\n",
           static_cast<double>(es_bytes) / static_cast<double>(eo.capacity), bloom_bits / static_cast<double>(bo.capacity));
  if (redis_load_s > 0)
    printf("| load %" PRIu64 " members | %.2f s (SADD pipelined x1000) | %.2f s (ExactSet + Bloom + 2 HLLs, batches of 4096) |\n",
           n, redis_load_s, our_load_s);
  if (redis_union > 0)
    printf("| PFCOUNT hll1 hll2 after the run | %" PRIu64 " | count_union %" PRIu64 " (same hash and estimator: %s) |\n",
           redis_union, final_union, redis_union == final_union ? "identical" : "DIFFERENT");
  return 0;
}
