// Small long-tail operators: CumSum (opset 11/14), CumProd (26), TopK (1/10/11/24), Det (11),
// Shrink (9), ReverseSequence (10) and MaxUnpool (9/11).
//
//   CumSum, CumProd  running sums / products along `axis` (an input read at run time), exclusive
//                    (the first output is the identity, 0 or 1) and reverse.
//   TopK             the k largest (or smallest) along `axis`; ties keep the lower index first. k must
//                    be a constant (it sets the output shape).
//   Det              determinant of the trailing [M, M] matrices (LU with partial pivoting, double).
//   Shrink           x < -lambd ? x + bias : x > lambd ? x - bias : 0.
//   ReverseSequence  reverses the first sequence_lens[b] steps of each batch entry along time_axis.
//   MaxUnpool        zeros with y[unravel(indices[i])] = x[i], indices unravelled in the default
//                    unpooled shape (kernel/strides/pads); output size that shape or a
//                    constant output_shape.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

// [outer, len, inner] around `axis`.
struct Split3 {
  int64_t outer = 1, len = 1, inner = 1;
};
Split3 split_at(const Shape& s, int64_t axis) {
  Split3 r;
  for (int64_t d = 0; d < static_cast<int64_t>(s.rank()); ++d) {
    if (d < axis) r.outer *= s[static_cast<size_t>(d)];
    if (d == axis) r.len = s[static_cast<size_t>(d)];
    if (d > axis) r.inner *= s[static_cast<size_t>(d)];
  }
  return r;
}

class CumulativeKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    product_ = a.node.op_type == "CumProd";
    exclusive_ = a.node.attr_int("exclusive", 0) != 0;
    reverse_ = a.node.attr_int("reverse", 0) != 0;
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid("expected x and axis");
    const DType t = in[0].dtype;
    if (!is_float_dtype(t) && t != DType::kInt32 && t != DType::kInt64 && t != DType::kUInt32 && t != DType::kUInt64)
      return unsupported_error(std::string("dtype ") + dtype_name(t));
    if (in[1].dtype != DType::kInt32 && in[1].dtype != DType::kInt64) return invalid("axis must be int32 or int64");
    if (in[1].shape.numel() != 1) return invalid("axis must be a scalar");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{t, in[0].shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    int64_t axis = 0;
    if (!normalize_axis(load_index(ctx.inputs[1], 0), static_cast<int64_t>(x.shape().rank()), &axis))
      return invalid("axis out of range");
    switch (x.dtype()) {
      case DType::kFloat32:
        return typed<float>(ctx, axis);
      case DType::kFloat64:
        return typed<double>(ctx, axis);
      case DType::kInt32:
        return typed<int32_t>(ctx, axis);
      case DType::kInt64:
        return typed<int64_t>(ctx, axis);
      case DType::kUInt32:
        return typed<uint32_t>(ctx, axis);
      case DType::kUInt64:
        return typed<uint64_t>(ctx, axis);
      default:
        return generic(ctx, axis);
    }
  }

 private:
  // Accumulates in T: integers wrap, float32 accumulates in float as ONNX Runtime does.
  template <typename T>
  Status typed(const RunContext& ctx, int64_t axis) const {
    return product_ ? scan<T>(ctx, axis, T(1), [](T a, T b) { return wrap_op(a, b, true); })
                    : scan<T>(ctx, axis, T(0), [](T a, T b) { return wrap_op(a, b, false); });
  }

  template <typename T>
  static T wrap_op(T a, T b, bool mul) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(mul ? static_cast<U>(a) * static_cast<U>(b) : static_cast<U>(a) + static_cast<U>(b));
    } else {
      return mul ? a * b : a + b;
    }
  }

  template <typename T, typename Op>
  Status scan(const RunContext& ctx, int64_t axis, T identity, Op op) const {
    const Split3 s = split_at(ctx.inputs[0].shape(), axis);
    const T* x = ctx.inputs[0].data<T>();
    T* y = ctx.outputs[0].data<T>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        T acc = identity;
        for (int64_t k = 0; k < s.len; ++k) {
          const int64_t j = reverse_ ? s.len - 1 - k : k;
          const int64_t off = (o * s.len + j) * s.inner + i;
          if (exclusive_) {
            y[off] = acc;
            acc = op(acc, x[off]);
          } else {
            acc = op(acc, x[off]);
            y[off] = acc;
          }
        }
      }
    return ok_status();
  }

  Status generic(const RunContext& ctx, int64_t axis) const {
    const Split3 s = split_at(ctx.inputs[0].shape(), axis);
    const DType t = ctx.inputs[0].dtype();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        double acc = product_ ? 1 : 0;
        for (int64_t k = 0; k < s.len; ++k) {
          const int64_t j = reverse_ ? s.len - 1 - k : k;
          const int64_t off = (o * s.len + j) * s.inner + i;
          const double v = load_f(t, ctx.inputs[0].raw(), off);
          if (exclusive_) store_f(t, ctx.outputs[0].raw(), off, acc);
          acc = product_ ? acc * v : acc + v;
          if (!exclusive_) store_f(t, ctx.outputs[0].raw(), off, acc);
        }
      }
    return ok_status();
  }

  bool product_ = false, exclusive_ = false, reverse_ = false;
};

// Most threads TopK splits its rows over (each needs one scratch row in the workspace).
constexpr int64_t kTopKChunks = 16;

class TopKKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    axis_ = a.node.attr_int("axis", -1);
    largest_ = a.node.attr_int("largest", 1) != 0;
    sorted_ = a.node.attr_int("sorted", 1) != 0;
    k_attr_ = a.node.attr_int("k", -1);
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input");
    const DType t = in[0].dtype;
    if (!is_float_dtype(t) && t != DType::kInt32 && t != DType::kInt64 && t != DType::kUInt8 && t != DType::kInt8)
      return unsupported_error(std::string("dtype ") + dtype_name(t));
    int64_t k = k_attr_;
    if (opset_ >= 10) {
      if (in.size() < 2 || !in[1].present()) return invalid("missing input K");
      SL_ASSIGN_OR_RETURN(std::vector<int64_t> kv, constant_ints(in[1], "K", desc_));
      if (kv.size() != 1) return invalid("K must have one element");
      k = kv[0];
    }
    const int64_t rank = static_cast<int64_t>(in[0].shape.rank());
    int64_t axis = 0;
    if (!normalize_axis(axis_, rank, &axis)) return invalid("axis out of range");
    if (k < 0 || k > in[0].shape[static_cast<size_t>(axis)])
      return invalid("k = " + std::to_string(k) + " is outside [0, " +
                     std::to_string(in[0].shape[static_cast<size_t>(axis)]) + "]");
    Shape out = in[0].shape;
    out[static_cast<size_t>(axis)] = k;
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{t, out, Layout::kPlain});
    rr.outputs.push_back(OutputInfo{DType::kInt64, out, Layout::kPlain});
    rr.state = std::make_shared<int64_t>(axis);
    rr.workspace_bytes =
        static_cast<size_t>(kTopKChunks * in[0].shape[static_cast<size_t>(axis)]) * sizeof(std::pair<double, int64_t>);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const int64_t axis = *static_cast<const int64_t*>(ctx.state);
    const Tensor& x = ctx.inputs[0];
    const Split3 s = split_at(x.shape(), axis);
    const int64_t k = ctx.outputs[0].shape()[static_cast<size_t>(axis)];
    const DType t = x.dtype();
    const bool largest = largest_;
    // One scratch row per chunk; chunk c covers rows [rows * c / chunks, rows * (c + 1) / chunks).
    const int64_t rows = s.outer * s.inner;
    const int64_t chunks =
        rows * s.len < 4096 ? 1 : std::max<int64_t>(1, std::min<int64_t>({kTopKChunks, ctx.num_threads, rows}));
    auto* scratch = static_cast<std::pair<double, int64_t>*>(ctx.workspace);
#pragma omp parallel for num_threads(static_cast <int>(chunks)) if (chunks > 1) schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      std::pair<double, int64_t>* items = scratch + c * s.len;
      for (int64_t oi = rows * c / chunks; oi < rows * (c + 1) / chunks; ++oi) {
        const int64_t o = oi / s.inner, i = oi % s.inner;
        for (int64_t j = 0; j < s.len; ++j) items[j] = {load_f(t, x.raw(), (o * s.len + j) * s.inner + i), j};
        // NaN ranks above every number for largest and below for smallest, as NumPy sorts it.
        auto before = [largest](const std::pair<double, int64_t>& a, const std::pair<double, int64_t>& b) {
          const bool an = std::isnan(a.first), bn = std::isnan(b.first);
          if (an || bn) {
            if (an && bn) return a.second < b.second;
            return largest ? an : bn;
          }
          if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
          return a.second < b.second;
        };
        std::partial_sort(items, items + k, items + s.len, before);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t off = (o * k + j) * s.inner + i;
          // Copy the original element bytes so integer values stay exact.
          const size_t esz = dtype_size(t);
          std::memcpy(static_cast<uint8_t*>(ctx.outputs[0].raw()) + static_cast<size_t>(off) * esz,
                      static_cast<const uint8_t*>(x.raw()) +
                          static_cast<size_t>((o * s.len + items[j].second) * s.inner + i) * esz,
                      esz);
          if (ctx.outputs.size() > 1 && ctx.outputs[1].defined()) ctx.outputs[1].data<int64_t>()[off] = items[j].second;
        }
      }
    }
    return ok_status();
  }

 private:
  int64_t axis_ = -1, k_attr_ = -1;
  bool largest_ = true, sorted_ = true;
};

class DetKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs&) { return ok_status(); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 1 || !in[0].present()) return invalid("expected one input");
    if (in[0].dtype != DType::kFloat32 && in[0].dtype != DType::kFloat64 && in[0].dtype != DType::kFloat16)
      return unsupported_error(std::string("dtype ") + dtype_name(in[0].dtype));
    const Shape& s = in[0].shape;
    if (s.rank() < 2 || s[s.rank() - 1] != s[s.rank() - 2])
      return invalid("input must be [*, M, M], got " + s.to_string());
    ReshapeResult rr;
    rr.outputs.push_back(
        OutputInfo{in[0].dtype, Shape(std::span<const int64_t>(s.data(), s.rank() - 2)), Layout::kPlain});
    rr.workspace_bytes = static_cast<size_t>(s[s.rank() - 1] * s[s.rank() - 1]) * sizeof(double);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const int64_t m = x.shape()[x.shape().rank() - 1];
    auto* a = static_cast<double*>(ctx.workspace);
    for (int64_t b = 0; b < ctx.outputs[0].numel(); ++b) {
      for (int64_t i = 0; i < m * m; ++i) a[i] = load_f(x.dtype(), x.raw(), b * m * m + i);
      double det = 1.0;
      for (int64_t c = 0; c < m && det != 0.0; ++c) {
        int64_t p = c;
        for (int64_t r = c + 1; r < m; ++r)
          if (std::fabs(a[r * m + c]) > std::fabs(a[p * m + c])) p = r;
        if (a[p * m + c] == 0.0) {
          det = 0.0;
          break;
        }
        if (p != c) {
          for (int64_t j = 0; j < m; ++j) std::swap(a[c * m + j], a[p * m + j]);
          det = -det;
        }
        det *= a[c * m + c];
        for (int64_t r = c + 1; r < m; ++r) {
          const double f = a[r * m + c] / a[c * m + c];
          for (int64_t j = c; j < m; ++j) a[r * m + j] -= f * a[c * m + j];
        }
      }
      store_f(ctx.outputs[0].dtype(), ctx.outputs[0].raw(), b, det);
    }
    return ok_status();
  }
};

class ShrinkKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    lambd_ = a.node.attr_float("lambd", 0.5f);
    bias_ = a.node.attr_float("bias", 0.f);
    return ok_status();
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 1 || !in[0].present()) return invalid("expected one input");
    if (!dtype_supported(in[0].dtype) || in[0].dtype == DType::kBool) return unsupported_error("dtype");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, in[0].shape, Layout::kPlain});
    rr.inplace = {0};
    return rr;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const DType t = x.dtype();
    if (t == DType::kFloat32) {
      const float* xp = x.data<float>();
      float* yp = ctx.outputs[0].data<float>();
      for (int64_t i = 0; i < x.numel(); ++i)
        yp[i] = xp[i] < -lambd_ ? xp[i] + bias_ : xp[i] > lambd_ ? xp[i] - bias_ : 0.f;
      return ok_status();
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = load_f(t, x.raw(), i);
      store_f(t, ctx.outputs[0].raw(), i, v < -lambd_ ? v + bias_ : v > lambd_ ? v - bias_ : 0.0);
    }
    return ok_status();
  }

 private:
  float lambd_ = 0.5f, bias_ = 0.f;
};

class ReverseSequenceKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    batch_axis_ = a.node.attr_int("batch_axis", 1);
    time_axis_ = a.node.attr_int("time_axis", 0);
    if (!((batch_axis_ == 0 && time_axis_ == 1) || (batch_axis_ == 1 && time_axis_ == 0)))
      return invalid("batch_axis and time_axis must be 0 and 1 in some order");
    return ok_status();
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid("expected input and sequence_lens");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    if (in[0].shape.rank() < 2) return invalid("input must have rank >= 2");
    if (in[1].shape != Shape{in[0].shape[static_cast<size_t>(batch_axis_)]})
      return invalid("sequence_lens must be [batch]");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, in[0].shape, Layout::kPlain});
    return rr;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Shape& s = x.shape();
    const int64_t batch = s[static_cast<size_t>(batch_axis_)], steps = s[static_cast<size_t>(time_axis_)];
    int64_t inner = 1;
    for (size_t d = 2; d < s.rank(); ++d) inner *= s[d];
    const size_t row = static_cast<size_t>(inner) * dtype_size(x.dtype());
    auto at = [&](int64_t b, int64_t t) {
      return (batch_axis_ == 0 ? b * steps + t : t * batch + b) * static_cast<int64_t>(row);
    };
    const auto* src = static_cast<const uint8_t*>(x.raw());
    auto* dst = static_cast<uint8_t*>(ctx.outputs[0].raw());
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = load_index(ctx.inputs[1], b);
      if (len < 0 || len > steps) return invalid("sequence_lens[" + std::to_string(b) + "] out of range");
      for (int64_t t = 0; t < steps; ++t) std::memcpy(dst + at(b, t), src + at(b, t < len ? len - 1 - t : t), row);
    }
    return ok_status();
  }

 private:
  int64_t batch_axis_ = 1, time_axis_ = 0;
};

class MaxUnpoolKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    kernel_ = a.node.attr_ints("kernel_shape");
    pads_ = a.node.attr_ints("pads");
    strides_ = a.node.attr_ints("strides");
    if (kernel_.empty()) return invalid("missing kernel_shape");
    return ok_status();
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid("expected X and I");
    if (in[1].dtype != DType::kInt64 || in[1].shape != in[0].shape) return invalid("I must be int64 shaped like X");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    const Shape& x = in[0].shape;
    const size_t sp = kernel_.size();
    if (x.rank() != sp + 2) return invalid("kernel_shape does not match the input rank");
    Shape out = default_shape(x);
    if (in.size() > 2 && in[2].present()) {
      SL_ASSIGN_OR_RETURN(std::vector<int64_t> os, constant_ints(in[2], "output_shape", desc_));
      const Shape def = out;
      out = Shape(os);
      if (out.rank() != x.rank()) return invalid("output_shape rank differs from the input's");
      for (size_t d = 0; d < out.rank(); ++d)
        if (out[d] < def[d])
          return invalid("output_shape " + out.to_string() + " is smaller than the unpooled shape " + def.to_string());
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, out, Layout::kPlain});
    return rr;
  }
  Status run(const RunContext& ctx) const override {
    Tensor& y = ctx.outputs[0];
    const size_t esz = dtype_size(y.dtype());
    std::memset(y.raw(), 0, y.nbytes());
    const int64_t* idx = ctx.inputs[1].data<int64_t>();
    // Indices address the default unpooled shape; a larger output_shape keeps each element's
    // coordinates (the extra rows and columns stay zero).
    const Shape def = default_shape(ctx.inputs[0].shape());
    const Shape& out = y.shape();
    const bool same = def == out;
    const int64_t def_numel = def.numel();
    for (int64_t i = 0; i < ctx.inputs[0].numel(); ++i) {
      if (idx[i] < 0 || idx[i] >= def_numel)
        return invalid("index " + std::to_string(idx[i]) + " is outside the unpooled shape " + def.to_string());
      int64_t at = idx[i];
      if (!same) {
        int64_t rest = idx[i], stride = 1;
        at = 0;
        for (size_t d = def.rank(); d-- > 0;) {
          at += (rest % def[d]) * stride;
          rest /= def[d];
          stride *= out[d];
        }
      }
      std::memcpy(static_cast<uint8_t*>(y.raw()) + static_cast<size_t>(at) * esz,
                  static_cast<const uint8_t*>(ctx.inputs[0].raw()) + static_cast<size_t>(i) * esz, esz);
    }
    return ok_status();
  }

 private:
  // The unpooled shape implied by kernel_shape, strides and pads.
  Shape default_shape(const Shape& x) const {
    const size_t sp = kernel_.size();
    Shape out{x[0], x[1]};
    for (size_t d = 0; d < sp; ++d) {
      const int64_t s = strides_.empty() ? 1 : strides_[d];
      const int64_t pb = pads_.empty() ? 0 : pads_[d], pe = pads_.empty() ? 0 : pads_[d + sp];
      out.push_back((x[d + 2] - 1) * s - pb - pe + kernel_[d]);
    }
    return out;
  }

  std::vector<int64_t> kernel_, pads_, strides_;
};

}  // namespace

Status register_misc_ops(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "CumSum", 11, DType::kUndefined, make_factory<CumulativeKernel>()));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "CumProd", 26, DType::kUndefined, make_factory<CumulativeKernel>()));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "TopK", 1, DType::kUndefined, make_factory<TopKKernel>()));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "Det", 11, DType::kUndefined, make_factory<DetKernel>()));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "Shrink", 9, DType::kUndefined, make_factory<ShrinkKernel>()));
  SL_RETURN_IF_ERROR(
      add_typed_def(reg, "ReverseSequence", 10, DType::kUndefined, make_factory<ReverseSequenceKernel>()));
  return add_typed_def(reg, "MaxUnpool", 9, DType::kUndefined, make_factory<MaxUnpoolKernel>());
}

}  // namespace streamline::ops::cpu
