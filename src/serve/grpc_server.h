#pragma once
// KServe v2 over gRPC: the GRPCInferenceService (package inference) of the public protocol,
// generated from proto/grpc_service.proto.
//
//   GrpcServer grpc(core, {.host = "127.0.0.1", .port = 8001});
//   SL_RETURN_IF_ERROR(grpc.start());
//   ...
//   grpc.stop();
//
// RPCs: ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer (inputs as
// raw_input_contents or typed contents; outputs as raw_output_contents), ModelStreamInfer
// (bidirectional; per-request errors in the stream, decoupled models: grpc_stream.h,
// grpc_infer.h), ModelConfig, ModelStatistics, RepositoryIndex, RepositoryModelLoad,
// RepositoryModelUnload.
// Errors use grpc_status_code() of the Status.

#include <memory>
#include <string>

#include "core/status.h"
#include "serve/server_core.h"

namespace streamline::serve {

struct GrpcOptions {
  std::string host = "127.0.0.1";
  int port = 8001;  // 0 = pick a free port (see port())
};

class GrpcServer {
 public:
  GrpcServer(ServerCore& core, GrpcOptions options);
  ~GrpcServer();  // stop()
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  [[nodiscard]] Status start();
  // Stops accepting new RPCs and waits for running ones. Idempotent.
  void stop();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamline::serve
