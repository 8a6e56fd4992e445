#include "serve/http_codec.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <type_traits>

#include "serve/model_config.h"

namespace streamline::serve {
namespace {

using rapidjson::Value;
using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                                     rapidjson::CrtAllocator, rapidjson::kWriteNanAndInfFlag>;

// Iterative parsing keeps deep nesting off the call stack; invalid UTF-8 is refused; numbers are
// parsed exactly. Trailing bytes after the document are an error (kParseStopWhenDoneFlag is off).
constexpr unsigned kParseFlags =
    rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag | rapidjson::kParseFullPrecisionFlag;
constexpr size_t kMaxRank = 32;
constexpr int kMaxNesting = 64;  // nested "data" arrays
constexpr int64_t kMaxElements = int64_t{1} << 40;

std::string str(const Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

const Value* member(const Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

Status parse_document(std::string_view text, rapidjson::Document* doc) {
  doc->Parse<kParseFlags>(text.data(), text.size());
  if (doc->HasParseError())
    return invalid_argument("malformed JSON at byte " + std::to_string(doc->GetErrorOffset()) + ": " +
                            rapidjson::GetParseError_En(doc->GetParseError()));
  return ok_status();
}

// A non-negative integer that fits int64.
bool as_count(const Value& v, int64_t* out) {
  if (!v.IsInt64() || v.GetInt64() < 0) return false;
  *out = v.GetInt64();
  return true;
}

// Converts one JSON value to the element type T; false when it is not a valid T.
template <typename T>
bool convert(const Value& v, T* out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.IsBool()) return false;
    *out = v.GetBool();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.IsNumber()) return false;
    *out = static_cast<T>(v.GetDouble());
  } else if constexpr (std::is_signed_v<T>) {
    if (!v.IsInt64()) return false;
    const int64_t x = v.GetInt64();
    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(x);
  } else {
    if (!v.IsUint64()) return false;
    const uint64_t x = v.GetUint64();
    if (x > std::numeric_limits<T>::max()) return false;
    *out = static_cast<T>(x);
  }
  return true;
}

// Half-precision types arrive as JSON numbers and are stored as 16-bit patterns.
struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};
template <>
bool convert<Half>(const Value& v, Half* out) {
  if (!v.IsNumber()) return false;
  out->bits = float_to_half(static_cast<float>(v.GetDouble()));
  return true;
}
template <>
bool convert<BFloat>(const Value& v, BFloat* out) {
  if (!v.IsNumber()) return false;
  out->bits = float_to_bfloat16(static_cast<float>(v.GetDouble()));
  return true;
}

// Counts the scalars of a (possibly nested) "data" array.
Status count_leaves(const Value& v, int depth, int64_t* n) {
  if (!v.IsArray()) {
    ++*n;
    return ok_status();
  }
  if (depth > kMaxNesting) return invalid_argument("\"data\" is nested deeper than " + std::to_string(kMaxNesting));
  for (const Value& e : v.GetArray()) SL_RETURN_IF_ERROR(count_leaves(e, depth + 1, n));
  return ok_status();
}

// Writes the scalars in order; `index` counts them. Depth was checked by count_leaves.
template <typename T>
bool fill_leaves(const Value& v, T* out, int64_t* index) {
  if (!v.IsArray()) return convert<T>(v, &out[(*index)++]);
  for (const Value& e : v.GetArray())
    if (!fill_leaves(e, out, index)) return false;
  return true;
}

template <typename T>
Status fill(const Value& data, Tensor& t, const std::string& what) {
  int64_t index = 0;
  if (!fill_leaves<T>(data, static_cast<T*>(t.raw()), &index))
    return invalid_argument(what + ": element " + std::to_string(index - 1) + " is not a valid " +
                            dtype_to_kserve(t.dtype()) + " value");
  return ok_status();
}

Status fill_from_json(const Value& data, Tensor& t, const std::string& what) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return fill<float>(data, t, what);
    case DType::kFloat64:
      return fill<double>(data, t, what);
    case DType::kFloat16:
      return fill<Half>(data, t, what);
    case DType::kBFloat16:
      return fill<BFloat>(data, t, what);
    case DType::kUInt8:
      return fill<uint8_t>(data, t, what);
    case DType::kInt8:
      return fill<int8_t>(data, t, what);
    case DType::kUInt16:
      return fill<uint16_t>(data, t, what);
    case DType::kInt16:
      return fill<int16_t>(data, t, what);
    case DType::kUInt32:
      return fill<uint32_t>(data, t, what);
    case DType::kInt32:
      return fill<int32_t>(data, t, what);
    case DType::kUInt64:
      return fill<uint64_t>(data, t, what);
    case DType::kInt64:
      return fill<int64_t>(data, t, what);
    case DType::kBool:
      return fill<bool>(data, t, what);
    default:
      return invalid_argument(what + ": datatype " + dtype_name(t.dtype()) + " cannot be given as JSON");
  }
}

// One entry of "inputs". Binary inputs consume `binary` from `*offset` on.
Status decode_input(const Value& v, size_t i, std::string_view binary, size_t* offset, std::set<std::string>* seen,
                    InferRequest* request) {
  std::string what = "inputs[" + std::to_string(i) + "]";
  if (!v.IsObject()) return invalid_argument(what + " must be an object");
  const Value* name = member(v, "name");
  if (!name || !name->IsString() || name->GetStringLength() == 0)
    return invalid_argument(what + " needs a \"name\" string");
  what = "input '" + str(*name) + "'";
  if (!seen->insert(str(*name)).second) return invalid_argument(what + " is given twice");

  const Value* datatype = member(v, "datatype");
  if (!datatype || !datatype->IsString()) return invalid_argument(what + " needs a \"datatype\" string");
  const DType dtype = dtype_from_kserve(str(*datatype));
  if (dtype == DType::kUndefined || !dtype_supported(dtype) || dtype_size(dtype) == 0)
    return invalid_argument(what + ": datatype '" + str(*datatype) + "' is not supported");

  const Value* shape_v = member(v, "shape");
  if (!shape_v || !shape_v->IsArray()) return invalid_argument(what + " needs a \"shape\" array");
  if (shape_v->Size() > kMaxRank) return invalid_argument(what + ": rank above " + std::to_string(kMaxRank));
  std::vector<int64_t> dims;
  int64_t numel = 1;
  for (const Value& d : shape_v->GetArray()) {
    int64_t x = 0;
    if (!as_count(d, &x)) return invalid_argument(what + ": shape dims must be non-negative integers");
    if (x != 0 && numel > kMaxElements / x) return invalid_argument(what + ": shape holds too many elements");
    numel *= x;
    dims.push_back(x);
  }
  const Shape shape(dims);
  const int64_t nbytes = numel * static_cast<int64_t>(dtype_size(dtype));

  int64_t binary_size = -1;
  if (const Value* params = member(v, "parameters")) {
    if (!params->IsObject()) return invalid_argument(what + ": \"parameters\" must be an object");
    if (member(*params, "shared_memory_region"))
      return invalid_argument(what + ": shared memory inputs are not supported");
    if (const Value* b = member(*params, "binary_data_size"))
      if (!as_count(*b, &binary_size))
        return invalid_argument(what + ": binary_data_size must be a non-negative integer");
  }
  const Value* data = member(v, "data");
  Tensor t;
  if (binary_size >= 0) {
    if (data) return invalid_argument(what + " has both \"data\" and binary_data_size");
    if (binary_size != nbytes)
      return invalid_argument(what + ": binary_data_size " + std::to_string(binary_size) + " does not match " +
                              str(*datatype) + shape.to_string() + " (" + std::to_string(nbytes) + " bytes)");
    if (static_cast<uint64_t>(binary_size) > binary.size() - *offset)
      return invalid_argument(what + ": binary_data_size " + std::to_string(binary_size) +
                              " runs past the end of the body (" + std::to_string(binary.size() - *offset) +
                              " bytes left)");
    t = Tensor::empty(dtype, shape);
    if (nbytes > 0) std::memcpy(t.raw(), binary.data() + *offset, static_cast<size_t>(nbytes));
    *offset += static_cast<size_t>(binary_size);
    if (dtype == DType::kBool) {  // keep bools 0/1 whatever bytes came
      auto* p = static_cast<uint8_t*>(t.raw());
      for (int64_t k = 0; k < numel; ++k) p[k] = p[k] != 0;
    }
  } else if (data) {
    int64_t count = 0;
    SL_RETURN_IF_ERROR(count_leaves(*data, 0, &count));
    if (count != numel)
      return invalid_argument(what + ": " + std::to_string(count) + " elements given, shape " + shape.to_string() +
                              " holds " + std::to_string(numel));
    t = Tensor::empty(dtype, shape);
    SL_RETURN_IF_ERROR(fill_from_json(*data, t, what));
  } else {
    return invalid_argument(what + " has neither \"data\" nor parameters.binary_data_size");
  }
  request->inputs[str(*name)] = std::move(t);
  return ok_status();
}

Status decode_parameters(const Value& params, DecodedInfer* d) {
  if (!params.IsObject()) return invalid_argument("\"parameters\" must be an object");
  if (const Value* p = member(params, "priority")) {
    int64_t x = 0;
    if (!as_count(*p, &x)) return invalid_argument("parameters.priority must be a non-negative integer");
    // Triton: 0 = the model's default, 1 = highest.
    d->request.priority = x == 0 ? -1 : static_cast<int>(std::min<int64_t>(x - 1, std::numeric_limits<int>::max()));
  }
  if (const Value* p = member(params, "timeout")) {
    int64_t x = 0;
    if (!as_count(*p, &x)) return invalid_argument("parameters.timeout must be a non-negative integer (microseconds)");
    d->request.timeout_us = x;
  }
  if (const Value* p = member(params, "binary_data_output")) {
    if (!p->IsBool()) return invalid_argument("parameters.binary_data_output must be true or false");
    d->binary_default = p->GetBool();
  }
  return ok_status();
}

Status decode_outputs(const Value& outputs, DecodedInfer* d) {
  if (!outputs.IsArray()) return invalid_argument("\"outputs\" must be an array");
  std::set<std::string> seen;
  for (rapidjson::SizeType i = 0; i < outputs.Size(); ++i) {
    const Value& o = outputs[i];
    const std::string where = "outputs[" + std::to_string(i) + "]";
    if (!o.IsObject()) return invalid_argument(where + " must be an object");
    const Value* name = member(o, "name");
    if (!name || !name->IsString() || name->GetStringLength() == 0)
      return invalid_argument(where + " needs a \"name\" string");
    RequestedOutput r{str(*name), d->binary_default};
    if (!seen.insert(r.name).second) return invalid_argument("output '" + r.name + "' is requested twice");
    if (const Value* params = member(o, "parameters")) {
      if (!params->IsObject()) return invalid_argument("output '" + r.name + "': \"parameters\" must be an object");
      if (member(*params, "classification"))
        return invalid_argument("output '" + r.name + "': the classification extension is not supported");
      if (member(*params, "shared_memory_region"))
        return invalid_argument("output '" + r.name + "': shared memory outputs are not supported");
      if (const Value* b = member(*params, "binary_data")) {
        if (!b->IsBool()) return invalid_argument("output '" + r.name + "': binary_data must be true or false");
        r.binary = b->GetBool();
      }
    }
    d->request.requested_outputs.push_back(r.name);
    d->outputs.push_back(std::move(r));
  }
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

Result<DecodedInfer> decode_infer_request(std::string_view body, std::optional<size_t> header_length) {
  const size_t hl = header_length.value_or(body.size());
  if (hl > body.size()) return invalid_argument("the JSON header is longer than the body");
  rapidjson::Document doc;
  SL_RETURN_IF_ERROR(parse_document(body.substr(0, hl), &doc));
  if (!doc.IsObject()) return invalid_argument("the request must be a JSON object");

  DecodedInfer d;
  if (const Value* id = member(doc, "id")) {
    if (!id->IsString()) return invalid_argument("\"id\" must be a string");
    d.id = str(*id);
  }
  if (const Value* params = member(doc, "parameters")) SL_RETURN_IF_ERROR(decode_parameters(*params, &d));
  if (const Value* outputs = member(doc, "outputs")) SL_RETURN_IF_ERROR(decode_outputs(*outputs, &d));

  const Value* inputs = member(doc, "inputs");
  if (!inputs || !inputs->IsArray() || inputs->Empty()) return invalid_argument("\"inputs\" must be a non-empty array");
  const std::string_view binary = body.substr(hl);
  size_t offset = 0;
  std::set<std::string> seen;
  for (rapidjson::SizeType i = 0; i < inputs->Size(); ++i)
    SL_RETURN_IF_ERROR(decode_input((*inputs)[i], i, binary, &offset, &seen, &d.request));
  if (offset != binary.size())
    return invalid_argument("the body holds " + std::to_string(binary.size()) +
                            " bytes after the JSON header but the inputs' binary_data_size add up to " +
                            std::to_string(offset));
  return d;
}

Result<EncodedInfer> encode_infer_response(const DecodedInfer& request, const std::string& model,
                                           const std::string& version, const InferResponse& response) {
  // (name, tensor, binary) in response order.
  struct Out {
    const std::string* name;
    const Tensor* tensor;
    bool binary;
  };
  std::vector<Out> outs;
  if (!request.outputs.empty()) {
    for (const RequestedOutput& o : request.outputs) {
      auto it = response.outputs.find(o.name);
      if (it == response.outputs.end()) return internal_error("the response lacks output '" + o.name + "'");
      outs.push_back({&it->first, &it->second, o.binary});
    }
  } else {
    for (const auto& [name, t] : response.outputs) outs.push_back({&name, &t, request.binary_default});
  }
  for (const Out& o : outs) {
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
    w.String(dtype_to_kserve(o.tensor->dtype()));
    w.Key("shape");
    w.StartArray();
    for (int64_t d : o.tensor->shape()) w.Int64(d);
    w.EndArray();
    if (o.binary) {
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
      if (o.binary) total += o.tensor->nbytes();
    e.body.reserve(total);
    for (const Out& o : outs)
      if (o.binary) e.body.append(static_cast<const char*>(o.tensor->raw()), o.tensor->nbytes());
  }
  return e;
}

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// Writes `s` as a JSON string, each invalid UTF-8 byte replaced by '?'.
void write_string(JsonWriter& w, std::string_view s) {
  std::string clean;
  clean.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      clean += '?';
      ++i;
    } else {
      clean.append(s.substr(i, n));
      i += n;
    }
  }
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
