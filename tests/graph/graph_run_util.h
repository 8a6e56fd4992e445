#pragma once
// Runs a graph node by node: the graph-pass tests' one interpreter, so a rewritten graph can be
// compared with the original on the same inputs. The CPU kernels by default; any registry (the
// reference kernels of ops/op_test_util.h, say) for the ops it has.
//
//   SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, testing::run_graph(g, {x}));
//   auto want = testing::run_graph(g, {x}, ops::testing::ref_reg());
//   auto got = testing::run_graph(g, {{"x", x}});  // inputs by name

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "ops/evaluator.h"
#include "ops/registry.h"

namespace streamline::graph::testing {

// Graph inputs in order, then every live node in topological order (two threads each; constants
// seen as constants at create, as a plan sees them); the outputs. `reg` runs the ops it has, the CPU
// kernels the rest: the reference registry has the compute ops but not the data movement ones
// (Flatten, Reshape, ...). An error names the node that failed.
inline Result<std::vector<Tensor>> run_graph(const Graph& g, const std::vector<Tensor>& inputs,
                                             const ops::KernelRegistry& reg = ops::default_cpu_registry()) {
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
      if (v != kNoValue && !vals[static_cast<size_t>(v)])
        return Status(StatusCode::kInvalidArgument, n.describe() + ": input '" + g.value(v).name + "' has no value");
      ins.push_back(v == kNoValue ? Tensor() : *vals[static_cast<size_t>(v)]);
      eo.constant_mask.push_back(v != kNoValue && g.value(v).constant.has_value());
    }
    eo.num_threads = 2;
    const bool here = reg.has_op(n.op_type, n.domain, n.opset, ops::Device::kCpu);
    auto outs = ops::evaluate_node(here ? reg : ops::default_cpu_registry(), g, n, ins, eo);
    if (!outs.ok()) return outs.status().with_context(n.describe());
    for (size_t k = 0; k < n.outputs.size() && k < outs->size(); ++k)
      if (n.outputs[k] != kNoValue) vals[static_cast<size_t>(n.outputs[k])] = (*outs)[k];
  }
  std::vector<Tensor> out;
  for (ValueId v : g.outputs()) {
    if (!vals[static_cast<size_t>(v)])
      return Status(StatusCode::kInvalidArgument, "output '" + g.value(v).name + "' was never written");
    out.push_back(*vals[static_cast<size_t>(v)]);
  }
  return out;
}

// The same with the graph inputs by name; an input without a feed must be a constant (an
// initializer listed as an input).
inline Result<std::vector<Tensor>> run_graph(const Graph& g, const std::map<std::string, Tensor>& feeds,
                                             const ops::KernelRegistry& reg = ops::default_cpu_registry()) {
  std::vector<Tensor> inputs;
  for (ValueId v : g.inputs()) {
    const Value& val = g.value(v);
    auto it = feeds.find(val.name);
    if (it != feeds.end())
      inputs.push_back(it->second);
    else if (val.constant)
      inputs.push_back(*val.constant);
    else
      return Status(StatusCode::kInvalidArgument, "no feed for graph input '" + val.name + "'");
  }
  return run_graph(g, inputs, reg);
}

// The op types of the live nodes, in node order: what a pass left of a small graph.
inline std::vector<std::string> live_ops(const Graph& g) {
  std::vector<std::string> out;
  for (size_t i = 0; i < g.num_nodes(); ++i)
    if (!g.node(static_cast<NodeId>(i)).dead) out.push_back(g.node(static_cast<NodeId>(i)).op_type);
  return out;
}

}  // namespace streamline::graph::testing
