#pragma once
// The scheduler: one queue per model, one worker thread per instance, the batcher's decide()
// between them.
//
//   SchedulerOptions so;  so.instances = 2;  so.policy.max_batch_size = 8;  so.clock = &fake;
//   Scheduler s(so, [](int instance, std::span<const InferRequest* const> reqs,
//                      std::span<InferResponse> out) { /* run the batch, fill out[i] */ });
//   SL_RETURN_IF_ERROR(s.start());
//   s.enqueue(std::move(request), /*rows=*/1, /*shape_key=*/0, [](InferResponse r) { ... });
//   fake.advance_us(2000);  s.wake();           // tests: time moved, decide again
//   s.shutdown(ShutdownMode::kDrain);
//
// A worker decides only while its instance is free, so a pending batch keeps growing while every
// instance is busy. Waits use the real clock for their length but re-read the injected clock on
// every wake-up, so a FakeClock drives every decision (call wake() after moving it).
// Requests that time out while every instance is busy are answered when the next instance frees.
// A request never gets another's error: when a batch of several fails (one request's values can
// fail the whole run), each failed request runs again alone on the same instance.
// Thread-safe: enqueue, refuse, wake, stats and shutdown may be called from any thread.

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "runtime/admission.h"
#include "runtime/batcher.h"
#include "runtime/stats.h"
#include "streamline/serving.h"

namespace streamline::runtime {

// Runs one batch on instance `instance` (called on that instance's thread, one batch at a time
// per instance): must set responses[i].status, and outputs when ok, for each requests[i].
using BatchExecutor = std::function<void(int instance, std::span<const InferRequest* const> requests,
                                         std::span<InferResponse> responses)>;

struct SchedulerOptions {
  // Worker threads, one per instance.
  int instances = 1;
  // Copied at construction.
  BatchPolicy policy;
  // Not owned; must outlive the scheduler.
  const Clock* clock = &SteadyClock::instance();
  // Samples in each latency window of stats().
  size_t stats_window = 4096;
  // Bounds of the latency histograms of stats() (empty = kDefaultLatencyBucketsUs).
  std::vector<double> latency_buckets_us;
  // Runs first on each instance thread (pinning, warm-up); an error makes start() fail.
  std::function<Status(int instance)> on_instance_start;
};

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, BatchExecutor executor);
  // shutdown(kDrain).
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts the instance threads and waits until each has run on_instance_start. On an error the
  // scheduler is shut down (queued requests cancelled) and the first error returned. Call once.
  [[nodiscard]] Status start();

  // Queues a validated request; the scheduler owns it from here. `rows` is its first-dimension
  // size and `shape_key` its batching key (equal keys may share a batch). `done` runs exactly
  // once: on this thread if refused (queue full -> ResourceExhausted, shut down -> Unavailable),
  // else on an instance thread (or the thread calling shutdown(kCancel)).
  void enqueue(InferRequest request, int rows, uint32_t shape_key, InferCallback done);
  // With admission on (QueuePolicy::admission) and a timeout or latency objective, a request the
  // estimate says cannot make it is refused on this thread with ResourceExhausted.
  // Answers a request refused before queueing with `status` (on this thread) and counts it.
  void refuse(const InferRequest& request, Status status, const InferCallback& done);

  // Wakes the workers to decide again (after moving an injected clock).
  void wake();
  // Refuses new requests, drains or cancels the queue, joins the workers. Idempotent.
  void shutdown(ShutdownMode mode);

  ServingStats stats() const { return stats_.snapshot(); }
  const BatchPolicy& policy() const { return options_.policy; }

 private:
  struct Pending {
    InferRequest request;
    InferCallback done;
    QueuedItem item;
    uint64_t seq = 0;
  };
  using PendingList = std::vector<std::unique_ptr<Pending>>;

  void worker_main(int instance);
  // Admission's verdict on `item` (not yet queued) with its queueing timeout; mu_ held.
  Status admission_locked(const QueuedItem& item, int64_t timeout_us) const;
  // Runs one batch on `instance` and answers its requests; when several shared the batch, each
  // failed one is run again alone and answered from that run.
  void run_batch(int instance, PendingList& batch, int rows);
  // Fills r's id and timings (its run went from start to end in a batch of `rows`) and finishes p.
  void deliver(std::unique_ptr<Pending> p, InferResponse r, int64_t start, int64_t end, int rows);
  // Answers every request in `list` with `status` (they never ran).
  void answer_all(PendingList& list, const Status& status);
  // Counts and delivers one response (in submission order when preserve_ordering).
  void finish(std::unique_ptr<Pending> p, InferResponse r);
  static void invoke(const InferCallback& done, InferResponse r);

  SchedulerOptions options_;
  BatchPolicy drain_policy_;  // the policy with no queue delay, used while draining
  BatchExecutor executor_;
  const Clock* clock_;
  StatsRecorder stats_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  PendingList queue_;  // arrival order
  int busy_ = 0;             // instances running a batch
  RunTimeModel run_times_;   // every batch's run, for admission
  uint64_t next_seq_ = 0;
  bool stopping_ = false;
  bool started_ = false;

  std::mutex shutdown_mu_;  // serialises shutdown()
  std::vector<std::thread> threads_;

  // Start handshake.
  std::mutex start_mu_;
  std::condition_variable start_cv_;
  int started_count_ = 0;
  Status start_error_;

  // preserve_ordering: responses wait here until every earlier one is delivered.
  std::mutex order_mu_;
  std::map<uint64_t, std::pair<InferCallback, InferResponse>> ready_;
  uint64_t next_deliver_ = 0;
  bool delivering_ = false;
};

}  // namespace streamline::runtime
