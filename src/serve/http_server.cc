// HttpServer: the listener (with the connection cap), the I/O threads, and stopping without
// dropping requests. Connections are in http_session.cc, routes in http_routes.cc.

#include "serve/http_server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <exception>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "serve/http_session.h"

namespace streamline::serve {

using namespace http_detail;

namespace {

// How long stop() waits for connections busy with a request before it abandons them.
constexpr auto kStopGrace = std::chrono::seconds(30);
// stop() holds responses until nothing new has come for this long...
constexpr auto kQuiet = std::chrono::milliseconds(100);
// ...or this long has passed.
constexpr auto kHoldLimit = std::chrono::seconds(2);

}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<HttpState> state;
  std::unique_ptr<tcp::acceptor> acceptor;    // on its own strand
  std::unique_ptr<asio::steady_timer> retry;  // backs off after a failed accept (out of descriptors)
  // Keeps the I/O threads running while no operation is pending (every connection holding its
  // response, the listener closed) until stop() is done with them.
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::mutex stop_mu;
  bool started = false, stopped = false;
  int port = 0;

  void accept() {
    acceptor->async_accept(asio::make_strand(state->ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (!ec) {
        // Taken even as the listener closes (this completion was already queued): its client
        // may have sent a request.
        adopt(std::move(socket));
        if (acceptor->is_open() && !state->stopping()) accept();
        return;
      }
      if (ec == asio::error::operation_aborted || !acceptor->is_open() || state->stopping()) return;
      SL_LOG(kWarning) << "HTTP accept failed: " << ec.message();
      retry->expires_after(std::chrono::milliseconds(100));
      retry->async_wait([this](beast::error_code e) {
        if (!e && acceptor->is_open() && !state->stopping()) accept();
      });
    });
  }

  // A new connection: served, or refused with a 503 over the connection cap.
  void adopt(tcp::socket socket) {
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    const int cap = state->options.max_connections;
    const bool over_cap = cap > 0 && state->connections.load() >= cap;
    std::make_shared<HttpSession>(std::move(socket), *state, over_cap)->start();
  }

  // Every open connection, run on its strand.
  template <typename F>
  void for_each_session(F f) {
    std::vector<std::shared_ptr<HttpSession>> live;
    {
      std::lock_guard<std::mutex> l(state->mu);
      for (auto& [key, weak] : state->sessions)
        if (auto s = weak.lock()) live.push_back(std::move(s));
    }
    for (auto& s : live) asio::post(s->executor(), [s, f] { f(*s); });
  }
};

HttpServer::HttpServer(ServerCore& core, HttpOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->state = std::make_shared<HttpState>(core, std::move(options));
}

HttpServer::~HttpServer() {
  stop();
}

int HttpServer::port() const {
  return impl_->port;
}

Status HttpServer::start() {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->started) return invalid_argument("the HTTP server was already started");
  HttpState& st = *impl_->state;
  const HttpOptions& o = st.options;
  const std::string where = o.host + ":" + std::to_string(o.port);
  if (o.port < 0 || o.port > 65535) return invalid_argument("HTTP port out of range: " + std::to_string(o.port));
  if (o.idle_timeout_s <= 0) return invalid_argument("idle_timeout_s must be positive");
  if (o.max_connections < 0) return invalid_argument("max_connections must not be negative");
  if (o.max_json_bytes <= 0) return invalid_argument("max_json_bytes must be positive");

  beast::error_code ec;
  tcp::endpoint endpoint;
  const asio::ip::address address = asio::ip::make_address(o.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, static_cast<unsigned short>(o.port));
  } else {
    tcp::resolver resolver(st.ioc);
    auto results = resolver.resolve(o.host, std::to_string(o.port), tcp::resolver::passive, ec);
    if (ec || results.empty()) return unavailable("cannot resolve HTTP host " + where + ": " + ec.message());
    endpoint = results.begin()->endpoint();
  }
  auto acceptor = std::make_unique<tcp::acceptor>(asio::make_strand(st.ioc));
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return unavailable("cannot listen for HTTP on " + where + ": " + ec.message());
  impl_->port = acceptor->local_endpoint(ec).port();
  st.decode_pool = std::make_unique<TaskPool>(TaskPoolOptions{
      .threads = std::max(1, o.decode_threads), .max_queued = o.max_queued_decodes, .name = "sl-http-decode"});
  st.control_pool = std::make_unique<TaskPool>(
      TaskPoolOptions{.threads = 1, .max_queued = o.max_queued_model_control, .name = "sl-http-load"});
  impl_->retry = std::make_unique<asio::steady_timer>(acceptor->get_executor());
  impl_->acceptor = std::move(acceptor);
  impl_->started = true;
  impl_->work.emplace(st.ioc.get_executor());
  impl_->accept();
  const int n = std::max(1, o.io_threads);
  for (int i = 0; i < n; ++i)
    impl_->threads.emplace_back([state = impl_->state] {
      for (;;) {
        try {
          state->ioc.run();
          return;
        } catch (const std::exception& e) {
          SL_LOG(kError) << "HTTP I/O thread: " << e.what();
        }
      }
    });
  return ok_status();
}

void HttpServer::stop() {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (!impl_->started || impl_->stopped) return;
  impl_->stopped = true;
  HttpState& st = *impl_->state;

  // 1. Hold every response while the listener still accepts, until the clients are quiet: a client
  // waiting for its answer sends nothing new, so none is caught by the listener closing (a
  // connection in its backlog is reset) or by its connection closing.
  st.phase = Phase::kHolding;
  const auto hold_start = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::lock_guard<std::mutex> l(st.mu);
      if (st.sessions.empty()) break;
    }
    const auto now = std::chrono::steady_clock::now();
    const auto last = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(st.last_activity_ns.load()));
    if (now - last >= kQuiet || now - hold_start >= kHoldLimit) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // 2. Stop accepting (the acceptor lives on its strand). Closing a listener resets the
  // connections in its backlog, whose clients may have sent a request already: take every one
  // waiting first (they are answered like the others), then close at once.
  std::promise<void> closed;
  asio::post(impl_->acceptor->get_executor(), [this, &closed] {
    beast::error_code ec;
    impl_->acceptor->non_blocking(true, ec);
    while (!ec) {
      tcp::socket socket(asio::make_strand(impl_->state->ioc));
      impl_->acceptor->accept(socket, ec);
      if (!ec) impl_->adopt(std::move(socket));
    }
    impl_->acceptor->close(ec);
    impl_->retry->cancel();
    closed.set_value();
  });
  closed.get_future().wait();

  // 3. Held responses go out; each connection answers what it has received, then closes.
  st.phase = Phase::kStopping;
  impl_->for_each_session([](HttpSession& s) { s.release(); });

  // 4. Wait for the connections (bounded), then for model loads (they use the repository, which
  // the caller may destroy once stop() returns) and decodes.
  {
    std::unique_lock<std::mutex> l(st.mu);
    if (!st.cv.wait_for(l, kStopGrace, [&] { return st.sessions.empty(); })) {
      SL_LOG(kWarning) << "HTTP server stopping with " << st.sessions.size() << " connections still busy";
    }
  }
  st.control_pool->stop();
  st.decode_pool->stop();

  // 5. Stop the I/O threads. Connections left over are destroyed with the io_context; a runtime
  // callback still to come keeps it alive until it has posted its (never sent) response.
  impl_->work.reset();
  st.ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
  // The acceptor and the timer belong to the io_context: drop them while it exists.
  impl_->retry.reset();
  impl_->acceptor.reset();
}

}  // namespace streamline::serve
