// The direct-loop pools: MaxPool/AveragePool of float64 and int8/uint8 against the float32 kernels
// on random windows, MaxPool's Indices, LpPool and GlobalLpPool against hand-computed values.

#include <cmath>

#include "ops/cpu/extra_common.h"
#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

Tensor converted(const Tensor& t, DType dt) {
  Tensor y = Tensor::empty(dt, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) cpu::store_f(dt, y.raw(), i, cpu::load_f(t.dtype(), t.raw(), i));
  return y;
}

TEST(DirectPool, OtherDtypesMatchTheFloat32Kernels) {
  std::mt19937 rng(61);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 24; ++iter) {
    const bool is_max = iter % 2 == 0;
    const int64_t kh = pick(1, 3), kw = pick(2, 3);
    NodeCase nc(is_max ? "MaxPool" : "AveragePool", 19, 1);
    nc.ints("kernel_shape", {kh, kw}).ints("strides", {pick(1, 2), pick(1, 2)});
    nc.ints("pads", {pick(0, kh - 1), pick(0, kw - 1), pick(0, kh - 1), pick(0, kw - 1)});
    nc.i("ceil_mode", iter % 3 == 0);
    if (iter % 4 == 2) nc.ints("dilations", {2, 1});
    if (!is_max) nc.i("count_include_pad", iter % 4 == 1);
    // Whole numbers keep int8/uint8 exact.
    Tensor x = Tensor::empty(DType::kFloat32, Shape{pick(1, 2), pick(1, 4), pick(5, 9), pick(5, 9)});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(pick(0, 100));
    auto want = nc.run(cpu_reg(), {x});
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    std::vector<DType> types{DType::kFloat64, DType::kFloat16};
    if (is_max) types.insert(types.end(), {DType::kInt8, DType::kUInt8});
    for (DType dt : types) {
      auto got = nc.run(cpu_reg(), {converted(x, dt)});
      ASSERT_TRUE(got.ok()) << dtype_name(dt) << ": " << got.status().to_string();
      EXPECT_TRUE(close_tensor(converted((*got)[0], DType::kFloat32), (*want)[0], dt == DType::kFloat16 ? 1e-3 : 1e-6))
          << "iter " << iter << " " << dtype_name(dt);
    }
  }
}

TEST(DirectPool, MaxPoolIndicesRowAndColumnMajor) {
  // One image, one channel, 3x4; 2x2 windows, stride 2.
  Tensor x = Tensor::from_vector<float>(Shape{1, 1, 3, 4}, {1, 9, 2, 3, 4, 5, 8, 7, 6, 0, 1, 2});
  for (int64_t order : {0, 1}) {
    NodeCase nc("MaxPool", 12, 1, 2);
    nc.ints("kernel_shape", {2, 2}).ints("strides", {2, 2}).i("storage_order", order).i("ceil_mode", 1);
    auto y = nc.run(cpu_reg(), {x});
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    ASSERT_EQ((*y)[0].shape(), (Shape{1, 1, 2, 2}));
    EXPECT_EQ((std::vector<float>((*y)[0].data<float>(), (*y)[0].data<float>() + 4)), (std::vector<float>{9, 8, 6, 2}));
    // Row-major positions (h, w): (0,1) (1,2) (2,0) (2,3); column-major index = w * H + h.
    const std::vector<int64_t> want =
        order == 0 ? std::vector<int64_t>{1, 6, 8, 11} : std::vector<int64_t>{3, 7, 2, 11};
    EXPECT_EQ((std::vector<int64_t>((*y)[1].data<int64_t>(), (*y)[1].data<int64_t>() + 4)), want) << order;
  }
}

// 8-bit MaxPool runs on the int8 kernel (qelementwise.cc) when 2-D without Indices; with Indices,
// or 1-D, it runs on these direct loops.
TEST(DirectPool, EightBitMaxPoolWithIndicesOrOneDimension) {
  for (DType dt : {DType::kUInt8, DType::kInt8}) {
    const Tensor x = converted(Tensor::from_vector<float>(Shape{1, 1, 3, 4}, {1, 9, 2, 3, 4, 5, 8, 7, 6, 0, 1, 2}), dt);
    NodeCase nc("MaxPool", 12, 1, 2);
    nc.ints("kernel_shape", {2, 2}).ints("strides", {2, 2}).i("ceil_mode", 1);
    auto y = nc.run(cpu_reg(), {x});
    ASSERT_TRUE(y.ok()) << dtype_name(dt) << ": " << y.status().to_string();
    ASSERT_EQ((*y)[0].dtype(), dt);
    const Tensor v = converted((*y)[0], DType::kFloat32);
    EXPECT_EQ((std::vector<float>(v.data<float>(), v.data<float>() + 4)), (std::vector<float>{9, 8, 6, 2}));
    EXPECT_EQ((std::vector<int64_t>((*y)[1].data<int64_t>(), (*y)[1].data<int64_t>() + 4)),
              (std::vector<int64_t>{1, 6, 8, 11}));

    NodeCase one("MaxPool", 12, 1);
    one.ints("kernel_shape", {2}).ints("strides", {2});
    auto z = one.run(cpu_reg(), {converted(Tensor::from_vector<float>(Shape{1, 1, 6}, {3, 1, 4, 1, 5, 9}), dt)});
    ASSERT_TRUE(z.ok()) << dtype_name(dt) << ": " << z.status().to_string();
    const Tensor w = converted((*z)[0], DType::kFloat32);
    EXPECT_EQ((std::vector<float>(w.data<float>(), w.data<float>() + 3)), (std::vector<float>{3, 4, 9}));
  }
}

TEST(DirectPool, LpPoolAndGlobalLpPool) {
  Tensor x = Tensor::from_vector<float>(Shape{1, 1, 3, 3}, {1, -2, 3, 4, 5, -6, 7, 8, 9});
  NodeCase p2("LpPool", 18, 1);
  p2.ints("kernel_shape", {2, 2}).i("p", 2);
  auto y = p2.run(cpu_reg(), {x});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ((*y)[0].shape(), (Shape{1, 1, 2, 2}));
  const float* v = (*y)[0].data<float>();
  EXPECT_NEAR(v[0], std::sqrt(1 + 4 + 16 + 25), 1e-5);
  EXPECT_NEAR(v[3], std::sqrt(25 + 36 + 64 + 81), 1e-5);
  // Opset 18: dilations and ceil_mode; p = 1 sums magnitudes; padding adds nothing.
  NodeCase p1("LpPool", 18, 1);
  p1.ints("kernel_shape", {2, 2}).ints("dilations", {2, 2}).ints("strides", {2, 2}).i("p", 1).i("ceil_mode", 1);
  auto z = p1.run(cpu_reg(), {x});
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  ASSERT_EQ((*z)[0].shape(), (Shape{1, 1, 1, 1}));
  EXPECT_NEAR((*z)[0].data<float>()[0], 1 + 3 + 7 + 9, 1e-5);
  // Before opset 18 those attributes do not exist.
  NodeCase old("LpPool", 11, 1);
  old.ints("kernel_shape", {2, 2}).ints("dilations", {2, 2});
  EXPECT_FALSE(old.run(cpu_reg(), {x}).ok());
  NodeCase global("GlobalLpPool", 2, 1);
  global.i("p", 3);
  auto g = global.run(cpu_reg(), {x});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  double s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += std::pow(std::fabs(x.data<float>()[i]), 3.0);
  EXPECT_NEAR((*g)[0].data<float>()[0], std::cbrt(s), 1e-4);
}

}  // namespace
}  // namespace streamline::ops::testing
