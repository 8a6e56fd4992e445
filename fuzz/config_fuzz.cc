// libFuzzer target for config.pbtxt: any text gives a ModelConfig or InvalidArgument/Unsupported
// naming the file, never a crash or a stack overflow (deep nesting, huge numbers, unknown fields,
// lists where scalars belong). An accepted configuration goes on through what the server does
// with one: the runtime options, the JSON of GET .../config and the gRPC ModelConfig message.
// Run scripts/fuzz.sh.

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "grpc_service.pb.h"
#include "serve/grpc_codec.h"
#include "serve/model_config.h"

using namespace streamline;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<serve::ModelConfig> c = serve::parse_model_config(text, "m/config.pbtxt");
  if (!c.ok()) {
    const StatusCode code = c.status().code();
    fuzz::require(code == StatusCode::kInvalidArgument || code == StatusCode::kUnsupported,
                  "a refused config is InvalidArgument or Unsupported");
    fuzz::require(c.status().message().rfind("m/config.pbtxt", 0) == 0, "a config error names the file first");
    return 0;
  }
  fuzz::require(c->max_batch_size >= 0 && c->instance_count >= 1, "an accepted config has sane counts");
  ServingOptions so = serve::serving_options(*c);
  ModelOptions mo = serve::model_options(*c);
  (void)so;
  (void)mo;
  const std::string json = serve::model_config_json(*c);
  fuzz::require(!json.empty() && json.front() == '{', "the config JSON is an object");
  inference::ModelConfig proto;
  serve::fill_model_config(*c, &proto);
  return 0;
}
