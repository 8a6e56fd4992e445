// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: the CPU kernels against the reference on
// random shapes, reductions, weights and ignore_index (fixed seed), plus a hand-computed case.

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

TEST(Loss, MatchesReferenceOnRandomCases) {
  std::mt19937 rng(301);
  const char* reductions[] = {"none", "sum", "mean"};
  for (int iter = 0; iter < 48; ++iter) {
    const bool sce = iter % 2 == 0;
    const int64_t n = std::uniform_int_distribution<int64_t>(1, 4)(rng);
    const int64_t c = std::uniform_int_distribution<int64_t>(2, 6)(rng);
    const int extra = std::uniform_int_distribution<int>(0, 3)(rng);
    Shape xs{n, c}, ts{n};
    for (int e = 0; e < extra; ++e) {
      const int64_t d = std::uniform_int_distribution<int64_t>(1, 3)(rng);
      xs.push_back(d);
      ts.push_back(d);
    }
    const bool weighted = (iter / 2) % 2 == 1;
    const bool ignore = (iter / 4) % 2 == 1;
    const char* red = reductions[iter % 3];
    std::vector<Tensor> in = {random_tensor(xs, rng, -3.f, 3.f), uniform_i64(ts, rng, 0, c - 1)};
    if (ignore) in[1].data<int64_t>()[0] = -1;
    if (weighted) in.push_back(random_tensor(Shape{c}, rng, 0.1f, 2.f));
    NodeCase nc(sce ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss", 13, in.size(), sce ? 2 : 1);
    nc.s("reduction", red);
    if (ignore) nc.i("ignore_index", -1);
    expect_cpu_matches_reference(nc, in, 1e-5, xs.to_string() + " " + red, iter % 3 == 0 ? 3 : 1);
  }
}

TEST(Loss, NllMeanWithWeightsByHand) {
  // loss = -(x[0,1]*w1 + x[1,0]*w0) / (w1 + w0)
  Tensor x = Tensor::from_vector<float>(Shape{2, 2}, {0.5f, -1.f, 2.f, 3.f});
  Tensor t = Tensor::from_vector<int64_t>(Shape{2}, {1, 0});
  Tensor w = Tensor::from_vector<float>(Shape{2}, {2.f, 4.f});
  NodeCase nc("NegativeLogLikelihoodLoss", 13, 3);
  auto out = nc.run(cpu_reg(), {x, t, w});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_NEAR((*out)[0].data<float>()[0], -((-1.f) * 4.f + 2.f * 2.f) / 6.f, 1e-6);
}

TEST(Loss, TargetOutOfRangeIsAnError) {
  Tensor x = Tensor::from_vector<float>(Shape{1, 2}, {0.f, 1.f});
  Tensor t = Tensor::from_vector<int64_t>(Shape{1}, {5});
  NodeCase nc("SoftmaxCrossEntropyLoss", 13, 2);
  auto out = nc.run(cpu_reg(), {x, t});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

TEST(Loss, BadReductionIsRejected) {
  Tensor x = Tensor::from_vector<float>(Shape{1, 2}, {0.f, 1.f});
  Tensor t = Tensor::from_vector<int64_t>(Shape{1}, {0});
  NodeCase nc("SoftmaxCrossEntropyLoss", 13, 2);
  nc.s("reduction", "median");
  EXPECT_FALSE(nc.run(cpu_reg(), {x, t}).ok());
}

}  // namespace
}  // namespace streamline::ops::testing
