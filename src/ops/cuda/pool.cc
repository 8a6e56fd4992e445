// CUDA MaxPool, AveragePool (1-D and 2-D, NCHW) and GlobalAveragePool / GlobalMaxPool (any rank).
// Output sizes are the CPU kernel's (pool_axes() in ops/op_params.h): pads or auto_pad, strides,
// dilations, ceil_mode (a window that would start in the end padding is dropped). The device code
// is in pool.cu: our own kernels, not cuDNN, so ceil_mode and ONNX's count_include_pad divisor need
// no correction pass. float32 and float16, float32 arithmetic.

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/launch_tensor.h"
#include "ops/op_params.h"

namespace streamline::ops::cuda {
namespace {

enum class PoolKind { kMax, kAvg, kGlobalMax, kGlobalAvg };

// The float ElemType of `t`; Unsupported for other dtypes.
Result<ElemType> float_elem(DType t, const std::string& who) {
  if (t == DType::kFloat32) return ElemType::kF32;
  if (t == DType::kFloat16) return ElemType::kF16;
  return unsupported(who + ": the CUDA kernel takes float32 or float16, got " + dtype_name(t));
}

class PoolKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args, PoolKind kind) {
    auto k = std::make_unique<PoolKernel>();
    const graph::Node& node = args.node;
    k->who_ = node.describe();
    k->kind_ = kind;
    k->has_indices_ = node.outputs.size() > 1 && node.outputs[1] != graph::kNoValue;
    SL_ASSIGN_OR_RETURN(k->attrs_, read_pool_attrs(node, k->global(), k->who_));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (has_indices_) return unsupported(who_ + ": the Indices output of MaxPool is not supported");
    if (in.empty() || !in[0].present()) return invalid_argument(who_ + ": needs input X");
    SL_RETURN_IF_ERROR(float_elem(in[0].dtype, who_).status());
    if (in[0].layout != Layout::kPlain) return unsupported(who_ + ": the CUDA kernel takes plain (NCHW) layouts only");
    const Shape& x = in[0].shape;
    if (global() && x.rank() < 3) return invalid_argument(who_ + ": input must have rank >= 3, got " + x.to_string());
    if (!global() && (x.rank() < 3 || x.rank() > 4))
      return unsupported(who_ + ": the CUDA kernel pools 1-D and 2-D inputs (rank 3 or 4), got " + x.to_string());
    // The window of each spatial axis (the whole axis for a global pool), as the CPU kernel has it.
    SL_ASSIGN_OR_RETURN(std::vector<PoolAxis> axes, pool_axes(attrs_, x, global(), who_));
    Shape y{x[0], x[1]};
    for (const PoolAxis& a : axes) y.push_back(a.out);
    ReshapeResult rr;
    if (global()) {
      // [N * C] outputs, each reducing a contiguous plane.
      auto d = std::make_shared<ReduceDims>();
      d->kept_rank = 1;
      d->kept[0] = x[0] * x[1];
      d->kept_stride[0] = x.stride(1);
      d->red_rank = 1;
      d->red[0] = x.stride(1);
      d->red_stride[0] = 1;
      d->out_numel = d->kept[0];
      d->red_numel = d->red[0];
      d->inner_reduced = true;
      rr.state = std::move(d);
    } else {
      rr.state = std::make_shared<PoolDims>(pool_dims(x, axes));
    }
    rr.outputs.push_back(OutputInfo{in[0].dtype, y});
    return rr;
  }

  // The state is a ReduceDims for the global pools, a PoolDims for the others.
  Status run(const RunContext& ctx) const override {
    if (ctx.state == nullptr) return internal_error(who_ + ": run without reshape state");
    const Tensor& x = ctx.inputs[0];
    const Tensor& y = ctx.outputs[0];
    SL_ASSIGN_OR_RETURN(ElemType t, float_elem(x.dtype(), who_));
    if (global()) {
      const ReduceOp op = kind_ == PoolKind::kGlobalMax ? ReduceOp::kMax : ReduceOp::kMean;
      SL_CUDA_RETURN_IF_ERROR(
          launch_reduce(op, t, x.raw(), y.raw(), *static_cast<const ReduceDims*>(ctx.state), stream_of(ctx)), who_);
      return ok_status();
    }
    const PoolOp op = kind_ == PoolKind::kMax ? PoolOp::kMax : PoolOp::kAvg;
    SL_CUDA_RETURN_IF_ERROR(
        launch_pool2d(op, t, x.raw(), y.raw(), *static_cast<const PoolDims*>(ctx.state), stream_of(ctx)), who_);
    return ok_status();
  }

 private:
  bool global() const { return kind_ == PoolKind::kGlobalAvg || kind_ == PoolKind::kGlobalMax; }

  // The launch parameters; a 1-D pool is a 2-D one over [1, W] planes.
  PoolDims pool_dims(const Shape& x, const std::vector<PoolAxis>& axes) const {
    const PoolAxis h = axes.size() == 2 ? axes[0] : PoolAxis{}, w = axes.back();
    PoolDims d;
    d.planes = x[0] * x[1];
    d.in_h = h.in;
    d.in_w = w.in;
    d.out_h = h.out;
    d.out_w = w.out;
    d.k_h = h.k;
    d.k_w = w.k;
    d.s_h = h.s;
    d.s_w = w.s;
    d.d_h = h.d;
    d.d_w = w.d;
    d.pad_top = h.pad_begin;
    d.pad_left = w.pad_begin;
    // count_include_pad counts the taps inside the input and its declared padding, not the extra
    // end padding ceil_mode implies.
    d.limit_h = h.in + h.pad_end;
    d.limit_w = w.in + w.pad_end;
    d.count_include_pad = attrs_.count_include_pad;
    return d;
  }

  std::string who_;
  PoolKind kind_ = PoolKind::kMax;
  bool has_indices_ = false;
  PoolAttrs attrs_;
};

}  // namespace

Status register_pool(KernelRegistry& reg) {
  const std::pair<const char*, PoolKind> ops[] = {{"MaxPool", PoolKind::kMax},
                                                  {"AveragePool", PoolKind::kAvg},
                                                  {"GlobalMaxPool", PoolKind::kGlobalMax},
                                                  {"GlobalAveragePool", PoolKind::kGlobalAvg}};
  for (const auto& [op, kind] : ops)
    for (DType t : {DType::kFloat32, DType::kFloat16})
      SL_RETURN_IF_ERROR(reg.add(cuda_def(
          op, 1, [kind](const KernelCreateArgs& args) { return PoolKernel::create(args, kind); }, "", INT_MAX, t)));
  return ok_status();
}

}  // namespace streamline::ops::cuda
