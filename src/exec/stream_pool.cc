#include "exec/stream_pool.h"

#include "core/cpu_set.h"

namespace streamline::exec {

StreamPool::StreamPool(int workers, std::vector<std::vector<int>> affinity) {
  for (int i = 0; i < workers; ++i) {
    std::vector<int> cores =
        static_cast<size_t>(i + 1) < affinity.size() ? affinity[static_cast<size_t>(i + 1)] : std::vector<int>{};
    threads_.emplace_back(&StreamPool::worker_main, this, i + 1, std::move(cores));
  }
  if (!affinity.empty()) core::pin_current_thread(affinity[0]);
}

StreamPool::~StreamPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void StreamPool::worker_main(int index, std::vector<int> cores) {
  core::pin_current_thread(cores);
  (void)core::set_current_thread_role(core::ThreadRole::kCompute);
  uint64_t seen = 0;
  for (;;) {
    Job job;
    void* ctx;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= active_ + 1) continue;  // not part of this run
      job = job_;
      ctx = ctx_;
    }
    job(ctx, index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void StreamPool::run(int streams, Job job, void* ctx) {
  const int helpers = streams - 1;
  if (helpers > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = job;
    ctx_ = ctx;
    active_ = helpers;
    pending_ = helpers;
    ++generation_;
  }
  if (helpers > 0) start_cv_.notify_all();
  job(ctx, 0);
  if (helpers > 0) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
  }
}

}  // namespace streamline::exec
