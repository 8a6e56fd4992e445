#include "ops/evaluator.h"

#include "core/layout_convert.h"

namespace streamline::ops {

Result<std::vector<Tensor>> evaluate_node(const KernelRegistry& reg, const graph::Graph& g, const graph::Node& node,
                                          std::span<const Tensor> inputs, const EvalOptions& options) {
  std::vector<DType> dtypes;
  std::vector<const Tensor*> constants;
  for (size_t i = 0; i < inputs.size(); ++i) {
    dtypes.push_back(inputs[i].defined() ? inputs[i].dtype() : DType::kUndefined);
    const bool is_const = options.constant_mask.empty() ||
                          (i < options.constant_mask.size() && options.constant_mask[i]);
    constants.push_back(inputs[i].defined() && is_const ? &inputs[i] : nullptr);
  }
  SL_ASSIGN_OR_RETURN(const KernelDef* def,
                      reg.find(node.op_type, node.domain, node.opset, Device::kCpu, selector_dtype(dtypes, 0)));
  // Re-select with the def's own selector input.
  SL_ASSIGN_OR_RETURN(def, reg.find(node.op_type, node.domain, node.opset, Device::kCpu,
                                    selector_dtype(dtypes, def->dtype_input)));
  KernelCreateArgs args{g, node, constants, dtypes, options.kernel_options};
  SL_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, def->create(args));

  // Inputs as the kernel will see them.
  std::vector<Tensor> given(inputs.begin(), inputs.end());
  // The layout rank-4 activations get, chosen as the planner would.
  Layout want = kernel->layout_support() == LayoutSupport::kPlainOnly ? Layout::kPlain : options.input_layout;
  if (want != Layout::kPlain && kernel->layout_support() == LayoutSupport::kPreferChannelsLast) {
    std::vector<TensorInfo> plain_infos(given.size());
    for (size_t i = 0; i < given.size(); ++i)
      if (given[i].defined()) {
        plain_infos[i].dtype = given[i].dtype();
        plain_infos[i].shape = given[i].shape();
        plain_infos[i].value = constants[i] ? &given[i] : nullptr;
      }
    want = kernel->preferred_layout(plain_infos, layout_block(options.input_layout));
  }
  std::vector<TensorInfo> infos;
  for (size_t i = 0; i < given.size(); ++i) {
    const bool activation = given[i].defined() && !constants[i] && given[i].shape().rank() == 4;
    if (want != Layout::kPlain && activation && given[i].shape()[1] % std::max(1, layout_block(want)) == 0) {
      SL_ASSIGN_OR_RETURN(given[i], to_layout(given[i], want));
    }
    TensorInfo info;
    if (given[i].defined()) {
      info.dtype = given[i].dtype();
      info.shape = given[i].shape();
      info.layout = given[i].layout();
      info.value = constants[i] ? &given[i] : nullptr;
    }
    infos.push_back(info);
  }
  SL_ASSIGN_OR_RETURN(ReshapeResult rr, kernel->reshape(infos));
  std::vector<Tensor> outs;
  for (const auto& o : rr.outputs) outs.push_back(Tensor::empty(o.dtype, o.shape, o.layout));
  auto workspace = AlignedBuffer::allocate(rr.workspace_bytes);
  RunContext rc;
  rc.inputs = given;
  rc.outputs = outs;
  rc.workspace = workspace ? workspace->data() : nullptr;
  rc.state = rr.state.get();
  rc.num_threads = options.num_threads;
  SL_RETURN_IF_ERROR(kernel->run(rc).with_context(node.describe()));
  for (auto& o : outs) {
    SL_ASSIGN_OR_RETURN(o, to_layout(o, Layout::kPlain));
  }
  return outs;
}

Result<std::vector<Tensor>> KernelEvaluator::evaluate(const graph::Graph& g, const graph::Node& node,
                                                      std::span<const Tensor> inputs) {
  return evaluate_node(reg_, g, node, inputs);
}

}  // namespace streamline::ops
