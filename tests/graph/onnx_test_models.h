#pragma once
// Builders for small ONNX models written with the onnx protobuf API, for graph-layer tests.
//
//   OnnxModel m(/*opset=*/13);
//   m.input("x", onnx::TensorProto::FLOAT, {"N", "3", "8", "8"});   // digits fixed, "?" unknown, else symbol
//   m.node("Relu", "r", {"x"}, {"y"});
//   m.output("y", onnx::TensorProto::FLOAT, {"N", "3", "8", "8"});
//   Result<graph::Graph> g = graph::import_onnx_bytes(m.bytes(), "");

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace streamline::graph::testing {

// dims: a string of digits -> dim_value, "?" -> neither set, anything else -> dim_param.
inline void set_tensor_type(onnx::ValueInfoProto* vi, int32_t elem, const std::vector<std::string>& dims) {
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (d == "?") continue;
    if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos)
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
}

inline onnx::AttributeProto* add_attr(onnx::NodeProto* n, const std::string& name,
                                      onnx::AttributeProto::AttributeType type) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(type);
  return a;
}
inline void attr_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  add_attr(n, name, onnx::AttributeProto::INT)->set_i(v);
}
inline void attr_float(onnx::NodeProto* n, const std::string& name, float v) {
  add_attr(n, name, onnx::AttributeProto::FLOAT)->set_f(v);
}
inline void attr_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  add_attr(n, name, onnx::AttributeProto::STRING)->set_s(v);
}
inline void attr_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = add_attr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void attr_floats(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
  auto* a = add_attr(n, name, onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}
inline void attr_strings(onnx::NodeProto* n, const std::string& name, const std::vector<std::string>& v) {
  auto* a = add_attr(n, name, onnx::AttributeProto::STRINGS);
  for (const auto& x : v) a->add_strings(x);
}
inline void attr_tensor(onnx::NodeProto* n, const std::string& name, const onnx::TensorProto& t) {
  *add_attr(n, name, onnx::AttributeProto::TENSOR)->mutable_t() = t;
}
inline void attr_graph(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
  *add_attr(n, name, onnx::AttributeProto::GRAPH)->mutable_g() = g;
}

// A float32 tensor carried in float_data.
inline onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims,
                                      const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}

// A tensor whose raw_data holds `values` as T (little-endian host bytes).
template <typename T>
onnx::TensorProto raw_tensor(const std::string& name, int32_t elem, const std::vector<int64_t>& dims,
                             const std::vector<T>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(elem);
  for (int64_t d : dims) t.add_dims(d);
  std::string raw(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(raw.data(), values.data(), raw.size());
  t.set_raw_data(raw);
  return t;
}

// Nodes, inputs and outputs appended to one graph (the main graph, or a subgraph via OnnxGraph).
class OnnxGraph {
 public:
  explicit OnnxGraph(onnx::GraphProto* g) : g_(g) {}
  onnx::GraphProto* proto() { return g_; }

  onnx::ValueInfoProto* input(const std::string& name, int32_t elem, const std::vector<std::string>& dims) {
    auto* vi = g_->add_input();
    vi->set_name(name);
    set_tensor_type(vi, elem, dims);
    return vi;
  }
  onnx::ValueInfoProto* output(const std::string& name, int32_t elem, const std::vector<std::string>& dims) {
    auto* vi = g_->add_output();
    vi->set_name(name);
    set_tensor_type(vi, elem, dims);
    return vi;
  }
  onnx::NodeProto* node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& domain = "") {
    auto* n = g_->add_node();
    n->set_op_type(op);
    if (!name.empty()) n->set_name(name);
    if (!domain.empty()) n->set_domain(domain);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  onnx::TensorProto* initializer(const onnx::TensorProto& t) {
    auto* p = g_->add_initializer();
    *p = t;
    return p;
  }

 private:
  onnx::GraphProto* g_;
};

// A whole model: IR version, default-domain opset and a main graph.
class OnnxModel : public OnnxGraph {
 public:
  explicit OnnxModel(int64_t opset = 13, int64_t ir_version = 8) : OnnxGraph(nullptr) {
    model_.set_ir_version(ir_version);
    model_.set_producer_name("streamline-tests");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test_graph");
    static_cast<OnnxGraph&>(*this) = OnnxGraph(model_.mutable_graph());
  }
  OnnxModel(const OnnxModel&) = delete;
  OnnxModel& operator=(const OnnxModel&) = delete;

  onnx::ModelProto& model() { return model_; }
  void import_opset(const std::string& domain, int64_t version) {
    auto* op = model_.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  onnx::ModelProto model_;
};

}  // namespace streamline::graph::testing
