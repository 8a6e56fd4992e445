// Kernels that produce values rather than move them: Constant, ConstantOfShape, Range, EyeLike,
// Trilu, OneHot.

#include <algorithm>
#include <cmath>

#include "ops/cpu/data_common.h"
#include "ops/cpu/data_kernels.h"

namespace streamline::ops::cpu {
namespace {

class ConstantKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<ConstantKernel>(a.node);
    const graph::Node& n = a.node;
    if (n.has_attr("sparse_value")) return k->unsupported_error("sparse_value is not supported");
    if (n.has_attr("value_string") || n.has_attr("value_strings"))
      return k->unsupported_error("string constants are not supported");
    if (n.has_attr("value")) {
      const Tensor& t = n.attrs.at("value").t;
      if (!t.defined()) return k->invalid("attribute 'value' holds no tensor");
      SL_RETURN_IF_ERROR(check_movable(t.dtype(), k->desc_));
      k->value_ = t.clone();
    } else if (n.has_attr("value_float")) {
      k->value_ = Tensor::scalar<float>(n.attr_float("value_float", 0.f));
    } else if (n.has_attr("value_floats")) {
      const std::vector<float> v = n.attr_floats("value_floats");
      k->value_ = Tensor::from_vector<float>(Shape{static_cast<int64_t>(v.size())}, v);
    } else if (n.has_attr("value_int")) {
      k->value_ = Tensor::scalar<int64_t>(n.attr_int("value_int", 0));
    } else if (n.has_attr("value_ints")) {
      const std::vector<int64_t> v = n.attr_ints("value_ints");
      k->value_ = Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
    } else {
      return k->invalid("no value attribute");
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo>) const override {
    ReshapeResult r;
    r.outputs.push_back({value_.dtype(), value_.shape(), Layout::kPlain});
    r.known_values.emplace_back(value_);
    return r;
  }
  Status run(const RunContext& ctx) const override {
    copy_bytes(ctx.outputs[0].raw(), value_.raw(), value_.nbytes(), ctx.num_threads);
    return ok_status();
  }

 private:
  Tensor value_;
};

// Reads a non-negative shape from a constant int64 input.
Result<Shape> shape_input(const TensorInfo& info, const char* what, const std::string& desc) {
  SL_ASSIGN_OR_RETURN(std::vector<int64_t> v, constant_ints(info, what, desc));
  for (int64_t d : v)
    if (d < 0) return invalid_argument(desc + ": input '" + what + "' has a negative dimension " + std::to_string(d));
  return Shape(v);
}

class ConstantOfShapeKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<ConstantOfShapeKernel>(a.node);
    if (a.node.has_attr("value")) {
      const Tensor& t = a.node.attrs.at("value").t;
      if (!t.defined() || t.numel() != 1) return k->invalid("attribute 'value' must hold exactly one element");
      SL_RETURN_IF_ERROR(check_movable(t.dtype(), k->desc_));
      k->value_ = t.clone();
    } else {
      k->value_ = Tensor::scalar<float>(0.f);
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'input'");
    SL_ASSIGN_OR_RETURN(Shape s, shape_input(in[0], "input", desc_));
    SL_RETURN_IF_ERROR(check_rank(s.rank()));
    ReshapeResult r;
    r.outputs.push_back({value_.dtype(), s, Layout::kPlain});
    return r;
  }
  Status run(const RunContext& ctx) const override {
    Tensor& out = ctx.outputs[0];
    fill_pattern(out.raw(), value_.raw(), dtype_size(value_.dtype()), out.numel());
    return ok_status();
  }

 private:
  Tensor value_;
};

class RangeKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) { return std::unique_ptr<Kernel>(new RangeKernel(a.node)); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid("needs inputs 'start', 'limit' and 'delta'");
    const DType t = in[0].dtype;
    if (in[1].dtype != t || in[2].dtype != t) return invalid("inputs must share one dtype");
    if (t != DType::kFloat32 && t != DType::kFloat64 && t != DType::kInt16 && t != DType::kInt32 && t != DType::kInt64)
      return unsupported_error(std::string("dtype ") + dtype_name(t) + " is not supported");
    for (int i = 0; i < 3; ++i)
      if (in[static_cast<size_t>(i)].shape.numel() != 1) return invalid("inputs must be scalars");
    static const char* kNames[3] = {"start", "limit", "delta"};
    for (int i = 0; i < 3; ++i)
      if (!in[static_cast<size_t>(i)].value)
        return unsupported_error(std::string("needs a constant shape input '") + kNames[i] + "'");
    int64_t n = 0;
    if (t == DType::kFloat32 || t == DType::kFloat64) {
      const double start = element_as_double(*in[0].value, 0), limit = element_as_double(*in[1].value, 0),
                   delta = element_as_double(*in[2].value, 0);
      if (delta == 0.0) return invalid("delta is zero");
      const double count = std::ceil((limit - start) / delta);
      if (!std::isfinite(count)) return invalid("the number of elements is not finite");
      n = std::max<int64_t>(0, static_cast<int64_t>(count));
    } else {
      const int64_t start = element_as_int64(*in[0].value, 0), limit = element_as_int64(*in[1].value, 0),
                    delta = element_as_int64(*in[2].value, 0);
      if (delta == 0) return invalid("delta is zero");
      const int64_t span = limit - start;
      if ((span > 0) == (delta > 0) && span != 0) n = (span + delta + (delta > 0 ? -1 : 1)) / delta;
    }
    ReshapeResult r;
    r.outputs.push_back({t, Shape{n}, Layout::kPlain});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    switch (ctx.outputs[0].dtype()) {
      case DType::kFloat32:
        fill<float>(ctx);
        break;
      case DType::kFloat64:
        fill<double>(ctx);
        break;
      case DType::kInt16:
        fill<int16_t>(ctx);
        break;
      case DType::kInt32:
        fill<int32_t>(ctx);
        break;
      case DType::kInt64:
        fill<int64_t>(ctx);
        break;
      default:
        return unsupported_error("unsupported dtype");
    }
    return ok_status();
  }

 private:
  template <typename T>
  static void fill(const RunContext& ctx) {
    const T start = *ctx.inputs[0].data<T>(), delta = *ctx.inputs[2].data<T>();
    T* out = ctx.outputs[0].data<T>();
    for (int64_t i = 0; i < ctx.outputs[0].numel(); ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  }
};

class EyeLikeKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<EyeLikeKernel>(a.node);
    k->k_ = a.node.attr_int("k", 0);
    k->dtype_ = a.node.has_attr("dtype") ? static_cast<DType>(a.node.attr_int("dtype", 0)) : DType::kUndefined;
    if (a.node.has_attr("dtype")) SL_RETURN_IF_ERROR(check_movable(k->dtype_, k->desc_));
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'input'");
    if (in[0].shape.rank() != 2) return invalid("input must be 2-D, got " + in[0].shape.to_string());
    const DType t = dtype_ == DType::kUndefined ? in[0].dtype : dtype_;
    SL_RETURN_IF_ERROR(check_movable(t, desc_));
    ReshapeResult r;
    r.outputs.push_back({t, in[0].shape, Layout::kPlain});
    return r;
  }
  Status run(const RunContext& ctx) const override {
    Tensor& out = ctx.outputs[0];
    const size_t esz = dtype_size(out.dtype());
    std::memset(out.raw(), 0, out.nbytes());
    uint8_t one[8] = {};
    store_scalar(out.dtype(), 1.0, one);
    const int64_t rows = out.shape()[0], cols = out.shape()[1];
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t j = i + k_;
      if (j >= 0 && j < cols) std::memcpy(out.data<uint8_t>() + (i * cols + j) * static_cast<int64_t>(esz), one, esz);
    }
    return ok_status();
  }

 private:
  int64_t k_ = 0;
  DType dtype_ = DType::kUndefined;
};

// Trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims.
class TriluKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<TriluKernel>(a.node);
    k->upper_ = a.node.attr_int("upper", 1) != 0;
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'input'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    if (in[0].shape.rank() < 2) return invalid("input must have rank >= 2, got " + in[0].shape.to_string());
    if (in.size() > 1 && in[1].present() && in[1].shape.numel() != 1) return invalid("'k' must be a scalar");
    ReshapeResult r;
    r.outputs.push_back({in[0].dtype, in[0].shape, Layout::kPlain});
    r.inplace = {0};
    return r;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& in = ctx.inputs[0];
    Tensor& out = ctx.outputs[0];
    const int64_t k = ctx.inputs.size() > 1 && ctx.inputs[1].defined() ? element_as_int64(ctx.inputs[1], 0) : 0;
    copy_bytes(out.raw(), in.raw(), in.nbytes(), ctx.num_threads);
    const Shape& s = in.shape();
    const int64_t rows = s[s.rank() - 2], cols = s[s.rank() - 1];
    const int64_t mats = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
    const int64_t esz = static_cast<int64_t>(dtype_size(in.dtype()));
    auto* base = out.data<uint8_t>();
    for (int64_t m = 0; m < mats; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        uint8_t* row = base + (m * rows + i) * cols * esz;
        // Zero [z0, z1) of this row.
        int64_t z0 = 0, z1 = 0;
        if (upper_) {
          z1 = std::clamp<int64_t>(i + k, 0, cols);
        } else {
          z0 = std::clamp<int64_t>(i + k + 1, 0, cols);
          z1 = cols;
        }
        if (z1 > z0) std::memset(row + z0 * esz, 0, static_cast<size_t>((z1 - z0) * esz));
      }
    }
    return ok_status();
  }

 private:
  bool upper_ = true;
};

class OneHotKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<OneHotKernel>(a.node);
    k->axis_ = a.node.attr_int("axis", -1);
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid("needs inputs 'indices', 'depth' and 'values'");
    if (!dtype_supported(in[0].dtype)) return invalid("'indices' must be numeric");
    SL_RETURN_IF_ERROR(check_movable(in[2].dtype, desc_));
    if (in[1].shape.numel() != 1) return invalid("'depth' must hold one value");
    if (in[2].shape.numel() != 2) return invalid("'values' must hold two values [off, on]");
    SL_ASSIGN_OR_RETURN(std::vector<double> depth_v, constant_doubles(in[1], "depth", desc_));
    const int64_t depth = static_cast<int64_t>(depth_v[0]);
    if (depth < 1) return invalid("'depth' must be positive, got " + std::to_string(depth));
    const Shape& s = in[0].shape;
    const int64_t out_rank = static_cast<int64_t>(s.rank()) + 1;
    int64_t axis = 0;
    if (!normalize_axis(axis_, out_rank, &axis))
      return invalid("axis " + std::to_string(axis_) + " is out of range for output rank " + std::to_string(out_rank));
    Shape out;
    for (int64_t i = 0; i < out_rank; ++i) {
      if (i == axis) out.push_back(depth);
      if (i < static_cast<int64_t>(s.rank())) out.push_back(s[static_cast<size_t>(i)]);
    }
    ReshapeResult r;
    r.outputs.push_back({in[2].dtype, out, Layout::kPlain});
    return r;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& idx = ctx.inputs[0];
    const Tensor& values = ctx.inputs[2];
    Tensor& out = ctx.outputs[0];
    const size_t esz = dtype_size(out.dtype());
    const auto* off_v = values.data<uint8_t>();
    const auto* on_v = off_v + esz;
    fill_pattern(out.raw(), off_v, esz, out.numel());
    const int64_t out_rank = static_cast<int64_t>(out.shape().rank());
    int64_t axis = 0;
    if (!normalize_axis(axis_, out_rank, &axis)) return invalid("axis out of range");
    const int64_t depth = out.shape()[static_cast<size_t>(axis)];
    int64_t inner = 1;
    for (int64_t i = axis + 1; i < out_rank; ++i) inner *= out.shape()[static_cast<size_t>(i)];
    auto* dst = out.data<uint8_t>();
    for (int64_t p = 0; p < idx.numel(); ++p) {
      int64_t v = load_int(idx.dtype(), idx.raw(), p);
      if (v < 0) v += depth;
      if (v < 0 || v >= depth) continue;
      const int64_t o = p / inner, i = p % inner;
      std::memcpy(dst + ((o * depth + v) * inner + i) * static_cast<int64_t>(esz), on_v, esz);
    }
    return ok_status();
  }

 private:
  int64_t axis_ = -1;
};

}  // namespace

Status register_generate_ops(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_data_kernel<ConstantKernel>(reg, "Constant", 1));
  SL_RETURN_IF_ERROR(add_data_kernel<ConstantOfShapeKernel>(reg, "ConstantOfShape", 9));
  SL_RETURN_IF_ERROR(add_data_kernel<RangeKernel>(reg, "Range", 11));
  SL_RETURN_IF_ERROR(add_data_kernel<EyeLikeKernel>(reg, "EyeLike", 9));
  SL_RETURN_IF_ERROR(add_data_kernel<TriluKernel>(reg, "Trilu", 14));
  SL_RETURN_IF_ERROR(add_data_kernel<OneHotKernel>(reg, "OneHot", 9));
  return ok_status();
}

}  // namespace streamline::ops::cpu
