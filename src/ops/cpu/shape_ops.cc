// Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference): kernels that only
// change how the same elements are viewed. The view-like ones may run in place (inplace = {0}) and
// copy only when the planner gave them a separate output buffer.

#include <algorithm>

#include "ops/cpu/data_common.h"
#include "ops/cpu/data_kernels.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

Tensor int64_vector(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(v.size())}, v);
}

// Shape (opset 15 adds start/end); its value is known from shapes alone.
class ShapeKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<ShapeKernel>(a.node);
    if (a.node.opset >= 15) {
      k->start_ = a.node.attr_int("start", 0);
      k->end_ = a.node.has_attr("end") ? a.node.attr_int("end", 0) : INT64_MAX;
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }
  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'data'");
    int64_t b = 0, e = 0;
    range(static_cast<int64_t>(in[0].shape.rank()), &b, &e);
    std::vector<int64_t> dims(in[0].shape.begin() + b, in[0].shape.begin() + e);
    ReshapeResult r;
    r.outputs.push_back({DType::kInt64, Shape{e - b}, Layout::kPlain});
    r.known_values.emplace_back(int64_vector(dims));
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Shape& s = ctx.inputs[0].shape();
    int64_t b = 0, e = 0;
    range(static_cast<int64_t>(s.rank()), &b, &e);
    int64_t* out = ctx.outputs[0].data<int64_t>();
    for (int64_t i = b; i < e; ++i) out[i - b] = s[static_cast<size_t>(i)];
    return ok_status();
  }

 private:
  void range(int64_t rank, int64_t* b, int64_t* e) const {
    auto clampi = [rank](int64_t v) {
      if (v < 0) v = v < -rank ? 0 : v + rank;
      return std::min(v, rank);
    };
    *b = clampi(start_);
    *e = std::max(*b, clampi(end_));
  }
  int64_t start_ = 0;
  int64_t end_ = INT64_MAX;
};

class SizeKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) { return std::unique_ptr<Kernel>(new SizeKernel(a.node)); }
  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'data'");
    ReshapeResult r;
    r.outputs.push_back({DType::kInt64, Shape{}, Layout::kPlain});
    r.known_values.emplace_back(Tensor::scalar<int64_t>(in[0].shape.numel()));
    return r;
  }
  Status run(const RunContext& ctx) const override {
    *ctx.outputs[0].data<int64_t>() = ctx.inputs[0].numel();
    return ok_status();
  }
};

// Base of the view-like kernels: output 0 holds input 0's bytes under another shape.
class ViewKernel : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status run(const RunContext& ctx) const override {
    const Tensor& in = ctx.inputs[0];
    Tensor& out = ctx.outputs[0];
    if (out.raw() != in.raw()) copy_bytes(out.raw(), in.raw(), in.nbytes(), ctx.num_threads);
    return ok_status();
  }

 protected:
  Result<ReshapeResult> view_result(const TensorInfo& in, const Shape& shape) const {
    if (shape.numel() != in.shape.numel())
      return invalid("cannot view " + in.shape.to_string() + " (" + std::to_string(in.shape.numel()) +
                     " elements) as " + shape.to_string() + " (" + std::to_string(shape.numel()) + " elements)");
    ReshapeResult r;
    r.outputs.push_back({in.dtype, shape, Layout::kPlain});
    r.inplace = {0};
    return r;
  }
  Status check_data(std::span<const TensorInfo> in) const {
    if (in.empty() || !in[0].present()) return invalid("missing input 'data'");
    return check_movable(in[0].dtype, desc_);
  }
};

class ReshapeKernel final : public ViewKernel {
 public:
  using ViewKernel::ViewKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<ReshapeKernel>(a.node);
    k->allowzero_ = a.node.opset >= 14 && a.node.attr_int("allowzero", 0) != 0;
    if (a.node.opset < 5) {
      if (!a.node.has_attr("shape")) return k->invalid("missing attribute 'shape'");
      k->attr_shape_ = a.node.attr_ints("shape");
      k->has_attr_shape_ = true;
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_RETURN_IF_ERROR(check_data(in));
    std::vector<int64_t> req = attr_shape_;
    if (!has_attr_shape_) {
      if (in.size() < 2 || !in[1].present()) return invalid("missing input 'shape'");
      SL_ASSIGN_OR_RETURN(req, constant_ints(in[1], "shape", desc_));
    }
    const Shape& s = in[0].shape;
    Shape out;
    int infer = -1;
    bool has_zero = false;
    int64_t known = 1;
    for (size_t i = 0; i < req.size(); ++i) {
      int64_t d = req[i];
      if (d == -1) {
        if (infer >= 0) return invalid("shape " + Shape(req).to_string() + " has more than one -1");
        infer = static_cast<int>(i);
        out.push_back(1);
        continue;
      }
      if (d < -1) return invalid("shape " + Shape(req).to_string() + " has an invalid negative dimension");
      if (d == 0) {
        has_zero = true;
        if (!allowzero_) {
          if (i >= s.rank())
            return invalid("shape " + Shape(req).to_string() + " copies dimension " + std::to_string(i) +
                           " of a rank-" + std::to_string(s.rank()) + " input");
          d = s[i];
        }
      }
      out.push_back(d);
      known *= d;
    }
    if (allowzero_ && has_zero && infer >= 0)
      return invalid("shape " + Shape(req).to_string() + " has both 0 and -1 with allowzero=1");
    if (infer >= 0) {
      if (known == 0 || s.numel() % known != 0)
        return invalid("cannot infer the -1 of shape " + Shape(req).to_string() + " for input " + s.to_string());
      out[static_cast<size_t>(infer)] = s.numel() / known;
    }
    return view_result(in[0], out);
  }

 private:
  bool allowzero_ = false;
  bool has_attr_shape_ = false;
  std::vector<int64_t> attr_shape_;
};

class FlattenKernel final : public ViewKernel {
 public:
  using ViewKernel::ViewKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<FlattenKernel>(a.node);
    k->axis_ = a.node.attr_int("axis", 1);
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_RETURN_IF_ERROR(check_data(in));
    const Shape& s = in[0].shape;
    const int64_t r = static_cast<int64_t>(s.rank());
    if (axis_ < -r || axis_ > r)
      return invalid("axis " + std::to_string(axis_) + " is out of range for rank " + std::to_string(r));
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < r; ++i) (i < axis ? outer : inner) *= s[static_cast<size_t>(i)];
    return view_result(in[0], Shape{outer, inner});
  }

 private:
  int64_t axis_ = 1;
};

// Squeeze and Unsqueeze: axes by attribute before opset 13, by input from 13.
class SqueezeKernel final : public ViewKernel {
 public:
  using ViewKernel::ViewKernel;
  static KernelPtr create(const KernelCreateArgs& a, bool unsqueeze) {
    auto k = std::make_unique<SqueezeKernel>(a.node);
    k->unsqueeze_ = unsqueeze;
    k->axes_from_input_ = a.node.opset >= 13;
    if (!k->axes_from_input_) {
      k->has_axes_attr_ = a.node.has_attr("axes");
      k->axes_attr_ = a.node.attr_ints("axes");
      if (unsqueeze && !k->has_axes_attr_) return k->invalid("missing attribute 'axes'");
    }
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_RETURN_IF_ERROR(check_data(in));
    std::vector<int64_t> axes = axes_attr_;
    bool have_axes = has_axes_attr_;
    if (axes_from_input_ && in.size() > 1 && in[1].present()) {
      SL_ASSIGN_OR_RETURN(axes, constant_ints(in[1], "axes", desc_));
      have_axes = true;
    }
    if (unsqueeze_ && !have_axes) return invalid("missing input 'axes'");
    const Shape& s = in[0].shape;
    const int64_t r = static_cast<int64_t>(s.rank());
    const int64_t axes_rank = unsqueeze_ ? r + static_cast<int64_t>(axes.size()) : r;
    std::vector<bool> marked(static_cast<size_t>(axes_rank), false);
    for (int64_t a : axes) {
      int64_t ax = 0;
      if (!normalize_axis(a, axes_rank, &ax))
        return invalid("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(axes_rank));
      if (marked[static_cast<size_t>(ax)]) return invalid("axis " + std::to_string(a) + " is repeated");
      marked[static_cast<size_t>(ax)] = true;
    }
    Shape out;
    if (unsqueeze_) {
      size_t src = 0;
      for (int64_t i = 0; i < axes_rank; ++i) out.push_back(marked[static_cast<size_t>(i)] ? 1 : s[src++]);
    } else {
      for (int64_t i = 0; i < r; ++i) {
        const int64_t d = s[static_cast<size_t>(i)];
        // No axes, or an empty list, squeezes every dim of size 1.
        const bool squeeze = have_axes && !axes.empty() ? marked[static_cast<size_t>(i)] : d == 1;
        if (squeeze && d != 1)
          return invalid("cannot squeeze axis " + std::to_string(i) + " of size " + std::to_string(d) + " in " +
                         s.to_string());
        if (!squeeze) out.push_back(d);
      }
    }
    return view_result(in[0], out);
  }

 private:
  bool unsqueeze_ = false;
  bool axes_from_input_ = false;
  bool has_axes_attr_ = false;
  std::vector<int64_t> axes_attr_;
};

class IdentityKernel final : public ViewKernel {
 public:
  using ViewKernel::ViewKernel;
  static KernelPtr create(const KernelCreateArgs& a) { return std::unique_ptr<Kernel>(new IdentityKernel(a.node)); }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_RETURN_IF_ERROR(check_data(in));
    return view_result(in[0], in[0].shape);
  }
};

// Dropout in inference: Y = X and the optional mask is all true (bool from opset 10, X's type before).
class DropoutKernel final : public ViewKernel {
 public:
  using ViewKernel::ViewKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<DropoutKernel>(a.node);
    k->num_outputs_ = a.node.outputs.size();
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_RETURN_IF_ERROR(check_data(in));
    if (opset_ >= 12 && in.size() > 2 && in[2].present()) {
      if (!in[2].value) return unsupported_error("needs a constant input 'training_mode'");
      if (element_as_double(*in[2].value, 0) != 0.0) {
        double ratio = 0.5;
        if (in.size() > 1 && in[1].present()) {
          if (!in[1].value) return unsupported_error("needs a constant input 'ratio' in training mode");
          ratio = element_as_double(*in[1].value, 0);
        }
        if (ratio != 0.0) return unsupported_error("training mode with a non-zero ratio is not supported");
      }
    }
    SL_ASSIGN_OR_RETURN(ReshapeResult r, view_result(in[0], in[0].shape));
    if (num_outputs_ > 1) {
      r.outputs.push_back({opset_ >= 10 ? DType::kBool : in[0].dtype, in[0].shape, Layout::kPlain});
      r.inplace.push_back(-1);
    }
    return r;
  }

  Status run(const RunContext& ctx) const override {
    SL_RETURN_IF_ERROR(ViewKernel::run(ctx));
    if (ctx.outputs.size() > 1 && ctx.outputs[1].defined()) {
      Tensor& mask = ctx.outputs[1];
      uint8_t one[8] = {};
      store_scalar(mask.dtype(), 1.0, one);
      fill_pattern(mask.raw(), one, dtype_size(mask.dtype()), mask.numel());
    }
    return ok_status();
  }

 private:
  size_t num_outputs_ = 1;
};

}  // namespace

Status register_shape_ops(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_data_kernel<ShapeKernel>(reg, "Shape", 1));
  SL_RETURN_IF_ERROR(add_data_kernel<SizeKernel>(reg, "Size", 1));
  SL_RETURN_IF_ERROR(add_data_kernel<ReshapeKernel>(reg, "Reshape", 1));
  SL_RETURN_IF_ERROR(add_data_kernel<FlattenKernel>(reg, "Flatten", 1));
  SL_RETURN_IF_ERROR(add_data_kernel<IdentityKernel>(reg, "Identity", 1));
  SL_RETURN_IF_ERROR(add_data_kernel<DropoutKernel>(reg, "Dropout", 1));
  for (const bool unsqueeze : {false, true}) {
    KernelDef def;
    def.op = unsqueeze ? "Unsqueeze" : "Squeeze";
    def.provider = "cpu";
    def.create = [unsqueeze](const KernelCreateArgs& a) { return SqueezeKernel::create(a, unsqueeze); };
    SL_RETURN_IF_ERROR(reg.add(std::move(def)));
  }
  return register_generate_ops(reg);
}

}  // namespace streamline::ops::cpu
