#pragma once
// The clients `streamline perf` drives: KServe v2 over HTTP (Boost.Beast, one kept-alive
// connection per worker, binary tensor extension both ways) and over gRPC (one channel; requests
// marshalled by us so that the time it takes is measured, as perf_analyzer reports it).
//
//   SL_ASSIGN_OR_RETURN(auto client, PerfClient::create("grpc", "localhost:8001"));
//   SL_ASSIGN_OR_RETURN(RemoteModel m, client->metadata("resnet50", ""));
//   SL_RETURN_IF_ERROR(client->prepare(m.name, "", {{inputs, values}}, outputs));  // encoded once
//   SL_ASSIGN_OR_RETURN(auto conn, client->connect());          // one per worker or in-flight slot
//   RequestTiming t;
//   Status s = conn->infer(0, &t);                               // sends prepared request 0, waits
//   client->run_async(4);                                        // then: conn->start(0, done)
//   SL_ASSIGN_OR_RETURN(ServerStats st, client->statistics("resnet50", ""));
//
// A PerfClient is used from one thread while preparing; after prepare() its connections may be
// used concurrently, each by one caller at a time. metadata() and statistics() share one control
// connection: call them from one thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace streamline::tools {

struct RemoteTensor {
  std::string name;
  std::string datatype;        // KServe name: "FP32", "INT64", ...
  std::vector<int64_t> shape;  // -1 for a variable dimension
};

// What the server's model metadata says.
struct RemoteModel {
  std::string name;
  std::vector<std::string> versions;
  std::vector<RemoteTensor> inputs, outputs;
};

// One request's inputs: each tensor's name, datatype and concrete shape, with its values.
struct RequestInputs {
  std::vector<RemoteTensor> tensors;
  std::vector<Tensor> values;  // same order as tensors
};

// Where one request's time went, split as perf_analyzer splits it.
struct RequestTiming {
  std::chrono::steady_clock::time_point end;  // when the response was fully read
  int64_t latency_ns = 0;                     // from before the request was encoded to `end`
  int64_t send_ns = 0;  // HTTP: writing the request (and connecting, when it had to); gRPC: marshalling it
  int64_t recv_ns = 0;  // HTTP: reading the response from its first byte; gRPC: unmarshalling it
};

// A count and the nanoseconds summed over it, as Triton's statistics extension reports them.
struct StatDuration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// A model's cumulative statistics (Triton's statistics extension).
struct ServerStats {
  uint64_t inference_count = 0;  // batch rows inferred
  uint64_t execution_count = 0;  // model executions (batches)
  StatDuration success, queue, compute_input, compute_infer, compute_output;
};
// What happened between two snapshots (`later` - `earlier`, fields never below 0: a reload that
// reset the counters gives 0, not a wrapped number).
ServerStats stats_delta(const ServerStats& later, const ServerStats& earlier);
// Reads Triton's statistics JSON ({"model_stats": [...]}), summing the entries of `model` (and
// of `version` when not empty). NotFound when there are none.
Result<ServerStats> parse_statistics_json(const std::string& body, const std::string& model,
                                          const std::string& version);

// Called once per started request, on a client thread, with its outcome and timing.
using InferDone = std::function<void(const Status&, const RequestTiming&)>;

// A link to the server that carries one request at a time.
class PerfConnection {
 public:
  virtual ~PerfConnection() = default;
  // Sends prepared request `request` and waits for the answer: ok, or the error the server or
  // the transport gave (the server's message kept). Fills `timing` either way.
  [[nodiscard]] virtual Status infer(size_t request, RequestTiming* timing) = 0;
  // The same without waiting: `done` runs once the answer is in, on a thread of the client
  // (run_async() must have been called). One started request at a time per connection; the
  // connection must outlive it.
  virtual void start(size_t request, InferDone done) = 0;
};

class PerfClient {
 public:
  virtual ~PerfClient() = default;

  // `protocol` is "http" or "grpc"; `url` is "host:port", "http://host:port", "host" (the
  // protocol's default port) or "" (localhost:8000 for http, localhost:8001 for grpc).
  [[nodiscard]] static Result<std::unique_ptr<PerfClient>> create(const std::string& protocol, const std::string& url);

  // "host:port" this client talks to.
  virtual const std::string& endpoint() const = 0;
  // The model's metadata (of `version`, "" for the server's choice). Unavailable naming the
  // endpoint when the server cannot be reached; the server's error (NotFound for an unknown
  // model or version) otherwise.
  [[nodiscard]] virtual Result<RemoteModel> metadata(const std::string& model, const std::string& version) = 0;
  // The model's statistics now (of `version`, or of every version when "").
  [[nodiscard]] virtual Result<ServerStats> statistics(const std::string& model, const std::string& version) = 0;
  // Encodes the requests connections send, by index: each with its inputs, asking for
  // `outputs` (all of them as raw bytes), for `version` of `model` ("" for the server's choice).
  [[nodiscard]] virtual Status prepare(const std::string& model, const std::string& version,
                                       const std::vector<RequestInputs>& requests,
                                       const std::vector<std::string>& outputs) = 0;
  // A new connection (HTTP: a TCP connection; gRPC: calls on the shared channel).
  [[nodiscard]] virtual Result<std::unique_ptr<PerfConnection>> connect() = 0;
  // Starts the threads that run started requests' completions (HTTP: `threads` I/O threads;
  // gRPC runs completions on its own threads). Idempotent; they stop with the client.
  virtual void run_async(int threads) = 0;
};

}  // namespace streamline::tools
