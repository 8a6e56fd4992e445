#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "core/dtype.h"
#include "core/layout_convert.h"
#include "core/npy.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace streamline {
namespace {

TEST(Shape, NumelStrideAndString) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.stride(0), 12);
  EXPECT_EQ(s.stride(2), 1);
  EXPECT_EQ(s.to_string(), "[2,3,4]");
  EXPECT_EQ(Shape{}.numel(), 1);
}

TEST(Shape, GrowsPastInlineRank) {
  Shape s;
  for (int i = 0; i < 11; ++i) s.push_back(i + 1);
  EXPECT_EQ(s.rank(), 11u);
  EXPECT_EQ(s[10], 11);
  Shape t = s;
  EXPECT_EQ(t, s);
  t[3] = 100;
  EXPECT_NE(t, s);
}

TEST(Shape, Broadcasting) {
  Shape out;
  ASSERT_TRUE(broadcast_shapes(Shape{8, 1, 6, 1}, Shape{7, 1, 5}, &out));
  EXPECT_EQ(out, (Shape{8, 7, 6, 5}));
  EXPECT_FALSE(broadcast_shapes(Shape{3}, Shape{4}, &out));
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_STREQ(dtype_name(DType::kBool), "bool");
  EXPECT_EQ(dtype_from_name("TYPE_FP32"), DType::kFloat32);
  EXPECT_EQ(dtype_from_name("INT64"), DType::kInt64);
  EXPECT_EQ(dtype_from_name("nope"), DType::kUndefined);
}

TEST(DType, HalfRoundTripsAndRoundsToNearestEven) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-60000.f, 60000.f);
  for (int i = 0; i < 10000; ++i) {
    const float x = d(rng);
    const float y = half_to_float(float_to_half(x));
    EXPECT_LE(std::fabs(x - y), std::fabs(x) * (1.0f / 1024) + 1e-7f) << x;
  }
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.f), 0x7bff);
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);  // overflow to inf
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp rounds to even (2)
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
}

TEST(Npy, RoundTripKeepsDtypeShapeAndData) {
  const auto dir = std::filesystem::temp_directory_path() / "sl_npy_test";
  std::filesystem::create_directories(dir);
  Tensor t = Tensor::from_vector<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  const std::string path = (dir / "a.npy").string();
  ASSERT_TRUE(write_npy(path, t).ok());
  auto r = read_npy(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), t.shape());
  EXPECT_EQ(r->dtype(), DType::kFloat32);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r->data<float>()[i], t.data<float>()[i]);
  Tensor i64 = Tensor::from_vector<int64_t>(Shape{4}, {1, -2, 3, 1000000000000});
  ASSERT_TRUE(write_npy(path, i64).ok());
  auto r2 = read_npy(path);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->data<int64_t>()[3], 1000000000000);
}

TEST(Npy, BadFilesGiveErrors) {
  EXPECT_EQ(read_npy("/nonexistent/file.npy").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(parse_npy("garbage").status().code(), StatusCode::kInvalidArgument);
  std::string truncated = "\x93NUMPY\x01\x00";
  truncated += std::string("\x20\x00", 2) + "{'descr': '<f4', 'fortran_order': False, 'shape': (10,), }";
  EXPECT_EQ(parse_npy(truncated).status().code(), StatusCode::kInvalidArgument);
}

TEST(LayoutConvert, RoundTrip) {
  Tensor t = Tensor::empty(DType::kFloat32, Shape{2, 3, 4, 5});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  auto cl = to_layout(t, Layout::kChannelsLast);
  ASSERT_TRUE(cl.ok());
  // Element (n=1, c=2, h=3, w=4) lives at ((n*H + h)*W + w)*C + c in NHWC.
  EXPECT_EQ(cl->data<float>()[((1 * 4 + 3) * 5 + 4) * 3 + 2], t.data<float>()[((1 * 3 + 2) * 4 + 3) * 5 + 4]);
  auto back = to_layout(*cl, Layout::kPlain);
  ASSERT_TRUE(back.ok());
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(back->data<float>()[i], t.data<float>()[i]);
  EXPECT_FALSE(to_layout(Tensor::empty(DType::kFloat32, Shape{3, 4}), Layout::kChannelsLast).ok());
}

}  // namespace
}  // namespace streamline
