// One HTTP connection: reading requests (with the header, body and JSON limits), answering them,
// keep-alive and its end during a drain, closing in stages, and handing inference requests to the
// runtime (large bodies decode on the decode threads, never on the I/O threads).

#include "serve/http_session.h"

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <chrono>

#include "serve/echo.h"
#include "serve/http_codec.h"
#include "serve/http_compression.h"
#include "serve/http_extensions.h"

namespace streamline::serve::http_detail {
namespace {

// Response bodies up to this size go uncompressed whatever the client accepts.
constexpr size_t kMinCompressBytes = 256;
// How long a connection that is closing reads (and drops) what the client still sends.
constexpr auto kLinger = std::chrono::seconds(2);
// How long a stopping server waits for the rest of a request that has begun to arrive.
constexpr auto kStopReadTimeout = std::chrono::seconds(2);

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Everything an inference needs after infer() returned. Members are destroyed in reverse order:
// the session (and its socket) before the state that owns the io_context.
struct InferContext {
  std::shared_ptr<HttpState> state;
  std::shared_ptr<HttpSession> session;
  std::string model, version;
  DecodedInfer decoded;                // its request has been moved into the runtime
  std::shared_ptr<ActiveTrace> trace;  // set when this request is traced
  // Classification outputs: the model's labels and whether its outputs have a batch dimension.
  std::shared_ptr<const LabelMap> labels;
  bool batched = false;

  void reply(Response res) {
    asio::post(session->executor(), [s = session, res = std::move(res)]() mutable { s->send(std::move(res)); });
  }

  // On a runtime thread: encode, then hand the response to the connection's strand.
  void done(InferResponse r) {
    if (!trace) return answer(r);
    Response res = encode(r);
    state->core.traces().finish(*trace, r, version);
    res.set("traceparent", trace->traceparent());
    reply(std::move(res));
  }

  void answer(const InferResponse& r) { reply(encode(r)); }

  Response encode(const InferResponse& r) {
    if (!r.status.ok()) return status_response(r.status);
    // Outputs asked for into shared memory are written there; the body only names them.
    for (const RequestedOutput& o : decoded.outputs) {
      if (!o.shm) continue;
      auto it = r.outputs.find(o.name);
      if (it == r.outputs.end()) continue;  // encode names the missing output
      if (Status s = state->core.shared_memory().write_output(o.name, it->second, *o.shm); !s.ok())
        return status_response(s);
    }
    // From the index, not get(): a LoadedModel reference dropped last on this (instance) thread
    // would join the thread from itself.
    std::string served = version;
    if (served.empty())
      for (const RepositoryEntry& e : state->core.repository().index())
        if (e.name == model) served = e.version;
    Result<EncodedInfer> e = encode_infer_response(decoded, model, served, r, {labels.get(), batched});
    if (!e.ok()) return status_response(e.status());
    const bool binary = e->header_length.has_value();
    Response res = make_response(200, std::move(e->body), binary ? "application/octet-stream" : kJson);
    if (binary) res.set("Inference-Header-Content-Length", std::to_string(*e->header_length));
    return res;
  }
};

// Decodes the body (freeing it once the tensors hold the data) and hands the request to the core.
// Runs on the connection's strand for small bodies and on a decode thread for large ones.
void decode_and_submit(const std::shared_ptr<InferContext>& ctx, Request& req, std::optional<size_t> header_length) {
  Result<DecodedInfer> decoded = decode_infer_request(req.body(), header_length);
  req.body().clear();
  req.body().shrink_to_fit();
  if (!decoded.ok()) return ctx->reply(status_response(decoded.status()));
  ctx->decoded = std::move(*decoded);
  if (Status s = ctx->state->core.shared_memory().read_inputs(ctx->decoded.shm_inputs, &ctx->decoded.request); !s.ok())
    return ctx->reply(status_response(s));
  if (std::any_of(ctx->decoded.outputs.begin(), ctx->decoded.outputs.end(),
                  [](const RequestedOutput& o) { return o.class_count > 0; })) {
    // Taken here, off the instance threads, where a LoadedModel reference may be dropped.
    auto m = ctx->state->core.repository().get(ctx->model, ctx->version);
    if (m.ok()) {
      ctx->labels = (*m)->labels;
      ctx->batched = (*m)->config.max_batch_size > 0;
    }
  }
  InferRequest request = std::move(ctx->decoded.request);
  request.id = ctx->state->next_request_id.fetch_add(1);
  if (ctx->trace) {
    request.trace = true;
    ctx->trace->note_inputs(request.inputs);
    ctx->trace->note_submit(request.id);
  }
  ctx->state->core.infer(ctx->model, ctx->version, std::move(request),
                         [ctx](InferResponse r) { ctx->done(std::move(r)); });
}

}  // namespace

HttpState::HttpState(ServerCore& c, HttpOptions o)
    : core(c), options(std::move(o)), ioc(std::max(1, options.io_threads)) {
  touch();
}

void HttpState::touch() {
  last_activity_ns.store(steady_ns());
}

HttpSession::HttpSession(tcp::socket socket, HttpState& state, bool over_cap)
    : stream_(std::move(socket)), state_(state), over_cap_(over_cap) {}

HttpSession::~HttpSession() {
  if (counted_) state_.connections.fetch_sub(1);
  std::lock_guard<std::mutex> lock(state_.mu);
  state_.sessions.erase(this);
  state_.cv.notify_all();
}

void HttpSession::start() {
  {
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.sessions[this] = weak_from_this();
  }
  if (!over_cap_) {
    counted_ = true;
    state_.connections.fetch_add(1);
  }
  state_.touch();
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    if (!self->over_cap_) return self->read();
    self->keep_alive_ = false;
    self->send(error_response(503, "too many connections: the server holds " +
                                       std::to_string(self->state_.options.max_connections) +
                                       " already (--max-connections); retry later"));
  });
}

RequestLimits HttpSession::limits() const {
  return {.body = state_.core.options().max_request_bytes, .json = state_.options.max_json_bytes};
}

void HttpSession::read() {
  if (close_after_ || finishing_) return finish();
  if (state_.stopping() && !fresh_ && !more_pending()) return finish();
  reader_.emplace(limits());
  if (state_.stopping())
    stream_.expires_after(kStopReadTimeout);
  else
    stream_.expires_after(std::chrono::seconds(state_.options.idle_timeout_s));
  reading_ = true;
  http::async_read_header(stream_, buffer_, reader_->parser(),
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void HttpSession::on_header(beast::error_code ec) {
  if (ec) return on_read(ec);
  const auto& header = reader_->parser().get();
  if (std::optional<Response> refusal = reader_->check_header()) {
    reading_ = false;
    keep_alive_ = false;
    version_ = header.version();
    return send(std::move(*refusal));
  }
  // A client that sent "Expect: 100-continue" waits for our go-ahead before it sends the body.
  if (reader_->parser().is_done() || !beast::iequals(header[http::field::expect], "100-continue")) return read_body();
  go_ahead_.emplace(http::status::continue_, header.version());
  http::async_write(stream_, *go_ahead_, [self = shared_from_this()](beast::error_code e, size_t) {
    self->go_ahead_.reset();
    if (e) return self->on_read(e);
    self->read_body();
  });
}

void HttpSession::read_body() {
  http::async_read(stream_, buffer_, reader_->parser(),
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
}

void HttpSession::on_read(beast::error_code ec) {
  reading_ = false;
  if (ec) {
    // release() cancelled the wait for a next request: answer anything that arrived meanwhile, and
    // give a connection that has had no request yet a short while for its first (its client has
    // probably sent it already: it was accepted just before the listener closed).
    if (ec == asio::error::operation_aborted && state_.stopping())
      return more_pending() || fresh_ ? read() : finish();
    std::optional<Response> answer = reader_->refusal_for(ec);
    if (!answer) return close();
    // Malformed or oversized: answer, then close (the rest of the stream cannot be trusted).
    keep_alive_ = false;
    version_ = reader_->parser().is_header_done() ? reader_->parser().get().version() : 11;
    return send(std::move(*answer));
  }
  state_.touch();
  fresh_ = false;
  Request req = reader_->parser().release();
  reader_.reset();
  keep_alive_ = req.keep_alive();
  version_ = req.version();
  {
    auto accept = req[http::field::accept_encoding];
    accept_ = pick_encoding(std::string_view(accept.data(), accept.size()));
  }
  if (std::optional<Response> res = route(req)) send(std::move(*res));
}

bool HttpSession::more_pending() {
  beast::error_code ec;
  return buffer_.size() > 0 || stream_.socket().available(ec) > 0;
}

void HttpSession::send(Response res) {
  if (state_.phase.load() == Phase::kHolding && !over_cap_) {
    held_.emplace(std::move(res));
    held_self_ = shared_from_this();  // nothing else refers to the session until release()
    return;
  }
  res.version(version_);
  // Accept-Encoding of the request answered: the body goes compressed (tiny bodies gain nothing).
  if (accept_ && res.body().size() > kMinCompressBytes && res[http::field::content_encoding].empty()) {
    res.body() = compress_body(res.body(), *accept_);
    res.set(http::field::content_encoding, body_encoding_name(*accept_));
  }
  bool keep = keep_alive_ && !close_after_ && !over_cap_;
  // Draining or stopping: the connection ends after the last request it has received.
  if (keep && (state_.stopping() || state_.core.draining()) && !more_pending()) keep = false;
  res.keep_alive(keep);
  close_after_ = !keep;
  res.prepare_payload();
  response_.emplace(std::move(res));
  stream_.expires_after(std::chrono::seconds(state_.options.idle_timeout_s));
  http::async_write(stream_, *response_,
                    [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
}

void HttpSession::on_write(beast::error_code ec) {
  response_.reset();
  if (ec) return close();
  if (close_after_) return finish();
  read();
}

void HttpSession::release() {
  if (held_) {
    const std::shared_ptr<HttpSession> self = std::move(held_self_);
    Response res = std::move(*held_);
    held_.reset();
    return send(std::move(res));
  }
  // Waiting for a next request that has not begun to arrive: stop waiting (on_read closes, or
  // waits for a first request on a connection that has had none under the stop deadline).
  if (reading_ && reader_ && !reader_->parser().got_some() && !more_pending()) {
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }
}

void HttpSession::finish() {
  if (finishing_) return;
  finishing_ = true;
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  discard_.resize(4096);
  stream_.expires_after(kLinger);
  discard();
}

void HttpSession::discard() {
  stream_.async_read_some(asio::buffer(discard_), [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) return self->close();  // the client closed (or the deadline passed)
    self->discard();
  });
}

void HttpSession::close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.socket().close(ec);
}

std::optional<Response> HttpSession::infer(Request& req, const std::string& model, const std::string& version) {
  if (Status s = state_.core.check_single_response(model, version); !s.ok()) return status_response(s);
  auto encoding_text = req[http::field::content_encoding];
  Result<std::optional<BodyEncoding>> encoding =
      parse_content_encoding(std::string_view(encoding_text.data(), encoding_text.size()));
  if (!encoding.ok()) return status_response(encoding.status());
  if (*encoding) {
    // Inference-Header-Content-Length and every limit apply to the decompressed body.
    const uint64_t limit = static_cast<uint64_t>(std::max<int64_t>(0, state_.core.options().max_request_bytes));
    Result<std::string> plain = decompress_body(req.body(), **encoding, limit);
    if (!plain.ok()) return status_response(plain.status());
    req.body() = std::move(*plain);
    req.erase(http::field::content_encoding);
  }
  InferFraming framing = infer_framing(req, state_.options.max_json_bytes);
  if (framing.refusal) return std::move(*framing.refusal);
  const std::optional<size_t> header_length = framing.header_length;

  auto ctx = std::make_shared<InferContext>();
  ctx->state = state_.shared_from_this();
  ctx->session = shared_from_this();
  ctx->model = model;
  ctx->version = version;
  {
    auto tp = req["traceparent"];
    ctx->trace = state_.core.traces().start(model, std::string(tp.data(), tp.size()));
  }
  stream_.expires_never();  // no I/O until the response
  if (req.body().size() <= state_.options.inline_decode_bytes) {
    decode_and_submit(ctx, req, header_length);
    return std::nullopt;
  }
  auto body = std::make_shared<Request>(std::move(req));
  const std::optional<size_t> hl = header_length;
  const bool queued = state_.decode_pool->try_post([ctx, body, hl] {
    if (ctx->state->options.before_decode) ctx->state->options.before_decode();
    decode_and_submit(ctx, *body, hl);
  });
  if (!queued) {
    stream_.expires_after(std::chrono::seconds(state_.options.idle_timeout_s));
    return error_response(429, "too many large requests waiting to be decoded (" +
                                   std::to_string(state_.options.max_queued_decodes) + "); retry later");
  }
  return std::nullopt;
}

std::optional<Response> HttpSession::model_control(const std::string& model, bool load, const std::string& body) {
  if (Status s = state_.core.check_model_control(); !s.ok()) return status_response(s);
  LoadOptions options;
  if (load) {
    Result<LoadOptions> parsed = parse_load_request(body);
    if (!parsed.ok()) return status_response(parsed.status());
    options = std::move(*parsed);
  }
  // Loading takes long: the loader thread keeps the I/O threads free, one operation at a time.
  auto state = state_.shared_from_this();
  auto self = shared_from_this();
  const bool queued = state_.control_pool->try_post([state, self, model, load, options] {
    Status s = load ? state->core.load_model(model, options) : state->core.unload_model(model);
    Response res = s.ok() ? make_response(200, "", "") : status_response(s);
    asio::post(self->executor(), [self, res = std::move(res)]() mutable { self->send(std::move(res)); });
  });
  if (!queued)
    return error_response(503, "too many model loads and unloads waiting (" +
                                   std::to_string(state_.options.max_queued_model_control) + "); retry later");
  stream_.expires_never();
  return std::nullopt;
}

}  // namespace streamline::serve::http_detail
