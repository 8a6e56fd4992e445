#pragma once
// CPU streams: worker threads that each run one stream's steps, in order.
//
//   StreamPool pool(3, {});                       // streams 1..3 get a worker; stream 0 is the caller
//   pool.run(4, [](void* ctx, int stream) {...}, &state);   // blocks until all four return
//
// Threads are created once, when the pool is made, and live until it is destroyed: nothing is
// created per run. A worker may be pinned to a set of cores. run() is not reentrant: one run at a
// time per pool (an ExecutionContext owns its pool).

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace streamline::exec {

class StreamPool {
 public:
  using Job = void (*)(void* ctx, int stream);

  // `workers` threads; affinity[i] (optional) lists the cores worker i+1 may run on.
  StreamPool(int workers, std::vector<std::vector<int>> affinity);
  ~StreamPool();
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;

  int workers() const { return static_cast<int>(threads_.size()); }
  // Runs job(ctx, i) for i in [0, streams): i = 0 on the calling thread, the rest on workers
  // 1..streams-1. streams - 1 must not exceed workers().
  void run(int streams, Job job, void* ctx);

 private:
  void worker_main(int index, std::vector<int> cores);

  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  uint64_t generation_ = 0;
  int active_ = 0;       // workers taking part in the current run
  int pending_ = 0;      // workers still running
  Job job_ = nullptr;
  void* ctx_ = nullptr;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace streamline::exec
