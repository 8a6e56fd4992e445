// ServerCore end to end on a tiny model: batched inference through infer(), refusals, draining,
// metadata, and metrics/statistics whose numbers are checked against what was run.

#include "serve/server_core.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <future>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "core/version.h"
#include "serve_test_util.h"

namespace streamline::serve {
namespace {

using testing::TempRepo;
using namespace std::chrono_literals;

// Whether the server's in-flight count reaches 0 within a few seconds.
bool in_flight_reaches_zero(const ServerCore& core) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (core.in_flight() != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Batches of 8 launch as soon as they are full; a lone request would wait 2 s.
const char* kBatchedConfig = R"(max_batch_size: 8
dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 2000000 }
parameters { key: "threads" value: { string_value: "1" } }
)";
// No dynamic batching: each request runs as it comes.
const char* kSoloConfig = R"(max_batch_size: 8
parameters { key: "threads" value: { string_value: "1" } }
)";

// "name{labels}" -> value, for every sample line; the family of every sample has a TYPE line.
std::map<std::string, double> parse_metrics(const std::string& text) {
  std::map<std::string, double> out;
  std::set<std::string> typed;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream f(line.substr(7));
      std::string name;
      f >> name;
      typed.insert(name);
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    EXPECT_NE(sp, std::string::npos) << line;
    if (sp == std::string::npos) continue;
    const std::string key = line.substr(0, sp);
    const std::string name = key.substr(0, key.find('{'));
    bool has_type = typed.count(name) > 0;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s(suffix);
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
        has_type = has_type || typed.count(name.substr(0, name.size() - s.size())) > 0;
    }
    EXPECT_TRUE(has_type) << "no TYPE line for " << line;
    const std::string value = line.substr(sp + 1);
    out[key] = value == "NaN" ? std::nan("") : std::strtod(value.c_str(), nullptr);
  }
  return out;
}

double metric(const std::map<std::string, double>& m, const std::string& key) {
  auto it = m.find(key);
  EXPECT_NE(it, m.end()) << "missing series " << key;
  return it == m.end() ? -1 : it->second;
}

InferRequest request_of(Tensor x, uint64_t id = 0) {
  InferRequest r;
  r.id = id;
  r.inputs["x"] = std::move(x);
  return r;
}

// Runs one request through the core and waits for its response.
InferResponse infer_sync(ServerCore& core, const std::string& model, InferRequest r, const std::string& version = "") {
  std::promise<InferResponse> p;
  auto f = p.get_future();
  core.infer(model, version, std::move(r), [&p](InferResponse resp) { p.set_value(std::move(resp)); });
  return f.get();
}

class ServerCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.write("mm/config.pbtxt", kBatchedConfig);
    dir_.write("mm/1/model.onnx", testing::matmul_relu_onnx());
    dir_.write("solo/config.pbtxt", kSoloConfig);
    dir_.write("solo/2/model.onnx", testing::matmul_relu_onnx());
    RepositoryOptions o;
    o.default_threads = 1;
    repo_ = std::make_unique<Repository>(dir_.path(), o);
    ASSERT_TRUE(repo_->load_all().ok());
    core_ = std::make_unique<ServerCore>(*repo_, ServerOptions{});
  }
  void TearDown() override {
    core_.reset();
    repo_.reset();
  }
  TempRepo dir_;
  std::unique_ptr<Repository> repo_;
  std::unique_ptr<ServerCore> core_;
};

TEST_F(ServerCoreTest, BatchedInferenceAndItsMetrics) {
  ASSERT_TRUE(core_->ready());
  // Pass 1: eight one-row requests from four threads become one batch of 8.
  constexpr int kRequests = 8;
  std::vector<Tensor> xs;
  for (int i = 0; i < kRequests; ++i) xs.push_back(testing::random_input(1, 100 + static_cast<uint32_t>(i)));
  std::vector<std::promise<InferResponse>> promises(kRequests);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = t; i < kRequests; i += 4)
        core_->infer("mm", "", request_of(xs[static_cast<size_t>(i)], static_cast<uint64_t>(i)),
                     [&promises, i](InferResponse r) { promises[static_cast<size_t>(i)].set_value(std::move(r)); });
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kRequests; ++i) {
    InferResponse r = promises[static_cast<size_t>(i)].get_future().get();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(r.id, static_cast<uint64_t>(i));
    EXPECT_EQ(r.batch_size, 8);
    std::vector<float> x(xs[static_cast<size_t>(i)].data<float>(),
                         xs[static_cast<size_t>(i)].data<float>() + testing::kIn);
    std::vector<float> h, y;
    testing::matmul_relu_reference(x, 1, &h, &y);
    for (int k = 0; k < testing::kOut; ++k) {
      EXPECT_NEAR(r.outputs.at("h").data<float>()[k], h[static_cast<size_t>(k)], 1e-5f);
      EXPECT_NEAR(r.outputs.at("y").data<float>()[k], y[static_cast<size_t>(k)], 1e-5f);
    }
  }

  // Pass 2: refusals, at the front (rows, shape, unknown model) and in the runtime (input name).
  InferResponse too_many = infer_sync(*core_, "mm", request_of(testing::random_input(9, 1)));
  EXPECT_EQ(too_many.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status.message().find("batch size 9 is outside [1, max_batch_size=8]"), std::string::npos)
      << too_many.status.message();
  InferResponse bad_shape = infer_sync(*core_, "mm", request_of(Tensor::empty(DType::kFloat32, Shape{1, 5})));
  EXPECT_EQ(bad_shape.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_shape.status.message().find("expected shape [-1,4]"), std::string::npos) << bad_shape.status.message();
  InferRequest wrong_name;
  wrong_name.inputs["z"] = testing::random_input(1, 2);
  EXPECT_EQ(infer_sync(*core_, "mm", wrong_name).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(infer_sync(*core_, "nope", request_of(testing::random_input(1, 3))).status.code(), StatusCode::kNotFound);
  EXPECT_EQ(infer_sync(*core_, "mm", request_of(testing::random_input(1, 3)), "5").status.code(),
            StatusCode::kNotFound);
  // A request leaves the in-flight count just after its callback returns, on the thread that ran
  // it: the last answer can arrive here a moment before that.
  EXPECT_TRUE(in_flight_reaches_zero(*core_));

  // Pass 3: the metrics agree with what ran. The process has used at least 20 ms of CPU by then
  // (the kernel counts it in 10 ms ticks, so a fresh process can read 0).
  const std::clock_t cpu_start = std::clock();
  while (std::clock() - cpu_start < CLOCKS_PER_SEC / 50) {
  }
  const std::string text = core_->metrics_text();
  const auto m = parse_metrics(text);
  const std::string mm = "model=\"mm\",version=\"1\"";
  EXPECT_EQ(metric(m, "streamline_inference_request_success_total{" + mm + "}"), 8);
  // Two front refusals for mm (rows, shape), one runtime refusal (input name), one unknown version.
  EXPECT_EQ(metric(m, "streamline_inference_request_failure_total{" + mm + ",reason=\"InvalidArgument\"}"), 3);
  EXPECT_EQ(metric(m, "streamline_inference_request_failure_total{" + mm + ",reason=\"NotFound\"}"), 1);
  EXPECT_EQ(metric(m, "streamline_server_refused_total{reason=\"NotFound\"}"), 2);
  EXPECT_EQ(metric(m, "streamline_server_refused_total{reason=\"InvalidArgument\"}"), 2);
  EXPECT_EQ(metric(m, "streamline_inference_count_total{" + mm + "}"), 8);
  EXPECT_EQ(metric(m, "streamline_inference_exec_count_total{" + mm + "}"), 1);
  EXPECT_EQ(metric(m, "streamline_inference_batch_size_bucket{" + mm + ",le=\"4\"}"), 0);
  EXPECT_EQ(metric(m, "streamline_inference_batch_size_bucket{" + mm + ",le=\"8\"}"), 1);
  EXPECT_EQ(metric(m, "streamline_inference_batch_size_bucket{" + mm + ",le=\"64\"}"), 1);
  EXPECT_EQ(metric(m, "streamline_inference_batch_size_bucket{" + mm + ",le=\"+Inf\"}"), 1);
  EXPECT_EQ(metric(m, "streamline_inference_batch_size_sum{" + mm + "}"), 8);
  EXPECT_EQ(metric(m, "streamline_inference_batch_size_count{" + mm + "}"), 1);
  EXPECT_EQ(metric(m, "streamline_inference_pending_requests{" + mm + "}"), 0);
  EXPECT_EQ(metric(m, "streamline_inference_queue_duration_us_count{" + mm + "}"), 8);
  EXPECT_EQ(metric(m, "streamline_inference_compute_duration_us_count{" + mm + "}"), 8);
  EXPECT_EQ(metric(m, "streamline_inference_request_duration_us_count{" + mm + "}"), 8);
  const double compute_sum = metric(m, "streamline_inference_compute_duration_us_sum{" + mm + "}");
  EXPECT_GT(compute_sum, 0);
  EXPECT_EQ(metric(m, "streamline_inference_compute_duration_us_total{" + mm + "}"), compute_sum);
  const double q50 = metric(m, "streamline_inference_queue_duration_us{" + mm + ",quantile=\"0.5\"}");
  const double q99 = metric(m, "streamline_inference_queue_duration_us{" + mm + ",quantile=\"0.99\"}");
  EXPECT_GE(q99, q50);
  EXPECT_GE(metric(m, "streamline_instance_busy_us_total{" + mm + ",instance=\"0\"}"), 0);
  EXPECT_EQ(m.count("streamline_instance_busy_us_total{" + mm + ",instance=\"1\"}"), 0u);
  // The compute time splits into gathering inputs, the run and splitting outputs.
  const double infer_sum = metric(m, "streamline_inference_compute_infer_duration_us_total{" + mm + "}");
  EXPECT_GT(infer_sum, 0);
  EXPECT_LE(infer_sum + metric(m, "streamline_inference_compute_input_duration_us_total{" + mm + "}") +
                metric(m, "streamline_inference_compute_output_duration_us_total{" + mm + "}"),
            compute_sum + 8);  // each part is rounded down to whole microseconds per request
  // solo ran nothing: its series exist and are zero, its summaries have no quantiles yet.
  const std::string solo = "model=\"solo\",version=\"2\"";
  EXPECT_EQ(metric(m, "streamline_inference_request_success_total{" + solo + "}"), 0);
  EXPECT_TRUE(std::isnan(metric(m, "streamline_inference_queue_duration_us{" + solo + ",quantile=\"0.9\"}")));
  EXPECT_EQ(metric(m, "streamline_model_ready{model=\"mm\"}"), 1);
  EXPECT_EQ(metric(m, "streamline_server_in_flight"), 0);
  EXPECT_GE(metric(m, "process_cpu_seconds_total"), 0.01);
  EXPECT_GT(metric(m, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_NE(text.find("# TYPE streamline_inference_batch_size histogram\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE streamline_inference_queue_duration_us summary\n"), std::string::npos);
  EXPECT_NE(text.find("# HELP streamline_inference_request_success_total "), std::string::npos);

  // Pass 4: the statistics extension says the same.
  auto stats = core_->statistics("mm");
  ASSERT_TRUE(stats.ok()) << stats.status().to_string();
  ASSERT_EQ(stats->size(), 1u);
  const ModelStatistics& ms = (*stats)[0];
  EXPECT_EQ(ms.name, "mm");
  EXPECT_EQ(ms.version, "1");
  EXPECT_GT(ms.last_inference, 1600000000000ull);
  EXPECT_EQ(ms.inference_count, 8u);
  EXPECT_EQ(ms.execution_count, 1u);
  EXPECT_EQ(ms.inference_stats.success.count, 8u);
  EXPECT_EQ(ms.inference_stats.fail.count, 4u);
  EXPECT_EQ(ms.inference_stats.fail.ns, 0u);
  EXPECT_EQ(ms.inference_stats.queue.count, 8u);
  EXPECT_EQ(ms.inference_stats.compute_infer.ns, static_cast<uint64_t>(infer_sum * 1000));
  EXPECT_EQ(ms.inference_stats.cache_hit.count, 0u);
  EXPECT_EQ(ms.inference_stats.cache_miss.count, 0u);
  ASSERT_EQ(ms.batch_stats.size(), 1u);
  EXPECT_EQ(ms.batch_stats[0].batch_size, 8);
  EXPECT_EQ(ms.batch_stats[0].compute_infer.count, 1u);

  // And the JSON the HTTP front end sends carries the same numbers.
  const std::string json = ServerCore::statistics_json(*stats);
  rapidjson::Document d;
  d.Parse(json.c_str());
  ASSERT_FALSE(d.HasParseError()) << json;
  ASSERT_EQ(d["model_stats"].Size(), 1u);
  const auto& s = d["model_stats"][0];
  EXPECT_STREQ(s["name"].GetString(), "mm");
  EXPECT_STREQ(s["version"].GetString(), "1");
  EXPECT_EQ(s["last_inference"].GetUint64(), ms.last_inference);
  EXPECT_EQ(s["inference_count"].GetUint64(), 8u);
  EXPECT_EQ(s["execution_count"].GetUint64(), 1u);
  EXPECT_EQ(s["inference_stats"]["success"]["count"].GetUint64(), 8u);
  EXPECT_EQ(s["inference_stats"]["fail"]["count"].GetUint64(), 4u);
  EXPECT_EQ(s["inference_stats"]["queue"]["count"].GetUint64(), 8u);
  EXPECT_EQ(s["inference_stats"]["compute_infer"]["ns"].GetUint64(), static_cast<uint64_t>(infer_sum * 1000));
  ASSERT_EQ(s["batch_stats"].Size(), 1u);
  EXPECT_EQ(s["batch_stats"][0]["batch_size"].GetInt(), 8);
  EXPECT_EQ(s["batch_stats"][0]["compute_infer"]["count"].GetUint64(), 1u);

  auto all = core_->statistics("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
  EXPECT_EQ(core_->statistics("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(core_->statistics("mm", "7").status().code(), StatusCode::kNotFound);
}

// The HTTP statistics document, byte for byte: Triton's key order and types (clients such as
// tritonclient and perf_analyzer read it), every duration as {"count","ns"} unsigned integers.
TEST(ServerCore, StatisticsJsonKeepsTritonsShape) {
  EXPECT_EQ(ServerCore::statistics_json({}), R"({"model_stats":[]})");
  ModelStatistics m;
  m.name = "m\"x";
  m.version = "3";
  m.last_inference = 1700000000123;
  m.inference_count = 12;
  m.execution_count = 2;
  InferStatistics& is = m.inference_stats;
  is.success = {10, 1001};
  is.fail = {2, 0};
  is.queue = {10, 1003};
  is.compute_input = {10, 1004};
  is.compute_infer = {10, 1005};
  is.compute_output = {10, 1006};
  is.cache_hit = {7, 1007};
  is.cache_miss = {8, 18446744073709551615ull};
  m.batch_stats.push_back(
      {.batch_size = 4, .compute_input = {1, 11}, .compute_infer = {1, 12}, .compute_output = {1, 13}});
  m.batch_stats.push_back(
      {.batch_size = 8, .compute_input = {1, 21}, .compute_infer = {1, 22}, .compute_output = {1, 23}});
  ModelStatistics empty;
  empty.name = "e";
  empty.version = "1";
  EXPECT_EQ(ServerCore::statistics_json({m, empty}),
            R"({"model_stats":[{"name":"m\"x","version":"3","last_inference":1700000000123,"inference_count":12,)"
            R"("execution_count":2,"inference_stats":{"success":{"count":10,"ns":1001},"fail":{"count":2,"ns":0},)"
            R"("queue":{"count":10,"ns":1003},"compute_input":{"count":10,"ns":1004},)"
            R"("compute_infer":{"count":10,"ns":1005},"compute_output":{"count":10,"ns":1006},)"
            R"("cache_hit":{"count":7,"ns":1007},"cache_miss":{"count":8,"ns":18446744073709551615}},)"
            R"("batch_stats":[{"batch_size":4,"compute_input":{"count":1,"ns":11},"compute_infer":{"count":1,"ns":12},)"
            R"("compute_output":{"count":1,"ns":13}},{"batch_size":8,"compute_input":{"count":1,"ns":21},)"
            R"("compute_infer":{"count":1,"ns":22},"compute_output":{"count":1,"ns":23}}]},)"
            R"({"name":"e","version":"1","last_inference":0,"inference_count":0,"execution_count":0,)"
            R"("inference_stats":{"success":{"count":0,"ns":0},"fail":{"count":0,"ns":0},"queue":{"count":0,"ns":0},)"
            R"("compute_input":{"count":0,"ns":0},"compute_infer":{"count":0,"ns":0},)"
            R"("compute_output":{"count":0,"ns":0},"cache_hit":{"count":0,"ns":0},"cache_miss":{"count":0,"ns":0}},)"
            R"("batch_stats":[]}]})");
}

TEST_F(ServerCoreTest, WithoutDynamicBatchingRequestsRunAsTheyCome) {
  InferResponse r = infer_sync(*core_, "solo", request_of(testing::random_input(3, 5)));
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.batch_size, 3);
  EXPECT_EQ(r.outputs.at("y").shape(), (Shape{3, testing::kOut}));
  EXPECT_EQ(infer_sync(*core_, "solo", request_of(testing::random_input(9, 5))).status.code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ServerCoreTest, DrainWaitsForAcceptedRequestsAndRefusesNewOnes) {
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<InferResponse> answered;
  core_->infer("solo", "", request_of(testing::random_input(1, 9)), [&](InferResponse r) {
    entered.set_value();
    released.wait();  // in flight until this callback returns
    answered.set_value(std::move(r));
  });
  entered.get_future().wait();
  EXPECT_EQ(core_->in_flight(), 1);

  auto drained = std::async(std::launch::async, [&] { return core_->drain(10s); });
  for (int i = 0; i < 10000 && !core_->draining(); ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(core_->draining());
  EXPECT_FALSE(core_->ready());
  EXPECT_EQ(drained.wait_for(50ms), std::future_status::timeout);
  EXPECT_FALSE(core_->drain(20ms));  // still one in flight

  bool refused_inline = false;
  core_->infer("mm", "", request_of(testing::random_input(1, 10)), [&](InferResponse r) {
    refused_inline = true;
    EXPECT_EQ(r.status.code(), StatusCode::kUnavailable);
    EXPECT_EQ(r.status.message(), "server is shutting down");
  });
  EXPECT_TRUE(refused_inline);
  EXPECT_EQ(core_->in_flight(), 1);

  release.set_value();
  EXPECT_TRUE(drained.get());
  EXPECT_EQ(core_->in_flight(), 0);
  EXPECT_TRUE(answered.get_future().get().status.ok());
  const auto m = parse_metrics(core_->metrics_text());
  EXPECT_EQ(metric(m, "streamline_inference_request_failure_total{model=\"mm\",version=\"1\",reason=\"Unavailable\"}"),
            1);
  EXPECT_EQ(metric(m, "streamline_inference_request_success_total{model=\"solo\",version=\"2\"}"), 1);
}

// A drain timeout at the top of its range waits (it used to wrap into the past and end at once).
TEST_F(ServerCoreTest, DrainWithTheLongestTimeoutWaits) {
  std::promise<void> entered, release;
  std::shared_future<void> released = release.get_future().share();
  core_->infer("solo", "", request_of(testing::random_input(1, 9)), [&](InferResponse) {
    entered.set_value();
    released.wait();
  });
  entered.get_future().wait();
  auto drained = std::async(std::launch::async, [&] { return core_->drain(std::chrono::milliseconds::max()); });
  EXPECT_EQ(drained.wait_for(100ms), std::future_status::timeout);
  release.set_value();
  EXPECT_TRUE(drained.get());
  EXPECT_EQ(core_->in_flight(), 0);
}

TEST_F(ServerCoreTest, Metadata) {
  auto md = core_->model_metadata("mm", "");
  ASSERT_TRUE(md.ok()) << md.status().to_string();
  EXPECT_EQ(md->name, "mm");
  EXPECT_EQ(md->versions, (std::vector<std::string>{"1"}));
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].name, "x");
  EXPECT_EQ(md->inputs[0].datatype, "FP32");
  EXPECT_EQ(md->inputs[0].shape, (std::vector<int64_t>{-1, testing::kIn}));
  ASSERT_EQ(md->outputs.size(), 2u);
  EXPECT_EQ(md->outputs[1].shape, (std::vector<int64_t>{-1, testing::kOut}));
  EXPECT_EQ(core_->model_metadata("mm", "2").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(core_->model_metadata("nope", "").status().code(), StatusCode::kNotFound);

  rapidjson::Document d;
  d.Parse(ServerCore::model_metadata_json(*md).c_str());
  ASSERT_FALSE(d.HasParseError());
  EXPECT_STREQ(d["name"].GetString(), "mm");
  EXPECT_STREQ(d["versions"][0].GetString(), "1");
  EXPECT_STREQ(d["inputs"][0]["datatype"].GetString(), "FP32");
  EXPECT_EQ(d["inputs"][0]["shape"][0].GetInt64(), -1);
  EXPECT_EQ(d["outputs"].Size(), 2u);

  rapidjson::Document s;
  s.Parse(ServerCore::server_metadata_json(core_->server_metadata()).c_str());
  ASSERT_FALSE(s.HasParseError());
  EXPECT_STREQ(s["name"].GetString(), "streamline");
  EXPECT_STREQ(s["version"].GetString(), SL_VERSION_STRING);
  bool has_stats = false;
  for (const auto& e : s["extensions"].GetArray()) has_stats = has_stats || std::string(e.GetString()) == "statistics";
  EXPECT_TRUE(has_stats);
}

TEST(ServerCore, ReadyNeedsEveryModel) {
  TempRepo dir;
  dir.write("good/1/model.onnx", testing::matmul_relu_onnx());
  dir.write("we\"ird/1/model.onnx", testing::matmul_relu_onnx());
  RepositoryOptions o;
  o.default_threads = 1;
  Repository repo(dir.path(), o);
  ASSERT_TRUE(repo.load_all().ok());
  ServerCore core(repo, {});
  EXPECT_TRUE(core.ready());
  // Label values are escaped.
  EXPECT_NE(core.metrics_text().find("streamline_model_ready{model=\"we\\\"ird\"} 1\n"), std::string::npos);
  dir.write("bad/1/model.onnx", "garbage");
  EXPECT_FALSE(repo.load("bad").ok());
  EXPECT_FALSE(core.ready());
  EXPECT_TRUE(core.live());
}

// One model control policy for every front end, kept here: mode "none" refuses loads and
// unloads (and serving goes on), "explicit" runs them.
TEST(ServerCore, ModelControlNeedsExplicitMode) {
  TempRepo dir;
  dir.write("mm/1/model.onnx", testing::matmul_relu_onnx());
  RepositoryOptions o;
  o.default_threads = 1;
  Repository repo(dir.path(), o);
  ASSERT_TRUE(repo.load_all().ok());
  {
    ServerCore none(repo, {});
    for (const Status& s : {none.unload_model("mm"), none.load_model("mm"), none.check_model_control()}) {
      EXPECT_EQ(s.code(), StatusCode::kUnsupported);
      EXPECT_EQ(http_status(s), 400);
      EXPECT_EQ(grpc_status_code(s), 3);  // INVALID_ARGUMENT
      EXPECT_EQ(s.message().rfind("explicit model load / unload is not allowed", 0), 0u) << s.message();
    }
    EXPECT_TRUE(repo.get("mm").ok());
    EXPECT_TRUE(infer_sync(none, "mm", request_of(testing::random_input(1, 3))).status.ok());
  }
  ServerOptions so;
  so.allow_model_control = true;
  ServerCore explicit_mode(repo, so);
  EXPECT_TRUE(explicit_mode.check_model_control().ok());
  ASSERT_TRUE(explicit_mode.unload_model("mm").ok());
  EXPECT_EQ(repo.get("mm").status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(explicit_mode.load_model("mm").ok());
  EXPECT_TRUE(repo.get("mm").ok());
  EXPECT_EQ(explicit_mode.load_model("absent").code(), StatusCode::kNotFound);
}

TEST(ServerCore, StatusMapping) {
  const std::tuple<Status, int, int> cases[] = {
      {ok_status(), 200, 0},       {invalid_argument("x"), 400, 3},   {unsupported("x"), 400, 3},
      {not_found("x"), 404, 5},    {resource_exhausted("x"), 429, 8}, {deadline_exceeded("x"), 504, 4},
      {unavailable("x"), 503, 14}, {cancelled("x"), 400, 1},          {internal_error("x"), 500, 13},
  };
  for (const auto& [s, http, grpc] : cases) {
    EXPECT_EQ(http_status(s), http) << s.to_string();
    EXPECT_EQ(grpc_status_code(s), grpc) << s.to_string();
  }
}

}  // namespace
}  // namespace streamline::serve
