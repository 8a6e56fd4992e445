// The routes of the HTTP front end: health, metadata, configuration, statistics, repository control
// and the dispatch of inference requests (http_session.cc runs them).

#include <algorithm>

#include "serve/echo.h"
#include "serve/http_codec.h"
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

}  // namespace

Response make_response(unsigned status, std::string body, const char* content_type) {
  Response res;
  res.result(status);
  res.set(http::field::server, "streamline");
  if (*content_type != '\0') res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  return res;
}

Response error_response(unsigned status, std::string_view message) {
  return make_response(status, error_json(cap_message(message)), kJson);
}

Response status_response(const Status& s) {
  return error_response(static_cast<unsigned>(http_status(s)), s.message());
}

std::optional<Response> HttpSession::route(Request& req) {
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
  const std::string no_route = "no such route: " + echo(target);

  if (seg.size() == 1 && seg[0] == "metrics") {
    if (!get) return method_not_allowed("GET");
    return make_response(200, core.metrics_text(), kMetricsType);
  }
  if (state_.options.metrics_only || seg.empty() || seg[0] != "v2") return error_response(404, no_route);
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
  return error_response(404, no_route);
}

// /v2/models/stats, /v2/models/<m>[/versions/<v>][/ready|/config|/stats|/infer]
std::optional<Response> HttpSession::route_model(Request& req, const std::vector<std::string>& seg) {
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

}  // namespace streamline::serve::http_detail
