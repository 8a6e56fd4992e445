#pragma once
// A served model's configuration, in the shape Triton users write it (config.pbtxt).
//
//   SL_ASSIGN_OR_RETURN(ModelConfig c, parse_model_config(text, "models/resnet/config.pbtxt"));
//   ModelConfig d = derive_model_config("resnet", model);     // no config.pbtxt: from the model
//   SL_RETURN_IF_ERROR(check_config_against_model(c, model)); // names, dtypes, dims agree
//   ServingOptions so = serving_options(c);                   // what the runtime needs
//   std::string json = model_config_json(c);                  // GET .../config
//
// Fields read: name, platform, backend, version_policy, max_batch_size, input/output (name,
// data_type, dims, label_filename; reshape ignored), model_transaction_policy, instance_group (count, kind),
// dynamic_batching (preferred_batch_size, max_queue_delay_microseconds, priority_levels, default_priority_level,
// default_queue_policy, preserve_ordering), parameters { key: "streams" value: { string_value: "2" } } for our own
// options (streams, threads, threads_per_stream, elastic_threads, split_convs, winograd,
// cuda_graphs, precision, pin, warmup, admission) and latency_slo_ms (the latency objective that
// admission refuses requests against), and generate, max_new_tokens, eos_token_id for a greedy
// generator (serve/generate.h). Unknown fields are ignored, with a warning.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "streamline/serving.h"
#include "streamline/streamline.h"

namespace streamline::serve {

struct TensorConfig {
  std::string name;
  DType dtype = DType::kUndefined;
  // Without the batch dimension when max_batch_size > 0 (Triton's convention); -1 = any.
  std::vector<int64_t> dims;
  // Outputs: a file of class labels, one a line, in the model folder (classification's labels).
  std::string label_filename;
};

// Which version folders a model serves (Triton's version_policy).
enum class VersionPolicyKind { kLatest, kAll, kSpecific };

struct ModelConfig {
  std::string name;
  std::string platform;  // "onnxruntime_onnx" or ""
  std::string backend;   // "streamline", "onnxruntime" or ""
  // 0: the model has no batch dimension the server may use; > 0: the first model dim is the batch
  // and requests carry [rows, dims...] with rows <= max_batch_size.
  int max_batch_size = 0;
  std::vector<TensorConfig> inputs, outputs;
  int instance_count = 1;
  std::string instance_kind = "KIND_CPU";  // KIND_CPU, KIND_GPU or KIND_AUTO
  std::vector<int> gpus;                   // KIND_GPU: the GPUs listed (empty = every visible GPU)
  bool instance_group_given = false;       // the file had instance_group (else repository defaults)
  bool dynamic_batching = false;           // a dynamic_batching { } block was present
  // Filled from dynamic_batching and max_batch_size. Priorities are 0-based here (0 = highest);
  // the file's priority_levels/default_priority_level are Triton's 1-based ones.
  BatchPolicy batching;
  std::map<std::string, std::string> parameters;
  // version_policy: the latest `latest_versions` version folders (default 1), all of them, or the
  // listed ones.
  VersionPolicyKind version_policy = VersionPolicyKind::kLatest;
  int latest_versions = 1;
  std::vector<int64_t> specific_versions;
  // model_transaction_policy { decoupled: true }: a request may get several responses, one per row
  // of its outputs' first dimension (or one per token of a generator, serve/generate.h); only
  // ModelStreamInfer serves such a model.
  bool decoupled = false;
};

// Largest config.pbtxt accepted (bytes).
inline constexpr size_t kMaxConfigBytes = 4u << 20;
// Deepest nesting of messages and lists ('{', '<', '[') accepted in config.pbtxt. Triton's
// deepest configurations nest about 6 levels; the limit keeps a hostile file (an unknown field
// nested 20,000 deep) from exhausting the stack of the parser, which skips unknown fields
// recursively.
inline constexpr int kMaxConfigNesting = 64;

// Parses config.pbtxt text (protobuf text format). `where` names the file in errors:
// InvalidArgument "where: line 4: ...". Unknown fields are ignored (a warning each, the first
// few logged). Text over kMaxConfigBytes or nested deeper than kMaxConfigNesting is refused
// before parsing.
[[nodiscard]] Result<ModelConfig> parse_model_config(const std::string& text, const std::string& where);
// The same from the JSON form of a configuration (Triton's load override: the "config" parameter
// of a load request), with the same checks; unknown fields are ignored.
[[nodiscard]] Result<ModelConfig> parse_model_config_json(const std::string& json, const std::string& where);
// A configuration derived from the model alone: its inputs and outputs; max_batch_size 8 with
// dynamic batching off when every input's first dimension is symbolic, else 0.
ModelConfig derive_model_config(const std::string& name, const Model& model);
// Fills what the file left out (inputs/outputs, dtypes) from the model and checks the rest:
// every configured tensor exists with the same dtype and compatible dims. InvalidArgument naming
// the tensor otherwise.
[[nodiscard]] Status complete_config(ModelConfig& config, const Model& model);
// Options for the runtime: instances, batching, threads from parameters["threads"].
ServingOptions serving_options(const ModelConfig& config);
// ModelOptions from the parameters listed at the top of this file (and instance_group's kind).
ModelOptions model_options(const ModelConfig& config);
// The configuration as JSON, with Triton's field names (for GET /v2/models/<m>/config).
std::string model_config_json(const ModelConfig& config);

// KServe v2 datatype names: "FP32", "INT64", "BOOL", "UINT8", "FP16", ... ; kUndefined if unknown.
DType dtype_from_kserve(const std::string& name);
const char* dtype_to_kserve(DType t);  // "" for a dtype KServe has no name for
// Triton config names: "TYPE_FP32", "TYPE_INT64", ...
DType dtype_from_config(const std::string& name);
const char* dtype_to_config(DType t);

}  // namespace streamline::serve
