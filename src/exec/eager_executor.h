#pragma once
// The eager executor: an ExecutionContext for eager plans (plan::ExecutionPlan::eager), which run
// the model's graph node by node because some output shape depends on values computed during the
// run (ops/eager.h). The CPU context hands its eager plans to one of these.
//
//   exec::EagerExecutionContext ctx;
//   exec::RunOptions ro;  ro.num_threads = 2;  ro.observer = &trace;   // sees every node
//   SL_RETURN_IF_ERROR(ctx.run(*eager_plan, inputs, &outs, ro));
//
// Observers see the same hooks as for planned runs: on_run_begin, on_step_begin and on_step_end
// around each node (`step` indexes plan.steps, which list the nodes in run order; stream 0), then
// on_run_end. Values are allocated per node, so arena_bytes() is 0. Safe mode has no meaning
// here (there is no arena to guard) and is ignored. Outputs are always owned tensors.

#include "exec/execution_context.h"

namespace streamline::exec {

class EagerExecutionContext final : public ExecutionContext {
 public:
  EagerExecutionContext() = default;
  EagerExecutionContext(const EagerExecutionContext&) = delete;
  EagerExecutionContext& operator=(const EagerExecutionContext&) = delete;

  // InvalidArgument for a plan that is not eager. Errors name the node ("Reshape 'r1': ...").
  [[nodiscard]] Status run(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs,
                           std::vector<Tensor>* outputs, const RunOptions& options) override;
  [[nodiscard]] Status run_values(const plan::ExecutionPlan& plan, std::span<const AnyValue> inputs,
                                  std::vector<AnyValue>* outputs, const RunOptions& options) override;
  size_t arena_bytes() const override { return 0; }
  int num_streams() const override { return 1; }
  std::string device() const override { return "eager"; }
};

}  // namespace streamline::exec
