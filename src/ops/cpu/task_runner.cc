#include "ops/cpu/task_runner.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/cpu_set.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define SL_PAUSE() _mm_pause()
#else
#define SL_PAUSE() std::this_thread::yield()
#endif

namespace streamline::ops::cpu {
namespace {

using Clock = std::chrono::steady_clock;

// How long a helper spins for the next job, and the caller for started tasks before yielding.
constexpr auto kHelperSpin = std::chrono::microseconds(100);
constexpr auto kCallerSpin = std::chrono::microseconds(50);
// How long after an OpenMP region its workers are taken to be awake (libgomp spins about a
// millisecond with the command line's GOMP_SPINCOUNT; a worker already asleep costs one wake-up).
constexpr auto kOpenMpAwake = std::chrono::microseconds(1000);

// When the calling thread last finished an OpenMP region on several threads.
thread_local Clock::time_point last_openmp_region{};
// The calling thread's run_tasks calls on more than one thread.
thread_local uint64_t parallel_calls = 0;

// Runs the tasks on `threads` OpenMP threads, each claiming tasks one by one.
void run_on_openmp(int64_t num_tasks, int threads, const std::function<void(int64_t, int)>& task) {
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(threads)
  {
    const int slot = omp_get_thread_num();
    omp_set_num_threads(1);  // this implicit task only: oneDNN primitives in tasks run on one thread
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < num_tasks;
         i = next.fetch_add(1, std::memory_order_relaxed))
      task(i, slot);
  }
  last_openmp_region = Clock::now();
}

struct Job {
  Job(int64_t n, int threads, const std::function<void(int64_t, int)>* f) : n(n), threads(threads), fn(f) {}
  const int64_t n;
  const int threads;
  const std::function<void(int64_t, int)>* fn;  // valid until done == n
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::atomic<int> slots{1};  // slot 0 is the caller's
};

// Claims and runs tasks of `job` in `slot` until none is left.
void work(Job& job, int slot) {
  for (int64_t i = job.next.fetch_add(1, std::memory_order_relaxed); i < job.n;
       i = job.next.fetch_add(1, std::memory_order_relaxed)) {
    (*job.fn)(i, slot);
    job.done.fetch_add(1, std::memory_order_release);
  }
}

class Pool {
 public:
  static Pool& instance() {
    static Pool* pool = new Pool();  // never destroyed: helpers may outlive static destructors
    return *pool;
  }

  void run(int64_t n, int threads, const std::function<void(int64_t, int)>& fn) {
    auto job = std::make_shared<Job>(n, threads, &fn);
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (static_cast<int>(helpers_.size()) < threads - 1) helpers_.emplace_back([this] { helper_loop(); });
      jobs_.push_back(job);
      epoch_.fetch_add(1, std::memory_order_release);
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) cv_.notify_all();
    work(*job, 0);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
        if (*it == job) {
          jobs_.erase(it);
          break;
        }
    }
    // Tasks helpers started: spin a little, then give the core away while they finish.
    const auto start = Clock::now();
    while (job->done.load(std::memory_order_acquire) < n) {
      if (Clock::now() - start < kCallerSpin)
        SL_PAUSE();
      else
        std::this_thread::yield();
    }
  }

 private:
  Pool() = default;

  // A queued job with unclaimed tasks and a free slot, with the slot taken; null when none.
  std::shared_ptr<Job> claim(int* slot) {
    for (const auto& job : jobs_) {
      if (job->next.load(std::memory_order_relaxed) >= job->n) continue;
      const int s = job->slots.fetch_add(1, std::memory_order_relaxed);
      if (s < job->threads) {
        *slot = s;
        return job;
      }
    }
    return nullptr;
  }

  void helper_loop() {
    // Helpers run kernels' tasks: compute threads, whichever thread first needed them (in a
    // server that may be a front-end thread loading a model).
    (void)core::set_current_thread_role(core::ThreadRole::kCompute);
    omp_set_num_threads(1);
    for (;;) {
      std::shared_ptr<Job> job;
      int slot = 0;
      uint64_t seen = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        job = claim(&slot);
        seen = epoch_.load(std::memory_order_relaxed);
      }
      if (!job) {
        // Spin for a new job, then sleep until one is queued.
        const auto start = Clock::now();
        while (epoch_.load(std::memory_order_acquire) == seen && Clock::now() - start < kHelperSpin) SL_PAUSE();
        std::unique_lock<std::mutex> lock(mu_);
        job = claim(&slot);
        while (!job) {
          seen = epoch_.load(std::memory_order_relaxed);
          sleepers_.fetch_add(1, std::memory_order_acq_rel);
          cv_.wait(lock, [&] { return epoch_.load(std::memory_order_relaxed) != seen; });
          sleepers_.fetch_sub(1, std::memory_order_acq_rel);
          job = claim(&slot);
        }
      }
      work(*job, slot);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Job>> jobs_;
  std::vector<std::thread> helpers_;
  std::atomic<uint64_t> epoch_{0};  // jobs queued so far
  std::atomic<int> sleepers_{0};
};

}  // namespace

void note_openmp_region() {
  last_openmp_region = Clock::now();
}

uint64_t run_tasks_calls() {
  return parallel_calls;
}

void run_tasks(int64_t num_tasks, int threads, const std::function<void(int64_t, int)>& task) {
  if (num_tasks <= 0) return;
  if (threads <= 1 || num_tasks == 1) {
    for (int64_t i = 0; i < num_tasks; ++i) task(i, 0);
    return;
  }
  ++parallel_calls;
  if (!omp_in_parallel() && Clock::now() - last_openmp_region < kOpenMpAwake) {
    run_on_openmp(num_tasks, threads, task);
    return;
  }
  // The caller's own tasks run single-threaded too (oneDNN primitives built for one thread).
  const int saved = omp_get_max_threads();
  if (saved != 1) omp_set_num_threads(1);
  Pool::instance().run(num_tasks, threads, task);
  if (saved != 1) omp_set_num_threads(saved);
}

}  // namespace streamline::ops::cpu
