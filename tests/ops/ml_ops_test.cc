// ai.onnx.ml: Binarizer, ArrayFeatureExtractor and TreeEnsemble by hand.

#include <cmath>

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

constexpr const char* kMl = "ai.onnx.ml";

std::vector<float> floats_of(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(MlOps, BinarizerAndArrayFeatureExtractor) {
  const Tensor x = Tensor::from_vector<float>(Shape{2, 3}, {0.1f, 0.5f, 0.9f, -1, 2, 0.5f});
  NodeCase bin("Binarizer", 1, 1, 1, {}, kMl);
  bin.f("threshold", 0.5f);
  auto b = bin.run(cpu_reg(), {x});
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(floats_of((*b)[0]), (std::vector<float>{0, 0, 1, 0, 1, 0}));
  NodeCase afe("ArrayFeatureExtractor", 1, 2, 1, {}, kMl);
  auto a = afe.run(cpu_reg(), {x, Tensor::from_vector<int64_t>(Shape{2}, {2, 0})});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_EQ((*a)[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(floats_of((*a)[0]), (std::vector<float>{0.9f, 0.1f, 0.5f, -1}));
  EXPECT_FALSE(afe.run(cpu_reg(), {x, Tensor::from_vector<int64_t>(Shape{1}, {3})}).ok());
}

// Two trees over two features and two targets.
//   tree 0: node 0: x0 <= 1.5 ? leaf 0 (t0 += 1) : node 1;  node 1: x1 in {2, 5} ? leaf 1 (t1 += 10) : leaf 2 (t0 +=
//   100) tree 1: node 2: x1 > 0 (NaN goes true) ? leaf 3 (t1 += 1000) : leaf 4 (t0 += 7)
NodeCase ensemble(int64_t aggregate) {
  NodeCase nc("TreeEnsemble", 5, 1, 1, {}, kMl);
  nc.i("n_targets", 2).i("aggregate_function", aggregate);
  nc.tensor("nodes_splits", Tensor::from_vector<float>(Shape{3}, {1.5f, 0, 0}));
  nc.tensor("nodes_modes", Tensor::from_vector<uint8_t>(Shape{3}, {0, 6, 3}));
  nc.ints("nodes_featureids", {0, 1, 1});
  nc.ints("nodes_truenodeids", {0, 1, 3}).ints("nodes_trueleafs", {1, 1, 1});
  nc.ints("nodes_falsenodeids", {1, 2, 4}).ints("nodes_falseleafs", {0, 1, 1});
  nc.ints("nodes_missing_value_tracks_true", {0, 0, 1});
  nc.tensor("membership_values", Tensor::from_vector<float>(Shape{3}, {2, 5, NAN}));
  nc.tensor("leaf_weights", Tensor::from_vector<float>(Shape{5}, {1, 10, 100, 1000, 7}));
  nc.ints("leaf_targetids", {0, 1, 0, 1, 0});
  nc.ints("tree_roots", {0, 2});
  return nc;
}

TEST(MlOps, TreeEnsembleWalksAndAggregates) {
  const Tensor x = Tensor::from_vector<float>(Shape{4, 2}, {1, 3, 2, 5, 2, -1, 9, NAN});
  auto sum = ensemble(1).run(cpu_reg(), {x});
  ASSERT_TRUE(sum.ok()) << sum.status().to_string();
  // Row 0: leaf 0 (t0 1) + leaf 3 (t1 1000); row 1: leaf 1 (t1 10) + leaf 3; row 2: leaf 2 (t0 100) +
  // leaf 4 (t0 7); row 3: x1 NaN: not a member -> leaf 2, NaN tracks true -> leaf 3.
  EXPECT_EQ(floats_of((*sum)[0]), (std::vector<float>{1, 1000, 0, 1010, 107, 0, 100, 1000}));
  auto avg = ensemble(0).run(cpu_reg(), {x});
  ASSERT_TRUE(avg.ok());
  EXPECT_EQ(floats_of((*avg)[0])[4], 53.5f);
  auto mx = ensemble(3).run(cpu_reg(), {x});
  ASSERT_TRUE(mx.ok());
  EXPECT_EQ(floats_of((*mx)[0])[4], 100.f);
  // A branch out of range is refused when the kernel is made.
  NodeCase bad = ensemble(1);
  bad.ints("nodes_falsenodeids", {1, 2, 9});
  EXPECT_FALSE(bad.run(cpu_reg(), {x}).ok());
}

}  // namespace
}  // namespace streamline::ops::testing
