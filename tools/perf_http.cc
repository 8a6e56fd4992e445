// `streamline perf` over HTTP/1.1 (Boost.Beast): one kept-alive TCP connection per worker or
// in-flight slot, the binary tensor extension both ways. A connection is used synchronously
// (infer) or asynchronously on the client's I/O threads (start); either way it times the write
// of the request and the read of the response from its first byte, as perf_analyzer does.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <thread>

#include "perf_transport.h"

namespace streamline::tools {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;

Status response_status(const HttpResponse& res) {
  const int status = static_cast<int>(res.result_int());
  if (status == 200) return ok_status();
  // A binary response's error is still JSON; the header length is not needed to read it.
  return Status(code_from_http(status), error_text(res.body()));
}

// The control connection (metadata, statistics): synchronous GETs on its own io_context.
// Reconnects once when the server has closed it.
class HttpLink {
 public:
  explicit HttpLink(Endpoint e) : endpoint_(std::move(e)) {}

  Result<std::string> get(const std::string& target) {
    HttpRequest req{http::verb::get, target, 11};
    req.set(http::field::host, endpoint_.host);
    req.keep_alive(true);
    for (int attempt = 0;; ++attempt) {
      beast::error_code ec;
      if (!socket_.is_open()) {
        tcp::resolver resolver(ioc_);
        auto results = resolver.resolve(endpoint_.host, endpoint_.port, ec);
        if (ec) return unavailable("cannot resolve " + endpoint_.text() + ": " + ec.message());
        asio::connect(socket_, results, ec);
        if (ec) return unavailable("cannot connect to http://" + endpoint_.text() + ": " + ec.message());
      }
      http::write(socket_, req, ec);
      if (!ec) {
        http::response_parser<http::string_body> parser;
        parser.body_limit(boost::none);
        buffer_.clear();
        http::read(socket_, buffer_, parser, ec);
        if (!ec) {
          HttpResponse res = parser.release();
          if (!res.keep_alive()) socket_.close(ec);
          SL_RETURN_IF_ERROR(response_status(res));
          return std::move(res.body());
        }
      }
      socket_.close(ec);
      if (attempt > 0) return unavailable("HTTP request to " + endpoint_.text() + " failed: " + ec.message());
    }
  }

 private:
  Endpoint endpoint_;
  asio::io_context ioc_;
  tcp::socket socket_{ioc_};
  beast::flat_buffer buffer_;
};

class HttpConnection final : public PerfConnection {
 public:
  HttpConnection(asio::io_context& ioc, const tcp::resolver::results_type& addresses, const std::string& endpoint,
                 const std::vector<HttpRequest>& requests)
      : socket_(ioc), addresses_(addresses), endpoint_(endpoint), requests_(requests) {}

  Status open() {
    beast::error_code ec;
    asio::connect(socket_, addresses_, ec);
    if (ec) return unavailable("cannot connect to http://" + endpoint_ + ": " + ec.message());
    socket_.set_option(tcp::no_delay(true), ec);
    return ok_status();
  }

  Status infer(size_t request, RequestTiming* timing) override {
    t0_ = PerfClock::now();
    t_sent_ = t_recv_ = t0_;
    for (int attempt = 0;; ++attempt) {
      beast::error_code ec;
      if (!socket_.is_open()) {
        if (Status s = open(); !s.ok()) return finish(s, timing);
      }
      http::write(socket_, requests_[request], ec);
      if (!ec) {
        t_sent_ = PerfClock::now();
        if (buffer_.size() == 0) socket_.wait(tcp::socket::wait_read, ec);
        t_recv_ = PerfClock::now();
      }
      if (!ec) {
        http::response_parser<http::string_body> parser;
        parser.body_limit(boost::none);
        http::read(socket_, buffer_, parser, ec);
        if (!ec) {
          res_ = parser.release();
          if (!res_.keep_alive()) socket_.close(ec);
          return finish(response_status(res_), timing);
        }
      }
      // A kept-alive connection the server closed meanwhile fails here once; the retry reconnects.
      close();
      if (attempt > 0) return finish(unavailable("HTTP request to " + endpoint_ + " failed: " + ec.message()), timing);
    }
  }

  void start(size_t request, InferDone done) override {
    request_ = request;
    done_ = std::move(done);
    attempt_ = 0;
    t0_ = PerfClock::now();
    t_sent_ = t_recv_ = t0_;
    begin_attempt();
  }

 private:
  Status finish(Status s, RequestTiming* timing) {
    const PerfClock::time_point end = PerfClock::now();
    timing->end = end;
    timing->latency_ns = elapsed_ns(t0_, end);
    timing->send_ns = elapsed_ns(t0_, t_sent_);
    timing->recv_ns = t_recv_ > t0_ ? elapsed_ns(t_recv_, end) : 0;
    return s;
  }

  void close() {
    beast::error_code ec;
    socket_.close(ec);
    buffer_.clear();
  }

  // Asynchronous path: connect if needed -> write -> wait for the first byte -> read.
  void begin_attempt() {
    if (socket_.is_open()) return write();
    asio::async_connect(socket_, addresses_, [this](const beast::error_code& ec, const tcp::endpoint&) {
      if (ec) return complete(unavailable("cannot connect to http://" + endpoint_ + ": " + ec.message()));
      beast::error_code ignored;
      socket_.set_option(tcp::no_delay(true), ignored);
      write();
    });
  }

  void write() {
    http::async_write(socket_, requests_[request_], [this](const beast::error_code& ec, size_t) {
      if (ec) return retry_or_fail(ec);
      t_sent_ = PerfClock::now();
      if (buffer_.size() > 0) return read({});
      socket_.async_wait(tcp::socket::wait_read, [this](const beast::error_code& e) { read(e); });
    });
  }

  void read(const beast::error_code& ec) {
    if (ec) return retry_or_fail(ec);
    t_recv_ = PerfClock::now();
    parser_.emplace();
    parser_->body_limit(boost::none);
    http::async_read(socket_, buffer_, *parser_, [this](const beast::error_code& e, size_t) {
      if (e) return retry_or_fail(e);
      res_ = parser_->release();
      if (!res_.keep_alive()) close();
      complete(response_status(res_));
    });
  }

  void retry_or_fail(const beast::error_code& ec) {
    close();
    if (attempt_++ == 0) return begin_attempt();
    complete(unavailable("HTTP request to " + endpoint_ + " failed: " + ec.message()));
  }

  void complete(Status s) {
    RequestTiming timing;
    s = finish(std::move(s), &timing);
    InferDone done = std::move(done_);
    done(s, timing);
  }

  tcp::socket socket_;
  const tcp::resolver::results_type& addresses_;
  const std::string& endpoint_;
  const std::vector<HttpRequest>& requests_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  HttpResponse res_;
  // The request under way.
  size_t request_ = 0;
  int attempt_ = 0;
  InferDone done_;
  PerfClock::time_point t0_, t_sent_, t_recv_;
};

std::string encode_request(const RequestInputs& r, const std::vector<std::string>& outputs, size_t* header) {
  // Binary tensor extension: a JSON header naming each input's byte count, then the bytes.
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("inputs");
  w.StartArray();
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    w.StartObject();
    w.Key("name");
    w.String(r.tensors[i].name.c_str());
    w.Key("datatype");
    w.String(r.tensors[i].datatype.c_str());
    w.Key("shape");
    w.StartArray();
    for (int64_t d : r.tensors[i].shape) w.Int64(d);
    w.EndArray();
    w.Key("parameters");
    w.StartObject();
    w.Key("binary_data_size");
    w.Uint64(r.values[i].nbytes());
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Key("outputs");
  w.StartArray();
  for (const auto& o : outputs) {
    w.StartObject();
    w.Key("name");
    w.String(o.c_str());
    w.Key("parameters");
    w.StartObject();
    w.Key("binary_data");
    w.Bool(true);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  std::string body(sb.GetString(), sb.GetSize());
  *header = body.size();
  for (const auto& v : r.values) body.append(static_cast<const char*>(v.raw()), v.nbytes());
  return body;
}

std::string model_path(const std::string& model, const std::string& version) {
  return "/v2/models/" + model + (version.empty() ? "" : "/versions/" + version);
}

class HttpClient final : public PerfClient {
 public:
  explicit HttpClient(Endpoint e) : endpoint_(std::move(e)), text_(endpoint_.text()), control_(endpoint_) {}

  ~HttpClient() override {
    work_.reset();
    ioc_.stop();
    for (auto& t : threads_) t.join();
  }

  const std::string& endpoint() const override { return text_; }

  Result<RemoteModel> metadata(const std::string& model, const std::string& version) override {
    SL_ASSIGN_OR_RETURN(std::string body, control_.get(model_path(model, version)));
    return parse_metadata_json(body, model);
  }

  Result<ServerStats> statistics(const std::string& model, const std::string& version) override {
    SL_ASSIGN_OR_RETURN(std::string body, control_.get(model_path(model, version) + "/stats"));
    return parse_statistics_json(body, model, version);
  }

  Status prepare(const std::string& model, const std::string& version, const std::vector<RequestInputs>& requests,
                 const std::vector<std::string>& outputs) override {
    beast::error_code ec;
    tcp::resolver resolver(ioc_);
    addresses_ = resolver.resolve(endpoint_.host, endpoint_.port, ec);
    if (ec) return unavailable("cannot resolve " + text_ + ": " + ec.message());
    requests_.clear();
    for (const RequestInputs& r : requests) {
      size_t header = 0;
      HttpRequest req{http::verb::post, model_path(model, version) + "/infer", 11};
      req.set(http::field::host, endpoint_.host);
      req.set(http::field::content_type, "application/octet-stream");
      req.body() = encode_request(r, outputs, &header);
      req.set("Inference-Header-Content-Length", std::to_string(header));
      req.keep_alive(true);
      req.prepare_payload();
      requests_.push_back(std::move(req));
    }
    return ok_status();
  }

  Result<std::unique_ptr<PerfConnection>> connect() override {
    auto c = std::make_unique<HttpConnection>(ioc_, addresses_, text_, requests_);
    SL_RETURN_IF_ERROR(c->open());
    return std::unique_ptr<PerfConnection>(std::move(c));
  }

  void run_async(int threads) override {
    if (!threads_.empty()) return;
    work_.emplace(ioc_.get_executor());
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { ioc_.run(); });
  }

 private:
  Endpoint endpoint_;
  std::string text_;
  HttpLink control_;
  asio::io_context ioc_;  // the connections' sockets; run by threads_ once run_async() is called
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  tcp::resolver::results_type addresses_;
  std::vector<HttpRequest> requests_;
};

}  // namespace

std::unique_ptr<PerfClient> make_http_client(Endpoint e) {
  return std::make_unique<HttpClient>(std::move(e));
}

}  // namespace streamline::tools
