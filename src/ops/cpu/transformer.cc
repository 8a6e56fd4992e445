// streamline.Gelu: y = x * 0.5 * (1 + erf(x / sqrt 2)), the node the transformer passes make from
// the erf form exporters emit. One vectorised pass (vec::erf is branch-free), split across the
// run's threads in contiguous chunks; may run in place.

#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/math_vec.h"

namespace streamline::ops::cpu {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;

void gelu_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + vec::erf(v * kInvSqrt2));
  }
}

class GeluKernel final : public Kernel {
 public:
  explicit GeluKernel(const graph::Node& node) : who_(node.describe()) {}

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
    math::parallel_chunks(ctx.inputs[0].numel(), math::kExpensiveGrain, ctx.num_threads,
                          [&](int64_t lo, int64_t hi) { gelu_span(x + lo, y + lo, hi - lo); });
    return ok_status();
  }

 private:
  std::string who_;
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
    return std::unique_ptr<Kernel>(new GeluKernel(args.node));
  };
  return reg.add(std::move(d));
}

}  // namespace streamline::ops::cpu
