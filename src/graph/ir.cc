#include "graph/ir.h"

#include <algorithm>
#include <functional>
#include <set>
#include <queue>
#include <unordered_map>

namespace streamline::graph {

std::string dims_to_string(const DimList& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    if (dims[i].fixed()) s += std::to_string(dims[i].value);
    else if (!dims[i].symbol.empty()) s += dims[i].symbol;
    else s += "?";
  }
  return s + "]";
}

int64_t Node::attr_int(const std::string& k, int64_t def) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? def : it->second.i;
}
float Node::attr_float(const std::string& k, float def) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? def : it->second.f;
}
std::string Node::attr_string(const std::string& k, const std::string& def) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? def : it->second.s;
}
std::vector<int64_t> Node::attr_ints(const std::string& k, std::vector<int64_t> def) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? def : it->second.ints;
}
std::vector<float> Node::attr_floats(const std::string& k, std::vector<float> def) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? def : it->second.floats;
}
std::string Node::describe() const {
  std::string d = domain.empty() ? op_type : domain + "." + op_type;
  return d + " '" + name + "'";
}

ValueId Graph::add_value(std::string name, DType dtype, std::optional<DimList> dims) {
  Value v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.dims = std::move(dims);
  values_.push_back(std::move(v));
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_constant(std::string name, Tensor t) {
  DimList dims;
  for (int64_t d : t.shape()) dims.emplace_back(d);
  const ValueId id = add_value(std::move(name), t.dtype(), dims);
  values_[static_cast<size_t>(id)].constant = std::move(t);
  return id;
}

NodeId Graph::add_node(std::string op_type, std::string name, std::vector<ValueId> inputs,
                       std::vector<ValueId> outputs, std::string domain) {
  Node n;
  n.op_type = std::move(op_type);
  n.name = std::move(name);
  n.domain = std::move(domain);
  auto it = opsets.find(n.domain);
  n.opset = it == opsets.end() ? 0 : it->second;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  nodes_.push_back(std::move(n));
  const NodeId id = static_cast<NodeId>(nodes_.size() - 1);
  for (ValueId o : nodes_.back().outputs)
    if (o != kNoValue) values_[static_cast<size_t>(o)].producer = id;
  for (ValueId i : nodes_.back().inputs)
    if (i != kNoValue) values_[static_cast<size_t>(i)].consumers.push_back(id);
  return id;
}

ValueId Graph::find_value(const std::string& name) const {
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].name == name) return static_cast<ValueId>(i);
  return kNoValue;
}

bool Graph::is_graph_output(ValueId v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}
bool Graph::is_graph_input(ValueId v) const {
  return std::find(inputs_.begin(), inputs_.end(), v) != inputs_.end();
}

void Graph::rebuild_edges() {
  for (auto& v : values_) {
    v.producer = kNoNode;
    v.consumers.clear();
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].dead) continue;
    for (ValueId o : nodes_[n].outputs)
      if (o != kNoValue) values_[static_cast<size_t>(o)].producer = static_cast<NodeId>(n);
    for (ValueId i : nodes_[n].inputs)
      if (i != kNoValue) {
        auto& c = values_[static_cast<size_t>(i)].consumers;
        if (c.empty() || c.back() != static_cast<NodeId>(n)) c.push_back(static_cast<NodeId>(n));
      }
  }
}

void Graph::replace_uses(ValueId from, ValueId to) {
  for (auto& n : nodes_) {
    if (n.dead) continue;
    for (auto& i : n.inputs)
      if (i == from) i = to;
  }
  for (auto& o : outputs_)
    if (o == from) o = to;
}

Result<std::vector<NodeId>> Graph::topological_order() const {
  // Kahn's algorithm over live nodes; ties broken by node id so the order is the model's order
  // whenever the model was already sorted.
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<std::vector<NodeId>> users(nodes_.size());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].dead) continue;
    for (ValueId i : nodes_[n].inputs) {
      if (i == kNoValue) continue;
      const NodeId p = values_[static_cast<size_t>(i)].producer;
      if (p == kNoNode || nodes_[static_cast<size_t>(p)].dead) continue;
      ++pending[n];
      users[static_cast<size_t>(p)].push_back(static_cast<NodeId>(n));
    }
  }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (!nodes_[n].dead && pending[n] == 0) ready.push(static_cast<NodeId>(n));
  std::vector<NodeId> order;
  while (!ready.empty()) {
    const NodeId n = ready.top();
    ready.pop();
    order.push_back(n);
    for (NodeId u : users[static_cast<size_t>(n)])
      if (--pending[static_cast<size_t>(u)] == 0) ready.push(u);
  }
  if (static_cast<int>(order.size()) != live_node_count()) {
    for (size_t n = 0; n < nodes_.size(); ++n)
      if (!nodes_[n].dead && pending[n] > 0)
        return invalid_argument("graph has a cycle through node " + nodes_[n].describe());
  }
  return order;
}

int Graph::live_node_count() const {
  return static_cast<int>(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return !n.dead; }));
}

void Graph::compact() {
  // Pass 1: keep live nodes. Pass 2: keep values still referenced. Pass 3: renumber.
  std::vector<Node> kept;
  for (auto& n : nodes_)
    if (!n.dead) kept.push_back(std::move(n));
  nodes_ = std::move(kept);
  std::vector<char> used(values_.size(), 0);
  for (auto& n : nodes_) {
    for (ValueId v : n.inputs) if (v != kNoValue) used[static_cast<size_t>(v)] = 1;
    for (ValueId v : n.outputs) if (v != kNoValue) used[static_cast<size_t>(v)] = 1;
  }
  for (ValueId v : inputs_) used[static_cast<size_t>(v)] = 1;
  for (ValueId v : outputs_) used[static_cast<size_t>(v)] = 1;
  // Subgraph bodies (If/Loop/Scan) read outer values by name: keep those too.
  std::set<std::string> outer_names;
  std::function<void(const Graph&)> collect = [&](const Graph& sub) {
    for (const auto& n : sub.nodes_) {
      for (ValueId v : n.inputs)
        if (v != kNoValue) outer_names.insert(sub.values_[static_cast<size_t>(v)].name);
      for (const auto& [k, a] : n.attrs)
        if (a.g) collect(*a.g);
    }
  };
  for (const auto& n : nodes_)
    for (const auto& [k, a] : n.attrs)
      if (a.g) collect(*a.g);
  if (!outer_names.empty())
    for (size_t i = 0; i < values_.size(); ++i)
      if (outer_names.count(values_[i].name)) used[i] = 1;
  std::vector<ValueId> remap(values_.size(), kNoValue);
  std::vector<Value> vals;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (!used[i]) continue;
    remap[i] = static_cast<ValueId>(vals.size());
    vals.push_back(std::move(values_[i]));
  }
  values_ = std::move(vals);
  auto fix = [&](ValueId& v) { if (v != kNoValue) v = remap[static_cast<size_t>(v)]; };
  for (auto& n : nodes_) {
    for (auto& v : n.inputs) fix(v);
    for (auto& v : n.outputs) fix(v);
  }
  for (auto& v : inputs_) fix(v);
  for (auto& v : outputs_) fix(v);
  rebuild_edges();
}

}  // namespace streamline::graph
