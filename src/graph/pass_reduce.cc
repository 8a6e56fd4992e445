// ReduceMean / ReduceMax over every spatial axis -> GlobalAveragePool / GlobalMaxPool.
//
// Exporters write a global pool as a reduction as often as a pool: `x.mean((2, 3))` in PyTorch
// (MnasNet's head, many timm models), `tf.reduce_mean(x, [1, 2], keepdims=True)` in the
// squeeze-excitation blocks of TensorFlow models once converted to NCHW. The reduction kernels
// read plain layouts only, so such a node in the middle of a convolutional network made the
// planner convert the whole activation to plain for it (and, in a squeeze-excitation block, keep
// the blocked copy for the multiply beside it); the global pools read the blocked layout the
// convolutions write. A reduction over axes {2, ..., rank - 1} of a float32 tensor of rank 4 or
// more becomes the pool; with keepdims = 0 a Flatten (axis 1) after the pool drops the unit axes,
// giving the same [N, C]. Rank 3 is left alone: [batch, tokens, features] tensors reduce their
// last axis in LayerNorm-like patterns that are no pools.

#include <algorithm>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

// The reduced axes of `n` normalised to [0, rank), sorted; nullopt when they are not known
// constants (an axes input computed at run time) or out of range.
std::optional<std::vector<int64_t>> reduced_axes(const Graph& g, const Node& n, int64_t rank) {
  auto axes = detail::reduce_axes(g, n);
  if (!axes) return std::nullopt;
  for (int64_t& a : *axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes->begin(), axes->end());
  axes->erase(std::unique(axes->begin(), axes->end()), axes->end());
  return axes;
}

}  // namespace

int reduce_to_global_pool(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  int count = 0;
  for (NodeId id : *order) {
    const Node& n = g.node(id);
    const bool mean = detail::is_onnx_op(n, "ReduceMean");
    if (!mean && !detail::is_onnx_op(n, "ReduceMax")) continue;
    if (n.inputs.empty() || n.inputs[0] == kNoValue || n.outputs.size() != 1 || n.outputs[0] == kNoValue) continue;
    const Value& x = g.value(n.inputs[0]);
    if (x.dtype != DType::kFloat32 || !x.dims || x.dims->size() < 4) continue;
    const int64_t rank = static_cast<int64_t>(x.dims->size());
    const auto axes = reduced_axes(g, n, rank);
    if (!axes || static_cast<int64_t>(axes->size()) != rank - 2 || axes->front() != 2) continue;
    const bool keepdims = n.attr_int("keepdims", 1) != 0;
    const ValueId x_id = n.inputs[0];
    const ValueId y_id = n.outputs[0];
    const std::string name = n.name;
    const char* pool = mean ? "GlobalAveragePool" : "GlobalMaxPool";
    if (keepdims) {
      Node& r = g.node(id);
      r.op_type = pool;
      r.inputs = {x_id};
      r.attrs.clear();
    } else {
      DimList pooled = *x.dims;
      for (size_t d = 2; d < pooled.size(); ++d) pooled[d] = Dim(1);
      const ValueId mid =
          g.add_value(detail::unique_value_name(g, g.value(y_id).name + "_pooled"), DType::kFloat32, std::move(pooled));
      const int opset = g.node(id).opset;
      g.node(id).dead = true;
      const NodeId p = g.add_node(pool, name, {x_id}, {mid});
      g.node(p).opset = opset;
      const NodeId f = g.add_node("Flatten", name + "/flatten", {mid}, {y_id});
      g.node(f).opset = opset;
      g.node(f).attrs["axis"] = detail::int_attr(1);
    }
    g.rebuild_edges();
    ++count;
  }
  return count;
}

}  // namespace streamline::graph
