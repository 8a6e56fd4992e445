#pragma once
// streamline serving: many requests in flight, merged into batches under a latency budget, run on
// several instances that share one copy of the weights.
//
//   #include "streamline/serving.h"
//   using namespace streamline;
//
//   ServingOptions so;
//   so.instances = 2;                                  // two execution contexts, weights once
//   so.batching.max_batch_size = 8;                    // merge up to 8 rows per run
//   so.batching.max_queue_delay_us = 2000;             // wait at most 2 ms for a batch to fill
//   auto served = ServingModel::load("resnet50.onnx", so);   // Result<std::unique_ptr<ServingModel>>
//   if (!served.ok()) { std::cerr << served.status().to_string(); return 1; }
//
//   InferRequest req;
//   req.id = 42;
//   req.inputs["input"] = Tensor::empty(DType::kFloat32, Shape{1, 3, 224, 224});
//   InferResponse r = (*served)->infer(req);                    // blocks until answered
//   if (r.status.ok()) use(r.outputs.at("output"));            // [1, 1000]
//
//   (*served)->submit(std::move(req), [](InferResponse r) { /* on an instance thread */ });
//   std::future<InferResponse> f = (*served)->submit(InferRequest{...});
//
// Every request handed to infer() or submit() gets exactly one response, also when it is refused:
// queue full -> ResourceExhausted, waited past its timeout -> DeadlineExceeded (timeout_action
// kReject), bad inputs -> InvalidArgument, submitted after shutdown began -> Unavailable, still
// queued when shutdown(kCancel) runs -> Cancelled. Every outcome is counted in stats().
// A request whose values make the run fail (an index out of range) fails alone: a batch that
// fails is run again request by request, so no request is answered with another's error.
// Deadlines saturate: a timeout_us up to INT64_MAX puts the deadline that far ahead (or nowhere),
// never past the int64 range into the past.

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/tensor.h"
#include "streamline/streamline.h"

namespace streamline {

// One step of a traced run: the plan step, its stream, when it ran (steady clock, now_ns()).
struct StepSpan {
  std::string name, op;
  int stream = 0;
  int64_t begin_ns = 0, end_ns = 0;
};

// How the batch that served a traced request ran (InferRequest::trace), on the steady clock:
// gathering inputs [begin_ns, inputs_done_ns), the run [inputs_done_ns, run_done_ns) with its
// steps, splitting outputs [run_done_ns, end_ns).
struct RunTrace {
  int instance = 0;  // the instance that ran it
  int rows = 0;      // rows in the batch
  int requests = 0;  // requests in the batch
  int64_t begin_ns = 0, inputs_done_ns = 0, run_done_ns = 0, end_ns = 0;
  std::vector<StepSpan> steps;
};

// One inference request. Tensors are shared (cheap copies), and the runtime only reads them.
struct InferRequest {
  uint64_t id = 0;                             // echoed in the response; not interpreted
  std::map<std::string, Tensor> inputs;        // every model input, by name; first dim = rows
  std::vector<std::string> requested_outputs;  // empty = all model outputs
  int priority = -1;                           // 0 = highest; -1 = the policy's default_priority
  int64_t timeout_us = 0;                      // queueing budget (>= 0); 0 = the queue policy's default
  bool trace = false;                          // record how its batch ran (InferResponse::trace)
};

struct InferResponse {
  uint64_t id = 0;                        // the request's id
  Status status;                          // ok, or why the request was refused or failed
  std::map<std::string, Tensor> outputs;  // owned; this request's rows only
  int64_t queue_us = 0;                   // enqueue -> its batch started
  int64_t compute_us = 0;                 // its batch's run, including concat and split
  // The parts of compute_us (Triton's compute input / infer / output): gathering the batch's
  // inputs (concatenation), the run itself, and splitting and copying the outputs back.
  int64_t compute_input_us = 0, compute_infer_us = 0, compute_output_us = 0;
  int batch_size = 0;  // rows in the batch it ran in (0 if it never ran)
  // For a request with trace set that ran: its batch's run, shared by the batch's traced requests.
  std::shared_ptr<const RunTrace> trace;
};

using InferCallback = std::function<void(InferResponse)>;

enum class TimeoutAction {
  kReject,  // a request still queued at its deadline is answered DeadlineExceeded
  kDelay,   // it stays queued, behind every request of every priority that has not timed out
};
const char* timeout_action_name(TimeoutAction a);

struct QueuePolicy {
  // Queued (not yet running) requests at most; a submit beyond gets ResourceExhausted. 0 = no limit.
  int max_queue_size = 0;
  // Queueing budget of a request that gives none; 0 = none.
  int64_t default_timeout_us = 0;
  TimeoutAction timeout_action = TimeoutAction::kReject;
  // Whether a request's own timeout_us replaces default_timeout_us.
  bool allow_timeout_override = true;
  // End-to-end latency objective of every request (the model's SLO); 0 = none. With admission,
  // a request whose estimated queueing plus run time exceeds it is refused when it arrives.
  int64_t latency_objective_us = 0;
  // Deadline-aware admission: a request that, by the queue ahead of it and the run times seen so
  // far, cannot start within its timeout (or meet latency_objective_us) is refused at once with
  // ResourceExhausted and the estimate, instead of timing out in the queue (runtime/admission.h).
  bool admission = true;
};

// How requests are merged into batches. Read once, when the ServingModel is made.
struct BatchPolicy {
  // Rows per run at most; 1 turns batching off (each request runs alone, at its own batch size).
  int max_batch_size = 1;
  // Batch sizes to prefer (each in [1, max_batch_size]); a batch that reaches the largest one
  // launches at once, and at the queue delay the batch is cut to the largest one it holds.
  std::vector<int> preferred_batch_sizes;
  // How long the oldest request of a batch may wait for the batch to fill; 0 = launch at once.
  int64_t max_queue_delay_us = 0;
  // Priority levels 0 (highest) .. priority_levels - 1; requests outside are clamped.
  int priority_levels = 1;
  // Priority of requests that give none (-1).
  int default_priority = 0;
  QueuePolicy queue;
  // Responses are delivered in submission order (a finished request waits for earlier ones).
  bool preserve_ordering = false;
};

// Cores shared by the controllers of the models one server serves: each model holds its active
// instances x threads per instance, and a controller adds an instance only while the total stays
// within cores(). A model's first instance is always held, also past the budget (every model must
// be able to serve). Each controller also reports the cores its instances kept busy in its last
// window; cores held but left idle (instances waiting for requests, for the network, for the
// batcher) may be lent to another model's instance while `lend_idle` (the default), and are taken
// back when the instances keep every core busy (controller.h, rules 1, 3 and 6). Thread-safe;
// share it with std::shared_ptr.
class CoreBudget {
 public:
  // `cores` <= 0: the cores this process may use. `lend_idle` false: never past cores() (beyond
  // each model's first instance), busy or idle.
  explicit CoreBudget(int cores = 0, bool lend_idle = true);
  int cores() const { return cores_; }
  // Sets what `owner` holds to `held` cores when that keeps the total within cores() + `lent`, or
  // when it holds less than before, or when `held` <= `floor` (the owner's first instance). True
  // if done. `lent` is at most idle_cores() rounded down (0 when nothing is lent).
  bool try_hold(const void* owner, int held, int floor, int lent = 0);
  // `owner` holds nothing from now on.
  void release(const void* owner);
  // Cores held by every owner but `owner` (all of them for nullptr).
  int held_by_others(const void* owner) const;
  // `owner`'s fair share: cores() over the owners holding cores, `owner` counted; at least 1.
  int share(const void* owner) const;
  // The cores `owner`'s instances kept busy over its last window (at most what it holds).
  void report_busy(const void* owner, double cores);
  // cores() less what every owner's instances keep busy (an owner that reported nothing counts
  // what it holds); 0 when lending is off. May be negative: oversubscribed and busy.
  double idle_cores() const;

 private:
  int cores_;
  bool lend_idle_;
  mutable std::mutex mu_;
  std::map<const void*, int> held_;
  std::map<const void*, double> busy_;
};

// One change the controller made (runtime/controller.h has the rules).
struct ControllerDecision {
  std::string knob;       // "queue_delay", "preferred_batch", "instances" or "threads"
  std::string direction;  // "up" or "down"
  int64_t from = 0, to = 0;
  std::string reason;   // "p99 31.0 ms over the 20.0 ms objective with queue depth 14.0: +1 instance"
  int64_t time_us = 0;  // when (ServingOptions::clock)
};

struct ControllerOptions {
  // Adapt queue delay, preferred batch, active instances and their intra-op threads to the load
  // each window. Acts only with a latency objective (batching.queue.latency_objective_us > 0);
  // instances is the most it activates, and it starts with one. The active instances share the
  // model's cores in the budget: from threads_per_instance each up to the threads the Model was
  // loaded for (ModelOptions::num_threads), so an instance alone runs on all of them. Pinned
  // instances keep their threads.
  bool enabled = false;
  // Length of one control window (microseconds, > 0).
  int64_t window_us = 1'000'000;
  // Cores shared with the other models of a server; null = a budget of this process's cores for
  // this model alone.
  std::shared_ptr<CoreBudget> budget;
  // Names the model in the controller's log lines.
  std::string name;
  // Called on the control thread after each decision is applied; must not block.
  std::function<void(const ControllerDecision&)> on_decision;
  // Windows run on a thread of the model's own; false = only when step_controller() is called.
  bool thread = true;
};

// What the controller has done and what is in force now.
struct ControllerStats {
  bool enabled = false;
  int active_instances = 0;  // instances taking batches now (all of them without a controller)
  int64_t queue_delay_us = 0;
  int preferred_batch = 0;       // 0 = none
  int threads_per_instance = 0;  // intra-op threads of each active instance now
  // Decisions since load by (knob, direction).
  std::map<std::pair<std::string, std::string>, uint64_t> decisions;
};

enum class ShutdownMode {
  kDrain,   // run every queued request, then stop
  kCancel,  // answer every queued request Cancelled; batches already running finish
};

struct ServingOptions {
  // Execution contexts; each has its own worker thread and arena, all share the Model's weights.
  int instances = 1;
  BatchPolicy batching;
  // Intra-op threads per instance; 0 = max(1, hardware threads / instances).
  int threads_per_instance = 0;
  // Pin instance i to cores [i*T, (i+1)*T) mod cores, T = threads_per_instance.
  bool pin = false;
  // Run the largest planned batch once per instance at load, so arenas reach full size before
  // the first request (and serving never grows them).
  bool warmup = true;
  // Samples per latency window (percentiles in stats() cover the last this many requests).
  int stats_window = 4096;
  // Upper bounds (microseconds, increasing, each > 0) of the latency histograms in stats(); an
  // implicit last bucket holds everything above. Empty = kDefaultLatencyBucketsUs.
  std::vector<double> latency_buckets_us;
  // Time source for queue delays, deadlines and timings; not owned, must outlive the model.
  const Clock* clock = &SteadyClock::instance();
  // The online controller (off unless enabled and a latency objective is set).
  ControllerOptions controller;
};

struct LatencySummary {
  uint64_t count = 0;                         // all samples since load
  double sum_us = 0;                          // all samples since load
  double p50_us = 0, p90_us = 0, p99_us = 0;  // over the sliding window
};

// Default latency histogram bounds: 100 us to 10 s in steps of about 1-2.5-5.
inline const std::vector<double> kDefaultLatencyBucketsUs = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};

// A histogram of one duration since load: counts[i] samples in (bounds_us[i-1], bounds_us[i]],
// counts.back() above the last bound (Prometheus' +Inf bucket, made cumulative when exported).
struct LatencyHistogram {
  std::vector<double> bounds_us;  // increasing upper bounds
  std::vector<uint64_t> counts;   // bounds_us.size() + 1 entries, not cumulative
  uint64_t count = 0;
  double sum_us = 0;

  LatencyHistogram() : counts(1, 0) {}
  explicit LatencyHistogram(std::vector<double> bounds);
  void add(double us);
  // Adds another histogram's samples; bounds must be equal (else it is ignored and false returned).
  bool merge(const LatencyHistogram& other);
};

// Per batch size: runs and the time they took (the batch's compute input, infer and output).
struct BatchTiming {
  uint64_t runs = 0;
  double input_us = 0, infer_us = 0, output_us = 0;
};

// A consistent snapshot of one model's counters.
struct ServingStats {
  uint64_t accepted = 0;                    // entered the queue
  uint64_t succeeded = 0;                   // answered with outputs
  uint64_t failed = 0;                      // answered with an error (includes refusals at submit)
  uint64_t refused_at_admission = 0;        // of those, refused because they could not finish in time
  std::map<StatusCode, uint64_t> failures;  // failed, by status code
  LatencySummary queue, compute, total;     // total = queue + compute, per successful request
  // The parts of compute, per successful request (InferResponse::compute_input_us, ...).
  LatencySummary compute_input, compute_infer, compute_output;
  // Histograms (ServingOptions::latency_buckets_us) of total, queue and the compute parts, per
  // successful request.
  LatencyHistogram total_hist, queue_hist, compute_input_hist, compute_infer_hist, compute_output_hist;
  std::map<int, uint64_t> batch_size_hist;  // rows per run -> runs
  std::map<int, BatchTiming> batch_timing;  // rows per run -> runs and their times
  uint64_t batches = 0;
  int64_t in_flight = 0;                  // accepted and not yet answered (queued or running)
  int64_t queued = 0;                     // waiting in the queue now
  std::vector<int64_t> instance_busy_us;  // per instance: time spent running batches since load
  ControllerStats controller;             // the online controller's settings and decisions
};

namespace runtime {
class Scheduler;
class InstancePool;
class ControlLoop;
}  // namespace runtime

class ServingModel {
 public:
  // Loads `path` and serves it. Errors as Model::load, plus InvalidArgument for inconsistent
  // options or a model that cannot be batched when max_batch_size > 1.
  [[nodiscard]] static Result<std::unique_ptr<ServingModel>> load(const std::string& path,
                                                                  const ServingOptions& options,
                                                                  const ModelOptions& model_options = {});
  // Serves an already loaded model; the ServingModel shares it (weights are not copied). Makes the
  // plans for the configured batch sizes and starts the instance threads before returning.
  [[nodiscard]] static Result<std::unique_ptr<ServingModel>> create(std::shared_ptr<const Model> model,
                                                                    const ServingOptions& options);

  // Drains (ShutdownMode::kDrain) and joins the instance threads.
  ~ServingModel();
  ServingModel(const ServingModel&) = delete;
  ServingModel& operator=(const ServingModel&) = delete;

  // Asynchronous. The runtime owns `request` from the call on. `done` is called exactly once:
  // on the calling thread before submit returns when the request is refused at once (invalid,
  // queue full, shutting down), else on an instance thread. It must not block long (it holds up
  // that instance) and must not call infer(). Thread-safe.
  void submit(InferRequest request, InferCallback done);
  // Same; the future becomes ready when the response exists. Thread-safe.
  std::future<InferResponse> submit(InferRequest request);
  // Synchronous: submit and wait. Thread-safe; never call it from a callback.
  InferResponse infer(InferRequest request);

  // Stops taking requests (later submits get Unavailable), then drains or cancels the queue and
  // joins the instance threads. Every accepted request has its response when this returns.
  // Idempotent; thread-safe, but not from a callback.
  void shutdown(ShutdownMode mode = ShutdownMode::kDrain);

  // Counters since load. Thread-safe; cheap enough to poll while serving.
  ServingStats stats() const;
  // Runs one control window now (ControllerOptions::thread false, or tests); its decisions, none
  // when the controller is off. Thread-safe.
  std::vector<ControllerDecision> step_controller();

  const Model& model() const { return *model_; }
  const ServingOptions& options() const { return options_; }
  int threads_per_instance() const { return threads_per_instance_; }
  // Batch sizes whose plans were made at load.
  const std::vector<int>& planned_batch_sizes() const { return planned_; }
  // Arena bytes per instance (after warm-up: the largest planned batch). Thread-safe.
  std::vector<size_t> arena_bytes() const;

 private:
  ServingModel() = default;
  // Validates a request; fills its rows (first dimension) and batching key.
  Status check_request(const InferRequest& r, int* rows, uint32_t* key);

  std::shared_ptr<const Model> model_;
  ServingOptions options_;
  int threads_per_instance_ = 1;
  std::vector<int> planned_;
  std::unique_ptr<runtime::InstancePool> pool_;
  std::unique_ptr<runtime::Scheduler> scheduler_;
  std::unique_ptr<runtime::ControlLoop> control_;  // null when the controller is off
  bool free_shape_ = false;                        // some non-batch input dim is free: requests need batching keys
  std::mutex keys_mu_;
  std::map<std::string, uint32_t> keys_;  // non-batch shape signature -> batching key
};

}  // namespace streamline
