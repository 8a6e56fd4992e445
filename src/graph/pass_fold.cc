// Constant folding and BatchNormalization folding into Conv weights.

#include <cmath>
#include <string_view>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

using detail::constant_of;
using detail::ProtectedValues;

// Ops whose result differs between runs; folding them would freeze one sample.
bool is_nondeterministic(const Node& n) {
  if (!n.domain.empty()) return false;
  static constexpr std::string_view kOps[] = {"RandomNormal",      "RandomUniform", "RandomNormalLike",
                                              "RandomUniformLike", "Multinomial",   "Bernoulli"};
  for (std::string_view op : kOps)
    if (n.op_type == op) return true;
  return false;
}

// Whether `n` may be evaluated at load: not a graph-output producer (the output must keep a
// producing node so graph outputs never turn into bare constants), no subgraph, deterministic,
// every present input constant.
bool foldable(const Graph& g, const ProtectedValues& prot, const Node& n) {
  if (n.dead || detail::has_subgraph(n) || is_nondeterministic(n)) return false;
  bool any_output = false;
  for (ValueId o : n.outputs) {
    if (o == kNoValue) continue;
    if (prot.contains(o)) return false;
    any_output = true;
  }
  if (!any_output) return false;
  for (ValueId i : n.inputs)
    if (i != kNoValue && !constant_of(g, i)) return false;
  return true;
}

DimList dims_of(const Tensor& t) {
  DimList dims;
  for (int64_t d : t.shape()) dims.emplace_back(d);
  return dims;
}

}  // namespace

// Evaluates, in topological order, every node whose inputs are all constants, so a chain of such
// nodes folds in one call. A node is left alone when evaluation fails, a result is missing or has
// a dtype other than the declared one, or a result exceeds `max_bytes`.
int fold_constants(Graph& g, ConstantEvaluator& evaluator, int64_t max_bytes, FoldScope scope) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    Node& n = g.node(id);
    if (!foldable(g, prot, n)) continue;
    if (scope == FoldScope::kKeepDequantize && detail::is_onnx_op(n, "DequantizeLinear")) continue;
    std::vector<Tensor> inputs;
    inputs.reserve(n.inputs.size());
    for (ValueId i : n.inputs) inputs.push_back(i == kNoValue ? Tensor() : *constant_of(g, i));
    auto result = evaluator.evaluate(g, n, inputs);
    if (!result.ok()) continue;
    std::vector<Tensor>& outs = result.value();
    if (outs.size() < n.outputs.size()) continue;
    bool usable = true;
    for (size_t k = 0; k < n.outputs.size() && usable; ++k) {
      const ValueId o = n.outputs[k];
      if (o == kNoValue) continue;
      const DType declared = g.value(o).dtype;
      usable = outs[k].defined() && static_cast<int64_t>(outs[k].nbytes()) <= max_bytes &&
               (declared == DType::kUndefined || declared == outs[k].dtype());
    }
    if (!usable) continue;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const ValueId o = n.outputs[k];
      if (o == kNoValue) continue;
      Value& v = g.value(o);
      v.dtype = outs[k].dtype();
      v.dims = dims_of(outs[k]);
      v.constant = std::move(outs[k]);
      v.producer = kNoNode;
    }
    n.dead = true;
    ++count;
  }
  if (count) g.rebuild_edges();
  return count;
}

namespace {

// A Conv + BatchNormalization pair found by match_conv_bn, with the constants the fold reads.
struct ConvBn {
  NodeId conv = kNoNode;
  const Tensor* w = nullptr;
  const Tensor* b = nullptr;  // null when the Conv has no bias
  const Tensor* scale = nullptr;
  const Tensor* bias = nullptr;
  const Tensor* mean = nullptr;
  const Tensor* var = nullptr;
};

// BatchNormalization in inference form: not training_mode (opset 14+), per-channel (spatial=1
// before opset 9), and none of the running statistics outputs of older opsets read.
bool inference_batchnorm(const Graph& g, const ProtectedValues& prot, const Node& bn) {
  if (bn.inputs.size() < 5 || bn.outputs.empty() || bn.outputs[0] == kNoValue) return false;
  if (bn.attr_int("training_mode", 0) != 0) return false;
  if (bn.opset > 0 && bn.opset < 9 && bn.attr_int("spatial", 1) != 1) return false;
  for (size_t k = 1; k < bn.outputs.size(); ++k) {
    const ValueId o = bn.outputs[k];
    if (o != kNoValue && (!g.value(o).consumers.empty() || prot.contains(o))) return false;
  }
  return true;
}

bool match_conv_bn(const Graph& g, const ProtectedValues& prot, const Node& bn, ConvBn* m) {
  if (!inference_batchnorm(g, prot, bn)) return false;
  const ValueId x = bn.inputs[0];
  if (x == kNoValue || detail::sole_consumer(g, prot, x) == kNoNode) return false;
  const NodeId p = g.value(x).producer;
  if (p == kNoNode) return false;
  const Node& conv = g.node(p);
  if (!detail::is_onnx_op(conv, "Conv") || conv.inputs.size() < 2 || conv.outputs.size() != 1) return false;
  m->conv = p;
  m->w = constant_of(g, conv.inputs[1]);
  const bool has_bias = conv.inputs.size() > 2 && conv.inputs[2] != kNoValue;
  m->b = has_bias ? constant_of(g, conv.inputs[2]) : nullptr;
  m->scale = constant_of(g, bn.inputs[1]);
  m->bias = constant_of(g, bn.inputs[2]);
  m->mean = constant_of(g, bn.inputs[3]);
  m->var = constant_of(g, bn.inputs[4]);
  if (!m->w || (has_bias && !m->b) || !m->scale || !m->bias || !m->mean || !m->var) return false;
  if (m->w->dtype() != DType::kFloat32 && m->w->dtype() != DType::kFloat64) return false;
  if (m->w->shape().rank() < 3) return false;
  const int64_t channels = m->w->shape()[0];
  for (const Tensor* t : {m->b, m->scale, m->bias, m->mean, m->var}) {
    if (!t) continue;
    if (t->numel() != channels) return false;
    if (t->dtype() != DType::kFloat32 && t->dtype() != DType::kFloat64 && t->dtype() != DType::kFloat16) return false;
  }
  return true;
}

void store(Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::kFloat64) {
    t.data<double>()[i] = v;
  } else {
    t.data<float>()[i] = static_cast<float>(v);
  }
}

}  // namespace

// Conv -> BatchNormalization with constant weights and statistics becomes one Conv with
// W' = W * s and B' = (B - mean) * s + bias per output channel, s = scale / sqrt(var + epsilon).
// The folded weights are new constants; the old ones may be shared and are never written. The
// Conv takes over the BN's output value so its name survives.
int fold_batchnorm_into_conv(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    if (!detail::is_onnx_op(g.node(id), "BatchNormalization")) continue;
    ConvBn m;
    if (!match_conv_bn(g, prot, g.node(id), &m)) continue;
    const double eps = g.node(id).attr_float("epsilon", 1e-5f);
    const Shape& wshape = m.w->shape();
    const int64_t channels = wshape[0];
    const int64_t per_channel = channels ? m.w->numel() / channels : 0;
    Tensor w2 = Tensor::empty(m.w->dtype(), wshape);
    Tensor b2 = Tensor::empty(m.w->dtype(), Shape{channels});
    for (int64_t c = 0; c < channels; ++c) {
      const double s = element_as_double(*m.scale, c) / std::sqrt(element_as_double(*m.var, c) + eps);
      for (int64_t k = 0; k < per_channel; ++k) {
        const int64_t i = c * per_channel + k;
        store(w2, i, element_as_double(*m.w, i) * s);
      }
      const double b = m.b ? element_as_double(*m.b, c) : 0.0;
      store(b2, c, (b - element_as_double(*m.mean, c)) * s + element_as_double(*m.bias, c));
    }
    // add_constant may reallocate the value table: copy what is needed from it first.
    const std::string conv_name = g.node(m.conv).name;
    const ValueId y = g.node(id).outputs[0];
    const ValueId w_id = g.add_constant(detail::unique_value_name(g, conv_name + "_W_bnfold"), std::move(w2));
    const ValueId b_id = g.add_constant(detail::unique_value_name(g, conv_name + "_B_bnfold"), std::move(b2));
    Node& conv = g.node(m.conv);
    if (conv.inputs.size() < 3) conv.inputs.resize(3, kNoValue);
    conv.inputs[1] = w_id;
    conv.inputs[2] = b_id;
    conv.outputs[0] = y;
    g.node(id).dead = true;
    g.rebuild_edges();
    ++count;
  }
  return count;
}

}  // namespace streamline::graph
