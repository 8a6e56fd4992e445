// Half precision conversion of a graph (see passes.h, convert_to_half).
//
// Pass 1 marks the constant inputs that kernels read on the host as parameters and must stay
// float32; pass 2 converts the other float32 constants; pass 3 retypes computed values; pass 4
// puts Casts at the float32 graph inputs and outputs; pass 5 redirects Casts to float32.

#include <cmath>
#include <set>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

using detail::int_attr;

// (op, input index) pairs whose constant is a host-read parameter rather than tensor data.
bool host_parameter(const Node& n, size_t input) {
  if (!n.domain.empty()) return false;
  if (n.op_type == "Resize") return input == 1 || input == 2;
  if (n.op_type == "Upsample") return input == 1;
  if (n.op_type == "Clip") return input == 1 || input == 2;
  return false;
}

Tensor to_half(const Tensor& t, int64_t* overflowed) {
  Tensor h = Tensor::empty(DType::kFloat16, t.shape(), t.layout());
  const float* src = t.data<float>();
  auto* dst = static_cast<uint16_t*>(h.raw());
  for (int64_t i = 0; i < t.numel(); ++i) {
    dst[i] = float_to_half(src[i]);
    if (std::isfinite(src[i]) && std::isinf(half_to_float(dst[i]))) ++*overflowed;
  }
  return h;
}

constexpr int64_t kOnnxFloat = 1;
constexpr int64_t kOnnxFloat16 = 10;

}  // namespace

Status convert_to_half(Graph& g, HalfReport* report) {
  HalfReport r;
  g.rebuild_edges();
  auto it_opset = g.opsets.find("");
  const int cast_opset = it_opset != g.opsets.end() && it_opset->second > 0 ? it_opset->second : 13;
  // Pass 1: constants used as host parameters anywhere stay float32.
  std::set<ValueId> keep;
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(static_cast<NodeId>(n));
    if (node.dead) continue;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (node.inputs[i] != kNoValue && host_parameter(node, i)) keep.insert(node.inputs[i]);
  }
  // Pass 2 and 3: constants and computed values.
  std::vector<ValueId> float_inputs, float_outputs;
  for (ValueId v : g.inputs())
    if (g.value(v).dtype == DType::kFloat32) float_inputs.push_back(v);
  for (ValueId v : g.outputs())
    if (g.value(v).dtype == DType::kFloat32 && !g.value(v).constant) float_outputs.push_back(v);
  for (size_t i = 0; i < g.num_values(); ++i) {
    const ValueId v = static_cast<ValueId>(i);
    Value& val = g.value(v);
    if (keep.count(v)) continue;
    if (val.constant) {
      if (val.constant->dtype() != DType::kFloat32 || g.is_graph_output(v)) continue;
      val.constant = to_half(*val.constant, &r.overflowed);
      val.dtype = DType::kFloat16;
      ++r.constants;
    } else if (val.dtype == DType::kFloat32 && !g.is_graph_input(v)) {
      val.dtype = DType::kFloat16;
      ++r.values;
    }
  }
  // Pass 4: float32 at the boundary. An input x gets x -> Cast -> x/half used by every consumer;
  // an output y is produced as y/half and cast back into y.
  for (ValueId x : float_inputs) {
    const std::string name = g.value(x).name + "/half";
    const ValueId h = g.add_value(name, DType::kFloat16, g.value(x).dims);
    g.replace_uses(x, h);
    for (auto& o : g.mutable_outputs())  // replace_uses also moved graph outputs; an input stays one
      if (o == h) o = x;
    const NodeId c = g.add_node("Cast", name, {x}, {h});
    g.node(c).attrs["to"] = int_attr(kOnnxFloat16);
    g.node(c).opset = cast_opset;
    ++r.casts_inserted;
  }
  for (ValueId y : float_outputs) {
    if (g.is_graph_input(y)) continue;  // an input passed straight through stays float32
    const std::string name = g.value(y).name + "/half";
    const ValueId h = g.add_value(name, DType::kFloat16, g.value(y).dims);
    g.value(y).dtype = DType::kFloat32;
    // Consumers and the producer move to the half value; the output name keeps float32.
    for (size_t n = 0; n < g.num_nodes(); ++n) {
      Node& node = g.node(static_cast<NodeId>(n));
      if (node.dead) continue;
      for (auto& in : node.inputs)
        if (in == y) in = h;
      for (auto& out : node.outputs)
        if (out == y) out = h;
    }
    const NodeId c = g.add_node("Cast", name, {h}, {y});
    g.node(c).attrs["to"] = int_attr(kOnnxFloat);
    g.node(c).opset = cast_opset;
    ++r.casts_inserted;
  }
  // Pass 5: Casts that produce float32 inside the graph produce float16.
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    Node& node = g.node(static_cast<NodeId>(n));
    if (node.dead || node.op_type != "Cast" || !node.domain.empty()) continue;
    if (node.attr_int("to", 0) != kOnnxFloat || node.outputs.empty()) continue;
    if (g.is_graph_output(node.outputs[0])) continue;  // the boundary casts of pass 4
    node.attrs["to"] = int_attr(kOnnxFloat16);
  }
  g.rebuild_edges();
  if (report) *report = r;
  return ok_status();
}

}  // namespace streamline::graph
