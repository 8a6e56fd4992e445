// CumSum, CumProd, TopK, Det, Shrink, ReverseSequence and MaxUnpool: the CPU kernels against the reference
// on random shapes (fixed seed), plus corner cases by hand.

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

Tensor small_i32(const Shape& s, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::kInt32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(rng() % 200) - 100;
  return t;
}

TEST(MiscOps, CumSumMatchesReference) {
  std::mt19937 rng(901);
  for (int iter = 0; iter < 24; ++iter) {
    const Shape s = random_shape(rng, 1, 4, 5);
    const int64_t rank = static_cast<int64_t>(s.rank());
    const int64_t axis = std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng);
    NodeCase nc("CumSum", 14, 2);
    nc.i("exclusive", iter % 2).i("reverse", (iter / 2) % 2);
    Tensor x = iter % 3 == 0 ? small_i32(s, rng) : random_tensor(s, rng);
    Tensor ax = iter % 2 ? Tensor::scalar<int64_t>(axis) : Tensor::scalar<int32_t>(static_cast<int32_t>(axis));
    expect_cpu_matches_reference(nc, {x, ax}, 1e-5, "CumSum " + s.to_string());
  }
}

// CumProd (opset 26) is CumSum's kernel with products: checked against CumSum of logarithms on
// positive inputs, and by hand for exclusive/reverse and integer wrap-around.
TEST(MiscOps, CumProd) {
  std::mt19937 rng(903);
  for (int iter = 0; iter < 8; ++iter) {
    const Shape s = random_shape(rng, 1, 3, 5);
    const int64_t rank = static_cast<int64_t>(s.rank());
    const Tensor ax = Tensor::scalar<int64_t>(std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng));
    Tensor x = random_tensor(s, rng, 0.5f, 2.f), logs = Tensor::empty(DType::kFloat32, s);
    for (int64_t i = 0; i < x.numel(); ++i) logs.data<float>()[i] = std::log(x.data<float>()[i]);
    NodeCase prod("CumProd", 26, 2), sum("CumSum", 14, 2);
    prod.i("exclusive", iter % 2).i("reverse", (iter / 2) % 2);
    sum.i("exclusive", iter % 2).i("reverse", (iter / 2) % 2);
    auto p = prod.run(cpu_reg(), {x, ax});
    auto q = sum.run(cpu_reg(), {logs, ax});
    ASSERT_TRUE(p.ok() && q.ok()) << p.status().to_string();
    for (int64_t i = 0; i < x.numel(); ++i)
      EXPECT_NEAR(std::log((*p)[0].data<float>()[i]), (*q)[0].data<float>()[i], 1e-5) << iter;
  }
  const Tensor v = Tensor::from_vector<int32_t>(Shape{4}, {2, 3, 4, 5});
  NodeCase excl("CumProd", 26, 2);
  excl.i("exclusive", 1).i("reverse", 1);
  auto e = excl.run(cpu_reg(), {v, Tensor::scalar<int32_t>(0)});
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ((std::vector<int32_t>((*e)[0].data<int32_t>(), (*e)[0].data<int32_t>() + 4)),
            (std::vector<int32_t>{60, 20, 5, 1}));
  const Tensor big = Tensor::from_vector<int32_t>(Shape{2}, {65536, 65536});
  auto w = NodeCase("CumProd", 26, 2).run(cpu_reg(), {big, Tensor::scalar<int64_t>(0)});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)[0].data<int32_t>()[1], 0);  // 2^32 wraps
}

TEST(MiscOps, TopKMatchesReferenceWithConstantK) {
  std::mt19937 rng(902);
  for (int iter = 0; iter < 24; ++iter) {
    const Shape s = random_shape(rng, 1, 4, 6);
    const int64_t rank = static_cast<int64_t>(s.rank());
    const int64_t axis = std::uniform_int_distribution<int64_t>(-rank, rank - 1)(rng);
    const int64_t len = s[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
    const int64_t k = std::uniform_int_distribution<int64_t>(0, len)(rng);
    Tensor x = random_tensor(s, rng);
    // Ties: round to a coarse grid so equal values appear.
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::round(x.data<float>()[i] * 3.f);
    NodeCase nc("TopK", 11, 2, 2);
    nc.i("axis", axis).i("largest", iter % 2);
    expect_cpu_matches_reference(nc, {x, i64({k})}, 0.0, "TopK " + s.to_string(), 1, {false, true});
  }
}

TEST(MiscOps, TopKNeedsConstantK) {
  std::mt19937 rng(903);
  NodeCase nc("TopK", 11, 2, 2);
  auto out = nc.run(cpu_reg(), {random_tensor(Shape{3, 4}, rng), i64({2})}, 1, {false, false});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnsupported);
}

TEST(MiscOps, DetMatchesReference) {
  std::mt19937 rng(904);
  for (int iter = 0; iter < 12; ++iter) {
    const int64_t m = 1 + iter % 5;
    Shape s = iter % 2 ? Shape{2, 3, m, m} : Shape{m, m};
    NodeCase nc("Det", 11, 1);
    expect_cpu_matches_reference(nc, {random_tensor(s, rng)}, 1e-4, "Det " + s.to_string());
  }
  NodeCase singular("Det", 11, 1);
  auto out = singular.run(cpu_reg(), {Tensor::from_vector<float>(Shape{2, 2}, {1, 2, 2, 4})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].data<float>()[0], 0.f);
}

TEST(MiscOps, ShrinkAndReverseSequenceMatchReference) {
  std::mt19937 rng(905);
  for (int iter = 0; iter < 12; ++iter) {
    NodeCase sh("Shrink", 9, 1);
    sh.f("lambd", 0.3f).f("bias", iter % 2 ? 0.1f : 0.f);
    expect_cpu_matches_reference(sh, {random_tensor(random_shape(rng, 1, 3, 5), rng)}, 0.0, "Shrink");
    const int64_t batch_axis = iter % 2, time_axis = 1 - batch_axis;
    const int64_t batch = 1 + rng() % 4, steps = 1 + rng() % 5;
    Shape s = batch_axis == 0 ? Shape{batch, steps} : Shape{steps, batch};
    if (iter % 3 == 0) s.push_back(3);
    Tensor lens = uniform_i64(Shape{batch}, rng, 0, steps);
    NodeCase rs("ReverseSequence", 10, 2);
    rs.i("batch_axis", batch_axis).i("time_axis", time_axis);
    expect_cpu_matches_reference(rs, {random_full(iter % 2 ? DType::kInt64 : DType::kFloat32, s, rng), lens}, 0.0,
                                 "ReverseSequence " + s.to_string());
  }
}

TEST(MiscOps, MaxUnpoolMatchesReference) {
  std::mt19937 rng(906);
  for (int iter = 0; iter < 8; ++iter) {
    const int64_t h = 1 + rng() % 3, w = 1 + rng() % 3;
    Tensor x = random_tensor(Shape{1, 2, h, w}, rng);
    const int64_t oh = 2 * h, ow = 2 * w;
    Tensor idx = Tensor::empty(DType::kInt64, x.shape());
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j)
          idx.data<int64_t>()[(c * h + i) * w + j] = (c * oh + 2 * i + rng() % 2) * ow + 2 * j + rng() % 2;
    NodeCase nc("MaxUnpool", 11, 2);
    nc.ints("kernel_shape", {2, 2}).ints("strides", {2, 2});
    expect_cpu_matches_reference(nc, {x, idx}, 0.0, "MaxUnpool");
  }
}

}  // namespace
}  // namespace streamline::ops::testing
