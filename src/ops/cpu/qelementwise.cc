// Int8 element-wise and pooling kernels that keep quantised activations quantised between the
// int8 convolutions and matrix products (graph/pass_quant.cc makes them):
//
//   streamline.QAdd(A, a_scale, a_zp, B, b_scale, b_zp, y_scale, y_zp) -> Y
//       Y = sat(round(act(a_scale * (A - a_zp) + b_scale * (B - b_zp)) / y_scale) + y_zp); B of
//       A's shape, one value, or [N or 1, C, 1, 1] against a 4-D A; any layout they share;
//       `activation` Relu, LeakyRelu or Clip.
//   streamline.QMul(...)  the same with a_scale * b_scale * (A - a_zp) * (B - b_zp).
//   streamline.QLookup(X, table) -> Y   a 256-entry table per code of X (see QLookupKernel).
//   streamline.QScaleShift(...)        a per-channel affine map, BatchNormalization's (see its kernel).
//   streamline.QAveragePool(X, x_scale, x_zp, y_scale, y_zp)   AveragePool on the quantised tensor.
//   streamline.QGlobalAveragePool(X, x_scale, x_zp, y_scale, y_zp) -> Y [N, C, 1, 1]
//       Y = sat(round(x_scale * (mean over H, W of X - x_zp) / y_scale) + y_zp); plain or
//       channels-last X.
//   MaxPool on uint8 / int8 (2-D, plain or channels-last): the maximum commutes with
//       dequantisation, so a DequantizeLinear -> MaxPool -> QuantizeLinear with one scale and zero
//       point is this op on the quantised tensor. 8-bit MaxPools of other ranks, or asking for
//       Indices, run on the direct loops of pool_direct.cc.
// Scales and zero points are read at run time (one value each). Loops are written for the
// compiler to vectorise along contiguous elements or channels.

#include <algorithm>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#include <cmath>
#include <vector>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/pool_direct.h"
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

// How B lines up with A in QAdd / QMul.
enum class Broadcast {
  kSame,     // B has A's shape
  kScalar,   // one B value
  kChannel,  // A [N, C, H, W], B [N or 1, C, 1, 1]: one B value per (image, channel)
};

Result<Broadcast> broadcast_of(const Shape& a, const Shape& b) {
  if (a == b) return Broadcast::kSame;
  if (b.numel() == 1 && b.rank() <= a.rank()) return Broadcast::kScalar;
  if (a.rank() == 4 && b.rank() == 4 && (b[0] == a[0] || b[0] == 1) && b[1] == a[1] && b[2] == 1 && b[3] == 1)
    return Broadcast::kChannel;
  return invalid_argument("B " + b.to_string() + " must have A's shape " + a.to_string() +
                          ", be one value, or be [N or 1, C, 1, 1]");
}

// The per-element arithmetic of QAdd / QMul (see QBinaryKernel::run).
struct RowParams {
  float za, zb, ka, kb, zy, lo, hi, slope;
  bool leaky, mul;
};

// One row of `n` outputs; B advances with A (B_STEP) or stays at its first element. Parameters
// arrive by value and live in locals: 8-bit stores may alias anything in memory, which would
// otherwise reload them every iteration and keep the loop scalar.
template <bool B_STEP, typename TA, typename TB, typename TY>
void binary_row(const TA* a, const TB* b, TY* y, int64_t n, RowParams p) {
  const float za = p.za, zb = p.zb, ka = p.ka, kb = p.kb, zy = p.zy, lo = p.lo, hi = p.hi, slope = p.slope;
  const float b0 = static_cast<float>(b[0]) - zb;
  if (p.mul) {
    for (int64_t i = 0; i < n; ++i) {
      const float bv = B_STEP ? static_cast<float>(b[i]) - zb : b0;
      float v = ka * (static_cast<float>(a[i]) - za) * bv;
      if (p.leaky) v = v > 0.f ? v : slope * v;
      y[i] = sat_cast<TY>(std::rint(std::min(hi, std::max(lo, v))) + zy);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float bv = B_STEP ? static_cast<float>(b[i]) - zb : b0;
      float v = ka * (static_cast<float>(a[i]) - za) + kb * bv;
      if (p.leaky) v = v > 0.f ? v : slope * v;
      y[i] = sat_cast<TY>(std::rint(std::min(hi, std::max(lo, v))) + zy);
    }
  }
}

// streamline.QAdd and streamline.QMul.
class QBinaryKernel final : public DataKernel {
 public:
  QBinaryKernel(const graph::Node& node, bool mul) : DataKernel(node), mul_(mul) {}
  Status init(const KernelCreateArgs& a) {
    SL_ASSIGN_OR_RETURN(act_, read_activation(a.node, /*allow_gelu=*/false));
    if (!activation_scales(act_)) return unsupported_error("activation must be Relu, LeakyRelu or Clip");
    return ok_status();
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }
  bool accepts(std::span<const TensorInfo> in) const override {
    return in.size() > 3 && in[0].layout == in[3].layout && broadcast_of(in[0].shape, in[3].shape).ok();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 8) return invalid("expected 8 inputs");
    for (int i : {0, 1, 3, 4, 6, 7})
      if (!in[static_cast<size_t>(i)].present()) return invalid("input " + std::to_string(i) + " is missing");
    if (!is_q8(in[0].dtype) || !is_q8(in[3].dtype) || !is_q8(in[7].dtype))
      return invalid("A, B and y_zero_point must be uint8 or int8");
    auto bc = broadcast_of(in[0].shape, in[3].shape);
    if (!bc.ok()) return invalid(bc.status().message());
    if (*bc == Broadcast::kSame && in[0].layout != in[3].layout) return invalid("A and B must have one layout");
    if (in[0].layout == Layout::kBlocked8) return invalid("nChw8c input");
    for (int i : {1, 2, 4, 5, 6, 7})
      if (in[static_cast<size_t>(i)].present() && in[static_cast<size_t>(i)].shape.numel() != 1)
        return invalid("scales and zero points must be single values");
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{in[7].dtype, in[0].shape, in[0].layout});
    r.inplace = {in[0].dtype == in[7].dtype ? 0 : -1};
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& a = ctx.inputs[0];
    const Tensor& b = ctx.inputs[3];
    Tensor& y = ctx.outputs[0];
    SL_ASSIGN_OR_RETURN(Broadcast bc, broadcast_of(a.shape(), b.shape()));
    const double ys = param_value(ctx.inputs[6], 0), sa = param_value(ctx.inputs[1], 0);
    const double sb = param_value(ctx.inputs[4], 0);
    const float za = ctx.inputs[2].defined() ? static_cast<float>(param_value(ctx.inputs[2], 0)) : 0.f;
    const float zb = ctx.inputs[5].defined() ? static_cast<float>(param_value(ctx.inputs[5], 0)) : 0.f;
    // Add: v = ka * (a - za) + kb * (b - zb); Mul: v = k * (a - za) * (b - zb); in y's units.
    const float ka = static_cast<float>(mul_ ? sa * sb / ys : sa / ys), kb = static_cast<float>(sb / ys);
    const float zy = static_cast<float>(param_value(ctx.inputs[7], 0));
    // The activation in the output's units: Relu is max(v, 0), Clip's bounds divided by y_scale.
    float lo = -INFINITY, hi = INFINITY;
    if (act_.kind == ActivationKind::kRelu) lo = 0.f;
    if (act_.kind == ActivationKind::kClip) {
      lo = static_cast<float>(act_.alpha / ys);
      hi = static_cast<float>(act_.beta / ys);
    }
    const bool leaky = act_.kind == ActivationKind::kLeakyRelu;
    const float slope = leaky ? act_.alpha : 1.f;
    const RowParams q{za, zb, ka, kb, zy, lo, hi, slope, leaky, mul_};
    // Rows of `inner` elements sharing one B row (kSame: B advances with A; else B fixed per row).
    const Shape& s = a.shape();
    const bool cl = a.layout() == Layout::kChannelsLast;
    const int64_t n = a.numel();
    int64_t inner = n, b_step = 1;  // b_step: B elements per A element within a row (0 or 1)
    if (bc == Broadcast::kScalar) b_step = 0;
    if (bc == Broadcast::kChannel) {
      inner = cl ? s[1] : s[2] * s[3];
      b_step = cl ? 1 : 0;
    }
    const int64_t rows = n / std::max<int64_t>(1, inner);
    const int64_t hw = s.rank() == 4 ? s[2] * s[3] : 1, c = s.rank() >= 2 ? s[1] : 1;
    const bool b_images = b.shape().rank() == 4 && b.shape()[0] > 1;
    // Offset of row r's first B element.
    auto b_row = [&](int64_t r) -> int64_t {
      if (bc == Broadcast::kSame) return r * inner;
      if (bc == Broadcast::kScalar) return 0;
      const int64_t img = cl ? r / hw : r / c;
      return (b_images ? img * c : 0) + (cl ? 0 : r % c);
    };
    dispatch3(a.dtype(), b.dtype(), y.dtype(), [&](auto pa, auto pb, auto py) {
      using TA = std::remove_cv_t<std::remove_pointer_t<decltype(pa)>>;
      using TB = std::remove_cv_t<std::remove_pointer_t<decltype(pb)>>;
      using TY = std::remove_pointer_t<decltype(py)>;
      const TA* ap = a.data<TA>();
      const TB* bp = b.data<TB>();
      TY* yp = y.data<TY>();
      const int64_t grain = std::max<int64_t>(1, math::kCheapGrain / inner);
      // One row: B advancing with A (step 1) or fixed (step 0); separate loops so each vectorises.
      run_chunks(rows, grain, ctx.num_threads, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
          const TB* br = bp + b_row(r);
          if (b_step == 1)
            binary_row<true>(ap + r * inner, br, yp + r * inner, inner, q);
          else
            binary_row<false>(ap + r * inner, br, yp + r * inner, inner, q);
        }
      });
    });
    return ok_status();
  }

 private:
  bool mul_;
  ActivationAttrs act_;
};

// streamline.QLookup(X, table): Y = table[X] for uint8 X, table[X + 128] for int8 X; `table` is
// 256 values of Y's type. Any element-wise function of one 8-bit tensor, evaluated at load for
// all 256 codes (graph/pass_quant_lookup.cc).
class QLookupKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs&) { return ok_status(); }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid("expected X and table");
    if (!is_q8(in[0].dtype) || !is_q8(in[1].dtype)) return invalid("X and table must be uint8 or int8");
    if (in[1].shape.numel() != 256) return invalid("table must have 256 values, got " + in[1].shape.to_string());
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{in[1].dtype, in[0].shape, in[0].layout});
    r.inplace = {0};
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const auto* t = static_cast<const uint8_t*>(ctx.inputs[1].raw());
    const auto* xp = static_cast<const uint8_t*>(x.raw());
    auto* yp = static_cast<uint8_t*>(ctx.outputs[0].raw());
    // int8 codes index from 128: flipping the sign bit turns them into that index.
    const uint8_t flip = x.dtype() == DType::kInt8 ? 0x80 : 0;
    run_chunks(x.numel(), math::kCheapGrain, ctx.num_threads,
               [&](int64_t b, int64_t e, int) { lookup(xp + b, yp + b, e - b, t, flip); });
    return ok_status();
  }

 private:
  // y[i] = t[x[i] ^ flip]. With AVX-512 VBMI, 64 codes at a time: two 128-entry permutes (each
  // across two registers of the table) and the code's top bit choosing between them.
  static void lookup(const uint8_t* x, uint8_t* y, int64_t n, const uint8_t* t, uint8_t flip) {
    int64_t i = 0;
#if defined(__AVX512VBMI__) && defined(__AVX512BW__)
    const __m512i t0 = _mm512_loadu_si512(t), t1 = _mm512_loadu_si512(t + 64);
    const __m512i t2 = _mm512_loadu_si512(t + 128), t3 = _mm512_loadu_si512(t + 192);
    const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
    for (; i + 64 <= n; i += 64) {
      const __m512i idx = _mm512_xor_si512(_mm512_loadu_si512(x + i), f);
      const __m512i lo = _mm512_permutex2var_epi8(t0, idx, t1), hi = _mm512_permutex2var_epi8(t2, idx, t3);
      _mm512_storeu_si512(y + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi));
    }
#endif
    for (; i < n; ++i) y[i] = t[x[i] ^ flip];
  }
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
    // [N, C, 1, 1] has the same bytes in every layout; keeping the input's lets a channels-last
    // squeeze-and-excite branch stay channels-last without layout changes.
    r.outputs.push_back(OutputInfo{in[4].dtype, ys, in[0].shape.rank() == 4 ? in[0].layout : Layout::kPlain});
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

// streamline.QAveragePool(X, x_scale, x_zp, y_scale, y_zp) -> Y with AveragePool's attributes
// (2-D, plain or channels-last): Y = sat(round(x_scale / y_scale * mean(X - x_zp)) + y_zp), the
// mean over the taps inside the input, or with count_include_pad over those inside the padded
// input (the padding holds real zeros, code x_zp).
class QAveragePoolKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    graph::Node pool = a.node;  // the attributes checker expects AveragePool's single input
    pool.inputs.resize(1);
    SL_ASSIGN_OR_RETURN(attrs_, read_pool_attrs(pool, /*global=*/false, desc_));
    return ok_status();
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kPreferChannelsLast; }
  Layout preferred_layout(std::span<const TensorInfo>, int) const override { return Layout::kChannelsLast; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 5 || !in[0].present() || !in[1].present() || !in[3].present() || !in[4].present())
      return invalid("expected X, x_scale, x_zero_point, y_scale, y_zero_point");
    if (!is_q8(in[0].dtype) || !is_q8(in[4].dtype)) return invalid("X and y_zero_point must be uint8 or int8");
    if (in[0].shape.rank() != 4) return unsupported_error("8-bit AveragePool is 2-D only");
    if (in[0].layout == Layout::kBlocked8) return invalid("nChw8c input");
    SL_ASSIGN_OR_RETURN(std::vector<PoolAxis> axes, pool_axes(attrs_, in[0].shape, false, desc_));
    ReshapeResult r;
    r.outputs.push_back(
        OutputInfo{in[4].dtype, Shape{in[0].shape[0], in[0].shape[1], axes[0].out, axes[1].out}, in[0].layout});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    SL_ASSIGN_OR_RETURN(std::vector<PoolAxis> ax, pool_axes(attrs_, x.shape(), false, desc_));
    const float k = static_cast<float>(param_value(ctx.inputs[1], 0) / param_value(ctx.inputs[3], 0));
    const int32_t zx = ctx.inputs[2].defined() ? static_cast<int32_t>(param_value(ctx.inputs[2], 0)) : 0;
    const float zy = static_cast<float>(param_value(ctx.inputs[4], 0));
    const int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
    const int64_t oh = ax[0].out, ow = ax[1].out;
    const bool cl = x.layout() == Layout::kChannelsLast, include_pad = attrs_.count_include_pad;
    dispatch3(x.dtype(), x.dtype(), y.dtype(), [&](auto px, auto, auto py) {
      using TX = std::remove_cv_t<std::remove_pointer_t<decltype(px)>>;
      using TY = std::remove_pointer_t<decltype(py)>;
      const TX* xp = x.data<TX>();
      TY* yp = y.data<TY>();
      run_chunks(n * oh, 1, ctx.num_threads, [&](int64_t r0, int64_t r1, int) {
        thread_local std::vector<int32_t> acc;
        acc.resize(static_cast<size_t>(cl ? c : 1));
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t b = r / oh, oy = r % oh;
          for (int64_t ox = 0; ox < ow; ++ox) {
            // The window: taps inside the input, and the count the mean divides by.
            const int64_t y0 = oy * ax[0].s - ax[0].pad_begin, x0 = ox * ax[1].s - ax[1].pad_begin;
            int64_t inside = 0, padded = 0;
            for (int64_t i = 0; i < ax[0].k; ++i)
              for (int64_t j = 0; j < ax[1].k; ++j) {
                const int64_t iy = y0 + i * ax[0].d, ix = x0 + j * ax[1].d;
                padded += iy < h + ax[0].pad_end && ix < w + ax[1].pad_end;
                inside += iy >= 0 && iy < h && ix >= 0 && ix < w;
              }
            const float scale = k / static_cast<float>(std::max<int64_t>(1, include_pad ? padded : inside));
            const int32_t bias = -zx * static_cast<int32_t>(inside);
            for (int64_t ch = 0; ch < (cl ? 1 : c); ++ch) {
              std::fill(acc.begin(), acc.end(), bias);
              for (int64_t i = 0; i < ax[0].k; ++i) {
                const int64_t iy = y0 + i * ax[0].d;
                if (iy < 0 || iy >= h) continue;
                for (int64_t j = 0; j < ax[1].k; ++j) {
                  const int64_t ix = x0 + j * ax[1].d;
                  if (ix < 0 || ix >= w) continue;
                  if (cl)
                    add_into(acc.data(), xp + ((b * h + iy) * w + ix) * c, c);
                  else
                    acc[0] += xp[((b * c + ch) * h + iy) * w + ix];
                }
              }
              TY* out = cl ? yp + ((b * oh + oy) * ow + ox) * c : yp + ((b * c + ch) * oh + oy) * ow + ox;
              for (size_t q = 0; q < acc.size(); ++q)
                out[q] = sat_cast<TY>(std::rint(scale * static_cast<float>(acc[q])) + zy);
            }
          }
        }
      });
    });
    return ok_status();
  }

 private:
  template <typename T>
  static void add_into(int32_t* __restrict acc, const T* __restrict x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
  }

  PoolAttrs attrs_;
};

// out[i] = max(out[i], in[i]); a separate function with restrict pointers so it vectorises.
template <typename T>
void max_into(T* __restrict out, const T* __restrict in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::max(out[i], in[i]);
}

// streamline.QScaleShift(X, x_scale, x_zp, scale, shift, y_scale, y_zp) -> Y: per channel c (axis 1)
// Y = sat(round(act(scale[c] * x_scale * (X - x_zp) + shift[c]) / y_scale) + y_zp), an inference
// BatchNormalization on the quantised tensor. Plain or channels-last X of rank >= 2.
class QScaleShiftKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    SL_ASSIGN_OR_RETURN(act_, read_activation(a.node, /*allow_gelu=*/false));
    if (!activation_scales(act_)) return unsupported_error("activation must be Relu, LeakyRelu or Clip");
    return ok_status();
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }
  bool accepts(std::span<const TensorInfo> in) const override {
    return !in.empty() && in[0].layout != Layout::kBlocked8;
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 7 || !in[0].present() || !in[1].present() || !in[3].present() || !in[4].present() ||
        !in[5].present() || !in[6].present())
      return invalid("expected X, x_scale, x_zero_point, scale, shift, y_scale, y_zero_point");
    if (!is_q8(in[0].dtype) || !is_q8(in[6].dtype)) return invalid("X and y_zero_point must be uint8 or int8");
    if (in[0].shape.rank() < 2 || in[3].shape.numel() != in[0].shape[1] || in[4].shape.numel() != in[0].shape[1])
      return invalid("scale and shift need one value per channel of " + in[0].shape.to_string());
    if (in[3].dtype != DType::kFloat32 || in[4].dtype != DType::kFloat32)
      return invalid("scale and shift must be float32");
    if (in[0].layout == Layout::kBlocked8) return invalid("nChw8c input");
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{in[6].dtype, in[0].shape, in[0].layout});
    r.inplace = {in[0].dtype == in[6].dtype ? 0 : -1};
    // Per channel, in y's units: v = a[c] * x + b[c].
    r.workspace_bytes = 2 * static_cast<size_t>(in[0].shape[1]) * sizeof(float);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const int64_t c = x.shape()[1], n = x.numel();
    const double ys = param_value(ctx.inputs[5], 0), xs = param_value(ctx.inputs[1], 0);
    const double zx = ctx.inputs[2].defined() ? param_value(ctx.inputs[2], 0) : 0.0;
    auto* a = static_cast<float*>(ctx.workspace);
    float* b = a + c;
    for (int64_t k = 0; k < c; ++k) {
      const double sc = ctx.inputs[3].data<float>()[k], sh = ctx.inputs[4].data<float>()[k];
      a[k] = static_cast<float>(sc * xs / ys);
      b[k] = static_cast<float>((sh - sc * xs * zx) / ys);
    }
    RowParams p{0.f,
                0.f,
                0.f,
                0.f,
                static_cast<float>(param_value(ctx.inputs[6], 0)),
                -INFINITY,
                INFINITY,
                1.f,
                act_.kind == ActivationKind::kLeakyRelu,
                false};
    if (act_.kind == ActivationKind::kRelu) p.lo = 0.f;
    if (act_.kind == ActivationKind::kClip) {
      p.lo = static_cast<float>(act_.alpha / ys);
      p.hi = static_cast<float>(act_.beta / ys);
    }
    if (p.leaky) p.slope = act_.alpha;
    const bool cl = x.layout() == Layout::kChannelsLast;
    // Rows: a pixel's channels (channels-last, a[] and b[] advance) or a channel's plane (plain).
    const int64_t inner = cl ? c : n / (x.shape()[0] * c);
    const int64_t rows = n / std::max<int64_t>(1, inner);
    dispatch3(x.dtype(), x.dtype(), y.dtype(), [&](auto px, auto, auto py) {
      using TX = std::remove_cv_t<std::remove_pointer_t<decltype(px)>>;
      using TY = std::remove_pointer_t<decltype(py)>;
      const TX* xp = x.data<TX>();
      TY* yp = y.data<TY>();
      run_chunks(rows, std::max<int64_t>(1, math::kCheapGrain / std::max<int64_t>(1, inner)), ctx.num_threads,
                 [&](int64_t r0, int64_t r1, int) {
                   for (int64_t r = r0; r < r1; ++r) {
                     if (cl)
                       affine_row<true>(xp + r * inner, a, b, yp + r * inner, inner, p);
                     else
                       affine_row<false>(xp + r * inner, a + r % c, b + r % c, yp + r * inner, inner, p);
                   }
                 });
    });
    return ok_status();
  }

 private:
  // y[i] = sat(rint(clamp(act(a * x[i] + b))) + zy), a and b per element (STEP) or fixed; see
  // binary_row for why the parameters come by value.
  template <bool STEP, typename TX, typename TY>
  static void affine_row(const TX* x, const float* a, const float* b, TY* y, int64_t n, RowParams p) {
    const float zy = p.zy, lo = p.lo, hi = p.hi, slope = p.slope, a0 = a[0], b0 = b[0];
    for (int64_t i = 0; i < n; ++i) {
      float v = (STEP ? a[i] : a0) * static_cast<float>(x[i]) + (STEP ? b[i] : b0);
      if (p.leaky) v = v > 0.f ? v : slope * v;
      y[i] = sat_cast<TY>(std::rint(std::min(hi, std::max(lo, v))) + zy);
    }
  }

  ActivationAttrs act_;
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
  Layout preferred_layout(std::span<const TensorInfo>, int) const override { return Layout::kChannelsLast; }

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
                max_into(out, xp + ((b * h + iy) * w + ix) * c, c);
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
  for (const bool mul : {false, true}) {
    KernelFactory f = [mul](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
      auto k = std::make_unique<QBinaryKernel>(a.node, mul);
      SL_RETURN_IF_ERROR(k->init(a));
      return std::unique_ptr<Kernel>(std::move(k));
    };
    SL_RETURN_IF_ERROR(add_typed_def(reg, mul ? "QMul" : "QAdd", 1, DType::kUndefined, f, "streamline"));
  }
  SL_RETURN_IF_ERROR(add_typed_def(reg, "QLookup", 1, DType::kUndefined, make_factory<QLookupKernel>(), "streamline"));
  SL_RETURN_IF_ERROR(
      add_typed_def(reg, "QScaleShift", 1, DType::kUndefined, make_factory<QScaleShiftKernel>(), "streamline"));
  SL_RETURN_IF_ERROR(
      add_typed_def(reg, "QAveragePool", 1, DType::kUndefined, make_factory<QAveragePoolKernel>(), "streamline"));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "QGlobalAveragePool", 1, DType::kUndefined,
                                   make_factory<QGlobalAveragePoolKernel>(), "streamline"));
  // 8-bit MaxPool exists from opset 12. QMaxPoolKernel serves the 2-D pools without Indices.
  const KernelFactory max_pool = [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    const bool indices = a.node.outputs.size() > 1 && a.node.outputs[1] != graph::kNoValue;
    if (indices || a.node.attr_ints("kernel_shape").size() != 2) return make_direct_pool(a);
    return make_factory<QMaxPoolKernel>()(a);
  };
  for (DType t : {DType::kUInt8, DType::kInt8}) SL_RETURN_IF_ERROR(add_typed_def(reg, "MaxPool", 12, t, max_pool));
  return ok_status();
}

}  // namespace streamline::ops::cpu
