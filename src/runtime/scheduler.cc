#include "runtime/scheduler.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>

#include "core/cpu_set.h"
#include "core/logging.h"

namespace streamline::runtime {
namespace {

// Shortest real wait while a decision says "wait": keeps a FakeClock that has not moved from
// turning the wait into a spin.
constexpr int64_t kMinWaitUs = 50;
// Longest single real wait: the decision is taken again after it. Keeps a wait towards a far
// deadline (a timeout near INT64_MAX) inside what condition_variable::wait_for can add to now.
constexpr int64_t kMaxWaitUs = 1'000'000;

}  // namespace

Scheduler::Scheduler(SchedulerOptions options, BatchExecutor executor)
    : options_(std::move(options)),
      executor_(std::move(executor)),
      clock_(options_.serving.clock ? options_.serving.clock : &SteadyClock::instance()),
      stats_(static_cast<size_t>(std::max(1, options_.serving.stats_window)), options_.serving.latency_buckets_us) {
  options_.serving.instances = std::max(1, options_.serving.instances);
  for (int i = 0; i < options_.serving.instances; ++i) stats_.on_busy(i, 0);  // every instance reported, idle ones too
  live_policy_ = options_.serving.batching;
  drain_policy_ = options_.serving.batching;
  drain_policy_.max_queue_delay_us = 0;
  active_ = options_.active_instances > 0 ? std::min(options_.active_instances, options_.serving.instances)
                                          : options_.serving.instances;
  control_.time_us = depth_since_us_ = clock_->now_us();
}

Scheduler::~Scheduler() {
  shutdown(ShutdownMode::kDrain);
}

Status Scheduler::start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return internal_error("scheduler started twice");
    if (stopping_) return unavailable("scheduler is shut down");
    started_ = true;
  }
  {
    std::lock_guard<std::mutex> lock(shutdown_mu_);
    for (int i = 0; i < options_.serving.instances; ++i) threads_.emplace_back(&Scheduler::worker_main, this, i);
  }
  Status error;
  {
    std::unique_lock<std::mutex> lock(start_mu_);
    start_cv_.wait(lock, [&] { return started_count_ == options_.serving.instances; });
    error = start_error_;
  }
  if (!error.ok()) shutdown(ShutdownMode::kCancel);
  return error;
}

void Scheduler::enqueue(InferRequest request, int rows, uint32_t shape_key, InferCallback done) {
  const BatchPolicy& p = options_.serving.batching;
  auto pending = std::make_unique<Pending>();
  QueuedItem& it = pending->item;
  it.enqueue_us = clock_->now_us();
  it.shape_key = shape_key;
  it.rows = std::max(1, rows);
  it.priority = request.priority < 0 ? p.default_priority : request.priority;
  const int64_t timeout =
      p.queue.allow_timeout_override && request.timeout_us > 0 ? request.timeout_us : p.queue.default_timeout_us;
  // Saturates: a deadline past INT64_MAX is none (kNoDeadline), never one in the past.
  it.deadline_us = timeout > 0 ? add_saturating_us(it.enqueue_us, timeout) : kNoDeadline;
  pending->request = std::move(request);
  pending->done = std::move(done);
  Status refusal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++control_.arrivals;
    if (stopping_) {
      refusal = unavailable("the model is shutting down");
    } else if (p.queue.max_queue_size > 0 && queue_.size() >= static_cast<size_t>(p.queue.max_queue_size)) {
      refusal = resource_exhausted("queue full (" + std::to_string(p.queue.max_queue_size) + " requests)");
    } else if (p.queue.admission && (timeout > 0 || p.queue.latency_objective_us > 0) &&
               !(refusal = admission_locked(it, timeout)).ok()) {
      stats_.on_admission_refused();
    } else {
      pending->seq = next_seq_++;
      stats_.on_accepted();
      queue_.push_back(std::move(pending));
      note_depth_locked();
      notify_locked();
    }
    if (!refusal.ok()) ++control_.refused;
  }
  if (!refusal.ok()) refuse(pending->request, refusal, pending->done);
}

void Scheduler::note_depth_locked() {
  const int64_t now = clock_->now_us();
  const int64_t depth = static_cast<int64_t>(queue_.size());
  // The old depth held from the last change until now; the new one holds from now.
  control_.depth_integral +=
      static_cast<double>(last_depth_) * static_cast<double>(std::max<int64_t>(0, now - depth_since_us_));
  depth_since_us_ = now;
  last_depth_ = depth;
  control_.depth_max = std::max(control_.depth_max, depth);
}

// Only active workers wait on cv_, so one wake-up reaches a worker that can take the request.
// (While inactive ones shared it, every request woke all of them, each only to go back to sleep:
// a controlled model starts with one of its instances active, so that was every request at low
// load, on cores the other models share.)
void Scheduler::notify_locked() {
  cv_.notify_one();
}

void Scheduler::set_control(const ControlSettings& c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_policy_.max_queue_delay_us = std::max<int64_t>(0, c.queue_delay_us);
    // The configured list stays until the preferred size (its largest) changes.
    int largest = 0;
    for (int p : live_policy_.preferred_batch_sizes) largest = std::max(largest, p);
    if (c.preferred_batch != largest) {
      live_policy_.preferred_batch_sizes.clear();
      if (c.preferred_batch > 0)
        live_policy_.preferred_batch_sizes.push_back(std::min(c.preferred_batch, live_policy_.max_batch_size));
    }
    drain_policy_ = live_policy_;
    drain_policy_.max_queue_delay_us = 0;
    active_ = std::clamp(c.active_instances, 1, options_.serving.instances);
  }
  cv_.notify_all();
  idle_cv_.notify_all();
}

ControlSettings Scheduler::control_settings() const {
  std::lock_guard<std::mutex> lock(mu_);
  ControlSettings c;
  c.queue_delay_us = live_policy_.max_queue_delay_us;
  for (int p : live_policy_.preferred_batch_sizes) c.preferred_batch = std::max(c.preferred_batch, p);
  c.active_instances = active_;
  return c;
}

ControlCounters Scheduler::control_counters() {
  std::lock_guard<std::mutex> lock(mu_);
  note_depth_locked();
  ControlCounters out = control_;
  out.time_us = depth_since_us_;
  control_.depth_max = last_depth_;
  return out;
}

int Scheduler::busy_instances() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

Status Scheduler::admission_locked(const QueuedItem& item, int64_t timeout_us) const {
  AdmissionView v;
  for (const auto& q : queue_) {
    if (q->item.priority > item.priority) continue;  // runs after this request
    v.rows_ahead += q->item.rows;
    ++v.requests_ahead;
  }
  v.instances = active_;
  v.busy_instances = busy_;
  v.max_batch = options_.serving.batching.max_batch_size;
  v.rows = item.rows;
  v.queue_budget_us = timeout_us;
  v.latency_budget_us = options_.serving.batching.queue.latency_objective_us;
  if (busy_ == 0 && queue_.empty() && last_run_end_us_ > 0)
    v.idle_us = std::max<int64_t>(1, sub_saturating_us(clock_->now_us(), last_run_end_us_));
  const AdmissionEstimate e = estimate_admission(v, run_times_);
  return e.admit ? ok_status() : resource_exhausted(e.reason);
}

void Scheduler::refuse(const InferRequest& request, Status status, const InferCallback& done) {
  InferResponse r;
  stats_.on_response(status, /*accepted=*/false, r);
  r.id = request.id;
  r.status = std::move(status);
  invoke(done, std::move(r));
}

void Scheduler::wake() {
  { std::lock_guard<std::mutex> lock(mu_); }
  cv_.notify_all();
  idle_cv_.notify_all();
}

void Scheduler::shutdown(ShutdownMode mode) {
  std::lock_guard<std::mutex> serial(shutdown_mu_);
  PendingList cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (mode == ShutdownMode::kCancel) cancelled.swap(queue_);
    note_depth_locked();
  }
  cv_.notify_all();
  idle_cv_.notify_all();
  stats_.on_dequeued(static_cast<int>(cancelled.size()));
  answer_all(cancelled, streamline::cancelled("the model was shut down before the request ran"));
  for (auto& t : threads_) t.join();
  threads_.clear();
  // Whatever no worker could take (never started, or a failed start) is cancelled too.
  PendingList rest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rest.swap(queue_);
    note_depth_locked();
  }
  stats_.on_dequeued(static_cast<int>(rest.size()));
  answer_all(rest, streamline::cancelled("the model was shut down before the request ran"));
}

void Scheduler::worker_main(int instance) {
  // A server's front end runs its threads in the background role, and this thread may have been
  // started from one of them (a model loaded on request): inferences run as compute threads.
  (void)core::set_current_thread_role(core::ThreadRole::kCompute);
  Status s = options_.on_instance_start ? options_.on_instance_start(instance) : ok_status();
  {
    std::lock_guard<std::mutex> lock(start_mu_);
    if (!s.ok() && start_error_.ok()) start_error_ = s.with_context("instance " + std::to_string(instance));
    ++started_count_;
  }
  start_cv_.notify_all();
  if (!s.ok()) return;

  std::vector<QueuedItem> view;
  PendingList batch, expired;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (instance >= active_) {  // inactive: takes no batch until set_control() activates it
      if (stopping_) break;
      idle_cv_.wait(lock);
      continue;
    }
    if (queue_.empty()) {
      if (stopping_) break;
      cv_.wait(lock);
      continue;
    }
    // Decide on the queue as it is now (this instance is free).
    view.clear();
    for (const auto& p : queue_) view.push_back(p->item);
    const int64_t now = clock_->now_us();
    const Decision d = decide(view, now, stopping_ ? drain_policy_ : live_policy_);
    for (size_t i : d.expired) expired.push_back(std::move(queue_[i]));
    for (size_t i : d.launch) batch.push_back(std::move(queue_[i]));
    if (!d.expired.empty() || !d.launch.empty()) {
      std::erase_if(queue_, [](const std::unique_ptr<Pending>& p) { return p == nullptr; });
      note_depth_locked();
    }
    if (!batch.empty()) {
      stats_.on_batch(d.rows, static_cast<int>(batch.size()));
      ++busy_;
      ++control_.batches;
      control_.batch_rows += static_cast<uint64_t>(d.rows);
    }
    if (!expired.empty()) {
      stats_.on_dequeued(static_cast<int>(expired.size()));
      control_.expired += expired.size();
    }
    if (!batch.empty() && !queue_.empty()) notify_locked();  // another free instance may launch too
    if (!batch.empty() || !expired.empty()) {
      lock.unlock();
      answer_all(expired, deadline_exceeded("timed out in the queue"));
      expired.clear();
      const bool ran = !batch.empty();
      if (ran) run_batch(instance, batch, d.rows);
      batch.clear();
      lock.lock();
      if (ran) --busy_;
      continue;
    }
    if (d.action == Decision::Action::kWait) {
      const int64_t wait = std::clamp(sub_saturating_us(d.wait_until_us, now), kMinWaitUs, kMaxWaitUs);
      cv_.wait_for(lock, std::chrono::microseconds(wait));
    } else if (!stopping_) {
      cv_.wait(lock);
    }
  }
}

void Scheduler::run_batch(int instance, PendingList& batch, int rows) {
  std::vector<const InferRequest*> requests;
  requests.reserve(batch.size());
  for (const auto& p : batch) requests.push_back(&p->request);
  std::vector<InferResponse> responses(batch.size());
  const int64_t start = clock_->now_us();
  executor_(instance, requests, responses);
  const int64_t end = clock_->now_us();
  stats_.on_busy(instance, std::max<int64_t>(0, end - start));
  {
    std::lock_guard<std::mutex> lock(mu_);
    run_times_.observe(rows, end - start);
    last_run_end_us_ = std::max(last_run_end_us_, end);
    control_.busy_us += std::max<int64_t>(0, end - start);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!responses[i].status.ok()) continue;
      ++control_.completed;
      ++control_.latency[control_latency_bucket(static_cast<double>(end - batch[i]->item.enqueue_us))];
    }
  }
  if (!responses.empty())
    stats_.on_batch_timing(rows, responses[0].compute_input_us, responses[0].compute_infer_us,
                           responses[0].compute_output_us);
  // Pass 1: what the batch answered well is delivered now.
  const bool isolate = batch.size() > 1;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (isolate && !responses[i].status.ok()) continue;
    deliver(std::move(batch[i]), std::move(responses[i]), start, end, rows);
  }
  // Pass 2: isolation. A run fails as a whole when one request's values are bad (an index out of
  // range), so a failed request of a shared batch runs again alone: it gets its own answer, and
  // no request ever gets another's error.
  for (size_t i = 0; isolate && i < batch.size(); ++i) {
    if (!batch[i]) continue;
    const InferRequest* one = requests[i];
    InferResponse alone;
    const int64_t again = clock_->now_us();
    executor_(instance, std::span<const InferRequest* const>(&one, 1), std::span<InferResponse>(&alone, 1));
    const int64_t done = clock_->now_us();
    stats_.on_busy(instance, std::max<int64_t>(0, done - again));
    const int own_rows = batch[i]->item.rows;
    stats_.on_batch(own_rows, /*requests=*/0);  // one more run; the request left the queue already
    stats_.on_batch_timing(own_rows, alone.compute_input_us, alone.compute_infer_us, alone.compute_output_us);
    // Its compute time covers the failed batch and its own run.
    deliver(std::move(batch[i]), std::move(alone), start, done, own_rows);
  }
}

void Scheduler::deliver(std::unique_ptr<Pending> p, InferResponse r, int64_t start, int64_t end, int rows) {
  r.id = p->request.id;
  r.queue_us = std::max<int64_t>(0, start - p->item.enqueue_us);
  r.compute_us = std::max<int64_t>(0, end - start);
  r.batch_size = rows;
  finish(std::move(p), std::move(r));
}

void Scheduler::answer_all(PendingList& list, const Status& status) {
  for (auto& p : list) {
    InferResponse r;
    r.id = p->request.id;
    r.status = status;
    r.queue_us = std::max<int64_t>(0, clock_->now_us() - p->item.enqueue_us);
    finish(std::move(p), std::move(r));
  }
  list.clear();
}

void Scheduler::finish(std::unique_ptr<Pending> p, InferResponse r) {
  stats_.on_response(r.status, /*accepted=*/true, r);
  if (!options_.serving.batching.preserve_ordering) {
    invoke(p->done, std::move(r));
    return;
  }
  // Park the response; the first thread to find the next one in line delivers every response
  // that is ready, in order, outside the lock.
  std::unique_lock<std::mutex> lock(order_mu_);
  ready_.emplace(p->seq, std::make_pair(std::move(p->done), std::move(r)));
  if (delivering_) return;
  delivering_ = true;
  for (;;) {
    auto it = ready_.find(next_deliver_);
    if (it == ready_.end()) break;
    auto entry = std::move(it->second);
    ready_.erase(it);
    ++next_deliver_;
    lock.unlock();
    invoke(entry.first, std::move(entry.second));
    lock.lock();
  }
  delivering_ = false;
}

void Scheduler::invoke(const InferCallback& done, InferResponse r) {
  if (!done) return;
  try {
    done(std::move(r));
  } catch (const std::exception& e) {
    SL_LOG(kError) << "a response callback threw: " << e.what();
  } catch (...) {
    SL_LOG(kError) << "a response callback threw";
  }
}

}  // namespace streamline::runtime
