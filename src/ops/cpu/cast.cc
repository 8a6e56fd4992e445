// Cast (opset 6+, `to` attribute) and CastLike (opset 15+, target dtype of input 1) between float32,
// float64, float16, bfloat16, int8..int64, uint8..uint64, bool and the small types of opsets 19 to
// 25: float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ; E8M0 from 24), float4 E2M1 (23), int4/uint4 (21),
// int2/uint2 (25).
//
// Rules: float -> integer truncates toward zero, saturates at the target's range and maps NaN to 0
// (ONNX leaves out-of-range results undefined; this choice never traps); integer -> narrower integer
// wraps modulo 2^bits; anything -> bool is x != 0; bool -> number is 0 or 1. Small types follow
// core/small_types.h: float8 rounds to nearest even and saturates unless saturate = 0 (opset 19+),
// E8M0 rounds as round_mode says (opset 24+), a float -> int4/int2 truncates and keeps the low bits
// as ONNX's reference does.

#include <cstring>
#include <type_traits>

#include "core/small_types.h"
#include "ops/cast_rules.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/math_vec.h"

namespace streamline::ops::cpu::math {
namespace {

// Storage tags for the types without a C++ arithmetic equivalent.
struct Half {
  uint16_t bits;
};
struct BHalf {
  uint16_t bits;
};
struct Bool {
  uint8_t v;
};

// Reads any element as the widest type that holds it exactly (double for floats, the integer itself).
template <typename S>
auto load(S s) {
  if constexpr (std::is_same_v<S, Half>)
    return half_to_float(s.bits);
  else if constexpr (std::is_same_v<S, BHalf>)
    return bfloat16_to_float(s.bits);
  else if constexpr (std::is_same_v<S, Bool>)
    return static_cast<uint8_t>(s.v != 0);
  else
    return s;
}

template <typename D, typename V>
D store(V v) {
  if constexpr (std::is_same_v<D, Half>)
    return Half{float_to_half(static_cast<float>(v))};
  else if constexpr (std::is_same_v<D, BHalf>)
    return BHalf{float_to_bfloat16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<D, Bool>)
    return Bool{static_cast<uint8_t>(v != V{0})};
  else
    return cast_number<D>(v);
}

template <typename S, typename D>
void cast_loop(const void* src, void* dst, int64_t n, int threads) {
  const S* s = static_cast<const S*>(src);
  D* d = static_cast<D*>(dst);
  parallel_chunks(n, kCheapGrain, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) d[i] = store<D>(load(s[i]));
  });
}

// Calls f(T{}) with T the storage type of `dt`; false for unsupported dtypes.
template <typename F>
bool dispatch_any(DType dt, F&& f) {
  switch (dt) {
    case DType::kFloat32:
      f(float{});
      return true;
    case DType::kFloat64:
      f(double{});
      return true;
    case DType::kFloat16:
      f(Half{});
      return true;
    case DType::kBFloat16:
      f(BHalf{});
      return true;
    case DType::kInt8:
      f(int8_t{});
      return true;
    case DType::kInt16:
      f(int16_t{});
      return true;
    case DType::kInt32:
      f(int32_t{});
      return true;
    case DType::kInt64:
      f(int64_t{});
      return true;
    case DType::kUInt8:
      f(uint8_t{});
      return true;
    case DType::kUInt16:
      f(uint16_t{});
      return true;
    case DType::kUInt32:
      f(uint32_t{});
      return true;
    case DType::kUInt64:
      f(uint64_t{});
      return true;
    case DType::kBool:
      f(Bool{});
      return true;
    default:
      return false;
  }
}

bool castable(DType t) {
  return dtype_supported(t) && t != DType::kString;
}

bool floating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         is_small_float(t);
}

// Casts where either side is a small type: element by element through float or int64.
void cast_small(const Tensor& x, Tensor& y, const SmallCastOptions& so, int threads) {
  const DType xt = x.dtype(), yt = y.dtype();
  const auto* xs = static_cast<const uint8_t*>(x.raw());
  parallel_chunks(x.numel(), kCheapGrain, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (is_small_type(yt)) {
        const bool from_float = floating(xt);
        y.data<uint8_t>()[i] = from_float ? float_to_small(yt, static_cast<float>(element_as_double(x, i)), so)
                                          : int_to_small(yt, element_as_int64(x, i), so);
        continue;
      }
      // x small, y a wider type.
      if (is_small_int(xt)) {
        const auto v = static_cast<int64_t>(small_to_float(xt, xs[i]));
        dispatch_any(yt, [&](auto d) { static_cast<decltype(d)*>(y.raw())[i] = store<decltype(d)>(v); });
      } else {
        const float v = small_to_float(xt, xs[i]);
        dispatch_any(yt, [&](auto d) { static_cast<decltype(d)*>(y.raw())[i] = store<decltype(d)>(v); });
      }
    }
  });
}

class CastKernel final : public Kernel {
 public:
  CastKernel(const graph::Node& node, bool like) : node_(node), like_(like) {
    to_ = static_cast<DType>(node.attr_int("to", 0));
    small_.saturate = node.attr_int("saturate", 1) != 0;
  }

  Status validate() {
    if (!like_ && !node_.has_attr("to")) return invalid_argument(node_prefix(node_) + "missing attribute 'to'");
    if (!like_ && !castable(to_))
      return unsupported(node_prefix(node_) + "cannot cast to ONNX type " + std::to_string(static_cast<int>(to_)));
    const std::string round = node_.attr_string("round_mode", "up");
    if (round == "up")
      small_.e8m0_round = E8M0Round::kUp;
    else if (round == "down")
      small_.e8m0_round = E8M0Round::kDown;
    else if (round == "nearest")
      small_.e8m0_round = E8M0Round::kNearest;
    else
      return invalid_argument(node_prefix(node_) + "unknown round_mode '" + round + "'");
    return ok_status();
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.size() != (like_ ? 2u : 1u) || !inputs[0].present())
      return invalid_argument(node_prefix(node_) + "expected " + (like_ ? "2 inputs" : "1 input"));
    const DType from = inputs[0].dtype;
    const DType to = like_ ? inputs[1].dtype : to_;
    if (!castable(from)) return unsupported(node_prefix(node_) + "cannot cast from " + dtype_name(from));
    if (!castable(to)) return unsupported(node_prefix(node_) + "cannot cast to " + dtype_name(to));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{to, inputs[0].shape, inputs[0].layout});
    rr.inplace = {from == to ? 0 : -1};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    if (x.dtype() == y.dtype()) {
      if (x.raw() != y.raw()) std::memcpy(y.raw(), x.raw(), x.nbytes());
      return ok_status();
    }
    if (x.dtype() == DType::kFloat16 && y.dtype() == DType::kFloat32) {
      parallel_chunks(x.numel(), kCheapGrain, ctx.num_threads, [&](int64_t b, int64_t e) {
        vec::half_to_float_array(x.data<uint16_t>() + b, y.data<float>() + b, e - b);
      });
      return ok_status();
    }
    if (x.dtype() == DType::kFloat32 && y.dtype() == DType::kFloat16) {
      parallel_chunks(x.numel(), kCheapGrain, ctx.num_threads, [&](int64_t b, int64_t e) {
        vec::float_to_half_array(x.data<float>() + b, y.data<uint16_t>() + b, e - b);
      });
      return ok_status();
    }
    if (is_small_type(x.dtype()) || is_small_type(y.dtype())) {
      cast_small(x, y, small_, ctx.num_threads);
      return ok_status();
    }
    bool ok = false;
    dispatch_any(x.dtype(), [&](auto s) {
      ok = dispatch_any(y.dtype(), [&](auto d) {
        cast_loop<decltype(s), decltype(d)>(x.raw(), y.raw(), x.numel(), ctx.num_threads);
      });
    });
    return ok ? ok_status()
              : internal_error(node_prefix(node_) + "no conversion from " + dtype_name(x.dtype()) + " to " +
                               dtype_name(y.dtype()));
  }

 private:
  graph::Node node_;
  bool like_;
  DType to_ = DType::kUndefined;
  SmallCastOptions small_;
};

KernelFactory cast_factory(bool like) {
  return [like](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<CastKernel>(args.node, like);
    SL_RETURN_IF_ERROR(k->validate());
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

}  // namespace

}  // namespace streamline::ops::cpu::math

namespace streamline::ops::cpu {

Status register_cast(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(math::register_ops(reg, {"Cast"}, 6, INT_MAX, math::cast_factory(false)));
  return math::register_ops(reg, {"CastLike"}, 15, INT_MAX, math::cast_factory(true));
}

}  // namespace streamline::ops::cpu
