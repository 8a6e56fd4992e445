#pragma once
// A small synchronous HTTP client for the server tests (Boost.Beast on loopback).
//
//   Client c(port);                                   // one keep-alive connection
//   Reply r = c.post("/v2/models/mm/infer", body);    // r.status 0: no response
//   std::string bytes = raw_exchange(port, "GET / HTTP/1.1\r\n\r\n", &timed_out);

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace streamline::serve::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

struct Reply {
  unsigned status = 0;  // 0: no response (connection failed or closed)
  std::string body;
  http::fields headers;
  bool keep_alive = false;
};

// One keep-alive connection; each call sends one request and reads its response (within
// `timeout`).
class Client {
 public:
  explicit Client(int port, std::chrono::seconds timeout = 20s) : stream_(ioc_), timeout_(timeout) {
    beast::error_code ec;
    stream_.expires_after(10s);
    stream_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)), ec);
    EXPECT_FALSE(ec) << ec.message();
  }

  Reply send(http::verb verb, const std::string& target, const std::string& body = "",
             const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    return exchange(req);
  }
  Reply get(const std::string& target) { return send(http::verb::get, target); }
  Reply post(const std::string& target, const std::string& body,
             const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    return send(http::verb::post, target, body, headers);
  }

  Reply exchange(const http::request<http::string_body>& req) {
    Reply r;
    beast::error_code ec;
    stream_.expires_after(timeout_);
    http::write(stream_, req, ec);
    if (ec) return r;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    http::read(stream_, buffer_, parser, ec);
    if (ec) return r;
    auto res = parser.release();
    r.status = res.result_int();
    r.body = res.body();
    r.keep_alive = res.keep_alive();
    for (const auto& f : res) r.headers.set(f.name_string(), f.value());
    return r;
  }

 private:
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  std::chrono::seconds timeout_;
  beast::flat_buffer buffer_;
};

// Sends raw bytes, half-closes, and reads whatever comes back until the server closes.
inline std::string raw_exchange(int port, const std::string& bytes, bool* timed_out) {
  asio::io_context ioc;
  beast::tcp_stream s(ioc);
  beast::error_code ec;
  s.expires_after(10s);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)), ec);
  if (ec) return "connect failed: " + ec.message();
  asio::write(s.socket(), asio::buffer(bytes), ec);  // the server may have closed already
  s.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::string out;
  char buf[4096];
  for (;;) {
    size_t n = s.read_some(asio::buffer(buf), ec);
    out.append(buf, n);
    if (ec) {
      *timed_out = ec == beast::error::timeout;
      break;
    }
  }
  return out;
}

}  // namespace streamline::serve::testing
