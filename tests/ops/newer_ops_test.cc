// The long tail of opsets 17 to 26, by hand: Swish (24), MelWeightMatrix (17), TensorScatter (24)
// and ConvTranspose with an output_shape past its natural size.

#include <cmath>

#include "ops/cpu/extra_common.h"
#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

TEST(NewerOps, Swish) {
  const Tensor x = Tensor::from_vector<float>(Shape{4}, {-3, -0.5f, 0, 2});
  NodeCase nc("Swish", 24, 1);
  nc.f("alpha", 1.5f);
  auto y = nc.run(cpu_reg(), {x});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  for (int64_t i = 0; i < 4; ++i) {
    const double v = x.data<float>()[i];
    EXPECT_NEAR((*y)[0].data<float>()[i], v / (1 + std::exp(-1.5 * v)), 1e-6);
  }
}

// Triangles on the mel scale: every band peaks at 1, weights lie in [0, 1], and each band's
// support is contiguous.
TEST(NewerOps, MelWeightMatrixBands) {
  NodeCase nc("MelWeightMatrix", 17, 5);
  auto y = nc.run(cpu_reg(),
                  {Tensor::scalar<int32_t>(8), Tensor::scalar<int32_t>(64), Tensor::scalar<int32_t>(16000),
                   Tensor::scalar<float>(100.f), Tensor::scalar<float>(6000.f)},
                  1, std::vector<bool>(5, true));
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const Tensor& w = (*y)[0];
  ASSERT_EQ(w.shape(), (Shape{33, 8}));
  for (int64_t band = 0; band < 8; ++band) {
    float peak = 0;
    int runs = 0;
    bool in_run = false;
    for (int64_t bin = 0; bin < 33; ++bin) {
      const float v = w.data<float>()[bin * 8 + band];
      EXPECT_GE(v, 0.f);
      EXPECT_LE(v, 1.f);
      peak = std::max(peak, v);
      if (v > 0 && !in_run) ++runs;
      in_run = v > 0;
    }
    EXPECT_EQ(peak, 1.f) << band;
    EXPECT_EQ(runs, 1) << band;
  }
}

// A corrupt model's sizes (2^20 bands of a 2^20-point DFT would be 2 TiB of weights) are refused
// with an error, not an allocation that takes the process down.
TEST(NewerOps, MelWeightMatrixRefusesAnImpossibleSize) {
  NodeCase nc("MelWeightMatrix", 17, 5);
  auto y = nc.run(cpu_reg(),
                  {Tensor::scalar<int64_t>(int64_t{1} << 20), Tensor::scalar<int64_t>(int64_t{1} << 20),
                   Tensor::scalar<int64_t>(16000), Tensor::scalar<float>(0.f), Tensor::scalar<float>(8000.f)},
                  1, std::vector<bool>(5, true));
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().to_string().find("too large"), std::string::npos) << y.status().to_string();
}

TEST(NewerOps, TensorScatterLinearAndCircular) {
  // Cache [2, 4, 1] (batch, sequence, head dim); two new positions per entry.
  const Tensor past = Tensor::from_vector<float>(Shape{2, 4, 1}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor upd = Tensor::from_vector<float>(Shape{2, 2, 1}, {-1, -2, -3, -4});
  const Tensor at = Tensor::from_vector<int64_t>(Shape{2}, {1, 3});
  NodeCase circular("TensorScatter", 24, 3);
  circular.s("mode", "circular");
  auto c = circular.run(cpu_reg(), {past, upd, at});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(values_of<float>((*c)[0]), (std::vector<float>{1, -1, -2, 4, -4, 6, 7, -3}));
  // Linear mode: the same write does not fit entry 1 (positions 3 and 4 of 4).
  EXPECT_FALSE(NodeCase("TensorScatter", 24, 3).run(cpu_reg(), {past, upd, at}).ok());
  auto l = NodeCase("TensorScatter", 24, 2).run(cpu_reg(), {past, upd});
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(values_of<float>((*l)[0]), (std::vector<float>{-1, -2, 3, 4, -3, -4, 7, 8}));
}

// output_shape one past the natural size: the spec's floor division puts the extra position at the
// end, where only the bias reaches.
TEST(NewerOps, ConvTransposeOutputShapePastNatural) {
  std::mt19937 rng(81);
  const Tensor x = random_tensor(Shape{1, 2, 3, 3}, rng), w = random_tensor(Shape{2, 1, 3, 3}, rng);
  const Tensor b = Tensor::from_vector<float>(Shape{1}, {0.25f});
  NodeCase natural("ConvTranspose", 11, 3), wider("ConvTranspose", 11, 3);
  natural.ints("strides", {2, 2});
  wider.ints("strides", {2, 2}).ints("output_shape", {8, 8});
  auto n = natural.run(cpu_reg(), {x, w, b});
  auto o = wider.run(cpu_reg(), {x, w, b});
  ASSERT_TRUE(n.ok() && o.ok()) << n.status().to_string() << o.status().to_string();
  ASSERT_EQ((*n)[0].shape(), (Shape{1, 1, 7, 7}));
  ASSERT_EQ((*o)[0].shape(), (Shape{1, 1, 8, 8}));
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 8; ++c) {
      const float got = (*o)[0].data<float>()[r * 8 + c];
      const float want = r < 7 && c < 7 ? (*n)[0].data<float>()[r * 7 + c] : 0.25f;
      EXPECT_NEAR(got, want, 1e-5) << r << "," << c;
    }
}

}  // namespace
}  // namespace streamline::ops::testing
