// Opset 18-20 geometry operators: CenterCropPad, Col2Im, DeformConv, AffineGrid and volumetric
// GridSample, each against an identity it must satisfy or values computed by hand.

#include "ops/cpu/extra_common.h"
#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

TEST(GeometryOps, CenterCropPadCropsAndPadsCentred) {
  Tensor x = Tensor::empty(DType::kFloat32, Shape{5, 4});
  for (int64_t i = 0; i < 20; ++i) x.data<float>()[i] = static_cast<float>(i);
  // Axis 0: 5 -> 2 drops 1 row before and 2 after; axis 1: 4 -> 7 adds 1 column before and 2 after.
  auto y = NodeCase("CenterCropPad", 18, 2)
               .run(cpu_reg(), {x, Tensor::from_vector<int64_t>(Shape{2}, {2, 7})}, 1, {false, true});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ((*y)[0].shape(), (Shape{2, 7}));
  const std::vector<float> want{0, 4, 5, 6, 7, 0, 0, 0, 8, 9, 10, 11, 0, 0};
  EXPECT_EQ(std::vector<float>((*y)[0].data<float>(), (*y)[0].data<float>() + 14), want);
  // Only the listed axes change.
  NodeCase one("CenterCropPad", 18, 2);
  one.ints("axes", {-1});
  auto z = one.run(cpu_reg(), {x, Tensor::from_vector<int64_t>(Shape{1}, {2})}, 1, {false, true});
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  ASSERT_EQ((*z)[0].shape(), (Shape{5, 2}));
  EXPECT_EQ((*z)[0].data<float>()[0], 1.f);
  EXPECT_EQ((*z)[0].data<float>()[9], 18.f);
}

// Blocks that tile the image exactly put every value back; with stride 1 each pixel is the sum
// of the blocks covering it.
TEST(GeometryOps, Col2ImRebuildsTheImage) {
  const int64_t c = 2, h = 4, w = 6;
  Tensor img = Tensor::empty(DType::kFloat32, Shape{1, c, h, w});
  for (int64_t i = 0; i < img.numel(); ++i) img.data<float>()[i] = static_cast<float>(i % 17) - 8.f;
  // Im2Col with 2x3 blocks and strides 2x3: L = 2 * 2 blocks, rows (channel, ky, kx).
  Tensor cols = Tensor::empty(DType::kFloat32, Shape{1, c * 6, 4});
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t t = 0; t < 6; ++t)
      for (int64_t l = 0; l < 4; ++l) {
        const int64_t y = (l / 2) * 2 + t / 3, x = (l % 2) * 3 + t % 3;
        cols.data<float>()[(ch * 6 + t) * 4 + l] = img.data<float>()[(ch * h + y) * w + x];
      }
  NodeCase nc("Col2Im", 18, 3);
  nc.ints("strides", {2, 3});
  auto r = nc.run(
      cpu_reg(), {cols, Tensor::from_vector<int64_t>(Shape{2}, {h, w}), Tensor::from_vector<int64_t>(Shape{2}, {2, 3})},
      1, {false, true, true});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(close_tensor((*r)[0], img, 0));
  // 1-D, stride 1, blocks of 2 over 3 positions: ones everywhere count the covering blocks.
  Tensor ones = Tensor::from_vector<float>(Shape{1, 2, 2}, {1, 1, 1, 1});
  auto o = NodeCase("Col2Im", 18, 3)
               .run(cpu_reg(),
                    {ones, Tensor::from_vector<int64_t>(Shape{1}, {3}), Tensor::from_vector<int64_t>(Shape{1}, {2})}, 1,
                    {false, true, true});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(std::vector<float>((*o)[0].data<float>(), (*o)[0].data<float>() + 3), (std::vector<float>{1, 2, 1}));
}

// Zero offsets and a mask of ones make DeformConv an ordinary (grouped) convolution.
TEST(GeometryOps, DeformConvWithZeroOffsetsIsConv) {
  std::mt19937 rng(71);
  for (int64_t group : {1, 2}) {
    const Tensor x = random_tensor(Shape{2, 4, 7, 6}, rng);
    const Tensor w = random_tensor(Shape{6, 4 / group, 3, 2}, rng);
    const Tensor b = random_tensor(Shape{6}, rng);
    const int64_t oh = (7 + 2 - 3) / 2 + 1, ow = (6 + 0 - 2) / 1 + 1;
    const Tensor offset = Tensor::empty(DType::kFloat32, Shape{2, 2 * 2 * 6, oh, ow});
    Tensor mask = Tensor::empty(DType::kFloat32, Shape{2, 2 * 6, oh, ow});
    for (int64_t i = 0; i < mask.numel(); ++i) mask.data<float>()[i] = 1.f;
    NodeCase deform("DeformConv", 19, 5), conv("Conv", 11, 3);
    for (NodeCase* nc : {&deform, &conv}) nc->ints("strides", {2, 1}).ints("pads", {1, 0, 1, 0}).i("group", group);
    deform.i("offset_group", 2);
    auto got = deform.run(cpu_reg(), {x, w, offset, b, mask});
    auto want = conv.run(cpu_reg(), {x, w, b});
    ASSERT_TRUE(got.ok() && want.ok()) << got.status().to_string() << want.status().to_string();
    EXPECT_TRUE(close_tensor((*got)[0], (*want)[0], 1e-5)) << "group " << group;
  }
  // A whole-pixel offset shifts the sampled image: dx = 1 on a 1x1 kernel reads the right neighbour.
  const Tensor x = Tensor::from_vector<float>(Shape{1, 1, 1, 3}, {1, 2, 3});
  const Tensor w = Tensor::from_vector<float>(Shape{1, 1, 1, 1}, {1});
  const Tensor off = Tensor::from_vector<float>(Shape{1, 2, 1, 3}, {0, 0, 0, 1, 1, 1});
  auto s = NodeCase("DeformConv", 19, 3).run(cpu_reg(), {x, w, off});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(std::vector<float>((*s)[0].data<float>(), (*s)[0].data<float>() + 3), (std::vector<float>{2, 3, 0}));
}

// The identity theta makes the base grid; sampling through it with align_corners returns X, in
// 2-D and (GridSample-20) 3-D.
TEST(GeometryOps, AffineGridIdentityThroughGridSample) {
  std::mt19937 rng(72);
  for (bool three_d : {false, true}) {
    const Shape xs = three_d ? Shape{1, 2, 3, 4, 5} : Shape{1, 2, 4, 5};
    const Tensor x = random_tensor(xs, rng);
    Tensor theta = three_d ? Tensor::from_vector<float>(Shape{1, 3, 4}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0})
                           : Tensor::from_vector<float>(Shape{1, 2, 3}, {1, 0, 0, 0, 1, 0});
    NodeCase affine("AffineGrid", 20, 2);
    affine.i("align_corners", 1);
    auto grid = affine.run(
        cpu_reg(), {theta, Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(xs.rank())}, xs.to_vector())}, 1,
        {false, true});
    ASSERT_TRUE(grid.ok()) << grid.status().to_string();
    EXPECT_EQ((*grid)[0].data<float>()[0], -1.f);
    for (const char* mode : {"linear", "nearest"}) {
      NodeCase sample("GridSample", 20, 2);
      sample.i("align_corners", 1).s("mode", mode);
      auto y = sample.run(cpu_reg(), {x, (*grid)[0]});
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      EXPECT_TRUE(close_tensor((*y)[0], x, 1e-5)) << mode << (three_d ? " 3-D" : " 2-D");
    }
  }
  // Without align_corners the base coordinates are pixel centres: (2i + 1) / n - 1.
  auto g = NodeCase("AffineGrid", 20, 2)
               .run(cpu_reg(),
                    {Tensor::from_vector<float>(Shape{1, 2, 3}, {1, 0, 0, 0, 1, 0}),
                     Tensor::from_vector<int64_t>(Shape{4}, {1, 1, 1, 2})},
                    1, {false, true});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(std::vector<float>((*g)[0].data<float>(), (*g)[0].data<float>() + 4),
            (std::vector<float>{-0.5f, 0.f, 0.5f, 0.f}));
  // 5-D input needs GridSample-20.
  NodeCase old("GridSample", 16, 2);
  EXPECT_FALSE(
      old.run(cpu_reg(), {random_tensor(Shape{1, 1, 2, 2, 2}, rng), random_tensor(Shape{1, 1, 1, 1, 3}, rng)}).ok());
}

}  // namespace
}  // namespace streamline::ops::testing
