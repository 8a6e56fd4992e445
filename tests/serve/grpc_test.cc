// The KServe v2 gRPC front end end to end: a repository in a temporary folder holding one tiny
// model, a ServerCore, a GrpcServer on a free port, and the generated stub as the client.

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <thread>

#include "graph/onnx_test_models.h"
#include "grpc_service.grpc.pb.h"
#include "serve/echo.h"
#include "serve/grpc_codec.h"
#include "serve/grpc_server.h"
#include "serve/server_core.h"
#include "streamline/streamline.h"

namespace streamline::serve {
namespace {

namespace fs = std::filesystem;
namespace pb = ::inference;
using graph::testing::float_tensor;
using graph::testing::OnnxModel;

constexpr int kIn = 4, kOut = 3;

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// y = Relu(x @ W + b), x [N, 4] with a symbolic batch.
std::string tiny_model_bytes(const std::vector<float>& w, const std::vector<float>& b) {
  OnnxModel m(13);
  m.input("x", onnx::TensorProto::FLOAT, {"N", std::to_string(kIn)});
  m.initializer(float_tensor("W", {kIn, kOut}, w));
  m.initializer(float_tensor("b", {kOut}, b));
  m.node("MatMul", "matmul", {"x", "W"}, {"h"});
  m.node("Add", "add", {"h", "b"}, {"z"});
  m.node("Relu", "relu", {"z"}, {"y"});
  m.output("y", onnx::TensorProto::FLOAT, {"N", std::to_string(kOut)});
  return m.bytes();
}

class GrpcServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() / ("sl_grpc_test_" + std::to_string(::getpid())));
    fs::create_directories(*root_ / "tiny" / "1");
    w_ = random_values(kIn * kOut, 11);
    b_ = random_values(kOut, 12);
    std::ofstream(*root_ / "tiny" / "1" / "model.onnx", std::ios::binary) << tiny_model_bytes(w_, b_);
    std::ofstream(*root_ / "tiny" / "config.pbtxt") << "name: \"tiny\"\n"
                                                    << "max_batch_size: 8\n"
                                                    << "dynamic_batching { max_queue_delay_microseconds: 500 }\n";
    repo_ = new Repository(root_->string(), {});
    ASSERT_TRUE(repo_->load_all().ok());
    ServerOptions so;
    so.allow_model_control = true;  // model control mode "explicit"
    core_ = new ServerCore(*repo_, so);
    server_ = new GrpcServer(*core_, {.host = "127.0.0.1", .port = 0});
    const Status s = server_->start();
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_GT(server_->port(), 0);
  }

  static void TearDownTestSuite() {
    delete server_;
    delete core_;
    delete repo_;
    std::error_code ec;
    fs::remove_all(*root_, ec);
    delete root_;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials());
    stub_ = pb::GRPCInferenceService::NewStub(channel_);
  }

  // The model's answer computed here: Relu(x @ W + b) for `rows` rows.
  static std::vector<float> expected(const std::vector<float>& x, int rows) {
    std::vector<float> y(static_cast<size_t>(rows) * kOut);
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < kOut; ++o) {
        float acc = b_[o];
        for (int i = 0; i < kIn; ++i) acc += x[r * kIn + i] * w_[i * kOut + o];
        y[r * kOut + o] = std::max(acc, 0.f);
      }
    return y;
  }

  static pb::ModelInferRequest raw_request(const std::vector<float>& x, int rows) {
    pb::ModelInferRequest req;
    req.set_model_name("tiny");
    auto* in = req.add_inputs();
    in->set_name("x");
    in->set_datatype("FP32");
    in->add_shape(rows);
    in->add_shape(kIn);
    req.add_raw_input_contents()->assign(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float));
    return req;
  }

  static std::vector<float> output_floats(const pb::ModelInferResponse& resp, int i) {
    const std::string& raw = resp.raw_output_contents(i);
    std::vector<float> v(raw.size() / sizeof(float));
    std::memcpy(v.data(), raw.data(), v.size() * sizeof(float));
    return v;
  }

  grpc::Status infer(const pb::ModelInferRequest& req, pb::ModelInferResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->ModelInfer(&ctx, req, resp);
  }

  static fs::path* root_;
  static std::vector<float> w_, b_;
  static Repository* repo_;
  static ServerCore* core_;
  static GrpcServer* server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::GRPCInferenceService::Stub> stub_;
};

fs::path* GrpcServerTest::root_ = nullptr;
std::vector<float> GrpcServerTest::w_, GrpcServerTest::b_;
Repository* GrpcServerTest::repo_ = nullptr;
ServerCore* GrpcServerTest::core_ = nullptr;
GrpcServer* GrpcServerTest::server_ = nullptr;

TEST_F(GrpcServerTest, LivenessAndReadiness) {
  {
    grpc::ClientContext ctx;
    pb::ServerLiveResponse r;
    ASSERT_TRUE(stub_->ServerLive(&ctx, {}, &r).ok());
    EXPECT_TRUE(r.live());
  }
  {
    grpc::ClientContext ctx;
    pb::ServerReadyResponse r;
    ASSERT_TRUE(stub_->ServerReady(&ctx, {}, &r).ok());
    EXPECT_TRUE(r.ready());
  }
  for (const auto& [name, ready] : std::vector<std::pair<std::string, bool>>{{"tiny", true}, {"nope", false}}) {
    grpc::ClientContext ctx;
    pb::ModelReadyRequest q;
    q.set_name(name);
    pb::ModelReadyResponse r;
    ASSERT_TRUE(stub_->ModelReady(&ctx, q, &r).ok());
    EXPECT_EQ(r.ready(), ready) << name;
  }
}

TEST_F(GrpcServerTest, ServerAndModelMetadata) {
  {
    grpc::ClientContext ctx;
    pb::ServerMetadataResponse r;
    ASSERT_TRUE(stub_->ServerMetadata(&ctx, {}, &r).ok());
    EXPECT_EQ(r.name(), "streamline");
    EXPECT_FALSE(r.version().empty());
  }
  grpc::ClientContext ctx;
  pb::ModelMetadataRequest q;
  q.set_name("tiny");
  pb::ModelMetadataResponse r;
  const grpc::Status s = stub_->ModelMetadata(&ctx, q, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.name(), "tiny");
  ASSERT_EQ(r.versions_size(), 1);
  EXPECT_EQ(r.versions(0), "1");
  ASSERT_EQ(r.inputs_size(), 1);
  EXPECT_EQ(r.inputs(0).name(), "x");
  EXPECT_EQ(r.inputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<int64_t>(r.inputs(0).shape().begin(), r.inputs(0).shape().end()),
            (std::vector<int64_t>{-1, kIn}));
  ASSERT_EQ(r.outputs_size(), 1);
  EXPECT_EQ(r.outputs(0).name(), "y");
  EXPECT_EQ(r.outputs(0).datatype(), "FP32");

  grpc::ClientContext ctx2;
  q.set_name("nope");
  EXPECT_EQ(stub_->ModelMetadata(&ctx2, q, &r).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcServerTest, RawAndTypedInferEqualSessionRun) {
  const int rows = 3;
  const std::vector<float> x = random_values(rows * kIn, 5);
  auto model = Model::load((*root_ / "tiny" / "1" / "model.onnx").string());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  Session session(*model);
  auto ref = session.run({Tensor::from_vector<float>(Shape{rows, kIn}, x)});
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  const std::vector<float> want((*ref)[0].data<float>(), (*ref)[0].data<float>() + rows * kOut);

  pb::ModelInferRequest raw = raw_request(x, rows);
  raw.set_id("req-7");
  pb::ModelInferResponse resp;
  grpc::Status s = infer(raw, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.model_name(), "tiny");
  EXPECT_EQ(resp.model_version(), "1");
  EXPECT_EQ(resp.id(), "req-7");
  ASSERT_EQ(resp.outputs_size(), 1);
  ASSERT_EQ(resp.raw_output_contents_size(), 1);
  EXPECT_EQ(resp.outputs(0).name(), "y");
  EXPECT_EQ(resp.outputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<int64_t>(resp.outputs(0).shape().begin(), resp.outputs(0).shape().end()),
            (std::vector<int64_t>{rows, kOut}));
  const std::vector<float> got = output_floats(resp, 0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
  // The reference computed by hand agrees too, so the model is not trivially zero.
  const std::vector<float> by_hand = expected(x, rows);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], by_hand[i], 1e-5f);

  pb::ModelInferRequest typed;
  typed.set_model_name("tiny");
  auto* in = typed.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(rows);
  in->add_shape(kIn);
  for (float v : x) in->mutable_contents()->add_fp32_contents(v);
  typed.add_outputs()->set_name("y");
  (*typed.mutable_parameters())["priority"].set_uint64_param(1);
  (*typed.mutable_parameters())["timeout"].set_int64_param(5'000'000);
  pb::ModelInferResponse resp2;
  s = infer(typed, &resp2);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp2.raw_output_contents_size(), 1);
  const std::vector<float> got2 = output_floats(resp2, 0);
  ASSERT_EQ(got2.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got2[i], want[i], 1e-5f) << i;
}

TEST_F(GrpcServerTest, ErrorsCarryTheRightCodes) {
  const std::vector<float> x = random_values(2 * kIn, 9);
  pb::ModelInferResponse resp;

  pb::ModelInferRequest unknown = raw_request(x, 2);
  unknown.set_model_name("nope");
  grpc::Status s = infer(unknown, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();

  pb::ModelInferRequest short_raw = raw_request(x, 2);
  short_raw.mutable_raw_input_contents(0)->resize(5 * sizeof(float));
  s = infer(short_raw, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("'x'"), std::string::npos) << s.error_message();

  pb::ModelInferRequest short_typed;
  short_typed.set_model_name("tiny");
  auto* in = short_typed.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(2);
  in->add_shape(kIn);
  in->mutable_contents()->add_fp32_contents(1.f);
  s = infer(short_typed, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("'x'"), std::string::npos) << s.error_message();

  // INT64 data where the model takes FP32: the sizes agree, the dtype does not.
  pb::ModelInferRequest wrong_dtype;
  wrong_dtype.set_model_name("tiny");
  in = wrong_dtype.add_inputs();
  in->set_name("x");
  in->set_datatype("INT64");
  in->add_shape(2);
  in->add_shape(kIn);
  for (int i = 0; i < 2 * kIn; ++i) in->mutable_contents()->add_int64_contents(i);
  s = infer(wrong_dtype, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();

  pb::ModelInferRequest bad_output = raw_request(x, 2);
  bad_output.add_outputs()->set_name("nope");
  s = infer(bad_output, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();

  pb::ModelInferRequest bad_param = raw_request(x, 2);
  (*bad_param.mutable_parameters())["priority"].set_string_param("high");
  s = infer(bad_param, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

TEST_F(GrpcServerTest, ConcurrentInfersAreAllCorrect) {
  constexpr int kThreads = 8, kPerThread = 20;
  std::atomic<int> correct{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto stub = pb::GRPCInferenceService::NewStub(channel_);
      for (int i = 0; i < kPerThread; ++i) {
        const int rows = 1 + (t + i) % 3;
        const std::vector<float> x = random_values(static_cast<size_t>(rows) * kIn, 1000u * t + i);
        grpc::ClientContext ctx;
        pb::ModelInferResponse resp;
        const grpc::Status s = stub->ModelInfer(&ctx, raw_request(x, rows), &resp);
        if (!s.ok() || resp.raw_output_contents_size() != 1) {
          ++failed;
          continue;
        }
        const std::vector<float> got = output_floats(resp, 0), want = expected(x, rows);
        bool same = got.size() == want.size();
        for (size_t k = 0; same && k < want.size(); ++k) same = std::abs(got[k] - want[k]) <= 1e-5f;
        (same ? correct : failed)++;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(correct.load(), kThreads * kPerThread);
}

TEST_F(GrpcServerTest, ConfigStatisticsAndRepository) {
  {
    pb::ModelInferResponse resp;
    ASSERT_TRUE(infer(raw_request(random_values(kIn, 3), 1), &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    pb::ModelConfigRequest q;
    q.set_name("tiny");
    pb::ModelConfigResponse r;
    const grpc::Status s = stub_->ModelConfig(&ctx, q, &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(r.config().name(), "tiny");
    EXPECT_EQ(r.config().max_batch_size(), 8);
    ASSERT_EQ(r.config().input_size(), 1);
    EXPECT_EQ(r.config().input(0).name(), "x");
    EXPECT_EQ(r.config().input(0).data_type(), pb::TYPE_FP32);
    EXPECT_TRUE(r.config().has_dynamic_batching());
    EXPECT_EQ(r.config().dynamic_batching().max_queue_delay_microseconds(), 500u);
  }
  {
    grpc::ClientContext ctx;
    pb::ModelStatisticsRequest q;
    q.set_name("tiny");
    pb::ModelStatisticsResponse r;
    const grpc::Status s = stub_->ModelStatistics(&ctx, q, &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(r.model_stats_size(), 1);
    EXPECT_EQ(r.model_stats(0).name(), "tiny");
    EXPECT_GE(r.model_stats(0).inference_count(), 1u);
    EXPECT_GE(r.model_stats(0).inference_stats().success().count(), 1u);
  }
  auto ready = [&] {
    grpc::ClientContext ctx;
    pb::ModelReadyRequest q;
    q.set_name("tiny");
    pb::ModelReadyResponse r;
    EXPECT_TRUE(stub_->ModelReady(&ctx, q, &r).ok());
    return r.ready();
  };
  {
    grpc::ClientContext ctx;
    pb::RepositoryModelUnloadRequest q;
    q.set_model_name("tiny");
    pb::RepositoryModelUnloadResponse r;
    const grpc::Status s = stub_->RepositoryModelUnload(&ctx, q, &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_FALSE(ready());
    pb::ModelInferResponse resp;
    EXPECT_NE(infer(raw_request(random_values(kIn, 3), 1), &resp).error_code(), grpc::StatusCode::OK);
  }
  {
    grpc::ClientContext ctx;
    pb::RepositoryIndexRequest q;
    pb::RepositoryIndexResponse r;
    ASSERT_TRUE(stub_->RepositoryIndex(&ctx, q, &r).ok());
    ASSERT_EQ(r.models_size(), 1);
    EXPECT_EQ(r.models(0).name(), "tiny");
    EXPECT_NE(r.models(0).state(), "READY");
  }
  {
    grpc::ClientContext ctx;
    pb::RepositoryModelLoadRequest q;
    q.set_model_name("tiny");
    pb::RepositoryModelLoadResponse r;
    const grpc::Status s = stub_->RepositoryModelLoad(&ctx, q, &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(ready());
  }
  {
    grpc::ClientContext ctx;
    pb::RepositoryIndexRequest q;
    q.set_ready(true);
    pb::RepositoryIndexResponse r;
    ASSERT_TRUE(stub_->RepositoryIndex(&ctx, q, &r).ok());
    ASSERT_EQ(r.models_size(), 1);
    EXPECT_EQ(r.models(0).state(), "READY");
    EXPECT_EQ(r.models(0).version(), "1");
  }
  {
    grpc::ClientContext ctx;
    pb::RepositoryModelLoadRequest q;
    q.set_model_name("absent");
    pb::RepositoryModelLoadResponse r;
    EXPECT_NE(stub_->RepositoryModelLoad(&ctx, q, &r).error_code(), grpc::StatusCode::OK);
  }
}

TEST(GrpcCodecTest, DecodesParametersAndRejectsInconsistentRequests) {
  pb::ModelInferRequest req;
  auto* in = req.add_inputs();
  in->set_name("ids");
  in->set_datatype("INT64");
  in->add_shape(2);
  for (int64_t v : {5, 7}) in->mutable_contents()->add_int64_contents(v);
  (*req.mutable_parameters())["priority"].set_int64_param(2);
  (*req.mutable_parameters())["timeout"].set_uint64_param(1500);
  InferRequest out;
  Status s = decode_infer_request(req, &out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(out.priority, 1);  // Triton's level 2 is our level 1 (0 = highest)
  EXPECT_EQ(out.timeout_us, 1500);
  ASSERT_EQ(out.inputs.count("ids"), 1u);
  EXPECT_EQ(out.inputs.at("ids").dtype(), DType::kInt64);
  EXPECT_EQ(out.inputs.at("ids").data<int64_t>()[1], 7);

  (*req.mutable_parameters())["priority"].set_int64_param(0);
  InferRequest def;
  ASSERT_TRUE(decode_infer_request(req, &def).ok());
  EXPECT_EQ(def.priority, -1);  // 0 = the model's default

  pb::ModelInferRequest two = req;
  *two.add_inputs() = req.inputs(0);
  InferRequest dup;
  EXPECT_EQ(decode_infer_request(two, &dup).code(), StatusCode::kInvalidArgument);

  pb::ModelInferRequest raw_mismatch = req;
  raw_mismatch.mutable_inputs(0)->clear_contents();
  raw_mismatch.add_raw_input_contents(std::string(16, '\0'));
  raw_mismatch.add_raw_input_contents(std::string(16, '\0'));
  InferRequest rm;
  EXPECT_EQ(decode_infer_request(raw_mismatch, &rm).code(), StatusCode::kInvalidArgument);

  pb::ModelInferRequest negative = req;
  negative.mutable_inputs(0)->set_shape(0, -2);
  InferRequest neg;
  EXPECT_EQ(decode_infer_request(negative, &neg).code(), StatusCode::kInvalidArgument);

  pb::ModelInferRequest bytes = req;
  bytes.mutable_inputs(0)->set_datatype("BYTES");
  InferRequest by;
  EXPECT_EQ(decode_infer_request(bytes, &by).code(), StatusCode::kInvalidArgument);
}

// Priorities and timeouts at the integer boundaries: huge priorities run at the lowest level (as
// over HTTP), timeouts up to INT64_MAX pass through, negative or unrepresentable ones are refused.
TEST(GrpcCodecTest, PriorityAndTimeoutBoundaries) {
  auto decode = [](auto set) {
    pb::ModelInferRequest req;
    set(*req.mutable_parameters());
    InferRequest out;
    Status s = decode_infer_request(req, &out);
    return std::make_pair(s, out);
  };
  using Params = google::protobuf::Map<std::string, pb::InferParameter>;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto [s1, r1] = decode([](Params& p) { p["priority"].set_uint64_param(std::numeric_limits<uint64_t>::max()); });
  ASSERT_TRUE(s1.ok()) << s1.to_string();
  EXPECT_EQ(r1.priority, std::numeric_limits<int>::max());
  auto [s2, r2] = decode([&](Params& p) { p["priority"].set_int64_param(kMax); });
  ASSERT_TRUE(s2.ok()) << s2.to_string();
  EXPECT_EQ(r2.priority, std::numeric_limits<int>::max());
  auto [s3, r3] = decode([](Params& p) { p["priority"].set_int64_param(-1); });
  EXPECT_EQ(s3.code(), StatusCode::kInvalidArgument);
  for (int64_t t : {kMax, kMax - 1}) {
    auto [s, r] = decode([&](Params& p) { p["timeout"].set_int64_param(t); });
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(r.timeout_us, t);
  }
  auto [s4, r4] = decode([](Params& p) { p["timeout"].set_int64_param(-1); });
  EXPECT_EQ(s4.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s4.message().find("timeout"), std::string::npos);
  auto [s5, r5] = decode([](Params& p) { p["timeout"].set_uint64_param(static_cast<uint64_t>(kMax) + 1); });
  EXPECT_EQ(s5.code(), StatusCode::kInvalidArgument);
}

// ModelConfig's default_priority_level is Triton's 1-based level; with priorities off both it and
// priority_levels stay 0.
TEST(GrpcCodecTest, ConfigPriorityLevelsAreOneBased) {
  ModelConfig c;
  c.name = "m";
  c.dynamic_batching = true;
  c.batching.priority_levels = 3;
  c.batching.default_priority = 0;
  pb::ModelConfig out;
  fill_model_config(c, &out);
  EXPECT_EQ(out.dynamic_batching().priority_levels(), 3u);
  EXPECT_EQ(out.dynamic_batching().default_priority_level(), 1u);
  c.batching.default_priority = 2;
  out.Clear();
  fill_model_config(c, &out);
  EXPECT_EQ(out.dynamic_batching().default_priority_level(), 3u);
  c.batching.priority_levels = 1;
  out.Clear();
  fill_model_config(c, &out);
  EXPECT_EQ(out.dynamic_batching().priority_levels(), 0u);
  EXPECT_EQ(out.dynamic_batching().default_priority_level(), 0u);
}

// gRPC's statistics are the HTTP document's, field for field: the message parsed from
// ServerCore::statistics_json equals the one fill_statistics builds from the same values.
TEST(GrpcCodecTest, StatisticsMatchTheHttpDocument) {
  auto d = [](uint64_t count, uint64_t ns) { return StatisticDuration{.count = count, .ns = ns}; };
  ModelStatistics m;
  m.name = "tiny";
  m.version = "2";
  m.last_inference = 1700000000123;
  m.inference_count = 12;
  m.execution_count = 3;
  m.inference_stats = {.success = d(10, 1001),
                       .fail = d(2, 0),
                       .queue = d(9, 1003),
                       .compute_input = d(8, 1004),
                       .compute_infer = d(7, 1005),
                       .compute_output = d(6, 1006),
                       .cache_hit = d(5, 1007),
                       .cache_miss = d(4, 1008)};
  m.batch_stats.push_back(
      {.batch_size = 1, .compute_input = d(1, 11), .compute_infer = d(2, 12), .compute_output = d(3, 13)});
  m.batch_stats.push_back(
      {.batch_size = 8, .compute_input = d(4, 21), .compute_infer = d(5, 22), .compute_output = d(6, 23)});
  ModelStatistics idle;
  idle.name = "idle";
  idle.version = "1";
  const std::vector<ModelStatistics> stats = {m, idle};

  pb::ModelStatisticsResponse direct;
  fill_statistics(stats, &direct);
  pb::ModelStatisticsResponse from_json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ServerCore::statistics_json(stats), &from_json).ok());
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(from_json, direct)) << diff;

  ASSERT_EQ(direct.model_stats_size(), 2);
  const pb::ModelStatistics& s = direct.model_stats(0);
  EXPECT_EQ(s.name(), "tiny");
  EXPECT_EQ(s.version(), "2");
  EXPECT_EQ(s.last_inference(), 1700000000123u);
  EXPECT_EQ(s.inference_count(), 12u);
  EXPECT_EQ(s.execution_count(), 3u);
  EXPECT_EQ(s.inference_stats().success().ns(), 1001u);
  EXPECT_EQ(s.inference_stats().fail().count(), 2u);
  EXPECT_EQ(s.inference_stats().queue().count(), 9u);
  EXPECT_EQ(s.inference_stats().compute_output().ns(), 1006u);
  EXPECT_EQ(s.inference_stats().cache_miss().count(), 4u);
  ASSERT_EQ(s.batch_stats_size(), 2);
  EXPECT_EQ(s.batch_stats(1).batch_size(), 8u);
  EXPECT_EQ(s.batch_stats(1).compute_infer().count(), 5u);
  EXPECT_EQ(s.batch_stats(1).compute_output().ns(), 23u);
  EXPECT_TRUE(direct.model_stats(1).has_inference_stats());  // present, all zero, as over HTTP
  EXPECT_EQ(direct.model_stats(1).batch_stats_size(), 0);

  // A name that is not UTF-8 goes out repaired, as the JSON writer repairs it (a proto3 string
  // field must hold UTF-8).
  ModelStatistics odd;
  odd.name = std::string("bad\xff");
  odd.version = "1";
  pb::ModelStatisticsResponse repaired;
  fill_statistics({odd}, &repaired);
  EXPECT_NE(repaired.model_stats(0).name(), odd.name);
  EXPECT_EQ(repaired.model_stats(0).name(), valid_utf8(odd.name));
}

TEST(GrpcCodecTest, EncodesOutputsInTheAskedOrder) {
  InferResponse r;
  r.outputs["a"] = Tensor::from_vector<float>(Shape{2}, {1.f, 2.f});
  r.outputs["b"] = Tensor::from_vector<int64_t>(Shape{1, 1}, {9});
  pb::ModelInferResponse out;
  ASSERT_TRUE(encode_infer_response(r, {"b", "a"}, &out).ok());
  ASSERT_EQ(out.outputs_size(), 2);
  EXPECT_EQ(out.outputs(0).name(), "b");
  EXPECT_EQ(out.outputs(0).datatype(), "INT64");
  EXPECT_EQ(out.raw_output_contents(0).size(), sizeof(int64_t));
  EXPECT_EQ(out.outputs(1).name(), "a");
  EXPECT_EQ(out.raw_output_contents(1).size(), 2 * sizeof(float));
}

// Model control mode "none": RepositoryModelLoad and RepositoryModelUnload are refused as over
// HTTP (INVALID_ARGUMENT, the HTTP 400), and the model keeps serving.
TEST(GrpcModelControlTest, RefusedWithoutExplicitMode) {
  const fs::path root = fs::temp_directory_path() / ("sl_grpc_control_" + std::to_string(::getpid()));
  fs::create_directories(root / "tiny" / "1");
  std::ofstream(root / "tiny" / "1" / "model.onnx", std::ios::binary)
      << tiny_model_bytes(random_values(kIn * kOut, 1), random_values(kOut, 2));
  {
    Repository repo(root.string(), {});
    ASSERT_TRUE(repo.load_all().ok());
    ServerCore core(repo, {});
    GrpcServer server(core, {.host = "127.0.0.1", .port = 0});
    ASSERT_TRUE(server.start().ok());
    auto stub = pb::GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()), grpc::InsecureChannelCredentials()));
    auto expect_refused = [](const grpc::Status& s) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_EQ(s.error_message().rfind("explicit model load / unload is not allowed", 0), 0u) << s.error_message();
    };
    {
      grpc::ClientContext ctx;
      pb::RepositoryModelUnloadRequest q;
      q.set_model_name("tiny");
      pb::RepositoryModelUnloadResponse r;
      expect_refused(stub->RepositoryModelUnload(&ctx, q, &r));
    }
    {
      grpc::ClientContext ctx;
      pb::RepositoryModelLoadRequest q;
      q.set_model_name("tiny");
      pb::RepositoryModelLoadResponse r;
      expect_refused(stub->RepositoryModelLoad(&ctx, q, &r));
    }
    grpc::ClientContext ctx;
    pb::ModelInferRequest req;
    req.set_model_name("tiny");
    auto* in = req.add_inputs();
    in->set_name("x");
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(kIn);
    for (int i = 0; i < kIn; ++i) in->mutable_contents()->add_fp32_contents(0.5f);
    pb::ModelInferResponse resp;
    const grpc::Status s = stub->ModelInfer(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();  // still served
    EXPECT_EQ(repo.index().at(0).state, ModelState::kReady);
  }
  std::error_code ec;
  fs::remove_all(root, ec);
}

TEST(GrpcServerStartTest, BusyPortIsUnavailable) {
  Repository repo((fs::temp_directory_path() / "sl_grpc_test_empty").string(), {});
  ServerCore core(repo, {});
  GrpcServer first(core, {.host = "127.0.0.1", .port = 0});
  ASSERT_TRUE(first.start().ok());
  GrpcServer second(core, {.host = "127.0.0.1", .port = first.port()});
  EXPECT_EQ(second.start().code(), StatusCode::kUnavailable);
  first.stop();
  first.stop();  // idempotent
}

}  // namespace
}  // namespace streamline::serve
