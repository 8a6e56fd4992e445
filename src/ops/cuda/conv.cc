// CUDA Conv and streamline.FusedConv through cuDNN: 2-D, NCHW, groups, strides, dilations,
// symmetric pads (explicit or SAME_* with an even total), for float32 and float16 tensors:
//   float32, Precision::kFp32  CUDNN_FMA_MATH: true fp32, matches the CPU kernels to rounding;
//   float32, Precision::kTf32  CUDNN_TENSOR_OP_MATH: TF32 tensor cores (not ..._ALLOW_CONVERSION,
//                              which lets cuDNN convert fp32 data down to fp16);
//   float16                    half tensors, fp32 accumulation, CUDNN_TENSOR_OP_MATH.
// FusedConv computes Y = act(conv(X, W) + B + Z) (inputs X, W, B, Z; B and Z optional; the CPU
// kernels' activations, see epilogue.h). Bias, residual and activation run in one pass of our own
// epilogue kernel after the convolution. When the planner lets Y share Z's buffer (inplace), the
// convolution accumulates onto Z with cuDNN's beta = 1 and the epilogue adds only B.
//
// The algorithm is cuDNN's first heuristic choice whose workspace fits kConvWorkspaceBytes, asked
// for in every run (cudnnGetConvolutionForwardAlgorithm_v7 is a heuristic, not a benchmark).
// cuDNN 9 marks this descriptor-based API deprecated in favour of its graph API but still ships and
// supports it; moving to the graph API (which fuses the epilogue into the convolution) is a later
// step.

#include <algorithm>
#include <memory>
#include <utility>

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/epilogue.h"
#include "ops/cuda/launch.h"
#include "ops/op_params.h"

namespace streamline::ops::cuda {
namespace {

constexpr size_t kConvWorkspaceBytes = size_t{32} << 20;

struct ConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t m = 0, kh = 0, kw = 0;       // filters
  int64_t group = 1;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t oh = 0, ow = 0;
};

template <typename T, cudnnStatus_t (*Destroy)(T)>
struct DnnDeleter {
  void operator()(T p) const { (void)Destroy(p); }
};
using TensorDesc = std::unique_ptr<std::remove_pointer_t<cudnnTensorDescriptor_t>,
                                   DnnDeleter<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>>;
using FilterDesc = std::unique_ptr<std::remove_pointer_t<cudnnFilterDescriptor_t>,
                                   DnnDeleter<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>>;
using ConvDesc = std::unique_ptr<std::remove_pointer_t<cudnnConvolutionDescriptor_t>,
                                 DnnDeleter<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>>;

Result<TensorDesc> tensor_desc(cudnnDataType_t type, int64_t n, int64_t c, int64_t h, int64_t w,
                               const std::string& who) {
  cudnnTensorDescriptor_t raw = nullptr;
  SL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&raw), who);
  TensorDesc d(raw);
  SL_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(raw, CUDNN_TENSOR_NCHW, type, static_cast<int>(n),
                                                      static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
                           who);
  return d;
}

class ConvKernel final : public Kernel {
 public:
  // `tf32` applies to float32 only.
  ConvKernel(const graph::Node& node, ConvAttrs attrs, bool fused, Activation act, DType dtype, bool tf32)
      : attrs_(std::move(attrs)), fused_(fused), act_(act), dtype_(dtype), tf32_(tf32), who_(node.describe()) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const size_t max_inputs = fused_ ? 4 : 3;
    if (in.size() < 2 || in.size() > max_inputs || !in[0].present() || !in[1].present())
      return invalid_argument(who_ + ": needs X and W" + (fused_ ? ", optional B and Z" : " and an optional B"));
    for (const TensorInfo& t : in)
      if (t.present()) SL_RETURN_IF_ERROR(expect_dtype(t, dtype_, who_));
    SL_ASSIGN_OR_RETURN(ConvGeometry g, geometry(in[0].shape, in[1].shape));
    if (in.size() > 2 && in[2].present() && in[2].shape != Shape{g.m})
      return invalid_argument(who_ + ": B must have shape [" + std::to_string(g.m) + "], got " +
                              in[2].shape.to_string());
    const Shape y{g.n, g.m, g.oh, g.ow};
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dtype_, y});
    rr.workspace_bytes = kConvWorkspaceBytes;
    if (in.size() > 3 && in[3].present()) {
      if (in[3].shape != y)
        return invalid_argument(who_ + ": residual Z " + in[3].shape.to_string() + " must match output " +
                                y.to_string());
      rr.inplace = {3};  // run() accumulates onto Z when Y shares its buffer
    }
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    SL_ASSIGN_OR_RETURN(ConvGeometry g, geometry(ctx.inputs[0].shape(), ctx.inputs[1].shape()));
    const Tensor& y = ctx.outputs[0];
    if (y.numel() == 0) return ok_status();
    const cudnnDataType_t type = dtype_ == DType::kFloat16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    SL_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle(stream_of(ctx)));
    SL_ASSIGN_OR_RETURN(TensorDesc xd, tensor_desc(type, g.n, g.c, g.h, g.w, who_));
    SL_ASSIGN_OR_RETURN(TensorDesc yd, tensor_desc(type, g.n, g.m, g.oh, g.ow, who_));
    cudnnFilterDescriptor_t wraw = nullptr;
    SL_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&wraw), who_);
    FilterDesc wd(wraw);
    SL_CUDNN_RETURN_IF_ERROR(
        cudnnSetFilter4dDescriptor(wraw, type, CUDNN_TENSOR_NCHW, static_cast<int>(g.m),
                                   static_cast<int>(g.c / g.group), static_cast<int>(g.kh), static_cast<int>(g.kw)),
        who_);
    cudnnConvolutionDescriptor_t craw = nullptr;
    SL_CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(&craw), who_);
    ConvDesc cd(craw);
    SL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(craw, static_cast<int>(g.pad_h), static_cast<int>(g.pad_w),
                                                             static_cast<int>(g.stride_h), static_cast<int>(g.stride_w),
                                                             static_cast<int>(g.dil_h), static_cast<int>(g.dil_w),
                                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                             who_);
    SL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionGroupCount(craw, static_cast<int>(g.group)), who_);
    // Strict fp32 is FMA only: CUDNN_DEFAULT_MATH would allow TF32 tensor cores on Ampere and newer.
    const cudnnMathType_t math = dtype_ == DType::kFloat16 || tf32_ ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    SL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(craw, math), who_);

    constexpr int kCandidates = 8;
    cudnnConvolutionFwdAlgoPerf_t perf[kCandidates];
    int returned = 0;
    SL_CUDNN_RETURN_IF_ERROR(
        cudnnGetConvolutionForwardAlgorithm_v7(h, xd.get(), wraw, craw, yd.get(), kCandidates, &returned, perf), who_);
    const size_t ws = ctx.workspace != nullptr ? kConvWorkspaceBytes : 0;
    // Prefer an algorithm ranked for the math the descriptor asks for, else any that fits.
    int pick = -1;
    for (int pass = 0; pass < 2 && pick < 0; ++pass)
      for (int i = 0; i < returned && pick < 0; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws && (pass == 1 || perf[i].mathType == math))
          pick = i;
    if (pick < 0)
      return unsupported(who_ + ": cuDNN found no convolution algorithm within " + std::to_string(ws) + " bytes");

    // Y = conv + beta * Y: with beta 1 when Y already holds the residual Z (shared buffer).
    const Tensor* z = ctx.inputs.size() > 3 && ctx.inputs[3].defined() ? &ctx.inputs[3] : nullptr;
    const bool z_in_y = z != nullptr && z->raw() == y.raw();
    const float one = 1.f, beta = z_in_y ? 1.f : 0.f;
    SL_CUDNN_RETURN_IF_ERROR(
        cudnnConvolutionForward(h, &one, xd.get(), ctx.inputs[0].raw(), wraw, ctx.inputs[1].raw(), craw,
                                perf[pick].algo, ctx.workspace, ws, &beta, yd.get(), y.raw()),
        who_);
    EpilogueArgs e;
    e.act = act_;
    if (ctx.inputs.size() > 2 && ctx.inputs[2].defined()) {
      e.bias = ctx.inputs[2].raw();
      e.bias_inner = g.oh * g.ow;
      e.bias_count = g.m;
    }
    if (z != nullptr && !z_in_y) e.residual = z->raw();
    if (epilogue_is_identity(e)) return ok_status();
    SL_CUDA_RETURN_IF_ERROR(launch_epilogue(elem_type_of(dtype_), y.raw(), y.numel(), e, stream_of(ctx)), who_);
    return ok_status();
  }

 private:
  // The shared Conv shape function's geometry (ops/op_params.h), in the 2-D, symmetric-padding
  // form cuDNN takes.
  Result<ConvGeometry> geometry(const Shape& x, const Shape& w) const {
    if (x.rank() != 4) return unsupported(who_ + ": the CUDA Conv is 2-D only (input " + x.to_string() + ")");
    SL_ASSIGN_OR_RETURN(ConvGeom cg, conv_geometry(who_, attrs_, x, w));
    if (cg.pad_l[0] != cg.pad_r[0] || cg.pad_l[1] != cg.pad_r[1])
      return unsupported(who_ + ": the CUDA Conv needs symmetric padding (cuDNN); got begin " +
                         std::to_string(cg.pad_l[0]) + "," + std::to_string(cg.pad_l[1]) + " end " +
                         std::to_string(cg.pad_r[0]) + "," + std::to_string(cg.pad_r[1]));
    ConvGeometry g;
    g.n = cg.n, g.c = cg.c, g.h = cg.in[0], g.w = cg.in[1];
    g.m = cg.m, g.kh = cg.k[0], g.kw = cg.k[1];
    g.group = cg.group;
    g.stride_h = cg.strides[0], g.stride_w = cg.strides[1], g.dil_h = cg.dil[0], g.dil_w = cg.dil[1];
    g.pad_h = cg.pad_l[0], g.pad_w = cg.pad_l[1];
    g.oh = cg.out[0];
    g.ow = cg.out[1];
    return g;
  }

  ConvAttrs attrs_;
  bool fused_;
  Activation act_;
  DType dtype_;
  bool tf32_;
  std::string who_;
};

KernelFactory conv_factory(DType dtype, bool fused) {
  return [dtype, fused](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    Activation act;
    if (fused) {
      SL_ASSIGN_OR_RETURN(act, parse_activation(args.node, /*allow_gelu=*/false));
    }
    SL_ASSIGN_OR_RETURN(ConvAttrs attrs, read_conv_attrs(args.node, /*transposed=*/false));
    const bool tf32 = dtype == DType::kFloat32 && args.options.precision == Precision::kTf32;
    return std::unique_ptr<Kernel>(std::make_unique<ConvKernel>(args.node, std::move(attrs), fused, act, dtype, tf32));
  };
}

}  // namespace

Status register_conv(KernelRegistry& reg) {
  for (DType t : {DType::kFloat32, DType::kFloat16}) {
    SL_RETURN_IF_ERROR(reg.add(cuda_def("Conv", 1, conv_factory(t, false), "", INT_MAX, t)));
    SL_RETURN_IF_ERROR(reg.add(cuda_def("FusedConv", 1, conv_factory(t, true), "streamline", INT_MAX, t)));
  }
  return ok_status();
}

}  // namespace streamline::ops::cuda
