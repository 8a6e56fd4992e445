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
// spec's reference does it (a division, not a multiplication by the reciprocal), so results match
// it bit for bit.
//
// The int8 case (float32 scale, float32 -> (u)int8 or (u)int8 -> float32, per tensor or per axis)
// runs typed loops over [outer, axis, inner] blocks with the scale fixed in the innermost loop,
// which the compiler vectorises; every other case runs one generic loop over load_f/store_f.
// Per-tensor quantisation is element-wise and takes its input in any layout; a QuantizeLinear that
// only int8 convolutions read turns plain NCHW input into channels-last output as it goes.

#include <cmath>
#include <vector>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "core/small_types.h"
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
    block_ = a.node.attr_int("block_size", 0);
    if (block_ < 0) return invalid("block_size must be >= 0");
    if (block_ > 0 && opset_ < 21) return invalid("block_size needs opset 21");
    output_dtype_ = static_cast<DType>(a.node.attr_int("output_dtype", 0));
    small_.saturate = a.node.attr_int("saturate", 1) != 0;
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
  // Per-tensor parameters only: then every element is converted alike, whatever the layout.
  bool accepts(std::span<const TensorInfo> in) const override {
    return block_ == 0 && in.size() > 1 && in[1].shape.numel() == 1 && (in.size() < 3 || in[2].shape.numel() <= 1);
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
    SL_ASSIGN_OR_RETURN(ParamIndex pi, index(in[0].shape, in[1].shape, has_zp ? &in[2].shape : nullptr));
    const bool per_tensor = pi.len == 1 && pi.block == 0;
    if (!per_tensor && in[0].layout != Layout::kPlain)
      return invalid("per-axis and blocked parameters need a plain input");
    Layout layout = in[0].layout;
    if (to_channels_last_ && per_tensor && in[0].shape.rank() == 4 && layout == Layout::kPlain &&
        int8_case(in[0].dtype, out, st))
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
    SL_ASSIGN_OR_RETURN(ParamIndex pi, index(x.shape(), scale.shape(), zp ? &zp->shape() : nullptr));
    if (pi.block == 0 && int8_case(x.dtype(), y.dtype(), scale.dtype())) return run_int8(ctx, pi);
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
  // The types the typed loops of run_int8 serve: float32 scale, and float32 -> (u)int8 when
  // quantising, (u)int8 -> float32 when dequantising.
  bool int8_case(DType x, DType y, DType scale) const {
    if (scale != DType::kFloat32) return false;
    return quantize_ ? x == DType::kFloat32 && is_q8(y) : is_q8(x) && y == DType::kFloat32;
  }

  // The int8 case, per tensor or per axis: runs of elements sharing a scale, typed loops.
  Status run_int8(const RunContext& ctx, const ParamIndex& pi) const {
    const Tensor& x = ctx.inputs[0];
    const Tensor& scale = ctx.inputs[1];
    const Tensor* zp = ctx.inputs.size() > 2 && ctx.inputs[2].defined() ? &ctx.inputs[2] : nullptr;
    Tensor& y = ctx.outputs[0];
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
    const bool per_tensor = pi.len == 1;
    // Per-tensor: chunks of the flat tensor; per-axis: whole inner blocks per chunk.
    const int64_t unit = per_tensor ? 1 : pi.inner;
    const int64_t units = per_tensor ? n : n / std::max<int64_t>(1, pi.inner);  // (outer, axis) pairs
    const int64_t grain = std::max<int64_t>(1, math::kCheapGrain / unit);
    auto body = [&](auto px, auto py) {
      using TX = std::remove_cv_t<std::remove_pointer_t<decltype(px)>>;
      using TY = std::remove_pointer_t<decltype(py)>;
      const TX* xp = x.data<TX>();
      TY* yp = static_cast<TY*>(y.raw());
      run_chunks(units, grain, ctx.num_threads, [&](int64_t b, int64_t e, int) {
        for (int64_t u = b; u < e;) {
          // One run of elements sharing a scale: the rest of this chunk (per-tensor) or one block.
          const int64_t k = per_tensor ? 0 : u % pi.len;
          const int64_t begin = u * unit, count = per_tensor ? e - u : unit;
          const float s = sc[k], z = zp ? static_cast<float>(param_value(*zp, k)) : 0.f;
          if constexpr (std::is_same_v<TY, float>)
            dequantize_block(xp + begin, yp + begin, count, s, z);
          else
            quantize_block(xp + begin, yp + begin, count, s, z);
          u += per_tensor ? count : 1;
        }
      });
    };
    if (quantize_) {
      if (y.dtype() == DType::kInt8)
        body(static_cast<const float*>(nullptr), static_cast<int8_t*>(nullptr));
      else
        body(static_cast<const float*>(nullptr), static_cast<uint8_t*>(nullptr));
    } else if (x.dtype() == DType::kInt8) {
      body(static_cast<const int8_t*>(nullptr), static_cast<float*>(nullptr));
    } else {
      body(static_cast<const uint8_t*>(nullptr), static_cast<float*>(nullptr));
    }
    return ok_status();
  }

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

  // dst[i * c + ch] = src[ch * stride + i] for i < len: `c` channel runs into pixel vectors. Three
  // channels (images) get a loop of their own, which the compiler unrolls: the general loop took
  // as long as the quantisation itself on a 224x224 RGB input.
  template <typename TY>
  static void interleave(const TY* src, TY* dst, int64_t len, int64_t stride, int64_t c) {
    if (c == 3) {
      const TY *r = src, *g = src + stride, *b = src + 2 * stride;
      for (int64_t i = 0; i < len; ++i) {
        dst[3 * i] = r[i];
        dst[3 * i + 1] = g[i];
        dst[3 * i + 2] = b[i];
      }
      return;
    }
    for (int64_t i = 0; i < len; ++i)
      for (int64_t ch = 0; ch < c; ++ch) dst[i * c + ch] = src[ch * stride + i];
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
                   interleave(buf.data(), y + (img * hw + p0) * c, len, block, c);
                 }
               });
  }

  bool quantize_;
  bool to_channels_last_ = false;  // see init()
  int64_t axis_ = 1;
  int64_t block_ = 0;
  DType output_dtype_ = DType::kUndefined;
  SmallCastOptions small_;
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
