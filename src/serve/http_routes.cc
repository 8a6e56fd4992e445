// The routes of the HTTP front end: health, metadata, configuration, statistics, repository control
// and the dispatch of inference requests (http_session.cc runs them).

#include <algorithm>

#include "serve/dashboard.h"
#include "serve/echo.h"
#include "serve/http_codec.h"
#include "serve/http_extensions.h"
#include "serve/http_session.h"
#include "serve/json_util.h"
#include "serve/model_config.h"

namespace streamline::serve::http_detail {
namespace {

constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

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

}  // namespace

std::optional<Response> HttpSession::route(Request& req) {
  std::string_view target(req.target().data(), req.target().size());
  target = target.substr(0, target.find('?'));
  Result<std::vector<std::string>> parsed = split_target(target);
  if (!parsed.ok()) return status_response(parsed.status());
  const std::vector<std::string>& seg = *parsed;

  const http::verb method = req.method();
  const bool get = method == http::verb::get, post = method == http::verb::post;
  ServerCore& core = state_.core;
  const std::string no_route = "no such route: " + echo(target);

  if (seg.size() == 1 && seg[0] == "metrics") {
    if (!get) return method_not_allowed("GET");
    return make_response(200, core.metrics_text(), kMetricsType);
  }
  if (!state_.options.metrics_only && !seg.empty() && seg[0] == "dashboard") {
    if (!get) return method_not_allowed("GET");
    if (seg.size() == 2 && seg[1] == "trace.json") return make_response(200, core.traces().last_trace_json(), kJson);
    if (seg.size() == 2 && seg[1] == "server_events.json")
      return make_response(200, core.traces().server_events_json(), kJson);
    const EmbeddedFile* f = dashboard_file(target);
    if (!f) return error_response(404, no_route);
    Response res = make_response(200, std::string(reinterpret_cast<const char*>(f->data), f->size), f->content_type);
    res.set(http::field::cache_control, "no-cache");
    return res;
  }
  if (state_.options.metrics_only || seg.empty() || seg[0] != "v2") return error_response(404, no_route);
  if (seg.size() == 1) {
    if (!get) return method_not_allowed("GET");
    return make_response(200, ServerCore::server_metadata_json(core.server_metadata()), kJson);
  }
  if (seg[1] == "health" && seg.size() == 3 && (seg[2] == "live" || seg[2] == "ready")) {
    if (!get) return method_not_allowed("GET");
    const bool ok = seg[2] == "live" ? core.live() : core.ready();
    return make_response(ok ? 200 : 503, "", "");
  }
  if (ExtensionReply x = route_extension(core, get, post, seg, req.body()); x.matched) {
    const char* type = x.body.empty() ? "" : kJson;
    Response res = make_response(static_cast<unsigned>(x.http_status), std::move(x.body), type);
    if (*x.allow) res.set(http::field::allow, x.allow);
    return res;
  }
  if (seg[1] == "models" && seg.size() >= 3) return route_model(req, seg);
  if (seg[1] == "repository") {
    if (seg.size() == 3 && seg[2] == "index") {
      if (!post) return method_not_allowed("POST");
      Result<bool> ready_only = parse_bool_member(req.body(), "ready");
      if (!ready_only.ok()) return status_response(ready_only.status());
      return make_response(200, repository_index_json(core.repository().full_index(), *ready_only), kJson);
    }
    if (seg.size() == 5 && seg[2] == "models" && (seg[4] == "load" || seg[4] == "unload")) {
      if (!post) return method_not_allowed("POST");
      return model_control(seg[3], seg[4] == "load", req.body());
    }
  }
  return error_response(404, no_route);
}

// /v2/models/stats, /v2/models/<m>[/versions/<v>][/ready|/config|/stats|/infer]
std::optional<Response> HttpSession::route_model(Request& req, const std::vector<std::string>& seg) {
  const bool get = req.method() == http::verb::get;
  ServerCore& core = state_.core;
  if (seg.size() == 3 && seg[2] == "stats") {
    if (!get) return method_not_allowed("GET");
    Result<std::vector<ModelStatistics>> stats = core.statistics("");
    if (!stats.ok()) return status_response(stats.status());
    return make_response(200, ServerCore::statistics_json(*stats), kJson);
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
    Result<std::vector<ModelStatistics>> stats = core.statistics(model, version);
    if (!stats.ok()) return status_response(stats.status());
    return make_response(200, ServerCore::statistics_json(*stats), kJson);
  }
  auto m = core.repository().get(model, version);
  if (!m.ok()) return status_response(m.status());
  if (action == "ready") return make_response(200, "", "");
  return make_response(200, model_config_json((*m)->config), kJson);
}

}  // namespace streamline::serve::http_detail
