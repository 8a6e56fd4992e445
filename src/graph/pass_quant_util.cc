#include "graph/pass_quant_util.h"

#include <algorithm>
#include <cmath>

namespace streamline::graph::quant {

using detail::constant_of;
using detail::ProtectedValues;

std::optional<QParam> params_of(const Graph& g, ValueId scale, ValueId zp) {
  const Tensor* s = constant_of(g, scale);
  if (!s || s->numel() != 1 || s->dtype() != DType::kFloat32) return std::nullopt;
  QParam p;
  p.scale = scale;
  p.s = s->data<float>()[0];
  if (!(p.s > 0.f) || !std::isfinite(p.s)) return std::nullopt;
  if (zp != kNoValue) {
    const Tensor* z = constant_of(g, zp);
    if (!z || z->numel() != 1 || !is_8bit(z->dtype())) return std::nullopt;
    p.zp = zp;
    p.t = z->dtype();
    p.z = static_cast<int32_t>(element_as_double(*z, 0));
  }
  return p;
}

std::optional<QParam> node_params(const Graph& g, const Node& n) {
  if (n.inputs.size() < 2) return std::nullopt;
  return params_of(g, n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : kNoValue);
}

std::optional<DqInput> dq_of(const Graph& g, ValueId v) {
  if (v == kNoValue || g.value(v).producer == kNoNode) return std::nullopt;
  const NodeId id = g.value(v).producer;
  const Node& n = g.node(id);
  if (!detail::is_onnx_op(n, "DequantizeLinear") || n.inputs.empty()) return std::nullopt;
  const ValueId q = n.inputs[0];
  if (constant_of(g, q)) return std::nullopt;
  auto p = node_params(g, n);
  if (!p) return std::nullopt;
  const DType qt = g.value(q).dtype;
  if (qt != DType::kUndefined && qt != p->t) return std::nullopt;
  return DqInput{id, q, *p};
}

std::optional<QOutput> q_after(const Graph& g, const ProtectedValues& prot, ValueId v) {
  const NodeId id = detail::sole_consumer(g, prot, v);
  if (id == kNoNode) return std::nullopt;
  const Node& n = g.node(id);
  if (!detail::is_onnx_op(n, "QuantizeLinear") || n.inputs[0] != v || n.outputs.empty() || n.outputs[0] == kNoValue)
    return std::nullopt;
  auto p = node_params(g, n);
  if (!p) return std::nullopt;
  return QOutput{id, n.outputs[0], *p};
}

std::optional<QWeight> weight_of(const Graph& g, ValueId v) {
  if (v == kNoValue || g.value(v).producer == kNoNode) return std::nullopt;
  const Node& n = g.node(g.value(v).producer);
  if (!detail::is_onnx_op(n, "DequantizeLinear") || n.inputs.size() < 2) return std::nullopt;
  QWeight w;
  w.q = n.inputs[0];
  w.qt = constant_of(g, w.q);
  w.scale = n.inputs[1];
  w.st = constant_of(g, w.scale);
  if (!w.qt || !w.st || !is_8bit(w.qt->dtype()) || w.st->dtype() != DType::kFloat32 || w.st->shape().rank() > 1)
    return std::nullopt;
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    w.zp = n.inputs[2];
    const Tensor* z = constant_of(g, w.zp);
    if (!z || z->dtype() != w.qt->dtype() || z->numel() != w.st->numel()) return std::nullopt;
  }
  w.axis = n.attr_int("axis", 1);
  if (w.axis < 0) w.axis += static_cast<int64_t>(w.qt->shape().rank());
  return w;
}

// Real bias values behind `v`: a float constant, or a DQ of an int32 constant.
std::optional<std::vector<double>> bias_values(const Graph& g, ValueId v, int64_t n) {
  if (const Tensor* t = constant_of(g, v)) {
    if (t->numel() != n || t->dtype() != DType::kFloat32) return std::nullopt;
    std::vector<double> out;
    for (int64_t i = 0; i < n; ++i) out.push_back(t->data<float>()[i]);
    return out;
  }
  if (v == kNoValue || g.value(v).producer == kNoNode) return std::nullopt;
  const Node& d = g.node(g.value(v).producer);
  if (!detail::is_onnx_op(d, "DequantizeLinear") || d.inputs.size() < 2) return std::nullopt;
  const Tensor* q = constant_of(g, d.inputs[0]);
  const Tensor* s = constant_of(g, d.inputs[1]);
  const Tensor* z = d.inputs.size() > 2 ? constant_of(g, d.inputs[2]) : nullptr;
  if (!q || !s || q->numel() != n || s->dtype() != DType::kFloat32 || (s->numel() != 1 && s->numel() != n))
    return std::nullopt;
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) {
    const double zp = z ? element_as_double(*z, z->numel() == 1 ? 0 : i) : 0.0;
    out.push_back((element_as_double(*q, i) - zp) * s->data<float>()[s->numel() == 1 ? 0 : i]);
  }
  return out;
}

// The int32 bias in accumulator units (x_scale * w_scale[m]) for real bias `b`.
Tensor int32_bias(const std::vector<double>& b, float x_scale, const Tensor& w_scale) {
  Tensor t = Tensor::empty(DType::kInt32, Shape{static_cast<int64_t>(b.size())});
  for (size_t i = 0; i < b.size(); ++i) {
    const float acc = x_scale * w_scale.data<float>()[w_scale.numel() == 1 ? 0 : i];
    const double v = std::nearbyint(b[i] / static_cast<double>(acc));
    t.data<int32_t>()[i] = static_cast<int32_t>(std::min(2147483647.0, std::max(-2147483648.0, v)));
  }
  return t;
}

void to_streamline(Node& n, const char* op) {
  n.op_type = op;
  n.domain = kStreamlineDomain;
  n.opset = kStreamlineOpset;
}

OutputEnd output_end(const Graph& g, const ProtectedValues& prot, ValueId y) {
  OutputEnd e;
  e.out = y;
  const NodeId next = detail::sole_consumer(g, prot, y);
  if (next != kNoNode) {
    e.act = detail::match_activation(g, g.node(next), y);
    if (e.act) {
      e.act_node = next;
      e.out = g.node(next).outputs[0];
    }
  }
  e.q = q_after(g, prot, e.out);
  if (e.q) e.out = e.q->out;
  return e;
}

void finish_output(Graph& g, Node& fused, const OutputEnd& e, size_t ys_slot) {
  if (fused.inputs.size() <= ys_slot + 1) fused.inputs.resize(ys_slot + 2, kNoValue);
  fused.inputs[ys_slot] = e.q ? e.q->p.scale : kNoValue;
  fused.inputs[ys_slot + 1] = e.q ? e.q->p.zp : kNoValue;
  if (e.q && e.q->p.zp == kNoValue) {
    // Q without a zero point writes uint8 with zero point 0: make it explicit.
    fused.inputs[ys_slot + 1] =
        g.add_constant(detail::unique_value_name(g, fused.name + "_y_zero_point"), Tensor::scalar<uint8_t>(0));
  }
  fused.outputs = {e.out};
  if (e.act) detail::set_activation_attrs(fused, *e.act);
  if (e.act_node != kNoNode) g.node(e.act_node).dead = true;
  if (e.q) g.node(e.q->node).dead = true;
}

// x_zp value of a DQ input (a new uint8 0 constant when the DQ had none).
ValueId zp_value(Graph& g, const DqInput& d, const std::string& base) {
  if (d.p.zp != kNoValue) return d.p.zp;
  return g.add_constant(detail::unique_value_name(g, base + "_zero_point"), Tensor::scalar<uint8_t>(0));
}

// The QLookup table of DequantizeLinear(from) then QuantizeLinear(to), in the kernels' float math.
Tensor requant_table(const QParam& from, const QParam& to) {
  Tensor t = Tensor::empty(to.t, Shape{256});
  const float lo = to.t == DType::kInt8 ? -128.f : 0.f, hi = to.t == DType::kInt8 ? 127.f : 255.f;
  for (int i = 0; i < 256; ++i) {
    const float code = static_cast<float>(from.t == DType::kInt8 ? i - 128 : i);
    const float v = (code - static_cast<float>(from.z)) * from.s;
    const float q = std::min(hi, std::max(lo, std::rint(v / to.s) + static_cast<float>(to.z)));
    if (to.t == DType::kInt8)
      t.data<int8_t>()[i] = static_cast<int8_t>(q);
    else
      t.data<uint8_t>()[i] = static_cast<uint8_t>(q);
  }
  return t;
}

int sweep(Graph& g, bool (*select)(const Node&), Rewrite rewrite) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    if (g.node(id).dead || !select(g.node(id))) continue;
    if (rewrite(g, prot, id)) {
      ++count;
      g.rebuild_edges();
    }
  }
  return count;
}

}  // namespace streamline::graph::quant
