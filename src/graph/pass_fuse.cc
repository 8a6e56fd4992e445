// Conv and Gemm/MatMul fusions. The fused ops (domain "streamline", opset 1):
//
//   FusedConv(X, W, B, [Z]) -> Y      Conv attributes, plus optional `activation` (string) and
//                                     `activation_params` (floats). Y = act(conv(X, W) + B + Z);
//                                     B is kNoValue when the Conv had no bias, Z (same shape as Y)
//                                     is present only for a fused residual Add.
//   FusedGemm(A, B, [C]) -> Y         Gemm attributes, plus `activation`/`activation_params`.
//   FusedMatMul(A, B, bias) -> Y      act(A @ B + bias) with MatMul semantics for A and B; bias is
//                                     1-D [N] broadcast along the last dim, or kNoValue. A [1, N]
//                                     Add operand is given to it as a new [N] constant.
//
// Activations: Relu, Clip [min,max], LeakyRelu [alpha], Sigmoid, HardSigmoid [alpha,beta], Tanh.
// No `activation` attribute means none. A fused node writes the output value of the last node it
// absorbed, so value names (graph outputs in particular) are preserved. Every intermediate value
// that disappears must have that one consumer and must not be protected (see pass_util.h).

#include <algorithm>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

using detail::Activation;
using detail::ProtectedValues;

void to_fused(Node& n, const char* op_type) {
  n.op_type = op_type;
  n.domain = kStreamlineDomain;
  n.opset = kStreamlineOpset;
}

// The residual operand when `add` adds a tensor of exactly the conv output's known shape to
// `conv_out`; kNoValue when the Add broadcasts, or the operand is a constant or unknown in shape.
ValueId residual_operand(const Graph& g, const Node& add, ValueId conv_out) {
  if (add.inputs.size() != 2 || add.outputs.size() != 1 || add.outputs[0] == kNoValue) return kNoValue;
  const ValueId other = add.inputs[0] == conv_out ? add.inputs[1] : add.inputs[0];
  if (other == kNoValue || other == conv_out || detail::constant_of(g, other)) return kNoValue;
  const Value& a = g.value(conv_out);
  const Value& b = g.value(other);
  if (!detail::same_known_dims(a, b)) return kNoValue;
  if (a.dtype != DType::kUndefined && b.dtype != DType::kUndefined && a.dtype != b.dtype) return kNoValue;
  return other;
}

// The first known dtype among `values`, or kUndefined.
DType known_dtype(const Graph& g, std::initializer_list<ValueId> values) {
  for (ValueId v : values)
    if (v != kNoValue && g.value(v).dtype != DType::kUndefined) return g.value(v).dtype;
  return DType::kUndefined;
}

// The bias operand when `add` adds a constant [N] or [1, N] tensor to the MatMul output `mm_out`
// with B of shape [K, N]; kNoValue otherwise. A [1, N] bias would turn a 1-D MatMul result into a
// 2-D one, so it needs A's rank known to be at least 2.
ValueId bias_operand(const Graph& g, const Node& add, ValueId mm_out, const Tensor& b, ValueId a) {
  if (add.inputs.size() != 2 || add.outputs.size() != 1 || add.outputs[0] == kNoValue) return kNoValue;
  const ValueId other = add.inputs[0] == mm_out ? add.inputs[1] : add.inputs[0];
  const Tensor* bias = detail::constant_of(g, other);
  if (!bias || bias->dtype() != b.dtype()) return kNoValue;
  const int64_t n = b.shape()[1];
  const Shape& s = bias->shape();
  if (s.rank() == 1 && s[0] == n) return other;
  const auto& a_dims = g.value(a).dims;
  if (s.rank() == 2 && s[0] == 1 && s[1] == n && a_dims && a_dims->size() >= 2) return other;
  return kNoValue;
}

// The spatial pads of a Pad that only adds zeros around the spatial axes of a rank-4 tensor:
// [top, left, bottom, right]; nullopt for any other Pad.
std::optional<std::vector<int64_t>> zero_spatial_pads(const Graph& g, const Node& pad) {
  if (pad.outputs.size() != 1 || pad.inputs.empty() || pad.inputs[0] == kNoValue) return std::nullopt;
  if (pad.attr_string("mode", "constant") != "constant") return std::nullopt;
  std::vector<int64_t> pads;
  float value = 0.f;
  if (pad.opset > 0 && pad.opset < 11) {
    pads = pad.attr_ints("pads");
    value = pad.attr_float("value", 0.f);
  } else {
    if (pad.inputs.size() < 2 || pad.inputs.size() > 3) return std::nullopt;  // no opset-18 axes
    const Tensor* p = detail::constant_of(g, pad.inputs[1]);
    if (!p || p->dtype() != DType::kInt64) return std::nullopt;
    for (int64_t i = 0; i < p->numel(); ++i) pads.push_back(p->data<int64_t>()[i]);
    if (pad.inputs.size() > 2 && pad.inputs[2] != kNoValue) {
      const Tensor* v = detail::constant_of(g, pad.inputs[2]);
      if (!v || v->numel() != 1) return std::nullopt;
      value = static_cast<float>(element_as_double(*v, 0));
    }
  }
  if (value != 0.f || pads.size() != 8) return std::nullopt;
  for (int64_t v : pads)
    if (v < 0) return std::nullopt;
  if (pads[0] || pads[1] || pads[4] || pads[5]) return std::nullopt;  // batch and channels untouched
  return std::vector<int64_t>{pads[2], pads[3], pads[6], pads[7]};
}

}  // namespace

// Pad (zeros around the spatial axes) -> Conv or AveragePool: the padding becomes the consumer's
// own (Conv's pads grow; an AveragePool without padding takes the pads with count_include_pad=1,
// as the padded zeros were counted), so the padded copy is never made. Exporters write average
// pools this way (Inception, DenseNet). A Pad of nothing but zeros is dropped the same way.
int fuse_pad_into_consumer(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    const Node& pad = g.node(id);
    if (!detail::is_onnx_op(pad, "Pad")) continue;
    const auto sp = zero_spatial_pads(g, pad);
    if (!sp) continue;
    const ValueId out = pad.outputs[0];
    const NodeId c = detail::sole_consumer(g, prot, out);
    if (c == kNoNode) continue;
    Node& user = g.node(c);
    if (user.inputs.empty() || user.inputs[0] != out || user.attr_string("auto_pad", "NOTSET") != "NOTSET") continue;
    std::vector<int64_t> own = user.attr_ints("pads");
    if (own.empty()) own.assign(4, 0);
    if (own.size() != 4) continue;
    if (detail::is_onnx_op(user, "Conv")) {
      // fine: zeros padded before the convolution are its own zero padding
    } else if (detail::is_onnx_op(user, "AveragePool")) {
      const bool own_zero = std::all_of(own.begin(), own.end(), [](int64_t v) { return v == 0; });
      if (user.attr_int("ceil_mode", 0) != 0 || (!own_zero && user.attr_int("count_include_pad", 0) == 0)) continue;
      user.attrs["count_include_pad"] = detail::int_attr(1);
    } else {
      continue;
    }
    for (size_t i = 0; i < 4; ++i) own[i] += (*sp)[i];
    user.attrs["pads"] = detail::ints_attr(own);
    user.inputs[0] = pad.inputs[0];
    g.node(id).dead = true;
    g.rebuild_edges();
    ++count;
  }
  return count;
}

// Conv [-> Add(residual)] [-> activation] becomes one FusedConv. A Conv with neither stays a Conv.
int fuse_conv_activation(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    const Node& conv = g.node(id);
    if (!detail::is_onnx_op(conv, "Conv") || detail::has_subgraph(conv)) continue;
    if (conv.inputs.size() < 2 || conv.outputs.size() != 1 || conv.outputs[0] == kNoValue) continue;
    ValueId cur = conv.outputs[0];
    NodeId add = kNoNode;
    NodeId act = kNoNode;
    ValueId residual = kNoValue;
    std::optional<Activation> activation;

    NodeId next = detail::sole_consumer(g, prot, cur);
    if (next != kNoNode && detail::is_onnx_op(g.node(next), "Add")) {
      residual = residual_operand(g, g.node(next), cur);
      if (residual != kNoValue) {
        add = next;
        cur = g.node(add).outputs[0];
        next = detail::sole_consumer(g, prot, cur);
      }
    }
    if (next != kNoNode) {
      activation = detail::match_activation(g, g.node(next), cur);
      if (activation) {
        act = next;
        cur = g.node(act).outputs[0];
      }
    }
    if (add == kNoNode && act == kNoNode) continue;

    Node& fused = g.node(id);
    to_fused(fused, "FusedConv");
    fused.inputs.resize(3, kNoValue);
    if (add != kNoNode) fused.inputs.push_back(residual);
    fused.outputs = {cur};
    if (activation) detail::set_activation_attrs(fused, *activation);
    if (add != kNoNode) g.node(add).dead = true;
    if (act != kNoNode) g.node(act).dead = true;
    g.rebuild_edges();
    ++count;
  }
  return count;
}

// Gemm -> activation becomes FusedGemm. MatMul (constant 2-D B) -> Add(constant bias) becomes
// FusedMatMul, optionally with a following activation; MatMul -> activation alone also fuses.
int fuse_gemm_activation(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    const Node& n = g.node(id);
    const bool gemm = detail::is_onnx_op(n, "Gemm");
    const bool matmul = detail::is_onnx_op(n, "MatMul");
    if ((!gemm && !matmul) || n.inputs.size() < 2 || n.outputs.size() != 1 || n.outputs[0] == kNoValue) continue;
    if (!detail::float_or_unknown(known_dtype(g, {n.outputs[0], n.inputs[0], n.inputs[1]}))) continue;
    ValueId cur = n.outputs[0];
    NodeId add = kNoNode;
    ValueId bias = kNoValue;
    NodeId next = detail::sole_consumer(g, prot, cur);

    const Tensor* b = matmul ? detail::constant_of(g, n.inputs[1]) : nullptr;
    if (b && b->shape().rank() == 2 && next != kNoNode && detail::is_onnx_op(g.node(next), "Add")) {
      bias = bias_operand(g, g.node(next), cur, *b, n.inputs[0]);
      if (bias != kNoValue) {
        add = next;
        cur = g.node(add).outputs[0];
        next = detail::sole_consumer(g, prot, cur);
      }
    }
    std::optional<Activation> activation;
    if (next != kNoNode) activation = detail::match_activation(g, g.node(next), cur);
    if (!activation && add == kNoNode) continue;
    const NodeId act = activation ? next : kNoNode;
    if (act != kNoNode) cur = g.node(act).outputs[0];

    if (bias != kNoValue && g.value(bias).constant->shape().rank() == 2) {
      // FusedMatMul takes a 1-D bias: give it a [N] view of the [1, N] constant (a new value, as
      // the original may have other readers).
      const Tensor flat = g.value(bias).constant->reshaped(Shape{g.value(bias).constant->numel()});
      bias = g.add_constant(detail::unique_value_name(g, g.value(bias).name + "_1d"), flat);
    }
    Node& fused = g.node(id);
    if (gemm) {
      to_fused(fused, "FusedGemm");
    } else {
      to_fused(fused, "FusedMatMul");
      fused.inputs = {fused.inputs[0], fused.inputs[1], bias};
    }
    fused.outputs = {cur};
    if (activation) detail::set_activation_attrs(fused, *activation);
    if (add != kNoNode) g.node(add).dead = true;
    if (act != kNoNode) g.node(act).dead = true;
    g.rebuild_edges();
    ++count;
  }
  return count;
}

}  // namespace streamline::graph
