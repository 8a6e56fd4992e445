// CUDA MaxPool, AveragePool (1-D and 2-D, NCHW) and GlobalAveragePool / GlobalMaxPool (any rank).
// Output sizes follow the CPU kernel (ops/cpu/pool.cc): pads or auto_pad, strides, dilations,
// ceil_mode (a window that would start in the end padding is dropped). The device code is in
// pool.cu: our own kernels, not cuDNN, so ceil_mode and ONNX's count_include_pad divisor need no
// correction pass. float32 and float16, float32 arithmetic.

#include <algorithm>

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/launch_tensor.h"

namespace streamline::ops::cuda {
namespace {

enum class PoolKind { kMax, kAvg, kGlobalMax, kGlobalAvg };

// The float ElemType of `t`; Unsupported for other dtypes.
Result<ElemType> float_elem(DType t, const std::string& who) {
  if (t == DType::kFloat32) return ElemType::kF32;
  if (t == DType::kFloat16) return ElemType::kF16;
  return unsupported(who + ": the CUDA kernel takes float32 or float16, got " + dtype_name(t));
}

// Window geometry of one spatial axis.
struct Axis {
  int64_t in = 1, k = 1, s = 1, d = 1, pad_begin = 0, limit = 1, out = 1;
};

class PoolKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args, PoolKind kind) {
    auto k = std::make_unique<PoolKernel>();
    const graph::Node& node = args.node;
    k->who_ = node.describe();
    k->kind_ = kind;
    k->has_indices_ = node.outputs.size() > 1 && node.outputs[1] != graph::kNoValue;
    if (node.inputs.size() != 1) return invalid_argument(k->who_ + ": expects one input");
    const std::string ap = node.attr_string("auto_pad", "NOTSET");
    if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID" && !ap.empty())
      return invalid_argument(k->who_ + ": unknown auto_pad '" + ap + "'");
    k->auto_pad_ = ap.empty() ? "NOTSET" : ap;
    k->ceil_mode_ = node.attr_int("ceil_mode", 0) != 0;
    k->count_include_pad_ = node.attr_int("count_include_pad", 0) != 0;
    k->kernel_shape_ = node.attr_ints("kernel_shape");
    k->strides_ = node.attr_ints("strides");
    k->dilations_ = node.attr_ints("dilations");
    k->pads_ = node.attr_ints("pads");
    if (!k->global() && k->kernel_shape_.empty()) return invalid_argument(k->who_ + ": kernel_shape is required");
    for (int64_t v : k->kernel_shape_)
      if (v < 1) return invalid_argument(k->who_ + ": kernel_shape values must be >= 1");
    for (int64_t v : k->strides_)
      if (v < 1) return invalid_argument(k->who_ + ": strides must be >= 1");
    for (int64_t v : k->dilations_)
      if (v < 1) return invalid_argument(k->who_ + ": dilations must be >= 1");
    for (int64_t v : k->pads_)
      if (v < 0) return invalid_argument(k->who_ + ": pads must be >= 0");
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (has_indices_) return unsupported(who_ + ": the Indices output of MaxPool is not supported");
    if (in.empty() || !in[0].present()) return invalid_argument(who_ + ": needs input X");
    SL_RETURN_IF_ERROR(float_elem(in[0].dtype, who_).status());
    if (in[0].layout != Layout::kPlain) return unsupported(who_ + ": the CUDA kernel takes plain (NCHW) layouts only");
    const Shape& x = in[0].shape;
    ReshapeResult rr;
    Shape y{};
    if (global()) {
      if (x.rank() < 3) return invalid_argument(who_ + ": input must have rank >= 3, got " + x.to_string());
      y = Shape{x[0], x[1]};
      for (size_t i = 2; i < x.rank(); ++i) y.push_back(1);
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
      SL_ASSIGN_OR_RETURN(std::vector<Axis> axes, geometry(x));
      y = Shape{x[0], x[1]};
      for (const Axis& a : axes) y.push_back(a.out);
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

  // Per spatial axis: the window and the output size, as the ONNX spec and the CPU kernel say.
  Result<std::vector<Axis>> geometry(const Shape& x) const {
    if (x.rank() < 3 || x.rank() > 4)
      return unsupported(who_ + ": the CUDA kernel pools 1-D and 2-D inputs (rank 3 or 4), got " + x.to_string());
    const size_t nsp = x.rank() - 2;
    auto check = [&](const std::vector<int64_t>& v, size_t n, const char* name) -> Status {
      if (!v.empty() && v.size() != n)
        return invalid_argument(who_ + ": " + name + " has " + std::to_string(v.size()) + " values, expected " +
                                std::to_string(n));
      return ok_status();
    };
    SL_RETURN_IF_ERROR(check(kernel_shape_, nsp, "kernel_shape"));
    SL_RETURN_IF_ERROR(check(strides_, nsp, "strides"));
    SL_RETURN_IF_ERROR(check(dilations_, nsp, "dilations"));
    SL_RETURN_IF_ERROR(check(pads_, 2 * nsp, "pads"));
    std::vector<Axis> axes;
    for (size_t i = 0; i < nsp; ++i) {
      Axis a;
      a.in = x[i + 2];
      a.k = kernel_shape_[i];
      a.s = strides_.empty() ? 1 : strides_[i];
      a.d = dilations_.empty() ? 1 : dilations_[i];
      const int64_t dk = (a.k - 1) * a.d + 1;
      int64_t pad_end = 0;
      if (auto_pad_ == "SAME_UPPER" || auto_pad_ == "SAME_LOWER") {
        a.out = (a.in + a.s - 1) / a.s;
        const int64_t total = std::max<int64_t>(0, (a.out - 1) * a.s + dk - a.in);
        a.pad_begin = auto_pad_ == "SAME_UPPER" ? total / 2 : total - total / 2;
        pad_end = total - a.pad_begin;
      } else {
        if (auto_pad_ == "NOTSET" && !pads_.empty()) {
          a.pad_begin = pads_[i];
          pad_end = pads_[i + nsp];
        }
        const int64_t span = a.in + a.pad_begin + pad_end - dk;
        if (span < 0)
          return invalid_argument(who_ + ": kernel extent " + std::to_string(dk) + " exceeds padded input " +
                                  std::to_string(a.in + a.pad_begin + pad_end));
        a.out = ceil_mode_ ? (span + a.s - 1) / a.s + 1 : span / a.s + 1;
        // A window that would start in the end padding is dropped.
        if (ceil_mode_ && (a.out - 1) * a.s >= a.in + a.pad_begin) --a.out;
      }
      if (a.out < 1) return invalid_argument(who_ + ": non-positive output size along axis " + std::to_string(i + 2));
      // count_include_pad counts the taps inside the input and its declared padding, not the
      // extra end padding ceil_mode implies.
      a.limit = a.in + pad_end;
      axes.push_back(a);
    }
    return axes;
  }

  // The launch parameters; a 1-D pool is a 2-D one over [1, W] planes.
  PoolDims pool_dims(const Shape& x, const std::vector<Axis>& axes) const {
    const Axis h = axes.size() == 2 ? axes[0] : Axis{}, w = axes.back();
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
    d.limit_h = h.limit;
    d.limit_w = w.limit;
    d.count_include_pad = count_include_pad_;
    return d;
  }

  std::string who_;
  PoolKind kind_ = PoolKind::kMax;
  bool has_indices_ = false;
  std::string auto_pad_ = "NOTSET";
  bool ceil_mode_ = false;
  bool count_include_pad_ = false;
  std::vector<int64_t> kernel_shape_, strides_, dilations_, pads_;
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
