#include "serve/http_server.h"

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "serve/http_codec.h"
#include "serve/json_util.h"
#include "serve/model_config.h"

namespace streamline::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// How long stop() waits for connections busy with a request before it abandons them.
constexpr auto kStopGrace = std::chrono::seconds(30);
// Request line and headers together.
constexpr uint32_t kHeaderLimit = 64 * 1024;
constexpr const char* kJson = "application/json";
constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

class Session;

// What the listener, the connections and the callbacks from the runtime share. Held by
// shared_ptr: a callback that arrives after the server stopped keeps the io_context alive until
// the connection it refers to is gone.
struct State : std::enable_shared_from_this<State> {
  State(ServerCore& c, HttpOptions o) : core(c), options(std::move(o)), ioc(std::max(1, options.io_threads)) {}

  ServerCore& core;
  const HttpOptions options;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_request_id{1};
  std::mutex mu;
  std::condition_variable cv;
  std::map<const Session*, std::weak_ptr<Session>> sessions;  // open connections
  int control_ops = 0;                                        // model loads/unloads running on their own threads
  // Declared last so that it is destroyed first, while the members above still exist (the
  // connections it destroys unregister themselves).
  asio::io_context ioc;
};

Response make_response(unsigned status, std::string body, const char* content_type) {
  Response res;
  res.result(status);
  res.set(http::field::server, "streamline");
  if (*content_type != '\0') res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  return res;
}

Response error_response(unsigned status, std::string_view message) {
  return make_response(status, error_json(message), kJson);
}

Response status_response(const Status& s) {
  return error_response(static_cast<unsigned>(http_status(s)), s.message());
}

Response method_not_allowed(const char* allowed) {
  Response res = error_response(405, std::string("method not allowed; use ") + allowed);
  res.set(http::field::allow, allowed);
  return res;
}

std::string repository_index_json(const std::vector<RepositoryEntry>& entries, bool ready_only) {
  JsonOut out;
  out.w.StartArray();
  for (const RepositoryEntry& e : entries) {
    if (ready_only && e.state != ModelState::kReady) continue;
    out.w.StartObject();
    json_key_string(out.w, "name", e.name);
    json_key_string(out.w, "version", e.version);
    json_key_string(out.w, "state", model_state_name(e.state));
    json_key_string(out.w, "reason", e.reason);
    out.w.EndObject();
  }
  out.w.EndArray();
  return out.str();
}

// Decodes %XX escapes of a path segment; false on a malformed escape.
bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      *out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

// One HTTP connection. Every member is touched only on the connection's strand, except the
// registration in State (under its mutex).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, State& state) : stream_(std::move(socket)), state_(state) {}
  ~Session() {
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.sessions.erase(this);
    state_.cv.notify_all();
  }

  void start() {
    {
      std::lock_guard<std::mutex> lock(state_.mu);
      state_.sessions[this] = weak_from_this();
    }
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
  }

  // The server is stopping: close now when waiting for a request, else once the response is out.
  void stop() {
    if (reading_)
      close();
    else
      close_after_ = true;
  }

  // Sends a response to the request being served, then reads the next one (or closes).
  void send(Response res) {
    res.version(version_);
    res.keep_alive(keep_alive_ && !close_after_ && !state_.stopping);
    close_after_ = !res.keep_alive();
    res.prepare_payload();
    response_.emplace(std::move(res));
    stream_.expires_after(std::chrono::seconds(state_.options.idle_timeout_s));
    http::async_write(stream_, *response_, beast::bind_front_handler(&Session::on_write, shared_from_this()));
  }

  asio::any_io_executor executor() { return stream_.get_executor(); }

 private:
  void read() {
    if (state_.stopping || close_after_) return close();
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(static_cast<uint64_t>(std::max<int64_t>(0, state_.core.options().max_request_bytes)));
    stream_.expires_after(std::chrono::seconds(state_.options.idle_timeout_s));
    reading_ = true;
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  // A client that sent "Expect: 100-continue" waits for our go-ahead before it sends the body.
  void on_header(beast::error_code ec, size_t) {
    if (ec) return on_read(ec, 0);
    if (parser_->is_done() || !beast::iequals(parser_->get()[http::field::expect], "100-continue")) return read_body();
    go_ahead_.emplace(http::status::continue_, parser_->get().version());
    http::async_write(stream_, *go_ahead_, [self = shared_from_this()](beast::error_code e, size_t) {
      self->go_ahead_.reset();
      if (e) return self->on_read(e, 0);
      self->read_body();
    });
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, size_t) {
    reading_ = false;
    if (ec) {
      const auto& http_category = http::make_error_code(http::error::end_of_stream).category();
      if (ec == http::error::end_of_stream || ec.category() != http_category) return close();
      // Malformed or oversized: answer, then close (the rest of the stream cannot be trusted).
      keep_alive_ = false;
      version_ = parser_->is_header_done() ? parser_->get().version() : 11;
      if (ec == http::error::body_limit)
        return send(error_response(
            413, "request body larger than " + std::to_string(state_.core.options().max_request_bytes) + " bytes"));
      if (ec == http::error::header_limit) return send(error_response(431, "request headers too large"));
      return send(error_response(400, "malformed HTTP request: " + ec.message()));
    }
    Request req = parser_->release();
    parser_.reset();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    if (std::optional<Response> res = route(req)) send(std::move(*res));
  }

  void on_write(beast::error_code ec, size_t) {
    response_.reset();
    if (ec || close_after_) return close();
    read();
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  // Answers the request, or starts asynchronous work that send()s later (nullopt).
  std::optional<Response> route(Request& req);
  std::optional<Response> route_model(Request& req, const std::vector<std::string>& seg);
  std::optional<Response> infer(Request& req, const std::string& model, const std::string& version);
  std::optional<Response> model_control(const std::string& model, bool load);

  beast::tcp_stream stream_;
  State& state_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<Response> response_;                          // being written
  std::optional<http::response<http::empty_body>> go_ahead_;  // "100 Continue", being written
  bool reading_ = false;
  bool keep_alive_ = true;
  bool close_after_ = false;
  unsigned version_ = 11;
};

std::optional<Response> Session::route(Request& req) {
  std::string_view target(req.target().data(), req.target().size());
  target = target.substr(0, target.find('?'));
  if (target.empty() || target[0] != '/') return error_response(400, "the request target must be a path");
  std::vector<std::string> seg;
  for (size_t pos = 1; pos <= target.size();) {
    size_t end = std::min(target.find('/', pos), target.size());
    std::string s;
    if (!percent_decode(target.substr(pos, end - pos), &s))
      return error_response(400, "malformed %-escape in the path");
    seg.push_back(std::move(s));
    pos = end + 1;
  }
  if (!seg.empty() && seg.back().empty() && seg.size() > 1) seg.pop_back();  // a trailing slash
  for (const std::string& s : seg)
    if (s.empty()) return error_response(404, "no such route");

  const http::verb method = req.method();
  const bool get = method == http::verb::get, post = method == http::verb::post;
  ServerCore& core = state_.core;

  if (seg.size() == 1 && seg[0] == "metrics") {
    if (!get) return method_not_allowed("GET");
    return make_response(200, core.metrics_text(), kMetricsType);
  }
  if (state_.options.metrics_only || seg.empty() || seg[0] != "v2")
    return error_response(404, "no such route: " + std::string(target));
  if (seg.size() == 1) {
    if (!get) return method_not_allowed("GET");
    return make_response(200, core.server_metadata_json(), kJson);
  }
  if (seg[1] == "health" && seg.size() == 3 && (seg[2] == "live" || seg[2] == "ready")) {
    if (!get) return method_not_allowed("GET");
    const bool ok = seg[2] == "live" ? core.live() : core.ready();
    return make_response(ok ? 200 : 503, "", "");
  }
  if (seg[1] == "models" && seg.size() >= 3) return route_model(req, seg);
  if (seg[1] == "repository") {
    if (seg.size() == 3 && seg[2] == "index") {
      if (!post) return method_not_allowed("POST");
      Result<bool> ready_only = parse_bool_member(req.body(), "ready");
      if (!ready_only.ok()) return status_response(ready_only.status());
      return make_response(200, repository_index_json(core.repository().index(), *ready_only), kJson);
    }
    if (seg.size() == 5 && seg[2] == "models" && (seg[4] == "load" || seg[4] == "unload")) {
      if (!post) return method_not_allowed("POST");
      return model_control(seg[3], seg[4] == "load");
    }
  }
  return error_response(404, "no such route: " + std::string(target));
}

// /v2/models/stats, /v2/models/<m>[/versions/<v>][/ready|/config|/stats|/infer]
std::optional<Response> Session::route_model(Request& req, const std::vector<std::string>& seg) {
  const bool get = req.method() == http::verb::get;
  ServerCore& core = state_.core;
  if (seg.size() == 3 && seg[2] == "stats") {
    if (!get) return method_not_allowed("GET");
    Result<std::string> stats = core.statistics_json("");
    if (!stats.ok()) return status_response(stats.status());
    return make_response(200, std::move(*stats), kJson);
  }
  const std::string& model = seg[2];
  std::string version;
  size_t i = 3;
  if (seg.size() >= 5 && seg[3] == "versions") {
    version = seg[4];
    i = 5;
  }
  if (seg.size() == i) {
    if (!get) return method_not_allowed("GET");
    Result<ModelMetadata> m = core.model_metadata(model, version);
    if (!m.ok()) return status_response(m.status());
    return make_response(200, ServerCore::model_metadata_json(*m), kJson);
  }
  if (seg.size() != i + 1) return error_response(404, "no such route");
  const std::string& action = seg[i];
  if (action == "infer") {
    if (req.method() != http::verb::post) return method_not_allowed("POST");
    return infer(req, model, version);
  }
  if (action != "ready" && action != "config" && action != "stats") return error_response(404, "no such route");
  if (!get) return method_not_allowed("GET");
  if (action == "stats") {
    if (!version.empty()) {
      auto m = core.repository().get(model, version);
      if (!m.ok()) return status_response(m.status());
    }
    Result<std::string> stats = core.statistics_json(model);
    if (!stats.ok()) return status_response(stats.status());
    return make_response(200, std::move(*stats), kJson);
  }
  auto m = core.repository().get(model, version);
  if (!m.ok()) return status_response(m.status());
  if (action == "ready") return make_response(200, "", "");
  return make_response(200, model_config_json((*m)->config), kJson);
}

// Everything an inference needs after infer() returned. Members are destroyed in reverse order:
// the session (and its socket) before the state that owns the io_context.
struct InferContext {
  std::shared_ptr<State> state;
  std::shared_ptr<Session> session;
  std::string model, version;
  DecodedInfer decoded;  // its request has been moved into the runtime

  // On a runtime thread: encode, then hand the response to the connection's strand.
  void done(InferResponse r) {
    Response res;
    if (!r.status.ok()) {
      res = status_response(r.status);
    } else {
      // From the index, not get(): a LoadedModel reference dropped last on this (instance) thread
      // would join the thread from itself.
      std::string served = version;
      if (served.empty())
        for (const RepositoryEntry& e : state->core.repository().index())
          if (e.name == model) served = e.version;
      Result<EncodedInfer> e = encode_infer_response(decoded, model, served, r);
      if (!e.ok()) {
        res = status_response(e.status());
      } else {
        const bool binary = e->header_length.has_value();
        res = make_response(200, std::move(e->body), binary ? "application/octet-stream" : kJson);
        if (binary) res.set("Inference-Header-Content-Length", std::to_string(*e->header_length));
      }
    }
    asio::post(session->executor(), [s = session, res = std::move(res)]() mutable { s->send(std::move(res)); });
  }
};

std::optional<Response> Session::infer(Request& req, const std::string& model, const std::string& version) {
  auto encoding = req[http::field::content_encoding];
  if (!encoding.empty() && encoding != "identity")
    return error_response(400, "Content-Encoding '" + std::string(encoding) + "' is not supported");
  auto header = req["Inference-Header-Content-Length"];
  Result<std::optional<size_t>> header_length =
      parse_header_length(std::string_view(header.data(), header.size()), req.body().size());
  if (!header_length.ok()) return status_response(header_length.status());
  Result<DecodedInfer> decoded = decode_infer_request(req.body(), *header_length);
  if (!decoded.ok()) return status_response(decoded.status());
  req.body().clear();
  req.body().shrink_to_fit();

  auto ctx = std::make_shared<InferContext>();
  ctx->state = state_.shared_from_this();
  ctx->session = shared_from_this();
  ctx->model = model;
  ctx->version = version;
  ctx->decoded = std::move(*decoded);
  InferRequest request = std::move(ctx->decoded.request);
  request.id = state_.next_request_id.fetch_add(1);
  stream_.expires_never();  // the model has the request; no I/O until the response
  state_.core.infer(model, version, std::move(request), [ctx](InferResponse r) { ctx->done(std::move(r)); });
  return std::nullopt;
}

std::optional<Response> Session::model_control(const std::string& model, bool load) {
  if (Status s = state_.core.check_model_control(); !s.ok()) return status_response(s);
  auto state = state_.shared_from_this();
  auto self = shared_from_this();
  {
    std::lock_guard<std::mutex> lock(state->mu);
    ++state->control_ops;
  }
  // Loading takes long: a thread of its own keeps the I/O threads free.
  auto work = [state, self, model, load]() {
    Status s = load ? state->core.load_model(model) : state->core.unload_model(model);
    Response res = s.ok() ? make_response(200, "", "") : status_response(s);
    asio::post(self->executor(), [self, res = std::move(res)]() mutable { self->send(std::move(res)); });
    std::lock_guard<std::mutex> lock(state->mu);
    --state->control_ops;
    state->cv.notify_all();
  };
  try {
    std::thread(work).detach();
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(state->mu);
    --state->control_ops;
    return error_response(503, std::string("cannot start the model control thread: ") + e.what());
  }
  stream_.expires_never();
  return std::nullopt;
}

}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<State> state;
  std::unique_ptr<tcp::acceptor> acceptor;    // on its own strand
  std::unique_ptr<asio::steady_timer> retry;  // backs off after a failed accept (out of descriptors)
  std::vector<std::thread> threads;
  std::mutex stop_mu;
  bool started = false, stopped = false;
  int port = 0;

  void accept() {
    acceptor->async_accept(asio::make_strand(state->ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open() || state->stopping) return;
      if (ec) {
        SL_LOG(kWarning) << "HTTP accept failed: " << ec.message();
        retry->expires_after(std::chrono::milliseconds(100));
        retry->async_wait([this](beast::error_code e) {
          if (!e && acceptor->is_open() && !state->stopping) accept();
        });
        return;
      }
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(socket), *state)->start();
      accept();
    });
  }
};

HttpServer::HttpServer(ServerCore& core, HttpOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->state = std::make_shared<State>(core, std::move(options));
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
  State& st = *impl_->state;
  const HttpOptions& o = st.options;
  const std::string where = o.host + ":" + std::to_string(o.port);
  if (o.port < 0 || o.port > 65535) return invalid_argument("HTTP port out of range: " + std::to_string(o.port));
  if (o.idle_timeout_s <= 0) return invalid_argument("idle_timeout_s must be positive");

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
  impl_->retry = std::make_unique<asio::steady_timer>(acceptor->get_executor());
  impl_->acceptor = std::move(acceptor);
  impl_->started = true;
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
  State& st = *impl_->state;
  st.stopping = true;

  // 1. Stop accepting (the acceptor lives on its strand).
  std::promise<void> closed;
  asio::post(impl_->acceptor->get_executor(), [this, &closed] {
    beast::error_code ec;
    impl_->acceptor->close(ec);
    impl_->retry->cancel();
    closed.set_value();
  });
  closed.get_future().wait();

  // 2. Idle connections close now; busy ones after their response.
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard<std::mutex> l(st.mu);
    for (auto& [key, weak] : st.sessions)
      if (auto s = weak.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) asio::post(s->executor(), [s] { s->stop(); });
  live.clear();

  // 3. Wait for the connections (bounded), then for model loads (they use the repository, which
  // the caller may destroy once stop() returns).
  {
    std::unique_lock<std::mutex> l(st.mu);
    if (!st.cv.wait_for(l, kStopGrace, [&] { return st.sessions.empty(); })) {
      SL_LOG(kWarning) << "HTTP server stopping with " << st.sessions.size() << " connections still busy";
    }
    st.cv.wait(l, [&] { return st.control_ops == 0; });
  }

  // 4. Stop the I/O threads. Connections left over are destroyed with the io_context; a runtime
  // callback still to come keeps it alive until it has posted its (never sent) response.
  st.ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
  // The acceptor and the timer belong to the io_context: drop them while it exists.
  impl_->retry.reset();
  impl_->acceptor.reset();
}

}  // namespace streamline::serve
