// libFuzzer target for the gRPC inference request decoder, from the wire bytes on: the first byte
// says into how many slices the rest is cut (gRPC may deliver a message in several), then
// parse_message reads a ModelInferRequest from them as the server does, and decode_infer_request
// turns it into the runtime's request (raw or typed contents, shapes, parameters). Either step may
// refuse with InvalidArgument; neither may crash, leak or allocate out of proportion to the
// message. A decoded request encodes back as a response. Run scripts/fuzz.sh.

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "grpc_service.pb.h"
#include "serve/grpc_codec.h"

using namespace streamline;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t pieces = 1 + data[0] % 4;
  const uint8_t* msg = data + 1;
  const size_t len = size - 1;
  std::vector<grpc::Slice> slices;
  for (size_t i = 0, at = 0; i < pieces; ++i) {
    const size_t end = i + 1 == pieces ? len : std::min(len, at + len / pieces);
    slices.emplace_back(msg + at, end - at);
    at = end;
  }
  const grpc::ByteBuffer bytes(slices.data(), slices.size());
  inference::ModelInferRequest request;
  if (Status s = serve::parse_message(bytes, &request); !s.ok()) {
    fuzz::require(s.code() == StatusCode::kInvalidArgument, "an unparsable message is InvalidArgument");
    return 0;
  }
  InferRequest decoded;
  if (Status s = serve::decode_infer_request(request, &decoded); !s.ok()) {
    fuzz::require(s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kResourceExhausted,
                  "a refused gRPC request is InvalidArgument or ResourceExhausted");
    return 0;
  }
  for (const auto& [name, t] : decoded.inputs)
    fuzz::require(t.nbytes() <= len * 8 + 64, "a tensor is at most a few times the message");
  inference::ModelInferResponse response;
  Status e = serve::encode_infer_response(fuzz::echo_response(decoded.inputs), {}, &response);
  fuzz::require(e.ok(), "decoded inputs encode as outputs");
  fuzz::require(response.outputs_size() == static_cast<int>(decoded.inputs.size()), "one output per input");
  return 0;
}
