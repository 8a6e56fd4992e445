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
//   GET  /metrics                               (alone on the metrics port: HttpOptions::metrics_only)
// Errors: {"error": "..."} with http_status() of the Status.

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "serve/server_core.h"

namespace streamline::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;         // 0 = pick a free port (see port())
  int io_threads = 2;
  // Idle keep-alive connections are closed after this long.
  int idle_timeout_s = 60;
  // Serve only /metrics (the metrics port).
  bool metrics_only = false;
};

class HttpServer {
 public:
  HttpServer(ServerCore& core, HttpOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; Unavailable naming host:port when the address cannot be bound.
  [[nodiscard]] Status start();
  // Stops accepting; answers requests already read; joins the I/O threads. Idempotent.
  void stop();
  int port() const;  // the bound port (after start)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace streamline::serve
