// Element-wise regions of a QDQ graph as 256-entry tables (part of the int8 rewrites, see
// pass_quant.cc).
//
// A QuantizeLinear whose input is computed element-wise from a single 8-bit tensor X (through
// DequantizeLinear, unary ops, binary ops with scalar constants or with other values of the same
// region, and QuantizeLinear/DequantizeLinear pairs or tables inside it) is a function of X's code
// alone: 256 possible inputs. The region is evaluated once, at load, on all 256 codes with the
// graph's ConstantEvaluator (the CPU kernels), and the QuantizeLinear becomes
// streamline.QLookup(X, table): the same bytes the QDQ graph computes, in one pass over 8-bit data.
//
//   DQ -> Sigmoid -> Q                               (EfficientNet's sigmoid, a logistic head)
//   DQ -> Q (another scale)                          (a requantisation between ops)
//   DQ -> Sigmoid -> Q -> DQ, DQ -> Mul -> Q         (x * sigmoid(x), SiLU with its inner Q/DQ)
//   DQ -> HardSigmoid, DQ -> Mul -> Q                (x * hardsigmoid(x), MobileNetV3's h-swish)
//
// The nodes of the region stay where something else reads them; dead-code elimination removes
// the rest.

#include <algorithm>
#include <map>
#include <set>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

using detail::constant_of;

constexpr size_t kMaxRegion = 32;  // nodes; a bound on the walk, far above the patterns above

bool elementwise(const Node& n) {
  static const std::set<std::string> kOps = {
      "Relu", "LeakyRelu", "Sigmoid",    "Tanh",     "HardSigmoid", "HardSwish", "Clip", "Elu",
      "Selu", "Celu",      "Softplus",   "Softsign", "Exp",         "Log",       "Neg",  "Abs",
      "Sqrt", "Erf",       "Reciprocal", "Floor",    "Ceil",        "Round",     "Sign", "Identity",
      "Add",  "Sub",       "Mul",        "Div",      "Pow",         "Max",       "Min",  "PRelu"};
  return !n.dead && n.domain.empty() && !detail::has_subgraph(n) && n.outputs.size() == 1 && kOps.count(n.op_type);
}

bool per_tensor(const Graph& g, const Node& n) {
  if (n.inputs.size() < 2) return false;
  const Tensor* s = constant_of(g, n.inputs[1]);
  if (!s || s->numel() != 1) return false;
  return n.inputs.size() < 3 || n.inputs[2] == kNoValue ||
         (constant_of(g, n.inputs[2]) && constant_of(g, n.inputs[2])->numel() == 1);
}

bool is_8bit(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8;
}

// The walk back from a QuantizeLinear's input. `through` lets it continue past a DQ whose input
// is itself computed in the region (a Q or a QLookup); without it every DQ input is a source.
class Region {
 public:
  Region(const Graph& g, bool through) : g_(g), through_(through) {}

  bool float_value(ValueId v) {
    if (v == kNoValue) return false;
    if (const Tensor* c = constant_of(g_, v)) return c->numel() == 1;
    const NodeId p = g_.value(v).producer;
    if (p == kNoNode) return false;
    if (nodes_.count(p)) return true;
    const Node& n = g_.node(p);
    if (detail::is_onnx_op(n, "DequantizeLinear") && per_tensor(g_, n)) return add(p) && code_value(n.inputs[0]);
    if (!elementwise(n) || !add(p)) return false;
    for (ValueId i : n.inputs)
      if (i != kNoValue && !float_value(i)) return false;
    return true;
  }

  // An 8-bit value: computed in the region (through a Q or QLookup) or the region's source.
  bool code_value(ValueId v) {
    if (v == kNoValue || constant_of(g_, v) || !is_8bit(g_.value(v).dtype)) return false;
    if (v == source_) return true;
    const NodeId p = g_.value(v).producer;
    if (through_ && p != kNoNode && !nodes_.count(p)) {
      const Node& n = g_.node(p);
      if (detail::is_onnx_op(n, "QuantizeLinear") && per_tensor(g_, n)) return add(p) && float_value(n.inputs[0]);
      if (n.domain == kStreamlineDomain && n.op_type == "QLookup" && !n.dead) return add(p) && code_value(n.inputs[0]);
    }
    if (p != kNoNode && nodes_.count(p)) return true;
    if (source_ != kNoValue) return false;
    source_ = v;
    return true;
  }

  ValueId source() const { return source_; }
  const std::set<NodeId>& nodes() const { return nodes_; }

 private:
  bool add(NodeId n) {
    nodes_.insert(n);
    return nodes_.size() <= kMaxRegion;
  }

  const Graph& g_;
  bool through_;
  ValueId source_ = kNoValue;
  std::set<NodeId> nodes_;
};

// The region's function on all 256 codes of `source`, ending in `q` (its QuantizeLinear);
// nullopt when a node fails to evaluate.
std::optional<Tensor> tabulate(const Graph& g, ConstantEvaluator& ev, const std::vector<NodeId>& order,
                               const std::set<NodeId>& nodes, ValueId source, NodeId q) {
  const DType st = g.value(source).dtype;
  Tensor codes = Tensor::empty(st, Shape{256});
  for (int i = 0; i < 256; ++i) {
    if (st == DType::kInt8)
      codes.data<int8_t>()[i] = static_cast<int8_t>(i - 128);
    else
      codes.data<uint8_t>()[i] = static_cast<uint8_t>(i);
  }
  std::map<ValueId, Tensor> vals{{source, codes}};
  for (NodeId id : order) {
    if (!nodes.count(id) && id != q) continue;
    const Node& n = g.node(id);
    std::vector<Tensor> in;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) {
        in.emplace_back();
      } else if (auto it = vals.find(v); it != vals.end()) {
        in.push_back(it->second);
      } else if (const Tensor* c = constant_of(g, v)) {
        in.push_back(*c);
      } else {
        return std::nullopt;
      }
    }
    auto out = ev.evaluate(g, n, in);
    if (!out.ok() || out->empty() || (*out)[0].numel() != 256) return std::nullopt;
    vals[n.outputs[0]] = (*out)[0];
  }
  const Tensor& t = vals[g.node(q).outputs[0]];
  if (!is_8bit(t.dtype())) return std::nullopt;
  return t;
}

}  // namespace

int fuse_quantized_lookups(Graph& g, ConstantEvaluator& evaluator) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const detail::ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    const Node& q = g.node(id);
    if (!detail::is_onnx_op(q, "QuantizeLinear") || !per_tensor(g, q) || q.outputs.empty() ||
        q.outputs[0] == kNoValue || q.inputs[0] == kNoValue)
      continue;
    // A region with work in it: a DQ straight into this Q is a requantisation only when the
    // scales differ (pass_quant.cc's patterns cover the rest).
    std::optional<Region> found;
    for (bool through : {true, false}) {
      Region r(g, through);
      if (r.float_value(q.inputs[0]) && r.source() != kNoValue) {
        found.emplace(std::move(r));
        break;
      }
    }
    if (!found) continue;
    auto table = tabulate(g, evaluator, *order, found->nodes(), found->source(), id);
    if (!table) continue;
    const ValueId source = found->source();
    const ValueId t = g.add_constant(detail::unique_value_name(g, g.node(id).name + "_table"), std::move(*table));
    Node& n = g.node(id);
    n.op_type = "QLookup";
    n.domain = kStreamlineDomain;
    n.opset = 1;
    n.attrs.clear();
    n.inputs = {source, t};
    g.rebuild_edges();
    ++count;
  }
  return count;
}

}  // namespace streamline::graph
