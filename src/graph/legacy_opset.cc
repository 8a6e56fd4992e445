// The upgrade of opset 1..6 nodes to opset 7 described in legacy_opset.h: one rule per op whose
// definition changed before opset 7, run over the nodes the model had (nodes it inserts are
// already in opset-7 form).
#include "graph/legacy_opset.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "graph/pass_util.h"

namespace streamline::graph {
namespace {

using detail::int_attr;
using detail::ints_attr;

struct Upgrade {
  Graph& g;
  int model_opset;
  std::unordered_set<std::string> names;  // value and node names in use

  // "Add 'add1' (opset 6)" for errors.
  std::string where(NodeId id) const {
    return g.node(id).describe() + " (opset " + std::to_string(model_opset) + ")";
  }

  // `base`, or `base` with a numeric suffix, not yet used by any value or node.
  std::string fresh_name(const std::string& base) {
    std::string name = base;
    for (int k = 1; names.count(name); ++k) name = base + "_" + std::to_string(k);
    names.insert(name);
    return name;
  }
};

std::optional<int64_t> rank_of(const Graph& g, ValueId v) {
  if (v == kNoValue) return std::nullopt;
  const Value& val = g.value(v);
  if (val.constant) return static_cast<int64_t>(val.constant->shape().rank());
  if (val.dims) return static_cast<int64_t>(val.dims->size());
  return std::nullopt;
}

// The values of a constant tensor of whole numbers, or nothing when `v` is not one. Opset-1 ops
// carry sizes and axes in tensors of their float type, so float32/float64 count when whole.
std::optional<std::vector<int64_t>> constant_ints(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).constant) return std::nullopt;
  const Tensor& t = *g.value(v).constant;
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    double x = 0;
    switch (t.dtype()) {
      case DType::kInt64: out[i] = t.data<int64_t>()[i]; continue;
      case DType::kInt32: out[i] = t.data<int32_t>()[i]; continue;
      case DType::kFloat32: x = t.data<float>()[i]; break;
      case DType::kFloat64: x = t.data<double>()[i]; break;
      default: return std::nullopt;
    }
    if (!(std::fabs(x) <= double{int64_t{1} << 53}) || std::floor(x) != x) return std::nullopt;
    out[i] = static_cast<int64_t>(x);
  }
  return out;
}

std::string input_name(const Graph& g, const Node& n, size_t i) {
  return "'" + g.value(n.inputs[i]).name + "'";
}

bool has_input(const Node& n, size_t i) {
  return n.inputs.size() > i && n.inputs[i] != kNoValue;
}

// Gives input `i` of node `id` `ones` trailing dims of size 1: a constant gets a reshaped copy (the
// original may have other readers), anything else goes through a new Unsqueeze node.
void append_ones(Upgrade& u, NodeId id, size_t i, int64_t ones) {
  if (ones <= 0) return;
  Graph& g = u.g;
  const ValueId in = g.node(id).inputs[i];
  const std::string base = g.value(in).name + "_" + g.node(id).name;
  ValueId out = kNoValue;
  if (g.value(in).constant) {
    const Tensor& t = *g.value(in).constant;
    std::vector<int64_t> dims = t.shape().to_vector();
    dims.insert(dims.end(), static_cast<size_t>(ones), 1);
    const Tensor reshaped = t.reshaped(Shape(dims));
    out = g.add_constant(u.fresh_name(base), reshaped);
  } else {
    const int64_t rank = *rank_of(g, in);
    std::optional<DimList> dims = g.value(in).dims;
    if (dims) dims->insert(dims->end(), static_cast<size_t>(ones), Dim(1));
    out = g.add_value(u.fresh_name(base), g.value(in).dtype, std::move(dims));
    std::vector<int64_t> axes;
    for (int64_t k = 0; k < ones; ++k) axes.push_back(rank + k);
    const NodeId sq = g.add_node("Unsqueeze", u.fresh_name(g.node(id).name + "_unsqueeze"), {in}, {out});
    g.node(sq).opset = kLegacyOpsetLimit;
    g.node(sq).attrs.emplace("axes", ints_attr(std::move(axes)));
  }
  g.node(id).inputs[i] = out;
}

// Binary ops with legacy broadcasting (broadcast, axis).
Status upgrade_broadcast(Upgrade& u, NodeId id) {
  Node& n = u.g.node(id);
  const bool broadcast = n.attr_int("broadcast", 0) != 0;
  const bool has_axis = n.has_attr("axis");
  const int64_t axis_attr = n.attr_int("axis", 0);
  n.attrs.erase("broadcast");
  n.attrs.erase("axis");
  if (!broadcast || !has_axis) return ok_status();  // equal shapes, or B lines up with A's last dims
  if (!has_input(n, 0) || !has_input(n, 1)) return invalid_argument(u.where(id) + " needs two inputs");
  const std::optional<int64_t> rank_a = rank_of(u.g, n.inputs[0]);
  const std::optional<int64_t> rank_b = rank_of(u.g, n.inputs[1]);
  if (!rank_b)
    return unsupported(u.where(id) + ": legacy broadcasting along axis " + std::to_string(axis_attr) +
                       " needs the rank of input B " + input_name(u.g, n, 1) + ", which is not known at load");
  if (*rank_b == 0) return ok_status();  // a scalar broadcasts anywhere
  if (!rank_a)
    return unsupported(u.where(id) + ": legacy broadcasting along axis " + std::to_string(axis_attr) +
                       " needs the rank of input A " + input_name(u.g, n, 0) + ", which is not known at load");
  const int64_t axis = axis_attr < 0 ? axis_attr + *rank_a : axis_attr;
  if (axis < 0 || axis > *rank_a - *rank_b)
    return invalid_argument(u.where(id) + ": broadcast axis " + std::to_string(axis_attr) + " does not fit input B " +
                            input_name(u.g, n, 1) + " of rank " + std::to_string(*rank_b) + " into input A " +
                            input_name(u.g, n, 0) + " of rank " + std::to_string(*rank_a));
  append_ones(u, id, 1, *rank_a - axis - *rank_b);
  return ok_status();
}

// PRelu before opset 7: a 1-d slope holds one value per channel (dim 1 of X).
Status upgrade_prelu(Upgrade& u, NodeId id) {
  const Node& n = u.g.node(id);
  if (!has_input(n, 0) || !has_input(n, 1)) return ok_status();  // the kernel reports it
  const std::optional<int64_t> rank_slope = rank_of(u.g, n.inputs[1]);
  if (!rank_slope)
    return unsupported(u.where(id) + ": the rank of slope " + input_name(u.g, n, 1) + " is not known at load");
  if (*rank_slope != 1) return ok_status();
  const Value& slope = u.g.value(n.inputs[1]);
  const int64_t size = slope.constant ? slope.constant->shape()[0] : (*slope.dims)[0].value;  // -1: unknown
  if (size == 1) return ok_status();
  const std::optional<int64_t> rank_x = rank_of(u.g, n.inputs[0]);
  if (!rank_x)
    return unsupported(u.where(id) + ": a per-channel slope needs the rank of input X " + input_name(u.g, n, 0) +
                       ", which is not known at load");
  if (*rank_x < 3) return ok_status();  // [N, C]: numpy broadcasting lines the slope up with C already
  const Value& x = u.g.value(n.inputs[0]);
  const int64_t channels = x.constant ? x.constant->shape()[1] : (*x.dims)[1].value;
  if (size >= 0 && channels >= 0 && size != channels)
    return invalid_argument(u.where(id) + ": slope " + input_name(u.g, n, 1) + " has " + std::to_string(size) +
                            " values but input X has " + std::to_string(channels) + " channels");
  append_ones(u, id, 1, *rank_x - 2);
  return ok_status();
}

// Reshape before opset 5: the target shape is an attribute.
Status upgrade_reshape(Upgrade& u, NodeId id) {
  if (u.model_opset >= 5) return ok_status();
  Node& n = u.g.node(id);
  if (!n.has_attr("shape")) return invalid_argument(u.where(id) + ": missing attribute 'shape'");
  if (!has_input(n, 0)) return invalid_argument(u.where(id) + ": missing input 'data'");
  const std::vector<int64_t> shape = n.attr_ints("shape");
  n.attrs.erase("shape");
  const ValueId s = u.g.add_constant(u.fresh_name(n.name + "_shape"),
                                     Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(shape.size())}, shape));
  Node& node = u.g.node(id);
  node.inputs = {node.inputs[0], s};
  return ok_status();
}

// Concat before opset 4: `axis` defaults to 1.
Status upgrade_concat(Upgrade& u, NodeId id) {
  Node& n = u.g.node(id);
  if (u.model_opset < 4 && !n.has_attr("axis")) n.attrs.emplace("axis", int_attr(1));
  return ok_status();
}

// Pad of opset 1 names its pads `paddings`.
Status upgrade_pad(Upgrade& u, NodeId id) {
  Node& n = u.g.node(id);
  auto it = n.attrs.find("paddings");
  if (u.model_opset >= 2 || it == n.attrs.end()) return ok_status();
  if (n.has_attr("pads")) return invalid_argument(u.where(id) + " has both 'paddings' and 'pads'");
  Attribute pads = std::move(it->second);
  n.attrs.erase(it);
  n.attrs.emplace("pads", std::move(pads));
  return ok_status();
}

// Split of opset 1 may take its sizes as a second input.
Status upgrade_split(Upgrade& u, NodeId id) {
  Node& n = u.g.node(id);
  if (u.model_opset >= 2 || !has_input(n, 1)) {
    if (n.inputs.size() > 1 && u.model_opset < 2) n.inputs.erase(n.inputs.begin() + 1, n.inputs.end());
    return ok_status();
  }
  const std::optional<std::vector<int64_t>> split = constant_ints(u.g, n.inputs[1]);
  if (!split)
    return unsupported(u.where(id) + ": the split sizes " + input_name(u.g, n, 1) +
                       " must be a constant tensor of whole numbers");
  n.attrs.erase("split");
  n.attrs.emplace("split", ints_attr(*split));
  n.inputs.erase(n.inputs.begin() + 1, n.inputs.end());
  return ok_status();
}

// Tile before opset 6: inputs (input, tiles, axis) repeat one axis.
Status upgrade_tile(Upgrade& u, NodeId id) {
  if (u.model_opset >= 6) return ok_status();
  const Node& n = u.g.node(id);
  if (!has_input(n, 0) || !has_input(n, 1) || !has_input(n, 2))
    return invalid_argument(u.where(id) + " needs inputs 'input', 'tiles' and 'axis'");
  const std::optional<std::vector<int64_t>> tiles = constant_ints(u.g, n.inputs[1]);
  const std::optional<std::vector<int64_t>> axis = constant_ints(u.g, n.inputs[2]);
  const std::optional<int64_t> rank = rank_of(u.g, n.inputs[0]);
  if (!tiles || !axis || tiles->size() != 1 || axis->size() != 1)
    return unsupported(u.where(id) + ": 'tiles' and 'axis' must be constant whole-number scalars");
  if (!rank)
    return unsupported(u.where(id) + ": the rank of input " + input_name(u.g, n, 0) + " is not known at load");
  const int64_t a = (*axis)[0] < 0 ? (*axis)[0] + *rank : (*axis)[0];
  if (a < 0 || a >= *rank)
    return invalid_argument(u.where(id) + ": axis " + std::to_string((*axis)[0]) + " is out of range for rank " +
                            std::to_string(*rank));
  std::vector<int64_t> repeats(static_cast<size_t>(*rank), 1);
  repeats[static_cast<size_t>(a)] = (*tiles)[0];
  const ValueId r = u.g.add_constant(u.fresh_name(n.name + "_repeats"),
                                     Tensor::from_vector<int64_t>(Shape{*rank}, repeats));
  Node& node = u.g.node(id);
  node.inputs = {node.inputs[0], r};
  return ok_status();
}

// Cast before opset 6 names its target type ("FLOAT") instead of numbering it.
Status upgrade_cast(Upgrade& u, NodeId id) {
  Node& n = u.g.node(id);
  auto it = n.attrs.find("to");
  if (u.model_opset >= 6 || it == n.attrs.end() || it->second.kind != Attribute::Kind::kString) return ok_status();
  onnx::TensorProto::DataType type{};
  if (!onnx::TensorProto::DataType_Parse(it->second.s, &type) || type == onnx::TensorProto::UNDEFINED)
    return invalid_argument(u.where(id) + ": 'to' names no ONNX element type: '" + it->second.s + "'");
  it->second = int_attr(static_cast<int64_t>(type));
  return ok_status();
}

// LpPool and GlobalLpPool of opset 1 have a float `p`.
Status upgrade_lp_pool(Upgrade& u, NodeId id) {
  Node& n = u.g.node(id);
  auto it = n.attrs.find("p");
  if (u.model_opset >= 2 || it == n.attrs.end() || it->second.kind != Attribute::Kind::kFloat) return ok_status();
  const float p = it->second.f;
  if (!(p >= 1.f && p <= 64.f) || std::floor(p) != p)
    return unsupported(u.where(id) + ": p = " + std::to_string(p) + " is not a small whole number");
  it->second = int_attr(static_cast<int64_t>(p));
  return ok_status();
}

// Upsample before opset 7 (experimental then) scales an NCHW tensor by height_scale and width_scale;
// its interpolating mode was called "bilinear".
Status upgrade_upsample(Upgrade& u, NodeId id) {
  Node& n = u.g.node(id);
  if (n.has_attr("scales")) return ok_status();
  if (!n.has_attr("height_scale") || !n.has_attr("width_scale"))
    return invalid_argument(u.where(id) + ": missing attribute 'height_scale' or 'width_scale'");
  const std::optional<int64_t> rank = has_input(n, 0) ? rank_of(u.g, n.inputs[0]) : std::nullopt;
  if (rank && *rank != 4)
    return invalid_argument(u.where(id) + ": input " + input_name(u.g, n, 0) + " has rank " + std::to_string(*rank) +
                            "; height_scale and width_scale scale a 4-d NCHW tensor");
  Attribute scales;
  scales.kind = Attribute::Kind::kFloats;
  scales.floats = {1.f, 1.f, n.attr_float("height_scale", 1.f), n.attr_float("width_scale", 1.f)};
  n.attrs.erase("height_scale");
  n.attrs.erase("width_scale");
  n.attrs.emplace("scales", std::move(scales));
  auto mode = n.attrs.find("mode");
  if (mode != n.attrs.end() && mode->second.s == "bilinear") mode->second.s = "linear";
  return ok_status();
}

Status drop_is_test(Upgrade& u, NodeId id) {
  u.g.node(id).attrs.erase("is_test");
  return ok_status();
}

Status drop_broadcast(Upgrade& u, NodeId id) {
  u.g.node(id).attrs.erase("broadcast");
  return ok_status();
}

Status drop_output_sequence(Upgrade& u, NodeId id) {
  u.g.node(id).attrs.erase("output_sequence");
  return ok_status();
}

using Rule = Status (*)(Upgrade&, NodeId);
struct OpRule {
  const char* op;
  Rule rule;
};

// Ops whose definition changed between opset 1 and opset 7 beyond losing consumed_inputs, which
// every op loses. Ops absent here are the same at opset 7 as in the model's opset.
constexpr OpRule kRules[] = {
    {"Add", upgrade_broadcast},
    {"Sub", upgrade_broadcast},
    {"Mul", upgrade_broadcast},
    {"Div", upgrade_broadcast},
    {"Pow", upgrade_broadcast},
    {"And", upgrade_broadcast},
    {"Or", upgrade_broadcast},
    {"Xor", upgrade_broadcast},
    {"Equal", upgrade_broadcast},
    {"Greater", upgrade_broadcast},
    {"Less", upgrade_broadcast},
    {"PRelu", upgrade_prelu},
    {"Gemm", drop_broadcast},
    {"BatchNormalization", drop_is_test},
    {"Dropout", drop_is_test},
    {"RNN", drop_output_sequence},
    {"GRU", drop_output_sequence},
    {"LSTM", drop_output_sequence},
    {"Reshape", upgrade_reshape},
    {"Concat", upgrade_concat},
    {"Pad", upgrade_pad},
    {"Split", upgrade_split},
    {"Tile", upgrade_tile},
    {"Cast", upgrade_cast},
    {"LpPool", upgrade_lp_pool},
    {"GlobalLpPool", upgrade_lp_pool},
    {"Upsample", upgrade_upsample},
};

Rule find_rule(const std::string& op) {
  for (const OpRule& r : kRules)
    if (op == r.op) return r.rule;
  return nullptr;
}

}  // namespace

Status upgrade_legacy_nodes(Graph& g, int model_opset) {
  if (model_opset >= kLegacyOpsetLimit) return ok_status();
  Upgrade u{g, model_opset, {}};
  for (size_t v = 0; v < g.num_values(); ++v) u.names.insert(g.value(static_cast<ValueId>(v)).name);
  const size_t count = g.num_nodes();  // nodes appended below are already in opset-7 form
  for (size_t i = 0; i < count; ++i) u.names.insert(g.node(static_cast<NodeId>(i)).name);
  for (size_t i = 0; i < count; ++i) {
    const auto id = static_cast<NodeId>(i);
    for (auto& [key, attr] : g.node(id).attrs) {
      if (attr.kind != Attribute::Kind::kGraph || !attr.g) continue;
      Status s = upgrade_legacy_nodes(*attr.g, model_opset);
      if (!s.ok()) return s.with_context("in subgraph '" + key + "' of node " + g.node(id).describe());
    }
    if (!g.node(id).domain.empty() || g.node(id).dead) continue;
    g.node(id).attrs.erase("consumed_inputs");
    if (Rule rule = find_rule(g.node(id).op_type)) SL_RETURN_IF_ERROR(rule(u, id));
    g.node(id).opset = kLegacyOpsetLimit;
  }
  g.opsets[""] = kLegacyOpsetLimit;
  g.rebuild_edges();
  return ok_status();
}

}  // namespace streamline::graph
