// Int8 element-wise and pooling kernels that keep quantised activations quantised between the
// int8 convolutions and matrix products (graph/pass_quant.cc makes them):
//
//   streamline.QAdd(A, a_scale, a_zp, B, b_scale, b_zp, y_scale, y_zp) -> Y
//       Y = sat(round(act(a_scale * (A - a_zp) + b_scale * (B - b_zp)) / y_scale) + y_zp); A and B
//       of one shape (no broadcasting), any layout they share; `activation` as the fused ops'.
//   streamline.QGlobalAveragePool(X, x_scale, x_zp, y_scale, y_zp) -> Y [N, C, 1, 1]
//       Y = sat(round(x_scale * (mean over H, W of X - x_zp) / y_scale) + y_zp); plain or
//       channels-last X.
//   MaxPool on uint8 / int8 (2-D, plain or channels-last): the maximum commutes with
//       dequantisation, so a DequantizeLinear -> MaxPool -> QuantizeLinear with one scale and zero
//       point is this op on the quantised tensor.
// Scales and zero points are read at run time (one value each). Loops are written for the
// compiler to vectorise along contiguous elements or channels.

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/quant_common.h"
#include "ops/cpu/task_runner.h"

namespace streamline::ops::cpu {
namespace {

template <typename T>
inline T sat_cast(float v) {
  constexpr float lo = std::is_same_v<T, int8_t> ? -128.f : 0.f, hi = std::is_same_v<T, int8_t> ? 127.f : 255.f;
  return static_cast<T>(static_cast<int32_t>(std::min(hi, std::max(lo, v))));
}

// Calls f with typed null pointers selecting the instantiation for (a, b, y) 8-bit dtypes.
template <typename F>
void dispatch3(DType a, DType b, DType y, F&& f) {
  auto with_y = [&](auto pa, auto pb) {
    if (y == DType::kInt8)
      f(pa, pb, static_cast<int8_t*>(nullptr));
    else
      f(pa, pb, static_cast<uint8_t*>(nullptr));
  };
  auto with_b = [&](auto pa) {
    if (b == DType::kInt8)
      with_y(pa, static_cast<const int8_t*>(nullptr));
    else
      with_y(pa, static_cast<const uint8_t*>(nullptr));
  };
  if (a == DType::kInt8)
    with_b(static_cast<const int8_t*>(nullptr));
  else
    with_b(static_cast<const uint8_t*>(nullptr));
}

class QAddKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    SL_ASSIGN_OR_RETURN(act_, read_activation(a.node, /*allow_gelu=*/false));
    if (!activation_scales(act_)) return unsupported_error("activation must be Relu, LeakyRelu or Clip");
    return ok_status();
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }
  bool accepts(std::span<const TensorInfo> in) const override {
    return in.size() > 3 && in[0].layout == in[3].layout && in[0].shape == in[3].shape;
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 8) return invalid("expected 8 inputs");
    for (int i : {0, 1, 3, 4, 6, 7})
      if (!in[static_cast<size_t>(i)].present()) return invalid("input " + std::to_string(i) + " is missing");
    if (!is_q8(in[0].dtype) || !is_q8(in[3].dtype) || !is_q8(in[7].dtype))
      return invalid("A, B and y_zero_point must be uint8 or int8");
    if (in[0].shape != in[3].shape) return invalid("A and B must have one shape");
    if (in[0].layout != in[3].layout) return invalid("A and B must have one layout");
    for (int i : {1, 2, 4, 5, 6, 7})
      if (in[static_cast<size_t>(i)].present() && in[static_cast<size_t>(i)].shape.numel() != 1)
        return invalid("scales and zero points must be single values");
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{in[7].dtype, in[0].shape, in[0].layout});
    r.inplace = {in[0].dtype == in[7].dtype ? 0 : in[3].dtype == in[7].dtype ? 3 : -1};
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& a = ctx.inputs[0];
    const Tensor& b = ctx.inputs[3];
    Tensor& y = ctx.outputs[0];
    const double ys = param_value(ctx.inputs[6], 0);
    const float ka = static_cast<float>(param_value(ctx.inputs[1], 0) / ys);
    const float kb = static_cast<float>(param_value(ctx.inputs[4], 0) / ys);
    const double za = ctx.inputs[2].defined() ? param_value(ctx.inputs[2], 0) : 0.0;
    const double zb = ctx.inputs[5].defined() ? param_value(ctx.inputs[5], 0) : 0.0;
    const float c = static_cast<float>(-ka * za - kb * zb);
    const float zy = static_cast<float>(param_value(ctx.inputs[7], 0));
    // The activation in the output's units: Relu is max(v, 0), Clip's bounds divided by y_scale.
    float lo = -INFINITY, hi = INFINITY, slope = 1.f;
    if (act_.kind == ActivationKind::kRelu) lo = 0.f;
    if (act_.kind == ActivationKind::kClip) {
      lo = static_cast<float>(act_.alpha / ys);
      hi = static_cast<float>(act_.beta / ys);
    }
    const bool leaky = act_.kind == ActivationKind::kLeakyRelu;
    if (leaky) slope = act_.alpha;
    const int64_t n = a.numel();
    dispatch3(a.dtype(), b.dtype(), y.dtype(), [&](auto pa, auto pb, auto py) {
      using TA = std::remove_cv_t<std::remove_pointer_t<decltype(pa)>>;
      using TB = std::remove_cv_t<std::remove_pointer_t<decltype(pb)>>;
      using TY = std::remove_pointer_t<decltype(py)>;
      const TA* ap = a.data<TA>();
      const TB* bp = b.data<TB>();
      TY* yp = y.data<TY>();
      run_chunks(n, math::kCheapGrain, ctx.num_threads, [&](int64_t s, int64_t e, int) {
        for (int64_t i = s; i < e; ++i) {
          float v = ka * static_cast<float>(ap[i]) + kb * static_cast<float>(bp[i]) + c;
          if (leaky) v = v > 0.f ? v : slope * v;
          v = std::min(hi, std::max(lo, v));
          yp[i] = sat_cast<TY>(std::rint(v) + zy);
        }
      });
    });
    return ok_status();
  }

 private:
  ActivationAttrs act_;
};

class QGlobalAveragePoolKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs&) { return ok_status(); }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }
  bool accepts(std::span<const TensorInfo> in) const override {
    return !in.empty() && in[0].layout != Layout::kBlocked8;
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 5 || !in[0].present() || !in[1].present() || !in[3].present() || !in[4].present())
      return invalid("expected X, x_scale, x_zero_point, y_scale, y_zero_point");
    if (!is_q8(in[0].dtype) || !is_q8(in[4].dtype)) return invalid("X and y_zero_point must be uint8 or int8");
    if (in[0].shape.rank() < 3) return invalid("X must have rank >= 3");
    if (in[0].layout == Layout::kBlocked8) return invalid("nChw8c input");
    Shape ys{in[0].shape[0], in[0].shape[1]};
    for (size_t d = 2; d < in[0].shape.rank(); ++d) ys.push_back(1);
    ReshapeResult r;
    // [N, C, 1, 1] has the same bytes in every layout.
    r.outputs.push_back(OutputInfo{in[4].dtype, ys, Layout::kPlain});
    r.workspace_bytes = static_cast<size_t>(in[0].shape[1]) * sizeof(int32_t) * 2;
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const int64_t n = x.shape()[0], c = x.shape()[1], hw = x.numel() / std::max<int64_t>(1, n * c);
    const double k = param_value(ctx.inputs[1], 0) / param_value(ctx.inputs[3], 0) / static_cast<double>(hw);
    const double zx = ctx.inputs[2].defined() ? param_value(ctx.inputs[2], 0) : 0.0;
    const float zy = static_cast<float>(param_value(ctx.inputs[4], 0));
    const bool cl = x.layout() == Layout::kChannelsLast;
    auto* sums = static_cast<int32_t*>(ctx.workspace);
    dispatch3(x.dtype(), x.dtype(), y.dtype(), [&](auto px, auto, auto py) {
      using TX = std::remove_cv_t<std::remove_pointer_t<decltype(px)>>;
      using TY = std::remove_pointer_t<decltype(py)>;
      const TX* xp = x.data<TX>();
      TY* yp = y.data<TY>();
      for (int64_t b = 0; b < n; ++b) {
        const TX* img = xp + b * c * hw;
        if (cl) {
          std::fill(sums, sums + c, 0);
          for (int64_t p = 0; p < hw; ++p)
            for (int64_t ch = 0; ch < c; ++ch) sums[ch] += img[p * c + ch];
        } else {
          for (int64_t ch = 0; ch < c; ++ch) {
            int32_t s = 0;
            for (int64_t p = 0; p < hw; ++p) s += img[ch * hw + p];
            sums[ch] = s;
          }
        }
        for (int64_t ch = 0; ch < c; ++ch)
          yp[b * c + ch] = sat_cast<TY>(
              std::rint(static_cast<float>(k * (static_cast<double>(sums[ch]) - zx * static_cast<double>(hw)))) + zy);
      }
    });
    return ok_status();
  }
};

// 2-D MaxPool on 8-bit data. Channels-last: one pass per output pixel over its window, each tap
// a contiguous run of C channels. Plain: per (image, channel) plane.
class QMaxPoolKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    if (a.node.outputs.size() > 1 && a.node.outputs[1] != graph::kNoValue)
      return unsupported_error("the Indices output of MaxPool is not supported");
    SL_ASSIGN_OR_RETURN(attrs_, read_pool_attrs(a.node, /*global=*/false, desc_));
    return ok_status();
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kPreferChannelsLast; }
  Layout preferred_layout(std::span<const TensorInfo>, bool) const override { return Layout::kChannelsLast; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("needs input X");
    if (!is_q8(in[0].dtype)) return unsupported_error("8-bit MaxPool needs uint8 or int8");
    if (in[0].shape.rank() != 4) return unsupported_error("8-bit MaxPool is 2-D only");
    if (in[0].layout == Layout::kBlocked8) return invalid("nChw8c input");
    SL_ASSIGN_OR_RETURN(std::vector<PoolAxis> axes, pool_axes(attrs_, in[0].shape, false, desc_));
    Shape ys{in[0].shape[0], in[0].shape[1], axes[0].out, axes[1].out};
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{in[0].dtype, ys, in[0].layout});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    SL_ASSIGN_OR_RETURN(std::vector<PoolAxis> axes, pool_axes(attrs_, x.shape(), false, desc_));
    if (x.dtype() == DType::kInt8)
      pool<int8_t>(x, ctx.outputs[0], axes, ctx.num_threads);
    else
      pool<uint8_t>(x, ctx.outputs[0], axes, ctx.num_threads);
    return ok_status();
  }

 private:
  template <typename T>
  static void pool(const Tensor& x, Tensor& y, const std::vector<PoolAxis>& ax, int threads) {
    const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
    const int64_t oh = ax[0].out, ow = ax[1].out;
    const bool cl = x.layout() == Layout::kChannelsLast;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    constexpr T lowest = std::numeric_limits<T>::lowest();
    const int64_t rows = cl ? n * oh : n * c * oh;
    run_chunks(rows, 4, threads, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t oy = r % oh;
        const int64_t y0 = oy * ax[0].s - ax[0].pad_begin;
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t x0 = ox * ax[1].s - ax[1].pad_begin;
          if (cl) {
            const int64_t b = r / oh;
            T* out = yp + ((b * oh + oy) * ow + ox) * c;
            std::fill(out, out + c, lowest);
            for (int64_t i = 0; i < ax[0].k; ++i) {
              const int64_t iy = y0 + i * ax[0].d;
              if (iy < 0 || iy >= h) continue;
              for (int64_t j = 0; j < ax[1].k; ++j) {
                const int64_t ix = x0 + j * ax[1].d;
                if (ix < 0 || ix >= w) continue;
                const T* in = xp + ((b * h + iy) * w + ix) * c;
                for (int64_t ch = 0; ch < c; ++ch) out[ch] = std::max(out[ch], in[ch]);
              }
            }
          } else {
            const int64_t plane = r / oh;
            T m = lowest;
            for (int64_t i = 0; i < ax[0].k; ++i) {
              const int64_t iy = y0 + i * ax[0].d;
              if (iy < 0 || iy >= h) continue;
              for (int64_t j = 0; j < ax[1].k; ++j) {
                const int64_t ix = x0 + j * ax[1].d;
                if (ix >= 0 && ix < w) m = std::max(m, xp[(plane * h + iy) * w + ix]);
              }
            }
            yp[(plane * oh + oy) * ow + ox] = m;
          }
        }
      }
    });
  }

  PoolAttrs attrs_;
};

}  // namespace

Status register_qelementwise(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "QAdd", 1, DType::kUndefined, make_factory<QAddKernel>(), "streamline"));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "QGlobalAveragePool", 1, DType::kUndefined,
                                   make_factory<QGlobalAveragePoolKernel>(), "streamline"));
  for (DType t : {DType::kUInt8, DType::kInt8})
    SL_RETURN_IF_ERROR(add_typed_def(reg, "MaxPool", 1, t, make_factory<QMaxPoolKernel>()));
  return ok_status();
}

}  // namespace streamline::ops::cpu
