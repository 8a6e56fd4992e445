#include "serve/task_pool.h"

#include <pthread.h>

#include <algorithm>

namespace streamline::serve {

TaskPool::TaskPool(TaskPoolOptions options) : options_(std::move(options)) {
  const int n = std::max(1, options_.threads);
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this] { work(); });
    pthread_setname_np(threads_.back().native_handle(), options_.name.substr(0, 15).c_str());
  }
}

TaskPool::~TaskPool() {
  stop();
}

bool TaskPool::try_post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    if (options_.max_queued > 0 && queue_.size() >= options_.max_queued) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void TaskPool::stop() {
  std::lock_guard<std::mutex> stop_lock(stop_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

size_t TaskPool::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + running_;
}

void TaskPool::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    task();
    task = nullptr;  // captured state goes before the task counts as done
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
  }
}

}  // namespace streamline::serve
