#pragma once
// What the HTTP and gRPC front ends share: the repository, the requests in flight, draining at
// shutdown, metadata, statistics and metrics. A front end decodes a request into an InferRequest,
// calls infer(), and encodes the InferResponse; it never talks to the runtime directly.
//
//   Repository repo("models", {});
//   repo.load_all();
//   ServerCore core(repo, {});
//   core.infer("resnet50", "", std::move(request), [](InferResponse r) { ... });  // exactly once
//   std::string text = core.metrics_text();           // Prometheus exposition format
//   core.drain(std::chrono::seconds(30));              // refuse new requests, finish accepted ones
//   Status s = core.load_model("resnet50");            // Unsupported unless allow_model_control
//
// Thread-safe. The Repository must outlive the ServerCore. Front ends see it read-only: what is
// served changes through load_model/unload_model, where the model control policy is enforced.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "serve/repository.h"
#include "serve/shared_memory.h"
#include "serve/statistics.h"
#include "serve/trace.h"
#include "streamline/serving.h"

namespace streamline::serve {

struct ServerOptions {
  std::string name = "streamline";
  // Largest request body accepted (bytes); larger -> 413 / RESOURCE_EXHAUSTED.
  int64_t max_request_bytes = 256ll << 20;
  // Model control mode "explicit": load_model/unload_model change what is served. Otherwise
  // (mode "none") both are refused with Unsupported, for every front end alike.
  bool allow_model_control = false;
  // Export Triton's metric families (nv_inference_request_success, ..._duration_us,
  // nv_inference_first_response_histogram_ms, ...) beside streamline's own.
  bool triton_metric_names = true;
};

struct TensorMetadata {
  std::string name;
  std::string datatype;        // KServe name: "FP32", "INT64", ...
  std::vector<int64_t> shape;  // -1 for variable dims; includes the batch dim (-1) when batching
};

// Triton's server metadata: what HTTP writes as JSON and gRPC as its message.
struct ServerMetadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;  // the protocol extensions this server implements
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;
  std::string platform;  // "streamline_onnx"
  std::vector<TensorMetadata> inputs, outputs;
};

// One mapping from Status to protocol codes, used by every front end.
int http_status(const Status& s);       // 200, 400, 404, 413, 429, 500, 503, 504
int grpc_status_code(const Status& s);  // grpc::StatusCode values as int

class ServerCore {
 public:
  ServerCore(Repository& repository, ServerOptions options);
  // Refuses new requests and waits for every accepted one to be answered (their callbacks refer
  // to this object); stop the front ends first.
  ~ServerCore();

  bool live() const { return true; }
  // Not draining, and every model of the repository index is ready.
  bool ready() const;
  bool draining() const { return draining_.load(); }
  const ServerOptions& options() const { return options_; }
  const Repository& repository() const { return repo_; }
  // The shared memory regions clients registered (both front ends see the same ones).
  SharedMemoryRegistry& shared_memory() { return shm_; }
  const SharedMemoryRegistry& shared_memory() const { return shm_; }
  // Trace settings and traces (both front ends sample through it).
  TraceManager& traces() { return traces_; }
  const TraceManager& traces() const { return traces_; }

  // Triton's repository extension (load, unload by model name). Unsupported "explicit model load
  // / unload is not allowed ..." unless options().allow_model_control; else as Repository::load
  // and unload. Blocks while the model loads or drains: call it off the I/O threads.
  [[nodiscard]] Status load_model(const std::string& model, const LoadOptions& options = {});
  [[nodiscard]] Status unload_model(const std::string& model);
  // What load_model and unload_model would refuse with now, without doing anything: lets a front
  // end answer a refused call at once instead of queueing it behind a load.
  [[nodiscard]] Status check_model_control() const;

  ServerMetadata server_metadata() const;
  // {"name":"streamline","version":"0.1.0","extensions":[...]}
  static std::string server_metadata_json(const ServerMetadata& m);
  [[nodiscard]] Result<ModelMetadata> model_metadata(const std::string& model, const std::string& version) const;
  static std::string model_metadata_json(const ModelMetadata& m);
  // Triton's statistics extension, one entry per model version. model "" = every ready model;
  // version "" = every served version of it. NotFound for an unknown model or version.
  [[nodiscard]] Result<std::vector<ModelStatistics>> statistics(const std::string& model,
                                                                const std::string& version = "") const;
  // The statistics as the HTTP front end sends them: {"model_stats":[{name, version,
  // last_inference, inference_count, execution_count, inference_stats:{success:{count,ns}, fail,
  // queue, compute_input, compute_infer, compute_output, cache_hit, cache_miss},
  // batch_stats:[{batch_size, compute_input, compute_infer, compute_output}]}]}.
  static std::string statistics_json(const std::vector<ModelStatistics>& stats);
  // Prometheus text format (version 0.0.4): per-model counters and summaries, batch-size
  // histogram, pending requests, per-instance busy time, process CPU seconds and resident memory.
  std::string metrics_text() const;

  // Runs one request on a model. `done` is called exactly once (maybe before infer returns):
  // NotFound for an unknown model or version, Unavailable while draining or when the model is not
  // ready, else whatever the runtime answers. The request counts as in flight until `done` returns.
  // Before the runtime, the request is checked against the configuration: with max_batch_size > 0
  // every input's first dimension must be in [1, max_batch_size], and configured dims must match.
  // request.priority is 0-based (0 = highest, -1 = default): front ends convert the KServe/Triton
  // request priority with priority_from_wire (priority.h).
  void infer(const std::string& model, const std::string& version, InferRequest request, InferCallback done);
  // Unsupported when the model is decoupled (one request, several responses): only a stream
  // (gRPC ModelStreamInfer) can carry its answers. Ok otherwise, also for unknown models (infer
  // names those).
  [[nodiscard]] Status check_single_response(const std::string& model, const std::string& version) const;

  // Refuses new requests from now on; waits until every accepted request is answered or the
  // timeout passes (at most a year: longer ones, up to milliseconds::max(), wait a year). Returns
  // true when none is left in flight.
  bool drain(std::chrono::milliseconds timeout);
  int64_t in_flight() const { return in_flight_.load(); }

 private:
  Repository& repo_;
  ServerOptions options_;
  SharedMemoryRegistry shm_;
  TraceManager traces_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};
  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  // Answers a request refused before it reached a model, and counts the refusal.
  void refuse(const std::string& model, uint64_t id, Status status, InferCallback& done);
  // A model answered a request now (last_inference_ms_).
  void note_inference(const std::string& model);
  // One request answered and its callback returned: in_flight_ drops, drain waiters wake.
  void finished();

  // Refusals before a request reaches a model (unknown model, draining), by model and code;
  // names the repository does not know are counted under "".
  std::map<std::string, std::map<StatusCode, uint64_t>> front_failures_;
  // Per model: when its last response was delivered (milliseconds since the epoch).
  std::map<std::string, uint64_t> last_inference_ms_;
  // Per model: server time of the requests answered without running (queue full, admission,
  // shutting down: ResourceExhausted or Unavailable), from infer() to the answer handed back.
  std::map<std::string, LatencyHistogram> refusal_us_;
  void note_refusal(const std::string& model, const Status& status, int64_t since_ns);
};

}  // namespace streamline::serve
