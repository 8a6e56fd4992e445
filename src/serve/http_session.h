#pragma once
// Inside the HTTP front end (http_server.h has the behaviour): what the listener, the connections
// and the runtime callbacks share (HttpState), and one connection (HttpSession).
//
//   auto state = std::make_shared<HttpState>(core, options);
//   std::make_shared<HttpSession>(std::move(socket), *state, /*over_cap=*/false)->start();
//
// A session's members are touched only on its strand; HttpState is thread-safe as documented per
// member.

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/http_compression.h"
#include "serve/http_request.h"
#include "serve/http_server.h"
#include "serve/server_core.h"
#include "serve/task_pool.h"

namespace streamline::serve::http_detail {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// kServing: normal. kHolding: responses wait (stop() phase 1). kStopping: the listener is closed,
// connections answer what they have received and close.
enum class Phase { kServing, kHolding, kStopping };

class HttpSession;

// Held by shared_ptr: a runtime callback that arrives after the server stopped keeps the
// io_context alive until the connection it refers to is gone.
struct HttpState : std::enable_shared_from_this<HttpState> {
  HttpState(ServerCore& c, HttpOptions o);

  // Marks activity (an accepted connection, a request read) for stop()'s quiet period.
  void touch();
  bool stopping() const { return phase.load() == Phase::kStopping; }

  ServerCore& core;
  const HttpOptions options;
  std::atomic<Phase> phase{Phase::kServing};
  std::atomic<uint64_t> next_request_id{1};
  std::atomic<int> connections{0};           // sessions under the cap
  std::atomic<int64_t> last_activity_ns{0};  // steady clock
  // Made by HttpServer::start(), stopped by stop() after the connections are gone.
  std::unique_ptr<TaskPool> decode_pool;   // large bodies
  std::unique_ptr<TaskPool> control_pool;  // model loads and unloads, one at a time
  std::mutex mu;
  std::condition_variable cv;
  std::map<const HttpSession*, std::weak_ptr<HttpSession>> sessions;  // open connections
  // Declared last so that it is destroyed first, while the members above still exist (the
  // connections it destroys unregister themselves).
  asio::io_context ioc;
};

// One HTTP connection.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  // `over_cap`: the server has max_connections open already; this one gets a 503 and closes.
  HttpSession(tcp::socket socket, HttpState& state, bool over_cap);
  ~HttpSession();

  void start();
  // stop() phase 3: sends a held response; an idle connection closes in stages.
  void release();
  // Sends the response to the request being served (held while the server is in kHolding), then
  // reads the next request or closes.
  void send(Response res);
  asio::any_io_executor executor() { return stream_.get_executor(); }

 private:
  void read();
  void on_header(beast::error_code ec);
  void read_body();
  void on_read(beast::error_code ec);
  void on_write(beast::error_code ec);
  // Requests already received and not yet read: buffered bytes, or bytes waiting in the socket.
  bool more_pending();
  // Closes in stages: shutdown of the send side, then whatever the client still sends is read and
  // dropped until it closes (or a deadline), then close; a response just sent is not lost to a
  // reset caused by unread data.
  void finish();
  void discard();
  void close();

  // Answers the request, or starts asynchronous work that send()s later (nullopt). http_routes.cc.
  std::optional<Response> route(Request& req);
  std::optional<Response> route_model(Request& req, const std::vector<std::string>& seg);
  std::optional<Response> infer(Request& req, const std::string& model, const std::string& version);
  std::optional<Response> model_control(const std::string& model, bool load, const std::string& body);
  // The limits of the request about to be read.
  RequestLimits limits() const;

  beast::tcp_stream stream_;
  HttpState& state_;
  beast::flat_buffer buffer_{kHeaderLimit};
  std::optional<RequestReader> reader_;                       // the request being read
  std::optional<Response> response_;                          // being written
  std::optional<Response> held_;                              // waiting for release()
  std::shared_ptr<HttpSession> held_self_;                    // keeps the session while held_
  std::optional<http::response<http::empty_body>> go_ahead_;  // "100 Continue", being written
  std::string discard_;                                       // finish()'s read buffer
  const bool over_cap_;
  bool counted_ = false;  // in state_.connections
  bool reading_ = false;
  bool keep_alive_ = true;
  bool close_after_ = false;
  bool finishing_ = false;
  // No request has arrived on this connection yet: one accepted just before the listener closed
  // still gets its first request answered (with a short deadline) rather than being closed.
  bool fresh_ = true;
  unsigned version_ = 11;
  std::optional<BodyEncoding> accept_;  // the request's Accept-Encoding, for its response
};

}  // namespace streamline::serve::http_detail
