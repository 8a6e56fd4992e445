#pragma once
// Routes of Triton's extensions over HTTP that need no connection state: system and CUDA shared
// memory, the trace settings and the logging settings.
//
//   GET  /v2/systemsharedmemory[/region/<r>]/status      [{"name","key","offset","byte_size"}]
//   POST /v2/systemsharedmemory/region/<r>/register      {"key","offset","byte_size"}
//   POST /v2/systemsharedmemory[/region/<r>]/unregister
//   GET  /v2/cudasharedmemory[/region/<r>]/status, POST .../register (refused: Unsupported),
//        POST .../unregister
//   GET|POST /v2/trace/setting, /v2/models/<m>/trace/setting   Triton's trace settings (trace.h);
//                              POST changes those given (null clears a model's) and answers all
//   GET|POST /v2/logging      {"log_file","log_info","log_warning","log_error","log_verbose_level",
//                              "log_format"}; POST changes the settings given and answers all
//
//   ExtensionReply r = route_extension(core, method, segments, body);
//   if (r.matched) return make_response(r.status, r.body, ...);
//
// Thread-safe (the registry and the log settings are).

#include <string>
#include <string_view>
#include <vector>

#include "serve/server_core.h"

namespace streamline::serve {

struct ExtensionReply {
  bool matched = false;    // the path is one of these routes
  int http_status = 200;   // 200, or the error's (http_status(Status)); 405 for a wrong method
  std::string body;        // JSON: the answer, or {"error": ...}
  const char* allow = "";  // the method to use, with 405
};

// `segments`: the decoded path segments ("v2", "systemsharedmemory", ...).
ExtensionReply route_extension(ServerCore& core, bool get, bool post, const std::vector<std::string>& segments,
                               std::string_view body);

// The body of POST /v2/repository/models/<m>/load: {"parameters": {"config": "<JSON config>"}}.
// Unsupported for "file:" overrides (model files sent in the request); InvalidArgument otherwise.
[[nodiscard]] Result<LoadOptions> parse_load_request(std::string_view body);

// The log settings as Triton's logging extension writes them.
std::string log_settings_json();
// Applies the members given in `body` (a JSON object); InvalidArgument naming a wrong one.
[[nodiscard]] Status update_log_settings(std::string_view body);

}  // namespace streamline::serve
