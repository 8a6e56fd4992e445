#pragma once
// One inference request of the gRPC front end, from the ModelInferRequest message to the response
// messages: shared by ModelInfer (unary) and ModelStreamInfer (the bidirectional stream).
//
//   grpc_infer(core, request, id, {.streaming = true},
//              [](Status s, inference::ModelInferResponse r, bool last) { ... });
//
// A decoupled model (model_transaction_policy { decoupled: true }) answers one request with
// several responses: one per row of its outputs' first dimension (each output sliced to [1, ...]),
// in order, then, when the request asks for it with the parameter
// triton_enable_empty_final_response, an empty response whose parameter triton_final_response is
// true. Every response of a decoupled model carries triton_final_response. Only streams serve
// decoupled models; ModelInfer refuses them (as Triton does). A generator model (parameters
// generate: "greedy", serve/generate.h) answers one response per generated token instead, with
// outputs token and index (INT64 [1, 1]); the request parameters max_new_tokens and eos_token_id
// (int64) override the configured ones.
// Thread-safe: `respond` runs on a runtime thread or on the caller's, never concurrently for one
// request.

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "grpc_service.pb.h"
#include "serve/server_core.h"

namespace streamline::serve {

struct GrpcInferOptions {
  // The request came on ModelStreamInfer: decoupled models are served.
  bool streaming = false;
  // The call's W3C traceparent metadata ("" = none), for a traced request.
  std::string traceparent;
  // Called once, before the request is queued, when it is traced, with the traceparent of its
  // span (a unary call sends it back as initial metadata, as the HTTP front end sends a header).
  std::function<void(const std::string& traceparent)> on_trace;
  // True once the client is gone (the stream was cancelled or its writes fail): a generation
  // (serve/generate.h) runs no further step. Empty = never.
  std::function<bool()> stopped;
};

// Called once per response message; `last` is true on the final call. A non-ok status is the
// request's error (and always the last call); the message is then empty.
using GrpcRespond = std::function<void(const Status& status, inference::ModelInferResponse response, bool last)>;

// Decodes `request`, runs it through the core and answers through `respond` (maybe before this
// returns). Never throws; every request gets at least one call.
void grpc_infer(ServerCore& core, const inference::ModelInferRequest& request, uint64_t id, GrpcInferOptions options,
                GrpcRespond respond);

// Splits a successful response into one response per row of its outputs' first dimension
// (decoupled models). InvalidArgument when the outputs disagree on it or one is a scalar.
[[nodiscard]] Result<std::vector<InferResponse>> split_rows(const InferResponse& r);

}  // namespace streamline::serve
