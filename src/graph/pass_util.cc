#include "graph/pass_util.h"

#include <limits>

namespace streamline::graph::detail {
namespace {

// Adds every value name a subgraph reads or returns, descending into nested subgraphs. This is a
// superset of its outer-scope references, which is what protection needs.
void collect_subgraph_names(const Graph& sg, std::unordered_set<std::string>& names) {
  auto add = [&](ValueId v) {
    if (v != kNoValue && !sg.value(v).name.empty()) names.insert(sg.value(v).name);
  };
  for (size_t i = 0; i < sg.num_nodes(); ++i) {
    const Node& n = sg.node(static_cast<NodeId>(i));
    if (n.dead) continue;
    for (ValueId v : n.inputs) add(v);
    for (const auto& [key, attr] : n.attrs)
      if (attr.kind == Attribute::Kind::kGraph && attr.g) collect_subgraph_names(*attr.g, names);
  }
  for (ValueId v : sg.outputs()) add(v);
}

}  // namespace

ProtectedValues::ProtectedValues(const Graph& g) : g_(g) {
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    if (n.dead) continue;
    for (const auto& [key, attr] : n.attrs)
      if (attr.kind == Attribute::Kind::kGraph && attr.g) collect_subgraph_names(*attr.g, subgraph_names_);
  }
}

bool ProtectedValues::contains(ValueId v) const {
  if (v == kNoValue) return false;
  if (g_.is_graph_output(v)) return true;
  if (subgraph_names_.empty()) return false;
  const std::string& name = g_.value(v).name;
  return !name.empty() && subgraph_names_.count(name) != 0;
}

bool has_subgraph(const Node& n) {
  for (const auto& [key, attr] : n.attrs)
    if (attr.kind == Attribute::Kind::kGraph) return true;
  return false;
}

bool is_onnx_op(const Node& n, const char* op_type) {
  return !n.dead && n.domain.empty() && n.op_type == op_type;
}

NodeId sole_consumer(const Graph& g, const ProtectedValues& prot, ValueId v) {
  if (v == kNoValue || prot.contains(v)) return kNoNode;
  const Value& val = g.value(v);
  if (val.consumers.size() != 1) return kNoNode;
  const NodeId c = val.consumers[0];
  const Node& n = g.node(c);
  int uses = 0;
  for (ValueId i : n.inputs) uses += i == v ? 1 : 0;
  return uses == 1 ? c : kNoNode;
}

const Tensor* constant_of(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  const auto& c = g.value(v).constant;
  return c && c->defined() ? &*c : nullptr;
}

bool same_dim(const Dim& a, const Dim& b) {
  if (a.fixed() || b.fixed()) return a.fixed() && b.fixed() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

bool same_known_dims(const Value& a, const Value& b) {
  if (!a.dims || !b.dims || a.dims->size() != b.dims->size()) return false;
  for (size_t i = 0; i < a.dims->size(); ++i)
    if (!same_dim((*a.dims)[i], (*b.dims)[i])) return false;
  return true;
}

bool float_or_unknown(DType t) {
  return t == DType::kUndefined || t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kFloat64 ||
         t == DType::kBFloat16;
}

std::string unique_value_name(const Graph& g, const std::string& base) {
  if (g.find_value(base) == kNoValue) return base;
  for (int k = 1;; ++k) {
    std::string name = base + "_" + std::to_string(k);
    if (g.find_value(name) == kNoValue) return name;
  }
}

std::optional<std::vector<NodeId>> live_order(Graph& g) {
  g.rebuild_edges();
  auto order = g.topological_order();
  if (!order.ok()) return std::nullopt;
  return std::move(order).value();
}

std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n) {
  if (n.has_attr("axes")) {
    if (n.inputs.size() != 1) return std::nullopt;
    return n.attr_ints("axes");
  }
  if (n.inputs.size() < 2 || n.inputs[1] == kNoValue) return std::nullopt;
  const Tensor* t = constant_of(g, n.inputs[1]);
  if (!t || t->dtype() != DType::kInt64 || t->shape().rank() != 1) return std::nullopt;
  return std::vector<int64_t>(t->data<int64_t>(), t->data<int64_t>() + t->numel());
}

namespace {

// Reads an optional scalar bound of Clip (opset 11+: inputs 1 and 2). False when present but not a
// constant scalar.
bool clip_bound(const Graph& g, const Node& n, size_t index, float fallback, float* out) {
  if (n.inputs.size() <= index || n.inputs[index] == kNoValue) {
    *out = fallback;
    return true;
  }
  const Tensor* t = constant_of(g, n.inputs[index]);
  if (!t || t->numel() != 1) return false;
  *out = static_cast<float>(element_as_double(*t, 0));
  return true;
}

}  // namespace

std::optional<Activation> match_activation(const Graph& g, const Node& n, ValueId input) {
  if (n.dead || !n.domain.empty() || has_subgraph(n)) return std::nullopt;
  if (n.inputs.empty() || n.inputs[0] != input) return std::nullopt;
  if (n.outputs.size() != 1 || n.outputs[0] == kNoValue) return std::nullopt;
  const std::string& op = n.op_type;
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh") return Activation{op, {}};
  if (op == "LeakyRelu") return Activation{op, {n.attr_float("alpha", 0.01f)}};
  if (op == "HardSigmoid") return Activation{op, {n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f)}};
  if (op == "Clip") {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    // Before opset 11 the bounds are attributes; from 11 on they are optional inputs. An unknown
    // opset (0, hand-built graphs) is read as the input form.
    if (n.opset > 0 && n.opset < 11) return Activation{op, {n.attr_float("min", -kInf), n.attr_float("max", kInf)}};
    float lo = -kInf;
    float hi = kInf;
    if (!clip_bound(g, n, 1, -kInf, &lo) || !clip_bound(g, n, 2, kInf, &hi)) return std::nullopt;
    return Activation{op, {lo, hi}};
  }
  return std::nullopt;
}

void set_activation_attrs(Node& n, const Activation& a) {
  Attribute op;
  op.kind = Attribute::Kind::kString;
  op.s = a.op;
  n.attrs["activation"] = std::move(op);
  Attribute params;
  params.kind = Attribute::Kind::kFloats;
  params.floats = a.params;
  n.attrs["activation_params"] = std::move(params);
}

Attribute int_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}

Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

}  // namespace streamline::graph::detail
