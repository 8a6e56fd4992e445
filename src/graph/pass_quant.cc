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
// First, onnxruntime's QOperator-format ops (com.microsoft QLinearAdd, QLinearConcat, QGemm, ...)
// become the ops above (pass_quant_qop.cc). Then the patterns, in the order fuse_quantized
// applies them (all scales and zero points constants, activations per-tensor; "DQ"
// DequantizeLinear, "Q" QuantizeLinear; the layer patterns 4, 4b and 5 are in
// pass_quant_layers.cc, the helpers in pass_quant_util.h):
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

#include "graph/pass_quant_util.h"

namespace streamline::graph {
namespace {

using detail::constant_of;
using detail::ProtectedValues;
using namespace quant;  // NOLINT(google-build-using-namespace): the pass's own helpers

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
  int count = convert_qoperator_ops(g);
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
