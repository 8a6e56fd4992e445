#pragma once
// KServe v2 over HTTP/1.1 (REST), on Boost.Beast with asynchronous I/O and keep-alive.
//
//   HttpServer http(core, {.host = "127.0.0.1", .port = 8000});
//   SL_RETURN_IF_ERROR(http.start());      // binds and starts the I/O threads
//   ...
//   http.stop();                            // closes the listener; open connections finish
//
// Routes (KServe v2 and Triton's extensions):
//   GET  /v2/health/live, /v2/health/ready, /v2, /v2/models/<m>[/versions/<v>][/ready]
//   GET  /v2/models/<m>[/versions/<v>]/config, /v2/models[/<m>]/stats
//   POST /v2/models/<m>[/versions/<v>]/infer   JSON tensors, or the binary tensor extension
//                                              (Inference-Header-Content-Length)
//   POST /v2/repository/index, /v2/repository/models/<m>/load, .../unload
//                                              (400 unless ServerOptions::allow_model_control)
//   GET|POST /v2/systemsharedmemory/..., /v2/cudasharedmemory/..., /v2/trace/setting,
//        /v2/models/<m>/trace/setting, /v2/logging  (http_extensions.h)
//   GET  /dashboard, /dashboard/<file>, /dashboard/trace.json   the live dashboard (dashboard.h) and
//                                              the most recent trace
//   GET  /metrics                               (alone on the metrics port: HttpOptions::metrics_only)
// Bodies may come gzip or deflate (Content-Encoding); responses are compressed when the request's
// Accept-Encoding allows (http_compression.h).
// Errors: {"error": "..."} with http_status() of the Status, the message capped (echo.h).
// While the core drains, every response carries "Connection: close" once the connection has no
// further request waiting, so clients stop reusing it; see stop() for the end of the drain.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "serve/server_core.h"

namespace streamline::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 = pick a free port (see port())
  int io_threads = 2;
  // Idle keep-alive connections are closed after this long.
  int idle_timeout_s = 60;
  // Serve only /metrics (the metrics port).
  bool metrics_only = false;
  // Connections open at once; one more is answered 503 and closed (0 = no cap). Read at start().
  int max_connections = 1024;
  // Largest JSON text of a request: the whole body, or its Inference-Header-Content-Length part;
  // larger gets 413 (binary tensors are bounded by ServerOptions::max_request_bytes only).
  int64_t max_json_bytes = int64_t{64} << 20;
  // Threads that decode request bodies larger than inline_decode_bytes, so that the I/O threads
  // stay free for other connections and for health probes. Read at start().
  int decode_threads = 2;
  // Bodies up to this size decode on the I/O thread (a few microseconds); larger ones on the
  // decode threads.
  size_t inline_decode_bytes = 64 << 10;
  // Decodes waiting for a thread beyond which a request is answered 429.
  size_t max_queued_decodes = 64;
  // Model loads and unloads waiting for the loader thread beyond which a request gets 503.
  size_t max_queued_model_control = 1024;
  // Observer: runs on a decode thread just before a body that left the I/O threads is decoded.
  // Tests hold it to observe the server while a decode is in progress. Must not throw.
  std::function<void()> before_decode;
};

class HttpServer {
 public:
  HttpServer(ServerCore& core, HttpOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; Unavailable naming host:port when the address cannot be bound.
  [[nodiscard]] Status start();
  // Stops the server without dropping requests: (1) every response of a request read from now on
  // is held back while the listener still accepts, until no connection or request has come for
  // 100 ms (at most 2 s); (2) the listener closes; (3) the held responses go out and each
  // connection answers the requests it has already received, the last with "Connection: close",
  // then closes in stages (shutdown of the send side, the rest read and dropped, close). Then the
  // I/O, decode and loader threads are joined. Idempotent.
  void stop();
  int port() const;  // the bound port (after start)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamline::serve
