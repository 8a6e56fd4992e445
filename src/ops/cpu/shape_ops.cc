// Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference): kernels that only
// change how the same elements are viewed. The view-like ones may run in place (inplace = {0}) and
// copy only when the planner gave them a separate output buffer; their shape rules are shared with
// the CUDA kernels (ops/data_shapes.h).

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

// Reshape, Flatten, Squeeze, Unsqueeze, Identity and Dropout: output 0 holds input 0's bytes under
// the shape view_outputs() (ops/data_shapes.h) gives; Dropout's mask is all true.
class ViewKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<ViewKernel>(a.node);
    SL_ASSIGN_OR_RETURN(k->attrs_, read_view_attrs(a.node));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    ReshapeResult r;
    SL_ASSIGN_OR_RETURN(r.outputs, view_outputs(attrs_, in, desc_));
    r.inplace.assign(r.outputs.size(), -1);
    r.inplace[0] = 0;
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& in = ctx.inputs[0];
    Tensor& out = ctx.outputs[0];
    if (out.raw() != in.raw()) copy_bytes(out.raw(), in.raw(), in.nbytes(), ctx.num_threads);
    if (ctx.outputs.size() > 1 && ctx.outputs[1].defined()) {
      Tensor& mask = ctx.outputs[1];
      uint8_t one[8] = {};
      store_scalar(mask.dtype(), 1.0, one);
      fill_pattern(mask.raw(), one, dtype_size(mask.dtype()), mask.numel());
    }
    return ok_status();
  }

 private:
  ViewAttrs attrs_;
};

}  // namespace

Status register_shape_ops(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_data_kernel<ShapeKernel>(reg, "Shape", 1));
  SL_RETURN_IF_ERROR(add_data_kernel<SizeKernel>(reg, "Size", 1));
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
    SL_RETURN_IF_ERROR(add_data_kernel<ViewKernel>(reg, op, 1));
  return register_generate_ops(reg);
}

}  // namespace streamline::ops::cpu
