// Shared memory and logging routes of the HTTP front end (http_extensions.h).

#include "serve/http_extensions.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <map>
#include <optional>

#include "core/logging.h"
#include "serve/echo.h"
#include "serve/http_codec.h"
#include "serve/json_util.h"

namespace streamline::serve {
namespace {

using rapidjson::Value;

ExtensionReply error_reply(const Status& s) {
  ExtensionReply r;
  r.matched = true;
  r.http_status = http_status(s);
  r.body = error_json(cap_message(s.message()));
  return r;
}

ExtensionReply ok_reply(std::string body) {
  ExtensionReply r;
  r.matched = true;
  r.body = std::move(body);
  return r;
}

ExtensionReply wrong_method(const char* allow) {
  ExtensionReply r;
  r.matched = true;
  r.http_status = 405;
  r.allow = allow;
  r.body = error_json(std::string("method not allowed; use ") + allow);
  return r;
}

Status parse_object(std::string_view body, rapidjson::Document* doc) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    doc->SetObject();
    return ok_status();
  }
  doc->Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(body.data(), body.size());
  if (doc->HasParseError())
    return invalid_argument("malformed JSON at byte " + std::to_string(doc->GetErrorOffset()) + ": " +
                            rapidjson::GetParseError_En(doc->GetParseError()));
  if (!doc->IsObject()) return invalid_argument("the body must be a JSON object");
  return ok_status();
}

Result<uint64_t> uint_member(const Value& o, const char* key, bool required) {
  auto it = o.FindMember(key);
  if (it == o.MemberEnd()) {
    if (required) return invalid_argument(std::string("\"") + key + "\" is missing");
    return uint64_t{0};
  }
  if (!it->value.IsUint64()) return invalid_argument(std::string("\"") + key + "\" must be a non-negative integer");
  return it->value.GetUint64();
}

// RFC 4648 base64 (with or without padding); nullopt for another character.
std::optional<std::string> base64_decode(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else if (c == '=')
      break;
    else
      return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

// /v2/{system,cuda}sharedmemory[/region/<r>]/<action>
ExtensionReply shared_memory(ServerCore& core, bool get, bool post, const std::vector<std::string>& seg,
                             std::string_view body) {
  const bool cuda = seg[1] == "cudasharedmemory";
  std::string region;
  size_t i = 2;
  if (seg.size() >= 4 && seg[2] == "region") {
    region = seg[3];
    i = 4;
  }
  if (seg.size() != i + 1) return error_reply(not_found("no such route"));
  const std::string& action = seg[i];
  SharedMemoryRegistry& shm = core.shared_memory();
  if (action == "status") {
    if (!get) return wrong_method("GET");
    JsonOut out;
    out.w.StartArray();
    if (cuda) {
      auto st = shm.cuda_status(region);
      if (!st.ok()) return error_reply(st.status());
      for (const CudaRegionInfo& r : *st) {
        out.w.StartObject();
        json_key_string(out.w, "name", r.name);
        json_key_int(out.w, "device_id", r.device_id);
        json_key_uint(out.w, "byte_size", r.byte_size);
        out.w.EndObject();
      }
    } else {
      auto st = shm.system_status(region);
      if (!st.ok()) return error_reply(st.status());
      for (const SystemRegionInfo& r : *st) {
        out.w.StartObject();
        json_key_string(out.w, "name", r.name);
        json_key_string(out.w, "key", r.key);
        json_key_uint(out.w, "offset", r.offset);
        json_key_uint(out.w, "byte_size", r.byte_size);
        out.w.EndObject();
      }
    }
    out.w.EndArray();
    return ok_reply(out.str());
  }
  if (action == "unregister") {
    if (!post) return wrong_method("POST");
    Status s = cuda ? shm.unregister_cuda(region) : shm.unregister_system(region);
    return s.ok() ? ok_reply("") : error_reply(s);
  }
  if (action == "register" && !region.empty()) {
    if (!post) return wrong_method("POST");
    rapidjson::Document doc;
    if (Status s = parse_object(body, &doc); !s.ok()) return error_reply(s);
    auto size = uint_member(doc, "byte_size", true);
    if (!size.ok()) return error_reply(size.status());
    if (cuda) {
      auto dev = uint_member(doc, "device_id", false);
      if (!dev.ok()) return error_reply(dev.status());
      // "raw_handle": {"b64": "<base64 of the cudaIpcMemHandle_t>"}
      auto raw = doc.FindMember("raw_handle");
      const Value* b64 = nullptr;
      if (raw != doc.MemberEnd() && raw->value.IsObject()) {
        auto b = raw->value.FindMember("b64");
        if (b != raw->value.MemberEnd() && b->value.IsString()) b64 = &b->value;
      }
      if (!b64) return error_reply(invalid_argument("\"raw_handle\" must be {\"b64\": \"<base64>\"}"));
      auto handle = base64_decode(std::string_view(b64->GetString(), b64->GetStringLength()));
      if (!handle) return error_reply(invalid_argument("raw_handle.b64 is not base64"));
      Status s = shm.register_cuda(region, *handle, static_cast<int64_t>(*dev), *size);
      return s.ok() ? ok_reply("") : error_reply(s);
    }
    auto key = doc.FindMember("key");
    if (key == doc.MemberEnd() || !key->value.IsString())
      return error_reply(invalid_argument("\"key\" must be the shared memory object's name"));
    auto offset = uint_member(doc, "offset", false);
    if (!offset.ok()) return error_reply(offset.status());
    Status s =
        shm.register_system(region, std::string(key->value.GetString(), key->value.GetStringLength()), *offset, *size);
    return s.ok() ? ok_reply("") : error_reply(s);
  }
  return error_reply(not_found("no such route"));
}

bool model_known(const ServerCore& core, const std::string& model) {
  for (const RepositoryEntry& e : core.repository().full_index())
    if (e.name == model) return true;
  return false;
}

// {"trace_level": ["TIMESTAMPS"], "trace_rate": "1000", ...}: single values as strings.
std::string trace_settings_json(const std::map<std::string, std::vector<std::string>>& settings) {
  JsonOut out;
  out.w.StartObject();
  for (const auto& [key, values] : settings) {
    json_key(out.w, key);
    if (key == "trace_level") {
      out.w.StartArray();
      for (const auto& v : values) json_string(out.w, v);
      out.w.EndArray();
    } else {
      json_string(out.w, values.empty() ? std::string() : values[0]);
    }
  }
  out.w.EndObject();
  return out.str();
}

// The body's settings: a string, a number, a list of strings, or null (clear).
Result<std::map<std::string, std::optional<std::vector<std::string>>>> trace_changes(std::string_view body) {
  rapidjson::Document doc;
  SL_RETURN_IF_ERROR(parse_object(body, &doc));
  std::map<std::string, std::optional<std::vector<std::string>>> changes;
  for (const auto& m : doc.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    const Value& v = m.value;
    const auto text = [](const Value& x) -> std::optional<std::string> {
      if (x.IsString()) return std::string(x.GetString(), x.GetStringLength());
      if (x.IsInt64()) return std::to_string(x.GetInt64());
      return std::nullopt;
    };
    if (v.IsNull()) {
      changes[key] = std::nullopt;
    } else if (v.IsArray()) {
      std::vector<std::string> list;
      for (const Value& x : v.GetArray()) {
        auto t = text(x);
        if (!t) return invalid_argument("trace setting '" + echo(key) + "': values must be strings");
        list.push_back(*t);
      }
      changes[key] = list;
    } else if (auto t = text(v)) {
      changes[key] = std::vector<std::string>{*t};
    } else {
      return invalid_argument("trace setting '" + echo(key) + "' must be a string, an integer, a list or null");
    }
  }
  return changes;
}

ExtensionReply trace_setting(ServerCore& core, bool get, bool post, const std::string& model, std::string_view body) {
  if (!model.empty() && !model_known(core, model)) return error_reply(not_found("unknown model '" + echo(model) + "'"));
  if (post) {
    auto changes = trace_changes(body);
    if (!changes.ok()) return error_reply(changes.status());
    if (Status s = core.traces().update(model, *changes); !s.ok()) return error_reply(s);
  } else if (!get) {
    return wrong_method("GET, POST");
  }
  return ok_reply(trace_settings_json(core.traces().settings(model)));
}

}  // namespace

Result<LoadOptions> parse_load_request(std::string_view body) {
  rapidjson::Document doc;
  SL_RETURN_IF_ERROR(parse_object(body, &doc));
  LoadOptions o;
  auto params = doc.FindMember("parameters");
  if (params == doc.MemberEnd()) return o;
  if (!params->value.IsObject()) return invalid_argument("\"parameters\" must be an object");
  for (const auto& m : params->value.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    if (key == "config") {
      if (!m.value.IsString()) return invalid_argument("parameters.config must be a string holding the JSON config");
      o.config_json.assign(m.value.GetString(), m.value.GetStringLength());
    } else if (key.rfind("file:", 0) == 0) {
      return unsupported("load parameter '" + echo(key) +
                         "': model files cannot be sent with the request here; put "
                         "them in the repository");
    }
  }
  return o;
}

std::string log_settings_json() {
  const LogSettings s = log_settings();
  JsonOut out;
  out.w.StartObject();
  json_key_string(out.w, "log_file", s.file);
  json_key(out.w, "log_info");
  out.w.Bool(s.info);
  json_key(out.w, "log_warning");
  out.w.Bool(s.warning);
  json_key(out.w, "log_error");
  out.w.Bool(s.error);
  json_key_int(out.w, "log_verbose_level", s.verbose);
  json_key_string(out.w, "log_format", s.format);
  out.w.EndObject();
  return out.str();
}

Status update_log_settings(std::string_view body) {
  rapidjson::Document doc;
  SL_RETURN_IF_ERROR(parse_object(body, &doc));
  LogSettings s = log_settings();
  for (const auto& m : doc.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    const Value& v = m.value;
    auto flag = [&](bool* out) -> Status {
      if (!v.IsBool()) return invalid_argument("\"" + key + "\" must be true or false");
      *out = v.GetBool();
      return ok_status();
    };
    if (key == "log_info") {
      SL_RETURN_IF_ERROR(flag(&s.info));
    } else if (key == "log_warning") {
      SL_RETURN_IF_ERROR(flag(&s.warning));
    } else if (key == "log_error") {
      SL_RETURN_IF_ERROR(flag(&s.error));
    } else if (key == "log_verbose_level") {
      if (!v.IsUint() || v.GetUint() > 1000000)
        return invalid_argument("\"log_verbose_level\" must be an integer >= 0");
      s.verbose = static_cast<int>(v.GetUint());
    } else if (key == "log_format" || key == "log_file") {
      if (!v.IsString()) return invalid_argument("\"" + key + "\" must be a string");
      (key == "log_format" ? s.format : s.file) = std::string(v.GetString(), v.GetStringLength());
    } else {
      return invalid_argument("unknown log setting '" + echo(key) + "'");
    }
  }
  return set_log_settings(s);
}

ExtensionReply route_extension(ServerCore& core, bool get, bool post, const std::vector<std::string>& seg,
                               std::string_view body) {
  if (seg.size() < 2 || seg[0] != "v2") return {};
  if (seg[1] == "systemsharedmemory" || seg[1] == "cudasharedmemory") return shared_memory(core, get, post, seg, body);
  if (seg.size() == 3 && seg[1] == "trace" && seg[2] == "setting") return trace_setting(core, get, post, "", body);
  if (seg.size() == 5 && seg[1] == "models" && seg[3] == "trace" && seg[4] == "setting")
    return trace_setting(core, get, post, seg[2], body);
  if (seg[1] == "logging" && seg.size() == 2) {
    if (post) {
      if (Status s = update_log_settings(body); !s.ok()) return error_reply(s);
      return ok_reply(log_settings_json());
    }
    if (!get) return wrong_method("GET, POST");
    return ok_reply(log_settings_json());
  }
  return {};
}

}  // namespace streamline::serve
