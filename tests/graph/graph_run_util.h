#pragma once
// Runs a graph node by node with the CPU kernels: a tiny interpreter for graph-pass tests, so a
// rewritten graph can be compared with the original on the same inputs.
//
//   SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, testing::run_graph(g, {x}));

#include <optional>
#include <vector>

#include "graph/ir.h"
#include "ops/evaluator.h"

namespace streamline::graph::testing {

// Graph inputs in order, then every node in topological order (two threads each); the outputs.
inline Result<std::vector<Tensor>> run_graph(const Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<std::optional<Tensor>> vals(g.num_values());
  for (size_t i = 0; i < g.inputs().size() && i < inputs.size(); ++i)
    vals[static_cast<size_t>(g.inputs()[i])] = inputs[i];
  for (size_t v = 0; v < g.num_values(); ++v)
    if (g.value(static_cast<ValueId>(v)).constant) vals[v] = *g.value(static_cast<ValueId>(v)).constant;
  SL_ASSIGN_OR_RETURN(std::vector<NodeId> order, g.topological_order());
  for (NodeId id : order) {
    const Node& n = g.node(id);
    std::vector<Tensor> ins;
    ops::EvalOptions eo;
    for (ValueId v : n.inputs) {
      ins.push_back(v == kNoValue ? Tensor() : *vals[static_cast<size_t>(v)]);
      eo.constant_mask.push_back(v != kNoValue && g.value(v).constant.has_value());
    }
    eo.num_threads = 2;
    SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ops::evaluate_node(ops::default_cpu_registry(), g, n, ins, eo));
    for (size_t k = 0; k < n.outputs.size() && k < outs.size(); ++k)
      if (n.outputs[k] != kNoValue) vals[static_cast<size_t>(n.outputs[k])] = outs[k];
  }
  std::vector<Tensor> out;
  for (ValueId v : g.outputs()) out.push_back(*vals[static_cast<size_t>(v)]);
  return out;
}

}  // namespace streamline::graph::testing
