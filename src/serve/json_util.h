#pragma once
// Small helpers over RapidJSON's writer for the server's JSON documents.
//
//   JsonOut out;
//   out.w.StartObject();
//   json_key_string(out.w, "name", model_name);
//   out.w.EndObject();
//   std::string text = out.str();

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <string>
#include <vector>

#include "serve/echo.h"

namespace streamline::serve {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// A writer with its buffer; str() copies the document out.
struct JsonOut {
  rapidjson::StringBuffer buf;
  JsonWriter w{buf};
  std::string str() const { return std::string(buf.GetString(), buf.GetSize()); }
};

// Strings are written as valid UTF-8 (valid_utf8): names and reasons may quote any bytes.
inline void json_string(JsonWriter& w, const std::string& s) {
  const std::string clean = valid_utf8(s);
  w.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
}
inline void json_key(JsonWriter& w, const std::string& k) {
  const std::string clean = valid_utf8(k);
  w.Key(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
}
inline void json_key_string(JsonWriter& w, const std::string& k, const std::string& v) {
  json_key(w, k);
  json_string(w, v);
}
inline void json_key_int(JsonWriter& w, const std::string& k, int64_t v) {
  json_key(w, k);
  w.Int64(v);
}
inline void json_key_uint(JsonWriter& w, const std::string& k, uint64_t v) {
  json_key(w, k);
  w.Uint64(v);
}
inline void json_int_array(JsonWriter& w, const std::vector<int64_t>& v) {
  w.StartArray();
  for (int64_t x : v) w.Int64(x);
  w.EndArray();
}

}  // namespace streamline::serve
