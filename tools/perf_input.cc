#include "perf_input.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "cli_common.h"
#include "preflight.h"
#include "serve/model_config.h"

namespace streamline::tools {
namespace {

using Json = rapidjson::Value;

int64_t element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Flattens a (nested) JSON list of scalars into `out`.
Status flatten(const Json& v, std::vector<const Json*>* out) {
  if (v.IsArray()) {
    for (const auto& e : v.GetArray()) SL_RETURN_IF_ERROR(flatten(e, out));
    return ok_status();
  }
  if (!v.IsNumber() && !v.IsBool()) return invalid_argument("expected numbers or booleans, got a string or object");
  out->push_back(&v);
  return ok_status();
}

template <typename T>
Status store_int(const Json& v, T* out) {
  if (v.IsBool()) {
    *out = static_cast<T>(v.GetBool());
    return ok_status();
  }
  if (v.IsInt64()) {
    const int64_t x = v.GetInt64();
    if constexpr (std::is_signed_v<T>) {
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
        return invalid_argument(std::to_string(x) + " is out of range for its datatype");
    } else {
      if (x < 0 || static_cast<uint64_t>(x) > std::numeric_limits<T>::max())
        return invalid_argument(std::to_string(x) + " is out of range for its datatype");
    }
    *out = static_cast<T>(x);
    return ok_status();
  }
  if (v.IsUint64() && std::is_unsigned_v<T> && sizeof(T) == 8) {
    *out = static_cast<T>(v.GetUint64());
    return ok_status();
  }
  return invalid_argument("expected integers, got " + std::to_string(v.GetDouble()));
}

// Writes scalar `v` as element `i` of `t`.
Status store(const Json& v, Tensor& t, int64_t i) {
  const double d = v.IsBool() ? (v.GetBool() ? 1.0 : 0.0) : v.GetDouble();
  switch (t.dtype()) {
    case DType::kFloat32:
      t.data<float>()[i] = static_cast<float>(d);
      return ok_status();
    case DType::kFloat64:
      t.data<double>()[i] = d;
      return ok_status();
    case DType::kFloat16:
      t.data<uint16_t>()[i] = float_to_half(static_cast<float>(d));
      return ok_status();
    case DType::kBFloat16:
      t.data<uint16_t>()[i] = float_to_bfloat16(static_cast<float>(d));
      return ok_status();
    case DType::kBool:
      t.data<bool>()[i] = d != 0;
      return ok_status();
    case DType::kInt8:
      return store_int(v, t.data<int8_t>() + i);
    case DType::kInt16:
      return store_int(v, t.data<int16_t>() + i);
    case DType::kInt32:
      return store_int(v, t.data<int32_t>() + i);
    case DType::kInt64:
      return store_int(v, t.data<int64_t>() + i);
    case DType::kUInt8:
      return store_int(v, t.data<uint8_t>() + i);
    case DType::kUInt16:
      return store_int(v, t.data<uint16_t>() + i);
    case DType::kUInt32:
      return store_int(v, t.data<uint32_t>() + i);
    case DType::kUInt64:
      return store_int(v, t.data<uint64_t>() + i);
    default:
      return unsupported(std::string("datatype ") + dtype_name(t.dtype()) + " cannot be read from JSON");
  }
}

Result<DType> input_dtype(const RemoteTensor& t) {
  const DType dtype = serve::dtype_from_kserve(t.datatype);
  if (dtype == DType::kUndefined || dtype_size(dtype) == 0)
    return unsupported("input '" + t.name + "': datatype " + t.datatype + " is not supported");
  return dtype;
}

// One tensor of one entry: its shape (from "shape" or the flags) and values.
Result<Tensor> entry_tensor(const Json& spec, const RemoteTensor& shaped, const RemoteTensor& declared, int64_t batch) {
  SL_ASSIGN_OR_RETURN(DType dtype, input_dtype(shaped));
  const bool batched = !declared.shape.empty() && declared.shape[0] < 0;
  std::vector<int64_t> dims = shaped.shape;
  const Json* content = &spec;
  if (spec.IsObject() && spec.HasMember("content")) {
    content = &spec["content"];
    if (spec.HasMember("shape")) {
      const Json& s = spec["shape"];
      if (!s.IsArray()) return invalid_argument("'shape' is not a list");
      std::vector<int64_t> given;
      for (const auto& d : s.GetArray()) {
        if (!d.IsInt64() || d.GetInt64() < 0) return invalid_argument("'shape' has a dimension that is not a size");
        given.push_back(d.GetInt64());
      }
      if (given.size() == declared.shape.size()) {
        dims = given;
      } else if (batched && given.size() + 1 == declared.shape.size()) {
        dims = {batch};
        dims.insert(dims.end(), given.begin(), given.end());
      } else {
        return invalid_argument("'shape' " + dims_text(given) + " has the wrong rank: the input has " +
                                std::to_string(declared.shape.size()) + " dimensions");
      }
    }
  }
  Tensor t = Tensor::empty(dtype, Shape(dims));
  if (!t.defined() && element_count(dims) > 0)
    return resource_exhausted("cannot allocate a tensor of shape " + dims_text(dims));
  const int64_t n = element_count(dims);
  const int64_t rows = batched && !dims.empty() && dims[0] > 0 ? dims[0] : 1;
  const std::string expected = std::to_string(n) + (rows > 1 ? " or " + std::to_string(n / rows) + " (one row)" : "");
  if (content->IsObject() && content->HasMember("b64")) {
    if (!(*content)["b64"].IsString()) return invalid_argument("'b64' is not a string");
    SL_ASSIGN_OR_RETURN(std::string bytes, decode_base64((*content)["b64"].GetString()));
    const size_t whole = t.nbytes();
    if (bytes.size() == whole) {
      std::memcpy(t.raw(), bytes.data(), whole);
    } else if (rows > 1 && bytes.size() * static_cast<size_t>(rows) == whole) {
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(static_cast<char*>(t.raw()) + r * bytes.size(), bytes.data(), bytes.size());
    } else {
      return invalid_argument("has " + std::to_string(bytes.size()) + " bytes of data; shape " + dims_text(dims) +
                              " needs " + std::to_string(whole) +
                              (rows > 1 ? " or " + std::to_string(whole / rows) + " (one row)" : ""));
    }
    return t;
  }
  if (!content->IsArray()) return invalid_argument("expected a list of values, {\"b64\": ...} or {\"content\": ...}");
  std::vector<const Json*> values;
  SL_RETURN_IF_ERROR(flatten(*content, &values));
  const int64_t got = static_cast<int64_t>(values.size());
  if (got != n && !(rows > 1 && got * rows == n))
    return invalid_argument("has " + std::to_string(got) + " values; shape " + dims_text(dims) + " needs " + expected);
  for (int64_t i = 0; i < n; ++i) SL_RETURN_IF_ERROR(store(*values[static_cast<size_t>(i % got)], t, i));
  return t;
}

// The entries of "data", flattening a list of streams.
Status collect_entries(const Json& data, std::vector<const Json*>* out) {
  for (const auto& e : data.GetArray()) {
    if (e.IsArray()) {
      SL_RETURN_IF_ERROR(collect_entries(e, out));
    } else if (e.IsObject()) {
      out->push_back(&e);
    } else {
      return invalid_argument("'data' holds something that is neither an entry {...} nor a list of entries");
    }
  }
  return ok_status();
}

}  // namespace

Result<std::string> decode_base64(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=' || c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    const int v = value(c);
    if (v < 0) return invalid_argument(std::string("base64 data has the character '") + c + "'");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

Result<std::vector<RequestInputs>> parse_perf_input_json(const std::string& json, const std::string& source,
                                                         const std::vector<RemoteTensor>& shaped,
                                                         const std::vector<RemoteTensor>& declared, int64_t batch) {
  const std::string where = "--input-data " + source;
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError())
    return invalid_argument(where + ": not valid JSON at offset " + std::to_string(doc.GetErrorOffset()) + ": " +
                            rapidjson::GetParseError_En(doc.GetParseError()));
  if (!doc.IsObject() || !doc.HasMember("data") || !doc["data"].IsArray())
    return invalid_argument(where + ": expected an object {\"data\": [...]}");
  std::vector<const Json*> entries;
  if (Status s = collect_entries(doc["data"], &entries); !s.ok()) return s.with_context(where);
  if (entries.empty()) return invalid_argument(where + ": 'data' has no entries");
  std::vector<RequestInputs> requests;
  for (size_t e = 0; e < entries.size(); ++e) {
    const Json& entry = *entries[e];
    RequestInputs r;
    for (size_t i = 0; i < shaped.size(); ++i) {
      const std::string ctx = where + ": entry " + std::to_string(e) + ", input '" + shaped[i].name + "'";
      auto it = entry.FindMember(shaped[i].name.c_str());
      if (it == entry.MemberEnd()) return invalid_argument(ctx + ": missing");
      auto t = entry_tensor(it->value, shaped[i], declared[i], batch);
      if (!t.ok()) return t.status().with_context(ctx);
      RemoteTensor shape_of = shaped[i];
      shape_of.shape.assign(t->shape().data(), t->shape().data() + t->shape().rank());
      r.tensors.push_back(std::move(shape_of));
      r.values.push_back(std::move(*t));
    }
    requests.push_back(std::move(r));
  }
  return requests;
}

Result<std::vector<RequestInputs>> make_perf_requests(const std::vector<RemoteTensor>& shaped,
                                                      const std::vector<RemoteTensor>& declared, int64_t batch,
                                                      const std::string& input_data, uint32_t seed) {
  if (input_data != "random" && input_data != "zero") {
    SL_RETURN_IF_ERROR(check_input_file("--input-data", input_data));
    std::ifstream in(input_data, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return invalid_argument("--input-data " + input_data + ": cannot read the file");
    return parse_perf_input_json(text.str(), input_data, shaped, declared, batch);
  }
  RequestInputs r;
  for (size_t i = 0; i < shaped.size(); ++i) {
    SL_ASSIGN_OR_RETURN(DType dtype, input_dtype(shaped[i]));
    auto t = random_tensor(dtype, Shape(shaped[i].shape), seed + static_cast<uint32_t>(i));
    if (!t.ok()) return t.status().with_context("input '" + shaped[i].name + "'");
    if (input_data == "zero") std::memset(t->raw(), 0, t->nbytes());
    r.tensors.push_back(shaped[i]);
    r.values.push_back(std::move(*t));
  }
  return std::vector<RequestInputs>{std::move(r)};
}

}  // namespace streamline::tools
