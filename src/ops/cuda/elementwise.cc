// CUDA elementwise kernels: unary ops, Add/Sub/Mul/Div with numpy broadcasting, and Transpose,
// each registered for float32 and float16 (fp32 arithmetic either way). The device code is in
// elementwise.cu; these classes check shapes and dtypes and fill the launch structs.

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/epilogue.h"
#include "ops/cuda/launch.h"
#include "ops/data_shapes.h"
#include "ops/op_params.h"

namespace streamline::ops::cuda {
namespace {

class UnaryKernel final : public Kernel {
 public:
  UnaryKernel(UnaryOp op, DType dtype, std::string who) : op_(op), dtype_(dtype), who_(std::move(who)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid_argument(who_ + ": expects one input");
    SL_RETURN_IF_ERROR(expect_dtype(in[0], dtype_, who_));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dtype_, in[0].shape});
    rr.inplace = {0};  // each thread reads and writes the same element
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    SL_CUDA_RETURN_IF_ERROR(
        launch_unary(op_, elem_type_of(dtype_), x.raw(), ctx.outputs[0].raw(), x.numel(), stream_of(ctx)), who_);
    return ok_status();
  }

 private:
  UnaryOp op_;
  DType dtype_;
  std::string who_;
};

// Per output dim, the element stride of `in` (0 where it broadcasts); `in` is right-aligned.
void broadcast_strides(const Shape& in, const Shape& out, int64_t* strides) {
  const size_t rank = out.rank();
  int64_t s = 1;
  for (size_t k = rank; k-- > 0;) {
    if (k + in.rank() < rank) {
      strides[k] = 0;
      continue;
    }
    const int64_t d = in[k + in.rank() - rank];
    strides[k] = d == 1 ? 0 : s;
    s *= d;
  }
}

class BinaryKernel final : public Kernel {
 public:
  BinaryKernel(BinaryOp op, DType dtype, std::string who) : op_(op), dtype_(dtype), who_(std::move(who)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid_argument(who_ + ": expects two inputs");
    SL_RETURN_IF_ERROR(expect_dtype(in[0], dtype_, who_));
    SL_RETURN_IF_ERROR(expect_dtype(in[1], dtype_, who_));
    SL_ASSIGN_OR_RETURN(Shape out, broadcast_shape(in[0].shape, in[1].shape, who_));
    if (out.rank() > static_cast<size_t>(kMaxRank))
      return unsupported(who_ + ": the CUDA kernel broadcasts up to rank " + std::to_string(kMaxRank));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dtype_, out});
    // Safe to write over an input of the output's shape: element i reads only index i of it.
    rr.inplace = {in[0].shape == out ? 0 : in[1].shape == out ? 1 : -1};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& a = ctx.inputs[0];
    const Tensor& b = ctx.inputs[1];
    const Tensor& y = ctx.outputs[0];
    BroadcastDims d;
    d.rank = static_cast<int32_t>(y.shape().rank());
    for (size_t k = 0; k < y.shape().rank(); ++k) d.out[k] = y.shape()[k];
    broadcast_strides(a.shape(), y.shape(), d.a_stride);
    broadcast_strides(b.shape(), y.shape(), d.b_stride);
    d.same_shape = a.shape() == y.shape() && b.shape() == y.shape();
    SL_CUDA_RETURN_IF_ERROR(
        launch_binary(op_, elem_type_of(dtype_), a.raw(), b.raw(), y.raw(), y.numel(), d, stream_of(ctx)), who_);
    return ok_status();
  }

 private:
  BinaryOp op_;
  DType dtype_;
  std::string who_;
};

// Transpose: perm checked and the output shape worked out by transpose_shape() (ops/data_shapes.h),
// as on the CPU; the device copies with the input strides permuted.
class TransposeKernel final : public Kernel {
 public:
  TransposeKernel(TransposeAttrs attrs, DType dtype, std::string who)
      : attrs_(std::move(attrs)), dtype_(dtype), who_(std::move(who)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid_argument(who_ + ": expects one input");
    SL_RETURN_IF_ERROR(expect_dtype(in[0], dtype_, who_));
    const Shape& x = in[0].shape;
    SL_ASSIGN_OR_RETURN(TransposeShapes t, transpose_shape(attrs_, x, who_));
    if (x.rank() > static_cast<size_t>(kMaxRank))
      return unsupported(who_ + ": the CUDA kernel transposes up to rank " + std::to_string(kMaxRank));
    auto d = std::make_shared<StridedCopyDims>();
    d->rank = static_cast<int32_t>(x.rank());
    for (size_t k = 0; k < x.rank(); ++k) {
      d->out[k] = t.y[k];
      d->in_stride[k] = x.stride(static_cast<size_t>(t.perm[k]));
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dtype_, t.y});
    rr.state = std::move(d);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const auto* d = static_cast<const StridedCopyDims*>(ctx.state);
    if (d == nullptr) return internal_error(who_ + ": run without reshape state");
    const Tensor& y = ctx.outputs[0];
    SL_CUDA_RETURN_IF_ERROR(
        launch_strided_copy(elem_type_of(dtype_), ctx.inputs[0].raw(), y.raw(), y.numel(), *d, stream_of(ctx)), who_);
    return ok_status();
  }

 private:
  TransposeAttrs attrs_;
  DType dtype_;
  std::string who_;
};

KernelFactory unary_factory(UnaryOp op, DType dtype) {
  return [op, dtype](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    if (args.node.op_type == "Gelu" && args.node.domain.empty() &&
        args.node.attr_string("approximate", "none") != "none")
      return unsupported(args.node.describe() + ": the CUDA Gelu supports approximate=\"none\" only");
    return std::unique_ptr<Kernel>(std::make_unique<UnaryKernel>(op, dtype, args.node.describe()));
  };
}

KernelFactory binary_factory(BinaryOp op, DType dtype) {
  return [op, dtype](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<BinaryKernel>(op, dtype, args.node.describe()));
  };
}

}  // namespace

Status register_elementwise(KernelRegistry& reg) {
  const std::pair<const char*, UnaryOp> unary[] = {{"Relu", UnaryOp::kRelu}, {"Sigmoid", UnaryOp::kSigmoid},
                                                   {"Tanh", UnaryOp::kTanh}, {"Exp", UnaryOp::kExp},
                                                   {"Log", UnaryOp::kLog},   {"Sqrt", UnaryOp::kSqrt},
                                                   {"Neg", UnaryOp::kNeg},   {"Abs", UnaryOp::kAbs},
                                                   {"Erf", UnaryOp::kErf},   {"Reciprocal", UnaryOp::kReciprocal}};
  const std::pair<const char*, BinaryOp> binary[] = {
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub}, {"Mul", BinaryOp::kMul}, {"Div", BinaryOp::kDiv}};
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    for (const auto& [op, kind] : unary)
      SL_RETURN_IF_ERROR(reg.add(cuda_def(op, 6, unary_factory(kind, t), "", INT_MAX, t)));
    SL_RETURN_IF_ERROR(reg.add(cuda_def("Gelu", 20, unary_factory(UnaryOp::kGelu, t), "", INT_MAX, t)));
    SL_RETURN_IF_ERROR(reg.add(cuda_def("Gelu", 1, unary_factory(UnaryOp::kGelu, t), "streamline", INT_MAX, t)));
    // Opset 7 is where these ops took numpy broadcasting.
    for (const auto& [op, kind] : binary)
      SL_RETURN_IF_ERROR(reg.add(cuda_def(op, 7, binary_factory(kind, t), "", INT_MAX, t)));
    SL_RETURN_IF_ERROR(reg.add(cuda_def(
        "Transpose", 1,
        [t](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
          return std::unique_ptr<Kernel>(
              std::make_unique<TransposeKernel>(read_transpose_attrs(args.node), t, args.node.describe()));
        },
        "", INT_MAX, t)));
  }
  return ok_status();
}

}  // namespace streamline::ops::cuda
