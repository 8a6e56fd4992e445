// Tests of reduce_to_global_pool (pass_reduce.cc): which reductions become global pools, and that
// the rewritten graph computes what the original did (both run by the CPU kernels).

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "graph/graph_run_util.h"
#include "graph/passes.h"
#include "ops/op_test_util.h"

namespace streamline::graph {
namespace {

using testing::live_ops;

// x (dims) -> op(axes as an attribute, or as a constant input from opset 18) -> y -> Relu -> z.
struct ReduceGraph {
  Graph g;
  ValueId x = kNoValue, y = kNoValue, z = kNoValue;
  ReduceGraph(const std::string& op, DimList dims, std::vector<int64_t> axes, int64_t keepdims, int opset = 13) {
    g.opsets[""] = opset;
    x = g.add_value("x", DType::kFloat32, dims);
    g.add_input(x);
    y = g.add_value("y", DType::kFloat32);
    z = g.add_value("z", DType::kFloat32);
    std::vector<ValueId> in = {x};
    if (opset >= 18) {
      const int64_t n = static_cast<int64_t>(axes.size());
      in.push_back(g.add_constant("axes", Tensor::from_vector<int64_t>(Shape{n}, axes)));
    }
    const NodeId r = g.add_node(op, "reduce", in, {y});
    g.node(r).opset = opset;
    if (opset < 18) {
      Attribute a;
      a.kind = Attribute::Kind::kInts;
      a.ints = axes;
      g.node(r).attrs["axes"] = a;
    }
    Attribute k;
    k.kind = Attribute::Kind::kInt;
    k.i = keepdims;
    g.node(r).attrs["keepdims"] = k;
    const NodeId relu = g.add_node("Relu", "relu", {y}, {z});
    g.node(relu).opset = opset;
    g.add_output(z);
    g.rebuild_edges();
  }
};

// The graph before and after the pass on the same input: same shape, same values.
void expect_same_results(ReduceGraph& t, const Shape& shape, int rewrites, const std::vector<std::string>& ops) {
  std::mt19937 rng(17);
  const Tensor in = ops::testing::random_tensor(shape, rng, -2.f, 2.f);
  auto before = testing::run_graph(t.g, {in});
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  ASSERT_EQ(reduce_to_global_pool(t.g), rewrites);
  EXPECT_EQ(live_ops(t.g), ops);
  auto after = testing::run_graph(t.g, {in});
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  ASSERT_EQ((*after)[0].shape(), (*before)[0].shape());
  for (int64_t i = 0; i < (*before)[0].numel(); ++i)
    EXPECT_NEAR((*after)[0].data<float>()[i], (*before)[0].data<float>()[i], 1e-5f) << "element " << i;
  EXPECT_EQ(t.g.value(t.g.outputs()[0]).name, "z");
}

TEST(ReduceToGlobalPool, SpatialMeanKeepingDimsBecomesGlobalAveragePool) {
  ReduceGraph t("ReduceMean", DimList{2, 5, 3, 4}, {2, 3}, 1);
  expect_same_results(t, Shape{2, 5, 3, 4}, 1, {"GlobalAveragePool", "Relu"});
}

TEST(ReduceToGlobalPool, SpatialMeanDroppingDimsGainsAFlatten) {
  // MnasNet's head: x.mean([2, 3]) -> [N, C].
  ReduceGraph t("ReduceMean", DimList{2, 6, 7, 7}, {-1, -2}, 0);
  expect_same_results(t, Shape{2, 6, 7, 7}, 1, {"Relu", "GlobalAveragePool", "Flatten"});
}

TEST(ReduceToGlobalPool, AxesAsAConstantInputFromOpset18) {
  ReduceGraph t("ReduceMean", DimList{1, 4, 5, 6}, {3, 2}, 0, 18);
  expect_same_results(t, Shape{1, 4, 5, 6}, 1, {"Relu", "GlobalAveragePool", "Flatten"});
}

TEST(ReduceToGlobalPool, SpatialMaxBecomesGlobalMaxPoolAndVolumesToo) {
  ReduceGraph max("ReduceMax", DimList{1, 3, 4, 5}, {2, 3}, 1);
  expect_same_results(max, Shape{1, 3, 4, 5}, 1, {"GlobalMaxPool", "Relu"});
  ReduceGraph volume("ReduceMean", DimList{1, 3, 2, 3, 4}, {2, 3, 4}, 1);
  expect_same_results(volume, Shape{1, 3, 2, 3, 4}, 1, {"GlobalAveragePool", "Relu"});
}

TEST(ReduceToGlobalPool, OtherReductionsAreLeftAlone) {
  // Channels, part of the spatial axes, the batch, a rank-3 [batch, tokens, features] tensor,
  // an unknown rank, and a reduction that is not a mean or a max.
  ReduceGraph channels("ReduceMean", DimList{1, 3, 4, 5}, {1}, 1);
  ReduceGraph one_axis("ReduceMean", DimList{1, 3, 4, 5}, {3}, 1);
  ReduceGraph with_batch("ReduceMean", DimList{1, 3, 4, 5}, {0, 2, 3}, 1);
  ReduceGraph tokens("ReduceMean", DimList{1, 8, 16}, {2}, 1);
  ReduceGraph sum("ReduceSum", DimList{1, 3, 4, 5}, {2, 3}, 1);
  for (ReduceGraph* t : {&channels, &one_axis, &with_batch, &tokens, &sum})
    EXPECT_EQ(reduce_to_global_pool(t->g), 0) << t->g.node(0).op_type;
  ReduceGraph unknown("ReduceMean", DimList{1, 3, 4, 5}, {2, 3}, 1);
  unknown.g.value(unknown.x).dims.reset();
  EXPECT_EQ(reduce_to_global_pool(unknown.g), 0);
}

}  // namespace
}  // namespace streamline::graph
