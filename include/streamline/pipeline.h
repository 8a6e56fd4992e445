#pragma once
// streamline pipelines: a request flows through a DAG of stages (decode -> pre-process -> model ->
// post-process, or detect -> crop -> recognise). Each stage has its own worker threads and a
// bounded queue; stages are connected by the names of the tensors they read and write.
//
//   #include "streamline/pipeline.h"
//   using namespace streamline;
//
//   std::shared_ptr<ServingModel> served = ...;              // ServingModel::load(...), batching on
//   PipelineBuilder b;
//   b.input("jpeg");                                         // uint8[bytes]: an encoded image
//   b.add_stage({.name = "decode", .inputs = {"jpeg"}, .outputs = {"rgb"}, .instances = 2},
//               stages::decode_image());
//   b.add_stage({.name = "pre", .inputs = {"rgb"}, .outputs = {"x"}},
//               stages::preprocess_image({.resize = {.height = 224, .width = 224, .shorter_side = 256},
//                                         .normalize = {}}));  // ImageNet mean/std
//   b.add_model({.name = "model", .inputs = {"x"}, .outputs = {"logits"}}, served,
//               {.model_inputs = {"input"}, .model_outputs = {"output"}});
//   b.add_stage({.name = "top5", .inputs = {"logits"}, .outputs = {"classes", "scores"}},
//               stages::top_k({.k = 5}));
//   b.output("classes").output("scores");
//   auto pipe = b.build();                                   // Result<std::unique_ptr<Pipeline>>
//   if (!pipe.ok()) { std::cerr << pipe.status().to_string(); return 1; }
//
//   InferRequest req;
//   req.inputs["jpeg"] = bytes;
//   InferResponse r = (*pipe)->infer(std::move(req));        // r.outputs["classes"]: int64[1,5]
//   (*pipe)->submit(std::move(req2), [](InferResponse r) { /* on a stage thread */ });
//
// Data flow: a stage runs for a request once every tensor it reads exists (fan-in waits for all of
// its producers); its outputs go to every stage that reads them (fan-out). Tensors are shared, not
// copied, between stages: a stage must not write into a tensor it reads.
// Backpressure: each stage queue holds at most queue_capacity requests. A stage whose downstream
// queue is full blocks until there is room; submit() waits for room in the entry queues up to the
// request's (or the pipeline's) entry timeout, then refuses the request with ResourceExhausted.
// Memory therefore never grows with the offered load.
// Model stages hand requests to a ServingModel asynchronously, so requests from different pipeline
// requests merge into one batch and no stage thread waits while the model runs.
// Every request handed to infer() or submit() gets exactly one response: ok with the pipeline's
// outputs; the first stage error, as "stage 'NAME': ..."; ResourceExhausted (entry queues full past
// the timeout); InvalidArgument (missing or unknown inputs); Unavailable (submitted after shutdown
// began); Cancelled (in flight when shutdown(kCancel) ran). One failing request never affects others.
//
// Rebalancing: with a worker budget the pipeline moves workers to its slowest stage while it is
// loaded, so stage throughputs converge (RebalanceOptions, runtime/pipeline_balance.h):
//
//   PipelineOptions po;
//   po.rebalance.worker_budget = 6;                          // workers over all stages
//   auto pipe = b.build(po);                                 // decode 4, pre 1, ... to start
//   (*pipe)->stats().rebalance.recent;                       // each move and its reason
//   (*pipe)->stats().stages[1].workers;                      // workers now

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "streamline/serving.h"

namespace streamline {

using TensorMap = std::map<std::string, Tensor>;

// How one stage is wired and sized. Read once, by PipelineBuilder::build().
struct StageSpec {
  // Unique within the pipeline; appears in error messages and stats.
  std::string name;
  // Tensors it reads: pipeline inputs or other stages' outputs. At least one.
  std::vector<std::string> inputs;
  // Tensors it writes; each tensor of a pipeline has exactly one producer. At least one.
  std::vector<std::string> outputs;
  // Worker threads. A plain stage runs process() on up to this many requests at once; a model
  // stage needs only one (its threads only hand requests to the model and pass results on).
  int instances = 1;
  // Requests waiting for this stage at most (in [1, 1 << 20]); upstream blocks when it is full.
  int queue_capacity = 16;
  // process() must never run twice at once (a stage that keeps state between requests, a library
  // that is not thread-safe): the stage keeps its one worker (instances must be 1) and the
  // rebalancer never gives it another.
  bool serial = false;
  // Most workers the rebalancer may give this plain stage; 0 = the worker budget is the only limit.
  // Model stages ignore it (ModelStageOptions::max_replicas bounds them).
  int max_instances = 0;
};

// One request's view of a stage: inputs and outputs in the order the StageSpec lists them.
struct StageIO {
  uint64_t request_id = 0;      // the InferRequest's id
  std::vector<Tensor> inputs;   // shared with other stages: read only
  std::vector<Tensor> outputs;  // sized to the spec's outputs, undefined; the stage sets each
};

// A processing step. Owned by the pipeline (shared_ptr) from add_stage() until the pipeline is
// destroyed.
class Stage {
 public:
  virtual ~Stage() = default;
  // Checks that the stage can work with this wiring (input/output counts, its own options).
  // Called once by build(); an error fails the build with the stage's name.
  [[nodiscard]] virtual Status validate(const StageSpec& spec) const {
    (void)spec;
    return ok_status();
  }
  // Computes io.outputs from io.inputs. An error fails this request only. Called on the stage's
  // worker threads: concurrently when the stage has more than one worker (instances > 1, or the
  // rebalancer gave it more; StageSpec::serial prevents that) and the same object serves every
  // worker (add_stage with a shared_ptr), once at a time per object with add_stage_per_instance.
  // Must not throw (an exception is caught and reported as Internal).
  [[nodiscard]] virtual Status process(StageIO& io) = 0;
};

// Function form: inputs by name -> outputs by name (exactly the spec's outputs).
using StageFunction = std::function<Status(const TensorMap& inputs, TensorMap& outputs)>;

// How a model stage maps its tensors onto a ServingModel.
struct ModelStageOptions {
  // Per stage input, the model input it feeds; empty = the same names. Must cover every model input.
  std::vector<std::string> model_inputs;
  // Per stage output, the model output it comes from; empty = the same names.
  std::vector<std::string> model_outputs;
  // Requests submitted to the model and not yet answered, at most; 0 = 2 x max_batch_size x
  // instances of the model (enough to fill every instance's next batch). The model's own queue
  // limit (QueuePolicy::max_queue_size), if set, must not be lower, or requests fail ResourceExhausted.
  int max_in_flight = 0;
  // With rebalancing: serving models over the same Model this stage may spread its requests over,
  // at most. Each one the stage gains is one more execution context sharing the Model's weights
  // (ServingModel::create with the given model's options and one instance), made and warmed up
  // before it takes a request; one it loses finishes what it holds and stays idle. 1 = the stage
  // keeps the one model it was given (the rebalancer counts its instances but never adds any).
  // The stage's capacity is measured from its models' instance busy time, so other users of the
  // same ServingModel make it look slower than it is.
  int max_replicas = 1;
};

// One worker moved between stages by the rebalancer.
struct RebalanceMove {
  std::string from;                      // the stage that gave up a worker; "" = taken from the unused budget
  std::string to;                        // the stage that gained it
  int from_workers = 0, to_workers = 0;  // their workers after the move (from_workers 0 for the budget)
  // "'pre' is the bottleneck at 83.3/s with 1 worker (100% busy, queue depth 14.0): 1 worker from
  // 'decode' (1000.0/s with 4, 750.0/s with 3)"
  std::string reason;
  int64_t time_us = 0;  // when (steady clock)
};

// Rebalancing: every window the rebalancer measures each stage's capacity (workers x items per
// second of busy time) and, while the pipeline is loaded, moves one worker to the bottleneck from
// the unused budget or from the stage with the most to spare (runtime/pipeline_balance.h has the
// rules). Moves happen between items: a worker that leaves a stage finishes the item it holds
// first, so nothing is dropped or run twice (the pipeline promises no order between requests).
struct RebalanceOptions {
  // Rebalance with the workers the stages start with as the budget.
  bool enabled = false;
  // Workers over all stages at most (plain stages' worker threads plus model stages' instances);
  // > 0 turns rebalancing on by itself (a budget is given to be used); 0 = the sum the stages
  // start with when enabled, or no limit but `cores` when that is given. Must not be lower than
  // the sum the stages start with.
  int worker_budget = 0;
  // Cores shared with other pipelines and with serving models' controllers (serving.h); given, it
  // turns rebalancing on. A plain stage's worker holds one core, a model stage's instance its
  // model's threads_per_instance; workers are added only while the total stays within the
  // budget, and the pipeline always holds the cores its stages start with (like a model's first
  // instance). Released when the pipeline shuts down.
  std::shared_ptr<CoreBudget> cores = nullptr;
  // Length of one measuring window (microseconds, >= 1000).
  int64_t window_us = 500'000;
  // Windows in a row that must propose the same move before it is made (>= 1).
  int confirm_windows = 2;
  // Windows after a move in which nothing moves (>= 0).
  int cooldown_windows = 1;
  // A donor must keep this much more capacity than the bottleneck has (in [0, 1]).
  double margin = 0.1;
  // Items every stage must finish in a window for the window to count (>= 1): a stage whose
  // items take longer than window_us / min_items per worker needs a longer window.
  int min_items = 8;
  // Windows run on a thread of the pipeline's own; false = only when step_rebalancer() is called.
  bool thread = true;
  // Called on the rebalancing thread after each move is applied; must not block or call the pipeline.
  std::function<void(const RebalanceMove&)> on_move = nullptr;
};

// Whole-pipeline settings. Read once, by build().
struct PipelineOptions {
  // How long submit() waits for room in a full entry queue before ResourceExhausted; 0 = refuse
  // at once. A request's own timeout_us (> 0) replaces it.
  int64_t entry_timeout_us = 1'000'000;
  // Samples per latency window (percentiles in stats() cover the last this many).
  int stats_window = 4096;
  // Moving workers between stages under load (off unless enabled or a worker budget is given).
  RebalanceOptions rebalance = {};
};

struct StageStats {
  std::string name;
  bool model = false;  // a model stage
  int instances = 0;
  int queue_capacity = 0;
  uint64_t processed = 0;         // requests it completed
  uint64_t failed = 0;            // requests it failed (its error became the response)
  uint64_t skipped = 0;           // requests dropped unprocessed: failed elsewhere first, or cancelled
  LatencySummary queue;           // entered its queue -> a worker took it (processed and failed)
  LatencySummary process;         // process() time; model stages: submit -> the model's response
  int64_t queue_depth = 0;        // waiting in its queue now
  int64_t max_queue_depth = 0;    // most ever waiting at once (never above queue_capacity)
  int64_t blocked_producers = 0;  // now waiting for room in its full queue: clients at the entry
                                  // or upstream workers (backpressure)
  int64_t in_flight = 0;          // model stages: submitted to the model, response not yet passed on
  // Workers now: plain stages their worker threads taking items, model stages the instances of the
  // models they spread requests over. Equals instances (plain) without rebalancing.
  int workers = 0;
  int max_workers = 0;        // most the rebalancer may give it (workers, when it is off)
  double capacity_per_s = 0;  // items/s its workers sustain, last rebalancing window (0 = not measured)
  double busy_fraction = 0;   // of its workers' time spent processing, last rebalancing window
};

struct RebalanceStats {
  bool enabled = false;
  int worker_budget = 0;
  int workers = 0;                    // in use over all stages now
  uint64_t windows = 0;               // measured so far
  uint64_t moves = 0;                 // made so far
  int cores = 0;                      // held in RebalanceOptions::cores now (0 without one)
  std::string bottleneck;             // stage of least capacity in the last window ("" = not measured)
  double imbalance = 0;               // highest stage capacity / lowest - 1, last measured window
  std::string last_hold;              // why the last window moved nothing ("" when it moved)
  std::vector<RebalanceMove> recent;  // the last moves, oldest first (at most 32)
};

struct PipelineStats {
  uint64_t accepted = 0;  // entered the pipeline
  uint64_t succeeded = 0;
  uint64_t failed = 0;                      // includes refusals at submit
  std::map<StatusCode, uint64_t> failures;  // failed, by status code
  LatencySummary total;                     // submit -> response, successful requests
  int64_t in_flight = 0;                    // accepted, some stage still holds it
  std::vector<StageStats> stages;           // in topological order
  RebalanceStats rebalance;
};

namespace runtime {
struct PipelineImpl;
}  // namespace runtime

class Pipeline {
 public:
  // Drains (shutdown(kDrain)) and joins the stage threads.
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Asynchronous. The pipeline owns `request` from the call on; inputs must name exactly the
  // pipeline's inputs; requested_outputs (empty = all) must be pipeline outputs; priority is not
  // used. May block up to the entry timeout while the entry queues are full. `done` is called
  // exactly once: on this thread before submit returns when the request is refused, else on a stage
  // or model thread. It must not block long and must not call infer() or shutdown(). Thread-safe.
  void submit(InferRequest request, InferCallback done);
  // Same; the future becomes ready with the response. Thread-safe.
  std::future<InferResponse> submit(InferRequest request);
  // Submit and wait. Thread-safe; never from a callback or a stage.
  InferResponse infer(InferRequest request);

  // Stops taking requests (later submits get Unavailable), then either lets every accepted request
  // finish (kDrain) or answers each one Cancelled at its next stage (kCancel; a stage already
  // running, or a model already holding the request, finishes first, and a request whose last stage
  // is running completes normally), and joins the stage threads. Every accepted request has its
  // response when this returns. Models are not shut down. Idempotent; thread-safe, but not from a
  // callback or a stage.
  void shutdown(ShutdownMode mode = ShutdownMode::kDrain);

  // A consistent-enough snapshot (each stage's counters are read under its own lock).
  // Thread-safe; cheap enough to poll while serving.
  PipelineStats stats() const;
  // Runs one rebalancing window now (RebalanceOptions::thread false, or tests): measures since the
  // previous window and applies the decision. The moves made (none when rebalancing is off).
  // Thread-safe; not from a callback or a stage.
  std::vector<RebalanceMove> step_rebalancer();

  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;

 private:
  friend class PipelineBuilder;
  explicit Pipeline(std::unique_ptr<runtime::PipelineImpl> impl);
  std::unique_ptr<runtime::PipelineImpl> impl_;
};

// Collects inputs, stages and outputs, then checks and starts the pipeline. Not thread-safe; the
// builder can be reused after build() (stages added with a shared_ptr are then shared).
class PipelineBuilder {
 public:
  // Declares a pipeline input (a tensor every request must carry).
  PipelineBuilder& input(std::string name);
  // Declares a pipeline output. Without any, the outputs are the stage outputs no stage reads.
  PipelineBuilder& output(std::string name);
  // One Stage object for all the stage's workers (its process() must be thread-safe if instances > 1).
  PipelineBuilder& add_stage(StageSpec spec, std::shared_ptr<Stage> stage);
  // One Stage object per worker, made by `factory` at build().
  PipelineBuilder& add_stage_per_instance(StageSpec spec, std::function<std::unique_ptr<Stage>()> factory);
  // A function stage; `fn` is shared by the workers (thread-safe if instances > 1).
  PipelineBuilder& add_function(StageSpec spec, StageFunction fn);
  // A model stage: each request's inputs are submitted to `model` (shared; it must outlive no one,
  // the pipeline keeps it alive) and its outputs passed on when the model answers.
  PipelineBuilder& add_model(StageSpec spec, std::shared_ptr<ServingModel> model, ModelStageOptions options = {});

  // Checks the graph and starts every stage's threads. InvalidArgument, naming what is wrong, for:
  // no stages or inputs, duplicate stage/tensor names, a tensor with two producers, a tensor no
  // stage produces and no input declares, a cycle (its stages listed), an unknown output, bad
  // sizes, a stage's validate() error, a model stage whose names do not match its model, bad
  // rebalancing options (a worker budget below the workers the stages start with).
  [[nodiscard]] Result<std::unique_ptr<Pipeline>> build(const PipelineOptions& options = {}) const;

 private:
  struct Entry {
    StageSpec spec;
    std::shared_ptr<Stage> shared;                    // add_stage / add_function
    std::function<std::unique_ptr<Stage>()> factory;  // add_stage_per_instance
    std::shared_ptr<ServingModel> model;              // add_model
    ModelStageOptions model_options;
    bool is_model = false;
  };
  std::vector<std::string> inputs_, outputs_;
  std::vector<Entry> entries_;
};

// Ready-made stages. Each checks its wiring at build (validate()) and is stateless and thread-safe,
// so one object serves any number of workers.
namespace stages {

struct DecodeImageOptions {
  // Output channels: 3 (RGB; grey images are expanded) or 1 (grey). Alpha is dropped (PNG alpha
  // composited onto black).
  int channels = 3;
  // Larger images are refused (InvalidArgument) before their pixels are allocated.
  int64_t max_pixels = int64_t{1} << 26;
};
// uint8 tensor of JPEG or PNG file bytes (any shape) -> uint8 [H, W, channels]. Corrupt or
// truncated data (libjpeg warnings included) -> InvalidArgument. 1 input, 1 output.
std::shared_ptr<Stage> decode_image(DecodeImageOptions options = {});

struct ResizeImageOptions {
  int64_t height = 224;  // output size
  int64_t width = 224;
  // > 0: first scale so the shorter side is this long (aspect kept), then centre-crop to
  // height x width. 0: scale straight to height x width.
  int64_t shorter_side = 0;
};
// uint8 or float32 [H, W, C] -> same dtype [height, width, C]; bilinear, half-pixel centres (no
// anti-aliasing). 1 input, 1 output.
std::shared_ptr<Stage> resize_image(ResizeImageOptions options = {});

struct NormalizeImageOptions {
  std::vector<float> mean{0.485f, 0.456f, 0.406f};  // per channel (or one for all), after scaling
  std::vector<float> std{0.229f, 0.224f, 0.225f};   // per channel (or one for all), non-zero
  float scale = 1.f / 255.f;                        // applied first: x * scale
};
// uint8 or float32 [H, W, C] -> float32 [H, W, C]: (x * scale - mean[c]) / std[c]. 1 in, 1 out.
std::shared_ptr<Stage> normalize_image(NormalizeImageOptions options = {});

// [H, W, C] -> [1, C, H, W], same dtype. 1 input, 1 output.
std::shared_ptr<Stage> hwc_to_nchw();

struct ImagePreprocessOptions {
  ResizeImageOptions resize;
  NormalizeImageOptions normalize;
};
// resize_image, normalize_image and hwc_to_nchw in one stage (one queue hop instead of three).
std::shared_ptr<Stage> preprocess_image(ImagePreprocessOptions options = {});

struct TopKOptions {
  int k = 5;            // clamped to the number of classes
  bool softmax = true;  // scores are softmax probabilities (else the raw values)
};
// float32 [N, K] or [K] -> int64 [N, k] indices and float32 [N, k] scores ([k] for a [K] input),
// highest first, ties by lower index, NaN last. 1 input, 2 outputs (indices, scores).
std::shared_ptr<Stage> top_k(TopKOptions options = {});

}  // namespace stages

// A ready-made image classifier: "image" (uint8 file bytes) -> decode -> resize shorter side +
// centre crop + normalise + NCHW -> model -> top-k -> "classes" (int64 [1, k]), "scores"
// (float32 [1, k]).
struct ImageClassifierOptions {
  int64_t size = 0;                         // crop size; 0 = the model input's fixed H (else 224)
  int64_t resize = 0;                       // shorter side before the crop; 0 = size * 256 / 224
  stages::NormalizeImageOptions normalize;  // ImageNet mean/std by default
  stages::TopKOptions top_k;
  std::string model_input;   // "" = the model's only input
  std::string model_output;  // "" = the model's first output
  int decode_instances = 1;  // worker threads for decoding
  int preprocess_instances = 1;
  int queue_capacity = 16;  // per stage
  PipelineOptions pipeline;
};
[[nodiscard]] Result<std::unique_ptr<Pipeline>> build_image_classifier(std::shared_ptr<ServingModel> model,
                                                                       const ImageClassifierOptions& options = {});

}  // namespace streamline
