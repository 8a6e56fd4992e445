// Int8 rewrites: QDQ patterns (onnxruntime.quantization's QuantFormat.QDQ and the like) and
// dynamic quantisation (quantize_dynamic) onto the int8 kernels. The ops made here (domain
// "streamline", opset 1; formulas in ops/cpu/quant_common.h and ops/cpu/qelementwise.cc):
//
//   QConv(X, x_scale, x_zp, W, w_scale, w_zp, y_scale, y_zp, B, [Z, z_scale, z_zp]) -> Y
//       QLinearConv's inputs, an int32 bias B in the accumulator's units, an optional residual Z
//       (with `pre_residual_clip` [lo, hi]: conv + B clamped before Z is added) and
//       `activation`; y_scale and y_zp absent: a float32 Y.
//   QMatMul(A, a_scale, a_zp, B, b_scale, b_zp, y_scale, y_zp, bias) -> Y   (B constant [K, N])
//   MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zp, b_zp, bias) -> Y (float32)
//   QAdd / QMul(A, a_scale, a_zp, B, b_scale, b_zp, y_scale, y_zp) -> Y
//   QLookup(X, table) -> Y (256 codes of Y per code of X)
//   QScaleShift(X, x_scale, x_zp, scale, shift, y_scale, y_zp) -> Y   (per channel, axis 1)
//   QGlobalAveragePool, QAveragePool(X, x_scale, x_zp, y_scale, y_zp) -> Y
//
// Patterns, in the order fuse_quantized applies them (all scales and zero points constants,
// activations per-tensor; "DQ" DequantizeLinear, "Q" QuantizeLinear):
//   1. DQ(x) -> Conv(., DQ(w), [DQ(b) or b]) [-> activation] [-> Q]       => QConv
//      DQ(x) -> Gemm / MatMul(., DQ(w)) [+ bias] [-> activation] [-> Q]  => QMatMul
//      Without the final Q the product writes float32 (the next op is not quantised).
//   2. QConv -> Q'd Y -> DQ -> Add(., DQ(z)) [-> activation] -> Q        => QConv with residual Z
//      (the intermediate rounding of Y disappears, one rounding instead of two; its saturation
//      stays, as QConv's `pre_residual_clip`)
//   3. DQ(a), DQ(b) -> Add / Mul [-> Relu/Clip] -> Q                      => QAdd / QMul
//      (b of a's shape, a scalar, or a [N, C, 1, 1] channel vector: squeeze-and-excite)
//   L. Element-wise regions from one 8-bit tensor to a Q (Sigmoid, SiLU, h-swish, requantising;
//      pass_quant_lookup.cc), run before 3                                 => QLookup
//   4. DQ(x) -> GlobalAveragePool / AveragePool -> Q     => QGlobalAveragePool / QAveragePool
//      DQ(x) -> BatchNormalization [-> Relu/Clip] -> Q                     => QScaleShift
//   5. DQ(p) -> MaxPool / Reshape / Flatten / Squeeze / Unsqueeze / Transpose / Slice / Concat /
//      Pad (constant 0, which becomes the zero point's code)
//      -> Q(p), one scale and zero point throughout: the op runs on the 8-bit tensor (exact: these
//      ops move or compare values, and dequantisation is monotonic). A Concat input with another
//      scale qualifies when a Q op writes it for the Concat alone: that op quantises to p, its
//      old range kept as a Clip activation; any other gets a requantising QLookup.
//   6. MatMulInteger(A, B const, a_zp, b_zp) -> Cast(float) -> Mul(scale) [-> Add(bias)]
//      => MatMulIntegerToFloat; a scale that is Mul(a_scale, b_scale const) gives both.
//   7. Every int8 activation tensor whose producers and readers all take a zero point (the ops
//      above, QuantizeLinear, DequantizeLinear and the moving ops of 5) becomes uint8 with
//      zero point + 128: the same real values, and oneDNN's fastest int8 kernels take an unsigned
//      source (a zero point of 0 after a Relu with int8's -128).
// Weight and bias DequantizeLinear nodes must still be there, so run_passes keeps constant
// folding away from DequantizeLinear until this pass has run.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

using detail::constant_of;
using detail::ProtectedValues;

constexpr int kStreamlineOpset = 1;

// A per-tensor quantisation (scale and zero point values, and their constants in the graph).
struct QParam {
  ValueId scale = kNoValue, zp = kNoValue;
  float s = 0.f;
  int32_t z = 0;
  DType t = DType::kUInt8;
  bool same(const QParam& o) const { return s == o.s && z == o.z && t == o.t; }
};

bool is_8bit(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8;
}

// The per-tensor parameters of a Q or DQ node with constant scale and zero point.
std::optional<QParam> node_params(const Graph& g, const Node& n) {
  if (n.inputs.size() < 2) return std::nullopt;
  const Tensor* s = constant_of(g, n.inputs[1]);
  if (!s || s->numel() != 1 || s->dtype() != DType::kFloat32) return std::nullopt;
  QParam p;
  p.scale = n.inputs[1];
  p.s = s->data<float>()[0];
  if (!(p.s > 0.f) || !std::isfinite(p.s)) return std::nullopt;
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const Tensor* z = constant_of(g, n.inputs[2]);
    if (!z || z->numel() != 1 || !is_8bit(z->dtype())) return std::nullopt;
    p.zp = n.inputs[2];
    p.t = z->dtype();
    p.z = static_cast<int32_t>(element_as_double(*z, 0));
  }
  return p;
}

// The DQ node producing `v` with per-tensor parameters and a non-constant 8-bit input.
struct DqInput {
  NodeId node = kNoNode;
  ValueId q = kNoValue;  // its quantised input
  QParam p;
};
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

// The Q node reading `v` as its sole consumer, with per-tensor parameters.
struct QOutput {
  NodeId node = kNoNode;
  ValueId out = kNoValue;
  QParam p;
};
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

// A constant quantised weight behind a DQ: the tensor, its scale (one or per `axis`) and zero point.
struct QWeight {
  ValueId q = kNoValue, scale = kNoValue, zp = kNoValue;
  const Tensor* qt = nullptr;
  const Tensor* st = nullptr;
  int64_t axis = 1;
};
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

// The output end of a fused product: [activation] [Q]. Sets `out` to the value the fused node
// writes and `q` when it is quantised.
struct OutputEnd {
  std::optional<detail::Activation> act;
  NodeId act_node = kNoNode;
  std::optional<QOutput> q;
  ValueId out = kNoValue;
};
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

// Pattern 1 for a Conv.
bool fuse_conv(Graph& g, const ProtectedValues& prot, NodeId id) {
  const Node& c = g.node(id);
  if (c.inputs.size() < 2 || c.outputs.size() != 1 || c.outputs[0] == kNoValue) return false;
  const auto x = dq_of(g, c.inputs[0]);
  const auto w = weight_of(g, c.inputs[1]);
  if (!x || !w || w->qt->shape().rank() < 3) return false;
  const int64_t m = w->qt->shape()[0];
  if (w->st->numel() != 1 && (w->st->numel() != m || w->axis != 0)) return false;
  std::optional<std::vector<double>> bias;
  if (c.inputs.size() > 2 && c.inputs[2] != kNoValue) {
    bias = bias_values(g, c.inputs[2], m);
    if (!bias) return false;
  }
  const OutputEnd e = output_end(g, prot, c.outputs[0]);
  const std::string name = c.name;
  ValueId b = kNoValue;
  if (bias) b = g.add_constant(detail::unique_value_name(g, name + "_bias_int32"), int32_bias(*bias, x->p.s, *w->st));
  const ValueId xz = zp_value(g, *x, name + "_x");
  Node& n = g.node(id);
  to_streamline(n, "QConv");
  n.inputs = {x->q, x->p.scale, xz, w->q, w->scale, w->zp, kNoValue, kNoValue, b};
  finish_output(g, n, e, 6);
  return true;
}

// Pattern 1 for a Gemm or MatMul with constant 2-D weights.
bool fuse_product(Graph& g, const ProtectedValues& prot, NodeId id) {
  const Node& c = g.node(id);
  const bool gemm = c.op_type == "Gemm";
  if (c.inputs.size() < 2 || c.outputs.size() != 1 || c.outputs[0] == kNoValue) return false;
  if (gemm && c.attr_int("transA", 0) != 0) return false;
  const auto x = dq_of(g, c.inputs[0]);
  const auto w = weight_of(g, c.inputs[1]);
  if (!x || !w || w->qt->shape().rank() != 2) return false;
  const bool trans_b = gemm && c.attr_int("transB", 0) != 0;
  const int64_t k = w->qt->shape()[trans_b ? 1 : 0], n = w->qt->shape()[trans_b ? 0 : 1];
  if (w->st->numel() != 1 && (w->st->numel() != n || w->axis != (trans_b ? 0 : 1))) return false;
  const float alpha = gemm ? c.attr_float("alpha", 1.f) : 1.f, beta = gemm ? c.attr_float("beta", 1.f) : 1.f;
  if (!(alpha > 0.f)) return false;
  // A's rank: Gemm needs 2-D; MatMul takes any A of rank >= 1 (its rows are the leading dims).
  const auto& a_dims = g.value(c.inputs[0]).dims;
  if (gemm && (!a_dims || a_dims->size() != 2)) return false;
  std::optional<std::vector<double>> bias;
  ValueId y = c.outputs[0];
  NodeId add = kNoNode;
  if (gemm && c.inputs.size() > 2 && c.inputs[2] != kNoValue && beta != 0.f) {
    bias = bias_values(g, c.inputs[2], n);
    if (!bias) return false;
    for (double& v : *bias) v *= beta;
  } else if (!gemm) {
    const NodeId next = detail::sole_consumer(g, prot, y);
    if (next != kNoNode && detail::is_onnx_op(g.node(next), "Add") && g.node(next).inputs.size() == 2 && a_dims &&
        a_dims->size() >= 1) {
      const Node& a = g.node(next);
      const ValueId other = a.inputs[0] == y ? a.inputs[1] : a.inputs[0];
      const Tensor* t = constant_of(g, other);
      if (t && t->dtype() == DType::kFloat32 && t->numel() == n && t->shape().rank() <= 2 &&
          (t->shape().rank() < 2 || a_dims->size() >= 2)) {
        bias = bias_values(g, other, n);
        add = next;
        y = a.outputs[0];
      }
    }
  }
  const OutputEnd e = output_end(g, prot, y);
  const std::string name = c.name;
  // Weights as [K, N] int8/uint8, scaled by alpha.
  ValueId wq = w->q, ws = w->scale;
  if (trans_b) {
    Tensor t = Tensor::empty(w->qt->dtype(), Shape{k, n});
    const auto* src = static_cast<const uint8_t*>(w->qt->raw());
    auto* dst = static_cast<uint8_t*>(t.raw());
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) dst[i * n + j] = src[j * k + i];
    wq = g.add_constant(detail::unique_value_name(g, name + "_weight_kn"), std::move(t));
  }
  Tensor scale = *constant_of(g, w->scale);
  if (alpha != 1.f) {
    Tensor s = Tensor::empty(DType::kFloat32, scale.shape());
    for (int64_t i = 0; i < s.numel(); ++i) s.data<float>()[i] = scale.data<float>()[i] * alpha;
    scale = s;
    ws = g.add_constant(detail::unique_value_name(g, name + "_weight_scale"), s);
  }
  ValueId b = kNoValue;
  if (bias) b = g.add_constant(detail::unique_value_name(g, name + "_bias_int32"), int32_bias(*bias, x->p.s, scale));
  const ValueId xz = zp_value(g, *x, name + "_x");
  Node& node = g.node(id);
  to_streamline(node, "QMatMul");
  node.attrs.clear();
  node.inputs = {x->q, x->p.scale, xz, wq, ws, w->zp, kNoValue, kNoValue, b};
  finish_output(g, node, e, 6);
  if (add != kNoNode) g.node(add).dead = true;
  return true;
}

// Pattern 2: an Add of a QConv's output (through its DQ) and another DQ'd tensor, then Q.
bool fuse_residual(Graph& g, const ProtectedValues& prot, NodeId id) {
  const Node& add = g.node(id);
  if (add.inputs.size() != 2 || add.outputs.size() != 1 || add.outputs[0] == kNoValue) return false;
  if (!detail::same_known_dims(g.value(add.inputs[0]), g.value(add.inputs[1]))) return false;
  for (int k = 0; k < 2; ++k) {
    const auto d = dq_of(g, add.inputs[static_cast<size_t>(k)]);
    const auto z = dq_of(g, add.inputs[static_cast<size_t>(1 - k)]);
    if (!d || !z || d->q == z->q) continue;
    if (detail::sole_consumer(g, prot, add.inputs[static_cast<size_t>(k)]) != id) continue;
    if (detail::sole_consumer(g, prot, d->q) != d->node) continue;
    const NodeId conv = g.value(d->q).producer;
    if (conv == kNoNode) continue;
    const Node& c = g.node(conv);
    if (c.dead || c.domain != kStreamlineDomain || c.op_type != "QConv" || c.inputs.size() > 9 ||
        c.has_attr("activation") || c.inputs[6] == kNoValue)
      continue;
    const OutputEnd e = output_end(g, prot, add.outputs[0]);
    if (!e.q) return false;
    // The conv's own output range (what the QDQ graph stored between conv and Add) survives as a
    // clamp; only its rounding goes.
    const int32_t qmin = d->p.t == DType::kInt8 ? -128 : 0, qmax = d->p.t == DType::kInt8 ? 127 : 255;
    Attribute clip;
    clip.kind = Attribute::Kind::kFloats;
    clip.floats = {static_cast<float>(qmin - d->p.z) * d->p.s, static_cast<float>(qmax - d->p.z) * d->p.s};
    const ValueId zz = zp_value(g, *z, g.node(conv).name + "_z");
    Node& n = g.node(conv);
    n.attrs["pre_residual_clip"] = std::move(clip);
    n.inputs.resize(12, kNoValue);
    n.inputs[9] = z->q;
    n.inputs[10] = z->p.scale;
    n.inputs[11] = zz;
    g.node(d->node).dead = true;
    g.node(id).dead = true;
    finish_output(g, n, e, 6);
    return true;
  }
  return false;
}

// How the second operand of a binary Q op may differ from the first in shape: equal known
// dims, a scalar, or a [N or 1, C, 1, 1] channel vector against [N, C, H, W] (the kernels'
// broadcasts). False when unknown or otherwise.
bool broadcasts_to(const Value& a, const Value& b) {
  if (detail::same_known_dims(a, b)) return true;
  if (!a.dims || !b.dims) return false;
  const DimList& ad = *a.dims;
  const DimList& bd = *b.dims;
  auto one = [](const Dim& d) { return d.fixed() && d.value == 1; };
  if (bd.size() <= ad.size() && std::all_of(bd.begin(), bd.end(), one)) return true;
  if (ad.size() != 4 || bd.size() != 4 || !ad[1].fixed() || bd[1].value != ad[1].value) return false;
  const bool batch_ok = one(bd[0]) || (ad[0].fixed() && bd[0].value == ad[0].value) ||
                        (!ad[0].fixed() && !ad[0].symbol.empty() && bd[0].symbol == ad[0].symbol);
  return batch_ok && one(bd[2]) && one(bd[3]);
}

// Pattern 3: Add or Mul of two DQ'd tensors, then Q.
bool fuse_binary(Graph& g, const ProtectedValues& prot, NodeId id) {
  const Node& op = g.node(id);
  if (op.inputs.size() != 2 || op.outputs.size() != 1 || op.outputs[0] == kNoValue) return false;
  // The kernels broadcast their second operand only; both ops commute.
  size_t big = 0;
  if (!broadcasts_to(g.value(op.inputs[0]), g.value(op.inputs[1]))) {
    if (!broadcasts_to(g.value(op.inputs[1]), g.value(op.inputs[0]))) return false;
    big = 1;
  }
  const auto a = dq_of(g, op.inputs[big]);
  const auto b = dq_of(g, op.inputs[1 - big]);
  if (!a || !b) return false;
  OutputEnd e = output_end(g, prot, op.outputs[0]);
  if (!e.q) return false;
  if (e.act && e.act->op != "Relu" && e.act->op != "Clip" && e.act->op != "LeakyRelu") return false;
  const std::string name = op.name;
  const bool mul = op.op_type == "Mul";
  const ValueId az = zp_value(g, *a, name + "_a"), bz = zp_value(g, *b, name + "_b");
  Node& n = g.node(id);
  to_streamline(n, mul ? "QMul" : "QAdd");
  n.inputs = {a->q, a->p.scale, az, b->q, b->p.scale, bz};
  finish_output(g, n, e, 6);
  return true;
}

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

// The ops of pattern 5 and which of their inputs carry data.
bool moves_values(const Node& n) {
  static const std::set<std::string> kOps = {"MaxPool",   "Reshape", "Flatten", "Squeeze",      "Unsqueeze",
                                             "Transpose", "Slice",   "Concat",  "DepthToSpace", "SpaceToDepth"};
  return n.domain.empty() && !n.dead && (kOps.count(n.op_type) != 0 || n.op_type == "Pad");
}
std::vector<size_t> data_inputs(const Node& n) {
  if (n.op_type != "Concat") return {0};
  std::vector<size_t> v;
  for (size_t i = 0; i < n.inputs.size(); ++i) v.push_back(i);
  return v;
}

// The Q op (QConv, QMatMul, QAdd, QGlobalAveragePool) writing `d`'s input when that is all `d`
// reads and `d` feeds only `reader`; it may then quantise straight to another scale.
NodeId retargetable_producer(const Graph& g, const ProtectedValues& prot, const DqInput& d, NodeId reader) {
  const NodeId p = g.value(d.q).producer;
  if (p == kNoNode || detail::sole_consumer(g, prot, d.q) != d.node) return kNoNode;
  if (detail::sole_consumer(g, prot, g.node(d.node).outputs[0]) != reader) return kNoNode;
  const Node& n = g.node(p);
  if (n.dead || n.domain != kStreamlineDomain) return kNoNode;
  const bool q_op = n.op_type == "QConv" || n.op_type == "QMatMul" || n.op_type == "QAdd";
  const std::string act = n.attr_string("activation", "");
  // Its activation must be able to take over the old output range as a Clip (see retarget).
  const bool clip_ok = act.empty() || act == "Relu" || act == "Clip";
  return q_op && clip_ok && n.inputs.size() > 7 && n.inputs[6] != kNoValue ? p : kNoNode;
}

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
  const ValueId pad_zp = op.op_type == "Pad" ? zp_value(g, ins[0], g.node(id).name + "_pad") : kNoValue;
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

// Pattern 6.
bool fuse_integer_matmul(Graph& g, const ProtectedValues& prot, NodeId id) {
  const Node& mi = g.node(id);
  if (mi.inputs.size() < 2 || mi.outputs.size() != 1 || mi.outputs[0] == kNoValue) return false;
  const Tensor* b = constant_of(g, mi.inputs[1]);
  if (!b || b->shape().rank() != 2 || !is_8bit(b->dtype())) return false;
  const int64_t n = b->shape()[1];
  const NodeId cast = detail::sole_consumer(g, prot, mi.outputs[0]);
  if (cast == kNoNode || !detail::is_onnx_op(g.node(cast), "Cast") ||
      g.node(cast).attr_int("to", 0) != static_cast<int64_t>(DType::kFloat32))
    return false;
  const ValueId f = g.node(cast).outputs[0];
  const NodeId mul = detail::sole_consumer(g, prot, f);
  if (mul == kNoNode || !detail::is_onnx_op(g.node(mul), "Mul") || g.node(mul).inputs.size() != 2) return false;
  const ValueId s = g.node(mul).inputs[0] == f ? g.node(mul).inputs[1] : g.node(mul).inputs[0];
  // The scale: Mul(a_scale, b_scale) with b_scale constant, or one run-time value.
  ValueId a_scale = kNoValue, b_scale = kNoValue;
  if (g.value(s).producer != kNoNode && detail::is_onnx_op(g.node(g.value(s).producer), "Mul")) {
    const Node& sm = g.node(g.value(s).producer);
    for (int k = 0; k < 2 && sm.inputs.size() == 2; ++k) {
      const Tensor* c = constant_of(g, sm.inputs[static_cast<size_t>(k)]);
      const ValueId other = sm.inputs[static_cast<size_t>(1 - k)];
      const auto& od = g.value(other).dims;
      if (c && c->dtype() == DType::kFloat32 && (c->numel() == 1 || (c->numel() == n && c->shape().rank() == 1)) &&
          !constant_of(g, other) && od && (od->empty() || (od->size() == 1 && (*od)[0].value == 1))) {
        a_scale = other;
        b_scale = sm.inputs[static_cast<size_t>(k)];
        break;
      }
    }
  }
  if (a_scale == kNoValue) {
    const auto& sd = g.value(s).dims;
    if (!sd || !(sd->empty() || (sd->size() == 1 && (*sd)[0].value == 1))) return false;
    a_scale = s;
  }
  ValueId y = g.node(mul).outputs[0];
  ValueId bias = kNoValue;
  NodeId add = detail::sole_consumer(g, prot, y);
  if (add != kNoNode && detail::is_onnx_op(g.node(add), "Add") && g.node(add).inputs.size() == 2) {
    const Node& a = g.node(add);
    const ValueId other = a.inputs[0] == y ? a.inputs[1] : a.inputs[0];
    const Tensor* t = constant_of(g, other);
    if (t && t->dtype() == DType::kFloat32 && t->numel() == n && t->shape().rank() == 1) {
      bias = other;
      y = a.outputs[0];
    } else {
      add = kNoNode;
    }
  } else {
    add = kNoNode;
  }
  if (b_scale == kNoValue)
    b_scale = g.add_constant(detail::unique_value_name(g, g.node(id).name + "_b_scale"), Tensor::scalar<float>(1.f));
  Node& node = g.node(id);
  const ValueId a = node.inputs[0], bq = node.inputs[1];
  const ValueId az = node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
  const ValueId bz = node.inputs.size() > 3 ? node.inputs[3] : kNoValue;
  to_streamline(node, "MatMulIntegerToFloat");
  node.inputs = {a, bq, a_scale, b_scale, az, bz, bias};
  node.outputs = {y};
  g.node(cast).dead = true;
  g.node(mul).dead = true;
  if (add != kNoNode) g.node(add).dead = true;
  return true;
}

// Runs `rewrite` on every live node `select` accepts, in topological order; the number rewritten.
template <typename Select, typename Rewrite>
int sweep(Graph& g, Select&& select, Rewrite&& rewrite) {
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

bool is_conv(const Node& n) {
  return detail::is_onnx_op(n, "Conv");
}
bool is_product(const Node& n) {
  return detail::is_onnx_op(n, "Gemm") || detail::is_onnx_op(n, "MatMul");
}
bool is_add(const Node& n) {
  return detail::is_onnx_op(n, "Add");
}
bool is_binary(const Node& n) {
  return detail::is_onnx_op(n, "Add") || detail::is_onnx_op(n, "Mul");
}
bool is_global_pool(const Node& n) {
  return detail::is_onnx_op(n, "GlobalAveragePool") || detail::is_onnx_op(n, "AveragePool");
}
bool is_batchnorm(const Node& n) {
  return detail::is_onnx_op(n, "BatchNormalization");
}
bool is_matmul_integer(const Node& n) {
  return detail::is_onnx_op(n, "MatMulInteger");
}

}  // namespace

int fuse_quantized(Graph& g, ConstantEvaluator* evaluator) {
  int count = 0;
  count += sweep(g, is_conv, fuse_conv);
  count += sweep(g, is_product, fuse_product);
  count += sweep(g, is_add, fuse_residual);
  if (evaluator) count += fuse_quantized_lookups(g, *evaluator);
  count += sweep(g, is_binary, fuse_binary);
  count += sweep(g, is_global_pool, fuse_global_pool);
  count += sweep(g, is_batchnorm, fuse_batchnorm);
  count += sweep(g, moves_values, fuse_moving_op);
  count += sweep(g, is_matmul_integer, fuse_integer_matmul);
  if (count > 0) count += normalize_int8_activations(g);
  return count;
}

}  // namespace streamline::graph
