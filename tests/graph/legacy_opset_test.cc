// Tests of the opset 1..6 upgrade (graph/legacy_opset.h) through the ONNX importer: the upgraded
// graph is run node by node with the CPU kernels and compared with the legacy semantics written out
// as loops here.

#include "graph/legacy_opset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "graph/graph_run_util.h"
#include "graph/onnx_import.h"
#include "graph/onnx_test_models.h"

namespace streamline::graph {
namespace {

using onnx::TensorProto;
using testing::OnnxModel;
using testing::run_graph;

::testing::AssertionResult has_error(const Status& s, StatusCode code, const std::vector<std::string>& parts) {
  if (s.ok()) return ::testing::AssertionFailure() << "succeeded";
  if (s.code() != code) return ::testing::AssertionFailure() << "wrong code: " << s.to_string();
  for (const auto& p : parts)
    if (s.message().find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "message lacks \"" << p << "\": " << s.to_string();
  return ::testing::AssertionSuccess();
}

std::vector<float> iota_floats(int64_t n, float start, float step) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

void expect_all_opset7(const Graph& g) {
  EXPECT_EQ(g.opsets.at(""), kLegacyOpsetLimit);
  for (size_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(static_cast<NodeId>(i));
    EXPECT_EQ(n.opset, kLegacyOpsetLimit) << n.describe();
    for (const char* gone : {"broadcast", "consumed_inputs", "is_test"})
      EXPECT_FALSE(n.has_attr(gone)) << n.describe() << " still has " << gone;
  }
}

// Add of opset 6 with broadcast=1, axis=1: B [3] lines up with dim 1 of A [2,3,4], which numpy
// broadcasting would not do; the same with B fed at run time (an Unsqueeze is inserted) and with
// axis=0 and B [2,3].
TEST(LegacyOpset, AddBroadcastAxisMatchesLegacySemantics) {
  struct Case {
    int64_t axis;
    std::vector<int64_t> b_dims;
    bool b_constant;
  };
  for (const Case& c : {Case{1, {3}, true}, Case{1, {3}, false}, Case{0, {2, 3}, true}, Case{0, {2, 3}, false}}) {
    SCOPED_TRACE("axis " + std::to_string(c.axis) + (c.b_constant ? " constant B" : " input B"));
    int64_t b_size = 1;
    std::vector<std::string> b_dim_text;
    for (int64_t d : c.b_dims) {
      b_size *= d;
      b_dim_text.push_back(std::to_string(d));
    }
    const std::vector<float> av = iota_floats(24, -3.f, 0.5f);
    const std::vector<float> bv = iota_floats(b_size, 10.f, 100.f);
    OnnxModel m(6);
    m.input("a", TensorProto::FLOAT, {"2", "3", "4"});
    if (c.b_constant)
      m.initializer(testing::float_tensor("b", c.b_dims, bv));
    else
      m.input("b", TensorProto::FLOAT, b_dim_text);
    auto* add = m.node("Add", "add", {"a", "b"}, {"y"});
    testing::attr_int(add, "broadcast", 1);
    testing::attr_int(add, "axis", c.axis);
    m.output("y", TensorProto::FLOAT, {"2", "3", "4"});

    Result<Graph> g = import_onnx_bytes(m.bytes(), "");
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    expect_all_opset7(*g);
    EXPECT_FALSE(g->node(0).has_attr("axis"));
    std::map<std::string, Tensor> feeds = {{"a", Tensor::from_vector<float>(Shape{2, 3, 4}, av)}};
    if (!c.b_constant) feeds["b"] = Tensor::from_vector<float>(Shape(c.b_dims), bv);
    Result<std::vector<Tensor>> out = run_graph(*g, feeds);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0];
    ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k) {
          const int64_t flat = (i * 3 + j) * 4 + k;
          const int64_t bi = c.axis == 1 ? j : i * 3 + j;  // B's dims start at `axis` of A
          EXPECT_FLOAT_EQ(y.data<float>()[flat], av[flat] + bv[bi]) << i << "," << j << "," << k;
        }
  }
}

// Without `axis`, legacy broadcasting lines B up with A's last dims, as numpy broadcasting does;
// Mul of opset 1 also loses consumed_inputs.
TEST(LegacyOpset, SuffixBroadcastAndConsumedInputs) {
  OnnxModel m(1);
  m.input("a", TensorProto::FLOAT, {"2", "3"});
  m.initializer(testing::float_tensor("b", {3}, {2.f, -1.f, 0.5f}));
  auto* mul = m.node("Mul", "mul", {"a", "b"}, {"y"});
  testing::attr_int(mul, "broadcast", 1);
  testing::attr_ints(mul, "consumed_inputs", {0, 0});
  m.output("y", TensorProto::FLOAT, {"2", "3"});
  Result<Graph> g = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  expect_all_opset7(*g);
  EXPECT_EQ(g->num_nodes(), 1u);
  const std::vector<float> av = {1, 2, 3, 4, 5, 6};
  Result<std::vector<Tensor>> out = run_graph(*g, {{"a", Tensor::from_vector<float>(Shape{2, 3}, av)}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> want = {2, -2, 1.5f, 8, -5, 3};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ((*out)[0].data<float>()[i], want[i]) << i;
}

// BatchNormalization of opset 6: is_test and spatial=1 change nothing; the result is the
// inference formula per channel.
TEST(LegacyOpset, BatchNormalization6AttributesIgnored) {
  OnnxModel m(6);
  m.input("x", TensorProto::FLOAT, {"1", "2", "2", "2"});
  const std::vector<float> scale = {2.f, 0.5f}, bias = {1.f, -1.f}, mean = {0.5f, -2.f}, var = {4.f, 0.25f};
  m.initializer(testing::float_tensor("scale", {2}, scale));
  m.initializer(testing::float_tensor("bias", {2}, bias));
  m.initializer(testing::float_tensor("mean", {2}, mean));
  m.initializer(testing::float_tensor("var", {2}, var));
  auto* bn = m.node("BatchNormalization", "bn", {"x", "scale", "bias", "mean", "var"}, {"y"});
  testing::attr_int(bn, "is_test", 1);
  testing::attr_int(bn, "spatial", 1);
  testing::attr_float(bn, "epsilon", 1e-3f);
  testing::attr_float(bn, "momentum", 0.9f);
  m.output("y", TensorProto::FLOAT, {"1", "2", "2", "2"});
  Result<Graph> g = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  expect_all_opset7(*g);
  const std::vector<float> xv = iota_floats(8, -2.f, 0.75f);
  Result<std::vector<Tensor>> out = run_graph(*g, {{"x", Tensor::from_vector<float>(Shape{1, 2, 2, 2}, xv)}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (size_t i = 0; i < 8; ++i) {
    const size_t ch = i / 4;
    const double want = scale[ch] * (xv[i] - mean[ch]) / std::sqrt(var[ch] + 1e-3) + bias[ch];
    EXPECT_NEAR((*out)[0].data<float>()[i], want, 1e-5) << i;
  }
}

// PRelu of opset 6 with a slope per channel: [3] against [2, 3, 2, 2] applies slope[c] to channel c.
TEST(LegacyOpset, PReluSlopeIsPerChannel) {
  OnnxModel m(6);
  m.input("x", TensorProto::FLOAT, {"2", "3", "2", "2"});
  const std::vector<float> slope = {0.1f, 0.2f, 0.3f};
  m.initializer(testing::float_tensor("slope", {3}, slope));
  m.node("PRelu", "prelu", {"x", "slope"}, {"y"});
  m.output("y", TensorProto::FLOAT, {"2", "3", "2", "2"});
  Result<Graph> g = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  expect_all_opset7(*g);
  const std::vector<float> xv = iota_floats(24, -6.f, 0.5f);
  Result<std::vector<Tensor>> out = run_graph(*g, {{"x", Tensor::from_vector<float>(Shape{2, 3, 2, 2}, xv)}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (size_t i = 0; i < xv.size(); ++i) {
    const float s = slope[(i / 4) % 3];
    EXPECT_FLOAT_EQ((*out)[0].data<float>()[i], xv[i] < 0 ? xv[i] * s : xv[i]) << i;
  }
}

// Forms of opsets 1 to 5: Reshape's shape attribute, Concat's default axis, Cast's type name.
TEST(LegacyOpset, Opset1Forms) {
  OnnxModel m(1);
  m.input("a", TensorProto::FLOAT, {"2", "3"});
  m.input("b", TensorProto::FLOAT, {"2", "1"});
  m.node("Concat", "cat", {"a", "b"}, {"c"});  // axis 1 by default in opset 1
  auto* r = m.node("Reshape", "reshape", {"c"}, {"r"});
  testing::attr_ints(r, "shape", {4, 2});
  auto* cast = m.node("Cast", "cast", {"r"}, {"y"});
  testing::attr_string(cast, "to", "INT32");
  m.output("y", TensorProto::INT32, {"4", "2"});
  Result<Graph> g = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  expect_all_opset7(*g);
  const std::vector<float> av = {1, 2, 3, 4, 5, 6}, bv = {7, 8};
  Result<std::vector<Tensor>> out = run_graph(
      *g, {{"a", Tensor::from_vector<float>(Shape{2, 3}, av)}, {"b", Tensor::from_vector<float>(Shape{2, 1}, bv)}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0];
  ASSERT_EQ(y.dtype(), DType::kInt32);
  ASSERT_EQ(y.shape(), (Shape{4, 2}));
  const std::vector<int32_t> want = {1, 2, 3, 7, 4, 5, 6, 8};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.data<int32_t>()[i], want[i]) << i;
}

// Legacy forms that have no opset-7 equivalent give an error naming the node and the opset.
TEST(LegacyOpset, UnsupportedFormsGiveClearErrors) {
  {  // A's rank is not known, so B cannot be lined up at axis 1.
    OnnxModel m(6);
    auto* a = m.proto()->add_input();
    a->set_name("a");
    a->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);  // no shape
    m.initializer(testing::float_tensor("b", {3}, {1, 2, 3}));
    auto* add = m.node("Add", "add", {"a", "b"}, {"y"});
    testing::attr_int(add, "broadcast", 1);
    testing::attr_int(add, "axis", 1);
    m.output("y", TensorProto::FLOAT, {"?"});
    EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), "").status(), StatusCode::kUnsupported,
                          {"Add 'add' (opset 6)", "axis 1", "rank of input A 'a'"}));
  }
  {  // The axis does not fit B into A.
    OnnxModel m(6);
    m.input("a", TensorProto::FLOAT, {"2", "3"});
    m.initializer(testing::float_tensor("b", {3}, {1, 2, 3}));
    auto* sub = m.node("Sub", "sub", {"a", "b"}, {"y"});
    testing::attr_int(sub, "broadcast", 1);
    testing::attr_int(sub, "axis", 2);
    m.output("y", TensorProto::FLOAT, {"2", "3"});
    EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), "").status(), StatusCode::kInvalidArgument,
                          {"Sub 'sub' (opset 6)", "axis 2"}));
  }
  {  // Split of opset 1 with sizes computed at run time.
    OnnxModel m(1);
    m.input("x", TensorProto::FLOAT, {"4"});
    m.input("sizes", TensorProto::INT64, {"2"});
    m.node("Split", "split", {"x", "sizes"}, {"p", "q"});
    m.output("p", TensorProto::FLOAT, {"?"});
    m.output("q", TensorProto::FLOAT, {"?"});
    EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), "").status(), StatusCode::kUnsupported,
                          {"Split 'split' (opset 1)", "'sizes'", "constant"}));
  }
  {  // Cast of opset 1 to a type name ONNX does not know.
    OnnxModel m(1);
    m.input("x", TensorProto::FLOAT, {"4"});
    auto* cast = m.node("Cast", "cast", {"x"}, {"y"});
    testing::attr_string(cast, "to", "FLOAT128");
    m.output("y", TensorProto::FLOAT, {"4"});
    EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), "").status(), StatusCode::kInvalidArgument,
                          {"Cast 'cast' (opset 1)", "FLOAT128"}));
  }
}

// Nodes inside an If of an opset-6 model are upgraded too; opset-7 models and models refused by
// min_opset are left alone.
TEST(LegacyOpset, SubgraphsAndOpsetLimits) {
  OnnxModel m(6);
  m.input("c", TensorProto::BOOL, {});
  m.input("a", TensorProto::FLOAT, {"2", "3"});
  onnx::GraphProto then_g;
  testing::OnnxGraph then_b(&then_g);
  then_g.set_name("then");
  auto* add = then_b.node("Add", "inner_add", {"a", "a"}, {"t"});
  testing::attr_int(add, "broadcast", 0);
  then_b.output("t", TensorProto::FLOAT, {"2", "3"});
  onnx::GraphProto else_g;
  testing::OnnxGraph else_b(&else_g);
  else_g.set_name("else");
  else_b.node("Neg", "inner_neg", {"a"}, {"e"});
  else_b.output("e", TensorProto::FLOAT, {"2", "3"});
  auto* node = m.node("If", "if", {"c"}, {"y"});
  testing::attr_graph(node, "then_branch", then_g);
  testing::attr_graph(node, "else_branch", else_g);
  m.output("y", TensorProto::FLOAT, {"2", "3"});
  Result<Graph> g = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  expect_all_opset7(*g);
  expect_all_opset7(*g->node(0).attrs.at("then_branch").g);
  expect_all_opset7(*g->node(0).attrs.at("else_branch").g);

  ImportOptions strict;
  strict.min_opset = kLegacyOpsetLimit;
  EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), "", strict).status(), StatusCode::kUnsupported, {"opset 6"}));

  Graph untouched;
  untouched.opsets[""] = 9;
  const ValueId x = untouched.add_value("x", DType::kFloat32, DimList{2});
  const ValueId y = untouched.add_value("y");
  untouched.add_node("Relu", "r", {x}, {y});
  ASSERT_TRUE(upgrade_legacy_nodes(untouched, 9).ok());
  EXPECT_EQ(untouched.node(0).opset, 9);
  EXPECT_EQ(untouched.opsets.at(""), 9);
}

}  // namespace
}  // namespace streamline::graph
