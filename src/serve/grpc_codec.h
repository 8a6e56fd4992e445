#pragma once
// Conversions between the KServe v2 gRPC messages (package inference) and the runtime's types.
// Pure functions with no server state, so the gRPC front end stays a thin dispatcher and the
// decoding rules are testable on their own.
//
//   inference::ModelInferRequest grpc_request;
//   SL_RETURN_IF_ERROR(parse_message(received_bytes, &grpc_request)); // the wire bytes gRPC got
//   InferRequest req;
//   SL_RETURN_IF_ERROR(decode_infer_request(grpc_request, &req));   // inputs copied out
//   ...
//   SL_RETURN_IF_ERROR(encode_infer_response(response, output_order, &grpc_response));
//
// Thread-safe (no shared state).

#include <grpcpp/support/byte_buffer.h>

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "grpc_service.pb.h"
#include "serve/classification.h"
#include "serve/model_config.h"
#include "serve/shared_memory.h"
#include "serve/statistics.h"
#include "streamline/serving.h"

namespace streamline::serve {

// Parses a request message from the bytes gRPC received (in one slice or several): every method
// is registered raw, so that a request that is not a valid message gets InvalidArgument naming
// the message type and the size, not gRPC's UNIMPLEMENTED without a word. `bytes` is not consumed.
[[nodiscard]] Status parse_message(const grpc::ByteBuffer& bytes, google::protobuf::Message* out);

// Inputs come from raw_input_contents (one entry per input, in the order of `inputs`, checked to
// hold exactly elements x dtype size bytes) or from the typed contents field of each input (its
// element count checked against the shape). Each input is copied into owned, aligned memory: the
// request message may go away before the runtime is done with the tensors. Requested outputs are
// copied by name. Parameters: "priority" (Triton's meaning: 0 = the model's default, n >= 1 =
// level n, 1 the highest) and "timeout" (microseconds of queueing), both int64_param or
// uint64_param. InvalidArgument naming the input or parameter otherwise.
// Shared memory: an input or output whose parameters name shared_memory_region (with
// shared_memory_byte_size and shared_memory_offset) goes to `shm_inputs` / `shm_outputs` instead;
// raw_input_contents then holds entries for the other inputs only (as tritonclient sends them).
// Without those pointers such a request is refused.
// Outputs with a "classification" parameter (int64 or uint64 >= 1) are listed in `class_counts`.
[[nodiscard]] Status decode_infer_request(const inference::ModelInferRequest& in, InferRequest* out,
                                          std::vector<ShmInput>* shm_inputs = nullptr,
                                          std::map<std::string, ShmRef>* shm_outputs = nullptr,
                                          std::map<std::string, int64_t>* class_counts = nullptr);

// Appends every output of `r` to `out` as name, datatype, shape and raw_output_contents. `order`
// lists output names in the order wanted; outputs of `r` not in it follow in name order.
// Internal when an output has a dtype the protocol cannot name. Outputs in `shm_outputs` (already
// written to their region) carry the region's parameters and an empty raw_output_contents entry.
// Outputs in `classified` go as BYTES (classification.h) instead of their tensors.
[[nodiscard]] Status encode_infer_response(const InferResponse& r, const std::vector<std::string>& order,
                                           inference::ModelInferResponse* out,
                                           const std::map<std::string, ShmRef>* shm_outputs = nullptr,
                                           const std::map<std::string, ClassifiedOutput>* classified = nullptr);

// Triton's ModelConfig message for a served configuration: name, platform, backend,
// max_batch_size, inputs, outputs, instance group, dynamic batching and parameters.
void fill_model_config(const ModelConfig& c, inference::ModelConfig* out);

// The statistics extension: appends one entry to `out` per element of `stats`
// (ServerCore::statistics()). Names are sent as valid UTF-8, as over HTTP.
void fill_statistics(const std::vector<ModelStatistics>& stats, inference::ModelStatisticsResponse* out);

}  // namespace streamline::serve
