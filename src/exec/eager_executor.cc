#include "exec/eager_executor.h"

#include <optional>

#include "ops/eager.h"

namespace streamline::exec {
namespace {

// Turns run_eager's node hooks into the observer's step hooks.
class StepHooks final : public ops::NodeHooks {
 public:
  StepHooks(const plan::ExecutionPlan& plan, ExecObserver& observer) : plan_(plan), observer_(observer) {}
  void on_node_begin(graph::NodeId node) override {
    if (const int step = step_of(node); step >= 0) observer_.on_step_begin(plan_, step, 0);
  }
  void on_node_end(graph::NodeId node) override {
    if (const int step = step_of(node); step >= 0) observer_.on_step_end(plan_, step, 0);
  }

 private:
  int step_of(graph::NodeId node) const {
    const auto& map = plan_.eager->step_of_node;
    const size_t at = static_cast<size_t>(node);
    return at < map.size() ? map[at] : -1;
  }
  const plan::ExecutionPlan& plan_;
  ExecObserver& observer_;
};

}  // namespace

Status EagerExecutionContext::run_values(const plan::ExecutionPlan& plan, std::span<const AnyValue> inputs,
                                         std::vector<AnyValue>* outputs, const RunOptions& options) {
  if (!plan.eager || !plan.eager->graph) return invalid_argument("the eager executor runs eager plans only");
  ops::EagerOptions eo;
  eo.num_threads = options.num_threads;
  eo.reshapes = plan.eager->reshapes.get();
  eo.layouts = plan.eager->layouts;
  std::optional<StepHooks> hooks;
  if (options.observer) {
    hooks.emplace(plan, *options.observer);
    eo.hooks = &*hooks;
    options.observer->on_run_begin(plan);
  }
  Result<std::vector<AnyValue>> outs = ops::run_eager_values(*plan.eager->graph, plan.eager->kernels, inputs, eo);
  if (options.observer) options.observer->on_run_end(plan);
  SL_RETURN_IF_ERROR(outs.status());
  if (outputs) *outputs = std::move(outs).value();
  return ok_status();
}

Status EagerExecutionContext::run(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs,
                                  std::vector<Tensor>* outputs, const RunOptions& options) {
  const std::vector<AnyValue> values(inputs.begin(), inputs.end());
  std::vector<AnyValue> outs;
  SL_RETURN_IF_ERROR(run_values(plan, values, &outs, options));
  if (!outputs) return ok_status();
  outputs->clear();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].is_tensor())
      return invalid_argument("output '" + plan.output_names[i] + "' is a " +
                              value_type_name(outs[i].kind(), outs[i].elem_dtype()) + ", not a tensor");
    outputs->push_back(outs[i].tensor());
  }
  return ok_status();
}

}  // namespace streamline::exec
