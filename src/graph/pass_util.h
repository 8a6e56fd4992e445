#pragma once
// Helpers shared by the rewrite passes (graph/pass_*.cc). Internal to the graph layer.
//
//   ProtectedValues prot(g);                       // graph outputs + names subgraphs refer to
//   NodeId c = sole_consumer(g, prot, v);          // the one node that reads v, or kNoNode
//   if (c != kNoNode && is_onnx_op(g.node(c), "Relu")) ...
//
// A value is "protected" when a rewrite must neither remove nor rename it: it is a graph output,
// or a subgraph (If/Loop/Scan body) refers to it by name from the outer scope, which the explicit
// consumer lists do not show.

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "graph/ir.h"

namespace streamline::graph::detail {

class ProtectedValues {
 public:
  // Reads the graph's outputs and every name used inside its subgraphs (recursively). Values added
  // to the graph afterwards are protected only if they are graph outputs.
  explicit ProtectedValues(const Graph& g);
  bool contains(ValueId v) const;

 private:
  const Graph& g_;
  std::unordered_set<std::string> subgraph_names_;
};

// True when the node carries a subgraph attribute (If/Loop/Scan bodies).
bool has_subgraph(const Node& n);
// True for a live node of the default domain with this op type.
bool is_onnx_op(const Node& n, const char* op_type);
// The node that is the only reader of `v`, reading it exactly once, when `v` is not protected;
// kNoNode otherwise. Needs up-to-date edges (Graph::rebuild_edges).
NodeId sole_consumer(const Graph& g, const ProtectedValues& prot, ValueId v);
// The constant tensor of `v`, or nullptr (also for kNoValue).
const Tensor* constant_of(const Graph& g, ValueId v);
// A Reduce* node's axes as written: its `axes` attribute (older opsets) or its constant int64 1-D
// second input (newer ones), not normalised. Nullopt when it has neither (every axis is reduced)
// or the input is computed at run time.
std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n);
// Provably equal: the same fixed size or the same symbol.
bool same_dim(const Dim& a, const Dim& b);
// Both shapes known in every dimension and equal (symbols compare by name).
bool same_known_dims(const Value& a, const Value& b);
// True when the element type is a floating type, or unknown.
bool float_or_unknown(DType t);
// `base`, or `base_1`, `base_2`, ... whichever no value of the graph uses yet.
std::string unique_value_name(const Graph& g, const std::string& base);
// Live nodes in topological order after rebuilding edges; nullopt when the graph has a cycle
// (passes then leave the graph alone and run_passes reports the cycle).
std::optional<std::vector<NodeId>> live_order(Graph& g);

// A fusable activation: its ONNX op name and parameters in the order fused kernels read them.
struct Activation {
  std::string op;             // "Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh"
  std::vector<float> params;  // Clip [min,max], LeakyRelu [alpha], HardSigmoid [alpha,beta]
};
// Recognises `n` as an activation applied to `input` that can be folded into a producer; nullopt
// when it is not one or its parameters are not constant.
std::optional<Activation> match_activation(const Graph& g, const Node& n, ValueId input);
// Writes the `activation` and `activation_params` attributes of a fused node.
void set_activation_attrs(Node& n, const Activation& a);
// Attribute values for nodes that passes create or rewrite.
Attribute int_attr(int64_t v);
Attribute ints_attr(std::vector<int64_t> v);

}  // namespace streamline::graph::detail
