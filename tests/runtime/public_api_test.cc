// The public API's process-level parts: models from bytes with their metadata, traces of runs,
// the device list and the log threshold.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "graph/onnx_test_models.h"
#include "runtime/device.h"
#include "streamline/streamline.h"

namespace streamline {
namespace {

using graph::testing::OnnxModel;

// y = a + b over float32 [N, 4] (N symbolic), with every metadata field the API reports set.
std::string add_model_bytes() {
  OnnxModel m(13);
  m.input("a", onnx::TensorProto::FLOAT, {"N", "4"});
  m.input("b", onnx::TensorProto::FLOAT, {"N", "4"});
  m.node("Add", "add", {"a", "b"}, {"y"});
  m.output("y", onnx::TensorProto::FLOAT, {"N", "4"});
  onnx::ModelProto& p = m.model();
  p.set_producer_name("unit-test-exporter");
  p.set_producer_version("3.2.1");
  p.set_domain("org.example.tests");
  p.set_doc_string("adds two tensors");
  p.set_model_version(7);
  p.mutable_graph()->set_name("adder");
  p.mutable_graph()->set_doc_string("the main graph");
  auto* prop = p.add_metadata_props();
  prop->set_key("labels");
  prop->set_value("a,b,c");
  prop = p.add_metadata_props();
  prop->set_key("author");
  prop->set_value("tests");
  return m.bytes();
}

TEST(PublicApiTest, LoadBytesKeepsMetadataAndSymbols) {
  auto m = Model::load_bytes(add_model_bytes());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const ModelMetadata& md = (*m)->metadata();
  EXPECT_EQ(md.producer_name, "unit-test-exporter");
  EXPECT_EQ(md.producer_version, "3.2.1");
  EXPECT_EQ(md.domain, "org.example.tests");
  EXPECT_EQ(md.description, "adds two tensors");
  EXPECT_EQ(md.graph_name, "adder");
  EXPECT_EQ(md.graph_description, "the main graph");
  EXPECT_EQ(md.version, 7);
  EXPECT_EQ(md.custom, (std::map<std::string, std::string>{{"labels", "a,b,c"}, {"author", "tests"}}));
  ASSERT_EQ((*m)->inputs().size(), 2u);
  EXPECT_EQ((*m)->inputs()[0].dims, (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ((*m)->inputs()[0].symbols, (std::vector<std::string>{"N", ""}));
}

TEST(PublicApiTest, LoadBytesRunsLikeAFile) {
  const std::string bytes = add_model_bytes();
  const auto path = std::filesystem::temp_directory_path() / "sl_public_api_add.onnx";
  std::ofstream(path, std::ios::binary) << bytes;
  auto from_file = Model::load(path.string());
  auto from_bytes = Model::load_bytes(bytes);
  std::filesystem::remove(path);
  ASSERT_TRUE(from_file.ok() && from_bytes.ok());
  Tensor a = Tensor::from_vector<float>(Shape{2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor b = Tensor::from_vector<float>(Shape{2, 4}, {10, 20, 30, 40, 50, 60, 70, 80});
  Session s1(*from_file), s2(*from_bytes);
  auto y1 = s1.run(std::vector<Tensor>{a, b});
  auto y2 = s2.run(std::vector<Tensor>{a, b});
  ASSERT_TRUE(y1.ok() && y2.ok()) << y2.status().to_string();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ((*y2)[0].data<float>()[i], (*y1)[0].data<float>()[i]);
    EXPECT_EQ((*y2)[0].data<float>()[i], 11.f * static_cast<float>(i + 1));
  }
}

TEST(PublicApiTest, LoadBytesRefusesBadBytesNamingThem) {
  auto empty = Model::load_bytes("");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("model bytes"), std::string::npos) << empty.status().to_string();
  auto junk = Model::load_bytes("this is not a protobuf");
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(junk.status().message().find("cannot parse"), std::string::npos) << junk.status().to_string();
}

TEST(PublicApiTest, TraceRecordsEachStepOfEachRun) {
  auto m = Model::load_bytes(add_model_bytes());
  ASSERT_TRUE(m.ok());
  Session s(*m);
  Trace trace;
  EXPECT_EQ(trace.slices(), 0u);
  RunOptions ro;
  ro.observer = trace.observer();
  Tensor a = Tensor::from_vector<float>(Shape{1, 4}, {1, 2, 3, 4});
  ASSERT_TRUE(s.run(std::vector<Tensor>{a, a}, ro).ok());
  const size_t one_run = trace.slices();
  EXPECT_GE(one_run, 1u);
  ASSERT_TRUE(s.run(std::vector<Tensor>{a, a}, ro).ok());
  EXPECT_EQ(trace.slices(), 2 * one_run);
  const std::string json = trace.to_json();
  EXPECT_NE(json.find("traceEvents"), std::string::npos);
  EXPECT_NE(json.find("Add"), std::string::npos) << json;
  Status bad = trace.write("/nonexistent-folder/trace.json");
  EXPECT_EQ(bad.code(), StatusCode::kUnavailable);
  EXPECT_NE(bad.message().find("/nonexistent-folder/trace.json"), std::string::npos);
}

TEST(PublicApiTest, AvailableDevicesListCpuThenEachGpu) {
  const std::vector<std::string> devices = available_devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices[0], "cpu");
  const int gpus = runtime::cuda_built() ? runtime::cuda_device_count() : 0;
  ASSERT_EQ(devices.size(), static_cast<size_t>(1 + gpus));
  for (int i = 0; i < gpus; ++i) EXPECT_EQ(devices[static_cast<size_t>(i + 1)], "cuda:" + std::to_string(i));
}

TEST(PublicApiTest, LogSeveritySetsTheProcessThreshold) {
  const LogSeverity before = log_severity();
  set_log_severity(LogSeverity::kError);
  EXPECT_EQ(log_severity(), LogSeverity::kError);
  set_log_severity(LogSeverity::kDebug);
  EXPECT_EQ(log_severity(), LogSeverity::kDebug);
  set_log_severity(before);
  EXPECT_EQ(log_severity(), before);
}

}  // namespace
}  // namespace streamline
