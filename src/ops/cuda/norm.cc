// CUDA Softmax and LayerNormalization: both work on contiguous rows, so the classes only work out
// rows and columns from the axis; the device code is in norm.cu. Registered for float32 and
// float16; fp16 rows are computed in fp32, and a fp16 LayerNormalization takes fp16 Scale and B.

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/epilogue.h"
#include "ops/cuda/launch.h"
#include "ops/op_params.h"

namespace streamline::ops::cuda {
namespace {

class SoftmaxKernel final : public Kernel {
 public:
  // Opset 13 normalises along `axis` only; earlier opsets flatten the input to 2-D at `axis`.
  SoftmaxKernel(int64_t axis, bool flatten, DType dtype, std::string who)
      : axis_(axis), flatten_(flatten), dtype_(dtype), who_(std::move(who)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid_argument(who_ + ": expects one input");
    SL_RETURN_IF_ERROR(expect_dtype(in[0], dtype_, who_));
    const Shape& x = in[0].shape;
    if (x.rank() == 0) return invalid_argument(who_ + ": input must have rank >= 1");
    SL_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, static_cast<int64_t>(x.rank()), who_));
    if (!flatten_ && axis != static_cast<int64_t>(x.rank()) - 1)
      return unsupported(who_ + ": the CUDA Softmax normalises along the last axis only (axis " +
                         std::to_string(axis_) + " of " + x.to_string() + ")");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dtype_, x});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    SL_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, static_cast<int64_t>(x.shape().rank()), who_));
    const int64_t cols = flatten_ ? x.shape().stride(static_cast<size_t>(axis)) * x.shape()[static_cast<size_t>(axis)]
                                  : x.shape().back();
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    SL_CUDA_RETURN_IF_ERROR(
        launch_softmax(elem_type_of(dtype_), x.raw(), ctx.outputs[0].raw(), rows, cols, stream_of(ctx)), who_);
    return ok_status();
  }

 private:
  int64_t axis_;
  bool flatten_;
  DType dtype_;
  std::string who_;
};

class LayerNormKernel final : public Kernel {
 public:
  LayerNormKernel(int64_t axis, float epsilon, size_t num_outputs, DType dtype, std::string who)
      : axis_(axis), epsilon_(epsilon), num_outputs_(num_outputs), dtype_(dtype), who_(std::move(who)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid_argument(who_ + ": needs X and Scale");
    SL_RETURN_IF_ERROR(expect_dtype(in[0], dtype_, who_));
    SL_RETURN_IF_ERROR(expect_dtype(in[1], dtype_, who_));
    const bool has_bias = in.size() > 2 && in[2].present();
    if (has_bias) SL_RETURN_IF_ERROR(expect_dtype(in[2], dtype_, who_));
    const Shape& x = in[0].shape;
    if (x.rank() == 0) return invalid_argument(who_ + ": input must have rank >= 1");
    SL_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, static_cast<int64_t>(x.rank()), who_));
    const int64_t cols = x.stride(static_cast<size_t>(axis)) * x[static_cast<size_t>(axis)];
    if (in[1].shape.numel() != cols || (has_bias && in[2].shape.numel() != cols))
      return unsupported(who_ + ": the CUDA kernel needs Scale and B with the " + std::to_string(cols) +
                         " normalized elements (got " + in[1].shape.to_string() +
                         (has_bias ? " and " + in[2].shape.to_string() : std::string()) + ")");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dtype_, x});
    // Mean and InvStdDev are not produced; they are accepted only when the graph omits them.
    Shape stat = x;
    for (size_t d = static_cast<size_t>(axis); d < x.rank(); ++d) stat[d] = 1;
    for (size_t k = 1; k < num_outputs_; ++k) rr.outputs.push_back(OutputInfo{DType::kFloat32, stat});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    SL_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, static_cast<int64_t>(x.shape().rank()), who_));
    const int64_t cols = x.shape().stride(static_cast<size_t>(axis)) * x.shape()[static_cast<size_t>(axis)];
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    const bool has_bias = ctx.inputs.size() > 2 && ctx.inputs[2].defined();
    SL_CUDA_RETURN_IF_ERROR(
        launch_layer_norm(elem_type_of(dtype_), x.raw(), ctx.inputs[1].raw(), has_bias ? ctx.inputs[2].raw() : nullptr,
                          ctx.outputs[0].raw(), rows, cols, epsilon_, stream_of(ctx)),
        who_);
    return ok_status();
  }

 private:
  int64_t axis_;
  float epsilon_;
  size_t num_outputs_;
  DType dtype_;
  std::string who_;
};

KernelFactory layer_norm_factory(DType dtype) {
  return [dtype](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    const graph::Node& n = args.node;
    for (size_t k = 1; k < n.outputs.size(); ++k)
      if (n.outputs[k] != graph::kNoValue)
        return unsupported(n.describe() + ": the CUDA LayerNormalization does not produce Mean/InvStdDev");
    if (n.attr_int("stash_type", 1) != 1)
      return unsupported(n.describe() + ": the CUDA LayerNormalization computes in float32 only (stash_type 1)");
    return std::unique_ptr<Kernel>(std::make_unique<LayerNormKernel>(
        n.attr_int("axis", -1), n.attr_float("epsilon", 1e-5f), n.outputs.size(), dtype, n.describe()));
  };
}

// Opset 1-12 Softmax flattens at `axis` (default 1); opset 13 normalises along `axis` (default -1).
KernelFactory softmax_factory(bool flatten, DType dtype) {
  return [flatten, dtype](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<SoftmaxKernel>(args.node.attr_int("axis", flatten ? 1 : -1),
                                                                   flatten, dtype, args.node.describe()));
  };
}

}  // namespace

Status register_norm(KernelRegistry& reg) {
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    SL_RETURN_IF_ERROR(reg.add(cuda_def("Softmax", 1, softmax_factory(true, t), "", 12, t)));
    SL_RETURN_IF_ERROR(reg.add(cuda_def("Softmax", 13, softmax_factory(false, t), "", INT_MAX, t)));
    SL_RETURN_IF_ERROR(reg.add(cuda_def("LayerNormalization", 17, layer_norm_factory(t), "", INT_MAX, t)));
    SL_RETURN_IF_ERROR(reg.add(cuda_def("LayerNormalization", 1, layer_norm_factory(t), "streamline", INT_MAX, t)));
  }
  return ok_status();
}

}  // namespace streamline::ops::cuda
