// What a model that streamline cannot run is told: the op, the opset, the node and the type.

#include <gtest/gtest.h>

#include "graph/ir.h"
#include "streamline/streamline.h"

namespace streamline {
namespace {

using graph::DimList;

bool mentions(const Status& s, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    if (s.to_string().find(p) == std::string::npos) return false;
  return true;
}

TEST(UnsupportedErrors, NameOpOpsetNodeAndType) {
  // A kernel exists for Neg, but not for uint8: refused when shapes are planned.
  graph::Graph g;
  g.opsets[""] = 21;
  const auto x = g.add_value("x", DType::kUInt8, DimList{4});
  const auto y = g.add_value("y", DType::kUInt8);
  g.add_input(x);
  g.add_node("Neg", "negate", {x}, {y});
  g.add_output(y);
  auto m = Model::from_graph(std::move(g));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Session s(*m);
  auto r = s.run({Tensor::empty(DType::kUInt8, Shape{4})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_TRUE(mentions(r.status(), {"Neg 'negate'", "opset 21", "uint8"})) << r.status().to_string();

  // No kernel at all for the op at that opset: refused at load, every such node listed.
  graph::Graph h;
  h.opsets[""] = 26;
  const auto a = h.add_value("a", DType::kFloat32, DimList{2});
  const auto b = h.add_value("b", DType::kFloat32);
  h.add_input(a);
  h.add_node("NotAnOnnxOp", "mystery", {a}, {b});
  h.add_output(b);
  auto n = Model::from_graph(std::move(h));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kUnsupported);
  EXPECT_TRUE(mentions(n.status(), {"NotAnOnnxOp", "opset 26", "for float32", "mystery"})) << n.status().to_string();
}

// Inside a subgraph (an If's branch), the node is named with its op, opset and input type too.
TEST(UnsupportedErrors, InsideASubgraph) {
  graph::Graph branch;
  branch.opsets[""] = 23;
  branch.name = "then";
  const auto bx = branch.add_value("x", DType::kFloat32, DimList{2});
  const auto by = branch.add_value("y", DType::kFloat32);
  branch.add_node("NotAnOnnxOp", "deep", {bx}, {by});
  branch.add_output(by);
  graph::Graph g;
  g.opsets[""] = 23;
  const auto x = g.add_value("x", DType::kFloat32, DimList{2});
  const auto flag = g.add_value("flag", DType::kBool, DimList{});
  g.add_input(x);
  g.add_input(flag);
  const auto y = g.add_value("y", DType::kFloat32);
  const auto n = g.add_node("If", "choose", {flag}, {y});
  for (const char* name : {"then_branch", "else_branch"}) {
    graph::Attribute a;
    a.kind = graph::Attribute::Kind::kGraph;
    a.g = std::make_shared<graph::Graph>(branch);
    g.node(n).attrs[name] = a;
  }
  g.add_output(y);
  auto m = Model::from_graph(std::move(g));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported);
  EXPECT_TRUE(mentions(m.status(), {"choose", "NotAnOnnxOp", "deep", "opset 23", "for float32"}))
      << m.status().to_string();
}

}  // namespace
}  // namespace streamline
