// Linear quantisation: QuantizeLinear and DequantizeLinear (opset 10, per-axis from 13) and
// DynamicQuantizeLinear (opset 11).
//
//   QuantizeLinear     y = saturate(round_half_even(x / scale) + zero_point)    uint8 or int8
//   DequantizeLinear   y = (x - zero_point) * scale                              float32
//   DynamicQuantizeLinear: scale = (max(x, 0) - min(x, 0)) / 255, zero_point = round(-min / scale),
//                      then QuantizeLinear to uint8; all three outputs are produced.
// scale and zero_point are scalars (per-tensor) or 1-D of length x.shape[axis] (per-axis). The
// arithmetic is float32 as the spec's reference does it, so results match it bit for bit.

#include <cfenv>
#include <cmath>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

inline float saturate_q(float v, DType t) {
  const float lo = t == DType::kInt8 ? -128.f : 0.f, hi = t == DType::kInt8 ? 127.f : 255.f;
  return std::min(hi, std::max(lo, v));
}

// [outer, axis, inner] split of `s` around `axis` for per-axis parameters.
struct AxisSplit {
  int64_t len = 1, inner = 1;
};

class QuantizeKernel final : public DataKernel {
 public:
  QuantizeKernel(const graph::Node& node, bool quantize) : DataKernel(node), quantize_(quantize) {}

  Status init(const KernelCreateArgs& a) {
    axis_ = a.node.attr_int("axis", 1);
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid("expected x and scale");
    const bool has_zp = in.size() > 2 && in[2].present();
    if (in[1].dtype != DType::kFloat32) return unsupported_error("scale must be float32");
    DType out = DType::kFloat32;
    if (quantize_) {
      if (in[0].dtype != DType::kFloat32 && in[0].dtype != DType::kInt32)
        return unsupported_error(std::string("input dtype ") + dtype_name(in[0].dtype));
      out = has_zp ? in[2].dtype : DType::kUInt8;
      if (out != DType::kUInt8 && out != DType::kInt8)
        return unsupported_error(std::string("zero point dtype ") + dtype_name(out));
    } else {
      const DType t = in[0].dtype;
      if (t != DType::kUInt8 && t != DType::kInt8 && t != DType::kInt32)
        return unsupported_error(std::string("input dtype ") + dtype_name(t));
      if (has_zp && in[2].dtype != t) return invalid("zero point dtype differs from the input's");
    }
    SL_RETURN_IF_ERROR(split(in[0].shape, in[1].shape, has_zp ? &in[2].shape : nullptr).status());
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{out, in[0].shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& scale = ctx.inputs[1];
    const Tensor* zp = ctx.inputs.size() > 2 && ctx.inputs[2].defined() ? &ctx.inputs[2] : nullptr;
    Tensor& y = ctx.outputs[0];
    SL_ASSIGN_OR_RETURN(AxisSplit sp, split(x.shape(), scale.shape(), zp ? &zp->shape() : nullptr));
    const float* sc = scale.data<float>();
    const int64_t n = x.numel();
    const DType xt = x.dtype(), yt = y.dtype();
    math::parallel_chunks(n, math::kCheapGrain, ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t k = sp.len == 1 ? 0 : (i / sp.inner) % sp.len;
        const float z = zp ? static_cast<float>(load_f(zp->dtype(), zp->raw(), k)) : 0.f;
        if (quantize_) {
          const float v = xt == DType::kFloat32 ? x.data<float>()[i] : static_cast<float>(x.data<int32_t>()[i]);
          const float q = saturate_q(std::nearbyint(v / sc[k]) + z, yt);
          if (yt == DType::kInt8)
            y.data<int8_t>()[i] = static_cast<int8_t>(q);
          else
            y.data<uint8_t>()[i] = static_cast<uint8_t>(q);
        } else {
          const double v = load_f(xt, x.raw(), i);
          y.data<float>()[i] = static_cast<float>(v - z) * sc[k];
        }
      }
    });
    return ok_status();
  }

 private:
  Result<AxisSplit> split(const Shape& x, const Shape& scale, const Shape* zp) const {
    AxisSplit sp;
    if (scale.numel() == 1 && scale.rank() <= 1) {
      if (zp && zp->numel() != 1) return invalid("per-tensor scale with a per-axis zero point");
      return sp;
    }
    if (scale.rank() != 1) return invalid("scale must be a scalar or 1-D, got " + scale.to_string());
    int64_t axis = 0;
    if (!normalize_axis(axis_, static_cast<int64_t>(x.rank()), &axis)) return invalid("axis out of range");
    if (x[static_cast<size_t>(axis)] != scale[0])
      return invalid("scale length " + std::to_string(scale[0]) + " does not match dimension " + std::to_string(axis) +
                     " of " + x.to_string());
    if (zp && *zp != scale) return invalid("zero point shape differs from the scale's");
    sp.len = scale[0];
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) sp.inner *= x[d];
    return sp;
  }

  bool quantize_;
  int64_t axis_ = 1;
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
