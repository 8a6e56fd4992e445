// Transformer fusions: decomposed LayerNorm, erf GELU and scaled-dot-product attention, each into
// one node (domain "streamline", opset 1), plus GELU folded into a preceding matrix product.
//
//   LayerNormalization(X, Scale, [B]) -> Y   ONNX LayerNormalization semantics (attributes `axis`,
//                                            `epsilon`), usable at any model opset.
//   Gelu(X) -> Y                             Y = X * 0.5 * (1 + erf(X / sqrt(2))).
//   Attention(Q, K, V, [Mask]) -> Y          Y = transpose(softmax(scale * q @ k + mask) @ v,
//                                            out_perm) with q = transpose(Q, q_perm), k =
//                                            transpose(K, k_perm) (k is the [.., D, Sk] right
//                                            operand, i.e. K transposed), v = transpose(V, v_perm).
//                                            Missing perms are identities; the mask is added to
//                                            the scores [.., Sq, Sk] as Add would (its last two
//                                            dims Sq/Sk or 1, its batch dims broadcasting).
//                                            Optional is_causal and softcap, and bool masks,
//                                            come from ONNX Attention (pass_attention.cc). A
//                                            Where(keep, scores, fill) mask with a fill at or
//                                            below -1e4 (GPT-2's causal mask) becomes the
//                                            additive mask Where(keep, 0, fill) (see
//                                            kMaskFillFloor for the one case they differ).
//   FusedMatMul/FusedGemm with activation "Gelu".
//
// Every absorbed intermediate value must have the pattern's node as its only reader and must not
// be protected (graph outputs, names subgraphs use); the fused node writes the output value of the
// last node it absorbed, so value names are kept.

#include <algorithm>
#include <cmath>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

using detail::constant_of;
using detail::is_onnx_op;
using detail::ProtectedValues;
using detail::sole_consumer;

void make_fused(Node& n, const char* op_type) {
  n.op_type = op_type;
  n.domain = kStreamlineDomain;
  n.opset = kStreamlineOpset;
  n.attrs.clear();
}

void set_float_attr(Node& n, const char* key, float v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = v;
  n.attrs[key] = std::move(a);
}

void set_int_attr(Node& n, const char* key, int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  n.attrs[key] = std::move(a);
}

void set_ints_attr(Node& n, const char* key, std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  n.attrs[key] = std::move(a);
}

NodeId producer_of(const Graph& g, ValueId v) {
  return v == kNoValue ? kNoNode : g.value(v).producer;
}

// The producer of `v` when it is a live default-domain `op` whose output `v` is read only by
// `reader`; kNoNode otherwise.
NodeId absorbable_producer(const Graph& g, const ProtectedValues& prot, ValueId v, NodeId reader, const char* op) {
  const NodeId p = producer_of(g, v);
  if (p == kNoNode || !is_onnx_op(g.node(p), op) || detail::has_subgraph(g.node(p))) return kNoNode;
  if (g.node(p).outputs.size() != 1 || sole_consumer(g, prot, v) != reader) return kNoNode;
  return p;
}

// The value of a one-element float constant, or nullopt.
std::optional<double> scalar_constant(const Graph& g, ValueId v) {
  const Tensor* t = constant_of(g, v);
  if (!t || t->numel() != 1) return std::nullopt;
  if (t->dtype() != DType::kFloat32 && t->dtype() != DType::kFloat64 && t->dtype() != DType::kFloat16)
    return std::nullopt;
  return element_as_double(*t, 0);
}

bool near(double v, double want, double rel = 1e-6) {
  return std::fabs(v - want) <= rel * std::fabs(want);
}

// For a binary node with exactly one input equal to `x`: the other input, else kNoValue.
ValueId other_input(const Node& n, ValueId x) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return kNoValue;
  if (n.inputs[0] == x && n.inputs[1] != x) return n.inputs[1];
  if (n.inputs[1] == x && n.inputs[0] != x) return n.inputs[0];
  return kNoValue;
}

// Known rank of `v` from its declared dims, or -1.
int64_t known_rank(const Graph& g, ValueId v) {
  const auto& dims = g.value(v).dims;
  return dims ? static_cast<int64_t>(dims->size()) : -1;
}

// The rank of `v`: its known rank, else that of the input of the rank-keeping ops (Slice, Cast,
// Not, Identity) that produce it, followed up to a few steps. Causal masks (GPT-2's Where
// condition, a LLaMA-style additive mask) are a Slice of a Slice of a constant, cut to a length
// known only at run time, so their dims are not inferred.
int64_t rank_through(const Graph& g, ValueId v) {
  for (int step = 0; step < 8 && v != kNoValue; ++step) {
    const int64_t r = known_rank(g, v);
    if (r >= 0) return r;
    const NodeId p = producer_of(g, v);
    if (p == kNoNode) return -1;
    const Node& n = g.node(p);
    const bool keeps_rank =
        is_onnx_op(n, "Slice") || is_onnx_op(n, "Cast") || is_onnx_op(n, "Not") || is_onnx_op(n, "Identity");
    if (!keeps_rank || n.inputs.empty() || n.outputs.size() != 1) return -1;
    v = n.inputs[0];
  }
  return -1;
}

bool is_float_value(const Graph& g, ValueId v) {
  return detail::float_or_unknown(g.value(v).dtype);
}

// ------------------------------------------------------------------------------------------------
// LayerNorm

// ReduceMean's axes (detail::reduce_axes) when it keeps its dims and reduces some axis.
std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n) {
  if (n.attr_int("keepdims", 1) != 1) return std::nullopt;
  auto axes = detail::reduce_axes(g, n);
  // No axes, or empty ones without noop_with_empty_axes: every axis is reduced, not a LayerNorm.
  if (!axes || (axes->empty() && n.attr_int("noop_with_empty_axes", 0) != 0)) return std::nullopt;
  return axes;
}

// The first normalized axis (negative) when `axes` is a contiguous run ending at the last axis,
// e.g. {-1} -> -1, {1, 2} of a rank-3 input -> -2; nullopt otherwise.
std::optional<int64_t> trailing_axis(std::vector<int64_t> axes, int64_t rank) {
  if (axes.empty()) return std::nullopt;
  for (int64_t& a : axes) {
    if (a >= 0) {
      if (rank < 0 || a >= rank) return std::nullopt;
      a -= rank;
    }
    if (rank >= 0 && a < -rank) return std::nullopt;
  }
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != -static_cast<int64_t>(axes.size()) + static_cast<int64_t>(i)) return std::nullopt;
  return axes.front();
}

// Scale or bias operand of the affine tail: a float constant of rank at most the number of
// normalized axes (so broadcasting never enlarges the output).
bool affine_operand_ok(const Graph& g, ValueId v, int64_t norm_axes) {
  const Tensor* t = constant_of(g, v);
  return t && t->dtype() == DType::kFloat32 && static_cast<int64_t>(t->shape().rank()) <= norm_axes;
}

struct LayerNormMatch {
  std::vector<NodeId> nodes;  // absorbed nodes; nodes[0] becomes the fused node
  ValueId x = kNoValue, scale = kNoValue, bias = kNoValue, y = kNoValue;
  int64_t axis = -1;
  float epsilon = 0.f;
};

std::optional<LayerNormMatch> match_layer_norm(const Graph& g, const ProtectedValues& prot, NodeId mean_id) {
  const Node& mean1 = g.node(mean_id);
  if (!is_onnx_op(mean1, "ReduceMean") || mean1.inputs.empty() || mean1.outputs.size() != 1) return std::nullopt;
  LayerNormMatch m;
  m.x = mean1.inputs[0];
  if (m.x == kNoValue || !is_float_value(g, m.x)) return std::nullopt;
  const auto axes = reduce_axes(g, mean1);
  if (!axes) return std::nullopt;
  const auto axis = trailing_axis(*axes, known_rank(g, m.x));
  if (!axis) return std::nullopt;
  m.axis = *axis;
  const int64_t norm_axes = -m.axis;

  // mean -> Sub(x, mean) -> d
  const NodeId sub_id = sole_consumer(g, prot, mean1.outputs[0]);
  if (sub_id == kNoNode || !is_onnx_op(g.node(sub_id), "Sub")) return std::nullopt;
  const Node& sub = g.node(sub_id);
  if (sub.inputs.size() != 2 || sub.inputs[0] != m.x || sub.inputs[1] != mean1.outputs[0] || sub.outputs.size() != 1)
    return std::nullopt;
  const ValueId d = sub.outputs[0];
  // d is read by exactly two nodes: the square (Pow(d, 2) or Mul(d, d)) and Div(d, std).
  if (prot.contains(d) || g.value(d).consumers.size() != 2) return std::nullopt;
  NodeId sq_id = kNoNode, div_id = kNoNode;
  for (NodeId c : g.value(d).consumers) {
    const Node& n = g.node(c);
    if (is_onnx_op(n, "Pow") && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] != d) {
      const auto e = scalar_constant(g, n.inputs[1]);
      if (e && *e == 2.0) sq_id = c;
    } else if (is_onnx_op(n, "Mul") && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] == d) {
      sq_id = c;
    } else if (is_onnx_op(n, "Div") && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] != d) {
      div_id = c;
    }
  }
  if (sq_id == kNoNode || div_id == kNoNode || g.node(sq_id).outputs.size() != 1) return std::nullopt;

  // square -> ReduceMean (same axes) -> Add(eps) -> Sqrt -> the Div's divisor
  const NodeId mean2_id = sole_consumer(g, prot, g.node(sq_id).outputs[0]);
  if (mean2_id == kNoNode || !is_onnx_op(g.node(mean2_id), "ReduceMean")) return std::nullopt;
  const Node& mean2 = g.node(mean2_id);
  const auto axes2 = reduce_axes(g, mean2);
  if (!axes2 || trailing_axis(*axes2, known_rank(g, m.x)) != axis || mean2.outputs.size() != 1) return std::nullopt;
  const NodeId add_eps_id = sole_consumer(g, prot, mean2.outputs[0]);
  if (add_eps_id == kNoNode || !is_onnx_op(g.node(add_eps_id), "Add")) return std::nullopt;
  const Node& add_eps = g.node(add_eps_id);
  const auto eps = scalar_constant(g, other_input(add_eps, mean2.outputs[0]));
  if (!eps || *eps < 0.0) return std::nullopt;
  m.epsilon = static_cast<float>(*eps);
  const NodeId sqrt_id = sole_consumer(g, prot, add_eps.outputs[0]);
  if (sqrt_id == kNoNode || !is_onnx_op(g.node(sqrt_id), "Sqrt") || g.node(sqrt_id).outputs.size() != 1)
    return std::nullopt;
  const Node& div = g.node(div_id);
  if (div.inputs[1] != g.node(sqrt_id).outputs[0] || sole_consumer(g, prot, div.inputs[1]) != div_id ||
      div.outputs.size() != 1)
    return std::nullopt;

  m.nodes = {mean_id, sub_id, sq_id, mean2_id, add_eps_id, sqrt_id, div_id};
  m.y = div.outputs[0];
  // Optional affine tail: Mul(scale) then Add(bias), each with a constant operand.
  NodeId next = sole_consumer(g, prot, m.y);
  if (next != kNoNode && is_onnx_op(g.node(next), "Mul")) {
    const ValueId s = other_input(g.node(next), m.y);
    if (s != kNoValue && affine_operand_ok(g, s, norm_axes)) {
      m.scale = s;
      m.nodes.push_back(next);
      m.y = g.node(next).outputs[0];
      next = sole_consumer(g, prot, m.y);
    }
  }
  if (next != kNoNode && is_onnx_op(g.node(next), "Add")) {
    const ValueId b = other_input(g.node(next), m.y);
    if (b != kNoValue && affine_operand_ok(g, b, norm_axes)) {
      m.bias = b;
      m.nodes.push_back(next);
      m.y = g.node(next).outputs[0];
    }
  }
  return m;
}

// ------------------------------------------------------------------------------------------------
// GELU

constexpr double kSqrt2 = 1.4142135623730951;

// x when `v` = x / sqrt(2) or x * (1 / sqrt(2)) from a node read only by `erf`.
ValueId gelu_argument(const Graph& g, const ProtectedValues& prot, ValueId v, NodeId erf, NodeId* scale_node) {
  NodeId p = absorbable_producer(g, prot, v, erf, "Div");
  if (p != kNoNode) {
    const Node& n = g.node(p);
    const auto c = scalar_constant(g, n.inputs.size() == 2 ? n.inputs[1] : kNoValue);
    if (!c || !near(*c, kSqrt2)) return kNoValue;
    *scale_node = p;
    return n.inputs[0];
  }
  p = absorbable_producer(g, prot, v, erf, "Mul");
  if (p == kNoNode) return kNoValue;
  const Node& n = g.node(p);
  for (int k = 0; k < 2 && n.inputs.size() == 2; ++k) {
    const auto c = scalar_constant(g, n.inputs[static_cast<size_t>(k)]);
    if (c && near(*c, 1.0 / kSqrt2)) {
      *scale_node = p;
      return n.inputs[static_cast<size_t>(1 - k)];
    }
  }
  return kNoValue;
}

// True when `n` is Mul(a, b) in either order.
bool is_mul_of(const Node& n, ValueId a, ValueId b) {
  if (!is_onnx_op(n, "Mul") || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  return (n.inputs[0] == a && n.inputs[1] == b) || (n.inputs[0] == b && n.inputs[1] == a);
}

// True when `n` is Mul(v, 0.5) in either order.
bool is_half_of(const Graph& g, const Node& n, ValueId v) {
  if (!is_onnx_op(n, "Mul")) return false;
  const auto c = scalar_constant(g, other_input(n, v));
  return c && *c == 0.5;
}

struct GeluMatch {
  std::vector<NodeId> nodes;
  ValueId x = kNoValue, y = kNoValue;
};

// erf(x / sqrt 2) + 1, then the product with x and 0.5 in any association:
//   (x * (1 + erf)) * 0.5,   x * ((1 + erf) * 0.5),   (x * 0.5) * (1 + erf).
std::optional<GeluMatch> match_gelu(const Graph& g, const ProtectedValues& prot, NodeId erf_id) {
  const Node& erf = g.node(erf_id);
  if (!is_onnx_op(erf, "Erf") || erf.inputs.size() != 1 || erf.outputs.size() != 1) return std::nullopt;
  GeluMatch m;
  NodeId scale = kNoNode;
  m.x = gelu_argument(g, prot, erf.inputs[0], erf_id, &scale);
  if (m.x == kNoValue || !is_float_value(g, m.x)) return std::nullopt;
  const NodeId add_id = sole_consumer(g, prot, erf.outputs[0]);
  if (add_id == kNoNode || !is_onnx_op(g.node(add_id), "Add")) return std::nullopt;
  const auto one = scalar_constant(g, other_input(g.node(add_id), erf.outputs[0]));
  if (!one || *one != 1.0) return std::nullopt;
  const ValueId a = g.node(add_id).outputs[0];
  m.nodes = {scale, erf_id, add_id};

  const NodeId m1_id = sole_consumer(g, prot, a);
  if (m1_id == kNoNode || !is_onnx_op(g.node(m1_id), "Mul") || g.node(m1_id).outputs.size() != 1) return std::nullopt;
  const Node& m1 = g.node(m1_id);
  const ValueId m1_out = m1.outputs[0];
  if (is_mul_of(m1, m.x, a) || is_half_of(g, m1, a)) {
    // (x * a) * 0.5   or   x * (a * 0.5)
    const NodeId m2_id = sole_consumer(g, prot, m1_out);
    if (m2_id == kNoNode) return std::nullopt;
    const Node& m2 = g.node(m2_id);
    const bool ok = is_mul_of(m1, m.x, a) ? is_half_of(g, m2, m1_out) : is_mul_of(m2, m.x, m1_out);
    if (!ok) return std::nullopt;
    m.nodes.insert(m.nodes.end(), {m1_id, m2_id});
    m.y = m2.outputs[0];
    return m;
  }
  // (x * 0.5) * a: the half comes from a separate Mul of x read only by m1.
  const ValueId h = other_input(m1, a);
  const NodeId half_id = absorbable_producer(g, prot, h, m1_id, "Mul");
  if (half_id == kNoNode || !is_half_of(g, g.node(half_id), m.x)) return std::nullopt;
  m.nodes.insert(m.nodes.end(), {half_id, m1_id});
  m.y = m1_out;
  return m;
}

// ------------------------------------------------------------------------------------------------
// Attention

// Multiplies `scale` by the constant of a Div(x, c) / Mul(x, c) / Mul(c, x) producing `v` that
// only `reader` reads; returns x (and records the node), or `v` unchanged when there is none.
ValueId strip_scale(const Graph& g, const ProtectedValues& prot, ValueId v, NodeId reader, double* scale,
                    std::vector<NodeId>* nodes) {
  NodeId p = absorbable_producer(g, prot, v, reader, "Div");
  if (p != kNoNode) {
    const Node& n = g.node(p);
    const auto c = scalar_constant(g, n.inputs.size() == 2 ? n.inputs[1] : kNoValue);
    if (!c || *c == 0.0 || !std::isfinite(*c)) return v;
    *scale /= *c;
    nodes->push_back(p);
    return n.inputs[0];
  }
  p = absorbable_producer(g, prot, v, reader, "Mul");
  if (p == kNoNode) return v;
  const Node& n = g.node(p);
  for (int k = 0; k < 2 && n.inputs.size() == 2; ++k) {
    const auto c = scalar_constant(g, n.inputs[static_cast<size_t>(k)]);
    const ValueId x = n.inputs[static_cast<size_t>(1 - k)];
    if (c && std::isfinite(*c) && !constant_of(g, x)) {
      *scale *= *c;
      nodes->push_back(p);
      return x;
    }
  }
  return v;
}

// A Transpose with an explicit permutation producing `v` that only `reader` reads: returns its
// input and sets `perm`; `v` unchanged otherwise.
ValueId strip_transpose(const Graph& g, const ProtectedValues& prot, ValueId v, NodeId reader,
                        std::vector<int64_t>* perm, std::vector<NodeId>* nodes) {
  const NodeId p = absorbable_producer(g, prot, v, reader, "Transpose");
  if (p == kNoNode) return v;
  const Node& n = g.node(p);
  if (n.inputs.size() != 1 || !n.has_attr("perm")) return v;
  std::vector<int64_t> pm = n.attr_ints("perm");
  std::vector<int64_t> sorted = pm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i)) return v;
  *perm = std::move(pm);
  nodes->push_back(p);
  return n.inputs[0];
}

// Rank of the logical operand: the perm's length when a transpose was absorbed, else the value's.
int64_t operand_rank(const Graph& g, ValueId v, const std::vector<int64_t>& perm) {
  return perm.empty() ? known_rank(g, v) : static_cast<int64_t>(perm.size());
}

// A Where(keep, scores, fill) fill at or below this hides a key as surely as the additive mask
// Where(keep, 0, fill) does: exp(fill - score) is 0 in float32 for every score a model computes.
// Exporters write -1e4 (GPT-2), float32's lowest or -inf. The two differ only in a row that sees
// no key at all, which Where makes uniform and the sum leaves to the unmasked scores; a causal
// mask always shows a row its own position.
constexpr double kMaskFillFloor = -1e4;

struct AttentionMatch {
  std::vector<NodeId> nodes;
  ValueId q = kNoValue, k = kNoValue, v = kNoValue, mask = kNoValue, y = kNoValue;
  ValueId keep = kNoValue;  // a Where mask's boolean condition (mask stays kNoValue then)
  ValueId fill = kNoValue;  // its constant fill
  std::vector<int64_t> q_perm, k_perm, v_perm, out_perm;
  double scale = 1.0;
};

// Softmax(scale * (Q @ K) [+ mask]) @ V, found from the Softmax.
std::optional<AttentionMatch> match_attention(const Graph& g, const ProtectedValues& prot, NodeId sm_id) {
  const Node& sm = g.node(sm_id);
  if (!is_onnx_op(sm, "Softmax") || sm.inputs.size() != 1 || sm.outputs.size() != 1) return std::nullopt;
  AttentionMatch m;
  // Scores side: [Add(mask)] <- [Div/Mul(scale)] <- MatMul.
  ValueId cur = sm.inputs[0];
  NodeId reader = sm_id;
  if (const NodeId add = absorbable_producer(g, prot, cur, reader, "Add"); add != kNoNode) {
    const Node& n = g.node(add);
    if (n.inputs.size() != 2) return std::nullopt;
    // The scores operand is the one coming (through an optional scale) from a MatMul.
    int chain = -1;
    for (int k = 0; k < 2 && chain < 0; ++k) {
      ValueId s = n.inputs[static_cast<size_t>(k)];
      const NodeId p = producer_of(g, s);
      if (p == kNoNode) continue;
      if (is_onnx_op(g.node(p), "MatMul")) {
        chain = k;
      } else if (is_onnx_op(g.node(p), "Div") || is_onnx_op(g.node(p), "Mul")) {
        const NodeId pp = producer_of(g, g.node(p).inputs[0]);
        const NodeId pq = g.node(p).inputs.size() > 1 ? producer_of(g, g.node(p).inputs[1]) : kNoNode;
        if ((pp != kNoNode && is_onnx_op(g.node(pp), "MatMul")) || (pq != kNoNode && is_onnx_op(g.node(pq), "MatMul")))
          chain = k;
      }
    }
    if (chain < 0) return std::nullopt;
    m.mask = n.inputs[static_cast<size_t>(1 - chain)];
    if (m.mask == n.inputs[static_cast<size_t>(chain)] || !is_float_value(g, m.mask)) return std::nullopt;
    m.nodes.push_back(add);
    cur = n.inputs[static_cast<size_t>(chain)];
    reader = add;
  }
  // Or Where(keep, scores, fill), a boolean mask with a fill far below any score.
  if (m.mask == kNoValue) {
    if (const NodeId wh = absorbable_producer(g, prot, cur, reader, "Where"); wh != kNoNode) {
      const Node& n = g.node(wh);
      const auto fill = n.inputs.size() == 3 ? scalar_constant(g, n.inputs[2]) : std::nullopt;
      if (!fill || !(*fill <= kMaskFillFloor) || n.inputs[0] == kNoValue || n.inputs[1] == kNoValue ||
          g.value(n.inputs[0]).dtype != DType::kBool || n.inputs[1] == n.inputs[0])
        return std::nullopt;
      m.keep = n.inputs[0];
      m.fill = n.inputs[2];
      m.nodes.push_back(wh);
      cur = n.inputs[1];
      reader = wh;
    }
  }
  const size_t before = m.nodes.size();
  const ValueId unscaled = strip_scale(g, prot, cur, reader, &m.scale, &m.nodes);
  if (m.nodes.size() != before) {
    reader = m.nodes.back();
    cur = unscaled;
  }
  const NodeId qk_id = absorbable_producer(g, prot, cur, reader, "MatMul");
  if (qk_id == kNoNode || g.node(qk_id).inputs.size() != 2) return std::nullopt;
  const Node& qk = g.node(qk_id);
  m.nodes.push_back(qk_id);

  // Operands: optional scalar scales, then optional head-split transposes.
  for (int side = 0; side < 2; ++side) {
    ValueId x = qk.inputs[static_cast<size_t>(side)];
    NodeId rd = qk_id;
    const size_t n0 = m.nodes.size();
    x = strip_scale(g, prot, x, rd, &m.scale, &m.nodes);
    if (m.nodes.size() != n0) rd = m.nodes.back();
    x = strip_transpose(g, prot, x, rd, side == 0 ? &m.q_perm : &m.k_perm, &m.nodes);
    (side == 0 ? m.q : m.k) = x;
  }

  // Probabilities -> MatMul(P, V) [-> Transpose].
  const NodeId pv_id = sole_consumer(g, prot, sm.outputs[0]);
  if (pv_id == kNoNode || !is_onnx_op(g.node(pv_id), "MatMul")) return std::nullopt;
  const Node& pv = g.node(pv_id);
  if (pv.inputs.size() != 2 || pv.inputs[0] != sm.outputs[0] || pv.outputs.size() != 1) return std::nullopt;
  m.v = strip_transpose(g, prot, pv.inputs[1], pv_id, &m.v_perm, &m.nodes);
  m.nodes.push_back(sm_id);
  m.nodes.push_back(pv_id);
  m.y = pv.outputs[0];
  if (const NodeId t = sole_consumer(g, prot, m.y); t != kNoNode && is_onnx_op(g.node(t), "Transpose")) {
    const Node& tn = g.node(t);
    std::vector<int64_t> perm = tn.attr_ints("perm");
    if (tn.has_attr("perm") && tn.outputs.size() == 1) {
      m.out_perm = std::move(perm);
      m.nodes.push_back(t);
      m.y = tn.outputs[0];
    }
  }

  // Shapes: every logical operand of known rank >= 2; the softmax over the last axis.
  const int64_t qr = operand_rank(g, m.q, m.q_perm), kr = operand_rank(g, m.k, m.k_perm);
  const int64_t vr = operand_rank(g, m.v, m.v_perm);
  if (qr < 2 || kr < 2 || vr < 2) return std::nullopt;
  const int64_t score_rank = std::max(qr, kr);
  if (!m.out_perm.empty() && static_cast<int64_t>(m.out_perm.size()) != std::max(score_rank, vr)) return std::nullopt;
  const int64_t default_axis = sm.opset > 0 && sm.opset < 13 ? 1 : -1;
  const int64_t axis = sm.attr_int("axis", default_axis);
  if (axis != -1 && axis != score_rank - 1) return std::nullopt;
  for (ValueId mk : {m.mask, m.keep}) {
    if (mk == kNoValue) continue;
    const int64_t mr = rank_through(g, mk);
    if (mr < 0 || mr > score_rank) return std::nullopt;
  }
  for (ValueId x : {m.q, m.k, m.v})
    if (x == kNoValue || !is_float_value(g, x)) return std::nullopt;
  return m;
}

// Turns nodes[0] into the fused node and kills the others.
Node& rewrite(Graph& g, const std::vector<NodeId>& nodes, const char* op_type, std::vector<ValueId> inputs,
              ValueId output) {
  for (size_t i = 1; i < nodes.size(); ++i) g.node(nodes[i]).dead = true;
  Node& n = g.node(nodes[0]);
  make_fused(n, op_type);
  n.inputs = std::move(inputs);
  n.outputs = {output};
  return n;
}

}  // namespace

int fuse_layer_norm(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    if (g.node(id).dead) continue;
    const auto m = match_layer_norm(g, prot, id);
    if (!m) continue;
    ValueId scale = m->scale;
    if (scale == kNoValue)
      scale = g.add_constant(detail::unique_value_name(g, g.value(m->x).name + "_ln_scale"),
                             Tensor::from_vector<float>(Shape{1}, {1.f}));
    std::vector<ValueId> inputs = {m->x, scale};
    if (m->bias != kNoValue) inputs.push_back(m->bias);
    Node& n = rewrite(g, m->nodes, "LayerNormalization", std::move(inputs), m->y);
    set_int_attr(n, "axis", m->axis);
    set_float_attr(n, "epsilon", m->epsilon);
    g.rebuild_edges();
    ++count;
  }
  return count;
}

int fuse_gelu(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    if (g.node(id).dead) continue;
    const auto m = match_gelu(g, prot, id);
    if (!m) continue;
    rewrite(g, m->nodes, "Gelu", {m->x}, m->y);
    g.rebuild_edges();
    ++count;
  }
  return count;
}

int fuse_attention(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  ValueId zero = kNoValue;  // the 0 of every Where mask made additive, one constant for all
  for (NodeId id : *order) {
    if (g.node(id).dead) continue;
    const auto m = match_attention(g, prot, id);
    if (!m) continue;
    std::vector<ValueId> inputs = {m->q, m->k, m->v};
    if (m->mask != kNoValue) inputs.push_back(m->mask);
    if (m->keep != kNoValue) {
      // The boolean mask as the additive one: Where(keep, 0, fill), the size of the condition.
      const std::string base = g.value(m->keep).name;
      if (zero == kNoValue)
        zero = g.add_constant(detail::unique_value_name(g, "attention_mask_zero"), Tensor::scalar<float>(0.f));
      const ValueId add =
          g.add_value(detail::unique_value_name(g, base + "_additive"), DType::kFloat32, g.value(m->keep).dims);
      const int opset = g.node(id).opset;
      const NodeId w = g.add_node("Where", g.node(id).name + "/mask", {m->keep, zero, m->fill}, {add});
      g.node(w).opset = opset;
      inputs.push_back(add);
    }
    // The Softmax becomes the fused node (any absorbed node would do).
    std::vector<NodeId> nodes = m->nodes;
    const auto sm = std::find(nodes.begin(), nodes.end(), id);
    std::iter_swap(nodes.begin(), sm);
    Node& n = rewrite(g, nodes, "Attention", std::move(inputs), m->y);
    set_float_attr(n, "scale", static_cast<float>(m->scale));
    if (!m->q_perm.empty()) set_ints_attr(n, "q_perm", m->q_perm);
    if (!m->k_perm.empty()) set_ints_attr(n, "k_perm", m->k_perm);
    if (!m->v_perm.empty()) set_ints_attr(n, "v_perm", m->v_perm);
    if (!m->out_perm.empty()) set_ints_attr(n, "out_perm", m->out_perm);
    g.rebuild_edges();
    ++count;
  }
  return count;
}

// streamline.Gelu, or ONNX Gelu (opset 20, erf form, float32), whose input comes from a MatMul,
// Gemm, FusedMatMul or FusedGemm without an activation (read only by the Gelu) becomes that
// product's activation.
int fuse_matmul_gelu(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    const Node& gelu = g.node(id);
    // ONNX's own Gelu (opset 20) in its erf form is the same activation.
    const bool onnx_gelu = gelu.domain.empty() && gelu.op_type == "Gelu" &&
                           gelu.attr_string("approximate", "none") == "none" && !gelu.inputs.empty() &&
                           gelu.inputs[0] != kNoValue && g.value(gelu.inputs[0]).dtype == DType::kFloat32;
    const bool ours = gelu.domain == kStreamlineDomain && gelu.op_type == "Gelu";
    if (gelu.dead || (!ours && !onnx_gelu) || gelu.inputs.size() != 1 || gelu.outputs.size() != 1) continue;
    const ValueId x = gelu.inputs[0];
    const NodeId p = producer_of(g, x);
    if (p == kNoNode || sole_consumer(g, prot, x) != id) continue;
    Node& prod = g.node(p);
    if (prod.dead || prod.outputs.size() != 1 || detail::has_subgraph(prod)) continue;
    const bool onnx_product = prod.domain.empty() && (prod.op_type == "MatMul" || prod.op_type == "Gemm");
    // The int8 products writing float32 (pass_quant.cc) take a GELU as well.
    const bool float_qmatmul = prod.op_type == "QMatMul" && (prod.inputs.size() < 7 || prod.inputs[6] == kNoValue);
    const bool fused_product = prod.domain == kStreamlineDomain &&
                               (prod.op_type == "FusedMatMul" || prod.op_type == "FusedGemm" ||
                                prod.op_type == "MatMulIntegerToFloat" || float_qmatmul) &&
                               prod.attr_string("activation", "").empty();
    if (!onnx_product && !fused_product) continue;
    if (onnx_product) {
      const bool matmul = prod.op_type == "MatMul";
      if (prod.inputs.size() < 2) continue;
      prod.op_type = matmul ? "FusedMatMul" : "FusedGemm";
      prod.domain = kStreamlineDomain;
      prod.opset = kStreamlineOpset;
      if (matmul) prod.inputs = {prod.inputs[0], prod.inputs[1], kNoValue};
    }
    Attribute act;
    act.kind = Attribute::Kind::kString;
    act.s = "Gelu";
    prod.attrs["activation"] = std::move(act);
    prod.attrs.erase("activation_params");
    prod.outputs = {gelu.outputs[0]};
    g.node(id).dead = true;
    g.rebuild_edges();
    ++count;
  }
  return count;
}

}  // namespace streamline::graph
