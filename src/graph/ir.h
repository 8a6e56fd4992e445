#pragma once
// The graph IR: nodes and values with dense integer ids. Names are kept for errors and dumps;
// everything after import works on ids.
//
//   Graph g;
//   ValueId x = g.add_value("x", DType::kFloat32, {SymDim("batch"), 3, 224, 224});
//   g.add_input(x);
//   ValueId y = g.add_value("y");
//   NodeId n = g.add_node("Relu", "relu0", {x}, {y});
//   g.add_output(y);
//
// A Graph is a plain value type owned by its Model; it is not synchronised. After load it is only read.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace streamline::graph {

using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr ValueId kNoValue = -1;
inline constexpr NodeId kNoNode = -1;

// One dimension of a declared shape: a fixed size or a named symbol ("batch", "seq").
struct Dim {
  int64_t value = -1;   // >= 0 when fixed
  std::string symbol;   // non-empty when symbolic; empty and value < 0 means unknown
  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT(google-explicit-constructor)
  static Dim sym(std::string s) { Dim d; d.symbol = std::move(s); return d; }
  bool fixed() const { return value >= 0; }
};
using DimList = std::vector<Dim>;
std::string dims_to_string(const DimList& dims);

class Graph;

// An attribute value. Subgraphs (If/Loop/Scan bodies) are held by shared_ptr so Node stays copyable.
struct Attribute {
  enum class Kind { kInt, kFloat, kString, kTensor, kGraph, kInts, kFloats, kStrings, kTensors };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0.f;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
};

struct Node {
  std::string op_type;
  std::string domain;   // "" for the default ONNX domain
  std::string name;     // unique within the graph after import (generated when the model had none)
  int opset = 0;        // the model's opset for `domain`
  std::vector<ValueId> inputs;   // kNoValue marks an omitted optional input
  std::vector<ValueId> outputs;  // kNoValue marks an omitted optional output
  std::map<std::string, Attribute> attrs;
  bool dead = false;    // removed by a pass; compact() drops it

  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  int64_t attr_int(const std::string& k, int64_t def) const;
  float attr_float(const std::string& k, float def) const;
  std::string attr_string(const std::string& k, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& k, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const std::string& k, std::vector<float> def = {}) const;
  // "Conv 'conv1'" for error messages.
  std::string describe() const;
};

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;       // kUndefined when not yet known
  std::optional<DimList> dims;           // declared/inferred shape, if known
  std::optional<Tensor> constant;        // set for initializers and folded constants
  NodeId producer = kNoNode;             // kNoNode for graph inputs and constants
  std::vector<NodeId> consumers;         // maintained by rebuild_edges()
};

class Graph {
 public:
  ValueId add_value(std::string name, DType dtype = DType::kUndefined, std::optional<DimList> dims = std::nullopt);
  ValueId add_constant(std::string name, Tensor t);
  NodeId add_node(std::string op_type, std::string name, std::vector<ValueId> inputs,
                  std::vector<ValueId> outputs, std::string domain = "");
  void add_input(ValueId v) { inputs_.push_back(v); }
  void add_output(ValueId v) { outputs_.push_back(v); }

  Value& value(ValueId v) { return values_[static_cast<size_t>(v)]; }
  const Value& value(ValueId v) const { return values_[static_cast<size_t>(v)]; }
  Node& node(NodeId n) { return nodes_[static_cast<size_t>(n)]; }
  const Node& node(NodeId n) const { return nodes_[static_cast<size_t>(n)]; }
  size_t num_values() const { return values_.size(); }
  size_t num_nodes() const { return nodes_.size(); }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId>& mutable_outputs() { return outputs_; }
  std::vector<ValueId>& mutable_inputs() { return inputs_; }

  // ValueId by name, or kNoValue.
  ValueId find_value(const std::string& name) const;
  bool is_graph_output(ValueId v) const;
  bool is_graph_input(ValueId v) const;

  // Recomputes producer/consumers from the live nodes. Call after editing inputs/outputs.
  void rebuild_edges();
  // Replaces every use of `from` (node inputs and graph outputs) with `to`.
  void replace_uses(ValueId from, ValueId to);
  // Live nodes in a topological order; InvalidArgument naming a node on a cycle if there is one.
  Result<std::vector<NodeId>> topological_order() const;
  // Drops dead nodes and renumbers ids densely. Invalidates ids held outside.
  void compact();
  int live_node_count() const;

  // Opset per domain ("" = ai.onnx).
  std::map<std::string, int> opsets;
  // Model-level metadata kept for dumps, the server and Model::metadata() (empty when the file has none).
  std::string name;           // the graph's name
  std::string doc_string;     // the graph's doc_string
  std::string producer_name;  // ModelProto fields (main graph only)
  std::string producer_version;
  std::string model_domain;
  std::string model_doc_string;
  int64_t model_version = 0;
  std::map<std::string, std::string> metadata_props;  // ModelProto.metadata_props, key -> value

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
};

}  // namespace streamline::graph
