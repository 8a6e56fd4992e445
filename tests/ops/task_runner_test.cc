// run_tasks / run_chunks (ops/cpu/task_runner.h): every task runs once, slots stay below the
// thread count and are never shared by two running tasks, concurrent callers and a task that
// itself runs tasks all complete.

#include "ops/cpu/task_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace streamline::ops::cpu {
namespace {

TEST(TaskRunner, EveryTaskRunsOnceInASlotBelowTheThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    for (int64_t n : {1, 2, 7, 100, 1000}) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      std::vector<std::atomic<int>> busy(static_cast<size_t>(threads));
      std::atomic<bool> bad_slot{false}, shared_slot{false};
      run_tasks(n, threads, [&](int64_t t, int slot) {
        if (slot < 0 || slot >= threads) {
          bad_slot = true;
          return;
        }
        if (busy[static_cast<size_t>(slot)].fetch_add(1) != 0) shared_slot = true;
        runs[static_cast<size_t>(t)].fetch_add(1);
        busy[static_cast<size_t>(slot)].fetch_sub(1);
      });
      EXPECT_FALSE(bad_slot) << threads << " threads, " << n << " tasks";
      EXPECT_FALSE(shared_slot) << threads << " threads, " << n << " tasks";
      for (int64_t t = 0; t < n; ++t) ASSERT_EQ(runs[static_cast<size_t>(t)].load(), 1) << "task " << t;
    }
  }
}

TEST(TaskRunner, ChunksCoverTheRangeExactly) {
  for (int threads : {1, 2, 4}) {
    for (int64_t n : {0, 1, 5, 1000, 100003}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      run_chunks(n, 64, threads, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "element " << i;
    }
  }
}

TEST(TaskRunner, ConcurrentCallersAndNestedCallsFinish) {
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep)
        run_tasks(16, 2, [&](int64_t, int) {
          // A task may run tasks of its own; the caller then does them if no helper is free.
          run_tasks(4, 2, [&](int64_t, int) { total.fetch_add(1); });
        });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 16 * 4);
}

}  // namespace
}  // namespace streamline::ops::cpu
