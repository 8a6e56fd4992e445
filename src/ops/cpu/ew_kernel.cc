// streamline.Elementwise(inputs...) -> Y: a fused group of elementwise nodes
// (graph/pass_elementwise.cc) run as one program over Y (ops/cpu/ew_exec.h). Y has the inputs'
// broadcast shape and the layout of an input of that shape (plain when none is blocked or
// channels-last); inputs of other shapes are read through their strides, so per-channel operands
// of blocked tensors need no layout change.

#include "ops/cpu/ew_exec.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_broadcast.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

class ElementwiseKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args) {
    auto k = std::make_unique<ElementwiseKernel>();
    k->who_ = args.node.describe();
    SL_ASSIGN_OR_RETURN(std::optional<graph::EwProgram> p, graph::read_program_attrs(args.node));
    if (!p) return invalid_argument(k->who_ + ": no elementwise program (ew_ops)");
    if (static_cast<size_t>(p->num_inputs) != args.node.inputs.size())
      return invalid_argument(k->who_ + ": the program reads " + std::to_string(p->num_inputs) +
                              " inputs, the node has " + std::to_string(args.node.inputs.size()));
    SL_ASSIGN_OR_RETURN(EwExec ex, EwExec::compile(*p));
    k->exec_ = std::make_shared<const EwExec>(std::move(ex));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  bool accepts(std::span<const TensorInfo> inputs) const override {
    auto out = out_shape(inputs);
    if (!out.ok()) return false;
    return ew_walk_supports(*out, out_layout(inputs, *out), operands(inputs));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!inputs[k].present()) return invalid_argument(who_ + ": input " + std::to_string(k) + " is missing");
      if (inputs[k].dtype != DType::kFloat32 && inputs[k].dtype != DType::kBool)
        return unsupported(who_ + ": input " + std::to_string(k) + " has dtype " + dtype_name(inputs[k].dtype) +
                           " (float32 or bool expected)");
    }
    SL_ASSIGN_OR_RETURN(Shape out, out_shape(inputs));
    const Layout layout = out_layout(inputs, out);
    auto walk = make_ew_walk(out, layout, operands(inputs));
    if (!walk.ok()) return walk.status().with_context(who_);
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{DType::kFloat32, out, layout});
    int share = -1;
    for (size_t k = 0; k < inputs.size() && share < 0; ++k)
      if (inputs[k].dtype == DType::kFloat32 && inputs[k].shape == out && inputs[k].layout == layout)
        share = static_cast<int>(k);
    r.inplace = {share};
    r.state = std::make_shared<EwWalk>(std::move(walk).value());
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* w = static_cast<const EwWalk*>(ctx.state);
    if (!w) return internal_error(who_ + ": run without reshape state");
    std::vector<const void*> ptrs;
    for (const Tensor& t : ctx.inputs) ptrs.push_back(t.raw());
    run_ew(*exec_, *w, ptrs, ctx.outputs[0].data<float>(), ctx.num_threads);
    return ok_status();
  }

 private:
  Result<Shape> out_shape(std::span<const TensorInfo> inputs) const {
    Shape out;
    for (size_t k = 0; k < inputs.size(); ++k) {
      Shape next;
      if (!broadcast_shapes(out, inputs[k].shape, &next))
        return invalid_argument(who_ + ": input shapes " + out.to_string() + " and " + inputs[k].shape.to_string() +
                                " cannot be broadcast together");
      out = next;
    }
    return out;
  }

  static Layout out_layout(std::span<const TensorInfo> inputs, const Shape& out) {
    if (out.rank() != 4) return Layout::kPlain;
    for (const auto& in : inputs)
      if (in.shape == out && in.layout != Layout::kPlain) return in.layout;
    return Layout::kPlain;
  }

  static std::vector<EwOperand> operands(std::span<const TensorInfo> inputs) {
    std::vector<EwOperand> ops;
    for (const auto& in : inputs) ops.push_back({in.shape, in.layout, in.dtype});
    return ops;
  }

  std::string who_;
  std::shared_ptr<const EwExec> exec_;
};

}  // namespace

Status register_fused_elementwise(KernelRegistry& reg) {
  KernelDef d;
  d.op = "Elementwise";
  d.domain = "streamline";
  d.since_version = 1;
  d.device = Device::kCpu;
  d.dtype = DType::kUndefined;
  d.provider = "cpu";
  d.create = ElementwiseKernel::create;
  return reg.add(std::move(d));
}

}  // namespace streamline::ops::cpu
