#pragma once
// Running one node outside a plan: for constant folding at load and for kernel tests.
//
//   SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ops::evaluate_node(reg, graph, node, inputs));
//
// Allocates outputs (this is not the hot path), converts channels-last outputs back to plain.

#include <span>
#include <vector>

#include "graph/passes.h"
#include "ops/registry.h"

namespace streamline::ops {

struct EvalOptions {
  // Per input: whether the kernel sees it as a constant at create time (prepack path). Empty = all.
  std::vector<bool> constant_mask;
  // Layout each rank-4 non-constant input is handed to the kernel in (tests use this to exercise
  // channels-last and blocked paths); plain by default. Conv-like kernels get their
  // preferred_layout() instead (with this layout's block when it is blocked), as the planner does;
  // an input whose channels are not a multiple of the block stays plain.
  Layout input_layout = Layout::kPlain;
  int num_threads = 1;
  KernelOptions kernel_options;
};

Result<std::vector<Tensor>> evaluate_node(const KernelRegistry& reg, const graph::Graph& g, const graph::Node& node,
                                          std::span<const Tensor> inputs, const EvalOptions& options = {});

// The ConstantEvaluator the graph passes use.
class KernelEvaluator final : public graph::ConstantEvaluator {
 public:
  explicit KernelEvaluator(const KernelRegistry& reg) : reg_(reg) {}
  Result<std::vector<Tensor>> evaluate(const graph::Graph& g, const graph::Node& node,
                                       std::span<const Tensor> inputs) override;

 private:
  const KernelRegistry& reg_;
};

}  // namespace streamline::ops
