// Linear quantisation: QuantizeLinear and DequantizeLinear (opset 10, per-axis from 13, float16
// and bfloat16 scales from 19, blocks, 16-bit integers and output_dtype from 21/23) and
// DynamicQuantizeLinear (opset 11).
//
//   QuantizeLinear     y = saturate(round_half_even(x / scale) + zero_point)    (u)int8, (u)int16,
//                      (u)int4, (u)int2; float8/float4 targets: x / scale + zero_point rounded to
//                      the format (saturate attribute, opset 19)
//   DequantizeLinear   y = (x - zero_point) * scale                              the scale's dtype
//   DynamicQuantizeLinear: scale = (max(x, 0) - min(x, 0)) / 255, zero_point = round(-min / scale),
//                      then QuantizeLinear to uint8; all three outputs are produced.
// scale and zero_point are scalars (per-tensor), 1-D of length x.shape[axis] (per-axis), or with
// block_size > 0 of x's rank with ceil(x.shape[axis] / block_size) along axis (blocked). The
// output type is the zero point's, else output_dtype, else uint8. The arithmetic is float32 as the
// spec's reference does it, so results match it bit for bit.

#include <cfenv>
#include <cmath>

#include "core/small_types.h"
#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

inline float saturate_q(float v, DType t) {
  const float lo = t == DType::kInt8 ? -128.f : 0.f, hi = t == DType::kInt8 ? 127.f : 255.f;
  return std::min(hi, std::max(lo, v));
}

// The integer range of a quantised dtype; false for dtypes QuantizeLinear cannot produce.
bool quant_range(DType t, double* lo, double* hi) {
  switch (t) {
    case DType::kUInt8:
      *lo = 0, *hi = 255;
      return true;
    case DType::kInt8:
      *lo = -128, *hi = 127;
      return true;
    case DType::kUInt16:
      *lo = 0, *hi = 65535;
      return true;
    case DType::kInt16:
      *lo = -32768, *hi = 32767;
      return true;
    default:
      if (!is_small_int(t)) return false;
      *lo = static_cast<double>(small_int_min(t));
      *hi = static_cast<double>(small_int_max(t));
      return true;
  }
}

// Where element i of x finds its scale and zero point: per tensor (len = 1), per axis (one value
// per index along `axis`), or per block of `block` indices along `axis` (opset 21).
struct ParamIndex {
  int64_t len = 1, inner = 1, block = 0, blocks = 1;
  int64_t of(int64_t i) const {
    if (len == 1 && block == 0) return 0;
    const int64_t a = (i / inner) % len;
    if (block == 0) return a;
    const int64_t outer = i / (inner * len);
    return (outer * blocks + a / block) * inner + i % inner;
  }
};

class QuantizeKernel final : public DataKernel {
 public:
  QuantizeKernel(const graph::Node& node, bool quantize) : DataKernel(node), quantize_(quantize) {}

  Status init(const KernelCreateArgs& a) {
    axis_ = a.node.attr_int("axis", 1);
    block_ = a.node.attr_int("block_size", 0);
    if (block_ < 0) return invalid("block_size must be >= 0");
    if (block_ > 0 && opset_ < 21) return invalid("block_size needs opset 21");
    output_dtype_ = static_cast<DType>(a.node.attr_int("output_dtype", 0));
    small_.saturate = a.node.attr_int("saturate", 1) != 0;
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid("expected x and scale");
    const bool has_zp = in.size() > 2 && in[2].present();
    const DType st = in[1].dtype;
    if (!is_float_dtype(st) || st == DType::kFloat64)
      return unsupported_error(std::string("scale dtype ") + dtype_name(st));
    DType out = DType::kFloat32;
    if (quantize_) {
      const DType xt = in[0].dtype;
      if (!is_float_dtype(xt) && xt != DType::kInt32)
        return unsupported_error(std::string("input dtype ") + dtype_name(xt));
      out = has_zp ? in[2].dtype : output_dtype_ != DType::kUndefined ? output_dtype_ : DType::kUInt8;
      if (has_zp && output_dtype_ != DType::kUndefined && output_dtype_ != out)
        return invalid("output_dtype differs from the zero point's dtype");
      double lo = 0, hi = 0;
      if (!quant_range(out, &lo, &hi) && !is_small_float(out))
        return unsupported_error(std::string("zero point dtype ") + dtype_name(out));
    } else {
      const DType t = in[0].dtype;
      double lo = 0, hi = 0;
      if (!quant_range(t, &lo, &hi) && t != DType::kInt32 && !is_small_float(t))
        return unsupported_error(std::string("input dtype ") + dtype_name(t));
      if (has_zp && in[2].dtype != t) return invalid("zero point dtype differs from the input's");
      out = output_dtype_ != DType::kUndefined ? output_dtype_ : st;
      if (out != st) return invalid("output_dtype differs from the scale's dtype");
    }
    SL_RETURN_IF_ERROR(index(in[0].shape, in[1].shape, has_zp ? &in[2].shape : nullptr).status());
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{out, in[0].shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& scale = ctx.inputs[1];
    const Tensor* zp = ctx.inputs.size() > 2 && ctx.inputs[2].defined() ? &ctx.inputs[2] : nullptr;
    Tensor& y = ctx.outputs[0];
    SL_ASSIGN_OR_RETURN(ParamIndex pi, index(x.shape(), scale.shape(), zp ? &zp->shape() : nullptr));
    const int64_t n = x.numel();
    const DType xt = x.dtype(), yt = y.dtype(), st = scale.dtype();
    double lo = 0, hi = 0;
    const bool to_float8 = quantize_ && is_small_float(yt);
    if (!to_float8) quant_range(yt, &lo, &hi);
    math::parallel_chunks(n, math::kCheapGrain, ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t k = pi.of(i);
        const float sc = static_cast<float>(load_f(st, scale.raw(), k));
        const float z = zp ? static_cast<float>(load_f(zp->dtype(), zp->raw(), k)) : 0.f;
        if (quantize_) {
          // float32 arithmetic, as the specification's reference computes it.
          const float v = static_cast<float>(load_f(xt, x.raw(), i));
          if (to_float8) {
            // Float targets round to their own precision (and saturate unless saturate = 0).
            static_cast<uint8_t*>(y.raw())[i] = float_to_small(yt, v / sc + z, small_);
            continue;
          }
          const double q = std::min(hi, std::max(lo, static_cast<double>(std::nearbyint(v / sc) + z)));
          store_f(yt, y.raw(), i, q);
        } else {
          const double v = load_f(xt, x.raw(), i);
          store_f(yt, y.raw(), i, static_cast<float>(v - z) * sc);
        }
      }
    });
    return ok_status();
  }

 private:
  Result<ParamIndex> index(const Shape& x, const Shape& scale, const Shape* zp) const {
    ParamIndex pi;
    if (zp && *zp != scale && !(zp->numel() == 1 && scale.numel() == 1))
      return invalid("zero point shape " + zp->to_string() + " differs from the scale's " + scale.to_string());
    if (block_ == 0 && scale.numel() == 1 && scale.rank() <= 1) return pi;
    int64_t axis = 0;
    if (!normalize_axis(axis_, static_cast<int64_t>(x.rank()), &axis)) return invalid("axis out of range");
    const size_t ax = static_cast<size_t>(axis);
    pi.len = x[ax];
    for (size_t d = ax + 1; d < x.rank(); ++d) pi.inner *= x[d];
    if (block_ == 0) {
      if (scale.rank() != 1)
        return invalid("scale must be a scalar or 1-D without block_size, got " + scale.to_string());
      if (scale[0] != x[ax])
        return invalid("scale length " + std::to_string(scale[0]) + " does not match dimension " +
                       std::to_string(axis) + " of " + x.to_string());
      return pi;
    }
    // Blocked: scale has x's rank, dimension `axis` counting blocks of block_size.
    if (scale.rank() != x.rank()) return invalid("blocked scale must have the input's rank, got " + scale.to_string());
    pi.block = block_;
    pi.blocks = (x[ax] + block_ - 1) / block_;
    for (size_t d = 0; d < x.rank(); ++d) {
      const int64_t want = d == ax ? pi.blocks : x[d];
      if (scale[d] != want)
        return invalid("blocked scale " + scale.to_string() + " does not fit " + x.to_string() + " with block_size " +
                       std::to_string(block_));
    }
    return pi;
  }

  bool quantize_;
  int64_t axis_ = 1;
  int64_t block_ = 0;
  DType output_dtype_ = DType::kUndefined;
  SmallCastOptions small_;
};

class DynamicQuantizeKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs&) { return ok_status(); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input");
    if (in[0].dtype != DType::kFloat32) return unsupported_error(std::string("input dtype ") + dtype_name(in[0].dtype));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kUInt8, in[0].shape, Layout::kPlain});
    rr.outputs.push_back(OutputInfo{DType::kFloat32, Shape{}, Layout::kPlain});
    rr.outputs.push_back(OutputInfo{DType::kUInt8, Shape{}, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const float* xp = x.data<float>();
    float lo = 0.f, hi = 0.f;
    for (int64_t i = 0; i < x.numel(); ++i) {
      lo = std::min(lo, xp[i]);
      hi = std::max(hi, xp[i]);
    }
    const float scale = (hi - lo) / 255.f;
    const float zp = scale == 0.f ? 0.f : std::nearbyint(saturate_q(0.f - lo / scale, DType::kUInt8));
    uint8_t* yp = ctx.outputs[0].data<uint8_t>();
    for (int64_t i = 0; i < x.numel(); ++i)
      yp[i] = scale == 0.f ? static_cast<uint8_t>(zp)
                           : static_cast<uint8_t>(saturate_q(std::nearbyint(xp[i] / scale) + zp, DType::kUInt8));
    if (ctx.outputs.size() > 1 && ctx.outputs[1].defined()) ctx.outputs[1].data<float>()[0] = scale;
    if (ctx.outputs.size() > 2 && ctx.outputs[2].defined())
      ctx.outputs[2].data<uint8_t>()[0] = static_cast<uint8_t>(zp);
    return ok_status();
  }
};

KernelFactory quantize_factory(bool quantize) {
  return [quantize](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<QuantizeKernel>(a.node, quantize);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

}  // namespace

Status register_quant(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "QuantizeLinear", 10, DType::kUndefined, quantize_factory(true)));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "DequantizeLinear", 10, DType::kUndefined, quantize_factory(false)));
  return add_typed_def(reg, "DynamicQuantizeLinear", 11, DType::kUndefined, make_factory<DynamicQuantizeKernel>());
}

}  // namespace streamline::ops::cpu
