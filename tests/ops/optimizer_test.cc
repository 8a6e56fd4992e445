// Adagrad, Momentum and Adam (ai.onnx.preview.training): the CPU kernels against the reference on
// random groups (fixed seed), plus one Adagrad step by hand.

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

constexpr const char* kDomain = "ai.onnx.preview.training";

TEST(Optimizer, MatchesReferenceOnRandomGroups) {
  std::mt19937 rng(1001);
  const char* ops[] = {"Adagrad", "Momentum", "Adam"};
  for (int iter = 0; iter < 18; ++iter) {
    const std::string op = ops[iter % 3];
    const size_t groups = 1 + static_cast<size_t>(iter % 2);
    const size_t per = op == "Adam" ? 4 : 3;
    std::vector<Shape> shapes;
    for (size_t g = 0; g < groups; ++g) shapes.push_back(random_shape(rng, 1, 3, 4));
    std::vector<Tensor> in = {Tensor::scalar<float>(0.1f), Tensor::scalar<int64_t>(iter % 4)};
    for (size_t k = 0; k < per; ++k)
      for (size_t g = 0; g < groups; ++g) in.push_back(random_tensor(shapes[g], rng, k >= 2 ? 0.f : -1.f, 1.f));
    // Adam's second moment and Adagrad's accumulator must be non-negative.
    for (size_t g = 0; g < groups; ++g) {
      Tensor& st = in[2 + (per - 1) * groups + g];
      for (int64_t i = 0; i < st.numel(); ++i) st.data<float>()[i] = std::fabs(st.data<float>()[i]);
    }
    NodeCase nc(op, 1, in.size(), (per - 1) * groups, {}, kDomain);
    nc.f("norm_coefficient", 0.01f);
    if (op == "Adagrad") nc.f("decay_factor", 0.1f).f("epsilon", 1e-5f);
    if (op == "Momentum") nc.f("alpha", 0.9f).f("beta", 0.5f).s("mode", iter % 2 ? "nesterov" : "standard");
    if (op == "Adam") nc.f("alpha", 0.9f).f("beta", 0.99f).f("epsilon", 1e-6f).f("norm_coefficient_post", 0.001f);
    expect_cpu_matches_reference(nc, in, 1e-5, op + " groups " + std::to_string(groups));
  }
}

TEST(Optimizer, AdagradStepByHand) {
  // g = 1, h' = 0 + 1 = 1, x' = 1 - 0.5 * 1 / (1 + 0) = 0.5.
  NodeCase nc("Adagrad", 1, 5, 2, {}, kDomain);
  auto out = nc.run(
      cpu_reg(), {Tensor::scalar<float>(0.5f), Tensor::scalar<int64_t>(0), Tensor::from_vector<float>(Shape{1}, {1.f}),
                  Tensor::from_vector<float>(Shape{1}, {1.f}), Tensor::from_vector<float>(Shape{1}, {0.f})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], 0.5f);
  EXPECT_FLOAT_EQ((*out)[1].data<float>()[0], 1.f);
}

TEST(Optimizer, RejectsIncompleteGroups) {
  NodeCase nc("Adam", 1, 5, 3, {}, kDomain);
  auto out = nc.run(
      cpu_reg(), {Tensor::scalar<float>(0.5f), Tensor::scalar<int64_t>(0), Tensor::from_vector<float>(Shape{1}, {1.f}),
                  Tensor::from_vector<float>(Shape{1}, {1.f}), Tensor::from_vector<float>(Shape{1}, {0.f})});
  EXPECT_FALSE(out.ok());
}

}  // namespace
}  // namespace streamline::ops::testing
