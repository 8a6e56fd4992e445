// BatchNormalization (inference and training mode), InstanceNormalization, LRN, LayerNormalization,
// MeanVarianceNormalization, GroupNormalization and LpNormalization, against the reference kernels
// or values computed here.

#include "ops/op_test_util.h"

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
      EXPECT_TRUE(match_reference({"BatchNormalization", opset, {{"epsilon", one_float(1e-3f)}}},
                                  batch_norm_inputs(rng, s), {1e-5, 1e-5}, opt));
    }
  }
}

// training_mode = 1 (opset 14+) normalises with the batch's statistics and returns the updated
// running mean and variance; before opset 14 the extra outputs stay unsupported.
TEST(Normalization, BatchNormTrainingMode) {
  std::mt19937 rng(1);
  auto ins = batch_norm_inputs(rng, Shape{2, 3, 4, 4});
  const float momentum = 0.8f, eps = 1e-3f;
  auto training =
      run_op(cpu_reg(),
             {"BatchNormalization",
              15,
              {{"training_mode", one_int(1)}, {"momentum", one_float(momentum)}, {"epsilon", one_float(eps)}},
              3},
             ins);
  ASSERT_TRUE(training.ok()) << training.status().to_string();
  ASSERT_EQ(training->size(), 3u);
  const Tensor& x = ins[0];
  for (int64_t c = 0; c < 3; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 16; ++i) sum += x.data<float>()[(n * 3 + c) * 16 + i];
    const double mean = sum / 32;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 16; ++i) sq += std::pow(x.data<float>()[(n * 3 + c) * 16 + i] - mean, 2);
    const double var = sq / 32;
    EXPECT_NEAR((*training)[1].data<float>()[c], ins[3].data<float>()[c] * momentum + mean * (1 - momentum), 1e-5);
    EXPECT_NEAR((*training)[2].data<float>()[c], ins[4].data<float>()[c] * momentum + var * (1 - momentum), 1e-5);
    const int64_t e = (1 * 3 + c) * 16 + 5;
    const double want =
        (x.data<float>()[e] - mean) / std::sqrt(var + eps) * ins[1].data<float>()[c] + ins[2].data<float>()[c];
    EXPECT_NEAR((*training)[0].data<float>()[e], want, 1e-5);
  }
  auto extra = run_op(cpu_reg(), {"BatchNormalization", 9, {}, 5}, ins);
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), StatusCode::kUnsupported);
  ins[1] = random_tensor(DType::kFloat32, Shape{4}, rng);
  auto wrong = run_op(cpu_reg(), {"BatchNormalization", 15}, ins);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
}

// GroupNormalization's scale and bias: one per group at opset 18, one per channel at 21.
TEST(Normalization, GroupNormPerGroupThenPerChannel) {
  std::mt19937 rng(2);
  const Tensor x = random_tensor(DType::kFloat32, Shape{2, 4, 3, 5}, rng);
  const int64_t groups = 2;
  for (int opset : {18, 21}) {
    const int64_t params = opset >= 21 ? 4 : groups;
    const Tensor scale = random_tensor(DType::kFloat32, Shape{params}, rng, 0.5, 2);
    const Tensor bias = random_tensor(DType::kFloat32, Shape{params}, rng);
    auto y = run_op(cpu_reg(), {"GroupNormalization", opset, {{"num_groups", one_int(groups)}}}, {x, scale, bias});
    ASSERT_TRUE(y.ok()) << opset << ": " << y.status().to_string();
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t g = 0; g < groups; ++g) {
        const float* blk = x.data<float>() + (n * 4 + g * 2) * 15;
        double mean = 0, var = 0;
        for (int i = 0; i < 30; ++i) mean += blk[i];
        mean /= 30;
        for (int i = 0; i < 30; ++i) var += (blk[i] - mean) * (blk[i] - mean);
        var /= 30;
        for (int i = 0; i < 30; ++i) {
          const int64_t p = opset >= 21 ? g * 2 + i / 15 : g;
          const double want = (blk[i] - mean) / std::sqrt(var + 1e-5) * scale.data<float>()[p] + bias.data<float>()[p];
          EXPECT_NEAR((*y)[0].data<float>()[(n * 4 + g * 2) * 15 + i], want, 1e-5) << opset;
        }
      }
    // The other opset's parameter shape is refused.
    const Tensor other = random_tensor(DType::kFloat32, Shape{opset >= 21 ? groups : 4}, rng);
    EXPECT_FALSE(
        run_op(cpu_reg(), {"GroupNormalization", opset, {{"num_groups", one_int(groups)}}}, {x, other, other}).ok());
  }
}

TEST(Normalization, LpNormalizationWithZeroRows) {
  const Tensor x = Tensor::from_vector<float>(Shape{2, 3}, {3, 0, -4, 0, 0, 0});
  auto l2 = run_op(cpu_reg(), {"LpNormalization", 1, {{"axis", one_int(1)}}}, {x});
  auto l1 = run_op(cpu_reg(), {"LpNormalization", 1, {{"axis", one_int(-1)}, {"p", one_int(1)}}}, {x});
  ASSERT_TRUE(l2.ok() && l1.ok());
  const std::vector<float> want2{0.6f, 0, -0.8f, 0, 0, 0}, want1{3.f / 7, 0, -4.f / 7, 0, 0, 0};
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR((*l2)[0].data<float>()[i], want2[static_cast<size_t>(i)], 1e-6);
    EXPECT_NEAR((*l1)[0].data<float>()[i], want1[static_cast<size_t>(i)], 1e-6);
  }
  EXPECT_FALSE(run_op(cpu_reg(), {"LpNormalization", 1, {{"p", one_int(3)}}}, {x}).ok());
}

TEST(Normalization, InstanceNormMatchesReference) {
  std::mt19937 rng(200);
  for (const Shape& s : {Shape{2, 3, 5}, Shape{1, 4, 7, 9}, Shape{2, 16, 33, 33}, Shape{1, 2, 3, 4, 5}}) {
    for (int threads : {1, 2}) {
      EvalOptions opt;
      opt.num_threads = threads;
      const Shape c{s[1]};
      Tensor x = random_tensor(DType::kFloat32, s, rng, -5, 5);
      EXPECT_TRUE(match_reference({"InstanceNormalization", 6, {{"epsilon", one_float(1e-4f)}}},
                                  {x, random_tensor(DType::kFloat32, c, rng), random_tensor(DType::kFloat32, c, rng)},
                                  {2e-5, 2e-5}, opt));
    }
  }
}

TEST(Normalization, LrnMatchesReference) {
  std::mt19937 rng(300);
  for (int64_t size : {1, 2, 3, 5}) {
    for (const Shape& s : {Shape{2, 7, 5, 5}, Shape{1, 16, 13, 13}, Shape{2, 3, 4}}) {
      OpCase c{
          "LRN",
          13,
          {{"size", one_int(size)}, {"alpha", one_float(0.02f)}, {"beta", one_float(0.75f)}, {"bias", one_float(2.f)}}};
      EvalOptions opt;
      opt.num_threads = 2;
      EXPECT_TRUE(match_reference(c, {random_tensor(DType::kFloat32, s, rng, -4, 4)}, {1e-6, 1e-5}, opt));
    }
  }
  auto bad = run_op(cpu_reg(), {"LRN", 13}, {Tensor::empty(DType::kFloat32, Shape{1, 2, 3, 3})});
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
      OpCase op{"LayerNormalization", 17, {{"axis", one_int(c.axis)}, {"epsilon", one_float(1e-5f)}}, outputs};
      EvalOptions opt;
      opt.num_threads = 2;
      EXPECT_TRUE(match_reference(op, ins, {2e-5, 2e-5}, opt)) << c.x.to_string() << " axis " << c.axis;
    }
  }
  // Scale that varies outside the normalized axes is not supported; a non-broadcastable one is invalid.
  Tensor x = random_tensor(DType::kFloat32, Shape{3, 4, 6}, rng);
  auto per_row = run_op(cpu_reg(), {"LayerNormalization", 17}, {x, random_tensor(DType::kFloat32, Shape{4, 6}, rng)});
  ASSERT_FALSE(per_row.ok());
  EXPECT_EQ(per_row.status().code(), StatusCode::kUnsupported);
  auto bad = run_op(cpu_reg(), {"LayerNormalization", 17}, {x, random_tensor(DType::kFloat32, Shape{5}, rng)});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(Normalization, MeanVarianceNormalizationMatchesReference) {
  std::mt19937 rng(500);
  Tensor x = random_tensor(DType::kFloat32, Shape{2, 3, 4, 5}, rng);
  EXPECT_TRUE(match_reference({"MeanVarianceNormalization", 13}, {x}, {1e-5, 1e-5}));
  for (const auto& axes : std::vector<std::vector<int64_t>>{{2, 3}, {0, 1}, {1}, {0, 1, 2, 3}, {-1}}) {
    EXPECT_TRUE(match_reference({"MeanVarianceNormalization", 13, {{"axes", ints(axes)}}}, {x}, {1e-5, 1e-5}));
  }
}

}  // namespace
}  // namespace streamline::ops::testing
