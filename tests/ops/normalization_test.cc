// BatchNormalization, InstanceNormalization, LRN, LayerNormalization and MeanVarianceNormalization
// against the reference kernels, plus the unsupported training forms.

#include "ops/math_test_util.h"

namespace streamline::ops::testing {
namespace {

std::vector<Tensor> batch_norm_inputs(std::mt19937& rng, const Shape& s) {
  const Shape c{s[1]};
  return {random_tensor(DType::kFloat32, s, rng), random_tensor(DType::kFloat32, c, rng),
          random_tensor(DType::kFloat32, c, rng), random_tensor(DType::kFloat32, c, rng),
          random_tensor(DType::kFloat32, c, rng, 0.1, 2)};
}

TEST(Normalization, BatchNormMatchesReference) {
  std::mt19937 rng(100);
  for (int opset : {7, 9, 14, 15}) {
    for (const Shape& s :
         {Shape{2, 3}, Shape{2, 5, 7}, Shape{1, 8, 6, 6}, Shape{3, 4, 2, 3, 2}, Shape{2, 64, 40, 40}}) {
      EvalOptions opt;
      opt.num_threads = 2;
      EXPECT_TRUE(match_reference({"BatchNormalization", opset, {{"epsilon", attr_f(1e-3f)}}},
                                  batch_norm_inputs(rng, s), {1e-5, 1e-5}, opt));
    }
  }
}

TEST(Normalization, BatchNormTrainingFormsAreUnsupported) {
  std::mt19937 rng(1);
  auto ins = batch_norm_inputs(rng, Shape{2, 3, 4, 4});
  auto training = run_op(cpu_registry(), {"BatchNormalization", 15, {{"training_mode", attr_i(1)}}}, ins);
  ASSERT_FALSE(training.ok());
  EXPECT_EQ(training.status().code(), StatusCode::kUnsupported);
  auto extra = run_op(cpu_registry(), {"BatchNormalization", 9, {}, 5}, ins);
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), StatusCode::kUnsupported);
  ins[1] = random_tensor(DType::kFloat32, Shape{4}, rng);
  auto wrong = run_op(cpu_registry(), {"BatchNormalization", 15}, ins);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
}

TEST(Normalization, InstanceNormMatchesReference) {
  std::mt19937 rng(200);
  for (const Shape& s : {Shape{2, 3, 5}, Shape{1, 4, 7, 9}, Shape{2, 16, 33, 33}, Shape{1, 2, 3, 4, 5}}) {
    for (int threads : {1, 2}) {
      EvalOptions opt;
      opt.num_threads = threads;
      const Shape c{s[1]};
      Tensor x = random_tensor(DType::kFloat32, s, rng, -5, 5);
      EXPECT_TRUE(match_reference({"InstanceNormalization", 6, {{"epsilon", attr_f(1e-4f)}}},
                                  {x, random_tensor(DType::kFloat32, c, rng), random_tensor(DType::kFloat32, c, rng)},
                                  {2e-5, 2e-5}, opt));
    }
  }
}

TEST(Normalization, LrnMatchesReference) {
  std::mt19937 rng(300);
  for (int64_t size : {1, 2, 3, 5}) {
    for (const Shape& s : {Shape{2, 7, 5, 5}, Shape{1, 16, 13, 13}, Shape{2, 3, 4}}) {
      OpCase c{"LRN",
               13,
               {{"size", attr_i(size)}, {"alpha", attr_f(0.02f)}, {"beta", attr_f(0.75f)}, {"bias", attr_f(2.f)}}};
      EvalOptions opt;
      opt.num_threads = 2;
      EXPECT_TRUE(match_reference(c, {random_tensor(DType::kFloat32, s, rng, -4, 4)}, {1e-6, 1e-5}, opt));
    }
  }
  auto bad = run_op(cpu_registry(), {"LRN", 13}, {Tensor::empty(DType::kFloat32, Shape{1, 2, 3, 3})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(Normalization, LayerNormMatchesReferenceWithStatistics) {
  std::mt19937 rng(400);
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale;
    bool bias;
  };
  const Case cases[] = {
      {{2, 5, 16}, -1, {16}, true},          {{2, 5, 16}, 1, {5, 16}, true}, {{4, 7}, 0, {4, 7}, false},
      {{3, 4, 6}, -1, {1, 6}, true},         {{3, 4, 6}, -2, {6}, true},     {{64, 768}, -1, {768}, true},
      {{2, 3, 4, 5}, 2, {1, 1, 4, 5}, true},
  };
  for (const Case& c : cases) {
    for (int outputs : {1, 3}) {
      std::vector<Tensor> ins = {random_tensor(DType::kFloat32, c.x, rng, -3, 5),
                                 random_tensor(DType::kFloat32, c.scale, rng)};
      if (c.bias) ins.push_back(random_tensor(DType::kFloat32, c.scale, rng));
      OpCase op{"LayerNormalization", 17, {{"axis", attr_i(c.axis)}, {"epsilon", attr_f(1e-5f)}}, outputs};
      EvalOptions opt;
      opt.num_threads = 2;
      EXPECT_TRUE(match_reference(op, ins, {2e-5, 2e-5}, opt)) << c.x.to_string() << " axis " << c.axis;
    }
  }
  // Scale that varies outside the normalized axes is not supported; a non-broadcastable one is invalid.
  Tensor x = random_tensor(DType::kFloat32, Shape{3, 4, 6}, rng);
  auto per_row =
      run_op(cpu_registry(), {"LayerNormalization", 17}, {x, random_tensor(DType::kFloat32, Shape{4, 6}, rng)});
  ASSERT_FALSE(per_row.ok());
  EXPECT_EQ(per_row.status().code(), StatusCode::kUnsupported);
  auto bad = run_op(cpu_registry(), {"LayerNormalization", 17}, {x, random_tensor(DType::kFloat32, Shape{5}, rng)});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(Normalization, MeanVarianceNormalizationMatchesReference) {
  std::mt19937 rng(500);
  Tensor x = random_tensor(DType::kFloat32, Shape{2, 3, 4, 5}, rng);
  EXPECT_TRUE(match_reference({"MeanVarianceNormalization", 13}, {x}, {1e-5, 1e-5}));
  for (const auto& axes : std::vector<std::vector<int64_t>>{{2, 3}, {0, 1}, {1}, {0, 1, 2, 3}, {-1}}) {
    EXPECT_TRUE(match_reference({"MeanVarianceNormalization", 13, {{"axes", attr_ints(axes)}}}, {x}, {1e-5, 1e-5}));
  }
}

}  // namespace
}  // namespace streamline::ops::testing
