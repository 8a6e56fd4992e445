// Splitting heavy convolutions along output channels, so that a multi-stream plan can run the
// slices of one convolution on different streams.
//
// A network's stem and the heaviest branch of each Inception-style block leave a stream idle while
// one long convolution runs. Cut into slices of its filters, such a convolution becomes parallel
// branches like any other, and the planner spreads them over streams. Every slice reads the whole
// input; the outputs meet again in a channel Concat: the block's own Concat when that is the only
// reader (no copy added), otherwise a new Concat that writes the original output value.

#include <set>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

constexpr int64_t kChannelBlock = 8;  // slices keep whole blocks of the nChw8c layout

struct Candidate {
  NodeId node = kNoNode;
  int64_t macs = 0;  // multiply-adds per image
};

// Multiply-adds per image of an ungrouped convolution with constant weights, a constant (or no)
// bias, no residual operand and a known output size; 0 when the node does not qualify.
int64_t splittable_macs(const Graph& g, const Node& n) {
  const bool conv = detail::is_onnx_op(n, "Conv");
  const bool fused = n.op_type == "FusedConv" && n.domain == kStreamlineDomain;
  if (!(conv || fused) || n.inputs.size() < 2 || n.outputs.size() != 1) return 0;
  if (n.attr_int("group", 1) != 1) return 0;
  if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) return 0;  // residual operand
  if (n.has_attr("ew_ops")) return 0;   // an elementwise epilogue (its operands are not sliced)
  if (n.has_attr("x_scale")) return 0;  // a per-channel input scale (kept whole with the filters)
  const Tensor* w = detail::constant_of(g, n.inputs[1]);
  if (!w || w->dtype() != DType::kFloat32 || w->shape().rank() != 4) return 0;
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const Tensor* b = detail::constant_of(g, n.inputs[2]);
    if (!b || b->dtype() != DType::kFloat32 || b->numel() != w->shape()[0]) return 0;
  }
  const auto& dims = g.value(n.outputs[0]).dims;
  if (!dims || dims->size() != 4 || !(*dims)[2].fixed() || !(*dims)[3].fixed()) return 0;
  const Shape& s = w->shape();
  return s[0] * s[1] * s[2] * s[3] * (*dims)[2].value * (*dims)[3].value;
}

// Rows [begin, end) of a float tensor's first dimension, as a new tensor.
Tensor first_dim_slice(const Tensor& t, int64_t begin, int64_t end) {
  Shape s = t.shape();
  const int64_t row = s[0] ? t.numel() / s[0] : 0;
  s[0] = end - begin;
  Tensor out = Tensor::empty(DType::kFloat32, s);
  const float* src = t.data<float>() + begin * row;
  std::copy(src, src + (end - begin) * row, out.data<float>());
  return out;
}

bool channel_concat(const Node& n) {
  if (!detail::is_onnx_op(n, "Concat")) return false;
  const int64_t axis = n.attr_int("axis", 0);
  return axis == 1 || axis == -3;
}

std::string unique_node_name(std::set<std::string>& names, const std::string& base) {
  std::string name = base;
  for (int i = 1; names.count(name); ++i) name = base + "_" + std::to_string(i);
  names.insert(name);
  return name;
}

}  // namespace

int split_heavy_convolutions(Graph& g, int parts, double min_share) {
  if (parts < 2) return 0;
  g.rebuild_edges();
  // 1. Cost every candidate; the share is taken of all convolutions' multiply-adds.
  std::vector<Candidate> candidates;
  int64_t total = 0;
  std::set<std::string> names;
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    if (n.dead) continue;
    names.insert(n.name);
    const int64_t macs = splittable_macs(g, n);
    if (macs > 0) {
      candidates.push_back({static_cast<NodeId>(i), macs});
      total += macs;
    }
  }
  int split = 0;
  for (const Candidate& c : candidates) {
    if (static_cast<double>(c.macs) < min_share * static_cast<double>(total)) continue;
    // Copies: add_node/add_value may reallocate the node and value arrays.
    const Node conv = g.node(c.node);
    const Tensor w = *detail::constant_of(g, conv.inputs[1]);
    const int64_t m = w.shape()[0];
    if (m < 2 * kChannelBlock * parts) continue;
    // 2. Slice boundaries on whole channel blocks.
    std::vector<int64_t> cuts{0};
    for (int k = 1; k < parts; ++k) cuts.push_back((m * k / parts + kChannelBlock / 2) / kChannelBlock * kChannelBlock);
    cuts.push_back(m);
    const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != kNoValue;
    const std::optional<Tensor> bias =
        has_bias ? std::optional<Tensor>(*detail::constant_of(g, conv.inputs[2])) : std::nullopt;
    const ValueId y = conv.outputs[0];
    const Value yv = g.value(y);
    // 3. One convolution per slice, reading the same input.
    std::vector<ValueId> slices;
    for (int k = 0; k < parts; ++k) {
      const std::string tag = "/slice" + std::to_string(k);
      std::vector<ValueId> inputs = conv.inputs;
      inputs[1] = g.add_constant(detail::unique_value_name(g, g.value(conv.inputs[1]).name + tag),
                                 first_dim_slice(w, cuts[k], cuts[k + 1]));
      if (has_bias)
        inputs[2] = g.add_constant(detail::unique_value_name(g, g.value(conv.inputs[2]).name + tag),
                                   first_dim_slice(*bias, cuts[k], cuts[k + 1]));
      std::optional<DimList> dims = yv.dims;
      if (dims) (*dims)[1] = Dim(cuts[k + 1] - cuts[k]);
      const ValueId out = g.add_value(detail::unique_value_name(g, yv.name + tag), yv.dtype, dims);
      const NodeId s = g.add_node(conv.op_type, unique_node_name(names, conv.name + tag), inputs, {out}, conv.domain);
      g.node(s).opset = conv.opset;
      g.node(s).attrs = conv.attrs;
      slices.push_back(out);
    }
    g.node(c.node).dead = true;
    // 4. The slices meet in the readers' channel Concats, or in a new Concat writing y.
    bool all_concats = !g.is_graph_output(y) && !yv.consumers.empty();
    for (NodeId r : yv.consumers) all_concats = all_concats && channel_concat(g.node(r));
    if (all_concats) {
      for (NodeId r : yv.consumers) {
        Node& cat = g.node(r);
        std::vector<ValueId> ins;
        for (ValueId v : cat.inputs) {
          if (v == y)
            ins.insert(ins.end(), slices.begin(), slices.end());
          else
            ins.push_back(v);
        }
        cat.inputs = std::move(ins);
      }
    } else {
      const NodeId cat = g.add_node("Concat", unique_node_name(names, conv.name + "/join"), slices, {y});
      g.node(cat).opset = g.opsets.count("") ? g.opsets.at("") : 13;
      g.node(cat).attrs["axis"] = detail::int_attr(1);
    }
    g.rebuild_edges();
    ++split;
  }
  return split;
}

}  // namespace streamline::graph
