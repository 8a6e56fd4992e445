#pragma once
// Work sharing without a fork-join barrier, for kernels that cut one operation into independent
// tasks (row bands of the int8 convolutions and matrix products, chunks of the int8 element-wise
// kernels).
//
//   run_tasks(num_tasks, ctx.num_threads, [&](int64_t task, int slot) { ... });
//   run_chunks(n, grain, ctx.num_threads, [&](int64_t begin, int64_t end, int slot) { ... });
//
// The calling thread runs tasks itself, claiming them one by one from a shared counter, and so do
// up to threads - 1 helpers from a process-wide pool. A helper that is slow to wake or loses its
// core to another process leaves the unclaimed tasks to the others: the caller waits only for
// tasks already started, never for a thread to reach a barrier. An OpenMP parallel region, by
// contrast, splits the work statically and ends in a barrier, so one descheduled thread stalls it
// for a scheduler time slice; with other processes on the machine that cost int8 ResNet-50 8x
// its single-thread time on two threads.
//
// `slot` (0 for the caller, below `threads`) names the thread running a task within this call, so
// tasks can use per-thread scratch. Tasks run on threads whose OpenMP thread count is 1: oneDNN
// primitives they execute must have been built for one thread. Helpers spin for about 100 us
// after their last task (consecutive kernels then find them awake), then sleep.
//
// OpenMP's workers spin for the next parallel region for a while after each one (about a
// millisecond as the command line sets libgomp up). Pool helpers woken in that window compete with
// them for the same cores: a dynamic-int8 encoder's DynamicQuantizeLinear, run between OpenMP matrix
// products, took 240 us on two threads against 25 us on one. So code that runs an OpenMP region on
// several threads calls note_openmp_region(), and run_tasks called on that thread within the window
// claims its tasks from the OpenMP workers (one parallel region, tasks still claimed one by one)
// instead of the pool. The pool serves callers whose OpenMP workers are asleep. The CPU executor
// notes a region after every step that ran on several threads without run_tasks (kernels
// parallelise with OpenMP otherwise), and oneDNN primitive execution notes its own.
//
// Thread-safety: run_tasks may be called from several threads at once (one job each); helpers
// serve the jobs in arrival order. `task` must not throw.

#include <algorithm>
#include <cstdint>
#include <functional>

namespace streamline::ops::cpu {

// Runs task(i, slot) for every i in [0, num_tasks), on up to `threads` threads; returns when all
// have finished.
void run_tasks(int64_t num_tasks, int threads, const std::function<void(int64_t task, int slot)>& task);

// Records that the calling thread has just finished an OpenMP parallel region on more than one
// thread (its workers are awake for a while).
void note_openmp_region();
// How many times the calling thread's run_tasks ran tasks on more than one thread (the executor
// compares it around a step to tell whether the step used run_tasks).
uint64_t run_tasks_calls();

// Splits [0, n) into chunks of at least `grain` elements (about four per thread, so a late thread
// costs little) and runs f(begin, end, slot) for each with run_tasks.
template <typename F>
void run_chunks(int64_t n, int64_t grain, int threads, F&& f) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int64_t chunks = threads <= 1 ? 1 : std::min<int64_t>(max_chunks, 4 * static_cast<int64_t>(threads));
  if (chunks == 1) {
    f(int64_t{0}, n, 0);
    return;
  }
  run_tasks(chunks, threads, [&](int64_t c, int slot) { f(n * c / chunks, n * (c + 1) / chunks, slot); });
}

}  // namespace streamline::ops::cpu
