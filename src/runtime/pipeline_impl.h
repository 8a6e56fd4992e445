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
// Lock order: PipelineImpl::mu_ -> StageRuntime::mu -> Job::mu; no lock is held while a stage
// runs, while the model is called, or while a response callback runs.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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
  std::vector<std::unique_ptr<Stage>> owned;  // per worker (add_stage_per_instance)
  std::shared_ptr<Stage> shared;              // all workers
  // Kept alive by PipelineImpl::models, not here: a model callback may hold the last reference to
  // this struct, and must never be the one to destroy the model (it would join its own thread).
  ServingModel* model = nullptr;
  std::vector<std::string> model_inputs, model_outputs;
  int max_in_flight = 1;

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

  std::vector<std::thread> threads;

  Stage& worker_stage(int worker) { return shared ? *shared : *owned[static_cast<size_t>(worker)]; }
  // Waits for room (until `deadline_us` on the steady clock, or forever when < 0), then queues.
  // False when the deadline passed first.
  bool push(QueueItem item, int64_t deadline_us);
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

  // Starts every stage's workers.
  void start();
  void submit(InferRequest request, InferCallback done);
  void shutdown(ShutdownMode mode);
  PipelineStats stats() const;

 private:
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
