#pragma once
// Running one node on whole values (tensors, sequences, optionals, string tensors) through the eager
// interpreter, for the sequence, optional and string kernels.
//
//   auto outs = run_node({"SequenceAt", "", 11}, {AnyValue::sequence({a, b}, DType::kFloat32), pos});
//   ASSERT_TRUE(outs.ok());
//   const Tensor& got = (*outs)[0].tensor();

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ops/eager.h"

namespace streamline::ops::test_util {

struct NodeSpec {
  std::string op;
  std::string domain;
  int opset = 0;
  std::map<std::string, graph::Attribute> attrs;
  int outputs = 1;
};

// A graph of one node whose inputs are graph inputs of open type ("in0", "in1", ...; an undefined
// value is an omitted input); outputs "y0", "y1", ... The node is named "node0".
inline graph::Graph one_node_graph(const NodeSpec& spec, const std::vector<AnyValue>& inputs) {
  graph::Graph g;
  g.opsets[spec.domain] = spec.opset;
  if (!spec.domain.empty()) g.opsets[""] = 18;
  std::vector<graph::ValueId> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      ins.push_back(graph::kNoValue);
      continue;
    }
    ins.push_back(g.add_value("in" + std::to_string(i)));
    g.add_input(ins.back());
  }
  for (int k = 0; k < spec.outputs; ++k) outs.push_back(g.add_value("y" + std::to_string(k)));
  const graph::NodeId n = g.add_node(spec.op, "node0", ins, outs, spec.domain);
  g.node(n).attrs = spec.attrs;
  for (graph::ValueId v : outs) g.add_output(v);
  return g;
}

// Runs a graph through a SubgraphRunner (kernels made for the values it gets).
inline Result<std::vector<AnyValue>> run_values(graph::Graph g, const std::vector<AnyValue>& inputs) {
  SubgraphRunner runner(std::make_shared<const graph::Graph>(std::move(g)), {});
  SL_RETURN_IF_ERROR(runner.check_supported());
  return runner.run(inputs, {});
}

inline Result<std::vector<AnyValue>> run_node(const NodeSpec& spec, const std::vector<AnyValue>& inputs) {
  std::vector<AnyValue> given;
  for (const AnyValue& v : inputs)
    if (v.defined()) given.push_back(v);
  return run_values(one_node_graph(spec, inputs), given);
}

inline graph::Attribute int_attr(int64_t v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kInt;
  a.i = v;
  return a;
}
inline graph::Attribute string_attr(std::string s) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kString;
  a.s = std::move(s);
  return a;
}
inline graph::Attribute strings_attr(std::vector<std::string> v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kStrings;
  a.strings = std::move(v);
  return a;
}
inline graph::Attribute tensor_attr(Tensor t) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kTensor;
  a.t = std::move(t);
  return a;
}

// Whether `s` failed with `code` and its message holds every one of `parts`.
inline ::testing::AssertionResult fails_with(const Status& s, StatusCode code, std::vector<std::string> parts) {
  if (s.ok()) return ::testing::AssertionFailure() << "succeeded";
  if (s.code() != code) return ::testing::AssertionFailure() << "wrong code: " << s.to_string();
  for (const std::string& p : parts)
    if (s.message().find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << p << "' missing from: " << s.to_string();
  return ::testing::AssertionSuccess();
}

}  // namespace streamline::ops::test_util
