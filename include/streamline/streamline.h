#pragma once
// streamline: load an ONNX model once, run it from many threads.
//
//   #include "streamline/streamline.h"
//   using namespace streamline;
//
//   ModelOptions opts;                                     // graph passes on, channels-last on
//   auto model = Model::load("resnet50.onnx", opts);       // Result<std::shared_ptr<Model>>
//   if (!model.ok()) { std::cerr << model.status().to_string(); return 1; }
//   Session session(*model);                               // one per thread
//   Tensor x = Tensor::empty(DType::kFloat32, Shape{1, 3, 224, 224});
//   auto outs = session.run({x});                          // Result<std::vector<Tensor>>
//
// Ownership and threads: a Model is immutable after load and shared (std::shared_ptr) by any
// number of Sessions on any threads; its weights exist once. A Session owns one execution context
// (arena) and must be used by one thread at a time. Plans are made per input shapes on first use
// and cached in the Model (thread-safe). Shape sets whose shapes depend on run-time values (a
// Reshape to a computed shape, NonMaxSuppression) cannot be planned and run node by node instead
// (Model::execution_mode says which). So do models with sequences, optionals or string tensors
// anywhere; Session::run_values takes and gives those at the inputs and outputs:
//
//   auto outs = session.run_values({AnyValue::sequence({a, b}, DType::kFloat32)});   // AnyValues

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/plan_choices.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/value.h"
#include "exec/observer.h"

// Types of the layers below, named here only by pointer or reference: opaque to users of the
// public API (the library's own tools and tests include their headers).
namespace streamline::graph {
class Graph;
struct PassReport;
}  // namespace streamline::graph
namespace streamline::plan {
struct ExecutionPlan;
}  // namespace streamline::plan
namespace streamline::exec {
class ExecutionContext;
class DeviceWeights;
class TraceRecorder;
}  // namespace streamline::exec
namespace streamline::runtime {
struct DeviceSpec;
class InstancePool;
}  // namespace streamline::runtime

namespace streamline {

// The kernel choices (channels_last, blocked_layout, blocked_channels, winograd, precision) are
// KernelChoices', which the kernels take whole; the plan choices (num_streams, pinned_streams)
// are PlanChoices', which the planner takes whole with the kernel choices (core/plan_choices.h).
struct ModelOptions : PlanChoices {
  // Graph rewrite passes (folding, fusion, elimination); off only for debugging. Takes effect at load.
  bool optimize = true;
  // Total threads per run; 0 = all hardware threads. Sessions may override per run.
  int num_threads = 0;
  // Intra-op threads per stream; 0 = max(1, num_threads / num_streams).
  int threads_per_stream = 0;
  // With several streams: instead of a fixed threads_per_stream, each step runs on
  // num_threads / (streams running a step at that moment) threads, so a stream running alone uses
  // every thread and concurrent branches share them. Takes effect when plans are made (their
  // workspaces are sized for num_threads per stream). Not combined with pin_threads.
  bool elastic_threads = false;
  // For multi-stream plans: N >= 2 cuts every heavy convolution (2% or more of the model's
  // convolution work, ungrouped, no residual operand) into N convolutions on slices of its
  // filters, which the planner can put on different streams; N = the stream count is the usual
  // choice. 0: off. Takes effect at load (graph::PassOptions::split_conv_parts).
  int split_convs = 0;
  // Pin each stream's thread(s) to its own cores (stream s gets cores [s*T, (s+1)*T)).
  bool pin_threads = false;
  // Safe mode: canaries after every buffer checked after each step, dead buffers poisoned.
  bool safe = false;
  // Where the model runs: "cpu", "cuda:N" (GPU N), "cuda" (GPU 0 for a Session; serving instances
  // spread over every visible GPU) or "eager" (the CPU, node by node on the eager backend with no
  // plan, for every shape set: to check a plan's results against, or to isolate a kernel). CUDA
  // needs the backend compiled in; a GPU is needed only to run (plans for CUDA can be made and
  // inspected anywhere). Takes effect at load.
  std::string device = "cpu";
  // CUDA: capture each plan into a CUDA graph after a warm-up run and replay it. Per context.
  bool cuda_graphs = true;
  // Called once for each new input-shape set, just before it is planned, on the thread that first
  // asked for it and outside every lock of the model (runs of shapes already planned go on
  // meanwhile): for instrumentation (planning is the slow first run of a shape). Null: no call.
  std::function<void(const std::vector<Shape>& shapes)> on_planning;
};

// How runs with one input-shape set execute (Model::execution_mode).
enum class ExecutionMode {
  kPlanned,  // through a cached ExecutionPlan: every shape is known before the run starts
  kEager,    // node by node: some shape depends on values computed during the run (a Reshape to a
             // computed shape, TopK with a computed k, NonMaxSuppression on run-time boxes), or the
             // graph carries sequences, optionals or string tensors; slower
};
// "planned" / "eager".
const char* execution_mode_name(ExecutionMode m);

// What the ONNX file says about itself (ModelProto and main GraphProto fields); empty or 0 where
// the file has nothing.
struct ModelMetadata {
  std::string producer_name;                  // the exporter ("pytorch")
  std::string producer_version;               // its version ("2.1.0")
  std::string graph_name;                     // the main graph's name
  std::string domain;                         // the model's domain (reverse-DNS by convention)
  std::string description;                    // the model's doc_string
  std::string graph_description;              // the main graph's doc_string
  int64_t version = 0;                        // model_version
  std::map<std::string, std::string> custom;  // metadata_props, key -> value
};

// An input or output as the model declares it; dims are -1 where symbolic or unknown.
struct TensorDesc {
  std::string name;
  // A tensor, or a sequence or optional (those are given and returned by Session::run_values).
  ValueKind kind = ValueKind::kTensor;
  // The element type (kString for string tensors).
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;  // per dim: the symbol name, "" when fixed/unknown
};

class Model {
 public:
  // Loads, optimises and prepares kernels. Errors: NotFound (no file), InvalidArgument (corrupt
  // or inconsistent model), Unsupported (ops/dtypes/opsets we cannot run; all listed at once).
  static Result<std::shared_ptr<Model>> load(const std::string& path, const ModelOptions& options = {});
  // Same, from the bytes of an ONNX file (a serialized ModelProto) held in memory; the bytes are
  // only read during the call. External data is refused (there is no folder to find it in).
  // Errors as load(), with "model bytes" in place of the path.
  static Result<std::shared_ptr<Model>> load_bytes(std::string_view bytes, const ModelOptions& options = {});
  // Same, from an imported graph (tests, servers that fetch models themselves; needs graph/ir.h).
  static Result<std::shared_ptr<Model>> from_graph(graph::Graph g, const ModelOptions& options = {});
  ~Model();

  const std::vector<TensorDesc>& inputs() const { return inputs_; }
  const std::vector<TensorDesc>& outputs() const { return outputs_; }
  const ModelOptions& options() const { return options_; }
  // Producer, names, descriptions and custom key/value pairs from the file.
  const ModelMetadata& metadata() const { return metadata_; }
  // The device the model was loaded for, as text: "cpu", "eager", "cuda" or "cuda:N".
  std::string device_name() const;
  // Internals, for the library's own tools and tests (their types are opaque here): the optimised
  // graph, what the passes did, the device, and the model's state on its backend (makes execution
  // contexts; for CUDA models it also holds the weights on each GPU, shared by every context there).
  const graph::Graph& graph() const;
  const graph::PassReport& pass_report() const;
  const runtime::DeviceSpec& device() const;
  const std::shared_ptr<exec::DeviceWeights>& device_weights() const;

  // The plan for these input shapes (model input order), made once and cached. Thread-safe.
  // Unsupported when the shape set runs eagerly (see execution_mode): no plan exists for it.
  Result<std::shared_ptr<const plan::ExecutionPlan>> plan_for(const std::vector<Shape>& shapes) const;
  // How Session::run executes these input shapes, decided once per shape set and cached: planning
  // is tried first; when it fails only because some output shape depends on values computed during
  // the run, the shape set runs eagerly (node by node). Errors: planning's, for any other failure.
  // Thread-safe.
  Result<ExecutionMode> execution_mode(const std::vector<Shape>& shapes) const;
  // For an eager shape set: why it cannot be planned (the first value-dependent node); "" otherwise
  // or when the shape set has not been decided yet.
  std::string eager_reason(const std::vector<Shape>& shapes) const;
  // The input shapes of a run, in model input order. Input i takes known[i] when that is set (the
  // shape of the tensor the caller has for it, or one the caller chose), else its declared shape
  // with symbolic dims set: the first to `batch`, the others to 1. A known shape must agree with
  // the declared rank and fixed dims. InvalidArgument naming the input and the dimension when an
  // input has neither a known shape nor a size for every dimension. `known` may be shorter than
  // the input list (missing entries are unset). Thread-safe.
  Result<std::vector<Shape>> input_shapes(const std::vector<std::optional<Shape>>& known, int64_t batch = 1) const;
  // input_shapes with nothing known: the declared shapes, symbolic dims as above.
  Result<std::vector<Shape>> default_shapes(int64_t batch = 1) const;
  int default_threads() const;
  // Intra-op threads each stream uses.
  int threads_per_stream() const;
  // num_threads when elastic threads are on and there are several streams, else 0.
  int elastic_threads() const;

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

 private:
  friend class Session;
  friend class runtime::InstancePool;  // serving instances run eager shape sets too
  // What is cached per shape set: a plan, planned or eager (plan->eager says why it runs eagerly).
  struct Prepared {
    std::shared_ptr<const plan::ExecutionPlan> plan;
  };
  struct Impl;  // graph, kernels, device state, plan cache (src/runtime/model.cc)
  Model();
  Result<Prepared> prepare(const std::vector<Shape>& shapes) const;
  // Plans a shape set that is not cached (prepare's slow path); no lock held.
  Result<Prepared> plan_shapes(const std::vector<Shape>& shapes, const std::string& key) const;
  ModelOptions options_;
  std::vector<TensorDesc> inputs_, outputs_;
  ModelMetadata metadata_;
  std::unique_ptr<Impl> impl_;
};

struct RunOptions {
  int num_threads = 0;                     // intra-op threads per stream; 0 = the model's default
  exec::ExecObserver* observer = nullptr;  // per-step hooks (tracing): plan steps, or nodes of eager runs
  // CPU, one stream, several threads: run on one thread while the session measures that faster
  // (cores taken by other processes), probing both counts now and then; false: always num_threads.
  bool adapt_threads = true;
};

class Session {
 public:
  explicit Session(std::shared_ptr<const Model> model);
  ~Session();

  // Inputs in the model's input order; returns owned outputs in the model's output order. Models whose
  // inputs or outputs are sequences or optionals need run_values (InvalidArgument naming them here).
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, const RunOptions& options = {});
  // The same with inputs and outputs of any kind: tensors, sequences, optionals (core/value.h). A run
  // whose values are all tensors goes the way run() does.
  Result<std::vector<AnyValue>> run_values(const std::vector<AnyValue>& inputs, const RunOptions& options = {});
  // Inputs by name; every model input must be given.
  Result<std::map<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs,
                                            const RunOptions& options = {});
  const Model& model() const { return *model_; }
  // Host arena or device block bytes this session's context holds.
  size_t arena_bytes() const;

 private:
  std::shared_ptr<const Model> model_;
  // Made on the first run, so that a missing GPU is an error of run(), not of construction.
  std::unique_ptr<exec::ExecutionContext> context_;
  [[nodiscard]] Status make_context();
};

// For observers (exec/observer.h, public): what step `step` of the plan a hook was called for
// runs, for code that cannot see the plan. The views are valid while the plan lives, at least
// during the hook. Planned runs report plan steps (fused nodes, inserted layout changes); eager
// runs report graph nodes.
struct StepDesc {
  std::string_view name;      // node name ("<value>/to_plain" for inserted layout changes)
  std::string_view op;        // op type, e.g. "FusedConv"
  std::string_view provider;  // kernel provider, e.g. "onednn", "eager"
  int stream = 0;             // the plan stream it runs on
};
StepDesc describe_step(const plan::ExecutionPlan& plan, int step);

// Records runs as Chrome trace events (open the file in Perfetto or chrome://tracing): one track
// per stream, one slice per step with its op and tensor shapes (eager runs: one per node), a flow
// arrow for every event between streams.
//
//   Trace trace;
//   RunOptions ro;
//   ro.observer = trace.observer();
//   auto outs = session.run(inputs, ro);                // record as many runs as needed
//   SL_RETURN_IF_ERROR(trace.write("run.json"));
//
// Thread-safety: one run at a time per Trace (runs of several sessions recorded into one Trace
// must be serialised by the caller); slices(), to_json() and write() must not overlap a run.
class Trace {
 public:
  // Stops recording after `max_slices` step slices, so long runs stay bounded.
  explicit Trace(size_t max_slices = 100000);
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  // The hooks to put in RunOptions::observer; owned by this Trace, valid as long as it is.
  exec::ExecObserver* observer();
  // Step slices recorded so far.
  size_t slices() const;
  // The trace as one JSON object {"traceEvents": [...]}.
  std::string to_json() const;
  // Writes to_json() to `path`. Unavailable naming the path when it cannot be written.
  [[nodiscard]] Status write(const std::string& path) const;

 private:
  std::unique_ptr<exec::TraceRecorder> recorder_;
};

// Devices models can be loaded for and run on in this process: "cpu", then "cuda:0", "cuda:1", ...
// for each usable GPU when the CUDA backend is built in. Thread-safe.
std::vector<std::string> available_devices();

// Threads this process can run at once: the CPUs its affinity mask allows (when first asked),
// capped by a cgroup CPU quota when one is set (a container limited to 1.5 CPUs gets 2). At least
// 1. Every default thread count of streamline comes from it. Thread-safe.
int usable_cores();

// The process-wide threshold of streamline's log (stderr): messages below it are dropped. It
// starts from the SL_LOG_LEVEL environment variable (debug|info|warning|error), else warning.
// Thread-safe; takes effect at once for every model.
enum class LogSeverity { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
void set_log_severity(LogSeverity severity);
LogSeverity log_severity();

// "0.1.0 (oneDNN 2.6.3, CPU; CUDA: no)"; with the CUDA backend built in, "CUDA: yes (runtime 13.0,
// driver 13.0, cuDNN 9.19.0, 1 device: NVIDIA H200 sm_90)" or "CUDA: yes (..., no device: reason)".
std::string version_string();

}  // namespace streamline
