// streamline.LayoutConvert: copies its input into the layout named by `to` ("plain",
// "channels_last", "nChw8c" or "nChw16c"). The planner inserts it where a producer's layout differs from what a
// consumer wants; it never changes the logical shape.

#include "core/layout_convert.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

class LayoutConvertKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args) {
    auto k = std::make_unique<LayoutConvertKernel>();
    k->who_ = args.node.describe();
    const std::string to = args.node.attr_string("to", "");
    if (to == "plain")
      k->to_ = Layout::kPlain;
    else if (to == "channels_last")
      k->to_ = Layout::kChannelsLast;
    else if (to == "nChw8c")
      k->to_ = Layout::kBlocked8;
    else if (to == "nChw16c")
      k->to_ = Layout::kBlocked16;
    else
      return invalid_argument(
          k->who_ + ": attribute 'to' must be \"plain\", \"channels_last\", \"nChw8c\" or \"nChw16c\", got '" + to +
          "'");
    if (args.node.inputs.size() != 1 || args.node.inputs[0] == graph::kNoValue)
      return invalid_argument(k->who_ + ": expects one input");
    return std::unique_ptr<Kernel>(std::move(k));
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }
  bool accepts(std::span<const TensorInfo> inputs) const override {
    return inputs.size() == 1 && (inputs[0].layout == Layout::kPlain || inputs[0].shape.rank() == 4);
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.size() != 1 || !inputs[0].present()) return invalid_argument(who_ + ": expects one input");
    const TensorInfo& x = inputs[0];
    if ((to_ != Layout::kPlain || x.layout != Layout::kPlain) && x.shape.rank() != 4)
      return invalid_argument(who_ + ": " + layout_name(to_ == Layout::kPlain ? x.layout : to_) +
                              " needs a rank-4 tensor, got " + x.shape.to_string());
    for (Layout l : {to_, x.layout})
      if (is_blocked(l) && x.shape[1] % layout_block(l) != 0)
        return invalid_argument(who_ + ": " + layout_name(l) + " needs channels divisible by " +
                                std::to_string(layout_block(l)) + ", got " + x.shape.to_string());
    if (dtype_size(x.dtype) == 0) return unsupported(who_ + ": dtype " + dtype_name(x.dtype));
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{x.dtype, x.shape, to_});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    return convert_layout(ctx.inputs[0], ctx.outputs[0], ctx.num_threads).with_context(who_);
  }

 private:
  std::string who_;
  Layout to_ = Layout::kPlain;
};

}  // namespace

Status register_layout(KernelRegistry& reg) {
  KernelDef d;
  d.op = "LayoutConvert";
  d.domain = "streamline";
  d.since_version = 1;
  d.device = Device::kCpu;
  d.dtype = DType::kUndefined;
  d.provider = "cpu";
  d.create = LayoutConvertKernel::create;
  return reg.add(std::move(d));
}

}  // namespace streamline::ops::cpu
