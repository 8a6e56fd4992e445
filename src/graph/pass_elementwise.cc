// Elementwise fusion: any connected group of elementwise and broadcast nodes (unary math and
// activations, Add/Sub/Mul/Div/Pow/Max/Min/PRelu with a broadcast constant or a second tensor,
// Clip, Cast between float types, Where) becomes one elementwise program (graph/ew_program.h):
//
//   - into the convolution or matrix product that produces the group's main input, as its
//     epilogue (FusedConv / FusedMatMul / FusedGemm with ew_* attributes and the program's other
//     inputs appended after the node's own), when that product's output is read only by the group;
//   - otherwise into one streamline.Elementwise(inputs...) node, when the group has two or more
//     nodes (a single node is left as it is).
//
// A group grows backwards from a sink: a node joins when it is elementwise, its output provably has
// the sink's shape (so no value is computed at a broadcast size and no work is repeated; see
// ShapeKeys for shapes that inference left unknown), is read only by nodes already in the group
// and is not protected. Scalar float constants become
// immediates. SiLU (x * sigmoid(x)), HardSwish, the GELUs and squeeze-excitation scaling are all
// such groups; the kernels recognise the named functions among them (ops/cpu/ew_lower.cc).
// BatchNormalization layers left after folding into convolutions (pre-activation ones) join as a
// per-channel scale and shift (a Mul and an Add), so even a lone one becomes an Elementwise node,
// which takes the layout of its input where the BatchNormalization kernel took plain only.

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "graph/ew_program.h"
#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

using detail::constant_of;
using detail::ProtectedValues;

constexpr float kInf = std::numeric_limits<float>::infinity();

// One node as an instruction: op, parameters and operands (kNoValue where the operand is the
// immediate `imm`).
struct EwNode {
  EwOp op = EwOp::kIdentity;
  float p0 = 0.f, p1 = 0.f, imm = 0.f;
  std::vector<ValueId> operands;
};

bool is_f32(const Graph& g, ValueId v) {
  return v != kNoValue && g.value(v).dtype == DType::kFloat32;
}

// A one-element float constant's value.
std::optional<float> scalar_of(const Graph& g, ValueId v) {
  const Tensor* t = constant_of(g, v);
  if (!t || t->numel() != 1 || t->dtype() != DType::kFloat32) return std::nullopt;
  return static_cast<float>(element_as_double(*t, 0));
}

struct UnaryName {
  const char* name;
  EwOp op;
};
constexpr UnaryName kUnary[] = {
    {"Relu", EwOp::kRelu},
    {"Sigmoid", EwOp::kSigmoid},
    {"Tanh", EwOp::kTanh},
    {"Exp", EwOp::kExp},
    {"Log", EwOp::kLog},
    {"Sqrt", EwOp::kSqrt},
    {"Reciprocal", EwOp::kReciprocal},
    {"Neg", EwOp::kNeg},
    {"Abs", EwOp::kAbs},
    {"Erf", EwOp::kErf},
    {"HardSwish", EwOp::kHardSwish},
    {"Softplus", EwOp::kSoftplus},
    {"Floor", EwOp::kFloor},
    {"Ceil", EwOp::kCeil},
    {"Round", EwOp::kRound},
    {"Sign", EwOp::kSign},
    {"Mish", EwOp::kMish},
    {"Softsign", EwOp::kSoftsign},
    {"Sin", EwOp::kSin},
    {"Cos", EwOp::kCos},
    {"Identity", EwOp::kIdentity},
};
struct BinaryName {
  const char* name;
  EwOp op;
};
constexpr BinaryName kBinary[] = {
    {"Add", EwOp::kAdd}, {"Sub", EwOp::kSub}, {"Mul", EwOp::kMul}, {"Div", EwOp::kDiv},
    {"Pow", EwOp::kPow}, {"Max", EwOp::kMax}, {"Min", EwOp::kMin}, {"PRelu", EwOp::kPRelu},
};

// The instruction for `n`, or nullopt when it is not an elementwise node the programs cover.
std::optional<EwNode> ew_node(const Graph& g, const Node& n) {
  if (n.dead || detail::has_subgraph(n) || n.outputs.size() != 1 || !is_f32(g, n.outputs[0])) return std::nullopt;
  for (ValueId v : n.inputs)
    if (v == kNoValue && n.op_type != "Clip") return std::nullopt;
  EwNode e;
  if (n.domain == kStreamlineDomain) {
    if (n.op_type != "Gelu" || n.inputs.size() != 1 || !is_f32(g, n.inputs[0])) return std::nullopt;
    e.op = EwOp::kGeluErf;
    e.operands = {n.inputs[0]};
    return e;
  }
  if (!n.domain.empty()) return std::nullopt;
  const std::string& op = n.op_type;
  for (const UnaryName& u : kUnary)
    if (op == u.name) {
      if (n.inputs.size() != 1 || !is_f32(g, n.inputs[0])) return std::nullopt;
      e.op = u.op;
      e.operands = {n.inputs[0]};
      return e;
    }
  auto unary_with = [&](EwOp o, float p0, float p1) -> std::optional<EwNode> {
    if (n.inputs.size() != 1 || !is_f32(g, n.inputs[0])) return std::nullopt;
    e.op = o;
    e.p0 = p0;
    e.p1 = p1;
    e.operands = {n.inputs[0]};
    return e;
  };
  if (op == "LeakyRelu") return unary_with(EwOp::kLeakyRelu, n.attr_float("alpha", 0.01f), 0.f);
  if (op == "HardSigmoid")
    return unary_with(EwOp::kHardSigmoid, n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f));
  if (op == "Elu") return unary_with(EwOp::kElu, n.attr_float("alpha", 1.f), 0.f);
  if (op == "Celu") return unary_with(EwOp::kCelu, n.attr_float("alpha", 1.f), 0.f);
  if (op == "ThresholdedRelu") return unary_with(EwOp::kThresholdedRelu, n.attr_float("alpha", 1.f), 0.f);
  if (op == "Selu")
    return unary_with(EwOp::kSelu, n.attr_float("alpha", 1.67326319217681884765625f),
                      n.attr_float("gamma", 1.05070102214813232421875f));
  if (op == "Clip") {
    if (n.inputs.empty() || !is_f32(g, n.inputs[0]) || n.inputs.size() > 3) return std::nullopt;
    float lo = -kInf, hi = kInf;
    if (n.opset > 0 && n.opset < 11) {
      lo = n.attr_float("min", -kInf);
      hi = n.attr_float("max", kInf);
    } else {
      for (size_t k = 1; k < n.inputs.size(); ++k) {
        if (n.inputs[k] == kNoValue) continue;
        const auto b = scalar_of(g, n.inputs[k]);
        if (!b) return std::nullopt;
        (k == 1 ? lo : hi) = *b;
      }
    }
    e.op = EwOp::kClip;
    e.p0 = lo;
    e.p1 = hi;
    e.operands = {n.inputs[0]};
    return e;
  }
  if (op == "Cast") {
    // Only to float32, from float32 or bool (a mask): the register holds the value as it is.
    if (n.inputs.size() != 1 || n.attr_int("to", 0) != 1) return std::nullopt;
    const DType in = g.value(n.inputs[0]).dtype;
    if (in != DType::kFloat32 && in != DType::kBool) return std::nullopt;
    e.op = EwOp::kIdentity;
    e.operands = {n.inputs[0]};
    return e;
  }
  if (op == "Where") {
    if (n.inputs.size() != 3 || g.value(n.inputs[0]).dtype != DType::kBool || !is_f32(g, n.inputs[1]) ||
        !is_f32(g, n.inputs[2]))
      return std::nullopt;
    e.op = EwOp::kWhere;
    e.operands = {n.inputs[0], n.inputs[1], n.inputs[2]};
    return e;
  }
  for (const BinaryName& b : kBinary)
    if (op == b.name) {
      if (n.inputs.size() != 2 || !is_f32(g, n.inputs[0]) || !is_f32(g, n.inputs[1])) return std::nullopt;
      e.op = b.op;
      e.operands = {n.inputs[0], n.inputs[1]};
      // One scalar constant operand becomes the immediate (the other must be a tensor).
      for (int k = 1; k >= 0; --k) {
        const auto c = scalar_of(g, n.inputs[static_cast<size_t>(k)]);
        if (c && !scalar_of(g, n.inputs[static_cast<size_t>(1 - k)])) {
          e.imm = *c;
          e.operands[static_cast<size_t>(k)] = kNoValue;
          break;
        }
      }
      return e;
    }
  return std::nullopt;
}

// Nodes whose output an epilogue can follow: convolutions and matrix products without one.
bool epilogue_host(const Graph& g, const Node& p) {
  if (p.dead || detail::has_subgraph(p) || p.outputs.size() != 1 || !is_f32(g, p.outputs[0])) return false;
  if (p.has_attr("ew_ops") || p.has_attr("x_scale")) return false;
  if (p.domain.empty())
    return (p.op_type == "Conv" && p.inputs.size() >= 2) || p.op_type == "MatMul" ||
           (p.op_type == "Gemm" && p.inputs.size() >= 2);
  return p.domain == kStreamlineDomain &&
         (p.op_type == "FusedConv" || p.op_type == "FusedMatMul" || p.op_type == "FusedGemm");
}

// Index of the host's first epilogue input: after X, W, B, Z of a convolution, after A, B and the
// bias / C of a product.
size_t first_extra_input(const Node& p) {
  return p.op_type == "Conv" || p.op_type == "FusedConv" ? conv_epilogue_first_input(p) : 3;
}

// Makes `p` the fused form of its op, with its own inputs padded to first_extra_input().
void to_host_form(Node& p) {
  const size_t first = first_extra_input(p);
  if (p.domain.empty()) {
    p.op_type = p.op_type == "Conv" ? "FusedConv" : p.op_type == "MatMul" ? "FusedMatMul" : "FusedGemm";
    p.domain = kStreamlineDomain;
    p.opset = kStreamlineOpset;
  }
  p.inputs.resize(first, kNoValue);
}

struct Group {
  std::vector<NodeId> nodes;  // topological order
  std::vector<ValueId> inputs;
  ValueId output = kNoValue;
};

// Shape keys: whether two values provably have the same shape: equal known dims (fixed sizes or
// the same named symbols), or equal keys. Shape inference leaves many values of
// transformer graphs without dims (everything after a Reshape to a computed shape); those compare
// by a key derived from their producers: an elementwise op keeps the key its full-size operands
// share (scalar constants, and [N] constants against a key ending in N, do not change it), a
// product with constant [K, N] weights makes "A's key x N", a value with known dims and no such
// producer is keyed by its dims, and anything else gets a key of its own, so nothing is ever
// taken for a shape it might not have.
class ShapeKeys {
 public:
  explicit ShapeKeys(const Graph& g) : g_(g), keys_(g.num_values()) {}

  bool same(ValueId a, ValueId b) {
    if (known(a) && known(b) && detail::same_known_dims(g_.value(a), g_.value(b))) return true;
    return key(a) == key(b);
  }

 private:
  bool known(ValueId v) const {
    const auto& dims = g_.value(v).dims;
    return dims && std::all_of(dims->begin(), dims->end(), [](const Dim& d) { return d.fixed() || !d.symbol.empty(); });
  }

  std::string dims_key(ValueId v) const {
    std::string s = "[";
    for (const Dim& d : *g_.value(v).dims) s += (d.fixed() ? std::to_string(d.value) : "$" + d.symbol) + ",";
    return s + "]";
  }

  const std::string& key(ValueId v) {
    std::optional<std::string>& k = keys_[static_cast<size_t>(v)];
    if (k) return *k;
    const std::string own = "?" + std::to_string(v);
    k = own;  // provisional while the producers are keyed
    const Value& val = g_.value(v);
    std::string derived = own;
    if (val.producer != kNoNode && !val.constant) derived = from_producer(g_.node(val.producer), own);
    if (derived == own && known(v)) derived = dims_key(v);
    keys_[static_cast<size_t>(v)] = derived;
    return *keys_[static_cast<size_t>(v)];
  }

  // The last dim a key names, or -1.
  static int64_t last_dim(const std::string& key) {
    const size_t end = key.find_last_of(',');
    if (end == std::string::npos || end == 0) return -1;
    const size_t begin = key.find_last_of(",x[", end - 1);
    const std::string d = key.substr(begin == std::string::npos ? 0 : begin + 1, end - begin - 1);
    return !d.empty() && d.find_first_not_of("0123456789") == std::string::npos ? std::stoll(d) : -1;
  }

  std::string from_producer(const Node& p, const std::string& own) {
    if (p.outputs.size() != 1) return own;
    const bool product =
        (p.domain.empty() && p.op_type == "MatMul") || (p.domain == kStreamlineDomain && p.op_type == "FusedMatMul");
    if (product && p.inputs.size() >= 2) {
      const Tensor* w = constant_of(g_, p.inputs[1]);
      if (!w || w->shape().rank() != 2) return own;
      return "(" + key(p.inputs[0]) + ")x" + std::to_string(w->shape()[1]) + ",";
    }
    if (!ew_node(g_, p)) return own;
    // Elementwise: the key the operands of the output's size share.
    std::optional<std::string> shared;
    std::vector<const Tensor*> consts;
    for (ValueId in : p.inputs) {
      if (in == kNoValue) continue;
      if (const Tensor* c = constant_of(g_, in)) {
        consts.push_back(c);
        continue;
      }
      const std::string& k = key(in);
      if (shared && *shared != k) return own;
      shared = k;
    }
    if (!shared) return own;
    for (const Tensor* c : consts) {
      const Shape& cs = c->shape();
      const bool scalar = cs.numel() == 1 && cs.rank() <= 1;
      const bool row = cs.rank() == 1 && cs[0] == last_dim(*shared);
      if (!scalar && !row) return own;
    }
    return *shared;
  }

  const Graph& g_;
  std::vector<std::optional<std::string>> keys_;
};

}  // namespace

// A BatchNormalization in inference form with constant per-channel parameters (one not folded
// into a convolution: DenseNet's pre-activation ones) becomes Mul(x, a) then Add(., b) with
// a = scale / sqrt(var + eps) and b = bias - mean * a shaped [C, 1, ...], so that it joins the
// elementwise group around it. Returns the number rewritten.
int decompose_batchnorm(Graph& g) {
  if (!detail::live_order(g)) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  const size_t n0 = g.num_nodes();
  for (size_t i = 0; i < n0; ++i) {
    const NodeId id = static_cast<NodeId>(i);
    const Node& bn = g.node(id);
    if (!detail::is_onnx_op(bn, "BatchNormalization") || bn.inputs.size() < 5 || bn.outputs.empty()) continue;
    if (bn.attr_int("training_mode", 0) != 0 || (bn.opset > 0 && bn.opset < 9 && bn.attr_int("spatial", 1) != 1))
      continue;
    bool extra_outputs = false;
    for (size_t k = 1; k < bn.outputs.size(); ++k)
      extra_outputs |=
          bn.outputs[k] != kNoValue && (!g.value(bn.outputs[k]).consumers.empty() || prot.contains(bn.outputs[k]));
    const ValueId x = bn.inputs[0], y = bn.outputs[0];
    if (extra_outputs || x == kNoValue || y == kNoValue || !is_f32(g, x) || !g.value(x).dims) continue;
    const size_t rank = g.value(x).dims->size();
    if (rank < 2) continue;
    const Tensor* p[4];
    bool ok = true;
    for (int k = 0; k < 4; ++k) {
      p[k] = constant_of(g, bn.inputs[static_cast<size_t>(k) + 1]);
      ok = ok && p[k] && (p[k]->dtype() == DType::kFloat32 || p[k]->dtype() == DType::kFloat64);
    }
    if (!ok) continue;
    const int64_t c = p[0]->numel();
    for (int k = 1; k < 4; ++k) ok = ok && p[k]->numel() == c;
    if (!ok) continue;
    const double eps = bn.attr_float("epsilon", 1e-5f);
    std::vector<int64_t> dims(rank - 1, 1);
    dims[0] = c;
    Tensor a = Tensor::empty(DType::kFloat32, Shape(dims)), b = Tensor::empty(DType::kFloat32, Shape(dims));
    for (int64_t ch = 0; ch < c; ++ch) {
      const double s = element_as_double(*p[0], ch) / std::sqrt(element_as_double(*p[3], ch) + eps);
      a.data<float>()[ch] = static_cast<float>(s);
      b.data<float>()[ch] = static_cast<float>(element_as_double(*p[1], ch) - element_as_double(*p[2], ch) * s);
    }
    const std::string base = bn.name.empty() ? g.value(y).name : bn.name;
    const ValueId av = g.add_constant(detail::unique_value_name(g, base + "_scale"), std::move(a));
    const ValueId bv = g.add_constant(detail::unique_value_name(g, base + "_shift"), std::move(b));
    const ValueId mid = g.add_value(detail::unique_value_name(g, base + "_scaled"), DType::kFloat32, g.value(x).dims);
    const NodeId mul = g.add_node("Mul", base + "/scale", {x, av}, {mid});
    g.node(mul).opset = g.node(id).opset;
    Node& add = g.node(id);  // the BN becomes the Add and keeps its output value
    add.op_type = "Add";
    add.inputs = {mid, bv};
    add.outputs = {y};
    add.attrs.clear();
    ++count;
  }
  if (count) g.rebuild_edges();
  return count;
}

int fuse_elementwise(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  std::map<NodeId, size_t> pos;
  for (size_t i = 0; i < order->size(); ++i) pos[(*order)[i]] = i;
  std::vector<std::optional<EwNode>> info(g.num_nodes());
  for (NodeId id : *order) info[static_cast<size_t>(id)] = ew_node(g, g.node(id));
  std::vector<char> taken(g.num_nodes(), 0);
  std::vector<Group> groups;
  ShapeKeys keys(g);

  // 1. Groups, grown backwards from sinks in reverse topological order.
  for (auto it = order->rbegin(); it != order->rend(); ++it) {
    const NodeId sink = *it;
    if (taken[static_cast<size_t>(sink)] || !info[static_cast<size_t>(sink)]) continue;
    const ValueId out = g.node(sink).outputs[0];
    std::set<NodeId> members{sink};
    for (bool grew = true; grew;) {
      grew = false;
      for (NodeId m : std::vector<NodeId>(members.begin(), members.end()))
        for (ValueId v : g.node(m).inputs) {
          if (v == kNoValue || prot.contains(v)) continue;
          const NodeId p = g.value(v).producer;
          if (p == kNoNode || members.count(p) || taken[static_cast<size_t>(p)] || !info[static_cast<size_t>(p)])
            continue;
          if (!keys.same(v, out)) continue;
          const auto& cons = g.value(v).consumers;
          if (!std::all_of(cons.begin(), cons.end(), [&](NodeId c) { return members.count(c) != 0; })) continue;
          members.insert(p);
          grew = true;
        }
    }
    Group grp;
    grp.nodes.assign(members.begin(), members.end());
    std::sort(grp.nodes.begin(), grp.nodes.end(), [&](NodeId a, NodeId b) { return pos[a] < pos[b]; });
    grp.output = g.node(sink).outputs[0];
    for (NodeId m : grp.nodes) {
      taken[static_cast<size_t>(m)] = 1;
      for (ValueId v : info[static_cast<size_t>(m)]->operands) {
        if (v == kNoValue) continue;
        const NodeId p = g.value(v).producer;
        if ((p != kNoNode && members.count(p)) || std::count(grp.inputs.begin(), grp.inputs.end(), v)) continue;
        grp.inputs.push_back(v);
      }
    }
    groups.push_back(std::move(grp));
  }

  // 2. Each group into its host's epilogue, or into one Elementwise node.
  int count = 0;
  for (Group& grp : groups) {
    // The host: the producer of a full-size input read only by the group.
    NodeId host = kNoNode;
    size_t main = 0;
    for (size_t k = 0; k < grp.inputs.size() && host == kNoNode; ++k) {
      const ValueId v = grp.inputs[k];
      const NodeId p = g.value(v).producer;
      if (p == kNoNode || prot.contains(v) || !epilogue_host(g, g.node(p))) continue;
      if (!keys.same(v, grp.output)) continue;
      const auto& cons = g.value(v).consumers;
      const bool only_group = std::all_of(cons.begin(), cons.end(), [&](NodeId c) {
        return std::find(grp.nodes.begin(), grp.nodes.end(), c) != grp.nodes.end();
      });
      if (!only_group) continue;
      host = p;
      main = k;
    }
    if (host == kNoNode && grp.nodes.size() < 2) continue;  // a lone node stays as it is
    // Registers: the main input first (the host's result, or the first input), then the rest.
    std::rotate(grp.inputs.begin(), grp.inputs.begin() + static_cast<std::ptrdiff_t>(main),
                grp.inputs.begin() + static_cast<std::ptrdiff_t>(main) + 1);
    EwProgram prog;
    prog.num_inputs = static_cast<int>(grp.inputs.size());
    std::map<ValueId, int> reg;
    for (size_t k = 0; k < grp.inputs.size(); ++k) reg[grp.inputs[k]] = static_cast<int>(k);
    for (NodeId m : grp.nodes) {
      const EwNode& e = *info[static_cast<size_t>(m)];
      std::vector<int> args;
      for (ValueId v : e.operands) args.push_back(v == kNoValue ? EwInstr::kImm : reg.at(v));
      reg[g.node(m).outputs[0]] = prog.add(e.op, args, e.p0, e.p1, e.imm);
    }
    if (!prog.validate().ok()) continue;
    if (host != kNoNode) {
      Node& h = g.node(host);
      to_host_form(h);
      for (size_t k = 1; k < grp.inputs.size(); ++k) h.inputs.push_back(grp.inputs[k]);
      h.outputs = {grp.output};
      set_program_attrs(h, prog);
      for (NodeId m : grp.nodes) g.node(m).dead = true;
    } else {
      const NodeId sink = grp.nodes.back();
      for (NodeId m : grp.nodes)
        if (m != sink) g.node(m).dead = true;
      Node& n = g.node(sink);
      n.op_type = "Elementwise";
      n.domain = kStreamlineDomain;
      n.opset = kStreamlineOpset;
      n.attrs.clear();
      n.inputs = grp.inputs;
      n.outputs = {grp.output};
      set_program_attrs(n, prog);
    }
    ++count;
  }
  if (count) g.rebuild_edges();
  return count;
}

}  // namespace streamline::graph
