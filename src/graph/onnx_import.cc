#include "graph/onnx_import.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/logging.h"
#include "graph/infer_dtypes.h"
#include "graph/legacy_opset.h"
#include "graph/onnx_infer.h"
#include "graph/onnx_tensor.h"

namespace streamline::graph {
namespace {

namespace fs = std::filesystem;

// Initializers whose payload is larger than this are dropped from the proto once converted: shape
// inference only reads small constant tensors (shapes, axes), and the Graph holds its own copy.
constexpr size_t kInferenceKeepBytes = 4096;

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

std::string normalize_domain(const std::string& d) {
  return d == "ai.onnx" ? std::string() : d;
}

// Same text as Node::describe(), for nodes not yet added to the Graph.
std::string describe_node(const std::string& op_type, const std::string& domain, const std::string& name) {
  return (domain.empty() ? op_type : domain + "." + op_type) + " " + quoted(name);
}

struct ImportContext {
  const ImportOptions& options;
  TensorReadOptions tensor_options;
  std::map<std::string, int> opsets;
};

// Names visible from a graph: its own values, then those of the graphs enclosing it. A subgraph's
// reference to an outer name becomes a value of the subgraph with no producer.
struct Scope {
  const std::unordered_map<std::string, ValueId>* names = nullptr;
  const Graph* graph = nullptr;
  const Scope* parent = nullptr;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      auto it = s->names->find(name);
      if (it != s->names->end()) return &s->graph->value(it->second);
    }
    return nullptr;
  }
};

// Folds a declared or inferred tensor type into `v`: fills what is unknown, never overrides.
void merge_tensor_type(Value& v, const onnx::TypeProto_Tensor& tt) {
  if (v.constant) return;
  const DType dt = dtype_from_onnx(tt.elem_type());
  if (v.dtype == DType::kUndefined) v.dtype = dt;
  if (!tt.has_shape()) return;
  DimList dims = dims_from_onnx(tt.shape());
  if (!v.dims) {
    v.dims = std::move(dims);
    return;
  }
  if (v.dims->size() != dims.size()) return;
  for (size_t k = 0; k < dims.size(); ++k) {
    Dim& have = (*v.dims)[k];
    if (have.fixed()) continue;
    if (dims[k].fixed() || (have.symbol.empty() && !dims[k].symbol.empty())) have = dims[k];
  }
}

// Unique node names: explicit names are kept (first use wins), empty ones become
// "<op_type>_<index>", and clashes get a numeric suffix.
std::vector<std::string> unique_node_names(const onnx::GraphProto& gp) {
  std::unordered_set<std::string> reserved;
  for (const auto& n : gp.node())
    if (!n.name().empty()) reserved.insert(n.name());
  std::unordered_set<std::string> used;
  std::unordered_map<std::string, int> next_suffix;
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(gp.node_size()));
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& n = gp.node(i);
    const bool generated = n.name().empty();
    const std::string base = generated ? n.op_type() + "_" + std::to_string(i) : n.name();
    std::string name = base;
    if (used.count(name) || (generated && reserved.count(name))) {
      int& k = next_suffix[base];
      do {
        name = base + "_" + std::to_string(++k);
      } while (used.count(name) || reserved.count(name));
    }
    used.insert(name);
    names.push_back(std::move(name));
  }
  return names;
}

Status import_graph(onnx::GraphProto& gp, ImportContext& ctx, const Scope* outer, Graph& g);

// `schema`: the node's ONNX schema, when its op has one at the model's opset; an attribute it lists
// must have the type it gives (the kernels read an attribute of another type as that type's zero).
Result<Attribute> convert_attribute(onnx::AttributeProto& a, ImportContext& ctx, const Scope& scope,
                                    const std::string& node_text, const onnx::OpSchema* schema) {
  using A = onnx::AttributeProto;
  const std::string what = "attribute " + quoted(a.name()) + " of node " + node_text;
  A::AttributeType type = a.type();
  if (type == A::UNDEFINED) {
    // Models from before attributes carried a type: deduce it from the field that is set.
    if (a.has_f())
      type = A::FLOAT;
    else if (a.has_i())
      type = A::INT;
    else if (a.has_s())
      type = A::STRING;
    else if (a.has_t())
      type = A::TENSOR;
    else if (a.has_g())
      type = A::GRAPH;
    else if (a.floats_size())
      type = A::FLOATS;
    else if (a.ints_size())
      type = A::INTS;
    else if (a.strings_size())
      type = A::STRINGS;
    else if (a.tensors_size())
      type = A::TENSORS;
    else
      return invalid_argument(what + " has no type and no value");
  }
  if (schema) {
    auto declared = schema->attributes().find(a.name());
    if (declared != schema->attributes().end() && static_cast<int>(declared->second.type) != static_cast<int>(type))
      return invalid_argument(what + " must be " +
                              A::AttributeType_Name(static_cast<A::AttributeType>(declared->second.type)) + ", not " +
                              A::AttributeType_Name(type));
  }
  Attribute out;
  switch (type) {
    case A::FLOAT:
      out.kind = Attribute::Kind::kFloat;
      out.f = a.f();
      break;
    case A::INT:
      out.kind = Attribute::Kind::kInt;
      out.i = a.i();
      break;
    case A::STRING:
      out.kind = Attribute::Kind::kString;
      out.s = a.s();
      break;
    case A::TENSOR: {
      out.kind = Attribute::Kind::kTensor;
      SL_ASSIGN_OR_RETURN(out.t, tensor_from_onnx(a.t(), ctx.tensor_options, "tensor in " + what));
      break;
    }
    case A::GRAPH: {
      out.kind = Attribute::Kind::kGraph;
      out.g = std::make_shared<Graph>();
      Status s = import_graph(*a.mutable_g(), ctx, &scope, *out.g);
      if (!s.ok()) return s.with_context("in subgraph " + what);
      break;
    }
    case A::FLOATS:
      out.kind = Attribute::Kind::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case A::INTS:
      out.kind = Attribute::Kind::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case A::STRINGS:
      out.kind = Attribute::Kind::kStrings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case A::TENSORS:
      out.kind = Attribute::Kind::kTensors;
      for (int k = 0; k < a.tensors_size(); ++k) {
        SL_ASSIGN_OR_RETURN(Tensor t, tensor_from_onnx(a.tensors(k), ctx.tensor_options,
                                                       "tensor #" + std::to_string(k) + " in " + what));
        out.tensors.push_back(std::move(t));
      }
      break;
    default:
      return unsupported(what + " has type " + A::AttributeType_Name(type) + ", which streamline does not support");
  }
  return out;
}

// Pass 1 of import_graph: initializers become constants.
Status import_initializers(onnx::GraphProto& gp, ImportContext& ctx, Graph& g,
                           std::unordered_map<std::string, ValueId>& names) {
  for (int i = 0; i < gp.initializer_size(); ++i) {
    onnx::TensorProto& init = *gp.mutable_initializer(i);
    const std::string& name = init.name();
    if (name.empty()) return invalid_argument("initializer #" + std::to_string(i) + " has no name");
    if (names.count(name)) return invalid_argument("initializer " + quoted(name) + " is defined twice");
    SL_ASSIGN_OR_RETURN(Tensor t, tensor_from_onnx(init, ctx.tensor_options, "initializer " + quoted(name)));
    names.emplace(name, g.add_constant(name, std::move(t)));
    if (onnx_payload_bytes(init) > kInferenceKeepBytes) drop_onnx_payload(&init);
  }
  if (gp.sparse_initializer_size() > 0) {
    const auto& s = gp.sparse_initializer(0);
    return unsupported("sparse initializer " + quoted(s.values().name()) + " is not supported");
  }
  return ok_status();
}

// Pass 2: graph inputs that no initializer provides. In the main graph each needs a tensor type of
// a supported element type; subgraph inputs may leave theirs open.
Status import_inputs(const onnx::GraphProto& gp, bool main_graph, Graph& g,
                     std::unordered_map<std::string, ValueId>& names) {
  for (int i = 0; i < gp.input_size(); ++i) {
    const auto& in = gp.input(i);
    const std::string& name = in.name();
    if (name.empty()) return invalid_argument("graph input #" + std::to_string(i) + " has no name");
    auto it = names.find(name);
    if (it != names.end()) {
      if (g.value(it->second).constant) continue;  // an initializer listed as input (IR < 4) or a default
      return invalid_argument("graph input " + quoted(name) + " is listed twice");
    }
    DType dt = DType::kUndefined;
    std::optional<DimList> dims;
    if (!in.has_type()) {
      if (main_graph)
        return invalid_argument("missing initializer for graph input " + quoted(name) +
                                ": it has no type and no initializer of that name");
    } else if (!in.type().has_tensor_type()) {
      if (main_graph) return unsupported("graph input " + quoted(name) + " is not a tensor");
    } else {
      const auto& tt = in.type().tensor_type();
      dt = dtype_from_onnx(tt.elem_type());
      if (dt == DType::kUndefined && main_graph)
        return unsupported("graph input " + quoted(name) + " has element type " + onnx_type_name(tt.elem_type()) +
                           ", which streamline does not support");
      if (tt.has_shape()) dims = dims_from_onnx(tt.shape());
    }
    const ValueId id = g.add_value(name, dt, std::move(dims));
    g.add_input(id);
    names.emplace(name, id);
  }
  return ok_status();
}

// Pass 3: one value per node output, each with exactly one producer.
Status import_node_outputs(const onnx::GraphProto& gp, const std::vector<std::string>& node_names, Graph& g,
                           std::unordered_map<std::string, ValueId>& names) {
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& n = gp.node(i);
    const std::string text = describe_node(n.op_type(), normalize_domain(n.domain()), node_names[i]);
    if (n.op_type().empty()) return invalid_argument("node " + quoted(node_names[i]) + " has no op_type");
    for (const std::string& out : n.output()) {
      if (out.empty()) continue;
      if (names.count(out))
        return invalid_argument("value " + quoted(out) + " is produced by node " + text +
                                " but is also a graph input or initializer");
      auto [it, fresh] = producer.emplace(out, i);
      if (!fresh) {
        const auto& p = gp.node(it->second);
        return invalid_argument("value " + quoted(out) + " has two producers: node " +
                                describe_node(p.op_type(), normalize_domain(p.domain()), node_names[it->second]) +
                                " and node " + text);
      }
    }
  }
  for (const auto& n : gp.node())
    for (const std::string& out : n.output())
      if (!out.empty()) names.emplace(out, g.add_value(out));
  return ok_status();
}

// Looks `name` up locally, then in the enclosing graphs (capturing it as a producer-less value).
ValueId resolve(const std::string& name, const Scope* outer, Graph& g,
                std::unordered_map<std::string, ValueId>& names) {
  auto it = names.find(name);
  if (it != names.end()) return it->second;
  const Value* v = outer ? outer->find(name) : nullptr;
  if (!v) return kNoValue;
  const ValueId id = g.add_value(name, v->dtype, v->dims);
  names.emplace(name, id);
  return id;
}

// Pass 4: graph outputs and value_info types.
Status import_outputs(const onnx::GraphProto& gp, bool main_graph, const Scope* outer, Graph& g,
                      std::unordered_map<std::string, ValueId>& names) {
  for (int i = 0; i < gp.output_size(); ++i) {
    const auto& out = gp.output(i);
    if (out.name().empty()) return invalid_argument("graph output #" + std::to_string(i) + " has no name");
    const ValueId id = resolve(out.name(), outer, g, names);
    if (id == kNoValue)
      return invalid_argument("graph output " + quoted(out.name()) +
                              " is not produced by any node and is no graph input or initializer");
    if (out.has_type() && main_graph) {
      if (!out.type().has_tensor_type()) return unsupported("graph output " + quoted(out.name()) + " is not a tensor");
      const int32_t elem = out.type().tensor_type().elem_type();
      if (elem != onnx::TensorProto::UNDEFINED && dtype_from_onnx(elem) == DType::kUndefined)
        return unsupported("graph output " + quoted(out.name()) + " has element type " + onnx_type_name(elem) +
                           ", which streamline does not support");
    }
    if (out.has_type() && out.type().has_tensor_type()) merge_tensor_type(g.value(id), out.type().tensor_type());
    g.add_output(id);
  }
  for (const auto& vi : gp.value_info()) {
    auto it = names.find(vi.name());
    if (it != names.end() && vi.type().has_tensor_type())
      merge_tensor_type(g.value(it->second), vi.type().tensor_type());
  }
  return ok_status();
}

// Pass 5: nodes, their inputs and attributes.
Status import_nodes(onnx::GraphProto& gp, const std::vector<std::string>& node_names, ImportContext& ctx,
                    const Scope* outer, Graph& g, std::unordered_map<std::string, ValueId>& names) {
  for (int i = 0; i < gp.node_size(); ++i) {
    onnx::NodeProto& n = *gp.mutable_node(i);
    const std::string domain = normalize_domain(n.domain());
    const std::string text = describe_node(n.op_type(), domain, node_names[i]);
    auto opset = ctx.opsets.find(domain);
    if (domain.empty() && opset == ctx.opsets.end())
      return invalid_argument("node " + text + " is in the default ONNX domain but the model imports no opset for it");
    std::vector<ValueId> inputs;
    inputs.reserve(static_cast<size_t>(n.input_size()));
    for (const std::string& in : n.input()) {
      if (in.empty()) {
        inputs.push_back(kNoValue);
        continue;
      }
      const ValueId id = resolve(in, outer, g, names);
      if (id == kNoValue) return invalid_argument("dangling input " + quoted(in) + " of node " + text);
      inputs.push_back(id);
    }
    std::vector<ValueId> outputs;
    outputs.reserve(static_cast<size_t>(n.output_size()));
    for (const std::string& out : n.output()) outputs.push_back(out.empty() ? kNoValue : names.at(out));

    std::map<std::string, Attribute> attrs;
    const Scope scope{&names, &g, outer};
    const onnx::OpSchema* schema = domain.empty() && opset != ctx.opsets.end()
                                       ? onnx::OpSchemaRegistry::Schema(n.op_type(), opset->second, "")
                                       : nullptr;
    for (int k = 0; k < n.attribute_size(); ++k) {
      onnx::AttributeProto& a = *n.mutable_attribute(k);
      if (a.name().empty()) return invalid_argument("node " + text + " has an attribute with no name");
      if (attrs.count(a.name()))
        return invalid_argument("node " + text + " has attribute " + quoted(a.name()) + " twice");
      SL_ASSIGN_OR_RETURN(Attribute attr, convert_attribute(a, ctx, scope, text, schema));
      attrs.emplace(a.name(), std::move(attr));
    }
    const NodeId id = g.add_node(n.op_type(), node_names[i], std::move(inputs), std::move(outputs), domain);
    Node& node = g.node(id);
    node.opset = opset == ctx.opsets.end() ? 0 : opset->second;
    node.attrs = std::move(attrs);
  }
  return ok_status();
}

// Converts one graph (the main graph when `outer` is null). Nodes keep the model's order, so
// node i of the Graph is node i of `gp`. Payloads of large initializers are released from `gp`.
Status import_graph(onnx::GraphProto& gp, ImportContext& ctx, const Scope* outer, Graph& g) {
  const bool main_graph = outer == nullptr;
  g.opsets = ctx.opsets;
  g.name = gp.name();
  g.doc_string = gp.doc_string();
  std::unordered_map<std::string, ValueId> names;
  const std::vector<std::string> node_names = unique_node_names(gp);
  SL_RETURN_IF_ERROR(import_initializers(gp, ctx, g, names));
  SL_RETURN_IF_ERROR(import_inputs(gp, main_graph, g, names));
  SL_RETURN_IF_ERROR(import_node_outputs(gp, node_names, g, names));
  SL_RETURN_IF_ERROR(import_outputs(gp, main_graph, outer, g, names));
  SL_RETURN_IF_ERROR(import_nodes(gp, node_names, ctx, outer, g, names));
  // Pass 6: the nodes must form a DAG.
  auto order = g.topological_order();
  if (!order.ok()) return order.status();
  return ok_status();
}

Result<std::map<std::string, int>> read_opsets(const onnx::ModelProto& model, const ImportOptions& options) {
  std::map<std::string, int> opsets;
  for (const auto& op : model.opset_import()) {
    const std::string domain = normalize_domain(op.domain());
    const std::string dtext = domain.empty() ? "the default ONNX domain" : "domain " + quoted(domain);
    if (op.version() < 1 || op.version() > INT_MAX)
      return invalid_argument("opset_import of " + dtext + " has invalid version " + std::to_string(op.version()));
    const int v = static_cast<int>(op.version());
    auto [it, fresh] = opsets.emplace(domain, v);
    if (!fresh && it->second != v)
      return invalid_argument("opset_import lists " + dtext + " twice (versions " + std::to_string(it->second) +
                              " and " + std::to_string(v) + ")");
  }
  auto it = opsets.find("");
  if (it != opsets.end() && (it->second < options.min_opset || it->second > options.max_opset))
    return unsupported("opset " + std::to_string(it->second) + " of the default ONNX domain is not supported (" +
                       std::to_string(options.min_opset) + ".." + std::to_string(options.max_opset) + " are)");
  return opsets;
}

// Copies what ONNX shape inference found (value_info and outputs of `gp`, recursively into
// subgraphs) into values whose dtype or dims are still open.
void fill_inferred(const onnx::GraphProto& gp, Graph& g, const Graph* outer,
                   const std::unordered_map<std::string, ValueId>* outer_names) {
  std::unordered_map<std::string, ValueId> names;
  for (size_t v = 0; v < g.num_values(); ++v) {
    const auto id = static_cast<ValueId>(v);
    names.emplace(g.value(id).name, id);
  }
  auto fill = [&](const onnx::ValueInfoProto& vi) {
    auto it = names.find(vi.name());
    if (it != names.end() && vi.type().has_tensor_type())
      merge_tensor_type(g.value(it->second), vi.type().tensor_type());
  };
  for (const auto& vi : gp.value_info()) fill(vi);
  for (const auto& vi : gp.output()) fill(vi);
  if (outer) {
    // Values captured from the enclosing graph take what is now known about them there.
    for (size_t v = 0; v < g.num_values(); ++v) {
      Value& val = g.value(static_cast<ValueId>(v));
      if (val.producer != kNoNode || val.constant || g.is_graph_input(static_cast<ValueId>(v))) continue;
      auto it = outer_names->find(val.name);
      if (it == outer_names->end()) continue;
      const Value& o = outer->value(it->second);
      if (val.dtype == DType::kUndefined) val.dtype = o.dtype;
      if (!val.dims) val.dims = o.dims;
    }
  }
  const int n = std::min(gp.node_size(), static_cast<int>(g.num_nodes()));
  for (int i = 0; i < n; ++i) {
    for (const auto& a : gp.node(i).attribute()) {
      if (!a.has_g()) continue;
      auto it = g.node(i).attrs.find(a.name());
      if (it != g.node(i).attrs.end() && it->second.g) fill_inferred(a.g(), *it->second.g, &g, &names);
    }
  }
}

// Runs ONNX's shape inference on `model` (private to this import, payloads of large initializers
// already released) and fills open dtypes/dims of `g`. Failures only cost information.
void infer_shapes(onnx::ModelProto& model, const std::map<std::string, int>& opsets, Graph& g,
                  const std::string& what) {
  std::string error;
  if (!infer_onnx_shapes(model, opsets, &error)) {
    SL_LOG(kDebug) << "shape inference of " << what << " stopped: " << error;
    return;
  }
  fill_inferred(model.graph(), g, nullptr, nullptr);
}

std::string parse_error(const std::string& what, const std::string& why) {
  return "cannot parse " + quoted(what) + " as an ONNX model: " + why;
}

Status parse_model(const char* data, size_t size, const std::string& what, onnx::ModelProto* model) {
  if (size == 0) return invalid_argument(parse_error(what, "it is empty"));
  if (size > static_cast<size_t>(INT_MAX))
    return invalid_argument(parse_error(what, std::to_string(size) +
                                                  " bytes is over protobuf's 2 GB limit; store the weights as "
                                                  "external data"));
  google::protobuf::io::ArrayInputStream raw(data, static_cast<int>(size));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(INT_MAX);
  if (!model->ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    return invalid_argument(parse_error(what, "truncated or corrupt protobuf data"));
  if (!model->has_graph()) return invalid_argument(parse_error(what, "it has no graph"));
  return ok_status();
}

Result<Graph> import_model(onnx::ModelProto& model, const std::string& base_dir, const ImportOptions& options,
                           const std::string& what) {
  ImportContext ctx{options, {}, {}};
  ctx.tensor_options.base_dir = base_dir;
  ctx.tensor_options.max_external_bytes = options.max_external_bytes;
  auto opsets = read_opsets(model, options);
  if (!opsets.ok()) return opsets.status().with_context(what);
  ctx.opsets = std::move(opsets).value();
  Graph g;
  Status s = import_graph(*model.mutable_graph(), ctx, nullptr, g);
  if (!s.ok()) return s.with_context(what);
  g.producer_name = model.producer_name();
  g.producer_version = model.producer_version();
  g.model_domain = model.domain();
  g.model_doc_string = model.doc_string();
  g.model_version = model.model_version();
  for (const auto& prop : model.metadata_props()) g.metadata_props[prop.key()] = prop.value();
  // Inference reads the proto, whose nodes keep the model's opset; the upgrade then needs the
  // ranks it found.
  infer_shapes(model, ctx.opsets, g, what);
  auto legacy = ctx.opsets.find("");
  if (legacy != ctx.opsets.end() && legacy->second < kLegacyOpsetLimit) {
    s = upgrade_legacy_nodes(g, legacy->second);
    if (!s.ok()) return s.with_context(what);
  }
  // Whatever inference left open (newer opsets, hidden nodes, bodies) from each op's type rule.
  const int filled = fill_missing_dtypes(g);
  if (filled > 0) {
    SL_LOG(kDebug) << what << ": " << filled << " value dtype(s) from operator type rules";
  }
  return g;
}

}  // namespace

Result<Graph> import_onnx_bytes(std::string_view bytes, const std::string& base_dir, const ImportOptions& options,
                                const std::string& what) {
  onnx::ModelProto model;
  SL_RETURN_IF_ERROR(parse_model(bytes.data(), bytes.size(), what, &model));
  return import_model(model, base_dir, options, what);
}

Result<Graph> import_onnx_file(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return not_found("model file " + quoted(path) + " does not exist");
  if (!fs::is_regular_file(st)) return invalid_argument("model file " + quoted(path) + " is not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return not_found("cannot read the size of model file " + quoted(path));
  if (size > static_cast<uintmax_t>(INT_MAX))
    return invalid_argument(parse_error(path, std::to_string(size) +
                                                  " bytes is over protobuf's 2 GB limit; store the weights as "
                                                  "external data"));
  onnx::ModelProto model;
  {
    // The file's bytes are freed as soon as they are parsed.
    std::string bytes(static_cast<size_t>(size), '\0');
    std::ifstream in(path, std::ios::binary);
    if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(size)))
      return not_found("cannot read model file " + quoted(path));
    SL_RETURN_IF_ERROR(parse_model(bytes.data(), bytes.size(), path, &model));
  }
  std::string base_dir = fs::path(path).parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  return import_model(model, base_dir, options, path);
}

}  // namespace streamline::graph
