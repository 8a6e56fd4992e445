// Models whose control flow needs the actual input shapes (an If whose branches read an input of
// unknown dimensions, a Loop carrying state): the shapes of the tensors given are the truth, in
// Model::input_shapes, Session::run and serving; only an input with no tensor and no shape is an
// error, and it names the input.

#include <gtest/gtest.h>

#include <cmath>

#include "graph/ir.h"
#include "streamline/serving.h"
#include "streamline/streamline.h"

namespace streamline {
namespace {

using graph::Attribute;
using graph::Dim;
using graph::DimList;

Attribute graph_attr(graph::Graph g) {
  Attribute a;
  a.kind = Attribute::Kind::kGraph;
  a.g = std::make_shared<graph::Graph>(std::move(g));
  return a;
}

// A branch computing op(x, c) on the enclosing graph's x.
graph::Graph branch(const char* op, float c) {
  graph::Graph b;
  b.opsets[""] = 18;
  const auto x = b.add_value("x");
  const auto k = b.add_constant("k", Tensor::scalar<float>(c));
  const auto y = b.add_value(std::string(op) + "_out");
  b.add_node(op, std::string(op) + "_node", {x, k}, {y});
  b.add_output(y);
  return b;
}

// x [?, ?] (no size, no symbol), state [2, 3], flag []:
//   y = flag ? x * 2 : x + 1;  state' = Loop(rows(x) times) state * 0.5 + 1
// `x_dims` replaces x's unknown dims (the same graph with a fixed input).
std::shared_ptr<Model> stateful_model(DimList x_dims = DimList{Dim(), Dim()}) {
  graph::Graph g;
  g.opsets[""] = 18;
  const auto x = g.add_value("x", DType::kFloat32, x_dims);
  const auto state = g.add_value("state", DType::kFloat32, DimList{2, 3});
  const auto flag = g.add_value("flag", DType::kBool, DimList{});
  for (auto v : {x, state, flag}) g.add_input(v);
  const auto y = g.add_value("y");
  const auto n = g.add_node("If", "choose", {flag}, {y});
  g.node(n).attrs["then_branch"] = graph_attr(branch("Mul", 2.f));
  g.node(n).attrs["else_branch"] = graph_attr(branch("Add", 1.f));
  const auto shape = g.add_value("shape", DType::kInt64);
  const auto rows = g.add_value("rows", DType::kInt64);
  g.add_node("Shape", "shape_of_x", {x}, {shape});
  const auto zero = g.add_constant("zero", Tensor::scalar<int64_t>(0));
  const auto gather = g.add_node("Gather", "rows_of_x", {shape, zero}, {rows});
  Attribute axis;
  axis.i = 0;
  g.node(gather).attrs["axis"] = axis;
  graph::Graph body;
  body.opsets[""] = 18;
  const auto iter = body.add_value("iter", DType::kInt64, DimList{});
  const auto cond_in = body.add_value("cond_in", DType::kBool, DimList{});
  const auto s_in = body.add_value("s_in", DType::kFloat32);
  for (auto v : {iter, cond_in, s_in}) body.add_input(v);
  const auto cond_out = body.add_value("cond_out", DType::kBool);
  const auto half = body.add_constant("half", Tensor::scalar<float>(0.5f));
  const auto one = body.add_constant("one", Tensor::scalar<float>(1.f));
  const auto scaled = body.add_value("scaled");
  const auto s_out = body.add_value("s_out");
  body.add_node("Identity", "keep_going", {cond_in}, {cond_out});
  body.add_node("Mul", "decay", {s_in, half}, {scaled});
  body.add_node("Add", "bump", {scaled, one}, {s_out});
  body.add_output(cond_out);
  body.add_output(s_out);
  const auto yes = g.add_constant("yes", Tensor::scalar<bool>(true));
  const auto state_out = g.add_value("state_out");
  const auto loop = g.add_node("Loop", "update", {rows, yes, state}, {state_out});
  g.node(loop).attrs["body"] = graph_attr(std::move(body));
  g.add_output(y);
  g.add_output(state_out);
  auto m = Model::from_graph(std::move(g));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : nullptr;
}

Tensor ramp(const Shape& s, float scale) {
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * static_cast<float>(i % 7) - 1.f;
  return t;
}

void expect_outputs(const std::vector<Tensor>& out, const Tensor& x, const Tensor& state, bool flag) {
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_FLOAT_EQ(out[0].data<float>()[i], flag ? x.data<float>()[i] * 2 : x.data<float>()[i] + 1);
  ASSERT_EQ(out[1].shape(), state.shape());
  for (int64_t i = 0; i < state.numel(); ++i) {
    float s = state.data<float>()[i];
    for (int64_t r = 0; r < x.shape()[0]; ++r) s = s * 0.5f + 1.f;
    EXPECT_FLOAT_EQ(out[1].data<float>()[i], s);
  }
}

TEST(ValueShapes, GivenTensorsAreTheTruth) {
  auto m = stateful_model();
  ASSERT_TRUE(m);
  // Nothing known: x has no size for dimension 1, and the error says which input.
  auto none = m->default_shapes();
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("input 'x'"), std::string::npos) << none.status().to_string();
  EXPECT_NE(none.status().message().find("dimension 1"), std::string::npos) << none.status().to_string();
  // A known shape for x is enough; the others come from the declaration.
  auto shapes = m->input_shapes({Shape{3, 5}});
  ASSERT_TRUE(shapes.ok()) << shapes.status().to_string();
  EXPECT_EQ(*shapes, (std::vector<Shape>{Shape{3, 5}, Shape{2, 3}, Shape{}}));
  // A known shape must still fit what the model fixes.
  EXPECT_FALSE(m->input_shapes({Shape{3, 5}, Shape{2, 4}}).ok());
  EXPECT_FALSE(m->input_shapes({Shape{3, 5, 1}}).ok());
  // Session::run takes the shapes of the tensors themselves, several of them one after another.
  Session s(m);
  const Tensor state = ramp(Shape{2, 3}, 0.5f);
  for (const Shape& xs : {Shape{3, 5}, Shape{1, 8}, Shape{4, 2}}) {
    for (bool flag : {true, false}) {
      const Tensor x = ramp(xs, 0.25f);
      auto out = s.run({x, state, Tensor::scalar<bool>(flag)});
      ASSERT_TRUE(out.ok()) << xs.to_string() << ": " << out.status().to_string();
      expect_outputs(*out, x, state, flag);
    }
  }
}

// Serving runs such shape sets node by node too, whether the declared shapes leave x open (no
// plans at load) or fix it (the load-time planning finds the shape set eager and plans nothing).
TEST(ValueShapes, ServingRunsEagerShapeSets) {
  for (bool fixed : {false, true}) {
    auto m = fixed ? stateful_model(DimList{2, 4}) : stateful_model();
    ASSERT_TRUE(m);
    ServingOptions so;
    so.instances = 1;
    auto serving = ServingModel::create(m, so);
    ASSERT_TRUE(serving.ok()) << serving.status().to_string();
    const Tensor state = ramp(Shape{2, 3}, 0.5f);
    for (const Shape& xs : fixed ? std::vector<Shape>{Shape{2, 4}} : std::vector<Shape>{Shape{2, 4}, Shape{5, 1}}) {
      const Tensor x = ramp(xs, 0.5f);
      InferRequest r;
      r.inputs.emplace("x", x);
      r.inputs.emplace("state", state);
      r.inputs.emplace("flag", Tensor::scalar<bool>(true));
      InferResponse resp = (*serving)->infer(std::move(r));
      ASSERT_TRUE(resp.status.ok()) << xs.to_string() << ": " << resp.status.to_string();
      expect_outputs({resp.outputs.at("y"), resp.outputs.at("state_out")}, x, state, true);
    }
  }
}

}  // namespace
}  // namespace streamline
