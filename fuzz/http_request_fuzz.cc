// libFuzzer target for the HTTP request reader: the bytes a client sends on one connection,
// read as HttpSession reads them (Beast's parser with our header, body and JSON limits; several
// pipelined requests; a malformed one answered 400, 413 or 431), then each request's path split
// into segments and, for an inference request, its framing checked and its body decoded. The
// first byte picks how many bytes each read of the stream gives and whether the limits are the
// defaults or small ones, so that a limit is reached inside the fuzzer's small inputs. Never a
// crash, a leak or an exception; every refusal is one of the statuses above. Run scripts/fuzz.sh.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "serve/http_codec.h"
#include "serve/http_request.h"

using namespace streamline;
namespace hd = streamline::serve::http_detail;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  constexpr size_t kReadSizes[] = {1, 2, 3, 7, 16, 100, 1000, 4096};
  const size_t read_size = kReadSizes[data[0] & 7];
  hd::RequestLimits limits;
  if (data[0] & 8) limits = {.body = 512, .json = 256};
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<hd::ReadOutcome> outcomes = hd::read_requests(bytes, limits, read_size);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    hd::ReadOutcome& o = outcomes[i];
    if (!o.request) {
      fuzz::require(i + 1 == outcomes.size(), "nothing is read after a refusal or the end of the stream");
      if (o.refusal) {
        const unsigned status = o.refusal->result_int();
        fuzz::require(status == 400 || status == 413 || status == 431, "a read refusal is 400, 413 or 431");
      }
      continue;
    }
    hd::Request& req = *o.request;
    fuzz::require(req.body().size() <= static_cast<size_t>(limits.body), "a body is within the body limit");
    const std::string_view target(req.target().data(), req.target().size());
    Result<std::vector<std::string>> seg = hd::split_target(target);
    if (!seg.ok()) {
      const StatusCode code = seg.status().code();
      fuzz::require(code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound,
                    "a bad path is InvalidArgument or NotFound");
      continue;
    }
    if (req.method() != hd::http::verb::post || seg->empty() || seg->back() != "infer") continue;
    hd::InferFraming framing = hd::infer_framing(req, limits.json);
    if (framing.refusal) {
      const unsigned status = framing.refusal->result_int();
      fuzz::require(status == 400 || status == 413, "a framing refusal is 400 or 413");
      continue;
    }
    if (!framing.header_length)
      fuzz::require(req.body().size() <= static_cast<size_t>(limits.json), "a JSON body is within the JSON limit");
    Result<serve::DecodedInfer> d = serve::decode_infer_request(req.body(), framing.header_length);
    (void)d;
  }
  return 0;
}
