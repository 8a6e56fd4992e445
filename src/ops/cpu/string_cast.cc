// Casts between string tensors and numbers; see string_cast.h.

#include "ops/cpu/string_cast.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "ops/cpu/data_common.h"

namespace streamline::ops::cpu {
namespace {

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

template <typename T>
std::string shortest(T v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Element i of a numeric tensor as text.
std::string format_element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return shortest(t.data<float>()[i]);
    case DType::kFloat64:
      return shortest(t.data<double>()[i]);
    case DType::kFloat16:
    case DType::kBFloat16:
      return shortest(static_cast<float>(element_as_double(t, i)));
    case DType::kBool:
      return t.data<uint8_t>()[i] ? "True" : "False";
    case DType::kUInt64:
      return std::to_string(t.data<uint64_t>()[i]);
    default:
      return std::to_string(element_as_int64(t, i));
  }
}

class StringCastKernel final : public DataKernel {
 public:
  StringCastKernel(const graph::Node& node, bool like)
      : DataKernel(node), like_(like), to_(static_cast<DType>(node.attr_int("to", 0))) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != (like_ ? 2u : 1u) || !in[0].present())
      return invalid(like_ ? "expected 2 inputs" : "expected 1 input");
    const DType from = in[0].dtype;
    const DType to = like_ ? in[1].dtype : to_;
    SL_RETURN_IF_ERROR(check(from, to));
    ReshapeResult r;
    r.outputs.push_back({to, in[0].shape, Layout::kPlain});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& y = ctx.outputs[0];
    const int64_t n = x.numel();
    if (x.dtype() == DType::kString && y.dtype() == DType::kString) {
      std::copy(x.strings(), x.strings() + n, y.strings());
    } else if (y.dtype() == DType::kString) {
      for (int64_t i = 0; i < n; ++i) y.strings()[i] = format_element(x, i);
    } else {
      const size_t esz = dtype_size(y.dtype());
      for (int64_t i = 0; i < n; ++i)
        SL_RETURN_IF_ERROR(
            parse(x.strings()[i], y.dtype(), static_cast<uint8_t*>(y.raw()) + static_cast<size_t>(i) * esz, i));
    }
    return ok_status();
  }

  Status check(DType from, DType to) const {
    if (from != DType::kString && to != DType::kString)
      return internal_error(desc_ + ": the string cast got " + dtype_name(from) + " -> " + dtype_name(to));
    for (DType t : {from, to})
      if (t != DType::kString && !dtype_supported(t))
        return unsupported_error(std::string("cannot cast between string and ") + dtype_name(t));
    return ok_status();
  }

 private:
  // Parses `s` into one element of dtype `to` at `dst`.
  Status parse(const std::string& s, DType to, void* dst, int64_t index) const {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    std::string text = s.substr(b, e - b);
    if (!text.empty() && text[0] == '+') text.erase(0, 1);
    if (to == DType::kBool) {
      const std::string l = lower(text);
      if (l == "true" || l == "false") {
        store_scalar(to, l == "true" ? 1.0 : 0.0, dst);
        return ok_status();
      }
    }
    const char* first = text.data();
    const char* last = text.data() + text.size();
    // Integers that fit keep every digit; anything else goes through double.
    if (is_integer_dtype(to)) {
      int64_t iv = 0;
      auto r = std::from_chars(first, last, iv);
      if (r.ec == std::errc() && r.ptr == last && !text.empty()) {
        if (to == DType::kInt64) {
          std::memcpy(dst, &iv, sizeof iv);
          return ok_status();
        }
        store_scalar(to, static_cast<double>(iv), dst);
        return ok_status();
      }
    }
    double v = 0;
    const std::string l = lower(text);
    if (l == "inf" || l == "-inf" || l == "nan") {
      v = l == "nan" ? NAN : l == "inf" ? INFINITY : -INFINITY;
    } else {
      const auto r = std::from_chars(first, last, v);
      if (text.empty() || r.ec != std::errc() || r.ptr != last)
        return invalid("element " + std::to_string(index) + " ('" + s.substr(0, 64) + "') is not a number");
    }
    if (is_integer_dtype(to)) v = std::trunc(v);
    store_scalar(to, v, dst);
    return ok_status();
  }

  bool like_;
  DType to_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> make_string_cast(const KernelCreateArgs& args, bool like) {
  if (!like && !args.node.has_attr("to")) return invalid_argument(args.node.describe() + ": missing attribute 'to'");
  auto k = std::make_unique<StringCastKernel>(args.node, like);
  const DType from = input_dtype(args, 0);
  const DType to = like ? input_dtype(args, 1) : static_cast<DType>(args.node.attr_int("to", 0));
  if (from != DType::kUndefined && to != DType::kUndefined) SL_RETURN_IF_ERROR(k->check(from, to));
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace streamline::ops::cpu
