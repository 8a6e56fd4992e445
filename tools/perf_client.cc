// What both perf clients share: URLs, error codes, the KServe JSON the control calls read, and
// PerfClient::create(). The transports are perf_http.cc and perf_grpc.cc.

#include <rapidjson/document.h>

#include <algorithm>

#include "perf_transport.h"

namespace streamline::tools {
namespace {

Result<std::vector<RemoteTensor>> parse_tensors(const rapidjson::Value& doc, const char* key) {
  std::vector<RemoteTensor> out;
  auto it = doc.FindMember(key);
  if (it == doc.MemberEnd()) return out;
  if (!it->value.IsArray()) return internal_error(std::string("model metadata: '") + key + "' is not a list");
  for (const auto& t : it->value.GetArray()) {
    if (!t.IsObject() || !t.HasMember("name") || !t["name"].IsString() || !t.HasMember("datatype") ||
        !t["datatype"].IsString() || !t.HasMember("shape") || !t["shape"].IsArray())
      return internal_error(std::string("model metadata: malformed entry in '") + key + "'");
    RemoteTensor r{t["name"].GetString(), t["datatype"].GetString(), {}};
    for (const auto& d : t["shape"].GetArray()) {
      if (!d.IsInt64()) return internal_error("model metadata: tensor '" + r.name + "' has a non-integer dimension");
      r.shape.push_back(d.GetInt64());
    }
    out.push_back(std::move(r));
  }
  return out;
}

uint64_t uint_member(const rapidjson::Value& v, const char* key) {
  auto it = v.FindMember(key);
  if (it == v.MemberEnd()) return 0;
  if (it->value.IsUint64()) return it->value.GetUint64();
  // Triton's HTTP front end writes some counters as strings; accept both.
  if (it->value.IsString()) return std::strtoull(it->value.GetString(), nullptr, 10);
  return 0;
}

void add_duration(const rapidjson::Value& stats, const char* key, StatDuration* d) {
  auto it = stats.FindMember(key);
  if (it == stats.MemberEnd() || !it->value.IsObject()) return;
  d->count += uint_member(it->value, "count");
  d->ns += uint_member(it->value, "ns");
}

StatDuration sub(const StatDuration& a, const StatDuration& b) {
  return {a.count > b.count ? a.count - b.count : 0, a.ns > b.ns ? a.ns - b.ns : 0};
}

}  // namespace

Result<Endpoint> parse_url(std::string url, const std::string& default_port) {
  for (const char* scheme : {"http://", "grpc://"})
    if (url.rfind(scheme, 0) == 0) url = url.substr(std::string(scheme).size());
  if (const size_t slash = url.find('/'); slash != std::string::npos) url.resize(slash);
  if (url.empty()) return Endpoint{"localhost", default_port};
  Endpoint e;
  if (url.front() == '[') {  // [ipv6]:port
    const size_t close = url.find(']');
    if (close == std::string::npos) return invalid_argument("bad URL '" + url + "'");
    e.host = url.substr(1, close - 1);
    e.port = close + 1 < url.size() && url[close + 1] == ':' ? url.substr(close + 2) : default_port;
  } else if (const size_t colon = url.rfind(':'); colon != std::string::npos) {
    e.host = url.substr(0, colon);
    e.port = url.substr(colon + 1);
  } else {
    e.host = url;
    e.port = default_port;
  }
  if (e.host.empty() || e.port.empty() || e.port.find_first_not_of("0123456789") != std::string::npos)
    return invalid_argument("bad URL '" + url + "': expected host:port");
  if (e.port.size() > 5 || std::stoi(e.port) < 1 || std::stoi(e.port) > 65535)
    return invalid_argument("bad URL '" + url + "': port " + e.port + " is out of range: expected 1 to 65535");
  return e;
}

StatusCode code_from_http(int status) {
  switch (status) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 404:
      return StatusCode::kNotFound;
    case 413:
    case 429:
      return StatusCode::kResourceExhausted;
    case 501:
      return StatusCode::kUnsupported;
    case 503:
      return StatusCode::kUnavailable;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      return StatusCode::kInternal;
  }
}

Status from_grpc(const grpc::Status& s) {
  if (s.ok()) return ok_status();
  StatusCode code = StatusCode::kInternal;
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      code = StatusCode::kInvalidArgument;
      break;
    case grpc::StatusCode::NOT_FOUND:
      code = StatusCode::kNotFound;
      break;
    case grpc::StatusCode::UNIMPLEMENTED:
      code = StatusCode::kUnsupported;
      break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      code = StatusCode::kResourceExhausted;
      break;
    case grpc::StatusCode::UNAVAILABLE:
      code = StatusCode::kUnavailable;
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      code = StatusCode::kDeadlineExceeded;
      break;
    case grpc::StatusCode::CANCELLED:
      code = StatusCode::kCancelled;
      break;
    default:
      break;
  }
  return Status(code, s.error_message());
}

std::string error_text(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (!doc.HasParseError() && doc.IsObject()) {
    auto it = doc.FindMember("error");
    if (it != doc.MemberEnd() && it->value.IsString()) return it->value.GetString();
  }
  return body.empty() ? "no message" : body;
}

Result<RemoteModel> parse_metadata_json(const std::string& body, const std::string& model) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) return internal_error("model metadata is not a JSON object");
  RemoteModel m;
  m.name = doc.HasMember("name") && doc["name"].IsString() ? doc["name"].GetString() : model;
  if (doc.HasMember("versions") && doc["versions"].IsArray())
    for (const auto& v : doc["versions"].GetArray())
      if (v.IsString()) m.versions.emplace_back(v.GetString());
  SL_ASSIGN_OR_RETURN(m.inputs, parse_tensors(doc, "inputs"));
  SL_ASSIGN_OR_RETURN(m.outputs, parse_tensors(doc, "outputs"));
  return m;
}

Result<ServerStats> parse_statistics_json(const std::string& body, const std::string& model,
                                          const std::string& version) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("model_stats") || !doc["model_stats"].IsArray())
    return internal_error("model statistics: expected a JSON object with a 'model_stats' list");
  ServerStats s;
  bool found = false;
  for (const auto& m : doc["model_stats"].GetArray()) {
    if (!m.IsObject() || !m.HasMember("name") || !m["name"].IsString() || m["name"].GetString() != model) continue;
    if (!version.empty() &&
        (!m.HasMember("version") || !m["version"].IsString() || m["version"].GetString() != version))
      continue;
    found = true;
    s.inference_count += uint_member(m, "inference_count");
    s.execution_count += uint_member(m, "execution_count");
    auto it = m.FindMember("inference_stats");
    if (it == m.MemberEnd() || !it->value.IsObject()) continue;
    add_duration(it->value, "success", &s.success);
    add_duration(it->value, "queue", &s.queue);
    add_duration(it->value, "compute_input", &s.compute_input);
    add_duration(it->value, "compute_infer", &s.compute_infer);
    add_duration(it->value, "compute_output", &s.compute_output);
  }
  if (!found)
    return not_found("model statistics: no entry for model '" + model + "'" +
                     (version.empty() ? "" : " version " + version));
  return s;
}

ServerStats stats_delta(const ServerStats& later, const ServerStats& earlier) {
  ServerStats d;
  d.inference_count =
      later.inference_count > earlier.inference_count ? later.inference_count - earlier.inference_count : 0;
  d.execution_count =
      later.execution_count > earlier.execution_count ? later.execution_count - earlier.execution_count : 0;
  d.success = sub(later.success, earlier.success);
  d.queue = sub(later.queue, earlier.queue);
  d.compute_input = sub(later.compute_input, earlier.compute_input);
  d.compute_infer = sub(later.compute_infer, earlier.compute_infer);
  d.compute_output = sub(later.compute_output, earlier.compute_output);
  return d;
}

Result<std::unique_ptr<PerfClient>> PerfClient::create(const std::string& protocol, const std::string& url) {
  if (protocol == "http") {
    SL_ASSIGN_OR_RETURN(Endpoint e, parse_url(url, "8000"));
    return make_http_client(std::move(e));
  }
  if (protocol == "grpc") {
    SL_ASSIGN_OR_RETURN(Endpoint e, parse_url(url, "8001"));
    return make_grpc_client(std::move(e));
  }
  return invalid_argument("protocol '" + protocol + "': expected http or grpc");
}

}  // namespace streamline::tools
