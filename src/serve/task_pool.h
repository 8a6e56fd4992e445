#pragma once
// A fixed set of worker threads with a bounded FIFO queue, for work the front ends must keep off
// their I/O and callback threads: decoding large request bodies, model loads and unloads.
//
//   TaskPool pool({.threads = 2, .max_queued = 16, .name = "decode"});
//   if (!pool.try_post([] { ... })) answer_busy();    // queue full or pool stopped
//   ...
//   pool.stop();                                      // runs what is queued, then joins
//
// Thread-safe. Tasks must not throw; a task that posts to its own pool is fine.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace streamline::serve {

struct TaskPoolOptions {
  // Worker threads, started by the constructor (at least 1).
  int threads = 1;
  // Tasks waiting for a worker beyond which try_post refuses (0 = no bound).
  size_t max_queued = 0;
  // The workers' thread name (first 15 characters), as ps and debuggers show it.
  std::string name = "sl-task";
};

class TaskPool {
 public:
  explicit TaskPool(TaskPoolOptions options);
  ~TaskPool();  // stop()
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // Queues `task`; false (and the task is dropped) when the queue is full or the pool stopped.
  [[nodiscard]] bool try_post(std::function<void()> task);
  // Refuses new tasks, runs the queued ones, joins the workers. Idempotent; not from a worker.
  void stop();

  // Tasks queued or running now.
  size_t pending() const;
  const TaskPoolOptions& options() const { return options_; }

 private:
  void work();

  const TaskPoolOptions options_;
  std::mutex stop_mu_;  // one stop() at a time
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  size_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace streamline::serve
