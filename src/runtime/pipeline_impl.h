#pragma once
// Internals of streamline::Pipeline: the checked graph (stages, tensors by dense id) and the
// run-time state of each stage (bounded queue, workers, counters) and of each request (a Job).
//
// A Job carries one request through the DAG. It holds the tensors produced so far (by dense id;
// an intermediate is dropped once its last reader has taken it),
// per stage the number of producer stages still to finish (fan-in), and a token count: the stage
// executions scheduled but not finished. The response goes out at the first error, or when the
// last token finishes; the Job leaves the pipeline's in-flight count when the last token finishes.
//
// Workers: a plain stage runs worker threads 0 .. active-1; threads at or above `active` are
// parked (made once, kept for when the rebalancer gives the stage workers back). A worker leaves
// only between items, so a move never drops or repeats one. A model stage spreads its requests
// over `replicas` (the given model first), the first `active_replicas` taking new ones.
//
// Lock order: PipelineImpl::balance_mu_ -> PipelineImpl::mu_ -> StageRuntime::mu -> Job::mu; no
// lock but balance_mu_ is held while a stage runs, while the model is called, or while a response
// callback runs (balance_mu_ only serialises rebalancing windows).

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pipeline_balance.h"
#include "runtime/stats.h"
#include "streamline/pipeline.h"

namespace streamline::runtime {

struct Job {
  uint64_t id = 0;
  InferCallback done;
  std::vector<int> requested;  // tensor ids to return, in order
  int64_t start_us = 0;

  std::mutex mu;
  std::vector<Tensor> values;   // by tensor id; released once every reader has taken it
  std::vector<int> reads_left;  // by tensor id: stages still to read it
  std::vector<int> waiting;     // by stage: producer stages not finished yet
  int tokens = 0;               // stage executions scheduled, not finished
  bool responded = false;
  int64_t queue_us = 0, compute_us = 0;
  int batch_size = 0;
};

struct QueueItem {
  std::shared_ptr<Job> job;
  int64_t enqueue_us = 0;
};

// A model's answer, waiting for a stage worker to pass it on.
struct ModelDone {
  QueueItem item;
  InferResponse response;
  int64_t submit_us = 0;
  int64_t done_us = 0;
};

struct StageRuntime {
  StageRuntime(StageSpec s, size_t window) : spec(std::move(s)), queue_window(window), process_window(window) {}

  StageSpec spec;
  int index = 0;
  bool is_model = false;
  // Per worker (add_stage_per_instance): sized to max_workers at build, filled up to the most
  // workers ever active; slot w is set (under mu) before worker w first runs.
  std::vector<std::unique_ptr<Stage>> owned;
  std::function<std::unique_ptr<Stage>()> factory;  // makes owned objects for new workers
  std::shared_ptr<Stage> shared;                    // all workers
  // Kept alive by PipelineImpl::models, not here: a model callback may hold the last reference to
  // this struct, and must never be the one to destroy the model (it would join its own thread).
  ServingModel* model = nullptr;
  std::vector<std::string> model_inputs, model_outputs;
  int max_in_flight = 1;
  // Model stages: the models requests are spread over (model first, then replicas over the same
  // Model) and how many take new requests; both under mu. Replicas are kept alive here.
  // They are kept alive by PipelineImpl::models, like `model`.
  std::vector<ServingModel*> replicas;
  std::vector<int> replica_in_flight;  // per replica: requests submitted, not yet answered
  size_t active_replicas = 1;
  int max_replicas = 1;
  bool auto_in_flight = false;           // max_in_flight follows the instances (ModelStageOptions 0)
  int min_workers = 1, max_workers = 1;  // rebalancing limits (model stages: instances)

  std::vector<int> in_ids, out_ids;  // tensor ids
  std::vector<int> consumers;        // stage indices reading any of out_ids, each once
  int producers = 0;                 // distinct producer stages of in_ids

  std::mutex mu;
  std::condition_variable not_empty;  // work for the workers (queue items, model answers)
  std::condition_variable not_full;
  std::deque<QueueItem> queue;
  std::deque<ModelDone> answers;  // model stages
  int in_flight = 0;              // model stages: submitted, not yet passed on
  bool stop = false;
  // Counters, under mu.
  uint64_t processed = 0, failed = 0, skipped = 0;
  int64_t max_depth = 0;
  int64_t blocked_producers = 0;  // threads inside push() waiting for room
  LatencyWindow queue_window, process_window;
  int active = 0;                                // plain stages: workers taking items
  int64_t busy_us = 0;                           // plain stages: process() time since build, all workers
  double depth_integral = 0;                     // queue depth x microseconds since build
  int64_t depth_since_us = 0;                    // when depth_integral was last brought up to date
  int64_t window_depth_max = 0;                  // deepest since the rebalancer last read it
  double capacity_per_s = 0, busy_fraction = 0;  // the rebalancer's last measurement
  std::condition_variable park;                  // parked workers wait here for active to grow (or stop)

  std::vector<std::thread> threads;

  Stage& worker_stage(int worker) { return shared ? *shared : *owned[static_cast<size_t>(worker)]; }
  // Waits for room (until `deadline_us` on the steady clock, or forever when < 0), then queues.
  // False when the deadline passed first.
  bool push(QueueItem item, int64_t deadline_us);
  // Brings depth_integral up to `now_us`; call (under mu) before the queue's size changes.
  void note_depth(int64_t now_us) {
    depth_integral += static_cast<double>(queue.size()) * static_cast<double>(now_us - depth_since_us);
    depth_since_us = now_us;
  }
};

// What the rebalancer read of one stage at the end of the previous window.
struct StageMark {
  uint64_t done = 0;
  int64_t busy_us = 0;
  double depth_integral = 0;
};

struct PipelineImpl {
  PipelineOptions options;
  std::vector<std::string> tensor_names;  // by tensor id
  std::vector<std::string> input_names, output_names;
  std::vector<int> input_ids, output_ids;
  std::vector<int> readers;                           // by tensor id: stages reading it
  std::vector<bool> is_output;                        // by tensor id: a pipeline output (kept to the end)
  std::vector<int> entry_stages;                      // stages that read pipeline inputs only
  std::vector<std::shared_ptr<StageRuntime>> stages;  // topological order
  std::vector<std::shared_ptr<ServingModel>> models;  // the model stages' models

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  int64_t in_flight_ = 0;
  bool stopping_ = false;
  std::atomic<bool> cancelling_{false};
  std::mutex shutdown_mu_;
  bool joined_ = false;
  // Counters, under mu_.
  uint64_t accepted_ = 0, succeeded_ = 0, failed_ = 0;
  std::map<StatusCode, uint64_t> failures_;
  LatencyWindow total_window_{1};
  // Rebalancing (options.rebalance). The window state under balance_mu_; what stats() shows of
  // it under mu_.
  bool rebalancing_ = false;
  int worker_budget_ = 0;
  int cores_floor_ = 0;  // cores the stages start with (always held in options.rebalance.cores)
  int cores_held_ = 0;   // held now, under mu_
  std::mutex balance_mu_;
  BalanceState balance_state_;
  std::vector<StageMark> marks_;
  int64_t mark_us_ = 0;
  uint64_t windows_ = 0, moves_ = 0;
  std::string bottleneck_, last_hold_;
  double imbalance_ = 0;
  std::deque<RebalanceMove> recent_;
  std::thread balance_thread_;
  std::mutex balance_wait_mu_;
  std::condition_variable balance_cv_;
  bool balance_stop_ = false;

  // Starts every stage's workers (and the rebalancing thread).
  void start();
  void submit(InferRequest request, InferCallback done);
  void shutdown(ShutdownMode mode);
  PipelineStats stats() const;
  // One rebalancing window: measure, decide, apply. The moves made.
  std::vector<RebalanceMove> rebalance_window();
  // Cores `workers` (per stage) hold: one per plain worker, threads_per_instance per model instance.
  int cores_for(const std::vector<int>& workers) const;

 private:
  // Workers of stage `st` now (plain: active threads; model: instances of the active replicas).
  // st.mu held.
  static int workers_of(const StageRuntime& st);

  // Gives stage `st` `n` workers; false (with a log line) when a new worker could not be made.
  bool set_workers(StageRuntime& st, int n);
  void balance_main();
  void worker_main(StageRuntime& st, int worker);
  void model_worker_main(const std::shared_ptr<StageRuntime>& st);
  // Runs a plain stage on one request.
  void run_item(StageRuntime& st, int worker, QueueItem item);
  // Hands one request to the model (answer arrives in st.answers).
  void submit_to_model(const std::shared_ptr<StageRuntime>& st, QueueItem item);
  // Copies a stage's inputs out of the job (job->mu held) and releases those no one else reads.
  void take_inputs(const StageRuntime& st, Job& job, std::vector<Tensor>* out) const;
  // Passes a model's answer on.
  void pass_on(StageRuntime& st, ModelDone d);
  // Stores a stage's outputs in the job and queues every consumer now ready, then finishes the
  // stage's token.
  void complete(StageRuntime& st, const std::shared_ptr<Job>& job, std::vector<Tensor> outputs);
  // Answers the job with `status` unless already answered.
  void fail(const std::shared_ptr<Job>& job, Status status);
  // One stage execution of `job` ended; `n` tokens at once.
  void finish_tokens(const std::shared_ptr<Job>& job, int n);
  // Counts and delivers a response.
  void deliver(const std::shared_ptr<Job>& job, InferResponse r);
  void refuse(const InferRequest& request, Status status, const InferCallback& done);
  static void invoke(const InferCallback& done, InferResponse r);
};

int64_t steady_now_us();

}  // namespace streamline::runtime
