// Thread and core policy (core/cpu_set.h): the usable cores, thread shares, core blocks and the
// cgroup quota parser.

#include "core/cpu_set.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <set>
#include <thread>

namespace streamline::core {
namespace {

TEST(CpuSet, AllowedCpusAreTheProcessAffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const std::vector<int>& cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_EQ(static_cast<int>(cpus.size()), CPU_COUNT(&set));
  for (int c : cpus) EXPECT_TRUE(CPU_ISSET(c, &set)) << c;
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
  EXPECT_GE(usable_cores(), 1);
  EXPECT_LE(usable_cores(), static_cast<int>(cpus.size()));
}

// Roles move a thread between the default policy and SCHED_BATCH, and a new thread inherits its
// creator's (the serve command relies on that for every front-end thread).
TEST(CpuSet, ThreadRolesAndTheirInheritance) {
  std::thread t([] {
    EXPECT_EQ(current_thread_role(), ThreadRole::kCompute);
    ASSERT_TRUE(set_current_thread_role(ThreadRole::kBackground));
    EXPECT_EQ(sched_getscheduler(0), SCHED_BATCH);
    EXPECT_EQ(current_thread_role(), ThreadRole::kBackground);
    int child_policy = -1;
    std::thread child([&] { child_policy = sched_getscheduler(0); });
    child.join();
    EXPECT_EQ(child_policy, SCHED_BATCH);
    ASSERT_TRUE(set_current_thread_role(ThreadRole::kBackground));  // already: no change
    ASSERT_TRUE(set_current_thread_role(ThreadRole::kCompute));
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    EXPECT_EQ(current_thread_role(), ThreadRole::kCompute);
  });
  t.join();
  // The test's own thread was never touched.
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

TEST(CpuSet, ShareThreads) {
  EXPECT_EQ(share_threads(3, 16, 4), 3);  // an explicit count wins
  EXPECT_EQ(share_threads(0, 16, 4), 4);
  EXPECT_EQ(share_threads(0, 2, 4), 1);  // never below one
  EXPECT_EQ(share_threads(0, 7, 0), 7);  // zero parts count as one
  EXPECT_EQ(share_threads(0, 0, 1), usable_cores());
}

TEST(CpuSet, SharedInstanceThreads) {
  EXPECT_EQ(shared_instance_threads(2, 4, 16), 8);                      // every instance's cores, within the budget
  EXPECT_EQ(shared_instance_threads(2, 4, 6), 6);                       // the budget caps them
  EXPECT_EQ(shared_instance_threads(4, 4, 2), 4);                       // never fewer than one instance's threads
  EXPECT_EQ(shared_instance_threads(3, 1, 64), 3);                      // one instance has only its own
  EXPECT_EQ(shared_instance_threads(1 << 20, 1024, 1 << 30), 1 << 30);  // no overflow
}

TEST(CpuSet, CoreBlocksWalkTheAllowedCpusAndWrap) {
  const std::vector<int>& cpus = allowed_cpus();
  const int n = static_cast<int>(cpus.size());
  EXPECT_TRUE(core_block(0, 0).empty());
  const std::vector<int> all = core_block(0, n);
  EXPECT_EQ(all, cpus);
  const std::vector<int> wrapped = core_block(n - 1, 2);
  ASSERT_EQ(wrapped.size(), 2u);
  EXPECT_EQ(wrapped[0], cpus.back());
  EXPECT_EQ(wrapped[1], cpus.front());
  EXPECT_EQ(core_block(n, 1), core_block(0, 1));  // block k of width t starts at k * t, modulo n
}

TEST(CpuSet, PinningKeepsTheThreadOnItsCpus) {
  const std::vector<int> one = core_block(0, 1);
  bool pinned = false;
  std::set<int> seen;
  std::thread t([&] {
    pinned = pin_current_thread(one);
    cpu_set_t set;
    CPU_ZERO(&set);
    pthread_getaffinity_np(pthread_self(), sizeof set, &set);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) seen.insert(c);
  });
  t.join();
  EXPECT_TRUE(pinned);
  EXPECT_EQ(seen, std::set<int>(one.begin(), one.end()));
  EXPECT_TRUE(pin_current_thread({}));  // empty: nothing to do
}

TEST(CpuSet, CgroupQuotaText) {
  EXPECT_EQ(cores_from_cgroup_quota("max 100000\n"), 0);
  EXPECT_EQ(cores_from_cgroup_quota("200000 100000\n"), 2);
  EXPECT_EQ(cores_from_cgroup_quota("150000 100000"), 2);  // 1.5 CPUs: two threads can run
  EXPECT_EQ(cores_from_cgroup_quota("50000 100000"), 1);
  EXPECT_EQ(cores_from_cgroup_quota(""), 0);
  EXPECT_EQ(cores_from_cgroup_quota("100000"), 0);  // no period
  EXPECT_EQ(cores_from_cgroup_quota("-1 100000"), 0);
  EXPECT_EQ(cores_from_cgroup_quota(nullptr), 0);
}

}  // namespace
}  // namespace streamline::core
