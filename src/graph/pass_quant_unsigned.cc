// int8 activations to uint8 (the last step of the int8 rewrites, see pass_quant.cc).
//
// An int8 tensor q with zero point z holds the real values s * (q - z); the uint8 tensor q + 128
// with zero point z + 128 holds the same values, and saturating to [-128, 127] is saturating to
// [0, 255] shifted. So wherever every op writing and reading a tensor takes its zero point as an
// input, the tensor can switch to uint8 by giving those ops new zero points: nothing computed
// changes. oneDNN's int8 convolutions and matrix products run fastest on an unsigned source
// without a zero point, which is what a Relu'd int8 tensor (zero point -128) becomes.
//
// Components: tensors joined by the ops that only move values (Reshape, MaxPool, Concat, ...)
// switch together. A component switches when each tensor in it is computed (not a graph input,
// output or constant), each producer is QuantizeLinear or one of streamline's Q ops (or a moving
// op inside the component), and each reader is DequantizeLinear, a Q op reading it as a
// quantised input, or a moving op inside the component. QLookup reads int8 codes from index 128,
// where the shifted uint8 code lands, so it reads either; as a producer its table is shifted.

#include <map>
#include <numeric>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

using detail::constant_of;

// For a node reading a quantised tensor at input `i`: the input holding that tensor's zero
// point, or -1 when the node does not take one there.
int zp_input_for(const Node& n, size_t i) {
  if (n.domain.empty()) {
    const bool reads = n.op_type == "DequantizeLinear" || n.op_type == "QLinearConv" || n.op_type == "QLinearMatMul";
    return reads && i == 0 ? 2 : -1;
  }
  if (n.domain != kStreamlineDomain) return -1;
  if (n.op_type == "QConv") return i == 0 ? 2 : i == 9 ? 11 : -1;
  if (n.op_type == "QMatMul" || n.op_type == "QGlobalAveragePool" || n.op_type == "QScaleShift" ||
      n.op_type == "QAveragePool")
    return i == 0 ? 2 : -1;
  if (n.op_type == "QAdd" || n.op_type == "QMul") return i == 0 ? 2 : i == 3 ? 5 : -1;
  return -1;
}

// streamline.QLookup indexes int8 codes from 128, which is where the uint8 code of the same value
// sits: its input switches for free; its output switches with its table.
bool is_lookup(const Node& n) {
  return n.domain == kStreamlineDomain && n.op_type == "QLookup";
}

// For a node writing a quantised output 0: the input holding its zero point, or -1.
int zp_input_of_output(const Node& n) {
  if (n.domain.empty()) {
    if (n.op_type == "QuantizeLinear") return 2;
    return n.op_type == "QLinearConv" || n.op_type == "QLinearMatMul" ? 7 : -1;
  }
  if (n.domain != kStreamlineDomain) return -1;
  if (n.op_type == "QConv" || n.op_type == "QMatMul" || n.op_type == "QAdd" || n.op_type == "QMul") return 7;
  if (n.op_type == "QGlobalAveragePool" || n.op_type == "QAveragePool") return 4;
  if (n.op_type == "QScaleShift") return 6;
  return -1;
}

bool moves_values(const Node& n) {
  static const char* kOps[] = {"MaxPool", "Reshape", "Flatten",      "Squeeze",      "Unsqueeze", "Transpose",
                               "Slice",   "Concat",  "DepthToSpace", "SpaceToDepth", "Pad"};
  if (!n.domain.empty()) return false;
  for (const char* op : kOps)
    if (n.op_type == op) return true;
  return false;
}
bool is_data_input(const Node& n, size_t i) {
  return n.op_type == "Concat" || i == 0;
}

struct UnionFind {
  std::vector<size_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  size_t find(size_t v) { return parent[v] == v ? v : parent[v] = find(parent[v]); }
  void join(size_t a, size_t b) { parent[find(a)] = find(b); }
};

}  // namespace

int normalize_int8_activations(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const detail::ProtectedValues prot(g);
  const size_t nv = g.num_values();
  auto int8_act = [&](ValueId v) { return v != kNoValue && g.value(v).dtype == DType::kInt8 && !constant_of(g, v); };
  // 1. Components over moving ops, and which components have something that rules them out.
  UnionFind uf(nv);
  std::vector<char> bad(nv, 0);
  for (NodeId id : *order) {
    const Node& n = g.node(id);
    if (!moves_values(n) || n.outputs.empty() || !int8_act(n.outputs[0])) continue;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (is_data_input(n, i) && int8_act(n.inputs[i]))
        uf.join(static_cast<size_t>(n.inputs[i]), static_cast<size_t>(n.outputs[0]));
  }
  for (size_t v = 0; v < nv; ++v) {
    const ValueId id = static_cast<ValueId>(v);
    if (!int8_act(id)) continue;
    const Value& val = g.value(id);
    bool ok = !prot.contains(id) && !g.is_graph_input(id) && val.producer != kNoNode;
    if (ok) {
      const Node& p = g.node(val.producer);
      ok = p.outputs[0] == id && (moves_values(p) || zp_input_of_output(p) >= 0 || is_lookup(p));
    }
    for (NodeId c : val.consumers) {
      const Node& n = g.node(c);
      for (size_t i = 0; i < n.inputs.size() && ok; ++i) {
        if (n.inputs[i] != id) continue;
        const bool moved = moves_values(n) && is_data_input(n, i) && !n.outputs.empty() && int8_act(n.outputs[0]);
        ok = moved || zp_input_for(n, i) >= 0 || (is_lookup(n) && i == 0);
      }
    }
    if (!ok) bad[uf.find(v)] = 1;
  }
  // 2. Switch the good components: new uint8 zero points (one per old constant), uint8 dtypes.
  std::map<ValueId, ValueId> shifted;
  auto shift = [&](ValueId zp) -> ValueId {
    auto it = shifted.find(zp);
    if (it != shifted.end()) return it->second;
    int32_t z = 0;
    if (zp != kNoValue) {
      const Tensor* t = constant_of(g, zp);
      if (!t || t->numel() != 1 || t->dtype() != DType::kInt8) return kNoValue;
      z = t->data<int8_t>()[0];
    }
    const std::string base = zp == kNoValue ? std::string("uint8_zero_point") : g.value(zp).name + "_uint8";
    const ValueId nz =
        g.add_constant(detail::unique_value_name(g, base), Tensor::scalar<uint8_t>(static_cast<uint8_t>(z + 128)));
    shifted.emplace(zp, nz);
    return nz;
  };
  auto good = [&](ValueId v) { return int8_act(v) && !bad[uf.find(static_cast<size_t>(v))]; };
  // Zero points that are not int8 scalar constants make their component stay int8.
  auto zp_ok = [&](ValueId zp) {
    if (zp == kNoValue) return true;
    const Tensor* t = constant_of(g, zp);
    return t && t->numel() == 1 && t->dtype() == DType::kInt8;
  };
  for (NodeId id : *order) {
    const Node& n = g.node(id);
    const int out_zp = zp_input_of_output(n);
    if (out_zp >= 0 && !n.outputs.empty() && good(n.outputs[0])) {
      const ValueId zp =
          static_cast<size_t>(out_zp) < n.inputs.size() ? n.inputs[static_cast<size_t>(out_zp)] : kNoValue;
      if (zp == kNoValue || !zp_ok(zp)) bad[uf.find(static_cast<size_t>(n.outputs[0]))] = 1;
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int z = zp_input_for(n, i);
      if (z < 0 || !good(n.inputs[i])) continue;
      const ValueId zp = static_cast<size_t>(z) < n.inputs.size() ? n.inputs[static_cast<size_t>(z)] : kNoValue;
      if (!zp_ok(zp)) bad[uf.find(static_cast<size_t>(n.inputs[i]))] = 1;
    }
    if (n.domain.empty() && n.op_type == "Pad" && !n.outputs.empty() && good(n.outputs[0]) && n.inputs.size() > 2 &&
        !zp_ok(n.inputs[2]))
      bad[uf.find(static_cast<size_t>(n.outputs[0]))] = 1;
    if (is_lookup(n) && !n.outputs.empty() && good(n.outputs[0])) {
      const Tensor* t = n.inputs.size() > 1 ? constant_of(g, n.inputs[1]) : nullptr;
      if (!t || t->numel() != 256 || t->dtype() != DType::kInt8) bad[uf.find(static_cast<size_t>(n.outputs[0]))] = 1;
    }
  }
  int count = 0;
  std::vector<ValueId> flipped;
  for (NodeId id : *order) {
    Node& n = g.node(id);
    const int out_zp = zp_input_of_output(n);
    if (out_zp >= 0 && !n.outputs.empty() && good(n.outputs[0])) {
      const ValueId nz = shift(n.inputs[static_cast<size_t>(out_zp)]);
      g.node(id).inputs[static_cast<size_t>(out_zp)] = nz;
      ++count;
    }
    if (n.domain.empty() && n.op_type == "Pad" && !n.outputs.empty() && good(n.outputs[0])) {
      // The padding code moves with the data (an absent one is code 0).
      if (n.inputs.size() < 3) g.node(id).inputs.resize(3, kNoValue);
      const ValueId nz = shift(g.node(id).inputs[2]);
      g.node(id).inputs[2] = nz;
    }
    if (is_lookup(n) && n.inputs.size() > 1 && good(n.outputs[0])) {
      // The same values as uint8 codes.
      Tensor t = Tensor::empty(DType::kUInt8, Shape{256});
      const Tensor* old = constant_of(g, n.inputs[1]);
      for (int64_t i = 0; i < 256 && old; ++i)
        t.data<uint8_t>()[i] = static_cast<uint8_t>(static_cast<uint8_t>(old->data<int8_t>()[i]) ^ 0x80);
      const ValueId nt = g.add_constant(detail::unique_value_name(g, g.node(id).name + "_uint8_table"), std::move(t));
      g.node(id).inputs[1] = nt;
      ++count;
    }
    Node& m = g.node(id);
    for (size_t i = 0; i < m.inputs.size(); ++i) {
      const int z = zp_input_for(m, i);
      if (z < 0 || !good(m.inputs[i])) continue;
      if (m.inputs.size() <= static_cast<size_t>(z)) m.inputs.resize(static_cast<size_t>(z) + 1, kNoValue);
      const ValueId nz = shift(m.inputs[static_cast<size_t>(z)]);
      g.node(id).inputs[static_cast<size_t>(z)] = nz;
    }
  }
  for (size_t v = 0; v < nv; ++v)
    if (good(static_cast<ValueId>(v))) flipped.push_back(static_cast<ValueId>(v));
  for (ValueId v : flipped) g.value(v).dtype = DType::kUInt8;
  if (count) g.rebuild_edges();
  return count;
}

}  // namespace streamline::graph
