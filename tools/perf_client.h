#pragma once
// The clients `streamline perf` drives: KServe v2 over HTTP (Boost.Beast, synchronous, one
// kept-alive connection per worker, binary tensor extension both ways) and over gRPC (the stub
// generated from grpc_service.proto; one channel, one stub per worker).
//
//   SL_ASSIGN_OR_RETURN(auto client, PerfClient::create("grpc", "localhost:8001"));
//   SL_ASSIGN_OR_RETURN(RemoteModel m, client->metadata("resnet50"));
//   SL_RETURN_IF_ERROR(client->prepare(m.name, inputs, values));   // encoded once
//   SL_ASSIGN_OR_RETURN(auto conn, client->connect());             // one per worker thread
//   Status s = conn->infer();                                      // sends the prepared request
//
// A PerfClient is used from one thread while preparing; after prepare() its connections may be
// used concurrently, each by one thread.

#include <cstdint>
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

// One worker's link to the server. Not thread-safe: one thread per connection.
class PerfConnection {
 public:
  virtual ~PerfConnection() = default;
  // Sends the prepared request and waits for the answer: ok, or the error the server or the
  // transport gave (the server's message kept).
  [[nodiscard]] virtual Status infer() = 0;
};

class PerfClient {
 public:
  virtual ~PerfClient() = default;

  // `protocol` is "http" or "grpc"; `url` is "host:port", "http://host:port", "host" (the
  // protocol's default port) or "" (localhost:8000 for http, localhost:8001 for grpc).
  [[nodiscard]] static Result<std::unique_ptr<PerfClient>> create(const std::string& protocol, const std::string& url);

  // "host:port" this client talks to.
  virtual const std::string& endpoint() const = 0;
  // The model's metadata. Unavailable naming the endpoint when the server cannot be reached;
  // the server's error (NotFound for an unknown model) otherwise.
  [[nodiscard]] virtual Result<RemoteModel> metadata(const std::string& model) = 0;
  // Encodes the request every connection sends: `inputs` (name, datatype, concrete shape) with
  // `values` in the same order, asking for `outputs` (all of them as raw bytes).
  [[nodiscard]] virtual Status prepare(const std::string& model, const std::vector<RemoteTensor>& inputs,
                                       const std::vector<Tensor>& values, const std::vector<std::string>& outputs) = 0;
  // A new connection (HTTP: a TCP connection; gRPC: a stub on the shared channel).
  [[nodiscard]] virtual Result<std::unique_ptr<PerfConnection>> connect() = 0;
};

}  // namespace streamline::tools
