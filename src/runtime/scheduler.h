#pragma once
// The scheduler: one queue per model, one worker thread per instance, the batcher's decide()
// between them.
//
//   SchedulerOptions so;  so.serving.instances = 2;  so.serving.batching.max_batch_size = 8;  so.serving.clock = &fake;
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
//
// The controller (control_loop.h) retunes a running scheduler with set_control(): the queue delay
// and preferred batch of the policy the batcher decides with, and how many instances take batches
// (instances with index >= active finish the batch they run, then take no new one). A change
// applies at the next decision; a running batch keeps the settings it was launched with, and
// nothing queued is dropped or reordered. control_counters() gives the controller its windows.

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
#include "runtime/controller.h"
#include "runtime/stats.h"
#include "streamline/serving.h"

namespace streamline::runtime {

// Runs one batch on instance `instance` (called on that instance's thread, one batch at a time
// per instance): must set responses[i].status, and outputs when ok, for each requests[i].
using BatchExecutor = std::function<void(int instance, std::span<const InferRequest* const> requests,
                                         std::span<InferResponse> responses)>;

struct SchedulerOptions {
  // The serving options the scheduler reads: instances (worker threads, one per instance),
  // batching (copied at construction), clock (not owned; must outlive the scheduler), stats_window
  // (samples in each latency window of stats()) and latency_buckets_us (bounds of its histograms,
  // empty = kDefaultLatencyBucketsUs). The rest belongs to the instances and the controller.
  ServingOptions serving;
  // Runs first on each instance thread (pinning, warm-up); an error makes start() fail.
  std::function<Status(int instance)> on_instance_start;
  // Instances that take batches from the start (the first ones); 0 = all. The others start (and
  // warm up) too, idle until set_control() activates them.
  int active_instances = 0;
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
  // The policy as configured (set_control() changes the one decisions use, not this one).
  const BatchPolicy& policy() const { return options_.serving.batching; }

  // Applies the controller's settings from the next decision on: queue delay, preferred batch
  // (clamped to max_batch_size; 0 = none; the configured list of sizes stays while its largest is
  // the one asked for) and active instances (clamped to [1, instances]).
  void set_control(const ControlSettings& settings);
  // The settings in force (the configured ones until set_control()).
  ControlSettings control_settings() const;
  // Cumulative counters for the controller, read now; resets the deepest-queue mark.
  ControlCounters control_counters();
  // Instances running a batch now (an answered batch's instance counts until it is free again).
  int busy_instances() const;

 private:
  struct Pending {
    InferRequest request;
    InferCallback done;
    QueuedItem item;
    uint64_t seq = 0;
  };
  using PendingList = std::vector<std::unique_ptr<Pending>>;

  void worker_main(int instance);
  // The queue changed size: time-weighted depth and deepest mark, for control_counters(); mu_ held.
  void note_depth_locked();
  // Wakes one worker that may take a batch (all of them while some are inactive); mu_ held.
  void notify_locked();
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
  BatchPolicy live_policy_;   // the policy decisions use (set_control() retunes it); mu_
  BatchPolicy drain_policy_;  // live_policy_ with no queue delay, used while draining; mu_
  BatchExecutor executor_;
  const Clock* clock_;
  StatsRecorder stats_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // active workers wait here for requests and deadlines
  std::condition_variable idle_cv_;  // inactive workers wait here for set_control() or shutdown
  PendingList queue_;                // arrival order
  int busy_ = 0;                     // instances running a batch
  RunTimeModel run_times_;           // every batch's run, for admission
  int64_t last_run_end_us_ = 0;      // when the last batch finished (admission's staleness); 0 = none yet
  uint64_t next_seq_ = 0;
  int active_ = 1;              // instances that take batches
  ControlCounters control_;     // for control_counters()
  int64_t depth_since_us_ = 0;  // when the queue last changed size
  int64_t last_depth_ = 0;      // its size since then
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
