// The int8 rewrites of pooling, BatchNormalization and the ops that only move values (part of
// the patterns listed in pass_quant.cc: 4, 4b and 5).

#include <algorithm>
#include <cmath>
#include <set>

#include "graph/pass_quant_util.h"

namespace streamline::graph::quant {
namespace {

using detail::constant_of;
using detail::ProtectedValues;

// Per-channel values (C of them) of `v`: a float constant, or the DQ of one (per-tensor or
// per-channel on axis 0).
std::optional<std::vector<double>> channel_values(const Graph& g, ValueId v, int64_t c) {
  if (const Tensor* t = constant_of(g, v)) {
    if (t->numel() != c) return std::nullopt;
    std::vector<double> out;
    for (int64_t i = 0; i < c; ++i) out.push_back(element_as_double(*t, i));
    return out;
  }
  return bias_values(g, v, c);  // a DQ of a constant, whatever its integer type
}

// Which inputs of a moving op carry data: all of a Concat's, the first of the others.
std::vector<size_t> data_inputs(const Node& n) {
  if (n.op_type != "Concat") return {0};
  std::vector<size_t> v;
  for (size_t i = 0; i < n.inputs.size(); ++i) v.push_back(i);
  return v;
}

}  // namespace

// The Q op (QConv, QMatMul, QAdd) writing `q` for `reader` alone, with an activation that can
// take over an old output range as a Clip (see retarget); kNoNode otherwise.
NodeId retargetable_writer(const Graph& g, const ProtectedValues& prot, ValueId q, NodeId reader) {
  const NodeId p = g.value(q).producer;
  if (p == kNoNode || detail::sole_consumer(g, prot, q) != reader) return kNoNode;
  const Node& n = g.node(p);
  if (n.dead || n.domain != kStreamlineDomain || n.outputs.empty() || n.outputs[0] != q) return kNoNode;
  const bool q_op = n.op_type == "QConv" || n.op_type == "QMatMul" || n.op_type == "QAdd";
  const std::string act = n.attr_string("activation", "");
  const bool clip_ok = act.empty() || act == "Relu" || act == "Clip";
  return q_op && clip_ok && n.inputs.size() > 7 && n.inputs[6] != kNoValue ? p : kNoNode;
}

namespace {

// The Q op writing `d`'s input when that is all `d` reads and `d` feeds only `reader`; it may
// then quantise straight to another scale.
NodeId retargetable_producer(const Graph& g, const ProtectedValues& prot, const DqInput& d, NodeId reader) {
  if (detail::sole_consumer(g, prot, g.node(d.node).outputs[0]) != reader) return kNoNode;
  return retargetable_writer(g, prot, d.q, d.node);
}

}  // namespace

// Makes Q op `p` quantise to `to` instead of `from`, keeping the saturation of `from` as a Clip
// activation (combined with a Relu or Clip it had): the values it writes stay those the QDQ
// graph's intermediate tensor could hold, rounded once.
void retarget(Graph& g, NodeId p, const QParam& from, const QParam& to) {
  const int32_t qmin = from.t == DType::kInt8 ? -128 : 0, qmax = from.t == DType::kInt8 ? 127 : 255;
  float lo = static_cast<float>(qmin - from.z) * from.s, hi = static_cast<float>(qmax - from.z) * from.s;
  Node& n = g.node(p);
  const std::string act = n.attr_string("activation", "");
  const std::vector<float> params = n.attr_floats("activation_params");
  if (act == "Relu") lo = std::max(lo, 0.f);
  if (act == "Clip" && params.size() == 2) {
    lo = std::max(lo, params[0]);
    hi = std::min(hi, params[1]);
  }
  detail::set_activation_attrs(n, detail::Activation{"Clip", {lo, hi}});
  n.inputs[6] = to.scale;
  n.inputs[7] = to.zp;
  if (to.zp == kNoValue)
    g.node(p).inputs[7] =
        g.add_constant(detail::unique_value_name(g, g.node(p).name + "_y_zero_point"), Tensor::scalar<uint8_t>(0));
  g.value(g.node(p).outputs[0]).dtype = to.t;
}

// Pattern 4b: DQ(x) -> BatchNormalization (constant parameters) [-> Relu/Clip] -> Q
// => QScaleShift(X, x_scale, x_zp, scale[C], shift[C], y_scale, y_zp): the per-channel affine
// map BN is at inference (DenseNet's pre-activation BN + ReLU runs on the quantised tensor).
bool fuse_batchnorm(Graph& g, const ProtectedValues& prot, NodeId id) {
  const Node& bn = g.node(id);
  if (bn.inputs.size() < 5 || bn.outputs.empty() || bn.outputs[0] == kNoValue) return false;
  for (size_t k = 1; k < bn.outputs.size(); ++k)
    if (bn.outputs[k] != kNoValue) return false;
  if (bn.attr_int("training_mode", 0) != 0) return false;
  const auto x = dq_of(g, bn.inputs[0]);
  const auto& dims = g.value(bn.inputs[0]).dims;
  if (!x || !dims || dims->size() < 2 || !(*dims)[1].fixed()) return false;
  const int64_t c = (*dims)[1].value;
  const auto gamma = channel_values(g, bn.inputs[1], c), beta = channel_values(g, bn.inputs[2], c);
  const auto mean = channel_values(g, bn.inputs[3], c), var = channel_values(g, bn.inputs[4], c);
  if (!gamma || !beta || !mean || !var) return false;
  const OutputEnd e = output_end(g, prot, bn.outputs[0]);
  if (!e.q) return false;
  if (e.act && e.act->op != "Relu" && e.act->op != "Clip" && e.act->op != "LeakyRelu") return false;
  const double eps = bn.attr_float("epsilon", 1e-5f);
  Tensor scale = Tensor::empty(DType::kFloat32, Shape{c}), shift = Tensor::empty(DType::kFloat32, Shape{c});
  for (int64_t i = 0; i < c; ++i) {
    const double k = (*gamma)[static_cast<size_t>(i)] / std::sqrt((*var)[static_cast<size_t>(i)] + eps);
    scale.data<float>()[i] = static_cast<float>(k);
    shift.data<float>()[i] = static_cast<float>((*beta)[static_cast<size_t>(i)] - (*mean)[static_cast<size_t>(i)] * k);
  }
  const std::string name = bn.name;
  const ValueId sv = g.add_constant(detail::unique_value_name(g, name + "_scale"), std::move(scale));
  const ValueId hv = g.add_constant(detail::unique_value_name(g, name + "_shift"), std::move(shift));
  const ValueId xz = zp_value(g, *x, name + "_x");
  Node& n = g.node(id);
  to_streamline(n, "QScaleShift");
  n.attrs.clear();
  n.inputs = {x->q, x->p.scale, xz, sv, hv};
  finish_output(g, n, e, 5);
  return true;
}

// Pattern 4 (and AveragePool, 2-D).
bool fuse_global_pool(Graph& g, const ProtectedValues& prot, NodeId id) {
  const Node& p = g.node(id);
  if (p.inputs.empty() || p.outputs.size() != 1 || p.outputs[0] == kNoValue) return false;
  const bool windowed = p.op_type == "AveragePool";
  if (windowed && (!g.value(p.inputs[0]).dims || g.value(p.inputs[0]).dims->size() != 4)) return false;
  const auto x = dq_of(g, p.inputs[0]);
  const auto q = q_after(g, prot, p.outputs[0]);
  if (!x || !q) return false;
  const std::string name = p.name;
  const ValueId xz = zp_value(g, *x, name + "_x");
  OutputEnd e;
  e.q = q;
  e.out = q->out;
  Node& n = g.node(id);
  to_streamline(n, windowed ? "QAveragePool" : "QGlobalAveragePool");
  n.inputs = {x->q, x->p.scale, xz};
  finish_output(g, n, e, 3);
  return true;
}

// The ops of pattern 5 and which of their inputs carry data.
bool moves_values(const Node& n) {
  static const std::set<std::string> kOps = {"MaxPool",   "Reshape", "Flatten", "Squeeze",      "Unsqueeze",
                                             "Transpose", "Slice",   "Concat",  "DepthToSpace", "SpaceToDepth"};
  return n.domain.empty() && !n.dead && (kOps.count(n.op_type) != 0 || n.op_type == "Pad");
}
// Pattern 5. A Concat whose inputs have other scales than its output still qualifies when each
// such input comes straight from a Q op: that op then quantises to the Concat's output scale
// (one rounding where the QDQ graph had two).
bool fuse_moving_op(Graph& g, const ProtectedValues& prot, NodeId id) {
  const Node& op = g.node(id);
  if (op.outputs.size() != 1 || op.outputs[0] == kNoValue || op.inputs.empty()) return false;
  if (op.op_type == "MaxPool") {
    // The 8-bit MaxPool kernel is 2-D.
    const auto& dims = g.value(op.inputs[0]).dims;
    if (!dims || dims->size() != 4) return false;
  }
  if (op.op_type == "Pad") {
    // Constant padding with a real zero, which is the zero point's code once quantised.
    if (op.attr_string("mode", "constant") != "constant") return false;
    if (op.inputs.size() > 2 && op.inputs[2] != kNoValue) {
      const Tensor* v = constant_of(g, op.inputs[2]);
      if (!v || v->numel() != 1 || element_as_double(*v, 0) != 0.0) return false;
    }
    if (op.inputs.size() > 3 && op.inputs[3] != kNoValue) return false;  // opset 18 axes
  }
  const auto q = q_after(g, prot, op.outputs[0]);
  if (!q) return false;
  std::vector<DqInput> ins;
  std::vector<std::pair<NodeId, QParam>> moves;  // producers to retarget, with their old output
  std::vector<size_t> requant;                   // Concat inputs to requantise with a table
  for (size_t i : data_inputs(op)) {
    const auto d = dq_of(g, op.inputs[i]);
    if (!d) return false;
    if (!d->p.same(q->p)) {
      if (op.op_type != "Concat") return false;
      const NodeId p = retargetable_producer(g, prot, *d, id);
      if (p != kNoNode)
        moves.emplace_back(p, d->p);
      else
        requant.push_back(ins.size());
    }
    ins.push_back(*d);
  }
  for (const auto& [p, from] : moves) retarget(g, p, from, q->p);
  for (size_t k : requant) {
    // DQ -> Q to the Concat's scale, as the QDQ graph computes it, in a QLookup.
    const DqInput& d = ins[k];
    const std::string base = g.node(id).name + "_requant" + std::to_string(k);
    const ValueId table = g.add_constant(detail::unique_value_name(g, base + "_table"), requant_table(d.p, q->p));
    const ValueId out = g.add_value(detail::unique_value_name(g, base), q->p.t, g.value(d.q).dims);
    const NodeId lk = g.add_node("QLookup", base, {d.q, table}, {out}, kStreamlineDomain);
    g.node(lk).opset = kStreamlineOpset;
    ins[k].q = out;
  }
  // `op` may dangle here: add_node above can move every node.
  const ValueId pad_zp = g.node(id).op_type == "Pad" ? zp_value(g, ins[0], g.node(id).name + "_pad") : kNoValue;
  Node& n = g.node(id);
  size_t k = 0;
  for (size_t i : data_inputs(n)) n.inputs[i] = ins[k++].q;
  if (pad_zp != kNoValue) {
    n.inputs.resize(3, kNoValue);
    n.inputs[2] = pad_zp;
  }
  n.outputs = {q->out};
  g.node(q->node).dead = true;
  return true;
}

}  // namespace streamline::graph::quant
