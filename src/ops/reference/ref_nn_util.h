#pragma once
// Helpers shared by the reference conv, matmul and pool kernels: fused activations, spatial
// attribute lists, and a kernel base for float32 reference kernels.
//
//   SL_ASSIGN_OR_RETURN(RefActivation act, RefActivation::parse(node));
//   y = act(y);

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "ops/kernel.h"
#include "ops/registry.h"

namespace streamline::ops::reference {

// streamline's `activation` / `activation_params` attributes, applied element by element.
struct RefActivation {
  std::string name;  // "" for none
  float p0 = 0.f, p1 = 0.f;

  static Result<RefActivation> parse(const graph::Node& node) {
    RefActivation a;
    a.name = node.attr_string("activation", "");
    const std::vector<float> p = node.attr_floats("activation_params");
    if (a.name == "None" || a.name == "Identity") a.name.clear();
    if (a.name == "LeakyRelu") {
      a.p0 = p.empty() ? 0.01f : p[0];
    } else if (a.name == "Clip") {
      a.p0 = p.size() > 0 ? p[0] : -FLT_MAX;
      a.p1 = p.size() > 1 ? p[1] : FLT_MAX;
    } else if (a.name == "HardSigmoid") {
      a.p0 = p.size() > 0 ? p[0] : 0.2f;
      a.p1 = p.size() > 1 ? p[1] : 0.5f;
    } else if (!a.name.empty() && a.name != "Relu" && a.name != "Sigmoid" && a.name != "Tanh") {
      return invalid_argument(node.describe() + ": unknown activation '" + a.name + "'");
    }
    return a;
  }

  float operator()(float x) const {
    if (name.empty()) return x;
    if (name == "Relu") return x > 0.f ? x : 0.f;
    if (name == "LeakyRelu") return x >= 0.f ? x : p0 * x;
    if (name == "Clip") return std::min(std::max(x, p0), p1);
    if (name == "Sigmoid") return 1.f / (1.f + std::exp(-x));
    if (name == "Tanh") return std::tanh(x);
    if (name == "HardSigmoid") return std::max(0.f, std::min(1.f, p0 * x + p1));
    return x;
  }
};

// The ints attribute `name` with exactly `n` values, or `n` copies of `def` when absent.
inline Result<std::vector<int64_t>> ints_attr(const graph::Node& node, const char* name, size_t n, int64_t def) {
  std::vector<int64_t> v = node.attr_ints(name);
  if (v.empty()) return std::vector<int64_t>(n, def);
  if (v.size() != n)
    return invalid_argument(node.describe() + ": " + name + " has " + std::to_string(v.size()) + " values, expected " +
                            std::to_string(n));
  return v;
}

// Base for reference kernels: float32 inputs only, plain layout, no state. Subclasses compute
// output shapes in `shapes` and the values in `compute`.
class RefKernel : public Kernel {
 public:
  explicit RefKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    std::vector<Shape> in;
    for (const auto& i : inputs) {
      if (i.present() && i.dtype != DType::kFloat32)
        return unsupported(node_.describe() + ": reference kernel supports float32 only");
      in.push_back(i.present() ? i.shape : Shape{});
    }
    std::vector<bool> present;
    for (const auto& i : inputs) present.push_back(i.present());
    SL_ASSIGN_OR_RETURN(std::vector<Shape> outs, shapes(in, present));
    ReshapeResult r;
    for (const auto& s : outs) r.outputs.push_back(OutputInfo{DType::kFloat32, s, Layout::kPlain});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    for (const auto& t : ctx.inputs)
      if (t.defined() && t.layout() != Layout::kPlain)
        return invalid_argument(node_.describe() + ": reference kernels take plain layout only");
    return compute(ctx.inputs, ctx.outputs);
  }

 protected:
  virtual Result<std::vector<Shape>> shapes(const std::vector<Shape>& in, const std::vector<bool>& present) const = 0;
  virtual Status compute(std::span<const Tensor> in, std::span<Tensor> out) const = 0;

  graph::Node node_;
};

// A reference KernelDef for float32 `op` in `domain` from `since`, made by `make(node)`.
template <typename K>
KernelDef ref_def(std::string op, std::string domain, int since) {
  KernelDef d;
  d.op = std::move(op);
  d.domain = std::move(domain);
  d.since_version = since;
  d.device = Device::kCpu;
  d.dtype = DType::kFloat32;
  d.provider = "reference";
  d.create = [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<K>(args.node);
    SL_RETURN_IF_ERROR(k->init());
    return std::unique_ptr<Kernel>(std::move(k));
  };
  return d;
}

}  // namespace streamline::ops::reference
