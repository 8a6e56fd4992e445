// CUDA Conv and streamline.FusedConv (Relu or no activation) through cuDNN: 2-D, NCHW, fp32 with
// FMA math (no TF32), groups, strides, dilations, symmetric pads (explicit or SAME_* with an even
// total). Bias and Relu follow as cudnnAddTensor and cudnnActivationForward on the output.
//
// The algorithm is cuDNN's first heuristic choice whose workspace fits kConvWorkspaceBytes, asked
// for in every run (cudnnGetConvolutionForwardAlgorithm_v7 is a heuristic, not a benchmark).
// cuDNN 9 marks this descriptor-based API deprecated in favour of its graph API but still ships and
// supports it; moving to the graph API (which also fuses bias and Relu) is a later step.

#include <algorithm>
#include <memory>

#include "core/cuda/cuda_status.h"
#include "ops/cuda/cuda_common.h"

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
using ActDesc = std::unique_ptr<std::remove_pointer_t<cudnnActivationDescriptor_t>,
                                DnnDeleter<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>>;

Result<TensorDesc> tensor_desc(int64_t n, int64_t c, int64_t h, int64_t w, const std::string& who) {
  cudnnTensorDescriptor_t raw = nullptr;
  SL_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&raw), who);
  TensorDesc d(raw);
  SL_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(raw, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                                      static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
                           who);
  return d;
}

class ConvKernel final : public Kernel {
 public:
  ConvKernel(const graph::Node& node, bool relu) : node_(node), relu_(relu), who_(node.describe()) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 2 || !in[0].present() || !in[1].present()) return invalid_argument(who_ + ": needs X and W");
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].present() && (in[i].dtype != DType::kFloat32 || in[i].layout != Layout::kPlain))
        return unsupported(who_ + ": the CUDA kernel takes plain float32 NCHW tensors");
    if (in.size() > 3 && in[3].present()) return unsupported(who_ + ": the CUDA FusedConv does not take a sum input");
    SL_ASSIGN_OR_RETURN(ConvGeometry g, geometry(in[0].shape, in[1].shape));
    if (in.size() > 2 && in[2].present() && in[2].shape != Shape{g.m})
      return invalid_argument(who_ + ": B must have shape [" + std::to_string(g.m) + "], got " +
                              in[2].shape.to_string());
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kFloat32, Shape{g.n, g.m, g.oh, g.ow}});
    rr.workspace_bytes = kConvWorkspaceBytes;
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    SL_ASSIGN_OR_RETURN(ConvGeometry g, geometry(ctx.inputs[0].shape(), ctx.inputs[1].shape()));
    const Tensor& y = ctx.outputs[0];
    if (y.numel() == 0) return ok_status();
    SL_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle(stream_of(ctx)));
    SL_ASSIGN_OR_RETURN(TensorDesc xd, tensor_desc(g.n, g.c, g.h, g.w, who_));
    SL_ASSIGN_OR_RETURN(TensorDesc yd, tensor_desc(g.n, g.m, g.oh, g.ow, who_));
    cudnnFilterDescriptor_t wraw = nullptr;
    SL_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&wraw), who_);
    FilterDesc wd(wraw);
    SL_CUDNN_RETURN_IF_ERROR(
        cudnnSetFilter4dDescriptor(wraw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(g.m),
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
    // FMA only: CUDNN_DEFAULT_MATH would allow TF32 tensor cores on Ampere and newer.
    SL_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(craw, CUDNN_FMA_MATH), who_);

    constexpr int kCandidates = 8;
    cudnnConvolutionFwdAlgoPerf_t perf[kCandidates];
    int returned = 0;
    SL_CUDNN_RETURN_IF_ERROR(
        cudnnGetConvolutionForwardAlgorithm_v7(h, xd.get(), wraw, craw, yd.get(), kCandidates, &returned, perf), who_);
    const size_t ws = ctx.workspace != nullptr ? kConvWorkspaceBytes : 0;
    // Prefer an algorithm ranked for FMA math (what the descriptor asks for), else any that fits.
    int pick = -1;
    for (int pass = 0; pass < 2 && pick < 0; ++pass)
      for (int i = 0; i < returned && pick < 0; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= ws &&
            (pass == 1 || perf[i].mathType == CUDNN_FMA_MATH))
          pick = i;
    if (pick < 0)
      return unsupported(who_ + ": cuDNN found no convolution algorithm within " + std::to_string(ws) + " bytes");

    const float one = 1.f, zero = 0.f;
    SL_CUDNN_RETURN_IF_ERROR(
        cudnnConvolutionForward(h, &one, xd.get(), dev_in(ctx.inputs[0]), wraw, dev_in(ctx.inputs[1]), craw,
                                perf[pick].algo, ctx.workspace, ws, &zero, yd.get(), dev_out(y)),
        who_);
    if (ctx.inputs.size() > 2 && ctx.inputs[2].defined()) {
      SL_ASSIGN_OR_RETURN(TensorDesc bd, tensor_desc(1, g.m, 1, 1, who_));
      SL_CUDNN_RETURN_IF_ERROR(cudnnAddTensor(h, &one, bd.get(), dev_in(ctx.inputs[2]), &one, yd.get(), dev_out(y)),
                               who_);
    }
    if (relu_) {
      cudnnActivationDescriptor_t araw = nullptr;
      SL_CUDNN_RETURN_IF_ERROR(cudnnCreateActivationDescriptor(&araw), who_);
      ActDesc ad(araw);
      SL_CUDNN_RETURN_IF_ERROR(cudnnSetActivationDescriptor(araw, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
                               who_);
      SL_CUDNN_RETURN_IF_ERROR(cudnnActivationForward(h, araw, &one, yd.get(), dev_out(y), &zero, yd.get(), dev_out(y)),
                               who_);
    }
    return ok_status();
  }

 private:
  Result<ConvGeometry> geometry(const Shape& x, const Shape& w) const {
    if (x.rank() != 4) return unsupported(who_ + ": the CUDA Conv is 2-D only (input " + x.to_string() + ")");
    if (w.rank() != 4) return invalid_argument(who_ + ": weight " + w.to_string() + " must be rank 4");
    ConvGeometry g;
    g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
    g.m = w[0], g.kh = w[2], g.kw = w[3];
    g.group = node_.attr_int("group", 1);
    if (g.group < 1 || g.c % g.group != 0 || w[1] * g.group != g.c || g.m % g.group != 0)
      return invalid_argument(who_ + ": weight " + w.to_string() + " does not match input " + x.to_string() +
                              " with group " + std::to_string(g.group));
    const std::vector<int64_t> ks = node_.attr_ints("kernel_shape");
    if (!ks.empty() && (ks.size() != 2 || ks[0] != g.kh || ks[1] != g.kw))
      return invalid_argument(who_ + ": kernel_shape does not match the weight " + w.to_string());
    const std::vector<int64_t> strides = node_.attr_ints("strides", {1, 1});
    const std::vector<int64_t> dil = node_.attr_ints("dilations", {1, 1});
    const std::vector<int64_t> pads = node_.attr_ints("pads", {0, 0, 0, 0});
    if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
      return invalid_argument(who_ + ": strides, dilations and pads must have 2, 2 and 4 values");
    g.stride_h = strides[0], g.stride_w = strides[1], g.dil_h = dil[0], g.dil_w = dil[1];
    if (g.stride_h < 1 || g.stride_w < 1 || g.dil_h < 1 || g.dil_w < 1)
      return invalid_argument(who_ + ": strides and dilations must be positive");
    const std::string auto_pad = node_.attr_string("auto_pad", "NOTSET");
    int64_t pb[2] = {pads[0], pads[1]}, pe[2] = {pads[2], pads[3]};
    const int64_t in_sz[2] = {g.h, g.w}, k_sz[2] = {g.kh, g.kw}, st[2] = {g.stride_h, g.stride_w},
                  dl[2] = {g.dil_h, g.dil_w};
    if (auto_pad == "VALID") {
      pb[0] = pb[1] = pe[0] = pe[1] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      for (int i = 0; i < 2; ++i) {
        const int64_t out = (in_sz[i] + st[i] - 1) / st[i];
        const int64_t total = std::max<int64_t>(0, (out - 1) * st[i] + (k_sz[i] - 1) * dl[i] + 1 - in_sz[i]);
        pb[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pe[i] = total - pb[i];
      }
    } else if (auto_pad != "NOTSET") {
      return invalid_argument(who_ + ": unknown auto_pad '" + auto_pad + "'");
    }
    if (pb[0] != pe[0] || pb[1] != pe[1])
      return unsupported(who_ + ": the CUDA Conv needs symmetric padding (cuDNN); got begin " + std::to_string(pb[0]) +
                         "," + std::to_string(pb[1]) + " end " + std::to_string(pe[0]) + "," + std::to_string(pe[1]));
    if (pb[0] < 0 || pb[1] < 0) return invalid_argument(who_ + ": negative pads");
    g.pad_h = pb[0], g.pad_w = pb[1];
    g.oh = (g.h + 2 * g.pad_h - g.dil_h * (g.kh - 1) - 1) / g.stride_h + 1;
    g.ow = (g.w + 2 * g.pad_w - g.dil_w * (g.kw - 1) - 1) / g.stride_w + 1;
    if (g.oh < 1 || g.ow < 1) return invalid_argument(who_ + ": the kernel is larger than the padded input");
    return g;
  }

  graph::Node node_;
  bool relu_;
  std::string who_;
};

}  // namespace

Status register_conv(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(cuda_def("Conv", 1, [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<ConvKernel>(args.node, false));
  })));
  return reg.add(cuda_def(
      "FusedConv", 1,
      [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
        const std::string act = args.node.attr_string("activation", "");
        if (!act.empty() && act != "Relu")
          return unsupported(args.node.describe() + ": the CUDA FusedConv fuses Relu only, not '" + act + "'");
        return std::unique_ptr<Kernel>(std::make_unique<ConvKernel>(args.node, act == "Relu"));
      },
      "streamline"));
}

}  // namespace streamline::ops::cuda
