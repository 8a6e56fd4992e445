// onnxruntime's quantised operators (domain com.microsoft, what its quantizer writes with
// QuantFormat.QOperator) onto streamline's int8 ops, the first step of the int8 rewrites:
//
//   QLinearAdd / QLinearMul(A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp)  -> QAdd / QMul
//   QLinearGlobalAveragePool / QLinearAveragePool(X, x_scale, x_zp, y_scale, y_zp)
//                                                 (channels_last = 0)   -> QGlobalAveragePool / QAveragePool
//   QLinearSigmoid / QLinearLeakyRelu(X, X_scale, X_zp, Y_scale, Y_zp)   -> QLookup (table made here)
//   QLinearConcat(Y_scale, Y_zp, X0, X0_scale, X0_zp, ...)               -> requantising QLookups + Concat
//   QGemm(A, a_scale, a_zp, B, b_scale, b_zp, [C], [y_scale], [y_zp])    -> QMatMul (constant B)
//   QLinearConv (ONNX domain) with constant 8-bit weights                   -> QConv (same inputs)
//
// Only per-tensor constant scales and zero points qualify (per-column b_scale for QGemm,
// per-channel w_scale for QLinearConv); any other com.microsoft node is left, and the model then
// reports it as unsupported. Then a QAdd that is the only reader of a QConv's output (ResNet's
// residual sums; the Relu after them the quantizer leaves to the output range) folds into that
// QConv as its residual Z, as pattern 2 of pass_quant.cc does for QDQ graphs: the conv's output
// range stays as `pre_residual_clip`, its rounding goes.

#include <cmath>

#include "graph/pass_quant_util.h"

namespace streamline::graph {
namespace {

using detail::constant_of;
using namespace quant;  // NOLINT(google-build-using-namespace): the int8 rewrites' own helpers

constexpr const char* kMicrosoft = "com.microsoft";

ValueId input(const Node& n, size_t i) {
  return i < n.inputs.size() ? n.inputs[i] : kNoValue;
}

void retype(Graph& g, Node& n, const char* op, DType out) {
  to_streamline(n, op);
  if (!n.outputs.empty() && n.outputs[0] != kNoValue) g.value(n.outputs[0]).dtype = out;
}

// The table of an element-wise function f from quantisation `x` to quantisation `y`.
template <typename F>
Tensor function_table(const QParam& x, const QParam& y, F f) {
  Tensor t = Tensor::empty(y.t, Shape{256});
  const float lo = y.t == DType::kInt8 ? -128.f : 0.f, hi = y.t == DType::kInt8 ? 127.f : 255.f;
  for (int i = 0; i < 256; ++i) {
    const float code = static_cast<float>(x.t == DType::kInt8 ? i - 128 : i);
    const float v = f((code - static_cast<float>(x.z)) * x.s);
    const float q = std::min(hi, std::max(lo, std::rint(v / y.s) + static_cast<float>(y.z)));
    if (y.t == DType::kInt8)
      t.data<int8_t>()[i] = static_cast<int8_t>(q);
    else
      t.data<uint8_t>()[i] = static_cast<uint8_t>(q);
  }
  return t;
}

bool convert_binary_or_pool(Graph& g, NodeId id) {
  Node& n = g.node(id);
  const bool binary = n.op_type == "QLinearAdd" || n.op_type == "QLinearMul";
  const size_t y_slot = binary ? 6 : 3;
  if (!params_of(g, input(n, 1), input(n, 2)) || !params_of(g, input(n, y_slot), input(n, y_slot + 1))) return false;
  if (binary && !params_of(g, input(n, 4), input(n, 5))) return false;
  if (!binary && n.attr_int("channels_last", 0) != 0) return false;
  const DType out = params_of(g, input(n, y_slot), input(n, y_slot + 1))->t;
  if (input(n, y_slot + 1) == kNoValue) {
    n.inputs.resize(y_slot + 2, kNoValue);
    g.node(id).inputs[y_slot + 1] =
        g.add_constant(detail::unique_value_name(g, n.name + "_y_zero_point"), Tensor::scalar<uint8_t>(0));
  }
  const char* op = n.op_type == "QLinearAdd"                 ? "QAdd"
                   : n.op_type == "QLinearMul"               ? "QMul"
                   : n.op_type == "QLinearGlobalAveragePool" ? "QGlobalAveragePool"
                                                             : "QAveragePool";
  g.node(id).attrs.erase("channels_last");
  retype(g, g.node(id), op, out);
  return true;
}

bool convert_unary(Graph& g, NodeId id) {
  const Node& n = g.node(id);
  const auto x = params_of(g, input(n, 1), input(n, 2));
  const auto y = params_of(g, input(n, 3), input(n, 4));
  if (!x || !y) return false;
  const float alpha = n.attr_float("alpha", 0.01f);
  const Tensor table = n.op_type == "QLinearSigmoid"
                           ? function_table(*x, *y, [](float v) { return 1.f / (1.f + std::exp(-v)); })
                           : function_table(*x, *y, [alpha](float v) { return v >= 0.f ? v : alpha * v; });
  const ValueId t = g.add_constant(detail::unique_value_name(g, n.name + "_table"), table);
  Node& m = g.node(id);
  m.inputs = {m.inputs[0], t};
  m.attrs.clear();
  retype(g, m, "QLookup", y->t);
  return true;
}

// An input with another scale than the output is quantised straight to the output's by the QConv,
// QMatMul or QAdd that writes it for the Concat alone (as pattern 5 does for QDQ graphs), or
// requantised by a QLookup.
bool convert_concat(Graph& g, NodeId id) {
  const Node& n = g.node(id);
  const auto y = params_of(g, input(n, 0), input(n, 1));
  if (!y || n.inputs.size() < 5 || (n.inputs.size() - 2) % 3 != 0) return false;
  std::vector<QParam> xs;
  for (size_t i = 2; i < n.inputs.size(); i += 3) {
    const auto x = params_of(g, input(n, i + 1), input(n, i + 2));
    if (!x || input(n, i) == kNoValue) return false;
    xs.push_back(*x);
  }
  std::vector<ValueId> data;
  const detail::ProtectedValues prot(g);
  for (size_t k = 0; k < xs.size(); ++k) {
    const ValueId x = g.node(id).inputs[2 + 3 * k];
    if (xs[k].same(*y)) {
      data.push_back(x);
      continue;
    }
    const NodeId writer = retargetable_writer(g, prot, x, id);
    if (writer != kNoNode) {
      retarget(g, writer, xs[k], *y);
      data.push_back(x);
      continue;
    }
    const std::string base = g.node(id).name + "_requant" + std::to_string(k);
    const ValueId table = g.add_constant(detail::unique_value_name(g, base + "_table"), requant_table(xs[k], *y));
    const ValueId out = g.add_value(detail::unique_value_name(g, base), y->t, g.value(x).dims);
    const NodeId lk = g.add_node("QLookup", base, {x, table}, {out}, kStreamlineDomain);
    g.node(lk).opset = kStreamlineOpset;
    data.push_back(out);
  }
  Node& m = g.node(id);
  m.op_type = "Concat";
  m.domain.clear();
  m.opset = g.opsets.count("") ? g.opsets.at("") : 13;
  m.inputs = data;
  if (!m.outputs.empty() && m.outputs[0] != kNoValue) g.value(m.outputs[0]).dtype = y->t;
  return true;
}

bool convert_gemm(Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.attr_int("transA", 0) != 0) return false;
  const auto a = params_of(g, input(n, 1), input(n, 2));
  const Tensor* b = constant_of(g, input(n, 3));
  const Tensor* bs = constant_of(g, input(n, 4));
  if (!a || !b || !bs || b->shape().rank() != 2 || !is_8bit(b->dtype()) || bs->dtype() != DType::kFloat32) return false;
  const bool trans_b = n.attr_int("transB", 0) != 0;
  const int64_t k = b->shape()[trans_b ? 1 : 0], nn = b->shape()[trans_b ? 0 : 1];
  if (bs->numel() != 1 && bs->numel() != nn) return false;
  const Tensor* bz = input(n, 5) == kNoValue ? nullptr : constant_of(g, input(n, 5));
  if (input(n, 5) != kNoValue && (!bz || (bz->numel() != 1 && bz->numel() != nn))) return false;
  const ValueId c = input(n, 6);
  if (c != kNoValue) {
    const Tensor* ct = constant_of(g, c);
    if (!ct || ct->dtype() != DType::kInt32 || ct->numel() != nn) return false;
  }
  const bool float_out = input(n, 7) == kNoValue;
  std::optional<QParam> y;
  if (!float_out) {
    y = params_of(g, input(n, 7), input(n, 8));
    if (!y) return false;
  }
  const float alpha = n.attr_float("alpha", 1.f);
  if (!(alpha > 0.f)) return false;
  const std::string name = n.name;
  Tensor bkn = Tensor::empty(b->dtype(), Shape{k, nn});
  const auto* src = static_cast<const uint8_t*>(b->raw());
  auto* dst = static_cast<uint8_t*>(bkn.raw());
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < nn; ++j) dst[i * nn + j] = trans_b ? src[j * k + i] : src[i * nn + j];
  Tensor scale = Tensor::empty(DType::kFloat32, bs->shape());
  for (int64_t i = 0; i < bs->numel(); ++i) scale.data<float>()[i] = bs->data<float>()[i] * alpha;
  const ValueId bv = g.add_constant(detail::unique_value_name(g, name + "_weight_kn"), std::move(bkn));
  const ValueId sv = g.add_constant(detail::unique_value_name(g, name + "_weight_scale"), std::move(scale));
  Node& m = g.node(id);
  const ValueId yz = float_out ? kNoValue : input(m, 8);
  m.inputs = {m.inputs[0], m.inputs[1], input(m, 2), bv, sv, input(m, 5), float_out ? kNoValue : m.inputs[7], yz, c};
  if (!float_out && yz == kNoValue)
    g.node(id).inputs[7] =
        g.add_constant(detail::unique_value_name(g, name + "_y_zero_point"), Tensor::scalar<uint8_t>(0));
  g.node(id).attrs.clear();
  retype(g, g.node(id), "QMatMul", float_out ? DType::kFloat32 : y->t);
  return true;
}

bool convert_conv(Graph& g, NodeId id) {
  Node& n = g.node(id);
  if (n.inputs.size() < 8 || n.outputs.size() != 1 || n.outputs[0] == kNoValue) return false;
  const Tensor* w = constant_of(g, n.inputs[3]);
  const Tensor* ws = constant_of(g, n.inputs[4]);
  if (!w || !ws || !is_8bit(w->dtype()) || w->shape().rank() < 3 || ws->dtype() != DType::kFloat32) return false;
  const auto y = params_of(g, n.inputs[6], n.inputs[7]);
  if (!params_of(g, n.inputs[1], n.inputs[2]) || !y) return false;
  if (n.inputs[2] == kNoValue || n.inputs[7] == kNoValue) return false;
  // ONNX's shape inference cannot type a QLinearConv behind a com.microsoft op; the zero point
  // says what it writes.
  retype(g, n, "QConv", y->t);
  return true;
}

// The 8-bit type of each moving op's output (MaxPool, Flatten, ...) that ONNX's inference left
// undefined behind a com.microsoft op: its data input's. The unsigned switch
// (normalize_int8_activations) needs every 8-bit tensor's type.
void type_moving_ops(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return;
  for (NodeId id : *order) {
    const Node& n = g.node(id);
    if (!moves_values(n) || n.inputs.empty() || n.outputs.empty() || n.outputs[0] == kNoValue) continue;
    const DType in = g.value(n.inputs[0]).dtype;
    if (is_8bit(in) && g.value(n.outputs[0]).dtype == DType::kUndefined) g.value(n.outputs[0]).dtype = in;
  }
}

// QConv -> QAdd (its only reader) => QConv with residual Z (inputs 9 to 11).
bool fold_residual(Graph& g, const detail::ProtectedValues& prot, NodeId id) {
  const Node& add = g.node(id);
  if (add.inputs.size() != 8 || add.outputs.size() != 1 || add.outputs[0] == kNoValue) return false;
  // ONNX's inference leaves the shapes behind a com.microsoft op unknown: fold unless they are
  // known to differ (the QConv kernel checks Z against its output when planning).
  const Value& va = g.value(add.inputs[0]);
  const Value& vb = g.value(add.inputs[3]);
  if (va.dims && vb.dims && !detail::same_known_dims(va, vb)) return false;
  for (size_t k = 0; k < 2; ++k) {
    const ValueId y = add.inputs[3 * k], z = add.inputs[3 * (1 - k)];
    const NodeId conv = g.value(y).producer;
    if (conv == kNoNode || y == z || constant_of(g, z) || detail::sole_consumer(g, prot, y) != id) continue;
    const Node& c = g.node(conv);
    if (c.dead || c.domain != kStreamlineDomain || c.op_type != "QConv" || c.inputs.size() > 9 ||
        c.has_attr("activation") || c.inputs[6] == kNoValue || c.outputs[0] != y)
      continue;
    const auto cy = params_of(g, c.inputs[6], c.inputs[7]);
    const auto ay = params_of(g, add.inputs[3 * k + 1], add.inputs[3 * k + 2]);
    const auto az = params_of(g, add.inputs[3 * (1 - k) + 1], add.inputs[3 * (1 - k) + 2]);
    if (!cy || !ay || !az || !cy->same(*ay) || add.inputs[3 * (1 - k) + 2] == kNoValue) continue;
    const int32_t qmin = cy->t == DType::kInt8 ? -128 : 0, qmax = cy->t == DType::kInt8 ? 127 : 255;
    Attribute clip;
    clip.kind = Attribute::Kind::kFloats;
    clip.floats = {static_cast<float>(qmin - cy->z) * cy->s, static_cast<float>(qmax - cy->z) * cy->s};
    const std::vector<ValueId> ins = add.inputs;
    const ValueId out = add.outputs[0];
    Node& n = g.node(conv);
    n.attrs["pre_residual_clip"] = std::move(clip);
    n.inputs.resize(12, kNoValue);
    n.inputs[6] = ins[6];
    n.inputs[7] = ins[7];
    n.inputs[9] = z;
    n.inputs[10] = ins[3 * (1 - k) + 1];
    n.inputs[11] = ins[3 * (1 - k) + 2];
    n.outputs[0] = out;
    g.node(id).dead = true;
    return true;
  }
  return false;
}

bool is_qadd(const Node& n) {
  return n.domain == kStreamlineDomain && n.op_type == "QAdd";
}

}  // namespace

int convert_qoperator_ops(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  int count = 0;
  for (NodeId id : *order) {
    const Node& n = g.node(id);
    if (n.dead) continue;
    if (detail::is_onnx_op(n, "QLinearConv")) {
      count += convert_conv(g, id);
      continue;
    }
    if (n.domain != kMicrosoft) continue;
    const std::string op = n.op_type;
    bool done = false;
    if (op == "QLinearAdd" || op == "QLinearMul" || op == "QLinearGlobalAveragePool" || op == "QLinearAveragePool")
      done = convert_binary_or_pool(g, id);
    else if (op == "QLinearSigmoid" || op == "QLinearLeakyRelu")
      done = convert_unary(g, id);
    else if (op == "QLinearConcat")
      done = convert_concat(g, id);
    else if (op == "QGemm")
      done = convert_gemm(g, id);
    if (done && op == "QLinearConcat") g.rebuild_edges();  // later Concats ask who reads their inputs
    count += done;
  }
  if (count == 0) return 0;
  g.rebuild_edges();
  type_moving_ops(g);
  return count + sweep(g, is_qadd, fold_residual);
}

}  // namespace streamline::graph
