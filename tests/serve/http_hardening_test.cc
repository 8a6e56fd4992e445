// The HTTP front end under hostile or heavy traffic: limits answer with their status (trailers,
// JSON bodies, connections), a large decode never holds up other connections, a drain answers
// every request already sent before the connection closes (a stop too, even one not yet read on a
// connection just accepted), model loads share one thread, and errors neither grow with the input
// nor name paths of this machine.

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <thread>

#include "http_test_client.h"
#include "serve/http_server.h"
#include "serve/repository.h"
#include "serve/server_core.h"
#include "serve_test_util.h"

namespace streamline::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using testing::Client;
using testing::raw_exchange;
using testing::Reply;

std::string infer_body(int rows) {
  std::string data = "[";
  for (int i = 0; i < rows * testing::kIn; ++i) data += i ? ",0.25" : "0.25";
  return R"({"inputs":[{"name":"x","datatype":"FP32","shape":[)" + std::to_string(rows) + "," +
         std::to_string(testing::kIn) + R"(],"data":)" + data + "]}]}";
}

std::string post(const std::string& target, const std::string& body, const std::string& headers = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\n" + headers + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

int status_of(const std::string& reply) {
  return reply.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(reply.substr(9, 3)) : 0;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Threads of this process (the server runs in it).
int thread_count() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// A repository with the test model, a core and a server built from `options` (port 0).
struct Fixture {
  explicit Fixture(HttpOptions options, ServerOptions so = {}) {
    dir.write("mm/1/model.onnx", testing::matmul_relu_onnx());
    dir.write("mm/config.pbtxt", "max_batch_size: 8\n");
    dir.write("big/1/model.onnx", testing::matmul_relu_onnx());  // no batch limit: large bodies
    dir.write("big/config.pbtxt", "max_batch_size: 0\n");
    repo = std::make_unique<Repository>(dir.path(), RepositoryOptions{});
    EXPECT_TRUE(repo->load_all().ok());
    core = std::make_unique<ServerCore>(*repo, so);
    options.port = 0;
    http = std::make_unique<HttpServer>(*core, options);
    const Status s = http->start();
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  ~Fixture() {
    http.reset();
    core.reset();
    repo.reset();
  }
  int port() const { return http->port(); }

  testing::TempRepo dir;
  std::unique_ptr<Repository> repo;
  std::unique_ptr<ServerCore> core;
  std::unique_ptr<HttpServer> http;
};

TEST(HttpHardeningTest, ChunkedTrailersOver64KbGet431) {
  Fixture f({});
  const std::string body = infer_body(1);
  for (size_t trailer : {70'000, 1'000'000}) {
    char size[32];
    std::snprintf(size, sizeof(size), "%zx", body.size());
    const std::string request = "POST /v2/models/mm/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                                std::string(size) + "\r\n" + body + "\r\n0\r\nX-Trailer: " + std::string(trailer, 'a') +
                                "\r\n\r\n";
    bool timed_out = false;
    const std::string reply = raw_exchange(f.port(), request, &timed_out);
    EXPECT_FALSE(timed_out);
    EXPECT_EQ(status_of(reply), 431) << trailer << ": " << reply.substr(0, 200);
    EXPECT_NE(reply.find("trailers"), std::string::npos) << reply.substr(0, 300);
  }
  // A trailer within the limit is fine, and the server still serves.
  EXPECT_EQ(Client(f.port()).post("/v2/models/mm/infer", body).status, 200u);
}

TEST(HttpHardeningTest, ConflictingInferenceHeaderContentLengthsAreRefused) {
  Fixture f({});
  const std::string header = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],)"
                             R"("parameters":{"binary_data_size":16}}]})";
  const std::string body = header + std::string(16, '\0');
  const std::string hl = "Inference-Header-Content-Length: " + std::to_string(header.size()) + "\r\n";
  bool timed_out = false;
  const std::string same = raw_exchange(f.port(), post("/v2/models/mm/infer", body, hl + hl), &timed_out);
  EXPECT_EQ(status_of(same), 200) << same.substr(0, 300);
  const std::string other = "Inference-Header-Content-Length: " + std::to_string(header.size() - 1) + "\r\n";
  const std::string conflict = raw_exchange(f.port(), post("/v2/models/mm/infer", body, hl + other), &timed_out);
  EXPECT_EQ(status_of(conflict), 400) << conflict.substr(0, 300);
  EXPECT_NE(conflict.find("given 2 times with different values"), std::string::npos) << conflict;
}

TEST(HttpHardeningTest, JsonBodiesHaveTheirOwnLimit) {
  HttpOptions o;
  o.max_json_bytes = 4096;
  ServerOptions so;
  so.max_request_bytes = 1 << 20;
  Fixture f(o, so);
  const std::string json = infer_body(256);  // about 5 KB of JSON
  ASSERT_GT(json.size(), 4096u);
  Reply r = Client(f.port()).post("/v2/models/big/infer", json);
  EXPECT_EQ(r.status, 413u) << r.body;
  EXPECT_NE(r.body.find("JSON limit of 4096 bytes"), std::string::npos) << r.body;
  // Chunked, the length is only known as the body arrives: the same limit.
  bool timed_out = false;
  char size[32];
  std::snprintf(size, sizeof(size), "%zx", json.size());
  const std::string chunked =
      raw_exchange(f.port(),
                   "POST /v2/models/big/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                       std::string(size) + "\r\n" + json + "\r\n0\r\n\r\n",
                   &timed_out);
  EXPECT_EQ(status_of(chunked), 413) << chunked.substr(0, 300);
  // The same tensor as binary data is bounded by the request limit only.
  const std::string header = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1024,4],)"
                             R"("parameters":{"binary_data_size":16384}}]})";
  Reply binary = Client(f.port()).post("/v2/models/big/infer", header + std::string(16384, '\0'),
                                       {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  EXPECT_EQ(binary.status, 200u) << binary.body;
}

TEST(HttpHardeningTest, ConnectionsOverTheCapGet503AndClose) {
  HttpOptions o;
  o.max_connections = 2;
  Fixture f(o);
  auto a = std::make_unique<Client>(f.port());
  Client b(f.port());
  ASSERT_EQ(a->get("/v2/health/live").status, 200u);
  ASSERT_EQ(b.get("/v2/health/live").status, 200u);
  bool timed_out = false;
  const std::string third = raw_exchange(f.port(), "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n", &timed_out);
  EXPECT_EQ(status_of(third), 503) << third.substr(0, 300);
  EXPECT_NE(third.find("Connection: close"), std::string::npos);
  EXPECT_NE(third.find("too many connections"), std::string::npos) << third;
  EXPECT_EQ(count(third, "HTTP/1.1 "), 1);  // its request was not served
  // Once one closes, a new connection is served again (the count drops when the server has seen
  // the close, so poll for it).
  a.reset();
  unsigned status = 0;
  for (int i = 0; i < 500 && status != 200u; ++i) {
    status = Client(f.port()).get("/v2/health/live").status;
    if (status != 200u) std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(status, 200u);
}

TEST(HttpHardeningTest, ProbesAndSmallRequestsDoNotWaitBehindALargeDecode) {
  std::mutex mu;
  std::condition_variable cv;
  bool decoding = false, release = false;
  HttpOptions o;
  o.io_threads = 1;  // one I/O thread: if it decoded, nothing else could be served meanwhile
  o.decode_threads = 1;
  o.before_decode = [&] {
    std::unique_lock<std::mutex> lock(mu);
    decoding = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  Fixture f(o);
  const std::string large = infer_body(20000);  // about 1.6 MB of JSON
  auto big = std::async(std::launch::async, [&] { return Client(f.port(), 60s).post("/v2/models/big/infer", large); });
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 30s, [&] { return decoding; }));
  }
  // The large request is being decoded (and held there): the others are served meanwhile. (A
  // synchronous client has no timeout; the wait below is the bound.)
  auto others = std::async(std::launch::async, [&] {
    Client probe(f.port());
    return std::vector<unsigned>{probe.get("/v2/health/ready").status, probe.get("/v2/health/live").status,
                                 probe.get("/v2/models/mm").status,
                                 probe.post("/v2/models/mm/infer", infer_body(2)).status};
  });
  const bool served = others.wait_for(20s) == std::future_status::ready;
  EXPECT_TRUE(served) << "the probes waited behind the decode";
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  EXPECT_EQ(others.get(), (std::vector<unsigned>{200, 200, 200, 200}));
  const Reply r = big.get();
  EXPECT_EQ(r.status, 200u) << r.body.substr(0, 300);
}

TEST(HttpHardeningTest, ADrainAnswersEveryPipelinedRequestThenClosesTheConnection) {
  Fixture f({});
  ASSERT_TRUE(f.core->drain(5s));
  std::string pipeline;
  for (int i = 0; i < 5; ++i) pipeline += "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int i = 0; i < 3; ++i) pipeline += post("/v2/models/mm/infer", infer_body(1));
  bool timed_out = false;
  const std::string replies = raw_exchange(f.port(), pipeline, &timed_out);
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(count(replies, "HTTP/1.1 503 "), 8) << replies;
  // Only the last answer closes the connection: the ones before leave room for the next.
  EXPECT_EQ(count(replies, "Connection: close"), 1) << replies;
  EXPECT_GT(replies.rfind("Connection: close"), replies.rfind("HTTP/1.1 503 ")) << replies;
}

// A connection accepted before the listener closed whose first request comes only after the
// others have been answered and closed still gets its answer (its client may have sent it already),
// rather than being closed with it unread.
TEST(HttpHardeningTest, StopAnswersTheFirstRequestOfAConnectionThatHadNoneYet) {
  Fixture f({});
  asio::io_context io;
  const tcp::endpoint at(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(f.port()));
  beast::tcp_stream served(io), fresh(io);
  served.expires_after(10s);
  served.connect(at);
  fresh.expires_after(10s);
  fresh.connect(at);
  const std::string live = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  asio::write(served.socket(), asio::buffer(live));
  beast::flat_buffer buffer;
  http::response<http::string_body> first;
  http::read(served, buffer, first);
  ASSERT_EQ(first.result_int(), 200u);

  std::thread stopper([&] { f.http->stop(); });
  // The connection that has been served is closed by the stop: once it reads the end, every
  // connection has been told to finish.
  beast::error_code ec;
  char byte;
  served.expires_after(20s);
  served.read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::eof) << ec.message();
  served.close();

  asio::write(fresh.socket(), asio::buffer(live), ec);
  EXPECT_FALSE(ec) << ec.message();
  http::response<http::string_body> late;
  fresh.expires_after(20s);
  http::read(fresh, buffer, late, ec);
  EXPECT_FALSE(ec) << "the stop closed a connection without reading its first request: " << ec.message();
  EXPECT_EQ(late.result_int(), 200u);
  EXPECT_FALSE(late.keep_alive());
  stopper.join();
}

TEST(HttpHardeningTest, ModelLoadsShareOneThread) {
  ServerOptions so;
  so.allow_model_control = true;
  Fixture f({}, so);
  const int before = thread_count();
  asio::io_context ioc;
  std::vector<tcp::socket> sockets;
  const std::string load = post("/v2/repository/models/mm/load", "");
  for (int i = 0; i < 200; ++i) {
    sockets.emplace_back(ioc);
    beast::error_code ec;
    sockets.back().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), f.port()), ec);
    ASSERT_FALSE(ec) << ec.message();
    asio::write(sockets.back(), asio::buffer(load), ec);
    ASSERT_FALSE(ec) << ec.message();
  }
  // Each load takes a while and they run one at a time: while the answers come in, count.
  int most = before;
  int ok = 0;
  for (tcp::socket& s : sockets) {
    most = std::max(most, thread_count());
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    beast::error_code ec;
    http::read(s, buffer, res, ec);
    ASSERT_FALSE(ec) << ec.message();
    ok += res.result_int() == 200;
  }
  EXPECT_EQ(ok, 200);
  EXPECT_LT(most - before, 10) << "threads went from " << before << " to " << most;
}

TEST(HttpHardeningTest, ErrorsStayShortAndNameModelsByRepositoryPath) {
  ServerOptions so;
  so.allow_model_control = true;
  Fixture f({}, so);
  Client c(f.port());
  // A 60 KB path comes back in part.
  Reply route = c.get("/v2/" + std::string(60000, 'p'));
  EXPECT_EQ(route.status, 404u);
  EXPECT_LT(route.body.size(), 1000u) << route.body.size();
  EXPECT_NE(route.body.find("more)"), std::string::npos) << route.body.substr(0, 300);
  // Models are named by their place in the repository, not by this machine's paths.
  f.dir.write("broken/1/model.onnx", "this is not an ONNX model");
  Reply broken = c.post("/v2/repository/models/broken/load", "");
  EXPECT_EQ(broken.status, 400u) << broken.body;
  EXPECT_EQ(broken.body.find(f.dir.path()), std::string::npos) << broken.body;
  EXPECT_NE(broken.body.find("broken/1/model.onnx"), std::string::npos) << broken.body;
  Reply missing = c.post("/v2/repository/models/nothing/load", "");
  EXPECT_EQ(missing.status, 404u) << missing.body;
  EXPECT_EQ(missing.body.find(f.dir.path()), std::string::npos) << missing.body;
  for (const RepositoryEntry& e : f.repo->index())
    EXPECT_EQ(e.reason.find(f.dir.path()), std::string::npos) << e.name << ": " << e.reason;
  Reply status = c.get("/v2/models/broken/ready");
  EXPECT_EQ(status.body.find(f.dir.path()), std::string::npos) << status.body;
}

}  // namespace
}  // namespace streamline::serve
