// config.pbtxt parsing (a full Triton-style file, broken ones with their line numbers), the
// configuration derived from or completed against a model, and the options and JSON made from it.

#include "serve/model_config.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "runtime/device.h"
#include "serve_test_util.h"

namespace streamline::serve {
namespace {

using testing::TempRepo;

const char* kFullConfig = R"(# A configuration as Triton users write it.
name: "resnet"
platform: "onnxruntime_onnx"
max_batch_size: 16
version_policy: { latest: { num_versions: 1 } }
input [
  {
    name: "input"
    data_type: TYPE_FP32
    format: FORMAT_NCHW
    dims: [ 3, 224, 224 ]
  }
]
output [
  {
    name: "output"
    data_type: TYPE_FP32
    dims: [ 1000 ]
    label_filename: "labels.txt"
  },
  {
    name: "features"
    data_type: TYPE_FP16
    dims: [ -1 ]
  }
]
instance_group [
  { count: 2 kind: KIND_CPU },
  { kind: KIND_CPU }
]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy {
    timeout_action: DELAY
    default_timeout_microseconds: 5000
    allow_timeout_override: true
    max_queue_size: 64
  }
}
optimization { execution_accelerators { cpu_execution_accelerator: [ { name: "openvino" } ] } }
model_warmup [ { name: "w" batch_size: 1 inputs { key: "input" value: { dims: [ 3 ] zero_data: true } } } ]
ensemble_scheduling { step [ { model_name: "a" input_map { key: "x" value: "y" } }, { model_name: "b" } ] }
parameters { key: "streams" value: { string_value: "2" } }
parameters { key: "threads" value: { string_value: "4" } }
parameters { key: "threads_per_stream" value: { string_value: "2" } }
parameters { key: "pin" value: { string_value: "true" } }
parameters { key: "some_backend_option" value: { string_value: "x" } }
)";

TEST(ModelConfig, ParsesTritonExample) {
  auto r = parse_model_config(kFullConfig, "resnet/config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.name, "resnet");
  EXPECT_EQ(c.platform, "onnxruntime_onnx");
  EXPECT_EQ(c.max_batch_size, 16);
  ASSERT_EQ(c.inputs.size(), 1u);
  EXPECT_EQ(c.inputs[0].name, "input");
  EXPECT_EQ(c.inputs[0].dtype, DType::kFloat32);
  EXPECT_EQ(c.inputs[0].dims, (std::vector<int64_t>{3, 224, 224}));
  ASSERT_EQ(c.outputs.size(), 2u);
  EXPECT_EQ(c.outputs[0].dims, (std::vector<int64_t>{1000}));
  EXPECT_EQ(c.outputs[1].dtype, DType::kFloat16);
  EXPECT_EQ(c.outputs[1].dims, (std::vector<int64_t>{-1}));
  EXPECT_TRUE(c.instance_group_given);
  EXPECT_EQ(c.instance_count, 3);  // 2 + an unset count of 1
  EXPECT_EQ(c.instance_kind, "KIND_CPU");
  EXPECT_TRUE(c.dynamic_batching);
  EXPECT_EQ(c.batching.max_batch_size, 16);
  EXPECT_EQ(c.batching.preferred_batch_sizes, (std::vector<int>{4, 8}));
  EXPECT_EQ(c.batching.max_queue_delay_us, 100);
  EXPECT_TRUE(c.batching.preserve_ordering);
  EXPECT_EQ(c.batching.priority_levels, 3);
  EXPECT_EQ(c.batching.default_priority, 1);  // Triton's level 2, counted from 0
  EXPECT_EQ(c.batching.queue.timeout_action, TimeoutAction::kDelay);
  EXPECT_EQ(c.batching.queue.default_timeout_us, 5000);
  EXPECT_TRUE(c.batching.queue.allow_timeout_override);
  EXPECT_EQ(c.batching.queue.max_queue_size, 64);
  EXPECT_EQ(c.parameters.at("streams"), "2");

  const ServingOptions so = serving_options(c);
  EXPECT_EQ(so.instances, 3);
  EXPECT_EQ(so.batching.max_batch_size, 16);
  EXPECT_EQ(so.batching.preferred_batch_sizes, (std::vector<int>{4, 8}));
  EXPECT_EQ(so.threads_per_instance, 4);
  EXPECT_TRUE(so.pin);
  const ModelOptions mo = model_options(c);
  EXPECT_EQ(mo.num_streams, 2);
  EXPECT_EQ(mo.num_threads, 4);
  EXPECT_EQ(mo.threads_per_stream, 2);
  EXPECT_TRUE(mo.pin_threads);
}

TEST(ModelConfig, EmptyFileGivesDefaults) {
  auto r = parse_model_config("", "config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->max_batch_size, 0);
  EXPECT_FALSE(r->dynamic_batching);
  EXPECT_FALSE(r->instance_group_given);
  const ServingOptions so = serving_options(*r);
  EXPECT_EQ(so.instances, 1);
  EXPECT_EQ(so.batching.max_batch_size, 1);
  EXPECT_EQ(so.threads_per_instance, 0);
  EXPECT_EQ(model_options(*r).num_streams, 1);
}

TEST(ModelConfig, WithoutDynamicBatchingEachRequestRunsAsIs) {
  auto r = parse_model_config("max_batch_size: 8\n", "config.pbtxt");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->max_batch_size, 8);
  EXPECT_EQ(serving_options(*r).batching.max_batch_size, 1);
}

// The latency objective that admission holds requests to, in milliseconds with decimals; admission
// is on unless the config turns it off, and a bad value is an error naming the parameter.
TEST(ModelConfig, LatencyObjectiveAndAdmission) {
  auto r =
      parse_model_config("parameters { key: \"latency_slo_ms\" value: { string_value: \"12.5\" } }\n", "config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ServingOptions so = serving_options(*r);
  EXPECT_EQ(so.batching.queue.latency_objective_us, 12'500);
  EXPECT_TRUE(so.batching.queue.admission);
  r = parse_model_config("parameters { key: \"admission\" value: { string_value: \"false\" } }\n", "config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  so = serving_options(*r);
  EXPECT_FALSE(so.batching.queue.admission);
  EXPECT_EQ(so.batching.queue.latency_objective_us, 0);
  for (const char* bad : {"0", "-3", "fast", "1e9"}) {
    auto b = parse_model_config(
        std::string("parameters { key: \"latency_slo_ms\" value: { string_value: \"") + bad + "\" } }\n",
        "m/config.pbtxt");
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("latency_slo_ms"), std::string::npos) << b.status().message();
  }
}

// The online controller: on with a latency objective unless `controller` says false; its window
// in milliseconds (default 1 s); bad values are errors naming the parameter.
TEST(ModelConfig, ControllerFollowsTheLatencyObjective) {
  auto param = [](const char* key, const char* value) {
    return std::string("parameters { key: \"") + key + "\" value: { string_value: \"" + value + "\" } }\n";
  };
  auto r = parse_model_config("name: \"m\"\n" + param("latency_slo_ms", "20"), "config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ServingOptions so = serving_options(*r);
  EXPECT_TRUE(so.controller.enabled);
  EXPECT_EQ(so.controller.window_us, 1'000'000);
  EXPECT_EQ(so.controller.name, "m");
  r = parse_model_config(
      param("latency_slo_ms", "20") + param("controller", "false") + param("control_window_ms", "250"), "config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  so = serving_options(*r);
  EXPECT_FALSE(so.controller.enabled);
  EXPECT_EQ(so.controller.window_us, 250'000);
  r = parse_model_config(param("controller", "true"), "config.pbtxt");  // no objective: nothing to steer by
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(serving_options(*r).controller.enabled);
  for (auto [key, bad] : {std::pair{"controller", "sometimes"}, std::pair{"control_window_ms", "0"},
                          std::pair{"control_window_ms", "soon"}}) {
    auto b = parse_model_config(param(key, bad), "m/config.pbtxt");
    ASSERT_FALSE(b.ok()) << key << "=" << bad;
    EXPECT_NE(b.status().message().find(key), std::string::npos) << b.status().message();
  }
}

struct Broken {
  const char* text;
  StatusCode code;
  const char* expect;  // a substring of the message
};

TEST(ModelConfig, BrokenFilesNameTheLine) {
  const Broken cases[] = {
      // Syntax and unknown enum values: the parser's own errors, located.
      {"name: \"m\"\nmax_batch_size: 4\ninput [ { name: \"x\" data_type: TYPE_FOO } ]\n", StatusCode::kInvalidArgument,
       "config.pbtxt: line 3 col"},
      {"name: \"m\"\ninput [ { name: \"x\" \n", StatusCode::kInvalidArgument, "config.pbtxt: line 3"},
      {"max_batch_size: \"eight\"\n", StatusCode::kInvalidArgument, "config.pbtxt: line 1"},
      {"name: \"a\"\nname: \"b\"\n", StatusCode::kInvalidArgument, "config.pbtxt: line 2"},
      // Values the parser accepts and we refuse, located at the field.
      {"name: \"m\"\nmax_batch_size: -1\n", StatusCode::kInvalidArgument,
       "config.pbtxt: line 2 col 1: max_batch_size must be >= 0"},
      {"max_batch_size: 8\ndynamic_batching {\n  preferred_batch_size: [ 4, 16 ]\n}\n", StatusCode::kInvalidArgument,
       "line 3 col 3: preferred_batch_size 16 is outside [1, max_batch_size=8]"},
      {"max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4, 4 ] }\n", StatusCode::kInvalidArgument,
       "given twice"},
      {"dynamic_batching { }\n", StatusCode::kInvalidArgument,
       "line 1 col 1: dynamic_batching needs max_batch_size >= 1"},
      {"max_batch_size: 8\ndynamic_batching {\n priority_levels: 3\n default_priority_level: 5\n}\n",
       StatusCode::kInvalidArgument, "line 4 col 2: default_priority_level must be in [1, priority_levels=3]"},
      {"instance_group [\n  { count: 1 },\n  { count: 0 }\n]\n", StatusCode::kInvalidArgument,
       "line 3 col 5: instance_group count must be >= 1"},
      {"instance_group [ { kind: KIND_GPU gpus: [ -1 ] } ]\n",
       runtime::cuda_built() ? StatusCode::kInvalidArgument : StatusCode::kUnsupported,
       runtime::cuda_built() ? "gpus must be >= 0" : "KIND_GPU"},
      {"input [ { name: \"x\" dims: [ 3, 0 ] } ]\n", StatusCode::kInvalidArgument,
       "line 1 col 21: input 'x': dims entries must be -1 or >= 1, got 0"},
      {"input [ { name: \"x\" }, { name: \"x\" } ]\n", StatusCode::kInvalidArgument, "input 'x' is given twice"},
      {"output [ { data_type: TYPE_FP32 } ]\n", StatusCode::kInvalidArgument, "output 0: name is missing"},
      {"platform: \"tensorrt_plan\"\n", StatusCode::kUnsupported, "platform 'tensorrt_plan'"},
      {"backend: \"python\"\n", StatusCode::kUnsupported, "backend 'python'"},
      {"parameters { key: \"threads\" value: { string_value: \"many\" } }\n", StatusCode::kInvalidArgument,
       "parameters[\"threads\"]: expected an integer in [0, 1024], got 'many'"},
      {"parameters { key: \"streams\" value: { string_value: \"0\" } }\n", StatusCode::kInvalidArgument,
       "parameters[\"streams\"]"},
      {"parameters { key: \"pin\" value: { string_value: \"maybe\" } }\n", StatusCode::kInvalidArgument,
       "parameters[\"pin\"]: expected true or false"},
      {"parameters { key: \"precision\" value: { string_value: \"fp64\" } }\n", StatusCode::kInvalidArgument,
       "parameters[\"precision\"]: unknown precision 'fp64'"},
  };
  for (const auto& b : cases) {
    auto r = parse_model_config(b.text, "config.pbtxt");
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().code(), b.code) << b.text << " -> " << r.status().to_string();
    EXPECT_NE(r.status().message().find(b.expect), std::string::npos)
        << b.text << " -> " << r.status().message() << "\nexpected: " << b.expect;
  }
}

TEST(ModelConfig, GpuInstancesChooseTheCudaDevice) {
  auto r = parse_model_config(
      "instance_group [ { kind: KIND_GPU count: 2 gpus: [ 1 ] } ]\n"
      "parameters { key: \"precision\" value: { string_value: \"fp16\" } }\n"
      "parameters { key: \"cuda_graphs\" value: { string_value: \"false\" } }\n",
      "config.pbtxt");
  if (!runtime::cuda_built()) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
    return;
  }
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelOptions mo = model_options(*r);
  EXPECT_EQ(mo.device, "cuda:1");
  EXPECT_EQ(mo.precision, ops::Precision::kFp16);
  EXPECT_FALSE(mo.cuda_graphs);
  auto all = parse_model_config("instance_group [ { kind: KIND_GPU count: 4 } ]\n", "config.pbtxt");
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(model_options(*all).device, "cuda");
  EXPECT_EQ(all->instance_count, 4);
}

TEST(ModelConfig, WinogradParameter) {
  auto on = parse_model_config("instance_group [ { kind: KIND_CPU count: 1 } ]\n", "config.pbtxt");
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  EXPECT_TRUE(model_options(*on).winograd);
  auto off =
      parse_model_config("parameters { key: \"winograd\" value: { string_value: \"false\" } }\n", "config.pbtxt");
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_FALSE(model_options(*off).winograd);
  auto bad =
      parse_model_config("parameters { key: \"winograd\" value: { string_value: \"sometimes\" } }\n", "config.pbtxt");
  EXPECT_FALSE(bad.ok());
}

TEST(ModelConfig, SplitConvsParameter) {
  auto off = parse_model_config("instance_group [ { kind: KIND_CPU count: 1 } ]\n", "config.pbtxt");
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_EQ(model_options(*off).split_convs, 0);
  auto two = parse_model_config("parameters { key: \"split_convs\" value: { string_value: \"2\" } }\n", "config.pbtxt");
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  EXPECT_EQ(model_options(*two).split_convs, 2);
  auto bad =
      parse_model_config("parameters { key: \"split_convs\" value: { string_value: \"65\" } }\n", "config.pbtxt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("split_convs"), std::string::npos) << bad.status().to_string();
}

TEST(ModelConfig, UnknownFieldsAreIgnored) {
  auto r = parse_model_config(
      "name: \"m\"\nsequence_batching { max_sequence_idle_microseconds: 5000 }\nresponse_cache { enable: true }\n"
      "max_batch_size: 2\n",
      "config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "m");
  EXPECT_EQ(r->max_batch_size, 2);
}

std::string nested(const std::string& open, const std::string& close, int depth) {
  std::string s = "max_batch_size: 8\n";
  for (int i = 0; i < depth; ++i) s += open;
  for (int i = 0; i < depth; ++i) s += close;
  return s + "\n";
}

// An unknown field nested 20,000 deep (about 100 KB) used to exhaust the stack of protobuf's
// recursive skipping of unknown fields: now it is refused before parsing, located.
TEST(ModelConfig, DeepNestingIsRefusedNotACrash) {
  const std::pair<std::string, std::string> kinds[] = {{"foo { ", "} "}, {"foo < ", "> "}, {"foo: [ ", "] "}};
  for (const auto& [open, close] : kinds) {
    auto r = parse_model_config(nested(open, close, 20000), "deep/config.pbtxt");
    ASSERT_FALSE(r.ok()) << open;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    const std::string col = std::to_string(kMaxConfigNesting * open.size() + open.size() - 1);
    EXPECT_EQ(r.status().message(), "deep/config.pbtxt: line 2 col " + col + ": nested deeper than " +
                                        std::to_string(kMaxConfigNesting) + " levels")
        << open;
  }
  // A known field nested deeper than its message allows is refused the same way.
  std::string known = "dynamic_batching { default_queue_policy { ";
  for (int i = 0; i < 2 * kMaxConfigNesting; ++i) known += "x { ";
  EXPECT_NE(parse_model_config(known, "c").status().message().find("nested deeper than"), std::string::npos);
}

TEST(ModelConfig, NestingUpToTheLimitIsFine) {
  auto r = parse_model_config(nested("foo { ", "} ", kMaxConfigNesting), "config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();  // unknown, ignored
  EXPECT_EQ(r->max_batch_size, 8);
  EXPECT_FALSE(parse_model_config(nested("foo { ", "} ", kMaxConfigNesting + 1), "config.pbtxt").ok());
  // Brackets inside strings and comments do not nest.
  const std::string brackets(10000, '{');
  auto quoted = parse_model_config("name: \"" + brackets + "\"\n# " + brackets + "\nmax_batch_size: 2\n", "c");
  ASSERT_TRUE(quoted.ok()) << quoted.status().to_string();
  EXPECT_EQ(quoted->name, brackets);
  EXPECT_EQ(quoted->max_batch_size, 2);
}

TEST(ModelConfig, OversizedTextIsRefused) {
  const std::string big = "# " + std::string(kMaxConfigBytes, 'x') + "\nmax_batch_size: 8\n";
  auto r = parse_model_config(big, "big/config.pbtxt");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message().rfind("big/config.pbtxt: " + std::to_string(big.size()) + " bytes; at most 4 MiB", 0),
            0u)
      << r.status().message();
}

TEST(ModelConfig, ListsWithAndWithoutColon) {
  auto r = parse_model_config(
      "# input [ in a comment\n"
      "name: \"a [b\"\n"
      "input[{ name: \"x\" dims: [ 2 ] }]\n"
      "output: [ { name: \"y\" } ]\n"
      "batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: \"n\" source_input: [ \"x\" ] } ]\n",
      "config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->name, "a [b");
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].dims, (std::vector<int64_t>{2}));
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].name, "y");
}

TEST(ModelConfig, DtypeNames) {
  const DType all[] = {DType::kBool,    DType::kUInt8,   DType::kUInt16,   DType::kUInt32, DType::kUInt64,
                       DType::kInt8,    DType::kInt16,   DType::kInt32,    DType::kInt64,  DType::kFloat16,
                       DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kString};
  for (DType t : all) {
    EXPECT_EQ(dtype_from_kserve(dtype_to_kserve(t)), t) << dtype_name(t);
    EXPECT_EQ(dtype_from_config(dtype_to_config(t)), t) << dtype_name(t);
  }
  EXPECT_STREQ(dtype_to_kserve(DType::kFloat32), "FP32");
  EXPECT_STREQ(dtype_to_kserve(DType::kString), "BYTES");
  EXPECT_STREQ(dtype_to_config(DType::kInt64), "TYPE_INT64");
  EXPECT_STREQ(dtype_to_kserve(DType::kUndefined), "");
  EXPECT_EQ(dtype_from_kserve("FLOAT32"), DType::kUndefined);
  EXPECT_EQ(dtype_from_config("TYPE_NOPE"), DType::kUndefined);
}

class ConfigAgainstModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.write("batched.onnx", testing::matmul_relu_onnx());
    dir_.write("fixed.onnx", testing::fixed_relu_onnx());
    auto b = Model::load(dir_.path() + "/batched.onnx");
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    batched_ = *b;
    auto f = Model::load(dir_.path() + "/fixed.onnx");
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    fixed_ = *f;
  }
  ModelConfig parse(const std::string& text) {
    auto r = parse_model_config(text, "config.pbtxt");
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : ModelConfig{};
  }
  TempRepo dir_;
  std::shared_ptr<Model> batched_, fixed_;
};

TEST_F(ConfigAgainstModel, DeriveBatchable) {
  const ModelConfig c = derive_model_config("mm", *batched_);
  EXPECT_EQ(c.name, "mm");
  EXPECT_EQ(c.max_batch_size, 8);
  EXPECT_FALSE(c.dynamic_batching);
  ASSERT_EQ(c.inputs.size(), 1u);
  EXPECT_EQ(c.inputs[0].name, "x");
  EXPECT_EQ(c.inputs[0].dtype, DType::kFloat32);
  EXPECT_EQ(c.inputs[0].dims, (std::vector<int64_t>{4}));
  ASSERT_EQ(c.outputs.size(), 2u);
  EXPECT_EQ(c.outputs[0].name, "h");
  EXPECT_EQ(c.outputs[1].dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(serving_options(c).batching.max_batch_size, 1);
}

TEST_F(ConfigAgainstModel, DeriveFixed) {
  const ModelConfig c = derive_model_config("fx", *fixed_);
  EXPECT_EQ(c.max_batch_size, 0);
  ASSERT_EQ(c.inputs.size(), 1u);
  EXPECT_EQ(c.inputs[0].dims, (std::vector<int64_t>{2, 4}));
}

TEST_F(ConfigAgainstModel, CompleteFillsWhatIsMissing) {
  ModelConfig c = parse("max_batch_size: 8\ninput [ { name: \"x\" dims: [ 4 ] } ]\noutput [ { name: \"y\" } ]\n");
  ASSERT_TRUE(complete_config(c, *batched_).ok());
  EXPECT_EQ(c.inputs[0].dtype, DType::kFloat32);
  ASSERT_EQ(c.outputs.size(), 2u);
  EXPECT_EQ(c.outputs[0].name, "y");
  EXPECT_EQ(c.outputs[0].dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(c.outputs[1].name, "h");
  EXPECT_EQ(c.outputs[1].dtype, DType::kFloat32);

  ModelConfig unbatched = parse("");
  ASSERT_TRUE(complete_config(unbatched, *batched_).ok());
  ASSERT_EQ(unbatched.inputs.size(), 1u);
  EXPECT_EQ(unbatched.inputs[0].dims, (std::vector<int64_t>{-1, 4}));
}

TEST_F(ConfigAgainstModel, CompleteRefusesWhatDisagrees) {
  const std::pair<const char*, const char*> cases[] = {
      {"max_batch_size: 8\ninput [ { name: \"x\" data_type: TYPE_FP16 dims: [ 4 ] } ]",
       "input 'x': the config says TYPE_FP16, the model has TYPE_FP32"},
      {"max_batch_size: 8\ninput [ { name: \"z\" dims: [ 4 ] } ]", "input 'z': the model has no input of that name"},
      {"max_batch_size: 8\ninput [ { name: \"x\" dims: [ 5 ] } ]", "input 'x': the config's dims [5] do not fit"},
      {"max_batch_size: 8\ninput [ { name: \"x\" dims: [ 1, 4 ] } ]", "input 'x': the config's dims [1,4]"},
      {"max_batch_size: 8\noutput [ { name: \"y\" dims: [ 7 ] } ]", "output 'y'"},
  };
  for (const auto& [text, expect] : cases) {
    ModelConfig c = parse(text);
    Status s = complete_config(c, *batched_);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(expect), std::string::npos) << s.message();
  }
  ModelConfig c = parse("max_batch_size: 4");
  Status s = complete_config(c, *fixed_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not variable"), std::string::npos) << s.message();
}

// default_priority_level is 1-based in the file and in what GET .../config answers, 0-based in
// the batch policy; the first and the last of the most levels a model may have survive both ways.
TEST(ModelConfig, DefaultPriorityLevelEdgesRoundTrip) {
  for (int level : {1, 1024}) {
    const std::string text =
        "max_batch_size: 8\ndynamic_batching {\n priority_levels: 1024\n default_priority_level: " +
        std::to_string(level) + "\n}\n";
    auto c = parse_model_config(text, "config.pbtxt");
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->batching.priority_levels, 1024);
    EXPECT_EQ(c->batching.default_priority, level - 1);
    rapidjson::Document d;
    d.Parse(model_config_json(*c).c_str());
    ASSERT_FALSE(d.HasParseError());
    EXPECT_EQ(d["dynamic_batching"]["default_priority_level"].GetInt(), level);
  }
  auto off = parse_model_config("max_batch_size: 8\ndynamic_batching {\n}\n", "config.pbtxt");
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  rapidjson::Document d;
  d.Parse(model_config_json(*off).c_str());
  ASSERT_FALSE(d.HasParseError());
  EXPECT_EQ(d["dynamic_batching"]["priority_levels"].GetInt(), 0);  // priorities off: both 0, as Triton
  EXPECT_EQ(d["dynamic_batching"]["default_priority_level"].GetInt(), 0);
}

TEST(ModelConfig, JsonUsesTritonNames) {
  auto r = parse_model_config(kFullConfig, "config.pbtxt");
  ASSERT_TRUE(r.ok());
  const std::string json = model_config_json(*r);
  rapidjson::Document d;
  d.Parse(json.c_str());
  ASSERT_FALSE(d.HasParseError()) << json;
  EXPECT_STREQ(d["name"].GetString(), "resnet");
  EXPECT_EQ(d["max_batch_size"].GetInt(), 16);
  ASSERT_EQ(d["input"].Size(), 1u);
  EXPECT_STREQ(d["input"][0]["data_type"].GetString(), "TYPE_FP32");
  ASSERT_EQ(d["input"][0]["dims"].Size(), 3u);
  EXPECT_EQ(d["input"][0]["dims"][2].GetInt64(), 224);
  EXPECT_EQ(d["output"][1]["dims"][0].GetInt64(), -1);
  EXPECT_EQ(d["instance_group"][0]["count"].GetInt(), 3);
  const auto& db = d["dynamic_batching"];
  EXPECT_EQ(db["preferred_batch_size"][1].GetInt(), 8);
  EXPECT_EQ(db["max_queue_delay_microseconds"].GetInt64(), 100);
  EXPECT_EQ(db["priority_levels"].GetInt(), 3);
  EXPECT_EQ(db["default_priority_level"].GetInt(), 2);
  EXPECT_STREQ(db["default_queue_policy"]["timeout_action"].GetString(), "DELAY");
  EXPECT_EQ(db["default_queue_policy"]["max_queue_size"].GetInt(), 64);
  EXPECT_STREQ(d["parameters"]["threads"]["string_value"].GetString(), "4");

  auto plain = parse_model_config("name: \"p\"", "config.pbtxt");
  ASSERT_TRUE(plain.ok());
  rapidjson::Document p;
  p.Parse(model_config_json(*plain).c_str());
  ASSERT_FALSE(p.HasParseError());
  EXPECT_FALSE(p.HasMember("dynamic_batching"));
}

}  // namespace
}  // namespace streamline::serve
