#include "serve/http_codec.h"

#include <rapidjson/document.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "serve/classification.h"
#include "serve/echo.h"
#include "serve/model_config.h"

namespace streamline::serve {
namespace {

using rapidjson::Value;
using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                                     rapidjson::CrtAllocator, rapidjson::kWriteNanAndInfFlag>;

// Iterative parsing keeps deep nesting off the call stack; invalid UTF-8 is refused. Only a bool is
// read from these documents, so numbers take RapidJSON's plain conversion (its full-precision one
// misreads a zero significand, see JsonNumber::from_text). Trailing bytes after the document are an
// error (kParseStopWhenDoneFlag is off, and parse_document checks that a NUL byte did not end the
// input early).
constexpr unsigned kParseFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

const Value* member(const Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

Status parse_document(std::string_view text, rapidjson::Document* doc) {
  rapidjson::MemoryStream ms(text.data(), text.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> is(ms);
  doc->ParseStream<kParseFlags>(is);
  if (doc->HasParseError())
    return invalid_argument("malformed JSON at byte " + std::to_string(doc->GetErrorOffset()) + ": " +
                            rapidjson::GetParseError_En(doc->GetParseError()));
  // RapidJSON takes a NUL byte for the end of its input; what follows one is not a document.
  if (is.Tell() != text.size())
    return invalid_argument("malformed JSON at byte " + std::to_string(is.Tell()) + ": " +
                            rapidjson::GetParseError_En(rapidjson::kParseErrorDocumentRootNotSingular));
  return ok_status();
}

// Shortest text that reads back as the same value; NaN and infinities as Python's json writes them.
template <typename F>
void write_float(JsonWriter& w, F x) {
  if (std::isnan(x)) {
    w.RawValue("NaN", 3, rapidjson::kNumberType);
  } else if (std::isinf(x)) {
    if (x > 0)
      w.RawValue("Infinity", 8, rapidjson::kNumberType);
    else
      w.RawValue("-Infinity", 9, rapidjson::kNumberType);
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), x);
    w.RawValue(buf, static_cast<size_t>(r.ptr - buf), rapidjson::kNumberType);
  }
}

void write_data(JsonWriter& w, const Tensor& t) {
  const int64_t n = t.numel();
  w.StartArray();
  switch (t.dtype()) {
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) write_float(w, t.data<float>()[i]);
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) write_float(w, t.data<double>()[i]);
      break;
    case DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) write_float(w, half_to_float(t.data<uint16_t>()[i]));
      break;
    case DType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) write_float(w, bfloat16_to_float(t.data<uint16_t>()[i]));
      break;
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) w.Bool(t.data<uint8_t>()[i] != 0);
      break;
    case DType::kUInt8:
      for (int64_t i = 0; i < n; ++i) w.Uint(t.data<uint8_t>()[i]);
      break;
    case DType::kUInt16:
      for (int64_t i = 0; i < n; ++i) w.Uint(t.data<uint16_t>()[i]);
      break;
    case DType::kUInt32:
      for (int64_t i = 0; i < n; ++i) w.Uint(t.data<uint32_t>()[i]);
      break;
    case DType::kUInt64:
      for (int64_t i = 0; i < n; ++i) w.Uint64(t.data<uint64_t>()[i]);
      break;
    case DType::kInt8:
      for (int64_t i = 0; i < n; ++i) w.Int(t.data<int8_t>()[i]);
      break;
    case DType::kInt16:
      for (int64_t i = 0; i < n; ++i) w.Int(t.data<int16_t>()[i]);
      break;
    case DType::kInt32:
      for (int64_t i = 0; i < n; ++i) w.Int(t.data<int32_t>()[i]);
      break;
    case DType::kInt64:
      for (int64_t i = 0; i < n; ++i) w.Int64(t.data<int64_t>()[i]);
      break;
    default:
      break;  // refused by the caller
  }
  w.EndArray();
}

void write_string(JsonWriter& w, std::string_view s);

}  // namespace

Result<std::optional<size_t>> parse_header_length(std::string_view value, size_t body_size) {
  if (value.empty()) return std::optional<size_t>();
  size_t n = 0;
  auto r = std::from_chars(value.data(), value.data() + value.size(), n);
  if (r.ec != std::errc() || r.ptr != value.data() + value.size())
    return invalid_argument("Inference-Header-Content-Length must be a decimal byte count");
  if (n > body_size)
    return invalid_argument("Inference-Header-Content-Length " + std::to_string(n) + " exceeds the body (" +
                            std::to_string(body_size) + " bytes)");
  return std::optional<size_t>(n);
}

Result<EncodedInfer> encode_infer_response(const DecodedInfer& request, const std::string& model,
                                           const std::string& version, const InferResponse& response,
                                           const EncodeOptions& options) {
  // (name, tensor, binary) in response order.
  struct Out {
    const std::string* name;
    const Tensor* tensor;
    bool binary;
    const ShmRef* shm;
    const ClassifiedOutput* classes;  // classification: BYTES instead of the tensor
  };
  std::vector<Out> outs;
  std::vector<ClassifiedOutput> classified;
  classified.reserve(request.outputs.size());
  if (!request.outputs.empty()) {
    for (const RequestedOutput& o : request.outputs) {
      auto it = response.outputs.find(o.name);
      if (it == response.outputs.end()) return internal_error("the response lacks output '" + o.name + "'");
      const ClassifiedOutput* classes = nullptr;
      if (o.class_count > 0) {
        const std::vector<std::string>* labels = nullptr;
        if (options.labels)
          if (auto l = options.labels->find(o.name); l != options.labels->end()) labels = &l->second;
        Result<ClassifiedOutput> c = classify(it->second, o.class_count, options.batched, labels);
        if (!c.ok()) return Status(c.status().code(), "output '" + o.name + "': " + c.status().message());
        classified.push_back(std::move(*c));
        classes = &classified.back();
      }
      outs.push_back({&it->first, &it->second, o.binary && !o.shm, o.shm ? &*o.shm : nullptr, classes});
    }
  } else {
    for (const auto& [name, t] : response.outputs)
      outs.push_back({&name, &t, request.binary_default, nullptr, nullptr});
  }
  for (const Out& o : outs) {
    if (o.classes) continue;
    if (o.tensor->layout() != Layout::kPlain)
      return internal_error("output '" + *o.name + "' is not in the plain layout");
    if (*dtype_to_kserve(o.tensor->dtype()) == '\0' || dtype_size(o.tensor->dtype()) == 0)
      return unsupported("output '" + *o.name + "' has datatype " + dtype_name(o.tensor->dtype()) +
                         ", which KServe cannot carry");
  }

  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("model_name");
  write_string(w, model);
  w.Key("model_version");
  write_string(w, version);
  if (request.id) {
    w.Key("id");
    write_string(w, *request.id);
  }
  w.Key("outputs");
  w.StartArray();
  bool any_binary = false;
  for (const Out& o : outs) {
    w.StartObject();
    w.Key("name");
    write_string(w, *o.name);
    w.Key("datatype");
    w.String(o.classes ? "BYTES" : dtype_to_kserve(o.tensor->dtype()));
    w.Key("shape");
    w.StartArray();
    if (o.classes)
      for (int64_t d : o.classes->shape) w.Int64(d);
    else
      for (int64_t d : o.tensor->shape()) w.Int64(d);
    w.EndArray();
    if (o.classes) {
      if (o.binary) {
        any_binary = true;
        w.Key("parameters");
        w.StartObject();
        w.Key("binary_data_size");
        w.Uint64(serialize_bytes(o.classes->values).size());
        w.EndObject();
      } else {
        w.Key("data");
        w.StartArray();
        for (const std::string& v : o.classes->values) write_string(w, v);
        w.EndArray();
      }
    } else if (o.shm) {
      w.Key("parameters");
      w.StartObject();
      w.Key("shared_memory_region");
      write_string(w, o.shm->region);
      w.Key("shared_memory_byte_size");
      w.Uint64(o.tensor->nbytes());
      if (o.shm->offset > 0) {
        w.Key("shared_memory_offset");
        w.Uint64(o.shm->offset);
      }
      w.EndObject();
    } else if (o.binary) {
      any_binary = true;
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(o.tensor->nbytes());
      w.EndObject();
    } else {
      w.Key("data");
      write_data(w, *o.tensor);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  EncodedInfer e;
  e.body.assign(sb.GetString(), sb.GetSize());
  if (any_binary) {
    e.header_length = e.body.size();
    size_t total = e.body.size();
    for (const Out& o : outs)
      if (o.binary && !o.classes) total += o.tensor->nbytes();
    e.body.reserve(total);
    for (const Out& o : outs) {
      if (!o.binary) continue;
      if (o.classes)
        e.body += serialize_bytes(o.classes->values);
      else
        e.body.append(static_cast<const char*>(o.tensor->raw()), o.tensor->nbytes());
    }
  }
  return e;
}

namespace {

// Writes `s` as a JSON string, each invalid UTF-8 byte replaced by '?'.
void write_string(JsonWriter& w, std::string_view s) {
  const std::string clean = valid_utf8(s);
  w.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
}

}  // namespace

std::string error_json(std::string_view message) {
  rapidjson::StringBuffer sb;
  JsonWriter w(sb);
  w.StartObject();
  w.Key("error");
  write_string(w, message);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

Result<bool> parse_bool_member(std::string_view body, const char* key) {
  size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return false;
  rapidjson::Document doc;
  SL_RETURN_IF_ERROR(parse_document(body, &doc));
  if (!doc.IsObject()) return invalid_argument("the body must be a JSON object");
  const Value* v = member(doc, key);
  if (!v) return false;
  if (!v->IsBool()) return invalid_argument(std::string("\"") + key + "\" must be true or false");
  return v->GetBool();
}

}  // namespace streamline::serve
