#pragma once
// KServe v2 inference requests and responses in their HTTP/REST form: a JSON document, or the
// binary tensor extension (a JSON header of Inference-Header-Content-Length bytes followed by the
// raw tensors). Used by HttpServer; kept apart from the sockets so it can be tested on its own.
//
//   auto header_len = parse_header_length(req["Inference-Header-Content-Length"], body.size());
//   SL_ASSIGN_OR_RETURN(DecodedInfer d, decode_infer_request(body, *header_len));
//   core.infer(model, version, std::move(d.request), ...);
//   EncodedInfer out = encode_infer_response(d, model, served_version, response);
//
// Everything a client sends is validated: a malformed document, a wrong shape, a datatype we do
// not hold, a truncated binary part all give InvalidArgument naming what is wrong. Never throws.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "serve/shared_memory.h"
#include "streamline/serving.h"

namespace streamline::serve {

// An output the client asked for, and whether it wants the raw bytes rather than JSON numbers.
struct RequestedOutput {
  std::string name;
  bool binary = false;
  // parameters.shared_memory_region (and _offset, _byte_size): written there, not in the body.
  std::optional<ShmRef> shm;
  // parameters.classification: the top class_count classes as BYTES (classification.h); 0 = off.
  int64_t class_count = 0;
};

// What the encoder needs to know of the model for classification outputs.
struct EncodeOptions {
  const std::map<std::string, std::vector<std::string>>* labels = nullptr;  // per output
  bool batched = false;  // max_batch_size > 0: dim 0 of every output is the batch
};

struct DecodedInfer {
  InferRequest request;           // inputs, requested outputs, priority, timeout; id left to the caller
  std::optional<std::string> id;  // the document's "id", echoed in the response
  // Outputs as listed in the request ("outputs"); empty = every model output.
  std::vector<RequestedOutput> outputs;
  // parameters.binary_data_output: outputs not listed (or listed without binary_data) come back raw.
  bool binary_default = false;
  // Inputs whose data is in a shared memory region (read with SharedMemoryRegistry::read_inputs).
  std::vector<ShmInput> shm_inputs;
};

// Parses the Inference-Header-Content-Length value: nullopt when `value` is empty (the whole body
// is JSON); InvalidArgument unless it is a decimal integer no larger than the body.
[[nodiscard]] Result<std::optional<size_t>> parse_header_length(std::string_view value, size_t body_size);

// Decodes a request body. `header_length` as parse_header_length returns it: the first bytes are
// JSON and the rest are the binary inputs, in the order of the inputs that declare
// parameters.binary_data_size; their sizes must add up to exactly what follows the header.
// Priority follows Triton's convention: 0 = the model's default, 1 = highest (InferRequest 0).
// An input's "data" is flat (numel values) or nested exactly as its shape; ragged lists are refused.
// The JSON is read in one streaming pass (http_decode.cc): the values go straight into the tensors,
// so memory is the body plus the tensors, and unknown members are skipped whatever their size.
[[nodiscard]] Result<DecodedInfer> decode_infer_request(std::string_view body, std::optional<size_t> header_length);

struct EncodedInfer {
  std::string body;
  // > 0 when raw output bytes follow the JSON header (send Inference-Header-Content-Length).
  std::optional<size_t> header_length;
};

// Encodes a successful response: {"model_name", "model_version", "id"?, "outputs": [...]}. Outputs
// come in the request's order when it listed them, else by name. An output requested into shared
// memory has been written there already: it carries only its parameters (region and byte size).
// Outputs with class_count come as BYTES (JSON strings, or length-prefixed in binary).
[[nodiscard]] Result<EncodedInfer> encode_infer_response(const DecodedInfer& request, const std::string& model,
                                                         const std::string& version, const InferResponse& response,
                                                         const EncodeOptions& options = {});

// {"error": "<message>"} with the message escaped (and made valid UTF-8).
std::string error_json(std::string_view message);

// Parses an optional JSON object body ({} when empty); InvalidArgument when it is not an object.
// Returns the value of the boolean member `key` (false when absent).
[[nodiscard]] Result<bool> parse_bool_member(std::string_view body, const char* key);

}  // namespace streamline::serve
