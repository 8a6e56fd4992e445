// The KServe v2 HTTP front end end to end: a repository on a temporary folder, a ServerCore, an
// HttpServer on a free port, and a small synchronous Beast client. Inference results are compared
// with Session::run on the same model; every error has its status; malformed traffic is answered
// or closed, and the server keeps serving afterwards.

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "http_test_client.h"
#include "serve/http_server.h"
#include "serve/repository.h"
#include "serve/server_core.h"
#include "serve_test_util.h"
#include "streamline/streamline.h"

namespace streamline::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using testing::Client;
using testing::kIn;
using testing::kOut;
using testing::raw_exchange;
using testing::Reply;

constexpr int64_t kMaxRequestBytes = 1 << 20;

rapidjson::Document parse(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.data(), text.size());
  EXPECT_FALSE(d.HasParseError()) << text.substr(0, 300);
  return d;
}

std::string error_of(const Reply& r) {
  auto d = parse(r.body);
  if (!d.IsObject() || !d.HasMember("error") || !d["error"].IsString()) return "<no error member>";
  return d["error"].GetString();
}

std::string floats_json(const Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.numel(); ++i) s += (i ? "," : "") + std::to_string(t.data<float>()[i]);
  return s + "]";
}

// The input as the server will see it after the JSON round trip (std::to_string rounds to 6 digits).
Tensor json_rounded(const Tensor& t) {
  Tensor r = t.clone();
  for (int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] = std::stof(std::to_string(t.data<float>()[i]));
  return r;
}

std::string infer_json(const Tensor& x, const std::string& extra = "") {
  return R"({"id":"req-1",)" + extra + R"("inputs":[{"name":"x","datatype":"FP32","shape":[)" +
         std::to_string(x.shape()[0]) + "," + std::to_string(kIn) + R"(],"data":)" + floats_json(x) + "}]}";
}

// The "data" of output `name` in a JSON response, checked against its shape.
std::vector<float> output_data(const rapidjson::Document& d, const std::string& name, int rows) {
  std::vector<float> out;
  for (const auto& o : d["outputs"].GetArray()) {
    if (o["name"].GetString() != name) continue;
    EXPECT_EQ(std::string(o["datatype"].GetString()), "FP32");
    EXPECT_EQ(o["shape"][0].GetInt(), rows);
    EXPECT_EQ(o["shape"][1].GetInt(), kOut);
    for (const auto& v : o["data"].GetArray()) out.push_back(static_cast<float>(v.GetDouble()));
  }
  return out;
}

void expect_near(const std::vector<float>& got, const Tensor& want) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.numel());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want.data<float>()[i], 1e-5f) << "element " << i;
}

// One repository ("mm": dynamic batching, "fixed": no batch dim, "spare": for load/unload),
// one core, one server for the whole suite.
class HttpServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_dir_ = new testing::TempRepo();
    repo_dir_->write("mm/1/model.onnx", testing::matmul_relu_onnx());
    repo_dir_->write("mm/config.pbtxt",
                     "name: \"mm\"\nmax_batch_size: 8\n"
                     "dynamic_batching { max_queue_delay_microseconds: 200 }\n");
    repo_dir_->write("fixed/1/model.onnx", testing::fixed_relu_onnx());
    repo_dir_->write("spare/1/model.onnx", testing::matmul_relu_onnx());
    repo_ = new Repository(repo_dir_->path(), {});
    ASSERT_TRUE(repo_->load_all().ok());
    ServerOptions so;
    so.max_request_bytes = kMaxRequestBytes;
    so.allow_model_control = true;
    core_ = new ServerCore(*repo_, so);
    HttpOptions ho;
    ho.port = 0;
    server_ = new HttpServer(*core_, ho);
    Status s = server_->start();
    ASSERT_TRUE(s.ok()) << s.to_string();
    auto model = Model::load(repo_dir_->path() + "/mm/1/model.onnx");
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    model_ = new std::shared_ptr<Model>(*model);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete core_;
    delete repo_;
    delete repo_dir_;
    delete model_;
  }

  // Session::run on the test's own copy of the model: (h, y).
  static std::pair<Tensor, Tensor> reference(const Tensor& x) {
    Session session(*model_);
    auto out = session.run(std::map<std::string, Tensor>{{"x", x}});
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return {out->at("h"), out->at("y")};
  }
  static int port() { return server_->port(); }

  static testing::TempRepo* repo_dir_;
  static Repository* repo_;
  static ServerCore* core_;
  static HttpServer* server_;
  static std::shared_ptr<Model>* model_;
};
testing::TempRepo* HttpServerTest::repo_dir_ = nullptr;
Repository* HttpServerTest::repo_ = nullptr;
ServerCore* HttpServerTest::core_ = nullptr;
HttpServer* HttpServerTest::server_ = nullptr;
std::shared_ptr<Model>* HttpServerTest::model_ = nullptr;

TEST_F(HttpServerTest, HealthAndServerMetadata) {
  Client c(port());
  EXPECT_EQ(c.get("/v2/health/live").status, 200u);
  EXPECT_EQ(c.get("/v2/health/ready").status, 200u);
  Reply meta = c.get("/v2");
  ASSERT_EQ(meta.status, 200u);
  auto d = parse(meta.body);
  EXPECT_EQ(std::string(d["name"].GetString()), "streamline");
  EXPECT_EQ(meta.headers[http::field::content_type], "application/json");
  EXPECT_EQ(c.post("/v2/health/live", "").status, 405u);
  EXPECT_EQ(c.send(http::verb::delete_, "/v2").status, 405u);
  EXPECT_EQ(c.get("/v2/nothing/here").status, 404u);
  EXPECT_EQ(c.get("/v3").status, 404u);
  EXPECT_EQ(c.get("/v2/health/live?verbose=1").status, 200u);  // the query is ignored
}

TEST_F(HttpServerTest, ModelMetadataReadyAndConfig) {
  Client c(port());
  Reply m = c.get("/v2/models/mm");
  ASSERT_EQ(m.status, 200u) << m.body;
  auto d = parse(m.body);
  EXPECT_EQ(std::string(d["name"].GetString()), "mm");
  EXPECT_EQ(std::string(d["versions"][0].GetString()), "1");
  ASSERT_EQ(d["inputs"].Size(), 1u);
  EXPECT_EQ(std::string(d["inputs"][0]["name"].GetString()), "x");
  EXPECT_EQ(std::string(d["inputs"][0]["datatype"].GetString()), "FP32");
  EXPECT_EQ(d["inputs"][0]["shape"][0].GetInt(), -1);
  EXPECT_EQ(d["inputs"][0]["shape"][1].GetInt(), kIn);
  EXPECT_EQ(d["outputs"].Size(), 2u);

  EXPECT_EQ(c.get("/v2/models/mm/versions/1").status, 200u);
  EXPECT_EQ(c.get("/v2/models/mm/versions/7").status, 404u);
  EXPECT_EQ(c.get("/v2/models/mm/ready").status, 200u);
  EXPECT_EQ(c.get("/v2/models/mm/versions/1/ready").status, 200u);
  EXPECT_EQ(c.get("/v2/models/nope/ready").status, 404u);
  Reply unknown = c.get("/v2/models/nope");
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_NE(error_of(unknown).find("nope"), std::string::npos);
  EXPECT_EQ(c.get("/v2/models/m%6d").status, 200u);  // %-escapes are decoded
  EXPECT_EQ(c.get("/v2/models/m%zz").status, 400u);

  Reply cfg = c.get("/v2/models/mm/config");
  ASSERT_EQ(cfg.status, 200u);
  auto cd = parse(cfg.body);
  EXPECT_EQ(cd["max_batch_size"].GetInt(), 8);
  EXPECT_EQ(c.post("/v2/models/mm/config", "").status, 405u);
  EXPECT_EQ(c.get("/v2/models/mm/bogus").status, 404u);
}

TEST_F(HttpServerTest, JsonInferenceEqualsSessionRun) {
  const Tensor x = json_rounded(testing::random_input(3, 11));
  auto [h, y] = reference(x);
  Client c(port());
  Reply r = c.post("/v2/models/mm/infer", infer_json(x));
  ASSERT_EQ(r.status, 200u) << r.body;
  auto d = parse(r.body);
  EXPECT_EQ(std::string(d["model_name"].GetString()), "mm");
  EXPECT_EQ(std::string(d["model_version"].GetString()), "1");
  EXPECT_EQ(std::string(d["id"].GetString()), "req-1");
  expect_near(output_data(d, "y", 3), y);
  expect_near(output_data(d, "h", 3), h);

  // Nested data, one output requested, through the versioned route.
  std::string nested = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3,4],"data":[)";
  for (int row = 0; row < 3; ++row) {
    nested += row ? ",[" : "[";
    for (int i = 0; i < kIn; ++i) nested += (i ? "," : "") + std::to_string(x.data<float>()[row * kIn + i]);
    nested += "]";
  }
  nested += R"(]}],"outputs":[{"name":"y"}]})";
  Reply n = c.post("/v2/models/mm/versions/1/infer", nested);
  ASSERT_EQ(n.status, 200u) << n.body;
  auto nd = parse(n.body);
  ASSERT_EQ(nd["outputs"].Size(), 1u);
  expect_near(output_data(nd, "y", 3), y);
  EXPECT_FALSE(nd.HasMember("id"));
}

TEST_F(HttpServerTest, BinaryRequestAndResponseAgreeWithJson) {
  const Tensor x = testing::random_input(2, 12);
  auto [h, y] = reference(x);
  const std::string header =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"parameters":{"binary_data_size":32}}],)"
      R"("outputs":[{"name":"y","parameters":{"binary_data":true}},{"name":"h"}]})";
  std::string body = header;
  body.append(static_cast<const char*>(x.raw()), x.nbytes());
  Client c(port());
  Reply r = c.post("/v2/models/mm/infer", body, {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_FALSE(r.headers["Inference-Header-Content-Length"].empty());
  const size_t hl = std::stoul(std::string(r.headers["Inference-Header-Content-Length"]));
  ASSERT_LE(hl, r.body.size());
  auto d = parse(r.body.substr(0, hl));
  ASSERT_EQ(d["outputs"].Size(), 2u);
  EXPECT_EQ(std::string(d["outputs"][0]["name"].GetString()), "y");
  ASSERT_EQ(d["outputs"][0]["parameters"]["binary_data_size"].GetInt(), 2 * kOut * 4);
  ASSERT_EQ(r.body.size(), hl + 2 * kOut * 4);
  std::vector<float> yb(2 * kOut);
  std::memcpy(yb.data(), r.body.data() + hl, yb.size() * 4);
  expect_near(yb, y);
  expect_near(output_data(d, "h", 2), h);  // "h" asked without binary_data: JSON

  // binary_data_output: every output raw, in name order.
  const std::string all =
      R"({"parameters":{"binary_data_output":true},)" + header.substr(1, header.find(",\"outputs\"") - 1) + "}";
  std::string body2 = all;
  body2.append(static_cast<const char*>(x.raw()), x.nbytes());
  Reply r2 = c.post("/v2/models/mm/infer", body2, {{"Inference-Header-Content-Length", std::to_string(all.size())}});
  ASSERT_EQ(r2.status, 200u) << r2.body;
  const size_t hl2 = std::stoul(std::string(r2.headers["Inference-Header-Content-Length"]));
  ASSERT_EQ(r2.body.size(), hl2 + 2 * (2 * kOut * 4));
  std::vector<float> hb(2 * kOut), yb2(2 * kOut);
  std::memcpy(hb.data(), r2.body.data() + hl2, hb.size() * 4);
  std::memcpy(yb2.data(), r2.body.data() + hl2 + hb.size() * 4, yb2.size() * 4);
  expect_near(hb, h);
  expect_near(yb2, y);
}

TEST_F(HttpServerTest, EachErrorHasItsStatus) {
  Client c(port());
  const Tensor x = testing::random_input(1, 13);

  Reply bad_json = c.post("/v2/models/mm/infer", "{\"inputs\": [");
  EXPECT_EQ(bad_json.status, 400u);
  EXPECT_NE(error_of(bad_json).find("malformed JSON"), std::string::npos);

  Reply shape =
      c.post("/v2/models/mm/infer", R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"data":[1,2,3,4]}]})");
  EXPECT_EQ(shape.status, 400u);
  EXPECT_NE(error_of(shape).find("input 'x'"), std::string::npos) << shape.body;

  Reply dtype =
      c.post("/v2/models/mm/infer", R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1,4],"data":[1,2,3,4]}]})");
  EXPECT_EQ(dtype.status, 400u) << dtype.body;

  Reply model_shape =
      c.post("/v2/models/mm/infer", R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,5],"data":[1,2,3,4,5]}]})");
  EXPECT_EQ(model_shape.status, 400u) << model_shape.body;

  Reply unknown = c.post("/v2/models/nope/infer", infer_json(x));
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_NE(error_of(unknown).find("nope"), std::string::npos);

  EXPECT_EQ(c.get("/v2/models/mm/infer").status, 405u);
  EXPECT_EQ(c.post("/v2/models/mm/infer", infer_json(x), {{"Inference-Header-Content-Length", "999999"}}).status, 400u);
  EXPECT_EQ(c.post("/v2/models/mm/infer", infer_json(x), {{"Inference-Header-Content-Length", "abc"}}).status, 400u);
  EXPECT_EQ(c.post("/v2/models/mm/infer", infer_json(x), {{"Content-Encoding", "gzip"}}).status, 400u);
  // The connection survived every error above.
  EXPECT_EQ(c.post("/v2/models/mm/infer", infer_json(x)).status, 200u);

  // Over the body limit: answered 413 as soon as the header announces it, then closed.
  http::request<http::string_body> req{http::verb::post, "/v2/models/mm/infer", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_length, std::to_string(kMaxRequestBytes + 1));
  beast::error_code ec;
  asio::io_context ioc;
  beast::tcp_stream s(ioc);
  s.expires_after(10s);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port())), ec);
  ASSERT_FALSE(ec);
  http::request_serializer<http::string_body> sr(req);
  http::write_header(s, sr, ec);
  ASSERT_FALSE(ec);
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(s, buf, res, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result_int(), 413u);
  EXPECT_NE(res.body().find("\"error\""), std::string::npos);
  EXPECT_FALSE(res.keep_alive());
}

TEST_F(HttpServerTest, ExpectContinueGetsAGoAheadBeforeTheBody) {
  const Tensor x = json_rounded(testing::random_input(1, 20));
  const std::string body = infer_json(x);
  asio::io_context ioc;
  beast::tcp_stream s(ioc);
  beast::error_code ec;
  s.expires_after(10s);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port())), ec);
  ASSERT_FALSE(ec);
  const std::string head = "POST /v2/models/mm/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n";
  asio::write(s.socket(), asio::buffer(head), ec);
  ASSERT_FALSE(ec);
  beast::flat_buffer buf;
  http::response<http::empty_body> go;
  http::read(s, buf, go, ec);  // a 1xx response has no body
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(go.result(), http::status::continue_);
  asio::write(s.socket(), asio::buffer(body), ec);
  ASSERT_FALSE(ec);
  http::response<http::string_body> res;
  http::read(s, buf, res, ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_EQ(res.result_int(), 200u) << res.body();
  expect_near(output_data(parse(res.body()), "y", 1), reference(x).second);
}

TEST_F(HttpServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  Client c(port());
  for (int i = 0; i < 20; ++i) {
    const Tensor x = json_rounded(testing::random_input(1 + i % 4, 100 + static_cast<uint32_t>(i)));
    Reply r = i % 3 == 2 ? c.get("/v2/health/ready") : c.post("/v2/models/mm/infer", infer_json(x));
    ASSERT_EQ(r.status, 200u) << "request " << i << ": " << r.body;
    EXPECT_TRUE(r.keep_alive);
    if (i % 3 != 2) expect_near(output_data(parse(r.body), "y", 1 + i % 4), reference(x).second);
  }
}

TEST_F(HttpServerTest, ConcurrentClientsGetTheirOwnResults) {
  constexpr int kClients = 6, kEach = 15;
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < kClients; ++t)
    threads.emplace_back([&, t] {
      Client c(port());
      for (int i = 0; i < kEach; ++i) {
        const Tensor x = json_rounded(testing::random_input(1 + (t + i) % 3, static_cast<uint32_t>(1000 * t + i)));
        Reply r = c.post("/v2/models/mm/infer", infer_json(x));
        if (r.status != 200u) continue;
        std::vector<float> h, y;
        std::vector<float> xv(x.data<float>(), x.data<float>() + x.numel());
        testing::matmul_relu_reference(xv, static_cast<int>(x.shape()[0]), &h, &y);
        auto got = output_data(parse(r.body), "y", static_cast<int>(x.shape()[0]));
        bool same = got.size() == y.size();
        for (size_t k = 0; same && k < y.size(); ++k) same = std::fabs(got[k] - y[k]) < 1e-5f;
        good += same;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), kClients * kEach);
}

TEST_F(HttpServerTest, PriorityAndTimeoutParameters) {
  Client c(port());
  const Tensor x = json_rounded(testing::random_input(1, 14));
  Reply r = c.post("/v2/models/mm/infer", infer_json(x, R"("parameters":{"priority":1,"timeout":5000000},)"));
  ASSERT_EQ(r.status, 200u) << r.body;
  expect_near(output_data(parse(r.body), "y", 1), reference(x).second);
  EXPECT_EQ(c.post("/v2/models/mm/infer", infer_json(x, R"("parameters":{"priority":"high"},)")).status, 400u);
}

TEST_F(HttpServerTest, StatisticsMetricsAndRepositoryIndex) {
  Client c(port());
  ASSERT_EQ(c.post("/v2/models/mm/infer", infer_json(testing::random_input(1, 15))).status, 200u);
  Reply all = c.get("/v2/models/stats");
  ASSERT_EQ(all.status, 200u);
  EXPECT_TRUE(parse(all.body)["model_stats"].IsArray());
  Reply one = c.get("/v2/models/mm/stats");
  ASSERT_EQ(one.status, 200u);
  auto sd = parse(one.body);
  ASSERT_EQ(sd["model_stats"].Size(), 1u);
  EXPECT_GE(sd["model_stats"][0]["inference_count"].GetUint64(), 1u);
  EXPECT_EQ(c.get("/v2/models/nope/stats").status, 404u);

  Reply metrics = c.get("/metrics");
  ASSERT_EQ(metrics.status, 200u);
  EXPECT_EQ(metrics.headers[http::field::content_type], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(metrics.body.find("mm"), std::string::npos);

  Reply index = c.post("/v2/repository/index", "");
  ASSERT_EQ(index.status, 200u);
  auto id = parse(index.body);
  ASSERT_TRUE(id.IsArray());
  bool found = false;
  for (const auto& e : id.GetArray())
    if (std::string(e["name"].GetString()) == "mm") {
      found = true;
      EXPECT_EQ(std::string(e["state"].GetString()), "READY");
      EXPECT_EQ(std::string(e["version"].GetString()), "1");
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(c.post("/v2/repository/index", "{\"ready\": true}").status, 200u);
  EXPECT_EQ(c.post("/v2/repository/index", "{\"ready\": ").status, 400u);
  EXPECT_EQ(c.get("/v2/repository/index").status, 405u);
}

TEST_F(HttpServerTest, LoadAndUnloadThroughTheApi) {
  Client c(port());
  ASSERT_EQ(c.get("/v2/models/spare/ready").status, 200u);
  ASSERT_EQ(c.post("/v2/repository/models/spare/unload", "").status, 200u);
  EXPECT_NE(c.get("/v2/models/spare/ready").status, 200u);
  EXPECT_NE(c.post("/v2/models/spare/infer", infer_json(testing::random_input(1, 16))).status, 200u);
  ASSERT_EQ(c.post("/v2/repository/models/spare/load", "").status, 200u);
  EXPECT_EQ(c.get("/v2/models/spare/ready").status, 200u);
  EXPECT_EQ(c.post("/v2/models/spare/infer", infer_json(testing::random_input(1, 16))).status, 200u);
  EXPECT_EQ(c.post("/v2/repository/models/absent/load", "").status, 404u);
  EXPECT_EQ(c.get("/v2/repository/models/spare/load").status, 405u);
}

TEST_F(HttpServerTest, RandomMalformedRequestsAreAnsweredOrClosed) {
  const Tensor x = json_rounded(testing::random_input(2, 17));
  const std::string json = infer_json(x);
  const std::string good =
      "POST /v2/models/mm/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(json.size()) + "\r\n\r\n" + json;
  const std::string header =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],"parameters":{"binary_data_size":32}}]})";
  const std::string bin_body = header + std::string(static_cast<const char*>(x.raw()), x.nbytes());
  const std::string good_bin =
      "POST /v2/models/mm/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nInference-Header-Content-Length: " +
      std::to_string(header.size()) + "\r\nContent-Length: " + std::to_string(bin_body.size()) + "\r\n\r\n" + bin_body;
  std::mt19937 rng(2024);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(1, n)); };
  const std::vector<std::string> junk = {"\r\n",     "\0\0\0",   ":",        "Content-Length: 5\r\n",
                                         "\xff\xfe", "[[[[[[[[", "}",        "Transfer-Encoding: chunked\r\n",
                                         "\r\n\r\n", " ",        "HTTP/1.1", "Inference-Header-Content-Length: 3\r\n"};
  std::map<int, int> statuses;
  for (int i = 0; i < 200; ++i) {
    std::string m = i % 2 ? good_bin : good;
    switch (i % 7) {
      case 0:
        m = m.substr(0, pick(m.size()));
        break;   // truncated
      case 1: {  // wrong Content-Length
        const size_t at = m.find("Content-Length: ", m.find("\r\nContent-Length") + 2) + 16;
        const size_t end = m.find("\r\n", at);
        const std::vector<std::string> lengths = {
            "0", "1", std::to_string(pick(4000)), "-5", "abc", "99999999999999999999999", "18446744073709551615"};
        m.replace(at, end - at, lengths[pick(lengths.size())]);
        break;
      }
      case 2:  // garbage header line
        m.insert(m.find("\r\n") + 2, junk[pick(junk.size())] + "\r\n");
        break;
      case 3:  // random bytes overwritten
        for (int k = 0; k < 1 + static_cast<int>(pick(8)); ++k) m[pick(m.size())] = static_cast<char>(rng());
        break;
      case 4:  // junk inserted anywhere
        m.insert(pick(m.size()), junk[pick(junk.size())]);
        break;
      case 5:  // bytes deleted from the body
        m.erase(m.find("\r\n\r\n") + 4 + pick(m.size() - m.find("\r\n\r\n") - 4), 1 + pick(20));
        break;
      default: {  // a huge declared binary size, or a deep nesting in the JSON
        const size_t at = m.find("\"data\":");
        if (at != std::string::npos)
          m.insert(at + 7, std::string(5000, '['));
        else
          m.replace(m.find("\"binary_data_size\":32"), 21, "\"binary_data_size\":9999999999999");
        break;
      }
    }
    bool timed_out = false;
    const std::string reply = raw_exchange(port(), m, &timed_out);
    ASSERT_FALSE(timed_out) << "mutation " << i << " hung the connection";
    if (reply.empty()) continue;  // closed without an answer: allowed for unparseable streams
    ASSERT_EQ(reply.rfind("HTTP/1.1 ", 0), 0u) << "mutation " << i << ": " << reply.substr(0, 200);
    const int status = std::stoi(reply.substr(9, 3));
    EXPECT_TRUE(status == 200 || status == 400 || status == 404 || status == 405 || status == 413 || status == 431)
        << "mutation " << i << " got " << status << ": " << reply.substr(0, 300);
    ++statuses[status];
  }
  // Most mutations are refused, a few still form a valid request.
  EXPECT_GT(statuses[400], 50);
  EXPECT_GT(statuses[200], 0);
  EXPECT_GT(statuses[413], 0);

  Client c(port());
  Reply r = c.post("/v2/models/mm/infer", json);
  ASSERT_EQ(r.status, 200u) << r.body;
  expect_near(output_data(parse(r.body), "y", 2), reference(x).second);
}

TEST(HttpServerOptionsTest, MetricsOnlyModelControlOffAndIdleTimeout) {
  testing::TempRepo dir;
  dir.write("mm/1/model.onnx", testing::matmul_relu_onnx());
  Repository repo(dir.path(), {});
  ASSERT_TRUE(repo.load_all().ok());
  ServerCore core(repo, {});

  HttpOptions mo;
  mo.port = 0;
  mo.metrics_only = true;
  HttpServer metrics(core, mo);
  ASSERT_TRUE(metrics.start().ok());
  {
    Client c(metrics.port());
    EXPECT_EQ(c.get("/metrics").status, 200u);
    EXPECT_EQ(c.get("/v2").status, 404u);
    EXPECT_EQ(c.get("/v2/health/live").status, 404u);
  }

  HttpOptions ho;
  ho.port = 0;
  ho.idle_timeout_s = 1;
  HttpServer http(core, ho);
  ASSERT_TRUE(http.start().ok());
  Client c(http.port());
  for (const char* op : {"unload", "load"}) {
    Reply denied = c.post(std::string("/v2/repository/models/mm/") + op, "");
    EXPECT_EQ(denied.status, 400u);
    EXPECT_EQ(error_of(denied).rfind("explicit model load / unload is not allowed", 0), 0u) << error_of(denied);
  }
  EXPECT_EQ(c.get("/v2/models/mm/ready").status, 200u);
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(c.get("/v2/health/live").status, 0u);  // the idle connection was closed

  // A second server cannot take a port in use.
  HttpOptions busy;
  busy.port = http.port();
  HttpServer clash(core, busy);
  Status s = clash.start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find(std::to_string(http.port())), std::string::npos) << s.message();

  // stop() with an idle keep-alive connection open returns promptly.
  Client idle(metrics.port());
  EXPECT_EQ(idle.get("/metrics").status, 200u);
  const auto t0 = std::chrono::steady_clock::now();
  metrics.stop();
  http.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(idle.get("/metrics").status, 0u);
}

TEST(HttpServerOptionsTest, DrainingAnswers503AndStopWaitsForInferences) {
  testing::TempRepo dir;
  dir.write("mm/1/model.onnx", testing::matmul_relu_onnx());
  dir.write("mm/config.pbtxt", "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 100000 }\n");
  Repository repo(dir.path(), {});
  ASSERT_TRUE(repo.load_all().ok());
  ServerCore core(repo, {});
  HttpOptions ho;
  ho.port = 0;
  HttpServer http(core, ho);
  ASSERT_TRUE(http.start().ok());
  // A request waiting in the batcher (100 ms) while the server stops: it is still answered.
  Reply waited;
  std::thread t([&] {
    Client c(http.port());
    waited = c.post("/v2/models/mm/infer", infer_json(testing::random_input(1, 18)));
  });
  for (int i = 0; i < 2000 && core.in_flight() == 0; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_GT(core.in_flight(), 0);
  EXPECT_TRUE(core.drain(5s));
  // Each answer during the drain closes its connection (a client must not reuse it).
  Reply ready = Client(http.port()).get("/v2/health/ready");
  EXPECT_EQ(ready.status, 503u);
  EXPECT_FALSE(ready.keep_alive);
  Reply refused = Client(http.port()).post("/v2/models/mm/infer", infer_json(testing::random_input(1, 19)));
  EXPECT_EQ(refused.status, 503u);
  EXPECT_FALSE(refused.keep_alive);
  http.stop();
  t.join();
  EXPECT_EQ(waited.status, 200u) << waited.body;
}

}  // namespace
}  // namespace streamline::serve
