// CUDA Softmax and LayerNormalization: both work on contiguous rows, so the classes only work out
// rows and columns from the axis; the device code is in norm.cu.

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/launch.h"

namespace streamline::ops::cuda {
namespace {

// `axis` (negative counts from the back) normalised to [0, rank); InvalidArgument out of range.
Result<int64_t> normalise_axis(int64_t axis, size_t rank, const std::string& who) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    return invalid_argument(who + ": axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

Status expect_plain_float(const TensorInfo& t, const std::string& who) {
  if (t.dtype != DType::kFloat32 || t.layout != Layout::kPlain)
    return unsupported(who + ": the CUDA kernel takes plain float32 tensors");
  return ok_status();
}

class SoftmaxKernel final : public Kernel {
 public:
  // Opset 13 normalises along `axis` only; earlier opsets flatten the input to 2-D at `axis`.
  SoftmaxKernel(int64_t axis, bool flatten, std::string who) : axis_(axis), flatten_(flatten), who_(std::move(who)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid_argument(who_ + ": expects one input");
    SL_RETURN_IF_ERROR(expect_plain_float(in[0], who_));
    const Shape& x = in[0].shape;
    if (x.rank() == 0) return invalid_argument(who_ + ": input must have rank >= 1");
    SL_ASSIGN_OR_RETURN(int64_t axis, normalise_axis(axis_, x.rank(), who_));
    if (!flatten_ && axis != static_cast<int64_t>(x.rank()) - 1)
      return unsupported(who_ + ": the CUDA Softmax normalises along the last axis only (axis " +
                         std::to_string(axis_) + " of " + x.to_string() + ")");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, x});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    SL_ASSIGN_OR_RETURN(int64_t axis, normalise_axis(axis_, x.shape().rank(), who_));
    const int64_t cols = flatten_ ? x.shape().stride(static_cast<size_t>(axis)) * x.shape()[static_cast<size_t>(axis)]
                                  : x.shape().back();
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    SL_CUDA_RETURN_IF_ERROR(launch_softmax(dev_in(x), dev_out(ctx.outputs[0]), rows, cols, stream_of(ctx)), who_);
    return ok_status();
  }

 private:
  int64_t axis_;
  bool flatten_;
  std::string who_;
};

class LayerNormKernel final : public Kernel {
 public:
  LayerNormKernel(int64_t axis, float epsilon, size_t num_outputs, std::string who)
      : axis_(axis), epsilon_(epsilon), num_outputs_(num_outputs), who_(std::move(who)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid_argument(who_ + ": needs X and Scale");
    SL_RETURN_IF_ERROR(expect_plain_float(in[0], who_));
    SL_RETURN_IF_ERROR(expect_plain_float(in[1], who_));
    const bool has_bias = in.size() > 2 && in[2].present();
    if (has_bias) SL_RETURN_IF_ERROR(expect_plain_float(in[2], who_));
    const Shape& x = in[0].shape;
    if (x.rank() == 0) return invalid_argument(who_ + ": input must have rank >= 1");
    SL_ASSIGN_OR_RETURN(int64_t axis, normalise_axis(axis_, x.rank(), who_));
    const int64_t cols = x.stride(static_cast<size_t>(axis)) * x[static_cast<size_t>(axis)];
    if (in[1].shape.numel() != cols || (has_bias && in[2].shape.numel() != cols))
      return unsupported(who_ + ": the CUDA kernel needs Scale and B with the " + std::to_string(cols) +
                         " normalized elements (got " + in[1].shape.to_string() +
                         (has_bias ? " and " + in[2].shape.to_string() : std::string()) + ")");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, x});
    // Mean and InvStdDev are not produced; they are accepted only when the graph omits them.
    Shape stat = x;
    for (size_t d = static_cast<size_t>(axis); d < x.rank(); ++d) stat[d] = 1;
    for (size_t k = 1; k < num_outputs_; ++k) rr.outputs.push_back(OutputInfo{DType::kFloat32, stat});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    SL_ASSIGN_OR_RETURN(int64_t axis, normalise_axis(axis_, x.shape().rank(), who_));
    const int64_t cols = x.shape().stride(static_cast<size_t>(axis)) * x.shape()[static_cast<size_t>(axis)];
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    const bool has_bias = ctx.inputs.size() > 2 && ctx.inputs[2].defined();
    SL_CUDA_RETURN_IF_ERROR(
        launch_layer_norm(dev_in(x), dev_in(ctx.inputs[1]), has_bias ? dev_in(ctx.inputs[2]) : nullptr,
                          dev_out(ctx.outputs[0]), rows, cols, epsilon_, stream_of(ctx)),
        who_);
    return ok_status();
  }

 private:
  int64_t axis_;
  float epsilon_;
  size_t num_outputs_;
  std::string who_;
};

Result<std::unique_ptr<Kernel>> make_layer_norm(const KernelCreateArgs& args) {
  const graph::Node& n = args.node;
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] != graph::kNoValue)
      return unsupported(n.describe() + ": the CUDA LayerNormalization does not produce Mean/InvStdDev");
  if (n.attr_int("stash_type", 1) != 1)
    return unsupported(n.describe() + ": the CUDA LayerNormalization computes in float32 only (stash_type 1)");
  return std::unique_ptr<Kernel>(std::make_unique<LayerNormKernel>(
      n.attr_int("axis", -1), n.attr_float("epsilon", 1e-5f), n.outputs.size(), n.describe()));
}

}  // namespace

Status register_norm(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(cuda_def(
      "Softmax", 1,
      [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
        return std::unique_ptr<Kernel>(
            std::make_unique<SoftmaxKernel>(args.node.attr_int("axis", 1), true, args.node.describe()));
      },
      "", 12)));
  SL_RETURN_IF_ERROR(
      reg.add(cuda_def("Softmax", 13, [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
        return std::unique_ptr<Kernel>(
            std::make_unique<SoftmaxKernel>(args.node.attr_int("axis", -1), false, args.node.describe()));
      })));
  SL_RETURN_IF_ERROR(reg.add(cuda_def("LayerNormalization", 17, make_layer_norm)));
  return reg.add(cuda_def("LayerNormalization", 1, make_layer_norm, "streamline"));
}

}  // namespace streamline::ops::cuda
