// Linear quantisation: QuantizeLinear and DequantizeLinear (opset 10, per-axis from 13) and
// DynamicQuantizeLinear (opset 11).
//
//   QuantizeLinear     y = saturate(round_half_even(x / scale) + zero_point)    uint8 or int8
//   DequantizeLinear   y = (x - zero_point) * scale                              float32
//   DynamicQuantizeLinear: scale = (max(x, 0) - min(x, 0)) / 255, zero_point = round(-min / scale),
//                      then QuantizeLinear to uint8; all three outputs are produced.
// scale and zero_point are scalars (per-tensor) or 1-D of length x.shape[axis] (per-axis). The
// arithmetic is float32 as the spec's reference does it (a division, not a multiplication by the
// reciprocal), so results match it bit for bit. The loops run over [outer, axis, inner] blocks
// with the scale fixed in the innermost loop, which the compiler vectorises. Per-tensor
// quantisation is element-wise and takes its input in any layout; a QuantizeLinear that only int8
// convolutions read turns plain NCHW input into channels-last output as it goes.

#include <cmath>
#include <vector>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/quant_common.h"
#include "ops/cpu/task_runner.h"

namespace streamline::ops::cpu {
namespace {

template <typename T>
inline T saturate_to(float v) {
  constexpr float lo = std::is_same_v<T, int8_t> ? -128.f : 0.f, hi = std::is_same_v<T, int8_t> ? 127.f : 255.f;
  return static_cast<T>(static_cast<int32_t>(std::min(hi, std::max(lo, v))));
}

// [outer, len, inner] split of `s` around `axis` for per-axis parameters (len 1: per-tensor).
struct AxisSplit {
  int64_t len = 1, inner = 1;
};

template <typename TX, typename TY>
void quantize_block(const TX* x, TY* y, int64_t n, float scale, float zp) {
  for (int64_t i = 0; i < n; ++i) y[i] = saturate_to<TY>(std::rint(static_cast<float>(x[i]) / scale) + zp);
}

template <typename TX>
void dequantize_block(const TX* x, float* y, int64_t n, float scale, float zp) {
  for (int64_t i = 0; i < n; ++i) y[i] = (static_cast<float>(x[i]) - zp) * scale;
}

class QuantizeKernel final : public DataKernel {
 public:
  QuantizeKernel(const graph::Node& node, bool quantize) : DataKernel(node), quantize_(quantize) {}

  Status init(const KernelCreateArgs& a) {
    axis_ = a.node.attr_int("axis", 1);
    // A QuantizeLinear whose every reader is an int8 convolution (the input of a QDQ CNN) writes
    // channels-last itself, which saves the planner a layout change of its output.
    const graph::ValueId out = a.node.outputs.empty() ? graph::kNoValue : a.node.outputs[0];
    if (quantize_ && out != graph::kNoValue && !a.graph.is_graph_output(out)) {
      const auto& readers = a.graph.value(out).consumers;
      to_channels_last_ = !readers.empty();
      for (graph::NodeId c : readers) {
        const graph::Node& n = a.graph.node(c);
        to_channels_last_ = to_channels_last_ && n.domain == "streamline" && n.op_type == "QConv" &&
                            !n.inputs.empty() && n.inputs[0] == out;
      }
    }
    return ok_status();
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }
  bool accepts(std::span<const TensorInfo> in) const override {
    return in.size() > 1 && in[1].shape.numel() == 1 && (in.size() < 3 || in[2].shape.numel() <= 1);
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
    SL_ASSIGN_OR_RETURN(AxisSplit sp, split(in[0].shape, in[1].shape, has_zp ? &in[2].shape : nullptr));
    if (sp.len > 1 && in[0].layout != Layout::kPlain) return invalid("per-axis parameters need a plain input");
    Layout layout = in[0].layout;
    if (to_channels_last_ && sp.len == 1 && in[0].shape.rank() == 4 && layout == Layout::kPlain &&
        in[0].dtype == DType::kFloat32)
      layout = Layout::kChannelsLast;
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{out, in[0].shape, layout});
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
    if (x.layout() == Layout::kPlain && y.layout() == Layout::kChannelsLast) {
      const float z = zp ? static_cast<float>(param_value(*zp, 0)) : 0.f;
      if (y.dtype() == DType::kInt8)
        quantize_to_nhwc(x, static_cast<int8_t*>(y.raw()), sc[0], z, ctx.num_threads);
      else
        quantize_to_nhwc(x, static_cast<uint8_t*>(y.raw()), sc[0], z, ctx.num_threads);
      return ok_status();
    }
    const int64_t blocks = n / std::max<int64_t>(1, sp.inner);  // (outer, axis) pairs
    // Per-tensor: chunks of the flat tensor; per-axis: whole inner blocks per chunk.
    const int64_t unit = sp.len == 1 ? 1 : sp.inner;
    const int64_t units = sp.len == 1 ? n : blocks;
    const int64_t grain = std::max<int64_t>(1, math::kCheapGrain / unit);
    auto body = [&](auto px, auto py) {
      using TX = std::remove_cv_t<std::remove_pointer_t<decltype(px)>>;
      using TY = std::remove_pointer_t<decltype(py)>;
      const TX* xp = x.data<TX>();
      TY* yp = static_cast<TY*>(y.raw());
      run_chunks(units, grain, ctx.num_threads, [&](int64_t b, int64_t e, int) {
        for (int64_t u = b; u < e;) {
          // One run of elements sharing a scale: the rest of this chunk (per-tensor) or one block.
          const int64_t k = sp.len == 1 ? 0 : u % sp.len;
          const int64_t begin = u * unit, count = sp.len == 1 ? e - u : unit;
          const float s = sc[k], z = zp ? static_cast<float>(param_value(*zp, k)) : 0.f;
          if constexpr (std::is_same_v<TY, float>)
            dequantize_block(xp + begin, yp + begin, count, s, z);
          else
            quantize_block(xp + begin, yp + begin, count, s, z);
          u += sp.len == 1 ? count : 1;
        }
      });
    };
    const DType xt = x.dtype(), yt = y.dtype();
    if (quantize_) {
      auto with_x = [&](auto py) {
        if (xt == DType::kInt32)
          body(static_cast<const int32_t*>(nullptr), py);
        else
          body(static_cast<const float*>(nullptr), py);
      };
      if (yt == DType::kInt8)
        with_x(static_cast<int8_t*>(nullptr));
      else
        with_x(static_cast<uint8_t*>(nullptr));
    } else if (xt == DType::kInt8) {
      body(static_cast<const int8_t*>(nullptr), static_cast<float*>(nullptr));
    } else if (xt == DType::kUInt8) {
      body(static_cast<const uint8_t*>(nullptr), static_cast<float*>(nullptr));
    } else {
      body(static_cast<const int32_t*>(nullptr), static_cast<float*>(nullptr));
    }
    return ok_status();
  }

 private:
  Result<AxisSplit> split(const Shape& x, const Shape& scale, const Shape* zp) const {
    AxisSplit sp;
    if (scale.numel() == 1 && scale.rank() <= 1) {
      if (zp && zp->numel() != 1) return invalid("per-tensor scale with a per-axis zero point");
      sp.inner = std::max<int64_t>(1, x.numel());
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

  // Quantises plain NCHW float32 x into NHWC y, a run of pixels per task.
  template <typename TY>
  static void quantize_to_nhwc(const Tensor& x, TY* y, float scale, float zp, int threads) {
    const int64_t n = x.shape()[0], c = x.shape()[1], hw = x.shape()[2] * x.shape()[3];
    const float* xp = x.data<float>();
    // Blocks of pixels: each channel's run quantised into a small buffer (contiguous, vectorised),
    // then the buffers interleaved into the pixels' channel vectors.
    constexpr int64_t kBlockBytes = 4096;
    const int64_t block = std::max<int64_t>(16, kBlockBytes / std::max<int64_t>(1, c));
    const int64_t blocks_per_image = (hw + block - 1) / block;
    run_chunks(n * blocks_per_image, std::max<int64_t>(1, math::kCheapGrain / (block * c)), threads,
               [&](int64_t b, int64_t e, int) {
                 std::vector<TY> buf(static_cast<size_t>(block * c));
                 for (int64_t k = b; k < e; ++k) {
                   const int64_t img = k / blocks_per_image, p0 = (k % blocks_per_image) * block;
                   const int64_t len = std::min(block, hw - p0);
                   for (int64_t ch = 0; ch < c; ++ch)
                     quantize_block(xp + (img * c + ch) * hw + p0, buf.data() + ch * block, len, scale, zp);
                   TY* dst = y + (img * hw + p0) * c;
                   for (int64_t i = 0; i < len; ++i)
                     for (int64_t ch = 0; ch < c; ++ch) dst[i * c + ch] = buf[static_cast<size_t>(ch * block + i)];
                 }
               });
  }

  bool quantize_;
  bool to_channels_last_ = false;  // see init()
  int64_t axis_ = 1;
};

// min(0, x...) and max(0, x...) of n floats into *lo and *hi. Explicit vectors: the compiler
// does not vectorise a float min/max reduction without -ffast-math.
inline void range(const float* x, int64_t n, float* lo, float* hi) {
  int64_t i = 0;
  float l = 0.f, h = 0.f;
#if defined(__AVX512F__)
  __m512 vl = _mm512_setzero_ps(), vh = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    vl = _mm512_min_ps(vl, v);
    vh = _mm512_max_ps(vh, v);
  }
  l = _mm512_reduce_min_ps(vl);
  h = _mm512_reduce_max_ps(vh);
#elif defined(__AVX__)
  __m256 vl = _mm256_setzero_ps(), vh = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    vl = _mm256_min_ps(vl, v);
    vh = _mm256_max_ps(vh, v);
  }
  alignas(32) float bl[8], bh[8];
  _mm256_store_ps(bl, vl);
  _mm256_store_ps(bh, vh);
  for (int k = 0; k < 8; ++k) {
    l = std::min(l, bl[k]);
    h = std::max(h, bh[k]);
  }
#endif
  for (; i < n; ++i) {
    l = std::min(l, x[i]);
    h = std::max(h, x[i]);
  }
  *lo = l;
  *hi = h;
}

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
    rr.workspace_bytes = 2 * kMaxSlots * sizeof(float);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const float* xp = x.data<float>();
    const int64_t n = x.numel();
    // Pass 1: the range, per thread slot, then combined (the range always includes 0).
    auto* partial = static_cast<float*>(ctx.workspace);
    const int threads = std::min(ctx.num_threads, kMaxSlots);
    for (int c = 0; c < kMaxSlots; ++c) partial[2 * c] = partial[2 * c + 1] = 0.f;
    run_chunks(n, math::kCheapGrain, threads, [&](int64_t b, int64_t e, int slot) {
      float lo = 0.f, hi = 0.f;
      range(xp + b, e - b, &lo, &hi);
      partial[2 * slot] = std::min(partial[2 * slot], lo);
      partial[2 * slot + 1] = std::max(partial[2 * slot + 1], hi);
    });
    float lo = 0.f, hi = 0.f;
    for (int c = 0; c < kMaxSlots; ++c) {
      lo = std::min(lo, partial[2 * c]);
      hi = std::max(hi, partial[2 * c + 1]);
    }
    const float scale = (hi - lo) / 255.f;
    const float zp = scale == 0.f ? 0.f : std::nearbyint(std::min(255.f, std::max(0.f, 0.f - lo / scale)));
    // Pass 2: quantise.
    uint8_t* yp = ctx.outputs[0].data<uint8_t>();
    if (scale == 0.f) {
      std::fill(yp, yp + n, static_cast<uint8_t>(zp));
    } else {
      run_chunks(n, math::kCheapGrain, threads,
                 [&](int64_t b, int64_t e, int) { quantize_block(xp + b, yp + b, e - b, scale, zp); });
    }
    if (ctx.outputs.size() > 1 && ctx.outputs[1].defined()) ctx.outputs[1].data<float>()[0] = scale;
    if (ctx.outputs.size() > 2 && ctx.outputs[2].defined())
      ctx.outputs[2].data<uint8_t>()[0] = static_cast<uint8_t>(zp);
    return ok_status();
  }

 private:
  static constexpr int kMaxSlots = 64;  // threads whose partial ranges the workspace holds
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
