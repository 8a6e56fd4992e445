// run_tasks / run_chunks (ops/cpu/task_runner.h): every task runs once, slots stay below the
// thread count and are never shared by two running tasks, concurrent callers and a task that
// itself runs tasks all complete; right after an OpenMP region the tasks run on OpenMP's workers,
// otherwise on the pool.

#include "ops/cpu/task_runner.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/cpu_set.h"

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

// Runs 64 tasks on 2 threads; true when every task ran inside an OpenMP parallel region. Checks
// that each task runs once, with an OpenMP thread count of 1, and that the caller's count survives.
bool tasks_ran_in_openmp() {
  omp_set_num_threads(2);
  std::vector<std::atomic<int>> runs(64);
  std::atomic<int> inside{0}, wide{0}, bad_slot{0};
  run_tasks(64, 2, [&](int64_t t, int slot) {
    if (omp_in_parallel()) inside.fetch_add(1);
    if (omp_get_max_threads() != 1) wide.fetch_add(1);
    if (slot < 0 || slot >= 2) bad_slot.fetch_add(1);
    runs[static_cast<size_t>(t)].fetch_add(1);
  });
  EXPECT_EQ(omp_get_max_threads(), 2);
  EXPECT_EQ(wide.load(), 0);
  EXPECT_EQ(bad_slot.load(), 0);
  for (auto& r : runs) EXPECT_EQ(r.load(), 1);
  EXPECT_TRUE(inside.load() == 0 || inside.load() == 64) << inside.load();
  return inside.load() == 64;
}

TEST(TaskRunner, RightAfterAnOpenMpRegionTasksRunOnItsWorkers) {
  // Long after any region (the hint lapses after about a millisecond): the pool.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(tasks_ran_in_openmp());
  // Right after one, and (the region it ran keeps the workers awake) the call after that. A few
  // tries: a loaded machine may deschedule this thread for longer than the window in between.
  bool both = false;
  for (int attempt = 0; attempt < 20 && !both; ++attempt) {
    note_openmp_region();
    const bool first = tasks_ran_in_openmp();
    both = first && tasks_ran_in_openmp();
  }
  EXPECT_TRUE(both);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(tasks_ran_in_openmp());
  // Inside a parallel region, nested calls use the pool (OpenMP would not nest).
  note_openmp_region();
  std::atomic<int> nested_inside{0}, total{0};
#pragma omp parallel num_threads(2)
  {
    run_tasks(8, 2, [&](int64_t, int) {
      total.fetch_add(1);
      if (omp_get_level() > 1) nested_inside.fetch_add(1);
    });
  }
  EXPECT_EQ(total.load(), 16);
  EXPECT_EQ(nested_inside.load(), 0);
}

// The pool's helpers run kernels: compute threads even when a background thread (a server's front
// end loading a model) is the one that starts them. 16 threads: more helpers than earlier tests
// started, so some are started here.
TEST(TaskRunner, HelpersAreComputeThreadsWhoeverStartsThem) {
  std::mutex mu;
  std::vector<core::ThreadRole> helper_roles;
  std::thread background([&] {
    ASSERT_TRUE(core::set_current_thread_role(core::ThreadRole::kBackground));
    run_tasks(64, 16, [&](int64_t, int slot) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (slot == 0) return;  // the caller itself
      std::lock_guard<std::mutex> lock(mu);
      helper_roles.push_back(core::current_thread_role());
    });
  });
  background.join();
  ASSERT_FALSE(helper_roles.empty());
  for (core::ThreadRole r : helper_roles) EXPECT_EQ(r, core::ThreadRole::kCompute);
}

}  // namespace
}  // namespace streamline::ops::cpu
