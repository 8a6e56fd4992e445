#include "graph/infer_dtypes.h"

#include <set>
#include <string>
#include <unordered_map>

namespace streamline::graph {
namespace {

DType body_output_dtype(const Node& node, const char* attr, size_t index) {
  auto it = node.attrs.find(attr);
  if (it == node.attrs.end() || !it->second.g) return DType::kUndefined;
  const Graph& body = *it->second.g;
  if (index >= body.outputs().size()) return DType::kUndefined;
  const Value& v = body.value(body.outputs()[index]);
  return v.constant ? v.constant->dtype() : v.dtype;
}

// The input position of the output zero point of onnxruntime's quantised com.microsoft ops
// (QLinearAdd: A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp; QLinearConcat: Y_scale, Y_zp,
// then the inputs; QGemm: A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp), or -1.
int microsoft_output_zero_point(const std::string& op) {
  if (op == "QLinearAdd" || op == "QLinearMul") return 7;
  if (op == "QLinearConcat") return 1;
  if (op == "QLinearGlobalAveragePool" || op == "QLinearAveragePool" || op == "QLinearSigmoid" ||
      op == "QLinearLeakyRelu" || op == "QLinearSoftmax")
    return 4;
  if (op == "QGemm") return 8;
  return -1;
}

DType first_present(const std::vector<DType>& in) {
  for (DType t : in)
    if (t != DType::kUndefined) return t;
  return DType::kUndefined;
}

// The dtypes visible from a graph by name: its own values, then the enclosing graphs'.
struct Scope {
  const Graph* graph = nullptr;
  const std::unordered_map<std::string, ValueId>* names = nullptr;
  const Scope* parent = nullptr;

  DType find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->names->find(name);
      if (it != s->names->end()) {
        const Value& v = s->graph->value(it->second);
        return v.constant ? v.constant->dtype() : v.dtype;
      }
    }
    return DType::kUndefined;
  }
};

int fill(Graph& g, const Scope* outer) {
  std::unordered_map<std::string, ValueId> names;
  for (size_t v = 0; v < g.num_values(); ++v)
    names.emplace(g.value(static_cast<ValueId>(v)).name, static_cast<ValueId>(v));
  const Scope scope{&g, &names, outer};
  int filled = 0;
  // Pass 1: values captured from the enclosing graphs.
  for (size_t i = 0; i < g.num_values() && outer; ++i) {
    const auto v = static_cast<ValueId>(i);
    Value& val = g.value(v);
    if (val.dtype != DType::kUndefined || val.constant || val.producer != kNoNode || g.is_graph_input(v)) continue;
    val.dtype = outer->find(val.name);
    if (val.dtype != DType::kUndefined) ++filled;
  }
  // Pass 2: node outputs in topological order, subgraphs first so branch outputs are known.
  auto order = g.topological_order();
  if (!order.ok()) return filled;
  for (NodeId id : *order) {
    Node& node = g.node(id);
    for (auto& [name, attr] : node.attrs)
      if (attr.g) filled += fill(*attr.g, &scope);
    std::vector<DType> in;
    for (ValueId v : node.inputs) {
      if (v == kNoValue) {
        in.push_back(DType::kUndefined);
        continue;
      }
      const Value& val = g.value(v);
      in.push_back(val.constant ? val.constant->dtype() : val.dtype);
    }
    const std::vector<DType> out = fallback_output_dtypes(node, in);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ValueId v = node.outputs[o];
      if (v == kNoValue || g.value(v).dtype != DType::kUndefined || out[o] == DType::kUndefined) continue;
      g.value(v).dtype = out[o];
      ++filled;
    }
  }
  return filled;
}

}  // namespace

std::vector<DType> fallback_output_dtypes(const Node& node, const std::vector<DType>& in) {
  static const std::set<std::string> kInt64 = {"Shape", "Size", "ArgMax", "ArgMin", "NonZero", "NonMaxSuppression"};
  static const std::set<std::string> kBool = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not",
                                              "And",   "Or",   "Xor",     "IsNaN",       "IsInf"};
  const std::string& op = node.op_type;
  const size_t n = node.outputs.size();
  const auto input = [&](size_t i) { return i < in.size() ? in[i] : DType::kUndefined; };
  const auto attr_dtype = [&](const char* name, DType def) {
    return node.has_attr(name) ? static_cast<DType>(node.attr_int(name, 0)) : def;
  };
  const DType first = first_present(in);
  std::vector<DType> out(n, first);
  if (node.domain == "com.microsoft") {
    // onnxruntime's quantised contrib ops write their output zero point's type; their first
    // input is often a float scale (QLinearConcat) that says nothing about it.
    const int zp = microsoft_output_zero_point(op);
    if (n > 0 && op == "QGemm")  // without y_scale the output is float32; without y_zp uint8
      out[0] = input(7) == DType::kUndefined   ? DType::kFloat32
               : input(8) != DType::kUndefined ? input(8)
                                               : DType::kUInt8;
    else if (n > 0 && zp >= 0)
      out[0] = input(static_cast<size_t>(zp));
    return out;
  }
  if (!node.domain.empty() && node.domain != "streamline") return out;
  if (kInt64.count(op)) {
    out.assign(n, DType::kInt64);
  } else if (kBool.count(op)) {
    out.assign(n, DType::kBool);
  } else if (op == "Cast" || op == "BitCast") {
    out.assign(n, attr_dtype("to", DType::kFloat32));
  } else if (op == "CastLike") {
    out.assign(n, input(1));
  } else if (op == "Where") {
    out.assign(n, input(1));
  } else if (op == "Constant" || op == "ConstantOfShape") {
    auto it = node.attrs.find("value");
    DType t = DType::kFloat32;
    if (it != node.attrs.end() && it->second.t.defined())
      t = it->second.t.dtype();
    else if (node.has_attr("value_int") || node.has_attr("value_ints"))
      t = DType::kInt64;
    out.assign(n, t);
  } else if (op == "QuantizeLinear") {
    out.assign(n, input(2) != DType::kUndefined ? input(2) : attr_dtype("output_dtype", DType::kUInt8));
    if (out[0] == DType::kUndefined) out[0] = DType::kUInt8;
  } else if (op == "DequantizeLinear") {
    out.assign(n, node.attr_int("output_dtype", 0) != 0 ? attr_dtype("output_dtype", DType::kFloat32) : input(1));
  } else if (op == "DynamicQuantizeLinear") {
    out = {DType::kUInt8, DType::kFloat32, DType::kUInt8};
    out.resize(n, DType::kUInt8);
  } else if (op == "MatMulInteger" || op == "ConvInteger") {
    out.assign(n, DType::kInt32);
  } else if (op == "QLinearMatMul" || op == "QLinearConv") {
    out.assign(n, input(7));
  } else if (op == "EyeLike" || op == "RandomNormalLike" || op == "RandomUniformLike") {
    out.assign(n, attr_dtype("dtype", first));
  } else if (op == "Multinomial") {
    out.assign(n, attr_dtype("dtype", DType::kInt32));
  } else if (op == "OneHot") {
    out.assign(n, input(2));
  } else if (op == "TopK" || op == "MaxPool") {
    for (size_t i = 1; i < n; ++i) out[i] = DType::kInt64;  // indices
  } else if (op == "Unique") {
    for (size_t i = 1; i < n; ++i) out[i] = DType::kInt64;
  } else if (op == "If") {
    for (size_t i = 0; i < n; ++i) out[i] = body_output_dtype(node, "then_branch", i);
  } else if (op == "Loop") {
    for (size_t i = 0; i < n; ++i) out[i] = body_output_dtype(node, "body", i + 1);  // body output 0 is cond
  } else if (op == "Scan") {
    for (size_t i = 0; i < n; ++i) out[i] = body_output_dtype(node, "body", i);
  }
  return out;
}

int fill_missing_dtypes(Graph& g) {
  return fill(g, nullptr);
}

}  // namespace streamline::graph
