// libFuzzer target for the binary tensor extension: the input is the value of
// Inference-Header-Content-Length on its first line, then the body (a JSON header and the raw
// tensors). parse_header_length and decode_infer_request must give a request or a clear error:
// sizes that do not add up, a header length past the body, a binary_data_size that does not
// match the datatype and shape. A decoded request encodes back with binary outputs. Run
// scripts/fuzz.sh.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "serve/http_codec.h"

using namespace streamline;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  if (eol == std::string_view::npos) return 0;
  const std::string_view value = input.substr(0, eol), body = input.substr(eol + 1);
  Result<std::optional<size_t>> header_length = serve::parse_header_length(value, body.size());
  if (!header_length.ok()) {
    fuzz::require(header_length.status().code() == StatusCode::kInvalidArgument,
                  "a bad header length is InvalidArgument");
    return 0;
  }
  if (*header_length) fuzz::require(**header_length <= body.size(), "the header length is within the body");
  Result<serve::DecodedInfer> d = serve::decode_infer_request(body, *header_length);
  if (!d.ok()) {
    fuzz::require(
        d.status().code() == StatusCode::kInvalidArgument || d.status().code() == StatusCode::kResourceExhausted,
        "a refused binary request is InvalidArgument or ResourceExhausted");
    return 0;
  }
  for (const auto& [name, t] : d->request.inputs)
    fuzz::require(t.nbytes() <= size * 8 + 64, "a tensor is at most a few times the body");
  d->binary_default = true;
  Result<serve::EncodedInfer> e = serve::encode_infer_response(*d, "m", "1", fuzz::echo_response(d->request.inputs));
  if (d->outputs.empty()) {
    fuzz::require(e.ok(), "decoded inputs encode as binary outputs");
    fuzz::require(e->header_length.has_value() && *e->header_length <= e->body.size(),
                  "a binary response's header length is within its body");
  }
  return 0;
}
