// streamline.Gelu: y = x * 0.5 * (1 + erf(x / sqrt 2)), the node the transformer passes make from
// the erf form exporters emit, and ONNX Gelu (opset 20) for float32, whose attribute approximate =
// "tanh" selects y = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))). One vectorised pass
// (vec::erf and vec::tanh are branch-free), split across the run's threads in contiguous chunks;
// may run in place.

#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/math_vec.h"

namespace streamline::ops::cpu {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;

constexpr float kSqrt2OverPi = 0.79788456080286536f;

void gelu_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + vec::erf(v * kInvSqrt2));
  }
}

void gelu_tanh_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + vec::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

class GeluKernel final : public Kernel {
 public:
  GeluKernel(const graph::Node& node, bool tanh_form) : who_(node.describe()), tanh_(tanh_form) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.size() != 1 || !inputs[0].present()) return invalid_argument(who_ + ": expects one input");
    if (inputs[0].dtype != DType::kFloat32)
      return unsupported(who_ + ": only float32 is supported, got " + dtype_name(inputs[0].dtype));
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{DType::kFloat32, inputs[0].shape, inputs[0].layout});
    r.inplace = {0};
    return r;
  }

  // Elementwise, so any layout works as long as the output keeps it.
  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  Status run(const RunContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    const bool tanh_form = tanh_;
    math::parallel_chunks(ctx.inputs[0].numel(), math::kExpensiveGrain, ctx.num_threads, [&](int64_t lo, int64_t hi) {
      if (tanh_form)
        gelu_tanh_span(x + lo, y + lo, hi - lo);
      else
        gelu_span(x + lo, y + lo, hi - lo);
    });
    return ok_status();
  }

 private:
  std::string who_;
  bool tanh_ = false;
};

}  // namespace

Status register_transformer(KernelRegistry& reg) {
  KernelDef d;
  d.op = "Gelu";
  d.domain = "streamline";
  d.since_version = 1;
  d.device = Device::kCpu;
  d.dtype = DType::kFloat32;
  d.provider = "cpu";
  d.create = [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(new GeluKernel(args.node, false));
  };
  SL_RETURN_IF_ERROR(reg.add(d));
  d.domain = "";
  d.since_version = 20;
  d.create = [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    const std::string approx = args.node.attr_string("approximate", "none");
    if (approx != "none" && approx != "tanh")
      return invalid_argument(args.node.describe() + ": approximate must be 'none' or 'tanh', got '" + approx + "'");
    return std::unique_ptr<Kernel>(new GeluKernel(args.node, approx == "tanh"));
  };
  return reg.add(std::move(d));
}

}  // namespace streamline::ops::cpu
