// lib/base/kill_point.cpp: see kill_point.h. Process-local state only.
#include "base/kill_point.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace shmfilter::internal {
namespace {

std::atomic<bool> g_armed{false};  // relaxed: a test arms before the workload starts
std::mutex g_mu;
std::string g_name;
uint64_t g_nth = 0;
uint64_t g_count = 0;
std::once_flag g_env_once;

void read_env() {
  const char* v = std::getenv("SHMF_KILL_POINT");
  if (v == nullptr || *v == '\0') return;
  std::string s(v);
  uint64_t nth = 1;
  if (auto colon = s.rfind(':'); colon != std::string::npos) {
    nth = std::strtoull(s.c_str() + colon + 1, nullptr, 10);
    s.resize(colon);
  }
  arm_kill_point(s.c_str(), nth == 0 ? 1 : nth);
}

struct EnvReader {
  EnvReader() { std::call_once(g_env_once, read_env); }
} g_env_reader;

}  // namespace

void kill_point_hit(const char* name) noexcept {
  if (!g_armed.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_name != name) return;
  if (++g_count >= g_nth) {
    std::raise(SIGKILL);
  }
}

void arm_kill_point(const char* name, uint64_t nth) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  g_name = name;
  g_nth = nth == 0 ? 1 : nth;
  g_count = 0;
  g_armed.store(true, std::memory_order_relaxed);
}

void disarm_kill_points() noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  g_armed.store(false, std::memory_order_relaxed);
  g_name.clear();
  g_count = 0;
}

uint64_t kill_point_count(const char* name) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_name == name ? g_count : 0;
}

}  // namespace shmfilter::internal
