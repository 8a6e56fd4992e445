// libFuzzer target for the KServe v2 JSON request decoder (the body of POST .../infer without the
// binary extension): any bytes give a decoded request or InvalidArgument, never a crash, a leak,
// a hang or an allocation out of proportion to the body. A decoded request goes back through the
// response encoder with its inputs as outputs, which must succeed. Run scripts/fuzz.sh.

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
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Result<serve::DecodedInfer> d = serve::decode_infer_request(body, std::nullopt);
  if (!d.ok()) {
    fuzz::require(
        d.status().code() == StatusCode::kInvalidArgument || d.status().code() == StatusCode::kResourceExhausted,
        "a refused JSON request is InvalidArgument or ResourceExhausted");
    return 0;
  }
  fuzz::require(!d->request.inputs.empty(), "a decoded request has inputs");
  for (const auto& [name, t] : d->request.inputs)
    fuzz::require(t.nbytes() <= size * 8 + 64, "a tensor is at most a few times its JSON text");
  Result<serve::EncodedInfer> e = serve::encode_infer_response(*d, "m", "1", fuzz::echo_response(d->request.inputs));
  if (d->outputs.empty()) fuzz::require(e.ok(), "decoded inputs encode as outputs");
  return 0;
}
