#include "core/cpu_set.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace streamline::core {
namespace {

std::vector<int> read_allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) {
    const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) cpus.push_back(c);
  }
  return cpus;
}

// The quota of the cgroup v2 this process is in, when it is mounted where systemd and container
// runtimes put it; 0 without one.
int cgroup_quota_cores() {
  FILE* f = std::fopen("/sys/fs/cgroup/cpu.max", "r");
  if (!f) return 0;
  char line[128] = {};
  const bool read = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  return read ? cores_from_cgroup_quota(line) : 0;
}

}  // namespace

int cores_from_cgroup_quota(const char* text) {
  if (!text) return 0;
  char* end = nullptr;
  const long long quota = std::strtoll(text, &end, 10);
  if (end == text || quota <= 0) return 0;  // "max" or junk: no quota
  char* end2 = nullptr;
  const long long period = std::strtoll(end, &end2, 10);
  if (end2 == end || period <= 0) return 0;
  const long long cores = (quota + period - 1) / period;
  return static_cast<int>(std::min<long long>(cores, 1 << 20));
}

const std::vector<int>& allowed_cpus() {
  static const std::vector<int> cpus = read_allowed_cpus();
  return cpus;
}

int usable_cores() {
  static const int n = [] {
    const int allowed = static_cast<int>(allowed_cpus().size());
    const int quota = cgroup_quota_cores();
    return std::max(1, quota > 0 ? std::min(allowed, quota) : allowed);
  }();
  return n;
}

int share_threads(int requested, int total, int parts) {
  if (requested > 0) return requested;
  const int t = total > 0 ? total : usable_cores();
  return std::max(1, t / std::max(1, parts));
}

int shared_instance_threads(int threads, int instances, int budget) {
  const long long all = static_cast<long long>(threads) * std::max(1, instances);
  return std::max(threads, static_cast<int>(std::min<long long>(budget, all)));
}

std::vector<int> core_block(int first, int count) {
  const std::vector<int>& cpus = allowed_cpus();
  std::vector<int> block;
  if (count <= 0) return block;
  const int n = static_cast<int>(cpus.size());
  const int start = ((first % n) + n) % n;
  block.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) block.push_back(cpus[static_cast<size_t>((start + i) % n)]);
  return block;
}

bool pin_current_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

bool set_current_thread_role(ThreadRole role) {
  const int policy = sched_getscheduler(0);
  const int want = role == ThreadRole::kBackground ? SCHED_BATCH : SCHED_OTHER;
  if (policy == want) return true;
  if (policy != SCHED_OTHER && policy != SCHED_BATCH) return true;  // someone else's choice
  sched_param param{};
  param.sched_priority = 0;
  return sched_setscheduler(0, want, &param) == 0;  // 0: the calling thread (its own policy)
}

ThreadRole current_thread_role() {
  return sched_getscheduler(0) == SCHED_BATCH ? ThreadRole::kBackground : ThreadRole::kCompute;
}

}  // namespace streamline::core
